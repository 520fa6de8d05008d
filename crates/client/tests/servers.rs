//! The client against both servers: `sluice-server` (testkit's TestServer)
//! and the oracle `redis-server` 7.0 (testkit's RedisServer).

use std::time::Duration;

use client::{AutoClient, Config, Connection, Error, Frame, Pipeline, Proto};
use testkit::{RedisServer, ServerProc, TestServer};

enum Srv {
    Sluice(TestServer),
    Redis(RedisServer),
}

impl std::ops::Deref for Srv {
    type Target = ServerProc;
    fn deref(&self) -> &ServerProc {
        match self {
            Srv::Sluice(s) => s,
            Srv::Redis(r) => r,
        }
    }
}

fn servers(extra: &[&str]) -> Vec<(&'static str, Srv)> {
    let mut v = Vec::new();
    if let Some(bin) = TestServer::bin_or_skip() {
        v.push(("sluice", Srv::Sluice(TestServer::start_with(&bin, extra, None))));
    }
    if let Some(r) = RedisServer::start_with(extra, None) {
        v.push(("redis", Srv::Redis(r)));
    }
    v
}

fn cfg(port: u16) -> Config {
    let mut c = Config::new("127.0.0.1", port);
    c.timeout = Some(Duration::from_secs(10));
    c
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(Some(s.as_bytes().to_vec()))
}

#[tokio::test]
async fn pipeline_replies_in_order_with_per_command_errors() {
    for (name, srv) in servers(&[]) {
        for resp3 in [false, true] {
            let mut c = cfg(srv.port());
            c.resp3 = resp3;
            let mut conn = Connection::connect(&c).await.unwrap();
            assert_eq!(conn.proto(), if resp3 { Proto::Resp3 } else { Proto::Resp2 });
            conn.flushdb().await.unwrap();
            let mut p = Pipeline::new();
            p.cmd(&["SET", "a", "1"])
                .cmd(&["INCR", "a"])
                .cmd(&["SET", "s", "x"])
                .cmd(&["INCR", "s"])
                .cmd(&["GET", "a"])
                .cmd(&["GET", "missing"])
                .cmd(&["NOSUCHCMD"])
                .cmd(&["PING"]);
            let r = conn.exec(&p).await.unwrap();
            let nil = if resp3 { Frame::Null } else { Frame::Bulk(None) };
            assert_eq!(r.len(), 8, "{name}");
            assert_eq!(r[0], Ok(Frame::Simple(b"OK".to_vec())), "{name}");
            assert_eq!(r[1], Ok(Frame::Integer(2)), "{name}");
            assert_eq!(r[3], Err("ERR value is not an integer or out of range".into()), "{name}");
            assert_eq!(r[4], Ok(bulk("2")), "{name}");
            assert_eq!(r[5], Ok(nil), "{name} resp3={resp3}");
            assert!(r[6].as_ref().unwrap_err().starts_with("ERR unknown command"), "{name}");
            assert_eq!(r[7], Ok(Frame::Simple(b"PONG".to_vec())), "{name}");
            // The connection is still usable after error replies.
            assert_eq!(conn.get("a").await.unwrap(), Some(b"2".to_vec()), "{name}");
            assert!(matches!(conn.incr("s").await, Err(Error::Server(_))), "{name}");
            assert_eq!(conn.incr_by("a", 5).await.unwrap(), 7, "{name}");
            // A deep pipeline: one write, 5000 replies.
            let mut p = Pipeline::new();
            for i in 0..5000 {
                p.cmd(&["SET", &format!("k{i}"), &i.to_string()]);
            }
            assert!(conn.exec(&p).await.unwrap().iter().all(|r| r.is_ok()), "{name}");
            assert_eq!(conn.dbsize().await.unwrap(), 5002, "{name}");
            let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
            let vals = conn.mget(&keys).await.unwrap();
            assert_eq!(vals[9], Some(b"9".to_vec()), "{name}");
        }
    }
}

#[tokio::test]
async fn auto_pipeline_coalesces_concurrent_tasks() {
    for (name, srv) in servers(&[]) {
        let c = cfg(srv.port());
        let auto = AutoClient::connect(&c).await.unwrap();
        auto.cmd(&["FLUSHDB"]).await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..500 {
            let a = auto.clone();
            tasks.push(tokio::spawn(async move {
                let k = format!("key:{i}");
                a.set(&k, i.to_string()).await.unwrap();
                let n = a.incr("counter").await.unwrap();
                let bad = a.incr(&format!("nokey{i}x")).await.unwrap();
                assert_eq!(bad, 1);
                let v = a.get(&k).await.unwrap();
                assert_eq!(v, Some(i.to_string().into_bytes()));
                n
            }));
        }
        let mut seen = Vec::new();
        for t in tasks {
            seen.push(t.await.unwrap());
        }
        seen.sort();
        assert_eq!(seen, (1..=500).collect::<Vec<i64>>(), "{name}");
        // Errors come back to their caller only.
        assert!(matches!(auto.cmd(&["INCR", "key:1", "x"]).await, Err(Error::Server(_))));
        assert_eq!(auto.get("key:7").await.unwrap(), Some(b"7".to_vec()));
        let cmds = auto.stats().commands.load(std::sync::atomic::Ordering::Relaxed);
        let writes = auto.stats().writes.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(cmds, 1 + 4 * 500 + 2, "{name}");
        // 500 tasks started in one turn: their requests share writes.
        assert!(writes * 20 < cmds, "{name}: {cmds} commands in {writes} writes");
    }
}

#[tokio::test]
async fn auth_select_and_resp3_handshake() {
    for (name, srv) in servers(&["--requirepass", "s3cret"]) {
        let mut c = cfg(srv.port());
        let e = Connection::connect(&c).await;
        assert!(e.is_ok(), "{name}: connecting needs no auth");
        let mut conn = e.unwrap();
        assert!(matches!(conn.ping().await, Err(Error::Server(m)) if m.starts_with("NOAUTH")));
        c.password = Some("wrong".into());
        assert!(
            matches!(Connection::connect(&c).await, Err(Error::Server(m)) if m.starts_with("WRONGPASS")),
            "{name}"
        );
        c.password = Some("s3cret".into());
        c.db = 3;
        for resp3 in [false, true] {
            c.resp3 = resp3;
            let mut conn = Connection::connect(&c).await.unwrap();
            conn.set("where", "db3").await.unwrap();
            conn.select(0).await.unwrap();
            assert_eq!(conn.get("where").await.unwrap(), None, "{name}");
            conn.select(3).await.unwrap();
            assert_eq!(conn.get("where").await.unwrap(), Some(b"db3".to_vec()), "{name}");
        }
        let auto = AutoClient::connect(&c).await.unwrap();
        assert_eq!(auto.get("where").await.unwrap(), Some(b"db3".to_vec()), "{name}");
    }
}

#[tokio::test]
async fn timeout_and_closed() {
    // A listener that accepts and never answers.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut c = Config::new("127.0.0.1", port);
    c.timeout = Some(Duration::from_millis(100));
    let mut conn = Connection::connect(&c).await.unwrap();
    assert!(matches!(conn.ping().await, Err(Error::Timeout)));
    // After a timeout the reply order is unknown: the connection refuses.
    assert!(matches!(conn.ping().await, Err(Error::Closed)));
    let (s, _) = l.accept().unwrap();
    drop(s);
    let auto = AutoClient::connect(&c).await.unwrap();
    let (s, _) = l.accept().unwrap();
    drop(s);
    assert!(matches!(auto.ping().await, Err(Error::Closed) | Err(Error::Timeout)));
}
