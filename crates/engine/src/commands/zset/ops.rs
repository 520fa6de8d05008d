//! Pops (ZPOPMIN ZPOPMAX ZMPOP, and [`pop_reply`] for the blocking forms),
//! the algebra (ZUNION ZINTER ZDIFF, their STORE forms, ZINTERCARD),
//! ZRANDMEMBER and ZSCAN.
//!
//! The algebra reads several keys at once through
//! [`Sources`](crate::commands::algebra::Sources), as the set family does.
//! Plain sets are accepted as inputs with every score 1, as Redis does.

use resp::{Proto, ReplyBuf};
use store::types::set::Set;
use store::types::zset::{Limits, ZSet};
use store::types::Str;
use store::{Table, Value};

use super::range::reply_scored;
use super::{as_zset, limits, string2d, zset_changed};
use crate::commands::algebra::{self, Operand, Sources};
use crate::commands::keys::space::{parse_cursor, parse_scan_opts};
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::KeyList;
use crate::subsystems::glob;

// ---- key finders --------------------------------------------------------------

/// `numkeys` at argv[1], then that many keys (ZUNION, ZINTER, ZDIFF,
/// ZINTERCARD, ZMPOP). A bad count names none; the handler rejects it.
pub(crate) fn numkeys_at_1<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    numkeys_at(argv, 1, db, keys);
}

/// The destination at argv[1], `numkeys` at argv[2], then the sources.
pub(super) fn store_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    if let Some(&d) = argv.get(1) {
        keys.push((db, d));
    }
    numkeys_at(argv, 2, db, keys);
}

fn numkeys_at<'a>(argv: &[&'a [u8]], at: usize, db: usize, keys: &mut KeyList<'a>) {
    let Some(n) = argv.get(at).and_then(|a| resp::parse_i64(a)) else { return };
    if n > 0 {
        for &k in argv.iter().skip(at + 1).take(n as usize) {
            keys.push((db, k));
        }
    }
}

// ---- pops ------------------------------------------------------------------

/// How a pop replies (Redis's `genericZpopCommand` arguments).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PopReply {
    /// Pop the highest scores.
    pub max: bool,
    /// Name the key first (BZPOP*, ZMPOP, BZMPOP).
    pub emit_key: bool,
    /// `[member, score]` pairs instead of a flat list.
    pub nested: bool,
    /// A null array, not an empty one, when every key is missing.
    pub nil_when_empty: bool,
}

/// Pops up to `count` elements (`None`: the single-element form) from the
/// first existing sorted set among `keys` and writes the reply. Returns
/// whether a key was found (the blocking commands block when not).
pub(crate) fn pop_reply(
    cx: &mut Ctx,
    keys: &[&[u8]],
    count: Option<usize>,
    how: PopReply,
    out: &mut ReplyBuf,
) -> Result<bool, CmdError> {
    let mut found = None;
    for &k in keys {
        if let Some(e) = cx.lookup(k) {
            as_zset(&mut e.value)?;
            found = Some(k);
            break;
        }
    }
    let Some(key) = found else {
        if how.nil_when_empty {
            out.null_array();
        } else {
            out.array(0);
        }
        return Ok(false);
    };
    if count == Some(0) {
        out.array(0);
        return Ok(true);
    }
    let e = cx.lookup(key).ok_or(CmdError::NoSuchKey)?;
    let z = as_zset(&mut e.value)?;
    let n = count.unwrap_or(1).min(z.len());
    match (how.nested, how.emit_key) {
        (false, false) => out.array(n * 2),
        (true, false) => out.array(n),
        (false, true) => {
            out.array(n * 2 + 1);
            out.bulk(key);
        }
        (true, true) => {
            out.array(2);
            out.bulk(key);
            out.array(n);
        }
    }
    z.pop_with(n, how.max, |m, s| {
        if how.nested {
            out.array(2);
        }
        out.bulk(m);
        out.double(s);
    });
    let emptied = z.is_empty();
    let name: &'static [u8] = if how.max { b"ZPOPMAX" } else { b"ZPOPMIN" };
    zset_changed(cx, key, if how.max { "zpopmax" } else { "zpopmin" }, n, emptied);
    // The blocking pops and ZMPOP go out as ZPOPMIN/ZPOPMAX.
    if how.emit_key && how.nested {
        if cx.propagating() {
            let mut c = resp::IntBuf::new();
            cx.propagate_as(&[name, key, c.format(n as i64)]);
        }
    } else if how.emit_key {
        cx.propagate_as(&[name, key]);
    }
    Ok(true)
}

