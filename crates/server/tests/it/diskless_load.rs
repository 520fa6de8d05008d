//! A replica's `repl-diskless-load swapdb` against reality: the same
//! redis-server master feeds a redis-server replica (the oracle) and a
//! Sluice replica in turn, with a slowed transfer (`rdb-key-save-delay`)
//! cut short by `CLIENT KILL TYPE replica`. What each replica shows is
//! compared: a first full sync from a new master loads (`loading:1`,
//! `-LOADING`), a sync from the master whose replication id the replica
//! has already loads asynchronously (`async_loading:1`, the old data
//! served, `no-async-loading` commands refused), and a payload cut short
//! leaves the old data in place with neither flag set.
//!
//! The scenario waits on states (INFO's flags), never on time: the
//! master's slowed payload takes far longer (`SLOW_SYNC`) than the steps
//! made during it, and both replicas answer within a key's delay while
//! they load (`loading-process-events-interval-bytes` at its minimum: a
//! redis-server replica serves its clients only between reads of that
//! many bytes, 2 MB by default, which once let a load end before the
//! oracle answered a step meant to land inside it).

use std::time::Duration;

use crate::common::{cmd, info, text, wait_for};
use testkit::{Client, RedisServer, ServerProc, TestServer};

fn field(c: &mut Client, section: &str, name: &str) -> String {
    info(c, section, name).unwrap_or_default()
}

fn reply(c: &mut Client, args: &[&str]) -> String {
    text(&cmd(c, args))
}

/// Waits until the master streams a full sync slowly to its replica.
fn wait_flag(replica: &mut Client, flag: &str) {
    wait_for(flag, Duration::from_secs(60), || field(replica, "persistence", flag) == "1");
}

/// Cuts the sync short on the master; the replica's flags drop.
fn cut(master: &mut Client, replica: &mut Client) -> String {
    // The next attempt waits, so the replica is seen between syncs.
    reply(master, &["CONFIG", "SET", "repl-diskless-sync-delay", "5"]);
    let killed = reply(master, &["CLIENT", "KILL", "TYPE", "replica"]);
    wait_for("the load to stop", Duration::from_secs(30), || {
        field(replica, "persistence", "loading") == "0"
            && field(replica, "persistence", "async_loading") == "0"
    });
    killed
}

/// Keys and their size on the master: a slowed payload of `KEYS` keys
/// at `SLOW_US` each.
const KEYS: &str = "3000";
const KEY_SIZE: &str = "1000";
/// `rdb-key-save-delay` of a slowed sync: 3,000 keys × 10 ms = 30 s,
/// which every step made during a load stays far inside.
const SLOW_US: &str = "10000";

