//! SORT and SORT_RO (Redis 7.0's `generic` group), as `sort.c` behaves:
//! numeric or ALPHA order, DESC, LIMIT, weights from other keys (`BY`),
//! values from other keys (`GET`), and `STORE` into a list.
//!
//! # Locking
//!
//! `BY` and `GET` patterns name keys that only the sorted data knows, so
//! they cannot be locked from the arguments. The commands declare
//! [`KeySpec::CustomOrDb`]: when any option argument contains a `*` (a
//! superset of the patterns that read keys; `#` and star-less patterns
//! read nothing) the whole selected database is locked; otherwise only the
//! sorted key and the `STORE` destination are. The reported keys
//! (`COMMAND GETKEYS`, `COMMAND INFO`) are Redis's: the sorted key plus,
//! for SORT, the last `STORE` destination found by `sortGetKeys`' scan.
//!
//! # Ordering
//!
//! The elements are copied into one buffer first (the lookups need the
//! keyspace), then sorted with a stable sort: glibc's `qsort` is a merge
//! sort, which keeps ties (ALPHA weights that are equal or missing) in
//! load order. Redis's partial sort for `BY` + `LIMIT` is unstable; only
//! such ties can differ.

use resp::ReplyBuf;
use store::types::set::Member;
use store::types::{List, ZSet};
use store::Value;

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, KeyList, Lock};

pub const COMMANDS: &[Command] = &[
    Command::redis("SORT", sort)
        .lock(Lock::CustomOrDb { find: sort_keys, whole_db: reads_patterns }),
    Command::redis("SORT_RO", sort_ro)
        .lock(Lock::CustomOrDb { find: sort_ro_keys, whole_db: reads_patterns }),
];

// ---- keys -----------------------------------------------------------------

/// Redis's `sortGetKeys`: the sorted key, then the last `STORE` target,
/// skipping the arguments of LIMIT, GET and BY as it does.
fn sort_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    let Some(&key) = argv.get(1) else { return };
    keys.push((db, key));
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let a = argv[i];
        if eq_ic(a, "LIMIT") {
            i += 2;
        } else if eq_ic(a, "GET") || eq_ic(a, "BY") {
            i += 1;
        } else if eq_ic(a, "STORE") && i + 1 < argv.len() {
            store = Some(argv[i + 1]);
        }
        i += 1;
    }
    if let Some(s) = store {
        keys.push((db, s));
    }
}

/// SORT_RO reports only its first key, as its key specs say.
fn sort_ro_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    if let Some(&key) = argv.get(1) {
        keys.push((db, key));
    }
}

/// Whether the options may name other keys through a pattern.
fn reads_patterns(argv: &[&[u8]]) -> bool {
    argv.iter().skip(2).any(|a| a.contains(&b'*'))
}

// ---- options --------------------------------------------------------------

/// Parsed options, in Redis's variable names where they help.
struct Opts<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a [u8]>,
    by: Option<Pattern<'a>>,
    /// `BY` without a `*`: keep the source's order.
    dontsort: bool,
    gets: Vec<Pattern<'a>>,
}