pub(super) fn zpopmin(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zpop_with(cx, args, false, out)
}

pub(super) fn zpopmax(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    zpop_with(cx, args, true, out)
}

fn zpop_with(cx: &mut Ctx, args: &mut Args, max: bool, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    if args.remaining() > 1 {
        return Err(CmdError::Syntax);
    }
    let count = match args.next() {
        None => None,
        Some(a) => match resp::parse_i64(a) {
            Some(c) if c >= 0 => Some(c as usize),
            _ => return Err(CmdError::err("value is out of range, must be positive")),
        },
    };
    let nested = out.proto == Proto::Resp3 && count.is_some();
    let how = PopReply { max, emit_key: false, nested, nil_when_empty: false };
    pop_reply(cx, &[key], count, how, out)?;
    Ok(())
}

/// Parses ZMPOP/BZMPOP's `numkeys key.. MIN|MAX [COUNT n]` from `args`
/// (positioned at numkeys): the keys, MAX?, and the count.
pub(crate) fn parse_mpop<'a>(
    args: &mut Args<'a>,
) -> Result<(&'a [&'a [u8]], bool, usize), CmdError> {
    let numkeys = match resp::parse_i64(args.req()?) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    let rest = args.rest();
    if numkeys >= rest.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let (keys, opts) = rest.split_at(numkeys as usize);
    let max = if eq_ic(opts[0], "MIN") {
        false
    } else if eq_ic(opts[0], "MAX") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut i = 1;
    while i < opts.len() {
        if count.is_none() && eq_ic(opts[i], "COUNT") && i + 1 < opts.len() {
            count = match resp::parse_i64(opts[i + 1]) {
                Some(c) if c >= 1 => Some(c as usize),
                _ => return Err(CmdError::err("count should be greater than 0")),
            };
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((keys, max, count.unwrap_or(1)))
}

pub(super) fn zmpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (keys, max, count) = parse_mpop(args)?;
    let how = PopReply { max, emit_key: true, nested: true, nil_when_empty: true };
    pop_reply(cx, keys, Some(count), how, out)?;
    Ok(())
}

// ---- ZRANDMEMBER ---------------------------------------------------------------

/// More than this fraction of the set asked for: shuffle a copy of all
/// ranks instead of drawing (Redis's ZRANDMEMBER_SUB_STRATEGY_MUL).
const SUB_STRATEGY_MUL: usize = 3;

pub(super) fn zrandmember(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    if args.is_empty() {
        let shared = cx.shared;
        let Some(e) = cx.lookup_read(key) else {
            out.null();
            return Ok(());
        };
        let z = as_zset(&mut e.value)?;
        let r = (shared.store.rand() % z.len().max(1) as u64) as usize;
        match z.get(r) {
            Some((m, _)) => out.bulk(&m),
            None => out.null(),
        }
        return Ok(());
    }
    let l = parse_i64(args.req()?)?;
    if l == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        ));
    }
    let withscores = match args.next() {
        None => false,
        Some(a) if eq_ic(a, "WITHSCORES") && args.is_empty() => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return Err(CmdError::err("value is out of range"));
    }
    let resp3 = out.proto == Proto::Resp3;
    let shared = cx.shared;
    let Some(e) = cx.lookup_read(key) else {
        out.array(0);
        return Ok(());
    };
    let z = as_zset(&mut e.value)?;
    let (count, uniq) = (l.unsigned_abs() as usize, l >= 0);
    let size = z.len();
    if count == 0 || size == 0 {
        out.array(0);
        return Ok(());
    }
    let rand = || shared.store.rand();
    let head = |out: &mut ReplyBuf, n: usize| {
        out.array(if withscores && !resp3 { n * 2 } else { n });
    };
    let item = |out: &mut ReplyBuf, (m, s): (Str<'_>, f64)| {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(&m);
        if withscores {
            out.double(s);
        }
    };
    if !uniq || count == 1 {
        head(out, count);
        // The count sizes only the reply, which the output limit cuts.
        for _ in 0..count {
            if out.is_over() {
                break;
            }
            if let Some(el) = z.get((rand() % size as u64) as usize) {
                item(out, el);
            }
        }
        return Ok(());
    }
    if count >= size {
        // The whole set, highest first, as Redis 7.0 replies it.
        head(out, size);
        for el in z.range(0, size, true) {
            item(out, el);
        }
        return Ok(());
    }
    head(out, count);
    if count * SUB_STRATEGY_MUL > size {
        // Most of the set: a partial shuffle of all ranks.
        let mut ranks: Vec<usize> = (0..size).collect();
        for i in 0..count {
            let j = i + (rand() % (size - i) as u64) as usize;
            ranks.swap(i, j);
        }
        for &r in &ranks[..count] {
            if let Some(el) = z.get(r) {
                item(out, el);
            }
        }
    } else {
        // A small part: draw ranks until `count` distinct ones are found.
        let mut seen: Table<()> = Table::new();
        let mut picked = Vec::with_capacity(count);
        while picked.len() < count {
            let r = (rand() % size as u64) as usize;
            if let Some(el) = z.get(r) {
                if !seen.contains_key(&el.0) {
                    seen.insert(&el.0, ());
                    picked.push(el);
                }
            }
        }
        for el in picked {
            item(out, el);
        }
    }
    Ok(())
}

