//! Blocking: clients parked on keys until a write makes one ready. One
//! mechanism for every kind of wait (BLPOP and the other blocking pops,
//! XREAD and XREADGROUP, GETJOB, and WAIT, which waits on no key):
//!
//! 1. A blocking command runs with its keys' stripes locked. If it finds
//!    nothing and its caller may wait ([`Ctx::may_block`]), it calls
//!    [`block`] with the keys, the kind of value that can serve it and its
//!    timeout: a [`Waiter`] holding the command itself is queued on each
//!    key *in the key's stripe*, still under those locks, so no write can
//!    slip between the check and the wait. The connection stops executing
//!    its input until the wait ends.
//! 2. Any change reported through the effects record
//!    ([`Ctx::changed`](crate::core::ctx::Ctx::changed)) of a key with waiters
//!    queues it as ready in its stripe. When the writing command — or the
//!    whole EXEC — ends, the writer's thread serves the waiters of each
//!    ready key in arrival order, before its own next command: the waiter's
//!    command runs again through the door ([`crate::core::door::run`] with
//!    [`Caller::Served`]) with its real table entry, limited to the ready
//!    key, so its effects (a served `BLPOP` propagates as `LPOP`) and stats
//!    are recorded like any command's. A waiter whose run finds nothing
//!    for it (a stream reader waiting past the id just added) keeps
//!    waiting, and the ones queued behind it are still tried. Its reply, in the client's
//!    protocol, goes to the client's [outbox](crate::core::outbox) and the
//!    client's connection is woken to deliver it.
//! 3. A waiter also ends by timeout, `CLIENT UNBLOCK`, or its connection
//!    closing. Every end goes through the waiter's state mutex, so exactly
//!    one of "served" and "timed out/unblocked/gone" wins; the blocked
//!    connection then removes its queue entries from every key.
//!
//! Waiters are keyed by namespace and name: a database and a key, or a
//! job queue name in the job namespace's stripe ([`block_on_queues`],
//! whose waiters run again on any queueing). A new kind of
//! wait needs no change here: its command blocks with [`block`], and, when
//! run again as [`Caller::Served`], serves from [`Ctx::waited_keys`] or
//! calls [`block`] again to keep waiting.
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
use smallvec::SmallVec;
use store::{Kind, Locks};

use crate::core::ctx::Ctx;
use crate::core::dispatch::{self, Caller};
use crate::core::error::CmdError;
use crate::core::outbox;
use crate::core::session::{ClientHandle, Session};
use crate::core::shared::Shared;
use crate::core::spec::CommandSpec;

/// How a wait stands.
#[derive(Debug)]
enum State {
    Waiting,
    /// Served: the reply is in the client's outbox.
    Served,
    TimedOut,
    Unblocked {
        error: bool,
    },
    /// Ended by the server with an error line (without its `-`): a key
    /// whose slot moved away (Redis's
    /// `clusterRedirectBlockedClientIfNeeded`), or this master becoming a
    /// replica (`disconnectAllBlockedClients`, which also closes the
    /// connection once the error is written: `close`).
    Refused {
        text: Box<str>,
        close: bool,
    },
    /// The client went away.
    Gone,
}

/// One blocked client, queued on each of its keys.
pub struct Waiter {
    pub handle: Arc<ClientHandle>,
    /// The client's database (the namespace of its keys unless `jobs`).
    pub db: usize,
    /// Its keys are job queue names, waited on in the job namespace's
    /// stripe (GETJOB).
    pub jobs: bool,
    /// Distinct keys, in the command's order.
    pub keys: Vec<Box<[u8]>>,
    /// The type of value that can serve it.
    pub wants: Kind,
    /// Also run again when the key goes or changes type (XREADGROUP,
    /// which then ends with an error, as Redis 7.0 does).
    pub when_gone: bool,
    /// The command, run again when a key is ready.
    pub spec: &'static CommandSpec,
    pub argv: Vec<Box<[u8]>>,
    pub proto: Proto,
    /// A wait on no key (WAIT): its reply when it times out or is
    /// unblocked, instead of a null.
    pub on_timeout: Option<TimeoutReply>,
    /// The client had sent READONLY (cluster mode): a replica may keep
    /// serving its read while its slot stays with this node's master.
    pub readonly: bool,
    state: Mutex<State>,
}

