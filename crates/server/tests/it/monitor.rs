//! MONITOR against redis-server 7.0: the same commands from another
//! connection must produce the same monitor lines once the parts that
//! differ between two servers (the timestamp, the client's port) are
//! masked.

use std::path::Path;
use std::time::Duration;

use testkit::{Client, RedisServer, TestServer};

/// `+1700000000.123456 [0 127.0.0.1:5555] "GET" "k"` →
/// `+T [0 127.0.0.1:P] "GET" "k"`.
fn mask(line: &str) -> String {
    let Some(rest) = line.strip_prefix('+') else { return line.to_string() };
    let Some((ts, rest)) = rest.split_once(' ') else { return line.to_string() };
    assert!(ts.len() > 7 && ts.as_bytes()[ts.len() - 7] == b'.', "timestamp {ts}");
    let rest = match (rest.find("127.0.0.1:"), rest.find(']')) {
        (Some(a), Some(b)) if a < b => format!("{}127.0.0.1:P{}", &rest[..a], &rest[b..]),
        _ => rest.to_string(),
    };
    format!("+T {rest}")
}

fn run(port: u16) -> Vec<String> {
    let mut m = Client::connect(port).unwrap();
    let mut a = Client::connect(port).unwrap();
    let mut log = Vec::new();
    log.push(String::from_utf8_lossy(&m.cmd(&["MONITOR"]).unwrap()).into_owned());
    for cmd in [
        &["SET", "k", "v w\"\\\n\u{7}"][..],
        &["GET", "k"],
        &["AUTH", "secret"],
        &["AUTH", "user", "secret"],
        &["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "n"],
        // MIGRATE's credentials are redacted too (no key: +NOKEY at once).
        &["MIGRATE", "127.0.0.1", "1", "", "0", "100", "AUTH", "pw", "KEYS", "nokey"],
        &["MIGRATE", "127.0.0.1", "1", "", "0", "100", "AUTH2", "u", "pw", "KEYS", "nokey"],
        &["CONFIG", "GET", "hz"],
        &["CLIENT", "LIST"],
        &["MULTI"],
        &["INCR", "n"],
        &["SET", "x", "y"],
        &["EXEC"],
        &["SELECT", "3"],
        &["GET", "k"],
        &["NOSUCH"],
        &["GET"],
        &["SET", "k", "v", "BAD"],
        &["PUBLISH", "c", "m"],
        &["BLPOP", "nokey", "0.01"],
        &["PING"],
    ] {
        a.cmd(cmd).unwrap();
    }
    a.cmd(&["SELECT", "0"]).unwrap();
    let read_lines = |m: &mut Client, log: &mut Vec<String>| {
        std::thread::sleep(Duration::from_millis(100));
        let (got, _) = m.read_quiet(Duration::from_millis(200)).unwrap();
        let text = String::from_utf8_lossy(&got).into_owned();
        log.extend(text.split("\r\n").filter(|l| !l.is_empty()).map(mask));
    };
    read_lines(&mut m, &mut log);
    // The monitor itself may ping but not read keys; a second MONITOR
    // gets no reply at all.
    m.send(&["GET", "k"]).unwrap();
    m.send(&["PING"]).unwrap();
    m.send(&["MONITOR"]).unwrap();
    read_lines(&mut m, &mut log);
    log.push(String::from_utf8_lossy(&m.cmd(&["RESET"]).unwrap()).into_owned());
    a.cmd(&["PING"]).unwrap();
    let (after, _) = m.read_quiet(Duration::from_millis(200)).unwrap();
    log.push(format!("after RESET: {:?}", String::from_utf8_lossy(&after)));
    log
}

#[test]
fn monitor_lines_match_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(Path::new(env!("CARGO_BIN_EXE_sluice-server")));
    let want = run(redis.port());
    let got = run(sluice.port());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
    assert_eq!(got.len(), want.len(), "{got:#?}");
    if std::env::var_os("MONITOR_DUMP").is_some() {
        eprintln!("{}", want.join("\n"));
    }
}