// ---- ZUNION ZINTER ZDIFF and their STORE forms, ZINTERCARD ----------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`: an inf + -inf sum counts as 0.
#[inline]
fn aggregate(target: &mut f64, v: f64, agg: Agg) {
    match agg {
        Agg::Sum => {
            *target += v;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Agg::Min => {
            if v < *target {
                *target = v;
            }
        }
        Agg::Max => {
            if v > *target {
                *target = v;
            }
        }
    }
}

/// One input of the algebra: a sorted set, or a set (every score 1).
enum Input {
    Z(ZSet),
    S(Set),
}

impl Operand for Input {
    fn take(v: Value) -> Result<Input, Value> {
        match v {
            Value::ZSet(z) => Ok(Input::Z(z)),
            Value::Set(s) => Ok(Input::S(s)),
            other => Err(other),
        }
    }

    fn into_value(self) -> Value {
        match self {
            Input::Z(z) => Value::ZSet(z),
            Input::S(s) => Value::Set(s),
        }
    }

    fn len(&self) -> usize {
        self.view().len()
    }
}

impl Input {
    fn view(&self) -> In<'_> {
        match self {
            Input::Z(z) => In::Z(z),
            Input::S(s) => In::S(s),
        }
    }
}

#[derive(Clone, Copy)]
enum In<'a> {
    Z(&'a ZSet),
    S(&'a Set),
}

impl In<'_> {
    fn len(self) -> usize {
        match self {
            In::Z(z) => z.len(),
            In::S(s) => s.len(),
        }
    }

    /// The score of `m` (1 for a set member).
    fn find(self, m: &[u8]) -> Option<f64> {
        match self {
            In::Z(z) => z.score(m),
            In::S(s) => s.contains(m).then_some(1.0),
        }
    }

    /// Visits every element until `f` returns false.
    fn each(self, mut f: impl FnMut(&[u8], f64) -> bool) {
        match self {
            In::Z(z) => {
                for (m, s) in z.iter() {
                    if !f(&m, s) {
                        return;
                    }
                }
            }
            In::S(s) => {
                let mut buf = [0u8; 24];
                for m in s.iter() {
                    if !f(m.bytes(&mut buf), 1.0) {
                        return;
                    }
                }
            }
        }
    }
}

type Srcs<'k> = Sources<'k, Input>;

fn get<'a>(srcs: &'a Srcs<'_>, j: usize) -> Option<In<'a>> {
    srcs.get(j).map(Input::view)
}

