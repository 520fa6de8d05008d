//! `DURABLE` (Sluice's extension, `docs/durable.md`) and WAITAOF (Redis
//! 7.2's), over TCP against real replicas: Sluice replicas and a
//! redis-server 7.0.15 replica (which acknowledges only when asked).
//!
//! - Ordering: a pipeline of write, read, write comes back in order, and
//!   by the time it does the replica has every write (read straight from
//!   the replica, without waiting); the same for several connections
//!   pipelining at once with two replicas.
//! - Writes no connection pushes (active expiry's) reach the replica.
//! - A timeout: each held write's reply is the error that says how many
//!   replicas had it; the read in the same pipeline is answered as is.
//! - A replica stopped, then killed, under a held batch: the client gets
//!   its errors at the timeout, not later.
//! - `FSYNC` under `appendfsync everysec`: released once the AOF fsynced,
//!   which the connection asks for (so well before the once-a-second
//!   fsync), also when it asks while the AOF fsyncs an earlier group.
//! - WAIT after each SET with two replicas: no WAIT waits for the cron
//!   (two replicas' acknowledgements read at once; redis-server as master
//!   alongside, for what a slow WAIT is on the machine).
//! - WAITAOF: Redis 7.2's documented replies and errors (redis-server
//!   7.0 has no WAITAOF to compare with): local fsync under always,
//!   everysec and no, the AOF turned off under a blocked WAITAOF, a
//!   replica's FACK.

use std::time::{Duration, Instant};

use crate::common::{all_threads_stopped, cmd, text, wait_for, wait_synced};
use resp::Frame;
use testkit::{Client, RedisServer, TestServer};

fn replica_of(master: &TestServer, extra: &[&str]) -> TestServer {
    let port = master.port().to_string();
    let mut args = vec!["--replicaof", "127.0.0.1", port.as_str()];
    args.extend_from_slice(extra);
    TestServer::start_with(&TestServer::default_bin(), &args, None)
}

fn online_replicas(m: &mut Client, n: usize) {
    wait_for("the replicas to be online", Duration::from_secs(30), || {
        let t = text(&cmd(m, &["INFO", "replication"]));
        t.matches("state=online").count() == n
    });
}

/// Sends `cmds` in one write and reads their replies as raw bytes.
fn pipeline(c: &mut Client, cmds: &[&[&str]]) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    for a in cmds {
        testkit::encode(a, &mut bytes);
    }
    c.send_raw(&bytes).expect("send");
    cmds.iter().map(|_| c.read_reply().expect("reply")).collect()
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn durable_pipeline_is_answered_in_order_once_the_replica_has_every_write() {
    let master = TestServer::start();
    let replica = replica_of(&master, &[]);
    let mut m = master.client();
    online_replicas(&mut m, 1);
    let mut r = replica.client();
    assert_eq!(s(&m.cmd(&["DURABLE", "1", "5000"]).unwrap()), "+OK\r\n");
    let line = s(&m.cmd(&["CLIENT", "INFO"]).unwrap());
    assert!(line.trim_end().ends_with(" durable=1,5000"), "{line}");
    for i in 0..50 {
        let (a, b) = (format!("a{i}"), format!("b{i}"));
        let v = format!("v{i}");
        let replies =
            pipeline(&mut m, &[&["SET", &a, &v], &["GET", &a], &["INCR", &b], &["GET", "missing"]]);
        let want = [
            "+OK\r\n".to_string(),
            format!("${}\r\n{v}\r\n", v.len()),
            ":1\r\n".to_string(),
            "$-1\r\n".to_string(),
        ];
        assert_eq!(replies.iter().map(|r| s(r)).collect::<Vec<_>>(), want, "round {i}");
        // Acknowledged means on the replica: read there at once.
        assert_eq!(text(&cmd(&mut r, &["GET", &a])), v, "round {i}");
        assert_eq!(text(&cmd(&mut r, &["GET", &b])), "1", "round {i}");
    }
    // A transaction and a script are held as one write each.
    let replies = pipeline(
        &mut m,
        &[
            &["MULTI"],
            &["SET", "t", "1"],
            &["EXEC"],
            &["EVAL", "return redis.call('INCR','t')", "0"],
        ],
    );
    let got: Vec<String> = replies.iter().map(|r| s(r)).collect();
    assert_eq!(got, ["+OK\r\n", "+QUEUED\r\n", "*1\r\n+OK\r\n", ":2\r\n"]);
    assert_eq!(text(&cmd(&mut r, &["GET", "t"])), "2");
    assert_eq!(s(&m.cmd(&["DURABLE", "OFF"]).unwrap()), "+OK\r\n");
    let line = s(&m.cmd(&["CLIENT", "INFO"]).unwrap());
    assert!(!line.contains("durable="), "{line}");
}

