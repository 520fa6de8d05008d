//! The dispatcher: every policy between "a request was parsed" and "a
//! handler runs", in three layers (`docs/architecture.md`, *The seams*):
//!
//! 1. the connection layer, [`execute`]: a client's checks, `CLIENT
//!    PAUSE`, reply modes, serving the clients a write made ready — what
//!    only a client's own requests go through;
//! 2. [`check`]: every table flag, for a given [`Caller`] (a client, an
//!    `EXEC`, a script, an AOF replay, a served blocked client);
//! 3. [`call`]: the handler with its locks held, its effects record
//!    closed ([`crate::core::effects`]) and its stats counted.
//!
//! Every caller reaches `check` and `call` through the one door,
//! [`crate::core::door::run`], never around it. Commands are told apart by
//! their flags, not their names; callers by their predicates.

use resp::ReplyBuf;
use smallvec::SmallVec;
use store::Locks;

use crate::core::cmdstats;
use crate::core::ctx::{Args, Ctx};
use crate::core::door::{Hold, Ran};
use crate::core::error::CmdError;
use crate::core::session::{ReplyMode, Session};
use crate::core::shared::Shared;
use crate::core::spec::{CommandSpec, Flags, KeySpec};
use crate::core::table;

/// Who runs a command: the policies of [`check`] and what a handler may
/// ask of its caller (the predicates below) depend on it. Handlers ask
/// the predicates, never which caller it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A client's own request.
    Client,
    /// A command queued in a client's `MULTI`, run by `EXEC`. (A
    /// replayed transaction's commands run as [`Caller::Replay`]: the
    /// origin survives `EXEC`.)
    Exec,
    /// `redis.call` from a script; `read_only` for `EVAL_RO`/`FCALL_RO`
    /// (or a `no-writes` script), `allow_oom` for an `allow-oom` one;
    /// `dirty` once the script wrote (the server's state no longer
    /// refuses its writes: Redis's `SCRIPT_WRITE_DIRTY`); `obeys` when
    /// the script itself was replayed (Redis's `mustObeyClient` of the
    /// script's caller); `cross_slot` when its commands may reach keys of
    /// several slots in cluster mode (a script without a shebang, or one
    /// flagged `allow-cross-slot-keys`).
    Script { read_only: bool, allow_oom: bool, dirty: bool, obeys: bool, cross_slot: bool },
    /// A command read back from the AOF (or a master's stream).
    Replay,
    /// A blocked client's command, run again because a key it waits on is
    /// ready (the writer's thread runs it).
    Served,
}

impl Caller {
    /// Whether a blocking command may wait (only a client's own request
    /// may; the others run blocking commands as their non-blocking forms).
    #[inline]
    pub fn may_block(self) -> bool {
        self == Caller::Client
    }

    /// Whether the caller expects one reply per command and may not be
    /// left waiting or streaming (Redis's `CLIENT_DENY_BLOCKING`: EXEC,
    /// scripts, the AOF's client): MONITOR, SHUTDOWN without NOW, and
    /// subscribing refuse it.
    #[inline]
    pub fn denies_blocking(self) -> bool {
        !matches!(self, Caller::Client | Caller::Served)
    }

    /// Whether the command must be applied as written, without the limits
    /// a client gets (Redis's `mustObeyClient`: the AOF's client and a
    /// master's): replay-only commands run, written-out bounds are taken
    /// as they are.
    #[inline]
    pub fn must_obey(self) -> bool {
        self == Caller::Replay
    }

    /// Whether the command runs from a client's `EXEC` (Redis's
    /// `CLIENT_MULTI` during `execCommand`).
    #[inline]
    pub fn in_exec(self) -> bool {
        self == Caller::Exec
    }

    /// Whether a script runs the command (Redis's `CLIENT_SCRIPT`).
    #[inline]
    pub fn in_script(self) -> bool {
        matches!(self, Caller::Script { .. })
    }

    /// Whether this is a blocked client's command run again to serve it.
    #[inline]
    pub fn serves_waiter(self) -> bool {
        self == Caller::Served
    }

    /// Whether the command is a client's own request, run alone: its
    /// reply goes straight to the client and it holds no caller's locks.
    #[inline]
    pub fn is_request(self) -> bool {
        self == Caller::Client
    }

    /// The caller a transaction's queued commands run as: a replayed
    /// transaction obeys as the replay does; a client's runs as `EXEC`,
    /// so what a client may not run alone it may not run queued either.
    #[inline]
    pub fn for_queued(self) -> Caller {
        if self.must_obey() {
            Caller::Replay
        } else {
            Caller::Exec
        }
    }
}

