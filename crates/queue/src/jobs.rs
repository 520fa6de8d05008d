//! All jobs and queues of the node. Jobs sit in a slab of fixed slots
//! (chunks of 6,371, so a job never moves and growing never copies the
//! slab), found by id from the slot handle the id carries (ids made here
//! carry it; see `id.rs`; a job loaded with an id that names no free slot
//! goes in a small hash table of such jobs instead), kept in the slot in a
//! packed form that the slot's handle completes ([`SlotId`]), and scanned (JSCAN,
//! snapshots) in slot order. The two ordered indexes hold handles,
//! never ids: one sorted ring of handles per queue (by creation stamp,
//! read in the slots; [`Order`]) and the wake-up heap of 12-byte
//! `(time, handle)` keys ([`Wake`]) — the earliest of a job's expiry and its next
//! re-queue — that [`Jobs::tick`] pops to run retries, delays and TTLs
//! (spec §1.4, §3.8).

use std::collections::BTreeSet;

use hashbrown::hash_map::EntryRef;
use hashbrown::{HashMap, HashTable};

use crate::ext::Ext;
use crate::id::{mix, JobId, SlotId, MAX_NODES};
use crate::job::{Job, JobData, JobRef, QueueName, State, FLAG_DELIVERED, FLAG_QUEUED_ONCE};
use crate::order::Order;
use crate::wake::Wake;

mod extend;

pub use extend::{Acked, Queued};

/// A queue's pause flags (spec §1.8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pause(pub u8);

impl Pause {
    pub const NONE: Pause = Pause(0);
    pub const IN: Pause = Pause(1);
    pub const OUT: Pause = Pause(2);
    pub const ALL: Pause = Pause(3);

    pub fn has(self, p: Pause) -> bool {
        self.0 & p.0 == p.0 && p.0 != 0
    }

    pub fn name(self) -> &'static str {
        match self.0 & 3 {
            0 => "none",
            1 => "in",
            2 => "out",
            _ => "all",
        }
    }
}

/// A queue: its queued jobs, oldest first, and its counters.
#[derive(Debug)]
pub struct Queue {
    /// Its name, shared by its jobs.
    name: QueueName,
    /// The slot handles of its queued jobs, by creation stamp.
    jobs: Order,
    /// Unix ms it was created and last used (enqueue, fetch, block).
    pub ctime: i64,
    pub atime: i64,
    pub pause: Pause,
    pub jobs_in: u64,
    pub jobs_out: u64,
    /// Deliveries allowed per second (QSET RATE; 0: no limit), and the
    /// current one-second window: its start and deliveries so far.
    pub rate: u32,
    window: i64,
    taken: u32,
}

