//! Pub/sub and keyspace notifications with several real connections,
//! against redis-server 7.0 and Sluice (two threads, so consecutive
//! connections live on different threads and deliveries cross threads).
//! Transcripts must be identical (format in `testkit::transcript`);
//! `A> SUBSCRIBE …` followed by `A? MS` records every confirmation and
//! message that arrived.

use std::path::Path;
use std::time::Duration;

use testkit::{Client, RedisServer, TestServer};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice-server"))
}

fn check(script: &str) {
    testkit::transcript::check(bin(), script);
}

#[test]
fn messages_reach_channel_and_pattern_subscribers() {
    check(
        "A> SUBSCRIBE news sport
         A? 50
         B> PSUBSCRIBE n* s?ort
         B? 50
         C: PUBLISH news hello
         A? 50
         B? 50
         C: PUBLISH sport goal
         A? 50
         B? 50
         C: PUBLISH other x
         A? 50
         B? 50
         C: PUBSUB NUMSUB news sport other
         C: PUBSUB NUMPAT
         A> UNSUBSCRIBE news
         A? 50
         C: PUBLISH news again
         A? 50
         B? 50
         A> UNSUBSCRIBE
         A? 50
         B> PUNSUBSCRIBE
         B? 50
         C: PUBLISH news last
         A? 50
         B? 50
         C: PUBSUB NUMPAT
         C: PUBSUB CHANNELS",
    );
}

#[test]
fn one_subscriber_on_two_patterns_and_a_channel() {
    check(
        "A> SUBSCRIBE a.b
         A? 50
         A> PSUBSCRIBE a.*
         A? 50
         B: PUBLISH a.b m1
         A? 50
         B: PUBLISH a.c m2
         A? 50
         A> PUNSUBSCRIBE a.* nope
         A? 50
         A: PING
         A: PING x
         A: GET k
         A> SUBSCRIBE a.b
         A? 50
         A: UNSUBSCRIBE a.b",
    );
}

#[test]
fn resp3_subscribers_run_commands_and_receive_pushes() {
    check(
        "A_ HELLO 3
         A: SUBSCRIBE c
         A: SSUBSCRIBE s
         A: PSUBSCRIBE p*
         A: GET k
         A: PING
         A: SET k v
         B: PUBLISH c one
         A? 50
         B: SPUBLISH s two
         A? 50
         B: PUBLISH pq three
         A? 50
         A: PUBLISH c self
         A: GET k
         A: CLIENT REPLY OFF
         A: PUBLISH c quiet
         A: GET k
         A_ CLIENT REPLY ON
         A: UNSUBSCRIBE
         A: PUNSUBSCRIBE
         A: SUNSUBSCRIBE
         A: UNSUBSCRIBE
         B: PUBLISH c nobody",
    );
}

#[test]
fn shard_channels_and_reset() {
    check(
        "A> SSUBSCRIBE s1 s2
         A? 50
         A> SUBSCRIBE c
         A? 50
         B: SPUBLISH s1 m
         B: PUBLISH s1 m
         A? 50
         B: PUBSUB SHARDNUMSUB s1 s2 c
         A> SUNSUBSCRIBE s1
         A? 50
         A> UNSUBSCRIBE
         A? 50
         A: GET k
         A> SUNSUBSCRIBE
         A? 50
         A: GET k
         A> SUBSCRIBE c
         A? 50
         A> PSUBSCRIBE *
         A? 50
         A: RESET
         B: PUBLISH c gone
         A? 50
         A: GET k
         B: PUBSUB NUMPAT",
    );
}

#[test]
fn reply_off_does_not_silence_subscriptions() {
    check(
        "A: CLIENT REPLY OFF
         A> SUBSCRIBE q
         A? 50
         A> PING
         A? 50
         B: PUBLISH q m
         A? 50
         A> UNSUBSCRIBE
         A? 50
         A: CLIENT REPLY ON",
    );
}

#[test]
fn a_disconnected_subscriber_is_forgotten() {
    check(
        "A> SUBSCRIBE c
         A? 50
         B> PSUBSCRIBE c*
         B? 50
         A!
         B!
         C: PUBLISH c m
         C: PUBSUB NUMSUB c
         C: PUBSUB NUMPAT",
    );
}

#[test]
fn keyspace_and_keyevent_notifications() {
    check(
        "C: CONFIG SET notify-keyspace-events KEA
         A> PSUBSCRIBE __key*@0__:*
         A? 50
         B: SET k v
         B: APPEND k w
         B: EXPIRE k 100
         B: PERSIST k
         B: RENAME k k2
         B: DEL k2 nokey
         B: LPUSH l a b
         B: RPOP l
         B: HSET h f v
         B: SADD s m
         B: ZADD z 1 m
         B: INCRBY n 5
         A? 100
         B: SELECT 1
         B: SET other v
         A? 50
         B: SELECT 0
         B: PEXPIRE l 1
         ~ 20
         B: GET l
         A? 100
         C: CONFIG SET notify-keyspace-events Ex
         B: SET e v PX 1
         ~ 20
         B: GET e
         B: SET quiet v
         A? 100
         C: CONFIG SET notify-keyspace-events Km
         B: GET missing
         A? 50
         C: CONFIG SET notify-keyspace-events KEn
         B: SET brandnew v
         A? 50
         C: CONFIG SET notify-keyspace-events g
         B: SET k v
         A? 50",
    );
}

