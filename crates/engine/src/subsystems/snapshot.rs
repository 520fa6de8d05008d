//! The persistence seam. DUMP, RESTORE, SAVE, BGSAVE, LASTSAVE, DEBUG
//! RELOAD and SHUTDOWN reach the RDB codec and the files through the
//! [`Snapshots`] trait, which the server installs at start-up (with the
//! `persist` crate behind it); the engine does not depend on the codec.
//! [`PersistState`] holds what INFO persistence reports.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use store::Value;

use crate::core::error::CmdError;
use crate::subsystems::config::Config;

/// Why a RESTORE payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// `DUMP payload version or checksum are wrong`
    VersionOrChecksum,
    /// `Bad data format`
    BadFormat,
}

/// The persistence the server installed, or the error a command gets in
/// a process without it (the engine's own tests).
pub(crate) fn installed(
    shared: &crate::Shared,
) -> Result<std::sync::Arc<dyn Snapshots>, crate::core::error::CmdError> {
    shared.host.snapshots.as_ref().cloned().ok_or_else(|| {
        crate::core::error::CmdError::err("persistence is not available in this process")
    })
}

/// What the server's persistence does for the engine's commands.
pub trait Snapshots: Send + Sync {
    /// A DUMP payload of `v`.
    fn dump(&self, v: &Value, cfg: &Config) -> Vec<u8>;
    /// Decodes a RESTORE payload, building the value at `cfg`'s thresholds.
    fn restore(&self, payload: &[u8], cfg: &Config) -> Result<Value, RestoreError>;
    /// `FUNCTION DUMP`'s payload of these libraries' codes.
    fn function_dump(&self, codes: &[Box<[u8]>], cfg: &Config) -> Vec<u8>;
    /// Decodes a `FUNCTION RESTORE` payload into libraries' codes; the
    /// error is Redis's text without `ERR `.
    fn function_restore(&self, payload: &[u8], cfg: &Config) -> Result<Vec<Vec<u8>>, String>;
    /// Writes the data set to `dir/dbfilename` now (SAVE); the caller holds
    /// no stripe. `dirty` is the change count the file reflects.
    fn save(&self, dirty: u64) -> Result<(), String>;
    /// Starts a background save; `Err` when one is running. Its instant
    /// is the call, unless the caller holds stripes (BGSAVE inside EXEC):
    /// then it is when the saving thread can lock them all.
    fn bgsave(&self, dirty: u64, holding_stripes: bool) -> Result<(), String>;
    /// Stops a running BGSAVE, or a replica's full sync whose instant is
    /// taken, without counting it a failure (FLUSHALL, as Redis kills its
    /// RDB child: the replicas it fed sync again).
    fn abort_bgsave(&self) {}
    /// FLUSHALL's save when save points are set (Redis's
    /// `flushAllDataAndResetRDB`): the caller holds every database's
    /// stripes, all just emptied, so the file is written at once with no
    /// keys (the function libraries and the jobs as they are).
    fn save_flushed(&self, dirty: u64) -> Result<(), String> {
        let _ = dirty;
        Err("persistence is not available in this process".into())
    }
    /// DEBUG RELOAD: save (unless NOSAVE), empty the keyspace and the
    /// function libraries (unless NOFLUSH), load the file (with MERGE, a
    /// key or library of the file replaces one of the same name).
    fn reload(&self, opts: Reload, dirty: u64) -> Result<(), String>;
    /// Writes a point-in-time RDB of the data set to `out` (a full
    /// resynchronisation's payload), once no other snapshot runs;
    /// `at_instant` runs at the snapshot's instant, with every stripe
    /// locked, before anything is written. The caller holds no stripe.
    fn snapshot_to(
        &self,
        out: &mut dyn std::io::Write,
        at_instant: &mut dyn FnMut(),
    ) -> Result<(), String> {
        let _ = (out, at_instant);
        Err("snapshots to a stream are not available in this process".into())
    }
    /// An RDB without keys, holding the function libraries when
    /// `functions` (a replica's `REPLCONF rdb-filter-only` payload).
    fn filtered_rdb(&self, functions: bool) -> Result<Vec<u8>, String> {
        let _ = functions;
        Err("snapshots to a stream are not available in this process".into())
    }
}

/// DEBUG RELOAD's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reload {
    pub save: bool,
    pub flush: bool,
    pub merge: bool,
}

