//! Set commands (Redis 7.0's `set` group): SADD SREM SMEMBERS SISMEMBER
//! SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE, the algebra (SINTER SINTERCARD
//! SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE) and SSCAN.
//!
//! The value type and its encodings live in `store::types::set`. What
//! clients can observe of the encodings is kept as in Redis's `t_set.c`:
//! results are built the way Redis builds them (a fresh intset that
//! converts as members are added), so `OBJECT ENCODING` of a stored result
//! and the ascending order of intset replies agree with Redis.
//!
//! Multi-key commands read several sets at once through
//! [`Sources`](crate::commands::algebra::Sources), as the sorted-set
//! algebra does.

use resp::ReplyBuf;
use store::types::set::{Member, Set};
use store::{Table, Value, NO_EXPIRE};

use crate::commands::algebra::{self, Operand, Sources};
use crate::commands::keys::space::{parse_cursor, parse_scan_opts};
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx, KeyEntry};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, KeyList, Lock};
use crate::subsystems::glob;

pub const COMMANDS: &[Command] = &[
    Command::redis("SADD", sadd),
    Command::redis("SREM", srem),
    Command::redis("SMEMBERS", smembers),
    Command::redis("SISMEMBER", sismember),
    Command::redis("SMISMEMBER", smismember),
    Command::redis("SCARD", scard),
    Command::redis("SPOP", spop),
    Command::redis("SRANDMEMBER", srandmember),
    Command::redis("SMOVE", smove),
    Command::redis("SINTER", sinter),
    Command::redis("SINTERCARD", sintercard).lock(Lock::Custom { find: sintercard_keys }),
    Command::redis("SINTERSTORE", sinterstore),
    Command::redis("SUNION", sunion),
    Command::redis("SUNIONSTORE", sunionstore),
    Command::redis("SDIFF", sdiff),
    Command::redis("SDIFFSTORE", sdiffstore),
    Command::redis("SSCAN", sscan),
];

// ---- helpers --------------------------------------------------------------

/// `set-max-intset-entries`, read once per command.
fn max_intset(cx: &mut Ctx) -> usize {
    cx.sess.conf(cx.shared).set_max_intset_entries
}

/// Reports a change of the set at `key` (Redis's event and dirty count);
/// with `removed` it was emptied, and is deleted (`del` after the event).
fn set_changed(cx: &mut Ctx, key: &[u8], event: &'static str, n: usize, removed: bool) {
    cx.changed_or_emptied(key, Class::SET, event, n as u64, removed);
}

