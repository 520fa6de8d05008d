//! `client-output-buffer-limit` for normal clients, against both servers:
//! a client that pipelines more replies than the hard limit without
//! reading is disconnected, and one under the limit is not.

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