#[test]
fn durable_connections_pipelining_at_once_are_each_released_once_both_replicas_have_their_writes() {
    // Several connections wait at the same time, each for its own offset
    // on two replicas: an acknowledgement wakes only the batches it
    // satisfies (`repl::acks`), and none is left waiting for a wake-up
    // that already came. Each batch is pushed by its connection, not by
    // the senders (which are no longer woken per write).
    let master = TestServer::start();
    let r1 = replica_of(&master, &[]);
    let r2 = replica_of(&master, &[]);
    let mut m = master.client();
    online_replicas(&mut m, 2);
    let t = Instant::now();
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let (mut c, mut a, mut b) = (master.client(), r1.client(), r2.client());
            std::thread::spawn(move || {
                assert_eq!(s(&c.cmd(&["DURABLE", "2", "10000"]).unwrap()), "+OK\r\n");
                for round in 0..20 {
                    let keys: Vec<String> = (0..32).map(|i| format!("w{w}:{round}:{i}")).collect();
                    let sets: Vec<[&str; 3]> =
                        keys.iter().map(|k| ["SET", k.as_str(), "v"]).collect();
                    let cmds: Vec<&[&str]> = sets.iter().map(|a| &a[..]).collect();
                    for r in pipeline(&mut c, &cmds) {
                        assert_eq!(s(&r), "+OK\r\n", "worker {w} round {round}");
                    }
                    // Acknowledged by both: on each replica at once.
                    for k in [&keys[0], &keys[31]] {
                        assert_eq!(text(&cmd(&mut a, &["GET", k])), "v", "{k} on replica 1");
                        assert_eq!(text(&cmd(&mut b, &["GET", k])), "v", "{k} on replica 2");
                    }
                }
            })
        })
        .collect();
    for h in workers {
        h.join().unwrap();
    }
    // 120 batches, each a loopback round trip: far below the timeout.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn writes_no_connection_pushes_still_reach_the_replicas() {
    // A client's write is pushed to the replicas by its connection; the
    // server's own (active expiry's DEL) wakes the senders. Both arrive.
    let master = TestServer::start();
    let replica = replica_of(&master, &[]);
    let mut m = master.client();
    online_replicas(&mut m, 1);
    let mut r = replica.client();
    for i in 0..20 {
        cmd(&mut m, &["SET", &format!("t{i}"), "v", "PX", "100"]);
    }
    cmd(&mut m, &["SET", "plain", "v"]);
    wait_for("the plain write on the replica", Duration::from_secs(5), || {
        text(&cmd(&mut r, &["GET", "plain"])) == "v"
    });
    // Nobody reads the keys on the master: only active expiry deletes
    // them there, and its DELs are what empty the replica (a replica does
    // not expire keys itself; its reads only hide them, so count keys).
    wait_for("the expired keys gone from the replica", Duration::from_secs(10), || {
        text(&cmd(&mut r, &["DBSIZE"])) == "1"
    });
}

