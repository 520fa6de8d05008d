//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC locks the union of the stripes its queued commands need (and the
//! stripes of watched keys) for the whole transaction, so no other thread
//! sees it half done.

use std::sync::atomic::Ordering;

use resp::ReplyBuf;
use smallvec::SmallVec;

use crate::ctx::{Args, Ctx};
use crate::dispatch::{self, Lookup, Scope};
use crate::door::{self, Hold, Ran};
use crate::error::{CmdError, CmdResult};
use crate::session::{Multi, Session};
use crate::shared::Shared;
use crate::spec::{Command, Flags};

pub const COMMANDS: &[Command] = &[
    Command::redis("MULTI", multi).flags(Flags::NO_QUEUE),
    Command::redis("EXEC", exec).flags(Flags::NO_QUEUE.union(Flags::EXEC_TX)),
    Command::redis("DISCARD", discard).flags(Flags::NO_QUEUE),
    Command::redis("WATCH", watch).flags(Flags::NO_QUEUE),
    Command::redis("UNWATCH", unwatch),
];

fn multi(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if cx.sess.in_multi() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    cx.sess.multi = Some(Multi::default());
    cx.sess.handle.in_multi.store(true, Ordering::Relaxed);
    cx.sess.handle.multi_len.store(0, Ordering::Relaxed);
    out.ok();
    Ok(())
}

fn end_multi(sess: &mut Session) -> Option<Multi> {
    sess.handle.in_multi.store(false, Ordering::Relaxed);
    sess.handle.multi_len.store(-1, Ordering::Relaxed);
    sess.handle.multi_mem.store(0, Ordering::Relaxed);
    sess.multi.take()
}

/// Ends any open transaction and drops every WATCH (a rejected EXEC).
pub fn abort(shared: &Shared, sess: &mut Session) {
    end_multi(sess);
    unwatch_all(shared, sess);
}

fn discard(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if end_multi(cx.sess).is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    unwatch_all(cx.shared, cx.sess);
    out.ok();
    Ok(())
}