/// The set of an entry, or WRONGTYPE.
fn as_set(v: &mut Value) -> Result<&mut Set, CmdError> {
    match v {
        Value::Set(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

fn reply_member(out: &mut ReplyBuf, m: Member<'_>) {
    match m {
        Member::Int(v) => out.bulk_int(v),
        Member::Str(s) => out.bulk(s),
    }
}

/// Replies with every member of `s` as a set (RESP3 `~`).
fn reply_set(out: &mut ReplyBuf, s: &Set) {
    out.set(s.len());
    for m in s.iter() {
        reply_member(out, m);
    }
}

/// Stores a computed result in `dst`, or deletes `dst` when it is empty.
fn store_set(cx: &mut Ctx, dst: &[u8], result: Set, event: &'static str, out: &mut ReplyBuf) {
    let n = result.len();
    algebra::store_result(cx, dst, Value::Set(result), n, Class::SET, event, out);
}

impl Operand for Set {
    fn take(v: Value) -> Result<Set, Value> {
        match v {
            Value::Set(s) => Ok(s),
            other => Err(other),
        }
    }

    fn into_value(self) -> Value {
        Value::Set(self)
    }

    fn len(&self) -> usize {
        Set::len(self)
    }
}

// ---- SADD SREM SISMEMBER SMISMEMBER SCARD ---------------------------------

fn sadd(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let members = args.rest();
    let max = max_intset(cx);
    let mut added = 0;
    match cx.entry(key) {
        KeyEntry::Occupied(e) => {
            let s = as_set(&mut e.value)?;
            for m in members {
                added += usize::from(s.add(m, max));
            }
        }
        KeyEntry::Vacant(place) => {
            let mut s = Set::new_for(members[0]);
            for m in members {
                added += usize::from(s.add(m, max));
            }
            place.insert(Value::Set(s));
        }
    }
    if added > 0 {
        set_changed(cx, key, "sadd", added, false);
    }
    out.int(added as i64);
    Ok(())
}

fn srem(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let Some(e) = cx.lookup(key) else {
        out.int(0);
        return Ok(());
    };
    let s = as_set(&mut e.value)?;
    let mut deleted = 0;
    for m in args.rest() {
        if s.remove(m) {
            deleted += 1;
            if s.is_empty() {
                break;
            }
        }
    }
    let emptied = s.is_empty();
    if deleted > 0 {
        set_changed(cx, key, "srem", deleted, emptied);
    }
    out.int(deleted as i64);
    Ok(())
}

fn sismember(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let m = args.req()?;
    let found = match cx.lookup_read(key) {
        Some(e) => as_set(&mut e.value)?.contains(m),
        None => false,
    };
    out.int(i64::from(found));
    Ok(())
}

fn smismember(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let members = args.rest();
    let set = match cx.lookup_read(key) {
        Some(e) => Some(&*as_set(&mut e.value)?),
        None => None,
    };
    out.array(members.len());
    for m in members {
        out.int(i64::from(set.is_some_and(|s| s.contains(m))));
    }
    Ok(())
}

fn scard(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let n = match cx.lookup_read(key) {
        Some(e) => as_set(&mut e.value)?.len(),
        None => 0,
    };
    out.int(n as i64);
    Ok(())
}

// ---- SPOP SRANDMEMBER SMOVE -----------------------------------------------

/// SPOP picks with Redis's "create new set" strategy when fewer than
/// `count / SPOP_MOVE_STRATEGY_MUL` members would remain.
const SPOP_MOVE_STRATEGY_MUL: usize = 5;
/// SRANDMEMBER copies the set and removes members when more than a third
/// of it is asked for.
const SRANDMEMBER_SUB_STRATEGY_MUL: usize = 3;

fn spop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    match args.remaining() {
        0 => {}
        1 => return spop_count(cx, key, args.req()?, out),
        _ => return Err(CmdError::Syntax),
    }
    let shared = cx.shared;
    let store = &shared.store;
    let Some(e) = cx.lookup(key) else {
        out.null();
        return Ok(());
    };
    let s = as_set(&mut e.value)?;
    let Some(m) = s.pop_random(|| store.rand()) else {
        out.null();
        return Ok(());
    };
    reply_member(out, m.as_member());
    let emptied = s.is_empty();
    set_changed(cx, key, "spop", 1, emptied);
    // Replicas remove the member that was drawn.
    let mut buf = [0u8; 24];
    let member = m.as_member().bytes(&mut buf).to_vec();
    cx.propagate_as(&[b"SREM", key, &member]);
    Ok(())
}

fn spop_count(cx: &mut Ctx, key: &[u8], count: &[u8], out: &mut ReplyBuf) -> CmdResult {
    // Redis's getPositiveLongFromObjectOrReply: one message for both a
    // non-integer and a negative count.
    let count = match resp::parse_i64(count) {
        Some(c) if c >= 0 => c as u64,
        _ => return Err(CmdError::err("value is out of range, must be positive")),
    };
    let max = max_intset(cx);
    let propagating = cx.propagating();
    let shared = cx.shared;
    let store = &shared.store;
    let Some(e) = cx.lookup(key) else {
        out.set(0);
        return Ok(());
    };
    let s = as_set(&mut e.value)?;
    if count == 0 {
        out.set(0);
        return Ok(());
    }
    let size = s.len();
    if count >= size as u64 {
        // The whole set, replied as SUNION of it would (a rebuilt set, so
        // integer members come out ascending).
        let mut all = Set::new_ints();
        for m in s.iter() {
            all.add_member(m, max);
        }
        reply_set(out, &all);
        // Redis 7.0: the whole set goes (each member counted), propagated
        // as DEL.
        set_changed(cx, key, "spop", size, true);
        cx.propagate_as(&[b"DEL", key]);
        return Ok(());
    }
    let count = count as usize;
    out.set(count);
    let remaining = size - count;
    // Replicas get the members drawn, as SREMs of up to 1024 members
    // (Redis 7.0's batches).
    let mut popped: Vec<Vec<u8>> = Vec::new();
    if remaining * SPOP_MOVE_STRATEGY_MUL > count {
        for _ in 0..count {
            if let Some(m) = s.pop_random(|| store.rand()) {
                reply_member(out, m.as_member());
                if propagating {
                    let mut buf = [0u8; 24];
                    popped.push(m.as_member().bytes(&mut buf).to_vec());
                }
            }
        }
    } else {
        // Draw the members that stay into a new set; reply with the rest.
        let mut keep: Option<Set> = None;
        for _ in 0..remaining {
            if let Some(m) = s.pop_random(|| store.rand()) {
                let mut buf = [0u8; 24];
                let b = m.as_member().bytes(&mut buf).to_vec();
                keep.get_or_insert_with(|| Set::new_for(&b)).add(&b, max);
            }
        }
        for m in s.iter() {
            reply_member(out, m);
            if propagating {
                let mut buf = [0u8; 24];
                popped.push(m.bytes(&mut buf).to_vec());
            }
        }
        if let Some(k) = keep {
            *s = k;
        }
    }
    set_changed(cx, key, "spop", count, false);
    for batch in popped.chunks(1024) {
        let mut argv: Vec<&[u8]> = Vec::with_capacity(batch.len() + 2);
        argv.push(b"SREM");
        argv.push(key);
        argv.extend(batch.iter().map(|m| &m[..]));
        cx.also_propagate(&argv);
    }
    cx.no_propagate();
    Ok(())
}

fn srandmember(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    match args.remaining() {
        0 => {}
        1 => return srandmember_count(cx, key, args.req()?, out),
        _ => return Err(CmdError::Syntax),
    }
    let shared = cx.shared;
    let store = &shared.store;
    let Some(e) = cx.lookup_read(key) else {
        out.null();
        return Ok(());
    };
    match as_set(&mut e.value)?.random(|| store.rand()) {
        Some(m) => reply_member(out, m),
        None => out.null(),
    }
    Ok(())
}

fn srandmember_count(cx: &mut Ctx, key: &[u8], count: &[u8], out: &mut ReplyBuf) -> CmdResult {
    let l = parse_i64(count)?;
    if l == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        ));
    }
    let (count, uniq) = (l.unsigned_abs() as usize, l >= 0);
    let shared = cx.shared;
    let store = &shared.store;
    let Some(e) = cx.lookup_read(key) else {
        out.array(0);
        return Ok(());
    };
    let s = as_set(&mut e.value)?;
    let size = s.len();
    if count == 0 || size == 0 {
        out.array(0);
        return Ok(());
    }
    let mut rand = || store.rand();
    // Repetitions allowed (or one member): independent draws.
    if !uniq || count == 1 {
        out.array(count);
        // The count sizes only the reply, which the output limit cuts.
        for _ in 0..count {
            if out.is_over() {
                break;
            }
            if let Some(m) = s.random(&mut rand) {
                reply_member(out, m);
            }
        }
        return Ok(());
    }
    if count >= size {
        out.array(size);
        for m in s.iter() {
            reply_member(out, m);
        }
        return Ok(());
    }
    out.array(count);
    if count * SRANDMEMBER_SUB_STRATEGY_MUL > size {
        // Most of the set: a partial shuffle of all members.
        let mut all: Vec<Member<'_>> = s.iter().collect();
        for i in 0..count {
            let j = i + (rand() % (size - i) as u64) as usize;
            all.swap(i, j);
        }
        for &m in &all[..count] {
            reply_member(out, m);
        }
    } else {
        // A small part: draw until `count` distinct members are found.
        let mut seen: Table<()> = Table::new();
        let mut buf = [0u8; 24];
        while seen.len() < count {
            if let Some(m) = s.random(&mut rand) {
                let b = m.bytes(&mut buf);
                if !seen.contains_key(b) {
                    seen.insert(b, ());
                }
            }
        }
        for (k, _) in seen.iter() {
            out.bulk(k);
        }
    }
    Ok(())
}

