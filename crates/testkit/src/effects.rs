//! The effects record proved against Redis: a scenario (the format of
//! [`crate::scenario`], with `@async`/`@await` for blocking commands) is
//! played by [`crate::diff`] with [`crate::diff::Options::EFFECTS`] on a
//! fresh redis-server and a fresh Sluice, replies compared as usual, and
//! [`Watch`] compares what each server did besides replying:
//!
//! - the propagated commands: on redis-server, the stream a replica reads
//!   after `SYNC` (see [`ReplicaStream`]); on Sluice, what `DEBUG EFFECTS
//!   TAKE` reports. Compared command for command, names ignoring case (a
//!   client's command goes out as spelled, Redis's rewrites in upper
//!   case), absolute times (`PXAT`, `PEXPIREAT` values) within a few
//!   seconds;
//! - the keyspace events: redis-server's `__keyevent@*__:*` notifications
//!   (with `notify-keyspace-events EAn`) against Sluice's recorded events
//!   (its `keymiss` events, not enabled on the Redis side, left out);
//! - `rdb_changes_since_last_save` of `INFO persistence`, after every line.
//!
//! Active expiry is off on both (`DEBUG SET-ACTIVE-EXPIRE 0`), so keys only
//! expire when the scenario touches them. To add a scenario, drop a file
//! in `tests/effects/` and a line in `crates/server/tests/it/effects.rs`.

use std::time::{Duration, Instant};

use resp::{parse_frame, Frame};

use crate::diff::Step;
use crate::{escape, Client};

/// One propagated command.
pub type Cmd = Vec<Vec<u8>>;

/// redis-server's replication stream, read as a replica would.
pub struct ReplicaStream {
    conn: Client,
    buf: Vec<u8>,
}

impl ReplicaStream {
    /// Connects, sends `SYNC`, and skips the RDB payload (both the
    /// length-prefixed and the diskless EOF-marker forms).
    pub fn connect(port: u16) -> std::io::Result<ReplicaStream> {
        let mut conn = Client::connect(port)?;
        conn.set_timeout(Duration::from_secs(10));
        conn.send_raw(b"SYNC\r\n")?;
        let mut buf = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if Instant::now() > deadline {
                return Err(std::io::Error::other("no RDB payload after SYNC"));
            }
            let (got, closed) = conn.read_quiet(Duration::from_millis(50))?;
            if closed {
                return Err(std::io::Error::other("closed during SYNC"));
            }
            buf.extend_from_slice(&got);
            // Keep-alive newlines come before the payload.
            while buf.first() == Some(&b'\n') {
                buf.remove(0);
            }
            let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else { continue };
            if buf.first() != Some(&b'$') {
                return Err(std::io::Error::other(format!("unexpected {}", escape(&buf))));
            }
            let head = &buf[1..eol];
            if let Some(mark) = head.strip_prefix(b"EOF:") {
                let mark = mark.to_vec();
                if let Some(p) = buf[eol + 2..].windows(mark.len()).position(|w| w == mark) {
                    let rest = buf.split_off(eol + 2 + p + mark.len());
                    return Ok(ReplicaStream { conn, buf: rest });
                }
            } else {
                let len: usize = std::str::from_utf8(head)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| std::io::Error::other("bad payload length"))?;
                if buf.len() >= eol + 2 + len {
                    let rest = buf.split_off(eol + 2 + len);
                    return Ok(ReplicaStream { conn, buf: rest });
                }
            }
        }
    }

    /// The commands that arrived until the stream stayed quiet for `quiet`,
    /// without the keep-alive `PING`s and `REPLCONF`s.
    pub fn drain(&mut self, quiet: Duration) -> Vec<Cmd> {
        if let Ok((got, _)) = self.conn.read_quiet(quiet) {
            self.buf.extend_from_slice(&got);
        }
        let mut out = Vec::new();
        let mut pos = 0;
        while let Ok(Some((f, used))) = parse_frame(&self.buf[pos..]) {
            pos += used;
            if let Some(cmd) = command(f) {
                let name = cmd[0].to_ascii_uppercase();
                if name != b"PING" && name != b"REPLCONF" {
                    out.push(cmd);
                }
            }
        }
        self.buf.drain(..pos);
        out
    }
}

/// An array of bulk strings as a command.
fn command(f: Frame) -> Option<Cmd> {
    let Frame::Array(Some(v)) = f else { return None };
    v.into_iter()
        .map(|x| match x {
            Frame::Bulk(Some(b)) => Some(b.to_vec()),
            _ => None,
        })
        .collect::<Option<Cmd>>()
        .filter(|c| !c.is_empty())
}

/// redis-server's keyevent notifications, as (event, db, key).
pub struct EventStream {
    conn: Client,
}

