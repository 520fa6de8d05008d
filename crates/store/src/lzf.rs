//! LZF, the compression RDB strings use (here, below both the RDB codec in
//! `persist` and DEBUG OBJECT's `serializedlength` in the engine, so that
//! there is one): a decompressor that validates
//! every back reference and length, and a compressor that makes the same
//! choices as the liblzf 3.6 build inside Redis 7.0 (16-bit hash table,
//! "very fast" mode, and no `ip + 4 < in_end` guard: later liblzf versions
//! added it, and a match in the last four bytes is what 7.0.15 writes), so
//! that a DUMP payload of a compressible value is byte-identical to
//! Redis's (tests/rdb.rs compares them).
//!
//! Ours, not a crate's: the one LZF crate (`lzf` 1.0) is deprecated by its
//! author and keeps that `+ 4 < in_len` guard, so its output differs from
//! Redis 7.0's for a match in the last four bytes.
//!
//! Format: `000LLLLL` + L+1 literal bytes; `LLLooooo oooooooo` a back
//! reference of L+2 bytes at distance o+1; `111ooooo LLLLLLLL oooooooo` a
//! back reference of L+9 bytes.

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

#[inline]
fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// Compresses `input` into at most `out_len` bytes; `None` when it does
/// not fit (Redis then stores the string as it is).
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    // Positions + 1 (0 = empty slot): Redis's table starts as whatever the
    // stack held, but a slot only counts when it points inside the input.
    let mut htab = vec![0u32; HSIZE];
    let mut out = vec![0u8; out_len + 4];
    let ip_end = in_len;
    let mut ip = 0usize;
    let mut op = 1usize; // start run
    let mut lit = 0usize;
    let at = |p: usize| u32::from(input[p]);
    let mut hval: u32 = (at(0) << 8) | if in_len > 1 { at(1) } else { 0 };
    while ip + 2 < ip_end {
        hval = (hval << 8) | at(ip + 2);
        let slot = idx(hval);
        let r = htab[slot];
        htab[slot] = ip as u32 + 1;
        let matched = r != 0 && {
            let rf = r as usize - 1;
            rf < ip
                && ip - rf - 1 < MAX_OFF
                && rf > 0
                && input[rf] == input[ip]
                && input[rf + 1] == input[ip + 1]
                && input[rf + 2] == input[ip + 2]
        };
        if matched {
            let rf = r as usize - 1;
            let off = ip - rf - 1;
            let mut len = 2usize;
            let maxlen = (ip_end - ip - len).min(MAX_REF);
            // Stop the literal run (undo it when empty).
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            if lit == 0 {
                op -= 1;
            }
            if op + 3 + 1 >= out_len {
                return None;
            }
            let mut done = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[rf + len] != input[ip + len] {
                        done = true;
                        break;
                    }
                }
            }
            if !done {
                loop {
                    len += 1;
                    if !(len < maxlen && input[rf + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1; // start run
            ip += len + 1;
            if ip + 2 >= ip_end {
                break;
            }
            ip -= 2;
            hval = (at(ip) << 8) | at(ip + 1);
            hval = (hval << 8) | at(ip + 2);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
            hval = (hval << 8) | at(ip + 2);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < ip_end {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    if lit == 0 {
        op -= 1;
    }
    out.truncate(op);
    Some(out)
}

/// Decompresses `input`, which must expand to exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    // The declared length comes from untrusted bytes: reserve what the
    // input can plausibly produce and grow with what it really does.
    let mut out = Vec::with_capacity(out_len.min(input.len().saturating_mul(4)));
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            if ip + n > input.len() || out.len() + n > out_len {
                return None;
            }
            out.extend_from_slice(&input[ip..ip + n]);
            ip += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip)?);
                ip += 1;
            }
            let lo = usize::from(*input.get(ip)?);
            ip += 1;
            let back = ((ctrl & 0x1f) << 8) + lo + 1;
            len += 2;
            if back > out.len() || out.len() + len > out_len {
                return None;
            }
            let start = out.len() - back;
            for k in 0..len {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let cases: Vec<Vec<u8>> = vec![
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            b"hello hello hello hello hello hello world world world".to_vec(),
            (0..5000u32).map(|i| (i % 251) as u8).collect(),
            (0..70000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 & 7).collect(),
        ];
        for c in cases {
            let z = compress(&c, c.len() - 4).expect("compressible");
            assert!(z.len() < c.len());
            assert_eq!(decompress(&z, c.len()).unwrap(), c);
        }
    }

    #[test]
    fn incompressible_is_refused_and_bad_input_is_an_error() {
        let c: Vec<u8> = (0..64u32).map(|i| (i.wrapping_mul(2654435761) >> 7) as u8).collect();
        assert!(compress(&c, c.len() - 4).is_none());
        assert!(decompress(&[0x20, 0x00], 3).is_none()); // reference before the start
        assert!(decompress(&[0x05, b'a'], 6).is_none()); // truncated literal
        assert!(decompress(&[0x00, b'a'], 2).is_none()); // short output
    }
}