fn smove(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let src_key = args.key()?;
    let dst_key = args.key()?;
    let m = args.req()?;
    let max = max_intset(cx);
    let src_is_set = match cx.lookup(src_key) {
        None => {
            out.int(0);
            return Ok(());
        }
        Some(e) => matches!(e.value, Value::Set(_)),
    };
    let dst_exists = match cx.lookup(dst_key) {
        Some(e) => {
            if src_is_set && !matches!(e.value, Value::Set(_)) {
                return Err(CmdError::WrongType);
            }
            true
        }
        None => false,
    };
    let e = cx.lookup(src_key).ok_or(CmdError::NoSuchKey)?;
    let s = as_set(&mut e.value)?;
    if src_key == dst_key {
        out.int(i64::from(s.contains(m)));
        return Ok(());
    }
    if !s.remove(m) {
        out.int(0);
        return Ok(());
    }
    // Redis 7.0's order: srem (and del) of the source, the destination's
    // creation, then its sadd; one change for the move, one more when the
    // member was new to the destination.
    let emptied = s.is_empty();
    set_changed(cx, src_key, "srem", 1, emptied);
    let added = if dst_exists {
        let e = cx.lookup(dst_key).ok_or(CmdError::NoSuchKey)?;
        as_set(&mut e.value)?.add(m, max)
    } else {
        let mut s = Set::new_for(m);
        s.add(m, max);
        cx.set(dst_key, Value::Set(s), NO_EXPIRE);
        true
    };
    if added {
        set_changed(cx, dst_key, "sadd", 1, false);
    }
    out.int(1);
    Ok(())
}

