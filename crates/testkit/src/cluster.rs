//! Small Redis Clusters of `sluice-server` or `redis-server` nodes for the
//! client and load-generator tests: nodes on free ports (their bus on a
//! free port of its own), joined and given every slot by `redis-cli
//! --cluster create`, as an operator would.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::server::{scratch_dir, ServerProc};
use crate::Client;

/// Debian's redis-cli 7.0, which makes the clusters.
pub const REDIS_CLI: &str = "/usr/bin/redis-cli";

/// Whether `redis-cli` is there to make a cluster.
pub fn have_cli() -> bool {
    Path::new(REDIS_CLI).is_file()
}

/// A cluster-enabled node of `bin` (sluice-server or redis-server) with
/// `extra` arguments.
pub fn node(tag: &str, bin: &Path, extra: &[&str]) -> ServerProc {
    let dir = scratch_dir(&format!("cluster-{tag}"));
    let cport = crate::free_port().to_string();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    ServerProc::spawn_raw(
        bin,
        &move |port| {
            let mut a: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                &cport,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            a.extend(extra.iter().cloned());
            a
        },
        &dir,
    )
}

/// One command's reply as text.
pub fn raw(c: &mut Client, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd(args).expect("reply")).into_owned()
}

/// `redis-cli --cluster create` over `nodes`, all masters, then waits
/// until every node says `cluster_state:ok` and `redis-cli --cluster
/// check` finds them agreeing on the slots.
pub fn create(nodes: &[ServerProc]) {
    let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
    let mut args = vec!["--cluster", "create"];
    args.extend(addrs.iter().map(|s| s.as_str()));
    args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    let out = Command::new(REDIS_CLI).args(&args).output().expect("run redis-cli");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("[OK] All 16384 slots covered."), "{text}");
    let start = Instant::now();
    loop {
        let ok = nodes
            .iter()
            .all(|n| raw(&mut n.client(), &["CLUSTER", "INFO"]).contains("cluster_state:ok"));
        let check = Command::new(REDIS_CLI).args(["--cluster", "check", &addrs[0]]).output();
        let agree = check.is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).contains("[OK] All nodes agree about slots")
        });
        if ok && agree {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the cluster did not settle");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A node's id (`CLUSTER MYID`).
pub fn myid(p: &ServerProc) -> String {
    raw(&mut p.client(), &["CLUSTER", "MYID"]).lines().nth(1).unwrap_or("").to_string()
}
