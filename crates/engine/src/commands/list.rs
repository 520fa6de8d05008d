//! List commands: pushes, pops (with counts), LLEN, LRANGE, LINDEX, LSET,
//! LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP, and the blocking
//! pops BLPOP, BRPOP, BRPOPLPUSH, BLMOVE and BLMPOP (their waiting is in
//! `crate::core::blocking`). The value type is `store::types::List`.
//!
//! Write paths look the key up once (`Ctx::entry`, or `Ctx::lookup_write`
//! when they do not create it), check its type, change the list in place
//! and then report the change; an emptied list is deleted there
//! (`Ctx::changed_or_emptied`), as Redis never keeps empty aggregates.

use std::borrow::Cow;

use resp::ReplyBuf;
use store::types::{List, ListEnd};
use store::{Entry, Kind, Value};

use crate::core::blocking;
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx, KeyEntry};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, KeyList, Lock};

pub const COMMANDS: &[Command] = &[
    Command::redis("LPUSH", lpush),
    Command::redis("RPUSH", rpush),
    Command::redis("LPUSHX", lpushx),
    Command::redis("RPUSHX", rpushx),
    Command::redis("LPOP", lpop),
    Command::redis("RPOP", rpop),
    Command::redis("LLEN", llen),
    Command::redis("LRANGE", lrange),
    Command::redis("LINDEX", lindex),
    Command::redis("LSET", lset),
    Command::redis("LINSERT", linsert),
    Command::redis("LREM", lrem),
    Command::redis("LTRIM", ltrim),
    Command::redis("LPOS", lpos),
    Command::redis("LMOVE", lmove),
    Command::redis("RPOPLPUSH", rpoplpush),
    Command::redis("LMPOP", lmpop).lock(Lock::Custom { find: lmpop_keys }),
    Command::redis("BLPOP", blpop),
    Command::redis("BRPOP", brpop),
    Command::redis("BRPOPLPUSH", brpoplpush),
    Command::redis("BLMOVE", blmove),
    Command::redis("BLMPOP", blmpop).lock(Lock::Custom { find: blmpop_keys }),
];

const fn msg(m: &'static str) -> CmdError {
    CmdError::Msg(Cow::Borrowed(m))
}

/// The list of an entry, or WRONGTYPE.
fn as_list(e: &mut Entry) -> Result<&mut List, CmdError> {
    match &mut e.value {
        Value::List(l) => Ok(l),
        _ => Err(CmdError::WrongType),
    }
}

/// The list at `key` for a change in place: `None` when missing,
/// WRONGTYPE for another type. The caller reports the change with
/// [`list_changed`] once done.
fn list_in<'c>(cx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c mut List>, CmdError> {
    cx.lookup_write(key).map(as_list).transpose()
}

/// Reports a change of the list at `key` (Redis's event and dirty count);
/// an emptied list is deleted, with Redis's `del` event after.
fn list_changed(cx: &mut Ctx, key: &[u8], event: &'static str, n: usize, emptied: bool) {
    // Redis 7.0 serves a client blocked on a list outside call(): the pop
    // is propagated but not counted in server.dirty (sorted sets differ).
    let n = if cx.caller.serves_waiter() {
        cx.force_propagate();
        0
    } else {
        n
    };
    cx.changed_or_emptied(key, Class::LIST, event, n as u64, emptied);
}

fn push_event(end: ListEnd) -> &'static str {
    match end {
        ListEnd::Head => "lpush",
        ListEnd::Tail => "rpush",
    }
}

fn pop_event(end: ListEnd) -> &'static str {
    match end {
        ListEnd::Head => "lpop",
        ListEnd::Tail => "rpop",
    }
}

/// The non-blocking pop a blocking one is propagated as.
fn pop_name(end: ListEnd) -> &'static [u8] {
    match end {
        ListEnd::Head => b"LPOP",
        ListEnd::Tail => b"RPOP",
    }
}

