//! Text scenarios replayed against the oracle and Sluice, reply by reply.
//!
//! One command per line, split as `redis-cli` splits (see [`crate::args`]).
//! Blank lines and lines starting with `#` are ignored. Directives:
//!
//! - `@conn NAME` — later lines go to connection NAME (opened on first use;
//!   the first connection is `default`).
//! - `@resp3` — sends `HELLO 3` on the current connection and compares only
//!   the shape of its reply (server id and version differ).
//! - `@any CMD ...` — the reply is non-deterministic: compare only its
//!   shape (types, and lengths of aggregates), not its contents.
//! - `@sorted CMD ...` — compare after sorting the elements of every array
//!   and set, and the entries of every map, in the reply (hash-order
//!   replies such as `KEYS`).
//! - `@pairs CMD ...` — the reply is a flat array of field/value pairs in
//!   hash order (RESP2 `CONFIG GET`): compare it as a set of pairs.
//! - `@raw "BYTES"` — write the (quoted, escaped) bytes as they are and
//!   compare one reply.
//! - `@sleep MS` — pause both sides (only for short expiries).
//! - `@async CMD ...` — send without reading the reply (a command that
//!   blocks); `@await` reads and compares the pending reply of the
//!   current connection later.
//!
//! A connection that the server closed (QUIT, protocol error) or that timed
//! out is reopened by the next line sent on it, as `redis-cli` does.
//! After `QUIT` the next line always starts a new connection.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use resp::{parse_frame, Frame};

use crate::{args, escape, Client};

/// How a reply is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Exact,
    Shape,
    Sorted,
    Pairs,
}

/// One line of a scenario.
#[derive(Clone, Debug)]
pub enum Step {
    /// Send `bytes`, read one reply (unless `deferred`), compare it.
    Send {
        line: usize,
        text: String,
        bytes: Vec<u8>,
        check: Check,
        deferred: bool,
    },
    /// Read and compare the reply of the connection's deferred command.
    Await {
        line: usize,
        text: String,
    },
    Conn {
        name: String,
    },
    Sleep(u64),
}

/// A parsed scenario file.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub steps: Vec<Step>,
}

/// Parses a scenario; `name` is used in messages.
pub fn parse(name: &str, text: &str) -> Result<Scenario, String> {
    let mut steps = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("{name}:{line}: {why}: {t}");
        let (check, cmd) = match t.split_once(char::is_whitespace).unwrap_or((t, "")) {
            ("@conn", n) if !n.trim().is_empty() => {
                steps.push(Step::Conn { name: n.trim().to_string() });
                continue;
            }
            ("@sleep", ms) => {
                steps.push(Step::Sleep(ms.trim().parse().map_err(|_| bad("bad @sleep"))?));
                continue;
            }
            ("@await", "") => {
                steps.push(Step::Await { line, text: t.to_string() });
                continue;
            }
            ("@resp3", "") => (Check::Shape, "HELLO 3"),
            ("@any", rest) => (Check::Shape, rest),
            ("@sorted", rest) => (Check::Sorted, rest),
            ("@pairs", rest) => (Check::Pairs, rest),
            ("@raw", rest) => {
                let parts = args::split(rest.as_bytes()).ok_or_else(|| bad("unbalanced quotes"))?;
                let bytes = parts.concat();
                steps.push(Step::Send {
                    line,
                    text: t.to_string(),
                    bytes,
                    check: Check::Exact,
                    deferred: false,
                });
                continue;
            }
            ("@async", rest) => (Check::Exact, rest),
            (d, _) if d.starts_with('@') => return Err(bad("unknown directive")),
            _ => (Check::Exact, t),
        };
        let deferred = t.starts_with("@async");
        let argv = args::split(cmd.as_bytes()).ok_or_else(|| bad("unbalanced quotes"))?;
        if argv.is_empty() {
            return Err(bad("no command"));
        }
        let mut bytes = Vec::new();
        resp::write_command(&mut bytes, &argv);
        steps.push(Step::Send { line, text: t.to_string(), bytes, check, deferred });
    }
    Ok(Scenario { name: name.to_string(), steps })
}

/// A line whose replies differ.
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub scenario: String,
    pub line: usize,
    pub text: String,
    pub redis: Vec<u8>,
    pub sluice: Vec<u8>,
}

