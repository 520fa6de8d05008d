//! SCAN, HSCAN, SSCAN and ZSCAN keep Redis's guarantee under concurrent writes:
//! every element present for the whole iteration is returned at least once,
//! and nothing is returned that was never there.
//!
//! Sluice runs with `--threads 2`; the scanning connection and a writer
//! connection land on different event-loop threads. The writer keeps
//! adding a large batch of other elements and removing it again, so the
//! hash tables under the scan grow and shrink many times (for SCAN: both
//! one hot lock stripe, through a `{hot}` hash tag, and every stripe a
//! little). The scanner waits for the writer to finish a phase before each
//! call, so every step of the scan runs against a table resized since the
//! previous one.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use resp::{parse_frame, Frame};
use testkit::{Client, TestServer};

/// Stable and churned elements of one test.
struct Plan {
    /// Present before the scan starts and until it ends.
    stable: Vec<Vec<u8>>,
    /// Added and removed again and again while the scan runs.
    churn: Vec<Vec<u8>>,
}

fn names(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

fn start() -> TestServer {
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    TestServer::start_with(bin, &["--threads", "2"], None)
}

fn frame(bytes: &[u8]) -> Frame {
    match parse_frame(bytes) {
        Ok(Some((f, _))) => f,
        other => panic!("bad reply {other:?}: {}", testkit::escape(bytes)),
    }
}

/// Sends `cmds` pipelined in batches; every reply must not be an error.
fn pipeline(c: &mut Client, cmds: &[Vec<Vec<u8>>]) {
    for batch in cmds.chunks(256) {
        for cmd in batch {
            c.send(cmd).expect("send");
        }
        for _ in batch {
            let r = c.read_reply().expect("reply");
            assert!(!r.starts_with(b"-"), "writer got {}", testkit::escape(&r));
        }
    }
}

/// Runs the writer until `stop`: `add(churn)` then `remove(churn)`,
/// counting finished phases in `phases`.
fn spawn_writer(
    port: u16,
    add: Vec<Vec<Vec<u8>>>,
    remove: Vec<Vec<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    phases: Arc<AtomicU64>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut c = Client::connect(port).expect("writer connects");
        while !stop.load(Ordering::Acquire) {
            pipeline(&mut c, &add);
            phases.fetch_add(1, Ordering::AcqRel);
            pipeline(&mut c, &remove);
            phases.fetch_add(1, Ordering::AcqRel);
        }
    })
}

/// Scans to the end with `prefix cursor COUNT count`, waiting for a writer
/// phase before each call. `pairs`: the reply lists field, value pairs.
/// Returns the distinct elements seen and the number of calls.
fn scan_all(
    c: &mut Client,
    prefix: &[&[u8]],
    count: usize,
    pairs: bool,
    phases: &AtomicU64,
) -> (HashSet<Vec<u8>>, usize) {
    let mut seen = HashSet::new();
    let mut cursor = b"0".to_vec();
    let mut calls = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = phases.load(Ordering::Acquire);
        while phases.load(Ordering::Acquire) == before {
            assert!(Instant::now() < deadline, "writer stalled");
            thread::yield_now();
        }
        let count_s = count.to_string();
        let mut args: Vec<&[u8]> = prefix.to_vec();
        args.push(&cursor);
        args.push(b"COUNT");
        args.push(count_s.as_bytes());
        let reply = c.cmd(&args).expect("scan");
        calls += 1;
        let Frame::Array(Some(parts)) = frame(&reply) else {
            panic!("scan reply {}", testkit::escape(&reply))
        };
        let [Frame::Bulk(Some(next)), Frame::Array(Some(items))] = &parts[..] else {
            panic!("scan reply {}", testkit::escape(&reply))
        };
        let step = if pairs { 2 } else { 1 };
        for item in items.iter().step_by(step) {
            let Frame::Bulk(Some(b)) = item else { panic!("element {item:?}") };
            seen.insert(b.clone());
        }
        cursor = next.clone();
        if cursor == b"0" {
            break;
        }
        assert!(calls < 1_000_000, "scan does not end");
    }
    (seen, calls)
}

