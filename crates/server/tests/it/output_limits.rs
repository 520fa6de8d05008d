//! `client-output-buffer-limit` against both servers: for normal clients,
//! one that pipelines more replies than the hard limit without reading is
//! disconnected, and one under the limit is not; for pub/sub, a subscriber
//! that does not read is closed past the hard limit at once and past the
//! soft one after its seconds, not before. (The replica class waits for
//! replication.)

use std::path::Path;
use std::time::Duration;

use testkit::{Client, RedisServer, TestServer};

/// Sends `n` GETs of a 1 KiB value without reading, then reports whether
/// the server closed the connection before delivering all replies (a
/// connection still open two seconds later counts as kept).
fn closed_after_unread_gets(port: u16, n: usize) -> bool {
    let mut admin = Client::connect(port).unwrap();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 200kb 0 0"]).unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(admin.cmd(&["SET", "k", &"x".repeat(1024)]).unwrap(), b"+OK\r\n");
    let mut c = Client::connect(port).unwrap();
    let mut req = Vec::new();
    for _ in 0..n {
        testkit::encode(&["GET", "k"], &mut req);
    }
    // The server may close while we are still writing: that is an answer.
    let _ = c.send_raw(&req);
    std::thread::sleep(Duration::from_millis(300));
    let full = n * (b"$1024\r\n".len() + 1024 + 2);
    match c.read_to_close(Duration::from_secs(2)) {
        Ok(got) => got.len() < full,
        // Still open after everything it had to say: not disconnected.
        Err(_) => false,
    }
}

#[test]
fn hard_limit_disconnects_like_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(Path::new(env!("CARGO_BIN_EXE_sluice-server")));
    // 2,000 replies of ~1 KiB (2 MiB) exceed a 200 KiB hard limit.
    assert!(closed_after_unread_gets(redis.port(), 2000), "redis keeps the client");
    assert!(closed_after_unread_gets(sluice.port(), 2000), "sluice keeps the client");
    // 50 replies (~51 KiB) stay under it.
    assert!(!closed_after_unread_gets(redis.port(), 50), "redis closed a client under the limit");
    assert!(!closed_after_unread_gets(sluice.port(), 50), "sluice closed a client under the limit");
}

/// A subscriber that never reads, under `client-output-buffer-limit
/// pubsub <limits>`: 2,000 messages of 4 KiB (8 MiB, past what the
/// kernel's socket buffers take), then (after `pause`) one more; reports
/// whether the server closed it.
fn subscriber_closed(port: u16, limits: &str, pause: Duration) -> bool {
    let mut admin = Client::connect(port).unwrap();
    let set = ["CONFIG", "SET", "client-output-buffer-limit", limits];
    assert_eq!(admin.cmd(&set).unwrap(), b"+OK\r\n");
    let mut sub = Client::connect(port).unwrap();
    assert!(sub.cmd(&["SUBSCRIBE", "ch"]).unwrap().starts_with(b"*3\r\n"));
    let mut publisher = Client::connect(port).unwrap();
    let msg = "m".repeat(4096);
    let mut req = Vec::new();
    for _ in 0..2000 {
        testkit::encode(&["PUBLISH", "ch", &msg], &mut req);
    }
    publisher.send_raw(&req).unwrap();
    for _ in 0..2000 {
        publisher.read_reply().unwrap();
    }
    std::thread::sleep(pause);
    publisher.cmd(&["PUBLISH", "ch", &msg]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let closed = sub.read_to_close(Duration::from_secs(1)).is_ok();
    let reset = ["CONFIG", "SET", "client-output-buffer-limit", "pubsub 32mb 8mb 60"];
    assert_eq!(admin.cmd(&reset).unwrap(), b"+OK\r\n");
    closed
}

#[test]
fn pubsub_hard_and_soft_limits_like_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(Path::new(env!("CARGO_BIN_EXE_sluice-server")));
    for (name, port) in [("redis", redis.port()), ("sluice", sluice.port())] {
        let short = Duration::from_millis(100);
        assert!(subscriber_closed(port, "pubsub 100kb 0 0", short), "{name}: hard limit");
        // Over the soft limit for longer than its second: closed. (Redis
        // counts the time in whole seconds of its cached clock and wants
        // more than the limit: up to two seconds.)
        assert!(
            subscriber_closed(port, "pubsub 0 100kb 1", Duration::from_millis(2200)),
            "{name}: soft"
        );
        // Over it for less than that: kept.
        assert!(!subscriber_closed(port, "pubsub 0 100kb 5", short), "{name}: soft, early");
        // Under both: kept.
        assert!(!subscriber_closed(port, "pubsub 64mb 32mb 1", short), "{name}: under");
    }
}
