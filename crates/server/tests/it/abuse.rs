//! Hostile commands against the real binaries: tens of thousands of
//! commands from Redis 7.0's table with arguments chosen to hurt
//! (`testkit::abuse`, a fixed seed), sent to `sluice-server` started under
//! an address-space limit and to `redis-server` beside it. Sluice must
//! stay up, keep its memory bounded, never hang, and answer an error
//! exactly where Redis answers one, with Redis's text; where Redis drops
//! the client (its output buffer limit), Sluice drops it too. Non-error
//! replies are compared by their RESP type only, since random picks
//! differ.
//!
//! `ABUSE_COMMANDS` sets how many commands (default 24,000), `ABUSE_SEED`
//! the seed.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use testkit::abuse::{self, Rng, Source};
use testkit::{Client, RedisServer, TestServer};

/// Commands the test keeps out, by full name: they change the
/// connection's mode (MONITOR, SUBSCRIBE, MULTI, CLIENT REPLY/TRACKING),
/// stop or pause the server, touch the disk, the network, the
/// configuration or the users, or are slow by design. Also the commands
/// Sluice does not have yet: cluster mode's (its own issue), MODULE and
/// LOLWUT.
fn skip(name: &str) -> bool {
    let top = name.split('|').next().unwrap_or(name);
    if matches!(top, "cluster" | "readonly" | "readwrite" | "asking" | "module" | "lolwut") {
        return true;
    }
    matches!(
        name,
        "shutdown"
            | "debug"
            | "monitor"
            | "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "sync"
            | "psync"
            | "replconf"
            | "replicaof"
            | "slaveof"
            | "failover"
            | "migrate"
            | "quit"
            | "multi"
            | "save"
            | "bgsave"
            | "bgrewriteaof"
            | "pfselftest"
            | "client|kill"
            | "client|pause"
            | "client|reply"
            | "client|tracking"
            | "config|set"
            | "config|rewrite"
            | "acl|setuser"
            | "acl|deluser"
            | "acl|load"
            | "acl|save"
            | "script|debug"
            | "module|load"
            | "module|loadex"
            | "module|unload"
    )
}

/// Both servers' settings for the run: an output buffer limit that
/// requests for huge replies run into, and a string size limit that
/// SETRANGE/SETBIT/APPEND offsets run into.
const SETTINGS: &[[&str; 4]] = &[
    ["CONFIG", "SET", "client-output-buffer-limit", "normal 4mb 0 0"],
    ["CONFIG", "SET", "proto-max-bulk-len", "1mb"],
];

/// What a server did with one command.
#[derive(Debug, PartialEq)]
enum Answer {
    /// An error line, as sent.
    Error(String),
    /// A reply of this RESP type.
    Reply(u8),
    /// The server closed the connection.
    Closed,
    /// No reply in time.
    Silent,
}

