//! Full and partial synchronisations against reality: each scenario runs
//! with a redis-server 7.0.15 master (the oracle) and with a Sluice
//! master, redis-server replicas following both, and must end the same
//! (the counts INFO gives, the replicas' states and data). Where the
//! behaviour is the replica's, a Sluice replica and a redis-server one
//! follow a redis-server master.
//!
//! Every wait polls with a deadline; a sleep only lets a TTL pass.

use std::time::{Duration, Instant};

use crate::common::{cmd, info, text, wait_for, wait_synced};
use testkit::{Client, RedisServer, ServerProc, TestServer};

enum Node {
    Sluice(TestServer),
    Redis(RedisServer),
}

impl Node {
    fn start(sluice: bool, extra: &[&str], cwd: Option<&std::path::Path>) -> Option<Node> {
        Some(if sluice {
            Node::Sluice(TestServer::start_with(&TestServer::default_bin(), extra, cwd))
        } else {
            Node::Redis(RedisServer::start_with(extra, cwd)?)
        })
    }

    fn proc(&self) -> &ServerProc {
        match self {
            Node::Sluice(s) => s,
            Node::Redis(r) => r,
        }
    }
}

fn num(c: &mut Client, section: &str, name: &str) -> i64 {
    info(c, section, name).and_then(|v| v.parse().ok()).unwrap_or(-1)
}

fn ok(f: resp::Frame) {
    assert_eq!(text(&f), "OK");
}

fn follow(c: &mut Client, port: u16) {
    ok(cmd(c, &["REPLICAOF", "127.0.0.1", &port.to_string()]));
}

/// SHUTDOWN: the server closes the connection instead of replying.
fn shutdown(c: &mut Client, how: &str) {
    let _ = c.send(&["SHUTDOWN", how]);
    let _ = c.read_frame();
}

/// ROLE's link state on a replica (`connect`, `handshake`, `sync`, …).
fn role_state(c: &mut Client) -> String {
    match cmd(c, &["ROLE"]) {
        resp::Frame::Array(Some(v)) => v.get(3).map(text).unwrap_or_default(),
        other => format!("{other:?}"),
    }
}

/// What the shared-snapshot scenario saw.
#[derive(Debug, PartialEq)]
struct Shared {
    both_in_sync_state: bool,
    bgsave_in_progress: i64,
    forks: i64,
    slaves_after_hangup: i64,
    sync_full: i64,
}

/// Two replicas that ask while the diskless delay runs share one
/// snapshot: both get `+FULLRESYNC` when it starts (ROLE says `sync`
/// while a slow payload is made), INFO shows the save in progress, one
/// fork is counted, and a replica that hangs up meanwhile stops counting
/// at once.
fn shared_snapshot(sluice: bool) -> Option<Shared> {
    let master = Node::start(sluice, &[], None)?;
    let r1 = RedisServer::start()?;
    let r2 = RedisServer::start()?;
    let mut m = master.proc().client();
    for kv in [
        ("repl-diskless-sync", "yes"),
        ("repl-diskless-sync-delay", "5"),
        ("repl-diskless-sync-max-replicas", "2"),
    ] {
        ok(cmd(&mut m, &["CONFIG", "SET", kv.0, kv.1]));
    }
    for i in 0..20 {
        cmd(&mut m, &["SET", &format!("k{i}"), "v"]);
    }
    // 20 keys at 0.2 s each: the payload takes about 4 s to make.
    ok(cmd(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]));
    let forks = num(&mut m, "stats", "total_forks");
    let (mut c1, mut c2) = (r1.client(), r2.client());
    follow(&mut c1, master.proc().port());
    follow(&mut c2, master.proc().port());
    let start = Instant::now();
    let mut both = false;
    while start.elapsed() < Duration::from_secs(3) && !both {
        both = role_state(&mut c1) == "sync" && role_state(&mut c2) == "sync";
        std::thread::sleep(Duration::from_millis(20));
    }
    let bgsave_in_progress = num(&mut m, "persistence", "rdb_bgsave_in_progress");
    let forks = num(&mut m, "stats", "total_forks") - forks;
    shutdown(&mut c2, "NOSAVE");
    drop(r2);
    let start = Instant::now();
    while num(&mut m, "replication", "connected_slaves") != 1
        && start.elapsed() < Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let slaves_after_hangup = num(&mut m, "replication", "connected_slaves");
    wait_synced(&mut m, &mut c1);
    Some(Shared {
        both_in_sync_state: both,
        bgsave_in_progress,
        forks,
        slaves_after_hangup,
        sync_full: num(&mut m, "stats", "sync_full"),
    })
}

#[test]
fn replicas_waiting_together_share_one_diskless_snapshot_as_redis() {
    let Some(redis) = shared_snapshot(false) else { return };
    let sluice = shared_snapshot(true).expect("sluice run");
    assert_eq!(
        redis,
        Shared {
            both_in_sync_state: true,
            bgsave_in_progress: 1,
            forks: 1,
            slaves_after_hangup: 1,
            sync_full: 2
        },
        "the oracle"
    );
    assert_eq!(sluice, redis);
}

