//! The RDB file loader (function library records included) on arbitrary
//! bytes: every input is either loaded or refused with an error, never a
//! panic, a hang or an unbounded allocation. Checksums are not verified,
//! so the mutations reach the value decoders.

/// One input.
pub fn run(data: &[u8]) {
    let lim = persist::Limits::default();
    let _ = persist::file::load(data, &lim, 16, 0, false, |_| Ok(()));
    // The same bytes behind a valid header, so they are read as keys.
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(data);
    let _ = persist::file::load(&file, &lim, 16, 0, false, |_| Ok(()));
    let _ = persist::file::leading_functions(&file);
}