fn answer(r: io::Result<Vec<u8>>) -> Answer {
    match r {
        Ok(b) if b.first() == Some(&b'-') => {
            Answer::Error(String::from_utf8_lossy(&b[1..b.len() - 2]).into_owned())
        }
        Ok(b) => Answer::Reply(b.first().copied().unwrap_or(0)),
        Err(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => {
            Answer::Silent
        }
        Err(_) => Answer::Closed,
    }
}

/// The reply of the marker command sent after each command.
const MARKER: &[u8] = b"$6\r\nabuse!\r\n";

/// What one command did: its first reply, how many replies it sent, and
/// the keys of the selected database after it (sorted).
struct Outcome {
    answer: Answer,
    replies: usize,
    keys: Option<Vec<Vec<u8>>>,
}

/// The names in a `KEYS` reply, sorted.
fn key_names(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (frame, _) = resp::parse_frame(reply).ok()??;
    let items = match frame {
        resp::Frame::Array(Some(v)) | resp::Frame::Set(v) => v,
        _ => return None,
    };
    let mut names: Vec<Vec<u8>> = items
        .into_iter()
        .filter_map(|f| match f {
            resp::Frame::Bulk(Some(b)) => Some(b),
            _ => None,
        })
        .collect();
    names.sort();
    Some(names)
}

/// Sends `argv`, `KEYS *` and a marker (`ECHO abuse!`) in one write and
/// reads up to the marker. The keys tell when the two servers' data
/// parted (an expiry taken on one side only, a write that did not
/// happen) even where both replies look alike; the marker ends a command
/// that replies more than once (UNSUBSCRIBE with several channels).
fn exchange(c: &mut Client, argv: &[Vec<u8>]) -> Outcome {
    let none = |answer| Outcome { answer, replies: 0, keys: None };
    let mut req = Vec::new();
    testkit::encode(argv, &mut req);
    testkit::encode(&["KEYS", "*"], &mut req);
    testkit::encode(&["ECHO", "abuse!"], &mut req);
    if c.send_raw(&req).is_err() {
        return none(Answer::Closed);
    }
    let mut replies: Vec<Vec<u8>> = Vec::new();
    loop {
        match c.read_reply() {
            Ok(b) if b == MARKER => break,
            Ok(b) => replies.push(b),
            Err(e) => {
                let first = replies.into_iter().next();
                return match first {
                    Some(b) => Outcome { answer: answer(Ok(b)), replies: 1, keys: None },
                    None => none(answer(Err(e))),
                };
            }
        }
    }
    let keys = replies.pop().and_then(|k| key_names(&k));
    let n = replies.len();
    match replies.into_iter().next() {
        // Nothing came for the command itself.
        None => Outcome { answer: Answer::Reply(0), replies: 0, keys },
        Some(b) => Outcome { answer: answer(Ok(b)), replies: n, keys },
    }
}

/// A connection to one server and an admin connection beside it (to
/// unblock the first).
struct Side {
    port: u16,
    conn: Client,
    id: String,
    admin: Client,
}

impl Side {
    fn new(port: u16, timeout: Duration) -> Side {
        let mut admin = Client::connect(port).unwrap();
        for s in SETTINGS {
            assert_eq!(admin.cmd(s).unwrap(), b"+OK\r\n", "{s:?}");
        }
        let (conn, id) = Self::connect(port, timeout);
        Side { port, conn, id, admin }
    }

    fn connect(port: u16, timeout: Duration) -> (Client, String) {
        let mut c = Client::connect(port).unwrap();
        c.set_timeout(timeout);
        let id = c.cmd(&["CLIENT", "ID"]).unwrap();
        let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
        (c, id)
    }

    fn reconnect(&mut self, timeout: Duration) {
        (self.conn, self.id) = Self::connect(self.port, timeout);
    }

    /// Ends a wait of the main connection (a blocked command that
    /// outlived its read timeout) and reads up to the marker.
    fn unblock(&mut self) {
        let _ = self.admin.cmd(&["CLIENT", "UNBLOCK", &self.id]);
        while let Ok(b) = self.conn.read_reply() {
            if b == MARKER {
                break;
            }
        }
    }

    /// A fresh data set: every key type under the generator's names.
    fn reset(&mut self) {
        let c = &mut self.conn;
        for cmd in [
            &["HELLO", "2"][..],
            &["SELECT", "0"],
            &["FLUSHALL"],
            &["SCRIPT", "FLUSH"],
            &["FUNCTION", "FLUSH"],
        ] {
            let r = c.cmd(cmd).unwrap();
            assert!(r[0] != b'-', "{cmd:?}: {}", String::from_utf8_lossy(&r));
        }
        for f in abuse::fixtures() {
            let r = c.cmd(&f).unwrap();
            assert!(r[0] != b'-', "{f:?}: {}", String::from_utf8_lossy(&r));
        }
    }
}

/// Whether keys present on one side only all have a time to live: a key
/// that expires between the two servers' runs of a command is a race of
/// the test, not a difference.
fn expiry_race(r: &mut Side, s: &mut Side, x: &[Vec<u8>], y: &[Vec<u8>]) -> bool {
    let only = |a: &[Vec<u8>], b: &[Vec<u8>]| -> Vec<Vec<u8>> {
        a.iter().filter(|k| !b.contains(k)).cloned().collect()
    };
    // A time to live, or gone by now: either way it expires.
    let ttl = |side: &mut Side, keys: Vec<Vec<u8>>| {
        keys.iter().all(|k| {
            let pttl = [b"PTTL".to_vec(), k.clone()];
            matches!(side.conn.cmd(&pttl), Ok(b) if b.first() == Some(&b':') && b != b":-1\r\n")
        })
    };
    ttl(r, only(x, y)) && ttl(s, only(y, x))
}

/// Mismatches, one line each, for the failure message.
fn run(redis_port: u16, sluice: &mut TestServer, n: usize, seed: u64) -> (Vec<String>, u64) {
    let redis_wait = Duration::from_secs(3);
    let sluice_wait = Duration::from_secs(20);
    let mut r = Side::new(redis_port, redis_wait);
    let mut s = Side::new(sluice.port(), sluice_wait);
    let table = abuse::commands(&skip);
    let mut rng = Rng(seed);
    let mut found = Vec::new();
    let mut peak_kb = 0;
    // The slowest commands (redis's time, sluice's), for the report.
    let mut slow: Vec<(Duration, Duration, String)> = Vec::new();
    for i in 0..n {
        if i % 25 == 0 {
            r.reset();
            s.reset();
            let kb = sluice.rss_kb().unwrap_or(0);
            peak_kb = peak_kb.max(kb);
            assert!(kb < 1 << 20, "sluice's RSS is {kb} KiB after {i} commands");
        }
        let cmd = table[rng.below(table.len())];
        let argv = abuse::command(&mut rng, cmd);
        let t0 = Instant::now();
        let Outcome { answer: a, replies: na, keys: ka } = exchange(&mut r.conn, &argv);
        if a == Answer::Silent {
            // Blocked in Redis after all: not a command this test can
            // compare (the generator keeps valid timeouts short).
            r.unblock();
            let _ = exchange(&mut s.conn, &argv);
            s.unblock();
            continue;
        }
        let t1 = Instant::now();
        let Outcome { answer: b, replies: nb, keys: kb } = exchange(&mut s.conn, &argv);
        slow.push((t1 - t0, t1.elapsed(), abuse::show(&argv)));
        slow.sort_by_key(|x| std::cmp::Reverse(x.0 + x.1));
        slow.truncate(5);
        assert!(
            sluice.is_running(),
            "sluice died on {}\n{}",
            abuse::show(&argv),
            sluice.log_text()
        );
        let same = na == nb
            && match (&a, &b) {
                (Answer::Error(x), Answer::Error(y)) => x == y,
                (Answer::Reply(x), Answer::Reply(y)) => {
                    x == y
                    // A null's type may be told apart only where the
                    // reply is deterministic.
                    || abuse::nondeterministic(cmd)
                }
                (x, y) => x == y,
            };
        if !same {
            found.push(format!(
                "{}\n    redis:  {a:?} ({na} replies)\n    sluice: {b:?} ({nb} replies)",
                abuse::show(&argv)
            ));
        } else if let (Some(x), Some(y)) = (&ka, &kb) {
            if x != y && !expiry_race(&mut r, &mut s, x, y) {
                let show = |k: &Vec<Vec<u8>>| {
                    k.iter().map(|n| testkit::escape(n)).collect::<Vec<_>>().join(" ")
                };
                found.push(format!(
                    "{}\n    keys after it differ: redis [{}], sluice [{}]",
                    abuse::show(&argv),
                    show(x),
                    show(y)
                ));
            }
            if x != y {
                // Start again from the same data, or one difference
                // shows as many.
                r.reset();
                s.reset();
            }
        }
        if b == Answer::Silent {
            s.unblock();
        }
        if a == Answer::Closed {
            r.reconnect(redis_wait);
        }
        if b == Answer::Closed {
            s.reconnect(sluice_wait);
        }
    }
    for (tr, ts, c) in &slow {
        eprintln!("slow: redis {tr:?} sluice {ts:?}: {c}");
    }
    (found, peak_kb)
}

#[test]
fn hostile_commands_are_answered_as_redis_answers_them() {
    let Some(redis) = RedisServer::start() else { return };
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    // 4 GiB of address space: jemalloc's reservations fit, a runaway
    // allocation does not.
    let mut sluice = TestServer::start_limited(bin, &[], None, &[], Some(4 << 30));
    let n = std::env::var("ABUSE_COMMANDS").ok().and_then(|v| v.parse().ok()).unwrap_or(24_000);
    let seed = std::env::var("ABUSE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(23);
    let start = Instant::now();
    let (found, peak_kb) = run(redis.port(), &mut sluice, n, seed);
    eprintln!(
        "abuse: {n} commands (seed {seed}) in {:?}; sluice peak RSS {peak_kb} KiB; {} mismatches",
        start.elapsed(),
        found.len()
    );
    assert!(found.is_empty(), "{} mismatches:\n{}", found.len(), found.join("\n"));
}