// ---- SINTER SINTERCARD SINTERSTORE SMEMBERS -------------------------------

/// What an intersection produces.
#[derive(Clone, Copy)]
enum InterTo<'a> {
    Reply,
    Card(usize),
    Store(&'a [u8]),
}

fn smembers(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // Redis 7.0 serves SMEMBERS with SINTER's code.
    inter(cx, args.rest(), InterTo::Reply, out)
}

fn sinter(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    inter(cx, args.rest(), InterTo::Reply, out)
}

fn sinterstore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    inter(cx, args.rest(), InterTo::Store(dst), out)
}

/// Keys of SINTERCARD: `numkeys` of them after it. A bad `numkeys` names
/// none; the handler rejects it before touching the keyspace.
fn sintercard_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    let Some(n) = argv.get(1).and_then(|a| resp::parse_i64(a)) else { return };
    if n < 1 || n as u64 > argv.len().saturating_sub(2) as u64 {
        return;
    }
    for k in &argv[2..2 + n as usize] {
        keys.push((db, k));
    }
}

fn sintercard(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let numkeys = match resp::parse_i64(args.req()?) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    if numkeys > args.remaining() as u64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    let keys = &args.rest()[..numkeys as usize];
    for _ in 0..numkeys {
        args.next();
    }
    let mut limit = 0usize;
    while let Some(opt) = args.next() {
        if eq_ic(opt, "LIMIT") && !args.is_empty() {
            limit = match resp::parse_i64(args.req()?) {
                Some(l) if l >= 0 => l as usize,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
        } else {
            return Err(CmdError::Syntax);
        }
    }
    inter(cx, keys, InterTo::Card(limit), out)
}

/// Redis's `sinterGenericCommand`: any missing key makes the result empty;
/// otherwise the smallest set is walked (ties in argument order) and each
/// member tested against the others.
fn inter(cx: &mut Ctx, keys: &[&[u8]], to: InterTo, out: &mut ReplyBuf) -> CmdResult {
    let max = max_intset(cx);
    let srcs = Sources::<Set>::gather(cx, keys)?;
    let any_missing = (0..keys.len()).any(|j| srcs.get(j).is_none());
    let mut result: Option<Set> = None;
    if any_missing {
        match to {
            InterTo::Reply => out.set(0),
            InterTo::Card(_) => out.int(0),
            InterTo::Store(_) => result = Some(Set::new_ints()),
        }
    } else {
        let order = srcs.by_size();
        let first = order[0];
        let smallest = srcs.get(first).expect("present");
        let others: Vec<&Set> = order[1..]
            .iter()
            .filter(|&&j| srcs.origin(j) != srcs.origin(first))
            .filter_map(|&j| srcs.get(j))
            .collect();
        let members = smallest.iter().filter(|&m| others.iter().all(|o| o.contains_member(m)));
        match to {
            InterTo::Reply => {
                let found: Vec<Member<'_>> = members.collect();
                out.set(found.len());
                for m in found {
                    reply_member(out, m);
                }
            }
            InterTo::Card(limit) => {
                let mut n = 0;
                for _ in members {
                    n += 1;
                    if limit > 0 && n >= limit {
                        break;
                    }
                }
                out.int(n as i64);
            }
            InterTo::Store(_) => {
                let mut r = Set::new_ints();
                for m in members {
                    r.add_member(m, max);
                }
                result = Some(r);
            }
        }
    }
    srcs.restore(cx);
    if let (InterTo::Store(dst), Some(r)) = (to, result) {
        store_set(cx, dst, r, "sinterstore", out);
    }
    Ok(())
}

// ---- SUNION SDIFF and their STORE forms -----------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Diff,
}

