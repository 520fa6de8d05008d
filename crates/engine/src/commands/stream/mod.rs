//! Stream commands: XADD, XRANGE/XREVRANGE, XLEN, XDEL, XTRIM, XSETID
//! here; XREAD/XREADGROUP in [`read`], XGROUP/XACK/XPENDING in [`group`],
//! XCLAIM/XAUTOCLAIM in [`claim`], XINFO in [`info`]. The value type is
//! [`store::types::stream`].
//!
//! Argument parsing, error texts and their order follow Redis 7.0's
//! `t_stream.c`: options are parsed before the key is looked up, ids with
//! `streamGenericParseIDOrReply`'s rules (C string semantics included).

use std::borrow::Cow;

use resp::ReplyBuf;
use store::types::stream::{Entry, Stream, StreamId, Trim};
use store::{Value, NO_EXPIRE};

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

pub mod claim;
pub mod group;
pub mod info;
pub mod read;

pub const COMMANDS: &[Command] = &[
    Command::redis("XADD", xadd),
    Command::redis("XRANGE", xrange),
    Command::redis("XREVRANGE", xrevrange),
    Command::redis("XLEN", xlen),
    Command::redis("XDEL", xdel),
    Command::redis("XTRIM", xtrim),
    Command::redis("XSETID", xsetid),
    read::XREAD,
    read::XREADGROUP,
    group::XACK,
    group::XPENDING,
    group::XGROUP,
    claim::XCLAIM,
    claim::XAUTOCLAIM,
    info::XINFO,
];

// ---- ids ------------------------------------------------------------------

pub(crate) fn invalid_id() -> CmdError {
    CmdError::Msg(Cow::Borrowed("ERR Invalid stream ID specified as stream command argument"))
}

/// C's `isspace` in the C locale.
fn c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Redis's `string2ull`: `string2ll` first, else `strtoull` (leading
/// spaces, a sign, base 10, the whole string).
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = store::value::parse_canonical_i64(s) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < s.len() && c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while i < s.len() && s[i].is_ascii_digit() {
        match v.checked_mul(10).and_then(|x| x.checked_add(u64::from(s[i] - b'0'))) {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start || overflow || i != s.len() {
        return None;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// How an id argument may be written.
#[derive(Clone, Copy)]
pub(crate) struct IdRules {
    /// The seq used when only `<ms>` is given.
    pub missing_seq: u64,
    /// `-` and `+` are refused.
    pub strict: bool,
    /// `<ms>-*` is allowed (XADD): the second value says whether the seq
    /// was given.
    pub partial: bool,
}

/// Redis's `streamGenericParseIDOrReply`: (id, seq given).
pub(crate) fn parse_id_with(a: &[u8], r: IdRules) -> Result<(StreamId, bool), CmdError> {
    if a.len() > 127 {
        return Err(invalid_id());
    }
    // The argument is read as a C string.
    let a = a.split(|&c| c == 0).next().unwrap_or(b"");
    if r.strict && (a == b"-" || a == b"+") {
        return Err(invalid_id());
    }
    if a == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if a == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms, seq) = match a.iter().position(|&c| c == b'-') {
        Some(p) => (&a[..p], Some(&a[p + 1..])),
        None => (a, None),
    };
    let ms = string2ull(ms).ok_or_else(invalid_id)?;
    match seq {
        Some(b"*") if r.partial => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((StreamId::new(ms, string2ull(s).ok_or_else(invalid_id)?), true)),
        None => Ok((StreamId::new(ms, r.missing_seq), true)),
    }
}

/// A strict id (`-`/`+` refused), `<ms>` meaning `<ms>-0`.
pub(crate) fn parse_strict_id(a: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_with(a, IdRules { missing_seq: 0, strict: true, partial: false }).map(|r| r.0)
}

/// A range bound (`-`, `+`, or an id, exclusive with `(`): Redis's
/// `streamParseIntervalIDOrReply`; (id, exclusive).
pub(crate) fn parse_interval_id(a: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if a.len() > 1 && a[0] == b'(' {
        let r = IdRules { missing_seq, strict: true, partial: false };
        return Ok((parse_id_with(&a[1..], r)?.0, true));
    }
    let r = IdRules { missing_seq, strict: false, partial: false };
    Ok((parse_id_with(a, r)?.0, false))
}

/// Writes an id as a bulk string.
pub(crate) fn reply_id(out: &mut ReplyBuf, id: StreamId) {
    let mut b = [0u8; 48];
    let n = id.fmt(&mut b);
    out.bulk(&b[..n]);
}

/// Writes one entry: `[id, [field, value, …]]`.
pub(crate) fn reply_entry(out: &mut ReplyBuf, e: &Entry) {
    out.array(2);
    reply_id(out, e.id);
    out.array(e.len() * 2);
    for (f, v) in e.pairs() {
        out.bulk(f);
        out.bulk(v);
    }
}

// ---- lookups --------------------------------------------------------------

/// The stream at `key` for reading (WRONGTYPE for another type).
pub(crate) fn read_stream<'c>(cx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c Stream>, CmdError> {
    match cx.lookup_read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// The stream at `key` for writing.
pub(crate) fn write_stream<'c>(
    cx: &'c mut Ctx,
    key: &[u8],
) -> Result<Option<&'c mut Stream>, CmdError> {
    match cx.lookup_write(key) {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(CmdError::WrongType),
        },
    }
}

