//! Two servers in one process (the `server` library's `Server::start`):
//! each serves its own data, CONFIG SET on one leaves the other alone,
//! start-up options (`rename-command`) are each server's own, and each
//! one's AOF holds only its own writes. Before the host interface, the
//! log level, the LFU parameters, the renames and the AOF were process
//! statics, so the second server saw the first one's.
//!
//! Files are relative to the process's working directory, so this test
//! is alone in its binary: it moves into a scratch directory, and the
//! servers' files are told apart by `appenddirname`, `dbfilename` and
//! `logfile`. Temporary files are named after the process, as Redis's
//! are, so the second server starts once the first one's start-up
//! rewrite is done (joining every path with the server's own `dir` is a
//! known debt, `docs/architecture.md`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::subsystems::log::Logger;
use server::Server;
use testkit::Client;

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
fn aof_text(dir: &str) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).expect("aof dir").flatten() {
        if e.file_name().to_string_lossy().ends_with(".incr.aof") {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).expect("aof")));
        }
    }
    out
}

#[test]
fn two_servers_in_one_process_keep_their_own_data_config_and_aof() {
    let scratch = std::env::temp_dir().join(format!("sluice-two-servers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch");
    std::env::set_current_dir(&scratch).expect("chdir");

    let a = start(&[
        "--appendonly",
        "yes",
        "--appenddirname",
        "aof-a",
        "--appendfsync",
        "always",
        "--dbfilename",
        "a.rdb",
        "--logfile",
        "a.log",
        "--save",
        "",
        "--rename-command",
        "KEYS",
        "",
        "--maxmemory-policy",
        "allkeys-lfu",
    ]);
    let mut ca = client(&a);
    let b = start(&[
        "--appendonly",
        "yes",
        "--appenddirname",
        "aof-b",
        "--appendfsync",
        "no",
        "--dbfilename",
        "b.rdb",
        "--logfile",
        "b.log",
        "--save",
        "",
        "--maxmemory-policy",
        "allkeys-lfu",
    ]);
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
        ta = aof_text("aof-a");
        tb = aof_text("aof-b");
        if ta.contains("only-a") && tb.contains("only-b") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ta.contains("only-a") && !ta.contains("only-b"), "A's AOF: {ta:?}");
    assert!(tb.contains("only-b") && !tb.contains("only-a"), "B's AOF: {tb:?}");

    // Each log is its own server's: A's role lines went to a.log only.
    drop((ca, cb));
    a.stop();
    // B still serves after A stopped.
    let mut cb = client(&b);
    assert_eq!(text(cb.cmd(&["GET", "only-b"]).unwrap()), "$1\r\n2\r\n");
    drop(cb);
    b.stop();
    let la = std::fs::read_to_string("a.log").unwrap_or_default();
    let lb = std::fs::read_to_string("b.log").unwrap_or_default();
    assert!(lb.contains("Sluice is now ready to exit"), "B's log: {lb}");
    // A logs at warning after its CONFIG SET: its exit line (a warning)
    // is there, B's notice lines are not.
    assert!(la.contains("Sluice is now ready to exit"), "A's log: {la}");
    assert_eq!(la.matches("ready to exit").count(), 1, "A's log has only A's exit: {la}");
    let _ = std::fs::remove_dir_all(&scratch);
}