#[test]
fn durable_timeout_says_how_many_replicas_had_the_write() {
    let master = TestServer::start();
    let _replica = replica_of(&master, &[]);
    let mut m = master.client();
    online_replicas(&mut m, 1);
    // A second: the one replica's acknowledgement must be in before the
    // timeout even on a loaded machine (300 ms was once too short in CI).
    m.cmd(&["DURABLE", "2", "1000"]).unwrap();
    let t = Instant::now();
    let replies = pipeline(&mut m, &[&["SET", "k", "v"], &["GET", "k"], &["DEL", "nothing"]]);
    let waited = t.elapsed();
    let err =
        "-NOREPLICAS Write applied locally, acknowledged by 1 of 2 replicas within 1000 ms\r\n";
    // DEL of a missing key wrote nothing: not held, answered as is.
    let got: Vec<String> = replies.iter().map(|r| s(r)).collect();
    assert_eq!(got, [err, "$1\r\nv\r\n", ":0\r\n"]);
    assert!(waited >= Duration::from_millis(990), "{waited:?}");
    // The write was applied, here and on the one replica.
    m.cmd(&["DURABLE", "OFF"]).unwrap();
    assert_eq!(s(&m.cmd(&["GET", "k"]).unwrap()), "$1\r\nv\r\n");
    // No replica at all: the count is 0, and reads alone are not held.
    let lonely = TestServer::start();
    let mut c = lonely.client();
    c.cmd(&["DURABLE", "1", "100"]).unwrap();
    let t = Instant::now();
    assert_eq!(s(&c.cmd(&["GET", "k"]).unwrap()), "$-1\r\n");
    assert!(t.elapsed() < Duration::from_millis(90));
    assert_eq!(
        s(&c.cmd(&["SET", "k", "v"]).unwrap()),
        "-NOREPLICAS Write applied locally, acknowledged by 0 of 1 replicas within 100 ms\r\n"
    );
}

#[test]
fn durable_replica_killed_mid_batch_ends_at_the_timeout() {
    let master = TestServer::start();
    let mut replica = replica_of(&master, &[]);
    let mut m = master.client();
    online_replicas(&mut m, 1);
    m.cmd(&["SET", "warm", "1"]).unwrap();
    m.cmd(&["DURABLE", "1", "700"]).unwrap();
    // Stopped: it reads nothing and acknowledges nothing. Its threads
    // stop after `kill` returns: until all have, its link thread could
    // still apply and acknowledge the batch sent next (this test then
    // got `+OK`s, in two runs of five under load).
    let pid = replica.pid().to_string();
    std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    wait_for("every thread of the replica stopped", Duration::from_secs(10), || {
        all_threads_stopped(replica.pid())
    });
    let mut bytes = Vec::new();
    for i in 0..100 {
        testkit::encode(&["SET", &format!("k{i}"), "v"], &mut bytes);
    }
    let t = Instant::now();
    m.send_raw(&bytes).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // Killed while the batch is held.
    std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    let _ = replica.is_running();
    let want =
        "-NOREPLICAS Write applied locally, acknowledged by 0 of 1 replicas within 700 ms\r\n";
    for i in 0..100 {
        assert_eq!(s(&m.read_reply().unwrap()), want, "reply {i}");
    }
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(690), "{waited:?}");
    assert!(waited < Duration::from_millis(2500), "held past its timeout: {waited:?}");
    // The connection goes on.
    assert_eq!(s(&m.cmd(&["PING"]).unwrap()), "+PONG\r\n");
}

#[test]
fn durable_with_a_redis_server_replica_asks_it_for_acknowledgements() {
    let master = TestServer::start();
    let port = master.port().to_string();
    let Some(replica) = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port], None) else {
        return;
    };
    let mut m = master.client();
    online_replicas(&mut m, 1);
    let mut r = replica.client();
    m.cmd(&["DURABLE", "1", "5000"]).unwrap();
    // redis-server acknowledges once a second unless asked: each batch
    // asks once (REPLCONF GETACK), so batches take far less than that.
    let mut times = Vec::new();
    for i in 0..20 {
        let k = format!("k{i}");
        let t = Instant::now();
        let replies = pipeline(&mut m, &[&["SET", &k, "v"], &["INCR", "n"], &["GET", &k]]);
        times.push(t.elapsed());
        let got: Vec<String> = replies.iter().map(|r| s(r)).collect();
        assert_eq!(got, ["+OK\r\n".to_string(), format!(":{}\r\n", i + 1), "$1\r\nv\r\n".into()]);
        assert_eq!(text(&cmd(&mut r, &["GET", &k])), "v");
    }
    times.sort();
    assert!(times[10] < Duration::from_millis(300), "median {:?}", times[10]);
}

