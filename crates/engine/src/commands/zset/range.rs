//! Ranges: ZRANGE in all its forms (by rank, score and lex, REV, LIMIT,
//! WITHSCORES, ZRANGESTORE and the older ZREV*/Z*BY* commands), ZCOUNT,
//! ZLEXCOUNT and the ZREMRANGEBY* removals.
//!
//! Score and lex ranges are selected as Redis walks them: from the first
//! element at or above `min` forward while at or below `max` (reverse:
//! from the last at or below `max` backward while at or above `min`), so
//! a lex range over mixed scores picks what Redis picks.

use resp::{Proto, ReplyBuf};
use store::types::zset::{score_gte_min, score_lte_max, LexBound as Lex, ZSet};
use store::types::Str;
use store::Value;

use super::{as_zset, c_strtod, limits, zset_changed};
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};

/// A parsed score or lex range.
#[derive(Clone, Copy)]
enum Sel<'a> {
    Score { min: f64, minex: bool, max: f64, maxex: bool },
    Lex(Lex<'a>, Lex<'a>),
}

impl<'a> Sel<'a> {
    #[inline]
    fn gte_min(&self, s: f64, m: &[u8]) -> bool {
        match *self {
            Sel::Score { min, minex, .. } => score_gte_min(s, min, minex),
            Sel::Lex(min, _) => min.below_or_at(m),
        }
    }

    #[inline]
    fn lte_max(&self, s: f64, m: &[u8]) -> bool {
        match *self {
            Sel::Score { max, maxex, .. } => score_lte_max(s, max, maxex),
            Sel::Lex(_, max) => max.above_or_at(m),
        }
    }

    /// Whether the range can hold anything at all, as Redis checks before
    /// it walks a lex range (`zzlIsInLexRange`, `zslIsInLexRange`): the
    /// last member at or above `min` and the first at or below `max`.
    /// Over equal scores that is the walk's own answer; over mixed ones
    /// it can refuse a range the walk would find.
    fn reachable(&self, z: &ZSet) -> bool {
        if let Sel::Lex(..) = self {
            let ends = z.get(z.len().saturating_sub(1)).zip(z.get(0));
            let Some(((last, ls), (first, fs))) = ends else { return false };
            return self.gte_min(ls, &last) && self.lte_max(fs, &first);
        }
        true
    }

    /// Ascending rank of the first element in range and how many follow it
    /// in range.
    fn span(&self, z: &ZSet) -> (usize, usize) {
        if !self.reachable(z) {
            return (0, 0);
        }
        let lo = z.count_below(|s, m| !self.gte_min(s, m));
        let n = z.range(lo, usize::MAX, false).take_while(|(m, s)| self.lte_max(*s, m)).count();
        (lo, n)
    }

    /// Elements in range, in the asked direction.
    fn walk<'z>(self, z: &'z ZSet, rev: bool) -> Box<dyn Iterator<Item = (Str<'z>, f64)> + 'z>
    where
        'a: 'z,
    {
        if !self.reachable(z) {
            return Box::new(std::iter::empty());
        }
        if rev {
            let hi = if matches!(self, Sel::Lex(..)) && z.encoding() == "listpack" {
                // Redis's `zzlLastInLexRange` looks from the tail for the
                // last member at or below `max`: over mixed scores that is
                // not where the members at or below it from the head end.
                z.len()
                    - z.range(0, z.len(), true).take_while(|(m, s)| !self.lte_max(*s, m)).count()
            } else {
                z.count_below(|s, m| self.lte_max(s, m))
            };
            Box::new(z.range(0, hi, true).take_while(move |(m, s)| self.gte_min(*s, m)))
        } else {
            let lo = z.count_below(|s, m| !self.gte_min(s, m));
            Box::new(z.range(lo, usize::MAX, false).take_while(move |(m, s)| self.lte_max(*s, m)))
        }
    }
}

/// One end of a score range (Redis's `zslParseRange`: `strtod` must stop
/// at the end or at a NUL; `(` makes it exclusive; NaN is refused).
fn score_item(a: &[u8]) -> Option<(f64, bool)> {
    let (ex, a) = match a.first() {
        Some(b'(') => (true, &a[1..]),
        _ => (false, a),
    };
    let (v, used, _) = c_strtod(a);
    if (used < a.len() && a[used] != 0) || v.is_nan() {
        return None;
    }
    Some((v, ex))
}

fn parse_score_range<'a>(min: &[u8], max: &[u8]) -> Result<Sel<'a>, CmdError> {
    let bad = || CmdError::err("min or max is not a float");
    let (min, minex) = score_item(min).ok_or_else(bad)?;
    let (max, maxex) = score_item(max).ok_or_else(bad)?;
    Ok(Sel::Score { min, minex, max, maxex })
}

