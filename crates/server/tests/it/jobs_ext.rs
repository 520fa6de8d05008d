//! Sluice's extensions to the job queue over real TCP (`docs/jobs.md`,
//! "Extensions"): WAITJOB blocked until another client acknowledges, a
//! rate-limited queue's blocked consumer served when its window ends,
//! and every extension's state kept across a restart through an RDB file
//! (still loadable by redis-server), through the AOF, and on a replica.

use std::time::{Duration, Instant};

use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

use crate::common::{cmd, text, wait_for, wait_synced};

fn addjob(c: &mut Client, args: &[&str]) -> String {
    let mut argv = vec!["ADDJOB"];
    argv.extend_from_slice(args);
    let r = text(&cmd(c, &argv));
    assert!(r.starts_with("D-") && r.len() == 40, "{r}");
    r
}

fn blocked_clients(c: &mut Client) -> usize {
    let info = text(&cmd(c, &["INFO", "clients"]));
    let line = info.lines().find(|l| l.starts_with("blocked_clients:")).expect("field");
    line["blocked_clients:".len()..].trim().parse().unwrap()
}

fn wait_blocked(c: &mut Client, n: usize) {
    wait_for("blocked clients", Duration::from_secs(10), || blocked_clients(c) == n);
}

/// SHOW as `name=value` pairs, without what moves with time or names the
/// node.
fn show(c: &mut Client, id: &str) -> String {
    let Frame::Array(Some(items)) = cmd(c, &["SHOW", id]) else { return "gone".into() };
    let mut out = Vec::new();
    for pair in items.chunks(2) {
        let name = text(&pair[0]);
        if ["ttl", "nodes-delivered", "next-requeue-within", "next-awake-within"]
            .contains(&name.as_str())
        {
            continue;
        }
        let v = match &pair[1] {
            Frame::Array(Some(a)) => a.iter().map(text).collect::<Vec<_>>().join(","),
            f => text(f),
        };
        out.push(format!("{name}={v}"));
    }
    out.join(" ")
}

/// WAITJOB parks until another connection acknowledges (or deletes) the
/// job; its TIMEOUT ends with a null; an expired job ends it too.
#[test]
fn waitjob_blocks_until_the_job_is_acknowledged() {
    let s = TestServer::start();
    let mut admin = s.client();
    let mut w = s.client();
    let id = addjob(&mut admin, &["q", "work", "0"]);
    w.send(&["WAITJOB", &id]).unwrap();
    wait_blocked(&mut admin, 1);
    let (quiet, _) = w.read_quiet(Duration::from_millis(100)).unwrap();
    assert!(quiet.is_empty(), "{quiet:?}");
    // Fetching or NACKing the job does not end the wait; acknowledging does.
    cmd(&mut admin, &["GETJOB", "FROM", "q"]);
    cmd(&mut admin, &["NACK", &id]);
    let (quiet, _) = w.read_quiet(Duration::from_millis(100)).unwrap();
    assert!(quiet.is_empty(), "{quiet:?}");
    assert_eq!(cmd(&mut admin, &["ACKJOB", &id]), Frame::Integer(1));
    assert_eq!(w.read_frame().unwrap(), Frame::Integer(1));
    wait_blocked(&mut admin, 0);

    let id = addjob(&mut admin, &["q", "work", "0"]);
    let t = Instant::now();
    assert_eq!(cmd(&mut w, &["WAITJOB", &id, "TIMEOUT", "150"]), Frame::Array(None));
    assert!(t.elapsed() >= Duration::from_millis(140));
    w.send(&["WAITJOB", &id]).unwrap();
    wait_blocked(&mut admin, 1);
    cmd(&mut admin, &["DELJOB", &id]);
    assert_eq!(w.read_frame().unwrap(), Frame::Integer(1));

    let id = addjob(&mut admin, &["q", "short", "0", "TTL", "1"]);
    let t = Instant::now();
    assert_eq!(cmd(&mut w, &["WAITJOB", &id, "TIMEOUT", "5000"]), Frame::Integer(1));
    assert!(t.elapsed() >= Duration::from_millis(500), "{:?}", t.elapsed());
}

