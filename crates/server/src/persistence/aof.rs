//! The append-only file: a consumer of the effects record that appends
//! every unit's commands to the current incremental file, a writer thread
//! that writes (and, as `appendfsync` says, fsyncs) them, group commit,
//! the rewrite (BGREWRITEAOF, without fork: a point-in-time snapshot as
//! the RDB base) and the manifest, as Redis 7.0 lays out `appenddirname`.
//! Loading at start-up is in [`crate::aof_load`].
//!
//! **Order.** [`Consumer::unit`] is called while the unit's stripe locks
//! are held; it appends under one mutex ([`Aof::state`]), so two units
//! that touch a common key are appended in the order they ran, and units
//! that share no key commute. The file is therefore a valid serial order
//! of execution across threads (the same argument makes the replication
//! stream valid).
//!
//! **Group commit.** Each appended unit takes the next sequence number and
//! asks its connection ([`engine::core::effects::Unit::hold_until`]) to hold its
//! replies until that number is acknowledged. The writer thread takes
//! everything appended since its last turn, writes it in one `write(2)`,
//! fsyncs it when the policy is `always`, then advances the acknowledged
//! watermark and wakes the waiting connections. One fsync thus covers
//! every unit that arrived while the previous one ran, across every
//! connection and thread. Under `everysec` and `no` replies wait for the
//! `write(2)` only (as Redis writes its AOF buffer before it replies), so
//! a killed process loses nothing it acknowledged; `everysec` fsyncs once
//! a second. With the AOF off no consumer is installed and a connection
//! pays one load of a zero hold per batch.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use engine::core::effects::{Consumer, StreamWriter, Unit, Want};
use engine::core::shared::unix_ms;
use engine::subsystems::snapshot::{AofInfo, AppendOnly};
use engine::Shared;
use parking_lot::{Condvar, Mutex};
use persist::aof::{self, Manifest};

use crate::log;
use crate::persistence;

/// The fsync policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fsync {
    Always,
    EverySec,
    No,
}

impl Fsync {
    fn from_config(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// What a rewrite does with the incremental files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The AOF is off: a base only, every incremental file becomes history.
    Off,
    /// The AOF is on: a new incremental file from the snapshot's instant.
    On,
    /// CONFIG SET appendonly yes: appending starts at the snapshot's
    /// instant, into `temp-appendonly.aof.incr`, named into the manifest
    /// with the base.
    TurningOn,
}

/// `temp-appendonly.aof.incr`.
fn temp_incr_name(filename: &str) -> String {
    format!("temp-{filename}.incr")
}

/// What units append to, under the append lock.
struct State {
    /// Appended, not yet taken by the writer thread.
    buf: Vec<u8>,
    /// Sequence number of the last unit appended.
    seq: u64,
    /// Whether units are appended (off before the rewrite's instant when
    /// the AOF is being turned on: the snapshot holds those).
    accepting: bool,
    /// The stream's selected database (none at a new file's start).
    writer: StreamWriter,
    /// Last `#TS:` annotation written (unix seconds).
    last_ts: i64,
    /// At a rewrite's instant: what was appended before it (for the old
    /// file) and the new incremental file.
    switch: Option<(Vec<u8>, File)>,
    /// Close the file after writing what is pending (the AOF turned off).
    close: bool,
    /// Requests to write and fsync everything appended before them
    /// (shutdown, `DURABLE … FSYNC`), numbered; `sync_done` is the last
    /// one served. A count, not a flag: a request made while the writer
    /// fsyncs an earlier group is served by the next group (a flag
    /// cleared after the fsync dropped it, and its writes waited for
    /// `everysec`'s next fsync, up to a second).
    sync_asked: u64,
    sync_done: u64,
}

/// Not on the request path: manifest, rewrite bookkeeping.
struct Ctl {
    manifest: Manifest,
    rewrite_started: Option<Instant>,
}

/// Seconds between two logs of a failing AOF write (Redis's
/// `AOF_WRITE_LOG_ERROR_RATE`).
const AOF_WRITE_LOG_ERROR_RATE: i64 = 30;

pub struct Aof {
    shared: Weak<Shared>,
    state: Mutex<State>,
    /// Wakes the writer thread.
    wake: Condvar,
    /// The writer thread signals a completed sync request here.
    synced: Condvar,
    /// The durability position: the largest sequence number written (and
    /// fsynced, under `always`), which connections wait on.
    durable: Arc<crate::durability::Position>,
    /// The consumer is installed (appendonly is on).
    on: AtomicBool,
    rewriting: AtomicBool,
    rewrite_scheduled: AtomicBool,
    /// Turned on, its first rewrite not done yet (Redis's
    /// `AOF_WAIT_REWRITE`): a shutdown must not exit then.
    wait_rewrite: AtomicBool,
    ctl: Mutex<Ctl>,
    /// INFO figures.
    current_size: AtomicU64,
    base_size: AtomicU64,
    last_rewrite_secs: AtomicI64,
    last_rewrite_ok: AtomicBool,
    rewrites: AtomicU64,
    consecutive_failures: AtomicU64,
    last_write_ok: AtomicBool,
    /// Unix seconds of the last "Error writing to the AOF file" line: as
    /// Redis (`AOF_WRITE_LOG_ERROR_RATE`), a failing write retried every
    /// turn logs once every 30 seconds, not every turn.
    last_error_log: AtomicI64,
    delayed_fsync: AtomicU64,
    /// The writer thread is running.
    writer_running: AtomicBool,
    /// The consumer installed on the hub while the AOF is on.
    feed: Mutex<Option<Arc<dyn Consumer>>>,
    /// `aof-timestamp-enabled`, kept here so that appending reads no
    /// configuration.
    timestamps: AtomicBool,
    /// `DEBUG AOF-FLUSH-SLEEP`: microseconds the writer sleeps before
    /// each write.
    flush_sleep_us: AtomicU64,
}

/// The consumer installed on the hub (a separate object, so removing it
/// compares one address).
struct Feed(Arc<Aof>);

impl Consumer for Feed {
    fn wants(&self) -> Want {
        Want { propagate: true, events: false, keys: false }
    }