/// Builds a keyless wait's reply when it times out.
pub type TimeoutReply = Box<dyn Fn() -> Vec<u8> + Send + Sync>;

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
    match crate::subsystems::ldouble::timeout_ms(a) {
        None => Err(CmdError::err("timeout is not a float or out of range")),
        Some(ms) if ms < 0 => Err(CmdError::err("timeout is negative")),
        Some(ms) => Ok(ms),
    }
}

/// Parks the client on `keys` (all of which the command found unable to
/// serve it, under the same locks) until one holds a value of kind
/// `wants`. The command writes no reply; the connection delivers one when
/// the wait ends. Run again as a served waiter, the command keeps waiting.
pub fn block(cx: &mut Ctx, argv: &[&[u8]], keys: &[&[u8]], wants: Kind, timeout_ms: i64) {
    block_with(cx, argv, keys, wants, false, timeout_ms);
}

/// [`block`], and with `when_gone` the command also runs again when one
/// of its keys is deleted or no longer holds a `wants` value.
pub fn block_with(
    cx: &mut Ctx,
    argv: &[&[u8]],
    keys: &[&[u8]],
    wants: Kind,
    when_gone: bool,
    timeout_ms: i64,
) {
    park(cx, argv, keys, wants, when_gone, false, timeout_ms);
}

/// Parks the client on job queues (GETJOB): like [`block`], with the
/// queue names as keys of the job namespace. Any queueing in one of them
/// runs the command again (it takes one job, or keeps waiting).
pub fn block_on_queues(cx: &mut Ctx, argv: &[&[u8]], queues: &[&[u8]], timeout_ms: i64) {
    park(cx, argv, queues, Kind::String, true, true, timeout_ms);
}

fn park(
    cx: &mut Ctx,
    argv: &[&[u8]],
    keys: &[&[u8]],
    wants: Kind,
    when_gone: bool,
    jobs: bool,
    timeout_ms: i64,
) {
    if cx.caller.serves_waiter() {
        cx.still_waiting = true;
        return;
    }
    debug_assert!(cx.caller.may_block());
    let mut distinct: Vec<Box<[u8]>> = Vec::with_capacity(keys.len());
    for k in keys {
        if !distinct.iter().any(|d| &**d == *k) {
            distinct.push((*k).into());
        }
    }
    let w = Arc::new(Waiter {
        handle: cx.sess.handle.clone(),
        db: cx.db,
        jobs,
        keys: distinct,
        wants,
        when_gone,
        spec: cx.spec,
        argv: argv.iter().map(|a| Box::<[u8]>::from(*a)).collect(),
        proto: if cx.sess.handle.resp.load(Ordering::Relaxed) == 3 {
            Proto::Resp3
        } else {
            Proto::Resp2
        },
        on_timeout: None,
        readonly: cx.sess.cluster_readonly,
        state: Mutex::new(State::Waiting),
    });
    for k in &w.keys {
        let any: store::Waiter = w.clone();
        let id = cx.shared.store.wait_id(cx.db, k, jobs);
        cx.keys.stripe_id(id).add_waiter(k, any);
    }
    let deadline = (timeout_ms > 0).then(|| cx.now().saturating_add(timeout_ms));
    *cx.sess.handle.blocked.lock() = Some(w.clone());
    cx.shared.blocked_clients.fetch_add(1, Ordering::Relaxed);
    cx.sess.blocked = Some(Blocked { waiter: w, deadline });
}

/// Parks the client on no key (WAIT): whoever the wait is for ends it
/// with [`serve_keyless`]; on timeout (or CLIENT UNBLOCK) its reply is
/// `on_timeout`'s. A `timeout_ms` of 0 waits forever.
pub fn block_keyless(
    cx: &mut Ctx,
    argv: &[&[u8]],
    timeout_ms: i64,
    on_timeout: TimeoutReply,
) -> Arc<Waiter> {
    let w = Arc::new(Waiter {
        handle: cx.sess.handle.clone(),
        db: cx.db,
        jobs: false,
        keys: Vec::new(),
        wants: Kind::String,
        when_gone: false,
        spec: cx.spec,
        argv: argv.iter().map(|a| Box::<[u8]>::from(*a)).collect(),
        proto: if cx.sess.handle.resp.load(Ordering::Relaxed) == 3 {
            Proto::Resp3
        } else {
            Proto::Resp2
        },
        on_timeout: Some(on_timeout),
        readonly: cx.sess.cluster_readonly,
        state: Mutex::new(State::Waiting),
    });
    let deadline = (timeout_ms > 0).then(|| cx.now().saturating_add(timeout_ms));
    *cx.sess.handle.blocked.lock() = Some(w.clone());
    cx.shared.blocked_clients.fetch_add(1, Ordering::Relaxed);
    cx.sess.blocked = Some(Blocked { waiter: w.clone(), deadline });
    w
}

