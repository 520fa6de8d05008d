//! The replication seam and the engine's replication state: what the
//! server's replication ([`Replication`], the master side) and replica
//! side ([`Follow`]) do for the engine, what a client's REPLCONF/SYNC
//! handshake recorded ([`Handshake`]), and the views INFO, ROLE and the
//! dispatcher's `min-replicas-to-write` and stale-replica checks read.
//! The commands (SYNC, PSYNC, REPLCONF, WAIT, ROLE, REPLICAOF) are the
//! `commands::repl` family; the stream itself is the server's
//! (`crates/server/src/replication/`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::core::blocking::Waiter;
use crate::core::shared::Shared;

/// What the server's replication does for the commands.
pub trait Replication: Send + Sync {
    /// The state INFO replication and ROLE report.
    fn view(&self) -> View;
    /// `master_repl_offset` now.
    fn offset(&self) -> i64;
    /// How many online replicas acknowledged `offset` or more.
    fn acked(&self, offset: i64) -> usize;
    /// Parks a WAIT: `w` is served once `numreplicas` replicas acknowledged
    /// `offset`; the replicas are asked for an acknowledgement now
    /// (`REPLCONF GETACK *`).
    fn wait(&self, w: Arc<Waiter>, offset: i64, numreplicas: usize);
    /// How many online replicas reported (`REPLCONF ACK … FACK <off>`)
    /// their AOF fsynced `offset` or more.
    fn aof_acked(&self, offset: i64) -> usize;
    /// Parks a WAITAOF: `w` is served once `numreplicas` replicas fsynced
    /// `offset` and, with `local`, the local AOF fsynced `seq` (the
    /// client's last write); the replicas are asked for an
    /// acknowledgement now.
    fn wait_aof(&self, w: Arc<Waiter>, local: bool, seq: u64, offset: i64, numreplicas: usize);
    /// Asks every replica for an acknowledgement now (a shutdown waiting
    /// for them, as Redis's `sendGetackToReplicas`).
    fn request_ack(&self);
    /// `sync_full`, `sync_partial_ok`, `sync_partial_err` (INFO stats).
    fn sync_stats(&self) -> (u64, u64, u64);
    /// CONFIG RESETSTAT zeroes those three.
    fn reset_sync_stats(&self);
    /// Online replicas that acknowledged within `min-replicas-max-lag`.
    fn good_replicas(&self) -> usize;
    /// Starts a coordinated failover (FAILOVER), after Redis's checks in
    /// its order (`replica`: this server follows a master); the error's
    /// text when it cannot.
    fn failover(&self, req: FailoverRequest, replica: bool) -> Result<(), String>;
    /// FAILOVER ABORT; `false` when no failover is in progress.
    fn abort_failover(&self) -> bool;
    /// DEBUG REPLICATE: `argv` enters the stream as is, with no SELECT
    /// and nothing executed here (Redis's test hook for what a replica
    /// does with a command it cannot run).
    fn feed_command(&self, argv: &[&[u8]]);
    /// Bytes the shared replication buffer (backlog and what replicas
    /// have not been sent) holds allocated.
    fn buffer_memory(&self) -> u64 {
        0
    }
    /// Whether a replica is connected (and not being dropped).
    fn has_replicas(&self) -> bool {
        false
    }
}

/// FAILOVER's arguments.
#[derive(Clone, Debug, Default)]
pub struct FailoverRequest {
    /// `TO host port`: that replica, else the first one caught up.
    pub target: Option<(String, i64)>,
    /// `TIMEOUT ms` (0: none).
    pub timeout_ms: i64,
    /// `FORCE`: fail over at the timeout even if the target lags.
    pub force: bool,
}

/// The shared replication buffer's memory, split as Redis 7.0 splits it
/// (`getMemoryOverheadData`, `freeMemoryGetNotCountedMemory`): up to
/// `repl-backlog-size` is the backlog's; what lies beyond is the
/// replicas' (while one is connected), and is not counted for eviction:
/// a slow replica's buffer must not evict keys, whose deletions it would
/// then have to be sent too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferMemory {
    /// `mem_total_replication_buffers`.
    pub total: u64,
    /// `mem_replication_backlog`.
    pub backlog: u64,
    /// The replicas' part (`mem_clients_slaves`).
    pub replicas: u64,
    /// What eviction leaves out (`mem_not_counted_for_evict`, with the
    /// AOF buffer).
    pub not_counted: u64,
}

