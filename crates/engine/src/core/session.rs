//! Per-connection state (the engine's half of a client) and the shared
//! handle other connections see in `CLIENT LIST`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use store::WatchFlag;

/// What other connections can see of a client and do to it.
///
/// In declaration order (`repr(C)`), the fields the connection touches on
/// every request first: its counters, its memory figures, the flags it
/// checks and the outbox's byte count share the allocation's first two
/// cache lines (with the `Arc`'s counts). Left to the compiler they were
/// spread over six, each a miss for a request when many connections take
/// turns (`docs/benchmarks.md`, issue 27's table).
#[repr(C)]
pub struct ClientHandle {
    /// Odd while the connection runs commands (a batch, a served or
    /// timed-out wait), even between runs: what [`Shared::quiesce`]
    /// waits on (see [`begin_run`](Self::begin_run)).
    ///
    /// [`Shared::quiesce`]: crate::Shared::quiesce
    pub runs: AtomicU64,
    /// Reads and writes made (INFO's `total_reads_processed`,
    /// `total_writes_processed`): one increment per syscall, beside the
    /// byte counts.
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    /// Bytes read and written, for INFO.
    pub net_in: AtomicU64,
    pub net_out: AtomicU64,
    /// Pending input bytes and output bytes, updated per batch.
    pub qbuf: AtomicUsize,
    pub omem: AtomicUsize,
    /// Room left in the input buffer, and the connection's buffers and
    /// state in bytes, as of the last batch (CLIENT LIST's `qbuf-free`,
    /// `tot-mem`).
    pub qbuf_free: AtomicUsize,
    pub tot_mem: AtomicUsize,
    /// Bytes of the queued commands' arguments (`multi-mem`).
    pub multi_mem: AtomicUsize,
    /// Unix ms of the last command.
    pub last_interaction_ms: AtomicI64,
    /// Set by `CLIENT KILL`; the connection closes at its next turn.
    pub killed: AtomicBool,
    /// Set by the server's cron: the connection should look at its query
    /// buffer's size (Redis's clientsCronResizeQueryBuffer).
    pub qbuf_resize: AtomicBool,
    /// The connection closes once its last replies are written (QUIT, a
    /// protocol error, `CLIENT KILL` of itself): set before they are, so
    /// that another thread never takes it for a live client once its
    /// client has read them (Redis frees such a client right after the
    /// write, before it serves anyone else).
    pub closing: AtomicBool,
    /// What reaches the connection besides its own replies (its byte
    /// count first: looked at on every turn).
    pub outbox: crate::core::outbox::Outbox,
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    /// Unix ms at connect.
    pub created_ms: i64,
    pub name: Mutex<Option<Vec<u8>>>,
    pub db: AtomicUsize,
    pub resp: AtomicU32,
    /// Index into the command list of the last command run (0: none).
    pub last_cmd: Mutex<String>,
    pub in_multi: AtomicBool,
    pub multi_len: AtomicI64,
    pub watching: AtomicUsize,
    pub no_evict: AtomicBool,
    /// The durable-acknowledgement mode (`DURABLE`), as CLIENT LIST shows
    /// it; the connection reads the session's copy.
    pub durable: Mutex<Option<Durable>>,
    /// Wakes the connection's task (set by the server).
    pub waker: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// The client's wait while it is blocked (BLPOP …), for CLIENT UNBLOCK.
    pub blocked: Mutex<Option<Arc<crate::core::blocking::Waiter>>>,
    /// Subscriptions: channels, patterns, shard channels (CLIENT LIST's
    /// `sub`, `psub`, `ssub`), mirrored from the session's.
    pub subs: [AtomicUsize; 3],
    /// Client-side caching state (see [`crate::subsystems::tracking`]).
    pub tracking: Mutex<crate::subsystems::tracking::State>,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: AtomicBool,
    /// A replica following the replication stream (CLIENT LIST flag `S`).
    pub replica: AtomicBool,
    /// The ACL user the client is authenticated as (CLIENT LIST's `user`,
    /// CLIENT KILL USER, and who a DELUSER disconnects).
    pub user: Mutex<Vec<u8>>,
    /// The connection's bytes go over `fd` as they are (no TLS): what the
    /// Lua debugger needs to talk to it directly (set by the server).
    pub raw_bytes: AtomicBool,
}

