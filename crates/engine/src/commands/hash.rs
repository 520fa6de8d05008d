//! Hash commands: HSET/HSETNX/HMSET, HGET/HMGET, HDEL, HLEN, HEXISTS,
//! HKEYS/HVALS/HGETALL, HINCRBY/HINCRBYFLOAT, HSTRLEN, HRANDFIELD, HSCAN.
//!
//! Error order follows Redis 7.0's `t_hash.c`: arguments are parsed first,
//! then the key is looked up (WRONGTYPE), then the field is checked. Writes
//! go through [`write_hash`], which creates the key on demand and deletes
//! it when the hash becomes empty.

use std::borrow::Cow;

use resp::{Proto, ReplyBuf};
use store::types::{Hash, Str};
use store::value::parse_canonical_i64;
use store::Value;

use crate::commands::keys::space::{parse_cursor, parse_scan_opts, ScanOpts};
use crate::core::ctx::{eq_ic, parse_i64, parse_range, Args, Ctx, KeyEntry};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;
use crate::subsystems::glob;
use crate::subsystems::ldouble::{self, LdError};

pub const COMMANDS: &[Command] = &[
    Command::redis("HSET", hset),
    Command::redis("HSETNX", hsetnx),
    Command::redis("HMSET", hmset),
    Command::redis("HGET", hget),
    Command::redis("HMGET", hmget),
    Command::redis("HDEL", hdel),
    Command::redis("HLEN", hlen),
    Command::redis("HEXISTS", hexists),
    Command::redis("HKEYS", hkeys),
    Command::redis("HVALS", hvals),
    Command::redis("HGETALL", hgetall),
    Command::redis("HINCRBY", hincrby),
    Command::redis("HINCRBYFLOAT", hincrbyfloat),
    Command::redis("HSTRLEN", hstrlen),
    Command::redis("HRANDFIELD", hrandfield),
    Command::redis("HSCAN", hscan),
];

// ---- helpers ---------------------------------------------------------------

/// (hash-max-listpack-entries, hash-max-listpack-value).
fn limits(cx: &mut Ctx) -> (usize, usize) {
    let c = cx.sess.conf(cx.shared);
    (c.hash_max_listpack_entries, c.hash_max_listpack_value)
}

/// The hash at `key` for reading (counts a hit or miss); `None` if missing.
fn read_hash<'c>(cx: &'c mut Ctx<'_, '_>, key: &[u8]) -> Result<Option<&'c Hash>, CmdError> {
    match cx.lookup_read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Type check without counting a hit (write paths that may not write).
fn peek_hash<'c>(cx: &'c mut Ctx<'_, '_>, key: &[u8]) -> Result<Option<&'c Hash>, CmdError> {
    match cx.lookup(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Runs `f` on the hash at `key`, creating it when missing (it is stored
/// only if `f` left it non-empty). `f` only sets fields (a write that may
/// empty the hash reports it with `Ctx::changed_or_emptied`, as HDEL). An
/// error from `f` must leave the hash unchanged.
fn write_hash<T>(
    cx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Hash) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    match cx.entry(key) {
        KeyEntry::Occupied(e) => {
            let Value::Hash(h) = &mut e.value else { return Err(CmdError::WrongType) };
            f(h)
        }
        KeyEntry::Vacant(place) => {
            let mut h = Hash::new();
            let r = f(&mut h)?;
            if !h.is_empty() {
                place.insert(Value::Hash(h));
            }
            Ok(r)
        }
    }
}

/// Type check before the write path, so a wrong type is reported even when
/// nothing would change.
fn check_type(cx: &mut Ctx, key: &[u8]) -> CmdResult {
    peek_hash(cx, key).map(|_| ())
}

// ---- HSET, HSETNX, HMSET ---------------------------------------------------

fn set_pairs(cx: &mut Ctx, args: &mut Args, name: &str) -> Result<i64, CmdError> {
    let key = args.key()?;
    let pairs = args.rest();
    if !pairs.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    let (max_entries, max_value) = limits(cx);
    let set_all = |h: &mut Hash| {
        let mut added = 0;
        for p in pairs.chunks_exact(2) {
            if h.set(p[0], p[1], max_entries, max_value) {
                added += 1;
            }
        }
        added
    };
    // One keyspace lookup (not a type check, an existence check and a
    // write lookup): setting fields never empties a hash, and the change
    // is signalled only once the type is known to be right.
    let added = match cx.entry(key) {
        KeyEntry::Occupied(e) => {
            let Value::Hash(h) = &mut e.value else { return Err(CmdError::WrongType) };
            set_all(h)
        }
        KeyEntry::Vacant(place) => {
            let mut h = Hash::new();
            let added = set_all(&mut h);
            place.insert(Value::Hash(h));
            added
        }
    };
    // Redis counts every pair set, new or not.
    cx.changed(key, Class::HASH, "hset", (pairs.len() / 2) as u64);
    Ok(added)
}

fn hset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let n = set_pairs(cx, args, "hset")?;
    out.int(n);
    Ok(())
}

