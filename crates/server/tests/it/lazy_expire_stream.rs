//! Keys that SCAN and RANDOMKEY find expired are deleted and propagated
//! one by one, not wrapped in MULTI/EXEC (Redis 7.0's
//! `CMD_TOUCHES_ARBITRARY_KEYS`), while the same SCAN inside a
//! transaction goes out wrapped: compared with redis-server's replica
//! stream, read as a replica reads it after `SYNC`, on both servers.

use std::path::Path;
use std::time::Duration;

use testkit::effects::ReplicaStream;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

/// The stream after `cmds` run with `foo1` and `foo2` expired; the DELs'
/// order (the order each server's walk met the keys) is made canonical.
fn stream(port: u16, cmds: &[&[&str]]) -> Vec<String> {
    let mut c = Client::connect(port).unwrap();
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    c.cmd(&["FLUSHALL"]).unwrap();
    c.cmd(&["SET", "foo1", "bar", "PX", "1"]).unwrap();
    c.cmd(&["SET", "foo2", "bar", "PX", "1"]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let mut repl = ReplicaStream::connect(port).unwrap();
    for cmd in cmds {
        c.cmd(cmd).unwrap();
    }
    let mut got: Vec<String> = repl
        .drain(Duration::from_millis(500))
        .iter()
        .map(|cmd| {
            cmd.iter()
                .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|l| !l.starts_with("select"))
        .collect();
    // Only the DELs' relative order may differ.
    let dels: Vec<usize> = (0..got.len()).filter(|&i| got[i].starts_with("del ")).collect();
    let mut sorted: Vec<String> = dels.iter().map(|&i| got[i].clone()).collect();
    sorted.sort();
    for (i, s) in dels.into_iter().zip(sorted) {
        got[i] = s;
    }
    got
}

#[test]
fn lazy_expire_of_scan_and_randomkey_is_not_wrapped_in_multi_like_redis() {
    let scratch = scratch_dir("lazy-expire");
    let flags = ["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"];
    let Some(redis) = RedisServer::start_with(&flags, Some(&scratch)) else { return };
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    let sluice = TestServer::start_with(bin, &[], Some(&scratch));
    for cmds in [
        &[&["SCAN", "0"][..]][..],
        &[&["RANDOMKEY"][..]],
        &[&["MULTI"][..], &["SCAN", "0"], &["EXEC"]],
    ] {
        let want = stream(redis.port(), cmds);
        assert_eq!(stream(sluice.port(), cmds), want, "{cmds:?}");
        assert!(want.iter().filter(|l| l.starts_with("del ")).count() == 2, "{want:?}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