/// Result of looking a request up in the table.
pub enum Lookup {
    Found(&'static CommandSpec),
    /// Not a command: the full error text is ready.
    Rejected(CmdError),
}

/// Finds the command (or subcommand) for `argv` and checks its arity.
pub fn lookup(shared: &Shared, argv: &[&[u8]]) -> Lookup {
    match lookup_full(shared, argv) {
        Ok((_, spec)) => Lookup::Found(spec),
        Err(e) => Lookup::Rejected(e),
    }
}

/// Like [`lookup`], also returning the top-level command of a subcommand.
pub fn lookup_full(
    shared: &Shared,
    argv: &[&[u8]],
) -> Result<(&'static CommandSpec, &'static CommandSpec), CmdError> {
    let Some(top) = table::find_called(shared, argv[0]) else {
        return Err(unknown_command(argv));
    };
    let spec = if !top.subcommands.is_empty() && argv.len() >= 2 {
        match top.subcommands.iter().find(|s| argv[1].eq_ignore_ascii_case(s.name.as_bytes())) {
            Some(s) => s,
            None => {
                return Err(CmdError::UnknownSubcommand {
                    sub: argv[1].to_vec(),
                    cmd: argv[0].to_ascii_uppercase(),
                })
            }
        }
    } else {
        top
    };
    if !spec.arity.accepts(argv.len()) {
        return Err(CmdError::WrongArity(full_name(top, spec)));
    }
    Ok((top, spec))
}

/// Lower-case full name (`get`, `config|get`), as Redis's error texts use.
pub fn full_name(top: &CommandSpec, spec: &CommandSpec) -> String {
    if std::ptr::eq(top, spec) {
        top.name.to_ascii_lowercase()
    } else {
        format!("{}|{}", top.name.to_ascii_lowercase(), spec.name.to_ascii_lowercase())
    }
}

fn unknown_command(argv: &[&[u8]]) -> CmdError {
    // Redis formats with %s, which stops at a NUL byte.
    let cstr = |b: &[u8]| -> Vec<u8> { b.iter().copied().take_while(|&c| c != 0).collect() };
    let mut args: Vec<u8> = Vec::new();
    for a in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let a = cstr(a);
        args.push(b'\'');
        args.extend_from_slice(&a[..a.len().min(room)]);
        args.extend_from_slice(b"' ");
    }
    let name = cstr(argv[0]);
    let mut v = b"ERR unknown command '".to_vec();
    v.extend_from_slice(&name[..name.len().min(128)]);
    v.extend_from_slice(b"', with args beginning with: ");
    v.extend_from_slice(&args);
    CmdError::Bytes(v)
}

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answered (or queued, or the client is now blocked).
    Done,
    /// Held by `CLIENT PAUSE`: nothing ran; the connection retries it once
    /// the pause changes or ends.
    Paused,
    /// A command that reports every client's state (`Flags::AFTER_INPUT`)
    /// and a caller that asked ([`Hint::after_input`]): nothing ran; the
    /// connection lets the other event-loop threads take in their input,
    /// then runs it without the hint.
    AfterInput,
    /// Answered on the lean path ([`Hint::lean`]): the caller may keep
    /// taking it for the window's next requests. Any other outcome
    /// means the general path ran, which may have changed what the
    /// window's gate decided ([`lean_gate`]).
    Lean,
}

/// Executes one request and appends its reply to `out`.
pub fn execute(shared: &Shared, sess: &mut Session, argv: &[&[u8]], out: &mut ReplyBuf) -> Outcome {
    execute_hinted(shared, sess, argv, out, Hint::default())
}

/// What the connection already computed for a request: the batch's clock
/// and where `argv[1]` lives (from its prefetch), so that the dispatcher
/// and the handler need not recompute them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hint {
    /// Unix ms for the command's clock; 0 to read the clock here.
    pub now: i64,
    /// Stripe and hash of `argv[1]` in the selected database.
    pub key: Option<store::Prefetch>,
    /// The caller can let the other event-loop threads take in their
    /// input before a command that reports every client's state (a
    /// connection on a server with more than one thread).
    pub after_input: bool,
    /// The caller's [`lean_gate`] held when its window began, and no
    /// request since left the lean path: a plain single-key command may
    /// skip the general path's per-command tests.
    pub lean: bool,
}

/// Flags that keep a command off the lean path: each one calls for a
/// test of the general path (blocking, scripts, pub/sub, the database
/// switch, DEBUG's gate, INFO's wait for other threads, CLIENT
/// CACHING's carry-over, keys found from arguments or beyond them).
const NOT_LEAN: Flags = Flags::BLOCKING
    .union(Flags::PUBSUB)
    .union(Flags::ADMIN)
    .union(Flags::MOVABLEKEYS)
    .union(Flags::RUNS_SCRIPT)
    .union(Flags::EXEC_TX)
    .union(Flags::CHANGES_DB)
    .union(Flags::KEEPS_CACHING)
    .union(Flags::PROTECTED)
    .union(Flags::TOUCHES_ARBITRARY_KEYS)
    .union(Flags::REPLAY_ONLY)
    .union(Flags::AFTER_INPUT);

/// Whether a connection's window of requests may take the lean path
/// ([`Hint::lean`]): nothing about the session calls for the general
/// path's per-command tests. No client checks are due (authenticated,
/// an unrestricted user, outside MULTI, no maxmemory, loading, pause,
/// busy script, read-only replica, disk error or cluster: the session's
/// cached `plain`, whose configuration epoch the lean path compares on
/// every request), no request held by a pause, no client-side caching,
/// replies on, nothing blocked. What can change only through this
/// session's own commands is decided here once; such a command is never
/// lean, and its [`Outcome`] ends the window's lean run.
pub fn lean_gate(shared: &Shared, sess: &mut Session) -> bool {
    !sess.needs_checks(shared)
        && !sess.postponed
        && sess.tracking.is_none()
        && !sess.caching
        && sess.cluster_slot.is_none()
        && sess.reply_mode == ReplyMode::On
        && sess.blocked.is_none()
}

/// [`execute`] with what the caller already knows.
pub fn execute_hinted(
    shared: &Shared,
    sess: &mut Session,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    hint: Hint,
) -> Outcome {
    let mut keys = Locks::new(&shared.store, 0);
    execute_with(shared, sess, &mut keys, argv, out, hint)
}

