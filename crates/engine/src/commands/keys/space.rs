//! Commands over a whole database (KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB)
//! or all of them (FLUSHALL, SWAPDB). For KEYS, FLUSHDB, FLUSHALL and SWAPDB
//! the dispatcher has locked every stripe (`KeySpec::WholeDb` /
//! `KeySpec::AllDbs`); SCAN and RANDOMKEY lock the stripes they visit, in
//! ascending order (`KeySpec::DbWalk`), and skip empty ones by their
//! published size; DBSIZE only reads published sizes.
//!
//! # SCAN cursors
//!
//! A database is `stripes` (a power of two, 2^b) hash tables, one per lock
//! stripe, and a key never changes stripe. SCAN walks stripe 0 to the last
//! one, each with its table's own reverse-binary cursor, which carries
//! Redis's guarantee (every key present for the whole iteration is
//! returned at least once, whatever resizes happen between calls). The
//! cursor a client sees packs both:
//!
//! ```text
//!   cursor = (table_cursor << b) | stripe
//! ```
//!
//! so the stripe is the low `b` bits (10 with 1024 stripes) and the table
//! cursor the rest. `0` is both the start and the end, as in Redis: the
//! start is (stripe 0, table cursor 0), and finishing a stripe yields
//! (next stripe, 0), which is never 0 until the last stripe is done.
//! Unknown high bits of a client's cursor are ignored by the table scan.

use resp::ReplyBuf;
use store::Stripe;

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::subsystems::glob;

/// Whether `key` (with entry `e`, in stripe `s`) is logically expired at
/// `now`.
#[inline]
fn expired(s: &Stripe, key: &[u8], e: &store::Entry, now: i64) -> bool {
    e.has_ttl() && s.is_expired(key, now)
}

/// Global ids of the stripes of `db`: none while it has none (nothing
/// in it; a command that locked it whole keeps it so, see
/// `store::Locks::acquire_db`).
fn stripe_ids(cx: &Ctx, db: usize) -> std::ops::Range<u32> {
    let store = &cx.shared.store;
    let base = store.global_id(db, 0);
    if cx.keys.db_absent(db) {
        return base..base;
    }
    base..base + store.stripes() as u32
}

pub(super) fn keys(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let pattern = args.req()?;
    let all = pattern == b"*";
    let now = cx.now();
    // Keys are written to a side buffer as they are found, so the count
    // can go first without a second matching pass.
    let mut body = out.side();
    let mut n = 0;
    for id in stripe_ids(cx, cx.db) {
        let s = cx.stripe_at(id);
        if s.is_empty() {
            continue;
        }
        if body.is_over() {
            // Past the client's output limit: it is closed.
            break;
        }
        // Expired keys are skipped, not deleted, as Redis's KEYS does.
        for (k, e) in s.iter() {
            if (all || glob::matches(pattern, k, false)) && !expired(s, k, e, now) {
                body.bulk(k);
                n += 1;
            }
        }
    }
    out.array(n);
    out.append(&mut body);
    Ok(())
}

/// Parses a cursor the way Redis does (`strtoul` base 10 on the C string):
/// no leading space, an optional sign (a negative wraps around), nothing
/// after the digits, the empty string is 0, overflow is an error.
/// Options of the SCAN family (Redis's `scanGenericCommand`): COUNT and
/// MATCH for all, TYPE for SCAN itself.
pub(crate) struct ScanOpts<'a> {
    pub count: i64,
    /// `None` for no pattern (or `*`, which matches everything).
    pub pattern: Option<&'a [u8]>,
    pub type_name: Option<&'a [u8]>,
}

