//! The replication stream, master side: what a Redis replica connected
//! with `replicaof <sluice>` reads.
//!
//! - **The stream** is the effects record: a consumer ([`Feed`]) turns
//!   every execution unit into RESP (`SELECT` when the database changes,
//!   `MULTI`/`EXEC` around a unit of several operations) and appends it to
//!   one buffer under one mutex. The consumer runs while the unit's
//!   stripes are locked, so for every key the buffer's order is the order
//!   of execution. `master_repl_offset` counts the bytes appended, as
//!   Redis counts them. The consumer exists only while a backlog does
//!   (from the first replica on, as in Redis): without one, writes record
//!   nothing for it.
//! - **The buffer** keeps the last `repl-backlog-size` bytes (the backlog
//!   a partial resynchronisation reads) and whatever a connected replica
//!   has not been sent yet (Redis 7's shared replication buffer); a
//!   replica that falls behind by more than the `replica` class of
//!   `client-output-buffer-limit` is disconnected.
//! - **A full resynchronisation** takes a point-in-time snapshot without
//!   fork (`Snapshots::snapshot_to`); the replica's place in the stream is
//!   taken inside the snapshot's instant, while every stripe is locked, so
//!   the stream it is sent starts exactly after the snapshot's contents:
//!   no write is lost or doubled. The payload goes out disk-based (`$len`
//!   then the file) or, with `repl-diskless-sync yes` and a replica that
//!   can read it, straight to the socket between `$EOF:<mark>` and the
//!   mark.
//! - **A replica connection** runs on two threads of its own, taken over
//!   from the event loop after `SYNC`/`PSYNC`: one sends the payload and
//!   then the stream, one reads `REPLCONF ACK`s (WAIT, lag, timeouts).
//! - **On a replica** (Redis's chained replication) the buffer is fed
//!   with the master's stream itself, byte for byte, as the link thread
//!   applies it (`stage` then [`Master::proxy_staged`]): its sub-replicas
//!   and its backlog hold exactly what its master sent, so offsets and
//!   replication ids agree along the chain and a promotion keeps the
//!   history (PSYNC2: the old id stays as `master_replid2`).
//! - **The cron** (one thread) feeds a `PING` every
//!   `repl-ping-replica-period`, applies the soft output limit, and frees
//!   the backlog after `repl-backlog-ttl` without replicas.

mod acks;
mod diskless;
mod failover;
mod relay;

pub use relay::{saved_info, stage, unstage};