impl Queue {
    fn new(name: QueueName, now: i64) -> Queue {
        Queue {
            name,
            jobs: Order::new(),
            ctime: now,
            atime: now,
            pause: Pause::NONE,
            jobs_in: 0,
            jobs_out: 0,
            rate: 0,
            window: 0,
            taken: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

/// What a tick did to a job.
#[derive(Debug)]
pub enum Tick {
    /// Its TTL passed: it is gone.
    Expired(Job),
    /// Its retry (or delay) passed: it is queued again in `queue`.
    Requeued(JobId, QueueName),
    /// A periodic job's run outlived its TTL: it waits for its next run.
    Rescheduled(JobId),
    /// A rate-limited queue may deliver again: its waiters can be served.
    Reopened(QueueName),
}

/// Why ADDJOB's queue refused a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The queue holds MAXLEN jobs or more.
    MaxLen,
    /// The queue is paused in input.
    Paused,
}

/// A new job's parameters (ADDJOB's), for [`Jobs::add`].
pub struct NewJob<'a> {
    pub queue: &'a [u8],
    pub body: &'a [u8],
    pub repl: u16,
    pub ttl_secs: i64,
    pub delay_secs: i64,
    pub retry_secs: i64,
    /// Refuse the job when the queue holds this many (0: no limit).
    pub maxlen: usize,
    /// Sluice's extensions (none by default).
    pub ext: Ext,
    /// Cluster mode: the hash tag that makes the id hash to the queue's
    /// slot ([`JobId::with_slot_tag`]); `None` on a standalone server.
    pub slot_tag: Option<[u8; 3]>,
}

struct Entry {
    /// The job but its id.
    data: JobData,
    /// Its id, packed ([`SlotId`]: rebuilt from this, the slot's handle
    /// and the node table), or `SlotId::FOREIGN` when kept whole in
    /// [`Registry::ids`].
    sid: SlotId,
    // No copy of its wake-up key: a live job's key is always
    // `Jobs::wake_of(data)` (every change to its times ends in a
    // `reindex` told the time it was indexed at), 8 bytes a slot less.
}

/// Queues idle this long (ms), empty, unpaused and without waiters are
/// collected.
pub const QUEUE_IDLE_GC_MS: i64 = 300_000;

/// 6,371 slots of 72 bytes: just under 448 KiB, one of jemalloc's size
/// classes, so a chunk wastes under 72 bytes. A handle is the
/// slot's index in the slab ([`split`], [`join`]); ids carry it, so
/// changing the chunk size changes no id's meaning.
const CHUNK: usize = 458_752 / std::mem::size_of::<Option<Entry>>();

/// A handle's chunk and index in the chunk.
#[inline]
fn split(h: u32) -> (usize, usize) {
    (h as usize / CHUNK, h as usize % CHUNK)
}

/// The handle of index `i` of chunk `c`.
#[inline]
fn join(c: usize, i: usize) -> u32 {
    (c * CHUNK + i) as u32
}

/// An ordered index's key: `word` then `handle`, one integer (compared
/// in two instructions, where a tuple compares field by field).
#[inline]
fn key(word: u64, h: u32) -> u128 {
    (u128::from(word) << 64) | u128::from(h)
}

/// The handle in an index key.
#[inline]
fn handle(k: u128) -> u32 {
    k as u32
}

/// A wake-up time as an index word (order kept for any i64).
#[inline]
fn time_word(t: i64) -> u64 {
    (t as u64) ^ (1 << 63)
}

/// The jobs themselves and the indexes that name them by handle.
struct Registry {
    /// Slots; a handle is chunk × CHUNK + index. Every chunk but
    /// the first is allocated whole; the first grows, so a server with
    /// a few jobs holds a few slots.
    chunks: Vec<Vec<Option<Entry>>>,
    /// Handles of empty slots, reused last-freed first. A slot taken by
    /// [`Registry::claim`] stays listed and is skipped when popped.
    free: Vec<u32>,
    /// Live jobs.
    live: usize,
    /// Handles of the jobs whose id does not carry their handle (loaded
    /// from another server's ids, or whose slot was taken), hashed from
    /// the id ([`id_hash`]). Empty on a server that made all its jobs.
    foreign: HashTable<u32>,
    /// [`key`]`(`[`time_word`]`(wake-up time), handle)`, with stale
    /// keys (see [`live_wake`]).
    awake: Wake,
    /// Bytes of bodies held (INFO, memory estimates).
    body_bytes: usize,
    /// The extensions of the jobs that have any, by handle (few jobs do,
    /// so they cost nothing in the slot; `ext.rs`).
    ext: HashMap<u32, Box<Ext>, ahash::RandomState>,
    /// Node prefixes of the packed ids ([`SlotId::node`]): this server's,
    /// and one per server run whose jobs were read back. Never shrinks
    /// (at most [`MAX_NODES`] of 8 bytes).
    nodes: Vec<[u8; 8]>,
    /// The whole ids of the jobs whose slot cannot rebuild them
    /// (`SlotId::FOREIGN`: every job of the `foreign` table, and ids of
    /// another shape). Empty on a server that made all its jobs.
    ids: HashMap<u32, JobId, ahash::RandomState>,
    /// The job last made or fetched, and its slot: the next lookup is
    /// usually of it (ADDJOB's record, GETJOB's reply and propagation),
    /// and comparing whole ids is cheaper than checking a packed one.
    /// Cleared when that slot is emptied.
    recent: Option<(JobId, u32)>,
}

/// Hashes a job id: its five words folded (mostly random already).
#[inline]
fn id_hash(id: &JobId) -> u64 {
    let w = |at: usize| u64::from_le_bytes(id.0[at..at + 8].try_into().expect("8 bytes"));
    let mut h = w(11);
    for at in [19, 27, 32, 0, 3] {
        h = (h ^ w(at)).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
    mix(h)
}

/// Whether wake-up key `k` is its job's current one (not left behind by
/// a job that moved or went).
#[inline]
fn live_wake(chunks: &[Vec<Option<Entry>>], k: u128) -> bool {
    let (c, i) = split(handle(k));
    chunks
        .get(c)
        .and_then(|c| c.get(i))
        .and_then(Option::as_ref)
        .is_some_and(|e| time_word(Jobs::wake_of(&e.data)) == (k >> 64) as u64)
}

#[inline]
fn slot(chunks: &[Vec<Option<Entry>>], h: u32) -> &Entry {
    let (c, i) = split(h);
    chunks[c][i].as_ref().expect("live handle")
}

impl Registry {
    fn new() -> Registry {
        Registry {
            chunks: Vec::new(),
            free: Vec::new(),
            live: 0,
            foreign: HashTable::new(),
            awake: Wake::new(),
            body_bytes: 0,
            ext: HashMap::with_hasher(ahash::RandomState::new()),
            nodes: Vec::new(),
            ids: HashMap::with_hasher(ahash::RandomState::new()),
            recent: None,
        }
    }

    /// The id of the job in slot `h`.
    #[inline]
    fn id_at(&self, h: u32) -> JobId {
        self.id_of(h, &self.at(h).sid)
    }

    /// The id of the job in slot `h`, whose packed id is `sid`.
    #[inline]
    fn id_of(&self, h: u32, sid: &SlotId) -> JobId {
        if sid.is_foreign() {
            self.ids[&h]
        } else {
            sid.unpack(h, &self.nodes[sid.node()])
        }
    }

    /// The job in slot `h`, lent with its id.
    #[inline]
    fn job_at(&self, h: u32) -> JobRef<'_> {
        JobRef { id: self.id_at(h), data: &self.at(h).data }
    }

    /// Index of node prefix `p` in the node table, added if missing;
    /// None when the table is full.
    fn node_index(&mut self, p: [u8; 8]) -> Option<usize> {
        match self.nodes.iter().position(|n| *n == p) {
            Some(i) => Some(i),
            None if self.nodes.len() < MAX_NODES => {
                self.nodes.push(p);
                Some(self.nodes.len() - 1)
            }
            None => None,
        }
    }

    #[inline]
    fn at(&self, h: u32) -> &Entry {
        slot(&self.chunks, h)
    }

    #[inline]
    fn at_mut(&mut self, h: u32) -> &mut Entry {
        let (c, i) = split(h);
        self.chunks[c][i].as_mut().expect("live handle")
    }

    /// Slot `h` if it exists (empty or not).
    #[inline]
    fn slot_at(&self, h: u32) -> Option<&Option<Entry>> {
        let (c, i) = split(h);
        self.chunks.get(c).and_then(|c| c.get(i))
    }

    #[inline]
    fn find(&self, id: &JobId) -> Option<u32> {
        if let Some((r, h)) = &self.recent {
            if r.same(id) {
                return Some(*h);
            }
        }
        if let Some(h) = id.handle() {
            if let Some(Some(e)) = self.slot_at(h) {
                let same = if e.sid.is_foreign() {
                    self.ids.get(&h) == Some(id)
                } else {
                    e.sid.matches(id, &self.nodes[e.sid.node()])
                };
                if same {
                    return Some(h);
                }
            }
        }
        if self.foreign.is_empty() {
            return None;
        }
        let ids = &self.ids;
        self.foreign.find(id_hash(id), |&h| ids.get(&h) == Some(id)).copied()
    }

    /// An empty slot for a new job: the last freed, or a new one at the
    /// end of the slab.
    fn alloc(&mut self) -> u32 {
        while let Some(h) = self.free.pop() {
            if self.slot_at(h).is_some_and(Option::is_none) {
                return h;
            }
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            let cap = if self.chunks.is_empty() { 0 } else { CHUNK };
            self.chunks.push(Vec::with_capacity(cap));
        }
        let n = self.chunks.len() - 1;
        let c = &mut self.chunks[n];
        if c.len() == c.capacity() {
            // The first chunk grows; doubling would pass CHUNK.
            c.reserve_exact(c.len().max(4).min(CHUNK - c.len()));
        }
        c.push(None);
        join(n, c.len() - 1)
    }

    /// Makes slot `h` exist and reports whether it is empty, so that a job
    /// read back with an id naming `h` can go there. The slab grows to
    /// `h` only within about twice its size (an id from elsewhere may name
    /// any slot); slots passed on the way are listed free.
    fn claim(&mut self, h: u32) -> bool {
        let (c, i) = split(h);
        // Handles stay below 2^31: a queue's order keeps its tombstone in
        // the top bit (`order.rs`).
        if c >= 2 * self.chunks.len() + 16 || h >= 1 << 31 {
            return false;
        }
        while self.chunks.len() <= c {
            let n = self.chunks.len().wrapping_sub(1);
            if let Some(last) = self.chunks.last_mut() {
                for j in last.len()..CHUNK {
                    self.free.push(join(n, j));
                }
                last.reserve_exact(CHUNK - last.len());
                last.resize_with(CHUNK, || None);
            }
            let cap = if self.chunks.is_empty() { 0 } else { CHUNK };
            self.chunks.push(Vec::with_capacity(cap));
        }
        let chunk = &mut self.chunks[c];
        if chunk.len() <= i {
            for j in chunk.len()..i {
                self.free.push(join(c, j));
            }
            chunk.reserve_exact(i + 1 - chunk.len());
            chunk.resize_with(i + 1, || None);
        }
        chunk[i].is_none()
    }

    /// Puts `job` in empty slot `h` (from [`alloc`](Self::alloc) or
    /// [`claim`](Self::claim)); not in a queue nor the wake-up index.
    /// `foreign`: its id does not name `h`, so it is listed in the
    /// foreign table.
    fn put(&mut self, h: u32, job: Job, foreign: bool) {
        let sid = if foreign {
            None
        } else {
            // Not foreign: the id names `h` (the caller checked).
            self.node_index(job.id.node_prefix()).and_then(|n| job.id.pack_named(n))
        };
        self.put_packed(h, job, sid, foreign);
    }

    /// [`put`](Self::put) with the id's packed form, if it has one.
    fn put_packed(&mut self, h: u32, job: Job, sid: Option<SlotId>, foreign: bool) {
        debug_assert_eq!(foreign, job.id.handle() != Some(h));
        self.body_bytes += job.body.len();
        self.live += 1;
        let sid = sid.unwrap_or_else(|| {
            self.ids.insert(h, job.id);
            SlotId::FOREIGN
        });
        let (c, i) = split(h);
        let s = &mut self.chunks[c][i];
        debug_assert!(s.is_none());
        *s = Some(Entry { data: job.data, sid });
        if foreign {
            let ids = &self.ids;
            self.foreign.insert_unique(id_hash(&job.id), h, |x| id_hash(&ids[x]));
        }
    }

    /// Registers a job read back (whose id is not registered): in the
    /// slot its id names when that one is free, else anywhere.
    fn add(&mut self, job: Job) -> u32 {
        let named = job.id.handle();
        let h = match named {
            Some(h) if self.claim(h) => h,
            _ => self.alloc(),
        };
        self.put(h, job, named != Some(h));
        h
    }

    /// Takes slot `h` out of the slab, the foreign table and the wake-up
    /// index (its queue is the caller's).
    fn remove(&mut self, h: u32) -> Job {
        let id = self.id_at(h);
        let (c, i) = split(h);
        let e = self.chunks[c][i].take().expect("live handle");
        self.live -= 1;
        if self.recent.is_some_and(|(_, r)| r == h) {
            self.recent = None;
        }
        if !self.ext.is_empty() {
            self.ext.remove(&h);
        }
        if e.sid.is_foreign() {
            self.ids.remove(&h);
            if id.handle() != Some(h) {
                if let Ok(o) = self.foreign.find_entry(id_hash(&id), |&x| x == h) {
                    o.remove();
                }
            }
        }
        // Every job in the slab is indexed (put is followed by reindex).
        let chunks = &self.chunks;
        self.awake.left(|k| live_wake(chunks, k));
        self.body_bytes -= e.data.body.len();
        self.free.push(h);
        Job { id, data: e.data }
    }

    /// Moves job `h` in the wake-up index to its current wake-up time
    /// from `was`, the time it was indexed at (None: a job just put in
    /// its slot, not indexed yet). The caller reads `was` before it
    /// changes the job's times.
    fn reindex(&mut self, h: u32, was: Option<i64>) {
        let w = Jobs::wake_of(&self.at(h).data);
        if Some(w) != was {
            self.awake.push(key(time_word(w), h));
            if was.is_some() {
                let chunks = &self.chunks;
                self.awake.left(|k| live_wake(chunks, k));
            }
        }
    }

    /// The wake-up time job `h` is indexed at.
    #[inline]
    fn wake_at(&self, h: u32) -> i64 {
        Jobs::wake_of(&self.at(h).data)
    }

    /// Live jobs from slot `from` on, in slot order, with their handles.
    fn from(&self, from: usize) -> impl Iterator<Item = (u32, &Entry)> {
        let (c, i) = (from / CHUNK, from % CHUNK);
        self.chunks.iter().enumerate().skip(c).flat_map(move |(n, chunk)| {
            let skip = if n == c { i } else { 0 };
            chunk
                .iter()
                .enumerate()
                .skip(skip)
                .filter_map(move |(j, e)| e.as_ref().map(|e| (join(n, j), e)))
        })
    }

    fn clear(&mut self) {
        *self = Registry::new();
    }
}

/// Ids, creation stamps and timer jitter.
struct Gen {
    node: [u8; 8],
    seed: [u8; 16],
    counter: u64,
    last_ctime: u64,
    rng: u64,
}

impl Gen {
    fn rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// ±250 ms, so that timers set together do not fire together.
    fn jitter(&mut self) -> i64 {
        (self.rand() % 501) as i64 - 250
    }