#[test]
fn notifications_inside_transactions() {
    check(
        "C: CONFIG SET notify-keyspace-events KEA
         A> SUBSCRIBE __keyevent@0__:set __keyevent@0__:del
         A? 50
         B: MULTI
         B: SET a 1
         B: SET b 2
         B: DEL a b
         B: EXEC
         A? 100",
    );
}

/// Active expiry deletes a key nobody touches: its `expired` event is
/// published too.
#[test]
fn active_expiry_is_notified() {
    check(
        "C: CONFIG SET notify-keyspace-events Ex
         A> SUBSCRIBE __keyevent@0__:expired
         A? 50
         B: SET gone v PX 50
         ~ 400
         A? 300",
    );
}

/// One publisher on one thread, subscribers on both threads: each sees
/// every message, in publish order.
#[test]
fn cross_thread_delivery_keeps_publish_order() {
    let sluice = TestServer::start_bin(bin());
    let port = sluice.port();
    const N: usize = 2_000;
    let mut subs: Vec<Client> = (0..4)
        .map(|_| {
            let mut c = Client::connect(port).unwrap();
            let r = c.cmd(&["SUBSCRIBE", "ch"]).unwrap();
            assert!(r.starts_with(b"*3\r\n$9\r\nsubscribe"));
            c
        })
        .collect();
    let publishers: Vec<_> = (0..2)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port).unwrap();
                for i in 0..N {
                    let n = c.cmd(&["PUBLISH", "ch", &format!("{p}:{i}")]).unwrap();
                    assert_eq!(n, b":4\r\n");
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    for s in &mut subs {
        let mut next = [0usize; 2];
        for _ in 0..2 * N {
            let f = s.read_frame().unwrap();
            let resp::Frame::Array(Some(parts)) = f else { panic!("not a message: {f:?}") };
            let resp::Frame::Bulk(Some(m)) = &parts[2] else { panic!("no payload") };
            let m = std::str::from_utf8(m).unwrap();
            let (p, i) = m.split_once(':').unwrap();
            let (p, i): (usize, usize) = (p.parse().unwrap(), i.parse().unwrap());
            assert_eq!(i, next[p], "publisher {p}'s messages out of order");
            next[p] += 1;
        }
        assert_eq!(next, [N, N]);
    }
}

/// A subscriber that stops reading is disconnected once its output passes
/// `client-output-buffer-limit pubsub`; the publisher and a reading
/// subscriber carry on. Run against both servers.
#[test]
fn slow_subscriber_is_disconnected() {
    fn run(port: u16) -> (usize, Vec<u8>, Vec<u8>) {
        let mut admin = Client::connect(port).unwrap();
        admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 4mb 0 0"]).unwrap();
        let mut slow = Client::connect(port).unwrap();
        slow.cmd(&["SUBSCRIBE", "big"]).unwrap();
        let mut fast = Client::connect(port).unwrap();
        fast.cmd(&["SUBSCRIBE", "big"]).unwrap();
        let payload = vec![b'x'; 16 * 1024];
        let mut publisher = Client::connect(port).unwrap();
        // The fast subscriber reads each message before the next is
        // published: it never lags, however the machine schedules the
        // test's threads (a reader thread of its own fell 4 MB behind
        // now and then on two loaded cores, and was cut off too).
        let mut got = 0;
        for _ in 0..3000 {
            publisher.cmd(&[&b"PUBLISH"[..], b"big", &payload]).unwrap();
            fast.read_reply().unwrap();
            got += 1;
        }
        // The fast subscriber stays connected (kept, not dropped).
        let _fast = fast;
        // The slow one is gone: what it can still read ends with a close.
        slow.set_timeout(Duration::from_secs(10));
        slow.read_to_close(Duration::from_secs(10)).expect("slow subscriber closed");
        std::thread::sleep(Duration::from_millis(100));
        let numsub = admin.cmd(&["PUBSUB", "NUMSUB", "big"]).unwrap();
        let last = publisher.cmd(&["PUBLISH", "big", "x"]).unwrap();
        (got, numsub, last)
    }
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(bin());
    let want = run(redis.port());
    let before = sluice.rss_kb().unwrap_or(0);
    let got = run(sluice.port());
    // 48 MB were published while the slow subscriber read nothing: what
    // it was not sent was dropped, not kept (peak RSS, VmHWM).
    let status = std::fs::read_to_string(format!("/proc/{}/status", sluice.pid())).unwrap();
    let peak: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(peak < before + 24 * 1024, "peak RSS {peak} kB, {before} kB before");
    assert_eq!(want.0, 3000);
    assert_eq!(got, want);
    assert_eq!(got.1, b"*2\r\n$3\r\nbig\r\n:1\r\n");
}

/// A RESP3 client subscribed to notifications of its own writes gets them
/// before the write's reply, as Redis writes them during the command.
#[test]
fn own_notifications_precede_the_reply() {
    check(
        "C: CONFIG SET notify-keyspace-events KEA
         A_ HELLO 3
         A: SUBSCRIBE __keyevent@0__:set __keyevent@0__:del
         A: SUBSCRIBE __keyspace@0__:k
         A? 50
         A> SET k v
         A? 50
         A> DEL k
         A? 50
         A> SET other v
         A? 50
         B: SET k w
         A? 50
         A> CLIENT REPLY OFF
         A> SET k x
         A? 50
         A> GET k
         A? 50
         A_ CLIENT REPLY ON
         A> MSET k 1 j 2
         A? 50",
    );
}