use std::collections::VecDeque;
use std::io::{Read, Seek, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use engine::core::blocking::Waiter;
use engine::core::effects::{Consumer, StreamWriter, Unit, Want};
use engine::core::shared::unix_ms;
use engine::subsystems::log;
use engine::subsystems::repl::{
    FailoverRequest, Handshake, ReplicaView, Replication, SyncRequest, View,
};
use engine::{Session, Shared};
use parking_lot::{Condvar, Mutex};
use resp::{ArgBuf, Limits, Parsed, ReplyBuf};

/// `REPLCONF GETACK *`, as Redis feeds it to ask for acknowledgements.
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
/// The keep-alive `PING` of `repl-ping-replica-period`.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
/// Bytes of stream a sender copies out per lock.
const CHUNK: usize = 256 * 1024;
/// The longest a sender sleeps without looking at the stream.
const SENDER_IDLE: Duration = Duration::from_millis(10);
/// The longest a connection's push waits for a sender's write in progress.
const PUSH_WAIT: Duration = Duration::from_millis(1);

/// A replica's state as INFO shows it.
const WAIT_BGSAVE: u8 = 0;
const SEND_BULK: u8 = 1;
const ONLINE: u8 = 2;

/// The server's replication, handed to the engine as `Host::replication`.
pub struct Master {
    /// Itself, for the threads it starts from `&self`.
    me: Weak<Master>,
    shared: Weak<Shared>,
    inner: Mutex<Inner>,
    /// Signalled when the stream grows or a replica's state changes.
    grown: Condvar,
    sync_full: AtomicU64,
    sync_partial_ok: AtomicU64,
    sync_partial_err: AtomicU64,
    next_id: AtomicU64,
    /// `dbfilename` was last written for a disk-based full sync while
    /// `rdb-del-sync-files` was on (Redis's RDBGeneratedByReplication).
    rdb_by_replication: AtomicBool,
    /// Following a master: the buffer is fed with its stream as applied
    /// (`proxy_staged`), not with this server's own effects, and this
    /// server feeds nothing of its own (PINGs, GETACKs).
    proxy: AtomicBool,
    /// A FAILOVER in progress.
    failover: Mutex<Option<failover::Failover>>,
    /// Replicas waiting for a shared diskless snapshot, and its outcomes.
    diskless: Mutex<diskless::Batches>,
    diskless_done: Condvar,
    /// Replicas' disk-based snapshots are made one at a time: a replica
    /// waiting for its turn here gives up when it goes.
    disk_turn: Mutex<()>,
    /// The disk-based sync whose snapshot runs: its replica's id and the
    /// snapshot's number (`persistence::snapshot_seq`).
    disk_sync: Mutex<Option<(u64, u64)>>,
    /// Woken at every acknowledgement a replica sends: replies held for
    /// replicas (ADDJOB's `REPLICATE n`) wait on it.
    acks: tokio::sync::Notify,
    /// The offsets the online replicas acknowledged, and the `DURABLE`
    /// batches waiting for theirs (woken only when satisfied).
    ack_waits: acks::AckWaits,
    /// Parked WAITAOFs (a count, so that an fsync looks at one atomic).
    aof_waits: std::sync::atomic::AtomicUsize,
    /// Runs [`Master::serve_waits`]'s passes.
    serve_passes: acks::Passes,
    /// Bytes `Inner::buf` holds allocated, as of its last change (INFO
    /// and eviction read it without the lock).
    buf_mem: AtomicU64,
    /// Bytes of stream the senders hold copied out of `buf` (a chunk per
    /// replica, until its thread ends): counted with the buffer.
    sending: AtomicU64,
}

struct Inner {
    replid: String,
    replid2: String,
    second_offset: i64,
    /// `master_repl_offset`: bytes ever appended to the stream.
    offset: i64,
    /// The stream's retained bytes, ending at `offset`; `None` until the
    /// first replica (and after `repl-backlog-ttl` without one).
    buf: Option<VecDeque<u8>>,
    /// `buf`'s capacity as last published in `Master::buf_mem`.
    buf_cap: usize,
    /// The consumer feeding `buf`, while it exists.
    feed: Option<Arc<dyn Consumer>>,
    writer: StreamWriter,
    scratch: Vec<u8>,
    replicas: Vec<Slot>,
    waits: Vec<Wait>,
    /// Unix seconds since when no replica is connected.
    no_replicas_since: i64,
    /// The database selected at the end of the proxied stream (what a
    /// sub-replica's full sync tells it to select: `repl-stream-db`).
    stream_db: usize,
    /// Connections' pushes waiting for a sender's write to end.
    push_waiters: usize,
    /// The stream's offset right after the last `REPLCONF GETACK` fed
    /// for durable connections: another is fed only once the stream
    /// moved past it (one request covers every batch before it).
    getack_at: i64,
}

/// A connected replica and how far it has been sent the stream.
struct Slot {
    r: Arc<Replica>,
    /// Stream bytes sent (its offset); `None` before its snapshot's
    /// instant.
    sent: Option<i64>,
    /// Since when (unix ms) it is over the soft output limit.
    soft_since: Option<i64>,
    /// Since when its sender thread is writing bytes past `sent` outside
    /// the lock: nobody else may write to the socket meanwhile.
    busy: Option<std::time::Instant>,
}

/// What other threads read of a replica.
struct Replica {
    id: u64,
    name: String,
    ip: String,
    port: u16,
    state: AtomicU8,
    ack_offset: AtomicI64,
    /// The offset its AOF fsynced (`REPLCONF ACK <off> FACK <aofoff>`,
    /// Redis 7.2's; -1 from a replica that sends no FACK).
    fack_offset: AtomicI64,
    /// Unix seconds of the last acknowledgement.
    ack_time: AtomicI64,
    /// The stream flows (after a diskless payload: from the first ACK).
    streaming: AtomicBool,
    /// An ACK came before the payload's sender marked it online: the
    /// ACK thread may read the replica's first ACK, sent once it loaded
    /// the payload, before the sender thread gets the CPU back after its
    /// last write. That ACK starts the stream then ([`Replica::online`]);
    /// dropped, the stream waited for the replica's next ACK, a second
    /// later, while INFO showed it online.
    early_ack: AtomicBool,
    /// "Connection with replica ... lost." was logged ([`Replica::log_lost`]).
    lost_logged: AtomicBool,
    handle: Arc<engine::core::session::ClientHandle>,
    sock: TcpStream,
}

impl Replica {
    /// Whether it announced this address (Redis's findReplica).
    fn is_at(&self, host: &str, port: i64) -> bool {
        self.ip.eq_ignore_ascii_case(host) && i64::from(self.port) == port
    }

    fn kill(&self) {
        self.handle.killed.store(true, Ordering::Release);
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }

    /// Logs the link's end, once, from the thread that saw it first.
    /// Redis frees a dropped replica's client (logging this line) before
    /// its event loop reads another command, so the line precedes
    /// whatever the next command logs; the sender thread, which logged it
    /// alone, may wake milliseconds after the ACK thread dropped the link
    /// (a replica's EOF, or a command it must not send).
    fn log_lost(&self, why: &str) {
        if !self.lost_logged.swap(true, Ordering::AcqRel) {
            log::warning(&format!("Connection with replica {} lost{why}.", self.name));
        }
    }

    /// Drops the link from the ACK thread: logged, then cut.
    fn drop_link(&self) {
        self.log_lost("");
        self.kill();
    }

    /// A diskless payload is sent: online, the stream waiting for the
    /// replica's first ACK (Redis's `repl_start_cmd_stream_on_ack`),
    /// unless it came already. Whether this call started the stream.
    fn online(&self) -> bool {
        self.state.store(ONLINE, Ordering::SeqCst);
        self.ack_time.store(unix_ms() / 1000, Ordering::Relaxed);
        self.early_ack.load(Ordering::SeqCst) && !self.streaming.swap(true, Ordering::AcqRel)
    }

    /// An ACK came: starts the stream if it waited for one. Whether
    /// this call started it. (With [`Replica::online`], whichever of the
    /// two threads comes second sees the other's store.)
    fn acked(&self) -> bool {
        self.early_ack.store(true, Ordering::SeqCst);
        self.state.load(Ordering::SeqCst) == ONLINE && !self.streaming.swap(true, Ordering::AcqRel)
    }
}

/// A parked WAIT or WAITAOF.
struct Wait {
    w: Arc<Waiter>,
    offset: i64,
    numreplicas: usize,
    /// A WAITAOF: replicas count by their FACK; (whether it waits for
    /// the local AOF, the client's last write's sequence number).
    aof: Option<(bool, u64)>,
}

/// The effects-record consumer that feeds the stream.
struct Feed(Weak<Master>);

impl Consumer for Feed {
    fn wants(&self) -> Want {
        Want { propagate: true, events: false, keys: false }
    }

    fn unit(&self, unit: &Unit<'_>) {
        let Some(m) = self.0.upgrade() else { return };
        if m.proxy.load(Ordering::Acquire) {
            // A replica: the stream command being applied (staged by the
            // link thread) enters the backlog here, with its stripes
            // held, so a snapshot's instant orders it as it orders the
            // data. A replica's own writes are not propagated (Redis 4+).
            m.append_staged(None);
            return;
        }
        if unit.propagates() && m.feed_unit(unit) {
            unit.push_before_replies();
        }
    }
}

/// 40 random hex characters (a replication id, an EOF mark).
fn random_hex() -> String {
    let mut bytes = [0u8; 20];
    let ok = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if ok.is_err() {
        let mut x =
            (engine::core::shared::unix_us() as u64) ^ (u64::from(std::process::id()) << 32);
        for b in &mut bytes {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The master side of a server being built.
pub fn new(shared: &Weak<Shared>) -> Arc<Master> {
    Arc::new_cyclic(|me| Master {
        me: me.clone(),
        shared: shared.clone(),
        inner: Mutex::new(Inner {
            replid: random_hex(),
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 0,
            buf: None,
            buf_cap: 0,
            feed: None,
            writer: StreamWriter::default(),
            scratch: Vec::new(),
            replicas: Vec::new(),
            waits: Vec::new(),
            no_replicas_since: unix_ms() / 1000,
            stream_db: 0,
            push_waiters: 0,
            getack_at: -1,
        }),
        proxy: AtomicBool::new(false),
        failover: Mutex::new(None),
        diskless: Mutex::new(diskless::Batches::default()),
        diskless_done: Condvar::new(),
        disk_turn: Mutex::new(()),
        disk_sync: Mutex::new(None),
        acks: tokio::sync::Notify::new(),
        ack_waits: Default::default(),
        aof_waits: std::sync::atomic::AtomicUsize::new(0),
        serve_passes: Default::default(),
        grown: Condvar::new(),
        sync_full: AtomicU64::new(0),
        sync_partial_ok: AtomicU64::new(0),
        sync_partial_err: AtomicU64::new(0),
        next_id: AtomicU64::new(0),
        rdb_by_replication: AtomicBool::new(false),
        buf_mem: AtomicU64::new(0),
        sending: AtomicU64::new(0),
    })
}

/// Starts the replication's cron.
pub fn start_cron(m: &Arc<Master>) {
    let weak = Arc::downgrade(m);
    let spawned = log::spawn("repl-cron", move || cron(weak));
    if let Err(e) = spawned {
        log::warning(&format!("Can't start the replication cron: {e}"));
    }
}

/// A numeric configuration parameter (the replication ones are stored
/// by name).
pub(crate) fn conf_num(sh: &Shared, name: &str) -> i64 {
    sh.config
        .read()
        .get_by_name(name)
        .and_then(|v| std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()))
        .unwrap_or(0)
}

fn conf_yes(sh: &Shared, name: &str) -> bool {
    sh.config.read().get_by_name(name).is_some_and(|v| v == b"yes")
}

impl Master {
    /// Appends one unit's commands to the stream (under the unit's locks);
    /// whether a replica is connected to be pushed to.
    fn feed_unit(&self, unit: &Unit<'_>) -> bool {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.buf.is_none() {
            return false;
        }
        inner.scratch.clear();
        inner.writer.write_resp_for_replicas(unit, &mut inner.scratch);
        let bytes = std::mem::take(&mut inner.scratch);
        // A client's unit is pushed by its connection at the end of the
        // batch (`push_before_replies`, then [`Master::push`]): the
        // senders are not woken for it (they were at every write, and
        // each wake-up took this lock and the CPU from the loop to send
        // a few commands the push sent anyway). The server's own units
        // (active expiry, eviction, the job queue's timer) and the
        // detached sessions' (AOF loading) have no connection to push.
        let client = unit.client();
        self.append_with(inner, &bytes, client == 0 || client == u64::MAX);
        inner.scratch = bytes;
        !inner.replicas.is_empty()
    }

    /// Writes the stream a connection's batch appended to the sockets of
    /// the replicas that keep up, before the connection writes the
    /// batch's replies: a write's client hears of it only once its
    /// replicas can (Redis writes replicas' output before clients' in one
    /// event-loop pass), so a master killed right after a reply does not
    /// take the write with it. One non-blocking send per replica per
    /// batch, from the connection's thread; the sender threads still
    /// write whatever this leaves (a socket that is full, a replica
    /// catching up).
    pub fn push(&self) {
        self.push_with(true);
    }

    /// [`Master::push`] without waiting for a sender's write in progress:
    /// its replica is skipped (its sender sends the rest when its write
    /// ends). For a `DURABLE` batch, whose replies wait for the replicas'
    /// acknowledgements anyway: the loop thread must not sleep here.
    pub fn push_now(&self) {
        self.push_with(false);
    }

    fn push_with(&self, wait: bool) {
        let mut g = self.inner.lock();
        // A sender in the middle of a write finishes it first (a few
        // microseconds on a socket with room); one stuck on a full socket
        // is a replica that does not keep up, which Redis does not wait
        // for either.
        // The wait is counted from the write's start, so a sender stuck on
        // a replica's full socket costs later batches nothing.
        if let Some(deadline) = g.replicas.iter().filter_map(|s| s.busy).max().filter(|_| wait) {
            let deadline = deadline + PUSH_WAIT;
            if std::time::Instant::now() < deadline {
                g.push_waiters += 1;
                while g.replicas.iter().any(|s| s.busy.is_some()) {
                    if self.grown.wait_until(&mut g, deadline).timed_out() {
                        break;
                    }
                }
                g.push_waiters -= 1;
            }
        }
        let inner = &mut *g;
        let Some(buf) = inner.buf.as_ref() else { return };
        let first = inner.offset - buf.len() as i64;
        let mut left = false;
        for s in inner.replicas.iter_mut() {
            let Some(sent) = s.sent else { continue };
            if s.busy.is_some()
                || sent >= inner.offset
                || sent < first
                || !s.r.streaming.load(Ordering::Acquire)
            {
                continue;
            }
            let from = (sent - first) as usize;
            let (a, b) = buf.as_slices();
            let (a, b) =
                if from < a.len() { (&a[from..], b) } else { (&[][..], &b[from - a.len()..]) };
            let parts = [std::io::IoSlice::new(a), std::io::IoSlice::new(b)];
            let sock = socket2::SockRef::from(&s.r.sock);
            if let Ok(n) = sock.send_vectored_with_flags(&parts, libc::MSG_DONTWAIT) {
                s.sent = Some(sent + n as i64);
                s.r.handle.net_out.fetch_add(n as u64, Ordering::Relaxed);
            }
            // A full socket: its sender (not woken by the appends this
            // push was for) writes the rest.
            left |= s.sent.is_some_and(|n| n < inner.offset);
        }
        if left {
            self.grown.notify_all();
        }
    }

    /// Appends raw stream bytes (PING, GETACK), selecting nothing. A
    /// replica feeds nothing of its own: it relays its master's.
    fn feed_raw(&self, bytes: &[u8]) {
        if self.proxy.load(Ordering::Acquire) {
            return;
        }
        let mut g = self.inner.lock();
        if g.buf.is_some() {
            self.append(&mut g, bytes);
        }
    }

    fn append(&self, inner: &mut Inner, bytes: &[u8]) {
        self.append_with(inner, bytes, true);
    }

    /// Appends stream bytes; `wake`: wakes the senders to send them
    /// (else the caller pushes them).
    fn append_with(&self, inner: &mut Inner, bytes: &[u8], wake: bool) {
        let Some(buf) = inner.buf.as_mut() else { return };
        buf.extend(bytes);
        inner.offset += bytes.len() as i64;
        let Some(sh) = self.shared.upgrade() else { return };
        let (size, hard) = {
            let c = sh.config.read();
            (c.repl_backlog_size.max(16 * 1024) as usize, c.obuf_replica.hard)
        };
        // A hard limit below the backlog's size counts as that size, as
        // Redis's: a partial resync it allows must not cut the replica.
        let hard = if hard > 0 { hard.max(size as u64) } else { 0 };
        // The slowest connected replica's unsent bytes stay, within its
        // output limit.
        let mut oldest = inner.offset;
        for s in &inner.replicas {
            let Some(sent) = s.sent else { continue };
            if hard > 0 && (inner.offset - sent) as u64 > hard {
                if !s.r.handle.killed.load(Ordering::Relaxed) {
                    log::warning(&format!(
                        "Client id={} addr={} scheduled to be closed ASAP for overcoming of \
                         output buffer limits.",
                        s.r.id, s.r.name
                    ));
                    sh.stats.client_obuf_limit_disconnections.fetch_add(1, Ordering::Relaxed);
                    s.r.kill();
                }
                continue;
            }
            oldest = oldest.min(sent);
        }
        trim(buf, size, inner.offset - oldest);
        self.publish_buf_mem(inner);
        if wake {
            self.grown.notify_all();
        }
    }

    /// Publishes `buf`'s allocation in `buf_mem` when it changed.
    fn publish_buf_mem(&self, inner: &mut Inner) {
        let cap = inner.buf.as_ref().map_or(0, VecDeque::capacity);
        if cap == inner.buf_cap {
            return;
        }
        let old = crate::alloc::allocation_size(inner.buf_cap) as u64;
        let new = crate::alloc::allocation_size(cap) as u64;
        // Eviction reads `used_memory_now`, which other threads' frees
        // reach only at its next measurement (within a millisecond): told
        // of the shrink first, it never sees the uncounted part fall while
        // the used figure still holds the freed bytes (which would count
        // them and evict keys for memory that is free).
        if new < old {
            if let Some(sh) = self.shared.upgrade() {
                sh.used_memory_freed(old - new);
            }
        }
        inner.buf_cap = cap;
        self.buf_mem.store(new, Ordering::Relaxed);
    }

    /// Creates the backlog (a master's first replica, a replica's sync, a
    /// restart with a recorded history) and installs the consumer that
    /// feeds it; `new_id`: a new replication id, as Redis's syncCommand
    /// gives a master's first replica.
    fn ensure_backlog(self: &Arc<Self>, sh: &Shared, new_id: bool) {
        let mut g = self.inner.lock();
        if g.buf.is_some() {
            return;
        }
        if new_id {
            g.replid = random_hex();
            g.replid2 = "0".repeat(40);
            g.second_offset = -1;
        }
        g.buf = Some(VecDeque::new());
        g.writer = StreamWriter::default();
        let feed: Arc<dyn Consumer> = Arc::new(Feed(Arc::downgrade(self)));
        g.feed = Some(feed.clone());
        if new_id {
            log::notice(&format!(
                "Replication backlog created, my new replication IDs are '{}' and '{}'",
                g.replid, g.replid2
            ));
        }
        drop(g);
        // Installed before any snapshot's instant: every write after that
        // instant reaches the stream (see `dispatch::call`).
        sh.add_consumer(feed);
    }

    /// Frees the backlog (`repl-backlog-ttl` without replicas; a
    /// replica keeps its own, as Redis's).
    fn free_backlog(&self, sh: &Shared, ttl: i64) {
        let mut g = self.inner.lock();
        if !g.replicas.is_empty() || g.buf.is_none() || self.proxy.load(Ordering::Acquire) {
            return;
        }
        g.buf = None;
        g.buf_cap = 0;
        self.buf_mem.store(0, Ordering::Relaxed);
        g.replid = random_hex();
        g.replid2 = "0".repeat(40);
        g.second_offset = -1;
        let feed = g.feed.take();
        drop(g);
        if let Some(f) = feed {
            sh.remove_consumer(&f);
        }
        log::notice(&format!(
            "Replication backlog freed after {ttl} seconds without connected replicas."
        ));
    }

    /// Serves the WAITs that enough acknowledgements reached: a pass
    /// takes the parked waits out of `inner`, counts, and puts back the
    /// ones still short (a wait's state is never locked under `inner`:
    /// its timeout reply counts acknowledgements under its state lock).
    /// Callers on other threads at once (two replicas acknowledging) are
    /// covered by a pass that starts after their call ([`acks::Passes`]):
    /// a WAIT both had answered was left for the cron a second later.
    fn serve_waits(&self) {
        self.serve_passes.run(|| self.serve_waits_once());
    }

    /// One pass of [`Master::serve_waits`].
    fn serve_waits_once(&self) {
        let (waits, acks) = {
            let mut g = self.inner.lock();
            if g.waits.is_empty() {
                return;
            }
            let acks: Vec<(i64, i64)> = g
                .replicas
                .iter()
                .filter(|s| s.r.state.load(Ordering::Relaxed) == ONLINE)
                .map(|s| {
                    (
                        s.r.ack_offset.load(Ordering::Relaxed),
                        s.r.fack_offset.load(Ordering::Relaxed),
                    )
                })
                .collect();
            (std::mem::take(&mut g.waits), acks)
        };
        // An AOF being turned off counts as off at once (as Redis's
        // `aof_enabled`), though its writer still fsyncs what it has.
        let fsynced = self.shared.upgrade().and_then(|sh| {
            let node = crate::host::node(&sh);
            node.aof.is_on().then(|| node.durable.fsynced()).flatten()
        });
        let mut pending = Vec::new();
        for w in waits {
            if !engine::core::blocking::still_waiting(&w.w) {
                if w.aof.is_some() {
                    self.aof_waits.fetch_sub(1, Ordering::Relaxed);
                }
                continue;
            }
            let mut b = ReplyBuf::new();
            let served = match w.aof {
                None => {
                    let n = acks.iter().filter(|&&(a, _)| a >= w.offset).count();
                    b.int(n as i64);
                    n >= w.numreplicas
                }
                Some((needs_local, seq)) => {
                    let n = acks.iter().filter(|&&(_, f)| f >= w.offset).count();
                    if needs_local && fsynced.is_none() {
                        // The AOF went off under a WAITAOF that needs it.
                        let text = engine::commands::repl::WAITAOF_NO_AOF;
                        b.error(format!("ERR {text}").as_bytes());
                        true
                    } else {
                        let here = fsynced.is_some_and(|f| f >= seq);
                        b.array(2);
                        b.int(i64::from(here));
                        b.int(n as i64);
                        n >= w.numreplicas && (here || !needs_local)
                    }
                }
            };
            if served {
                if w.aof.is_some() {
                    self.aof_waits.fetch_sub(1, Ordering::Relaxed);
                }
                engine::core::blocking::serve_keyless(&w.w, b.to_vec());
            } else {
                pending.push(w);
            }
        }
        if !pending.is_empty() {
            self.inner.lock().waits.extend(pending);
        }
    }

    /// The local AOF fsynced more (or went off): parked WAITAOFs may end.
    pub fn aof_progress(&self) {
        if self.aof_waits.load(Ordering::Relaxed) > 0 {
            self.serve_waits();
        }
    }

    /// The stream's offset, less a `REPLCONF GETACK *` it ends with: a
    /// replica answers such a request with its offset before it, so a
    /// write fed before the request is acknowledged at this offset.
    pub fn offset_before_getack(&self) -> i64 {
        let g = self.inner.lock();
        if g.getack_at == g.offset {
            g.offset - GETACK.len() as i64
        } else {
            g.offset
        }
    }

    /// Online replicas that acknowledged `offset` or more.
    pub fn acked_now(&self, offset: i64) -> usize {
        Replication::acked(self, offset)
    }

    /// Online replicas whose acknowledged position (`which`: the stream's,
    /// or their AOF's fsynced one) has reached `offset`.
    fn online_at(&self, offset: i64, which: impl Fn(&Replica) -> &AtomicI64) -> usize {
        self.inner
            .lock()
            .replicas
            .iter()
            .filter(|s| {
                s.r.state.load(Ordering::Relaxed) == ONLINE
                    && which(&s.r).load(Ordering::Relaxed) >= offset
            })
            .count()
    }

    /// What a reply held for replicas waits on for acknowledgements.
    pub fn acks(&self) -> &tokio::sync::Notify {
        &self.acks
    }

    /// Resolves once `want` online replicas acknowledged `offset` (a
    /// `DURABLE` batch's wait; count again with [`Master::acked_now`]).
    pub fn acked_by(&self, offset: i64, want: usize) -> acks::Acked<'_> {
        self.ack_waits.acked(offset, want)
    }

    /// A replica acknowledged, came online or went: the waits the online
    /// replicas' offsets now satisfy are woken.
    fn ack_progress(&self, inner: &Inner) {
        self.ack_waits.update(
            inner
                .replicas
                .iter()
                .filter(|s| s.r.state.load(Ordering::Relaxed) == ONLINE)
                .map(|s| s.r.ack_offset.load(Ordering::Relaxed)),
        );
    }

    /// Asks the replicas for an acknowledgement of everything fed so far
    /// (`REPLCONF GETACK *`), unless the last thing fed is such a request:
    /// concurrent durable batches share one.
    pub fn ask_for_acks(&self) {
        self.ask_for_acks_with(true);
    }

    /// [`Master::ask_for_acks`], then [`Master::push_now`]: a `DURABLE`
    /// batch's stream and the request go out from the connection's
    /// thread, without waking the senders.
    pub fn ask_for_acks_and_push(&self) {
        self.ask_for_acks_with(false);
        self.push_now();
    }

    fn ask_for_acks_with(&self, wake: bool) {
        if self.proxy.load(Ordering::Acquire) {
            return;
        }
        let mut g = self.inner.lock();
        if g.buf.is_none() || g.replicas.is_empty() || g.getack_at == g.offset {
            return;
        }
        self.append_with(&mut g, GETACK, wake);
        g.getack_at = g.offset;
    }

    /// Forgets a replica (its connection ended or was cut); what only it
    /// kept of the stream beyond the backlog is freed.
    fn remove(&self, id: u64) {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let before = inner.replicas.len();
        inner.replicas.retain(|s| s.r.id != id);
        if inner.replicas.len() == before {
            return;
        }
        if inner.replicas.is_empty() {
            inner.no_replicas_since = unix_ms() / 1000;
        }
        self.ack_progress(inner);
        let oldest = inner.replicas.iter().filter_map(|s| s.sent).min().unwrap_or(inner.offset);
        let size = self.shared.upgrade().map_or(0, |sh| sh.config.read().repl_backlog_size);
        if let Some(buf) = inner.buf.as_mut() {
            trim(buf, size.max(16 * 1024) as usize, inner.offset - oldest);
        }
        self.publish_buf_mem(inner);
        drop(g);
        self.end_useless_disk_sync();
    }

    /// Ends the disk-based sync's snapshot once no replica waits for a
    /// snapshot any more, unless save points make the file worth having:
    /// Redis kills its RDB child then, so that the next sync or BGSAVE
    /// starts at once.
    fn end_useless_disk_sync(&self) {
        let Some(sh) = self.shared.upgrade() else { return };
        let Some((owner, seq)) = *self.disk_sync.lock() else { return };
        if !sh.config.read().save.is_empty() {
            return;
        }
        let waiting = self.inner.lock().replicas.iter().any(|s| {
            !s.r.handle.killed.load(Ordering::Acquire)
                && (s.r.id == owner || s.r.state.load(Ordering::Relaxed) == WAIT_BGSAVE)
        });
        if !waiting && crate::persistence::cancel_snapshot(&sh, seq) {
            log::notice("Background saving terminated: no replica waits for it any more");
        }
    }
}

/// Drops the stream's oldest bytes beyond the backlog's `size` and the
/// `unsent` bytes a replica still needs.
fn trim(buf: &mut VecDeque<u8>, size: usize, unsent: i64) {
    let keep = (size as i64).max(unsent) as usize;
    if buf.len() > keep {
        let excess = buf.len() - keep;
        buf.drain(..excess);
        // A burst's capacity goes back too (`mem_total_replication_buffers`).
        if buf.capacity() > 2 * keep.max(16 * 1024) {
            buf.shrink_to(keep);
        }
    }
}

/// The server's replication (master side).
pub fn master(sh: &Shared) -> Option<Arc<Master>> {
    Some(crate::host::node(sh).master.clone())
}

impl Replication for Master {
    fn view(&self) -> View {
        // Taken before `inner` (the failover's order: its lock, then
        // `inner`).
        let failover_state = match &*self.failover.lock() {
            None => "no-failover",
            Some(f) if f.in_progress => "failover-in-progress",
            Some(_) => "waiting-for-sync",
        };
        let g = self.inner.lock();
        let now = unix_ms() / 1000;
        let max_lag = self.shared.upgrade().map_or(10, |sh| conf_num(&sh, "min-replicas-max-lag"));
        let replicas: Vec<ReplicaView> = g
            .replicas
            .iter()
            .map(|s| ReplicaView {
                ip: s.r.ip.clone(),
                port: s.r.port,
                state: match s.r.state.load(Ordering::Relaxed) {
                    WAIT_BGSAVE => "wait_bgsave",
                    SEND_BULK => "send_bulk",
                    _ => "online",
                },
                ack_offset: s.r.ack_offset.load(Ordering::Relaxed),
                lag: now - s.r.ack_time.load(Ordering::Relaxed),
            })
            .collect();
        let good = replicas.iter().filter(|r| r.state == "online" && r.lag <= max_lag).count();
        View {
            replid: g.replid.clone(),
            replid2: g.replid2.clone(),
            offset: g.offset,
            second_offset: g.second_offset,
            backlog: g.buf.as_ref().map(|b| (g.offset - b.len() as i64 + 1, b.len() as i64)),
            replicas,
            good_replicas: good,
            failover_state,
        }
    }

    fn offset(&self) -> i64 {
        self.inner.lock().offset
    }

    fn acked(&self, offset: i64) -> usize {
        self.online_at(offset, |r| &r.ack_offset)
    }

    fn wait(&self, w: Arc<Waiter>, offset: i64, numreplicas: usize) {
        self.inner.lock().waits.push(Wait { w, offset, numreplicas, aof: None });
        // As Redis's replicationRequestAckFromSlaves: ask now.
        self.feed_raw(GETACK);
    }

    fn aof_acked(&self, offset: i64) -> usize {
        self.online_at(offset, |r| &r.fack_offset)
    }

    fn wait_aof(&self, w: Arc<Waiter>, local: bool, seq: u64, offset: i64, numreplicas: usize) {
        self.aof_waits.fetch_add(1, Ordering::Relaxed);
        self.inner.lock().waits.push(Wait { w, offset, numreplicas, aof: Some((local, seq)) });
        self.feed_raw(GETACK);
        // The local part may be there already (an fsync in between).
        self.serve_waits();
    }

    fn request_ack(&self) {
        if !self.inner.lock().replicas.is_empty() {
            self.feed_raw(GETACK);
        }
    }

    fn good_replicas(&self) -> usize {
        self.view().good_replicas
    }

    fn failover(&self, req: FailoverRequest, replica: bool) -> Result<(), String> {
        self.start_failover(req, replica)
    }

    fn abort_failover(&self) -> bool {
        self.abort_failover_with("Failover manually aborted")
    }

    fn feed_command(&self, argv: &[&[u8]]) {
        let mut bytes = Vec::new();
        resp::write_command(&mut bytes, argv);
        self.feed_raw(&bytes);
    }

    fn reset_sync_stats(&self) {
        for c in [&self.sync_full, &self.sync_partial_ok, &self.sync_partial_err] {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn buffer_memory(&self) -> u64 {
        self.buf_mem.load(Ordering::Relaxed) + self.sending.load(Ordering::Relaxed)
    }

    fn has_replicas(&self) -> bool {
        self.inner.lock().replicas.iter().any(|s| !s.r.handle.killed.load(Ordering::Relaxed))
    }

    fn sync_stats(&self) -> (u64, u64, u64) {
        (
            self.sync_full.load(Ordering::Relaxed),
            self.sync_partial_ok.load(Ordering::Relaxed),
            self.sync_partial_err.load(Ordering::Relaxed),
        )
    }
}

/// Takes over a connection whose client sent SYNC or PSYNC: the replica
/// runs on threads of its own from now on.
pub fn take_over(
    shared: Arc<Shared>,
    sock: TcpStream,
    mut sess: Session,
    hs: Handshake,
    input: Vec<u8>,
) {
    let Some(master) = master(&shared) else {
        shared.disconnect(&mut sess);
        return;
    };
    let _ = sock.set_nonblocking(false);
    let peer_ip = sock.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let ip = hs.ip.clone().unwrap_or(peer_ip);
    let name = if hs.listening_port == 0 {
        format!("{ip}:<unknown-replica-port>")
    } else {
        format!("{ip}:{}", hs.listening_port)
    };
    let (Ok(reader), Ok(killer)) = (sock.try_clone(), sock.try_clone()) else {
        shared.disconnect(&mut sess);
        return;
    };
    let r = Arc::new(Replica {
        id: master.next_id.fetch_add(1, Ordering::Relaxed),
        name,
        ip,
        port: hs.listening_port,
        state: AtomicU8::new(WAIT_BGSAVE),
        ack_offset: AtomicI64::new(0),
        fack_offset: AtomicI64::new(-1),
        ack_time: AtomicI64::new(unix_ms() / 1000),
        streaming: AtomicBool::new(false),
        early_ack: AtomicBool::new(false),
        lost_logged: AtomicBool::new(false),
        handle: sess.handle.clone(),
        sock: killer,
    });
    {
        // CLIENT KILL: both threads stop at once (the sender may be in a
        // write, or waiting for the stream to grow), and the replica is
        // forgotten before the command answers, as Redis frees the client
        // at once: what only it kept of the stream is given back then, so
        // the INFO that follows does not race the threads' ends.
        let (r2, m2) = (r.clone(), Arc::downgrade(&master));
        *sess.handle.waker.lock() = Some(Box::new(move || {
            if r2.handle.killed.load(Ordering::Acquire) {
                let _ = r2.sock.shutdown(std::net::Shutdown::Both);
                if let Some(m) = m2.upgrade() {
                    m.remove(r2.id);
                    m.grown.notify_all();
                }
            }
        }));
    }
    sess.handle.replica.store(true, Ordering::Relaxed);
    master.inner.lock().replicas.push(Slot {
        r: r.clone(),
        sent: None,
        soft_since: None,
        busy: None,
    });
    let (m2, r2, sh2) = (master.clone(), r.clone(), shared.clone());
    let read = log::spawn("repl-ack", move || {
        read_acks(&sh2, &m2, &r2, reader, input);
        // A replica that hung up or was cut stops counting now, as Redis
        // frees the client at once, though its sender may still be busy
        // (inside a shared snapshot's payload).
        m2.remove(r2.id);
    });
    let send = log::spawn("repl-send", move || {
        let why = serve(&shared, &master, &r, &hs, sock);
        r.log_lost(&why);
        r.kill();
        master.remove(r.id);
        *sess.handle.waker.lock() = None;
        sess.handle.replica.store(false, Ordering::Relaxed);
        shared.disconnect(&mut sess);
    });
    if read.is_err() || send.is_err() {
        log::warning("Can't start a replica's threads");
    }
}

/// Synchronises one replica, then sends it the stream until it goes.
/// Returns why it ended (for the log line).
fn serve(sh: &Shared, m: &Arc<Master>, r: &Replica, hs: &Handshake, mut sock: TcpStream) -> String {
    log::notice(&format!("Replica {} asks for synchronization", r.name));
    // A replica that stops reading must not hold anyone for long: a
    // diskless payload is written by the snapshot's saver, which writers
    // that captured stripes may be waiting for.
    let timeout = conf_num(sh, "repl-timeout").max(1) as u64;
    let _ = sock.set_write_timeout(Some(Duration::from_secs(timeout)));
    let req = hs.sync.clone().unwrap_or(SyncRequest::Sync);
    if let SyncRequest::Psync { replid, offset } = &req {
        match try_partial(m, r, replid, *offset) {
            Ok(n) => {
                m.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
                let line = if hs.capa_psync2 {
                    format!("+CONTINUE {}\r\n", m.inner.lock().replid)
                } else {
                    "+CONTINUE\r\n".to_string()
                };
                if sock.write_all(line.as_bytes()).is_err() {
                    return " (write error)".into();
                }
                log::notice(&format!(
                    "Partial resynchronization request from {} accepted. Sending {n} bytes of \
                     backlog starting from offset {offset}.",
                    r.name
                ));
                return stream(sh, m, r, sock);
            }
            Err(why) => {
                if replid.first() != Some(&b'?') {
                    m.sync_partial_err.fetch_add(1, Ordering::Relaxed);
                }
                log::notice(&why);
            }
        }
    }
    m.sync_full.fetch_add(1, Ordering::Relaxed);
    // A master's first replica gives it a new history; a replica relays
    // its master's.
    m.ensure_backlog(sh, !m.proxy.load(Ordering::Acquire));
    match full_sync(sh, m, r, hs, &req, &mut sock) {
        Ok(()) => stream(sh, m, r, sock),
        Err(e) => format!(" ({e})"),
    }
}

/// `PSYNC replid offset` from the backlog: the replica's place is set and
/// the bytes it will be sent counted; `Err` says why not.
fn try_partial(m: &Master, r: &Replica, replid: &[u8], offset: i64) -> Result<i64, String> {
    let mut g = m.inner.lock();
    let id = String::from_utf8_lossy(replid);
    if replid.first() == Some(&b'?') {
        return Err(format!("Full resync requested by replica {}", r.name));
    }
    if *id != g.replid && *id != g.replid2 {
        return Err(format!(
            "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for \
             '{id}', my replication IDs are '{}' and '{}')",
            g.replid, g.replid2
        ));
    }
    // The previous history's id, asked past where this server left it
    // (Redis's words for it).
    if *id != g.replid && offset > g.second_offset {
        return Err(format!(
            "Partial resynchronization not accepted: Requested offset for second ID was \
             {offset}, but I can reply up to {}",
            g.second_offset
        ));
    }
    let Some(buf) = &g.buf else {
        return Err("Unable to partial resync with replica: no backlog".into());
    };
    let first = g.offset - buf.len() as i64 + 1;
    if offset < first || offset > g.offset + 1 {
        return Err(format!(
            "Unable to partial resync with replica {} for lack of backlog (Replica request was: \
             {offset}).",
            r.name
        ));
    }
    let n = g.offset + 1 - offset;
    let slot = g.replicas.iter_mut().find(|s| s.r.id == r.id).ok_or("replica gone")?;
    slot.sent = Some(offset - 1);
    r.state.store(ONLINE, Ordering::Relaxed);
    r.ack_time.store(unix_ms() / 1000, Ordering::Relaxed);
    r.streaming.store(true, Ordering::Relaxed);
    Ok(n)
}

/// Sends `+FULLRESYNC` and a snapshot's payload; the replica's place in
/// the stream is the snapshot's instant.
fn full_sync(
    sh: &Shared,
    m: &Master,
    r: &Replica,
    hs: &Handshake,
    req: &SyncRequest,
    sock: &mut TcpStream,
) -> Result<(), String> {
    let snaps = sh.host.snapshots.clone().ok_or("no persistence")?;
    if let Some(functions) = hs.rdb_filter_only {
        return filtered_sync(m, r, req, functions, &snaps, sock);
    }
    if conf_yes(sh, "repl-diskless-sync") && hs.capa_eof {
        let me = m.inner.lock().replicas.iter().find(|s| s.r.id == r.id).map(|s| s.r.clone());
        let me = me.ok_or("replica gone")?;
        return diskless::sync(sh, m, &me, matches!(req, SyncRequest::Psync { .. }), &snaps);
    }
    log::notice("Starting BGSAVE for SYNC with target: disk");
    // Our turn among the replicas' disk-based snapshots; a replica that
    // goes meanwhile gives up its place.
    let _turn = loop {
        let turn = m.disk_turn.try_lock_for(Duration::from_millis(20));
        if r.handle.killed.load(Ordering::Acquire) {
            return Err("the replica went before its snapshot began".into());
        }
        if let Some(g) = turn {
            break g;
        }
    };
    let place = Arc::new(AtomicI64::new(-1));
    let at_instant = || {
        let mut g = m.inner.lock();
        let off = g.offset;
        // The replica's database after loading is 0: the stream selects
        // again before its next command (Redis's slaveseldb = -1).
        g.writer = StreamWriter::default();
        if let Some(s) = g.replicas.iter_mut().find(|s| s.r.id == r.id) {
            s.sent = Some(off);
        }
        place.store(off, Ordering::Relaxed);
    };
    let fullresync = |off: i64| -> Vec<u8> {
        match req {
            SyncRequest::Sync => Vec::new(),
            SyncRequest::Psync { .. } => {
                format!("+FULLRESYNC {} {off}\r\n", m.inner.lock().replid).into_bytes()
            }
        }
    };
    // One background snapshot, where Redis forks (INFO's total_forks).
    sh.persist.background_jobs.fetch_add(1, Ordering::Relaxed);
    let snapshotting = ReplSnapshot::start(sh);
    // As Redis, a disk-based sync is a background save to `dbfilename`
    // (it counts as a save: LASTSAVE, the change count); the payload is
    // read back through the handle that wrote it, so a save renamed over
    // the file meanwhile cannot change what this replica gets.
    let (tmp, dbfile) = {
        let c = sh.config.read();
        (c.path(format!("temp-repl-{}-{}.rdb", std::process::id(), r.id)), c.path(&c.dbfilename))
    };
    let dirty = AtomicU64::new(0);
    let mut at_instant_disk = || {
        dirty.store(sh.stats.dirty.load(Ordering::Relaxed), Ordering::Relaxed);
        *m.disk_sync.lock() = Some((r.id, crate::persistence::snapshot_seq(sh)));
        at_instant();
        // The replica may have gone since it took its turn.
        m.end_useless_disk_sync();
    };
    // Redis names its child here; the snapshot is made by this process.
    log::notice(&format!("Background saving started by pid {}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| e.to_string())?;
        let made = snaps.snapshot_to(&mut f, &mut at_instant_disk);
        *m.disk_sync.lock() = None;
        made?;
        f.flush().map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())?;
        drop(snapshotting);
        std::fs::rename(&tmp, &dbfile).map_err(|e| e.to_string())?;
        sh.persist.saved(dirty.load(Ordering::Relaxed), unix_ms() / 1000);
        if conf_yes(sh, "rdb-del-sync-files") {
            m.rdb_by_replication.store(true, Ordering::Relaxed);
        }
        log::notice("Background saving terminated with success");
        let len = f.metadata().map_err(|e| e.to_string())?.len();
        let mut head = fullresync(place.load(Ordering::Relaxed));
        head.extend_from_slice(format!("${len}\r\n").as_bytes());
        r.state.store(SEND_BULK, Ordering::Relaxed);
        sock.write_all(&head).map_err(|e| e.to_string())?;
        f.seek(std::io::SeekFrom::Start(0)).map_err(|e| e.to_string())?;
        std::io::copy(&mut f, sock).map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    })();
    let _ = std::fs::remove_file(&tmp);
    written?;
    r.state.store(ONLINE, Ordering::Relaxed);
    r.ack_time.store(unix_ms() / 1000, Ordering::Relaxed);
    r.streaming.store(true, Ordering::Relaxed);
    log::notice(&format!("Synchronization with replica {} succeeded", r.name));
    Ok(())
}

/// A replica that asked for a filtered payload (`REPLCONF
/// rdb-filter-only`, redis-cli's `--functions-rdb` and `--replica`): an
/// RDB without keys, over the socket (SYNC required `capa eof`), then the
/// stream from the offset it was made at. No key is in it, so no
/// snapshot of the keyspace is needed.
fn filtered_sync(
    m: &Master,
    r: &Replica,
    req: &SyncRequest,
    functions: bool,
    snaps: &Arc<dyn engine::subsystems::snapshot::Snapshots>,
    sock: &mut TcpStream,
) -> Result<(), String> {
    log::notice("Starting BGSAVE for SYNC with target: replicas sockets");
    let (replid, off) = {
        let mut g = m.inner.lock();
        let g = &mut *g;
        g.writer = StreamWriter::default();
        let off = g.offset;
        if let Some(s) = g.replicas.iter_mut().find(|s| s.r.id == r.id) {
            s.sent = Some(off);
        }
        (g.replid.clone(), off)
    };
    let payload = snaps.filtered_rdb(functions)?;
    let mark = random_hex();
    let mut head = Vec::new();
    if matches!(req, SyncRequest::Psync { .. }) {
        head.extend_from_slice(format!("+FULLRESYNC {replid} {off}\r\n").as_bytes());
    }
    head.extend_from_slice(format!("$EOF:{mark}\r\n").as_bytes());
    r.state.store(SEND_BULK, Ordering::Relaxed);
    for part in [&head[..], &payload, mark.as_bytes()] {
        sock.write_all(part).map_err(|e| e.to_string())?;
    }
    let started = r.online();
    log::notice(&format!(
        "Streamed RDB transfer with replica {} succeeded (socket). Waiting for REPLCONF ACK from \
         replica to enable streaming",
        r.name
    ));
    if started {
        log::notice(&format!("Synchronization with replica {} succeeded", r.name));
        m.grown.notify_all();
    }
    Ok(())
}

/// A replica's snapshot in progress, counted for INFO's
/// `rdb_bgsave_in_progress` until it is dropped (also on an error path).
struct ReplSnapshot<'a>(&'a Shared);

impl<'a> ReplSnapshot<'a> {
    fn start(sh: &'a Shared) -> Self {
        sh.persist.repl_snapshots.fetch_add(1, Ordering::Relaxed);
        ReplSnapshot(sh)
    }
}

impl Drop for ReplSnapshot<'_> {
    fn drop(&mut self) {
        self.0.persist.repl_snapshots.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Sends the stream from the replica's place on, as it grows.
fn stream(sh: &Shared, m: &Master, r: &Replica, mut sock: TcpStream) -> String {
    // Redis's `repl-disable-tcp-nodelay`: fewer, bigger packets to the
    // replica once it is online, at the cost of latency.
    let _ = sock.set_nodelay(!conf_yes(sh, "repl-disable-tcp-nodelay"));
    // The chunk is replication buffer memory as long as it exists (a
    // killed replica's is freed when this thread ends, after the kill);
    // the guard is dropped after it.
    struct Sending<'a>(&'a AtomicU64, u64);
    impl Drop for Sending<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(self.1, Ordering::Relaxed);
        }
    }
    let size = crate::alloc::allocation_size(CHUNK) as u64;
    m.sending.fetch_add(size, Ordering::Relaxed);
    let _sending = Sending(&m.sending, size);
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        chunk.clear();
        let sent = {
            let mut g = m.inner.lock();
            loop {
                if r.handle.killed.load(Ordering::Acquire) || sh.shutdown.load(Ordering::Relaxed) {
                    return String::new();
                }
                let Some(slot) = g.replicas.iter().find(|s| s.r.id == r.id) else {
                    return String::new();
                };
                let Some(sent) = slot.sent else { return " (no place in the stream)".into() };
                if r.streaming.load(Ordering::Acquire) && sent < g.offset {
                    break;
                }
                // Woken for what no connection pushes; the timeout bounds
                // how late anything a push missed goes out.
                m.grown.wait_for(&mut g, SENDER_IDLE);
            }
            let sent = g.replicas.iter().find(|s| s.r.id == r.id).and_then(|s| s.sent);
            let (Some(sent), Some(buf)) = (sent, g.buf.as_ref()) else {
                return " (backlog gone)".into();
            };
            let first = g.offset - buf.len() as i64;
            if sent < first {
                return " (fell behind the backlog)".into();
            }
            let from = (sent - first) as usize;
            let to = buf.len().min(from + CHUNK);
            let (a, b) = buf.as_slices();
            if from < a.len() {
                chunk.extend_from_slice(&a[from..to.min(a.len())]);
            }
            if to > a.len() {
                chunk.extend_from_slice(&b[from.saturating_sub(a.len())..to - a.len()]);
            }
            if let Some(s) = g.replicas.iter_mut().find(|s| s.r.id == r.id) {
                s.busy = Some(std::time::Instant::now());
            }
            sent
        };
        let ok = sock.write_all(&chunk).is_ok();
        let mut g = m.inner.lock();
        if let Some(s) = g.replicas.iter_mut().find(|s| s.r.id == r.id) {
            s.busy = None;
            if ok {
                s.sent = Some(sent + chunk.len() as i64);
            }
        }
        // A connection's push may be waiting for this write to end.
        let wake = g.push_waiters > 0;
        drop(g);
        if wake {
            m.grown.notify_all();
        }
        if !ok {
            return String::new();
        }
        r.handle.net_out.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
}