/// Redis's `zslParseLexRangeItem`.
fn lex_item(a: &[u8]) -> Option<Lex<'_>> {
    let alone = a.len() == 1 || a.get(1) == Some(&0);
    match a.first()? {
        b'+' if alone => Some(Lex::Max),
        b'-' if alone => Some(Lex::Min),
        b'(' => Some(Lex::Excl(&a[1..])),
        b'[' => Some(Lex::Incl(&a[1..])),
        _ => None,
    }
}

fn parse_lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Result<Sel<'a>, CmdError> {
    let bad = || CmdError::err("min or max not valid string range item");
    Ok(Sel::Lex(lex_item(min).ok_or_else(bad)?, lex_item(max).ok_or_else(bad)?))
}

// ---- ZRANGE and friends ----------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

pub(super) fn zrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zrange_generic(cx, args, None, Kind::Auto, None, out)
}

pub(super) fn zrangestore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    zrange_generic(cx, args, Some(dst), Kind::Auto, None, out)
}

pub(super) fn zrevrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zrange_generic(cx, args, None, Kind::Rank, Some(true), out)
}

pub(super) fn zrangebyscore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zrange_generic(cx, args, None, Kind::Score, Some(false), out)
}

pub(super) fn zrevrangebyscore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zrange_generic(cx, args, None, Kind::Score, Some(true), out)
}

pub(super) fn zrangebylex(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zrange_generic(cx, args, None, Kind::Lex, Some(false), out)
}

pub(super) fn zrevrangebylex(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zrange_generic(cx, args, None, Kind::Lex, Some(true), out)
}

