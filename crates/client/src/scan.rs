//! Finding where a reply ends without building it, so that a load generator
//! can count replies at wire speed.

use crate::error::{Error, Result};

/// The length of the first complete reply in `buf` and whether it is an
/// error reply; `Ok(None)` when `buf` holds only part of it.
pub fn reply_len(buf: &[u8]) -> Result<Option<(usize, bool)>> {
    let is_err = matches!(buf.first(), Some(b'-') | Some(b'!'));
    // Elements still to read; aggregates add their children.
    let mut pending: u64 = 1;
    let mut pos = 0;
    while pending > 0 {
        let Some(&tag) = buf.get(pos) else { return Ok(None) };
        let Some(nl) = memchr_nl(&buf[pos + 1..]) else { return Ok(None) };
        let line = &buf[pos + 1..pos + 1 + nl];
        let line = line.strip_suffix(b"\r").ok_or_else(|| proto("line not ended by CRLF"))?;
        pos += 1 + nl + 1;
        pending -= 1;
        match tag {
            b'+' | b'-' | b':' | b'_' | b'#' | b'(' | b',' => {}
            b'$' | b'=' | b'!' => {
                let n = int(line)?;
                if n >= 0 {
                    let end = pos + n as usize + 2;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    pos = end;
                }
            }
            b'*' | b'~' | b'>' => pending += int(line)?.max(0) as u64,
            b'%' | b'|' => pending += 2 * int(line)?.max(0) as u64,
            t => return Err(proto(&format!("unknown type byte {t:#04x}"))),
        }
    }
    Ok(Some((pos, is_err)))
}

fn memchr_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

fn int(s: &[u8]) -> Result<i64> {
    resp::parse_i64(s).ok_or_else(|| proto("bad length"))
}

fn proto(m: &str) -> Error {
    Error::Protocol(m.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_of_nested_and_partial_replies() {
        let b = b"*3\r\n$1\r\na\r\n%1\r\n+k\r\n:3\r\n$-1\r\n+OK\r\n";
        let first = b.len() - 5;
        assert_eq!(reply_len(b).unwrap(), Some((first, false)));
        for cut in 0..first {
            assert_eq!(reply_len(&b[..cut]).unwrap(), None, "cut {cut}");
        }
        assert_eq!(reply_len(b"-ERR x\r\n").unwrap(), Some((8, true)));
        assert!(reply_len(b"?\r\n").is_err());
    }
}
