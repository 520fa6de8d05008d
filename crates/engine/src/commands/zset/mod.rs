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
use store::{Value, NO_EXPIRE};

use crate::ctx::{eq_ic, Args, Ctx};
use crate::effects::Class;
use crate::error::{CmdError, CmdResult};
use crate::spec::{CommandSpec, Flags, Group, KeySpec};

const W: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WF: Flags = W.union(Flags::FAST);
const WFAST: Flags = Flags::WRITE.union(Flags::FAST);
const R: Flags = Flags::READONLY;
const RF: Flags = R.union(Flags::FAST);
const K1: KeySpec = KeySpec::range(1, 1, 1);
const G: Group = Group::SortedSet;

const LOGN: &str = "O(log(N)) where N is the number of elements in the sorted set.";
const RANGE_M: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M \
                       the number of elements returned.";
const RANGE_LIMIT: &str = "O(log(N)+M) with N being the number of elements in the sorted set and \
                           M the number of elements being returned. If M is constant (e.g. \
                           always asking for the first 10 elements with LIMIT), you can consider \
                           it O(log(N)).";
const REM_M: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the \
                     number of elements removed by the operation.";
const POP_C: &str = "O(log(N)*M) with N being the number of elements in the sorted set, and M \
                     being the number of elements popped.";
const UNION_C: &str = "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted \
                       sets, and M being the number of elements in the resulting sorted set.";
const INTER_C: &str = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted \
                       set, K being the number of input sorted sets and M being the number of \
                       elements in the resulting sorted set.";
