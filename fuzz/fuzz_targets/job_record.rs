//! cargo-fuzz binary for `sluice_fuzz::job_record` (what it feeds and checks is
//! said there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::job_record::run(data));
