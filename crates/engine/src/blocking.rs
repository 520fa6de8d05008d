//! Blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP): clients parked on keys and served when a list or
//! sorted set arrives there.
//!
//! How a wait works, across threads:
//!
//! 1. The blocking command runs with its keys' stripes locked. If every key
//!    is empty it queues a [`Waiter`] on each key *in the key's stripe*
//!    (`Stripe::waiters`), still under those locks, and leaves
//!    `Session::blocked` set instead of replying. The connection stops
//!    executing its input until the wait ends.
//! 2. Any command that stores a list or sorted set under a waited-for key
//!    makes the stripe record the key as ready (one branch on the write path
//!    when nobody waits in that stripe). The dispatcher collects ready keys
//!    when the command — or the whole EXEC — ends and, on the writer's own
//!    thread, serves the waiters in arrival order before the writer's next
//!    command: each served client's pop runs under the key's lock, its reply
//!    is rendered in the client's protocol and handed over, and its
//!    connection is woken to deliver it. So a push is consumed by waiters
//!    before anything else on that connection sees it, as in Redis.
//! 3. A waiter also ends by timeout, `CLIENT UNBLOCK`, or its connection
//!    closing. Every end goes through the waiter's state mutex, so exactly
//!    one of "served" and "timed out/unblocked/gone" wins; the blocked
//!    connection then removes its queue entries from every key.
//!
//! Lock order: stripes (ascending) → a waiter's state. Nothing takes a
//! stripe while holding a waiter's state.
//!
//! One difference from single-threaded Redis: between the writing command
//! releasing its locks and the serving pass taking them again, a command on
//! *another* thread may take the pushed element first. Any serial order of
//! those two commands allows that outcome.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;
use resp::{Proto, ReplyBuf};
use store::types::ListEnd;
use store::{Kind, Locks};

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::session::{ClientHandle, Session};
use crate::shared::{unix_ms, Shared};

/// What a blocked client does once a key is ready.
#[derive(Debug, Clone)]
pub enum Op {
    /// BLPOP / BRPOP: `[key, element]`.
    Pop(ListEnd),
    /// BLMOVE / BRPOPLPUSH: the element, pushed onto `dst`.
    Move { dst: Box<[u8]>, from: ListEnd, to: ListEnd },
    /// BLMPOP: `[key, [elements]]`.
    MPop { end: ListEnd, count: i64 },
    /// BZPOPMIN / BZPOPMAX: `[key, member, score]`.
    ZPop { max: bool },
    /// BZMPOP: `[key, [[member, score], …]]`.
    ZMPop { max: bool, count: usize },
}

impl Op {
    /// The type of value that serves this wait.
    fn wants(&self) -> Kind {
        match self {
            Op::Pop(_) | Op::Move { .. } | Op::MPop { .. } => Kind::List,
            Op::ZPop { .. } | Op::ZMPop { .. } => Kind::ZSet,
        }
    }
}

/// How a wait stands.
#[derive(Debug)]
enum State {
    Waiting,
    /// Served: the reply bytes, in the client's protocol.
    Served(Vec<u8>),
    TimedOut,
    Unblocked {
        error: bool,
    },
    /// The client went away.
    Gone,
}

/// One blocked client, queued on each of its keys.
pub struct Waiter {
    pub handle: Arc<ClientHandle>,
    pub db: usize,
    /// Distinct keys, in the command's order.
    pub keys: Vec<Box<[u8]>>,
    pub op: Op,
    pub proto: Proto,
    state: Mutex<State>,
}

impl Waiter {
    fn is_waiting(&self) -> bool {
        matches!(*self.state.lock(), State::Waiting)
    }
}

/// A session's current wait.
pub struct Blocked {
    pub waiter: Arc<Waiter>,
    /// Unix ms when the wait times out; `None` waits forever.
    pub deadline: Option<i64>,
}

/// Parses a blocking command's timeout (seconds, fractions allowed) into
/// milliseconds, 0 meaning forever, with Redis 7.0's checks and texts.
pub fn parse_timeout(a: &[u8]) -> Result<i64, CmdError> {
    match crate::ldouble::timeout_ms(a) {
        None => Err(CmdError::err("timeout is not a float or out of range")),
        Some(ms) if ms < 0 => Err(CmdError::err("timeout is negative")),
        Some(ms) => Ok(ms),
    }
}