/// Reads what the replica sends: `REPLCONF ACK <offset>` (and `FACK`),
/// the only thing it says once synchronised; applies `repl-timeout`.
fn read_acks(sh: &Shared, m: &Master, r: &Replica, mut sock: TcpStream, mut buf: Vec<u8>) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(500)));
    let limits = Limits { max_bulk_len: 1 << 20, unauthenticated: false };
    let mut args = ArgBuf::default();
    let mut chunk = [0u8; 4096];
    loop {
        // Every complete request in the buffer.
        let mut pos = 0;
        loop {
            match resp::parse(&buf[pos..], &limits, &mut args) {
                Parsed::Command { consumed } => {
                    let input = &buf[pos..];
                    let n = args.len();
                    let arg = |i: usize| args.get(input, i);
                    if n >= 3
                        && arg(0).eq_ignore_ascii_case(b"REPLCONF")
                        && arg(1).eq_ignore_ascii_case(b"ACK")
                    {
                        if let Some(off) =
                            std::str::from_utf8(arg(2)).ok().and_then(|s| s.parse::<i64>().ok())
                        {
                            r.ack_offset.fetch_max(off, Ordering::Relaxed);
                            // Redis 7.2's `FACK <aofoff>`: what its AOF fsynced.
                            if n >= 5 && arg(3).eq_ignore_ascii_case(b"FACK") {
                                if let Some(f) = std::str::from_utf8(arg(4))
                                    .ok()
                                    .and_then(|s| s.parse::<i64>().ok())
                                {
                                    r.fack_offset.fetch_max(f, Ordering::Relaxed);
                                }
                            }
                            r.ack_time.store(unix_ms() / 1000, Ordering::Relaxed);
                            if r.acked() {
                                log::notice(&format!(
                                    "Synchronization with replica {} succeeded",
                                    r.name
                                ));
                                m.grown.notify_all();
                            }
                            m.ack_progress(&m.inner.lock());
                            m.serve_waits();
                            m.acks.notify_waiters();
                        }
                    } else if n > 0 && !arg(0).eq_ignore_ascii_case(b"REPLCONF") {
                        let argv: Vec<&[u8]> = (0..n).map(arg).collect();
                        refuse_command(sh, r, &argv);
                        return;
                    }
                    pos += consumed;
                }
                Parsed::Empty { consumed } => pos += consumed,
                Parsed::Incomplete { .. } => break,
                Parsed::Error(_) => {
                    r.drop_link();
                    return;
                }
            }
        }
        buf.drain(..pos);
        if r.handle.killed.load(Ordering::Acquire) {
            return;
        }
        let timeout = conf_num(sh, "repl-timeout").max(1);
        if r.streaming.load(Ordering::Relaxed)
            && unix_ms() / 1000 - r.ack_time.load(Ordering::Relaxed) > timeout
        {
            log::warning(&format!("Disconnecting timedout replica (streaming sync): {}", r.name));
            r.drop_link();
            return;
        }
        match sock.read(&mut chunk) {
            Ok(0) => {
                r.drop_link();
                return;
            }
            Ok(n) => {
                r.handle.net_in.fetch_add(n as u64, Ordering::Relaxed);
                r.handle.last_interaction_ms.store(unix_ms(), Ordering::Relaxed);
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if crate::replication::follow::is_timeout(&e) => {}
            Err(_) => {
                r.drop_link();
                return;
            }
        }
    }
}

