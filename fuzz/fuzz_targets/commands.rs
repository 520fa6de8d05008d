//! cargo-fuzz binary for `sluice_fuzz::commands` (what it feeds and checks
//! is said there), under its counting allocator.
#![no_main]

#[global_allocator]
static ALLOC: sluice_fuzz::commands::Counting = sluice_fuzz::commands::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::commands::run(data));
