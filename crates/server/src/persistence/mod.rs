//! A server's persistence: here the RDB side, the engine's [`Snapshots`]
//! seam implemented with the `persist` codec over the server's files
//! (SAVE, BGSAVE on a thread of its own, DEBUG RELOAD, loading at
//! start-up); the append-only file in [`aof`] (loading in [`aof_load`]);
//! the durability position a connection waits on in [`durability`].
//!
//! Saves are point-in-time without `fork()` (`docs/architecture.md`, *Durability*): the store locks
//! every stripe for an instant to mark them all pending, then the saver
//! walks them while clients keep reading and writing; the first lock of a
//! pending stripe, by the saver or by a command about to change it,
//! serialises it as it was. Serialising happens under the stripe's lock,
//! file I/O outside any lock.

pub mod aof;
pub mod aof_load;
pub mod durability;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use engine::core::shared::unix_ms;
use engine::subsystems::config::Config;
use engine::subsystems::snapshot::{RestoreError, Snapshots};
use engine::Shared;
use parking_lot::{Condvar, Mutex};
use persist::file::{self, Aux, Writer};
use persist::value::Limits;
use store::{SnapshotHook, Stripe, Value};

use crate::log;

/// The server's persistence, handed to the engine as `Host::snapshots`.
pub struct Rdb {
    shared: Weak<Shared>,
    temp_seq: AtomicU64,
    /// Set while a snapshot runs: one at a time (SAVE waits for a running
    /// BGSAVE rather than start a second one).
    busy: Arc<AtomicBool>,
}

/// The codec's thresholds from the configuration.
pub fn limits(cfg: &Config) -> Limits {
    Limits {
        list_fill: cfg.list_max_listpack_size,
        hash_max_entries: cfg.hash_max_listpack_entries,
        hash_max_value: cfg.hash_max_listpack_value,
        set_max_intset: cfg.set_max_intset_entries,
        zset: store::types::zset::Limits {
            max_entries: cfg.zset_max_listpack_entries,
            max_value: cfg.zset_max_listpack_value,
        },
    }
}