/// [`execute_hinted`] with a lock holder the caller keeps across its
/// requests (a connection's batch): built and dropped once rather than on
/// every command (some 17 instructions of a pipelined GET). It holds
/// nothing between requests: every path below releases what it took.
pub fn execute_with<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    hint: Hint,
) -> Outcome {
    debug_assert!(!argv.is_empty());
    debug_assert!(keys.is_empty());
    let retry = sess.postponed;
    sess.unpostpone(shared);
    let spec = match crate::core::door::lookup_next(shared, sess, argv) {
        Ok(spec) => spec,
        Err(nf) => {
            reject(shared, sess, nf.spec, &nf.error, out);
            return Outcome::Done;
        }
    };
    let mark = out.mark();
    // The lean path: a single-key command without special flags, in a
    // window whose gate held, while the shared state the gate read is
    // unchanged (one load; any change of configuration, ACL, pause,
    // loading or script state moves the epoch).
    if let Some(t) = hint.key {
        if hint.lean
            && matches!(spec.keys, KeySpec::Range { first: 1, last: 1, .. })
            && !spec.flags.intersects(NOT_LEAN)
            && sess.fresh(shared)
            && shared.store.db_of(t.id()) == sess.db
        {
            lean(shared, sess, keys, spec, argv, out, hint.now, t, mark);
            return Outcome::Lean;
        }
    }
    if spec.flags.has(Flags::PROTECTED) && !protected_allowed(shared, sess) {
        reject(shared, sess, Some(spec), &CmdError::DebugNotAllowed, out);
        return Outcome::Done;
    }
    if hint.after_input && spec.flags.has(Flags::AFTER_INPUT) && !sess.in_multi() {
        return Outcome::AfterInput;
    }
    let now = if hint.now != 0 { hint.now } else { shared.clock.now_ms() };
    let mut hold = Hold::Take(hint.key);
    // One load tells whether anything calls for the checks (the common
    // case of an authenticated client outside MULTI on a server without
    // maxmemory, loading or pause skips them). A client's checks are made
    // here rather than at the door: CLIENT PAUSE and the pushes eviction
    // caused interleave with them.
    if sess.needs_checks(shared) {
        // A request a pause held is tried again, its checks included, only
        // once that pause ends, as Redis runs a postponed client's command
        // anew when it unpauses: meanwhile the server may have become a
        // replica (FAILOVER hands over while writes wait), and a write
        // must not get READONLY for a state it never ran in.
        if retry && !spec.flags.has(Flags::NO_PAUSE) && sess.paused(shared, spec, argv, now) {
            sess.postponed = true;
            shared.blocked_clients.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Outcome::Paused;
        }
        let checked = check(shared, sess, spec, argv, Caller::Client);
        if sess.handle.outbox.pending() > 0 && sess.conf(shared).maxmemory > 0 {
            pushes_first(sess, out);
        }
        if let Err(e) = checked {
            reject(shared, sess, Some(spec), &e, out);
            return Outcome::Done;
        }
        if !spec.flags.has(Flags::NO_PAUSE) && sess.paused(shared, spec, argv, now) {
            // Counted in blocked_clients while held, as Redis counts a
            // postponed client.
            sess.postponed = true;
            shared.blocked_clients.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Outcome::Paused;
        }
        if shared.scripts.is_busy() && !matches!(spec.keys, KeySpec::None) {
            hold = Hold::TakeIfFree;
        }
    }
    // As a new holder: this command's clock, no key remembered from the
    // previous one (its bytes are not this one's).
    keys.now = now;
    keys.forget();
    match crate::core::door::run(shared, sess, keys, spec, argv, out, Caller::Client, hold) {
        Ran::Queued => {
            apply_reply_mode(sess, out, mark);
            return Outcome::Done;
        }
        Ran::Refused(e) => {
            // Counted at the door.
            keys.release();
            write_refusal(sess, &e, out, mark);
            return Outcome::Done;
        }
        Ran::Done | Ran::Waiting | Ran::Stopped(_) => {}
    }
    if spec.flags.has(Flags::TOUCHES_ARBITRARY_KEYS) {
        sess.fx.unwrap_unit();
    }
    end_unit(shared, sess, keys, out, mark);
    if sess.blocked.is_none() {
        apply_reply_mode(sess, out, mark);
    }
    if sess.caching && sess.multi.is_none() {
        // CLIENT CACHING holds for the next command (or transaction).
        if !sess.last_cmd.is_some_and(|(top, _)| top.flags.has(Flags::KEEPS_CACHING)) {
            sess.caching = false;
        }
    }
    Outcome::Done
}

/// The end of a client's execution unit: its effects to the consumers,
/// its stripes released, its own pushes before its reply, the clients
/// blocked on keys it filled served.
#[inline(always)]
fn end_unit(
    shared: &Shared,
    sess: &mut Session,
    keys: &mut Locks,
    out: &mut ReplyBuf,
    mark: resp::Mark,
) {
    sess.fx.finish_unit();
    // Released in place: `drop(keys)` moved the holder (some 180 bytes)
    // into `drop`'s argument first, a memcpy on every command.
    keys.release();
    if (sess.fx.want.events || sess.fx.want.keys) && sess.handle.outbox.has_early() {
        own_pushes_first(sess, out, mark);
    }
    if !sess.ready.is_empty() {
        // Clients blocked on keys this command filled are served now,
        // before this connection's next command (Redis's
        // handleClientsBlockedOnKeys after call()).
        let mut ready = std::mem::take(&mut sess.ready);
        crate::core::blocking::serve_ready(shared, &mut ready);
        sess.ready = ready;
        // Serving is not the next command's time.
        sess.lap = 0;
    }
}

/// A client's plain single-key command (see [`lean_gate`] and
/// `NOT_LEAN`): its one stripe taken from the connection's prefetch, the
/// handler and its accounting as [`call`] does them (commandstats, the
/// slow log and latency, MONITOR, effects, expiry, readiness), the
/// execution unit ended. What the gate ruled out is not tested again:
/// the client's checks, pause, MULTI, blocking, tracking, CLIENT
/// CACHING, reply modes, a cluster's routing.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn lean<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    now: i64,
    t: store::Prefetch,
    mark: resp::Mark,
) {
    debug_assert!(now != 0);
    keys.now = now;
    keys.remember(argv[1], t);
    if keys.acquire_first(t.id()).is_err() {
        let Ran::Refused(e) = crate::core::door::refused(shared, sess, spec, CmdError::LockOrder)
        else {
            unreachable!("refused is a refusal")
        };
        keys.release();
        write_refusal(sess, &e, out, mark);
        return;
    }
    let waits = call_body::<true>(shared, sess, keys, spec, argv, out, Caller::Client);
    debug_assert!(!waits, "a lean command never blocks");
    end_unit(shared, sess, keys, out, mark);
}

