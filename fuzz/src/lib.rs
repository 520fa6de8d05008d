//! Sluice's fuzz targets, one module per target, each a `run(&[u8])` that
//! feeds one input to a decoder or to the command layer and asserts what
//! must hold for any bytes. The cargo-fuzz binaries (`fuzz_targets/`,
//! `cargo +nightly fuzz run TARGET` from `fuzz/`) are one line around
//! each; `tests/seeds.rs` runs every target on its seed inputs
//! (`seeds/TARGET/`) and on mutations of them for a few seconds in every
//! `cargo test --workspace`, so the targets build and run with the code
//! they test. Depends on the crates it fuzzes; nothing depends on it.

pub mod aof;
pub mod commands;
pub mod dump;
pub mod hll;
pub mod job_record;
pub mod rdb;
pub mod request_parser;

/// Every target by the name of its binary and seed folder.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("request_parser", request_parser::run),
    ("rdb_load", rdb::run),
    ("dump_payload", dump::run),
    ("aof_load", aof::run),
    ("hll", hll::run),
    ("job_record", job_record::run),
    ("commands", commands::run),
];
