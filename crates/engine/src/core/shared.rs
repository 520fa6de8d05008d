//! State shared by every connection: the keyspace, configuration, client
//! registry and statistics. Nothing here is locked on the GET/SET path:
//! counters are flushed once per batch, configuration is read through an
//! epoch-checked copy.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};
use store::Store;

use crate::core::cmdstats::CmdStats;
use crate::core::session::{ClientHandle, LocalStats, Session};
use crate::core::table::{Renames, Table};
use crate::subsystems::config::Config;

/// Server-wide counters (INFO stats).
#[derive(Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    /// Bytes of closed connections (open ones count their own).
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// The open connections' bytes at the last CONFIG RESETSTAT.
    pub net_input_base: AtomicU64,
    pub net_output_base: AtomicU64,
    /// Reads and writes of closed connections, and the open ones' at the
    /// last CONFIG RESETSTAT (as the byte counts).
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    pub reads_base: AtomicU64,
    pub writes_base: AtomicU64,
    pub rejected_calls: AtomicU64,
    pub failed_calls: AtomicU64,
    pub client_qbuf_limit_disconnections: AtomicU64,
    pub client_obuf_limit_disconnections: AtomicU64,
    /// Redis's `server.dirty`: changes since start, in Redis's numbers.
    pub dirty: AtomicU64,
}

/// What the connections hold in memory (see [`Shared::clients_memory`]).
#[derive(Default, Clone, Copy)]
pub struct ClientsMemory {
    pub normal: u64,
    pub replicas: u64,
    pub max_input: u64,
    pub max_output: u64,
}

/// The server's clock: the system's, plus an offset a test can move.
/// A caller freezes it by reading it once (a command, an EXEC, a script
/// runs at one time; see `Locks::now`).
#[derive(Default)]
pub struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    /// Unix time in milliseconds, as the server sees it.
    #[inline]
    pub fn now_ms(&self) -> i64 {
        unix_ms() + self.offset_ms.load(Ordering::Relaxed)
    }

    /// The system's Unix time at a reading `now` of this clock (what
    /// `unix_ms()` said when `now_ms()` returned `now`), without reading
    /// the system clock again.
    #[inline]
    pub fn system_ms(&self, now: i64) -> i64 {
        now - self.offset_ms.load(Ordering::Relaxed)
    }

    /// Moves the clock by `ms` (tests).
    pub fn advance(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

/// `CLIENT PAUSE` state, set by `CLIENT PAUSE`/`UNPAUSE` (commands/client.rs).
///
/// Contract for the connection loops (Redis 7.0's behaviour):
/// - A pause is in force while `until_ms > now` (a past or 0 deadline, or
///   one that wrapped negative, is no pause).
/// - Before running a command, a connection checks it; when paused it
///   leaves that command and the rest of its input unexecuted until the
///   deadline passes or `pause_epoch` changes (UNPAUSE or a new PAUSE bump
///   it and wake every connection through its waker), then re-checks.
/// - `writes_only` (WRITE mode) holds only commands flagged `WRITE` or
///   `MAY_REPLICATE`, and `EXEC` of a transaction holding any; ALL mode
///   holds every command. The pausing client is held like the others;
///   replicas are never held.
/// - While paused, keys are not actively expired or evicted, and lazily
///   expired keys read as missing without being deleted.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pause {
    /// Unix ms until which clients are paused (0: not paused).
    pub until_ms: i64,
    /// Only writes are paused (`WRITE` mode).
    pub writes_only: bool,
    /// Writes are held while a shutdown waits for its replicas (Redis's
    /// `PAUSE_DURING_SHUTDOWN`), whatever CLIENT PAUSE says.
    pub shutdown: bool,
    /// Writes are held while a FAILOVER waits for its target and hands
    /// over (Redis's `PAUSE_DURING_FAILOVER`).
    pub failover: bool,
}

/// A query buffer bigger than this shrinks towards its recent peak
/// (Redis's `PROTO_RESIZE_THRESHOLD`).
pub const QUERY_RESIZE_THRESHOLD: usize = 32 * 1024;

/// Memory figures for `INFO memory`, as the allocator reports them.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemStats {
    pub used_memory: u64,
    pub used_memory_rss: u64,
    pub allocator_allocated: u64,
    pub allocator_active: u64,
    pub allocator_resident: u64,
    /// `mem_allocator` in INFO, e.g. `jemalloc-5.3.0`.
    pub allocator: &'static str,
}

/// What the allocator offers MEMORY MALLOC-STATS and MEMORY PURGE.
#[derive(Clone, Copy)]
pub struct MallocHooks {
    /// The allocator's statistics report, as text.
    pub stats: fn() -> String,
    /// Returns unused dirty pages to the system.
    pub purge: fn(),
    /// DEBUG MALLCTL / MALLCTL-STR: reads (and with a value, writes) an
    /// allocator control, as an integer or as a string.
    pub mallctl: fn(name: &[u8], value: Option<&[u8]>, string: bool) -> Mallctl,
}

/// What an allocator control answered (DEBUG MALLCTL).
pub enum Mallctl {
    Int(i64),
    Str(Vec<u8>),
    /// Written, nothing to read (a write-only control).
    Done,
    /// The C library's text for the error number.
    Err(String),
}

/// The fallback probe: resident set size from `/proc/self/statm`.
pub fn statm_probe() -> MemStats {
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let rss = rss * page;
    MemStats {
        used_memory: rss,
        used_memory_rss: rss,
        allocator_allocated: rss,
        allocator_active: rss,
        allocator_resident: rss,
        allocator: "libc",
    }
}