impl ClientHandle {
    pub fn new(id: u64, addr: String, laddr: String, fd: i32, now_ms: i64) -> Self {
        ClientHandle {
            id,
            addr,
            laddr,
            fd,
            created_ms: now_ms,
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            resp: AtomicU32::new(2),
            last_interaction_ms: AtomicI64::new(now_ms),
            last_cmd: Mutex::new("NULL".into()),
            in_multi: AtomicBool::new(false),
            multi_len: AtomicI64::new(-1),
            multi_mem: AtomicUsize::new(0),
            watching: AtomicUsize::new(0),
            no_evict: AtomicBool::new(false),
            durable: Mutex::new(None),
            qbuf: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            qbuf_resize: AtomicBool::new(false),
            tot_mem: AtomicUsize::new(0),
            killed: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            waker: Mutex::new(None),
            blocked: Mutex::new(None),
            net_in: AtomicU64::new(0),
            net_out: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            runs: AtomicU64::new(0),
            outbox: crate::core::outbox::Outbox::default(),
            subs: Default::default(),
            tracking: Mutex::new(crate::subsystems::tracking::State::default()),
            monitor: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            user: Mutex::new(b"default".to_vec()),
            raw_bytes: AtomicBool::new(false),
        }
    }

    /// Marks the start of a run of commands (the connection's thread
    /// only). The fence orders this mark before every read of the pause
    /// state the run's commands make, against the fence in
    /// [`Shared::quiesce`](crate::Shared::quiesce) after a hold is set:
    /// either the run sees the hold, or `quiesce` sees the run and waits
    /// for its end. One fence per batch, not per command.
    #[inline]
    pub fn begin_run(&self) {
        let s = self.runs.load(Ordering::Relaxed);
        if s & 1 == 0 {
            self.runs.store(s + 1, Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }

    /// Marks the end of a run begun by [`begin_run`](Self::begin_run):
    /// everything its commands wrote, and published to the effects
    /// record, happens before.
    #[inline]
    pub fn end_run(&self) {
        let s = self.runs.load(Ordering::Relaxed);
        if s & 1 == 1 {
            self.runs.store(s + 1, Ordering::Release);
        }
    }

    /// Whether the client is in pub/sub mode (subscribed to anything).
    pub fn subscribed(&self) -> bool {
        self.subs.iter().any(|n| n.load(Ordering::Relaxed) > 0)
    }

    /// Queues an out-of-band message (a push) and wakes the connection.
    pub fn push(&self, msg: Vec<u8>) {
        self.push_kind(crate::core::outbox::Kind::Push, msg);
    }

    /// [`push`](Self::push) with the place it takes among the replies.
    pub fn push_kind(&self, kind: crate::core::outbox::Kind, msg: Vec<u8>) {
        self.outbox.push(kind, msg);
        if let Some(w) = &*self.waker.lock() {
            w();
        }
    }

    /// Asks the connection to close (CLIENT KILL, shutdown).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        if let Some(w) = &*self.waker.lock() {
            w();
        }
    }
}

/// `CLIENT REPLY` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReplyMode {
    #[default]
    On,
    Off,
    /// Skip the reply of the current command (set by the previous one).
    Skip,
    /// Set by `CLIENT REPLY SKIP`: becomes `Skip` once this command ends.
    SkipNext,
}

/// A queued `MULTI` command.
pub type Queued = Vec<Vec<u8>>;

/// State of an open `MULTI`.
#[derive(Default, Debug)]
pub struct Multi {
    pub queued: Vec<Queued>,
    /// A command failed to queue: EXEC answers EXECABORT.
    pub dirty: bool,
    /// The union of the queued commands' flags (EXEC is refused when over
    /// maxmemory if one may grow memory, held by a write pause if one
    /// writes).
    pub flags: crate::core::spec::Flags,
    /// The union of the flags each queued command lacks (Redis's
    /// `cmd_inv_flags`): an EXEC with one command not allowed on a stale
    /// replica is refused there.
    pub inv_flags: crate::core::spec::Flags,
}

/// Counters a connection keeps locally and flushes into the shared stats
/// once per batch.
#[derive(Default, Debug, Clone, Copy)]
pub struct LocalStats {
    pub commands: u64,
    pub hits: u64,
    pub misses: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    /// Redis's `server.dirty` increase.
    pub dirty: u64,
}