const DIFF_C: &str = "O(L + (N-K)log(N)) worst case where L is the total number of elements in \
                      all the sets, N is the size of the first set, and K is the size of the \
                      result set.";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "ZADD",
        -4,
        WF,
        K1,
        G,
        "Add one or more members to a sorted set, or update its score if it already exists",
        zadd,
    )
    .since("1.2.0")
    .complexity(
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
    ),
    CommandSpec::new(
        "ZINCRBY",
        4,
        WF,
        K1,
        G,
        "Increment the score of a member in a sorted set",
        zincrby,
    )
    .since("1.2.0")
    .complexity(LOGN),
    CommandSpec::new(
        "ZREM",
        -3,
        WFAST,
        K1,
        G,
        "Remove one or more members from a sorted set",
        zrem,
    )
    .since("1.2.0")
    .complexity(
        "O(M*log(N)) with N being the number of elements in the sorted set and M the number \
             of elements to be removed.",
    ),
    CommandSpec::new(
        "ZSCORE",
        3,
        RF,
        K1,
        G,
        "Get the score associated with the given member in a sorted set",
        zscore,
    )
    .since("1.2.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "ZMSCORE",
        -3,
        RF,
        K1,
        G,
        "Get the score associated with the given members in a sorted set",
        zmscore,
    )
    .since("6.2.0")
    .complexity("O(N) where N is the number of members being requested."),
    CommandSpec::new("ZCARD", 2, RF, K1, G, "Get the number of members in a sorted set", zcard)
        .since("1.2.0")
        .complexity("O(1)"),
    CommandSpec::new(
        "ZCOUNT",
        4,
        RF,
        K1,
        G,
        "Count the members in a sorted set with scores within the given values",
        range::zcount,
    )
    .since("2.0.0")
    .complexity("O(log(N)) with N being the number of elements in the sorted set."),
    CommandSpec::new(
        "ZLEXCOUNT",
        4,
        RF,
        K1,
        G,
        "Count the number of members in a sorted set between a given lexicographical range",
        range::zlexcount,
    )
    .since("2.8.9")
    .complexity("O(log(N)) with N being the number of elements in the sorted set."),
    CommandSpec::new(
        "ZRANGE",
        -4,
        R,
        K1,
        G,
        "Return a range of members in a sorted set",
        range::zrange,
    )
    .since("1.2.0")
    .complexity(RANGE_M),
    CommandSpec::new(
        "ZRANGESTORE",
        -5,
        W,
        KeySpec::range(1, 2, 1),
        G,
        "Store a range of members from sorted set into another key",
        range::zrangestore,
    )
    .since("6.2.0")
    .complexity(
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of \
         elements stored into the destination key.",
    ),
    CommandSpec::new(
        "ZREVRANGE",
        -4,
        R,
        K1,
        G,
        "Return a range of members in a sorted set, by index, with scores ordered from high to low",
        range::zrevrange,
    )
    .since("1.2.0")
    .complexity(RANGE_M),
    CommandSpec::new(
        "ZRANGEBYSCORE",
        -4,
        R,
        K1,
        G,
        "Return a range of members in a sorted set, by score",
        range::zrangebyscore,
    )
    .since("1.0.5")
    .complexity(RANGE_LIMIT),
    CommandSpec::new(
        "ZREVRANGEBYSCORE",
        -4,
        R,
        K1,
        G,
        "Return a range of members in a sorted set, by score, with scores ordered from high to low",
        range::zrevrangebyscore,
    )
    .since("2.2.0")
    .complexity(RANGE_LIMIT),
    CommandSpec::new(
        "ZRANGEBYLEX",
        -4,
        R,
        K1,
        G,
        "Return a range of members in a sorted set, by lexicographical range",
        range::zrangebylex,
    )
    .since("2.8.9")
    .complexity(RANGE_LIMIT),
    CommandSpec::new(
        "ZREVRANGEBYLEX",
        -4,
        R,
        K1,
        G,
        "Return a range of members in a sorted set, by lexicographical range, ordered from \
         higher to lower strings.",
        range::zrevrangebylex,
    )
    .since("2.8.9")
    .complexity(RANGE_LIMIT),
    CommandSpec::new(
        "ZRANK",
        3,
        RF,
        K1,
        G,
        "Determine the index of a member in a sorted set",
        zrank,
    )
    .since("2.0.0")
    .complexity("O(log(N))"),
    CommandSpec::new(
        "ZREVRANK",
        3,
        RF,
        K1,
        G,
        "Determine the index of a member in a sorted set, with scores ordered from high to low",
        zrevrank,
    )
    .since("2.0.0")
    .complexity("O(log(N))"),
    CommandSpec::new(
        "ZPOPMIN",
        -2,
        WFAST,
        K1,
        G,
        "Remove and return members with the lowest scores in a sorted set",
        ops::zpopmin,
    )
    .since("5.0.0")
    .complexity(POP_C),
    CommandSpec::new(
        "ZPOPMAX",
        -2,
        WFAST,
        K1,
        G,
        "Remove and return members with the highest scores in a sorted set",
        ops::zpopmax,
    )
    .since("5.0.0")
    .complexity(POP_C),
    CommandSpec::new(
        "ZMPOP",
        -4,
        Flags::WRITE,
        KeySpec::Custom { legacy: (0, 0, 0), find: ops::numkeys_at_1 },
        G,
        "Remove and return members with scores in a sorted set",
        ops::zmpop,
    )
    .since("7.0.0")
    .complexity(
        "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of \
         elements in the sorted set, and M being the number of elements popped.",
    ),
    CommandSpec::new(
        "ZRANDMEMBER",
        -2,
        R,
        K1,
        G,
        "Get one or multiple random elements from a sorted set",
        ops::zrandmember,
    )
    .since("6.2.0")
    .complexity("O(N) where N is the number of elements returned"),
    CommandSpec::new(
        "ZUNION",
        -3,
        R,
        KeySpec::Custom { legacy: (0, 0, 0), find: ops::numkeys_at_1 },
        G,
        "Add multiple sorted sets",
        ops::zunion,
    )
    .since("6.2.0")
    .complexity(UNION_C),
    CommandSpec::new(
        "ZINTER",
        -3,
        R,
        KeySpec::Custom { legacy: (0, 0, 0), find: ops::numkeys_at_1 },
        G,
        "Intersect multiple sorted sets",
        ops::zinter,
    )
    .since("6.2.0")
    .complexity(INTER_C),
    CommandSpec::new(
        "ZDIFF",
        -3,
        R,
        KeySpec::Custom { legacy: (0, 0, 0), find: ops::numkeys_at_1 },
        G,
        "Subtract multiple sorted sets",
        ops::zdiff,
    )
    .since("6.2.0")
    .complexity(DIFF_C),
    CommandSpec::new(
        "ZUNIONSTORE",
        -4,
        W,
        KeySpec::Custom { legacy: (1, 1, 1), find: ops::store_keys },
        G,
        "Add multiple sorted sets and store the resulting sorted set in a new key",
        ops::zunionstore,
    )
    .since("2.0.0")
    .complexity(
        "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M \
         being the number of elements in the resulting sorted set.",
    ),
    CommandSpec::new(
        "ZINTERSTORE",
        -4,
        W,
        KeySpec::Custom { legacy: (1, 1, 1), find: ops::store_keys },
        G,
        "Intersect multiple sorted sets and store the resulting sorted set in a new key",
        ops::zinterstore,
    )
    .since("2.0.0")
    .complexity(INTER_C),
    CommandSpec::new(
        "ZDIFFSTORE",
        -4,
        W,
        KeySpec::Custom { legacy: (1, 1, 1), find: ops::store_keys },
        G,
        "Subtract multiple sorted sets and store the resulting sorted set in a new key",
        ops::zdiffstore,
    )
    .since("6.2.0")
    .complexity(DIFF_C),
    CommandSpec::new(
        "ZINTERCARD",
        -3,
        R,
        KeySpec::Custom { legacy: (0, 0, 0), find: ops::numkeys_at_1 },
        G,
        "Intersect multiple sorted sets and return the cardinality of the result",
        ops::zintercard,
    )
    .since("7.0.0")
    .complexity(
        "O(N*K) worst case with N being the smallest input sorted set, K being the number of \
         input sorted sets.",
    ),
    CommandSpec::new(
        "ZREMRANGEBYRANK",
        4,
        Flags::WRITE,
        K1,
        G,
        "Remove all members in a sorted set within the given indexes",
        range::zremrangebyrank,
    )
    .since("2.0.0")
    .complexity(REM_M),
    CommandSpec::new(
        "ZREMRANGEBYSCORE",
        4,
        Flags::WRITE,
        K1,
        G,
        "Remove all members in a sorted set within the given scores",
        range::zremrangebyscore,
    )
    .since("1.2.0")
    .complexity(REM_M),
    CommandSpec::new(
        "ZREMRANGEBYLEX",
        4,
        Flags::WRITE,
        K1,
        G,
        "Remove all members in a sorted set between the given lexicographical range",
        range::zremrangebylex,
    )
    .since("2.8.9")
    .complexity(REM_M),
    CommandSpec::new(
        "ZSCAN",
        -3,
        R,
        K1,
        G,
        "Incrementally iterate sorted sets elements and associated scores",
        ops::zscan,
    )
    .since("2.8.0")
    .complexity(
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for \
         the cursor to return back to 0. N is the number of elements inside the collection..",
    ),
];

