//! Two servers in one process (the `server` library's `Server::start`):
//! each serves its own data, CONFIG SET on one leaves the other alone,
//! start-up options (`rename-command`) are each server's own, and each
//! one's files are in its own `dir`. Before the host interface, the log
//! level, the LFU parameters, the renames and the AOF were process
//! statics, so the second server saw the first one's; before every path
//! was joined with the server's `dir`, the files were the process's
//! working directory's, so the servers had to be told apart by file
//! names and the test changed the process's directory.
//!
//! Here both servers use the same relative names (`appenddirname`,
//! `dbfilename`, `logfile`) in two directories, and CONFIG SET dir on one
//! (relative to its current dir, as Redis's chdir makes it) moves that
//! one's files and no one else's. `config_set_dir_as_redis` checks the
//! same against redis-server, process to process.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::subsystems::log::Logger;
use server::Server;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

fn start(args: &[&str]) -> Server {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    for _ in 0..5 {
        let port = testkit::free_port().to_string();
        let mut a = vec!["--port".to_string(), port];
        a.extend(args.iter().cloned());
        let config =
            engine::subsystems::config::from_args(&a, engine::commands::table()).expect("config");
        let log = Arc::new(Logger::default());
        log.set_level(&config.loglevel);
        // A relative log file is in the server's dir, from the start.
        log.set_dir(&config.dir);
        log.set_file(&config.logfile).expect("log file");
        if let Ok(s) = Server::start(config, log) {
            return s;
        }
    }
    panic!("no free port for a server");
}

fn client(s: &Server) -> Client {
    let mut c = Client::connect(s.port()).expect("connect");
    c.set_timeout(Duration::from_secs(10));
    c.wait_loaded();
    c
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

/// The `i`th element of an array reply of bulk strings, as text.
fn bulk_at(reply: &[u8], i: usize) -> String {
    let t = String::from_utf8_lossy(reply);
    t.split("\r\n")
        .filter(|l| !l.starts_with('*') && !l.starts_with('$'))
        .nth(i)
        .unwrap_or("")
        .to_string()
}

/// Everything in the incremental AOF files under `dir`.
fn aof_text(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).expect("aof dir").flatten() {
        if e.file_name().to_string_lossy().ends_with(".incr.aof") {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).expect("aof")));
        }
    }
    out
}