#[test]
fn durable_fsync_under_everysec_waits_for_an_fsync_it_asks_for() {
    let server = TestServer::start_with(
        &TestServer::default_bin(),
        &["--appendonly", "yes", "--appendfsync", "everysec"],
        None,
    );
    let mut c = server.client();
    c.wait_loaded();
    let mut times = Vec::new();
    assert_eq!(s(&c.cmd(&["DURABLE", "0", "5000", "FSYNC"]).unwrap()), "+OK\r\n");
    let line = s(&c.cmd(&["CLIENT", "INFO"]).unwrap());
    assert!(line.trim_end().ends_with(" durable=0,5000,fsync"), "{line}");
    for i in 0..10 {
        let t = Instant::now();
        let replies = pipeline(&mut c, &[&["SET", &format!("k{i}"), "v"], &["GET", "k0"]]);
        times.push(t.elapsed());
        assert_eq!(s(&replies[0]), "+OK\r\n");
        assert_eq!(s(&replies[1]), "$1\r\nv\r\n");
        // What the reply promised: WAITAOF finds it fsynced already.
        let w = cmd(&mut c, &["WAITAOF", "1", "0", "1"]);
        assert_eq!(w, Frame::Array(Some(vec![Frame::Integer(1), Frame::Integer(0)])));
    }
    times.sort();
    assert!(times[5] < Duration::from_millis(300), "median {:?}", times[5]);
    // The AOF turned off under the mode: held writes say so.
    let mut admin = server.client();
    admin.cmd(&["CONFIG", "SET", "appendonly", "no"]).unwrap();
    assert_eq!(
        s(&c.cmd(&["SET", "x", "1"]).unwrap()),
        "-NOFSYNC Write applied locally and acknowledged by 0 of 0 replicas, but not fsynced: \
         appendonly is off\r\n"
    );
    assert_eq!(
        s(&c.cmd(&["DURABLE", "0", "10", "FSYNC"]).unwrap()),
        "-ERR DURABLE FSYNC cannot be used when appendonly is disabled.\r\n"
    );
}

#[test]
fn durable_fsync_asked_while_the_aof_fsyncs_an_earlier_group_is_not_left_for_everysec() {
    // The regression: a request made while the writer wrote and fsynced
    // an earlier group was cleared with that group's, so its writes
    // waited for everysec's next fsync (a second; the bench's p99 of
    // DURABLE FSYNC was ~1 s). The writer sleeps 200 ms before each
    // write (DEBUG AOF-FLUSH-SLEEP) to hold that window open.
    let server = TestServer::start_with(
        &TestServer::default_bin(),
        &["--appendonly", "yes", "--appendfsync", "everysec"],
        None,
    );
    let mut admin = server.client();
    admin.wait_loaded();
    admin.cmd(&["DEBUG", "AOF-FLUSH-SLEEP", "200000"]).unwrap();
    let mut clients: Vec<Client> = (0..3).map(|_| server.client()).collect();
    for c in &mut clients {
        assert_eq!(s(&c.cmd(&["DURABLE", "0", "5000", "FSYNC"]).unwrap()), "+OK\r\n");
    }
    let set = |c: &mut Client, key: &str| {
        let mut bytes = Vec::new();
        testkit::encode(&["SET", key, "1"], &mut bytes);
        c.send_raw(&bytes).unwrap();
    };
    // At 0 ms A's write is taken (before its request) and the writer
    // sleeps; at 50 ms B writes and asks; at ~200 ms B's group is taken
    // with the request; at 250 ms C writes and asks while B's group is
    // written and fsynced. The bug cleared C's request with B's: C's
    // write was then written unsynced and waited for everysec.
    let [a, b, c] = &mut clients[..] else { unreachable!() };
    set(a, "a");
    std::thread::sleep(Duration::from_millis(50));
    set(b, "b");
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    set(c, "c");
    assert_eq!(s(&c.read_reply().unwrap()), "+OK\r\n");
    let waited = t.elapsed();
    assert_eq!(s(&a.read_reply().unwrap()), "+OK\r\n");
    assert_eq!(s(&b.read_reply().unwrap()), "+OK\r\n");
    // The rest of B's group and C's own (a 200 ms sleep each at most),
    // not everysec's second.
    assert!(waited < Duration::from_millis(800), "C waited {waited:?}");
    admin.cmd(&["DEBUG", "AOF-FLUSH-SLEEP", "0"]).unwrap();
}

