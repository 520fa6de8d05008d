//! The RDB file loader (function library records included) on arbitrary
//! bytes: every input is either loaded or refused with an error, never a
//! panic, a hang or an unbounded allocation. Checksums are not verified,
//! so the mutations reach the value decoders. The same file fed in pieces
//! to the streaming loader (a replica's diskless load) gets the same
//! verdict.

/// One input.
pub fn run(data: &[u8]) {
    let lim = persist::Limits::default();
    let _ = persist::file::load(data, &lim, 16, 0, false, |_| Ok(()));
    // The same bytes behind a valid header, so they are read as keys.
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(data);
    let _ = persist::file::load(&file, &lim, 16, 0, false, |_| Ok(()));
    let _ = persist::file::leading_functions(&file);
    let _ = persist::file::leading_used_mem(&file);
    // In pieces of 1 to 64 bytes (sizes from the input's first byte).
    let whole = persist::file::load(&file, &lim, 16, 0, false, |_| Ok(())).map(|l| l.consumed);
    let step = usize::from(data.first().copied().unwrap_or(0) % 64) + 1;
    let mut l = persist::file::Loader::new(lim, 16, 0, false);
    let (mut from, mut to) = (0, 0);
    let streamed = loop {
        to = (to + step).min(file.len());
        let last = to == file.len();
        match l.feed(&file[from..to], last, &mut |_| Ok(())) {
            Ok(n) => from += n,
            Err(e) => break Err(e),
        }
        if l.done() || last {
            break Ok(l.finish().consumed);
        }
    };
    match (whole, streamed) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(a.reason, b.reason),
        (a, b) => panic!("whole {a:?}, in pieces {b:?}"),
    }
}