#[test]
fn two_servers_in_one_process_keep_their_own_data_config_and_files() {
    let cwd = std::env::current_dir().expect("cwd");
    let (da, db) = (scratch_dir("two-a"), scratch_dir("two-b"));
    std::fs::create_dir_all(da.join("sub")).expect("sub dir");
    // The same relative names for both: each server's `dir` tells them
    // apart.
    let files = |dir: &Path| -> Vec<String> {
        [
            "--dir",
            dir.to_str().unwrap(),
            "--appendonly",
            "yes",
            "--appenddirname",
            "aof",
            "--dbfilename",
            "dump.rdb",
            "--logfile",
            "server.log",
            "--save",
            "",
            "--maxmemory-policy",
            "allkeys-lfu",
            "--enable-protected-configs",
            "yes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let mut args_a = files(&da);
    args_a.extend(["--appendfsync", "always", "--rename-command", "KEYS", ""].map(String::from));
    let a = start(&args_a.iter().map(String::as_str).collect::<Vec<_>>());
    let mut ca = client(&a);
    let mut args_b = files(&db);
    args_b.extend(["--appendfsync", "no"].map(String::from));
    let b = start(&args_b.iter().map(String::as_str).collect::<Vec<_>>());
    assert_ne!(a.port(), b.port());
    let mut cb = client(&b);

    // Each serves its own data.
    assert_eq!(text(ca.cmd(&["SET", "only-a", "1"]).unwrap()), "+OK\r\n");
    assert_eq!(text(cb.cmd(&["SET", "only-b", "2"]).unwrap()), "+OK\r\n");
    assert_eq!(text(ca.cmd(&["GET", "only-b"]).unwrap()), "$-1\r\n");
    assert_eq!(text(cb.cmd(&["GET", "only-a"]).unwrap()), "$-1\r\n");
    assert_eq!(text(ca.cmd(&["DBSIZE"]).unwrap()), ":1\r\n");

    // rename-command is A's alone.
    assert!(text(ca.cmd(&["KEYS", "*"]).unwrap()).starts_with("-ERR unknown command"));
    assert_eq!(text(cb.cmd(&["KEYS", "*"]).unwrap()), "*1\r\n$6\r\nonly-b\r\n");

    // CONFIG SET loglevel on A: B keeps its level, and its log.
    assert_eq!(text(ca.cmd(&["CONFIG", "SET", "loglevel", "warning"]).unwrap()), "+OK\r\n");
    assert_eq!(bulk_at(&cb.cmd(&["CONFIG", "GET", "loglevel"]).unwrap(), 1), "notice");
    assert_eq!(bulk_at(&ca.cmd(&["CONFIG", "GET", "loglevel"]).unwrap(), 1), "warning");

    // lfu-log-factor 0 on A: every access counts there; B's default
    // factor (10) makes a hundred accesses count far less.
    assert_eq!(text(ca.cmd(&["CONFIG", "SET", "lfu-log-factor", "0"]).unwrap()), "+OK\r\n");
    for _ in 0..100 {
        ca.cmd(&["GET", "only-a"]).unwrap();
        cb.cmd(&["GET", "only-b"]).unwrap();
    }
    let freq = |c: &mut Client, k: &str| -> i64 {
        let r = text(c.cmd(&["OBJECT", "FREQ", k]).unwrap());
        r.trim_start_matches(':').trim().parse().expect("freq")
    };
    assert!(freq(&mut ca, "only-a") > 100, "A counts every access");
    assert!(freq(&mut cb, "only-b") < 50, "B keeps its own factor");

    // Each AOF holds only its own server's writes (A's are acknowledged
    // on disk; B's are written before the reply too).
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut ta, mut tb) = (String::new(), String::new());
    while Instant::now() < deadline {
        ta = aof_text(&da.join("aof"));
        tb = aof_text(&db.join("aof"));
        if ta.contains("only-a") && tb.contains("only-b") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ta.contains("only-a") && !ta.contains("only-b"), "A's AOF: {ta:?}");
    assert!(tb.contains("only-b") && !tb.contains("only-a"), "B's AOF: {tb:?}");

    // SAVE writes each one's dbfilename into its own dir.
    assert_eq!(text(ca.cmd(&["SAVE"]).unwrap()), "+OK\r\n");
    assert_eq!(text(cb.cmd(&["SAVE"]).unwrap()), "+OK\r\n");
    assert!(da.join("dump.rdb").is_file() && db.join("dump.rdb").is_file());

    // CONFIG SET dir on A, relative to its dir: CONFIG GET answers the
    // new absolute dir, A's next save lands there, B's dir, B's files
    // and the process's working directory stay.
    assert_eq!(text(ca.cmd(&["CONFIG", "SET", "dir", "sub"]).unwrap()), "+OK\r\n");
    let sub = std::fs::canonicalize(da.join("sub")).unwrap();
    assert_eq!(bulk_at(&ca.cmd(&["CONFIG", "GET", "dir"]).unwrap(), 1), sub.to_str().unwrap());
    let b_dir = std::fs::canonicalize(&db).unwrap();
    assert_eq!(bulk_at(&cb.cmd(&["CONFIG", "GET", "dir"]).unwrap(), 1), b_dir.to_str().unwrap());
    assert_eq!(text(ca.cmd(&["SET", "after-move", "1"]).unwrap()), "+OK\r\n");
    assert_eq!(text(ca.cmd(&["SAVE"]).unwrap()), "+OK\r\n");
    assert!(sub.join("dump.rdb").is_file(), "A's save after CONFIG SET dir is in sub/");
    assert!(!db.join("sub").exists());
    assert_eq!(std::env::current_dir().unwrap(), cwd, "the process's directory is not changed");

    // Each log is its own server's.
    drop((ca, cb));
    a.stop();
    // B still serves after A stopped.
    let mut cb = client(&b);
    assert_eq!(text(cb.cmd(&["GET", "only-b"]).unwrap()), "$1\r\n2\r\n");
    drop(cb);
    b.stop();
    // A's relative log file followed its dir (as Redis's, opened afresh
    // for every line): its exit line is in sub/server.log.
    let la = std::fs::read_to_string(sub.join("server.log")).unwrap_or_default();
    let lb = std::fs::read_to_string(db.join("server.log")).unwrap_or_default();
    assert!(lb.contains("Sluice is now ready to exit"), "B's log: {lb}");
    // A logs at warning after its CONFIG SET: its exit line (a warning)
    // is there, B's notice lines are not.
    assert!(la.contains("Sluice is now ready to exit"), "A's log: {la}");
    assert_eq!(la.matches("ready to exit").count(), 1, "A's log has only A's exit: {la}");
    let _ = std::fs::remove_dir_all(&da);
    let _ = std::fs::remove_dir_all(&db);
}

/// What a client sees of CONFIG SET dir on the server at `port`, started
/// in `base`: CONFIG GET dir (with `base` as `BASE`), the replies to
/// relative, missing, empty and not-a-directory values, and the files
/// under `base` after a SAVE.
fn observe_dir_changes(port: u16, base: &Path) -> Vec<String> {
    let base = std::fs::canonicalize(base).unwrap();
    let root = base.to_str().unwrap().to_string();
    let mut c = Client::connect(port).expect("connect");
    let mut seen = Vec::new();
    let mut run = |c: &mut Client, args: &[&str]| {
        let r = c.cmd(args).unwrap();
        // The directories' names differ in length: CONFIG GET's value
        // is compared as text, without its length.
        let r = if args.starts_with(&["CONFIG", "GET"]) { bulk_at(&r, 1) } else { text(r) };
        seen.push(format!("{args:?} => {}", r.replace(&root, "BASE")));
    };
    for args in [
        &["CONFIG", "GET", "dir"][..],
        &["CONFIG", "SET", "dir", "sub"],
        &["CONFIG", "GET", "dir"],
        &["CONFIG", "SET", "dir", "deeper"],
        &["CONFIG", "GET", "dir"],
        &["CONFIG", "SET", "dir", "missing"],
        &["CONFIG", "SET", "dir", "plain"],
        &["CONFIG", "SET", "dir", ""],
        &["CONFIG", "GET", "dir"],
        &["SET", "k", "v"],
        &["SAVE"],
    ] {
        run(&mut c, args);
    }
    // The files, but the harness's own capture of the server's output.
    let mut files = Vec::new();
    let mut stack = vec![base.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(&base).unwrap().to_string_lossy().into_owned();
            let harness = rel.starts_with("redis-") || rel.starts_with("sluice-");
            if p.is_dir() {
                stack.push(p);
            } else if !harness {
                files.push(rel);
            }
        }
    }
    files.sort();
    seen.push(format!("files: {files:?}"));
    seen
}

/// CONFIG SET dir as redis-server does it: relative to the current dir,
/// CONFIG GET answering the absolute path, the same errors, and the RDB
/// file and a relative log file following the new dir.
#[test]
fn config_set_dir_as_redis() {
    let flags = ["--enable-protected-configs", "yes", "--logfile", "server.log"];
    let prepare = |tag: &str| {
        let base = scratch_dir(tag);
        std::fs::create_dir_all(base.join("sub/deeper")).unwrap();
        std::fs::write(base.join("sub/deeper/plain"), b"not a directory").unwrap();
        base
    };
    let rbase = prepare("dir-redis");
    let Some(redis) = RedisServer::start_with(&flags, Some(&rbase)) else { return };
    let want = observe_dir_changes(redis.port(), &rbase);
    let sbase = prepare("dir-sluice");
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    let sluice = TestServer::start_with(bin, &flags, Some(&sbase));
    let got = observe_dir_changes(sluice.port(), &sbase);
    drop((redis, sluice));
    let _ = std::fs::remove_dir_all(&rbase);
    let _ = std::fs::remove_dir_all(&sbase);
    assert_eq!(got, want);
}
