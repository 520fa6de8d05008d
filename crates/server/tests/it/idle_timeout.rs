//! `timeout`: both servers close a client idle for longer than it, and
//! keep one that keeps talking.

use std::path::Path;
use std::time::Duration;

use testkit::{Client, RedisServer, TestServer};

fn idle_client_closed(port: u16) -> (bool, bool) {
    let mut admin = Client::connect(port).unwrap();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "1"]).unwrap(), b"+OK\r\n");
    let mut idle = Client::connect(port).unwrap();
    let mut busy = Client::connect(port).unwrap();
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(busy.cmd(&["PING"]).unwrap(), b"+PONG\r\n");
    }
    let idle_closed = idle.read_to_close(Duration::from_secs(2)).is_ok();
    let busy_open = busy.cmd(&["PING"]).is_ok_and(|r| r == b"+PONG\r\n");
    let _ = admin.cmd(&["CONFIG", "SET", "timeout", "0"]);
    (idle_closed, busy_open)
}

#[test]
fn idle_clients_are_closed_like_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(Path::new(env!("CARGO_BIN_EXE_sluice-server")));
    assert_eq!(idle_client_closed(redis.port()), (true, true), "redis");
    assert_eq!(idle_client_closed(sluice.port()), (true, true), "sluice");
}