/// Whether a command may block: not inside EXEC (Redis runs blocking
/// commands of a transaction as their non-blocking forms).
pub fn may_block(cx: &Ctx) -> bool {
    !cx.sess.in_exec
}

/// Parks the client on `keys` (all empty, checked by the caller under the
/// same locks). The command writes no reply; the connection delivers one
/// when the wait ends.
pub fn block(cx: &mut Ctx, keys: &[&[u8]], op: Op, timeout_ms: i64) {
    let mut distinct: Vec<Box<[u8]>> = Vec::with_capacity(keys.len());
    for k in keys {
        if !distinct.iter().any(|d| &**d == *k) {
            distinct.push((*k).into());
        }
    }
    let w = Arc::new(Waiter {
        handle: cx.sess.handle.clone(),
        db: cx.db,
        keys: distinct,
        op,
        proto: if cx.sess.handle.resp.load(Ordering::Relaxed) == 3 {
            Proto::Resp3
        } else {
            Proto::Resp2
        },
        state: Mutex::new(State::Waiting),
    });
    for k in &w.keys {
        let any: store::Waiter = w.clone();
        cx.keys.stripe(cx.db, k).add_waiter(k, any);
    }
    let deadline = (timeout_ms > 0).then(|| cx.now().saturating_add(timeout_ms));
    *cx.sess.handle.blocked.lock() = Some(w.clone());
    cx.shared.blocked_clients.fetch_add(1, Ordering::Relaxed);
    cx.sess.blocked = Some(Blocked { waiter: w, deadline });
}

/// Serves the clients waiting on `ready` keys (collected from the stripes
/// after a command), including keys that serving itself makes ready
/// (BLMOVE's destination).
pub fn serve_ready(shared: &Shared, ready: &mut Vec<(u32, Box<[u8]>)>) {
    let mut i = 0;
    while i < ready.len() {
        let (id, key) = std::mem::take(&mut ready[i]);
        i += 1;
        serve_key(shared, id, &key, ready);
    }
    ready.clear();
}

/// Serves waiters of one key, oldest first, while it holds a value they
/// can take.
fn serve_key(shared: &Shared, id: u32, key: &[u8], ready: &mut Vec<(u32, Box<[u8]>)>) {
    let store = &shared.store;
    // Bounded: every round serves or drops one waiter, or stops.
    loop {
        let now = unix_ms();
        let mut locks = Locks::new(store, now);
        let mut ids = [id, id];
        let Some(w) = first_servable(&mut locks, id, key, now) else { return };
        if let Op::Move { dst, .. } = &w.op {
            let did = store.global_id(w.db, store.stripe_of(dst));
            if did != id {
                // Relock both stripes in ascending order, then check the
                // same waiter still comes first.
                drop(locks);
                locks = Locks::new(store, now);
                ids[1] = did;
                locks.acquire(&mut ids);
                match first_servable(&mut locks, id, key, now) {
                    Some(again) if Arc::ptr_eq(&again, &w) => {}
                    _ => continue,
                }
            }
        }
        let mut state = w.state.lock();
        if !matches!(*state, State::Waiting) {
            drop(state);
            drop_waiter(&mut locks, id, key, &w);
            continue;
        }
        let mut out = ReplyBuf::new();
        out.proto = w.proto;
        let mut sess = Session::detached(w.handle.id);
        sess.db = w.db;
        let spec = &crate::commands::connection::COMMANDS[0];
        let mut cx = Ctx { shared, sess: &mut sess, keys: &mut locks, db: w.db, spec };
        let res: CmdResult = match &w.op {
            Op::Pop(_) | Op::Move { .. } | Op::MPop { .. } => {
                crate::commands::list::serve_blocked(&mut cx, key, &w.op, &mut out)
            }
            Op::ZPop { .. } | Op::ZMPop { .. } => {
                crate::commands::zset_blocking::serve_blocked(&mut cx, key, &w.op, &mut out)
            }
        };
        if let Err(e) = res {
            out.clear();
            e.write(&mut out);
        }
        *state = State::Served(out.to_vec());
        drop(state);
        drop_waiter(&mut locks, id, key, &w);
        locks.take_ready(ready);
        drop(locks);
        wake(&w.handle);
    }
}

