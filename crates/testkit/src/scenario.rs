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

use resp::{parse_frame, Frame};

use crate::args;
use crate::diff::{Action, Request, Step};

/// How a reply is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Exact,
    Shape,
    Sorted,
    Pairs,
}

/// A parsed scenario file.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub steps: Vec<Step>,
}

/// Parses a scenario; `name` is used in messages. Lines run on the
/// connection the last `@conn` named (`default` before any).
pub fn parse(name: &str, text: &str) -> Result<Scenario, String> {
    let mut steps = Vec::new();
    let mut conn = "default".to_string();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("{name}:{line}: {why}: {t}");
        let mut push = |action: Action| {
            steps.push(Step { line, text: t.to_string(), conn: conn.clone(), action })
        };
        let (check, cmd) = match t.split_once(char::is_whitespace).unwrap_or((t, "")) {
            ("@conn", n) if !n.trim().is_empty() => {
                conn = n.trim().to_string();
                continue;
            }
            ("@sleep", ms) => {
                push(Action::Sleep(ms.trim().parse().map_err(|_| bad("bad @sleep"))?));
                continue;
            }
            ("@await", "") => {
                push(Action::Read);
                continue;
            }
            ("@resp3", "") => (Check::Shape, "HELLO 3"),
            ("@any", rest) => (Check::Shape, rest),
            ("@sorted", rest) => (Check::Sorted, rest),
            ("@pairs", rest) => (Check::Pairs, rest),
            ("@raw", rest) => {
                let parts = args::split(rest.as_bytes()).ok_or_else(|| bad("unbalanced quotes"))?;
                push(Action::Call { req: Request::Bytes(parts.concat()), check: Check::Exact });
                continue;
            }
            ("@async", rest) => (Check::Exact, rest),
            (d, _) if d.starts_with('@') => return Err(bad("unknown directive")),
            _ => (Check::Exact, t),
        };
        let argv = args::split(cmd.as_bytes()).ok_or_else(|| bad("unbalanced quotes"))?;
        if argv.is_empty() {
            return Err(bad("no command"));
        }
        let mut bytes = Vec::new();
        resp::write_command(&mut bytes, &argv);
        let req = Request::Bytes(bytes);
        if t.starts_with("@async") {
            // Both servers see the command before the next line.
            push(Action::Send { req, pause_ms: 50 });
        } else {
            push(Action::Call { req, check });
        }
    }
    Ok(Scenario { name: name.to_string(), steps })
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
        assert_eq!(sc.steps.len(), 6);
        let s = &sc.steps[0];
        assert_eq!((s.line, s.conn.as_str()), (3, "default"));
        match &s.action {
            Action::Call { req: Request::Bytes(bytes), check } => {
                assert_eq!(bytes, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na b\r\n");
                assert_eq!(*check, Check::Exact);
            }
            a => panic!("{a:?}"),
        }
        assert!(sc.steps[1..].iter().all(|s| s.conn == "two"), "@conn switches");
        match &sc.steps[4].action {
            Action::Call { req: Request::Bytes(bytes), .. } => assert_eq!(bytes, b"PING\r\n"),
            a => panic!("{a:?}"),
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
    }
}