/// Everything the connections share.
pub struct Shared {
    pub store: Store,
    /// ACL users, the ACL log and the denial counters.
    pub acl: crate::subsystems::acl::Registry,
    pub config: RwLock<Config>,
    /// Bumped on every change of what connections cache: CONFIG SET,
    /// CLIENT PAUSE/UNPAUSE, loading, the effects consumers
    /// ([`state_changed`](Shared::state_changed)). One load of it per
    /// command tells a connection its cached view still holds.
    pub config_epoch: AtomicU64,
    pub clients: Mutex<BTreeMap<u64, Arc<ClientHandle>>>,
    /// The clients' memory (`tot-mem`) as the connections last added it,
    /// kept while `maxmemory-clients` is set: when a connection's own
    /// figure grows, one load tells it whether to run the exact check
    /// (`evict::evict_clients`).
    pub clients_mem: AtomicI64,
    next_client_id: AtomicU64,
    pub stats: Stats,
    /// Per-command and per-error statistics.
    pub cmdstats: crate::core::cmdstats::CmdStats,
    pub started: Instant,
    pub started_unix_ms: i64,
    pub run_id: String,
    lru: AtomicU32,
    /// What a read stores in the key's access field (`evict::stamp`).
    stamp: AtomicU32,
    /// Eviction state and counters (`maxmemory`).
    pub evictor: crate::subsystems::evict::Evictor,
    pub pause: Mutex<Pause>,
    /// WATCHes dropped while a busy script held their stripe (global id,
    /// key, the dropped flag): taken off the stripe once it is free
    /// (`commands::tx::unwatch_deferred`).
    pub unwatch_later: Mutex<Vec<(u32, Box<[u8]>, store::WatchFlag)>>,
    /// Bumped on every CLIENT PAUSE/UNPAUSE (see [`Pause`]).
    pub pause_epoch: AtomicI64,
    /// Set by SHUTDOWN (and signals): the server stops accepting and exits.
    pub shutdown: AtomicBool,
    /// A shutdown waiting for its replicas (`crate::subsystems::shutdown`).
    pub shutdown_state: crate::subsystems::shutdown::State,
    /// `DEBUG PAUSE-CRON 1`: the server's periodic tick (signals, idle
    /// clients, rates) does nothing until it is set back.
    pub cron_paused: AtomicBool,
    /// The background freer of UNLINK (`crate::subsystems::lazyfree`).
    pub lazyfree: crate::subsystems::lazyfree::LazyFree,
    /// The server's listening port (for INFO and HELLO).
    pub port: AtomicU32,
    /// Number of event-loop threads.
    pub threads: AtomicU32,
    /// CPU time of each event-loop thread (thread id, system µs, user
    /// µs), as of its last tick or INFO: Redis's "main thread" figures
    /// are the sum over the threads that run commands
    /// ([`Shared::note_loop_cpu`]).
    pub loop_cpu: Mutex<Vec<(i32, u64, u64)>>,
    /// Executable path and config file (INFO server).
    pub executable: Mutex<String>,
    pub config_file: Mutex<String>,
    /// Highest `used_memory` seen by INFO.
    pub mem_peak: AtomicU64,
    /// `used_memory` once the server had started (`used_memory_startup`).
    pub mem_startup: AtomicU64,
    /// INFO's instantaneous rates, sampled by [`tick`](Shared::tick).
    pub rates: crate::subsystems::rates::Rates,
    /// SLOWLOG's entries.
    pub slowlog: crate::subsystems::slowlog::SlowLog,
    /// LATENCY's events.
    pub latency: crate::subsystems::latency::Monitor,
    /// `expired_keys` at the last CONFIG RESETSTAT (the stripes keep totals).
    pub expired_keys_base: AtomicU64,
    /// Clients waiting in a blocking command (INFO `blocked_clients`).
    pub blocked_clients: AtomicUsize,
    /// The consumers of the effects record (AOF, replicas, notifications).
    pub effects: crate::core::effects::Hub,
    /// The recorder `DEBUG EFFECTS` installed, if any (a test hook).
    pub debug_recorder: Mutex<Option<Arc<crate::core::effects::Recorder>>>,
    pub clock: Clock,
    /// What the server plugged in (persistence, replication, network,
    /// allocator, log), fixed when it built this.
    pub host: crate::core::host::Host,
    /// What INFO persistence reports.
    pub persist: crate::subsystems::snapshot::PersistState,
    /// The script cache (EVAL, SCRIPT LOAD).
    pub scripts: crate::subsystems::script::Cache,
    /// Pub/sub channels, patterns and shard channels.
    pub pubsub: Arc<crate::subsystems::pubsub::Registry>,
    /// Clients in MONITOR mode, and how many (one load per command).
    pub monitors: RwLock<Vec<Arc<ClientHandle>>>,
    pub nmonitors: AtomicUsize,
    /// Client-side caching tables.
    pub tracker: Arc<crate::subsystems::tracking::Tracker>,
    /// The keyspace notifier, installed while `notify-keyspace-events`
    /// is set.
    notifier: Mutex<Option<Arc<crate::subsystems::pubsub::Notifier>>>,
    /// The job queue (commands/queue): touched only while holding the
    /// job namespace's stripe ([`store::Store::jobs_id`]), which orders it
    /// with the keyspace; the mutex itself is never contended then.
    pub jobs: Mutex<queue::Jobs>,
    /// Set while a dataset loads: commands without the LOADING flag wait.
    loading: AtomicBool,
    /// Bytes of datasets loaded so far, all loads together (what
    /// [`Shared::await_load`] measures a load's progress by).
    load_progress: AtomicU64,
    /// Loads begun so far (the current one's number while loading).
    load_generation: AtomicU64,
    /// What INFO shows of the load under way.
    load_meter: LoadMeter,
    /// Set while a replica receives a full sync it loads asynchronously
    /// (`repl-diskless-load swapdb` from the master it already followed):
    /// the old data is served, commands flagged `no-async-loading` wait.
    async_loading: AtomicBool,
    /// `used_memory` as last measured, and when (unix ms), for the
    /// maxmemory check (measured at most once per millisecond).
    used_memory: AtomicU64,
    used_memory_at: AtomicI64,
    /// The cluster state, set once at start-up with `cluster-enabled yes`
    /// (`subsystems::cluster::enable`); unset on a standalone server.
    pub cluster: std::sync::OnceLock<crate::subsystems::cluster::Cluster>,
    /// Bytes waiting in the clients' outboxes (see `outbox::Outbox`).
    pub in_transit: Arc<AtomicUsize>,
    /// The SIGTERM or SIGINT received and not acted on yet (0: none), as
    /// Redis's `shutdown_asap`: the server hands a signal to each of its
    /// servers here, the tick starts the shutdown, SHUTDOWN ABORT clears
    /// it.
    pub pending_signal: AtomicI32,
    /// A signal asked for a shutdown that has not finished (a second
    /// SIGINT then exits at once).
    pub signalled: AtomicBool,
    /// `lfu-log-factor` and `lfu-decay-time`, read by every LFU stamp
    /// without the configuration's lock (`evict::stamp`).
    pub lfu: crate::subsystems::evict::LfuParams,
    /// The OOM score this server last wrote (`config::apply_oom_score`).
    pub oom: crate::subsystems::config::OomState,
    /// `rename-command` from the configuration, applied at start-up: the
    /// names clients (and scripts, EXEC, the AOF, a master) call commands
    /// by (`table::find_called`).
    pub renames: Option<crate::core::table::Renames>,
    /// The command table, handed over by whoever built this state (the
    /// families' layer builds it: `engine::commands::table()`).
    pub table: &'static Table,
}

