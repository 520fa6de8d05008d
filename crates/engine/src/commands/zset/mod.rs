//! Sorted-set commands (Redis 7.0's `sorted-set` group, blocking pops
//! aside): ZADD and the single-member commands here, ranges and their
//! removals in [`range`], pops, set algebra, ZRANDMEMBER and ZSCAN in
//! [`ops`].
//!
//! The value type and its encodings live in `store::types::zset`. Scores
//! are parsed with C's `strtod` (through libc) because Redis accepts
//! exactly what glibc's `strtod` accepts (`inf`, hex floats, …) and
//! replies print with `%.17g` (`ReplyBuf::double`).

/// Pops are shared with the blocking commands (BZPOPMIN, BZPOPMAX, BZMPOP).
pub(crate) mod ops;
mod range;
#[cfg(test)]
mod tests;

use resp::ReplyBuf;
use store::types::zset::{Limits, ZSet};
use store::Value;

use crate::core::ctx::{eq_ic, Args, Ctx, KeyEntry};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Lock};

pub const COMMANDS: &[Command] = &[
    Command::redis("ZADD", zadd),
    Command::redis("ZINCRBY", zincrby),
    Command::redis("ZREM", zrem),
    Command::redis("ZSCORE", zscore),
    Command::redis("ZMSCORE", zmscore),
    Command::redis("ZCARD", zcard),
    Command::redis("ZCOUNT", range::zcount),
    Command::redis("ZLEXCOUNT", range::zlexcount),
    Command::redis("ZRANGE", range::zrange),
    Command::redis("ZRANGESTORE", range::zrangestore),
    Command::redis("ZREVRANGE", range::zrevrange),
    Command::redis("ZRANGEBYSCORE", range::zrangebyscore),
    Command::redis("ZREVRANGEBYSCORE", range::zrevrangebyscore),
    Command::redis("ZRANGEBYLEX", range::zrangebylex),
    Command::redis("ZREVRANGEBYLEX", range::zrevrangebylex),
    Command::redis("ZRANK", zrank),
    Command::redis("ZREVRANK", zrevrank),
    Command::redis("ZPOPMIN", ops::zpopmin),
    Command::redis("ZPOPMAX", ops::zpopmax),
    Command::redis("ZMPOP", ops::zmpop).lock(Lock::Custom { find: ops::numkeys_at_1 }),
    Command::redis("ZRANDMEMBER", ops::zrandmember),
    Command::redis("ZUNION", ops::zunion).lock(Lock::Custom { find: ops::numkeys_at_1 }),
    Command::redis("ZINTER", ops::zinter).lock(Lock::Custom { find: ops::numkeys_at_1 }),
    Command::redis("ZDIFF", ops::zdiff).lock(Lock::Custom { find: ops::numkeys_at_1 }),
    Command::redis("ZUNIONSTORE", ops::zunionstore).lock(Lock::Custom { find: ops::store_keys }),
    Command::redis("ZINTERSTORE", ops::zinterstore).lock(Lock::Custom { find: ops::store_keys }),
    Command::redis("ZDIFFSTORE", ops::zdiffstore).lock(Lock::Custom { find: ops::store_keys }),
    Command::redis("ZINTERCARD", ops::zintercard).lock(Lock::Custom { find: ops::numkeys_at_1 }),
    Command::redis("ZREMRANGEBYRANK", range::zremrangebyrank),
    Command::redis("ZREMRANGEBYSCORE", range::zremrangebyscore),
    Command::redis("ZREMRANGEBYLEX", range::zremrangebylex),
    Command::redis("ZSCAN", ops::zscan),
];

// ---- helpers --------------------------------------------------------------

/// `zset-max-listpack-entries` / `-value`, read once per command.
pub(crate) fn limits(cx: &mut Ctx) -> Limits {
    let c = cx.sess.conf(cx.shared);
    Limits { max_entries: c.zset_max_listpack_entries, max_value: c.zset_max_listpack_value }
}

/// Reports a change of the sorted set at `key` (Redis's event and dirty
/// count); with `removed` the set was emptied, and is deleted, which Redis
/// reports as `del` after the command's own event.
pub(crate) fn zset_changed(cx: &mut Ctx, key: &[u8], event: &'static str, n: usize, removed: bool) {
    cx.changed_or_emptied(key, Class::ZSET, event, n as u64, removed);
}

/// The sorted set of a value, or WRONGTYPE.
pub(crate) fn as_zset(v: &mut Value) -> Result<&mut ZSet, CmdError> {
    match v {
        Value::ZSet(z) => Ok(z),
        _ => Err(CmdError::WrongType),
    }
}

