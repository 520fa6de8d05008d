//! The effects record: what a write did, reported once through the
//! context while the command's stripe locks are still held, and handed to
//! the consumers (the AOF, replicas, keyspace notifications, tracking) when
//! its execution unit ends.
//!
//! A handler that changes a key calls [`Ctx::changed`](crate::core::ctx::Ctx)
//! (watchers, blocked-key readiness, the dirty count in Redis's numbers,
//! the keyspace event), and, where Redis propagates something other than
//! the command as it arrived, [`Effects::rewrite`], [`Effects::also`] or
//! [`Effects::prevent`] — Redis's `rewriteClientCommandVector`,
//! `alsoPropagate` and `preventCommandPropagation`. The dispatcher does
//! the rest: after the handler, a command that dirtied anything is
//! propagated (as written, or as rewritten); when the unit ends (a client
//! command, a whole `EXEC`, a served blocked client, one active-expiry
//! deletion) its operations go to the consumers, wrapped in `MULTI`/`EXEC`
//! when there are several. A key that expired lazily during the unit is a
//! `DEL` among them, before the command that met it (as Redis 7.0's
//! `alsoPropagate` of the deletion: `SET` over an expired key goes out as
//! `MULTI`, `DEL`, `SET`, `EXEC`).
//!
//! Nothing is copied unless a consumer asked for it ([`Want`]): with no
//! consumer installed a write costs a counter and a few branches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Keyspace event classes, Redis's `NOTIFY_*` bits (the letters of
/// `notify-keyspace-events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class(pub u16);

impl Class {
    pub const GENERIC: Class = Class(1 << 2); // g
    pub const STRING: Class = Class(1 << 3); // $
    pub const LIST: Class = Class(1 << 4); // l
    pub const SET: Class = Class(1 << 5); // s
    pub const HASH: Class = Class(1 << 6); // h
    pub const ZSET: Class = Class(1 << 7); // z
    pub const EXPIRED: Class = Class(1 << 8); // x
    pub const EVICTED: Class = Class(1 << 9); // e
    pub const STREAM: Class = Class(1 << 10); // t
    pub const KEY_MISS: Class = Class(1 << 11); // m
    pub const LOADED: Class = Class(1 << 12);
    pub const MODULE: Class = Class(1 << 13); // d
    pub const NEW: Class = Class(1 << 14); // n
}

/// What the consumers want recorded; the union over all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Want {
    /// The propagated commands (AOF, replicas).
    pub propagate: bool,
    /// Keyspace events (notifications).
    pub events: bool,
    /// The keys modified (client-side caching).
    pub keys: bool,
}

impl Want {
    pub fn any(self) -> bool {
        self.propagate || self.events || self.keys
    }

    fn union(self, o: Want) -> Want {
        Want {
            propagate: self.propagate || o.propagate,
            events: self.events || o.events,
            keys: self.keys || o.keys,
        }
    }
}

/// One keyspace event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<'a> {
    pub class: Class,
    /// Redis's event name: `set`, `lpush`, `expired`, `del`, …
    pub name: &'static str,
    pub db: usize,
    pub key: &'a [u8],
}

/// One execution unit's effects, as the consumers see them.
pub struct Unit<'a> {
    fx: &'a Effects,
}

