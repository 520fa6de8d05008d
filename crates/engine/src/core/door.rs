//! The one door a command goes through, whoever runs it: a client's
//! request (`dispatch::execute_hinted`), a replay from the AOF or a
//! master (`dispatch::replay`), a queued command under `EXEC`
//! (`commands/tx.rs`), a served blocked client (`blocking::serve_key`)
//! and `redis.call` (`script::vm`).
//!
//! [`lookup`] finds the command; [`run`] applies the caller's checks, queues
//! it inside `MULTI`, locks what it needs, calls the handler and counts
//! what happened (commandstats, the slow log and the latency monitor
//! through `dispatch::call`, rejected calls here). A caller says only who
//! it is ([`Caller`]) and how it holds the stripes ([`Hold`]); how it words
//! a refusal and when its execution unit ends are its own. It must not
//! know any command family.

use resp::ReplyBuf;
use smallvec::SmallVec;
use store::Locks;

use crate::core::dispatch::{self, Caller, Scope};
use crate::core::error::CmdError;
use crate::core::session::Session;
use crate::core::shared::Shared;
use crate::core::spec::{CommandSpec, Flags, KeySpec};

/// How a caller holds the stripes its command needs: the one thing the
/// callers differ in once the command is found. `W` is the widening
/// caller's type: a script names its own ([`run_with`]), so that its
/// checks are inlined into the door rather than called through a vtable
/// on each `redis.call`.
pub enum Hold<'h, W: Widen + ?Sized = dyn Widen> {
    /// Nothing is held yet: take what the command needs, in order. With
    /// the connection's prefetch of `argv[1]` a single-key command takes
    /// its one stripe without building a list.
    Take(Option<store::Prefetch>),
    /// Nothing is held, and what is needed is taken only if free at once
    /// (a client's keyed command while a script is busy: the script may
    /// hold those stripes until it ends). Not free: BUSY.
    TakeIfFree,
    /// The caller holds what it locked up front (EXEC's union, a served
    /// waiter's stripes): the command's stripes are checked to be held or
    /// taken in order, never waited for out of order.
    Held,
    /// A script: what it locked before it started, which a command
    /// outside it widens (the run restarts if it has not written yet).
    Widen(&'h mut W),
}

/// What a caller that may widen its locks decides (a script run).
pub trait Widen {
    /// Whether the stripes `ids` (or the whole scope `need`) of database
    /// `db` lie within what the caller locked; `Err` stops the command
    /// with the caller's text (the run restarts with a wider scope).
    fn cover(&mut self, keys: &Locks, db: usize, need: Scope, ids: &[u32]) -> Result<(), Vec<u8>>;
    /// The command's stripes are held and its handler is next.
    fn locked<'a>(
        &mut self,
        shared: &'a Shared,
        sess: &mut Session,
        keys: &mut Locks<'a>,
        spec: &'static CommandSpec,
        argv: &[&[u8]],
    ) -> Result<(), Vec<u8>>;
}

/// What became of a command at the door.
#[derive(Debug, PartialEq, Eq)]
pub enum Ran {
    /// The handler ran (its reply or error is written).
    Done,
    /// The handler ran and waits: a client's blocking command blocked, or
    /// a served one found nothing it can take after all.
    Waiting,
    /// Queued inside `MULTI` (`QUEUED` is written).
    Queued,
    /// Refused before the handler ran, and counted (rejected calls, the
    /// error stats); the caller writes it as it words refusals.
    Refused(CmdError),
    /// Stopped by the caller's own rule before the handler ran (a script
    /// that restarts); not counted.
    Stopped(Vec<u8>),
}

/// A command that was not found, or found with the wrong arity.
pub struct NotFound {
    /// The command when it exists (wrong arity): its rejected call counts.
    pub spec: Option<&'static CommandSpec>,
    pub error: CmdError,
}