// ---- helpers --------------------------------------------------------------

/// `zset-max-listpack-entries` / `-value`, read once per command.
pub(crate) fn limits(cx: &mut Ctx) -> Limits {
    let c = cx.sess.conf(cx.shared);
    Limits { max_entries: c.zset_max_listpack_entries, max_value: c.zset_max_listpack_value }
}

/// Reports a change of the sorted set at `key` (Redis's event and dirty
/// count); with `removed` the set was emptied and deleted, which Redis
/// reports as `del` after the command's own event.
pub(crate) fn zset_changed(cx: &mut Ctx, key: &[u8], event: &'static str, n: usize, removed: bool) {
    cx.changed(key, Class::ZSET, event, n as u64);
    if removed {
        cx.notify(Class::GENERIC, "del", key);
    }
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
    let (mut added, mut updated, mut processed) = (0usize, 0usize, 0usize);
    let mut last = 0.0;
    // A new key is created (and reported `new`) before the members go in.
    match cx.lookup(key) {
        Some(e) => {
            as_zset(&mut e.value)?;
        }
        None if f.xx => {
            reply_add(out, f, 0, 0, 0, 0.0);
            return Ok(());
        }
        None => {
            let z = ZSet::new_for(rest[1].len(), lim);
            cx.set(key, Value::ZSet(Box::new(z)), NO_EXPIRE);
        }
    }
    let e = cx.lookup(key).ok_or(CmdError::NoSuchKey)?;
    let z = as_zset(&mut e.value)?;
    let mut failed = None;
    for (pair, &score) in rest.chunks(2).zip(&scores) {
        match zset_add(z, pair[1], score, f, lim) {
            Ok(AddOutcome::Added(s)) => {
                added += 1;
                processed += 1;
                last = s;
            }
            Ok(AddOutcome::Updated(s)) => {
                updated += 1;
                processed += 1;
                last = s;
            }
            Ok(AddOutcome::Same(s)) => {
                processed += 1;
                last = s;
            }
            Ok(AddOutcome::Nop) => {}
            Err(err) => {
                failed = Some(err);
                break;
            }
        }
    }
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
    if emptied {
        cx.delete(key);
    }
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