/// A command other than REPLCONF on a replica's link. Redis runs it and,
/// since the link carries no replies, the reply it makes gets the replica
/// disconnected, an error being logged first as every error a master
/// sends its replica is. Sluice does not run it (a rogue replica's admin
/// command has no effect here), but answers the same way.
fn refuse_command(sh: &Shared, r: &Replica, argv: &[&[u8]]) {
    use engine::core::dispatch;
    use engine::core::spec::Flags;
    let keyspace = Flags::WRITE.0 | Flags::READONLY.0 | Flags::MAY_REPLICATE.0;
    let (name, error) = match dispatch::lookup_full(sh, argv) {
        Ok((top, spec)) => (
            dispatch::full_name(top, spec),
            (spec.flags.0 & keyspace != 0)
                .then(|| "ERR Replica can't interact with the keyspace".to_string()),
        ),
        Err(e) => ("<unknown>".to_string(), Some(String::from_utf8_lossy(&e.text()).into_owned())),
    };
    if let Some(error) = error {
        log::warning(&format!(
            "== CRITICAL == This master is sending an error to its replica: '{error}' after \
             processing the command '{name}'"
        ));
    }
    log::warning(&format!(
        "Replica generated a reply to command '{name}', disconnecting it: replica {}",
        r.name
    ));
    r.drop_link();
}