fn hmset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    set_pairs(cx, args, "hmset")?;
    out.ok();
    Ok(())
}

fn hsetnx(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let field = args.req()?;
    let value = args.req()?;
    if peek_hash(cx, key)?.is_some_and(|h| h.contains(field)) {
        out.int(0);
        return Ok(());
    }
    let (max_entries, max_value) = limits(cx);
    write_hash(cx, key, |h| Ok(h.set(field, value, max_entries, max_value)))?;
    cx.changed(key, Class::HASH, "hset", 1);
    out.int(1);
    Ok(())
}

// ---- reads -----------------------------------------------------------------

fn hget(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let field = args.req()?;
    match read_hash(cx, key)? {
        Some(h) => h.get_with(field, |v| match v {
            Some(v) => out.bulk(v),
            None => out.null(),
        }),
        None => out.null(),
    }
    Ok(())
}

fn hmget(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let fields = args.rest();
    let h = read_hash(cx, key)?;
    out.array(fields.len());
    for f in fields {
        match h.and_then(|h| h.get(f)) {
            Some(v) => out.bulk(&v),
            None => out.null(),
        }
    }
    Ok(())
}

fn hlen(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let n = read_hash(cx, key)?.map_or(0, Hash::len);
    out.int(n as i64);
    Ok(())
}

fn hexists(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let field = args.req()?;
    let yes = read_hash(cx, key)?.is_some_and(|h| h.contains(field));
    out.int(i64::from(yes));
    Ok(())
}

fn hstrlen(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let field = args.req()?;
    let n = read_hash(cx, key)?.and_then(|h| h.get(field)).map_or(0, |v| v.len());
    out.int(n as i64);
    Ok(())
}

fn hkeys(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let Some(h) = read_hash(cx, key)? else {
        out.array(0);
        return Ok(());
    };
    out.array(h.len());
    h.for_each(|f, _| out.bulk(f));
    Ok(())
}

fn hvals(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let Some(h) = read_hash(cx, key)? else {
        out.array(0);
        return Ok(());
    };
    out.array(h.len());
    h.for_each(|_, v| out.bulk(v));
    Ok(())
}

fn hgetall(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let Some(h) = read_hash(cx, key)? else {
        out.map(0);
        return Ok(());
    };
    out.map(h.len());
    h.for_each(|f, v| {
        out.bulk(f);
        out.bulk(v);
    });
    Ok(())
}

// ---- HDEL ------------------------------------------------------------------