fn node_limits(cx: &mut Ctx) -> (usize, u64) {
    let c = cx.sess.conf(cx.shared);
    (c.stream_node_max_bytes, c.stream_node_max_entries.max(0) as u64)
}

fn node_max_entries(cx: &mut Ctx) -> i64 {
    cx.sess.conf(cx.shared).stream_node_max_entries
}

// ---- XADD / XTRIM ---------------------------------------------------------

/// Parsed XADD/XTRIM options (Redis's `streamAddTrimArgs`).
struct AddTrim {
    id: Option<(StreamId, bool)>,
    no_mkstream: bool,
    trim: Option<Trim>,
    /// Index of the MAXLEN/MINID value, for rewriting.
    trim_idx: usize,
    approx: bool,
    limit: u64,
    /// Index of the id argument (XADD).
    id_idx: usize,
}

fn syntax(msg: &'static str) -> CmdError {
    CmdError::Msg(Cow::Borrowed(msg))
}

/// Redis's `streamParseAddOrTrimArgsOrReply`.
fn parse_add_trim(cx: &mut Ctx, argv: &[&[u8]], xadd: bool) -> Result<AddTrim, CmdError> {
    let mut a = AddTrim {
        id: None,
        no_mkstream: false,
        trim: None,
        trim_idx: 0,
        approx: false,
        limit: 0,
        id_idx: 0,
    };
    let mut limit_given = false;
    let mut i = 2;
    let both = "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let opt = argv[i];
        if xadd && opt == b"*" {
            break;
        } else if (eq_ic(opt, "MAXLEN") || eq_ic(opt, "MINID")) && more > 0 {
            if a.trim.is_some() {
                return Err(syntax(both));
            }
            a.approx = false;
            let next = argv[i + 1];
            if more >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if eq_ic(opt, "MAXLEN") {
                let n = parse_i64(argv[i + 1])?;
                if n < 0 {
                    return Err(syntax("ERR The MAXLEN argument must be >= 0."));
                }
                a.trim = Some(Trim::MaxLen(n as u64));
            } else {
                a.trim = Some(Trim::MinId(parse_strict_id(argv[i + 1])?));
            }
            i += 1;
            a.trim_idx = i;
        } else if eq_ic(opt, "LIMIT") && more > 0 {
            let n = parse_i64(argv[i + 1])?;
            if n < 0 {
                return Err(syntax("ERR The LIMIT argument must be >= 0."));
            }
            a.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && eq_ic(opt, "NOMKSTREAM") {
            a.no_mkstream = true;
        } else if xadd {
            let r = IdRules { missing_seq: 0, strict: true, partial: true };
            a.id = Some(parse_id_with(opt, r)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    a.id_idx = i;
    if a.limit != 0 && a.trim.is_none() {
        return Err(syntax(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && a.trim.is_none() {
        return Err(syntax("ERR syntax error, XTRIM must be called with a trimming strategy"));
    }
    if cx.caller.must_obey() {
        // The master (or the AOF) rewrote the trim to what it did: no work limit.
        a.limit = 0;
    } else if limit_given {
        if !a.approx {
            return Err(syntax(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if a.approx {
        a.limit = 100u64.saturating_mul(node_max_entries(cx).max(0) as u64);
    } else {
        a.limit = 0;
    }
    Ok(a)
}

/// Propagates a trimming command with `~` turned into `=` and the bound
/// into what was kept (Redis's `streamRewriteTrimArgument`), and the id
/// into `id` when given.
fn rewrite_trim(
    cx: &mut Ctx,
    argv: &[&[u8]],
    a: &AddTrim,
    s_len: u64,
    s_first: StreamId,
    id: Option<StreamId>,
) {
    let mut v: Vec<Cow<[u8]>> = argv.iter().map(|x| Cow::Borrowed(*x)).collect();
    if a.approx && a.trim.is_some() {
        v[a.trim_idx - 1] = Cow::Borrowed(b"=");
        v[a.trim_idx] = match a.trim {
            Some(Trim::MaxLen(_)) => Cow::Owned(s_len.to_string().into_bytes()),
            _ => Cow::Owned(s_first.to_vec()),
        };
    }
    if let Some(id) = id {
        v[a.id_idx] = Cow::Owned(id.to_vec());
    }
    let refs: Vec<&[u8]> = v.iter().map(|c| &c[..]).collect();
    cx.propagate_as(&refs);
}

fn xadd(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let key = argv[1];
    let a = parse_add_trim(cx, argv, true)?;
    let field_pos = a.id_idx + 1;
    if argv.len() < field_pos + 2 || (argv.len() - field_pos) % 2 == 1 {
        return Err(CmdError::WrongArity("xadd".into()));
    }
    if let Some((id, true)) = a.id {
        if id.is_zero() {
            return Err(syntax("ERR The ID specified in XADD must be greater than 0-0"));
        }
    }
    let pairs = &argv[field_pos..];
    let tot: usize = pairs.iter().map(|p| p.len()).sum();
    let (max_bytes, max_entries) = node_limits(cx);
    let now = cx.now() as u64;
    if write_stream(cx, key)?.is_none() {
        if a.no_mkstream {
            out.null();
            return Ok(());
        }
        cx.set(key, Value::Stream(Box::default()), NO_EXPIRE);
    }
    let s = write_stream(cx, key)?.expect("present");
    if s.last_id == StreamId::MAX {
        return Err(syntax(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = match a.id {
        Some((id, true)) => Some(id),
        Some((id, false)) => {
            if s.last_id.ms == id.ms {
                s.last_id.incr().filter(|n| n.ms == id.ms)
            } else {
                Some(id)
            }
        }
        None => {
            if now > s.last_id.ms {
                Some(StreamId::new(now, 0))
            } else {
                s.last_id.incr()
            }
        }
    };
    let too_small =
        "ERR The ID specified in XADD is equal or smaller than the target stream top item";
    let id = match id {
        Some(id) if id > s.last_id => id,
        _ => return Err(syntax(too_small)),
    };
    if tot > store::types::stream::LISTPACK_MAX_SIZE {
        return Err(syntax("ERR Elements are too large to be stored"));
    }
    s.append(id, pairs, max_bytes, max_entries);
    reply_id(out, id);
    let trimmed = match a.trim {
        Some(t) => s.trim(t, a.approx, a.limit),
        None => 0,
    };
    let (len, first) = (s.len(), s.first_raw_id());
    cx.changed(key, Class::STREAM, "xadd", 1);
    if trimmed > 0 {
        cx.notify(Class::STREAM, "xtrim", key);
    }
    let id_rewrite = !matches!(a.id, Some((_, true)));
    if (a.approx || id_rewrite) && cx.propagating() {
        rewrite_trim(cx, argv, &a, len, first, id_rewrite.then_some(id));
    }
    Ok(())
}

fn xtrim(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let key = argv[1];
    let a = parse_add_trim(cx, argv, false)?;
    let Some(s) = write_stream(cx, key)? else {
        out.int(0);
        return Ok(());
    };
    let n = s.trim(a.trim.expect("checked"), a.approx, a.limit);
    let (len, first) = (s.len(), s.first_raw_id());
    if n > 0 {
        cx.changed(key, Class::STREAM, "xtrim", n);
        if a.approx && cx.propagating() {
            rewrite_trim(cx, argv, &a, len, first, None);
        }
    }
    out.int(n as i64);
    Ok(())
}

// ---- XRANGE / XREVRANGE / XLEN --------------------------------------------

fn xrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    range_with(cx, args, false, out)
}

fn xrevrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    range_with(cx, args, true, out)
}

/// Redis's `xrangeGenericCommand`.
fn range_with(cx: &mut Ctx, args: &mut Args, rev: bool, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (start_arg, end_arg) = if rev { (argv[3], argv[2]) } else { (argv[2], argv[3]) };
    let (mut start, ex) = parse_interval_id(start_arg, 0)?;
    if ex {
        start = start.incr().ok_or_else(|| syntax("ERR invalid start ID for the interval"))?;
    }
    let (mut end, ex) = parse_interval_id(end_arg, u64::MAX)?;
    if ex {
        end = end.decr().ok_or_else(|| syntax("ERR invalid end ID for the interval"))?;
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < argv.len() {
        if eq_ic(argv[j], "COUNT") && j + 1 < argv.len() {
            count = parse_i64(argv[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = read_stream(cx, argv[1])? else {
        out.array(0);
        return Ok(());
    };
    if count == 0 {
        out.null_array();
        return Ok(());
    }
    let limit = if count < 0 { usize::MAX } else { count as usize };
    let mut found = Vec::new();
    s.range(start, end, rev, |e| {
        found.push(e);
        found.len() < limit
    });
    out.array(found.len());
    for e in &found {
        reply_entry(out, e);
    }
    Ok(())
}

fn xlen(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let n = read_stream(cx, args.key()?)?.map_or(0, |s| s.len());
    out.int(n as i64);
    Ok(())
}

// ---- XDEL / XSETID ----------------------------------------------------------

fn xdel(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    // The key is looked up before the ids are parsed (as Redis's xdelCommand).
    if write_stream(cx, key)?.is_none() {
        out.int(0);
        return Ok(());
    }
    let ids = args.rest().iter().map(|a| parse_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let s = write_stream(cx, key)?.expect("present");
    let mut deleted = 0u64;
    let mut first = false;
    for id in ids {
        if s.delete(id) {
            first |= id == s.first_id;
            if id > s.max_deleted {
                s.max_deleted = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.is_empty() {
            s.first_id = StreamId::MIN;
        } else if first {
            s.refresh_first_id();
        }
        cx.changed(key, Class::STREAM, "xdel", deleted);
    }
    out.int(deleted as i64);
    Ok(())
}

fn xsetid(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let id = parse_strict_id(args.req()?)?;
    let mut entries_added: Option<u64> = None;
    let mut max_xdel = StreamId::MIN;
    while let Some(opt) = args.next() {
        let more = args.remaining();
        if eq_ic(opt, "ENTRIESADDED") && more > 0 {
            let n = parse_i64(args.req()?)?;
            if n < 0 {
                return Err(syntax("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if eq_ic(opt, "MAXDELETEDID") && more > 0 {
            max_xdel = parse_strict_id(args.req()?)?;
            if id < max_xdel {
                return Err(syntax(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let s = write_stream(cx, key)?.ok_or(CmdError::NoSuchKey)?;
    // 7.0 does not compare `id` with the stream's own max_deleted_entry_id.
    if !s.is_empty() {
        let max = s.edge_id(true).unwrap_or(StreamId::MIN);
        if id < max {
            return Err(syntax(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| s.len() > n) {
            return Err(syntax(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if !max_xdel.is_zero() {
        s.max_deleted = max_xdel;
    }
    out.ok();
    // 7.0.15 does not signal XSETID's key as modified (WATCH stays).
    cx.changed_unwatched(key, Some((Class::STREAM, "xsetid")), 1, false);
    Ok(())
}

#[cfg(test)]
mod id_tests {
    use super::*;

    fn p(a: &str) -> Option<StreamId> {
        parse_id_with(a.as_bytes(), IdRules { missing_seq: 0, strict: false, partial: false })
            .ok()
            .map(|r| r.0)
    }

    #[test]
    fn ids_parse_as_redis_does() {
        assert_eq!(p("1-2"), Some(StreamId::new(1, 2)));
        assert_eq!(p("5"), Some(StreamId::new(5, 0)));
        assert_eq!(p(" 5"), Some(StreamId::new(5, 0)));
        assert_eq!(p("+5-007"), Some(StreamId::new(5, 7)));
        assert_eq!(p("5 "), None);
        assert_eq!(p("-5"), None);
        assert_eq!(p("1--5"), None);
        assert_eq!(p("18446744073709551615-18446744073709551615"), Some(StreamId::MAX));
        assert_eq!(p("18446744073709551616"), None);
        assert_eq!(p(""), None);
        assert_eq!(p("-"), Some(StreamId::MIN));
        assert_eq!(p("1-*"), None);
    }
}

#[cfg(test)]
mod command_tests {
    use crate::tests::Harness;

    #[test]
    fn xdel_on_a_missing_key_answers_zero_before_parsing_ids() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["XDEL", "nokey", "(0-0"]), ":0\r\n");
        h.run(&["XADD", "s", "1-0", "a", "1"]);
        assert!(h.run(&["XDEL", "s", "(0-0"]).starts_with("-ERR Invalid stream ID"));
    }

    #[test]
    fn xreadgroup_with_nothing_new_creates_no_consumer() {
        let mut h = Harness::new();
        h.run(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        assert_eq!(h.run(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]), "*-1\r\n");
        assert_eq!(h.run(&["XGROUP", "DELCONSUMER", "s", "g", "c"]), ":0\r\n");
        h.run(&["XADD", "s", "1-0", "a", "1"]);
        h.run(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        assert_eq!(h.run(&["XGROUP", "DELCONSUMER", "s", "g", "c"]), ":1\r\n");
    }

    #[test]
    fn xsetid_ignores_the_streams_own_max_deleted_id() {
        let mut h = Harness::new();
        h.run(&["XADD", "s", "5-0", "a", "1"]);
        assert_eq!(h.run(&["XSETID", "s", "20-0", "MAXDELETEDID", "10-0"]), "+OK\r\n");
        h.run(&["XDEL", "s", "5-0"]);
        assert_eq!(h.run(&["XSETID", "s", "9-0"]), "+OK\r\n");
    }

    #[test]
    fn approximate_trims_remove_whole_nodes_only() {
        let mut h = Harness::new();
        h.run(&["CONFIG", "SET", "stream-node-max-entries", "3"]);
        for i in 1..=10 {
            h.run(&["XADD", "s", &i.to_string(), "f", "v"]);
        }
        assert_eq!(h.run(&["XTRIM", "s", "MAXLEN", "~", "5"]), ":3\r\n");
        assert_eq!(h.run(&["XLEN", "s"]), ":7\r\n");
        assert_eq!(h.run(&["XTRIM", "s", "MAXLEN", "5"]), ":2\r\n");
    }
}
