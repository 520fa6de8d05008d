//! The lean path of plain single-key commands (`dispatch::lean_gate`): a
//! connection decides once per window of pipelined requests that none of
//! the general path's per-command tests is due. A request that changes
//! that in the middle of a window (CLIENT REPLY, MULTI, SELECT, CONFIG
//! SET maxmemory, CLIENT TRACKING, CONFIG RESETSTAT) must take effect
//! from the next request on, as in Redis. Each pipeline goes to
//! redis-server and to Sluice in one write; the reply bytes must match,
//! and so must the command statistics' call counts.

use std::path::Path;
use std::time::Duration;

use testkit::diff::Servers;

fn pipeline(cmds: &[&[&str]]) -> Vec<u8> {
    let mut buf = Vec::new();
    for c in cmds {
        testkit::encode(c, &mut buf);
    }
    // The sentinel: its reply ends what is read.
    testkit::encode(&["ECHO", "lean-end"], &mut buf);
    buf
}

/// Sends `cmds` in one write to both servers; their replies.
fn both(pair: &mut testkit::diff::Pair, cmds: &[&[&str]]) -> (Vec<u8>, Vec<u8>) {
    let buf = pipeline(cmds);
    let end = b"$8\r\nlean-end\r\n";
    let limit = Duration::from_secs(10);
    pair.redis.send_raw(&buf).unwrap();
    let r = pair.redis.read_until_suffix(end, limit).unwrap();
    pair.sluice.send_raw(&buf).unwrap();
    let s = pair.sluice.read_until_suffix(end, limit).unwrap();
    (r, s)
}

fn assert_same(what: &str, (r, s): (Vec<u8>, Vec<u8>)) {
    assert_eq!(
        testkit::escape(&s),
        testkit::escape(&r),
        "{what}: Sluice's replies (left) differ from redis-server's (right)"
    );
}

/// INFO commandstats' lines without their timings.
fn calls(c: &mut testkit::Client) -> Vec<String> {
    let info = c.cmd(&["INFO", "commandstats"]).unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&info)
        .lines()
        .filter(|l| l.starts_with("cmdstat_"))
        .map(|l| l.split(',').filter(|f| !f.starts_with("usec")).collect::<Vec<_>>().join(","))
        .collect();
    v.sort();
    v
}

#[test]
fn session_state_changed_mid_pipeline_applies_to_the_next_request() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let mut pair = servers.connect();
    assert_same(
        "reply modes, MULTI, SELECT",
        both(
            &mut pair,
            &[
                &["CONFIG", "RESETSTAT"],
                &["SET", "k", "1"],
                &["GET", "k"],
                &["INCR", "k"],
                &["CLIENT", "REPLY", "SKIP"],
                &["INCR", "k"],
                &["GET", "k"],
                &["MULTI"],
                &["INCR", "k"],
                &["GET", "k"],
                &["EXEC"],
                &["SELECT", "1"],
                &["GET", "k"],
                &["SET", "k", "x"],
                &["GET", "k"],
                &["SELECT", "0"],
                &["GET", "k"],
                &["DECR", "k"],
            ],
        ),
    );
    assert_same(
        "maxmemory set and unset mid-pipeline",
        both(
            &mut pair,
            &[
                &["SET", "m", "1"],
                &["CONFIG", "SET", "maxmemory", "1"],
                &["SET", "m", "2"],
                &["INCR", "m"],
                &["GET", "m"],
                &["CONFIG", "SET", "maxmemory", "0"],
                &["SET", "m", "3"],
                &["GET", "m"],
            ],
        ),
    );
    // Keyless commands that change the session come first in the
    // window, or between keyed ones.
    assert_same(
        "keyless commands before and between keyed ones",
        both(
            &mut pair,
            &[
                &["MULTI"],
                &["GET", "m"],
                &["EXEC"],
                &["GET", "m"],
                &["PING"],
                &["INCR", "m"],
                &["CLIENT", "REPLY", "SKIP"],
                &["GET", "m"],
                &["GET", "m"],
                &["PING"],
                &["GET", "m"],
            ],
        ),
    );
    assert_same(
        "a reply mode set by the window's first request",
        both(&mut pair, &[&["CLIENT", "REPLY", "SKIP"], &["INCR", "m"], &["GET", "m"]]),
    );
    assert_eq!(calls(&mut pair.sluice), calls(&mut pair.redis), "commandstats calls");

    // Tracking in RESP3: a key read after CLIENT TRACKING ON in the same
    // window is tracked, and the client's own write invalidates it. Where
    // the push lands in a pipeline differs from Redis before this path
    // existed (Redis: after the write's reply; Sluice: after the batch's
    // replies), so the replies are compared without it, and Sluice's push
    // must come.
    let mut pair = servers.connect();
    let hello = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n";
    pair.redis.send_raw(hello).unwrap();
    pair.redis.read_reply().unwrap();
    pair.sluice.send_raw(hello).unwrap();
    pair.sluice.read_reply().unwrap();
    let push: &[u8] = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nt\r\n";
    let cmds: &[&[&str]] = &[
        &["SET", "t", "1"],
        &["GET", "t"],
        &["CLIENT", "TRACKING", "ON"],
        &["GET", "t"],
        &["INCR", "t"],
        &["GET", "t"],
    ];
    // Six replies, the sentinel's and the push, read as frames (the push
    // may follow the sentinel).
    let buf = pipeline(cmds);
    let read = |c: &mut testkit::Client| -> Vec<u8> {
        c.send_raw(&buf).unwrap();
        (0..8).flat_map(|_| c.read_reply().unwrap()).collect()
    };
    let r = read(&mut pair.redis);
    let s = read(&mut pair.sluice);
    let without = |b: &[u8]| testkit::escape(b).replace(&testkit::escape(push), "");
    assert!(testkit::escape(&r).contains(&testkit::escape(push)), "redis-server's push");
    assert_eq!(without(&s), without(&r), "tracking turned on mid-pipeline");
    assert!(testkit::escape(&s).contains(&testkit::escape(push)), "Sluice's invalidation");
}