/// An `allow-busy` command with keys (WATCH) while a script is busy: its
/// stripes are taken only if free at once, since the busy script may
/// hold them until it ends (this thread would wait for it, or, on the
/// script's own thread, for itself). False when not free: BUSY then.
#[cold]
pub(crate) fn busy_keyed<'a>(
    shared: &'a Shared,
    db: usize,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    keys: &mut Locks<'a>,
) -> bool {
    let mut ids = SmallVec::new();
    match key_ids(shared, db, spec, argv, &mut ids) {
        Scope::Keys => keys.try_acquire(&mut ids).is_ok(),
        _ => false,
    }
}

/// Whether `enable-debug-command` lets this client run a `PROTECTED`
/// command (Redis's `allowProtectedAction`).
#[cold]
fn protected_allowed(shared: &Shared, sess: &mut Session) -> bool {
    let local = {
        let a = sess.handle.addr.as_str();
        // Loopback, a Unix socket (a path), or an in-process session.
        a.is_empty() || a.starts_with("127.") || a.starts_with("[::1]") || a.starts_with('/')
    };
    match sess.conf(shared).enable_debug_command.as_str() {
        "yes" => true,
        "local" => local,
        _ => false,
    }
}

/// Runs a command of a master's stream (Redis's master client), through
/// the door as [`Caller::Replay`]: no client checks, `MULTI` queueing as a
/// client's, keys past their deadline live on a replica (the master
/// deletes them), the reply discarded by the caller. An unknown command is
/// the error.
pub fn replay(
    shared: &Shared,
    sess: &mut Session,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
) -> Result<(), CmdError> {
    replay_with(shared, sess, argv, out, true)
}

/// Whether CLIENT PAUSE holds back this command of a master's stream: a
/// replica paused for writes stops applying its master's writes (and
/// everything after them, in order) while it goes on reading the stream,
/// as Redis 7.0 postpones its master client; `slave_repl_offset` then
/// stays while `slave_read_repl_offset` grows. An unknown command is not
/// held (its replay reports it).
pub fn replay_paused(shared: &Shared, sess: &mut Session, argv: &[&[u8]]) -> bool {
    match lookup(shared, argv) {
        Lookup::Found(spec) => {
            !spec.flags.has(Flags::NO_PAUSE)
                && sess.paused(shared, spec, argv, shared.clock.now_ms())
        }
        Lookup::Rejected(_) => false,
    }
}

/// [`replay`] for the AOF loader (Redis's fake AOF client): keys past
/// their deadline stay live while loading, and what the file holds is
/// not propagated again (Redis's loader runs commands outside `call()`),
/// or DEBUG LOADAOF would append the whole file to itself.
pub fn replay_loaded(
    shared: &Shared,
    sess: &mut Session,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
) -> Result<(), CmdError> {
    replay_with(shared, sess, argv, out, false)
}

fn replay_with(
    shared: &Shared,
    sess: &mut Session,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    propagate: bool,
) -> Result<(), CmdError> {
    let spec = crate::core::door::lookup_next(shared, sess, argv).map_err(|nf| nf.error)?;
    let mut keys = Locks::new(&shared.store, shared.clock.now_ms());
    // The store learns whose deadlines this replay obeys from its locks.
    keys.obey(if propagate { store::Deadlines::Master } else { store::Deadlines::Loading });
    match crate::core::door::run(
        shared,
        sess,
        &mut keys,
        spec,
        argv,
        out,
        Caller::Replay,
        Hold::Take(None),
    ) {
        Ran::Queued => return Ok(()),
        Ran::Refused(e) => e.write(out),
        Ran::Done | Ran::Waiting | Ran::Stopped(_) => {}
    }
    if !propagate {
        sess.fx.drop_ops_from(0);
    }
    sess.fx.finish_unit();
    Ok(())
}