impl Mismatch {
    /// The command name (upper case) of the line, for grouping.
    pub fn command(&self) -> String {
        let mut words = self.text.split_whitespace().peekable();
        if matches!(words.peek(), Some(&"@any") | Some(&"@sorted") | Some(&"@pairs")) {
            words.next();
        }
        let first = words.next().unwrap_or("").to_ascii_uppercase();
        match first.as_str() {
            "CLIENT" | "CONFIG" | "OBJECT" => {
                format!("{first} {}", words.next().unwrap_or("").to_ascii_uppercase())
            }
            _ => first,
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}:{}: {}", self.scenario, self.line, self.text)?;
        writeln!(f, "  redis:  {}", clip(&self.redis))?;
        write!(f, "  sluice: {}", clip(&self.sluice))
    }
}

/// A reply for a message: escaped, long ones cut short.
fn clip(b: &[u8]) -> String {
    const MAX: usize = 300;
    if b.len() <= MAX {
        escape(b)
    } else {
        format!("{}... ({} bytes)", escape(&b[..MAX]), b.len())
    }
}

/// One server's side of a run: its named connections.
pub(crate) struct Side {
    port: u16,
    conns: HashMap<String, Client>,
    timeout: Duration,
}

impl Side {
    pub(crate) fn new(port: u16, timeout: Duration) -> Side {
        Side { port, conns: HashMap::new(), timeout }
    }

    /// Sends and reads one reply; failures become a `<...>` marker and drop
    /// the connection so the next line starts afresh.
    pub(crate) fn exchange(&mut self, conn: &str, bytes: &[u8]) -> Vec<u8> {
        self.io(conn, Some(bytes), true)
    }

    /// Sends without reading the reply (`@async`).
    pub(crate) fn send_only(&mut self, conn: &str, bytes: &[u8]) -> Vec<u8> {
        self.io(conn, Some(bytes), false)
    }

    /// Reads the reply of a command sent earlier (`@await`).
    pub(crate) fn await_reply(&mut self, conn: &str) -> Vec<u8> {
        self.io(conn, None, true)
    }

    fn io(&mut self, conn: &str, bytes: Option<&[u8]>, read: bool) -> Vec<u8> {
        if !self.conns.contains_key(conn) {
            match Client::connect(self.port) {
                Ok(mut c) => {
                    c.set_timeout(self.timeout);
                    self.conns.insert(conn.to_string(), c);
                }
                Err(e) => return format!("<connect failed: {e}>").into_bytes(),
            }
        }
        let c = self.conns.get_mut(conn).expect("connection just made");
        let sent = match bytes {
            Some(b) => c.send_raw(b),
            None => Ok(()),
        };
        if !read {
            return match sent {
                Ok(()) => Vec::new(),
                Err(e) => format!("<{e}>").into_bytes(),
            };
        }
        let bytes = bytes.unwrap_or(b"");
        let r = sent.and_then(|_| c.read_reply());
        match r {
            Ok(b) => {
                if is_quit(bytes) {
                    self.conns.remove(conn);
                }
                b
            }
            Err(e) => {
                self.conns.remove(conn);
                use std::io::ErrorKind as K;
                let why = match e.kind() {
                    K::UnexpectedEof | K::ConnectionReset | K::BrokenPipe => "closed".to_string(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                        "timeout".to_string()
                    }
                    _ => e.to_string(),
                };
                format!("<{why}>").into_bytes()
            }
        }
    }
}

/// Whether `bytes` is a `QUIT` request (the server closes after replying).
fn is_quit(bytes: &[u8]) -> bool {
    let b = bytes.strip_prefix(b"*").unwrap_or(bytes);
    let name = b.split(|&c| c == b'\n').nth(2).unwrap_or(b"");
    name.strip_suffix(b"\r").unwrap_or(name).eq_ignore_ascii_case(b"QUIT")
}

