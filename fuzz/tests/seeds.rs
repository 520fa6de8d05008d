//! Every fuzz target, run in every `cargo test --workspace`, so that none
//! can stop building or start failing unseen (the targets once did not
//! compile for months, because only `cargo +nightly fuzz` built them):
//!
//! - in process: each target's `run` on each of its seeds
//!   (`fuzz/seeds/TARGET/`, written by `fuzz/seeds/make-seeds` from
//!   redis-server's DUMP, RDB, AOF and HyperLogLog bytes), then on
//!   deterministic mutations of them for a time budget
//!   (`SLUICE_FUZZ_SECS`, 1 second per target by default). A failing
//!   input is written to the temporary directory and named in the panic;
//! - the cargo-fuzz binaries themselves, built here by stable cargo
//!   without coverage instrumentation (libFuzzer still runs them: it
//!   executes the seeds and random mutations, it just cannot tell which
//!   are new), for a second each.
//!
//! The commands target runs under its counting allocator, as its binary
//! does; the targets run one at a time, so the allocator's mark is one
//! command's.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: sluice_fuzz::commands::Counting = sluice_fuzz::commands::Counting;

/// One target at a time (the counting allocator's mark is global).
static SERIAL: Mutex<()> = Mutex::new(());

fn seeds_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target)
}

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = seeds_dir(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

fn budget() -> Duration {
    let secs = std::env::var("SLUICE_FUZZ_SECS").ok().and_then(|s| s.parse::<f64>().ok());
    Duration::from_secs_f64(secs.unwrap_or(1.0))
}

/// xorshift64*: the same mutations on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four of libFuzzer's simpler mutations of `seed`, spliced now and
/// then with another seed.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if at < v.len() => v[at] ^= 1 << rng.below(8),
            1 if at < v.len() => v[at] = [0, 1, 0x7f, 0x80, 0xfe, 0xff][rng.below(6)],
            2 => v.truncate(at),
            3 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            4 if at < v.len() => {
                let end = (at + 1 + rng.below(32)).min(v.len());
                let copy = v[at..end].to_vec();
                let to = rng.below(v.len() + 1);
                v.splice(to..to, copy);
            }
            5 if at < v.len() => {
                let end = (at + 1 + rng.below(32)).min(v.len());
                v.drain(at..end);
            }
            _ => {
                let from = rng.below(other.len() + 1);
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
        }
    }
    v
}

/// Runs `target` on `input`; a panic becomes a failure that names the
/// input and where it was saved.
fn run_one(target: &str, run: fn(&[u8]), what: &str, input: &[u8]) {
    if panic::catch_unwind(AssertUnwindSafe(|| run(input))).is_err() {
        let path = std::env::temp_dir().join(format!("sluice-fuzz-{target}-failure"));
        let _ = std::fs::write(&path, input);
        panic!("fuzz target {target} failed on {what}; the input is in {}", path.display());
    }
}

fn target(name: &str) -> fn(&[u8]) {
    sluice_fuzz::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no target {name}"))
        .1
}

fn seeds_and_mutations(name: &str) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = target(name);
    let seeds = seeds(name);
    for (file, data) in &seeds {
        run_one(name, run, &format!("seed {file}"), data);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    let deadline = Instant::now() + budget();
    let mut i = 0u64;
    while Instant::now() < deadline {
        let (file, seed) = &seeds[i as usize % seeds.len()];
        let other = &seeds[rng.below(seeds.len())].1;
        let input = mutate(&mut rng, seed, other);
        run_one(name, run, &format!("mutation {i} of seed {file}"), &input);
        i += 1;
    }
}

#[test]
fn every_target_has_a_test_and_seeds() {
    let tested =
        ["request_parser", "rdb_load", "dump_payload", "aof_load", "hll", "job_record", "commands"];
    for (name, _) in sluice_fuzz::TARGETS {
        assert!(tested.contains(name), "target {name} has no test below");
        assert!(!seeds(name).is_empty());
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fuzz_targets")
                .join(format!("{name}.rs"))
                .exists(),
            "target {name} has no cargo-fuzz binary"
        );
    }
}

#[test]
fn request_parser_seeds() {
    seeds_and_mutations("request_parser");
}

#[test]
fn rdb_load_seeds() {
    seeds_and_mutations("rdb_load");
}

#[test]
fn dump_payload_seeds() {
    seeds_and_mutations("dump_payload");
}

#[test]
fn aof_load_seeds() {
    seeds_and_mutations("aof_load");
}

#[test]
fn hll_seeds() {
    seeds_and_mutations("hll");
}

#[test]
fn job_record_seeds() {
    seeds_and_mutations("job_record");
}

#[test]
fn commands_seeds() {
    seeds_and_mutations("commands");
}

/// The libFuzzer binaries, built by stable cargo, run on their seeds and
/// mutations for a second each: they link, start and find no crash.
#[test]
fn libfuzzer_binaries_run() {
    let bins: &[(&str, &str)] = &[
        ("request_parser", env!("CARGO_BIN_EXE_request_parser")),
        ("rdb_load", env!("CARGO_BIN_EXE_rdb_load")),
        ("dump_payload", env!("CARGO_BIN_EXE_dump_payload")),
        ("aof_load", env!("CARGO_BIN_EXE_aof_load")),
        ("hll", env!("CARGO_BIN_EXE_hll")),
        ("job_record", env!("CARGO_BIN_EXE_job_record")),
        ("commands", env!("CARGO_BIN_EXE_commands")),
    ];
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(bins.len(), sluice_fuzz::TARGETS.len());
    let work = std::env::temp_dir().join(format!("sluice-fuzz-bins-{}", std::process::id()));
    for (name, bin) in bins {
        // libFuzzer writes what it finds into its first corpus folder and a
        // crash into the artifact prefix: both in a scratch folder, never
        // into the seeds.
        let corpus = work.join(name);
        std::fs::create_dir_all(&corpus).unwrap();
        let out = Command::new(bin)
            .arg("-max_total_time=1")
            .arg("-seed=1")
            .arg("-rss_limit_mb=4096")
            .arg(format!("-artifact_prefix={}/", work.display()))
            .arg(&corpus)
            .arg(seeds_dir(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}