    /// The next re-queue time after a queueing or a refresh at `now`.
    fn requeue_at(&mut self, retry: u32, now: i64) -> i64 {
        if retry == 0 {
            0
        } else {
            (now + i64::from(retry) * 1000 + self.jitter()).max(now + 1)
        }
    }

    /// A fresh id: 144 bits of a keyed mix of a counter (splitmix64 over
    /// the counter and a seed SHA1 made of the start-up entropy). Disque
    /// hashes with SHA1 per id; any collision-free random part will do
    /// (spec §1.2), and this costs a few nanoseconds. Its first 64 bits
    /// are a bijection of the counter, so no two ids of one run are
    /// equal; an id of another run (read back) shares the 96 bits kept
    /// beside the handle ([`JobId::with_handle`]) with odds of 2^-96, so
    /// nothing is looked up to check.
    fn new_id(&mut self, ttl_secs: i64, retry: i64) -> JobId {
        self.new_id_random(ttl_secs, retry).0
    }

    /// [`new_id`](Self::new_id) and the random bytes it was built from.
    fn new_id_random(&mut self, ttl_secs: i64, retry: i64) -> (JobId, [u8; 18]) {
        self.counter += 1;
        let mut r = [0u8; 18];
        let k0 = u64::from_le_bytes(self.seed[..8].try_into().expect("8 bytes"));
        let k1 = u64::from_le_bytes(self.seed[8..].try_into().expect("8 bytes"));
        let a = mix(self.counter ^ k0);
        let b = mix(a ^ k1);
        let c = mix(b.wrapping_add(self.counter));
        r[..8].copy_from_slice(&a.to_le_bytes());
        r[8..16].copy_from_slice(&b.to_le_bytes());
        r[16..].copy_from_slice(&c.to_le_bytes()[..2]);
        (JobId::build(&self.node, &r, ttl_secs, retry), r)
    }