    fn unit(&self, unit: &Unit<'_>) {
        self.0.append(unit);
    }
}

/// The AOF of a server being built (inactive until [`Aof::open_on_start`]
/// or `CONFIG SET appendonly yes`); it advances `durable`.
pub fn new(shared: &Weak<Shared>, durable: Arc<crate::durability::Position>) -> Arc<Aof> {
    Arc::new(Aof {
        shared: shared.clone(),
        state: Mutex::new(State {
            buf: Vec::new(),
            seq: 0,
            accepting: false,
            writer: StreamWriter::default(),
            last_ts: 0,
            switch: None,
            close: false,
            sync_asked: 0,
            sync_done: 0,
        }),
        wake: Condvar::new(),
        synced: Condvar::new(),
        durable,
        on: AtomicBool::new(false),
        rewriting: AtomicBool::new(false),
        rewrite_scheduled: AtomicBool::new(false),
        wait_rewrite: AtomicBool::new(false),
        ctl: Mutex::new(Ctl { manifest: Manifest::default(), rewrite_started: None }),
        current_size: AtomicU64::new(0),
        base_size: AtomicU64::new(0),
        last_rewrite_secs: AtomicI64::new(-1),
        last_rewrite_ok: AtomicBool::new(true),
        rewrites: AtomicU64::new(0),
        consecutive_failures: AtomicU64::new(0),
        last_write_ok: AtomicBool::new(true),
        last_error_log: AtomicI64::new(0),
        delayed_fsync: AtomicU64::new(0),
        writer_running: AtomicBool::new(false),
        feed: Mutex::new(None),
        timestamps: AtomicBool::new(false),
        flush_sleep_us: AtomicU64::new(0),
    })
}

/// The engine's view of the AOF (`Host::aof`).
pub struct Seam(pub Arc<Aof>);

/// Writes and fsyncs what is pending (shutdown: "Calling fsync() on the
/// AOF file.").
pub fn flush_on_exit(aof: &Aof) {
    if !aof.on.load(Ordering::Acquire) || !aof.writer_running.load(Ordering::Acquire) {
        return;
    }
    log::notice("Calling fsync() on the AOF file.");
    aof.sync_pending();
}

/// `appenddirname` in the server's `dir`.
pub fn dir_of(cfg: &engine::subsystems::config::Config) -> PathBuf {
    cfg.path(&cfg.appenddirname)
}

/// `name` in the AOF directory `dirname` (see [`dir_of`]).
fn in_dir(dirname: &Path, name: &str) -> PathBuf {
    dirname.join(name)
}

/// Writes the manifest atomically: a temporary file, fsynced, renamed
/// over the manifest, and the directory fsynced.
pub fn persist_manifest(dirname: &Path, filename: &str, m: &Manifest) -> io::Result<()> {
    let tmp = in_dir(dirname, &aof::temp_manifest_name(filename));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(m.render().as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, in_dir(dirname, &aof::manifest_name(filename)))?;
    File::open(dirname)?.sync_all()
}

fn file_size(dirname: &Path, name: &str) -> u64 {
    std::fs::metadata(in_dir(dirname, name)).map_or(0, |m| m.len())
}

impl Aof {
    fn shared(&self) -> Option<Arc<Shared>> {
        self.shared.upgrade()
    }

    /// Appends one unit (the consumer; stripe locks held).
    fn append(&self, unit: &Unit<'_>) {
        if !unit.propagates() {
            return;
        }
        let ts = self.timestamps.load(Ordering::Relaxed).then(|| unix_ms() / 1000);
        let mut st = self.state.lock();
        if !st.accepting {
            return;
        }
        let st = &mut *st;
        if let Some(now) = ts {
            if st.last_ts < now {
                st.last_ts = now;
                st.buf.extend_from_slice(format!("#TS:{now}\r\n").as_bytes());
            }
        }
        st.writer.write_resp(unit, &mut st.buf);
        st.seq += 1;
        let seq = st.seq;
        self.durable.appended(seq);
        self.wake.notify_one();
        unit.hold_until(seq);
    }