/// Ends a keyless wait with `reply` (queued to the client's outbox, the
/// connection woken). False when the wait had already ended.
pub fn serve_keyless(w: &Waiter, reply: Vec<u8>) -> bool {
    let mut st = w.state.lock();
    if !matches!(*st, State::Waiting) {
        return false;
    }
    *st = State::Served;
    w.handle.outbox.push(outbox::Kind::Reply, reply);
    drop(st);
    wake(&w.handle);
    true
}

/// Whether a wait is still on (a keyless wait's owner drops ended ones).
pub fn still_waiting(w: &Waiter) -> bool {
    w.is_waiting()
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
    // Waiters that ran and keep waiting (a stream reader whose id is past
    // what was added): the ones behind them are still tried.
    let mut skip: Vec<Arc<Waiter>> = Vec::new();
    // Bounded: every round serves, drops or skips one waiter, or stops.
    loop {
        let now = shared.clock.now_ms();
        let mut locks = Locks::new(store, now);
        if locks.acquire(&mut [id]).is_err() {
            return;
        }
        let Some(w) = first_servable(&mut locks, id, key, now, &skip) else { return };
        let argv: SmallVec<[&[u8]; 8]> = w.argv.iter().map(|a| &a[..]).collect();
        // Every stripe the command needs (BLMOVE's destination too).
        let mut ids: SmallVec<[u32; 8]> = SmallVec::new();
        dispatch::key_ids(shared, w.db, w.spec, &argv, &mut ids);
        if ids.iter().any(|&x| x != id) {
            // Relock them all in ascending order, then check the same
            // waiter still comes first.
            drop(locks);
            locks = Locks::new(store, now);
            ids.push(id);
            if locks.acquire(&mut ids).is_err() {
                return;
            }
            match first_servable(&mut locks, id, key, now, &skip) {
                Some(again) if Arc::ptr_eq(&again, &w) => {}
                _ => continue,
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
        let mut sess = Session::served(w.handle.clone(), w.db, key);
        sess.fx.sync(&shared.effects);
        // The slow log sees a served command as Redis's does.
        sess.slow_us = crate::subsystems::slowlog::slow_threshold(&shared.config.read());
        // Through the door as any caller's, with the stripes held above.
        let waiting = match crate::core::door::run(
            shared,
            &mut sess,
            &mut locks,
            w.spec,
            &argv,
            &mut out,
            Caller::Served,
            crate::core::door::Hold::Held,
        ) {
            crate::core::door::Ran::Waiting => true,
            crate::core::door::Ran::Refused(e) => {
                e.write(&mut out);
                false
            }
            crate::core::door::Ran::Stopped(text) => {
                out.error(&text);
                false
            }
            crate::core::door::Ran::Done | crate::core::door::Ran::Queued => false,
        };
        if waiting {
            sess.fx.finish_unit();
            // It could not take what is there after all: it keeps waiting
            // until the key changes again; the next one may still take it.
            drop(state);
            skip.push(w.clone());
            continue;
        }
        *state = State::Served;
        // The reply goes ahead of what the unit's consumers push to this
        // client: the invalidation of a key its own command wrote (BLMOVE's
        // destination) follows the reply, as in Redis.
        w.handle.outbox.push(outbox::Kind::Reply, out.to_vec());
        sess.fx.finish_unit();
        drop(state);
        drop_waiter(&mut locks, id, key, &w);
        ready.append(&mut sess.ready);
        drop(locks);
        shared.flush_stats(&mut sess);
        wake(&w.handle);
    }
}

/// The oldest waiting client on `key` that its current value can serve;
/// clients that stopped waiting are dropped from the queue on the way.
/// Looks without expiring: the served command itself meets the key.
fn first_servable(
    locks: &mut Locks,
    id: u32,
    key: &[u8],
    now: i64,
    skip: &[Arc<Waiter>],
) -> Option<Arc<Waiter>> {
    let stripe = locks.stripe_id(id);
    let kind = match stripe.peek(key) {
        Some(e) if !e.has_ttl() || !stripe.is_expired(key, now) => Some(e.value.kind()),
        _ => None,
    };
    let mut found = None;
    stripe.remove_waiters(key, |any| {
        if found.is_some() {
            return false;
        }
        let Some(w) = downcast(any) else { return true };
        if !w.is_waiting() {
            return true;
        }
        let servable = Some(w.wants) == kind || w.when_gone;
        if servable && !skip.iter().any(|s| Arc::ptr_eq(s, &w)) {
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

/// Ends the session's wait if it is over: `Some(reply)` to deliver (empty
/// when the reply already waits in the outbox), or `None` while still
/// waiting. A still-waiting client whose deadline passed times out: in
/// the millisecond after it, as Redis's `timeout < now` (a wait of 100 ms
/// never answers in 99.x).
pub fn resolve(shared: &Shared, sess: &mut Session, now: i64) -> Option<Vec<u8>> {
    let b = sess.blocked.as_ref()?;
    let timed_out = b.deadline.is_some_and(|d| now > d);
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
            // Counted by the call that served it (a keyless wait's
            // server runs no call: counted now).
            State::Served => {
                if w.on_timeout.is_some() {
                    dispatch::count_call(shared, sess, w.spec, 0, false);
                }
                Vec::new()
            }
            State::Refused { text, close } => {
                // As Redis counts it: the error, and the call (not as a
                // failed one: the reply was not the command's).
                shared.cmdstats.error(text.as_bytes());
                dispatch::count_call(shared, sess, w.spec, 0, false);
                sess.close_after_reply |= close;
                [&b"-"[..], text.as_bytes(), b"\r\n"].concat()
            }
            State::Unblocked { error: true } => {
                let text = b"UNBLOCKED client unblocked via CLIENT UNBLOCK";
                shared.cmdstats.error(text);
                dispatch::count_call(shared, sess, w.spec, 0, true);
                [&b"-"[..], text, b"\r\n"].concat()
            }
            st => {
                // The call ends now. Redis 7.0 counts a command ended by
                // CLIENT UNBLOCK as failed even without an error.
                let unblocked = matches!(st, State::Unblocked { .. });
                dispatch::count_call(shared, sess, w.spec, 0, unblocked && w.on_timeout.is_none());
                match (&w.on_timeout, w.proto) {
                    (Some(f), _) => f(),
                    (None, Proto::Resp3) => b"_\r\n".to_vec(),
                    (None, Proto::Resp2) => b"*-1\r\n".to_vec(),
                }
            }
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
        let mut s = if w.jobs {
            store.lock_stripe(store.databases(), 0)
        } else {
            store.lock_stripe(w.db, store.stripe_of(k) as usize)
        };
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

/// Ends a wait with the error line `text` (without its `-`), the
/// connection closed after it when `close`. False when the wait had
/// already ended.
pub fn refuse(w: &Waiter, text: &str, close: bool) -> bool {
    let mut st = w.state.lock();
    if !matches!(*st, State::Waiting) {
        return false;
    }
    *st = State::Refused { text: text.into(), close };
    drop(st);
    wake(&w.handle);
    true
}

/// Every client's current wait (cheap when nobody waits: one load).
pub fn all_waiters(shared: &Shared) -> Vec<Arc<Waiter>> {
    if shared.blocked_clients.load(Ordering::Relaxed) == 0 {
        return Vec::new();
    }
    // The registry's lock is not held while a handle's wait is looked at.
    let handles: Vec<Arc<ClientHandle>> = shared.clients.lock().values().cloned().collect();
    handles.iter().filter_map(|h| h.blocked.lock().clone()).collect()
}

/// Redis's `disconnectAllBlockedClients`, when this server starts
/// following a master (REPLICAOF, FAILOVER, a cluster node turned
/// replica): every blocked client gets `-UNBLOCKED` and its connection
/// closes after it. Returns how many.
pub fn refuse_all_for_replica(shared: &Shared) -> usize {
    all_waiters(shared)
        .iter()
        .filter(|w| {
            refuse(
                w,
                "UNBLOCKED force unblock from blocking operation, instance state changed \
                 (master -> replica?)",
                true,
            )
        })
        .count()
}

/// Whether a client is blocked (CLIENT LIST flag `b`).
pub fn is_blocked(h: &ClientHandle) -> bool {
    h.blocked.lock().is_some()
}