/// A consumer blocked on a queue that used its deliveries for this second
/// is served when the window ends, not before.
#[test]
fn a_rate_limited_queue_serves_its_waiters_when_the_window_ends() {
    let s = TestServer::start();
    let mut admin = s.client();
    let mut c = s.client();
    assert_eq!(text(&cmd(&mut admin, &["QSET", "slow", "RATE", "1"])), "OK");
    addjob(&mut admin, &["slow", "a", "0"]);
    addjob(&mut admin, &["slow", "b", "0"]);
    let t = Instant::now();
    let Frame::Array(Some(first)) = cmd(&mut c, &["GETJOB", "COUNT", "2", "FROM", "slow"]) else {
        panic!()
    };
    assert_eq!(first.len(), 1);
    let Frame::Array(Some(second)) = cmd(&mut c, &["GETJOB", "FROM", "slow"]) else { panic!() };
    assert_eq!(second.len(), 1);
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(800) && took < Duration::from_secs(3), "{took:?}");
}

/// Every extension's state (back-off, dead-letter, unique key, period,
/// the queue's rate and pause), SAVEd, read back by a new server; the
/// file still loads in redis-server.
#[test]
fn extensions_survive_a_restart_through_rdb() {
    let dir = scratch_dir("jobs-ext-rdb");
    let args = ["--dbfilename", "ext.rdb"];
    let s = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
    let mut c = s.client();
    cmd(&mut c, &["SET", "plain", "key"]);
    let ids = extended_jobs(&mut c);
    let before: Vec<String> = ids.iter().map(|id| show(&mut c, id)).collect();
    assert_eq!(text(&cmd(&mut c, &["SAVE"])), "OK");
    drop(c);
    drop(s);
    let s = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
    let mut c = s.client();
    c.wait_loaded();
    check_extended(&mut c, &ids, &before);
    drop(c);
    drop(s);
    if let Some(redis) = RedisServer::start_with(
        &["--dir", dir.to_str().unwrap(), "--dbfilename", "ext.rdb"],
        Some(&dir),
    ) {
        let mut r = redis.client();
        r.wait_loaded();
        assert_eq!(text(&cmd(&mut r, &["GET", "plain"])), "key");
        assert_eq!(text(&cmd(&mut r, &["DBSIZE"])), "1");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same through the AOF, before and after a rewrite (whose base is an
/// RDB preamble).
#[test]
fn extensions_survive_a_restart_through_the_aof() {
    let dir = scratch_dir("jobs-ext-aof");
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let bin = TestServer::default_bin();
    let s = TestServer::start_with(&bin, &args, Some(&dir));
    let mut c = s.client();
    c.wait_loaded();
    let ids = extended_jobs(&mut c);
    let before: Vec<String> = ids.iter().map(|id| show(&mut c, id)).collect();
    drop(c);
    drop(s);
    let s = TestServer::start_with(&bin, &args, Some(&dir));
    let mut c = s.client();
    c.wait_loaded();
    check_extended(&mut c, &ids, &before);
    cmd(&mut c, &["BGREWRITEAOF"]);
    wait_for("the rewrite", Duration::from_secs(20), || {
        crate::common::info(&mut c, "persistence", "aof_rewrite_in_progress").as_deref()
            == Some("0")
            && crate::common::info(&mut c, "persistence", "aof_last_bgrewrite_status").as_deref()
                == Some("ok")
    });
    drop(c);
    drop(s);
    let s = TestServer::start_with(&bin, &args, Some(&dir));
    let mut c = s.client();
    c.wait_loaded();
    check_extended(&mut c, &ids, &before);
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression: an AOF rewrite with `aof-use-rdb-preamble no` wrote its
/// base of commands for the keys only, so the jobs and queue settings
/// (which the snapshot keeps in AUX fields) were gone after a restart.
/// Both preamble settings, through BGREWRITEAOF and through `CONFIG SET
/// appendonly yes` (whose first base is a rewrite too); the server is
/// killed after the rewrite, with nothing in the incremental file, so the
/// restart reads every job from the rewritten base.
#[test]
fn jobs_survive_an_aof_rewrite_without_the_rdb_preamble() {
    let bin = TestServer::default_bin();
    for preamble in ["no", "yes"] {
        for turn_on in [false, true] {
            let dir = scratch_dir("jobs-aof-rewrite");
            let mut args = vec!["--aof-use-rdb-preamble", preamble];
            if !turn_on {
                args.extend(["--appendonly", "yes"]);
            }
            let s = TestServer::start_with(&bin, &args, Some(&dir));
            let mut c = s.client();
            c.wait_loaded();
            cmd(&mut c, &["SET", "plain", "key"]);
            let mut ids = extended_jobs(&mut c);
            ids.push(addjob(&mut c, &["plain", "queued", "0"]));
            let active = addjob(&mut c, &["plain2", "active", "0", "RETRY", "600"]);
            cmd(&mut c, &["GETJOB", "FROM", "plain2"]);
            assert_eq!(cmd(&mut c, &["NACK", &active]), Frame::Integer(1));
            cmd(&mut c, &["GETJOB", "FROM", "plain2"]);
            ids.push(active);
            ids.push(addjob(&mut c, &["plain3", "delayed", "0", "DELAY", "600"]));
            let before: Vec<String> = ids.iter().map(|id| show(&mut c, id)).collect();
            assert!(before[5].contains("state=active") && before[5].contains("nacks=1"));
            if turn_on {
                assert_eq!(text(&cmd(&mut c, &["CONFIG", "SET", "appendonly", "yes"])), "OK");
            } else {
                cmd(&mut c, &["BGREWRITEAOF"]);
            }
            wait_for("the rewrite", Duration::from_secs(20), || {
                let f = |c: &mut Client, k| crate::common::info(c, "persistence", k);
                f(&mut c, "aof_rewrite_in_progress").as_deref() == Some("0")
                    && f(&mut c, "aof_rewrite_scheduled").as_deref() == Some("0")
                    && f(&mut c, "aof_last_bgrewrite_status").as_deref() == Some("ok")
                    && f(&mut c, "aof_enabled").as_deref() == Some("1")
            });
            drop(c);
            drop(s); // SIGKILL: no shutdown save
            let _ = std::fs::remove_file(dir.join("dump.rdb"));
            let files: Vec<(String, u64)> = std::fs::read_dir(dir.join("appendonlydir"))
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len())
                })
                .collect();
            let base = if preamble == "yes" { ".base.rdb" } else { ".base.aof" };
            assert!(files.iter().any(|(n, _)| n.ends_with(base)), "{files:?}");
            assert!(files.iter().all(|(n, len)| !n.ends_with(".incr.aof") || *len == 0));
            let s = TestServer::start_with(&bin, &["--appendonly", "yes"], Some(&dir));
            let mut c = s.client();
            c.wait_loaded();
            let what = format!("preamble {preamble}, turned on: {turn_on}");
            assert_eq!(text(&cmd(&mut c, &["GET", "plain"])), "key", "{what}");
            check_extended(&mut c, &ids[..4], &before[..4]);
            let after: Vec<String> = ids.iter().map(|id| show(&mut c, id)).collect();
            assert_eq!(after, before, "{what}");
            assert_eq!(cmd(&mut c, &["QLEN", "plain"]), Frame::Integer(1), "{what}");
            drop(c);
            drop(s);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// DEBUG RELOAD (save, empty, load) keeps every job in its state and the
/// queue settings; jobs left after the load are the file's, not copies.
#[test]
fn jobs_survive_debug_reload() {
    let dir = scratch_dir("jobs-reload");
    let s = TestServer::start_with(
        &TestServer::default_bin(),
        &["--enable-debug-command", "yes"],
        Some(&dir),
    );
    let mut c = s.client();
    let ids = extended_jobs(&mut c);
    let before: Vec<String> = ids.iter().map(|id| show(&mut c, id)).collect();
    let jobs = |c: &mut Client| text(&cmd(c, &["INFO", "jobs"]));
    let count = jobs(&mut c);
    assert_eq!(text(&cmd(&mut c, &["DEBUG", "RELOAD"])), "OK");
    check_extended(&mut c, &ids, &before);
    assert_eq!(jobs(&mut c), count);
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Sluice replica holds the same extended jobs and queue settings: the
/// ones made before the sync (RDB) and after it (the stream).
#[test]
fn a_replica_holds_the_extensions() {
    let master = TestServer::start_with(
        &TestServer::default_bin(),
        &["--repl-diskless-sync-delay", "0"],
        None,
    );
    let mut m = master.client();
    let pre = addjob(&mut m, &["pq", "pre", "0", "UNIQUE", "pre", "EVERY", "600"]);
    cmd(&mut m, &["QSET", "pq", "RATE", "9"]);
    let replica = TestServer::start();
    let mut r = replica.client();
    let port = master.port().to_string();
    assert_eq!(text(&cmd(&mut r, &["REPLICAOF", "127.0.0.1", &port])), "OK");
    wait_synced(&mut m, &mut r);
    let mut ids = extended_jobs(&mut m);
    ids.push(pre);
    wait_synced(&mut m, &mut r);
    for id in &ids {
        assert_eq!(show(&mut m, id), show(&mut r, id), "{id}");
    }
    for q in ["q", "pq", "dead", "held"] {
        assert_eq!(settings(&mut m, q), settings(&mut r, q), "{q}");
    }
    assert_eq!(settings(&mut r, "q"), "len=1 pause=none rate=5");
    assert_eq!(settings(&mut r, "pq"), "len=1 pause=none rate=9");
    assert_eq!(settings(&mut r, "held"), "len=0 pause=in");
}

/// QSTAT's length, pause and rate.
fn settings(c: &mut Client, q: &str) -> String {
    let Frame::Array(Some(items)) = cmd(c, &["QSTAT", q]) else { return "none".into() };
    let mut out = Vec::new();
    for pair in items.chunks(2) {
        let name = text(&pair[0]);
        if ["len", "pause", "rate"].contains(&name.as_str()) {
            out.push(format!("{name}={}", text(&pair[1])));
        }
    }
    out.join(" ")
}

/// Jobs using every extension, in the states they reach: one NACKed into
/// its back-off, one dead-lettered, a periodic one between runs, a unique
/// one; a rate-limited queue and a paused one.
fn extended_jobs(c: &mut Client) -> Vec<String> {
    let backoff = addjob(c, &["q", "b", "0", "BACKOFF", "60000", "600000"]);
    let dead = addjob(c, &["q", "d", "0", "DEADLETTER", "dead", "1"]);
    let periodic = addjob(c, &["p", "p", "0", "EVERY", "3600"]);
    let unique = addjob(c, &["q", "u", "0", "UNIQUE", "the-key"]);
    assert_eq!(addjob(c, &["x", "other", "0", "UNIQUE", "the-key"]), unique);
    cmd(c, &["GETJOB", "COUNT", "2", "FROM", "q"]);
    assert_eq!(cmd(c, &["NACK", &backoff, &dead]), Frame::Integer(2));
    cmd(c, &["GETJOB", "FROM", "p"]);
    assert_eq!(cmd(c, &["ACKJOB", &periodic]), Frame::Integer(1));
    assert_eq!(text(&cmd(c, &["QSET", "q", "RATE", "5"])), "OK");
    assert_eq!(text(&cmd(c, &["PAUSE", "held", "in"])), "in");
    vec![backoff, dead, periodic, unique]
}

fn check_extended(c: &mut Client, ids: &[String], before: &[String]) {
    let after: Vec<String> = ids.iter().map(|id| show(c, id)).collect();
    assert_eq!(after, before);
    assert!(before[0].contains("state=active nacks=1") || before[0].contains("nacks=1"));
    assert!(before[0].contains("backoff=60000,600000"), "{}", before[0]);
    assert!(before[1].contains("queue=dead") && before[1].contains("dead-lettered-from=q"));
    assert!(before[2].contains("state=active") && before[2].contains("every=3600"));
    assert!(before[3].contains("unique=the-key"));
    assert_eq!(addjob(c, &["y", "again", "0", "UNIQUE", "the-key"]), ids[3]);
    let Frame::Array(Some(stat)) = cmd(c, &["QSTAT", "q"]) else { panic!() };
    assert_eq!(text(&stat[20]), "rate");
    assert_eq!(stat[21], Frame::Integer(5));
    assert_eq!(text(&cmd(c, &["PAUSE", "held", "state"])), "in");
    assert_eq!(cmd(c, &["QLEN", "dead"]), Frame::Integer(1));
}