/// The engine's per-connection state.
pub struct Session {
    pub handle: Arc<ClientHandle>,
    pub db: usize,
    pub authenticated: bool,
    /// The ACL user commands are checked against (the default user until
    /// AUTH), as of the last epoch the session saw.
    pub user: Arc<crate::subsystems::acl::User>,
    /// Authenticated (or needing no AUTH) as a user whose rules allow
    /// everything: with `plain`, the one flag that skips `check`.
    pub acl_free: bool,
    pub multi: Option<Multi>,
    pub watch_flag: WatchFlag,
    /// Watched (db, key) pairs, and whether each was already expired when
    /// watched (Redis aborts EXEC if a live watched key expires).
    pub watched: Vec<(usize, Box<[u8]>, bool)>,
    pub reply_mode: ReplyMode,
    /// Close once pending replies are written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// Set while executing the commands of EXEC.
    pub in_exec: bool,
    pub stats: LocalStats,
    /// The last command looked up (top-level, and itself or a subcommand),
    /// published to `handle.last_cmd` by the connection once per batch.
    pub last_cmd:
        Option<(&'static crate::core::spec::CommandSpec, &'static crate::core::spec::CommandSpec)>,
    /// The bytes `last_cmd` was called by, as the client sent them (up to
    /// 16; a longer name is not kept): a pipeline's next request is
    /// recognised by a word compare, in whatever case it spells the name.
    pub last_name: LastName,
    /// Set by a blocking command that found nothing to pop: the connection
    /// runs nothing else until the wait ends.
    pub blocked: Option<crate::core::blocking::Blocked>,
    /// Held by CLIENT PAUSE (counted in `blocked_clients` until its
    /// request is tried again).
    pub postponed: bool,
    /// The load ([`Shared::load_generation`](crate::Shared::load_generation))
    /// this client's commands were last refused `-LOADING` in: it waited
    /// for that load once ([`Shared::await_load`](crate::Shared::await_load))
    /// and is refused at once for the rest of it.
    pub refused_load: u64,
    /// Keys made ready for blocked clients by the current command, as
    /// (global stripe id, key); served when the command (or EXEC) ends.
    pub ready: Vec<(u32, Box<[u8]>)>,
    /// The effects record of the running command and execution unit.
    pub fx: crate::core::effects::Effects,
    /// This connection's copy of the configuration, refreshed when
    /// CONFIG SET moves the epoch: handlers read it without a lock.
    conf: Arc<crate::subsystems::config::Config>,
    conf_epoch: u64,
    /// The CLIENT PAUSE state as of `pause_epoch`.
    pause: (i64, crate::core::shared::Pause),
    /// As of `conf_epoch`: no state that needs per-command checks beyond
    /// the session's own (no maxmemory, not loading, no pause set, no
    /// script past busy-reply-threshold).
    plain: bool,
    /// As of `conf_epoch`: the shortest call (µs) the slow log or the
    /// latency monitor wants to see (`slowlog::slow_threshold`).
    pub slow_us: u64,
    /// While a connection runs a batch of requests (`batch_lap` on), the
    /// stopwatch reading at the end of the previous command: the next
    /// command's start, so that back-to-back commands read the clock once
    /// each rather than twice. 0 outside a batch.
    pub lap: u64,
    pub batch_lap: bool,
    /// `min-replicas-to-write` when it applies (with a non-zero
    /// `min-replicas-max-lag`), else 0: writes then need that many good
    /// replicas.
    pub min_replicas: i64,
    /// Set by a handler that wrote an error reply itself (a script's
    /// error): the dispatcher counts the command as failed, as it does one
    /// that returned an error.
    pub error_replied: bool,
    /// Set while a blocked client's command runs again to be served: the
    /// key that became ready (see [`crate::core::blocking`]).
    pub serving: Option<Box<[u8]>>,
    /// Pub/sub subscriptions (see [`crate::subsystems::pubsub`]).
    pub subs: crate::subsystems::pubsub::Subs,
    /// Set by a handler whose output up to this mark is out-of-band
    /// pushes (subscribe confirmations, a message to itself): CLIENT REPLY
    /// OFF/SKIP does not suppress them, as Redis 7.0 writes pushes
    /// whatever the reply mode. Only kept while the reply mode is not On
    /// ([`mark_pushed`](Session::mark_pushed)).
    pub pushed: Option<resp::Mark>,
    /// Subscribed to anything, or monitoring: modes that the dispatcher's
    /// checks must see (kept by pub/sub, MONITOR and RESET).
    pub modal: bool,
    /// Cluster mode: the client sent READONLY (reads served by a replica).
    pub cluster_readonly: bool,
    /// Cluster mode: the client sent ASKING, for its next command (or
    /// transaction).
    pub asking: bool,
    /// Cluster mode: the slot the current command's keys are in (Redis's
    /// `client->slot`), set by routing; a script's commands without
    /// `allow-cross-slot-keys` must stay in it, and the first one with
    /// keys sets it when the script declared none.
    pub cluster_slot: Option<u16>,
    /// Cluster mode: the current command was routed under ASKING (for
    /// routing it again once its keys are locked, ASKING being spent).
    pub cluster_asked: bool,
    /// Tracking mode while `CLIENT TRACKING` is on.
    pub tracking: Option<crate::subsystems::tracking::Mode>,
    /// `CLIENT CACHING yes|no` was given for the next command.
    pub caching: bool,
    /// In MONITOR mode.
    pub monitor: bool,
    /// Arguments of the running command MONITOR must not show (bit i:
    /// argv[i]), set by AUTH and HELLO.
    pub redact: u64,
    /// What the client said with REPLCONF, and its SYNC/PSYNC request
    /// (the connection then becomes a replica).
    pub replica: Option<Box<crate::subsystems::repl::Handshake>>,
    /// `SCRIPT DEBUG YES|SYNC`: the client's next EVAL is debugged.
    pub ldb: Option<crate::subsystems::script::ldb::Mode>,
    /// `DURABLE`: a batch's replies wait until its writes are on replicas
    /// (and fsynced); the connection checks this once per batch.
    pub durable: Option<Durable>,
}