    /// A creation stamp: ms × 1e6, strictly increasing.
    fn next_ctime(&mut self, now: i64) -> u64 {
        let base = (now.max(0) as u64).saturating_mul(1_000_000);
        let c = if base > self.last_ctime { base } else { self.last_ctime.saturating_add(1) };
        self.last_ctime = c;
        c
    }
}

/// Every job and queue of the node.
pub struct Jobs {
    reg: Registry,
    gen: Gen,
    /// Names come from clients: a keyed hash (ahash), not a fixed one.
    queues: HashMap<QueueName, Queue, ahash::RandomState>,
    /// Queue names by (scan key, name), for QSCAN cursors and the
    /// collector's walk.
    qorder: BTreeSet<(u64, QueueName)>,
    gc_cursor: u64,
    /// Idempotency keys of live jobs (ADDJOB UNIQUE).
    unique: HashMap<Box<[u8]>, JobId, ahash::RandomState>,
    /// Rate-limited queues that refused a delivery, by the time their
    /// window ends (their waiters are served then).
    reopen: BTreeSet<(i64, QueueName)>,
}

/// The scan key of a queue name (FNV-1a; odd, so never the 0 cursor).
fn qkey(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
}

/// Queue `name`, created (at `now`) if missing: one hash and one probe
/// when it exists.
fn queue_in<'a>(
    queues: &'a mut HashMap<QueueName, Queue, ahash::RandomState>,
    qorder: &mut BTreeSet<(u64, QueueName)>,
    name: &[u8],
    now: i64,
) -> &'a mut Queue {
    match queues.entry_ref(name) {
        EntryRef::Occupied(o) => o.into_mut(),
        EntryRef::Vacant(v) => {
            let n = QueueName::new(name);
            qorder.insert((qkey(name), n.clone()));
            v.insert_entry_with_key(n.clone(), Queue::new(n, now)).into_mut()
        }
    }
}

impl Jobs {
    /// `node` is this node's id (hex; its first 8 characters prefix job
    /// ids); `seed` makes ids unpredictable across runs.
    pub fn new(node: &[u8], seed: u64) -> Jobs {
        let mut n = [b'0'; 8];
        for (d, s) in n.iter_mut().zip(node) {
            *d = *s;
        }
        let mut h = sha1_smol::Sha1::new();
        h.update(&seed.to_le_bytes());
        h.update(node);
        let mut s = [0u8; 16];
        s.copy_from_slice(&h.digest().bytes()[..16]);
        Jobs {
            reg: Registry::new(),
            gen: Gen { node: n, seed: s, counter: 0, last_ctime: 0, rng: seed | 1 },
            queues: HashMap::with_hasher(ahash::RandomState::new()),
            qorder: BTreeSet::new(),
            gc_cursor: 0,
            unique: HashMap::with_hasher(ahash::RandomState::new()),
            reopen: BTreeSet::new(),
        }
    }

    /// Registered jobs (INFO `registered_jobs`).
    pub fn len(&self) -> usize {
        self.reg.live
    }

    pub fn is_empty(&self) -> bool {
        self.reg.live == 0
    }

    /// Registered queues (INFO `registered_queues`).
    pub fn queues_len(&self) -> usize {
        self.queues.len()
    }

    /// Bytes of job bodies held.
    pub fn body_bytes(&self) -> usize {
        self.reg.body_bytes
    }