impl EventStream {
    /// Enables `notify-keyspace-events EAn` and subscribes to every
    /// keyevent channel.
    pub fn connect(port: u16) -> std::io::Result<EventStream> {
        let mut c = Client::connect(port)?;
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "EAn"])?;
        c.cmd(&["PSUBSCRIBE", "__keyevent@*__:*"])?;
        Ok(EventStream { conn: c })
    }

    /// The events that arrived until quiet for `quiet`.
    pub fn drain(&mut self, quiet: Duration) -> Vec<(Vec<u8>, usize, Vec<u8>)> {
        let mut out = Vec::new();
        let Ok((bytes, _)) = self.conn.read_quiet(quiet) else { return out };
        let mut pos = 0;
        while let Ok(Some((f, used))) = parse_frame(&bytes[pos..]) {
            pos += used;
            let Some(m) = command(f) else { continue };
            // pmessage, pattern, channel, key
            if m.len() == 4 && m[0] == b"pmessage" {
                if let Some(ev) = parse_channel(&m[2]) {
                    out.push((ev.1, ev.0, m[3].clone()));
                }
            }
        }
        out
    }
}

/// `__keyevent@<db>__:<event>` as (db, event).
fn parse_channel(ch: &[u8]) -> Option<(usize, Vec<u8>)> {
    let rest = ch.strip_prefix(b"__keyevent@")?;
    let at = rest.windows(3).position(|w| w == b"__:")?;
    let db = std::str::from_utf8(&rest[..at]).ok()?.parse().ok()?;
    Some((db, rest[at + 3..].to_vec()))
}

/// What `DEBUG EFFECTS TAKE` reported.
struct Taken {
    stream: Vec<Cmd>,
    events: Vec<(Vec<u8>, usize, Vec<u8>)>,
}

fn take(c: &mut Client) -> Result<Taken, String> {
    let f = c.cmd(&["DEBUG", "EFFECTS", "TAKE"]).map_err(|e| e.to_string())?;
    let Some((Frame::Array(Some(parts)), _)) = parse_frame(&f).ok().flatten() else {
        return Err(format!("DEBUG EFFECTS TAKE: {}", escape(&f)));
    };
    let mut it = parts.into_iter();
    let stream = match it.next() {
        Some(Frame::Array(Some(v))) => v.into_iter().filter_map(command).collect(),
        _ => return Err("no stream".into()),
    };
    let mut events = Vec::new();
    if let Some(Frame::Array(Some(v))) = it.next() {
        for e in v {
            if let Frame::Array(Some(t)) = e {
                if let [Frame::Bulk(Some(n)), Frame::Integer(db), Frame::Bulk(Some(k))] = &t[..] {
                    if &n[..] != b"keymiss" {
                        events.push((n.to_vec(), *db as usize, k.to_vec()));
                    }
                }
            }
        }
    }
    Ok(Taken { stream, events })
}

/// `rdb_changes_since_last_save` of a server.
fn dirty(c: &mut Client) -> Option<i64> {
    let info = c.cmd(&["INFO", "persistence"]).ok()?;
    let text = String::from_utf8_lossy(&info);
    let line = text.lines().find(|l| l.starts_with("rdb_changes_since_last_save:"))?;
    line.split(':').nth(1)?.trim().parse().ok()
}

/// Whether two propagated commands agree: names ignoring case, numbers
/// that are absolute times in ms (alone, or as a stream id's time) within
/// 5 s of each other.
fn same_cmd(a: &Cmd, b: &Cmd) -> bool {
    if a.len() != b.len() || !a[0].eq_ignore_ascii_case(&b[0]) {
        return false;
    }
    a.iter().zip(b).skip(1).all(|(x, y)| {
        if x == y {
            return true;
        }
        let num = |v: &[u8]| std::str::from_utf8(v).ok()?.parse::<i64>().ok();
        // Unix ms of this century: a time the two servers computed.
        let close = |p: i64, q: i64| {
            p > 1_000_000_000_000 && q > 1_000_000_000_000 && (p - q).abs() < 5_000
        };
        // A stream id `<ms>-<seq>` generated from each server's clock
        // (XADD *): the times close, the sequence numbers equal.
        let id = |v: &[u8]| {
            let s = std::str::from_utf8(v).ok()?;
            let (ms, seq) = s.split_once('-')?;
            Some((ms.parse::<i64>().ok()?, seq.parse::<u64>().ok()?))
        };
        match (num(x), num(y)) {
            (Some(p), Some(q)) => close(p, q),
            _ => match (id(x), id(y)) {
                (Some((p, s)), Some((q, t))) => s == t && close(p, q),
                _ => false,
            },
        }
    })
}

fn show(c: &Cmd) -> String {
    c.iter().map(|a| escape(a)).collect::<Vec<_>>().join(" ")
}