/// The scenario for a replica `r`, with a fresh redis-server master.
fn scenario(r: &ServerProc) -> Vec<String> {
    let m = RedisServer::start_with(&["--save", "", "--appendonly", "no"], None).expect("redis");
    let (mut master, mut replica) = (m.client(), r.client());
    let mut out = Vec::new();
    for a in [
        &["CONFIG", "SET", "repl-diskless-sync", "yes"][..],
        &["CONFIG", "SET", "repl-diskless-sync-delay", "0"],
        &["CONFIG", "SET", "rdbcompression", "no"],
        &["DEBUG", "POPULATE", KEYS, "master", KEY_SIZE],
    ] {
        out.push(reply(&mut master, a));
    }
    for a in [
        &["CONFIG", "SET", "repl-diskless-load", "swapdb"][..],
        &["CONFIG", "SET", "replica-read-only", "no"],
        &["CONFIG", "SET", "loading-process-events-interval-bytes", "1024"],
        &["DEBUG", "POPULATE", "20", "replica", "10"],
        &["SET", "mykey", "old"],
    ] {
        out.push(reply(&mut replica, a));
    }
    // 1. A new master (another replication id): the replica loads.
    reply(&mut master, &["CONFIG", "SET", "rdb-key-save-delay", SLOW_US]);
    let port = m.port().to_string();
    out.push(reply(&mut replica, &["REPLICAOF", "127.0.0.1", &port]));
    wait_flag(&mut replica, "loading");
    out.push(field(&mut replica, "persistence", "async_loading"));
    // INFO's account of the load: an EOF-marked payload's size is not
    // known (0); the master's `used-mem` comes with its head.
    out.push(field(&mut replica, "persistence", "loading_total_bytes"));
    wait_for("the payload's head", Duration::from_secs(30), || {
        field(&mut replica, "persistence", "loading_rdb_used_mem") != "0"
    });
    out.push(reply(&mut replica, &["GET", "mykey"]));
    out.push(cut(&mut master, &mut replica));
    out.push(reply(&mut replica, &["GET", "mykey"]));
    out.push(reply(&mut replica, &["DBSIZE"]));
    // 2. The sync completes: the master's data set replaces the old one.
    reply(&mut master, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    reply(&mut master, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    wait_for("the link", Duration::from_secs(90), || {
        field(&mut replica, "replication", "master_link_status") == "up"
    });
    out.push(reply(&mut replica, &["GET", "mykey"]));
    out.push(reply(&mut replica, &["DBSIZE"]));
    // 3. A full sync from the same master (its backlog overrun while the
    // link was down): loaded asynchronously, the old data served.
    out.push(reply(&mut replica, &["SET", "mykey", "mine"]));
    reply(&mut master, &["CONFIG", "SET", "rdb-key-save-delay", SLOW_US]);
    reply(&mut master, &["CONFIG", "SET", "repl-backlog-size", "16384"]);
    reply(&mut master, &["MULTI"]);
    reply(&mut master, &["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..10 {
        reply(&mut master, &["SET", &format!("big{i}"), &"A".repeat(16384)]);
    }
    reply(&mut master, &["EXEC"]);
    wait_flag(&mut replica, "async_loading");
    out.push(field(&mut replica, "persistence", "loading"));
    out.push(reply(&mut replica, &["GET", "mykey"]));
    out.push(reply(&mut replica, &["DBSIZE"]));
    out.push(reply(&mut replica, &["CONFIG", "SET", "appendonly", "no"]));
    out.push(reply(&mut replica, &["REPLICAOF", "NO", "ONE"]));
    out.push(reply(&mut replica, &["PING"]));
    out.push(cut(&mut master, &mut replica));
    out.push(reply(&mut replica, &["GET", "mykey"]));
    out.push(reply(&mut replica, &["DBSIZE"]));
    reply(&mut master, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    out.push(reply(&mut replica, &["REPLICAOF", "NO", "ONE"]));
    out
}

#[test]
fn a_swapdb_replica_loads_and_loads_asynchronously_as_redis_does() {
    let Some(redis) = RedisServer::start_with(&["--save", ""], None) else { return };
    let want = scenario(&redis);
    drop(redis);
    let sluice = TestServer::start_with(&TestServer::default_bin(), &["--save", ""], None);
    let got = scenario(&sluice);
    assert_eq!(want[4 + 5 + 1], "0", "the oracle loaded synchronously first: {want:?}");
    assert_eq!(want[4 + 5 + 2], "0", "the oracle's EOF-marked payload has no size: {want:?}");
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g, w, "step {i} differs: {got:?}");
    }
}

/// How long a redis-server master's diskless sync to replica `r` takes
/// when `r` loads 4,000 keys of 10 KB with `key-load-delay 500` (2 s of
/// loading): the master's snapshot ends only when the replica has read
/// nearly all of it.
fn paced_transfer(r: &ServerProc) -> Duration {
    let m = RedisServer::start_with(&["--save", "", "--appendonly", "no"], None).expect("redis");
    let (mut master, mut replica) = (m.client(), r.client());
    for a in [
        &["CONFIG", "SET", "repl-diskless-sync", "yes"][..],
        &["CONFIG", "SET", "repl-diskless-sync-delay", "0"],
        &["CONFIG", "SET", "rdbcompression", "no"],
        &["DEBUG", "POPULATE", "4000", "paced", "10000"],
    ] {
        assert_eq!(reply(&mut master, a), "OK");
    }
    for a in [
        &["CONFIG", "SET", "repl-diskless-load", "swapdb"][..],
        &["CONFIG", "SET", "key-load-delay", "500"],
    ] {
        assert_eq!(reply(&mut replica, a), "OK");
    }
    let start = std::time::Instant::now();
    let port = m.port().to_string();
    assert_eq!(reply(&mut replica, &["REPLICAOF", "127.0.0.1", &port]), "OK");
    wait_for("the sync to start", Duration::from_secs(30), || {
        field(&mut master, "persistence", "rdb_bgsave_in_progress") == "1"
    });
    wait_for("the snapshot to end", Duration::from_secs(60), || {
        field(&mut master, "persistence", "rdb_bgsave_in_progress") == "0"
    });
    let took = start.elapsed();
    wait_for("the replica to load", Duration::from_secs(60), || {
        field(&mut replica, "replication", "master_link_status") == "up"
    });
    assert_eq!(reply(&mut replica, &["DBSIZE"]), "4000");
    took
}

/// A diskless load reads its master's payload at the pace its keys load,
/// as Redis's loader reads the socket (a master's diskless sync to a slow
/// replica lasts as long as its load; Redis's own replication unit,
/// "diskless all replicas drop during rdb pipe", kills the replicas half
/// way and expects the master to see them go). Bug: Sluice read the
/// whole payload into memory first, in a fifth of a second here, and
/// loaded it after. The payload is never held whole now either.
#[test]
fn a_diskless_replica_reads_the_payload_as_fast_as_it_loads_as_redis_does() {
    let Some(redis) = RedisServer::start_with(&["--save", ""], None) else { return };
    let oracle = paced_transfer(&redis);
    drop(redis);
    let sluice = TestServer::start_with(&TestServer::default_bin(), &["--save", ""], None);
    let got = paced_transfer(&sluice);
    eprintln!("diskless sync to a replica loading for 2 s: redis {oracle:?}, sluice {got:?}");
    // 2 s of loading, less what the sockets hold (a few MB of 40).
    assert!(oracle > Duration::from_secs(1), "the oracle's transfer took {oracle:?}");
    assert!(got > Duration::from_secs(1), "Sluice's transfer took {got:?}");
}