/// The list at `key` for reading (counts a keyspace hit or miss).
fn read_list<'c>(cx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c List>, CmdError> {
    match cx.lookup_read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::List(l) => Ok(Some(l)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// `LEFT` or `RIGHT` (Redis's `getListPositionFromObjectOrReply`).
fn parse_end(a: &[u8]) -> Result<ListEnd, CmdError> {
    if eq_ic(a, "LEFT") {
        Ok(ListEnd::Head)
    } else if eq_ic(a, "RIGHT") {
        Ok(ListEnd::Tail)
    } else {
        Err(CmdError::Syntax)
    }
}

/// An integer that must be ≥ `min`, with Redis's `msg` for both a bad
/// number and one out of range (`getRangeLongFromObjectOrReply`).
fn parse_at_least(a: &[u8], min: i64, m: &'static str) -> Result<i64, CmdError> {
    match resp::parse_i64(a) {
        Some(v) if v >= min => Ok(v),
        _ => Err(msg(m)),
    }
}

// ---- pushes ----------------------------------------------------------------

fn lpush(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    push_with(cx, args, ListEnd::Head, false, out)
}

fn rpush(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    push_with(cx, args, ListEnd::Tail, false, out)
}

fn lpushx(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    push_with(cx, args, ListEnd::Head, true, out)
}

fn rpushx(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    push_with(cx, args, ListEnd::Tail, true, out)
}

/// Redis's `pushGenericCommand`; `xx` only pushes onto an existing list.
fn push_with(
    cx: &mut Ctx,
    args: &mut Args,
    end: ListEnd,
    xx: bool,
    out: &mut ReplyBuf,
) -> CmdResult {
    let key = args.key()?;
    let vals = args.rest();
    let fill = cx.sess.conf(cx.shared).list_max_listpack_size;
    let len = match cx.entry(key) {
        KeyEntry::Occupied(e) => {
            let l = as_list(e)?;
            for v in vals {
                l.push(end, v);
            }
            l.len()
        }
        KeyEntry::Vacant(_) if xx => 0,
        KeyEntry::Vacant(place) => {
            let mut l = List::new(fill);
            for v in vals {
                l.push(end, v);
            }
            let n = l.len();
            place.insert(Value::List(Box::new(l)));
            n
        }
    };
    if len > 0 {
        list_changed(cx, key, push_event(end), vals.len(), false);
    }
    out.int(len as i64);
    Ok(())
}

// ---- pops ------------------------------------------------------------------

fn lpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    pop_with(cx, args, ListEnd::Head, out)
}

fn rpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    pop_with(cx, args, ListEnd::Tail, out)
}

/// Redis's `popGenericCommand`: one element as a bulk, or with a count an
/// array (a null array for a missing key, an empty one for count 0).
fn pop_with(cx: &mut Ctx, args: &mut Args, end: ListEnd, out: &mut ReplyBuf) -> CmdResult {
    if args.remaining() > 2 {
        return Err(CmdError::WrongArity(cx.spec.name.to_ascii_lowercase()));
    }
    let key = args.key()?;
    let count = match args.next() {
        Some(a) => Some(parse_at_least(a, 0, "ERR value is out of range, must be positive")?),
        None => None,
    };
    let Some(l) = list_in(cx, key)? else {
        if count.is_some() {
            out.null_array();
        } else {
            out.null();
        }
        return Ok(());
    };
    let n = match count {
        None => {
            l.pop_with(end, |v| out.bulk(v));
            1
        }
        Some(0) => {
            out.array(0);
            return Ok(());
        }
        Some(c) => pop_reply(l, end, c, out),
    };
    let emptied = l.is_empty();
    list_changed(cx, key, pop_event(end), n, emptied);
    Ok(())
}

/// Pops up to `count` elements from `end` and replies with them as an
/// array; returns how many.
fn pop_reply(l: &mut List, end: ListEnd, count: i64, out: &mut ReplyBuf) -> usize {
    let n = l.len().min(usize::try_from(count).unwrap_or(usize::MAX));
    out.array(n);
    for _ in 0..n {
        l.pop_with(end, |v| out.bulk(v));
    }
    n
}

// ---- reads -----------------------------------------------------------------

fn llen(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let n = read_list(cx, key)?.map_or(0, List::len);
    out.int(n as i64);
    Ok(())
}

/// Redis's index normalisation for LRANGE and LTRIM: the clamped
/// `(start, count)` of `start..=end`, `None` when empty.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let llen = len as i64;
    let mut start = if start < 0 { llen.saturating_add(start) } else { start };
    let mut end = if end < 0 { llen.saturating_add(end) } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    Some((start as usize, (end - start + 1) as usize))
}

fn lrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let start = args.i64()?;
    let end = args.i64()?;
    let Some(l) = read_list(cx, key)? else {
        out.array(0);
        return Ok(());
    };
    match clamp_range(start, end, l.len()) {
        None => out.array(0),
        Some((from, n)) => {
            out.array(n);
            let mut it = l.range(from, n);
            while let Some(v) = it.next() {
                out.bulk(v);
            }
        }
    }
    Ok(())
}

/// A possibly negative index resolved against `len`.
fn resolve(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { (len as i64).checked_add(index)? } else { index };
    usize::try_from(i).ok().filter(|&i| i < len)
}