/// Runs `sc` against the oracle on `redis_port` and Sluice on
/// `sluice_port`; returns the lines whose replies differ.
pub fn run(sc: &Scenario, redis_port: u16, sluice_port: u16) -> Vec<Mismatch> {
    let timeout = Duration::from_secs(3);
    let mut redis = Side::new(redis_port, timeout);
    let mut sluice = Side::new(sluice_port, timeout);
    let mut conn = "default".to_string();
    let mut out = Vec::new();
    // SCENARIO_DUMP=1 prints the oracle's transcript, to review a scenario.
    let dump = std::env::var_os("SCENARIO_DUMP").is_some();
    for step in &sc.steps {
        match step {
            Step::Conn { name } => conn = name.clone(),
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::Send { deferred: true, bytes, .. } => {
                redis.send_only(&conn, bytes);
                sluice.send_only(&conn, bytes);
                // Both servers see the command before the next line.
                std::thread::sleep(Duration::from_millis(50));
            }
            Step::Await { line, text } => {
                let a = redis.await_reply(&conn);
                let b = sluice.await_reply(&conn);
                if a != b {
                    out.push(Mismatch {
                        scenario: sc.name.clone(),
                        line: *line,
                        text: text.clone(),
                        redis: a,
                        sluice: b,
                    });
                }
            }
            Step::Send { line, text, bytes, check, .. } => {
                let a = redis.exchange(&conn, bytes);
                let b = sluice.exchange(&conn, bytes);
                if dump {
                    eprintln!("{}:{line}: {text}\n  => {}", sc.name, escape(&a));
                }
                if !same(&a, &b, *check) {
                    out.push(Mismatch {
                        scenario: sc.name.clone(),
                        line: *line,
                        text: text.clone(),
                        redis: a,
                        sluice: b,
                    });
                }
            }
        }
    }
    out
}

/// Whether two replies agree under `check`.
pub fn same(a: &[u8], b: &[u8], check: Check) -> bool {
    match check {
        Check::Exact => a == b,
        Check::Shape => match (frame(a), frame(b)) {
            (Some(x), Some(y)) => shape(&x) == shape(&y),
            _ => a == b,
        },
        Check::Sorted => match (frame(a), frame(b)) {
            (Some(x), Some(y)) => encode(&sorted(x)) == encode(&sorted(y)),
            _ => a == b,
        },
        Check::Pairs => match (frame(a), frame(b)) {
            (Some(x), Some(y)) => pairs(x) == pairs(y),
            _ => a == b,
        },
    }
}

fn frame(b: &[u8]) -> Option<Frame> {
    parse_frame(b).ok().flatten().map(|(f, _)| f)
}

/// Types and aggregate lengths, without the scalar contents.
pub fn shape(f: &Frame) -> String {
    let kids = |tag: &str, v: &[Frame]| {
        let inner: Vec<String> = v.iter().map(shape).collect();
        format!("{tag}{}[{}]", v.len(), inner.join(","))
    };
    match f {
        Frame::Simple(_) => "+".into(),
        Frame::Error(_) => "-".into(),
        Frame::Integer(_) => ":".into(),
        Frame::Bulk(Some(_)) => "$".into(),
        Frame::Bulk(None) => "$-1".into(),
        Frame::Array(None) => "*-1".into(),
        Frame::Array(Some(v)) => kids("*", v),
        Frame::Null => "_".into(),
        Frame::Double(_) => ",".into(),
        Frame::Boolean(_) => "#".into(),
        Frame::BigNumber(_) => "(".into(),
        Frame::Verbatim(..) => "=".into(),
        Frame::Set(v) => kids("~", v),
        Frame::Push(v) => kids(">", v),
        Frame::Map(kv) | Frame::Attribute(kv) => {
            let inner: Vec<String> =
                kv.iter().map(|(k, v)| format!("{}:{}", shape(k), shape(v))).collect();
            format!("%{}[{}]", kv.len(), inner.join(","))
        }
    }
}

/// A flat array as a sorted list of encoded (field, value) pairs.
fn pairs(f: Frame) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let Frame::Array(Some(v)) = f else { return None };
    let mut out: Vec<_> =
        v.chunks(2).map(|c| (encode(&c[0]), c.get(1).map(encode).unwrap_or_default())).collect();
    out.sort();
    Some(out)
}