/// The append-only file, as the engine's commands reach it (the server
/// hands it in `Host::aof`).
pub trait AppendOnly: Send + Sync {
    /// BGREWRITEAOF: the status reply (`Background append only file
    /// rewriting started` or `… scheduled`), or the error's text. A
    /// caller holding stripes (EXEC) has the rewrite begin after it.
    fn rewrite(&self, holding_stripes: bool) -> Result<&'static str, String>;
    /// The configuration changed (CONFIG SET appendonly, appendfsync …).
    /// `Err` refuses the change (Redis's `startAppendOnly` failing).
    fn config_changed(&self, holding_stripes: bool) -> Result<(), String>;
    /// INFO persistence's `aof_*` figures.
    fn info(&self) -> AofInfo;
    /// DEBUG AOF-FLUSH-SLEEP: sleep this long before each write.
    fn set_flush_sleep(&self, us: u64) {
        let _ = us;
    }
    /// DEBUG LOADAOF: write out what is pending, empty the data set and
    /// load the append-only files again.
    fn reload(&self) -> Result<(), String> {
        Err("no append-only file in this process".into())
    }
    /// The sequence number of the last unit the AOF fsynced (compared
    /// with a session's [`Effects::last_position`]), or `None` while the
    /// AOF is off (WAITAOF).
    ///
    /// [`Effects::last_position`]: crate::core::effects::Effects::last_position
    fn fsynced(&self) -> Option<u64> {
        None
    }
}

/// INFO persistence's `aof_*` fields.
#[derive(Clone, Debug, Default)]
pub struct AofInfo {
    pub enabled: bool,
    pub rewrite_in_progress: bool,
    pub rewrite_scheduled: bool,
    pub last_rewrite_time_sec: i64,
    pub current_rewrite_time_sec: i64,
    pub last_bgrewrite_ok: bool,
    pub rewrites: u64,
    pub rewrites_consecutive_failures: u64,
    pub last_write_ok: bool,
    pub current_size: u64,
    pub base_size: u64,
    pub buffer_length: u64,
    pub delayed_fsync: u64,
    /// Turned on and its first rewrite not yet done (Redis's
    /// `AOF_WAIT_REWRITE`): no file holds the data set yet.
    pub wait_rewrite: bool,
}

/// INFO persistence's numbers, kept by whoever saves and loads.
#[derive(Debug)]
pub struct PersistState {
    /// Unix seconds of the last successful save (start-up time before).
    pub last_save: AtomicI64,
    /// `server.dirty` when the last successful save started.
    pub dirty_at_save: AtomicU64,
    pub bgsave_in_progress: AtomicBool,
    /// A BGSAVE ran inside a transaction: the save-points thread starts
    /// it (Redis's `rdb_bgsave_scheduled`).
    pub bgsave_scheduled: AtomicBool,
    /// Unix ms the running background save started.
    pub bgsave_started_ms: AtomicI64,
    pub last_bgsave_ok: AtomicBool,
    /// The errno of the AOF's last failed write or fsync, 0 once one
    /// succeeds again: writes are refused meanwhile (Redis's
    /// `aof_last_write_status`, `aof_bio_fsync_status`).
    pub aof_errno: std::sync::atomic::AtomicI32,
    /// Seconds the last background save took (-1 before the first).
    pub last_bgsave_secs: AtomicI64,
    pub saves: AtomicU64,
    /// Background snapshots started (BGSAVE, AOF rewrites, a replica's
    /// full sync): where Redis forks a child, Sluice starts one of these,
    /// so INFO's `total_forks` counts them.
    pub background_jobs: AtomicU64,
    /// Snapshots a replica's full sync is producing now: Redis makes them
    /// in an RDB child too, so INFO's `rdb_bgsave_in_progress` shows them.
    pub repl_snapshots: AtomicU64,
    pub last_load_keys_loaded: AtomicU64,
    pub last_load_keys_expired: AtomicU64,
    /// `DEBUG SET-SKIP-CHECKSUM-VALIDATION 1`: RESTORE payloads and RDB
    /// files load without their CRC checked.
    pub skip_checksum: AtomicBool,
    /// The running snapshot's progress and copy-on-write (INFO's
    /// `current_*` fields), and the last ones' copy-on-write.
    /// An `Arc`: the store's snapshot hook counts the copies into it.
    pub progress: std::sync::Arc<SaveProgress>,
}

/// What Redis's forked child reports to its parent (sendChildInfo), from
/// the snapshot walking the keyspace here. Sluice's copy-on-write is its
/// own: a stripe a command is about to change before the saver reached
/// it is serialised ahead of the walk (the capture queue), and the bytes
/// so copied are the snapshot's copy-on-write size. They only grow while
/// the snapshot runs (as a child's private pages do), so the peak is the
/// size. A copy lives in the queue until the saver writes it out.
#[derive(Debug, Default)]
pub struct SaveProgress {
    /// Keys in the keyspace at the snapshot's instant (0: none running).
    keys_total: AtomicU64,
    keys_processed: AtomicU64,
    cow_bytes: AtomicU64,
    /// Unix ms of the last copy-on-write (0: none in this snapshot).
    cow_updated_ms: AtomicI64,
    last_rdb_cow: AtomicU64,
    last_aof_cow: AtomicU64,
}

/// INFO persistence's view of [`SaveProgress`] at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct ProgressView {
    pub cow_size: u64,
    /// Seconds since the copy-on-write size last changed (0 when it has
    /// not in this snapshot), as Redis's `current_cow_size_age`.
    pub cow_size_age: i64,
    pub keys_processed: u64,
    pub keys_total: u64,
    /// Keys processed as a percentage of the total (`current_fork_perc`).
    pub perc: f64,
    pub last_rdb_cow: u64,
    pub last_aof_cow: u64,
}