fn hdel(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let fields = args.rest();
    let Some(e) = cx.lookup_write(key) else {
        out.int(0);
        return Ok(());
    };
    let Value::Hash(h) = &mut e.value else { return Err(CmdError::WrongType) };
    let n = fields.iter().filter(|f| h.remove(f)).count();
    // Only a real deletion touches the key (WATCH, dirty), as in Redis.
    if n > 0 {
        let emptied = h.is_empty();
        cx.changed_or_emptied(key, Class::HASH, "hdel", n as u64, emptied);
    }
    out.int(n as i64);
    Ok(())
}

// ---- HINCRBY, HINCRBYFLOAT -------------------------------------------------

fn hincrby(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let field = args.req()?;
    let by = parse_i64(args.req()?)?;
    check_type(cx, key)?;
    let (max_entries, max_value) = limits(cx);
    let n = write_hash(cx, key, |h| {
        let cur = match h.get(field) {
            Some(v) => parse_canonical_i64(&v)
                .ok_or(CmdError::Msg(Cow::Borrowed("ERR hash value is not an integer")))?,
            None => 0,
        };
        let n = cur.checked_add(by).ok_or(CmdError::Overflow)?;
        let mut b = [0u8; 24];
        let len = store::value::fmt_i64(n, &mut b);
        h.set(field, &b[..len], max_entries, max_value);
        Ok(n)
    })?;
    cx.changed(key, Class::HASH, "hincrby", 1);
    out.int(n);
    Ok(())
}

fn hincrbyfloat(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let field = args.req()?;
    let by = args.req()?;
    match ldouble::check(by) {
        None => return Err(CmdError::NotFloat),
        Some(false) => return Err(CmdError::err("value is NaN or Infinity")),
        Some(true) => {}
    }
    check_type(cx, key)?;
    let (max_entries, max_value) = limits(cx);
    let mut buf = [0u8; ldouble::LD_BUF];
    let n = write_hash(cx, key, |h| {
        let n = ldouble::incr_by(h.get(field).as_deref(), by, &mut buf).map_err(|e| match e {
            LdError::BadCurrent => CmdError::Msg(Cow::Borrowed("ERR hash value is not a float")),
            LdError::BadIncr => CmdError::NotFloat,
            LdError::NotFinite => {
                CmdError::Msg(Cow::Borrowed("ERR increment would produce NaN or Infinity"))
            }
        })?;
        h.set(field, &buf[..n], max_entries, max_value);
        Ok(n)
    })?;
    cx.changed(key, Class::HASH, "hincrbyfloat", 1);
    // Replicas get the result, as an HSET.
    cx.propagate_as(&[b"HSET", key, field, &buf[..n]]);
    out.bulk(&buf[..n]);
    Ok(())
}

// ---- HRANDFIELD ------------------------------------------------------------