fn sorted(f: Frame) -> Frame {
    let sort = |v: Vec<Frame>| {
        let mut v: Vec<Frame> = v.into_iter().map(sorted).collect();
        v.sort_by_cached_key(encode);
        v
    };
    match f {
        Frame::Array(Some(v)) => Frame::Array(Some(sort(v))),
        Frame::Set(v) => Frame::Set(sort(v)),
        Frame::Map(kv) => {
            let mut kv: Vec<(Frame, Frame)> =
                kv.into_iter().map(|(k, v)| (sorted(k), sorted(v))).collect();
            kv.sort_by_cached_key(|(k, v)| (encode(k), encode(v)));
            Frame::Map(kv)
        }
        other => other,
    }
}

/// Encodes a frame back to RESP (canonical form, for comparisons).
pub fn encode(f: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    enc(f, &mut out);
    out
}

fn enc(f: &Frame, o: &mut Vec<u8>) {
    let line = |o: &mut Vec<u8>, tag: u8, body: &[u8]| {
        o.push(tag);
        o.extend_from_slice(body);
        o.extend_from_slice(b"\r\n");
    };
    let bulk = |o: &mut Vec<u8>, tag: u8, body: &[u8]| {
        line(o, tag, body.len().to_string().as_bytes());
        o.extend_from_slice(body);
        o.extend_from_slice(b"\r\n");
    };
    match f {
        Frame::Simple(s) => line(o, b'+', s),
        Frame::Error(s) => line(o, b'-', s),
        Frame::Integer(n) => line(o, b':', n.to_string().as_bytes()),
        Frame::Bulk(None) => line(o, b'$', b"-1"),
        Frame::Bulk(Some(b)) => bulk(o, b'$', b),
        Frame::Array(None) => line(o, b'*', b"-1"),
        Frame::Null => line(o, b'_', b""),
        Frame::Double(d) => line(o, b',', d.to_string().as_bytes()),
        Frame::Boolean(b) => line(o, b'#', if *b { b"t" } else { b"f" }),
        Frame::BigNumber(b) => line(o, b'(', b),
        Frame::Verbatim(fmt, t) => bulk(o, b'=', &[&fmt[..], b":", &t[..]].concat()),
        Frame::Array(Some(v)) | Frame::Set(v) | Frame::Push(v) => {
            let tag = match f {
                Frame::Set(_) => b'~',
                Frame::Push(_) => b'>',
                _ => b'*',
            };
            line(o, tag, v.len().to_string().as_bytes());
            v.iter().for_each(|x| enc(x, o));
        }
        Frame::Map(kv) | Frame::Attribute(kv) => {
            let tag = if matches!(f, Frame::Map(_)) { b'%' } else { b'|' };
            line(o, tag, kv.len().to_string().as_bytes());
            for (k, v) in kv {
                enc(k, o);
                enc(v, o);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_directives() {
        let sc = parse("t", "# c\n\nSET k \"a b\"\n@conn two\n@any TIME\n@sorted KEYS *\n@resp3\n@raw \"PING\\r\\n\"\n@sleep 5\n").unwrap();
        assert_eq!(sc.steps.len(), 7);
        match &sc.steps[0] {
            Step::Send { line, bytes, check, .. } => {
                assert_eq!(*line, 3);
                assert_eq!(bytes, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na b\r\n");
                assert_eq!(*check, Check::Exact);
            }
            s => panic!("{s:?}"),
        }
        match &sc.steps[5] {
            Step::Send { bytes, .. } => assert_eq!(bytes, b"PING\r\n"),
            s => panic!("{s:?}"),
        }
        assert!(parse("t", "@nope x").is_err());
        assert!(parse("t", "SET \"k").is_err());
    }

    #[test]
    fn compares_shapes_and_sorted() {
        assert!(same(
            b"*2\r\n$2\r\n10\r\n$1\r\n5\r\n",
            b"*2\r\n$1\r\n9\r\n$3\r\n100\r\n",
            Check::Shape
        ));
        assert!(!same(b"*1\r\n$1\r\na\r\n", b"*0\r\n", Check::Shape));
        assert!(same(
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
            Check::Sorted
        ));
        assert!(!same(
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
            Check::Exact
        ));
        let ab = b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
        let ba = b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n";
        let swapped = b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n1\r\n";
        assert!(same(ab, ba, Check::Pairs));
        assert!(!same(ab, swapped, Check::Pairs));
        assert!(is_quit(b"*1\r\n$4\r\nquit\r\n"));
        assert!(!is_quit(b"*1\r\n$4\r\nPING\r\n"));
    }
}