/// Applies the table's flags for `caller`, in Redis's order. A client's
/// request has passed lookup and arity; the others were checked when they
/// were queued, loaded or first issued.
pub fn check(
    shared: &Shared,
    sess: &mut Session,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    caller: Caller,
) -> Result<(), CmdError> {
    let flags = spec.flags;
    match caller {
        Caller::Client => {
            // A script's declared flags stand for its runner's (Redis's
            // getCommandFlags): one that may write is a write command here,
            // queued in MULTI or not.
            let flags = if flags.has(Flags::RUNS_SCRIPT) {
                crate::subsystems::script::call_flags(shared, spec, argv)
            } else {
                flags
            };
            if !sess.authenticated && !flags.has(Flags::NO_AUTH) && !shared.acl.default_open() {
                return Err(CmdError::NoAuth);
            }
            let in_multi = sess.multi.is_some();
            // Redis's order: NOAUTH, NO_MULTI, then the ACL.
            if in_multi && flags.has(Flags::NO_MULTI) {
                return Err(CmdError::err("Command not allowed inside a transaction"));
            }
            if !sess.acl_free {
                crate::subsystems::acl::gate::check(shared, sess, spec, argv, caller)?;
            }
            if let Some(c) = shared.cluster.get() {
                crate::subsystems::cluster::gate::client(shared, c, sess, spec, argv)?;
            }
            let maxmemory = sess.conf(shared).maxmemory;
            // Not while a script is busy (Redis's processCommand skips
            // it too): eviction would wait for the stripes it holds.
            if maxmemory > 0 && !shared.scripts.is_busy() {
                // Evict first, whatever the command (Redis 7.0's
                // processCommand runs performEvictions for every one).
                let oom =
                    crate::subsystems::evict::perform(shared, &mut sess.fx, maxmemory).is_err();
                // Inside MULTI every queued command is refused while over
                // the limit; EXEC is when any queued command may grow
                // memory.
                let deny = flags.has(Flags::DENYOOM)
                    || (in_multi && !flags.has(Flags::NO_QUEUE))
                    || (flags.has(Flags::EXEC_TX)
                        && sess.multi.as_ref().is_some_and(|m| m.flags.has(Flags::DENYOOM)));
                if deny && oom {
                    return Err(CmdError::Oom);
                }
            }
            // After a failed BGSAVE with save points set, writes (and an
            // EXEC with writes queued, and PING) are refused (Redis's
            // writeCommandsDeniedByDiskError).
            if (flags.has(Flags::WRITE)
                || flags.has(Flags::DISK_ERROR_PROBE)
                || (flags.has(Flags::EXEC_TX)
                    && sess.multi.as_ref().is_some_and(|m| m.flags.has(Flags::WRITE))))
                && !shared.persist.disk_ok()
            {
                if let Some(e) = shared.persist.disk_error(sess.conf(shared)) {
                    return Err(e);
                }
            }
            // min-replicas-to-write (Redis's checkGoodReplicasStatus).
            if sess.min_replicas > 0
                && (flags.has(Flags::WRITE)
                    || (flags.has(Flags::EXEC_TX)
                        && sess.multi.as_ref().is_some_and(|m| m.flags.has(Flags::WRITE))))
                && (crate::subsystems::repl::good_replicas(shared) as i64) < sess.min_replicas
            {
                return Err(CmdError::NoReplicas);
            }
            // A read-only replica takes writes from its master only
            // (which replays, `Caller::Replay`).
            if (flags.has(Flags::WRITE)
                || (flags.has(Flags::EXEC_TX)
                    && sess.multi.as_ref().is_some_and(|m| m.flags.has(Flags::WRITE))))
                && shared.store.is_replica()
                && sess.conf(shared).replica_read_only
            {
                return Err(CmdError::ReadOnlyReplica);
            }
            if sess.subs.total() > 0
                && !flags.has(Flags::PUBSUB_CONTEXT)
                && sess.handle.resp.load(std::sync::atomic::Ordering::Relaxed) == 2
            {
                return Err(pubsub_context(sess, spec));
            }
            if sess.monitor
                && flags.0 & (Flags::WRITE.0 | Flags::READONLY.0 | Flags::MAY_REPLICATE.0) != 0
            {
                return Err(CmdError::err("Replica can't interact with the keyspace"));
            }
            // A replica whose link is down answers only STALE commands
            // with replica-serve-stale-data no (and refuses an EXEC
            // holding any other).
            if (!flags.has(Flags::STALE)
                || (flags.has(Flags::EXEC_TX)
                    && sess.multi.as_ref().is_some_and(|m| m.inv_flags.has(Flags::STALE))))
                && shared.store.is_replica()
                && !sess.conf(shared).replica_serve_stale_data
                && crate::subsystems::repl::master_down(shared)
            {
                return Err(CmdError::MasterDown);
            }
            if shared.is_loading() && !flags.has(Flags::LOADING) {
                let load = shared.load_generation();
                let interval = sess.conf(shared).loading_process_events_interval_bytes.max(0);
                if sess.refused_load == load || shared.await_load(interval as u64) {
                    sess.refused_load = load;
                    return Err(CmdError::Loading);
                }
            }
            // While a replica loads asynchronously it serves the old data,
            // but not what would disturb the load (Redis's
            // `no-async-loading` commands).
            if flags.has(Flags::NO_ASYNC_LOADING) && shared.is_async_loading() {
                return Err(CmdError::Loading);
            }
            if !flags.has(Flags::ALLOW_BUSY) && shared.scripts.is_busy() {
                return Err(shared.scripts.busy_error());
            }
        }
        Caller::Script { read_only, allow_oom, dirty, obeys, cross_slot } => {
            // Redis's scriptCall order: NOSCRIPT, stale, ACL, writes, OOM.
            if flags.has(Flags::NOSCRIPT)
                && !shared.scripts.deny_disabled.load(std::sync::atomic::Ordering::Relaxed)
            {
                return Err(CmdError::err("This Redis command is not allowed from script"));
            }
            // Redis's scriptVerifyAllowStale.
            if !flags.has(Flags::STALE)
                && shared.store.is_replica()
                && !sess.conf(shared).replica_serve_stale_data
                && crate::subsystems::repl::master_down(shared)
            {
                return Err(CmdError::err("Can not execute the command on a stale replica"));
            }
            if !sess.acl_free {
                crate::subsystems::acl::gate::check(shared, sess, spec, argv, caller)?;
            }
            // A may-replicate command (PUBLISH, PFCOUNT) counts as a
            // write for a read-only script (Redis's
            // scriptVerifyWriteCommandAllow).
            if read_only && flags.0 & (Flags::WRITE.0 | Flags::MAY_REPLICATE.0) != 0 {
                return Err(CmdError::err(
                    "Write commands are not allowed from read-only scripts.",
                ));
            }
            // Once the script wrote, the server's state (a replica, disk
            // errors, good replicas, memory) cannot fail it half-way.
            if flags.has(Flags::WRITE) && !dirty {
                // A script the AOF replays writes as its caller did
                // (Redis's mustObeyClient).
                if shared.store.is_replica() && sess.conf(shared).replica_read_only && !obeys {
                    return Err(CmdError::ReadOnlyReplica);
                }
                if !shared.persist.disk_ok() {
                    if let Some(e) = shared.persist.disk_error(sess.conf(shared)) {
                        return Err(e);
                    }
                }
                // A script without flags writes command by command: each
                // write needs the good replicas.
                if sess.min_replicas > 0
                    && (crate::subsystems::repl::good_replicas(shared) as i64) < sess.min_replicas
                {
                    return Err(CmdError::NoReplicas);
                }
            }
            if !allow_oom
                && !dirty
                && flags.has(Flags::DENYOOM)
                && shared.over_maxmemory(sess.conf(shared).maxmemory)
            {
                return Err(CmdError::Oom);
            }
            if let Some(c) = shared.cluster.get() {
                if !obeys {
                    crate::subsystems::cluster::gate::script(
                        shared, c, sess, spec, argv, cross_slot,
                    )?;
                }
            }
        }
        // The ACL again at EXEC, in case the rules changed since the
        // command was queued (Redis's execCommand).
        Caller::Exec => {
            if !sess.acl_free {
                crate::subsystems::acl::gate::check(shared, sess, spec, argv, caller)?;
            }
        }
        // Checked when first issued (Served: Redis 7.0 serves a blocked
        // client without checking its user again); a replay runs what
        // the server already accepted.
        Caller::Served | Caller::Replay => {}
    }
    Ok(())
}