fn lindex(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let idx = args.req()?;
    // Redis looks the key up before it parses the index.
    let Some(l) = read_list(cx, key)? else {
        out.null();
        return Ok(());
    };
    match resolve(parse_i64(idx)?, l.len()).and_then(|i| l.get(i)) {
        Some(v) => out.bulk(&v),
        None => out.null(),
    }
    Ok(())
}

/// Options of LPOS.
struct LposOpts {
    rank: i64,
    /// `None` when COUNT was not given (the reply is then one index).
    count: Option<i64>,
    maxlen: i64,
}

fn parse_lpos(args: &mut Args) -> Result<LposOpts, CmdError> {
    let mut o = LposOpts { rank: 1, count: None, maxlen: 0 };
    while let Some(a) = args.next() {
        let more = !args.is_empty();
        if eq_ic(a, "RANK") && more {
            o.rank = args.i64()?;
            if o.rank == 0 {
                return Err(msg(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                ));
            }
        } else if eq_ic(a, "COUNT") && more {
            o.count = Some(parse_at_least(args.req()?, 0, "ERR COUNT can't be negative")?);
        } else if eq_ic(a, "MAXLEN") && more {
            o.maxlen = parse_at_least(args.req()?, 0, "ERR MAXLEN can't be negative")?;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

fn lpos(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let ele = args.req()?;
    let o = parse_lpos(args)?;
    let Some(l) = read_list(cx, key)? else {
        match o.count {
            Some(_) => out.array(0),
            None => out.null(),
        }
        return Ok(());
    };
    // A negative rank searches from the tail. Redis negates it in C, so
    // LONG_MIN stays negative and matches from the first hit: wrap too.
    let from_tail = o.rank < 0;
    let rank = if from_tail { o.rank.wrapping_neg() } else { o.rank };
    let len = l.len();
    let mut hits: smallvec::SmallVec<[usize; 16]> = smallvec::SmallVec::new();
    let mut matches: i64 = 0;
    let mut scan = |mut it: store::types::list::Iter<'_>| {
        let mut index = 0usize;
        while let Some(v) = it.next() {
            let at = index;
            index += 1;
            let index = at;
            if o.maxlen != 0 && index as i64 >= o.maxlen {
                break;
            }
            if v != ele {
                continue;
            }
            matches += 1;
            if matches >= rank {
                hits.push(if from_tail { len - index - 1 } else { index });
                match o.count {
                    None => break,
                    Some(c) => {
                        if c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c {
                            break;
                        }
                    }
                }
            }
        }
    };
    if from_tail {
        scan(l.iter().rev());
    } else {
        scan(l.iter());
    }
    match o.count {
        Some(_) => {
            out.array(hits.len());
            for h in hits {
                out.int(h as i64);
            }
        }
        None => match hits.first() {
            Some(&h) => out.int(h as i64),
            None => out.null(),
        },
    }
    Ok(())
}

// ---- changes in place ------------------------------------------------------

fn lset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let idx = args.req()?;
    let val = args.req()?;
    // Redis looks the key up before it parses the index.
    let Some(l) = list_in(cx, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let i = resolve(parse_i64(idx)?, l.len()).ok_or(CmdError::OutOfRange)?;
    l.set(i, val);
    list_changed(cx, key, "lset", 1, false);
    out.ok();
    Ok(())
}

fn linsert(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let place = args.req()?;
    let after = if eq_ic(place, "AFTER") {
        true
    } else if eq_ic(place, "BEFORE") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let pivot = args.req()?;
    let val = args.req()?;
    let Some(l) = list_in(cx, key)? else {
        out.int(0);
        return Ok(());
    };
    let Some(at) = l.iter().position(|v| v == pivot) else {
        out.int(-1);
        return Ok(());
    };
    l.insert(at + usize::from(after), val);
    let n = l.len();
    list_changed(cx, key, "linsert", 1, false);
    out.int(n as i64);
    Ok(())
}

fn lrem(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let count = args.i64()?;
    let val = args.req()?;
    let Some(l) = list_in(cx, key)? else {
        out.int(0);
        return Ok(());
    };
    let removed = l.remove_eq(val, count);
    if removed > 0 {
        let emptied = l.is_empty();
        list_changed(cx, key, "lrem", removed, emptied);
    }
    out.int(removed as i64);
    Ok(())
}

fn ltrim(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let start = args.i64()?;
    let end = args.i64()?;
    if let Some(l) = list_in(cx, key)? {
        let len = l.len();
        let (front, back) = match clamp_range(start, end, len) {
            None => (len, 0),
            Some((from, n)) => (from, len - from - n),
        };
        l.trim(front, back);
        let emptied = l.is_empty();
        list_changed(cx, key, "ltrim", front + back, emptied);
    }
    out.ok();
    Ok(())
}

// ---- moves -----------------------------------------------------------------

fn lmove(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let src = args.key()?;
    let dst = args.key()?;
    let from = parse_end(args.req()?)?;
    let to = parse_end(args.req()?)?;
    move_with(cx, src, dst, from, to, out)
}

fn rpoplpush(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let src = args.key()?;
    let dst = args.key()?;
    move_with(cx, src, dst, ListEnd::Tail, ListEnd::Head, out)
}

/// Redis's `lmoveGenericCommand`. The source is emptied only after the
/// push, so `src == dst` rotates a one-element list in place.
fn move_with(
    cx: &mut Ctx,
    src: &[u8],
    dst: &[u8],
    from: ListEnd,
    to: ListEnd,
    out: &mut ReplyBuf,
) -> CmdResult {
    let fill = cx.sess.conf(cx.shared).list_max_listpack_size;
    match list_in(cx, src)? {
        Some(l) if !l.is_empty() => {}
        _ => {
            out.null();
            return Ok(());
        }
    }
    if let Some(e) = cx.lookup_write(dst) {
        as_list(e)?;
    }
    let Some(l) = list_in(cx, src)? else { unreachable!("source was just found") };
    let v = l.pop(from).expect("source is not empty");
    // Redis's order: the push (and the destination's creation), then the
    // pop and, if it emptied the source, its deletion; one change counted.
    match cx.entry(dst) {
        KeyEntry::Occupied(e) => as_list(e)?.push(to, &v),
        KeyEntry::Vacant(place) => {
            let mut l = List::new(fill);
            l.push(to, &v);
            place.insert(Value::List(Box::new(l)));
        }
    }
    cx.changed(dst, Class::LIST, push_event(to), 0);
    let emptied = list_in(cx, src)?.is_some_and(|l| l.is_empty());
    list_changed(cx, src, pop_event(from), 1, emptied);
    out.bulk(&v);
    Ok(())
}

/// Lock finder of LMPOP: the `numkeys` keys after the count. A bad count
/// adds nothing; the handler reports it before touching any key.
fn lmpop_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    let Some(n) = argv.get(1).and_then(|a| resp::parse_i64(a)) else { return };
    if n > 0 {
        for &k in argv.iter().skip(2).take(n as usize) {
            keys.push((db, k));
        }
    }
}

/// Lock finder of BLMPOP: as LMPOP's, after the timeout.
fn blmpop_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    if argv.len() > 1 {
        lmpop_keys(&argv[1..], db, keys);
    }
}