pub(super) fn zunion(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    setop(cx, args, None, Op::Union, false, out)
}

pub(super) fn zinter(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    setop(cx, args, None, Op::Inter, false, out)
}

pub(super) fn zdiff(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    setop(cx, args, None, Op::Diff, false, out)
}

pub(super) fn zintercard(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    setop(cx, args, None, Op::Inter, true, out)
}

pub(super) fn zunionstore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    setop(cx, args, Some(dst), Op::Union, false, out)
}

pub(super) fn zinterstore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    setop(cx, args, Some(dst), Op::Inter, false, out)
}

pub(super) fn zdiffstore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    setop(cx, args, Some(dst), Op::Diff, false, out)
}

struct SetOpts {
    weights: Vec<f64>,
    agg: Agg,
    withscores: bool,
    limit: usize,
}

fn parse_setop_opts(
    opts: &[&[u8]],
    n: usize,
    op: Op,
    store: bool,
    card: bool,
) -> Result<SetOpts, CmdError> {
    let mut o = SetOpts { weights: vec![1.0; n], agg: Agg::Sum, withscores: false, limit: 0 };
    let mut j = 0;
    while j < opts.len() {
        let remaining = opts.len() - j;
        let a = opts[j];
        if op != Op::Diff && !card && remaining > n && eq_ic(a, "WEIGHTS") {
            for i in 0..n {
                o.weights[i] = string2d(opts[j + 1 + i])
                    .ok_or_else(|| CmdError::err("weight value is not a float"))?;
            }
            j += n + 1;
        } else if op != Op::Diff && !card && remaining >= 2 && eq_ic(a, "AGGREGATE") {
            let v = opts[j + 1];
            o.agg = if eq_ic(v, "SUM") {
                Agg::Sum
            } else if eq_ic(v, "MIN") {
                Agg::Min
            } else if eq_ic(v, "MAX") {
                Agg::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && !card && eq_ic(a, "WITHSCORES") {
            o.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && eq_ic(a, "LIMIT") {
            o.limit = match resp::parse_i64(opts[j + 1]) {
                Some(l) if l >= 0 => l as usize,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

/// Redis 7.0's `zunionInterDiffGenericCommand`; `args` is at numkeys.
fn setop(
    cx: &mut Ctx,
    args: &mut Args,
    dst: Option<&[u8]>,
    op: Op,
    card: bool,
    out: &mut ReplyBuf,
) -> CmdResult {
    let n = parse_i64(args.req()?)?;
    if n < 1 {
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{}' command",
            cx.spec.name.to_ascii_lowercase()
        )));
    }
    let rest = args.rest();
    if n as u64 > rest.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let (keys, opts) = rest.split_at(n as usize);
    let n = n as usize;
    let lim = limits(cx);
    let srcs = Srcs::gather(cx, keys)?;
    let o = match parse_setop_opts(opts, n, op, dst.is_some(), card) {
        Ok(o) => o,
        Err(e) => {
            srcs.restore(cx);
            return Err(e);
        }
    };
    // The result is built as Redis builds it, a skiplist, and turned into
    // a listpack when stored if it is small (its longest member decides).
    let unbounded = Limits { max_entries: usize::MAX, max_value: usize::MAX };
    let mut r = ZSet::new_skiplist();
    let mut maxlen = 0usize;
    let mut cardinality = 0usize;
    match op {
        Op::Inter => {
            let order = srcs.by_size();
            let first = order[0];
            if let Some(src0) = get(&srcs, first).filter(|s| s.len() > 0) {
                src0.each(|m, s0| {
                    let mut score = o.weights[first] * s0;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    for &j in &order[1..] {
                        let v = if srcs.origin(j) == srcs.origin(first) {
                            Some(s0)
                        } else {
                            get(&srcs, j).and_then(|s| s.find(m))
                        };
                        match v {
                            Some(v) => aggregate(&mut score, v * o.weights[j], o.agg),
                            None => return true,
                        }
                    }
                    if card {
                        cardinality += 1;
                        return !(o.limit > 0 && cardinality >= o.limit);
                    }
                    maxlen = maxlen.max(m.len());
                    r.set(m, score, unbounded);
                    true
                });
            }
        }
        Op::Union => {
            let order = srcs.by_size();
            let mut acc: Table<f64> = Table::new();
            for &j in &order {
                let Some(src) = get(&srcs, j) else { continue };
                src.each(|m, s| {
                    let mut score = o.weights[j] * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, score, o.agg),
                        None => {
                            maxlen = maxlen.max(m.len());
                            acc.insert(m, score);
                        }
                    }
                    true
                });
            }
            for (m, &s) in acc.iter() {
                r.set(m, s, unbounded);
            }
        }
        Op::Diff => diff(&srcs, &mut r, &mut maxlen),
    }
    srcs.restore(cx);
    if card {
        out.int(cardinality as i64);
    } else if let Some(dst) = dst {
        let len = r.len();
        r.shrink_if_small(maxlen, lim);
        let event = match op {
            Op::Union => "zunionstore",
            Op::Inter => "zinterstore",
            Op::Diff => "zdiffstore",
        };
        algebra::store_result(cx, dst, Value::ZSet(r), len, Class::ZSET, event, out);
    } else {
        let found: Vec<(Str<'_>, f64)> = r.iter().collect();
        reply_scored(out, &found, o.withscores, out.proto == Proto::Resp3);
    }
    Ok(())
}

/// Redis's `zdiff`, with its choice between its two algorithms (which
/// decides the longest member seen, and so a stored result's encoding).
fn diff(srcs: &Srcs<'_>, r: &mut ZSet, maxlen: &mut usize) {
    let unbounded = Limits { max_entries: usize::MAX, max_value: usize::MAX };
    let Some(first) = get(srcs, 0).filter(|s| s.len() > 0) else { return };
    let n = srcs.count();
    let (mut one, mut two) = (0usize, 0usize);
    for j in 0..n {
        if j > 0 && srcs.origin(j) == 0 {
            return;
        }
        one += first.len();
        two += srcs.len_of(j);
    }
    if one / 2 <= two {
        // Algorithm 1: keep each element of the first set found in no other.
        let mut others: Vec<usize> = (1..n).collect();
        others.sort_by_key(|&j| std::cmp::Reverse(srcs.len_of(j)));
        first.each(|m, s| {
            if !others.iter().any(|&j| get(srcs, j).is_some_and(|o| o.find(m).is_some())) {
                *maxlen = (*maxlen).max(m.len());
                r.set(m, s, unbounded);
            }
            true
        });
    } else {
        // Algorithm 2: copy the first set, then remove every other's elements.
        first.each(|m, s| {
            *maxlen = (*maxlen).max(m.len());
            r.set(m, s, unbounded);
            true
        });
        for j in 1..n {
            if r.is_empty() {
                break;
            }
            if let Some(o) = get(srcs, j) {
                o.each(|m, _| {
                    r.remove(m);
                    true
                });
            }
        }
    }
}

// ---- ZSCAN ----------------------------------------------------------------------

pub(super) fn zscan(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let cursor = parse_cursor(args.req()?)?;
    // As SSCAN: a missing key answers an empty scan whatever follows.
    let opts = parse_scan_opts(args, false);
    let Some(e) = cx.lookup_read(key) else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let z = as_zset(&mut e.value)?;
    let opts = opts?;
    let mut found: Vec<(Str<'_>, f64)> = Vec::new();
    let mut cursor = cursor;
    let mut budget = opts.count.saturating_mul(10);
    loop {
        cursor = z.scan(cursor, |m, s| found.push((m, s)));
        // Redis counts members and scores alike against COUNT.
        if cursor == 0 || budget == 0 || (found.len() * 2) as i64 >= opts.count {
            break;
        }
        budget -= 1;
    }
    if let Some(p) = opts.pattern {
        found.retain(|(m, _)| glob::matches(p, m, false));
    }
    out.array(2);
    out.bulk_int(cursor as i64);
    out.array(found.len() * 2);
    let mut buf = [0u8; 64];
    for (m, s) in found {
        out.bulk(&m);
        let n = resp::fmt_double(s, &mut buf);
        out.bulk(&buf[..n]);
    }
    Ok(())
}