/// Parses the options in order; the first bad one decides the error.
fn parse_opts<'a>(
    args: &mut Args<'a>,
    readonly: bool,
    full_access: bool,
) -> Result<Opts<'a>, CmdError> {
    let denied = |opt: &str| {
        CmdError::Msg(
            format!("ERR {opt} option of SORT denied due to insufficient ACL permissions.").into(),
        )
    };
    let mut o = Opts {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    while let Some(a) = args.next() {
        let left = args.remaining();
        if eq_ic(a, "ASC") {
            o.desc = false;
        } else if eq_ic(a, "DESC") {
            o.desc = true;
        } else if eq_ic(a, "ALPHA") {
            o.alpha = true;
        } else if eq_ic(a, "LIMIT") && left >= 2 {
            o.limit_start = parse_i64(args.req()?)?;
            o.limit_count = parse_i64(args.req()?)?;
        } else if !readonly && eq_ic(a, "STORE") && left >= 1 {
            o.store = Some(args.req()?);
        } else if eq_ic(a, "BY") && left >= 1 {
            let p = args.req()?;
            // Tested as a C string; a later BY with a `*` does not undo it.
            if !cstr(p).contains(&b'*') {
                o.dontsort = true;
            } else if !full_access {
                return Err(denied("BY"));
            }
            o.by = Some(Pattern::compile(p));
        } else if eq_ic(a, "GET") && left >= 1 {
            if !full_access {
                return Err(denied("GET"));
            }
            o.gets.push(Pattern::compile(args.req()?));
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

/// A BY or GET pattern, split once (Redis's `lookupKeyByPattern`): the
/// first `*` is replaced by the element, and a non-empty `->field` after
/// it reads a hash field instead of a string.
#[derive(Clone, Copy)]
enum Pattern<'a> {
    /// `#`: the element itself.
    Elem,
    /// No `*`: names no key, always missing.
    Never,
    Key {
        pre: &'a [u8],
        post: &'a [u8],
        field: Option<&'a [u8]>,
    },
}

impl<'a> Pattern<'a> {
    fn compile(p: &'a [u8]) -> Pattern<'a> {
        // The C code reads the pattern as a C string for `#`, `*` and
        // `->`, but copies the prefix, postfix and field by length.
        if p.first() == Some(&b'#') && p.get(1).is_none_or(|&c| c == 0) {
            return Pattern::Elem;
        }
        let c = cstr(p);
        let Some(star) = c.iter().position(|&b| b == b'*') else {
            return Pattern::Never;
        };
        let arrow = c[star + 1..]
            .windows(2)
            .position(|w| w == b"->")
            .map(|i| star + 1 + i)
            .filter(|&f| p.get(f + 2).is_some_and(|&b| b != 0));
        match arrow {
            Some(f) => {
                Pattern::Key { pre: &p[..star], post: &p[star + 1..f], field: Some(&p[f + 2..]) }
            }
            None => Pattern::Key { pre: &p[..star], post: &p[star + 1..], field: None },
        }
    }
}

/// The bytes before the first NUL (how C string functions see them).
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// Calls `f` with the value `pat` names for `elem` (`None` when the key
/// is missing or of the wrong type, or the field is missing). Looked up
/// as a read (lazy expiry, hit/miss counters), as Redis does.
fn by_pattern<R>(
    cx: &mut Ctx,
    pat: Pattern<'_>,
    elem: &[u8],
    key: &mut Vec<u8>,
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> R {
    let (pre, post, field) = match pat {
        Pattern::Elem => return f(Some(elem)),
        Pattern::Never => return f(None),
        Pattern::Key { pre, post, field } => (pre, post, field),
    };
    key.clear();
    key.extend_from_slice(pre);
    key.extend_from_slice(elem);
    key.extend_from_slice(post);
    let Some(e) = cx.lookup_read(key) else { return f(None) };
    match (field, &e.value) {
        (Some(field), Value::Hash(h)) => f(h.get(field).as_deref()),
        (None, v) => {
            let mut buf = store::StrBuf::new();
            f(v.as_bytes(&mut buf))
        }
        _ => f(None),
    }
}

// ---- the sort vector --------------------------------------------------------

/// One element: where its bytes are in [`Vector::bytes`], its numeric
/// weight, and where its ALPHA weight is in [`Vector::weights`].
struct Item {
    at: usize,
    len: usize,
    score: f64,
    by: Option<(usize, usize)>,
}

/// The elements to sort, copied out of the source so that the weight and
/// GET lookups may use the keyspace (two allocations, not one per element).
#[derive(Default)]
struct Vector {
    bytes: Vec<u8>,
    weights: Vec<u8>,
    items: Vec<Item>,
}

impl Vector {
    fn push(&mut self, b: &[u8]) {
        self.items.push(Item { at: self.bytes.len(), len: b.len(), score: 0.0, by: None });
        self.bytes.extend_from_slice(b);
    }

    fn push_member(&mut self, m: Member<'_>) {
        let mut buf = [0u8; 24];
        self.push(m.bytes(&mut buf));
    }

    fn elem(&self, i: usize) -> &[u8] {
        let it = &self.items[i];
        &self.bytes[it.at..it.at + it.len]
    }
}

/// What is being sorted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// Number of members of a zset to sort.
fn zset_len(z: &ZSet) -> usize {
    z.len()
}

/// Loads a zset's members into `v`: with `range = Some((start, count))`
/// (BY nosort) the `count` members from rank `start` in the zset's order
/// (counted from the highest rank when `desc`, and walked downwards);
/// otherwise all of them, in any order (they are sorted afterwards). A
/// zset sorts like a set of its members, except that BY nosort keeps its
/// own order.
fn load_zset(z: &ZSet, range: Option<(usize, usize)>, desc: bool, v: &mut Vector) {
    match range {
        Some((start, n)) if desc => {
            let hi = z.len().saturating_sub(start);
            z.range(hi.saturating_sub(n), hi, true).for_each(|(m, _)| v.push(&m));
        }
        Some((start, n)) => z.range(start, start + n, false).for_each(|(m, _)| v.push(&m)),
        None => z.iter().for_each(|(m, _)| v.push(&m)),
    }
}

// ---- SORT -------------------------------------------------------------------

fn sort(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    sort_generic(cx, args, out, false)
}

fn sort_ro(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    sort_generic(cx, args, out, true)
}

/// Redis's `sortCommandGeneric`.
fn sort_generic(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, readonly: bool) -> CmdResult {
    let key = args.key()?;
    // Redis's `user_has_full_key_access`: BY with a pattern and GET read
    // keys no key spec names, so they need a selector that may read every
    // key (one whose pattern matches the string "*").
    let full_access = cx.sess.user.key_allowed(b"*", crate::core::meta::k::ACCESS);
    let mut o = parse_opts(args, readonly, full_access)?;
    let from_script = cx.caller.in_script();

    // Load the source: the whole of it, or for BY nosort on a list (or
    // zset) only the LIMIT range, in order, walking backwards for DESC.
    let mut v = Vector::default();
    let (start, end) = {
        let value = cx.lookup_read(key).map(|e| {
            // Redis converts a listpack sorted set to a skiplist for good
            // before sorting it (sortCommandGeneric's "destructively
            // convert"), SORT_RO too: OBJECT ENCODING says so afterwards.
            if let Value::ZSet(z) = &mut e.value {
                z.to_skiplist();
            }
            &e.value
        });
        let (kind, len) = match value {
            None => (Kind::List, 0),
            Some(Value::List(l)) => (Kind::List, l.len()),
            Some(Value::Set(s)) => (Kind::Set, s.len()),
            Some(Value::ZSet(z)) => (Kind::ZSet, zset_len(z)),
            Some(_) => return Err(CmdError::WrongType),
        };
        // A set has no order of its own: when the result is stored, or
        // goes to a script, sort it so that it is the same everywhere.
        if o.dontsort && kind == Kind::Set && (o.store.is_some() || from_script) {
            o.dontsort = false;
            o.alpha = true;
            o.by = None;
        }
        let vlen = len as i64;
        let mut start = o.limit_start.clamp(0, vlen);
        let count = o.limit_count.clamp(-1, vlen);
        let mut end = if count < 0 { vlen - 1 } else { start + count - 1 };
        if start >= vlen {
            start = vlen - 1;
            end = vlen - 2;
        }
        if end >= vlen {
            end = vlen - 1;
        }
        let ranged = o.dontsort && kind != Kind::Set;
        let n = (end - start + 1).max(0) as usize;
        match value {
            Some(Value::List(l)) if ranged => {
                let s = start.max(0) as usize;
                if o.desc {
                    l.range(len - s - n, n).rev().for_each(|b| v.push(b));
                } else {
                    l.range(s, n).for_each(|b| v.push(b));
                }
            }
            Some(Value::List(l)) => l.iter().for_each(|b| v.push(b)),
            Some(Value::Set(s)) => s.iter().for_each(|m| v.push_member(m)),
            Some(Value::ZSet(z)) => {
                let range = ranged.then(|| (start.max(0) as usize, n));
                load_zset(z, range, o.desc, &mut v);
            }
            _ => {}
        }
        if ranged {
            (0, n as i64 - 1)
        } else {
            (start, end)
        }
    };

    // Weights, then the sort.
    let mut keybuf = Vec::new();
    let mut bad_score = false;
    if !o.dontsort {
        for i in 0..v.items.len() {
            let (at, len) = (v.items[i].at, v.items[i].len);
            let elem = &v.bytes[at..at + len];
            let weight = match o.by {
                Some(p) => by_pattern(cx, p, elem, &mut keybuf, |w| match w {
                    None => None,
                    Some(w) if o.alpha => {
                        let at = v.weights.len();
                        v.weights.extend_from_slice(w);
                        Some(Weight::Alpha(at, w.len()))
                    }
                    Some(w) => Some(Weight::Score(parse_score(w))),
                }),
                None if o.alpha => None,
                None => Some(Weight::Score(parse_score(elem))),
            };
            match weight {
                Some(Weight::Alpha(at, len)) => v.items[i].by = Some((at, len)),
                Some(Weight::Score(Some(s))) => v.items[i].score = s,
                Some(Weight::Score(None)) => bad_score = true,
                None => {}
            }
        }
        if !bad_score {
            sort_vector(&mut v, &o);
        }
    }
    if bad_score {
        return Err(CmdError::err("One or more scores can't be converted into double"));
    }

    // Output: the elements, or per element the value of every GET.
    // (Clamped to what was loaded, so a source that loads fewer elements
    // than it reported cannot index past the vector.)
    let first = start.max(0) as usize;
    let last = first + (end - start + 1).max(0) as usize;
    let rows = first.min(v.items.len())..last.min(v.items.len());
    let outputlen = rows.len() * o.gets.len().max(1);
    match o.store {
        None => {
            out.array(outputlen);
            for i in rows {
                if o.gets.is_empty() {
                    out.bulk(v.elem(i));
                }
                for &p in &o.gets {
                    by_pattern(cx, p, v.elem(i), &mut keybuf, |val| match val {
                        Some(b) => out.bulk(b),
                        None => out.null(),
                    });
                }
            }
        }
        Some(dst) => {
            let mut list = List::new(cx.sess.conf(cx.shared).list_max_listpack_size);
            for i in rows {
                if o.gets.is_empty() {
                    list.push_back(v.elem(i));
                }
                for &p in &o.gets {
                    by_pattern(cx, p, v.elem(i), &mut keybuf, |val| {
                        list.push_back(val.unwrap_or(b""));
                    });
                }
            }
            // Redis counts one change per stored element.
            let list = (outputlen > 0).then(|| Value::List(Box::new(list)));
            cx.store_or_delete(dst, list, Class::LIST, "sortstore", outputlen as u64);
            out.int(outputlen as i64);
        }
    }
    Ok(())
}

/// A weight found through BY.
enum Weight {
    /// ALPHA: where the copied bytes are in [`Vector::weights`].
    Alpha(usize, usize),
    /// Numeric: the parsed score, `None` when it is not a number.
    Score(Option<f64>),
}

/// Redis's `sortCompare`, as a stable sort.
fn sort_vector(v: &mut Vector, o: &Opts) {
    let mut items = std::mem::take(&mut v.items);
    let elem = |it: &Item| &v.bytes[it.at..it.at + it.len];
    let weight = |it: &Item| it.by.map(|(at, len)| &v.weights[at..at + len]);
    // Without STORE, ALPHA compares with strcoll (a C string compare in
    // the C locale Redis runs in); with STORE, binary-safe.
    let text = |a: &[u8], b: &[u8]| if o.store.is_some() { a.cmp(b) } else { cstr(a).cmp(cstr(b)) };
    let by = o.by.is_some();
    items.sort_by(|a, b| {
        let cmp = if !o.alpha {
            a.score
                .partial_cmp(&b.score)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| elem(a).cmp(elem(b)))
        } else if by {
            match (weight(a), weight(b)) {
                (Some(x), Some(y)) => text(x, y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            }
        } else {
            text(elem(a), elem(b))
        };
        // Negated, not reversed afterwards: ties keep their load order.
        if o.desc {
            cmp.reverse()
        } else {
            cmp
        }
    });
    v.items = items;
}

// ---- C's strtod ---------------------------------------------------------

/// What SORT accepts as a numeric weight: C's `strtod` must consume the
/// whole value (read as a C string, up to a NUL) without ERANGE and not
/// give NaN. An empty value is 0, as `strtod` converts nothing and stops
/// at the terminator.
fn parse_score(b: &[u8]) -> Option<f64> {
    let s = cstr(b);
    if s.is_empty() {
        return Some(0.0);
    }
    let s = &s[s
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .count()..];
    let (neg, body) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let head = |n: usize, w: &[u8]| body.len() >= n && body[..n].eq_ignore_ascii_case(w);
    let v = if head(3, b"inf") {
        if body.len() == 3 || body.eq_ignore_ascii_case(b"infinity") {
            f64::INFINITY
        } else {
            return None;
        }
    } else if head(3, b"nan") {
        return None;
    } else if head(2, b"0x") {
        parse_hex(&body[2..])?
    } else {
        parse_dec(body)?
    };
    Some(if neg { -v } else { v })
}

/// `digits [. digits] [e [sign] digits]`, all of it; `None` on a syntax
/// error or ERANGE (overflow, or underflow of a non-zero number).
fn parse_dec(b: &[u8]) -> Option<f64> {
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int = digits(0);
    let mut i = int;
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        frac = digits(i + 1);
        i += 1 + frac;
    }
    if int + frac == 0 {
        return None;
    }
    let mantissa_end = i;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let n = digits(j);
        if n > 0 {
            i = j + n;
        }
    }
    if i != b.len() {
        return None;
    }
    let v: f64 = std::str::from_utf8(b).ok()?.parse().ok()?;
    let nonzero = b[..mantissa_end].iter().any(|c| matches!(c, b'1'..=b'9'));
    if v.is_infinite() || (v.abs() < f64::MIN_POSITIVE && nonzero) {
        return None;
    }
    Some(v)
}

/// The part after `0x` of a hexadecimal float, `h [. h] [p [sign] digits]`,
/// all of it; rounded to nearest-even. `None` on a syntax error, overflow,
/// or an inexact result below the normal range (glibc's ERANGE).
fn parse_hex(b: &[u8]) -> Option<f64> {
    let mut m: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut any = false;
    let mut i = 0;
    let mut seen_dot = false;
    while i < b.len() {
        let c = b[i];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            i += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else { break };
        any = true;
        if m >> 60 == 0 {
            m = m * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_dot {
                exp += 4;
            }
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if matches!(b.get(i), Some(b'p' | b'P')) {
        let mut j = i + 1;
        let neg = match b.get(j) {
            Some(b'-') => {
                j += 1;
                true
            }
            Some(b'+') => {
                j += 1;
                false
            }
            _ => false,
        };
        let n = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n > 0 {
            let e = b[j..j + n]
                .iter()
                .fold(0i64, |acc, &c| (acc * 10 + i64::from(c - b'0')).min(1 << 20));
            exp += if neg { -e } else { e };
            i = j + n;
        }
    }
    if i != b.len() {
        return None;
    }
    if m == 0 {
        return Some(0.0);
    }
    // value = m * 2^exp (+ sticky bits below m's last digit).
    let bits = 64 - i64::from(m.leading_zeros());
    let top = exp + bits - 1;
    if top > 1023 {
        return None;
    }
    // Bits of precision available at this magnitude (fewer when subnormal).
    let prec = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    let shift = bits - prec;
    let (mut kept, mut q, inexact) = if shift <= 0 {
        (m << (-shift), exp + shift, sticky)
    } else if shift > 64 {
        (0, exp + shift, true)
    } else {
        let dropped = if shift == 64 { m } else { m & ((1u64 << shift) - 1) };
        let kept = if shift == 64 { 0 } else { m >> shift };
        let half = 1u64 << (shift - 1);
        let up = dropped > half || (dropped == half && (sticky || kept & 1 == 1));
        (kept + u64::from(up), exp + shift, dropped != 0 || sticky)
    };
    if kept == 0 {
        return None;
    }
    if kept >> 53 != 0 {
        kept >>= 1;
        q += 1;
    }
    let kbits = 64 - i64::from(kept.leading_zeros());
    let top = q + kbits - 1;
    if top > 1023 {
        return None;
    }
    if top < -1022 {
        if inexact {
            return None;
        }
        return Some(f64::from_bits(kept << (q + 1074)));
    }
    let frac = (kept << (53 - kbits)) & ((1u64 << 52) - 1);
    Some(f64::from_bits((((top + 1023) as u64) << 52) | frac))
}

#[cfg(test)]
mod tests {
    use super::{parse_score, Pattern};
    use crate::tests::Harness;

    fn run(h: &mut Harness, line: &str) -> String {
        h.run(&line.split(' ').collect::<Vec<_>>())
    }

    #[test]
    fn scores_follow_strtod() {
        // Accepted and refused as redis-server 7.0.15 does.
        for (s, want) in [
            ("", Some(0.0)),
            (" 5", Some(5.0)),
            ("+5", Some(5.0)),
            ("0x10", Some(16.0)),
            ("0x1p3", Some(8.0)),
            ("0x.8", Some(0.5)),
            ("  +.5e1", Some(5.0)),
            ("5.", Some(5.0)),
            ("inf", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("2.2250738585072014e-308", Some(f64::MIN_POSITIVE)),
            ("0X1P-1074", Some(f64::from_bits(1))),
            ("0x1.8p1", Some(3.0)),
            ("5\0junk", Some(5.0)),
            ("0e-999", Some(0.0)),
        ] {
            assert_eq!(parse_score(s.as_bytes()), want, "{s:?}");
        }
        for s in [
            " ",
            "5 ",
            "1e400",
            "1e-400",
            "1e-310",
            "4.9e-324",
            "nan",
            "NAN(12)",
            "infx",
            "1e",
            "1e+",
            ".",
            "-",
            "0x",
            "1_0",
            "1,5",
            "0x1p-1075",
            "0x1p1024",
            "0x1p",
        ] {
            assert_eq!(parse_score(s.as_bytes()), None, "{s:?}");
        }
        assert_eq!(parse_score(b"0x1.fffffffffffff8p1023"), None);
        assert_eq!(parse_score(b"0x1.fffffffffffff7p1023"), Some(f64::MAX));
        assert_eq!(parse_score(b"0x10000000000000000001"), Some(2f64.powi(76)));
    }

    #[test]
    fn patterns_split_like_redis() {
        let key = |p: &'static [u8]| match Pattern::compile(p) {
            Pattern::Key { pre, post, field } => Some((pre, post, field)),
            _ => None,
        };
        assert!(matches!(Pattern::compile(b"#"), Pattern::Elem));
        assert!(matches!(Pattern::compile(b"#\0x"), Pattern::Elem));
        assert!(matches!(Pattern::compile(b"nosort"), Pattern::Never));
        assert!(matches!(Pattern::compile(b"a\0*"), Pattern::Never));
        assert_eq!(key(b"w_*"), Some((&b"w_"[..], &b""[..], None)));
        assert_eq!(key(b"h_*->f"), Some((&b"h_"[..], &b""[..], Some(&b"f"[..]))));
        assert_eq!(key(b"h_*x->f->g"), Some((&b"h_"[..], &b"x"[..], Some(&b"f->g"[..]))));
        assert_eq!(key(b"h_*->"), Some((&b"h_"[..], &b"->"[..], None)));
        assert_eq!(key(b"->f*"), Some((&b"->f"[..], &b""[..], None)));
    }

    #[test]
    fn patterns_lock_the_whole_database() {
        use crate::core::dispatch::{key_ids, lookup, Lookup, Scope};
        let h = Harness::new();
        let scope = |line: &str| {
            let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            let Lookup::Found(spec) = lookup(&h.shared, &argv) else { panic!("{line}") };
            let mut ids = smallvec::SmallVec::new();
            (key_ids(&h.shared, 0, spec, &argv, &mut ids), ids.len())
        };
        assert_eq!(scope("SORT l"), (Scope::Keys, 1));
        assert_eq!(scope("SORT l BY nosort GET # STORE d"), (Scope::Keys, 2));
        assert_eq!(scope("SORT l BY w_*"), (Scope::Db, 0));
        assert_eq!(scope("SORT l GET h_*->f STORE d"), (Scope::Db, 0));
        assert_eq!(scope("SORT_RO l GET #"), (Scope::Keys, 1));
        assert_eq!(scope("SORT_RO l BY *"), (Scope::Db, 0));
    }

    #[test]
    fn sorts_lists_and_sets() {
        let mut h = Harness::new();
        run(&mut h, "RPUSH l 3 1 2 10");
        assert_eq!(run(&mut h, "SORT l"), "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n");
        assert_eq!(run(&mut h, "SORT l ALPHA DESC LIMIT 1 2"), "*2\r\n$1\r\n2\r\n$2\r\n10\r\n");
        assert_eq!(run(&mut h, "SORT l BY nosort DESC LIMIT 1 2"), "*2\r\n$1\r\n2\r\n$1\r\n1\r\n");
        run(&mut h, "SET w_1 30");
        run(&mut h, "HSET h_3 f x");
        assert_eq!(
            run(&mut h, "SORT l BY w_* GET # GET h_*->f"),
            "*8\r\n$2\r\n10\r\n$-1\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n$1\r\nx\r\n$1\r\n1\r\n$-1\r\n"
        );
        assert_eq!(run(&mut h, "SORT l STORE d"), ":4\r\n");
        assert_eq!(
            run(&mut h, "LRANGE d 0 -1"),
            "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"
        );
        assert_eq!(run(&mut h, "SORT nokey STORE d"), ":0\r\n");
        assert_eq!(run(&mut h, "EXISTS d"), ":0\r\n");
        run(&mut h, "SADD s b a c");
        assert_eq!(run(&mut h, "SORT s ALPHA"), "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
        assert_eq!(
            run(&mut h, "SORT s"),
            "-ERR One or more scores can't be converted into double\r\n"
        );
        assert_eq!(run(&mut h, "SORT_RO l STORE d"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut h, "SORT l LIMIT 1"), "-ERR syntax error\r\n");
        assert_eq!(
            run(&mut h, "SORT l LIMIT x 1"),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            run(&mut h, "SORT w_1"),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        );
        assert_eq!(
            run(&mut h, "COMMAND GETKEYS SORT l BY w_* STORE a STORE b"),
            "*2\r\n$1\r\nl\r\n$1\r\nb\r\n"
        );
        assert_eq!(run(&mut h, "COMMAND GETKEYS SORT_RO l"), "*1\r\n$1\r\nl\r\n");
    }
}