    pub fn get(&self, id: &JobId) -> Option<JobRef<'_>> {
        self.reg.find(id).map(|h| JobRef { id: *id, data: &self.reg.at(h).data })
    }

    /// Every job, in scan (slot) order.
    pub fn iter(&self) -> impl Iterator<Item = JobRef<'_>> {
        self.reg.from(0).map(|(h, e)| JobRef { id: self.reg.id_at(h), data: &e.data })
    }

    /// The ids queued in `q` (one of this node's queues), oldest (next to
    /// be fetched) first.
    pub fn queued_ids<'a>(&'a self, q: &'a Queue) -> impl DoubleEndedIterator<Item = JobId> + 'a {
        q.jobs.iter().map(|h| self.reg.id_at(h))
    }

    /// A fresh id (see `Gen::new_id`), bound to no slot (a job inserted
    /// with it is found through the foreign table).
    pub fn new_id(&mut self, ttl_secs: i64, retry: i64) -> JobId {
        self.gen.new_id(ttl_secs, retry)
    }

    /// A creation stamp: ms × 1e6, strictly increasing.
    pub fn next_ctime(&mut self, now: i64) -> u64 {
        self.gen.next_ctime(now)
    }

    fn wake_of(j: &JobData) -> i64 {
        match j.qtime {
            q if q > 0 && j.state != State::Acked => q.min(j.etime),
            _ => j.etime,
        }
    }

    fn queue_entry(&mut self, name: &[u8], now: i64) -> &mut Queue {
        queue_in(&mut self.queues, &mut self.qorder, name, now)
    }

    /// The queue named `name`, created if missing (GETJOB on an unknown
    /// queue creates it, spec §1.8); its access time is now.
    pub fn touch_queue(&mut self, name: &[u8], now: i64) -> &mut Queue {
        let q = self.queue_entry(name, now);
        q.atime = now;
        q
    }

    pub fn queue(&self, name: &[u8]) -> Option<&Queue> {
        self.queues.get(name)
    }

    /// The shared name of queue `name` if it exists (jobs point at it).
    pub fn queue_name(&self, name: &[u8]) -> QueueName {
        match self.queues.get(name) {
            Some(q) => q.name.clone(),
            None => QueueName::new(name),
        }
    }

    /// ADDJOB: checks queue `j.queue` (MAXLEN, paused in input: Disque's
    /// order), then registers a new job and queues it at once or, with a
    /// delay, leaves it active until then. The queue is looked up once
    /// (and created on the way when the job is queued into it).
    pub fn add(&mut self, j: &NewJob, now: i64) -> Result<JobId, AddError> {
        let queued = j.delay_secs == 0;
        let mut q = match self.queues.entry_ref(j.queue) {
            EntryRef::Occupied(o) => {
                let q = o.into_mut();
                if j.maxlen > 0 && q.len() >= j.maxlen {
                    return Err(AddError::MaxLen);
                }
                if q.pause.has(Pause::IN) {
                    return Err(AddError::Paused);
                }
                Some(q)
            }
            EntryRef::Vacant(v) if queued => {
                let n = QueueName::new(j.queue);
                self.qorder.insert((qkey(j.queue), n.clone()));
                Some(v.insert_entry_with_key(n.clone(), Queue::new(n, now)).into_mut())
            }
            EntryRef::Vacant(_) => None,
        };
        let name = match &q {
            Some(q) => q.name.clone(),
            None => QueueName::new(j.queue),
        };
        let (gen, reg) = (&mut self.gen, &mut self.reg);
        let h = reg.alloc();
        let (mut id, random) = gen.new_id_random(j.ttl_secs, j.retry_secs);
        if let Some(tag) = j.slot_tag {
            id = id.with_slot_tag(tag);
        }
        let id = id.with_handle(h);
        let sid = match reg.node_index(gen.node) {
            Some(n) if j.slot_tag.is_none() => Some(SlotId::of_built(&id, &random, n)),
            Some(n) => id.pack_named(n),
            None => None,
        };
        let ctime = gen.next_ctime(now);
        let retry = j.retry_secs.min(i64::from(u32::MAX)) as u32;
        let queued = j.delay_secs == 0;
        let job = Job {
            id,
            data: JobData {
                queue: name,
                body: j.body.into(),
                state: if queued { State::Queued } else { State::Active },
                repl: j.repl,
                ctime,
                etime: now.saturating_add(j.ttl_secs.saturating_mul(1000)),
                delay: j.delay_secs.min(i64::from(u32::MAX)) as u32,
                retry,
                // The first queueing: now (then the re-queue after RETRY), or
                // when the delay is over.
                qtime: if queued {
                    gen.requeue_at(retry, now)
                } else {
                    now.saturating_add(j.delay_secs.saturating_mul(1000)).max(1)
                },
                nacks: 0,
                deliveries: 0,
                flags: if queued { FLAG_QUEUED_ONCE } else { 0 },
            },
        };
        reg.put_packed(h, job, sid, false);
        reg.recent = Some((id, h));
        reg.reindex(h, None);
        if let (true, Some(q)) = (queued, q.as_mut()) {
            let chunks = &reg.chunks;
            q.jobs.insert(h, ctime, |x| slot(chunks, x).data.ctime);
            q.atime = now;
            q.jobs_in += 1;
        }
        if !j.ext.is_empty() {
            self.attach(h, j.ext.clone());
        }
        Ok(id)
    }

    /// Registers `job` in the state it carries (a new job, or one read
    /// back from a record, replacing any job with its id): a queued job
    /// goes into its queue, every job into the wake-up index.
    pub fn insert(&mut self, job: Job, now: i64) {
        self.insert_with(job, None, now);
    }

    /// [`insert`](Self::insert) with the job's extensions.
    pub fn insert_with(&mut self, mut job: Job, ext: Option<Ext>, now: i64) {
        self.delete(&job.id);
        let ctime = job.ctime;
        self.gen.last_ctime = self.gen.last_ctime.max(ctime);
        let h = if job.state == State::Queued {
            let q = queue_in(&mut self.queues, &mut self.qorder, &job.queue, now);
            job.queue = q.name.clone();
            let h = self.reg.add(job);
            self.reg.reindex(h, None);
            let chunks = &self.reg.chunks;
            q.jobs.insert(h, ctime, |x| slot(chunks, x).data.ctime);
            h
        } else {
            if let Some(q) = self.queues.get(&job.queue[..]) {
                job.queue = q.name.clone();
            }
            let h = self.reg.add(job);
            self.reg.reindex(h, None);
            h
        };
        if let Some(e) = ext.filter(|e| !e.is_empty()) {
            self.attach(h, e);
        }
    }

    /// Deletes a job wherever it is.
    pub fn delete(&mut self, id: &JobId) -> Option<Job> {
        let h = self.reg.find(id)?;
        // Out of its queue first: the order reads the stamps of its
        // queued jobs in their slots.
        let j = &self.reg.at(h).data;
        if j.state == State::Queued {
            if let Some(q) = self.queues.get_mut(&j.queue[..]) {
                let chunks = &self.reg.chunks;
                q.jobs.remove(h, j.ctime, |x| slot(chunks, x).data.ctime);
            }
        }
        if !self.reg.ext.is_empty() {
            self.forget_unique(h);
        }
        Some(self.reg.remove(h))
    }

    /// Queues an active job now (Disque's `enqueueJob`). Refused for a job
    /// already queued, one that may never be queued again (`qtime` 0), and
    /// a delivered at-most-once job. A NACK counts `nacks`; any other
    /// queueing after the first counts `additional-deliveries`.
    pub fn enqueue(&mut self, id: &JobId, nack: bool, now: i64) -> bool {
        self.requeue(id, nack, now) == Queued::Now
    }

    /// [`enqueue`](Self::enqueue), saying whether the job was queued now
    /// or, NACKed with a back-off, will be later.
    pub fn requeue(&mut self, id: &JobId, nack: bool, now: i64) -> Queued {
        match self.reg.find(id) {
            Some(h) => self.enqueue_at(h, nack, now),
            None => Queued::Refused,
        }
    }

    fn enqueue_at(&mut self, h: u32, nack: bool, now: i64) -> Queued {
        let j = &self.reg.at(h).data;
        if matches!(j.state, State::Queued | State::Acked)
            || j.qtime == 0
            || (j.retry == 0 && j.has(FLAG_DELIVERED))
        {
            return Queued::Refused;
        }
        if !self.reg.ext.is_empty() && self.reg.ext.contains_key(&h) {
            // Counted queueings may go to the dead-letter queue, NACKs
            // may wait for their back-off.
            if let Some(later) = self.extended_requeue(h, nack, now) {
                return later;
            }
        }
        let was = self.reg.wake_at(h);
        let j = &self.reg.at(h).data;
        let qtime = self.gen.requeue_at(j.retry, now);
        let j = &mut self.reg.at_mut(h).data;
        j.state = State::Queued;
        j.qtime = qtime;
        if j.has(FLAG_QUEUED_ONCE) || nack {
            if nack {
                j.nacks = j.nacks.saturating_add(1);
            } else {
                j.deliveries = j.deliveries.saturating_add(1);
            }
        } else {
            j.flags |= FLAG_QUEUED_ONCE;
        }
        let ctime = j.ctime;
        let q = queue_in(&mut self.queues, &mut self.qorder, &j.queue, now);
        if !QueueName::ptr_eq(&j.queue, &q.name) {
            // Delayed before its queue existed: share the queue's name.
            j.queue = q.name.clone();
        }
        let chunks = &self.reg.chunks;
        q.jobs.insert(h, ctime, |x| slot(chunks, x).data.ctime);
        q.atime = now;
        q.jobs_in += 1;
        self.reg.reindex(h, Some(was));
        Queued::Now
    }

    /// Takes a queued job out of its queue, leaving it active (DEQUEUE,
    /// WORKING); its re-queue timer keeps running.
    pub fn dequeue(&mut self, id: &JobId) -> bool {
        match self.reg.find(id) {
            Some(h) => self.dequeue_at(h),
            None => false,
        }
    }

    fn dequeue_at(&mut self, h: u32) -> bool {
        let j = &mut self.reg.at_mut(h).data;
        if j.state != State::Queued {
            return false;
        }
        j.state = State::Active;
        let j = &self.reg.at(h).data;
        if let Some(q) = self.queues.get_mut(&j.queue[..]) {
            let chunks = &self.reg.chunks;
            q.jobs.remove(h, j.ctime, |x| slot(chunks, x).data.ctime);
        }
        true
    }

    /// Fetches the oldest job of queue `name` for a consumer (GETJOB):
    /// it becomes active and delivered. None when the queue is missing,
    /// empty or paused in output.
    pub fn fetch(&mut self, name: &[u8], now: i64) -> Option<JobId> {
        let q = self.queues.get_mut(name)?;
        if q.pause.has(Pause::OUT) {
            return None;
        }
        if q.rate > 0 && !q.jobs.is_empty() && !extend::take_rate(q, &mut self.reopen, now) {
            return None;
        }
        let h = q.jobs.pop_first()?;
        q.atime = now;
        q.jobs_out += 1;
        let e = self.reg.at_mut(h);
        e.data.state = State::Active;
        e.data.flags |= FLAG_DELIVERED;
        let sid = e.sid;
        let id = self.reg.id_of(h, &sid);
        self.reg.recent = Some((id, h));
        Some(id)
    }

    /// WORKING: postpones the next re-queue by one retry period. `Err(false)`
    /// for an unknown job, `Err(true)` past half of its life.
    pub fn working(&mut self, id: &JobId, now: i64) -> Result<u32, bool> {
        let Some(h) = self.reg.find(id) else { return Err(false) };
        let j = &self.reg.at(h).data;
        let born = j.ctime_ms();
        if now - born > (j.etime - born) / 2 {
            return Err(true);
        }
        let retry = j.retry;
        let was = self.reg.wake_at(h);
        self.dequeue_at(h);
        let qtime = self.gen.requeue_at(retry, now);
        self.reg.at_mut(h).data.qtime = qtime;
        self.reg.reindex(h, Some(was));
        Ok(retry)
    }

    /// Sets a job's mutable state as a record of it says (a replayed
    /// transition). False when the job is unknown.
    pub fn restore_state(
        &mut self,
        id: &JobId,
        state: State,
        qtime: i64,
        nacks: u16,
        deliveries: u16,
        flags: u8,
        now: i64,
    ) -> bool {
        let Some(old) = self.get(id) else { return false };
        let mut job = old.to_job();
        job.state = state;
        job.qtime = qtime;
        job.nacks = nacks;
        job.deliveries = deliveries;
        job.flags = flags;
        let was_queued = old.state == State::Queued;
        let name = job.queue.clone();
        let ext = self.ext(id).cloned();
        self.insert_with(job, ext, now);
        if was_queued != (state == State::Queued) {
            if let Some(q) = self.queues.get_mut(&name[..]) {
                if state == State::Queued {
                    q.jobs_in += 1;
                } else {
                    q.jobs_out += 1;
                }
            }
        }
        true
    }

    /// Runs every wake-up due at `now`, at most `max` of them: expired
    /// jobs are deleted, active jobs whose retry (or delay) passed are
    /// queued again (or, with the queue paused in input, postponed by a
    /// retry period), queued ones have their timer pushed forward. What
    /// changed a job is reported in `out`.
    pub fn tick(&mut self, now: i64, max: usize, out: &mut Vec<Tick>) -> usize {
        let mut n = 0;
        while self.reopen.first().is_some_and(|(t, _)| *t <= now) {
            let (_, name) = self.reopen.pop_first().expect("first");
            out.push(Tick::Reopened(name));
        }
        while n < max {
            let Some(k) = self.reg.awake.first() else { break };
            if (k >> 64) as u64 > time_word(now) {
                break;
            }
            if !live_wake(&self.reg.chunks, k) {
                // Left behind by a job that moved or went.
                self.reg.awake.pop_stale();
                continue;
            }
            let h = handle(k);
            n += 1;
            // A live key's time is the one its job is indexed at.
            let mut was = ((k >> 64) as u64 ^ (1 << 63)) as i64;
            let j = &self.reg.at(h).data;
            if now >= j.etime {
                let id = self.reg.id_at(h);
                if self.is_periodic(h) {
                    // A run that outlived its TTL is abandoned, not the job.
                    self.next_run(h, now);
                    out.push(Tick::Rescheduled(id));
                    continue;
                }
                if let Some(job) = self.delete(&id) {
                    out.push(Tick::Expired(job));
                }
                continue;
            }
            let (state, retry, qtime) = (j.state, j.retry, j.qtime);
            if qtime > 0 && now >= qtime {
                match state {
                    State::Queued => {
                        let q = self.gen.requeue_at(retry, now);
                        self.reg.at_mut(h).data.qtime = q;
                    }
                    State::Active => {
                        let paused_in =
                            self.queues.get(&j.queue[..]).is_some_and(|q| q.pause.has(Pause::IN));
                        // An at-most-once job is queued anyway: it would
                        // never get another chance.
                        if paused_in && retry > 0 {
                            let q = self.gen.requeue_at(retry, now);
                            self.reg.at_mut(h).data.qtime = q;
                        } else {
                            let queued = self.enqueue_at(h, false, now) == Queued::Now;
                            // Indexed anew if it was queued; unchanged if not.
                            was = self.reg.wake_at(h);
                            if queued {
                                let j = self.reg.job_at(h);
                                out.push(Tick::Requeued(j.id, j.queue.clone()));
                            } else {
                                self.reg.at_mut(h).data.qtime = 0;
                            }
                        }
                    }
                    _ => self.reg.at_mut(h).data.qtime = 0,
                }
            }
            self.reg.reindex(h, Some(was));
            // A wake-up that left the job due again would spin; the index
            // always moves forward.
            let w = self.reg.wake_at(h);
            if w <= now {
                self.reg.at_mut(h).data.qtime = 0;
                self.reg.reindex(h, Some(w));
            }
        }
        n
    }

    /// The time of the next wake-up, if any, or earlier (a key left behind
    /// by a job that moved or went, which [`tick`](Self::tick) drops).
    pub fn next_wake(&self) -> Option<i64> {
        let job = self.reg.awake.first().map(|k| ((k >> 64) as u64 ^ (1 << 63)) as i64);
        let queue = self.reopen.first().map(|(t, _)| *t);
        match (job, queue) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The job's wake-up time as indexed.
    pub fn wake_time(&self, id: &JobId) -> Option<i64> {
        self.reg.find(id).map(|h| self.reg.wake_at(h))
    }

    /// Sets queue `name`'s pause flags; a queue is created only for a
    /// state other than none. Returns the state after the call.
    pub fn set_pause(&mut self, name: &[u8], to: Option<Pause>, now: i64) -> Pause {
        match to {
            None => self.queues.get(name).map_or(Pause::NONE, |q| q.pause),
            Some(p) if p == Pause::NONE && !self.queues.contains_key(name) => Pause::NONE,
            Some(p) => {
                let q = self.queue_entry(name, now);
                q.pause = p;
                p
            }
        }
    }

    /// Collects up to `budget` idle queues (empty, unpaused, idle for
    /// [`QUEUE_IDLE_GC_MS`], nobody blocked on them per `blocked`),
    /// walking the queues a slice per call. Returns how many went.
    pub fn collect_queues(
        &mut self,
        now: i64,
        visit: usize,
        blocked: impl Fn(&[u8]) -> bool,
    ) -> usize {
        let mut gone = Vec::new();
        let start = QueueName::new(&[]);
        let mut next = 0;
        for (seen, (k, name)) in self.qorder.range((self.gc_cursor, start)..).enumerate() {
            if seen == visit {
                next = *k;
                break;
            }
            let q = &self.queues[&name[..]];
            if q.is_empty()
                && q.pause == Pause::NONE
                && q.rate == 0
                && now - q.atime >= QUEUE_IDLE_GC_MS
                && !blocked(name)
            {
                gone.push((*k, name.clone()));
            }
        }
        self.gc_cursor = next;
        for (k, name) in &gone {
            self.qorder.remove(&(*k, name.clone()));
            self.queues.remove(&name[..]);
        }
        gone.len()
    }

    /// One step of JSCAN: jobs from `cursor` on for which `keep` holds, up
    /// to `count` results or `10 × count` jobs visited (and at most
    /// `100 × count` slots, so a slab emptied by deletions costs a bounded
    /// step); everything with `all`. The cursor is one more than the
    /// slot to resume from: a job present for the whole scan keeps its
    /// slot, so it is returned exactly once. Returns the next cursor (0:
    /// done) and the ids.
    pub fn scan_jobs(
        &self,
        cursor: u64,
        count: usize,
        all: bool,
        mut keep: impl FnMut(&JobRef) -> bool,
    ) -> (u64, Vec<JobId>) {
        let mut out = Vec::new();
        let start = usize::try_from(cursor.saturating_sub(1)).unwrap_or(usize::MAX);
        let slots = self.reg.chunks.len() * CHUNK;
        if start >= slots {
            return (0, out);
        }
        for (visits, (h, e)) in self.reg.from(start).enumerate() {
            let slot = h as usize;
            if !all
                && (out.len() >= count
                    || visits >= count.saturating_mul(10)
                    || slot - start >= count.saturating_mul(100))
            {
                return (slot as u64 + 1, out);
            }
            let j = JobRef { id: self.reg.id_at(h), data: &e.data };
            if keep(&j) {
                out.push(j.id);
            }
        }
        (0, out)
    }

    /// One step of QSCAN, as [`scan_jobs`](Self::scan_jobs) over queues.
    pub fn scan_queues(
        &self,
        cursor: u64,
        count: usize,
        all: bool,
        mut keep: impl FnMut(&Queue) -> bool,
    ) -> (u64, Vec<QueueName>) {
        let mut out = Vec::new();
        let start = QueueName::new(&[]);
        for (visits, (k, name)) in self.qorder.range((cursor, start)..).enumerate() {
            if !all && (out.len() >= count || visits >= count.saturating_mul(10)) {
                return (*k, out);
            }
            if keep(&self.queues[&name[..]]) {
                out.push(name.clone());
            }
        }
        (0, out)
    }

    /// Drops every job and queue.
    pub fn clear(&mut self) {
        self.reg.clear();
        self.queues.clear();
        self.qorder.clear();
        self.unique.clear();
        self.reopen.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn add(
        js: &mut Jobs,
        q: &str,
        body: &str,
        retry: u32,
        ttl: i64,
        delay: u32,
        now: i64,
    ) -> JobId {
        let id = js.new_id(ttl, i64::from(retry));
        let job = Job {
            id,
            data: JobData {
                queue: QueueName::new(q.as_bytes()),
                body: body.as_bytes().into(),
                state: State::Active,
                repl: 1,
                ctime: js.next_ctime(now),
                etime: now + ttl * 1000,
                delay,
                retry,
                qtime: now + i64::from(delay) * 1000,
                nacks: 0,
                deliveries: 0,
                flags: 0,
            },
        };
        js.insert(job, now);
        if delay == 0 {
            assert!(js.enqueue(&id, false, now));
        }
        id
    }

    #[test]
    fn fifo_fetch_and_retry() {
        let mut js = Jobs::new(b"abcdef0123", 7);
        let a = add(&mut js, "q", "a", 2, 100, 0, T0);
        let b = add(&mut js, "q", "b", 2, 100, 0, T0);
        assert_eq!(js.queue(b"q").unwrap().len(), 2);
        assert_eq!(js.fetch(b"q", T0), Some(a));
        assert_eq!(js.get(&a).unwrap().state, State::Active);
        let mut out = vec![];
        js.tick(T0 + 1000, 100, &mut out);
        assert!(out.is_empty());
        js.tick(T0 + 2300, 100, &mut out);
        assert!(matches!(&out[..], [Tick::Requeued(id, _)] if *id == a), "{out:?}");
        let j = js.get(&a).unwrap();
        assert_eq!((j.state, j.deliveries, j.nacks), (State::Queued, 1, 0));
        // The old job goes back before the younger one.
        assert_eq!(js.fetch(b"q", T0), Some(a));
        assert_eq!(js.fetch(b"q", T0), Some(b));
    }

    #[test]
    fn at_most_once_is_never_requeued() {
        let mut js = Jobs::new(b"00", 1);
        let a = add(&mut js, "q", "a", 0, 100, 0, T0);
        assert!(js.get(&a).unwrap().id.0.ends_with(b"0"));
        assert_eq!(js.fetch(b"q", T0), Some(a));
        assert!(!js.enqueue(&a, true, T0));
        let mut out = vec![];
        js.tick(T0 + 99_000, 100, &mut out);
        assert!(out.is_empty());
        js.tick(T0 + 100_000, 100, &mut out);
        assert!(matches!(&out[..], [Tick::Expired(_)]));
        assert!(js.is_empty());
    }

    #[test]
    fn delay_then_queue_counts_nothing() {
        let mut js = Jobs::new(b"00", 1);
        let a = add(&mut js, "q", "a", 5, 100, 3, T0);
        assert_eq!(js.get(&a).unwrap().state, State::Active);
        let mut out = vec![];
        js.tick(T0 + 3000, 100, &mut out);
        let j = js.get(&a).unwrap();
        assert_eq!((j.state, j.deliveries), (State::Queued, 0));
    }

    #[test]
    fn working_and_too_late() {
        let mut js = Jobs::new(b"00", 1);
        let a = add(&mut js, "q", "a", 10, 100, 0, T0);
        assert_eq!(js.working(&a, T0 + 1000), Ok(10));
        assert_eq!(js.get(&a).unwrap().state, State::Active);
        assert_eq!(js.working(&a, T0 + 50_001), Err(true));
        assert_eq!(js.working(&JobId::scan_floor(3), T0), Err(false));
    }

    #[test]
    fn scans_visit_everything_once_across_calls() {
        let mut js = Jobs::new(b"00", 1);
        let mut ids = BTreeSet::new();
        for i in 0..500 {
            ids.insert(add(&mut js, &format!("q{}", i % 37), "x", 1, 100, 0, T0));
        }
        let mut seen = BTreeSet::new();
        let mut c = 0;
        loop {
            let (next, got) = js.scan_jobs(c, 7, false, |_| true);
            seen.extend(got);
            if next == 0 {
                break;
            }
            c = next;
        }
        assert_eq!(seen, ids);
        let mut qs = BTreeSet::new();
        let mut c = 0;
        loop {
            let (next, got) = js.scan_queues(c, 5, false, |_| true);
            qs.extend(got);
            if next == 0 {
                break;
            }
            c = next;
        }
        assert_eq!(qs.len(), 37);
    }

    #[test]
    fn idle_queues_are_collected() {
        let mut js = Jobs::new(b"00", 1);
        js.touch_queue(b"idle", T0);
        js.set_pause(b"paused", Some(Pause::IN), T0);
        add(&mut js, "full", "x", 1, 1000, 0, T0);
        assert_eq!(js.collect_queues(T0 + QUEUE_IDLE_GC_MS - 1, 100, |_| false), 0);
        assert_eq!(js.collect_queues(T0 + QUEUE_IDLE_GC_MS, 100, |_| false), 1);
        assert!(js.queue(b"idle").is_none());
        assert_eq!(js.queues_len(), 2);
    }

    fn new_job<'a>(queue: &'a str, delay: i64, maxlen: usize) -> NewJob<'a> {
        NewJob {
            queue: queue.as_bytes(),
            body: b"body",
            repl: 1,
            ttl_secs: 100,
            delay_secs: delay,
            retry_secs: 10,
            maxlen,
            ext: Ext::default(),
            slot_tag: None,
        }
    }

    #[test]
    fn add_checks_the_queue_and_a_delayed_job_creates_none() {
        let mut js = Jobs::new(b"00", 1);
        let a = js.add(&new_job("q", 0, 1), T0).unwrap();
        assert_eq!(js.get(&a).unwrap().state, State::Queued);
        assert_eq!(js.add(&new_job("q", 0, 1), T0), Err(AddError::MaxLen));
        js.set_pause(b"q", Some(Pause::IN), T0);
        assert_eq!(js.add(&new_job("q", 0, 0), T0), Err(AddError::Paused));
        let d = js.add(&new_job("later", 5, 0), T0).unwrap();
        assert_eq!(js.get(&d).unwrap().state, State::Active);
        assert!(js.queue(b"later").is_none());
        let mut out = vec![];
        js.tick(T0 + 5000, 100, &mut out);
        assert_eq!(js.queue(b"later").map(Queue::len), Some(1));
        // Jobs of one queue share its name.
        let b = js.add(&new_job("later", 0, 0), T0).unwrap();
        assert!(QueueName::ptr_eq(&js.get(&d).unwrap().queue, &js.get(&b).unwrap().queue));
    }

    /// A chunk of slots fills one jemalloc size class (448 KiB) to within
    /// a slot.
    #[test]
    fn a_slot_is_72_bytes_and_a_chunk_fills_448_kib() {
        assert_eq!(std::mem::size_of::<JobData>(), 56);
        assert_eq!(std::mem::size_of::<Option<Entry>>(), 72);
        assert_eq!(CHUNK, 6_371);
        let bytes = CHUNK * std::mem::size_of::<Option<Entry>>();
        assert!(bytes <= 458_752 && bytes + 72 > 458_752);
    }

    /// Jobs made here are found by the handle in their ids, without the
    /// foreign table; read back into another node (a restart, a replica)
    /// they go to the same slots; jobs with other ids are still found.
    #[test]
    fn ids_carry_their_slot_across_a_reload() {
        let mut js = Jobs::new(b"00", 1);
        let ids: Vec<JobId> = (0..9000).map(|_| js.add(&new_job("q", 0, 0), T0).unwrap()).collect();
        for id in ids.iter().step_by(3) {
            assert!(js.delete(id).is_some());
        }
        assert!(js.reg.foreign.is_empty());
        for id in &ids {
            assert_eq!(js.reg.find(id).is_some(), js.get(id).is_some());
        }
        // Read back in slot order (an RDB file) and in reverse (replay).
        for rev in [false, true] {
            let mut copy = Jobs::new(b"11", 2);
            let mut all: Vec<Job> = js.iter().map(|j| j.to_job()).collect();
            if rev {
                all.reverse();
            }
            for j in all {
                copy.insert(j, T0);
            }
            assert!(copy.reg.foreign.is_empty());
            // Packed: the old run's node prefix joins the table.
            assert!(copy.reg.ids.is_empty());
            assert_eq!(copy.len(), 6000);
            for id in ids.iter().skip(1).step_by(3) {
                assert_eq!(copy.reg.find(id), js.reg.find(id));
            }
            // A foreign id, and a new job of the copy's own.
            let f = add(&mut copy, "q", "f", 1, 100, 0, T0);
            let n = copy.add(&new_job("q", 0, 0), T0).unwrap();
            assert_eq!(copy.reg.foreign.len(), 1);
            assert!(copy.get(&f).is_some() && copy.get(&n).is_some());
            assert!(copy.delete(&f).is_some());
            assert!(copy.reg.foreign.is_empty() && copy.get(&f).is_none());
            assert!(copy.reg.ids.is_empty());
            for j in js.iter() {
                assert_eq!(copy.get(&j.id).map(|c| c.to_job()), Some(j.to_job()));
            }
            assert_eq!(copy.iter().filter(|j| js.get(&j.id).is_some()).count(), 6000);
            assert_eq!(copy.queue(b"q").unwrap().len(), 6001);
        }
    }

    /// The job last made or fetched is found without a check of its
    /// packed id, until its slot is emptied: then neither it nor the next
    /// job in that slot is mistaken for the other.
    #[test]
    fn the_recent_job_is_forgotten_with_its_slot() {
        let mut js = Jobs::new(b"00", 1);
        let a = js.add(&new_job("q", 0, 0), T0).unwrap();
        assert_eq!(js.get(&a).unwrap().id, a);
        assert!(js.delete(&a).is_some());
        assert!(js.get(&a).is_none());
        let b = js.add(&new_job("q", 0, 0), T0).unwrap();
        assert_eq!(js.reg.find(&b), a.handle());
        assert!(js.get(&a).is_none());
        assert_eq!(js.fetch(b"q", T0), Some(b));
        assert!(js.get(&a).is_none());
        assert_eq!(js.iter().map(|j| j.id).collect::<Vec<_>>(), [b]);
        assert!(js.delete(&b).is_some() && js.get(&b).is_none() && js.is_empty());
    }

    /// Slots freed by deletions are reused; a scan still sees every job
    /// present throughout exactly once.
    #[test]
    fn slots_are_reused_and_scans_stay_exact() {
        let mut js = Jobs::new(b"00", 1);
        let ids: Vec<JobId> = (0..5000).map(|_| add(&mut js, "q", "x", 1, 100, 0, T0)).collect();
        for id in ids.iter().step_by(2) {
            assert!(js.delete(id).is_some());
        }
        let again: Vec<JobId> = (0..100).map(|_| add(&mut js, "q", "y", 1, 100, 0, T0)).collect();
        assert_eq!(js.len(), 2600);
        assert_eq!(js.reg.chunks.iter().map(Vec::len).sum::<usize>(), 5000);
        let mut seen = Vec::new();
        let mut c = 0;
        loop {
            let (next, got) = js.scan_jobs(c, 3, false, |_| true);
            seen.extend(got);
            if next == 0 {
                break;
            }
            c = next;
        }
        let n = seen.len();
        let seen: BTreeSet<JobId> = seen.into_iter().collect();
        assert_eq!(n, seen.len());
        let want: BTreeSet<JobId> = ids.iter().skip(1).step_by(2).chain(&again).copied().collect();
        assert_eq!(seen, want);
        assert_eq!(js.queue(b"q").unwrap().len(), 2600);
        assert_eq!(js.iter().count(), 2600);
    }
}