/// Ascending ranks `lo..hi` of a rank range `start..=end` (negative counts
/// from the end; `rev` counts from the top), or `None` when empty.
fn rank_span(len: usize, start: i64, end: i64, rev: bool) -> Option<(usize, usize)> {
    let llen = len as i64;
    let mut start = if start < 0 { llen + start } else { start };
    let mut end = if end < 0 { llen + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    let (start, end) = (start as usize, end as usize);
    Some(if rev { (len - 1 - end, len - start) } else { (start, end + 1) })
}

/// Redis 7.0's `zrangeGenericCommand`.
fn zrange_generic(
    cx: &mut Ctx,
    args: &mut Args,
    store: Option<&[u8]>,
    mut kind: Kind,
    mut rev: Option<bool>,
    out: &mut ReplyBuf,
) -> CmdResult {
    let key = args.key()?;
    let a1 = args.req()?;
    let a2 = args.req()?;
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    while let Some(o) = args.next() {
        if store.is_none() && eq_ic(o, "WITHSCORES") {
            withscores = true;
        } else if eq_ic(o, "LIMIT") && args.remaining() >= 2 {
            offset = parse_i64(args.req()?)?;
            limit = parse_i64(args.req()?)?;
        } else if rev.is_none() && eq_ic(o, "REV") {
            rev = Some(true);
        } else if kind == Kind::Auto && eq_ic(o, "BYLEX") {
            kind = Kind::Lex;
        } else if kind == Kind::Auto && eq_ic(o, "BYSCORE") {
            kind = Kind::Score;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let rev = rev.unwrap_or(false);
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    if limit != -1 && kind == Kind::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == Kind::Lex {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // Score and lex ranges are given as max, min when reversed.
    let (lo_a, hi_a) = if rev && kind != Kind::Rank { (a2, a1) } else { (a1, a2) };
    let mut ranks = (0i64, 0i64);
    let mut sel = None;
    match kind {
        Kind::Score => sel = Some(parse_score_range(lo_a, hi_a)?),
        Kind::Lex => sel = Some(parse_lex_range(lo_a, hi_a)?),
        _ => ranks = (parse_i64(lo_a)?, parse_i64(hi_a)?),
    }
    let lim = limits(cx);
    let resp3 = out.proto == Proto::Resp3;
    let Some(e) = cx.lookup_read(key) else {
        match store {
            Some(dst) => store_range(cx, dst, None, out),
            None => out.array(0),
        }
        return Ok(());
    };
    let z = as_zset(&mut e.value)?;
    let mut found: Vec<(Str<'_>, f64)> = Vec::new();
    match sel {
        None => {
            if let Some((lo, hi)) = rank_span(z.len(), ranks.0, ranks.1, rev) {
                found.extend(z.range(lo, hi, rev));
            }
        }
        Some(sel) => {
            // A negative offset skips everything, as Redis's `offset--` loop does.
            let empty = offset < 0 || (offset > 0 && offset as u64 >= z.len() as u64);
            if !empty {
                let it = sel.walk(z, rev).skip(offset as usize);
                if limit < 0 {
                    found.extend(it);
                } else {
                    found.extend(it.take(limit as usize));
                }
            }
        }
    }
    if let Some(dst) = store {
        let mut r = ZSet::new_listpack();
        for (m, s) in &found {
            r.set(m, *s, lim);
        }
        drop(found);
        store_range(cx, dst, Some(r), out);
        return Ok(());
    }
    reply_scored(out, &found, withscores, resp3);
    Ok(())
}

/// Writes elements as Redis's range replies do: flat pairs in RESP2,
/// `[member, score]` pairs in RESP3, with scores.
pub(crate) fn reply_scored<M: AsRef<[u8]>>(
    out: &mut ReplyBuf,
    found: &[(M, f64)],
    withscores: bool,
    resp3: bool,
) {
    if withscores && !resp3 {
        out.array(found.len() * 2);
    } else {
        out.array(found.len());
    }
    for (m, s) in found {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(m.as_ref());
        if withscores {
            out.double(*s);
        }
    }
}

/// ZRANGESTORE's result: stored (replacing `dst`) when non-empty, else
/// `dst` is deleted; replies with the count.
fn store_range(cx: &mut Ctx, dst: &[u8], r: Option<ZSet>, out: &mut ReplyBuf) {
    let r = r.filter(|r| !r.is_empty());
    let n = r.as_ref().map_or(0, ZSet::len);
    cx.store_or_delete(dst, r.map(Value::ZSet), Class::ZSET, "zrangestore", 1);
    out.int(n as i64);
}

// ---- ZCOUNT ZLEXCOUNT --------------------------------------------------------

pub(super) fn zcount(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let sel = parse_score_range(args.req()?, args.req()?)?;
    count_with(cx, key, sel, out)
}

pub(super) fn zlexcount(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let (a, b) = (args.req()?, args.req()?);
    let sel = parse_lex_range(a, b)?;
    count_with(cx, key, sel, out)
}

fn count_with(cx: &mut Ctx, key: &[u8], sel: Sel<'_>, out: &mut ReplyBuf) -> CmdResult {
    let n = match cx.lookup_read(key) {
        Some(e) => {
            let z = as_zset(&mut e.value)?;
            if z.encoding() == "listpack" {
                // Redis walks a listpack from the first element in range.
                sel.span(z).1
            } else {
                // And takes the difference of two ranks in a skiplist.
                let (lo, hi) = match sel {
                    Sel::Score { min, minex, max, maxex } => z.score_span(min, minex, max, maxex),
                    Sel::Lex(..) if !sel.reachable(z) => (0, 0),
                    Sel::Lex(min, max) => z.lex_span(min, max),
                };
                hi.saturating_sub(lo)
            }
        }
        None => 0,
    };
    out.int(n as i64);
    Ok(())
}

// ---- ZREMRANGEBYRANK ZREMRANGEBYSCORE ZREMRANGEBYLEX ---------------------------

pub(super) fn zremrangebyrank(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let start = parse_i64(args.req()?)?;
    let end = parse_i64(args.req()?)?;
    remrange_with(cx, key, Err((start, end)), "zremrangebyrank", out)
}

pub(super) fn zremrangebyscore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let sel = parse_score_range(args.req()?, args.req()?)?;
    remrange_with(cx, key, Ok(sel), "zremrangebyscore", out)
}

pub(super) fn zremrangebylex(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let (a, b) = (args.req()?, args.req()?);
    let sel = parse_lex_range(a, b)?;
    remrange_with(cx, key, Ok(sel), "zremrangebylex", out)
}

/// Redis's `zremrangeGenericCommand`: a score/lex range, or (start, end) ranks.
fn remrange_with(
    cx: &mut Ctx,
    key: &[u8],
    what: Result<Sel<'_>, (i64, i64)>,
    event: &'static str,
    out: &mut ReplyBuf,
) -> CmdResult {
    let Some(e) = cx.lookup(key) else {
        out.int(0);
        return Ok(());
    };
    let z = as_zset(&mut e.value)?;
    let (lo, n) = match what {
        Ok(sel) => sel.span(z),
        Err((start, end)) => match rank_span(z.len(), start, end, false) {
            Some((lo, hi)) => (lo, hi - lo),
            None => (0, 0),
        },
    };
    let n = z.remove_range(lo, lo + n);
    let emptied = z.is_empty();
    if n > 0 {
        zset_changed(cx, key, event, n, emptied);
    }
    out.int(n as i64);
    Ok(())
}