/// A connection's durable-acknowledgement mode (the `DURABLE` command,
/// Sluice's extension, `docs/durable.md`): replies to a batch that wrote
/// are held until `replicas` replicas acknowledged its writes (and, with
/// `fsync`, the local AOF fsynced them), at most `timeout_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Durable {
    pub replicas: u32,
    pub timeout_ms: u64,
    pub fsync: bool,
}

/// The user of sessions that run without a client's identity (tests, the
/// AOF loader, a served blocked command): every permission.
fn full_user() -> Arc<crate::subsystems::acl::User> {
    static FULL: std::sync::OnceLock<Arc<crate::subsystems::acl::User>> =
        std::sync::OnceLock::new();
    FULL.get_or_init(|| Arc::new(crate::subsystems::acl::User::default_user())).clone()
}

/// The configuration a session starts with, before its first refresh.
fn default_conf() -> Arc<crate::subsystems::config::Config> {
    static DEFAULT: std::sync::OnceLock<Arc<crate::subsystems::config::Config>> =
        std::sync::OnceLock::new();
    DEFAULT.get_or_init(|| Arc::new(crate::subsystems::config::Config::default())).clone()
}

/// What one subscription costs the client beyond its name: the session's
/// boxed name and the registry's entry for it (Redis counts a list or
/// dict node per subscription, not the names either).
const SUB_MEM: usize = 16 + 24;
/// One watched key: the session's record and the stripe's watcher entry.
const WATCH_MEM: usize =
    std::mem::size_of::<(usize, Box<[u8]>, bool)>() + std::mem::size_of::<(WatchFlag, bool)>();
/// One BCAST prefix: the client's copy and the tracker's entry.
const PREFIX_MEM: usize = 16 + 24;

impl Session {
    /// The memory of the client's subscriptions, watched keys and
    /// tracking prefixes, for `tot-mem` (Redis's getClientMemoryUsage
    /// adds the same structures' overhead). Counts, not a walk: read once
    /// per batch.
    pub fn state_mem(&self) -> usize {
        self.subs.total() * SUB_MEM
            + self.watched.len() * WATCH_MEM
            + self.tracking.map_or(0, |m| m.prefixes) * PREFIX_MEM
    }

