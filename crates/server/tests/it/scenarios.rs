//! Differential scenarios: every `tests/scenarios/*.txt` is replayed
//! against the oracle redis-server and against Sluice, and every reply's
//! bytes must agree (see `testkit::scenario` for the file format).
//!
//! `SCENARIO_SELF_CHECK=1` replays them against two redis-servers instead,
//! which proves the scenarios themselves deterministic.

use std::path::{Path, PathBuf};

use testkit::diff::{self, Options};
use testkit::scenario;

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios")
}

fn check(file: &str) {
    let path = scenario_dir().join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let sc = scenario::parse(&format!("tests/scenarios/{file}"), &text).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    diff::check(bin, &sc.name, &sc.steps, &Options::SCENARIO);
}

macro_rules! scenarios {
    ($($name:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $name() {
                check($file);
            }
        )*
        const LISTED: &[&str] = &[$($file),*];
    };
}

scenarios! {
    strings_get_set => "strings_get_set.txt",
    strings_multi => "strings_multi.txt",
    strings_counters => "strings_counters.txt",
    strings_ranges => "strings_ranges.txt",
    keys_basic => "keys_basic.txt",
    keys_expire => "keys_expire.txt",
    keys_rename_copy_move => "keys_rename_copy_move.txt",
    lists => "lists.txt",
    keys_databases => "keys_databases.txt",
    transactions => "transactions.txt",
    connection => "connection.txt",
    server_admin => "server_admin.txt",
    resp3 => "resp3.txt",
    arity => "arity.txt",
    hashes => "hashes.txt",
    sets => "sets.txt",
    wrongtype => "wrongtype.txt",
    zsets_basic => "zsets_basic.txt",
    zsets_ranges => "zsets_ranges.txt",
    zsets_ops => "zsets_ops.txt",
    zsets_random => "zsets_random.txt",
    zsets_big => "zsets_big.txt",
    sort => "sort.txt",
    bitmaps => "bitmaps.txt",
    hyperloglog => "hyperloglog.txt",
    geo => "geo.txt",
    policies => "policies.txt",
    eviction => "eviction.txt",
    persistence => "persistence.txt",
    scripting_eval => "scripting_eval.txt",
    scripting_cmsgpack => "scripting_cmsgpack.txt",
    scripting_struct => "scripting_struct.txt",
    scripting_errors => "scripting_errors.txt",
    scripting_resp3 => "scripting_resp3.txt",
    scripting_functions => "scripting_functions.txt",
    scripting_policies => "scripting_policies.txt",
    scripting_function_dump => "scripting_function_dump.txt",
    scripting_sandbox => "scripting_sandbox.txt",
    pubsub => "pubsub.txt",
    tracking => "tracking.txt",
    streams => "streams.txt",
    streams_trim => "streams_trim.txt",
    streams_groups => "streams_groups.txt",
    streams_blocking => "streams_blocking.txt",
    streams_claim => "streams_claim.txt",
    blocking_key_changes => "blocking_key_changes.txt",
    replica_stale => "replica_stale.txt",
    extreme_arguments => "extreme_arguments.txt",
    debug_mallctl => "debug_mallctl.txt",
    acl_key_positions => "acl_key_positions.txt",
    scripting_stale_cluster => "scripting_stale_cluster.txt",
}

#[test]
fn every_scenario_file_is_listed() {
    let mut missing = Vec::new();
    for e in std::fs::read_dir(scenario_dir()).expect("tests/scenarios") {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".txt") && !LISTED.contains(&name.as_str()) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "add these to the scenarios! list: {missing:?}");
}

/// The runner is not blind: each server answers `CONFIG GET port` with
/// its own port, and that one difference is found, in lockstep and one
/// run after the other.
#[test]
fn the_runner_reports_what_differs() {
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    let steps = scenario::parse("self", "PING\nCONFIG GET port\nPING\n").unwrap().steps;
    for opts in [Options::SCENARIO, Options::TRANSCRIPT] {
        let Some(servers) = diff::Servers::start_with(bin, &opts) else { return };
        let out = diff::run("self", &steps, servers.redis_port(), servers.sluice_port(), &opts);
        assert_eq!(out.compared, 3, "{:?}", opts.order);
        let lines: Vec<usize> = out.mismatches.iter().map(|m| m.line).collect();
        assert_eq!(lines, [2], "{:?}", opts.order);
    }
}