    /// Starts appending to `file` (the current incremental file) with the
    /// writer thread; installs the consumer.
    fn activate(self: &Arc<Self>, sh: &Arc<Shared>, file: Option<File>, accepting: bool) {
        self.timestamps.store(sh.config.read().aof_timestamp_enabled, Ordering::Relaxed);
        {
            let mut st = self.state.lock();
            st.accepting = accepting;
            st.writer.reset();
            st.close = false;
        }
        self.on.store(true, Ordering::Release);
        self.durable.set_active(true);
        self.spawn_writer(file);
        let feed: Arc<dyn Consumer> = Arc::new(Feed(self.clone()));
        *self.feed.lock() = Some(feed.clone());
        sh.add_consumer(feed);
    }

    fn spawn_writer(self: &Arc<Self>, file: Option<File>) {
        if self.writer_running.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let spawned = log::spawn("aof-writer", move || me.writer(file));
        if let Err(e) = spawned {
            log::warning(&format!("Can't start the AOF writer thread: {e}"));
            std::process::exit(1);
        }
    }

    /// The writer thread: takes what units appended, writes it in one
    /// call, fsyncs as the policy says, acknowledges.
    fn writer(self: Arc<Self>, mut file: Option<File>) {
        let mut last_fsync = Instant::now();
        let mut unsynced = false;
        // What a failed write left unwritten: tried again first, once a
        // second at least, as Redis keeps its aof_buf (nothing after it
        // is written before it, so the file never has a hole).
        let mut retry: Vec<u8> = Vec::new();
        let policy_now = |aof: &Aof| -> Option<(Fsync, bool)> {
            let sh = aof.shared()?;
            let c = sh.config.read();
            let skip = c.no_appendfsync_on_rewrite && aof.rewriting.load(Ordering::Relaxed);
            Some((Fsync::from_config(&c.appendfsync), skip))
        };
        loop {
            let Some((policy, skip)) = policy_now(&self) else { return };
            // Only `everysec` wakes up by itself, to fsync what is unsynced.
            let timed = policy == Fsync::EverySec && !skip;
            let (bytes, hi, switch, close, sync_req) = {
                let mut st = self.state.lock();
                while st.buf.is_empty()
                    && st.switch.is_none()
                    && !st.close
                    && st.sync_asked == st.sync_done
                    && !(timed && unsynced && last_fsync.elapsed() >= Duration::from_secs(1))
                {
                    if !retry.is_empty() {
                        self.wake.wait_for(&mut st, Duration::from_secs(1));
                        break;
                    }
                    self.wake.wait_for(&mut st, Duration::from_millis(100));
                    if !timed {
                        // A policy changed to everysec meanwhile starts its clock.
                        break;
                    }
                }
                // The requests made so far ask for what is taken now.
                let asked = (st.sync_asked > st.sync_done).then_some(st.sync_asked);
                (std::mem::take(&mut st.buf), st.seq, st.switch.take(), st.close, asked)
            };
            // Read again after the wait: what was taken is written under
            // the policy in force now (a CONFIG SET appendfsync always
            // while idle applies to the next group).
            let Some((policy, skip)) = policy_now(&self) else { return };
            if let Some((tail, next)) = switch {
                if let Some(f) = &mut file {
                    // What waits to be retried belongs before the tail;
                    // what still fails goes first into the next file.
                    let mut t = std::mem::take(&mut retry);
                    t.extend_from_slice(&tail);
                    if let Err(written) = self.write_all(f, &t, policy) {
                        t.drain(..written);
                        retry = t;
                    }
                    let _ = f.sync_data();
                }
                file = Some(next);
                unsynced = false;
            }
            let mut bytes = bytes;
            if !retry.is_empty() {
                retry.extend_from_slice(&bytes);
                bytes = std::mem::take(&mut retry);
            }
            if !bytes.is_empty() {
                let pause = self.flush_sleep_us.load(Ordering::Relaxed);
                if pause > 0 {
                    // DEBUG AOF-FLUSH-SLEEP (tests of the reply barrier).
                    std::thread::sleep(Duration::from_micros(pause));
                }
                if let Some(f) = &mut file {
                    match self.write_all(f, &bytes, policy) {
                        Ok(()) => unsynced = true,
                        Err(written) => {
                            retry = bytes;
                            retry.drain(..written);
                        }
                    }
                }
            }
            let due = match policy {
                Fsync::Always => !skip,
                Fsync::EverySec => !skip && last_fsync.elapsed() >= Duration::from_secs(1),
                Fsync::No => false,
            };
            if unsynced && (due || sync_req.is_some() || close) {
                let mut synced = true;
                if let Some(f) = &file {
                    match f.sync_data() {
                        Ok(()) if retry.is_empty() => self.write_ok(),
                        Ok(()) => {}
                        Err(e) => {
                            self.write_failed(policy, &e);
                            synced = false;
                        }
                    }
                }
                unsynced = !synced;
                last_fsync = Instant::now();
            }
            // Nothing written is left unsynced: `hi` is fsynced too. The
            // replies to writes a failed write left behind go out all the
            // same, as Redis sends them after its failed write (only
            // `always` promises more, and it exits on the error); the
            // writes after them are refused until the retry succeeds.
            let fsynced = !unsynced && retry.is_empty();
            self.durable.advance(hi, fsynced);
            if fsynced {
                self.fsync_progress();
            }
            if sync_req.is_some() || close {
                let mut st = self.state.lock();
                if let Some(n) = sync_req {
                    st.sync_done = st.sync_done.max(n);
                }
                self.synced.notify_all();
                if close && st.buf.is_empty() {
                    st.close = false;
                    self.writer_running.store(false, Ordering::Release);
                    return;
                }
            }
        }
    }