/// Puts the pushes the client's own command caused for itself (keyspace
/// notifications of its writes) before the command's reply, where Redis
/// writes them; CLIENT REPLY does not suppress them.
#[cold]
fn own_pushes_first(sess: &mut Session, out: &mut ReplyBuf, mark: resp::Mark) {
    let reply = out.split_off(mark);
    sess.handle.outbox.drain_early(|m| out.raw(m));
    sess.mark_pushed(out);
    out.raw(&reply);
}

/// Puts what waits in the client's outbox before the reply of the command
/// about to run: eviction before the command may have invalidated a key
/// this client tracks, and Redis writes that invalidation before the
/// reply. (A client running a command has no served reply waiting.)
#[cold]
fn pushes_first(sess: &mut Session, out: &mut ReplyBuf) {
    sess.handle.outbox.drain(|_, m| out.raw(m));
    sess.mark_pushed(out);
}

/// A RESP2 client in pub/sub mode ran a command it may not.
#[cold]
fn pubsub_context(sess: &Session, spec: &'static CommandSpec) -> CmdError {
    let name = match sess.last_cmd {
        Some((top, s)) => full_name(top, s),
        None => spec.name.to_ascii_lowercase(),
    };
    CmdError::err(format!(
        "Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET \
         are allowed in this context"
    ))
}

/// Delivers the reply of a blocking command whose wait ended (the
/// connection calls this), honouring CLIENT REPLY as if it had just run.
pub fn deliver_blocked(sess: &mut Session, out: &mut ReplyBuf, reply: &[u8]) {
    let mark = out.mark();
    out.raw(reply);
    apply_reply_mode(sess, out, mark);
}

fn reject(
    shared: &Shared,
    sess: &mut Session,
    spec: Option<&'static CommandSpec>,
    e: &CmdError,
    out: &mut ReplyBuf,
) {
    sess.stats.rejected_calls += 1;
    if let Some(s) = spec {
        count_rejected(shared, sess, s);
    }
    if let Some(m) = &mut sess.multi {
        m.dirty = true;
    }
    let mark = out.mark();
    if spec.is_some_and(|s| s.flags.has(Flags::EXEC_TX)) && matches!(e, CmdError::Cluster(_)) {
        // A redirection of EXEC discards the transaction and is the
        // reply (Redis's processCommand: discardTransaction, then
        // clusterRedirectClient).
        crate::core::multi::abort(shared, sess);
        shared.cmdstats.error(&e.text());
        e.write(out);
    } else if spec.is_some_and(|s| s.flags.has(Flags::EXEC_TX)) {
        // Redis turns any rejection of EXEC into an abort of the
        // transaction (with or without MULTI) and drops the WATCHes.
        crate::core::multi::abort(shared, sess);
        let text = e.text();
        let why = text.strip_prefix(b"ERR ").unwrap_or(&text);
        let mut line = b"EXECABORT Transaction discarded because of: ".to_vec();
        line.extend_from_slice(why);
        shared.cmdstats.error(&line);
        out.error(&line);
    } else {
        shared.cmdstats.error(&e.text());
        e.write(out);
    }
    apply_reply_mode(sess, out, mark);
}

/// Writes a refusal the door already counted (a client's keyed command
/// while a script is busy), honouring CLIENT REPLY.
#[cold]
fn write_refusal(sess: &mut Session, e: &CmdError, out: &mut ReplyBuf, mark: resp::Mark) {
    if let Some(m) = &mut sess.multi {
        m.dirty = true;
    }
    e.write(out);
    apply_reply_mode(sess, out, mark);
}

/// This thread's command statistics, flushed first if they are full.
///
/// # Safety
/// As [`cmdstats::local`]: the caller holds the reference only while it
/// takes no other from here (it counts once and drops it).
#[inline(always)]
unsafe fn local_cmdstats<'s>(
    shared: &Shared,
    sess: &mut Session,
) -> &'s mut cmdstats::LocalCmdStats {
    // SAFETY: the caller's promise; `flush` takes no other reference.
    let l = unsafe { cmdstats::local() };
    if l.full() {
        shared.cmdstats.flush(l, sess.conf(shared).latency_tracking);
    }
    l
}

/// Counts a call of `spec` refused before it ran (commandstats'
/// `rejected_calls`).
pub fn count_rejected(shared: &Shared, sess: &mut Session, spec: &CommandSpec) {
    // SAFETY: the only reference taken, dropped after this one count.
    let l = unsafe { local_cmdstats(shared, sess) };
    let idx = l.index(spec);
    l.rejected(idx);
}

/// Counts a failure of `spec`'s running call that its result does not
/// show (commandstats' `failed_calls`).
pub fn count_failed(shared: &Shared, sess: &mut Session, spec: &CommandSpec) {
    // SAFETY: the only reference taken, dropped after this one count.
    let l = unsafe { local_cmdstats(shared, sess) };
    let idx = l.index(spec);
    l.failed(idx);
}

