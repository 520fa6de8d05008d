//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC locks the union of the stripes its queued commands need (and the
//! stripes of watched keys) for the whole transaction, so no other thread
//! sees it half done.

use std::sync::atomic::Ordering;

use resp::ReplyBuf;
use smallvec::SmallVec;

use crate::core::ctx::{Args, Ctx};
use crate::core::dispatch::{self, Caller, Lookup, Scope};
use crate::core::door::{self, Hold, Ran};
use crate::core::error::{CmdError, CmdResult};
use crate::core::multi::{end_multi, unwatch_all, unwatch_all_with};
use crate::core::session::Multi;
use crate::core::spec::{Command, Flags};

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
    // In cluster mode the queue was routed before its stripes were taken;
    // set only by a cluster node's routing, for a queue with keys.
    if cx.sess.cluster_slot.is_some() && cx.caller == Caller::Client {
        if let Some(c) = shared.cluster.get() {
            let writes = m.flags.has(Flags::WRITE);
            let gate = crate::subsystems::cluster::gate::recheck_queue;
            if let Err(e) = gate(shared, c, cx.sess, &argvs, writes, cx.keys) {
                unwatch_all_with(shared, cx.sess, Some(cx.keys));
                return Err(e);
            }
        }
    }
    if watched_touched(cx) {
        unwatch_all_with(shared, cx.sess, Some(cx.keys));
        out.null_array();
        return Ok(());
    }
    // Redis's execCommand unwatches before the queued commands run: an
    // UNWATCH among them finds nothing left to drop (it would otherwise
    // lock, on its own, a watched key's stripe this EXEC already holds,
    // and wait for itself for ever).
    unwatch_all_with(shared, cx.sess, Some(cx.keys));
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
