//! The persistence seam. DUMP, RESTORE, SAVE, BGSAVE, LASTSAVE, DEBUG
//! RELOAD and SHUTDOWN reach the RDB codec and the files through the
//! [`Snapshots`] trait, which the server installs at start-up (with the
//! `persist` crate behind it); the engine does not depend on the codec.
//! [`PersistState`] holds what INFO persistence reports.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use store::Value;

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
    /// Stops a running BGSAVE without counting it a failure (FLUSHALL,
    /// as Redis kills its saving child).
    fn abort_bgsave(&self) {}
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
    /// `BGSAVE SCHEDULE` arrived while one ran: start another after it.
    pub bgsave_scheduled: AtomicBool,
    /// Unix ms the running background save started.
    pub bgsave_started_ms: AtomicI64,
    pub last_bgsave_ok: AtomicBool,
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
}

impl PersistState {
    pub fn new(now_secs: i64) -> Self {
        PersistState {
            last_save: AtomicI64::new(now_secs),
            dirty_at_save: AtomicU64::new(0),
            bgsave_in_progress: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            bgsave_started_ms: AtomicI64::new(-1),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            background_jobs: AtomicU64::new(0),
            repl_snapshots: AtomicU64::new(0),
            last_load_keys_loaded: AtomicU64::new(0),
            last_load_keys_expired: AtomicU64::new(0),
            skip_checksum: AtomicBool::new(false),
        }
    }

    /// Records a successful save that started at change count `dirty`.
    pub fn saved(&self, dirty: u64, now_secs: i64) {
        self.last_save.store(now_secs, Ordering::Relaxed);
        self.dirty_at_save.store(dirty, Ordering::Relaxed);
        self.saves.fetch_add(1, Ordering::Relaxed);
    }
}