    pub fn new(handle: Arc<ClientHandle>, authenticated: bool) -> Self {
        let mut fx = crate::core::effects::Effects::default();
        fx.client = handle.id;
        Session {
            handle,
            db: 0,
            authenticated,
            user: full_user(),
            acl_free: authenticated,
            multi: None,
            watch_flag: Arc::new(AtomicBool::new(false)),
            watched: Vec::new(),
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            in_exec: false,
            stats: LocalStats::default(),
            last_cmd: None,
            last_name: LastName::default(),
            blocked: None,
            postponed: false,
            refused_load: 0,
            ready: Vec::new(),
            fx,
            conf: default_conf(),
            conf_epoch: u64::MAX,
            pause: (i64::MIN, crate::core::shared::Pause::default()),
            plain: false,
            slow_us: u64::MAX,
            lap: 0,
            batch_lap: false,
            min_replicas: 0,
            error_replied: false,
            serving: None,
            subs: crate::subsystems::pubsub::Subs::default(),
            pushed: None,
            modal: false,
            cluster_readonly: false,
            cluster_slot: None,
            cluster_asked: false,
            asking: false,
            tracking: None,
            caching: false,
            monitor: false,
            redact: 0,
            replica: None,
            ldb: None,
            durable: None,
        }
    }

    /// The session a blocked client's command runs in when another
    /// thread serves it: the client's identity and database, and the key
    /// that became ready.
    pub fn served(handle: Arc<ClientHandle>, db: usize, key: &[u8]) -> Self {
        let mut s = Session::new(handle, true);
        s.db = db;
        s.serving = Some(key.into());
        s
    }

    /// The configuration, as of the last CONFIG SET this connection saw
    /// (one atomic load when nothing changed).
    #[inline]
    pub fn conf(&mut self, shared: &crate::Shared) -> &crate::subsystems::config::Config {
        self.refresh(shared);
        &self.conf
    }

    /// Whether a client's request needs the dispatcher's checks at all:
    /// false when authenticated, outside MULTI, and nothing shared calls
    /// for them (no maxmemory, no loading, no pause, not a read-only
    /// replica). One atomic load.
    #[inline]
    pub fn needs_checks(&mut self, shared: &crate::Shared) -> bool {
        self.refresh(shared);
        !(self.plain && self.acl_free && self.multi.is_none() && !self.modal)
    }

    /// Whether the cached shared state is current (nothing changed since
    /// it was read): one load, for a caller that decided on it earlier.
    #[inline(always)]
    pub fn fresh(&self, shared: &crate::Shared) -> bool {
        shared.config_epoch.load(Ordering::Acquire) == self.conf_epoch
    }

    /// Refreshes the cached shared state if it changed since last seen.
    #[inline]
    fn refresh(&mut self, shared: &crate::Shared) {
        let e = shared.config_epoch.load(Ordering::Acquire);
        if e != self.conf_epoch {
            self.reload(shared, e);
        }
    }

    #[cold]
    fn reload(&mut self, shared: &crate::Shared, e: u64) {
        // The epoch was read first: a change racing with the copy bumps it
        // again, so the next command copies again.
        self.conf = Arc::new(shared.config.read().clone());
        self.conf_epoch = e;
        // The user may have changed (ACL SETUSER, LOAD, requirepass).
        if let Some(u) = shared.acl.get(&self.user.name) {
            self.user = u;
        }
        self.update_acl(shared);
        self.slow_us = crate::subsystems::slowlog::slow_threshold(&self.conf);
        self.fx.sync(&shared.effects);
        let paused = {
            let p = shared.pause.lock();
            p.until_ms > 0 || p.shutdown || p.failover
        };
        // A failed BGSAVE (stop-writes-on-bgsave-error) or AOF write may
        // refuse writes; their status changes move the epoch, as a busy
        // script does.
        let bgsave_ok = shared.persist.disk_ok();
        let (to_write, max_lag) = crate::subsystems::repl::min_replicas(&self.conf);
        self.min_replicas = if max_lag > 0 { to_write } else { 0 };
        self.plain = self.conf.maxmemory == 0
            && self.min_replicas == 0
            && !shared.is_loading()
            && !shared.is_async_loading()
            && !paused
            && bgsave_ok
            && !shared.scripts.is_busy()
            && shared.cluster.get().is_none()
            && !(shared.store.is_replica()
                && (self.conf.replica_read_only || !self.conf.replica_serve_stale_data));
    }

