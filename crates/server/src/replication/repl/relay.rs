//! The replica side of the master's state: while this server follows a
//! master, its backlog relays that master's stream byte for byte (Redis's
//! proxying of the master's stream to sub-replicas), its replication id
//! and offset are the master's, and a promotion keeps that history as the
//! secondary id (PSYNC2). Also the history an RDB file records and a
//! restart takes back.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use engine::core::effects::StreamWriter;
use engine::core::shared::unix_ms;
use engine::subsystems::log;
use engine::Shared;

use super::{random_hex, Master};

thread_local! {
    /// On a replica's link thread: bytes of the master's stream applied
    /// (or being applied) and not yet in the backlog.
    static STAGED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The link thread stages a stream command's bytes before applying it;
/// they enter the backlog when its effects do (or, for a command that
/// changes nothing, at [`Master::proxy_staged`]).
pub fn stage(bytes: &[u8]) {
    STAGED.with(|s| s.borrow_mut().extend_from_slice(bytes));
}

/// Forgets what was staged (a transaction cut by a disconnect: the
/// master sends it again).
pub fn unstage() {
    STAGED.with(|s| s.borrow_mut().clear());
}

/// The replication history an RDB file recorded (`repl-stream-db`,
/// `repl-id`, `repl-offset`), when it has all three.
pub fn saved_info(aux: &[(Vec<u8>, Vec<u8>)]) -> Option<(usize, String, i64)> {
    let get = |name: &[u8]| {
        let v = aux.iter().find(|(k, _)| k == name)?;
        std::str::from_utf8(&v.1).ok().map(str::to_string)
    };
    let id = get(b"repl-id").filter(|id| id.len() == 40)?;
    let offset = get(b"repl-offset")?.parse::<i64>().ok().filter(|&o| o >= 0)?;
    let db = get(b"repl-stream-db")?.parse::<usize>().ok()?;
    Some((db, id, offset))
}

impl Master {
    /// A master restarted from an RDB file that recorded its history
    /// (Redis 7's loadDataFromDisk): that history becomes the secondary
    /// id, valid up to the recorded offset, and a backlog starts there,
    /// so its replicas partially resync after the restart.
    pub fn restore_as_master(self: &Arc<Self>, sh: &Shared, id: &str, offset: i64) {
        {
            let mut g = self.inner.lock();
            g.replid2 = id.to_string();
            g.second_offset = offset + 1;
            g.offset = offset;
            g.no_replicas_since = unix_ms() / 1000;
        }
        self.ensure_backlog(sh, false);
    }

    /// The keys a restarted master found expired in its file: their
    /// deletion enters the stream after the restored offset, as Redis's
    /// load feeds it (`DEL`, `UNLINK` with `lazyfree-lazy-expire`), so a
    /// replica that partially resyncs deletes them too, and a backlog
    /// they overflow sends it to a full resync.
    pub fn feed_expired_on_load(&self, sh: &Shared, keys: &[(usize, Vec<u8>)]) {
        let verb: &[u8] =
            if super::conf_yes(sh, "lazyfree-lazy-expire") { b"UNLINK" } else { b"DEL" };
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let mut bytes = Vec::new();
        for (db, key) in keys {
            bytes.clear();
            inner.writer.write_command(*db, &[verb, key], &mut bytes);
            self.append(inner, &bytes);
        }
    }

    /// A replica restarted from an RDB file that recorded its master's
    /// id and offset: its cached master, for a partial resync.
    pub fn restore_as_replica(&self, id: &str, offset: i64) {
        let mut g = self.inner.lock();
        g.replid = id.to_string();
        g.offset = offset;
    }
}

/// What the replica side (`crate::follow`) changes of the master's state:
/// while following, `master_replid` and `master_repl_offset` are the
/// master's, as in Redis, and the backlog holds its stream.
impl Master {
    /// This server turns into a replica (REPLICAOF host port): from now
    /// on the backlog relays the master's stream, and the backlog is kept
    /// (a cached master of its own position: the new master may accept a
    /// partial resynchronisation). Its replicas stay connected, as in
    /// Redis 7.0's replicationSetMaster: what was propagated before still
    /// reaches them, and they go only when the history changes (a full
    /// sync's payload is about to load, or a partial one gives a new
    /// replication id).
    pub fn become_replica(&self) {
        let mut g = self.inner.lock();
        self.proxy.store(true, Ordering::Release);
        g.stream_db = 0;
    }

    /// Disconnects every replica (Redis's disconnectSlaves): they come
    /// back and learn a new replication id, with a partial resync when
    /// they can.
    pub fn disconnect_replicas(&self) {
        for s in &self.inner.lock().replicas {
            s.r.kill();
        }
    }

    /// A replica starts a full resynchronisation with its master: its
    /// sub-replicas go and its backlog with it (its history is about to
    /// be replaced: Redis's replicationAttachToNewMaster).
    pub fn attach_to_new_master(&self, sh: &Shared) {
        let mut g = self.inner.lock();
        for s in &g.replicas {
            s.r.kill();
        }
        g.buf = None;
        let feed = g.feed.take();
        drop(g);
        if let Some(f) = feed {
            sh.remove_consumer(&f);
        }
        unstage();
    }

    /// After a replica's sync (full or partial): the backlog relays the
    /// master's stream from `master_repl_offset` on.
    pub fn start_relay(self: &Arc<Self>, sh: &Shared) {
        self.proxy.store(true, Ordering::Release);
        self.ensure_backlog(sh, false);
    }

    /// The link thread's staged bytes enter the backlog (a command that
    /// changed nothing, after it ran; a write's, with its stripes held,
    /// from the consumer), and `db` is the database the stream has
    /// selected after them.
    pub fn proxy_staged(&self, db: usize) {
        self.append_staged(Some(db));
    }

    /// Appends the staged bytes; with `db`, the stream's database after
    /// them is set under the same lock (a snapshot's instant reads both).
    pub(super) fn append_staged(&self, db: Option<usize>) {
        STAGED.with(|s| {
            let mut s = s.borrow_mut();
            if s.is_empty() && db.is_none() {
                return;
            }
            let mut g = self.inner.lock();
            if let Some(db) = db {
                g.stream_db = db;
            }
            if s.is_empty() {
                return;
            }
            if g.buf.is_some() {
                self.append(&mut g, &s);
            } else {
                // No backlog (cannot be while the link is up): the offset
                // still follows the master's.
                g.offset += s.len() as i64;
            }
            s.clear();
        });
    }

    /// A replica is promoted (REPLICAOF NO ONE): it feeds its own effects
    /// again, its stream selects before its first command (Redis's
    /// `slaveseldb = -1`), and its replicas are disconnected to learn the
    /// new replication id (they partially resync with the old one as
    /// `master_replid2`).
    pub fn promote(&self) {
        unstage();
        let mut g = self.inner.lock();
        g.writer = StreamWriter::default();
        g.no_replicas_since = unix_ms() / 1000;
        self.proxy.store(false, Ordering::Release);
        for s in &g.replicas {
            s.r.kill();
        }
    }

    /// What an RDB saved now records of the replication (Redis's
    /// rdbPopulateSaveInfo: `repl-stream-db`, `repl-id`, `repl-offset`):
    /// a master's while it has a backlog, a replica's always. Called at a
    /// snapshot's instant.
    pub fn save_info(&self) -> Option<(usize, String, i64)> {
        let g = self.inner.lock();
        if self.proxy.load(Ordering::Acquire) {
            return Some((g.stream_db, g.replid.clone(), g.offset));
        }
        g.buf.as_ref()?;
        Some((g.writer.selected().unwrap_or(0), g.replid.clone(), g.offset))
    }

    /// (`master_replid`, `master_repl_offset`).
    pub fn position(&self) -> (String, i64) {
        let g = self.inner.lock();
        (g.replid.clone(), g.offset)
    }

    /// After a full resynchronisation: the master's id and offset, no
    /// secondary id.
    pub fn set_position(&self, replid: &str, offset: i64) {
        let mut g = self.inner.lock();
        g.replid = replid.to_string();
        g.replid2 = "0".repeat(40);
        g.second_offset = -1;
        g.offset = offset;
    }

    /// The offset applied so far, while following.
    pub fn set_offset(&self, offset: i64) {
        self.inner.lock().offset = offset;
    }

    /// Takes `new` as the replication id, keeping the current one as the
    /// secondary, valid up to the next byte (Redis's shiftReplicationId):
    /// a promotion (`new` is `None`: a random id) or a `+CONTINUE` with a
    /// new id.
    pub fn shift_id(&self, new: Option<&str>) {
        let mut g = self.inner.lock();
        let new = new.map_or_else(random_hex, str::to_string);
        g.replid2 = std::mem::replace(&mut g.replid, new);
        g.second_offset = g.offset + 1;
        log::notice(&format!(
            "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID \
             is {}",
            g.replid2, g.second_offset, g.replid
        ));
    }
}