fn pair(a: i64, b: i64) -> Frame {
    Frame::Array(Some(vec![Frame::Integer(a), Frame::Integer(b)]))
}

#[test]
fn waitaof_follows_redis_72() {
    let server = TestServer::start();
    let mut c = server.client();
    let err = |c: &mut Client, args: &[&str]| s(&c.cmd(args).unwrap());
    assert_eq!(
        err(&mut c, &["WAITAOF", "2", "0", "0"]),
        "-ERR value is out of range, value must between 0 and 1\r\n"
    );
    assert_eq!(
        err(&mut c, &["WAITAOF", "0", "-1", "0"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(err(&mut c, &["WAITAOF", "0", "0", "-1"]), "-ERR timeout is negative\r\n");
    assert_eq!(
        err(&mut c, &["WAITAOF", "x", "0", "0"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        err(&mut c, &["WAITAOF", "1", "0", "0"]),
        "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    );
    assert_eq!(cmd(&mut c, &["WAITAOF", "0", "0", "0"]), pair(0, 0));
    // appendfsync no: nothing fsyncs, the wait ends at its timeout.
    c.cmd(&["CONFIG", "SET", "appendonly", "yes"]).unwrap();
    wait_for("the AOF rewrite", Duration::from_secs(20), || {
        text(&cmd(&mut c, &["INFO", "persistence"])).contains("aof_rewrite_in_progress:0")
    });
    c.cmd(&["CONFIG", "SET", "appendfsync", "no"]).unwrap();
    c.cmd(&["INCR", "foo"]).unwrap();
    assert_eq!(cmd(&mut c, &["WAITAOF", "1", "0", "50"]), pair(0, 0));
    // everysec: within a second.
    c.cmd(&["CONFIG", "SET", "appendfsync", "everysec"]).unwrap();
    c.cmd(&["INCR", "foo"]).unwrap();
    assert_eq!(cmd(&mut c, &["WAITAOF", "1", "0", "0"]), pair(1, 0));
    // always: at once.
    c.cmd(&["CONFIG", "SET", "appendfsync", "always"]).unwrap();
    c.cmd(&["INCR", "foo"]).unwrap();
    assert_eq!(cmd(&mut c, &["WAITAOF", "1", "0", "0"]), pair(1, 0));
    // Inside MULTI it does not block.
    let replies = pipeline(&mut c, &[&["MULTI"], &["WAITAOF", "0", "1", "0"], &["EXEC"]]);
    assert_eq!(s(&replies[2]), "*1\r\n*2\r\n:1\r\n:0\r\n");
    // The AOF turned off under a blocked WAITAOF: its error.
    c.cmd(&["CONFIG", "SET", "appendfsync", "no"]).unwrap();
    c.cmd(&["INCR", "foo"]).unwrap();
    let mut admin = server.client();
    c.send(&["WAITAOF", "1", "0", "0"]).unwrap();
    wait_for("WAITAOF to block", Duration::from_secs(10), || {
        text(&cmd(&mut admin, &["INFO", "clients"])).contains("blocked_clients:1")
    });
    admin.cmd(&["CONFIG", "SET", "appendonly", "no"]).unwrap();
    assert_eq!(
        s(&c.read_reply().unwrap()),
        "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    );
}

#[test]
fn waitaof_counts_replicas_by_their_fack() {
    let master = TestServer::start();
    let with_aof = replica_of(&master, &["--appendonly", "yes", "--appendfsync", "always"]);
    let _without = replica_of(&master, &[]);
    let mut m = master.client();
    online_replicas(&mut m, 2);
    let mut r = with_aof.client();
    r.wait_loaded();
    m.cmd(&["SET", "k", "v"]).unwrap();
    wait_synced(&mut m, &mut r);
    // Only the replica whose AOF is on reports an fsynced offset.
    assert_eq!(cmd(&mut m, &["WAITAOF", "0", "1", "5000"]), pair(0, 1));
    assert_eq!(cmd(&mut m, &["WAITAOF", "0", "2", "300"]), pair(0, 1));
    assert_eq!(
        s(&r.cmd(&["WAITAOF", "0", "0", "0"]).unwrap()),
        "-ERR WAITAOF cannot be used with replica instances. Please also note that writes to \
         replicas are just local and are not propagated.\r\n"
    );
}

/// `SET k <round>` then `WAIT 2 0` in one write: the replies, and
/// whether the pair took longer than `slow`.
fn set_wait(c: &mut Client, round: usize, slow: Duration) -> (Vec<String>, bool) {
    let v = round.to_string();
    let t = Instant::now();
    let got = pipeline(c, &[&["SET", "k", &v], &["WAIT", "2", "0"]]);
    (got.iter().map(|r| s(r)).collect(), t.elapsed() > slow)
}

#[test]
fn wait_with_two_replicas_acknowledging_at_once_is_not_left_for_the_cron() {
    // Both replicas' acknowledgement threads served the parked WAITs at
    // once: the one that took the waits counted before the other's
    // replica had acknowledged, the other found no wait to serve, and a
    // WAIT both replicas had answered stayed parked until the cron's
    // pass (up to a second): bench/durable's WAIT-after-each had a p99 of
    // 1-1.8 s with two replicas. One client, so that no other client's
    // acknowledgement comes to the rescue. redis-server (master and two
    // replicas) gets the same rounds, one for one in turn, so that both
    // see the same load: it says how many slow WAITs the machine makes.
    const ROUNDS: usize = 3_000;
    let slow = Duration::from_millis(300);
    let master = TestServer::start();
    let _r1 = replica_of(&master, &[]);
    let _r2 = replica_of(&master, &[]);
    let mut m = master.client();
    online_replicas(&mut m, 2);
    let redis = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"], None);
    let mut oracle = redis.as_ref().map(|rm| {
        let port = rm.port().to_string();
        let args = ["--replicaof", "127.0.0.1", port.as_str()];
        let replicas: Vec<_> =
            (0..2).filter_map(|_| RedisServer::start_with(&args, None)).collect();
        let mut c = rm.client();
        online_replicas(&mut c, 2);
        (c, replicas)
    });
    let want = ["+OK\r\n", ":2\r\n"];
    let (mut late, mut redis_late) = (0, 0);
    for round in 0..ROUNDS {
        let (got, slow_here) = set_wait(&mut m, round, slow);
        assert_eq!(got, want, "round {round}");
        late += usize::from(slow_here);
        if let Some((c, _)) = oracle.as_mut() {
            let (got, slow_there) = set_wait(c, round, slow);
            assert_eq!(got, want, "redis-server, round {round}");
            redis_late += usize::from(slow_there);
        }
    }
    // Before the fix, from one WAIT in 3,000 (an idle machine) to one in
    // 40 (a loaded one) waited for the cron: this test catches it under
    // load, not always on an idle machine; `acks::Passes`'s unit tests
    // pin the fix without depending on the timing. More rounds made the
    // module's other timing tests fail beside it.
    let allowed = 2 + 2 * redis_late;
    assert!(
        late <= allowed,
        "{late} of {ROUNDS} WAITs took over {slow:?} (redis-server: {redis_late})"
    );
}
