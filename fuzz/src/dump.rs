//! The DUMP payload decoders on arbitrary bytes: RESTORE's (a value of any
//! type) and FUNCTION RESTORE's (library records). A client sends these
//! bytes, so every input decodes or is refused with Redis's error, never a
//! panic, a hang or an unbounded allocation. Checksums are not verified,
//! so the mutations reach the value decoders.

/// One input.
pub fn run(data: &[u8]) {
    let lim = persist::Limits::default();
    let _ = persist::restore(data, &lim, false);
    let _ = persist::functions::restore_payload(data, false);
    // The same bytes as a payload's body, behind a valid trailer (the RDB
    // version Sluice writes, a checksum not verified), so every input reaches the
    // type byte and the value decoder.
    let mut p = data.to_vec();
    p.extend_from_slice(&persist::RDB_VERSION.to_le_bytes());
    p.extend_from_slice(&[0; 8]);
    if let Ok(v) = persist::restore(&p, &lim, false) {
        // What decodes encodes again and decodes to a value again.
        let again = persist::dump(&v, true);
        persist::restore(&again, &lim, true).expect("a dumped value restores");
    }
    let _ = persist::functions::restore_payload(&p, false);
}