/// Finds the command (or subcommand) for `argv` and checks its arity, for
/// a caller that runs a session's own requests (a client, a replay): a
/// pipeline mostly repeats its command, so the session's previous one is
/// tried first (a top-level command without subcommands, same name), and
/// what is found becomes the session's last command.
// Inlined: on a client's pipeline this is the whole lookup.
#[inline(always)]
pub fn lookup_next(
    shared: &Shared,
    sess: &mut Session,
    argv: &[&[u8]],
) -> Result<&'static CommandSpec, NotFound> {
    if let Some((top, spec)) = sess.last_cmd {
        if std::ptr::eq(top, spec)
            && top.subcommands.is_empty()
            && (sess.last_name.is(argv[0]) || dispatch::is_name(argv[0], top.name))
            && spec.arity.accepts(argv.len())
        {
            return Ok(spec);
        }
    }
    let (top, spec) = lookup_full(shared, argv)?;
    // The repeat above matches by the command's own name, which a
    // renamed command no longer answers to.
    sess.last_cmd =
        if crate::core::table::is_renamed(shared, top) { None } else { Some((top, spec)) };
    sess.last_name.set(argv[0]);
    Ok(spec)
}

/// Finds the command (or subcommand) for `argv` and checks its arity.
pub fn lookup(shared: &Shared, argv: &[&[u8]]) -> Result<&'static CommandSpec, NotFound> {
    lookup_full(shared, argv).map(|(_, spec)| spec)
}

fn lookup_full(
    shared: &Shared,
    argv: &[&[u8]],
) -> Result<(&'static CommandSpec, &'static CommandSpec), NotFound> {
    dispatch::lookup_full(shared, argv).map_err(|error| {
        // A known command with the wrong arity is still itself (a bad
        // EXEC aborts the transaction) and counts a rejected call; an
        // unknown command or subcommand counts nowhere.
        let spec =
            match &error {
                CmdError::WrongArity(_) => shared.table.find(argv[0]).map(|top| {
                    match top.subcommands.iter().find(|s| {
                        argv.len() >= 2 && argv[1].eq_ignore_ascii_case(s.name.as_bytes())
                    }) {
                        Some(s) => s,
                        None => top,
                    }
                }),
                _ => None,
            };
        NotFound { spec, error }
    })
}

/// Runs `spec` for `caller`: its checks (a client's were made by the
/// connection layer, where `CLIENT PAUSE` and its pushes interleave with
/// them), `MULTI` queueing, locking as `hold` says, the handler and its
/// accounting. The execution unit is the caller's to end.
// Inlined into each caller, so that a client's request (the fast path:
// caller and hold known there) pays for no call and no branch it does not
// take.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn run<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    caller: Caller,
    hold: Hold<'_>,
) -> Ran {
    run_with(shared, sess, keys, spec, argv, out, caller, hold)
}

