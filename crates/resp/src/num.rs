//! Number conversions with Redis's exact rules.

/// Parses a signed 64-bit integer the way Redis's `string2ll` does: no
/// leading `+`, no spaces, no leading zeros (except `0` itself), no `-0`
/// special-casing beyond what `string2ll` accepts, at most 20 characters.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let len = s.len();
    if len == 0 || len > 20 {
        return None;
    }
    if len == 1 && s[0] == b'0' {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    // First digit must be 1-9 (no leading zeros, no empty "-").
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Parses an unsigned 64-bit integer with the same strictness as [`parse_i64`].
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    if !matches!(s[0], b'1'..=b'9') {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(v)
}

/// Formats a double as Redis 7.0 does for replies (`%.17g`, `inf`, `-inf`,
/// `nan`). Returns the number of bytes written into `buf`.
pub fn fmt_double(v: f64, buf: &mut [u8; 64]) -> usize {
    if v.is_infinite() {
        let s: &[u8] = if v > 0.0 { b"inf" } else { b"-inf" };
        buf[..s.len()].copy_from_slice(s);
        return s.len();
    }
    if v.is_nan() {
        buf[..3].copy_from_slice(b"nan");
        return 3;
    }
    // Integral scores are the common case (counters, timestamps, ranks):
    // below 1e15 `%.17g` prints exactly their decimal digits, so skip the
    // much slower libc formatting. (-0.0 prints "-0": not taken here.)
    if v.fract() == 0.0 && v.abs() < 1e15 && !(v == 0.0 && v.is_sign_negative()) {
        return fmt_i64(v as i64, buf);
    }
    snprintf_g17(v, buf)
}

/// Decimal digits of `i` into `buf`; returns the length.
fn fmt_i64(i: i64, buf: &mut [u8; 64]) -> usize {
    let mut tmp = [0u8; 20];
    let mut n = i.unsigned_abs();
    let mut at = tmp.len();
    loop {
        at -= 1;
        tmp[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut len = 0;
    if i < 0 {
        buf[0] = b'-';
        len = 1;
    }
    let digits = &tmp[at..];
    buf[len..len + digits.len()].copy_from_slice(digits);
    len + digits.len()
}

/// `%.17g` through libc.
fn snprintf_g17(v: f64, buf: &mut [u8; 64]) -> usize {
    // SAFETY: buf is 64 bytes, snprintf writes at most that many including
    // the NUL; the format takes exactly one double.
    let n = unsafe { libc_snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), v) };
    n.clamp(0, 63) as usize
}

extern "C" {
    #[link_name = "snprintf"]
    fn libc_snprintf(
        s: *mut std::ffi::c_char,
        n: usize,
        fmt: *const std::ffi::c_char,
        ...
    ) -> std::ffi::c_int;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"1a"), None);
    }

    /// The integral fast path agrees with libc's `%.17g` on its whole
    /// domain's edges and on random values.
    #[test]
    fn integral_fast_path_matches_printf() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut cases: Vec<f64> =
            vec![0.0, 1.0, -1.0, 9.0, 10.0, 1e14, 999_999_999_999_999.0, -999_999_999_999_999.0];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 16) as u32;
            let v = (x >> 8) % 10u64.pow(digits).max(1);
            cases.push(if x & 1 == 0 { v as f64 } else { -(v as f64) });
        }
        for v in cases {
            let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
            let n = fmt_double(v, &mut a);
            let m = snprintf_g17(v, &mut b);
            assert_eq!(&a[..n], &b[..m], "{v}");
        }
    }

    #[test]
    fn doubles_print_like_redis_7_0() {
        let mut b = [0u8; 64];
        let n = fmt_double(0.1, &mut b);
        assert_eq!(&b[..n], b"0.10000000000000001");
        let n = fmt_double(3.0, &mut b);
        assert_eq!(&b[..n], b"3");
        let n = fmt_double(f64::NEG_INFINITY, &mut b);
        assert_eq!(&b[..n], b"-inf");
        let n = fmt_double(1e300, &mut b);
        assert_eq!(&b[..n], b"1.0000000000000001e+300");
    }
}