/// C's `strtod` on `a` (NUL-terminated copy): the value, how many bytes it
/// used, and whether it set `ERANGE`.
pub(crate) fn c_strtod(a: &[u8]) -> (f64, usize, bool) {
    let mut stack = [0u8; 128];
    let heap: Vec<u8>;
    let buf: &[u8] = if a.len() < stack.len() {
        stack[..a.len()].copy_from_slice(a);
        &stack[..=a.len()]
    } else {
        heap = [a, &[0]].concat();
        &heap
    };
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `buf` is NUL-terminated and outlives the call; strtod only
    // reads up to the NUL and writes `end` and errno.
    let (v, erange) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(buf.as_ptr().cast(), &mut end);
        (v, *libc::__errno_location() == libc::ERANGE)
    };
    let used = (end as usize).saturating_sub(buf.as_ptr() as usize);
    (v, used, erange)
}

/// Redis's `string2d`: the whole argument is one float, no leading space,
/// no overflow, not NaN.
pub(crate) fn string2d(a: &[u8]) -> Option<f64> {
    if a.is_empty() || matches!(a[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (v, used, erange) = c_strtod(a);
    if used != a.len() || (erange && (v.is_infinite() || v == 0.0)) || v.is_nan() {
        return None;
    }
    Some(v)
}

/// A score argument (`ERR value is not a valid float`).
pub(crate) fn parse_score(a: &[u8]) -> Result<f64, CmdError> {
    string2d(a).ok_or(CmdError::NotFloat)
}

fn nan_error() -> CmdError {
    CmdError::err("resulting score is not a number (NaN)")
}

// ---- ZADD ZINCRBY -----------------------------------------------------------

#[derive(Clone, Copy, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What `zsetAdd` did with one element.
enum AddOutcome {
    Added(f64),
    Updated(f64),
    /// Unchanged score, still "processed" (its score is the reply of INCR).
    Same(f64),
    Nop,
}

/// Redis 7.0's `zsetAdd` for one element.
fn zset_add(
    z: &mut ZSet,
    m: &[u8],
    mut score: f64,
    f: AddFlags,
    lim: Limits,
) -> Result<AddOutcome, CmdError> {
    match z.score(m) {
        Some(cur) => {
            if f.nx {
                return Ok(AddOutcome::Nop);
            }
            if f.incr {
                score += cur;
                if score.is_nan() {
                    return Err(nan_error());
                }
            }
            if (f.lt && score >= cur) || (f.gt && score <= cur) {
                return Ok(AddOutcome::Nop);
            }
            if score != cur {
                z.set(m, score, lim);
                Ok(AddOutcome::Updated(score))
            } else {
                Ok(AddOutcome::Same(score))
            }
        }
        None if f.xx => Ok(AddOutcome::Nop),
        None => {
            z.set(m, score, lim);
            Ok(AddOutcome::Added(score))
        }
    }
}

pub(crate) fn zadd(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zadd_with(cx, args, AddFlags::default(), out)
}

fn zincrby(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zadd_with(cx, args, AddFlags { incr: true, ..AddFlags::default() }, out)
}

/// Redis's `zaddGenericCommand` (ZINCRBY is ZADD INCR without options).
fn zadd_with(cx: &mut Ctx, args: &mut Args, mut f: AddFlags, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let zincrby = f.incr;
    if !zincrby {
        while let Some(a) = args.peek() {
            if eq_ic(a, "NX") {
                f.nx = true;
            } else if eq_ic(a, "XX") {
                f.xx = true;
            } else if eq_ic(a, "CH") {
                f.ch = true;
            } else if eq_ic(a, "INCR") {
                f.incr = true;
            } else if eq_ic(a, "GT") {
                f.gt = true;
            } else if eq_ic(a, "LT") {
                f.lt = true;
            } else {
                break;
            }
            args.next();
        }
    }
    let rest = args.rest();
    if rest.is_empty() || rest.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::err("XX and NX options at the same time are not compatible"));
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(CmdError::err("GT, LT, and/or NX options at the same time are not compatible"));
    }
    if f.incr && rest.len() > 2 {
        return Err(CmdError::err("INCR option supports a single increment-element pair"));
    }
    // Every score is checked before anything is written.
    let mut scores: smallvec::SmallVec<[f64; 8]> = smallvec::SmallVec::new();
    for pair in rest.chunks(2) {
        scores.push(parse_score(pair[0])?);
    }
    let lim = limits(cx);
    // One lookup: the members go into the live set, or into a new one
    // that is then added (`new` before the command's event, as Redis
    // creates the key before adding to it).
    let t = match cx.entry(key) {
        KeyEntry::Occupied(e) => add_members(as_zset(&mut e.value)?, rest, &scores, f, lim),
        KeyEntry::Vacant(_) if f.xx => {
            reply_add(out, f, 0, 0, 0, 0.0);
            return Ok(());
        }
        KeyEntry::Vacant(place) => {
            let mut z = ZSet::new_for(rest[1].len(), lim);
            let t = add_members(&mut z, rest, &scores, f, lim);
            place.insert(Value::ZSet(z));
            t
        }
    };
    let (added, updated, processed, last, failed) =
        (t.added, t.updated, t.processed, t.last, t.failed);
    let changes = added + updated;
    if changes > 0 {
        zset_changed(cx, key, if zincrby || f.incr { "zincr" } else { "zadd" }, changes, false);
    }
    if let Some(err) = failed {
        return Err(err);
    }
    reply_add(out, f, added, updated, processed, last);
    Ok(())
}