    /// Whether the AOF is on (false from the moment it is being turned
    /// off).
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Asks the writer to fsync what it has at its next turn, whatever
    /// the policy (`DURABLE … FSYNC`: that connection's writes are
    /// acknowledged as under `appendfsync always`).
    pub fn request_fsync(&self) {
        let mut st = self.state.lock();
        st.sync_asked += 1;
        self.wake.notify_one();
    }

    /// The fsynced position moved, or the AOF went off: WAITAOFs may end.
    fn fsync_progress(&self) {
        if let Some(sh) = self.shared() {
            crate::host::node(&sh).master.aof_progress();
        }
    }

    /// Writes `bytes` to the end of `f`. On an error, what a partial
    /// write put in the file is truncated away, as Redis does, and the
    /// error answered with how many bytes stay written (0, or all that
    /// went in if the truncation failed too).
    fn write_all(&self, f: &mut File, bytes: &[u8], policy: Fsync) -> Result<(), usize> {
        let mut done = 0;
        let err = loop {
            if done == bytes.len() {
                self.current_size.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                self.write_ok();
                return Ok(());
            }
            match f.write(&bytes[done..]) {
                Ok(0) => break io::Error::from(io::ErrorKind::WriteZero),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break e,
            }
        };
        self.write_failed(policy, &err);
        if done > 0 {
            let cut = f.metadata().and_then(|m| f.set_len(m.len() - done as u64));
            if cut.is_err() {
                // The partial write stays: it is not written again.
                self.current_size.fetch_add(done as u64, Ordering::Relaxed);
                return Err(done);
            }
        }
        Err(0)
    }

    /// A write or fsync succeeded: writes are allowed again if an error
    /// had refused them.
    fn write_ok(&self) {
        if !self.last_write_ok.load(Ordering::Relaxed) {
            self.last_write_ok.store(true, Ordering::Relaxed);
            log::warning("AOF write error looks solved, Redis can write again.");
            if let Some(sh) = self.shared() {
                sh.persist.aof_errno.store(0, Ordering::Relaxed);
                sh.state_changed();
            }
        }
    }

    fn write_failed(&self, policy: Fsync, e: &io::Error) {
        let now = unix_ms() / 1000;
        let last = self.last_error_log.load(Ordering::Relaxed);
        if now - last > AOF_WRITE_LOG_ERROR_RATE || policy == Fsync::Always {
            self.last_error_log.store(now, Ordering::Relaxed);
            let why = e.to_string();
            let why = why.split(" (os error").next().unwrap_or_default();
            log::warning(&format!("Error writing to the AOF file: {why}"));
        }
        self.last_write_ok.store(false, Ordering::Relaxed);
        if policy == Fsync::Always {
            // As Redis: an acknowledged write could not be made durable.
            log::warning(
                "Can't recover from AOF write error when the AOF fsync policy is 'always'. \
                 Exiting...",
            );
            std::process::exit(1);
        }
        if let Some(sh) = self.shared() {
            // Writes are refused until a write succeeds (MISCONF).
            sh.persist.aof_errno.store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Relaxed);
            sh.state_changed();
        }
    }

    /// Opens (creating) an incremental file for appending.
    fn open_incr(dirname: &Path, name: &str) -> io::Result<File> {
        OpenOptions::new().create(true).append(true).open(in_dir(dirname, name))
    }

    /// At start-up with `appendonly yes`, after loading: opens the last
    /// incremental file (or creates the files), then starts appending.
    pub fn open_on_start(self: &Arc<Self>, sh: &Arc<Shared>, mut m: Manifest) -> io::Result<()> {
        let cfg = sh.config.read().clone();
        let (dirname, filename) = (dir_of(&cfg), cfg.appendfilename.clone());
        std::fs::create_dir_all(&dirname)?;
        if m.base.is_none() && m.incr.is_empty() {
            // A fresh directory: a base of the (empty) data set first.
            let name = m.new_base(&filename, cfg.aof_use_rdb_preamble);
            log::notice(&format!("Creating AOF base file {name} on server start"));
            let tmp = cfg.path(format!("temp-rewriteaof-{}.aof", std::process::id()));
            let started = persistence::begin_then(sh, &mut || {});
            write_base(sh, started, &tmp, &cfg)?;
            std::fs::rename(&tmp, in_dir(&dirname, &name))?;
        }
        let name = if m.incr.is_empty() {
            let n = m.new_incr(&filename);
            log::notice(&format!("Creating AOF incr file {n} on server start"));
            n
        } else {
            let n = m.incr.last().map(|i| i.name.clone()).unwrap_or_default();
            log::notice(&format!("Opening AOF incr file {n} on server start"));
            n
        };
        let f = Self::open_incr(&dirname, &name)?;
        persist_manifest(&dirname, &filename, &m)?;
        let base = m.base.as_ref().map_or(0, |b| file_size(&dirname, &b.name));
        let total: u64 = m.load_order().map(|i| file_size(&dirname, &i.name)).sum();
        self.base_size.store(base, Ordering::Relaxed);
        self.current_size.store(total, Ordering::Relaxed);
        self.ctl.lock().manifest = m;
        self.activate(sh, Some(f), true);
        Ok(())
    }

