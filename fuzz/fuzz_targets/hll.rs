//! cargo-fuzz binary for `sluice_fuzz::hll` (what it feeds and checks is
//! said there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::hll::run(data));