fn exec(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let Some(m) = end_multi(cx.sess) else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    if m.dirty {
        unwatch_all(cx.shared, cx.sess);
        return Err(CmdError::Msg(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    // Lock everything the transaction and its watched keys need, in order.
    let shared = cx.shared;
    let mut ids: SmallVec<[u32; 8]> = SmallVec::new();
    let mut scope = Scope::Keys;
    let mut db = cx.sess.db;
    let argvs: Vec<Vec<&[u8]>> =
        m.queued.iter().map(|q| q.iter().map(|a| &a[..]).collect()).collect();
    for argv in &argvs {
        if let Lookup::Found(spec) = dispatch::lookup(shared, argv) {
            scope = scope.max(dispatch::key_ids(shared, db, spec, argv, &mut ids));
            if spec.flags.has(Flags::CHANGES_DB) {
                if let Some(n) = resp::parse_i64(argv[1]) {
                    if n >= 0 && (n as usize) < shared.store.databases() {
                        db = n as usize;
                    }
                }
                // SELECT changes which database later keys live in.
                scope = scope.max(Scope::All);
            }
        }
    }
    for (wdb, key, _) in &cx.sess.watched {
        ids.push(shared.store.global_id(*wdb, shared.store.stripe_of(key)));
    }
    // EXEC declares no keys, so nothing is held yet: ascending order holds.
    dispatch::lock_scope(shared, cx.keys, cx.sess.db, scope, &mut ids)?;
    if watched_touched(cx) {
        unwatch_all_with(shared, cx.sess, Some(cx.keys));
        out.null_array();
        return Ok(());
    }
    out.array(argvs.len());
    // The queue keeps its origin (`Caller::for_queued`): a transaction
    // read back from the AOF or a master's stream runs as the replay it
    // is; a client's as the EXEC caller.
    let inner = cx.caller.for_queued();
    cx.sess.in_exec = true;
    for argv in &argvs {
        // Each queued command goes through the door as any caller's (no
        // blocking, checks of queue time not repeated); its locks are
        // already held (checked, not waited for).
        let spec = match door::lookup(shared, argv) {
            Ok(spec) => spec,
            Err(nf) => {
                shared.cmdstats.error(&nf.error.text());
                nf.error.write(out);
                continue;
            }
        };
        match door::run(shared, cx.sess, cx.keys, spec, argv, out, inner, Hold::Held) {
            Ran::Refused(e) => e.write(out),
            Ran::Stopped(text) => out.error(&text),
            Ran::Done | Ran::Waiting | Ran::Queued => {}
        }
    }
    cx.sess.in_exec = false;
    unwatch_all_with(shared, cx.sess, Some(cx.keys));
    Ok(())
}

/// Whether EXEC must fail: a watched key was modified, or a key that was
/// live when watched has expired since.
fn watched_touched(cx: &mut Ctx) -> bool {
    if cx.sess.watch_flag.load(Ordering::Acquire) {
        return true;
    }
    // The stripe's WATCH knows whether the key counts as expired (at WATCH
    // time, or since a SWAPDB brought an expired one).
    let flag = &cx.sess.watch_flag;
    cx.sess.watched.iter().any(|(db, key, _)| cx.keys.watch_lapsed(*db, key, flag))
}

fn watch(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if cx.sess.in_multi() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    while let Some(key) = args.next() {
        let db = cx.db;
        if cx.sess.watched.iter().any(|(d, k, _)| *d == db && **k == *key) {
            continue;
        }
        let expired = cx.keys.watch(db, key, &cx.sess.watch_flag);
        cx.sess.watched.push((db, key.into(), expired));
    }
    cx.sess.handle.watching.store(cx.sess.watched.len(), Ordering::Relaxed);
    out.ok();
    Ok(())
}

fn unwatch(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    unwatch_all(cx.shared, cx.sess);
    out.ok();
    Ok(())
}

/// Drops every WATCH of a session and gives it a fresh flag. Stripes the
/// caller already holds (EXEC holds those of its watched keys) are used as
/// they are; any other is locked on its own, which is safe because callers
/// hold no other stripes then (UNWATCH, DISCARD, disconnect). While a
/// script is busy, a stripe it may hold is not waited for (UNWATCH,
/// DISCARD, RESET and a rejected EXEC are answered at once, as Redis
/// answers them): the dropped flag stays on the stripe, where a write
/// only sets it (nobody reads it any more), and is taken off later
/// ([`unwatch_deferred`]).
pub fn unwatch_all_with(shared: &Shared, sess: &mut Session, mut keys: Option<&mut store::Locks>) {
    let busy = shared.scripts.is_busy();
    for (db, key, _) in sess.watched.drain(..) {
        let stripe = shared.store.stripe_of(&key);
        let id = shared.store.global_id(db, stripe);
        match keys.as_deref_mut() {
            Some(l) if l.holds(id) => l.unwatch(id, &key, &sess.watch_flag),
            _ if busy => {
                let mut l = store::Locks::new(&shared.store, 0);
                if l.try_acquire(&mut [id]).is_ok() {
                    l.unwatch(id, &key, &sess.watch_flag);
                } else {
                    shared.unwatch_later.lock().push((id, key, sess.watch_flag.clone()));
                }
            }
            _ => shared.store.lock_stripe(db, stripe as usize).unwatch(&key, &sess.watch_flag),
        }
    }
    sess.watch_flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    sess.handle.watching.store(0, Ordering::Relaxed);
}

/// Takes the WATCHes dropped while a script was busy off their stripes:
/// those `keys` holds (the script that just ended held them) and those
/// free at once; the others wait for the next busy script's end.
#[cold]
pub fn unwatch_deferred(shared: &Shared, keys: &mut store::Locks) {
    let later = std::mem::take(&mut *shared.unwatch_later.lock());
    let mut left = Vec::new();
    for (id, key, flag) in later {
        if keys.holds(id) {
            keys.unwatch(id, &key, &flag);
            continue;
        }
        let mut l = store::Locks::new(&shared.store, 0);
        if l.try_acquire(&mut [id]).is_ok() {
            l.unwatch(id, &key, &flag);
        } else {
            left.push((id, key, flag));
        }
    }
    if !left.is_empty() {
        shared.unwatch_later.lock().extend(left);
    }
}

/// [`unwatch_all_with`] for callers that hold no stripes.
pub fn unwatch_all(shared: &Shared, sess: &mut Session) {
    unwatch_all_with(shared, sess, None);
}