    /// Starts a rewrite: a new incremental file from the snapshot's
    /// instant on, the snapshot written as the next base, then the
    /// manifest switched. `Ok(false)` when it was scheduled instead, for
    /// the cron to start: a BGSAVE holds the snapshot machinery, or the
    /// caller (EXEC) holds stripes, which the snapshot's instant needs
    /// (Redis schedules a rewrite asked for inside a transaction too).
    fn start_rewrite(
        self: &Arc<Self>,
        sh: &Arc<Shared>,
        holding_stripes: bool,
    ) -> Result<bool, String> {
        if self.rewriting.load(Ordering::Acquire) {
            return Err("Background append only file rewriting already in progress".into());
        }
        let busy = persistence::busy_flag(sh);
        if holding_stripes || busy.load(Ordering::Acquire) {
            self.rewrite_scheduled.store(true, Ordering::Release);
            return Ok(false);
        }
        if self.rewriting.swap(true, Ordering::AcqRel) {
            return Err("Background append only file rewriting already in progress".into());
        }
        if busy.swap(true, Ordering::AcqRel) {
            self.rewriting.store(false, Ordering::Release);
            self.rewrite_scheduled.store(true, Ordering::Release);
            return Ok(false);
        }
        self.rewrite_scheduled.store(false, Ordering::Release);
        let res = self.begin_rewrite(sh);
        if res.is_err() {
            busy.store(false, Ordering::Release);
            self.rewriting.store(false, Ordering::Release);
            self.last_rewrite_ok.store(false, Ordering::Relaxed);
        }
        res.map(|()| true)
    }