impl Master {
    /// `rdb-del-sync-files`: without persistence (no save points, no AOF),
    /// the file a disk-based full sync wrote goes once no replica waits
    /// for it or is reading it (Redis's removeRDBUsedToSyncReplicas).
    fn remove_rdb_used_to_sync(&self, sh: &Shared) {
        if !conf_yes(sh, "rdb-del-sync-files") {
            self.rdb_by_replication.store(false, Ordering::Relaxed);
            return;
        }
        let (no_persistence, dbfile) = {
            let cfg = sh.config.read();
            (cfg.save.is_empty() && !cfg.appendonly, cfg.path(&cfg.dbfilename))
        };
        if !no_persistence || !self.rdb_by_replication.load(Ordering::Relaxed) {
            return;
        }
        let syncing = self
            .inner
            .lock()
            .replicas
            .iter()
            .any(|s| matches!(s.r.state.load(Ordering::Relaxed), WAIT_BGSAVE | SEND_BULK));
        if syncing || std::fs::symlink_metadata(&dbfile).is_err() {
            return;
        }
        self.rdb_by_replication.store(false, Ordering::Relaxed);
        log::notice("Removing the RDB file used to feed replicas in a persistence-less instance");
        let _ = std::fs::remove_file(&dbfile);
    }
}