impl SaveProgress {
    /// A snapshot of `keys` keys began (copies may have been counted
    /// since its instant; the last one's were cleared when it finished).
    pub fn begin(&self, keys: u64) {
        self.keys_processed.store(0, Ordering::Relaxed);
        self.keys_total.store(keys, Ordering::Relaxed);
    }

    /// The saver wrote `keys` more keys.
    pub fn processed(&self, keys: u64) {
        self.keys_processed.fetch_add(keys, Ordering::Relaxed);
    }

    /// A writer made the snapshot copy `bytes` ahead of the walk.
    pub fn copied(&self, bytes: u64, now_ms: i64) {
        self.cow_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.cow_updated_ms.store(now_ms, Ordering::Relaxed);
    }

    /// The snapshot ended: its copy-on-write becomes the last one of its
    /// kind (an AOF rewrite's base, or an RDB's), and the current figures
    /// go back to 0, as Redis's resetChildState does.
    pub fn finish(&self, aof: bool) {
        let cow = self.cow_bytes.swap(0, Ordering::Relaxed);
        if aof { &self.last_aof_cow } else { &self.last_rdb_cow }.store(cow, Ordering::Relaxed);
        self.keys_total.store(0, Ordering::Relaxed);
        self.keys_processed.store(0, Ordering::Relaxed);
        self.cow_updated_ms.store(0, Ordering::Relaxed);
    }

    /// The figures now (`now_ms`: Unix ms).
    pub fn view(&self, now_ms: i64) -> ProgressView {
        let keys_total = self.keys_total.load(Ordering::Relaxed);
        let keys_processed = self.keys_processed.load(Ordering::Relaxed);
        let updated = self.cow_updated_ms.load(Ordering::Relaxed);
        ProgressView {
            cow_size: self.cow_bytes.load(Ordering::Relaxed),
            cow_size_age: if updated == 0 { 0 } else { (now_ms - updated).max(0) / 1000 },
            keys_processed,
            keys_total,
            perc: if keys_total == 0 {
                0.0
            } else {
                keys_processed as f64 / keys_total as f64 * 100.0
            },
            last_rdb_cow: self.last_rdb_cow.load(Ordering::Relaxed),
            last_aof_cow: self.last_aof_cow.load(Ordering::Relaxed),
        }
    }
}

impl PersistState {
    /// Whether writes are refused with MISCONF: the last background save
    /// failed, save points are set and `stop-writes-on-bgsave-error` is
    /// on (the RDB half of Redis's `writeCommandsDeniedByDiskError`).
    /// Why writes (and PING) are refused after a disk error, as Redis's
    /// writeCommandsDeniedByDiskError: a failed background save with
    /// save points and `stop-writes-on-bgsave-error`, else, with the AOF
    /// on, its last failed write or fsync.
    pub fn disk_error(&self, cfg: &Config) -> Option<CmdError> {
        if !self.last_bgsave_ok.load(Ordering::Relaxed)
            && cfg.stop_writes_on_bgsave_error
            && !cfg.save.is_empty()
        {
            return Some(CmdError::Misconf);
        }
        let errno = self.aof_errno.load(Ordering::Relaxed);
        if errno != 0 && cfg.appendonly {
            let why = std::io::Error::from_raw_os_error(errno).to_string();
            let why = why.split(" (os error").next().unwrap_or_default();
            return Some(CmdError::Msg(
                format!("MISCONF Errors writing to the AOF file: {why}").into(),
            ));
        }
        None
    }

    /// Whether no disk error refuses writes (one load each).
    #[inline]
    pub fn disk_ok(&self) -> bool {
        self.last_bgsave_ok.load(Ordering::Relaxed) && self.aof_errno.load(Ordering::Relaxed) == 0
    }

    pub fn new(now_secs: i64) -> Self {
        PersistState {
            last_save: AtomicI64::new(now_secs),
            dirty_at_save: AtomicU64::new(0),
            bgsave_in_progress: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            bgsave_started_ms: AtomicI64::new(-1),
            last_bgsave_ok: AtomicBool::new(true),
            aof_errno: std::sync::atomic::AtomicI32::new(0),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            background_jobs: AtomicU64::new(0),
            repl_snapshots: AtomicU64::new(0),
            last_load_keys_loaded: AtomicU64::new(0),
            last_load_keys_expired: AtomicU64::new(0),
            skip_checksum: AtomicBool::new(false),
            progress: Default::default(),
        }
    }

    /// Records a successful save that started at change count `dirty`.
    pub fn saved(&self, dirty: u64, now_secs: i64) {
        self.last_save.store(now_secs, Ordering::Relaxed);
        self.dirty_at_save.store(dirty, Ordering::Relaxed);
        self.saves.fetch_add(1, Ordering::Relaxed);
    }
}