/// Parses `numkeys key [key ...] LEFT|RIGHT [COUNT count]` (LMPOP and
/// BLMPOP after the timeout): the keys, the end and the count.
fn parse_mpop<'a>(rest: &'a [&'a [u8]]) -> Result<(&'a [&'a [u8]], ListEnd, i64), CmdError> {
    let (first, rest) = rest.split_first().ok_or(CmdError::Syntax)?;
    let numkeys = parse_at_least(first, 1, "ERR numkeys should be greater than 0")?;
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys >= rest.len() {
        return Err(CmdError::Syntax);
    }
    let (keys, opts) = rest.split_at(numkeys);
    let end = parse_end(opts[0])?;
    let mut count = None;
    let mut i = 1;
    while i < opts.len() {
        if count.is_none() && eq_ic(opts[i], "COUNT") && i + 1 < opts.len() {
            count = Some(parse_at_least(opts[i + 1], 1, "ERR count should be greater than 0")?);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((keys, end, count.unwrap_or(1)))
}

/// Pops up to `count` elements from the first non-empty list of `keys`,
/// replying `[key, [elements]]`; false (nothing written) if all are empty.
fn mpop_first(
    cx: &mut Ctx,
    keys: &[&[u8]],
    end: ListEnd,
    count: i64,
    out: &mut ReplyBuf,
) -> Result<bool, CmdError> {
    for &key in keys {
        let Some(l) = list_in(cx, key)? else { continue };
        if l.is_empty() {
            continue;
        }
        out.array(2);
        out.bulk(key);
        let n = pop_reply(l, end, count, out);
        let emptied = l.is_empty();
        list_changed(cx, key, pop_event(end), n, emptied);
        // LMPOP and BLMPOP go out as the pop with a count.
        if cx.propagating() {
            let mut c = resp::IntBuf::new();
            cx.propagate_as(&[pop_name(end), key, c.format(n as i64)]);
        }
        return Ok(true);
    }
    Ok(false)
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops from the
/// first non-empty list; replies `[key, [elements]]` or a null array.
fn lmpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (keys, end, count) = parse_mpop(args.rest())?;
    if !mpop_first(cx, keys, end, count, out)? {
        out.null_array();
    }
    Ok(())
}

// ---- blocking pops -----------------------------------------------------------

fn blpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    bpop_with(cx, args, ListEnd::Head, out)
}

fn brpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    bpop_with(cx, args, ListEnd::Tail, out)
}

/// Redis's `blockingPopGenericCommand`: `[key, element]` from the first
/// non-empty list (a WRONGTYPE key met first is an error), else wait.
fn bpop_with(cx: &mut Ctx, args: &mut Args, end: ListEnd, out: &mut ReplyBuf) -> CmdResult {
    let rest = args.rest();
    let (timeout, keys) = rest.split_last().ok_or(CmdError::Syntax)?;
    let timeout = blocking::parse_timeout(timeout)?;
    let keys = cx.waited_keys(keys);
    if pop_first(cx, keys, end, out)? {
        return Ok(());
    }
    if !cx.may_block() {
        out.null_array();
        return Ok(());
    }
    blocking::block(cx, args.argv(), keys, Kind::List, timeout);
    Ok(())
}

/// Pops one element from the first non-empty list of `keys`, replying
/// `[key, element]`; false (nothing written) if all are empty.
fn pop_first(
    cx: &mut Ctx,
    keys: &[&[u8]],
    end: ListEnd,
    out: &mut ReplyBuf,
) -> Result<bool, CmdError> {
    for &key in keys {
        let Some(l) = list_in(cx, key)? else { continue };
        out.array(2);
        out.bulk(key);
        l.pop_with(end, |v| out.bulk(v));
        let emptied = l.is_empty();
        list_changed(cx, key, pop_event(end), 1, emptied);
        // BLPOP and BRPOP go out as the non-blocking pop.
        cx.propagate_as(&[pop_name(end), key]);
        return Ok(true);
    }
    Ok(false)
}

fn blmove(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let src = args.key()?;
    let dst = args.key()?;
    let from = parse_end(args.req()?)?;
    let to = parse_end(args.req()?)?;
    let timeout = blocking::parse_timeout(args.req()?)?;
    bmove_with(cx, args.argv(), src, dst, from, to, timeout, out)
}

fn brpoplpush(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let src = args.key()?;
    let dst = args.key()?;
    let timeout = blocking::parse_timeout(args.req()?)?;
    bmove_with(cx, args.argv(), src, dst, ListEnd::Tail, ListEnd::Head, timeout, out)
}

/// Redis's `blmoveGenericCommand`: moves at once when the source has
/// elements, else waits (the destination is checked when served).
fn bmove_with(
    cx: &mut Ctx,
    argv: &[&[u8]],
    src: &[u8],
    dst: &[u8],
    from: ListEnd,
    to: ListEnd,
    timeout: i64,
    out: &mut ReplyBuf,
) -> CmdResult {
    if list_in(cx, src)?.is_some() {
        move_with(cx, src, dst, from, to, out)?;
        // BLMOVE goes out as LMOVE, BRPOPLPUSH as RPOPLPUSH; served, with
        // Redis's own spelling of the ends.
        if cx.caller.serves_waiter() {
            let end = |e: ListEnd| -> &'static [u8] {
                match e {
                    ListEnd::Head => b"left",
                    ListEnd::Tail => b"right",
                }
            };
            if argv.len() == 6 {
                cx.propagate_as(&[b"LMOVE", src, dst, end(from), end(to)]);
            } else {
                cx.propagate_as(&[b"RPOPLPUSH", src, dst]);
            }
        } else if argv.len() == 6 {
            cx.propagate_as(&[b"LMOVE", src, dst, argv[3], argv[4]]);
        } else {
            cx.propagate_as(&[b"RPOPLPUSH", src, dst]);
        }
        return Ok(());
    }
    if !cx.may_block() {
        out.null();
        return Ok(());
    }
    blocking::block(cx, argv, &[src], Kind::List, timeout);
    Ok(())
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
fn blmpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let timeout = args.req()?;
    let (keys, end, count) = parse_mpop(args.rest())?;
    let timeout = blocking::parse_timeout(timeout)?;
    let keys = cx.waited_keys(keys);
    if mpop_first(cx, keys, end, count, out)? {
        return Ok(());
    }
    if !cx.may_block() {
        out.null_array();
        return Ok(());
    }
    blocking::block(cx, args.argv(), keys, Kind::List, timeout);
    Ok(())
}

#[cfg(test)]
mod tests;