    fn begin_rewrite(self: &Arc<Self>, sh: &Arc<Shared>) -> Result<(), String> {
        let cfg = sh.config.read().clone();
        let (dirname, filename) = (dir_of(&cfg), cfg.appendfilename.clone());
        std::fs::create_dir_all(&dirname).map_err(|e| e.to_string())?;
        let mode = if !self.on.load(Ordering::Acquire) {
            Mode::Off
        } else if self.state.lock().accepting {
            Mode::On
        } else {
            Mode::TurningOn
        };
        if mode != Mode::On && self.ctl.lock().manifest == Manifest::default() {
            // Files a previous run left: their sequence numbers go on.
            let path = in_dir(&dirname, &aof::manifest_name(&filename));
            if let Ok(m) = std::fs::read(&path)
                .map_err(|_| ())
                .and_then(|t| Manifest::parse(&t).map_err(|_| ()))
            {
                self.ctl.lock().manifest = m;
            }
        }
        let mut file = None;
        match mode {
            Mode::Off => {}
            Mode::On => {
                let mut m = self.ctl.lock().manifest.clone();
                let name = m.new_incr(&filename);
                file = Some(Self::open_incr(&dirname, &name).map_err(|e| e.to_string())?);
                // The manifest names the new file before anything is
                // written to it: a crash now loads base, old incr, new one.
                persist_manifest(&dirname, &filename, &m).map_err(|e| e.to_string())?;
                log::notice(&format!("Creating AOF incr file {name} on background rewrite"));
                self.ctl.lock().manifest = m;
            }
            Mode::TurningOn => {
                // Named into the manifest when the base is there.
                let name = temp_incr_name(&filename);
                let _ = std::fs::remove_file(in_dir(&dirname, &name));
                file = Some(Self::open_incr(&dirname, &name).map_err(|e| e.to_string())?);
                log::notice(&format!("Creating AOF incr file {name} on background rewrite"));
            }
        }
        let started = persistence::begin_then(sh, &mut || {
            if let Some(f) = file.take() {
                let mut st = self.state.lock();
                let tail = std::mem::take(&mut st.buf);
                st.switch = Some((tail, f));
                st.writer.reset();
                st.accepting = true;
            }
        });
        self.wake.notify_one();
        self.ctl.lock().rewrite_started = Some(Instant::now());
        // Counted when it starts, as Redis counts a fork.
        self.rewrites.fetch_add(1, Ordering::Relaxed);
        sh.persist.background_jobs.fetch_add(1, Ordering::Relaxed);
        log::notice("Background append only file rewriting started");
        let me = self.clone();
        let sh2 = sh.clone();
        let spawned = log::spawn("aof-rewrite", move || {
            let cfg = sh2.config.read().clone();
            let tmp = cfg.path(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
            let res = write_base(&sh2, started, &tmp, &cfg);
            persistence::busy_flag(&sh2).store(false, Ordering::Release);
            me.rewrite_done(&sh2, res, &tmp, mode, cfg.aof_use_rdb_preamble);
        });
        spawned.map(|_| ()).map_err(|e| e.to_string())
    }

    /// The rewrite's snapshot is written (or failed): rename it into the
    /// directory as the new base, mark what it replaces as history,
    /// persist the manifest, delete the history files.
    fn rewrite_done(&self, sh: &Shared, res: io::Result<()>, tmp: &Path, mode: Mode, rdb: bool) {
        let cfg = sh.config.read().clone();
        let (dirname, filename) = (dir_of(&cfg), cfg.appendfilename.clone());
        let started = self.ctl.lock().rewrite_started.take();
        let secs = started.map_or(0, |s| s.elapsed().as_secs() as i64);
        self.last_rewrite_secs.store(secs, Ordering::Relaxed);
        if let Err(e) = &res {
            if persistence::cancelled(e) {
                // Killed (the AOF turned off): no failure to count, nothing
                // of it kept.
                let _ = std::fs::remove_file(tmp);
                if mode == Mode::TurningOn {
                    let _ = std::fs::remove_file(in_dir(&dirname, &temp_incr_name(&filename)));
                }
                self.rewriting.store(false, Ordering::Release);
                return;
            }
        }
        let outcome = res.and_then(|()| {
            if mode != Mode::Off && !self.on.load(Ordering::Acquire) {
                return Err(io::Error::other("the AOF was turned off"));
            }
            // Named as Redis names it, without the directory.
            let tmp_name = tmp.file_name().unwrap_or_default().to_string_lossy().into_owned();
            log::notice(&format!("Successfully created the temporary AOF base file {tmp_name}"));
            let mut ctl = self.ctl.lock();
            let mut m = ctl.manifest.clone();
            let base = m.new_base(&filename, rdb);
            std::fs::rename(tmp, in_dir(&dirname, &base))?;
            log::notice("Background AOF rewrite terminated with success");
            log::notice(&format!(
                "Successfully renamed the temporary AOF base file {tmp_name} into {base}"
            ));
            match mode {
                Mode::On => m.mark_rewritten_incr_as_history(),
                Mode::Off => m.mark_all_incr_as_history(),
                Mode::TurningOn => {
                    m.mark_all_incr_as_history();
                    let temp = temp_incr_name(&filename);
                    let name = m.new_incr(&filename);
                    std::fs::rename(in_dir(&dirname, &temp), in_dir(&dirname, &name))?;
                    log::notice(&format!(
                        "Successfully renamed the temporary AOF incr file {temp} into {name}"
                    ));
                }
            }
            persist_manifest(&dirname, &filename, &m)?;
            if !cfg.aof_disable_auto_gc {
                delete_history(&dirname, &filename, &mut m)?;
            }
            let base_size = file_size(&dirname, &base);
            let total: u64 = m.load_order().map(|i| file_size(&dirname, &i.name)).sum();
            self.base_size.store(base_size, Ordering::Relaxed);
            self.current_size.store(total, Ordering::Relaxed);
            ctl.manifest = m;
            Ok(())
        });
        match outcome {
            Ok(()) => {
                if mode == Mode::TurningOn {
                    self.wait_rewrite.store(false, Ordering::Release);
                }
                self.last_rewrite_ok.store(true, Ordering::Relaxed);
                self.consecutive_failures.store(0, Ordering::Relaxed);
                log::notice("Background AOF rewrite finished successfully");
            }
            Err(e) => {
                let _ = std::fs::remove_file(tmp);
                self.last_rewrite_ok.store(false, Ordering::Relaxed);
                self.consecutive_failures.fetch_add(1, Ordering::Relaxed);
                log::warning(&format!("Background AOF rewrite failed: {e}"));
            }
        }
        self.rewriting.store(false, Ordering::Release);
    }

    /// Turns the AOF off: the consumer goes, what is pending is written
    /// and fsynced, the file closed.
    fn stop(&self, sh: &Shared) {
        if !self.on.swap(false, Ordering::AcqRel) {
            return;
        }
        self.wait_rewrite.store(false, Ordering::Release);
        self.kill_rewrite();
        if let Some(c) = self.feed.lock().take() {
            sh.remove_consumer(&c);
        }
        // An AOF that is off refuses no write, whatever its last error.
        if sh.persist.aof_errno.swap(0, Ordering::Relaxed) != 0 {
            sh.state_changed();
        }
        let mut st = self.state.lock();
        st.accepting = false;
        st.close = true;
        self.wake.notify_one();
        while st.close && self.writer_running.load(Ordering::Acquire) {
            self.synced.wait_for(&mut st, Duration::from_millis(100));
        }
        drop(st);
        self.durable.set_active(false);
        // A WAITAOF waiting for the local fsync is answered its error.
        self.fsync_progress();
    }

    /// Stops a running rewrite and waits for it to end, as Redis's
    /// `killAppendOnlyChild` (with its log line; the "child" is the
    /// rewrite thread of this process).
    fn kill_rewrite(&self) {
        if !self.rewriting.load(Ordering::Acquire) {
            return;
        }
        log::notice(&format!("Killing running AOF rewrite child: {}", std::process::id()));
        if let Some(sh) = self.shared() {
            persistence::cancel_running(&sh);
        }
        // The writer checks the flag between stripes and while it delays;
        // bounded in case it waits on stripes the caller (EXEC) holds.
        let end = Instant::now() + Duration::from_secs(5);
        while self.rewriting.load(Ordering::Acquire) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.rewrite_scheduled.store(false, Ordering::Release);
    }

    /// Writes and fsyncs what is pending, if the writer runs.
    fn sync_pending(&self) {
        if !self.on.load(Ordering::Acquire) || !self.writer_running.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.state.lock();
        st.sync_asked += 1;
        let mine = st.sync_asked;
        self.wake.notify_one();
        while st.sync_done < mine && self.writer_running.load(Ordering::Acquire) {
            self.synced.wait_for(&mut st, Duration::from_millis(100));
        }
    }

    /// Rewrites due by `auto-aof-rewrite-percentage` or scheduled behind
    /// a BGSAVE (Redis's serverCron).
    fn cron(self: &Arc<Self>, sh: &Arc<Shared>) {
        if self.rewriting.load(Ordering::Acquire)
            || persistence::busy_flag(sh).load(Ordering::Acquire)
        {
            return;
        }
        if self.rewrite_scheduled.load(Ordering::Acquire) {
            let _ = self.start_rewrite(sh, false);
            return;
        }
        if !self.on.load(Ordering::Acquire) {
            return;
        }
        let (pct, min) = {
            let c = sh.config.read();
            (c.auto_aof_rewrite_percentage, c.auto_aof_rewrite_min_size)
        };
        let size = self.current_size.load(Ordering::Relaxed);
        if pct <= 0 || size <= min {
            return;
        }
        let base = self.base_size.load(Ordering::Relaxed).max(1);
        let growth = (size * 100 / base) as i64 - 100;
        if growth >= pct {
            log::notice(&format!("Starting automatic rewriting of AOF on {growth}% growth"));
            let _ = self.start_rewrite(sh, false);
        }
    }
}

impl AppendOnly for Seam {
    fn fsynced(&self) -> Option<u64> {
        if !self.0.on.load(Ordering::Acquire) {
            return None;
        }
        self.0.durable.fsynced()
    }

