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

use crate::common::{assert_same, both, pipeline};

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
    // window is tracked, and the client's own write invalidates it; the
    // push follows the write's reply, before the next request's.
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
        &["SET", "t", "9"],
    ];
    let (r, s) = both(&mut pair, cmds);
    assert_eq!(
        testkit::escape(&r).matches(&testkit::escape(push)).count(),
        2,
        "redis-server's pushes"
    );
    assert_same("tracking turned on mid-pipeline", (r, s));

    // The same when the push is for a client that redirects its
    // invalidations here: this connection tracks nothing itself (its
    // window may take the lean path), and the push still follows the
    // write's reply.
    let mut target = servers.connect();
    let mut tracker = servers.connect();
    for c in [&mut target.redis, &mut target.sluice] {
        c.send_raw(hello).unwrap();
        c.read_reply().unwrap();
    }
    let id = |c: &mut testkit::Client| {
        let r = c.cmd(&["CLIENT", "ID"]).unwrap();
        String::from_utf8_lossy(&r[1..]).trim().to_string()
    };
    let (rid, sid) = (id(&mut target.redis), id(&mut target.sluice));
    for (c, id) in [(&mut tracker.redis, &rid), (&mut tracker.sluice, &sid)] {
        assert_eq!(
            c.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", id.as_str()]).unwrap(),
            b"+OK\r\n"
        );
        c.cmd(&["GET", "r"]).unwrap();
    }
    let cmds: &[&[&str]] = &[&["GET", "x"], &["SET", "r", "1"], &["GET", "x"], &["INCR", "y"]];
    let (r, s) = both(&mut target, cmds);
    assert!(testkit::escape(&r).contains("invalidate"), "redis-server's push");
    assert_same("a redirected invalidation mid-pipeline", (r, s));
}

/// A RESP3 connection of `pair`'s servers.
fn resp3(servers: &Servers) -> testkit::diff::Pair {
    let mut pair = servers.connect();
    for c in [&mut pair.redis, &mut pair.sluice] {
        c.send_raw(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n").unwrap();
        c.read_reply().unwrap();
    }
    pair
}

/// Sends `cmd` to both servers one at a time; the replies must match.
fn each(pair: &mut testkit::diff::Pair, cmd: &[&str]) {
    let r = pair.redis.cmd(cmd).unwrap();
    let s = pair.sluice.cmd(cmd).unwrap();
    assert_eq!(testkit::escape(&s), testkit::escape(&r), "{cmd:?}");
}

#[test]
fn tracking_pushes_in_a_pipeline_land_where_redis_puts_them() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    // The client's own FLUSHDB: the null push after the reply.
    let mut a = resp3(&servers);
    each(&mut a, &["CLIENT", "TRACKING", "ON"]);
    let (r, s) = both(&mut a, &[&["GET", "a"], &["GET", "b"], &["FLUSHDB"], &["PING"]]);
    assert!(testkit::escape(&r).contains("_\\r\\n+PONG"), "redis-server's null push");
    assert_same("own FLUSHDB", (r, s));
    // NOLOOP: the client's own writes send nothing.
    each(&mut a, &["CLIENT", "TRACKING", "ON", "NOLOOP"]);
    assert_same("NOLOOP", both(&mut a, &[&["GET", "n"], &["SET", "n", "1"], &["PING"]]));

    // BCAST: Redis sends the keys once per event-loop turn, after the
    // batch's replies (here after the sentinel's), in the same write;
    // Sluice once per batch.
    let mut b = resp3(&servers);
    each(&mut b, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p"]);
    let buf = pipeline(&[&["GET", "p1"], &["MSET", "p2", "y", "q", "z", "p1", "x"], &["PING"]]);
    let frames = |x: &mut testkit::Client, buf: &[u8], n: usize| -> String {
        x.send_raw(buf).unwrap();
        testkit::escape(&(0..n).flat_map(|_| x.read_reply().unwrap()).collect::<Vec<u8>>())
    };
    let (r, s) = (frames(&mut b.redis, &buf, 5), frames(&mut b.sluice, &buf, 5));
    assert!(r.contains("pipeline-end\\r\\n>2"), "redis-server's broadcast after the batch: {r}");
    assert_eq!(s, r, "BCAST");
    // Several writes in one batch: one array of the batch's keys under
    // the prefix (sorted, each once), to the writer after its replies
    // and to another BCAST client; a NOLOOP client gets the keys the
    // writer modified, not its own.
    let mut watcher = resp3(&servers);
    each(&mut watcher, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p"]);
    let mut own = resp3(&servers);
    each(&mut own, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p", "NOLOOP"]);
    assert_same("NOLOOP writer", both(&mut own, &[&["SET", "p9", "x"], &["PING"]]));
    let pushes = |x: &mut testkit::Client| testkit::escape(&x.read_reply().unwrap());
    for x in [&mut b, &mut watcher] {
        let (r, s) = (pushes(&mut x.redis), pushes(&mut x.sluice));
        assert_eq!(s, r, "the NOLOOP client's write");
    }
    let buf = pipeline(&[
        &["SET", "p3", "a"],
        &["MSET", "p2", "y", "q", "z", "p1", "x"],
        &["DEL", "p3", "p9"],
        &["INCR", "p4"],
        &["SET", "q", "1"],
    ]);
    let (r, s) = (frames(&mut b.redis, &buf, 7), frames(&mut b.sluice, &buf, 7));
    assert!(
        r.contains("pipeline-end\\r\\n>2\\r\\n$10\\r\\ninvalidate\\r\\n*5\\r\\n"),
        "one broadcast of the batch: {r}"
    );
    assert_eq!(s, r, "BCAST, several writes in a batch");
    let (r, s) = (pushes(&mut watcher.redis), pushes(&mut watcher.sluice));
    assert_eq!(s, r, "another BCAST client");
    let (r, s) = (pushes(&mut own.redis), pushes(&mut own.sluice));
    assert_eq!(s, r, "a NOLOOP client");
    assert_same("after the broadcasts", both(&mut own, &[&["PING"]]));

    // A broken redirection found by the client's own write: the
    // `tracking-redir-broken` push after the write's reply.
    let mut c = resp3(&servers);
    let mut gone = servers.connect();
    let id = |x: &mut testkit::Client| {
        let r = x.cmd(&["CLIENT", "ID"]).unwrap();
        String::from_utf8_lossy(&r[1..]).trim().to_string()
    };
    let (rid, sid) = (id(&mut gone.redis), id(&mut gone.sluice));
    for (x, id) in [(&mut c.redis, &rid), (&mut c.sluice, &sid)] {
        assert_eq!(
            x.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", id.as_str()]).unwrap(),
            b"+OK\r\n"
        );
    }
    drop(gone);
    std::thread::sleep(Duration::from_millis(200));
    let (r, s) = both(&mut c, &[&["GET", "w"], &["SET", "w", "1"], &["PING"]]);
    assert!(testkit::escape(&r).contains("tracking-redir-broken"), "redis-server's push");
    // The push names the redirection's client id, which differs.
    let (r, s) = (testkit::escape(&r).replace(&rid, "ID"), testkit::escape(&s).replace(&sid, "ID"));
    assert_eq!(s, r, "broken redirection");
}