/// [`run`] for a caller that widens its locks with a [`Widen`] of its own
/// type (a script run): the same door, its `cover` and `locked` called
/// directly.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn run_with<'a, W: Widen + ?Sized>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    caller: Caller,
    hold: Hold<'_, W>,
) -> Ran {
    if caller != Caller::Client {
        if let Err(e) = dispatch::check(shared, sess, spec, argv, caller) {
            return refused(shared, sess, spec, e);
        }
    }
    if sess.multi.is_some() && !spec.flags.has(Flags::NO_QUEUE) {
        queue(shared, sess, spec, argv, out);
        return Ran::Queued;
    }
    // A replay-only command is refused to every other caller here, where
    // all of them pass: alone, run by EXEC (queued, it is refused when
    // the transaction runs, as it would be alone), from a script.
    if spec.flags.has(Flags::REPLAY_ONLY) && !caller.must_obey() {
        return refused(shared, sess, spec, CmdError::ReplayOnly(spec.name));
    }
    let db = sess.db;
    let mut remembered = false;
    let locked = match hold {
        Hold::Take(Some(t))
            if argv.len() > 1
                && matches!(spec.keys, KeySpec::Range { first: 1, .. })
                && shared.store.db_of(t.id()) == db =>
        {
            keys.remember(argv[1], t);
            if dispatch::single_key(spec, argv.len()) {
                // GET, SET, INCR, LPUSH, ...: one stripe, nothing held yet.
                keys.acquire_first(t.id()).map_err(|_| CmdError::LockOrder)
            } else {
                dispatch::lock_keys_hinted(shared, db, spec, argv, keys, t.id())
            }
        }
        // PING, ECHO, CLIENT ...: nothing to lock (`lock_keys` would find
        // no ids and take none, in some 90 instructions).
        Hold::Take(_) | Hold::Held if matches!(spec.keys, KeySpec::None) => Ok(()),
        Hold::Take(_) | Hold::Held => dispatch::lock_keys(shared, db, spec, argv, keys),
        Hold::TakeIfFree => {
            if dispatch::busy_keyed(shared, db, spec, argv, keys) {
                Ok(())
            } else {
                Err(shared.scripts.busy_error())
            }
        }
        Hold::Widen(w) => {
            // The first key's stripe and hash, found once: the handler
            // finds its entry through them, as a client's command does
            // with the connection's prefetch.
            let token = match spec.keys {
                KeySpec::Range { first: 1, .. } if argv.len() > 1 => {
                    shared.store.prefetch_token(db, argv[1])
                }
                _ => None,
            };
            let mut ids: SmallVec<[u32; 8]> = SmallVec::new();
            let need = match token {
                Some(t) => {
                    dispatch::range_ids_hinted(shared, db, spec, argv, t.id(), &mut ids);
                    Scope::Keys
                }
                None => dispatch::key_ids(shared, db, spec, argv, &mut ids),
            };
            if let Err(text) = w.cover(keys, db, need, &ids) {
                return Ran::Stopped(text);
            }
            // A handler that walks the database locks what it walks.
            let walk = matches!(spec.keys, KeySpec::DbWalk) && keys.is_empty();
            let r =
                if walk { Ok(()) } else { dispatch::lock_ids(shared, db, need, &mut ids, keys) };
            if r.is_ok() {
                if let Err(text) = w.locked(shared, sess, keys, spec, argv) {
                    return Ran::Stopped(text);
                }
                match token {
                    Some(t) => keys.remember(argv[1], t),
                    None => keys.forget(),
                }
                remembered = true;
            }
            r
        }
    };
    if let Err(e) = locked {
        return refused(shared, sess, spec, e);
    }
    // Set only by a cluster node's routing, for a command with keys.
    if sess.cluster_slot.is_some() && caller == Caller::Client {
        if let Some(c) = shared.cluster.get() {
            let gate = crate::subsystems::cluster::gate::recheck;
            if let Err(e) = gate(shared, c, sess, spec, argv, keys) {
                return refused(shared, sess, spec, e);
            }
        }
    }
    // A client's request (the connection's pipeline) runs the handler
    // inline; every other caller through the one out-of-line copy.
    let waits = if caller == Caller::Client {
        dispatch::call_inline(shared, sess, keys, spec, argv, out, caller)
    } else {
        dispatch::call(shared, sess, keys, spec, argv, out, caller)
    };
    if remembered {
        // The argument's bytes are the caller's (a script's string may
        // take their place): nothing of them is kept past the call.
        keys.forget();
    }
    if waits {
        Ran::Waiting
    } else {
        Ran::Done
    }
}

/// Counts a command refused before its handler ran: the session's
/// rejected calls, the command's, and the error line's.
#[cold]
pub fn refused(
    shared: &Shared,
    sess: &mut Session,
    spec: &'static CommandSpec,
    e: CmdError,
) -> Ran {
    sess.stats.rejected_calls += 1;
    dispatch::count_rejected(shared, sess, spec);
    shared.cmdstats.error(&e.text());
    Ran::Refused(e)
}

/// Queues a command inside `MULTI` (a client's, or a replayed
/// transaction's), and writes `QUEUED`.
fn queue(
    shared: &Shared,
    sess: &mut Session,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
) {
    let Some(m) = &mut sess.multi else { return };
    // A script's declared flags count, not its command's.
    let flags = crate::subsystems::script::call_flags(shared, spec, argv);
    m.flags = m.flags.union(flags);
    m.inv_flags = m.inv_flags.union(Flags(!flags.0));
    m.queued.push(argv.iter().map(|a| a.to_vec()).collect());
    sess.handle.multi_len.store(m.queued.len() as i64, std::sync::atomic::Ordering::Relaxed);
    // CLIENT LIST's multi-mem, counted as Redis's argv_len_sums.
    let mem = argv.iter().map(|a| a.len() + 8).sum::<usize>();
    sess.handle.multi_mem.fetch_add(mem, std::sync::atomic::Ordering::Relaxed);
    out.simple(b"QUEUED");
}