    fn rewrite(&self, holding_stripes: bool) -> Result<&'static str, String> {
        let me = self.0.clone();
        let sh = me.shared().ok_or("server is stopping")?;
        match me.start_rewrite(&sh, holding_stripes)? {
            true => Ok("Background append only file rewriting started"),
            false => Ok("Background append only file rewriting scheduled"),
        }
    }

    fn config_changed(&self, holding_stripes: bool) -> Result<(), String> {
        let me = self.0.clone();
        let sh = me.shared().ok_or("server is stopping")?;
        let want = sh.config.read().appendonly;
        me.timestamps.store(sh.config.read().aof_timestamp_enabled, Ordering::Relaxed);
        if !sh.config.read().aof_disable_auto_gc && !me.rewriting.load(Ordering::Acquire) {
            // Garbage collection turned back on: what it kept goes now.
            let (dirname, filename) = {
                let c = sh.config.read();
                (dir_of(&c), c.appendfilename.clone())
            };
            let mut ctl = me.ctl.lock();
            if !ctl.manifest.history.is_empty() {
                let _ = delete_history(&dirname, &filename, &mut ctl.manifest);
            }
        }
        let on = me.on.load(Ordering::Acquire);
        if want && !on {
            // Redis's startAppendOnly: a rewrite whose base is the data set
            // now; units before its instant are in the base.
            me.wait_rewrite.store(true, Ordering::Release);
            me.activate(&sh, None, false);
            if me.rewriting.load(Ordering::Acquire) {
                // A rewrite with the AOF off is running: the one that turns
                // it on follows it.
                me.rewrite_scheduled.store(true, Ordering::Release);
                return Ok(());
            }
            let started = me.start_rewrite(&sh, holding_stripes);
            if matches!(started, Ok(false)) && holding_stripes {
                log::warning(
                    "AOF was enabled during a transaction. An AOF background was scheduled to \
                     start when possible.",
                );
            }
            if let Err(e) = started {
                me.stop(&sh);
                log::warning(&format!("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error: {e}"));
                return Err("Unable to turn on AOF. Check server logs.".into());
            }
        } else if !want && on {
            me.stop(&sh);
        }
        Ok(())
    }

    fn set_flush_sleep(&self, us: u64) {
        self.0.flush_sleep_us.store(us, Ordering::Relaxed);
    }

    fn reload(&self) -> Result<(), String> {
        let me = self.0.clone();
        let sh = me.shared().ok_or("server is stopping")?;
        me.sync_pending();
        // The files the running AOF writes, else those on disk.
        let m = if me.on.load(Ordering::Acquire) {
            me.ctl.lock().manifest.clone()
        } else {
            let c = sh.config.read();
            crate::aof_load::read_manifest(&dir_of(&c), &c.appendfilename)
                .map_err(|l| l.concat())?
                .unwrap_or_default()
        };
        if !sh.config.read().aof_disable_auto_gc && me.on.load(Ordering::Acquire) {
            let (dirname, filename) = {
                let c = sh.config.read();
                (dir_of(&c), c.appendfilename.clone())
            };
            let _ = delete_history(&dirname, &filename, &mut me.ctl.lock().manifest);
        }
        sh.set_loading(true);
        persistence::flush_all(&sh);
        let res = crate::aof_load::load_all(&sh, &m);
        sh.set_loading(false);
        res?;
        log::warning("Append Only File loaded by DEBUG LOADAOF");
        Ok(())
    }