/// What ZADD's members did to a set.
struct Tally {
    added: usize,
    updated: usize,
    processed: usize,
    /// The last processed member's score (ZADD INCR's reply).
    last: f64,
    /// The error that stopped the adding (INCR's NaN).
    failed: Option<CmdError>,
}

/// Adds `rest`'s members with their parsed `scores` as `f` says, until
/// one fails.
fn add_members(z: &mut ZSet, rest: &[&[u8]], scores: &[f64], f: AddFlags, lim: Limits) -> Tally {
    let mut t = Tally { added: 0, updated: 0, processed: 0, last: 0.0, failed: None };
    for (pair, &score) in rest.chunks(2).zip(scores) {
        match zset_add(z, pair[1], score, f, lim) {
            Ok(AddOutcome::Added(s)) => {
                t.added += 1;
                t.processed += 1;
                t.last = s;
            }
            Ok(AddOutcome::Updated(s)) => {
                t.updated += 1;
                t.processed += 1;
                t.last = s;
            }
            Ok(AddOutcome::Same(s)) => {
                t.processed += 1;
                t.last = s;
            }
            Ok(AddOutcome::Nop) => {}
            Err(err) => {
                t.failed = Some(err);
                break;
            }
        }
    }
    t
}

fn reply_add(
    out: &mut ReplyBuf,
    f: AddFlags,
    added: usize,
    updated: usize,
    processed: usize,
    s: f64,
) {
    if f.incr {
        if processed > 0 {
            out.double(s);
        } else {
            out.null();
        }
    } else {
        out.int((if f.ch { added + updated } else { added }) as i64);
    }
}

// ---- ZREM ZSCORE ZMSCORE ZCARD ZRANK ZREVRANK ---------------------------------

fn zrem(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let Some(e) = cx.lookup(key) else {
        out.int(0);
        return Ok(());
    };
    let z = as_zset(&mut e.value)?;
    let mut deleted = 0;
    for m in args.rest() {
        if z.remove(m).is_some() {
            deleted += 1;
            if z.is_empty() {
                break;
            }
        }
    }
    let emptied = z.is_empty();
    if deleted > 0 {
        zset_changed(cx, key, "zrem", deleted, emptied);
    }
    out.int(deleted as i64);
    Ok(())
}

fn zscore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let m = args.req()?;
    let s = match cx.lookup_read(key) {
        Some(e) => as_zset(&mut e.value)?.score(m),
        None => None,
    };
    match s {
        Some(s) => out.double(s),
        None => out.null(),
    }
    Ok(())
}

fn zmscore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let members = args.rest();
    let z = match cx.lookup_read(key) {
        Some(e) => Some(&*as_zset(&mut e.value)?),
        None => None,
    };
    out.array(members.len());
    for m in members {
        match z.and_then(|z| z.score(m)) {
            Some(s) => out.double(s),
            None => out.null(),
        }
    }
    Ok(())
}

fn zcard(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let n = match cx.lookup_read(key) {
        Some(e) => as_zset(&mut e.value)?.len(),
        None => 0,
    };
    out.int(n as i64);
    Ok(())
}

fn zrank(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    rank_with(cx, args, false, out)
}

fn zrevrank(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    rank_with(cx, args, true, out)
}

fn rank_with(cx: &mut Ctx, args: &mut Args, rev: bool, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let m = args.req()?;
    let r = match cx.lookup_read(key) {
        Some(e) => as_zset(&mut e.value)?.rank(m, rev),
        None => None,
    };
    match r {
        Some((r, _)) => out.int(r as i64),
        None => out.null(),
    }
    Ok(())
}
