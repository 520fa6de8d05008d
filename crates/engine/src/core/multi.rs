//! A session's transaction state as the core ends it: closing an open
//! MULTI ([`end_multi`], [`abort`]) and dropping its WATCHes
//! ([`unwatch_all`]), which the dispatcher, disconnects, RESET and
//! scripts need as much as the transaction commands (`commands::tx`).

use std::sync::atomic::Ordering;

use crate::core::session::{Multi, Session};
use crate::core::shared::Shared;

/// Closes the session's open transaction, if any, and returns it.
pub fn end_multi(sess: &mut Session) -> Option<Multi> {
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
            Some(l) if l.holds(id) => l.stripe_id(id).unwatch(&key, &sess.watch_flag),
            _ if busy => {
                let mut l = store::Locks::new(&shared.store, 0);
                if l.try_acquire(&mut [id]).is_ok() {
                    l.stripe_id(id).unwatch(&key, &sess.watch_flag);
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
            keys.stripe_id(id).unwatch(&key, &flag);
            continue;
        }
        let mut l = store::Locks::new(&shared.store, 0);
        if l.try_acquire(&mut [id]).is_ok() {
            l.stripe_id(id).unwatch(&key, &flag);
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