impl BufferMemory {
    /// The split of `total` allocated bytes with a backlog of `size`.
    pub fn split(total: u64, size: u64, replicas: bool) -> Self {
        let excess = total.saturating_sub(size);
        let (backlog, replicas) = if replicas && excess > 0 { (size, excess) } else { (total, 0) };
        BufferMemory { total, backlog, replicas, not_counted: excess }
    }
}

/// The replication buffer's memory now.
pub fn buffer_memory(sh: &Shared) -> BufferMemory {
    let Some(r) = replication(sh) else { return BufferMemory::default() };
    let total = r.buffer_memory();
    if total == 0 {
        return BufferMemory::default();
    }
    let size = sh.config.read().repl_backlog_size.max(0) as u64;
    BufferMemory::split(total, size, r.has_replicas())
}

/// The replicas' part of the replication buffer, which eviction leaves
/// out (without a replica too: it is freed as the buffer is trimmed).
pub fn not_counted(sh: &Shared) -> u64 {
    let total = replication(sh).map_or(0, |r| r.buffer_memory());
    if total == 0 {
        return 0;
    }
    total.saturating_sub(sh.config.read().repl_backlog_size.max(0) as u64)
}

/// What the server's replica side does for the commands.
pub trait Follow: Send + Sync {
    /// Starts following `host:port` (dropping any current master). `false`
    /// when that master is already the one followed.
    fn follow(&self, host: &str, port: u16) -> bool;
    /// Stops following and promotes this server to a master, keeping its
    /// data (`REPLICAOF NO ONE`). `false` when it was a master already.
    fn promote(&self) -> bool;
    /// Lets the link take in what its master had sent before now (at
    /// most 100 ms): `PSYNC … FAILOVER` runs after it, as Redis serves
    /// the old master's last stream bytes before that request when they
    /// arrived first.
    fn settle(&self) {}
    /// The replica's state while it follows a master.
    fn view(&self) -> Option<FollowView>;
    /// The master's address (`ip:port`) while the link is up: the
    /// master client's `addr`, which CLIENT KILL can name.
    fn link_addr(&self) -> Option<String>;
    /// Cuts the link to the master, which reconnects as after any drop
    /// (`CLIENT KILL TYPE master`). `false` when no link is up.
    fn kill_link(&self) -> bool;
}

/// A replica's link to its master, as INFO replication and ROLE show it.
#[derive(Clone, Debug)]
pub struct FollowView {
    pub host: String,
    pub port: u16,
    /// ROLE's state: `connect`, `connecting`, `handshake`, `sync` or
    /// `connected`.
    pub state: &'static str,
    /// Seconds since the master last sent something, while linked.
    pub last_io: Option<i64>,
    /// While an RDB payload arrives: (total bytes, or -1 when not known,
    /// bytes read, seconds since the last read).
    pub transfer: Option<(i64, i64, i64)>,
    /// Unix seconds since when the link is down (0: never was up).
    pub down_since: i64,
    /// Stream bytes read and applied (the master's offsets), when known.
    pub read_offset: i64,
    pub applied_offset: i64,
}

/// One replica as INFO (`slaveN:`) and ROLE show it.
#[derive(Clone, Debug)]
pub struct ReplicaView {
    pub ip: String,
    pub port: u16,
    /// `wait_bgsave`, `send_bulk` or `online`.
    pub state: &'static str,
    /// The offset it last acknowledged.
    pub ack_offset: i64,
    /// Seconds since its last acknowledgement.
    pub lag: i64,
}

/// The replication state as INFO replication reports it.
#[derive(Clone, Debug)]
pub struct View {
    pub replid: String,
    pub replid2: String,
    pub offset: i64,
    pub second_offset: i64,
    /// The backlog while one exists: (first byte's offset, bytes held).
    pub backlog: Option<(i64, i64)>,
    pub replicas: Vec<ReplicaView>,
    /// Replicas whose lag is within `min-replicas-max-lag` (reported when
    /// `min-replicas-to-write` is set).
    pub good_replicas: usize,
    /// `master_failover_state`: `no-failover`, `waiting-for-sync` or
    /// `failover-in-progress`.
    pub failover_state: &'static str,
}