impl Rdb {
    /// The RDB persistence of a server being built.
    pub fn new(shared: &Weak<Shared>) -> Rdb {
        Rdb {
            shared: shared.clone(),
            temp_seq: AtomicU64::new(0),
            busy: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The flag that one snapshot at a time holds (the store has one
    /// pending snapshot at most): BGSAVE, SAVE and the AOF rewrite share
    /// it (`Node::snapshot_busy`).
    pub fn busy_flag(&self) -> Arc<AtomicBool> {
        self.busy.clone()
    }
}

/// The flag that one snapshot at a time holds (see [`Rdb::busy_flag`]).
pub fn busy_flag(sh: &Shared) -> Arc<AtomicBool> {
    crate::host::node(sh).snapshot_busy.clone()
}

/// Set to stop the running snapshot (Redis kills its child: `CONFIG SET
/// appendonly no` during a rewrite, FLUSHALL during a BGSAVE); cleared
/// when a snapshot begins. One snapshot runs at a time, so one flag.
fn cancel_flag(sh: &Shared) -> &AtomicBool {
    &crate::host::node(sh).snapshot_cancel
}

/// Asks the running snapshot to stop; its writer ends with [`cancelled`].
pub fn cancel_running(sh: &Shared) {
    cancel_flag(sh).store(true, Ordering::Release);
}

/// Which snapshot runs, so that one is cancelled only while it is the
/// one meant: a snapshot's start (which clears the cancel flag) and its
/// end change this under the node's lock, and a cancel decides under it.
#[derive(Debug, Default)]
pub struct SnapshotRun {
    /// Counts the snapshots begun; the running one's number.
    pub seq: u64,
    pub running: bool,
    /// It is a replica's full sync (`Snapshots::snapshot_to`).
    pub for_replicas: bool,
}

/// The number of the snapshot begun last (read at its instant, it names
/// the snapshot being made).
pub fn snapshot_seq(sh: &Shared) -> u64 {
    crate::host::node(sh).snapshot_run.lock().seq
}

/// Cancels snapshot `seq` if it is still running; whether it did.
pub fn cancel_snapshot(sh: &Shared, seq: u64) -> bool {
    let run = crate::host::node(sh).snapshot_run.lock();
    let hit = run.running && run.seq == seq;
    if hit {
        cancel_running(sh);
    }
    hit
}

/// Ends the store's snapshot and marks none running.
fn end_snapshot(sh: &Shared) {
    sh.store.end_snapshot();
    crate::host::node(sh).snapshot_run.lock().running = false;
}

/// The error a cancelled snapshot's writer ends with.
pub fn cancelled(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

/// Redis's `debugDelay`, the pause `rdb-key-save-delay` and
/// `key-load-delay` put after every key: a positive value sleeps that many
/// microseconds; a negative `-n` sleeps one microsecond once in `n` keys.
/// One sleep per key, as Redis's `usleep`, so a save or load slowed this
/// way takes as long as Redis's (the system call's own cost included),
/// not the sum of the delays.
pub fn debug_delay(us: i64) {
    static KEYS: AtomicU64 = AtomicU64::new(0);
    let us = match us {
        0 => return,
        1.. => us.unsigned_abs(),
        _ if KEYS.fetch_add(1, Ordering::Relaxed).is_multiple_of(us.unsigned_abs()) => 1,
        _ => return,
    };
    std::thread::sleep(std::time::Duration::from_micros(us));
}

/// `rdb-key-save-delay` after each of `keys` keys, cut short by a cancel.
fn delay_keys(sh: &Shared, us: i64, keys: u64) {
    let flag = cancel_flag(sh);
    for _ in 0..keys {
        if flag.load(Ordering::Acquire) {
            return;
        }
        if us <= 10_000 {
            debug_delay(us);
            continue;
        }
        // A long pause (a test stalling the save) in slices, so that a
        // cancel does not wait for it.
        let end = Instant::now() + std::time::Duration::from_micros(us.unsigned_abs());
        while !flag.load(Ordering::Acquire) {
            let now = Instant::now();
            if now >= end {
                break;
            }
            std::thread::sleep((end - now).min(std::time::Duration::from_millis(10)));
        }
    }
}

/// `dbfilename` in the server's `dir`.
fn db_path(cfg: &Config) -> PathBuf {
    cfg.path(&cfg.dbfilename)
}

impl Rdb {
    fn skip_checksum(&self) -> bool {
        self.shared.upgrade().is_some_and(|sh| sh.persist.skip_checksum.load(Ordering::Relaxed))
    }

    fn shared(&self) -> Result<Arc<Shared>, String> {
        self.shared.upgrade().ok_or_else(|| "server is stopping".to_string())
    }

    /// Waits until no other snapshot runs, then marks one running.
    fn acquire(&self) {
        while self.busy.swap(true, Ordering::AcqRel) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn release(&self) {
        self.busy.store(false, Ordering::Release);
    }

    /// Records a foreground save's outcome (SAVE, FLUSHALL's save).
    fn saved(&self, sh: &Shared, res: io::Result<()>, dirty: u64) -> Result<(), String> {
        match res {
            Ok(()) => {
                sh.persist.saved(dirty, unix_ms() / 1000);
                // As Redis's rdbSave, a good SAVE clears a failed BGSAVE.
                if !sh.persist.last_bgsave_ok.swap(true, Ordering::Relaxed) {
                    sh.state_changed();
                }
                log::notice("DB saved on disk");
                Ok(())
            }
            Err(e) => {
                log::warning(&format!("Failed saving the DB: {e}"));
                Err(e.to_string())
            }
        }
    }

    /// Writes the snapshot `started` (or one begun now) to a temporary
    /// file, then renames it over `dbfilename` (a crash never leaves half
    /// a file under that name). The caller holds `busy`. A foreground
    /// save (SAVE, a shutdown's) writes `temp-<pid>.rdb` as Redis's does,
    /// which a second SIGINT removes.
    fn write(&self, sh: &Shared, started: Option<Started>, foreground: bool) -> io::Result<()> {
        let started = started.unwrap_or_else(|| begin(sh));
        let tmp = if foreground {
            started.cfg.path(format!("temp-{}.rdb", std::process::id()))
        } else {
            let seq = self.temp_seq.fetch_add(1, Ordering::Relaxed);
            started.cfg.path(format!("temp-{}-{seq}.rdb", std::process::id()))
        };
        let path = db_path(&started.cfg);
        match write_file(sh, started, &tmp, false) {
            Ok(()) => std::fs::rename(&tmp, path),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// A snapshot whose instant has passed: the capture queue, the sizes of
/// the databases at that instant and the configuration it is written with.
pub struct Started {
    cap: Arc<Capture>,
    sizes: Vec<(usize, usize)>,
    cfg: Config,
    /// The job queue's jobs as records (AUX fields `sluice-job`), taken
    /// right after the keyspace's instant (docs/jobs.md).
    jobs: Vec<Vec<u8>>,
    /// The settings of the queues that have any (AUX fields
    /// `sluice-queue`), taken with the jobs.
    queues: Vec<Vec<u8>>,
    /// The function libraries' codes at the snapshot's instant.
    functions: Vec<Box<[u8]>>,
    /// The replication's database, id and offset at the instant (AUX
    /// fields `repl-stream-db`, `repl-id`, `repl-offset`, as Redis's
    /// rdbPopulateSaveInfo), when there is a replication history.
    repl: Option<(usize, String, i64)>,
    /// Whether a snapshot of the keyspace was begun (its stripes are to
    /// be walked); not for FLUSHALL's save of an emptied one.
    walk: bool,
}

impl Started {
    /// The function libraries' codes at the snapshot's instant.
    pub fn functions(&self) -> &[Box<[u8]>] {
        &self.functions
    }
}

/// The AUX field that carries one job of the job queue. Redis 7.0 skips
/// AUX fields it does not know, so the file stays loadable by it.
const JOB_AUX: &str = "sluice-job";
/// The AUX field that carries one queue's settings (pause, rate limit).
const QUEUE_AUX: &str = "sluice-queue";

/// The job records and queue-setting records among an image's AUX
/// fields, in the file's order.
pub fn job_aux(
    aux: &[(Vec<u8>, Vec<u8>)],
) -> (impl Iterator<Item = &[u8]>, impl Iterator<Item = &[u8]>) {
    let of = |name: &'static str| {
        aux.iter().filter(move |(k, _)| k == name.as_bytes()).map(|(_, v)| &v[..])
    };
    (of(JOB_AUX), of(QUEUE_AUX))
}

/// Starts a point-in-time snapshot now (the caller must hold no stripe).
fn begin(sh: &Shared) -> Started {
    begin_then(sh, &mut || {})
}

/// [`begin`], calling `at_instant` at the snapshot's instant (every
/// stripe held).
pub fn begin_then(sh: &Shared, at_instant: &mut dyn FnMut()) -> Started {
    {
        let mut run = crate::host::node(sh).snapshot_run.lock();
        run.seq += 1;
        run.running = true;
        run.for_replicas = false;
        cancel_flag(sh).store(false, Ordering::Release);
    }
    let cfg = sh.config.read().clone();
    let lru_clock = cfg.maxmemory_policy.contains("lru").then(|| sh.lru_clock());
    let lfu = engine::subsystems::evict::Policy::parse(&cfg.maxmemory_policy).lfu().then(|| {
        let now_min = engine::subsystems::evict::lfu_minutes(sh.clock.now_ms());
        (now_min, cfg.lfu_decay_time.clamp(0, i64::from(u32::MAX)) as u32)
    });
    let limit = std::env::var("SLUICE_SNAPSHOT_QUEUE_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(QUEUE_LIMIT);
    let cap = Arc::new(Capture {
        compress: cfg.rdbcompression,
        lru_clock,
        lfu,
        queue: Mutex::new(Vec::new()),
        queued: AtomicUsize::new(0),
        limit,
        drained: Condvar::new(),
        saver: OnceLock::new(),
        done: AtomicBool::new(false),
        cancel: crate::host::node(sh).snapshot_cancel.clone(),
        progress: sh.persist.progress.clone(),
    });
    // The writing FUNCTION subcommands hold every stripe, so the registry
    // read at the instant is the one the keyspace's instant goes with.
    let mut functions = Vec::new();
    let mut repl = None;
    let sizes = sh.store.begin_snapshot_then(cap.clone(), &mut || {
        functions = engine::subsystems::script::function::library_codes(sh);
        at_instant();
        // After `at_instant`: a full sync's resets the stream's database.
        repl = crate::replication::repl::master(sh).and_then(|m| m.save_info());
    });
    sh.persist.progress.begin(sizes.iter().map(|&(keys, _)| keys as u64).sum());
    let (jobs, queues) = engine::subsystems::jobs::records_and_queues(sh);
    Started { cap, sizes, cfg, jobs, queues, functions, repl, walk: true }
}

/// What FLUSHALL's save writes: no keys (its caller holds every
/// database's stripes, all emptied; no snapshot is begun), the function
/// libraries and the jobs.
fn flushed(sh: &Shared) -> Started {
    let cfg = sh.config.read().clone();
    let cap = Arc::new(Capture {
        compress: cfg.rdbcompression,
        lru_clock: None,
        lfu: None,
        queue: Mutex::new(Vec::new()),
        queued: AtomicUsize::new(0),
        limit: QUEUE_LIMIT,
        drained: Condvar::new(),
        saver: OnceLock::new(),
        done: AtomicBool::new(false),
        cancel: crate::host::node(sh).snapshot_cancel.clone(),
        progress: sh.persist.progress.clone(),
    });
    let (jobs, queues) = engine::subsystems::jobs::records_now(sh);
    Started {
        cap,
        sizes: vec![(0, 0); sh.store.databases()],
        cfg,
        jobs,
        queues,
        functions: engine::subsystems::script::function::library_codes(sh),
        repl: crate::replication::repl::master(sh).and_then(|m| m.save_info()),
        walk: false,
    }
}

/// One stripe as it was when the snapshot began, encoded.
struct Captured {
    db: usize,
    keys: u64,
    bytes: Vec<u8>,
}

/// The snapshot hook: serialises a stripe (under its lock, before the
/// command that locked it changes anything) into the queue the saver
/// drains. What waits in the queue is the only extra memory a save costs.
struct Capture {
    compress: bool,
    /// The LRU clock when an LRU maxmemory policy is set: idle times are
    /// then saved with the keys, as Redis does.
    lru_clock: Option<u32>,
    /// The minute and `lfu-decay-time` when an LFU policy is set: the
    /// decayed counters are then saved, as Redis does.
    lfu: Option<(u32, u32)>,
    queue: Mutex<Vec<Captured>>,
    /// Bytes waiting in `queue`; above `limit`, a writer that captured a
    /// stripe waits (holding its stripes) until the saver has written
    /// some out. This bounds what a save costs in memory.
    queued: AtomicUsize,
    limit: usize,
    drained: Condvar,
    /// The saving thread: it never waits for itself.
    saver: OnceLock<std::thread::ThreadId>,
    done: AtomicBool,
    /// The server's cancel flag (`cancel_running`): once set, this
    /// snapshot is abandoned and copies nothing more.
    cancel: Arc<AtomicBool>,
    /// Where the copies a writer forces count (INFO's
    /// `current_cow_size`).
    progress: Arc<engine::subsystems::snapshot::SaveProgress>,
}

/// Default bound of captured-but-unwritten bytes (the environment
/// variable `SLUICE_SNAPSHOT_QUEUE_LIMIT` overrides it, for tests).
const QUEUE_LIMIT: usize = 64 << 20;

impl SnapshotHook for Capture {
    fn capture(&self, db: usize, stripe: &Stripe) {
        // A cancelled snapshot's file is never used: FLUSHALL, which ends
        // it before it locks every stripe, copies none of them.
        if stripe.is_empty() || self.cancel.load(Ordering::Acquire) {
            return;
        }
        let by_writer = self.saver.get() != Some(&std::thread::current().id());
        // A copy a writer forces is made on that writer's path, while its
        // client waits: it is not compressed (LZF would cost that client
        // more than the queue's memory saves). Its bytes are then the
        // data copied, as Redis's copy-on-write is the pages duplicated.
        let compress = self.compress && !by_writer;
        let mut bytes = Vec::new();
        let mut keys = 0;
        for (k, e, expire_at) in stripe.iter_expiring() {
            let access = match (self.lru_clock, self.lfu) {
                (Some(c), _) => {
                    file::Access::Idle(u64::from(engine::subsystems::evict::lru_idle(c, e.lru)))
                }
                (None, Some((now_min, decay))) => file::Access::Freq(
                    engine::subsystems::evict::lfu_decayed(e.lru, now_min, decay) as u8,
                ),
                (None, None) => file::Access::None,
            };
            file::encode_key_with(&mut bytes, k, &e.value, expire_at, access, compress);
            keys += 1;
        }
        let n = bytes.len();
        if by_writer {
            // Copied ahead of the walk because a command came first: the
            // snapshot's copy-on-write.
            self.progress.copied(n as u64, unix_ms());
        }
        let mut q = self.queue.lock();
        q.push(Captured { db, keys, bytes });
        let queued = self.queued.fetch_add(n, Ordering::AcqRel) + n;
        if queued > self.limit && by_writer {
            while self.queued.load(Ordering::Acquire) > self.limit
                && !self.done.load(Ordering::Acquire)
                && !self.cancel.load(Ordering::Acquire)
            {
                self.drained.wait_for(&mut q, std::time::Duration::from_millis(10));
            }
        }
    }
}

/// Writes a point-in-time snapshot of the keyspace to `tmp`: the instant
/// is when [`store::Store::begin_snapshot`] returns; the saver then walks
/// the stripes, and a write reaching a stripe first captures it as it was.
pub fn write_file(sh: &Shared, started: Started, tmp: &PathBuf, aof_base: bool) -> io::Result<()> {
    let f = match File::create(tmp) {
        Ok(f) => f,
        Err(e) => {
            end_snapshot(sh);
            return Err(e);
        }
    };
    let bw = write_rdb(sh, started, BufWriter::new(f), aof_base)?;
    let f = bw.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()
}

/// Writes the snapshot `started` as an RDB to `out` and ends the snapshot
/// (whatever happens); returns `out`.
fn write_rdb<W: Write>(sh: &Shared, started: Started, out: W, aof_base: bool) -> io::Result<W> {
    let Started { cap, sizes, cfg, jobs, queues, functions, repl, walk } = started;
    let store = &sh.store;
    let now = unix_ms();
    let used = sh.mem_stats().used_memory as i64;
    let mut aux = vec![
        ("redis-ver", Aux::Str(engine::subsystems::config::REDIS_VERSION)),
        ("redis-bits", Aux::Int(64)),
        ("ctime", Aux::Int(now / 1000)),
        ("used-mem", Aux::Int(used)),
    ];
    // An AOF's base carries none (Redis passes no save info there).
    if let Some((db, id, offset)) = repl.as_ref().filter(|_| !aof_base) {
        aux.push(("repl-stream-db", Aux::Int(*db as i64)));
        aux.push(("repl-id", Aux::Str(id)));
        aux.push(("repl-offset", Aux::Int(*offset)));
    }
    aux.push(("aof-base", Aux::Int(i64::from(aof_base))));
    aux.extend(jobs.iter().map(|j| (JOB_AUX, Aux::Bytes(j))));
    aux.extend(queues.iter().map(|q| (QUEUE_AUX, Aux::Bytes(q))));
    let mut w = Writer::new(out, &aux, cfg.rdbcompression, cfg.rdbchecksum);
    let mut result = functions.iter().try_for_each(|code| w.function(code));
    let delay = cfg.rdb_key_save_delay;
    let mut started = vec![false; sizes.len()];
    let mut current = usize::MAX;
    let mut drained = Vec::new();
    let _ = cap.saver.set(std::thread::current().id());
    let mut id = if walk { 0 } else { store.total_stripes() };
    // Past the last stripe, the walk still drains until the captures it
    // passed over without locking (their holders took them) are queued.
    let mut settled = false;
    while !settled {
        if cancel_flag(sh).load(Ordering::Acquire) {
            result = Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
            break;
        }
        if id < store.total_stripes() {
            // Timed, so that a writer waiting for the queue to drain while
            // it holds this stripe cannot stop the saver; drained either way.
            if store.try_snapshot_stripe(id, std::time::Duration::from_millis(1)) {
                id += 1;
            }
        } else {
            settled = store.snapshot_settled();
            if !settled {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        {
            let mut q = cap.queue.lock();
            std::mem::swap(&mut drained, &mut *q);
            let n: usize = drained.iter().map(|c| c.bytes.len()).sum();
            cap.queued.fetch_sub(n, Ordering::AcqRel);
        }
        cap.drained.notify_all();
        for c in drained.drain(..) {
            if result.is_err() {
                continue;
            }
            result = (|| {
                if c.db != current {
                    if started[c.db] {
                        w.reselect_db(c.db)?;
                    } else {
                        let (keys, expires) = sizes[c.db];
                        w.select_db(c.db, keys, expires)?;
                        started[c.db] = true;
                    }
                    current = c.db;
                }
                w.encoded(&c.bytes)
            })();
            if walk {
                sh.persist.progress.processed(c.keys);
            }
            if delay != 0 {
                delay_keys(sh, delay, c.keys);
            }
        }
        if result.is_err() {
            break;
        }
    }
    cap.done.store(true, Ordering::Release);
    cap.drained.notify_all();
    if walk {
        end_snapshot(sh);
        sh.persist.progress.finish(aof_base);
    }
    result?;
    w.finish()
}

/// Loads `dbfilename` if it exists. `Ok(None)` when there is no file.
pub fn load(sh: &Shared, merge: bool) -> Result<Option<file::Loaded>, String> {
    let cfg = sh.config.read().clone();
    let path = db_path(&cfg);
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("Fatal error loading the DB: {e}. Exiting.")),
    };
    if let Ok(md) = f.metadata() {
        sh.set_load_size(md.len());
    }
    let loaded =
        load_reader(sh, &mut f, merge, unix_ms(), sh.clock.now_ms()).map_err(|e| match e {
            // Redis's rdbReportCorruptRDB line, then what Sluice adds: the file.
            LoadError::Rdb(e) => format!(
                "Internal error in RDB reading offset {} -> {}\nShort read or corrupt RDB file \
             '{}': {e}",
                e.offset, e.reason, cfg.dbfilename
            ),
            LoadError::Library(_) => e.to_string(),
        })?;
    Ok(Some(loaded))
}

/// Why an RDB image did not load.
#[derive(Debug)]
pub enum LoadError {
    /// Damaged bytes.
    Rdb(persist::Error),
    /// A function library that does not load (Redis's text).
    Library(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Rdb(e) => write!(f, "{e}"),
            // Redis's two lines (`rdbLoadRio`, then its caller).
            LoadError::Library(e) => write!(
                f,
                "Failed loading library, {e}\nShort read or OOM loading DB. Unrecoverable error, \
                 aborting now."
            ),
        }
    }
}

impl From<persist::Error> for LoadError {
    fn from(e: persist::Error) -> Self {
        if e.reason == persist::functions::PAYLOAD {
            LoadError::Library(e.reason.to_string())
        } else {
            LoadError::Rdb(e)
        }
    }
}

/// A loader for an image with the server's settings (limits, databases,
/// whether the CRC is checked), and the `key-load-delay` to sleep after
/// each key. Keys whose expiry is before `keys_now` are skipped: a replica
/// loading its master's payload passes 0 and keeps them all (Redis's
/// rdbLoad skips expired keys only on a master), leaving their deletion
/// to the master.
pub fn new_loader(sh: &Shared, keys_now: i64) -> (file::Loader, i64) {
    let cfg = sh.config.read();
    let crc = cfg.rdbchecksum && !sh.persist.skip_checksum.load(Ordering::Relaxed);
    let loader = file::Loader::new(limits(&cfg), sh.store.databases(), keys_now, crc);
    (loader, cfg.key_load_delay)
}

/// What the loaders of files read at a time ([`load_reader`], and the
/// AOF's command stream).
pub const LOAD_READ: usize = 1 << 20;

/// Loads an RDB image from a reader (a file) as it is read, into the
/// store and its libraries into the registry (`merge`: a library replaces
/// one of the same name, as with DEBUG RELOAD MERGE; see [`new_loader`];
/// `jobs_now` is the time below which jobs count as expired). The memory a load takes is the data set and the record being
/// parsed, not the file as well, as Redis's rdbLoad reads its file. The
/// libraries in the first read's head are loaded before any key: one that
/// fails stops the load before any key is touched.
pub fn load_reader(
    sh: &Shared,
    src: &mut dyn io::Read,
    merge: bool,
    keys_now: i64,
    jobs_now: i64,
) -> Result<file::Loaded, LoadError> {
    let (mut loader, delay) = new_loader(sh, keys_now);
    let mut insert = key_inserter(sh, merge);
    let mut sink = |k: file::LoadedKey<'_>| {
        debug_delay(delay);
        insert(k)
    };
    let mut leading = 0;
    let head = |buf: &[u8]| {
        if let Some(m) = file::leading_used_mem(buf) {
            sh.set_load_used_mem(m);
        }
        let l = file::leading_functions(buf);
        leading = l.len();
        engine::subsystems::script::function::load_libraries(sh, &l, merge)
            .map_err(LoadError::Library)
    };
    feed_reader(src, &mut loader, head, &mut sink, &mut |n| sh.load_progressed(n))?;
    let loaded = loader.finish();
    // Any library the head did not hold (none, in the files Redis writes).
    let rest = loaded.functions.get(leading..).unwrap_or_default();
    engine::subsystems::script::function::load_libraries(sh, rest, merge)
        .map_err(LoadError::Library)?;
    loaded_extras(sh, loaded, jobs_now)
}

/// Feeds `loader` the image `src` holds, [`LOAD_READ`] bytes a read,
/// until it ends; `head` sees the first read's bytes before any is fed.
/// A record cut by the end of what was read is parsed again once twice
/// as many bytes wait (a big record costs a few passes). `progress` is
/// told the bytes each step consumed (how clients waiting for a load
/// measure it: `Shared::await_load`).
pub fn feed_reader<F>(
    src: &mut dyn io::Read,
    loader: &mut file::Loader,
    head: impl FnOnce(&[u8]) -> Result<(), LoadError>,
    sink: &mut F,
    progress: &mut dyn FnMut(usize),
) -> Result<(), LoadError>
where
    F: FnMut(file::LoadedKey<'_>) -> Result<(), &'static str>,
{
    use io::Read as _;
    let mut buf: Vec<u8> = Vec::new();
    let mut head = Some(head);
    let mut end = false;
    let mut want = LOAD_READ;
    loop {
        while !end && buf.len() < want {
            let n = (&mut *src).take(LOAD_READ as u64).read_to_end(&mut buf).map_err(|e| {
                log::warning(&format!("Error reading the RDB file: {e}"));
                persist::Error {
                    offset: loader.consumed() + buf.len(),
                    reason: "error reading the file",
                }
            })?;
            end = n < LOAD_READ;
        }
        if let Some(h) = head.take() {
            h(&buf)?;
        }
        let n = loader.feed(&buf, end, sink)?;
        progress(n);
        buf.drain(..n);
        if loader.done() {
            return Ok(());
        }
        if end {
            // Not reached: fed as the last bytes, the image ends or errs.
            return Err(persist::Error {
                offset: loader.consumed(),
                reason: persist::value::SHORT,
            }
            .into());
        }
        want = (2 * buf.len() + 1).max(LOAD_READ);
    }
}

/// A key parsed ahead of its load (a replica's diskless load parses its
/// master's payload as it arrives and stores the keys once it is whole).
pub struct StagedKey {
    pub db: usize,
    pub key: Vec<u8>,
    pub value: store::Value,
    pub expire_at: i64,
    pub idle: Option<u64>,
    pub freq: Option<u8>,
}

impl StagedKey {
    pub fn of(k: file::LoadedKey<'_>) -> Self {
        StagedKey {
            db: k.db,
            key: k.key.to_vec(),
            value: k.value,
            expire_at: k.expire_at,
            idle: k.idle,
            freq: k.freq,
        }
    }
}

/// Loads an image parsed already (see [`StagedKey`]): its libraries, then
/// its keys, then the jobs in its AUX fields, as [`load_reader`] does.
pub fn load_staged(
    sh: &Shared,
    loaded: file::Loaded,
    keys: Vec<StagedKey>,
    jobs_now: i64,
) -> Result<file::Loaded, LoadError> {
    engine::subsystems::script::function::load_libraries(sh, &loaded.functions, false)
        .map_err(LoadError::Library)?;
    let mut insert = key_inserter(sh, false);
    for k in keys {
        let StagedKey { db, key, value, expire_at, idle, freq } = k;
        insert(file::LoadedKey { db, key: &key, value, expire_at, idle, freq })
            .map_err(|reason| persist::Error { offset: loaded.consumed, reason })?;
    }
    loaded_extras(sh, loaded, jobs_now)
}

/// Stores one loaded key, with its access stamp; refuses a duplicate
/// unless merging (DEBUG RELOAD MERGE; Redis's RDBFLAGS_ALLOW_DUP).
fn key_inserter(
    sh: &Shared,
    merge: bool,
) -> impl FnMut(file::LoadedKey<'_>) -> Result<(), &'static str> + '_ {
    let store = &sh.store;
    let lru = sh.lru_clock();
    // Redis's objectSetLRUOrLFU: the counter under an LFU policy, the
    // idle time under any other.
    let lfu = engine::subsystems::evict::Policy::parse(&sh.config.read().maxmemory_policy).lfu();
    let stamp = engine::subsystems::evict::Stamp {
        bits: engine::subsystems::evict::stamp(lfu, lru, sh.clock.now_ms()),
        lfu: &sh.lfu,
    };
    move |k| {
        let mut g = store.lock_stripe(k.db, store.stripe_of(k.key) as usize);
        let lru = match (k.idle, k.freq) {
            (_, Some(freq)) if lfu => {
                engine::subsystems::evict::fresh(stamp) & !0xff | u32::from(freq)
            }
            (Some(idle), _) if !lfu => engine::subsystems::evict::lru_idle_stamp(lru, idle),
            _ => engine::subsystems::evict::fresh(stamp),
        };
        if !merge && g.peek(k.key).is_some() {
            return Err("duplicate key found in RDB file");
        }
        g.insert_loaded(k.key, k.value, k.expire_at, lru);
        Ok(())
    }
}

/// After the keys: the jobs and queues in AUX fields (redis-server skips
/// them), and the counts INFO reports.
fn loaded_extras(
    sh: &Shared,
    loaded: file::Loaded,
    jobs_now: i64,
) -> Result<file::Loaded, LoadError> {
    let at = loaded.consumed;
    let (jobs, queues) = job_aux(&loaded.aux);
    engine::subsystems::jobs::load_records(sh, jobs, jobs_now)
        .map_err(|_| persist::Error { offset: at, reason: "bad job record in an AUX field" })?;
    if !engine::subsystems::jobs::load_queue_records(sh, queues, jobs_now) {
        return Err(
            persist::Error { offset: at, reason: "bad queue record in an AUX field" }.into()
        );
    }
    sh.persist.last_load_keys_loaded.store(loaded.keys_loaded, Ordering::Relaxed);
    sh.persist.last_load_keys_expired.store(loaded.keys_expired, Ordering::Relaxed);
    Ok(loaded)
}

/// Redis's lines at the end of loading an RDB image: the empty keys it
/// skipped (the first ten by name), then the counts.
pub fn log_done_loading(l: &file::Loaded) {
    for k in &l.empty_key_names {
        log::notice(&format!("rdbLoadObject skipping empty key: {}", String::from_utf8_lossy(k)));
    }
    if l.empty_keys > 0 {
        log::notice(&format!(
            "Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {}.",
            l.keys_loaded, l.keys_expired, l.empty_keys
        ));
    } else {
        log::notice(&format!(
            "Done loading RDB, keys loaded: {}, keys expired: {}.",
            l.keys_loaded, l.keys_expired
        ));
    }
}

/// Loads `dbfilename` at start-up, if there is one, on a thread of its
/// own: the server already accepts connections, and commands without the
/// LOADING flag get `-LOADING` until the data set is in (as in Redis).
/// A bad file stops the server, with the offset and reason logged.
pub fn load_at_startup(sh: &Arc<Shared>) {
    let Ok(md) = std::fs::metadata(db_path(&sh.config.read())) else { return };
    sh.start_load(md.len());
    let sh2 = sh.clone();
    let spawned = log::spawn("rdb-load", move || {
        let start = Instant::now();
        match load(&sh2, false) {
            Ok(None) => {}
            Ok(Some(l)) => {
                log_done_loading(&l);
                log::notice(&format!(
                    "DB loaded from disk: {:.3} seconds",
                    start.elapsed().as_secs_f64()
                ));
                // The replication history the file recorded (before the
                // link, which waits for the load, asks for a PSYNC).
                if let Some((db, id, offset)) = crate::replication::repl::saved_info(&l.aux) {
                    let node = crate::host::node(&sh2);
                    if sh2.config.read().replicaof.is_some() {
                        node.master.restore_as_replica(&id, offset);
                        node.follower.restore_position(&sh2, db, offset);
                    } else {
                        node.master.restore_as_master(&sh2, &id, offset);
                        node.master.feed_expired_on_load(&sh2, &l.expired_names);
                    }
                }
            }
            Err(e) => {
                for line in e.lines() {
                    log::warning(line);
                }
                // (A file that cannot be opened ends on its fatal line.)
                if !e.starts_with("Fatal error") {
                    log::warning("Terminating server after rdb file reading failure.");
                }
                std::process::exit(1);
            }
        }
        sh2.set_loading(false);
    });
    if let Err(e) = spawned {
        log::warning(&format!("Can't start loading the data set: {e}"));
        std::process::exit(1);
    }
}

/// Empties every database and the function libraries (DEBUG RELOAD
/// before loading, as Redis's emptyData).
pub fn flush_all(sh: &Shared) {
    engine::subsystems::jobs::clear(sh);
    engine::subsystems::script::function::clear_libraries(sh);
    let store = &sh.store;
    for db in (0..store.databases()).filter(|&db| store.db_allocated(db)) {
        for s in 0..store.stripes() {
            store.lock_stripe(db, s).clear();
        }
    }
}

/// An RDB image with the header's AUX fields and no keys: the function
/// libraries' codes when `functions`, else nothing.
fn keyless_rdb(sh: &Shared, functions: bool) -> io::Result<Vec<u8>> {
    let cfg = sh.config.read().clone();
    let now = unix_ms();
    let used = sh.mem_stats().used_memory as i64;
    let aux = [
        ("redis-ver", Aux::Str(engine::subsystems::config::REDIS_VERSION)),
        ("redis-bits", Aux::Int(64)),
        ("ctime", Aux::Int(now / 1000)),
        ("used-mem", Aux::Int(used)),
        ("aof-base", Aux::Int(0)),
    ];
    let mut w = Writer::new(Vec::new(), &aux, cfg.rdbcompression, cfg.rdbchecksum);
    if functions {
        for code in engine::subsystems::script::function::library_codes(sh) {
            w.function(&code)?;
        }
    }
    w.finish()
}

impl Snapshots for Rdb {
    fn filtered_rdb(&self, functions: bool) -> Result<Vec<u8>, String> {
        let sh = Rdb::shared(self)?;
        keyless_rdb(&sh, functions).map_err(|e| e.to_string())
    }

    fn dump(&self, v: &Value, cfg: &Config) -> Vec<u8> {
        persist::dump(v, cfg.rdbcompression)
    }

    fn restore(&self, payload: &[u8], cfg: &Config) -> Result<Value, RestoreError> {
        // Redis's verifyDumpPayload checks a payload's CRC64 whatever
        // `rdbchecksum` says (that parameter is about files); only DEBUG
        // SET-SKIP-CHECKSUM-VALIDATION skips it.
        let crc = !self.skip_checksum();
        persist::restore_why(payload, &limits(cfg), crc).map_err(|(e, why)| {
            if let Some(why) = why {
                // Redis's rdbReportCorruptRDB in a RESTORE: logged at
                // verbose, the command fails, the server goes on.
                log::verbose(&format!(
                    "Internal error in RDB reading offset {} -> {}",
                    why.offset, why.reason
                ));
            }
            match e {
                persist::PayloadError::VersionOrChecksum => RestoreError::VersionOrChecksum,
                persist::PayloadError::BadFormat => RestoreError::BadFormat,
            }
        })
    }

    fn function_dump(&self, codes: &[Box<[u8]>], cfg: &Config) -> Vec<u8> {
        persist::functions::dump_payload(codes.iter().map(|c| &c[..]), cfg.rdbcompression)
    }

    fn function_restore(&self, payload: &[u8], _cfg: &Config) -> Result<Vec<Vec<u8>>, String> {
        // As a key's payload: the CRC64 is checked unless DEBUG
        // SET-SKIP-CHECKSUM-VALIDATION says not to.
        persist::functions::restore_payload(payload, !self.skip_checksum()).map_err(|e| match e {
            persist::functions::RestoreError::VersionOrChecksum => {
                "DUMP payload version or checksum are wrong".to_string()
            }
            persist::functions::RestoreError::Record(r) => r.to_string(),
        })
    }

    fn save(&self, dirty: u64) -> Result<(), String> {
        let sh = self.shared()?;
        self.acquire();
        let res = self.write(&sh, None, true);
        self.release();
        self.saved(&sh, res, dirty)
    }

    fn save_flushed(&self, dirty: u64) -> Result<(), String> {
        let sh = self.shared()?;
        // A BGSAVE that FLUSHALL just stopped gives way within a few ms;
        // a full sync's snapshot waits for the stripes the caller holds,
        // so it is not waited for long: the save is skipped then.
        let mut tries = 0;
        while self.busy.swap(true, Ordering::AcqRel) {
            tries += 1;
            if tries == 200 {
                log::warning("FLUSHALL did not save the DB: another snapshot is in progress");
                return Err("Background save already in progress".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let res = self.write(&sh, Some(flushed(&sh)), true);
        self.release();
        self.saved(&sh, res, dirty)
    }

    fn bgsave(&self, dirty: u64, holding_stripes: bool) -> Result<(), String> {
        let sh = self.shared()?;
        let ps = &sh.persist;
        if ps.bgsave_in_progress.swap(true, Ordering::AcqRel) {
            return Err("Background save already in progress".into());
        }
        if self.busy.swap(true, Ordering::AcqRel) {
            ps.bgsave_in_progress.store(false, Ordering::Release);
            return Err("Background save already in progress".into());
        }
        ps.bgsave_started_ms.store(unix_ms(), Ordering::Relaxed);
        // The snapshot's instant is now, before the reply, as Redis forks
        // before it answers; inside EXEC (stripes held) it is when the
        // saving thread gets them, right after the transaction.
        let started = if holding_stripes { None } else { Some(begin(&sh)) };
        let me = Rdb {
            shared: self.shared.clone(),
            temp_seq: AtomicU64::new(0),
            busy: self.busy.clone(),
        };
        me.temp_seq.store(self.temp_seq.fetch_add(1 << 32, Ordering::Relaxed), Ordering::Relaxed);
        ps.background_jobs.fetch_add(1, Ordering::Relaxed);
        log::notice("Background saving started");
        let spawned = log::spawn("bgsave", move || {
            let Ok(sh) = me.shared() else {
                me.release();
                return;
            };
            let start = Instant::now();
            let res = me.write(&sh, started, false);
            me.release();
            let ps = &sh.persist;
            ps.last_bgsave_secs.store(start.elapsed().as_secs() as i64, Ordering::Relaxed);
            match res {
                Ok(()) => {
                    ps.saved(dirty, unix_ms() / 1000);
                    if !ps.last_bgsave_ok.swap(true, Ordering::Relaxed) {
                        sh.state_changed();
                    }
                    log::notice("Background saving terminated with success");
                }
                // Stopped on purpose (FLUSHALL): not a failure, as a
                // child Redis kills with SIGUSR1 is not.
                Err(e) if cancelled(&e) => {
                    log::warning("Background saving terminated: cancelled by FLUSHALL");
                }
                Err(e) => {
                    ps.last_bgsave_ok.store(false, Ordering::Relaxed);
                    sh.state_changed();
                    log::warning(&format!("Background saving error: {e}"));
                }
            }
            ps.bgsave_in_progress.store(false, Ordering::Release);
        });
        if let Err(e) = spawned {
            // The thread (and the snapshot it owned) is gone.
            end_snapshot(&sh);
            self.release();
            sh.persist.bgsave_in_progress.store(false, Ordering::Release);
            return Err(e.to_string());
        }
        Ok(())
    }

    fn abort_bgsave(&self) {
        if let Ok(sh) = self.shared() {
            let run = crate::host::node(&sh).snapshot_run.lock();
            if sh.persist.bgsave_in_progress.load(Ordering::Acquire)
                || (run.running && run.for_replicas)
            {
                cancel_running(&sh);
            }
        }
    }

    fn snapshot_to(&self, out: &mut dyn Write, at_instant: &mut dyn FnMut()) -> Result<(), String> {
        let sh = self.shared()?;
        self.acquire();
        let started = begin_then(&sh, at_instant);
        crate::host::node(&sh).snapshot_run.lock().for_replicas = true;
        // The instant is taken: a sink that announces it (replicas'
        // `+FULLRESYNC <offset>`) does so before the payload is made. A
        // failure shows again at the payload's first write, which ends
        // the snapshot properly.
        let _ = out.flush();
        let res = write_rdb(&sh, started, BufWriter::with_capacity(64 * 1024, out), false)
            .and_then(|mut w| w.flush());
        self.release();
        res.map_err(|e| e.to_string())
    }

    fn reload(&self, opts: engine::subsystems::snapshot::Reload, dirty: u64) -> Result<(), String> {
        let sh = self.shared()?;
        if opts.save {
            self.save(dirty)?;
        }
        sh.set_loading(true);
        if opts.flush {
            flush_all(&sh);
        }
        let loaded = load(&sh, opts.merge);
        sh.set_loading(false);
        match loaded {
            // No file (NOSAVE): Redis's rdbLoad fails to open it.
            Ok(None) => Err("no RDB file to load".into()),
            Ok(Some(_)) => {
                log::warning("DB reloaded by DEBUG RELOAD");
                Ok(())
            }
            Err(e) => {
                for line in e.lines() {
                    log::warning(line);
                }
                Err(e)
            }
        }
    }
}

/// Seconds between failed background saves started by save points
/// (Redis's `CONFIG_BGSAVE_RETRY_DELAY`).
const BGSAVE_RETRY_SECS: i64 = 5;

/// Save points (`save <seconds> <changes> …`) and a BGSAVE scheduled
/// inside a transaction: a thread that starts a BGSAVE when one is due, as
/// Redis's `serverCron` does.
pub fn start_save_points(sh: &Arc<Shared>) {
    let weak = Arc::downgrade(sh);
    let spawned = log::spawn("save-points", move || loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let Some(sh) = weak.upgrade() else { return };
        if sh.shutdown.load(Ordering::Relaxed) {
            return;
        }
        let ps = &sh.persist;
        if sh.is_loading() || ps.bgsave_in_progress.load(Ordering::Acquire) {
            continue;
        }
        if ps.bgsave_scheduled.swap(false, Ordering::AcqRel) {
            if let Some(s) = &sh.host.snapshots {
                let _ = s.bgsave(sh.stats.dirty.load(Ordering::Relaxed), false);
            }
            continue;
        }
        let points = sh.config.read().save.clone();
        if points.is_empty() {
            continue;
        }
        let dirty = sh.stats.dirty.load(Ordering::Relaxed);
        let changes = dirty.saturating_sub(ps.dirty_at_save.load(Ordering::Relaxed));
        let now = unix_ms() / 1000;
        let elapsed = now - ps.last_save.load(Ordering::Relaxed);
        let tried = ps.bgsave_started_ms.load(Ordering::Relaxed) / 1000;
        if !ps.last_bgsave_ok.load(Ordering::Relaxed) && now - tried <= BGSAVE_RETRY_SECS {
            continue;
        }
        let due = points.iter().find(|(secs, ch)| changes >= *ch as u64 && elapsed >= *secs);
        if let Some((secs, _)) = due {
            log::notice(&format!("{changes} changes in {secs} seconds. Saving..."));
            if let Some(s) = &sh.host.snapshots {
                let _ = s.bgsave(dirty, false);
            }
        }
    });
    if let Err(e) = spawned {
        log::warning(&format!("Can't start the save-points thread: {e}"));
    }
}

/// The name of the temporary file a replica's disk-based full sync writes
/// its master's payload to (one at a time): under this process's prefix,
/// so [`remove_temp_files`] finds it too.
pub fn sync_temp_name() -> String {
    format!("temp-{}-sync.rdb", std::process::id())
}

/// Removes this process's temporary RDB files in `dir` (a save cut short
/// by a second SIGINT), as Redis's rdbRemoveTempFile does from its
/// handler.
pub fn remove_temp_files(dir: &str) {
    let prefix = format!("temp-{}", std::process::id());
    if let Ok(dir) = std::fs::read_dir(dir) {
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let rest = name.strip_prefix(&prefix).unwrap_or("");
            if (rest == ".rdb" || rest.starts_with('-')) && name.ends_with(".rdb") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