/// A master restarted from its file finds keys expired in it: their
/// deletion enters the stream after the restored offset, so a replica's
/// partial resync deletes them too. Returns (keys expired on load,
/// master_repl_offset - saved offset == backlog length and > 0,
/// the replica's partial syncs, the replica's DBSIZE).
fn restart_with_expired(sluice: bool) -> Option<(i64, bool, i64, i64)> {
    let dir = tempdir();
    let master = Node::start(sluice, &[], Some(&dir))?;
    let replica = RedisServer::start()?;
    let mut m = master.proc().client();
    let mut r = replica.client();
    follow(&mut r, master.proc().port());
    wait_synced(&mut m, &mut r);
    ok(cmd(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]));
    for i in 0..50 {
        cmd(&mut m, &["SELECT", &(i % 4).to_string()]);
        ok(cmd(&mut m, &["SET", &format!("e{i}"), "v", "PX", "50"]));
    }
    cmd(&mut m, &["SELECT", "0"]);
    wait_synced(&mut m, &mut r);
    // The replica acknowledged it all: the shutdown waits for nobody.
    wait_for("the replica's ack", Duration::from_secs(10), || {
        let off = num(&mut m, "replication", "master_repl_offset");
        info(&mut m, "replication", "slave0").is_some_and(|s| s.contains(&format!("offset={off},")))
    });
    let saved = num(&mut m, "replication", "master_repl_offset");
    std::thread::sleep(Duration::from_millis(100));
    shutdown(&mut m, "SAVE");
    drop(m);
    drop(master);
    let master = Node::start(sluice, &[], Some(&dir))?;
    let mut m = master.proc().client();
    wait_for("the load", Duration::from_secs(10), || num(&mut m, "persistence", "loading") == 0);
    let expired = num(&mut m, "persistence", "rdb_last_load_keys_expired");
    let histlen = num(&mut m, "replication", "repl_backlog_histlen");
    let grown = num(&mut m, "replication", "master_repl_offset") - saved;
    follow(&mut r, master.proc().port());
    wait_synced(&mut m, &mut r);
    let partial = num(&mut m, "stats", "sync_partial_ok");
    let size = match cmd(&mut r, &["DBSIZE"]) {
        resp::Frame::Integer(n) => n,
        other => panic!("{other:?}"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    Some((expired, grown == histlen && grown > 0, partial, size))
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "sluice-repl-sync-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn restarted_master_feeds_the_keys_its_file_held_expired_to_the_stream() {
    let Some(redis) = restart_with_expired(false) else { return };
    let sluice = restart_with_expired(true).expect("sluice run");
    assert_eq!(redis, (50, true, 1, 0), "the oracle");
    assert_eq!(sluice, redis);
}

/// DEBUG REPLICATE: the command reaches the replica as is; a replica
/// that cannot run it says so in its log, once.
fn debug_replicate(sluice: bool) -> Option<(usize, usize)> {
    let master = Node::start(sluice, &[], None)?;
    let replica = RedisServer::start()?;
    let mut m = master.proc().client();
    let mut r = replica.client();
    follow(&mut r, master.proc().port());
    wait_synced(&mut m, &mut r);
    ok(cmd(&mut m, &["DEBUG", "REPLICATE", "fake-command-1"]));
    cmd(&mut m, &["SET", "foo", "bar"]);
    wait_synced(&mut m, &mut r);
    let log = replica.log_text();
    Some((log.matches("fake-command-1").count(), log.matches("== CRITICAL ==").count()))
}

#[test]
fn debug_replicate_feeds_a_command_to_the_replicas_as_redis() {
    let Some(redis) = debug_replicate(false) else { return };
    let sluice = debug_replicate(true).expect("sluice run");
    assert_eq!(redis, (1, 1), "the oracle");
    assert_eq!(sluice, redis);
}

/// A replica's hard output limit below `repl-backlog-size` counts as
/// that size: a partial resync of more than the limit keeps the replica.
fn limit_below_backlog(sluice: bool) -> Option<(i64, i64)> {
    let master = Node::start(sluice, &[], None)?;
    let replica = RedisServer::start()?;
    let mut m = master.proc().client();
    let mut r = replica.client();
    ok(cmd(&mut m, &["CONFIG", "SET", "repl-backlog-size", "20mb"]));
    ok(cmd(&mut m, &["CONFIG", "SET", "client-output-buffer-limit", "replica 512k 0 0"]));
    follow(&mut r, master.proc().port());
    wait_synced(&mut m, &mut r);
    let big = "A".repeat(3 << 20);
    ok(cmd(&mut m, &["MULTI"]));
    cmd(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
    cmd(&mut m, &["SET", "key", &big]);
    cmd(&mut m, &["SET", "key", &big]);
    cmd(&mut m, &["DEBUG", "SLEEP", "1"]);
    cmd(&mut m, &["EXEC"]);
    ok(cmd(&mut m, &["SET", "key", &big]));
    wait_synced(&mut m, &mut r);
    Some((num(&mut m, "stats", "sync_full"), num(&mut m, "stats", "sync_partial_ok")))
}

#[test]
fn replica_output_limit_below_the_backlog_counts_as_the_backlog_size() {
    let Some(redis) = limit_below_backlog(false) else { return };
    let sluice = limit_below_backlog(true).expect("sluice run");
    assert_eq!(redis, (1, 1), "the oracle");
    assert_eq!(sluice, redis);
}

/// A writable replica expires the keys its own clients gave a TTL; the
/// master's keys, from its stream or from the sync's payload, wait for
/// the master's DEL. Returns the replica's DBSIZE once its own keys' TTL
/// passed. (Bug pinned: a Sluice replica took every key with a TTL the
/// payload brought for its own and expired it.)
fn writable_replica_expiry(sluice_replica: bool) -> Option<i64> {
    let master = RedisServer::start()?;
    let replica = Node::start(sluice_replica, &[], None)?;
    let mut m = master.client();
    let mut r = replica.proc().client();
    ok(cmd(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]));
    ok(cmd(&mut m, &["SET", "in-payload", "1", "PX", "100"]));
    follow(&mut r, master.port());
    wait_synced(&mut m, &mut r);
    ok(cmd(&mut m, &["SET", "from-master", "1", "PX", "100"]));
    wait_synced(&mut m, &mut r);
    ok(cmd(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]));
    ok(cmd(&mut r, &["SET", "own", "1", "PX", "100"]));
    ok(cmd(&mut r, &["SET", "own2", "1"]));
    cmd(&mut r, &["PEXPIRE", "own2", "100"]);
    let dbsize = |r: &mut Client| match cmd(r, &["DBSIZE"]) {
        resp::Frame::Integer(n) => n,
        other => panic!("{other:?}"),
    };
    let start = Instant::now();
    while dbsize(&mut r) > 2 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // A few expiry cycles more: the master's keys must still be there.
    std::thread::sleep(Duration::from_millis(500));
    Some(dbsize(&mut r))
}

