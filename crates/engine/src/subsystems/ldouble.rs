//! 80-bit `long double` arithmetic for INCRBYFLOAT and HINCRBYFLOAT, done by
//! the C shim in `csrc/longdouble.c` so results match Redis on x86-64 to the
//! last digit (`10.5 + 0.1` is `10.6`, not `10.59999…`).

use std::ffi::{c_char, c_int};

/// Room for any formatted result (Redis's `MAX_LONG_DOUBLE_CHARS`).
pub const LD_BUF: usize = 5 * 1024;

/// Why an increment failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LdError {
    /// The current value is not a float (Redis's `string2ld` failed).
    BadCurrent,
    /// The increment is not a float.
    BadIncr,
    /// The sum is NaN or infinite.
    NotFinite,
}

extern "C" {
    fn sluice_timeout_ms(s: *const c_char, len: usize, ms: *mut i64) -> c_int;
    fn sluice_ld_check(s: *const c_char, len: usize) -> c_int;
    fn sluice_ld_format_double(v: f64, out: *mut c_char, outlen: usize) -> c_int;
    fn sluice_incrbyfloat(
        cur: *const c_char,
        curlen: usize,
        incr: *const c_char,
        incrlen: usize,
        out: *mut c_char,
        outlen: usize,
    ) -> c_int;
}

/// Parses `s` as Redis's `string2ld` would: `None` if it is not a valid
/// float, else whether it is finite (`inf` parses; `nan` does not).
pub fn check(s: &[u8]) -> Option<bool> {
    // SAFETY: the shim reads exactly `len` bytes of `s` and keeps no pointer.
    match unsafe { sluice_ld_check(s.as_ptr().cast(), s.len()) } {
        1 => Some(true),
        0 => Some(false),
        _ => None,
    }
}

/// A timeout given in seconds converted to milliseconds as Redis 7.0 does
/// (`long double` times 1000, rounded up; out-of-range values, `inf`
/// included, come out as `i64::MIN`). `None` if `s` is not a float.
pub fn timeout_ms(s: &[u8]) -> Option<i64> {
    let mut ms = 0i64;
    // SAFETY: the shim reads exactly `len` bytes of `s` and writes one i64.
    let rc = unsafe { sluice_timeout_ms(s.as_ptr().cast(), s.len(), &mut ms) };
    (rc == 0).then_some(ms)
}

/// `cur + incr` in `long double` (a missing `cur` counts as 0), written to
/// `out` as Redis's `ld2string(LD_STR_HUMAN)` does. Returns the length.
pub fn incr_by(cur: Option<&[u8]>, incr: &[u8], out: &mut [u8; LD_BUF]) -> Result<usize, LdError> {
    let (cp, cl) = match cur {
        Some(c) => (c.as_ptr(), c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: inputs are read for their given lengths only; the shim writes
    // at most `out.len()` bytes into `out` and returns how many it wrote.
    let n = unsafe {
        sluice_incrbyfloat(
            cp.cast(),
            cl,
            incr.as_ptr().cast(),
            incr.len(),
            out.as_mut_ptr().cast(),
            out.len(),
        )
    };
    match n {
        -1 => Err(LdError::BadCurrent),
        -2 => Err(LdError::BadIncr),
        // -3, and -4 (no room) which a finite value cannot reach.
        n if n < 0 => Err(LdError::NotFinite),
        n => Ok(n as usize),
    }
}

/// `v` as Redis's `addReplyHumanLongDouble` prints it (`%.17Lf` of the
/// value as a long double, trailing zeros removed): GEOPOS coordinates.
pub fn human_double(v: f64, out: &mut [u8; LD_BUF]) -> usize {
    // SAFETY: the shim writes at most `out.len()` bytes into `out`.
    let n = unsafe { sluice_ld_format_double(v, out.as_mut_ptr().cast(), out.len()) };
    n.max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(cur: Option<&str>, incr: &str) -> Result<String, LdError> {
        let mut b = [0u8; LD_BUF];
        let n = incr_by(cur.map(str::as_bytes), incr.as_bytes(), &mut b)?;
        Ok(String::from_utf8(b[..n].to_vec()).unwrap())
    }

    #[test]
    fn human_form_like_redis() {
        assert_eq!(add(Some("10.5"), "0.1").unwrap(), "10.6");
        assert_eq!(add(None, "5.0e3").unwrap(), "5000");
        assert_eq!(add(Some("1"), "-1").unwrap(), "0");
        assert_eq!(add(Some("-1e-30"), "0").unwrap(), "0");
        assert_eq!(add(Some("1.5"), " 1").unwrap_err(), LdError::BadIncr);
        assert_eq!(add(Some("x"), "1").unwrap_err(), LdError::BadCurrent);
        assert_eq!(add(Some("1"), "nan").unwrap_err(), LdError::BadIncr);
        assert_eq!(add(Some("1"), "-inf").unwrap_err(), LdError::NotFinite);
        // Redis 7.0.15 replies 4000 digits for this one.
        let big = add(None, "1e4000").unwrap();
        assert_eq!(big.len(), 4000);
        assert!(
            big.starts_with("99999999999999999999654638730996")
                && big.ends_with("06648276349901340672")
        );
        assert_eq!(check(b"inf"), Some(false));
        assert_eq!(check(b"1e4000"), Some(true));
        assert_eq!(check(b"1e5000"), None, "overflows long double");
        assert_eq!(check(b"1\0"), None, "an embedded NUL is not a number");
        assert_eq!(check(b""), None);
    }
}