impl<'a> Unit<'a> {
    /// The commands to propagate to the AOF, in stream order, each with
    /// the database it applies to (`None` for `EXEC`, which selects
    /// nothing): the unit's operations, wrapped in `MULTI`/`EXEC` when
    /// there are several, without those sent to replicas only.
    pub fn commands(&self) -> impl Iterator<Item = (Option<usize>, Vec<&'a [u8]>)> + 'a {
        self.commands_for(false)
    }

    /// [`commands`](Self::commands) as replicas get them: with the
    /// operations sent to replicas only (PUBLISH).
    pub fn replica_commands(&self) -> impl Iterator<Item = (Option<usize>, Vec<&'a [u8]>)> + 'a {
        self.commands_for(true)
    }

    fn commands_for(
        &self,
        replicas: bool,
    ) -> impl Iterator<Item = (Option<usize>, Vec<&'a [u8]>)> + 'a {
        let fx = self.fx;
        // Wrapped by the count of all operations, as Redis 7.0 decides
        // before it sends each where it goes.
        let wrap = fx.ops.len() > 1 && !fx.unwrapped;
        // MULTI goes out in the first operation's database (Redis 7.0
        // selects it before the MULTI).
        let first_db = fx.ops.first().map(|op| op.db as usize);
        let multi = wrap.then(|| (first_db, vec![&b"MULTI"[..]]));
        let exec = wrap.then(|| (None, vec![&b"EXEC"[..]]));
        let ops =
            fx.ops.iter().filter(move |op| if replicas { !op.aof_only } else { !op.repl_only });
        let ops = ops.map(move |op| {
            let args = (op.first..op.first + op.argc).map(|i| fx.arena.get(i)).collect();
            (Some(op.db as usize), args)
        });
        multi.into_iter().chain(ops).chain(exec)
    }

    /// Whether anything is to be propagated.
    pub fn propagates(&self) -> bool {
        !self.fx.ops.is_empty()
    }

    /// The keyspace events, in the order they happened.
    pub fn events(&self) -> impl Iterator<Item = Event<'a>> + 'a {
        let fx = self.fx;
        fx.events.iter().map(move |e| Event {
            class: e.class,
            name: e.name,
            db: e.db as usize,
            key: fx.arena.get(e.key),
        })
    }

    /// The keys modified, as (database, key), possibly repeated.
    pub fn keys(&self) -> impl Iterator<Item = (usize, &'a [u8])> + 'a {
        let fx = self.fx;
        fx.keys.iter().map(move |&(db, k)| (db as usize, fx.arena.get(k)))
    }

    /// The unit client's tracked reads of keys the unit had already
    /// modified, in order: (key, modifications before the read, whether
    /// the client tracked the key before the read).
    pub fn rereads(&self) -> impl Iterator<Item = (&'a [u8], u32, bool)> + 'a {
        let fx = self.fx;
        fx.rereads.iter().map(move |r| (fx.arena.get(r.key), r.writes, r.tracked_before))
    }

    /// The unit's dirty count (Redis's `server.dirty` increase).
    pub fn dirty_count(&self) -> u64 {
        self.fx.unit_dirty
    }

    /// The client whose command made the unit (0 for the server's own:
    /// active expiry).
    pub fn client(&self) -> u64 {
        self.fx.client
    }

    /// Whether the unit ran in a connection's batch of requests: the
    /// connection tells the consumers when the batch ends (tracking's
    /// broadcasts go once per event-loop turn, as in Redis), so a unit
    /// outside one (a served blocked client, active expiry, a replica's
    /// apply loop) sends such things itself.
    pub fn in_batch(&self) -> bool {
        self.fx.batched
    }

    /// Whether a database was flushed (FLUSHDB, FLUSHALL): tracking
    /// invalidates every key at once instead of key by key.
    pub fn flushed(&self) -> bool {
        self.fx.flushed
    }

    /// Asks the connection to hold the replies of this unit's client until
    /// the consumer's position `seq` is acknowledged (the AOF's group
    /// commit under `appendfsync always`; WAIT-like stream offsets). The
    /// largest asked for wins; the connection reads it with
    /// [`Effects::take_hold`].
    pub fn hold_until(&self, seq: u64) {
        if seq > self.fx.hold.get() {
            self.fx.hold.set(seq);
        }
        if seq > self.fx.last.get() {
            self.fx.last.set(seq);
        }
    }

    /// Asks the connection to hand what this unit recorded on to its
    /// consumer's sockets before it writes the replies (the replication
    /// stream: a replica has a write before its client is told of it, as
    /// Redis writes its replicas' output first); read with
    /// [`Effects::take_push`].
    pub fn push_before_replies(&self) {
        self.fx.push.set(true);
    }
}

/// A consumer of the effects record (the AOF, the replication stream,
/// notifications, tracking, a test's recorder).
pub trait Consumer: Send + Sync {
    /// What this consumer needs recorded.
    fn wants(&self) -> Want;
    /// One execution unit ended. Called with the unit's stripe locks still
    /// held, so for any one key the calls arrive in execution order.
    fn unit(&self, unit: &Unit<'_>);
}

/// The installed consumers. Sessions keep a snapshot and refresh it when
/// the epoch moves, so nothing here is locked per command.
#[derive(Default)]
pub struct Hub {
    epoch: AtomicU64,
    list: Mutex<Option<Consumers>>,
}

/// A snapshot of the installed consumers.
#[derive(Clone)]
pub struct Consumers {
    pub list: Arc<[Arc<dyn Consumer>]>,
    pub want: Want,
}

impl Hub {
    /// Installs a consumer (through `Shared::add_consumer`, which also
    /// tells the connections to take a new snapshot).
    pub(crate) fn add(&self, c: Arc<dyn Consumer>) {
        let mut l = self.list.lock();
        let mut v: Vec<Arc<dyn Consumer>> = l.as_ref().map_or_else(Vec::new, |c| c.list.to_vec());
        v.push(c);
        *l = Some(Self::snapshot(v));
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// Removes a consumer (compared by address).
    pub(crate) fn remove(&self, c: &Arc<dyn Consumer>) {
        let mut l = self.list.lock();
        let v: Vec<Arc<dyn Consumer>> = l
            .as_ref()
            .map_or_else(Vec::new, |c| c.list.to_vec())
            .into_iter()
            .filter(|x| !std::ptr::addr_eq(Arc::as_ptr(x), Arc::as_ptr(c)))
            .collect();
        *l = if v.is_empty() { None } else { Some(Self::snapshot(v)) };
        self.epoch.fetch_add(1, Ordering::Release);
    }

    fn snapshot(v: Vec<Arc<dyn Consumer>>) -> Consumers {
        let want = v.iter().fold(Want::default(), |w, c| w.union(c.wants()));
        Consumers { list: v.into(), want }
    }

    /// The current epoch (one relaxed load).
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The current consumers.
    pub fn current(&self) -> Option<Consumers> {
        self.list.lock().clone()
    }
}

/// Bytes of one unit's keys and arguments, appended and never freed until
/// the unit ends (no allocation per command once warm).
#[derive(Default)]
struct Arena {
    bytes: Vec<u8>,
    spans: Vec<(u32, u32)>,
}

impl Arena {
    fn push(&mut self, b: &[u8]) -> u32 {
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        self.spans.push((start, b.len() as u32));
        (self.spans.len() - 1) as u32
    }

    fn get(&self, i: u32) -> &[u8] {
        let (s, l) = self.spans[i as usize];
        &self.bytes[s as usize..(s + l) as usize]
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }
}

/// A tracked read of a key the unit had already modified.
#[derive(Clone, Copy, Debug)]
struct Reread {
    key: u32,
    /// The unit's modifications of the key before the read.
    writes: u32,
    tracked_before: bool,
}

#[derive(Clone, Copy, Debug)]
struct Op {
    db: u32,
    first: u32,
    argc: u32,
    /// Sent to replicas only, not written to the AOF (Redis's
    /// `PROPAGATE_REPL`: PUBLISH).
    repl_only: bool,
    /// Written to the AOF only (`PROPAGATE_AOF`: a script's
    /// `redis.set_repl(redis.REPL_AOF)`).
    aof_only: bool,
}

#[derive(Clone, Copy, Debug)]
struct EventRec {
    class: Class,
    name: &'static str,
    db: u32,
    key: u32,
}

/// How the running command itself is propagated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Own {
    /// As it arrived, if it dirtied anything.
    AsIs,
    /// As the operation at this index of `ops`' pending rewrite.
    Rewritten { first: u32, argc: u32 },
    /// Not at all (what it did was propagated another way).
    Prevented,
}

/// A session's effects record: one command's, and its execution unit's.
pub struct Effects {
    /// What to record (from the consumers' snapshot).
    pub want: Want,
    /// The running command's dirty count.
    pub dirty: u64,
    /// The running command is propagated whatever its dirty count.
    forced: bool,
    /// The running command goes to replicas only.
    repl_only: bool,
    unit_dirty: u64,
    own: Own,
    ops: Vec<Op>,
    /// Where the running command's operations start (a lazily expired
    /// key's `DEL` goes before them).
    cmd_ops: usize,
    events: Vec<EventRec>,
    /// Where the running command's events start (lazily expired keys found
    /// after it ran are reported before them).
    cmd_events: usize,
    keys: Vec<(u32, u32)>,
    /// Tracked reads of keys the unit had already modified ([`Effects::reread`]).
    rereads: Vec<Reread>,
    /// How many times each key of `keys[..counted]` was modified: built
    /// by [`Effects::reread`] as it needs it, so that a long transaction
    /// of a tracking client costs one count per write, not a scan per read.
    write_counts: std::collections::HashMap<Box<[u8]>, u32>,
    counted: usize,
    arena: Arena,
    /// The consumers' snapshot and its epoch.
    consumers: Option<Consumers>,
    epoch: u64,
    /// The client the record belongs to (0: none).
    pub client: u64,
    /// The session runs a connection's batch of requests, whose end
    /// sends what consumers gather per event-loop turn
    /// ([`Unit::in_batch`]).
    pub batched: bool,
    /// A database was flushed in this unit.
    flushed: bool,
    /// The unit's operations go out without MULTI/EXEC (a client's
    /// SCAN or RANDOMKEY, see [`Effects::unwrap_unit`]).
    unwrapped: bool,
    /// A consumer's position the replies so far must wait for (0: none);
    /// see [`Unit::hold_until`].
    hold: std::cell::Cell<u64>,
    /// A consumer asked for [`Unit::push_before_replies`].
    push: std::cell::Cell<bool>,
    /// The largest position a consumer ever asked this session's replies
    /// to wait for (never reset: WAITAOF's "this client's last write").
    last: std::cell::Cell<u64>,
    /// Replies a command asked to hold until replicas have its write
    /// ([`Effects::hold_for_replicas`]); empty (no allocation) otherwise.
    replica_holds: Vec<ReplicaHold>,
}

/// A reply held until enough replicas acknowledged the stream that holds
/// its command's write (ADDJOB's `REPLICATE n`): the connection waits
/// after the batch, and on the deadline replaces the reply by `error`.
#[derive(Clone, Debug)]
pub struct ReplicaHold {
    /// Where the reply starts in the connection's reply buffer, and its
    /// length.
    pub at: resp::Mark,
    pub len: usize,
    /// Online replicas that must acknowledge.
    pub replicas: usize,
    /// The last moment (server clock, Unix ms) to wait.
    pub deadline_ms: i64,
    /// The reply's replacement when the deadline passes first (an error
    /// line without its `-`).
    pub error: &'static str,
}

impl Default for Effects {
    fn default() -> Self {
        Effects {
            want: Want::default(),
            dirty: 0,
            forced: false,
            repl_only: false,
            unit_dirty: 0,
            own: Own::AsIs,
            ops: Vec::new(),
            cmd_ops: 0,
            events: Vec::new(),
            cmd_events: 0,
            keys: Vec::new(),
            rereads: Vec::new(),
            write_counts: std::collections::HashMap::new(),
            counted: 0,
            arena: Arena::default(),
            consumers: None,
            // Never equal to a hub's epoch: the first unit takes a snapshot.
            epoch: u64::MAX,
            client: 0,
            batched: false,
            flushed: false,
            unwrapped: false,
            hold: std::cell::Cell::new(0),
            push: std::cell::Cell::new(false),
            last: std::cell::Cell::new(0),
            replica_holds: Vec::new(),
        }
    }
}

impl Effects {
    /// Refreshes the consumers' snapshot if the hub changed (one atomic
    /// load per command otherwise). Called before each command with its
    /// stripes held, so the change can come in the middle of a unit: the
    /// new consumers get the whole unit, and what was recorded for none
    /// is dropped.
    #[inline]
    pub fn sync(&mut self, hub: &Hub) {
        let e = hub.epoch();
        if e != self.epoch {
            self.resync(hub, e);
        }
    }

    #[cold]
    fn resync(&mut self, hub: &Hub, e: u64) {
        self.epoch = e;
        self.consumers = hub.current();
        self.want = self.consumers.as_ref().map_or(Want::default(), |c| c.want);
        if self.consumers.is_none() {
            self.ops.clear();
            self.events.clear();
            self.keys.clear();
            self.rereads.clear();
            self.write_counts.clear();
            self.counted = 0;
            self.arena.clear();
            self.flushed = false;
            self.cmd_ops = 0;
            self.cmd_events = 0;
        }
    }

    /// Whether the running command's propagated form is recorded; a
    /// handler checks this before building a rewrite.
    #[inline]
    pub fn propagating(&self) -> bool {
        self.want.propagate
    }

    /// Starts a command of the unit.
    #[inline]
    pub fn begin_command(&mut self) {
        self.dirty = 0;
        self.forced = false;
        self.repl_only = false;
        self.own = Own::AsIs;
        self.cmd_events = self.events.len();
        self.cmd_ops = self.ops.len();
    }

    /// Adds `n` to the dirty count.
    #[inline]
    pub fn add_dirty(&mut self, n: u64) {
        self.dirty += n;
    }

    /// Records a keyspace event (if wanted).
    #[inline]
    pub fn event(&mut self, class: Class, name: &'static str, db: usize, key: &[u8]) {
        if self.want.events {
            let key = self.arena.push(key);
            self.events.push(EventRec { class, name, db: db as u32, key });
        }
    }

    /// Records that a database was flushed (if keys are wanted).
    pub fn flushed(&mut self) {
        if self.want.keys {
            self.flushed = true;
        }
    }

    /// Records a modified key (if wanted).
    #[inline]
    pub fn key(&mut self, db: usize, key: &[u8]) {
        if self.want.keys {
            let k = self.arena.push(key);
            self.keys.push((db as u32, k));
        }
    }

    /// Notes that the unit's client, tracking keys, read `key` after the
    /// unit had modified it: Redis invalidates a key when it is written,
    /// so a read that comes after every write of the unit leaves the key
    /// tracked, and the writes before it invalidate the client only if it
    /// tracked the key already (`tracked_before`: it was in the tracking
    /// table when this read added it). Nothing is noted for a key the
    /// unit has not modified (the common case: one test of an empty list).
    pub fn reread(&mut self, key: &[u8], tracked_before: bool) {
        if self.keys.is_empty() {
            return;
        }
        for &(_, k) in &self.keys[self.counted..] {
            *self.write_counts.entry(self.arena.get(k).into()).or_default() += 1;
        }
        self.counted = self.keys.len();
        let writes = self.write_counts.get(key).copied().unwrap_or(0);
        if writes > 0 {
            let key = self.arena.push(key);
            self.rereads.push(Reread { key, writes, tracked_before });
        }
    }

    /// Propagates the running command as `argv` instead of as it arrived
    /// (Redis's `rewriteClientCommandVector`). Applies if it dirtied
    /// anything.
    pub fn rewrite(&mut self, argv: &[&[u8]]) {
        if self.want.propagate {
            let first = self.arena.spans.len() as u32;
            for a in argv {
                self.arena.push(a);
            }
            self.own = Own::Rewritten { first, argc: argv.len() as u32 };
        }
    }

    /// Propagates `argv` in database `db` now, before the running command's
    /// own form (Redis's `alsoPropagate`).
    pub fn also(&mut self, db: usize, argv: &[&[u8]]) {
        if self.want.propagate {
            let first = self.arena.spans.len() as u32;
            for a in argv {
                self.arena.push(a);
            }
            self.ops.push(Op {
                db: db as u32,
                first,
                argc: argv.len() as u32,
                repl_only: false,
                aof_only: false,
            });
        }
    }

    /// The running command is not propagated itself (what it did went out
    /// through [`also`](Self::also), or nothing needs to).
    pub fn prevent(&mut self) {
        self.own = Own::Prevented;
    }

    /// Records a key that expired lazily while the running command ran
    /// (the store reports these): its `expired` event and its `DEL` go
    /// before the command's own.
    pub fn expired(&mut self, db: usize, key: &[u8]) {
        self.deleted(Class::EXPIRED, "expired", db, key);
    }

    /// Records a key evicted under `maxmemory` (its own unit): an
    /// `evicted` event and a `DEL` propagated, as Redis's performEvictions.
    pub fn evicted(&mut self, db: usize, key: &[u8]) {
        self.deleted(Class::EVICTED, "evicted", db, key);
    }

    fn deleted(&mut self, class: Class, name: &'static str, db: usize, key: &[u8]) {
        if self.want.events {
            let k = self.arena.push(key);
            let rec = EventRec { class, name, db: db as u32, key: k };
            self.events.insert(self.cmd_events, rec);
            self.cmd_events += 1;
        }
        if self.want.propagate {
            let first = self.arena.push(b"DEL");
            self.arena.push(key);
            let op = Op { db: db as u32, first, argc: 2, repl_only: false, aof_only: false };
            self.ops.insert(self.cmd_ops, op);
            self.cmd_ops += 1;
        }
        self.key(db, key);
    }

    /// How many operations the unit will propagate so far (a mark for
    /// [`drop_ops_from`](Self::drop_ops_from)).
    pub fn ops_len(&self) -> usize {
        self.ops.len()
    }

    /// Sends the operations recorded since `mark` to the AOF only
    /// (`aof`) or to replicas only (a script's `redis.set_repl`).
    pub fn target_ops_from(&mut self, mark: usize, aof: bool) {
        for op in self.ops.iter_mut().skip(mark) {
            if aof {
                op.aof_only = true;
            } else {
                op.repl_only = true;
            }
        }
    }

    /// Drops the operations recorded since `mark` (a script's
    /// `redis.set_repl(redis.REPL_NONE)`: what it runs is not propagated).
    pub fn drop_ops_from(&mut self, mark: usize) {
        self.ops.truncate(mark);
        self.cmd_ops = self.cmd_ops.min(mark);
    }

    /// Propagates the running command even if it dirtied nothing (Redis's
    /// `forceCommandPropagation`: FLUSHDB on an empty database).
    pub fn force(&mut self) {
        self.forced = true;
    }

    /// Propagates the running command to replicas only, whatever its
    /// dirty count (Redis's `forceCommandPropagation(c, PROPAGATE_REPL)`:
    /// PUBLISH, so that a replica's subscribers get the message; the AOF
    /// does not hold it).
    pub fn force_replicas_only(&mut self) {
        self.forced = true;
        self.repl_only = true;
    }

    /// Ends the running command: it is propagated if it dirtied anything
    /// (or was forced). Returns its dirty count.
    #[inline]
    pub fn end_command(&mut self, db: usize, argv: &[&[u8]]) -> u64 {
        let d = self.dirty;
        self.unit_dirty += d;
        if (d > 0 || self.forced) && self.want.propagate {
            self.propagate_own(db, argv);
        }
        self.dirty = 0;
        self.forced = false;
        self.repl_only = false;
        self.own = Own::AsIs;
        d
    }

    #[cold]
    fn propagate_own(&mut self, db: usize, argv: &[&[u8]]) {
        let (first, argc) = match self.own {
            Own::AsIs => {
                let first = self.arena.spans.len() as u32;
                for a in argv {
                    self.arena.push(a);
                }
                (first, argv.len() as u32)
            }
            Own::Rewritten { first, argc } => (first, argc),
            Own::Prevented => return,
        };
        self.ops.push(Op {
            db: db as u32,
            first,
            argc,
            repl_only: self.repl_only,
            aof_only: false,
        });
    }

    /// The position consumers asked the replies so far to wait for, and
    /// forgets it (0: nothing to wait for). One load when no consumer
    /// asked.
    #[inline]
    pub fn take_hold(&mut self) -> u64 {
        self.hold.replace(0)
    }

    /// The position of this session's last write a consumer numbered
    /// (the AOF's sequence number; 0 before any), kept across batches.
    #[inline]
    pub fn last_position(&self) -> u64 {
        self.last.get()
    }

    /// Whether a consumer asked the replies so far to wait (for a
    /// position, or for a push).
    #[inline]
    pub fn holding(&self) -> bool {
        self.hold.get() != 0 || self.push.get()
    }

    /// Whether a consumer asked for a push before the replies so far, and
    /// forgets it.
    #[inline]
    pub fn take_push(&mut self) -> bool {
        self.push.replace(false)
    }

    /// Asks the connection to hold a reply until replicas acknowledged
    /// this write (see [`ReplicaHold`]). The stream is pushed to the
    /// replicas before the wait, so [`holding`](Self::holding) answers
    /// true and the batch loop's one check for held replies covers it.
    pub fn hold_for_replicas(&mut self, hold: ReplicaHold) {
        self.push.set(true);
        self.replica_holds.push(hold);
    }

    /// Whether a reply waits for replicas.
    #[inline]
    pub fn holds_for_replicas(&self) -> bool {
        !self.replica_holds.is_empty()
    }

    /// The replies held for replicas, forgotten here.
    pub fn take_replica_holds(&mut self) -> Vec<ReplicaHold> {
        std::mem::take(&mut self.replica_holds)
    }

    /// Whether the unit recorded anything a consumer may want.
    #[inline]
    pub fn pending(&self) -> bool {
        !self.ops.is_empty() || !self.events.is_empty() || !self.keys.is_empty() || self.flushed
    }

    /// The unit is a command that touches arbitrary keys, run directly:
    /// its operations (the DELs of keys it found expired) propagate one
    /// by one, as active expiry's do, not as a transaction.
    pub fn unwrap_unit(&mut self) {
        self.unwrapped = true;
    }

    /// Ends the unit: hands it to the consumers (call with its locks still
    /// held) and clears the record.
    #[inline]
    pub fn finish_unit(&mut self) {
        if self.consumers.is_some() && (self.pending() || self.unit_dirty > 0) {
            self.deliver();
        }
        self.unwrapped = false;
        self.unit_dirty = 0;
        self.cmd_events = 0;
        self.cmd_ops = 0;
    }

    #[cold]
    fn deliver(&mut self) {
        {
            if let Some(c) = &self.consumers {
                let list = c.list.clone();
                let unit = Unit { fx: self };
                for consumer in list.iter() {
                    consumer.unit(&unit);
                }
            }
            self.ops.clear();
            self.events.clear();
            self.keys.clear();
            self.rereads.clear();
            self.write_counts.clear();
            self.counted = 0;
            self.arena.clear();
            self.flushed = false;
        }
    }
}

/// Turns units into the command stream a replica reads: a `SELECT` before
/// a command whose database differs from the stream's, `MULTI`/`EXEC`
/// selecting nothing. The AOF and the replication stream each keep one
/// (the one place a stream's selected database is tracked).
#[derive(Debug, Default, Clone)]
pub struct StreamWriter {
    selected: Option<usize>,
}

impl StreamWriter {
    /// Forgets the selected database: the next command selects its own
    /// (a new file, a new replica stream).
    pub fn reset(&mut self) {
        self.selected = None;
    }

    /// The database the stream has selected (`None` until its first
    /// command, or after [`reset`](Self::reset)).
    pub fn selected(&self) -> Option<usize> {
        self.selected
    }

    /// The database to `SELECT` before a command in `db`, if the stream
    /// has another one selected (and notes it selected).
    fn switch(&mut self, db: Option<usize>) -> Option<usize> {
        let db = db?;
        (self.selected != Some(db)).then(|| {
            self.selected = Some(db);
            db
        })
    }

    /// Appends a unit's commands to `out` as owned argument vectors, as
    /// replicas get them (for tests that read the stream as arguments).
    pub fn write_for_replicas(&mut self, unit: &Unit<'_>, out: &mut Vec<Vec<Vec<u8>>>) {
        for (db, argv) in unit.replica_commands() {
            if let Some(db) = self.switch(db) {
                out.push(vec![b"SELECT".to_vec(), db.to_string().into_bytes()]);
            }
            out.push(argv.iter().map(|a| a.to_vec()).collect());
        }
    }

    /// Appends a unit's commands to `out` in RESP, as the AOF holds them.
    pub fn write_resp(&mut self, unit: &Unit<'_>, out: &mut Vec<u8>) {
        self.resp_into(unit.commands(), out);
    }

    /// Appends a unit's commands to `out` in RESP, as replicas get them.
    pub fn write_resp_for_replicas(&mut self, unit: &Unit<'_>, out: &mut Vec<u8>) {
        self.resp_into(unit.replica_commands(), out);
    }

    /// Appends one command run in `db` to `out` in RESP, selecting `db`
    /// first when the stream has another one selected.
    pub fn write_command(&mut self, db: usize, argv: &[&[u8]], out: &mut Vec<u8>) {
        self.resp_into(std::iter::once((Some(db), argv.to_vec())), out);
    }

    fn resp_into<'a>(
        &mut self,
        cmds: impl Iterator<Item = (Option<usize>, Vec<&'a [u8]>)>,
        out: &mut Vec<u8>,
    ) {
        for (db, argv) in cmds {
            if let Some(db) = self.switch(db) {
                let mut n = resp::IntBuf::new();
                resp::write_command(out, &[b"SELECT", n.format(db as i64)]);
            }
            resp::write_command(out, &argv);
        }
    }
}

/// A consumer that keeps everything, for tests: the replica's view of the
/// stream, the events and the dirty total.
#[derive(Default)]
pub struct Recorder {
    inner: Mutex<Recorded>,
}

/// What a [`Recorder`] saw.
#[derive(Default, Debug, Clone)]
pub struct Recorded {
    /// The propagated stream, `SELECT`s included.
    pub stream: Vec<Vec<Vec<u8>>>,
    /// Events as (class, name, db, key).
    pub events: Vec<(Class, &'static str, usize, Vec<u8>)>,
    /// Keys modified, as (db, key).
    pub keys: Vec<(usize, Vec<u8>)>,
    /// Sum of the units' dirty counts.
    pub dirty: u64,
    writer: StreamWriter,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    /// Takes what was recorded so far (the stream's selected database is
    /// kept, as a replica's connection keeps it).
    pub fn take(&self) -> Recorded {
        let mut g = self.inner.lock();
        let writer = std::mem::take(&mut g.writer);
        let r = std::mem::take(&mut *g);
        g.writer = writer;
        r
    }
}

impl Consumer for Recorder {
    fn wants(&self) -> Want {
        Want { propagate: true, events: true, keys: true }
    }

    fn unit(&self, unit: &Unit<'_>) {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.writer.write_for_replicas(unit, &mut g.stream);
        for e in unit.events() {
            g.events.push((e.class, e.name, e.db, e.key.to_vec()));
        }
        for (db, k) in unit.keys() {
            g.keys.push((db, k.to_vec()));
        }
        g.dirty += unit.dirty_count();
    }
}