#[test]
fn writable_replica_expires_the_keys_its_clients_set_as_redis() {
    let Some(redis) = writable_replica_expiry(false) else { return };
    let sluice = writable_replica_expiry(true).expect("sluice run");
    assert_eq!(redis, 2, "the oracle");
    assert_eq!(sluice, redis);
}

/// `redis-cli --functions-rdb FILE` (`REPLCONF rdb-filter-only
/// functions`, then SYNC): the file holds the function libraries and no
/// key; a bad filter and a filter without `capa eof` are refused with
/// Redis's words. Returns (the refusals, the file's DBSIZE and library
/// names once loaded by a redis-server).
fn functions_rdb(sluice: bool) -> Option<(Vec<String>, i64, String)> {
    let master = Node::start(sluice, &[], None)?;
    let mut m = master.proc().client();
    let lib = "#!lua name=mylib\nredis.register_function('f1', function() return 1 end)";
    assert_eq!(text(&cmd(&mut m, &["FUNCTION", "LOAD", lib])), "mylib");
    for i in 0..10 {
        cmd(&mut m, &["SET", &format!("k{i}"), "v"]);
    }
    let mut refusals = Vec::new();
    let mut c = master.proc().client();
    refusals.push(text(&cmd(&mut c, &["REPLCONF", "rdb-filter-only", "keys"])));
    refusals.push(text(&cmd(&mut c, &["REPLCONF", "rdb-filter-only", "functions"])));
    refusals.push(text(&cmd(&mut c, &["SYNC"])));
    let dir = tempdir();
    let file = dir.join("functions.rdb");
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &master.proc().port().to_string(), "--functions-rdb"])
        .arg(&file)
        .output()
        .expect("redis-cli");
    assert!(out.status.success(), "redis-cli: {}", String::from_utf8_lossy(&out.stderr));
    let loader = RedisServer::start_with(&["--dbfilename", "functions.rdb"], Some(&dir))?;
    let mut l = loader.client();
    let size = match cmd(&mut l, &["DBSIZE"]) {
        resp::Frame::Integer(n) => n,
        other => panic!("{other:?}"),
    };
    let libs = flat(&cmd(&mut l, &["FUNCTION", "LIST"]));
    drop(loader);
    let _ = std::fs::remove_dir_all(&dir);
    Some((refusals, size, libs))
}

/// A reply's strings, nested arrays flattened, space-separated.
fn flat(f: &resp::Frame) -> String {
    match f {
        resp::Frame::Array(Some(v)) => v.iter().map(flat).collect::<Vec<_>>().join(" "),
        other => text(other),
    }
}

#[test]
fn rdb_filter_only_functions_sends_the_libraries_without_keys_as_redis() {
    let Some(redis) = functions_rdb(false) else { return };
    let sluice = functions_rdb(true).expect("sluice run");
    assert_eq!(redis.1, 0, "the oracle");
    assert!(redis.2.contains("mylib"), "the oracle: {}", redis.2);
    assert_eq!(sluice, redis);
}