    /// Recomputes [`acl_free`](Session::acl_free) after the user or the
    /// authentication changed.
    pub fn update_acl(&mut self, shared: &crate::Shared) {
        let in_ok = self.authenticated || shared.acl.default_open();
        self.acl_free = in_ok && self.user.free();
    }

    /// Authenticates the session as `user` (AUTH, HELLO AUTH), or returns
    /// it to the default user, unauthenticated unless no AUTH is needed
    /// (RESET, a deleted user).
    pub fn set_user(
        &mut self,
        shared: &crate::Shared,
        user: Option<Arc<crate::subsystems::acl::User>>,
    ) {
        match user {
            Some(u) => {
                self.user = u;
                self.authenticated = true;
            }
            None => {
                self.user = shared.acl.default_user();
                self.authenticated = shared.acl.default_open();
            }
        }
        *self.handle.user.lock() = self.user.name.clone();
        self.update_acl(shared);
    }

    /// Whether CLIENT PAUSE holds `spec` back now (Redis 7.0's rules: WRITE
    /// mode holds writes, may-replicate commands and an EXEC whose
    /// transaction writes; ALL mode holds everything).
    pub fn paused(
        &mut self,
        shared: &crate::Shared,
        spec: &crate::core::spec::CommandSpec,
        argv: &[&[u8]],
        now: i64,
    ) -> bool {
        use crate::core::spec::Flags;
        let epoch = shared.pause_epoch.load(Ordering::Acquire);
        if epoch != self.pause.0 {
            self.pause = (epoch, *shared.pause.lock());
        }
        let p = self.pause.1;
        let client_pause = p.until_ms > 0 && now < p.until_ms;
        if !client_pause && !p.shutdown && !p.failover {
            return false;
        }
        if client_pause && !p.writes_only {
            return true;
        }
        let writes = Flags::WRITE.union(Flags::MAY_REPLICATE);
        // A script's declared flags decide for it (no-writes: not held).
        if crate::subsystems::script::call_flags(shared, spec, argv).0 & writes.0 != 0 {
            return true;
        }
        spec.flags.has(Flags::EXEC_TX)
            && self.multi.as_ref().is_some_and(|m| m.flags.0 & writes.0 != 0)
    }

    /// A session for in-process use (tests, the AOF loader).
    pub fn detached(id: u64) -> Self {
        Session::new(Arc::new(ClientHandle::new(id, String::new(), String::new(), -1, 0)), true)
    }

    /// Everything in `out` so far is pushes, which CLIENT REPLY does not
    /// suppress (see `pushed`).
    pub fn mark_pushed(&mut self, out: &resp::ReplyBuf) {
        if self.reply_mode != ReplyMode::On {
            self.pushed = Some(out.mark());
        }
    }

    /// Recomputes [`modal`](Session::modal) after a subscription or
    /// MONITOR change.
    pub fn update_modal(&mut self) {
        self.modal = self.subs.total() > 0 || self.monitor;
    }

    /// Ends a CLIENT PAUSE hold's count in `blocked_clients` (the held
    /// request is being tried again, or the client went away).
    #[inline]
    pub fn unpostpone(&mut self, shared: &crate::Shared) {
        if self.postponed {
            self.postponed = false;
            shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }
}

/// A command name's bytes as a client sent them ([`Session::last_name`]).
#[derive(Clone, Copy, Default)]
pub struct LastName {
    bytes: [u8; 16],
    /// 0: none kept (a name is never empty when kept).
    len: u8,
}

impl LastName {
    /// Keeps `name` if it is short enough, forgets the previous one else.
    #[inline]
    pub fn set(&mut self, name: &[u8]) {
        if !name.is_empty() && name.len() <= self.bytes.len() {
            self.bytes[..name.len()].copy_from_slice(name);
            self.len = name.len() as u8;
        } else {
            self.len = 0;
        }
    }

    /// Whether `name` is the kept name, byte for byte.
    #[inline(always)]
    pub fn is(&self, name: &[u8]) -> bool {
        self.len != 0 && store::key_eq(name, &self.bytes[..self.len as usize])
    }
}
