//! `sluice-bench --cluster` against a 3-master Sluice cluster made by
//! `redis-cli --cluster create`: a short sweep (two depths, with and
//! without the round-trip proxy) prints a row per shard and one for all,
//! every master gets keys, and no request is answered with an error
//! (a key sent to the wrong master would be `-MOVED`).

use std::path::PathBuf;
use std::process::Command;

use testkit::cluster::{create, have_cli, node, raw};
use testkit::{oracle_required, ServerProc, TestServer};

fn sluice_bin() -> Option<PathBuf> {
    if !have_cli() {
        assert!(!oracle_required(), "redis-cli needed");
        eprintln!("SKIPPED: redis-cli missing");
        return None;
    }
    TestServer::bin_or_skip()
}

fn dbsize(p: &ServerProc) -> usize {
    raw(&mut p.client(), &["DBSIZE"]).trim_start_matches(':').trim().parse().unwrap()
}

#[test]
fn sweeps_a_sluice_cluster_per_shard_and_in_total() {
    let Some(bin) = sluice_bin() else { return };
    let nodes: Vec<ServerProc> = (0..3).map(|i| node(&format!("bench{i}"), &bin, &[])).collect();
    create(&nodes);
    let seed = format!("127.0.0.1:{}", nodes[2].port());
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(["--cluster", &seed, "-t", "set,get,ping_mbulk", "--pipeline", "1,16"])
        .args(["--rtt", "0,0.2ms", "-c", "4", "-n", "2000", "-r", "5000", "--max-time", "1s"])
        .output()
        .expect("run sluice-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("error replies"), "{stderr}");
    for test in ["SET", "GET", "PING_MBULK"] {
        for shard in ["[shard 1/3]", "[shard 2/3]", "[shard 3/3]", "[3 shards]"] {
            let label = format!("{test} {shard}");
            let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with(&label)).collect();
            // rtt 0 and 0.2 ms, P 1 and 16.
            assert_eq!(rows.len(), 4, "{label}:\n{stdout}");
            for row in rows {
                let rps: f64 =
                    row[label.len()..].split_whitespace().nth(3).unwrap().parse().unwrap();
                assert!(rps > 0.0, "{row}");
            }
        }
    }
    for n in &nodes {
        assert!(dbsize(n) > 100, "every master got SETs: {}", dbsize(n));
    }
}