/// The oldest waiting client on `key` that its current value can serve;
/// clients that stopped waiting are dropped from the queue on the way.
fn first_servable(locks: &mut Locks, id: u32, key: &[u8], now: i64) -> Option<Arc<Waiter>> {
    let stripe = locks.stripe_id(id);
    let kind = stripe.get(key, now)?.value.kind();
    let mut found = None;
    stripe.remove_waiters(key, |any| {
        if found.is_some() {
            return false;
        }
        let Some(w) = downcast(any) else { return true };
        if !w.is_waiting() {
            return true;
        }
        if w.op.wants() == kind {
            found = Some(w);
        }
        false
    });
    found
}

fn downcast(any: &store::Waiter) -> Option<Arc<Waiter>> {
    any.clone().downcast::<Waiter>().ok()
}

fn drop_waiter(locks: &mut Locks, id: u32, key: &[u8], w: &Arc<Waiter>) {
    locks.stripe_id(id).remove_waiters(key, |any| is_same(any, w));
}

fn is_same(any: &store::Waiter, w: &Arc<Waiter>) -> bool {
    std::ptr::eq(Arc::as_ptr(any) as *const (), Arc::as_ptr(w) as *const ())
}

fn wake(h: &ClientHandle) {
    if let Some(f) = &*h.waker.lock() {
        f();
    }
}

/// Ends the session's wait if it is over: the reply to deliver, or `None`
/// while still waiting. With `timed_out` a still-waiting client times out.
pub fn resolve(shared: &Shared, sess: &mut Session, now: i64) -> Option<Vec<u8>> {
    let b = sess.blocked.as_ref()?;
    let timed_out = b.deadline.is_some_and(|d| now >= d);
    let w = b.waiter.clone();
    let reply = {
        let mut st = w.state.lock();
        if matches!(*st, State::Waiting) {
            if !timed_out {
                return None;
            }
            *st = State::TimedOut;
        }
        match std::mem::replace(&mut *st, State::Gone) {
            State::Served(bytes) => bytes,
            State::Unblocked { error: true } => {
                b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_vec()
            }
            _ => match w.proto {
                Proto::Resp3 => b"_\r\n".to_vec(),
                Proto::Resp2 => b"*-1\r\n".to_vec(),
            },
        }
    };
    finish(shared, sess, &w);
    Some(reply)
}

/// Abandons the session's wait (the connection is closing).
pub fn abandon(shared: &Shared, sess: &mut Session) {
    let Some(b) = &sess.blocked else { return };
    let w = b.waiter.clone();
    *w.state.lock() = State::Gone;
    finish(shared, sess, &w);
}

/// Removes a finished wait from its keys' queues and the session.
fn finish(shared: &Shared, sess: &mut Session, w: &Arc<Waiter>) {
    let store = &shared.store;
    for k in &w.keys {
        let mut s = store.lock_stripe(w.db, store.stripe_of(k) as usize);
        s.remove_waiters(k, |any| is_same(any, w));
    }
    sess.blocked = None;
    *sess.handle.blocked.lock() = None;
    shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
}

/// `CLIENT UNBLOCK`: ends client `id`'s wait as a timeout or with an
/// error. Returns whether it was blocked.
pub fn unblock(shared: &Shared, id: u64, error: bool) -> bool {
    let Some(h) = shared.clients.lock().get(&id).cloned() else { return false };
    let Some(w) = h.blocked.lock().clone() else { return false };
    let mut st = w.state.lock();
    if !matches!(*st, State::Waiting) {
        return false;
    }
    *st = State::Unblocked { error };
    drop(st);
    wake(&h);
    true
}

/// Whether a client is blocked (CLIENT LIST flag `b`).
pub fn is_blocked(h: &ClientHandle) -> bool {
    h.blocked.lock().is_some()
}