/// Counts a call of `spec` that completed (commandstats, latencystats).
#[inline(always)]
pub fn count_call(
    shared: &Shared,
    sess: &mut Session,
    spec: &CommandSpec,
    usec: u64,
    failed: bool,
) {
    // SAFETY: the only reference taken, dropped after this one count.
    let l = unsafe { local_cmdstats(shared, sess) };
    let idx = l.index(spec);
    l.call(idx, usec, failed);
}

fn apply_reply_mode(sess: &mut Session, out: &mut ReplyBuf, mark: resp::Mark) {
    if sess.reply_mode == ReplyMode::On {
        return;
    }
    // Pushes the command wrote (up to `pushed`) are not its reply.
    let mark = sess.pushed.take().unwrap_or(mark);
    match sess.reply_mode {
        ReplyMode::On => {}
        ReplyMode::Off => out.truncate(mark),
        ReplyMode::Skip => {
            out.truncate(mark);
            sess.reply_mode = ReplyMode::On;
        }
        ReplyMode::SkipNext => {
            out.truncate(mark);
            sess.reply_mode = ReplyMode::Skip;
        }
    }
}

/// Collects the lock ids a command needs in database `db`.
pub fn key_ids(
    shared: &Shared,
    db: usize,
    spec: &CommandSpec,
    argv: &[&[u8]],
    ids: &mut SmallVec<[u32; 8]>,
) -> Scope {
    let store = &shared.store;
    match spec.keys {
        KeySpec::None => Scope::Keys,
        KeySpec::Range { first, last, step } => {
            let argc = argv.len() as i32;
            let last = if last < 0 { argc + last } else { last.min(argc - 1) };
            let mut i = first;
            while first > 0 && i <= last && i < argc {
                ids.push(store.global_id(db, store.stripe_of(argv[i as usize])));
                i += step.max(1);
            }
            Scope::Keys
        }
        KeySpec::CustomOrDb { whole_db, .. } if whole_db(argv) => Scope::Db,
        KeySpec::Custom { find, .. } | KeySpec::CustomOrDb { find, .. } => {
            let mut list = crate::core::spec::KeyList::new();
            find(argv, db, &mut list);
            for (d, k) in list {
                if d < store.databases() {
                    ids.push(store.global_id(d, store.stripe_of(k)));
                }
            }
            Scope::Keys
        }
        KeySpec::WholeDb | KeySpec::DbWalk => Scope::Db,
        KeySpec::AllDbs => Scope::All,
        KeySpec::Jobs => {
            ids.push(store.jobs_id());
            Scope::Keys
        }
    }
}

/// Locks what a caller running several commands needs before it starts
/// (EXEC's queue; a script that may touch keys it did not declare takes
/// `Scope::Db` or `Scope::All`): the stripes `ids`, plus the whole of
/// database `db` or of every database as `scope` says, in ascending order.
pub fn lock_scope(
    shared: &Shared,
    keys: &mut Locks,
    db: usize,
    scope: Scope,
    ids: &mut SmallVec<[u32; 8]>,
) -> Result<(), CmdError> {
    let r = match scope {
        Scope::Keys => keys.acquire(ids),
        Scope::Db => keys.acquire_with_db(ids, db),
        // Then what lies above the databases (the job namespace).
        Scope::All => (0..shared.store.databases())
            .try_for_each(|d| keys.acquire_db(d))
            .and_then(|()| keys.acquire(ids)),
    };
    r.map_err(|_| CmdError::LockOrder)
}

/// How much of the keyspace a command (or transaction) locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Keys,
    Db,
    All,
}

/// [`key_ids`] for a command whose keys are a range starting at
/// `argv[1]` (`KeySpec::Range { first: 1, .. }`), the first key's lock id
/// already known.
pub fn range_ids_hinted(
    shared: &Shared,
    db: usize,
    spec: &CommandSpec,
    argv: &[&[u8]],
    first_id: u32,
    ids: &mut SmallVec<[u32; 8]>,
) {
    let KeySpec::Range { last, step, .. } = spec.keys else { unreachable!("checked by caller") };
    let argc = argv.len() as i32;
    let last = if last < 0 { argc + last } else { last.min(argc - 1) };
    ids.push(first_id);
    let store = &shared.store;
    let mut i = 1 + step.max(1);
    while i <= last && i < argc {
        ids.push(store.global_id(db, store.stripe_of(argv[i as usize])));
        i += step.max(1);
    }
}

/// Whether `arg` is the command name `name` in any case (clients mostly
/// send it as the table spells it: that is tried first).
#[inline]
pub(crate) fn is_name(arg: &[u8], name: &str) -> bool {
    // Two calls a command: word compares rather than memcmp calls.
    store::key_eq(arg, name.as_bytes()) || arg.eq_ignore_ascii_case(name.as_bytes())
}

/// Whether a command whose keys are a range starting at `argv[1]` names
/// only that one key with `argc` arguments.
#[inline]
pub(crate) fn single_key(spec: &CommandSpec, argc: usize) -> bool {
    let KeySpec::Range { last, step, .. } = spec.keys else { return false };
    let argc = argc as i32;
    let last = if last < 0 { argc + last } else { last.min(argc - 1) };
    last < 1 + step.max(1)
}

/// Locks a range-keyed command's stripes when the first key's is known.
pub(crate) fn lock_keys_hinted(
    shared: &Shared,
    db: usize,
    spec: &CommandSpec,
    argv: &[&[u8]],
    keys: &mut Locks,
    first_id: u32,
) -> Result<(), CmdError> {
    let mut ids: SmallVec<[u32; 8]> = SmallVec::new();
    range_ids_hinted(shared, db, spec, argv, first_id, &mut ids);
    keys.acquire(&mut ids).map_err(|_| CmdError::LockOrder)
}