fn hrandfield(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let Some(count) = args.next() else {
        // No count: one field, or nil.
        let store = &cx.shared.store;
        let h = match cx.keys.get(cx.db, key) {
            None => {
                cx.sess.stats.misses += 1;
                out.null();
                return Ok(());
            }
            Some(e) => match &e.value {
                Value::Hash(h) => h,
                _ => return Err(CmdError::WrongType),
            },
        };
        cx.sess.stats.hits += 1;
        match h.random(|| store.rand()) {
            Some((f, _)) => out.bulk(&f),
            None => out.null(),
        }
        return Ok(());
    };
    // Redis's order: the count's range, the syntax, then (with values)
    // a count whose reply length (two per pair) would overflow.
    let count = parse_range(count, -i64::MAX, i64::MAX)?;
    let withvalues = match args.next() {
        None => false,
        Some(a) if eq_ic(a, "WITHVALUES") && args.is_empty() => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::err("value is out of range"));
    }
    let store = &cx.shared.store;
    let resp3 = out.proto == Proto::Resp3;
    let h = match cx.keys.get(cx.db, key) {
        None => {
            cx.sess.stats.misses += 1;
            out.array(0);
            return Ok(());
        }
        Some(e) => match &e.value {
            Value::Hash(h) => h,
            _ => return Err(CmdError::WrongType),
        },
    };
    cx.sess.stats.hits += 1;
    let pair = |out: &mut ReplyBuf, f: &[u8], v: &[u8]| {
        if withvalues {
            if resp3 {
                out.array(2);
            }
            out.bulk(f);
            out.bulk(v);
        } else {
            out.bulk(f);
        }
    };
    let header = |out: &mut ReplyBuf, n: usize| {
        out.array(if withvalues && !resp3 { 2 * n } else { n });
    };
    if count == 0 {
        out.array(0);
        return Ok(());
    }
    if count < 0 {
        // Repeats allowed: independent draws.
        let n = count.unsigned_abs() as usize;
        header(out, n);
        // The count sizes nothing but the reply, which the output limit
        // cuts short (the client is then closed).
        for _ in 0..n {
            if out.is_over() {
                break;
            }
            let (f, v) = h.random(|| store.rand()).expect("hash is not empty");
            pair(out, &f, &v);
        }
        return Ok(());
    }
    let n = count as usize;
    if n >= h.len() {
        // The whole hash, in its own order.
        header(out, h.len());
        h.for_each(|f, v| pair(out, f, v));
        return Ok(());
    }
    // Distinct fields: shuffle the first `n` positions of the pair list.
    let mut all: Vec<(Str<'_>, Str<'_>)> = h.iter().collect();
    for i in 0..n {
        let j = i + (store.rand() % (all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    header(out, n);
    for (f, v) in &all[..n] {
        pair(out, f, v);
    }
    Ok(())
}

// ---- HSCAN -----------------------------------------------------------------

fn hscan(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let cursor = parse_cursor(args.req()?)?;
    // Redis looks the key up before it parses the options.
    let Some(h) = read_hash(cx, key)? else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let ScanOpts { count, pattern, .. } = parse_scan_opts(args, false)?;
    // Matching pairs go straight into the reply body; `seen` counts every
    // visited pair, as Redis counts before filtering.
    let mut body = out.side();
    let (mut seen, mut kept) = (0i64, 0usize);
    let mut next = cursor;
    // Redis counts fields and values (two per pair) against COUNT, with a
    // budget of ten bucket visits per requested element.
    let mut budget = count.saturating_mul(10);
    loop {
        next = h.scan(next, |f, v| {
            seen += 1;
            if pattern.is_none_or(|p| glob::matches(p, f, false)) {
                body.bulk(f);
                body.bulk(v);
                kept += 1;
            }
        });
        if next == 0 || budget == 0 || seen * 2 >= count {
            break;
        }
        budget -= 1;
    }
    let mut b = [0u8; 24];
    let len = store::value::fmt_i64(next as i64, &mut b);
    out.array(2);
    if next > i64::MAX as u64 {
        out.bulk(next.to_string().as_bytes());
    } else {
        out.bulk(&b[..len]);
    }
    out.array(kept * 2);
    out.append(&mut body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;

    // Expected replies are redis-server 7.0.15's.

    #[test]
    fn set_get_order_and_delete_when_empty() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HSET", "t", "b", "1", "a", "2"]), ":2\r\n");
        assert_eq!(h.run(&["HSET", "t", "b", "3"]), ":0\r\n");
        assert_eq!(h.run(&["HGETALL", "t"]), "*4\r\n$1\r\nb\r\n$1\r\n3\r\n$1\r\na\r\n$1\r\n2\r\n");
        assert_eq!(h.run(&["HMGET", "t", "a", "x"]), "*2\r\n$1\r\n2\r\n$-1\r\n");
        assert_eq!(
            h.run(&["HSET", "t", "a"]),
            "-ERR wrong number of arguments for 'hset' command\r\n"
        );
        assert_eq!(h.run(&["HDEL", "t", "a", "b", "c"]), ":2\r\n");
        assert_eq!(h.run(&["EXISTS", "t"]), ":0\r\n");
    }

    #[test]
    fn counters_and_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HINCRBY", "n", "f", "5"]), ":5\r\n");
        assert_eq!(h.run(&["HSET", "n", "s", "hello"]), ":1\r\n");
        assert_eq!(h.run(&["HINCRBY", "n", "s", "1"]), "-ERR hash value is not an integer\r\n");
        assert_eq!(h.run(&["HINCRBYFLOAT", "n", "s", "1"]), "-ERR hash value is not a float\r\n");
        assert_eq!(h.run(&["HINCRBYFLOAT", "n", "g", "inf"]), "-ERR value is NaN or Infinity\r\n");
        assert_eq!(h.run(&["HINCRBYFLOAT", "n", "f", "0.1"]), "$3\r\n5.1\r\n");
        h.run(&["SET", "str", "v"]);
        assert_eq!(
            h.run(&["HGET", "str", "a"]),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        );
    }

    #[test]
    fn encodings_scan_and_resp3() {
        let mut h = Harness::new();
        h.run(&["HSET", "t", "b", "1", "a", "2"]);
        assert_eq!(h.run(&["OBJECT", "ENCODING", "t"]), "$8\r\nlistpack\r\n");
        assert_eq!(
            h.run(&["HSCAN", "t", "0", "COUNT", "1"]),
            "*2\r\n$1\r\n0\r\n*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n"
        );
        assert_eq!(h.run(&["HSCAN", "t", "x"]), "-ERR invalid cursor\r\n");
        h.run(&["HSET", "t", "long", &"x".repeat(65)]);
        assert_eq!(h.run(&["OBJECT", "ENCODING", "t"]), "$9\r\nhashtable\r\n");
        h.run(&["HSET", "r", "b", "1", "a", "2"]);
        h.run(&["HELLO", "3"]);
        assert_eq!(h.run(&["HGETALL", "r"]), "%2\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n");
        assert_eq!(
            h.run(&["HRANDFIELD", "r", "5", "WITHVALUES"]),
            "*2\r\n*2\r\n$1\r\nb\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n2\r\n"
        );
    }

    /// HRANDFIELD with i64::MIN allocated until the kernel killed the
    /// server; Redis 7.0.15 checks the count's range, then the syntax,
    /// then (WITHVALUES) that twice the count fits, before the key.
    #[test]
    fn hrandfield_extreme_counts_get_redis_errors_in_redis_order() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "a", "1"]);
        h.run(&["SET", "s", "x"]);
        let full = "-ERR value is out of range, value must between -9223372036854775807 and \
                    9223372036854775807\r\n";
        let short = "-ERR value is out of range\r\n";
        for key in ["h", "nokey", "s"] {
            let run = |h: &mut Harness, rest: &[&str]| {
                let mut argv = vec!["HRANDFIELD", key];
                argv.extend_from_slice(rest);
                h.run(&argv)
            };
            assert_eq!(run(&mut h, &["-9223372036854775808"]), full);
            assert_eq!(run(&mut h, &["-9223372036854775808", "WITHVALUES"]), full);
            assert_eq!(run(&mut h, &["-9223372036854775808", "foo"]), full);
            assert_eq!(run(&mut h, &["9223372036854775807", "WITHVALUES"]), short);
            assert_eq!(run(&mut h, &["-4611686018427387904", "WITHVALUES"]), short);
            assert_eq!(run(&mut h, &["4611686018427387904", "WITHVALUES"]), short);
            assert_eq!(run(&mut h, &["5", "foo"]), "-ERR syntax error\r\n");
            assert_eq!(
                run(&mut h, &["4611686018427387904", "WITHVALUES", "x"]),
                "-ERR syntax error\r\n"
            );
            assert_eq!(
                run(&mut h, &["abc", "WITHVALUES"]),
                "-ERR value is not an integer or out of range\r\n"
            );
        }
        assert_eq!(
            h.run(&["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES", "x"]),
            "-ERR syntax error\r\n"
        );
    }
}
