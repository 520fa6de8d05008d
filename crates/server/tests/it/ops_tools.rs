//! The operators' tools, unchanged, against Sluice and redis-server
//! 7.0.15 holding the same data: `redis-cli` interactive (in a
//! pseudo-terminal, with its hints), `--pipe`, `--bigkeys`, `--memkeys`,
//! `--scan --pattern`, `--latency`, `--stat`, and `redis-benchmark`'s
//! default test list. Outputs are compared in shape: exactly where they
//! depend only on the data, by pattern where they carry timings.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::{Client, RedisServer, TestServer};

const CLI: &str = "/usr/bin/redis-cli";
const BENCH: &str = "/usr/bin/redis-benchmark";

/// Both servers with the same keys; `None` when the oracle or the tools
/// are missing.
fn both() -> Option<(RedisServer, TestServer)> {
    if !std::path::Path::new(CLI).is_file() || !std::path::Path::new(BENCH).is_file() {
        eprintln!("SKIPPED: redis-cli or redis-benchmark missing");
        return None;
    }
    let r = RedisServer::start()?;
    let s = TestServer::start();
    for port in [r.port(), s.port()] {
        let mut c = Client::connect(port).unwrap();
        c.cmd(&["SET", "user:1", "alice"]).unwrap();
        c.cmd(&["SET", "user:2", &"b".repeat(300)]).unwrap();
        c.cmd(&["SET", "count", "12"]).unwrap();
        for i in 0..120 {
            c.cmd(&["RPUSH", "queue", &format!("job:{i}")]).unwrap();
            c.cmd(&["HSET", "profile", &format!("field:{i}"), "v"]).unwrap();
            c.cmd(&["SADD", "tags", &format!("tag:{i}")]).unwrap();
            c.cmd(&["ZADD", "board", &i.to_string(), &format!("p:{i}")]).unwrap();
        }
        c.cmd(&["HSET", "small", "a", "1"]).unwrap();
        c.cmd(&["XADD", "events", "1-1", "k", "v"]).unwrap();
    }
    Some((r, s))
}

fn cli(port: u16, args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new(CLI)
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The part of a `--bigkeys`/`--memkeys` report after its progress lines.
fn summary(report: &str) -> Vec<String> {
    let from = report.find("-------- summary -------").expect("a summary");
    report[from..].lines().map(str::to_string).collect()
}

#[test]
fn pipe_bigkeys_scan_match_redis() {
    let Some((r, s)) = both() else { return };
    let mut pipe = Vec::new();
    for i in 0..500 {
        testkit::encode(&["SET", &format!("piped:{i}"), "v"], &mut pipe);
    }
    testkit::encode(&["INCR", "count"], &mut pipe);
    testkit::encode(&["INCR", "user:1"], &mut pipe);
    let mut seen = Vec::new();
    for port in [r.port(), s.port()] {
        let piped = cli(port, &["--pipe"], &pipe);
        let big = summary(&cli(port, &["--bigkeys"], b""));
        let mut scan: Vec<String> = cli(port, &["--scan", "--pattern", "user:*"], b"")
            .lines()
            .map(str::to_string)
            .collect();
        scan.sort();
        let scan_count = cli(port, &["--scan", "--pattern", "piped:4*"], b"").lines().count();
        seen.push((piped, big, scan, scan_count));
    }
    assert_eq!(seen[1], seen[0]);
    assert!(seen[0].0.contains("errors: 1, replies: 502"), "{}", seen[0].0);
    assert_eq!(seen[0].3, 111);
}

#[test]
fn memkeys_finds_the_same_biggest_keys() {
    let Some((r, s)) = both() else { return };
    let mut reports = Vec::new();
    for port in [r.port(), s.port()] {
        reports.push(summary(&cli(port, &["--memkeys", "--memkeys-samples", "0"], b"")));
    }
    assert_eq!(reports[0].len(), reports[1].len(), "{reports:?}");
    // `Biggest   hash found '"profile"' has 4144 bytes`: the same key,
    // bytes within 15% (hash tables rehashing, random skiplist levels).
    let number = |l: &str| -> Option<f64> {
        l.split_whitespace().filter_map(|w| w.parse::<f64>().ok()).next()
    };
    for (a, b) in reports[0].iter().zip(&reports[1]) {
        let strip = |l: &str| {
            let digitless = |w: &&str| !w.bytes().any(|c| c.is_ascii_digit());
            l.split_whitespace().filter(digitless).collect::<Vec<_>>().join(" ")
        };
        assert_eq!(strip(b), strip(a));
        if let (Some(x), Some(y)) = (number(a), number(b)) {
            if a.starts_with("Biggest") {
                assert!((x - y).abs() <= x * 0.15, "{a} / {b}");
            }
        }
    }
}

#[test]
fn latency_mode_prints_its_samples_line() {
    let Some((r, s)) = both() else { return };
    for port in [r.port(), s.port()] {
        // Not a terminal: one `min max avg samples` line, then it exits.
        let out = cli(port, &["--latency", "-i", "0.2"], b"");
        let line = out.lines().next().unwrap_or_default();
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 4, "{out:?}");
        assert!(f[0].parse::<u64>().is_ok() && f[1].parse::<u64>().is_ok(), "{line}");
        assert!(f[2].parse::<f64>().is_ok() && f[3].parse::<u64>().unwrap() > 0, "{line}");
    }
}