fn sunion(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    union_diff(cx, args.rest(), None, Op::Union, out)
}

fn sunionstore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    union_diff(cx, args.rest(), Some(dst), Op::Union, out)
}

fn sdiff(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    union_diff(cx, args.rest(), None, Op::Diff, out)
}

fn sdiffstore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    union_diff(cx, args.rest(), Some(dst), Op::Diff, out)
}

/// Redis's `sunionDiffGenericCommand`. The result is built into a fresh
/// intset exactly as Redis builds it, including its choice between the
/// two DIFF algorithms, because that choice decides whether a result that
/// passed through more than `set-max-intset-entries` members ends up a
/// hashtable.
fn union_diff(
    cx: &mut Ctx,
    keys: &[&[u8]],
    dst: Option<&[u8]>,
    op: Op,
    out: &mut ReplyBuf,
) -> CmdResult {
    let max = max_intset(cx);
    let srcs = Sources::<Set>::gather(cx, keys)?;
    let mut r = Set::new_ints();
    let first = srcs.get(0);
    // A later argument naming the first key makes the difference empty.
    let same = srcs.first_repeated() && first.is_some();
    match op {
        Op::Union => {
            for j in 0..keys.len() {
                if let Some(s) = srcs.get(j) {
                    for m in s.iter() {
                        r.add_member(m, max);
                    }
                }
            }
        }
        Op::Diff if same => {}
        Op::Diff => {
            if let Some(first) = first {
                let present = (0..keys.len()).filter(|&j| srcs.get(j).is_some());
                let algo_one = present.clone().count() * first.len() / 2;
                let algo_two: usize = present.map(|j| srcs.len_of(j)).sum();
                let rest: Vec<&Set> = (1..keys.len()).filter_map(|j| srcs.get(j)).collect();
                if algo_one <= algo_two {
                    for m in first.iter() {
                        if !rest.iter().any(|s| s.contains_member(m)) {
                            r.add_member(m, max);
                        }
                    }
                } else {
                    for m in first.iter() {
                        r.add_member(m, max);
                    }
                    for s in rest {
                        if r.is_empty() {
                            break;
                        }
                        for m in s.iter() {
                            r.remove_member(m);
                        }
                    }
                }
            }
        }
    }
    srcs.restore(cx);
    match dst {
        None => reply_set(out, &r),
        Some(dst) => {
            let event = if matches!(op, Op::Union) { "sunionstore" } else { "sdiffstore" };
            store_set(cx, dst, r, event, out)
        }
    }
    Ok(())
}

