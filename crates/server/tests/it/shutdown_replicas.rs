//! SHUTDOWN and SIGTERM on a master whose replica lags, against
//! redis-server 7.0.15 (each server replicating to one of its own kind):
//! the master waits for the replica (`shutdown-timeout`), shows
//! `shutdown_in_milliseconds`, blocks the SHUTDOWN clients, holds writes,
//! and exits once the replica caught up or the time is up; `SHUTDOWN
//! ABORT` cancels the wait and the blocked clients get Redis's error.
//! The replica is held with SIGSTOP so that it cannot acknowledge.

use std::path::Path;
use std::time::{Duration, Instant};

use testkit::{scratch_dir, Client, RedisServer, ServerProc, TestServer};

fn have_redis() -> bool {
    RedisServer::start().is_some()
}

fn spawn(bin: &Path, dir: &Path) -> ServerProc {
    ServerProc::spawn_raw(
        bin,
        &|port| {
            ["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
                .iter()
                .map(|s| s.to_string())
                .collect()
        },
        dir,
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn info_field(c: &mut Client, field: &str) -> Option<String> {
    let raw = c.cmd(&["INFO", "everything"]).ok()?;
    let t = text(&raw);
    t.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// The messages of the shutdown's log lines (Redis's and Sluice's agree
/// on these words), in order.
fn shutdown_log(log: &str) -> Vec<String> {
    const KEEP: &[&str] = &[
        "User requested shutdown",
        "Waiting for replicas before shutting down",
        "replicas are in sync when shutting down",
        "Lagging replica",
        "Shutdown manually aborted",
        "Errors trying to shut down",
        "ready to exit, bye bye",
    ];
    log.lines()
        .filter_map(|l| KEEP.iter().find(|k| l.contains(*k)))
        .map(|k| k.to_string())
        .collect()
}

/// A master and its replica, in sync on `k = 1`, the replica stopped and
/// `INCR k` done on the master: the replica lags.
struct Pair {
    master: ServerProc,
    replica: ServerProc,
    m: Client,
}

fn lagging_pair(bin: &Path, dir: &Path, timeout_s: &str) -> Pair {
    let mdir = dir.join("m");
    let rdir = dir.join("r");
    std::fs::create_dir_all(&mdir).unwrap();
    std::fs::create_dir_all(&rdir).unwrap();
    let master = spawn(bin, &mdir);
    let replica = spawn(bin, &rdir);
    let mut m = master.client();
    let mut r = replica.client();
    m.cmd(&["CONFIG", "SET", "shutdown-timeout", timeout_s]).unwrap();
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port().to_string()]).unwrap();
    m.cmd(&["SET", "k", "1"]).unwrap();
    let synced = wait_until(Duration::from_secs(10), || {
        info_field(&mut r, "master_link_status").as_deref() == Some("up")
            && r.cmd(&["GET", "k"]).is_ok_and(|b| b == b"$1\r\n1\r\n")
    });
    assert!(synced, "the replica did not sync");
    signal(replica.pid(), "-STOP");
    std::thread::sleep(Duration::from_millis(50));
    m.cmd(&["INCR", "k"]).unwrap();
    Pair { master, replica, m }
}

/// SHUTDOWN waits for the stopped replica, then exits when it resumes;
/// the replica has the last write.
fn waits_then_exits(bin: &Path, how: &str) -> Vec<String> {
    let dir = scratch_dir("shutdown-lag");
    let Pair { mut master, replica, mut m } = lagging_pair(bin, &dir, "300");
    let mut out = Vec::new();
    let mut sd = master.client();
    match how {
        "sigterm" => signal(master.pid(), "-TERM"),
        _ => sd.send(&["SHUTDOWN"]).unwrap(),
    }
    let waiting = wait_until(Duration::from_secs(5), || {
        info_field(&mut m, "shutdown_in_milliseconds").is_some_and(|v| v != "0")
    });
    out.push(format!("waiting: {waiting}"));
    let blocked = info_field(&mut m, "blocked_clients").unwrap_or_default();
    out.push(format!("blocked_clients: {blocked}"));
    // Writes are held meanwhile; reads are served.
    out.push(format!("GET: {:?}", text(&m.cmd(&["GET", "k"]).unwrap())));
    let mut w = master.client();
    w.send(&["SET", "other", "x"]).unwrap();
    let (held, _) = w.read_quiet(Duration::from_millis(300)).unwrap();
    out.push(format!("write while waiting: {:?}", text(&held)));
    signal(replica.pid(), "-CONT");
    let exited = wait_until(Duration::from_secs(20), || !master.is_running());
    out.push(format!("master exited: {exited}"));
    let mut r = replica.client();
    out.push(format!("replica k: {:?}", text(&r.cmd(&["GET", "k"]).unwrap())));
    out.extend(shutdown_log(&master.log_text()));
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Two SHUTDOWNs wait; SHUTDOWN ABORT cancels: both get the error, and
/// the server takes writes again.
fn aborted(bin: &Path) -> Vec<String> {
    let dir = scratch_dir("shutdown-abort");
    let Pair { master, replica, mut m } = lagging_pair(bin, &dir, "10");
    let mut out = Vec::new();
    let mut rd1 = master.client();
    let mut rd2 = master.client();
    rd1.send(&["SHUTDOWN"]).unwrap();
    rd2.send(&["SHUTDOWN"]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    out.push(format!("blocked_clients: {:?}", info_field(&mut m, "blocked_clients")));
    out.push(format!("abort: {:?}", text(&m.cmd(&["SHUTDOWN", "ABORT"]).unwrap())));
    for rd in [&mut rd1, &mut rd2] {
        out.push(format!("blocked one: {:?}", text(&rd.read_reply().unwrap())));
    }
    out.push(format!("after: {:?}", info_field(&mut m, "shutdown_in_milliseconds")));
    out.push(format!("write: {:?}", text(&m.cmd(&["SET", "after", "1"]).unwrap())));
    out.push(format!("abort again: {:?}", text(&m.cmd(&["SHUTDOWN", "ABORT"]).unwrap())));
    signal(replica.pid(), "-CONT");
    out.extend(shutdown_log(&master.log_text()));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// `shutdown-timeout 1`: the master exits after a second although the
/// replica still lags, and says so.
fn times_out(bin: &Path) -> Vec<String> {
    let dir = scratch_dir("shutdown-timeout");
    let Pair { mut master, replica, m } = lagging_pair(bin, &dir, "1");
    drop(m);
    signal(master.pid(), "-TERM");
    let mut out = Vec::new();
    let exited = wait_until(Duration::from_secs(10), || !master.is_running());
    out.push(format!("master exited: {exited}"));
    signal(replica.pid(), "-CONT");
    let mut r = replica.client();
    // The INCR waits in the stopped replica's socket, before the master's
    // hang-up: once the replica has seen the hang-up it has applied the
    // INCR (a GET sent at once races the replica's read of its master).
    let gone = wait_until(Duration::from_secs(10), || {
        info_field(&mut r, "master_link_status").as_deref() == Some("down")
    });
    out.push(format!("replica saw the master go: {gone}"));
    out.push(format!("replica k: {:?}", text(&r.cmd(&["GET", "k"]).unwrap())));
    out.extend(shutdown_log(&master.log_text()));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn shutdown_waits_for_a_lagging_replica_like_redis() {
    if !have_redis() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    let sluice = TestServer::default_bin();
    for how in ["shutdown", "sigterm"] {
        let want = waits_then_exits(redis, how);
        let got = waits_then_exits(&sluice, how);
        assert_eq!(got, want, "{how}");
    }
}

#[test]
fn shutdown_abort_releases_blocked_shutdowns_like_redis() {
    if !have_redis() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    let sluice = TestServer::default_bin();
    assert_eq!(aborted(&sluice), aborted(redis));
}

#[test]
fn shutdown_timeout_gives_up_on_a_lagging_replica_like_redis() {
    if !have_redis() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    let sluice = TestServer::default_bin();
    let mut got = times_out(&sluice);
    let mut want = times_out(redis);
    // The replica must hold the INCR the master acknowledged before it
    // left. Redis's replica usually does too, but on a loaded machine it
    // was once seen without it (k = 1), so Redis's value is not compared:
    // Sluice's must be 2 every time.
    const LAST_WRITE: &str = "replica k: \"$1\\r\\n2\\r\\n\"";
    let k = got.iter().position(|l| l.starts_with("replica k:")).expect("k line");
    assert_eq!(got.remove(k), LAST_WRITE, "{got:?}");
    want.retain(|l| !l.starts_with("replica k:"));
    assert_eq!(got, want);
}