/// How long [`Shared::quiesce`] waits for a connection's run to end (a
/// script that runs longer is busy, and the hold goes on without it).
pub const QUIESCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest a client's command waits for a load to end or progress
/// ([`Shared::await_load`]).
pub const LOAD_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// INFO's account of the load under way (Redis's `loading_*` fields):
/// when it began, its size and the writer's `used-mem` when known, and
/// where the server-wide loaded-bytes count stood at its start.
#[derive(Default)]
struct LoadMeter {
    /// Unix seconds.
    started: AtomicI64,
    total: AtomicU64,
    used_mem: AtomicU64,
    base: AtomicU64,
}

/// Unix time in milliseconds.
///
/// `clock_gettime` read directly: through `SystemTime` (the checked
/// subtraction from the epoch, then `as_millis`' 128-bit arithmetic) a
/// connection's reading once per batch cost a request at P=1 some 45
/// instructions more (`bench/instructions`, GET 2,925 -> 2,883). Not
/// `#[inline]`: inlined at its 80 callers it moved the inlining around
/// the request path (PING at P=16 ran 40 instructions more).
pub fn unix_ms() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_REALTIME always exists.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 {
        return SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    }
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

/// Unix time in microseconds.
pub fn unix_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

thread_local! {
    /// This thread's net allocation when it last looked at the used
    /// memory figure, and the millisecond of the measurement it added to
    /// (`Shared::used_memory_now`).
    static MEMORY_SEEN: std::cell::Cell<(Option<u64>, i64)> =
        const { std::cell::Cell::new((None, i64::MIN)) };
}

impl Shared {
    /// Shared state with no host (the engine's tests and tools), running
    /// the commands of `table`.
    pub fn new(config: Config, table: &'static Table) -> Arc<Shared> {
        Shared::with_host(config, table, |_| crate::core::host::Host::none())
    }