/// Once a second, as Redis's replicationCron: PINGs into the stream, the
/// replicas' soft output limit, the backlog's time to live.
fn cron(m: Weak<Master>) {
    let mut ticks: u64 = 0;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        ticks += 1;
        let Some(m) = m.upgrade() else { return };
        let Some(sh) = m.shared.upgrade() else { return };
        if sh.shutdown.load(Ordering::Relaxed) {
            return;
        }
        let period = conf_num(&sh, "repl-ping-replica-period").max(1) as u64;
        let has_replicas = !m.inner.lock().replicas.is_empty();
        // No PING while a failover waits for a replica to match our
        // offset (Redis skips it while a manual failover pauses clients).
        let failing_over = m.failover.lock().is_some();
        if has_replicas && ticks.is_multiple_of(period) && !failing_over {
            m.feed_raw(PING);
        }
        let soft = sh.config.read().obuf_replica;
        let now_ms = unix_ms();
        {
            let mut g = m.inner.lock();
            let offset = g.offset;
            for s in g.replicas.iter_mut() {
                let lag = s.sent.map_or(0, |sent| (offset - sent) as u64);
                if soft.soft > 0 && lag > soft.soft {
                    let since = *s.soft_since.get_or_insert(now_ms);
                    if now_ms / 1000 - since / 1000 > soft.soft_seconds as i64 {
                        log::warning(&format!(
                            "Client id={} addr={} scheduled to be closed ASAP for overcoming of \
                             output buffer limits.",
                            s.r.id, s.r.name
                        ));
                        sh.stats.client_obuf_limit_disconnections.fetch_add(1, Ordering::Relaxed);
                        s.r.kill();
                    }
                } else {
                    s.soft_since = None;
                }
            }
        }
        let ttl = conf_num(&sh, "repl-backlog-ttl");
        let (idle, has_backlog) = {
            let g = m.inner.lock();
            (now_ms / 1000 - g.no_replicas_since, g.buf.is_some())
        };
        if !has_replicas && has_backlog && ttl > 0 && idle > ttl {
            m.free_backlog(&sh, ttl);
        }
        m.remove_rdb_used_to_sync(&sh);
        m.serve_waits();
    }
}