/// The effects side of a run ([`crate::diff::Options::EFFECTS`]): control
/// connections to both servers, redis-server's replica stream and keyevent
/// notifications, and Sluice's effects record.
pub struct Watch {
    rctl: Client,
    sctl: Client,
    replica: ReplicaStream,
    events: EventStream,
}

impl Watch {
    /// Turns active expiry off on both, starts Sluice's effects record,
    /// and attaches to redis-server as a replica and a subscriber.
    pub fn start(redis_port: u16, sluice_port: u16) -> Watch {
        let mut rctl = Client::connect(redis_port).expect("redis control connection");
        let mut sctl = Client::connect(sluice_port).expect("sluice control connection");
        for c in [&mut rctl, &mut sctl] {
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).expect("DEBUG SET-ACTIVE-EXPIRE");
        }
        sctl.cmd(&["DEBUG", "EFFECTS", "START"]).expect("DEBUG EFFECTS START");
        let replica = ReplicaStream::connect(redis_port).expect("SYNC with redis-server");
        let events = EventStream::connect(redis_port).expect("subscribe to redis events");
        Watch { rctl, sctl, replica, events }
    }

    /// After a step: the dirty counts must agree.
    pub fn after_step(&mut self, name: &str, step: &Step) -> Option<String> {
        let (a, b) = (dirty(&mut self.rctl), dirty(&mut self.sctl));
        (a != b).then(|| {
            format!(
                "{name}:{}: {}\n  rdb_changes_since_last_save: redis {a:?}, sluice {b:?}",
                step.line, step.text
            )
        })
    }

    /// At the end: the propagated streams and the events must agree.
    pub fn finish(mut self, name: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let quiet = Duration::from_millis(300);
        let rstream = self.replica.drain(quiet);
        let revents = self.events.drain(quiet);
        match take(&mut self.sctl) {
            Err(e) => problems.push(format!("{}: {e}", name)),
            Ok(t) => {
                let n = rstream.len().max(t.stream.len());
                if let Some(i) = (0..n).find(|&i| match (rstream.get(i), t.stream.get(i)) {
                    (Some(a), Some(b)) => !same_cmd(a, b),
                    _ => true,
                }) {
                    let ctx = |s: &[Cmd]| {
                        s[i.saturating_sub(2)..(i + 3).min(s.len())]
                            .iter()
                            .map(show)
                            .collect::<Vec<_>>()
                            .join(" | ")
                    };
                    problems.push(format!(
                        "{}: propagated stream differs at command {i}:\n  redis:  {}\n  sluice: {}",
                        name,
                        ctx(&rstream),
                        ctx(&t.stream)
                    ));
                }
                if revents != t.events {
                    let i = (0..revents.len().max(t.events.len()))
                        .find(|&i| revents.get(i) != t.events.get(i))
                        .unwrap_or(0);
                    let ctx = |s: &[(Vec<u8>, usize, Vec<u8>)]| {
                        s[i.saturating_sub(2)..(i + 3).min(s.len())]
                            .iter()
                            .map(|(n, db, k)| format!("{}@{db}:{}", escape(n), escape(k)))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    };
                    problems.push(format!(
                        "{}: keyspace events differ at event {i}:\n  redis:  {}\n  sluice: {}",
                        name,
                        ctx(&revents),
                        ctx(&t.events)
                    ));
                }
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_times_loosely_and_names_without_case() {
        let c = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Cmd>();
        assert!(same_cmd(&c(&["set", "k", "v"]), &c(&["SET", "k", "v"])));
        assert!(same_cmd(
            &c(&["SET", "k", "v", "PXAT", "1795563831162"]),
            &c(&["SET", "k", "v", "PXAT", "1795563832000"])
        ));
        assert!(!same_cmd(
            &c(&["SET", "k", "v", "PXAT", "1795563831162"]),
            &c(&["SET", "k", "v", "PXAT", "1795573831162"])
        ));
        assert!(!same_cmd(&c(&["SET", "k", "1"]), &c(&["SET", "k", "2"])));
        // XADD * on two clocks a millisecond apart; small ids stay exact.
        assert!(same_cmd(
            &c(&["XADD", "s", "1795712474293-0", "b", "2"]),
            &c(&["XADD", "s", "1795712474294-0", "b", "2"])
        ));
        assert!(!same_cmd(
            &c(&["XADD", "s", "1795712474293-0", "b", "2"]),
            &c(&["XADD", "s", "1795712474293-1", "b", "2"])
        ));
        assert!(!same_cmd(&c(&["XDEL", "s", "1-1"]), &c(&["XDEL", "s", "2-1"])));
        assert_eq!(parse_channel(b"__keyevent@3__:lpush"), Some((3, b"lpush".to_vec())));
    }
}