/// Runs redis-cli in a pseudo-terminal of 120x40, writing `input` in
/// steps (each after a pause) and collecting the screen bytes until it
/// exits or `limit` passes.
fn in_pty(args: &[String], steps: &[&[u8]], limit: Duration) -> String {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize { ws_row: 40, ws_col: 120, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: out-pointers to two ints and a winsize we own.
    let rc = unsafe {
        libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws)
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: openpty returned two fresh descriptors we now own.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = Command::new(CLI)
        .args(args)
        .env("TERM", "xterm")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("redis-cli");
    let mut m = std::fs::File::from(master);
    // Non-blocking reads of the master side.
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        use std::os::fd::AsRawFd;
        let fd = m.as_raw_fd();
        libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
    }
    let mut screen = Vec::new();
    let drain = |m: &mut std::fs::File, screen: &mut Vec<u8>, wait: Duration| {
        let t = Instant::now();
        let mut buf = [0u8; 4096];
        while t.elapsed() < wait {
            match m.read(&mut buf) {
                Ok(n) if n > 0 => screen.extend_from_slice(&buf[..n]),
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    };
    drain(&mut m, &mut screen, Duration::from_millis(400));
    for step in steps {
        m.write_all(step).unwrap();
        drain(&mut m, &mut screen, Duration::from_millis(300));
    }
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        drain(&mut m, &mut screen, Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    drain(&mut m, &mut screen, Duration::from_millis(50));
    String::from_utf8_lossy(&screen).into_owned()
}

#[test]
fn interactive_mode_shows_hints_and_replies_like_redis() {
    let Some((r, s)) = both() else { return };
    let steps: &[&[u8]] = &[
        b"set ",
        b"greeting hi\r",
        b"get greeting\r",
        b"hgetall small\r",
        b"zadd ",
        b"\x03",
        b"quit\r",
    ];
    let mut screens = Vec::new();
    for port in [r.port(), s.port()] {
        let args = vec!["-p".to_string(), port.to_string()];
        let screen = in_pty(&args, steps, Duration::from_secs(3));
        screens.push(screen.replace(&port.to_string(), "PORT"));
    }
    // The hints come from COMMAND DOCS: SET's and ZADD's argument lists.
    for sc in &screens {
        assert!(sc.contains("key value [NX|XX] [GET]"), "{sc:?}");
        assert!(sc.contains("key [NX|XX] [GT|LT] [CH] [INCR] score member"), "{sc:?}");
        assert!(sc.contains("\"hi\""), "{sc:?}");
    }
    assert_eq!(screens[1], screens[0]);
}

#[test]
fn stat_mode_prints_redis_columns() {
    let Some((r, s)) = both() else { return };
    let mut heads = Vec::new();
    for port in [r.port(), s.port()] {
        let args: Vec<String> = ["-p", &port.to_string(), "--stat", "-i", "0.3"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        let screen = in_pty(&args, &[], Duration::from_millis(1200));
        let lines: Vec<&str> = screen.split("\r\n").filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.len() >= 4, "{screen:?}");
        // A data row: keys, memory, clients, blocked, requests, connections.
        let row: Vec<&str> = lines[2].split_whitespace().collect();
        assert!(row.len() >= 6 && row[0].parse::<u64>().is_ok(), "{:?}", lines[2]);
        assert!(row[1].ends_with('K') || row[1].ends_with('M'), "{:?}", lines[2]);
        heads.push((lines[0].to_string(), lines[1].to_string(), row[0].to_string()));
    }
    assert_eq!(heads[1], heads[0]);
}

/// `redis-benchmark -q`'s result lines: test name and the figures' shape.
fn bench(port: u16) -> Vec<String> {
    let out = Command::new(BENCH)
        .args(["-p", &port.to_string(), "-q", "-n", "300", "-c", "4"])
        .output()
        .expect("redis-benchmark");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split(['\r', '\n'])
        .filter_map(|l| l.split_once(": ").filter(|(_, r)| r.contains("requests per second")))
        .map(|(name, rest)| {
            let rps: f64 = rest.split_whitespace().next().unwrap().parse().unwrap();
            assert!(rps > 0.0, "{name}: {rest}");
            assert!(rest.contains(", p50=") && rest.ends_with(" msec"), "{name}: {rest}");
            name.to_string()
        })
        .collect()
}

#[test]
fn redis_benchmark_default_tests_run_against_sluice() {
    let Some((r, s)) = both() else { return };
    let (want, got) = (bench(r.port()), bench(s.port()));
    assert_eq!(got, want);
    assert!(want.len() >= 20 && want.contains(&"LRANGE_600 (first 600 elements)".to_string()));
}