/// Takes (or, for a caller that already holds locks, checks it can take)
/// every stripe the command needs. Out of order is refused, never waited
/// for: the caller gets [`CmdError::LockOrder`].
pub fn lock_keys(
    shared: &Shared,
    db: usize,
    spec: &CommandSpec,
    argv: &[&[u8]],
    keys: &mut Locks,
) -> Result<(), CmdError> {
    if matches!(spec.keys, KeySpec::DbWalk) && keys.is_empty() {
        // The handler locks what it walks.
        return Ok(());
    }
    let mut ids = SmallVec::new();
    let need = key_ids(shared, db, spec, argv, &mut ids);
    if need == Scope::All && keys.is_empty() {
        if let Some(f) = spec.before_lock {
            f(shared, argv);
        }
    }
    lock_ids(shared, db, need, &mut ids, keys)
}

/// [`lock_keys`] with the command's [`key_ids`] already collected (`need`
/// and `ids`), for a caller that looked at them first (a script).
pub fn lock_ids(
    shared: &Shared,
    db: usize,
    need: Scope,
    ids: &mut SmallVec<[u32; 8]>,
    keys: &mut Locks,
) -> Result<(), CmdError> {
    let r = match need {
        Scope::Keys => keys.acquire(ids),
        Scope::Db => keys.acquire_db(db),
        Scope::All => (0..shared.store.databases()).try_for_each(|d| keys.acquire_db(d)),
    };
    r.map_err(|_| CmdError::LockOrder)
}

/// Runs a handler with its locks held: the reply, or on error the error
/// line in place of any partial reply. Closes the command's effects
/// record (its execution unit is the caller's to finish) and counts it.
/// Returns true when the command did not complete because it waits: a
/// client's blocking command that blocked, or a served one that found
/// nothing it can take after all.
#[inline(never)]
pub fn call<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    caller: Caller,
) -> bool {
    call_inline(shared, sess, keys, spec, argv, out, caller)
}

/// [`call`] inlined into its caller: a client's request (the door's
/// `Caller::Client` path), where the call's own set-up (saving registers,
/// the handler's context built in memory, every test of `caller` made at
/// run time) was some 40 instructions of a pipelined GET.
#[inline(always)]
pub(crate) fn call_inline<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    caller: Caller,
) -> bool {
    call_body::<false>(shared, sess, keys, spec, argv, out, caller)
}

/// The one body of [`call`]; `LEAN` (the lean path: a client's command
/// that neither runs a script nor blocks, on a session without tracking:
/// `lean_gate`, `NOT_LEAN`) leaves those tests out.
#[inline(always)]
fn call_body<'a, const LEAN: bool>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    caller: Caller,
) -> bool {
    // A subcommand's own name is argv[1]; its arguments start after it.
    let mut args = Args::new(argv, spec.first_arg());
    let mark = out.mark();
    let db = sess.db;
    // total_commands_processed counts a command once, as it starts (a
    // served blocked command was counted when it first ran).
    if !matches!(caller, Caller::Served) {
        sess.stats.commands += 1;
    }
    // The consumers as of now, with the command's stripes held: a
    // consumer installed before a snapshot's instant (which needs every
    // stripe: the AOF being turned on, a replica's full sync) sees every
    // write made after it (one load).
    sess.fx.sync(&shared.effects);
    sess.fx.begin_command();
    let start = crate::core::cmdstats::Stopwatch::resume(sess.lap);
    if !LEAN
        && spec.flags.has(Flags::RUNS_SCRIPT)
        && shared.nmonitors.load(std::sync::atomic::Ordering::Relaxed) > 0
    {
        crate::subsystems::monitor::feed_script(shared, sess, argv, caller);
    }
    let mut cx = Ctx { shared, sess, keys, db, spec, caller, still_waiting: false };
    let res = (spec.handler)(&mut cx, &mut args, out);
    let waiting = cx.still_waiting;
    let failed = res.is_err() | std::mem::take(&mut sess.error_replied);
    if let Err(e) = res {
        out.truncate(mark);
        shared.cmdstats.error(&e.text());
        e.write(out);
        sess.stats.failed_calls += 1;
    }
    // A call that blocked is counted when its wait ends. What the AOF
    // loader replays is not counted at all (Redis's loader runs commands
    // outside `call()`: no commandstats, no slow log), or `DEBUG LOADAOF`
    // and a start-up load would show the file's commands as calls.
    if LEAN || (!waiting && sess.blocked.is_none() && !keys.loading()) {
        let (usec, end) = start.lap();
        if sess.batch_lap {
            sess.lap = end;
        }
        count_call(shared, sess, spec, usec, failed);
        // The slow log and the latency monitor: one comparison when off.
        if usec >= sess.slow_us {
            crate::subsystems::slowlog::record(shared, sess, spec, argv, usec);
        }
    }
    // What the store noticed on the way: keys that expired lazily, keys
    // blocked clients wait for that received a value.
    // A script's read is remembered by the script, with its declared keys
    // (see `script::vm`); a script runner is never remembered itself.
    if !LEAN
        && sess.tracking.is_some()
        && spec.flags.has(Flags::READONLY)
        && !spec.flags.has(Flags::RUNS_SCRIPT)
        && !caller.in_script()
    {
        shared.tracker.remember(sess, spec, argv, db);
    }
    if shared.nmonitors.load(std::sync::atomic::Ordering::Relaxed) > 0 {
        crate::subsystems::monitor::feed(shared, sess, spec, argv, caller);
    }
    sess.redact = 0;
    let Session { fx, ready, .. } = sess;
    keys.take_signals(ready, |db, k| fx.expired(db, k));
    let dirty = sess.fx.end_command(db, argv);
    sess.stats.dirty += dirty;
    !LEAN && (waiting || sess.blocked.is_some())
}