/// Loads `stable`, runs the writer over `churn`, scans, and checks the
/// guarantee.
fn check(
    plan: Plan,
    load: impl Fn(&[u8]) -> Vec<Vec<u8>>,
    add: impl Fn(&[u8]) -> Vec<Vec<u8>>,
    remove: impl Fn(&[u8]) -> Vec<Vec<u8>>,
    scan: &[&[u8]],
    pairs: bool,
) {
    let label = String::from_utf8_lossy(&scan.join(&b' ')).into_owned();
    let server = start();
    let mut c = Client::connect(server.port()).unwrap();
    let loads: Vec<_> = plan.stable.iter().map(|e| load(e)).collect();
    pipeline(&mut c, &loads);
    let adds: Vec<_> = plan.churn.iter().map(|e| add(e)).collect();
    let removes: Vec<_> = plan.churn.iter().map(|e| remove(e)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let phases = Arc::new(AtomicU64::new(0));
    let writer = spawn_writer(server.port(), adds, removes, stop.clone(), phases.clone());
    let start_phase = phases.load(Ordering::Acquire);
    let (seen, calls) = scan_all(&mut c, scan, 20, pairs, &phases);
    let resized = phases.load(Ordering::Acquire) - start_phase;
    stop.store(true, Ordering::Release);
    writer.join().expect("writer");

    let stable: HashSet<&[u8]> = plan.stable.iter().map(|e| &e[..]).collect();
    let churn: HashSet<&[u8]> = plan.churn.iter().map(|e| &e[..]).collect();
    let missing: Vec<_> =
        stable.iter().filter(|e| !seen.contains(**e)).map(|e| testkit::escape(e)).collect();
    assert!(missing.is_empty(), "{label}: {} stable elements never returned", missing.len());
    for e in &seen {
        assert!(
            stable.contains(&e[..]) || churn.contains(&e[..]),
            "{label} returned a stranger: {}",
            testkit::escape(e)
        );
    }
    eprintln!("{label}: {calls} calls, {resized} writer phases, {} distinct", seen.len());
    // The test means something only if the tables changed under the scan.
    assert!(calls >= 10 && resized as usize >= calls, "{calls} calls, {resized} phases");
}

fn args(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

#[test]
fn scan_returns_every_stable_key_across_stripes_and_resizes() {
    // Stable keys everywhere, and a hot stripe whose table goes from 300
    // to 3300 keys and back; the churn also grows every other stripe.
    let mut stable = names("s:", 3000);
    stable.extend(names("{hot}s:", 300));
    let mut churn = names("c:", 3000);
    churn.extend(names("{hot}c:", 3000));
    check(
        Plan { stable, churn },
        |k| args(&[b"SET", k, b"v"]),
        |k| args(&[b"SET", k, b"v"]),
        |k| args(&[b"DEL", k]),
        &[b"SCAN"],
        false,
    );
}

#[test]
fn hscan_returns_every_stable_field_across_resizes() {
    check(
        Plan { stable: names("s:", 300), churn: names("c:", 3000) },
        |f| args(&[b"HSET", b"h", f, b"v"]),
        |f| args(&[b"HSET", b"h", f, b"v"]),
        |f| args(&[b"HDEL", b"h", f]),
        &[b"HSCAN", b"h"],
        true,
    );
}

#[test]
fn sscan_returns_every_stable_member_across_resizes() {
    check(
        Plan { stable: names("s:", 300), churn: names("c:", 3000) },
        |m| args(&[b"SADD", b"s", m]),
        |m| args(&[b"SADD", b"s", m]),
        |m| args(&[b"SREM", b"s", m]),
        &[b"SSCAN", b"s"],
        false,
    );
}

#[test]
fn zscan_returns_every_stable_member_across_resizes() {
    // 300 stable members (past the listpack: the big encoding) while
    // 3,000 others come and go; a score is the member's last digit, so
    // ties abound.
    check(
        Plan { stable: names("s:", 300), churn: names("c:", 3000) },
        |m| args(&[b"ZADD", b"z", &m[m.len() - 1..], m]),
        |m| args(&[b"ZADD", b"z", &m[m.len() - 1..], m]),
        |m| args(&[b"ZREM", b"z", m]),
        &[b"ZSCAN", b"z"],
        true,
    );
}