/// Parses the options after the cursor, with Redis's errors.
pub(crate) fn parse_scan_opts<'a>(
    args: &mut Args<'a>,
    allow_type: bool,
) -> Result<ScanOpts<'a>, CmdError> {
    let mut o = ScanOpts { count: 10, pattern: None, type_name: None };
    while let Some(opt) = args.next() {
        let has_value = args.remaining() >= 1;
        if eq_ic(opt, "COUNT") && has_value {
            o.count = parse_i64(args.req()?)?;
            if o.count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if eq_ic(opt, "MATCH") && has_value {
            let p = args.req()?;
            o.pattern = (p != b"*").then_some(p);
        } else if allow_type && eq_ic(opt, "TYPE") && has_value {
            let t = args.req()?;
            // Compared as a C string.
            o.type_name = Some(&t[..t.iter().position(|&c| c == 0).unwrap_or(t.len())]);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

pub(crate) fn parse_cursor(a: &[u8]) -> Result<u64, CmdError> {
    let bad = || CmdError::err("invalid cursor");
    let a = &a[..a.iter().position(|&c| c == 0).unwrap_or(a.len())];
    let Some(&first) = a.first() else { return Ok(0) };
    if matches!(first, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return Err(bad());
    }
    let (neg, digits) = match first {
        b'-' => (true, &a[1..]),
        b'+' => (false, &a[1..]),
        _ => (false, a),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10).and_then(|v| v.checked_add(u64::from(d - b'0'))).ok_or_else(bad)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

pub(super) fn scan(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let cursor = parse_cursor(args.req()?)?;
    let ScanOpts { count, pattern, type_name } = parse_scan_opts(args, true)?;

    // Step 1: visit buckets until `count` keys were seen or the budget of
    // ten bucket visits per requested key is spent (Redis's
    // `maxiterations`). Empty stripes are skipped without costing a visit.
    let db = cx.db;
    let nstripes = cx.shared.store.stripes() as u64;
    let bits = nstripes.trailing_zeros();
    let base = stripe_ids(cx, db).start;
    let mut stripe = cursor & (nstripes - 1);
    let mut inner = cursor >> bits;
    let mut budget = count.saturating_mul(10);
    let mut found: Vec<Box<[u8]>> = Vec::new();
    let next = 'walk: loop {
        let s = loop {
            // A stripe that was empty at its last release holds no key
            // present for the whole scan: skip it without locking it.
            if cx.keys.counts(base + stripe as u32).keys > 0 {
                let s = cx.stripe_at(base + stripe as u32);
                if !s.is_empty() {
                    break s;
                }
            }
            stripe += 1;
            inner = 0;
            if stripe == nstripes {
                break 'walk 0;
            }
        };
        inner = s.scan(inner, |k, _| found.push(k.into()));
        if inner == 0 {
            stripe += 1;
            if stripe == nstripes {
                break 0;
            }
        }
        let next = (inner << bits) | stripe;
        if budget == 0 || found.len() as i64 >= count {
            break next;
        }
        budget -= 1;
    };

    // Step 2: filter by pattern, then type, then expiry, in Redis's order.
    // The type check is a real lookup (it counts a hit or miss and deletes
    // an expired key, which then reads as type "none" and is kept: Redis
    // answers `SCAN 0 TYPE none` with just-expired keys).
    let mut body = out.side();
    let mut n = 0;
    for k in &found {
        if pattern.is_some_and(|p| !glob::matches(p, k, false)) {
            continue;
        }
        if let Some(t) = type_name {
            let name = super::read_notouch(cx, k).map_or("none", |e| e.value.kind().name());
            if !t.eq_ignore_ascii_case(name.as_bytes()) {
                continue;
            }
        }
        if cx.expire_if_due(k) {
            continue;
        }
        body.bulk(k);
        n += 1;
    }
    out.array(2);
    out.bulk_int(next as i64);
    out.array(n);
    out.append(&mut body);
    Ok(())
}

pub(super) fn randomkey(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let now = cx.now();
    let ids = stripe_ids(cx, cx.db);
    let in_exec = cx.sess.in_exec;
    let mut lens: Vec<usize> = ids.clone().map(|id| cx.keys.counts(id).keys).collect();
    let mut total: usize = lens.iter().sum();
    let store = &cx.shared.store;
    // Like Redis's `dbRandomKey`: an expired pick is deleted and another
    // drawn, until a live key turns up or the database is empty. The
    // stripe is drawn in proportion to its size, so every key is about
    // equally likely. Sizes are the published ones; a stripe found empty
    // once locked is just dropped from the draw.
    while total > 0 {
        let mut r = (store.rand() % total as u64) as usize;
        let (i, _) = lens
            .iter()
            .enumerate()
            .find(|(_, &l)| {
                if r < l {
                    true
                } else {
                    r -= l;
                    false
                }
            })
            .expect("r < total");
        if !in_exec {
            // One stripe at a time (draws are not in ascending order);
            // inside EXEC every stripe is held already. The keys the last
            // draw found expired are reported first: a released stripe
            // would keep them for whichever command locks it next.
            let crate::core::session::Session { fx, ready, .. } = &mut *cx.sess;
            cx.keys.take_signals(ready, |db, k| fx.expired(db, k));
            cx.keys.release();
        }
        let s = cx.stripe_at(ids.start + i as u32);
        match s.random_key(|| store.rand()) {
            Some(k) => {
                let k: Box<[u8]> = k.into();
                if s.get(&k, now).is_some() {
                    out.bulk(&k);
                    return Ok(());
                }
                lens[i] = s.len();
            }
            None => lens[i] = 0,
        }
        total = lens.iter().sum();
    }
    out.null();
    Ok(())
}

pub(super) fn dbsize(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // Expired keys not yet deleted count, as in Redis. Stripes this
    // command holds (inside EXEC) are read exactly, the others as of their
    // last release.
    let n = cx.keys.db_counts(cx.db).keys;
    out.int(n as i64);
    Ok(())
}

/// FLUSHDB/FLUSHALL take one optional SYNC or ASYNC; anything else is a
/// syntax error. Returns whether to free in the background: ASYNC, or
/// neither with `lazyfree-lazy-user-flush yes` (Redis's
/// `getFlushCommandFlags`).
fn flush_args(cx: &mut Ctx, args: &mut Args) -> Result<bool, CmdError> {
    match args.rest() {
        [] => Ok(cx
            .sess
            .conf(cx.shared)
            .get_by_name("lazyfree-lazy-user-flush")
            .is_some_and(|v| v == b"yes")),
        [m] if eq_ic(m, "SYNC") => Ok(false),
        [m] if eq_ic(m, "ASYNC") => Ok(true),
        _ => Err(CmdError::Syntax),
    }
}

/// Empties database `db`; returns how many keys it held. `lazy`: the
/// key tables go to the background freer instead of being freed here.
fn flush_db(cx: &mut Ctx, db: usize, lazy: bool) -> u64 {
    let mut n = 0;
    for id in stripe_ids(cx, db) {
        // Marks the watchers of keys that existed, as Redis's
        // `signalFlushedDb`.
        let s = cx.stripe_at(id);
        if lazy {
            let (k, table) = s.detach_all();
            if k > 0 {
                cx.shared.lazyfree.free_keys(table, k as u64);
            }
            n += k as u64;
        } else {
            n += s.clear() as u64;
        }
    }
    n
}

pub(super) fn flushdb(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let lazy = flush_args(cx, args)?;
    let n = flush_db(cx, cx.db, lazy);
    cx.flushed();
    // Redis counts the keys removed and propagates the flush even when
    // there were none.
    cx.dirty(n);
    cx.force_propagate();
    out.ok();
    Ok(())
}

/// FLUSHALL ends a running RDB snapshot (a BGSAVE, a replica's full
/// sync) before it locks every stripe, as Redis kills its RDB child: the
/// snapshot, abandoned, then copies none of the stripes FLUSHALL empties
/// (a writer that finds a stripe not yet saved copies it first, and waits
/// for the saver once 64 MiB of copies are queued). A FLUSHALL that will
/// fail its syntax check ends nothing.
pub(super) fn flushall_before_lock(shared: &crate::Shared, argv: &[&[u8]]) {
    let valid = match argv {
        [_] => true,
        [_, m] => eq_ic(m, "SYNC") || eq_ic(m, "ASYNC"),
        _ => false,
    };
    if let (true, Some(s)) = (valid, shared.host.snapshots.as_ref()) {
        s.abort_bgsave();
    }
}

pub(super) fn flushall(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let lazy = flush_args(cx, args)?;
    let mut n = 0;
    for db in 0..cx.shared.store.databases() {
        n += flush_db(cx, db, lazy);
    }
    cx.flushed();
    // A BGSAVE in progress would save what FLUSHALL just removed: Redis
    // kills its child here (a client's FLUSHALL did before it locked;
    // inside EXEC or a script it is done here).
    if let Some(s) = cx.shared.host.snapshots.as_ref() {
        s.abort_bgsave();
    }
    cx.dirty(n);
    // With save points set, Redis 7.0 saves the emptied data set here (in
    // the foreground), which resets the change count.
    if !cx.shared.config.read().save.is_empty() {
        if let Some(s) = cx.shared.host.snapshots.as_ref() {
            let dirty = cx.shared.stats.dirty.load(std::sync::atomic::Ordering::Relaxed)
                + cx.sess.stats.dirty
                + cx.sess.fx.dirty;
            // A failed save is logged; FLUSHALL itself succeeded (Redis).
            let _ = s.save_flushed(dirty);
        }
    }
    cx.force_propagate();
    out.ok();
    Ok(())
}

pub(super) fn swapdb(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if cx.shared.cluster.get().is_some() {
        return Err(CmdError::err("SWAPDB is not allowed in cluster mode"));
    }
    let parse = |a: &[u8], msg: &'static str| {
        parse_i64(a)
            .ok()
            .filter(|v| i32::try_from(*v).is_ok())
            .ok_or(CmdError::Msg(std::borrow::Cow::Borrowed(msg)))
    };
    let a = parse(args.req()?, "ERR invalid first DB index")?;
    let b = parse(args.req()?, "ERR invalid second DB index")?;
    let dbs = cx.shared.store.databases() as i64;
    if !(0..dbs).contains(&a) || !(0..dbs).contains(&b) {
        return Err(CmdError::DbIndexOutOfRange);
    }
    let (a, b) = (a as usize, b as usize);
    if a != b && !(cx.keys.db_absent(a) && cx.keys.db_absent(b)) {
        let now = cx.now();
        // A side without stripes gets them, to take the other's keys.
        for db in [a, b] {
            cx.keys.allocate_db(db).map_err(|_| CmdError::LockOrder)?;
        }
        let (ia, ib) = (stripe_ids(cx, a), stripe_ids(cx, b));
        for (x, y) in ia.zip(ib) {
            // Marks watchers of keys that exist on either side.
            let (sx, sy) = cx.keys.pair(x, y);
            sx.swap_data(sy, now);
        }
    }
    cx.dirty(1);
    out.ok();
    Ok(())
}
