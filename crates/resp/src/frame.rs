//! An owned RESP2/RESP3 value and its parser, for clients and tests.
//!
//! The server never builds frames for requests (see `parse`); this is the
//! reply side, used by the client library and by the test harnesses.

use memchr::memchr;

use crate::num::parse_i64;

/// One RESP value.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    /// `$-1` is `Bulk(None)`.
    Bulk(Option<Vec<u8>>),
    /// `*-1` is `Array(None)`.
    Array(Option<Vec<Frame>>),
    /// RESP3 `_`.
    Null,
    Double(f64),
    Boolean(bool),
    BigNumber(Vec<u8>),
    /// Format (e.g. `txt`) and text.
    Verbatim(Vec<u8>, Vec<u8>),
    Map(Vec<(Frame, Frame)>),
    Set(Vec<Frame>),
    Push(Vec<Frame>),
    Attribute(Vec<(Frame, Frame)>),
}

/// The bytes are not RESP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError(pub String);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid RESP: {}", self.0)
    }
}

impl std::error::Error for FrameError {}

const MAX_DEPTH: usize = 64;

/// Parses one frame from the start of `buf`: `Ok(Some((frame, used)))`,
/// `Ok(None)` when incomplete.
pub fn parse_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    parse_at(buf, 0, 0)
}

fn line(buf: &[u8], pos: usize) -> Result<Option<(&[u8], usize)>, FrameError> {
    match memchr(b'\n', &buf[pos..]) {
        None => Ok(None),
        Some(i) => {
            let end = pos + i;
            if end == pos || buf[end - 1] != b'\r' {
                return Err(FrameError("line not ended by CRLF".into()));
            }
            Ok(Some((&buf[pos..end - 1], end + 1)))
        }
    }
}

fn int_of(s: &[u8]) -> Result<i64, FrameError> {
    parse_i64(s).ok_or_else(|| FrameError(format!("bad integer {:?}", String::from_utf8_lossy(s))))
}

fn parse_at(buf: &[u8], pos: usize, depth: usize) -> Result<Option<(Frame, usize)>, FrameError> {
    if depth > MAX_DEPTH {
        return Err(FrameError("nesting too deep".into()));
    }
    let Some(&tag) = buf.get(pos) else { return Ok(None) };
    let Some((body, next)) = line(buf, pos + 1)? else { return Ok(None) };
    let agg = |n: i64, pairs: bool| -> Result<Option<(Vec<Frame>, usize)>, FrameError> {
        let count = if pairs { n * 2 } else { n };
        let mut items = Vec::with_capacity((count.max(0) as usize).min(4096));
        let mut p = next;
        for _ in 0..count {
            match parse_at(buf, p, depth + 1)? {
                None => return Ok(None),
                Some((f, np)) => {
                    items.push(f);
                    p = np;
                }
            }
        }
        Ok(Some((items, p)))
    };
    let pairs = |v: Vec<Frame>| -> Vec<(Frame, Frame)> {
        let mut out = Vec::with_capacity(v.len() / 2);
        let mut it = v.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            out.push((k, v));
        }
        out
    };
    Ok(Some(match tag {
        b'+' => (Frame::Simple(body.to_vec()), next),
        b'-' => (Frame::Error(body.to_vec()), next),
        b':' => (Frame::Integer(int_of(body)?), next),
        b'_' => (Frame::Null, next),
        b'#' => (Frame::Boolean(body == b"t"), next),
        b'(' => (Frame::BigNumber(body.to_vec()), next),
        b',' => {
            let s = std::str::from_utf8(body).map_err(|_| FrameError("bad double".into()))?;
            let v = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => s.parse().map_err(|_| FrameError(format!("bad double {s}")))?,
            };
            (Frame::Double(v), next)
        }
        b'$' | b'=' | b'!' => {
            let n = int_of(body)?;
            if n < 0 {
                return Ok(Some((Frame::Bulk(None), next)));
            }
            let end = next + n as usize;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(FrameError("bulk not ended by CRLF".into()));
            }
            let data = buf[next..end].to_vec();
            let f = match tag {
                b'$' => Frame::Bulk(Some(data)),
                b'!' => Frame::Error(data),
                _ => {
                    if data.len() < 4 || data[3] != b':' {
                        return Err(FrameError("bad verbatim string".into()));
                    }
                    Frame::Verbatim(data[..3].to_vec(), data[4..].to_vec())
                }
            };
            (f, end + 2)
        }
        b'*' | b'~' | b'>' => {
            let n = int_of(body)?;
            if n < 0 {
                return Ok(Some((Frame::Array(None), next)));
            }
            let Some((items, p)) = agg(n, false)? else { return Ok(None) };
            let f = match tag {
                b'*' => Frame::Array(Some(items)),
                b'~' => Frame::Set(items),
                _ => Frame::Push(items),
            };
            (f, p)
        }
        b'%' | b'|' => {
            let n = int_of(body)?;
            let Some((items, p)) = agg(n, true)? else { return Ok(None) };
            let f =
                if tag == b'%' { Frame::Map(pairs(items)) } else { Frame::Attribute(pairs(items)) };
            (f, p)
        }
        other => return Err(FrameError(format!("unknown type byte {other:#04x}"))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_and_incomplete() {
        let b = b"*2\r\n$1\r\na\r\n%1\r\n+k\r\n:3\r\n";
        let (f, n) = parse_frame(b).unwrap().unwrap();
        assert_eq!(n, b.len());
        assert_eq!(
            f,
            Frame::Array(Some(vec![
                Frame::Bulk(Some(b"a".to_vec())),
                Frame::Map(vec![(Frame::Simple(b"k".to_vec()), Frame::Integer(3))])
            ]))
        );
        for cut in 0..b.len() {
            assert_eq!(parse_frame(&b[..cut]).unwrap(), None);
        }
    }
}