// ---- SSCAN ----------------------------------------------------------------

fn sscan(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let cursor = parse_cursor(args.req()?)?;
    // Redis looks the key up before it reads the options: a missing key
    // answers an empty scan whatever follows.
    let opts = parse_scan_opts(args, false);
    let Some(e) = cx.lookup_read(key) else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let s = as_set(&mut e.value)?;
    let opts = opts?;
    let mut found: Vec<Member<'_>> = Vec::new();
    let mut cursor = cursor;
    let mut budget = opts.count.saturating_mul(10);
    loop {
        cursor = s.scan(cursor, |m| found.push(m));
        if cursor == 0 || budget == 0 || found.len() as i64 >= opts.count {
            break;
        }
        budget -= 1;
    }
    let mut buf = [0u8; 24];
    if let Some(p) = opts.pattern {
        found.retain(|m| glob::matches(p, m.bytes(&mut buf), false));
    }
    out.array(2);
    out.bulk_int(cursor as i64);
    out.array(found.len());
    for m in found {
        reply_member(out, m);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;

    fn run(h: &mut Harness, line: &str) -> String {
        h.run(&line.split(' ').collect::<Vec<_>>())
    }

    #[test]
    fn sadd_srem_and_encodings() {
        let mut h = Harness::new();
        assert_eq!(run(&mut h, "SADD s 3 1 2 1"), ":3\r\n");
        assert_eq!(run(&mut h, "SMEMBERS s"), "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
        assert_eq!(run(&mut h, "OBJECT ENCODING s"), "$6\r\nintset\r\n");
        assert_eq!(run(&mut h, "TYPE s"), "+set\r\n");
        assert_eq!(run(&mut h, "SREM s 1 9 2"), ":2\r\n");
        assert_eq!(run(&mut h, "SREM s 3 4"), ":1\r\n");
        assert_eq!(run(&mut h, "EXISTS s"), ":0\r\n");
        assert_eq!(run(&mut h, "SADD s 1 a"), ":2\r\n");
        assert_eq!(run(&mut h, "OBJECT ENCODING s"), "$9\r\nhashtable\r\n");
        assert_eq!(run(&mut h, "CONFIG SET set-max-intset-entries 2"), "+OK\r\n");
        assert_eq!(run(&mut h, "SADD t 1 2"), ":2\r\n");
        assert_eq!(run(&mut h, "OBJECT ENCODING t"), "$6\r\nintset\r\n");
        assert_eq!(run(&mut h, "SADD t 2"), ":0\r\n");
        assert_eq!(run(&mut h, "SADD t 3"), ":1\r\n");
        assert_eq!(run(&mut h, "OBJECT ENCODING t"), "$9\r\nhashtable\r\n");
        assert_eq!(run(&mut h, "SET str x"), "+OK\r\n");
        let wrong = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        assert_eq!(run(&mut h, "SADD str 1"), wrong);
        assert_eq!(run(&mut h, "SCARD str"), wrong);
        assert_eq!(run(&mut h, "SINTER t str"), wrong);
        assert_eq!(run(&mut h, "SINTER nokey str"), wrong);
        // The sets taken out for SINTER are back in place after an error.
        assert_eq!(run(&mut h, "SCARD t"), ":3\r\n");
    }

    #[test]
    fn algebra() {
        let mut h = Harness::new();
        run(&mut h, "SADD a 1 2 3 4");
        run(&mut h, "SADD b 3 4 5");
        run(&mut h, "SADD c 4 3 9");
        assert_eq!(run(&mut h, "SINTER a b c"), "*2\r\n$1\r\n3\r\n$1\r\n4\r\n");
        assert_eq!(run(&mut h, "SINTER a a"), "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n");
        assert_eq!(run(&mut h, "SINTERCARD 2 a b LIMIT 1"), ":1\r\n");
        assert_eq!(run(&mut h, "SINTERCARD 3 a b c"), ":2\r\n");
        assert_eq!(
            run(&mut h, "SINTERCARD 2 a"),
            "-ERR Number of keys can't be greater than number of args\r\n"
        );
        assert_eq!(run(&mut h, "SINTERCARD 0 a"), "-ERR numkeys should be greater than 0\r\n");
        assert_eq!(run(&mut h, "SINTERCARD 1 a LIMIT -1"), "-ERR LIMIT can't be negative\r\n");
        assert_eq!(
            run(&mut h, "SUNION a b nokey"),
            "*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n"
        );
        assert_eq!(run(&mut h, "SDIFF a b"), "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        assert_eq!(run(&mut h, "SDIFF a b a"), "*0\r\n");
        assert_eq!(run(&mut h, "SDIFFSTORE a a b"), ":2\r\n");
        assert_eq!(run(&mut h, "SMEMBERS a"), "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        assert_eq!(run(&mut h, "SINTERSTORE a a nokey"), ":0\r\n");
        assert_eq!(run(&mut h, "EXISTS a"), ":0\r\n");
        assert_eq!(run(&mut h, "SMOVE b d 5"), ":1\r\n");
        assert_eq!(run(&mut h, "SMOVE b d 5"), ":0\r\n");
        assert_eq!(run(&mut h, "SMOVE b b 3"), ":1\r\n");
        assert_eq!(run(&mut h, "SMEMBERS d"), "*1\r\n$1\r\n5\r\n");
        assert_eq!(run(&mut h, "SMISMEMBER b 3 5 4"), "*3\r\n:1\r\n:0\r\n:1\r\n");
    }

    #[test]
    fn pops_and_scans() {
        let mut h = Harness::new();
        run(&mut h, "SADD s 5 4 3 2 1");
        assert_eq!(run(&mut h, "SPOP s -1"), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(run(&mut h, "SPOP s x"), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(run(&mut h, "SPOP s 1 2"), "-ERR syntax error\r\n");
        assert_eq!(
            run(&mut h, "SRANDMEMBER s 10"),
            "*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n"
        );
        assert!(run(&mut h, "SRANDMEMBER s -7").starts_with("*7\r\n"));
        assert!(run(&mut h, "SRANDMEMBER s 3").starts_with("*3\r\n"));
        assert_eq!(
            run(&mut h, "SSCAN s 0 MATCH [13]"),
            "*2\r\n$1\r\n0\r\n*2\r\n$1\r\n1\r\n$1\r\n3\r\n"
        );
        assert_eq!(run(&mut h, "SSCAN s 0 TYPE set"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut h, "SSCAN nokey 0 COUNT 0"), "*2\r\n$1\r\n0\r\n*0\r\n");
        assert!(run(&mut h, "SPOP s 2").starts_with("*2\r\n"));
        assert_eq!(run(&mut h, "SCARD s"), ":3\r\n");
        assert_eq!(run(&mut h, "SPOP s 0"), "*0\r\n");
        assert!(run(&mut h, "SPOP s").starts_with("$1\r\n"));
        assert_eq!(run(&mut h, "SPOP s 5").len(), 4 + 2 * 7);
        assert_eq!(run(&mut h, "EXISTS s"), ":0\r\n");
        assert_eq!(run(&mut h, "SPOP s"), "$-1\r\n");
    }
}