    /// Shared state for a server running the commands of `table` (which
    /// becomes the installed one, `table::install`): `host` builds what
    /// the server plugs in (given the state it will belong to, not yet
    /// usable), once.
    pub fn with_host(
        config: Config,
        table: &'static Table,
        host: impl FnOnce(&Weak<Shared>) -> crate::core::host::Host,
    ) -> Arc<Shared> {
        crate::core::table::install(table);
        // In cluster mode a stripe is a slot (Redis Cluster has one
        // database): a slot's keys are one stripe's.
        let store = if crate::subsystems::cluster::configured(&config) {
            Store::new(1, crate::subsystems::cluster::SLOTS)
        } else {
            Store::new(config.databases, 1024)
        };
        let seed = unix_us() as u64 ^ (std::process::id() as u64) << 32;
        let mut x = seed | 1;
        let run_id: String = (0..40)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b"0123456789abcdef"[(x % 16) as usize])
            })
            .collect();
        let jobs = queue::Jobs::new(run_id.as_bytes(), seed);
        let acl = crate::subsystems::acl::Registry::default();
        acl.set_default_password(config.requirepass.as_deref().filter(|p| !p.is_empty()));
        // Checked when the configuration was read (`check_renames`).
        let renames = Renames::build(table, &config.rename_commands).ok().flatten();
        let shared = Arc::new_cyclic(|weak| Shared {
            host: host(weak),
            in_transit: Arc::default(),
            pending_signal: AtomicI32::new(0),
            signalled: AtomicBool::new(false),
            lfu: Default::default(),
            oom: Default::default(),
            renames,
            table,
            store,
            acl,
            jobs: Mutex::new(jobs),
            config: RwLock::new(config),
            config_epoch: AtomicU64::new(0),
            clients: Mutex::new(BTreeMap::new()),
            clients_mem: AtomicI64::new(0),
            next_client_id: AtomicU64::new(1),
            stats: Stats::default(),
            cmdstats: CmdStats::new(table),
            started: Instant::now(),
            started_unix_ms: unix_ms(),
            run_id,
            lru: AtomicU32::new(crate::subsystems::evict::lru_clock_at(unix_ms())),
            stamp: AtomicU32::new(0),
            evictor: Default::default(),
            pause: Mutex::new(Pause::default()),
            loop_cpu: Mutex::new(Vec::new()),
            unwatch_later: Mutex::new(Vec::new()),
            pause_epoch: AtomicI64::new(0),
            shutdown: AtomicBool::new(false),
            shutdown_state: Default::default(),
            cron_paused: AtomicBool::new(false),
            lazyfree: Default::default(),
            port: AtomicU32::new(0),
            threads: AtomicU32::new(1),
            executable: Mutex::new(String::new()),
            config_file: Mutex::new(String::new()),
            mem_peak: AtomicU64::new(0),
            mem_startup: AtomicU64::new(0),
            rates: Default::default(),
            slowlog: Default::default(),
            latency: Default::default(),
            expired_keys_base: AtomicU64::new(0),
            blocked_clients: AtomicUsize::new(0),
            effects: crate::core::effects::Hub::default(),
            debug_recorder: Mutex::new(None),
            clock: Clock::default(),
            persist: crate::subsystems::snapshot::PersistState::new(unix_ms() / 1000),
            scripts: crate::subsystems::script::Cache::default(),
            pubsub: Arc::default(),
            tracker: Arc::default(),
            monitors: RwLock::new(Vec::new()),
            nmonitors: AtomicUsize::new(0),
            notifier: Mutex::new(None),
            loading: AtomicBool::new(false),
            load_progress: AtomicU64::new(0),
            load_generation: AtomicU64::new(0),
            load_meter: LoadMeter::default(),
            async_loading: AtomicBool::new(false),
            used_memory: AtomicU64::new(0),
            used_memory_at: AtomicI64::new(i64::MIN),
            cluster: std::sync::OnceLock::new(),
        });
        shared.config_applied();
        shared
    }

    /// Applies what the configuration says to the parts that do not read
    /// it per command: the pub/sub output limit, the keyspace notifier.
    /// Called at start and after every CONFIG SET.
    /// Records the calling thread's CPU time in [`Shared::loop_cpu`]: an
    /// event loop calls it on every tick (`add`), INFO on the thread it
    /// runs on so that thread's figure is current (only when listed).
    /// Returns the sums over the listed threads (system, user), in µs.
    pub fn note_loop_cpu(&self, add: bool) -> (u64, u64) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        // SAFETY: getrusage fills the zeroed struct we own.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer; RUSAGE_THREAD is the caller's thread.
        let ok = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0;
        let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
        let mut v = self.loop_cpu.lock();
        if ok {
            let now = (tid, us(ru.ru_stime), us(ru.ru_utime));
            match v.iter_mut().find(|e| e.0 == tid) {
                Some(e) => *e = now,
                None if add => v.push(now),
                None => {}
            }
        }
        v.iter().fold((0, 0), |(s, u), e| (s + e.1, u + e.2))
    }

    pub fn config_applied(&self) {
        crate::subsystems::cluster::announce(self);
        let (flags, hard, max_keys, lfu) = {
            let c = self.config.read();
            self.lfu.set(c.lfu_log_factor, c.lfu_decay_time);
            let lfu = crate::subsystems::evict::Policy::parse(&c.maxmemory_policy).lfu();
            (c.notify_keyspace_events, c.obuf_pubsub.hard, c.tracking_table_max_keys, lfu)
        };
        self.update_stamp(lfu);
        self.pubsub.set_hard_limit(hard);
        self.tracker.max_keys.store(max_keys as usize, Ordering::Relaxed);
        self.tracker.enforce_limit();
        let mut n = self.notifier.lock();
        match (&*n, flags != 0) {
            (Some(x), true) => x.set_flags(flags),
            (None, true) => {
                let x =
                    Arc::new(crate::subsystems::pubsub::Notifier::new(self.pubsub.clone(), flags));
                self.add_consumer(x.clone());
                *n = Some(x);
            }
            (Some(x), false) => {
                let c: Arc<dyn crate::core::effects::Consumer> = x.clone();
                self.remove_consumer(&c);
                *n = None;
            }
            (None, false) => {}
        }
    }

    /// Whether a dataset is loading (commands without LOADING are refused).
    #[inline]
    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed)
    }

    /// The number of the load under way (or of the last one).
    pub fn load_generation(&self) -> u64 {
        self.load_generation.load(Ordering::Relaxed)
    }

    /// The size of what is loading, in bytes (a file's, the AOF files'
    /// together, a payload's when the master said it): INFO's
    /// `loading_total_bytes`.
    pub fn set_load_size(&self, bytes: u64) {
        self.load_meter.total.store(bytes, Ordering::Relaxed);
    }

    /// The `used-mem` the loading file's head recorded: INFO's
    /// `loading_rdb_used_mem`, the estimate of a load of unknown size.
    pub fn set_load_used_mem(&self, bytes: u64) {
        self.load_meter.used_mem.store(bytes, Ordering::Relaxed);
    }

    /// INFO's lines on the load under way (Redis 7.0's, after the
    /// persistence section's others, while `loading` reads 1).
    pub fn load_lines(&self) -> [(&'static str, String); 6] {
        let m = &self.load_meter;
        let started = m.started.load(Ordering::Relaxed);
        let total = m.total.load(Ordering::Relaxed);
        let used_mem = m.used_mem.load(Ordering::Relaxed);
        let loaded =
            self.load_progress.load(Ordering::Relaxed).wrapping_sub(m.base.load(Ordering::Relaxed));
        // Redis's genRedisInfoString: the file's size when known, else
        // the writer's memory as a (capped) estimate.
        let (mut perc, mut remaining) = (0.0f64, 1i64);
        if total > 0 {
            perc = loaded as f64 / total as f64 * 100.0;
            remaining = total as i64 - loaded as i64;
        } else if used_mem > 0 {
            perc = (loaded as f64 / used_mem as f64 * 100.0).min(99.99);
            remaining = (used_mem as i64 - loaded as i64).max(1);
        }
        let elapsed = unix_ms() / 1000 - started;
        let eta = if elapsed == 0 {
            1
        } else {
            (elapsed as i128 * remaining as i128 / (loaded as i128 + 1)) as i64
        };
        [
            ("loading_start_time", started.to_string()),
            ("loading_total_bytes", total.to_string()),
            ("loading_rdb_used_mem", used_mem.to_string()),
            ("loading_loaded_bytes", loaded.to_string()),
            ("loading_loaded_perc", format!("{perc:.2}")),
            ("loading_eta_seconds", eta.to_string()),
        ]
    }

    /// Counts `bytes` more of the dataset loading as loaded.
    pub fn load_progressed(&self, bytes: usize) {
        self.load_progress.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Waits, for a client's command that arrived while a dataset loads,
    /// until the load ends or has taken `interval` bytes more; true if it
    /// is still loading then (the command is refused with `-LOADING`).
    ///
    /// Redis loads on its one thread and turns to its clients only every
    /// `loading-process-events-interval-bytes` (2 MB) of the load, so a
    /// client never sees a small load: a replica's full sync of a few
    /// keys, DEBUG RELOAD of a small dataset. Sluice loads on another
    /// thread than the client's, so the client waits here as long as
    /// Redis's would have, but at most [`LOAD_WAIT`]: Redis's wait has no
    /// bound when a load stalls (a master that stops sending), this one
    /// does. A client waits once a load (see `Session::refused_load`):
    /// the commands of a pipeline after the first are refused at once, as
    /// Redis answers them all in one turn.
    #[cold]
    pub fn await_load(&self, interval: u64) -> bool {
        let from = self.load_progress.load(Ordering::Relaxed);
        let since = std::time::Instant::now();
        while self.is_loading() {
            let taken = self.load_progress.load(Ordering::Relaxed).wrapping_sub(from);
            if taken >= interval || since.elapsed() >= LOAD_WAIT {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        false
    }

    /// Marks the start or end of loading a dataset. A start while none
    /// runs also starts INFO's account of it, of a size not known yet
    /// ([`start_load`](Self::start_load)).
    pub fn set_loading(&self, on: bool) {
        if on && !self.loading.load(Ordering::Relaxed) {
            self.start_load(0);
            return;
        }
        if on {
            self.load_generation.fetch_add(1, Ordering::Relaxed);
        }
        self.loading.store(on, Ordering::Release);
        self.state_changed();
    }

    /// Starts loading a dataset of `size` bytes (0: not known yet; see
    /// [`set_load_size`](Self::set_load_size)): INFO's account of the load
    /// (`loading_start_time` now, nothing loaded, the writer's `used-mem`
    /// unknown until [`set_load_used_mem`](Self::set_load_used_mem)) is
    /// in place before `loading` reads 1. A load that hands over to
    /// another part of itself (a replica's parsed payload going into the
    /// store) calls [`set_loading`](Self::set_loading) again and stays
    /// one load.
    pub fn start_load(&self, size: u64) {
        let m = &self.load_meter;
        m.started.store(unix_ms() / 1000, Ordering::Relaxed);
        m.base.store(self.load_progress.load(Ordering::Relaxed), Ordering::Relaxed);
        m.total.store(size, Ordering::Relaxed);
        m.used_mem.store(0, Ordering::Relaxed);
        self.load_generation.fetch_add(1, Ordering::Relaxed);
        self.loading.store(true, Ordering::Release);
        self.state_changed();
    }

    /// Whether a replica's full sync loads while the old data is served
    /// (INFO's `async_loading`).
    #[inline]
    pub fn is_async_loading(&self) -> bool {
        self.async_loading.load(Ordering::Relaxed)
    }

    /// Marks the start or end of an asynchronous load.
    pub fn set_async_loading(&self, on: bool) {
        self.async_loading.store(on, Ordering::Release);
        self.state_changed();
    }

    /// Tells every connection to refresh what it caches of the shared
    /// state (configuration, pause, loading, effects consumers).
    pub fn state_changed(&self) {
        self.config_epoch.fetch_add(1, Ordering::Release);
    }

    /// Changes what is paused (CLIENT PAUSE, a shutdown or a failover
    /// waiting for replicas) and tells every connection. While anything
    /// holds writes, no key expires, lazily or actively (Redis's
    /// `checkClientPauseTimeoutAndReturnIfPaused` for every pause
    /// purpose): the data set holds still, so the replication offset a
    /// failover compares does not move under it.
    pub fn change_pause(&self, change: impl FnOnce(&mut Pause)) {
        {
            let mut p = self.pause.lock();
            change(&mut p);
            let held = if p.shutdown || p.failover { i64::MAX } else { p.until_ms };
            self.store.hold_expiry(held);
        }
        self.pause_epoch.fetch_add(1, Ordering::Release);
        self.state_changed();
        // Paused connections wait for a change of the epoch (or the deadline).
        for h in self.clients.lock().values() {
            if let Some(w) = &*h.waker.lock() {
                w();
            }
        }
    }

    /// Waits until nothing that began before a hold set with
    /// [`change_pause`](Self::change_pause) can still write: the
    /// replication offset read after it is the held data set's, as
    /// Redis's single thread has it the moment it pauses. A client's
    /// command checks the pause before it locks its keys, so one that
    /// passed the check just before the hold may still be running, or
    /// waiting for a stripe; its connection's run mark
    /// ([`ClientHandle::begin_run`]) is odd until it ends. Then every
    /// stripe is taken once: active expiry and the job queue's timers
    /// read the hold with a stripe held, so a pass that began before the
    /// hold stops at its next stripe. `false` when a run did not end
    /// within `limit` (a busy script): the caller goes on, as before.
    ///
    /// Not for a thread that holds stripes or runs a connection's batch.
    ///
    /// [`ClientHandle::begin_run`]: crate::core::session::ClientHandle::begin_run
    pub fn quiesce(&self, limit: std::time::Duration) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        let running: Vec<(Arc<ClientHandle>, u64)> = self
            .clients
            .lock()
            .values()
            .filter_map(|h| {
                let v = h.runs.load(Ordering::Acquire);
                (v & 1 == 1).then(|| (h.clone(), v))
            })
            .collect();
        let end = std::time::Instant::now() + limit;
        for (h, v) in running {
            while h.runs.load(Ordering::Acquire) == v {
                if std::time::Instant::now() > end {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        let mut all = store::Locks::new(&self.store, 0);
        for db in 0..self.store.databases() {
            // Nothing is held, so the stripes lock in order.
            let _ = all.acquire_db(db);
        }
        all.release();
        true
    }

    /// Turns client-side caching on for a session (`CLIENT TRACKING ON`),
    /// installing the tracker as a consumer the first time.
    pub fn enable_tracking(
        &self,
        sess: &mut Session,
        opts: crate::subsystems::tracking::Options,
    ) -> Result<(), crate::core::error::CmdError> {
        self.tracker.enable(sess, opts)?;
        if self.tracker.needs_install() {
            self.add_consumer(self.tracker.clone());
        }
        Ok(())
    }

    /// Installs a consumer of the effects record (AOF, replicas,
    /// notifications, a test's recorder).
    pub fn add_consumer(&self, c: Arc<dyn crate::core::effects::Consumer>) {
        self.effects.add(c);
        self.state_changed();
    }

    /// Removes a consumer installed with [`add_consumer`](Self::add_consumer).
    pub fn remove_consumer(&self, c: &Arc<dyn crate::core::effects::Consumer>) {
        self.effects.remove(c);
        self.state_changed();
    }

    /// Whether used memory exceeds `max` (a `maxmemory` that is set).
    /// Never asks the allocator when no limit is set (refreshing jemalloc's
    /// statistics costs about a million instructions).
    pub fn over_maxmemory(&self, max: u64) -> bool {
        max > 0 && self.used_memory_now() > max
    }

    /// Used memory as the maxmemory check sees it: the allocator's figure,
    /// asked at most once a millisecond, plus what this thread allocated
    /// (or minus what it freed) since it last looked.
    ///
    /// A thread's change is added only when its previous look was after
    /// the current measurement: a change from before it is in that
    /// measurement already. Frees by threads that do not look (a closed
    /// client's buffers) still make the figure run ahead of the allocator
    /// until the next measurement, so eviction measures before it acts
    /// ([`used_memory_measured`](Self::used_memory_measured)).
    pub fn used_memory_now(&self) -> u64 {
        let now = unix_ms();
        let at = self.used_memory_at.load(Ordering::Relaxed);
        if at != now {
            return self.measure_used_memory(now);
        }
        let net = self.thread_allocated();
        let (last, seen_at) = MEMORY_SEEN.with(|c| c.replace((net, at)));
        if seen_at == at {
            if let (Some(a), Some(b)) = (last, net) {
                let d = b.wrapping_sub(a) as i64;
                if d > 0 {
                    return self.used_memory.fetch_add(d as u64, Ordering::Relaxed) + d as u64;
                }
                self.used_memory_freed(d.unsigned_abs());
            }
        }
        self.used_memory.load(Ordering::Relaxed)
    }

    /// Used memory asked of the allocator now, which
    /// [`used_memory_now`](Self::used_memory_now) then builds on.
    pub fn used_memory_measured(&self) -> u64 {
        self.measure_used_memory(unix_ms())
    }

    fn measure_used_memory(&self, now: i64) -> u64 {
        self.used_memory_at.store(now, Ordering::Relaxed);
        let used = self.mem_stats().used_memory;
        self.used_memory.store(used, Ordering::Relaxed);
        MEMORY_SEEN.with(|c| c.set((self.thread_allocated(), now)));
        used
    }

    /// Takes `n` freed bytes off the figure [`used_memory_now`]
    /// (Self::used_memory_now) keeps between two measurements.
    pub fn used_memory_freed(&self, n: u64) {
        let _ = self
            .used_memory
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| Some(u.saturating_sub(n)));
    }

    /// This thread's bytes allocated minus freed (wrapping), when the
    /// server installed the allocator's probe.
    #[inline]
    pub fn thread_allocated(&self) -> Option<u64> {
        self.host.memory.thread_net.map(|p| p())
    }

    /// One active-expiry pass over the stripes `part` of `parts` owns
    /// (see `Store::active_expire_cycle`); each deletion is its own unit
    /// of the effects record (an `expired` event, a `DEL` propagated), as
    /// Redis's active expiry propagates key by key. `fx` is the calling
    /// thread's record. Returns keys expired.
    pub fn active_expire(
        &self,
        fx: &mut crate::core::effects::Effects,
        part: usize,
        parts: usize,
        budget: std::time::Duration,
    ) -> usize {
        // A replica leaves expiry, and the job queue's timers, to its
        // master, whose stream brings the DELs and job changes; only the
        // keys its own clients gave a TTL (a writable replica) are its own
        // to expire, as Redis's expireSlaveKeys.
        if self.store.is_replica() {
            fx.sync(&self.effects);
            let now = self.clock.now_ms();
            let on_expired = &mut |db, key: &[u8]| {
                fx.sync(&self.effects);
                fx.begin_command();
                fx.expired(db, key);
                fx.finish_unit();
            };
            return self.store.expire_replica_keys(part, parts, now, on_expired);
        }
        fx.sync(&self.effects);
        let now = self.clock.now_ms();
        if part == 0 {
            // The job queue's retries, delays and TTLs run from the same
            // tick, once per tick (thread 0's share).
            crate::subsystems::jobs::tick(self, fx, now);
        }
        let started = Instant::now();
        let mut ready = Vec::new();
        let on_expired = &mut |db, key: &[u8]| {
            // With the key's stripe held (see `dispatch::call`).
            fx.sync(&self.effects);
            fx.begin_command();
            fx.expired(db, key);
            fx.finish_unit();
        };
        let n = self.store.active_expire_cycle(part, parts, now, budget, on_expired, &mut ready);
        if !ready.is_empty() {
            // Clients waiting on keys that expired (a group reader whose
            // stream went ends with an error, as Redis 7.0 signals a
            // deleted stream), served with no stripe held.
            crate::core::blocking::serve_ready(self, &mut ready);
        }
        // The latency monitor's `expire-cycle` event, as Redis records it.
        let ms = started.elapsed().as_millis() as u64;
        if ms > 0 {
            let threshold = self.config.read().latency_monitor_threshold;
            if threshold > 0 && ms as i64 >= threshold {
                self.latency.add("expire-cycle", ms, now / 1000);
            }
        }
        n
    }

    /// Next client id (CLIENT ID), never reused.
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The LRU clock (Unix seconds on 24 bits, as Redis's), advanced by the
    /// server's timer.
    #[inline]
    pub fn lru_clock(&self) -> u32 {
        self.lru.load(Ordering::Relaxed)
    }

    /// Called by the server's timer (every 100 ms).
    pub fn tick(&self) {
        self.lru.store(crate::subsystems::evict::lru_clock_at(unix_ms()), Ordering::Relaxed);
        let (input, output) = self.net_bytes();
        let commands = self.stats.commands_processed.load(Ordering::Relaxed);
        self.rates.track(unix_ms(), [commands, input, output]);
        let lfu = self.stamp.load(Ordering::Relaxed) & crate::subsystems::evict::LFU_BIT != 0;
        self.update_stamp(lfu);
        crate::subsystems::evict::evict_clients(self);
        self.resize_query_buffers();
    }

    /// Asks the connections whose query buffer wastes room to resize it
    /// (Redis's clientsCronResizeQueryBuffer, decided by the connection,
    /// which knows its recent peak): an idle one past 2 s frees it, a big
    /// one shrinks towards what it recently held.
    fn resize_query_buffers(&self) {
        let now = unix_ms();
        for h in self.clients.lock().values() {
            let used = h.qbuf.load(Ordering::Relaxed);
            let size = used + h.qbuf_free.load(Ordering::Relaxed);
            if size.saturating_sub(used) <= 4096 {
                continue;
            }
            let idle = now - h.last_interaction_ms.load(Ordering::Relaxed) > 2000;
            if (idle || size > QUERY_RESIZE_THRESHOLD)
                && !h.qbuf_resize.swap(true, Ordering::AcqRel)
            {
                if let Some(w) = &*h.waker.lock() {
                    w();
                }
            }
        }
    }

    fn update_stamp(&self, lfu: bool) {
        let s = crate::subsystems::evict::stamp(lfu, self.lru_clock(), self.clock.now_ms());
        self.stamp.store(s, Ordering::Relaxed);
    }

    /// What an access stores in a key's access field (see
    /// `evict::access`): the LRU clock, or the LFU flag and minute.
    #[inline]
    pub fn access_stamp(&self) -> crate::subsystems::evict::Stamp<'_> {
        crate::subsystems::evict::Stamp { bits: self.stamp.load(Ordering::Relaxed), lfu: &self.lfu }
    }

    /// `total_net_input_bytes` and `total_net_output_bytes`: the closed
    /// connections' (added as they close) and the open ones' own counts,
    /// so the connections never share a counter per read or write.
    pub fn net_bytes(&self) -> (u64, u64) {
        let st = &self.stats;
        let (mut i, mut o) = (
            st.net_input_bytes.load(Ordering::Relaxed),
            st.net_output_bytes.load(Ordering::Relaxed),
        );
        let (li, lo) = self.live_net_bytes();
        i += li;
        o += lo;
        (
            i.saturating_sub(st.net_input_base.load(Ordering::Relaxed)),
            o.saturating_sub(st.net_output_base.load(Ordering::Relaxed)),
        )
    }

    /// The open connections' own byte counts.
    pub fn live_net_bytes(&self) -> (u64, u64) {
        let (mut i, mut o) = (0, 0);
        for h in self.clients.lock().values() {
            i += h.net_in.load(Ordering::Relaxed);
            o += h.net_out.load(Ordering::Relaxed);
        }
        (i, o)
    }

    /// `total_reads_processed` and `total_writes_processed`, counted as
    /// [`net_bytes`](Self::net_bytes) counts bytes.
    pub fn io_counts(&self) -> (u64, u64) {
        let st = &self.stats;
        let (li, lo) = self.live_io_counts();
        (
            (st.reads_processed.load(Ordering::Relaxed) + li)
                .saturating_sub(st.reads_base.load(Ordering::Relaxed)),
            (st.writes_processed.load(Ordering::Relaxed) + lo)
                .saturating_sub(st.writes_base.load(Ordering::Relaxed)),
        )
    }

    /// The open connections' own read and write counts.
    pub fn live_io_counts(&self) -> (u64, u64) {
        let (mut r, mut w) = (0, 0);
        for h in self.clients.lock().values() {
            r += h.reads.load(Ordering::Relaxed);
            w += h.writes.load(Ordering::Relaxed);
        }
        (r, w)
    }

    /// Memory of the connections (buffers and state, as of their last
    /// batch): normal clients and replicas (INFO's `mem_clients_normal`,
    /// `mem_clients_slaves`), and the largest input buffer of one
    /// (`client_recent_max_input_buffer`) and output buffer.
    pub fn clients_memory(&self) -> ClientsMemory {
        let mut m = ClientsMemory::default();
        for h in self.clients.lock().values() {
            let total = h.tot_mem.load(Ordering::Relaxed) as u64;
            if h.replica.load(Ordering::Relaxed) {
                m.replicas += total;
            } else {
                m.normal += total;
            }
            let qbuf =
                (h.qbuf.load(Ordering::Relaxed) + h.qbuf_free.load(Ordering::Relaxed)) as u64;
            m.max_input = m.max_input.max(qbuf);
            m.max_output = m.max_output.max(h.omem.load(Ordering::Relaxed) as u64);
        }
        m
    }

    /// Registers a new connection and returns its session.
    pub fn connect(&self, addr: String, laddr: String, fd: i32) -> Session {
        let id = self.next_client_id();
        let mut handle = ClientHandle::new(id, addr, laddr, fd, unix_ms());
        handle.outbox = crate::core::outbox::Outbox::counting_in(self.in_transit.clone());
        let handle = Arc::new(handle);
        self.clients.lock().insert(id, handle.clone());
        self.stats.connections_received.fetch_add(1, Ordering::Relaxed);
        let mut sess = Session::new(handle, false);
        sess.set_user(self, None);
        sess
    }

    /// Forgets a connection: drops its watches and its registry entry.
    pub fn disconnect(&self, sess: &mut Session) {
        crate::core::blocking::abandon(self, sess);
        sess.unpostpone(self);
        self.pubsub.leave(&mut sess.subs, &sess.handle);
        self.tracker.disable(sess);
        crate::subsystems::monitor::stop(self, sess);
        // Gone for good: redirections to it are broken from now on.
        sess.handle.killed.store(true, Ordering::Release);
        crate::core::multi::unwatch_all(self, sess);
        self.flush_stats(sess);
        let mut clients = self.clients.lock();
        let h = &sess.handle;
        self.stats.net_input_bytes.fetch_add(h.net_in.load(Ordering::Relaxed), Ordering::Relaxed);
        self.stats.net_output_bytes.fetch_add(h.net_out.load(Ordering::Relaxed), Ordering::Relaxed);
        self.stats.reads_processed.fetch_add(h.reads.load(Ordering::Relaxed), Ordering::Relaxed);
        self.stats.writes_processed.fetch_add(h.writes.load(Ordering::Relaxed), Ordering::Relaxed);
        clients.remove(&h.id);
    }

    /// Moves a session's local counters into the shared ones.
    pub fn flush_stats(&self, sess: &mut Session) {
        self.flush_cmdstats(sess);
        let s = std::mem::take(&mut sess.stats);
        let LocalStats { commands, hits, misses, rejected_calls, failed_calls, dirty } = s;
        if dirty > 0 {
            self.stats.dirty.fetch_add(dirty, Ordering::Relaxed);
        }
        if commands > 0 {
            self.stats.commands_processed.fetch_add(commands, Ordering::Relaxed);
        }
        if hits > 0 {
            self.stats.keyspace_hits.fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            self.stats.keyspace_misses.fetch_add(misses, Ordering::Relaxed);
        }
        if rejected_calls > 0 {
            self.stats.rejected_calls.fetch_add(rejected_calls, Ordering::Relaxed);
        }
        if failed_calls > 0 {
            self.stats.failed_calls.fetch_add(failed_calls, Ordering::Relaxed);
        }
    }

    /// Adds this thread's per-command counters to the shared ones
    /// (`sess`'s configuration says whether latencies are tracked).
    pub fn flush_cmdstats(&self, sess: &mut Session) {
        let track = sess.conf(self).latency_tracking;
        // SAFETY: the only reference taken; `flush` takes no other.
        self.cmdstats.flush(unsafe { crate::core::cmdstats::local() }, track);
    }

    /// Current memory figures, from the installed probe.
    pub fn mem_stats(&self) -> MemStats {
        let m = (self.host.memory.probe)();
        self.mem_peak.fetch_max(m.used_memory, Ordering::Relaxed);
        m
    }

    /// Number of connected clients.
    pub fn connected_clients(&self) -> usize {
        self.clients.lock().len()
    }
}