/// What a client said with REPLCONF before it asked to SYNC, and the
/// request that turns its connection into a replica.
#[derive(Clone, Debug, Default)]
pub struct Handshake {
    /// `REPLCONF listening-port`.
    pub listening_port: u16,
    /// `REPLCONF ip-address` (else the peer's address is shown).
    pub ip: Option<String>,
    /// `REPLCONF capa eof`: can read a diskless (EOF-marked) payload.
    pub capa_eof: bool,
    /// `REPLCONF capa psync2`: understands `+CONTINUE <replid>`.
    pub capa_psync2: bool,
    /// `REPLCONF rdb-filter-only`: the payload holds no keys, and the
    /// function libraries only with the `functions` filter (`true`).
    pub rdb_filter_only: Option<bool>,
    /// Set by SYNC/PSYNC: the connection becomes a replica.
    pub sync: Option<SyncRequest>,
}

/// How the replica asked to synchronise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncRequest {
    /// The old `SYNC`: a full resynchronisation, no `+FULLRESYNC` line.
    Sync,
    /// `PSYNC replid offset` (`?` and `-1` ask for a full one).
    Psync { replid: Vec<u8>, offset: i64 },
}

pub(crate) fn replication(sh: &Shared) -> Option<Arc<dyn Replication>> {
    sh.host.replication.as_ref().cloned()
}

/// Whether this server follows a master and its link is not up (Redis's
/// `repl_state != REPL_STATE_CONNECTED` with a master set).
pub fn master_down(sh: &Shared) -> bool {
    follow_view(sh).is_some_and(|f| f.state != "connected")
}

pub(crate) fn follow_view(sh: &Shared) -> Option<FollowView> {
    sh.host.follow.as_ref().and_then(|f| f.view())
}

/// Holds writes while a FAILOVER waits for its target and hands over
/// (Redis's `PAUSE_DURING_FAILOVER`), beside any CLIENT PAUSE.
pub fn hold_writes_for_failover(sh: &Shared, on: bool) {
    sh.change_pause(|p| p.failover = on);
}

/// The replication state, or a master's with no replica ever attached
/// when the process installed no replication (engine tests).
pub fn view(sh: &Shared) -> View {
    match replication(sh) {
        Some(r) => r.view(),
        None => View {
            replid: sh.run_id.chars().rev().collect(),
            replid2: "0".repeat(40),
            offset: 0,
            second_offset: -1,
            backlog: None,
            replicas: Vec::new(),
            good_replicas: 0,
            failover_state: "no-failover",
        },
    }
}

/// DEBUG REPLICATE (nothing without replication).
pub fn feed_command(sh: &Shared, argv: &[&[u8]]) {
    if let Some(r) = replication(sh) {
        r.feed_command(argv);
    }
}

/// Replicas that count for `min-replicas-to-write` (none without
/// replication).
pub fn good_replicas(sh: &Shared) -> usize {
    replication(sh).map_or(0, |r| r.good_replicas())
}

/// Online replicas (Disque's "reachable nodes" for ADDJOB's `REPLICATE`;
/// none without replication).
pub fn online_replicas(sh: &Shared) -> usize {
    replication(sh).map_or(0, |r| r.acked(i64::MIN))
}

/// `sync_full`, `sync_partial_ok`, `sync_partial_err`.
pub fn sync_stats(sh: &Shared) -> (u64, u64, u64) {
    replication(sh).map_or((0, 0, 0), |r| r.sync_stats())
}

/// `min-replicas-to-write` and `min-replicas-max-lag`.
pub fn min_replicas(cfg: &crate::subsystems::config::Config) -> (i64, i64) {
    let num = |n: &str| {
        cfg.get_by_name(n)
            .and_then(|v| std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()))
            .unwrap_or(0)
    };
    (num("min-replicas-to-write"), num("min-replicas-max-lag"))
}

/// Whether the client is a replica (CLIENT LIST flag `S`, type `replica`).
pub fn is_replica(h: &crate::core::session::ClientHandle) -> bool {
    h.replica.load(Ordering::Relaxed)
}