    fn info(&self) -> AofInfo {
        let a = &self.0;
        let enabled = a.on.load(Ordering::Acquire);
        let current = a.ctl.lock().rewrite_started.map_or(-1, |s| s.elapsed().as_secs() as i64);
        AofInfo {
            enabled,
            rewrite_in_progress: a.rewriting.load(Ordering::Relaxed),
            rewrite_scheduled: a.rewrite_scheduled.load(Ordering::Relaxed),
            last_rewrite_time_sec: a.last_rewrite_secs.load(Ordering::Relaxed),
            current_rewrite_time_sec: current,
            last_bgrewrite_ok: a.last_rewrite_ok.load(Ordering::Relaxed),
            rewrites: a.rewrites.load(Ordering::Relaxed),
            rewrites_consecutive_failures: a.consecutive_failures.load(Ordering::Relaxed),
            last_write_ok: a.last_write_ok.load(Ordering::Relaxed),
            current_size: a.current_size.load(Ordering::Relaxed),
            base_size: a.base_size.load(Ordering::Relaxed),
            buffer_length: a.state.lock().buf.len() as u64,
            delayed_fsync: a.delayed_fsync.load(Ordering::Relaxed),
            wait_rewrite: enabled && a.wait_rewrite.load(Ordering::Relaxed),
        }
    }
}

/// Deletes the history files the manifest lists and drops them from it
/// (Redis's `aofDelHistoryFiles`).
fn delete_history(dirname: &Path, filename: &str, m: &mut Manifest) -> io::Result<()> {
    if m.history.is_empty() {
        return Ok(());
    }
    for h in m.history.drain(..) {
        log::notice(&format!("Removing the history file {} in the background", h.name));
        let _ = std::fs::remove_file(in_dir(dirname, &h.name));
    }
    persist_manifest(dirname, filename, m)
}

/// Writes a rewrite's snapshot to `tmp` as the base: an RDB file (the
/// preamble), or with `aof-use-rdb-preamble no` the commands that rebuild
/// it (the RDB image converted key by key: the snapshot machinery writes
/// RDB only; this costs a second pass, for a setting that is not the
/// default).
fn write_base(
    sh: &Shared,
    started: persistence::Started,
    tmp: &Path,
    cfg: &engine::subsystems::config::Config,
) -> io::Result<()> {
    let functions =
        if cfg.aof_use_rdb_preamble { Vec::new() } else { started.functions().to_vec() };
    persistence::write_file(sh, started, &tmp.to_path_buf(), true)?;
    if cfg.aof_use_rdb_preamble {
        return Ok(());
    }
    let mut rdb = File::open(tmp)?;
    let cmds = tmp.with_extension("cmds");
    let mut w = io::BufWriter::new(File::create(&cmds)?);
    let mut buf = Vec::new();
    if cfg.aof_timestamp_enabled {
        buf.extend_from_slice(format!("#TS:{}\r\n", unix_ms() / 1000).as_bytes());
    }
    // Redis's rewriteFunctions: the libraries before the databases.
    for code in &functions {
        persist::aof::write_command(&mut buf, &[b"FUNCTION", b"LOAD", code]);
    }
    let mut db = None;
    let mut failed = None;
    let lim = persistence::limits(cfg);
    // Keys whose time has passed are written too, as Redis's child does.
    // The image is read as it is converted, not held whole.
    let mut loader = persist::file::Loader::new(lim, usize::MAX, i64::MIN, false);
    let mut sink = |k: persist::file::LoadedKey<'_>| {
        if db != Some(k.db) {
            db = Some(k.db);
            persist::aof_base::select(&mut buf, k.db);
        }
        persist::aof_base::write_key(&mut buf, k.key, &k.value, k.expire_at);
        if buf.len() >= 1 << 16 {
            if let Err(e) = w.write_all(&buf) {
                failed = Some(e);
                return Err("write error");
            }
            buf.clear();
        }
        Ok(())
    };
    let res = persistence::feed_reader(&mut rdb, &mut loader, |_| Ok(()), &mut sink, &mut |_| {});
    if let Some(e) = failed {
        return Err(e);
    }
    res.map_err(|e| {
        io::Error::other(match e {
            persistence::LoadError::Rdb(e) => e.to_string(),
            persistence::LoadError::Library(e) => e,
        })
    })?;
    let loaded = loader.finish();
    // The jobs and queue settings, which the image keeps in AUX fields.
    let (jobs, queues) = persistence::job_aux(&loaded.aux);
    engine::subsystems::jobs::rewrite_commands(jobs, queues, &mut buf);
    w.write_all(&buf)?;
    let f = w.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    std::fs::rename(&cmds, tmp)
}

/// The cron thread: automatic and scheduled rewrites.
pub fn start_cron(sh: &Arc<Shared>, aof: &Arc<Aof>) {
    let weak = Arc::downgrade(sh);
    let a = Arc::downgrade(aof);
    let spawned = log::spawn("aof-cron", move || loop {
        std::thread::sleep(Duration::from_millis(100));
        let Some(sh) = weak.upgrade() else { return };
        if sh.shutdown.load(Ordering::Relaxed) {
            return;
        }
        if sh.is_loading() {
            continue;
        }
        if let Some(a) = a.upgrade() {
            a.cron(&sh);
        }
    });
    if let Err(e) = spawned {
        log::warning(&format!("Can't start the AOF cron thread: {e}"));
    }
}
