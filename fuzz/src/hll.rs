//! Fuzzes the HyperLogLog decoders: a client can store any string and then
//! run PFADD, PFCOUNT, PFMERGE or PFDEBUG on it, so any bytes that pass
//! the header check must give a result or "corrupt", never a panic.

/// One input.
pub fn run(data: &[u8]) {
    // Most inputs should get past the header check.
    let mut v = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
    v.extend_from_slice(data);
    engine::subsystems::hll::exercise(&v);
    engine::subsystems::hll::exercise(data);
}
