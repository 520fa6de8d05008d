//! Databases, lock stripes, entries, expiry and WATCH marks.
//!
//! Each database is split into `stripes` lock stripes by cluster slot: a
//! stripe owns a contiguous range of slots, so hash-tagged keys share one.
//! Every stripe is guarded by its own mutex; a command locks the stripes of
//! its keys in ascending global order ([`Locks`]), which rules out deadlock
//! between threads.
//!
//! A database's stripes are allocated the first time a command locks one
//! of them (about 320 KiB for 1,024): of the sixteen databases most
//! servers use one or two, and an empty server costs what Redis's does.
//! A command that locks a whole database that has none (FLUSHALL, a
//! script without declared keys, a snapshot) holds the database's gate
//! instead, which keeps anyone from allocating them until it is done; to
//! allocate them, a command takes the gate in the lock order (just before
//! the database's first stripe).

use std::mem::ManuallyDrop;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;

use crate::keytable::KeyTable;
use crate::slot::{key_slot, SLOTS};
use crate::table::Table;
use crate::value::Value;

/// `expire_at` of a key without a TTL.
pub const NO_EXPIRE: i64 = -1;

/// Whose deadlines a command's reader obeys: what a key past its deadline
/// is to it. The caller says it when it locks ([`Locks::obey`]); the store
/// has no other way to know who reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Deadlines {
    /// A client's: a key past its deadline is gone (deleted, or on a
    /// replica hidden until its master deletes it).
    #[default]
    Enforced,
    /// A master's stream on a replica: the master decides when keys
    /// expire and sends `DEL`, so they stay live, as for Redis's master
    /// client.
    Master,
    /// An append-only file replaying: as Redis while loading, keys past
    /// their deadline stay live and a deadline in the past is stored, not
    /// acted on (the file's later commands were written while the key
    /// lived; it expires once loading ends).
    Loading,
}

/// What a key whose deadline passed is to its reader.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expired {
    /// A master's: it is deleted (and reported).
    Delete,
    /// A replica's client: it reads as missing but stays (Redis 3.2+).
    Hide,
    /// A replica's master stream: it is still there.
    Live,
}

/// One key's record in its stripe: the value and the access field. The
/// deadline of a key with a TTL is kept beside it, in the stripe's TTL
/// table (which active expiry samples), and only a bit says it is there:
/// a key without a TTL pays nothing for expiry, and reading it costs one
/// lookup. The entry's last word links it into its bucket's chain (and holds
/// the key table's tag for the key beside it).
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    /// Last access, in the server's LRU clock (seconds), or the LFU field.
    pub lru: u32,
    /// The next slot of the bucket's chain (26 bits), the key table's key
    /// tag (5 bits) and the has-TTL bit.
    link: u32,
}

/// The has-TTL bit of [`Entry::link`].
const TTL_BIT: u32 = 1 << 31;
/// Where the key table keeps its slot's key tag in [`Entry::link`]
/// (5 bits: the inline key's length, or "on the heap", or "free"), so that
/// the slot's whole 16-byte key area can hold key bytes.
const TAG_SHIFT: u32 = 26;
const TAG_BITS: u32 = 0x1f << TAG_SHIFT;
/// The chain link: 26 bits (64M slots a stripe, 1,024 stripes a database).
const NEXT_BITS: u32 = (1 << TAG_SHIFT) - 1;
/// End of a chain (and of the key table's free list).
pub(crate) const LINK_NIL: u32 = NEXT_BITS;

impl Entry {
    pub fn new(value: Value) -> Self {
        Entry { value, lru: 0, link: LINK_NIL }
    }

    /// Whether the key has a TTL (its deadline is in the stripe's TTL table).
    #[inline]
    pub fn has_ttl(&self) -> bool {
        self.link & TTL_BIT != 0
    }

    #[inline]
    pub(crate) fn set_ttl_bit(&mut self, on: bool) {
        self.link = if on { self.link | TTL_BIT } else { self.link & !TTL_BIT };
    }

    #[inline]
    pub(crate) fn next(&self) -> u32 {
        self.link & NEXT_BITS
    }

    #[inline]
    pub(crate) fn set_next(&mut self, next: u32) {
        self.link = (self.link & !NEXT_BITS) | next;
    }

    /// The key table's tag of the slot holding this entry.
    #[inline]
    pub(crate) fn key_tag(&self) -> u32 {
        (self.link & TAG_BITS) >> TAG_SHIFT
    }

    #[inline]
    pub(crate) fn set_key_tag(&mut self, tag: u32) {
        self.link = (self.link & !TAG_BITS) | (tag << TAG_SHIFT);
    }

    /// Takes over `old`'s place in its slot: its chain link and key tag
    /// (the TTL bit stays this entry's own).
    #[inline]
    pub(crate) fn adopt_link(&mut self, old: &Entry) {
        self.link = (self.link & TTL_BIT) | (old.link & !TTL_BIT);
    }
}

/// A key taken out of (or replaced in) its stripe, with its deadline.
#[derive(Clone, Debug)]
pub struct Record {
    pub value: Value,
    /// Absolute expiry in Unix milliseconds, or [`NO_EXPIRE`].
    pub expire_at: i64,
    pub lru: u32,
}

/// A key looked up for writing ([`Locks::entry`]): the live entry, or
/// the place where it would go.
pub enum Lookup<'s> {
    Live(&'s mut Entry),
    Absent(Absent<'s>),
}

/// No live key: [`insert`](Absent::insert) puts one where the lookup
/// ended, reusing the key's hash.
pub struct Absent<'s> {
    stripe: &'s mut Stripe,
    key: &'s [u8],
    h: u64,
    now: i64,
}

impl<'s> Absent<'s> {
    /// The key that was looked up.
    #[inline]
    pub fn key(&self) -> &'s [u8] {
        self.key
    }

    /// Inserts the key, marking watchers and readiness as
    /// [`Stripe::insert`] does. A key its reader saw as expired but that
    /// was only hidden (a replica's, or while clients are paused) is
    /// overwritten and reported expired, as [`Locks::insert`] does.
    #[inline]
    pub fn insert(self, value: Value, expire_at: i64, lru: u32) {
        let Absent { stripe, key, h, now } = self;
        if let Some(old) = stripe.insert_hashed(key, h, value, expire_at, lru) {
            if old.expire_at != NO_EXPIRE && old.expire_at <= now && !stripe.expiry_suspended() {
                stripe.note_expired(key);
            }
        }
    }
}

/// A flag a client watches; set when a watched key is modified.
pub type WatchFlag = Arc<AtomicBool>;

/// A client blocked on a key (BLPOP and friends). The store only queues
/// them, in arrival order, beside the key's stripe; the engine owns the
/// type behind it.
pub type Waiter = Arc<dyn std::any::Any + Send + Sync>;

/// Counters kept per stripe (under its lock) and summed when reported.
#[derive(Clone, Copy, Debug, Default)]
pub struct StripeStats {
    /// Keys deleted because their TTL passed (lazily or actively).
    pub expired_keys: u64,
}

/// The keys of one database that fall into one slot range.
#[repr(C)]
pub struct Stripe {
    map: KeyTable,
    /// The deadlines (Unix ms) of the keys with a TTL, which active expiry
    /// samples. Hashes with the same seed as `map`, so a key's hash serves
    /// both.
    ttl: Table<i64>,
    /// WATCHes per key: the client's flag, and whether the key was expired
    /// (not yet deleted) when watched or since (Redis's `wk->expired`): its
    /// deletion is then no logical change.
    watchers: Option<Box<Table<Vec<(WatchFlag, bool)>>>>,
    /// Clients blocked on keys of this stripe, per key in arrival order.
    /// Kept here, under the stripe's lock, so that checking "is anyone
    /// waiting for this key" costs one branch on the write path and a push
    /// can never slip between a blocking command's check and its wait.
    pub waiters: Option<Box<Table<std::collections::VecDeque<Waiter>>>>,
    /// Waited-for keys that changed since the stripe was locked (Redis's
    /// `signalKeyAsReady`); collected by [`Locks::take_signals`].
    ready: Vec<Box<[u8]>>,
    /// Keys deleted by lazy expiry since the stripe was locked, for the
    /// engine to report (events, propagation); collected by
    /// [`Locks::take_signals`].
    expired: Vec<Box<[u8]>>,
    pub stats: StripeStats,
    /// The store's replica flag ([`Store::set_replica`]), read only when a
    /// key is found past its deadline.
    replica: Arc<AtomicBool>,
    /// The store's expiry hold ([`Store::hold_expiry`]), read likewise.
    held_until: Arc<AtomicI64>,
    /// Whose deadlines its holder obeys: set by a [`Locks`] that obeys
    /// another's while it holds the stripe, `Enforced` otherwise.
    deadlines: Deadlines,
    /// On a writable replica, the keys its own clients gave a TTL (Redis's
    /// slaveKeysWithExpire): its master deletes the others through the
    /// stream, these only the replica's own expiry can
    /// ([`Store::expire_replica_keys`]). Boxed: one pointer in every
    /// stripe, where the set itself would add 48 bytes to all of them.
    #[allow(clippy::box_collection)]
    own_ttl: Option<Box<std::collections::HashSet<Box<[u8]>>>>,
}

impl Stripe {
    fn new(
        hasher: &ahash::RandomState,
        replica: Arc<AtomicBool>,
        held_until: Arc<AtomicI64>,
    ) -> Self {
        Stripe {
            replica,
            held_until,
            map: KeyTable::with_hasher(hasher.clone()),
            ttl: Table::with_hasher(hasher.clone()),
            watchers: None,
            waiters: None,
            ready: Vec::new(),
            expired: Vec::new(),
            stats: StripeStats::default(),
            deadlines: Deadlines::Enforced,
            own_ttl: None,
        }
    }

    /// A TTL set on `key` (called before it enters the TTL table): noted
    /// when a replica's own client set it.
    #[inline]
    fn ttl_set(&mut self, key: &[u8]) {
        // No key of the stripe has a TTL, so none of those noted has: the
        // replica's pass, which only visits stripes with TTLs, would have
        // forgotten them all (as Redis's expireSlaveKeys forgets a key it
        // finds without one); a key of the same name the master now gives
        // a TTL must not be taken for the replica's own.
        if self.ttl.is_empty() && self.own_ttl.is_some() {
            self.own_ttl = None;
        }
        if self.deadlines == Deadlines::Enforced && self.replica.load(Ordering::Relaxed) {
            self.own_ttl.get_or_insert_with(Default::default).insert(key.into());
        }
    }

    /// Deletes the keys of [`own_ttl`](Self::own_ttl) whose deadline
    /// passed, reporting each; forgets the ones gone or without a TTL.
    fn expire_own(&mut self, now: i64, mut on_expired: impl FnMut(&[u8])) -> usize {
        let Some(own) = self.own_ttl.take() else { return 0 };
        let mut kept = std::collections::HashSet::new();
        let mut n = 0;
        for k in own.into_iter() {
            let d = self.expire_of(&k);
            if d == NO_EXPIRE {
                continue;
            }
            if d <= now {
                self.delete_expired(&k);
                n += 1;
            } else {
                kept.insert(k);
            }
        }
        for k in self.expired.drain(..) {
            on_expired(&k);
        }
        if !kept.is_empty() {
            self.own_ttl = Some(Box::new(kept));
        }
        n
    }

    /// Number of keys (expired ones not yet deleted included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.ttl.len()
    }

    /// Looks up a live key; an expired key is deleted on the way.
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<&mut Entry> {
        let h = self.map.hash_of(key);
        self.get_hashed(key, h, now)
    }

    /// [`get`](Self::get) with the key's hash already known. A key without
    /// a TTL costs one lookup; one with a TTL a second, for its deadline.
    #[inline]
    pub fn get_hashed(&mut self, key: &[u8], h: u64, now: i64) -> Option<&mut Entry> {
        let i = self.live_index(key, h, now)?;
        self.map.entry_mut(i)
    }

    /// Looks up `key` for writing: the live entry, or the place to insert
    /// it with its hash already known (an expired key is deleted on the
    /// way, as [`get`](Self::get) does).
    #[inline]
    pub fn entry_hashed<'s>(&'s mut self, key: &'s [u8], h: u64, now: i64) -> Lookup<'s> {
        match self.live_index(key, h, now) {
            Some(i) => match self.map.entry_mut(i) {
                Some(e) => Lookup::Live(e),
                None => unreachable!("a live index holds an entry"),
            },
            None => Lookup::Absent(Absent { stripe: self, key, h, now }),
        }
    }

    /// The key table index of a live `key`; a key past its deadline is
    /// deleted (or hidden) on the way, as its reader's deadlines say.
    #[inline]
    fn live_index(&mut self, key: &[u8], h: u64, now: i64) -> Option<u32> {
        let (i, ttl) = self.map.find_hashed(key, h)?;
        if ttl && self.deadline(key, h) <= now {
            match self.on_expired(now) {
                Expired::Delete => {
                    self.delete_expired(key);
                    return None;
                }
                Expired::Hide => return None,
                Expired::Live => {}
            }
        }
        Some(i)
    }

    /// What a key found past its deadline is to this thread.
    #[cold]
    fn on_expired(&self, now: i64) -> Expired {
        if self.deadlines == Deadlines::Loading {
            Expired::Live
        } else if !self.replica.load(Ordering::Relaxed) {
            // While clients are paused the data set holds still: expired
            // keys read as missing but are not deleted (Redis 7.0).
            if now < self.held_until.load(Ordering::Relaxed) {
                Expired::Hide
            } else {
                Expired::Delete
            }
        } else if self.deadlines == Deadlines::Master {
            Expired::Live
        } else {
            Expired::Hide
        }
    }

    /// Whether deadlines are suspended for the stripe's holder: a replica
    /// applying its master's stream, or an append-only file loading.
    pub fn expiry_suspended(&self) -> bool {
        match self.deadlines {
            Deadlines::Enforced => false,
            Deadlines::Master => self.replica.load(Ordering::Relaxed),
            Deadlines::Loading => true,
        }
    }

    /// The deadline of a key whose entry has the TTL bit.
    #[inline]
    fn deadline(&self, key: &[u8], h: u64) -> i64 {
        self.ttl.index_of_hashed(key, h).and_then(|i| self.ttl.at(i)).map_or(NO_EXPIRE, |(_, d)| *d)
    }

    /// The expiry of `key` (Unix ms), or [`NO_EXPIRE`] when it has none or
    /// does not exist; expired keys are not deleted here.
    pub fn expire_of(&self, key: &[u8]) -> i64 {
        self.ttl.get(key).copied().unwrap_or(NO_EXPIRE)
    }

    /// Whether a live key exists (expiring it lazily if due).
    pub fn contains(&mut self, key: &[u8], now: i64) -> bool {
        self.get(key, now).is_some()
    }

    /// Looks at an entry without expiring it (for introspection paths that
    /// must not delete, such as SCAN's filter, and for snapshots).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.map.get(key)
    }

    /// Whether `key` exists and its deadline has passed (it is not deleted).
    pub fn is_expired(&self, key: &[u8], now: i64) -> bool {
        let d = self.expire_of(key);
        d != NO_EXPIRE && d <= now && !self.expiry_suspended()
    }

    fn delete_expired(&mut self, key: &[u8]) {
        self.map.remove(key);
        self.ttl.remove(key);
        self.stats.expired_keys += 1;
        self.modified(key);
        self.expired.push(key.into());
    }

    /// Counts and reports a key found expired as it was overwritten.
    #[cold]
    fn note_expired(&mut self, key: &[u8]) {
        self.stats.expired_keys += 1;
        self.expired.push(key.into());
    }

    /// What every change of `key` owes the clients that care: its watchers
    /// are marked (Redis's `signalModifiedKey`) and, if clients are blocked
    /// on it, it is queued as ready (`signalKeyAsReady`). Two branches when
    /// nobody watches or waits in this stripe.
    #[inline]
    pub fn modified(&mut self, key: &[u8]) {
        self.touch(key);
        self.readied(key);
    }

    /// Makes `key` ready for its blocked clients without marking its
    /// watchers (a change Redis signals as ready but not as modified).
    pub fn readied(&mut self, key: &[u8]) {
        if self.waiters.is_some() {
            self.signal_ready(key);
        }
    }

    /// Whether nobody watches or waits on any key here (then
    /// [`modified`](Self::modified) has nothing to do).
    #[inline]
    pub fn quiet(&self) -> bool {
        self.watchers.is_none() && self.waiters.is_none()
    }

    /// Inserts or overwrites a key with the given expiry; marks watchers
    /// and readiness ([`modified`](Self::modified)). Returns the previous
    /// entry, if any (expired or not). The rest of the change (dirty
    /// count, event, propagation) is the engine's to record.
    pub fn insert(&mut self, key: &[u8], value: Value, expire_at: i64, lru: u32) -> Option<Record> {
        let h = self.map.hash_of(key);
        self.insert_hashed(key, h, value, expire_at, lru)
    }

    /// [`insert_hashed`](Self::insert_hashed) with the hash if known,
    /// else [`insert`](Self::insert).
    #[inline(always)]
    fn insert_with(
        &mut self,
        key: &[u8],
        h: Option<u64>,
        value: Value,
        expire_at: i64,
        lru: u32,
    ) -> Option<Record> {
        let h = h.unwrap_or_else(|| self.map.hash_of(key));
        self.insert_hashed(key, h, value, expire_at, lru)
    }

    /// [`insert`](Self::insert) for a key read from a snapshot: on a
    /// replica it is its master's (a full sync's payload) or its own
    /// file's, never a TTL its own client set, so it is not noted for the
    /// replica's expiry (Redis's loader has no client).
    pub fn insert_loaded(&mut self, key: &[u8], value: Value, expire_at: i64, lru: u32) {
        let holder = std::mem::replace(&mut self.deadlines, Deadlines::Loading);
        self.insert(key, value, expire_at, lru);
        self.deadlines = holder;
    }

    /// [`insert`](Self::insert) with the key's hash already known.
    pub fn insert_hashed(
        &mut self,
        key: &[u8],
        h: u64,
        value: Value,
        expire_at: i64,
        lru: u32,
    ) -> Option<Record> {
        let mut e = Entry { value, lru, link: LINK_NIL };
        let ttl = expire_at != NO_EXPIRE;
        e.set_ttl_bit(ttl);
        let old = self.map.insert_hashed(key, h, e);
        // The TTL table is touched only when the new or the old key has a
        // TTL: overwriting a plain key with a plain value costs nothing here.
        let old_deadline = if ttl {
            self.ttl_set(key);
            self.ttl.insert_hashed(key, h, expire_at).1
        } else if old.as_ref().is_some_and(Entry::has_ttl) {
            self.ttl.remove(key).map(|(_, d)| d)
        } else {
            None
        };
        self.modified(key);
        old.map(|o| Record {
            expire_at: if o.has_ttl() { old_deadline.unwrap_or(NO_EXPIRE) } else { NO_EXPIRE },
            value: o.value,
            lru: o.lru,
        })
    }

    /// Removes a key; marks watchers when it existed.
    pub fn remove(&mut self, key: &[u8]) -> Option<Record> {
        let e = self.map.remove(key)?;
        let expire_at = if e.has_ttl() {
            self.ttl.remove(key).map_or(NO_EXPIRE, |(_, d)| d)
        } else {
            NO_EXPIRE
        };
        self.touch(key);
        Some(Record { value: e.value, lru: e.lru, expire_at })
    }

    /// Sets or clears the TTL of an existing key. Returns false if absent.
    pub fn set_expire(&mut self, key: &[u8], expire_at: i64) -> bool {
        let h = self.map.hash_of(key);
        let Some(i) = self.map.index_of_hashed(key, h) else { return false };
        let Some((_, e)) = self.map.at_mut(i) else { return false };
        let had = e.has_ttl();
        e.set_ttl_bit(expire_at != NO_EXPIRE);
        if expire_at != NO_EXPIRE {
            self.ttl_set(key);
            self.ttl.insert_hashed(key, h, expire_at);
        } else if had {
            self.ttl.remove(key);
        }
        self.touch(key);
        true
    }

    /// Marks the watchers of `key`, as Redis's `signalModifiedKey`.
    #[inline]
    pub fn touch(&mut self, key: &[u8]) {
        if let Some(w) = &mut self.watchers {
            if let Some(flags) = w.get_mut(key) {
                let gone = !self.map.contains_key(key);
                for (f, expired) in flags {
                    if *expired && gone {
                        // An expired key deleted: no logical change.
                        *expired = false;
                    } else {
                        f.store(true, Ordering::Release);
                    }
                }
            }
        }
    }

    /// Registers `flag` as watching `key`; `expired`: the key exists but
    /// its deadline passed.
    pub fn watch(&mut self, key: &[u8], flag: &WatchFlag, expired: bool) {
        let w = self.watchers.get_or_insert_with(Default::default);
        match w.get_mut(key) {
            Some(v) => {
                if !v.iter().any(|(f, _)| Arc::ptr_eq(f, flag)) {
                    v.push((flag.clone(), expired));
                }
            }
            None => {
                w.insert(key, vec![(flag.clone(), expired)]);
            }
        }
    }

    /// Whether `flag`'s WATCH of `key` counts the key as expired (an EXEC
    /// then does not fail for its deadline having passed).
    pub fn watched_expired(&self, key: &[u8], flag: &WatchFlag) -> bool {
        self.watchers
            .as_ref()
            .and_then(|w| w.get(key))
            .is_some_and(|v| v.iter().any(|(f, e)| *e && Arc::ptr_eq(f, flag)))
    }

    /// Removes `flag` from `key`'s watchers.
    pub fn unwatch(&mut self, key: &[u8], flag: &WatchFlag) {
        let Some(w) = &mut self.watchers else { return };
        let empty = match w.get_mut(key) {
            Some(v) => {
                v.retain(|(f, _)| !Arc::ptr_eq(f, flag));
                v.is_empty()
            }
            None => false,
        };
        if empty {
            w.remove(key);
        }
        if w.is_empty() {
            self.watchers = None;
        }
    }

    /// Marks the watchers of every watched key that exists here or in
    /// `other` (FLUSHDB, FLUSHALL, SWAPDB).
    ///
    /// As Redis's touchAllWatchedKeysInDb: a key that was expired when
    /// watched and is now gone, or replaced by another expired key, is no
    /// change; nor is a missing key replaced by an expired one (which
    /// counts as expired from then on). `now` tells expired keys.
    pub fn touch_existing_watched(&mut self, other: Option<&Stripe>, now: i64) {
        let Some(w) = &mut self.watchers else { return };
        for (k, flags) in w.iter_mut() {
            let here = self.map.contains_key(k);
            let there = other.is_some_and(|o| o.map.contains_key(k));
            if !here && !there {
                continue;
            }
            let there_expired = there && other.is_some_and(|o| o.is_expired(k, now));
            for (f, expired) in flags.iter_mut() {
                if *expired {
                    if !there {
                        *expired = false;
                        continue;
                    }
                    if there_expired {
                        continue;
                    }
                } else if !here && there_expired {
                    *expired = true;
                    continue;
                }
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Deletes every key; returns how many there were. Watchers stay;
    /// waited-for keys that go are signalled (a group reader ends with an
    /// error, as Redis 7.0 signals deleted streams on a flush).
    pub fn clear(&mut self) -> usize {
        let n = self.map.len();
        self.touch_existing_watched(None, 0);
        self.signal_existing_waited();
        self.map.clear();
        self.ttl.clear();
        self.own_ttl = None;
        n
    }

    /// [`clear`](Self::clear) that hands the keys back instead of freeing
    /// them (FLUSHALL ASYNC frees them on another thread): the count and
    /// the detached tables.
    pub fn detach_all(&mut self) -> (usize, Box<dyn Send>) {
        let n = self.map.len();
        self.touch_existing_watched(None, 0);
        self.signal_existing_waited();
        let map = self.map.take_all();
        let ttl = self.ttl.take();
        (n, Box::new((map, ttl)))
    }

    /// Exchanges keys (not watchers, waiters or stats) with another stripe
    /// (SWAPDB). Blocked clients stay with their database number, so keys
    /// they wait for that arrive with the swap become ready, and so do
    /// the ones that leave with it (a group reader whose stream went ends
    /// with an error, as in Redis 7.0); serving finds out which.
    pub fn swap_data(&mut self, other: &mut Stripe, now: i64) {
        self.touch_existing_watched(Some(other), now);
        other.touch_existing_watched(Some(self), now);
        self.signal_existing_waited();
        other.signal_existing_waited();
        std::mem::swap(&mut self.map, &mut other.map);
        std::mem::swap(&mut self.ttl, &mut other.ttl);
        self.signal_existing_waited();
        other.signal_existing_waited();
    }

    /// Records that a waited-for `key` may now be served.
    fn signal_ready(&mut self, key: &[u8]) {
        let waited = self.waiters.as_ref().is_some_and(|w| w.contains_key(key));
        if waited && !self.ready.iter().any(|k| &**k == key) {
            self.ready.push(key.into());
        }
    }

    /// Signals every waited-for key that holds a value.
    fn signal_existing_waited(&mut self) {
        let Some(w) = &self.waiters else { return };
        let keys: Vec<Box<[u8]>> =
            w.iter().filter(|(k, _)| self.map.contains_key(k)).map(|(k, _)| k.into()).collect();
        for k in keys {
            self.signal_ready(&k);
        }
    }

    /// Queues a blocked client on `key`.
    pub fn add_waiter(&mut self, key: &[u8], w: Waiter) {
        let t = self.waiters.get_or_insert_with(Default::default);
        match t.get_mut(key) {
            Some(q) => q.push_back(w),
            None => {
                t.insert(key, std::collections::VecDeque::from([w]));
            }
        }
    }

    /// Removes every queue entry of `key` for which `gone` holds.
    pub fn remove_waiters(&mut self, key: &[u8], mut gone: impl FnMut(&Waiter) -> bool) {
        let Some(t) = &mut self.waiters else { return };
        let empty = match t.get_mut(key) {
            Some(q) => {
                q.retain(|w| !gone(w));
                q.is_empty()
            }
            None => false,
        };
        if empty {
            t.remove(key);
        }
        if t.is_empty() {
            self.waiters = None;
        }
    }

    /// Iterates over all entries, expired ones included.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.map.iter()
    }

    /// [`iter`](Self::iter) with each key's expiry ([`NO_EXPIRE`] if none).
    pub fn iter_expiring(&self) -> impl Iterator<Item = (&[u8], &Entry, i64)> {
        self.map
            .iter()
            .map(|(k, e)| (k, e, if e.has_ttl() { self.expire_of(k) } else { NO_EXPIRE }))
    }

    /// One SCAN step over this stripe's table.
    pub fn scan(&self, cursor: u64, visit: impl FnMut(&[u8], &Entry)) -> u64 {
        self.map.scan(cursor, visit)
    }

    /// A random key (possibly expired; the caller checks).
    pub fn random_key(&self, rand: impl FnMut() -> u64) -> Option<&[u8]> {
        let i = self.map.random_index(rand)?;
        self.map.at(i).map(|(k, _)| k)
    }

    /// Samples up to `n` keys with a TTL and deletes the expired ones.
    /// Returns (sampled, expired).
    pub fn expire_sample(
        &mut self,
        n: usize,
        now: i64,
        mut rand: impl FnMut() -> u64,
        mut on_expired: impl FnMut(&[u8]),
    ) -> Sample {
        let mut out = Sample::default();
        let mut due: SmallVec<[Box<[u8]>; 20]> = SmallVec::new();
        let take = n.min(self.ttl.len());
        for _ in 0..take {
            let Some(i) = self.ttl.random_index(&mut rand) else { break };
            let Some((k, &at)) = self.ttl.at(i) else { break };
            out.sampled += 1;
            if at <= now {
                if !due.iter().any(|d| **d == *k) {
                    due.push(k.into());
                }
            } else {
                out.ttl_sum += at - now;
                out.ttl_keys += 1;
            }
        }
        for k in due {
            self.delete_expired(&k);
            out.expired += 1;
        }
        for k in self.expired.drain(..) {
            on_expired(&k);
        }
        out
    }
}

/// What one [`Stripe::expire_sample`] saw: keys sampled and expired, and
/// the remaining TTLs of the others (INFO's `avg_ttl`, as Redis
/// estimates it from its own expiry samples).
#[derive(Default, Clone, Copy)]
pub struct Sample {
    pub sampled: usize,
    pub expired: usize,
    pub ttl_sum: i64,
    pub ttl_keys: i64,
}

/// A stripe and what can be known of it without its lock. Aligned to a
/// cache line, with the hints, the lock word and the head of the key table
/// first.
#[repr(C, align(64))]
struct Slot {
    /// Bucket array address and mask of the stripe's table as of its last
    /// release: only ever used as a prefetch address, never dereferenced
    /// without the lock, so a stale value costs a useless prefetch at most.
    buckets: AtomicPtr<u8>,
    /// The bucket mask, shifted left by 2 above log2 of a bucket's size.
    mask: AtomicUsize,
    /// Keys with a TTL, as of the last time a command released the stripe;
    /// lets active expiry skip stripes without locking them.
    ttl_hint: AtomicU32,
    /// Keys, as of the last release (DBSIZE, INFO, SCAN skipping empty
    /// stripes without locking them).
    len_hint: AtomicU32,
    /// The stripe's counters as of the last release (INFO).
    expired_hint: AtomicU64,
    stripe: Mutex<Stripe>,
}

impl Slot {
    /// Publishes what others may read without the lock. Called with the
    /// stripe locked, just before unlocking it.
    /// Returns whether the stripe now has TTL keys when that changed.
    #[inline]
    /// Also returns whether the stripe now holds something it did not at
    /// its previous publication (then it is marked written).
    fn publish(&self, s: &Stripe) -> (Option<bool>, bool) {
        let ttl = s.expires_len() as u32;
        let had = self.ttl_hint.load(Ordering::Relaxed) > 0;
        // Any key or count makes a stripe written (keys also arrive with
        // SWAPDB, which swaps tables).
        let was = self.len_hint.load(Ordering::Relaxed) > 0
            || self.expired_hint.load(Ordering::Relaxed) > 0;
        let is = !s.is_empty() || s.stats.expired_keys > 0;
        let first_write = is && !was;
        self.ttl_hint.store(ttl, Ordering::Relaxed);
        self.len_hint.store(s.len() as u32, Ordering::Release);
        self.expired_hint.store(s.stats.expired_keys, Ordering::Relaxed);
        ((had != (ttl > 0)).then_some(ttl > 0), first_write)
    }
}

/// One stripe locked on its own ([`Store::lock_stripe`]).
pub struct StripeGuard<'a> {
    store: &'a Store,
    id: u32,
    guard: MutexGuard<'a, Stripe>,
}

impl std::ops::Deref for StripeGuard<'_> {
    type Target = Stripe;
    fn deref(&self) -> &Stripe {
        &self.guard
    }
}

impl std::ops::DerefMut for StripeGuard<'_> {
    fn deref_mut(&mut self) -> &mut Stripe {
        &mut self.guard
    }
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        self.store.publish(self.id, &self.guard);
    }
}

/// A stripe's sizes and counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StripeCounts {
    /// Keys, expired ones not yet deleted included.
    pub keys: usize,
    /// Keys with a TTL.
    pub expires: usize,
    pub expired: u64,
}

/// A key's stripe and hash, computed before its stripe is locked, to
/// prefetch what its command will touch.
#[derive(Clone, Copy, Debug)]
pub struct Prefetch {
    id: u32,
    /// The key is longer than a key slot holds inline: its bytes are
    /// behind a pointer, and worth a prefetch stage of their own.
    long: bool,
    /// The same key as the request's before it ([`Prefetch::after`]): the
    /// prefetch stages skip it.
    repeat: bool,
    hash: u64,
}

impl Prefetch {
    /// Global lock id of the key's stripe.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Whether the request before this one named the same key
    /// ([`after`](Self::after)).
    #[inline]
    pub fn repeats(&self) -> bool {
        self.repeat
    }

    /// Whether `other` is (all but surely) a token of the same key: the
    /// same stripe and hash.
    #[inline]
    pub fn same_key(&self, other: &Prefetch) -> bool {
        self.id == other.id && self.hash == other.hash
    }

    /// This token, marked as a repeat when `prev` (the token of the
    /// request before it) is of the same key: what its command reads is
    /// what `prev`'s stages fetch, so its own would only take the
    /// stripe's lock again to find it in cache (every request of a
    /// pipelined LPUSH, HSET or SADD to one key).
    #[inline]
    pub fn after(mut self, prev: Option<Prefetch>) -> Prefetch {
        self.repeat = prev.is_some_and(|p| p.same_key(&self));
        self
    }
}

/// The serialiser of a point-in-time snapshot (`docs/architecture.md`, *Durability*), supplied by
/// the persistence layer so that the store does not depend on it.
pub trait SnapshotHook: Send + Sync {
    /// Called once per stripe and snapshot, with the stripe locked and
    /// before anything changes it: the stripe as it was when the snapshot
    /// began.
    fn capture(&self, db: usize, stripe: &Stripe);
}

impl Drop for Store {
    fn drop(&mut self) {
        for db in 0..=self.databases {
            let base = *self.slot_ptrs[db * self.stripes].get_mut();
            if !base.is_null() {
                // SAFETY: the `Box<[Slot]>` `allocate` leaked, with the
                // same length; nothing borrows the store any more.
                drop(unsafe {
                    Box::from_raw(std::ptr::slice_from_raw_parts_mut(base, self.db_len(db)))
                });
            }
        }
    }
}

/// A snapshot in progress: the stripes not yet captured.
struct Snapshot {
    hook: Arc<dyn SnapshotHook>,
    pending: Box<[AtomicU64]>,
    /// Captures begun and not yet handed to `hook` in full: counted
    /// before a stripe's pending bit is taken, so the saver, which passes
    /// over a stripe whose bit is gone without locking it, knows when
    /// every capture it passed over is in the hook's hands
    /// ([`Store::snapshot_settled`]).
    in_flight: AtomicUsize,
}

/// The whole keyspace: `databases` databases of `stripes` stripes each,
/// then one stripe of its own for the job queue's namespace (`docs/jobs.md`):
/// its lock id, [`Store::jobs_id`], is above every database stripe's, so
/// EXEC, scripts and the snapshot order it with everything else, and
/// clients blocked on job queues wait in its waiter table. It holds no
/// keys: the jobs themselves live in the engine, guarded by this lock.
pub struct Store {
    /// Per global lock id (every database's stripes, then the job
    /// namespace's one, allocated from the start), its stripe's slot: null
    /// until something locks a stripe of its database, which allocates
    /// all of them as one `Box<[Slot]>`, leaked and freed only when the
    /// store drops (from its first stripe's pointer). One pointer per
    /// stripe (128 KiB for 16 x 1,024) rather than one per database: every
    /// lock, release and prefetch looks a slot up, and this is one load
    /// and a null test more than indexing an array of slots (a pointer
    /// per database, or a `OnceLock` per database, cost GET 4-6% more
    /// instructions).
    slot_ptrs: Box<[AtomicPtr<Slot>]>,
    /// Per database (and the job namespace), taken to allocate its
    /// stripes, and held instead of them by a command that locks the
    /// whole database while it has none.
    gates: Box<[Mutex<()>]>,
    databases: usize,
    stripes: usize,
    /// log2 of `stripes` (a power of two): a global id's database is
    /// `id >> stripe_bits`, without a division on every lock.
    stripe_bits: u32,
    /// `slot >> shift` is the stripe of a slot.
    shift: u32,
    /// Whether a key's stripe is its cluster slot's (one stripe per slot:
    /// a cluster node, whose slots move between nodes stripe by stripe),
    /// or taken from the key's hash, the one the stripe's table uses
    /// (elsewhere): one hash of a key per command, not a CRC16 and a hash.
    by_slot: bool,
    /// `DEBUG SET-ACTIVE-EXPIRE`.
    pub active_expire: AtomicBool,
    /// `active-expire-effort` (1..=10), set by the engine from its
    /// configuration before each pass.
    pub active_expire_effort: AtomicU32,
    /// Per database, the running estimate of the remaining TTL of keys
    /// with one, in ms (Redis's `db->avg_ttl`; 0 until sampled).
    avg_ttl: Box<[AtomicI64]>,
    rand_state: AtomicU64,
    /// The hash seed every stripe's table shares (see [`Prefetch`]).
    hasher: ahash::RandomState,
    /// One bit per global stripe id: the stripe had TTL keys at its last
    /// release. Active expiry walks these words instead of every stripe.
    ttl_stripes: Box<[AtomicU64]>,
    /// One bit per global stripe id: the stripe was ever written to. The
    /// others hold no key and count nothing, so DBSIZE and INFO skip them
    /// (with data in one database, 15/16 of the stripes).
    written_stripes: Box<[AtomicU64]>,
    /// Set while a snapshot runs: every lock of a stripe then checks
    /// whether the stripe still has to be captured (one relaxed load on
    /// the hot path otherwise).
    snapshot_on: AtomicBool,
    snapshot: parking_lot::RwLock<Option<Arc<Snapshot>>>,
    /// Set while the server follows a master: keys past their deadline
    /// are not deleted (see [`Deadlines`]).
    replica: Arc<AtomicBool>,
    /// Until when (Unix ms) no key is deleted for its deadline, neither
    /// lazily nor by active expiry (CLIENT PAUSE).
    held_until: Arc<AtomicI64>,
}

impl Store {
    /// `stripes` is rounded to a power of two between 1 and 16384.
    pub fn new(databases: usize, stripes: usize) -> Self {
        let stripes = stripes.clamp(1, SLOTS).next_power_of_two();
        let shift = (SLOTS / stripes).trailing_zeros();
        let hasher = ahash::RandomState::new();
        let replica = Arc::new(AtomicBool::new(false));
        let held_until = Arc::new(AtomicI64::new(0));
        let slot_ptrs = (0..databases.max(1) * stripes + 1)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        let gates = (0..=databases.max(1)).map(|_| Mutex::new(())).collect();
        let words = (databases.max(1) * stripes + 1).div_ceil(64);
        let store = Store {
            slot_ptrs,
            gates,
            databases: databases.max(1),
            ttl_stripes: (0..words).map(|_| AtomicU64::new(0)).collect(),
            written_stripes: (0..words).map(|_| AtomicU64::new(0)).collect(),
            snapshot_on: AtomicBool::new(false),
            snapshot: parking_lot::RwLock::new(None),
            stripes,
            stripe_bits: stripes.trailing_zeros(),
            shift,
            by_slot: stripes == SLOTS,
            active_expire: AtomicBool::new(true),
            active_expire_effort: AtomicU32::new(1),
            avg_ttl: (0..databases.max(1)).map(|_| AtomicI64::new(0)).collect(),
            rand_state: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
            hasher,
            replica,
            held_until,
        };
        // The job namespace's stripe exists from the start.
        store.allocate(store.databases);
        store
    }

    /// `n` empty stripes.
    fn new_slots(&self, n: usize) -> Box<[Slot]> {
        (0..n)
            .map(|_| Slot {
                stripe: Mutex::new(Stripe::new(
                    &self.hasher,
                    self.replica.clone(),
                    self.held_until.clone(),
                )),
                ttl_hint: AtomicU32::new(0),
                len_hint: AtomicU32::new(0),
                expired_hint: AtomicU64::new(0),
                buckets: AtomicPtr::new(std::ptr::null_mut()),
                mask: AtomicUsize::new(0),
            })
            .collect()
    }

    /// Whether database `db`'s stripes exist (something locked one of
    /// them since start-up). A database without is empty.
    #[inline]
    pub fn db_allocated(&self, db: usize) -> bool {
        db <= self.databases && !self.db_base(db).is_null()
    }

    /// Database `db`'s first slot (null until allocated). Its pointer is
    /// published last: once it is set, every stripe's is.
    #[inline]
    fn db_base(&self, db: usize) -> *mut Slot {
        self.slot_ptrs[db * self.stripes].load(Ordering::Acquire)
    }

    /// How many stripes database `db` has once allocated (the job
    /// namespace, numbered after the last database, has one).
    fn db_len(&self, db: usize) -> usize {
        if db == self.databases {
            1
        } else {
            self.stripes
        }
    }

    /// Allocates database `db`'s stripes if it has none. The caller holds
    /// the database's gate (or is `new`, alone with the store): two
    /// allocations of one database never race.
    #[cold]
    fn allocate(&self, db: usize) -> &[Slot] {
        if let Some(slots) = self.db_slots(db) {
            return slots;
        }
        let n = self.db_len(db);
        let base = Box::into_raw(self.new_slots(n)) as *mut Slot;
        let first = db * self.stripes;
        // The first stripe's pointer last: `db_allocated` reads it alone.
        for i in (0..n).rev() {
            self.slot_ptrs[first + i].store(base.wrapping_add(i), Ordering::Release);
        }
        self.db_slots(db).unwrap_or(&[])
    }

    /// Marks the store as a replica's (or a master's again): on a replica
    /// no key is deleted for its deadline; clients read such keys as
    /// missing and the master's stream sees them (Redis 3.2+).
    pub fn set_replica(&self, on: bool) {
        self.replica.store(on, Ordering::Release);
    }

    /// Holds expiry until `until_ms` (Unix ms; 0 ends the hold): while
    /// clients are paused, keys past their deadline read as missing but
    /// are neither deleted lazily nor by active expiry, as in Redis 7.0.
    pub fn hold_expiry(&self, until_ms: i64) {
        self.held_until.store(until_ms, Ordering::Relaxed);
    }

    /// Whether expiry is held at `now` ([`hold_expiry`](Self::hold_expiry)).
    /// Read with a stripe held, a hold set before the stripe's last
    /// release is seen.
    #[inline]
    pub fn expiry_held(&self, now: i64) -> bool {
        now < self.held_until.load(Ordering::Relaxed)
    }

    /// Whether the store is a replica's.
    #[inline]
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Relaxed)
    }

    pub fn databases(&self) -> usize {
        self.databases
    }

    /// The lock id of the job namespace's stripe: above every database's.
    #[inline]
    pub fn jobs_id(&self) -> u32 {
        (self.databases * self.stripes) as u32
    }

    /// The stripe (global id) where clients wait for `key` of namespace
    /// `ns`: a database's stripe for its keys, or the job namespace's one
    /// stripe for a queue name when `jobs`.
    #[inline]
    pub fn wait_id(&self, db: usize, key: &[u8], jobs: bool) -> u32 {
        if jobs {
            self.jobs_id()
        } else {
            self.global_id(db, self.stripe_of(key))
        }
    }

    /// Stripes per database.
    pub fn stripes(&self) -> usize {
        self.stripes
    }

    /// The database of global stripe id `id` (the job namespace's id gives
    /// the number of databases).
    #[inline]
    pub fn db_of(&self, id: u32) -> usize {
        (id >> self.stripe_bits) as usize
    }

    /// Stripe index (within a database) of a key.
    #[inline]
    pub fn stripe_of(&self, key: &[u8]) -> u32 {
        if self.by_slot {
            u32::from(key_slot(key)) >> self.shift
        } else {
            self.stripe_of_hash(self.hasher.hash_one(key))
        }
    }

    /// The stripe of a key whose hash is `hash`, outside cluster mode: the
    /// hash's top bits (a stripe's table takes its buckets from the low
    /// ones, so the keys of one stripe still spread over its buckets).
    #[inline]
    fn stripe_of_hash(&self, hash: u64) -> u32 {
        (hash.rotate_left(self.stripe_bits) as u32) & (self.stripes as u32 - 1)
    }

    /// Global lock order id of (db, stripe).
    #[inline]
    pub fn global_id(&self, db: usize, stripe: u32) -> u32 {
        (db * self.stripes) as u32 + stripe
    }

    /// The slots of database `db`, if it has any.
    fn db_slots(&self, db: usize) -> Option<&[Slot]> {
        if db > self.databases {
            return None;
        }
        let base = self.db_base(db);
        if base.is_null() {
            return None;
        }
        // SAFETY: a non-null base is a leaked `Box<[Slot]>` of
        // `db_len(db)` slots, published with Release after it was built
        // and freed only by `Store`'s drop.
        Some(unsafe { std::slice::from_raw_parts(base, self.db_len(db)) })
    }

    /// Stripe `id`'s slot, if its database has its stripes: on every
    /// lock, a load and a null test.
    #[inline(always)]
    fn slot_if(&self, id: u32) -> Option<&Slot> {
        let p = self.slot_ptrs.get(id as usize)?.load(Ordering::Acquire);
        // SAFETY: a non-null pointer points into a leaked `Box<[Slot]>`,
        // fully built before the pointer was published (Release) and freed
        // only by `Store`'s drop.
        unsafe { p.as_ref() }
    }

    /// Stripe `id`'s slot, allocating its database's stripes if needed
    /// (waiting for its gate: for callers that hold no stripe or gate
    /// after it in the lock order, such as [`lock_stripe`](Self::lock_stripe)).
    #[inline]
    fn slot(&self, id: u32) -> &Slot {
        match self.slot_if(id) {
            Some(s) => s,
            None => self.slot_allocating(id),
        }
    }

    #[cold]
    fn slot_allocating(&self, id: u32) -> &Slot {
        let db = self.db_of(id);
        let _gate = self.gates[db].lock();
        &self.allocate(db)[id as usize & (self.stripes - 1)]
    }

    fn lock_global(&self, id: u32) -> MutexGuard<'_, Stripe> {
        self.lock_slot(self.slot(id), id)
    }

    /// Locks stripe `id`, whose slot is `slot`.
    #[inline(always)]
    fn lock_slot<'s>(&'s self, slot: &'s Slot, id: u32) -> MutexGuard<'s, Stripe> {
        let g = slot.stripe.lock();
        self.after_lock(id, &g);
        g
    }

    /// Locks one stripe by itself (background tasks, stats, loading). Its
    /// sizes are published again when the guard drops.
    pub fn lock_stripe(&self, db: usize, stripe: usize) -> StripeGuard<'_> {
        let id = self.global_id(db, stripe as u32);
        StripeGuard { store: self, id, guard: self.lock_global(id) }
    }

    /// The snapshot hook: every path that locks a stripe to change it
    /// comes through here right after locking.
    #[inline]
    fn after_lock(&self, id: u32, s: &Stripe) {
        if self.snapshot_on.load(Ordering::Acquire) {
            self.capture(id, s);
        }
    }

    #[cold]
    fn capture(&self, id: u32, s: &Stripe) {
        if id >= self.total_stripes() {
            // The job namespace: the engine snapshots jobs itself.
            return;
        }
        let snap = self.snapshot.read().clone();
        if let Some(snap) = snap {
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            if snap.pending[word].load(Ordering::Acquire) & bit == 0 {
                return;
            }
            // Before the bit goes: a saver that sees the bit gone sees
            // this count too (the `fetch_and` releases it).
            snap.in_flight.fetch_add(1, Ordering::Relaxed);
            if snap.pending[word].fetch_and(!bit, Ordering::AcqRel) & bit != 0 {
                snap.hook.capture(self.db_of(id), s);
            }
            snap.in_flight.fetch_sub(1, Ordering::Release);
        }
    }

    /// Starts a point-in-time snapshot. Every stripe is locked at once, in
    /// order, for the instant the snapshot stands for, so no command is
    /// half done in it (a command holds all its stripes while it runs);
    /// from then on each stripe is handed to `hook` as it was, the first
    /// time anything locks it. Returns the keys and keys with a TTL of
    /// each database at that instant. The caller must hold no stripe and
    /// runs one snapshot at a time.
    pub fn begin_snapshot(&self, hook: Arc<dyn SnapshotHook>) -> Vec<(usize, usize)> {
        self.begin_snapshot_then(hook, &mut || {})
    }

    /// [`begin_snapshot`](Self::begin_snapshot), calling `at_instant` while
    /// every stripe is held: whatever it does happens at the snapshot's
    /// instant, after every write the snapshot holds and before any it
    /// does not (the AOF switches to a new incremental file there; a
    /// replica's place in the replication stream is read there).
    pub fn begin_snapshot_then(
        &self,
        hook: Arc<dyn SnapshotHook>,
        at_instant: &mut dyn FnMut(),
    ) -> Vec<(usize, usize)> {
        let total = self.databases() * self.stripes;
        let mut sizes = vec![(0, 0); self.databases()];
        let mut guards: Vec<MutexGuard<'_, Stripe>> = Vec::with_capacity(total);
        // A database without stripes is held by its gate for the instant:
        // it is empty then, and whatever allocates it comes after.
        let mut gates: Vec<MutexGuard<'_, ()>> = Vec::new();
        let mut absent = vec![false; self.databases()];
        for (db, size) in sizes.iter_mut().enumerate() {
            if !self.db_allocated(db) {
                let gate = self.gates[db].lock();
                if !self.db_allocated(db) {
                    gates.push(gate);
                    absent[db] = true;
                    continue;
                }
            }
            for slot in self.db_slots(db).into_iter().flatten() {
                let g = slot.stripe.lock();
                size.0 += g.len();
                size.1 += g.expires_len();
                guards.push(g);
            }
        }
        // Stripes allocated after the instant have nothing to capture.
        let pending: Box<[AtomicU64]> = (0..total.div_ceil(64))
            .map(|w| {
                let left = total - w * 64;
                AtomicU64::new(if left >= 64 { u64::MAX } else { (1u64 << left) - 1 })
            })
            .collect();
        for db in (0..self.databases()).filter(|&db| absent[db]) {
            for id in db * self.stripes..(db + 1) * self.stripes {
                pending[id / 64].fetch_and(!(1u64 << (id % 64)), Ordering::Relaxed);
            }
        }
        *self.snapshot.write() =
            Some(Arc::new(Snapshot { hook, pending, in_flight: AtomicUsize::new(0) }));
        self.snapshot_on.store(true, Ordering::Release);
        at_instant();
        drop(guards);
        drop(gates);
        sizes
    }

    /// Captures stripe `id` (global) now if the snapshot has not yet.
    pub fn snapshot_stripe(&self, id: u32) {
        if self.slot_if(id).is_some() {
            drop(self.lock_global(id));
        }
    }

    /// [`snapshot_stripe`](Self::snapshot_stripe), giving up after `wait`
    /// when the stripe stays busy: a saver that applies backpressure must
    /// not block on a writer that waits for it. Whether the stripe is
    /// done. A stripe whose database has none yet had nothing to capture;
    /// one whose capture some lock already took is not locked again, so
    /// a holder that keeps it (a busy script) does not stall the save —
    /// its capture may still be on its way to the hook until
    /// [`snapshot_settled`](Self::snapshot_settled).
    pub fn try_snapshot_stripe(&self, id: u32, wait: std::time::Duration) -> bool {
        let Some(slot) = self.slot_if(id) else { return true };
        let taken = self.snapshot.read().as_ref().is_none_or(|snap| {
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            snap.pending[word].load(Ordering::Acquire) & bit == 0
        });
        if taken {
            return true;
        }
        match slot.stripe.try_lock_for(wait) {
            Some(g) => {
                self.after_lock(id, &g);
                true
            }
            None => false,
        }
    }

    /// Global stripe ids of the databases (databases × stripes); the job
    /// namespace's stripe comes after them.
    pub fn total_stripes(&self) -> u32 {
        (self.databases() * self.stripes) as u32
    }

    /// Whether every capture begun so far has been handed to the hook in
    /// full (true without a snapshot). Once the saver has passed every
    /// stripe and this holds, nothing more reaches the hook.
    pub fn snapshot_settled(&self) -> bool {
        self.snapshot.read().as_ref().is_none_or(|s| s.in_flight.load(Ordering::Acquire) == 0)
    }

    /// Ends the snapshot (every stripe has been captured or is abandoned).
    pub fn end_snapshot(&self) {
        self.snapshot_on.store(false, Ordering::Release);
        *self.snapshot.write() = None;
    }

    /// Publishes stripe `id`'s sizes (it is locked by the caller) and keeps
    /// the map of stripes with TTL keys current.
    #[inline]
    fn publish(&self, id: u32, s: &Stripe) {
        self.publish_slot(self.slot(id), id, s);
    }

    /// [`publish`](Self::publish) with the slot at hand. Always inlined:
    /// a single-key command's release is inlined into the dispatcher's
    /// two bodies (general and lean), where the inliner left it a call.
    #[inline(always)]
    fn publish_slot(&self, slot: &Slot, id: u32, s: &Stripe) {
        let (ttl_change, first_write) = slot.publish(s);
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        if first_write {
            self.written_stripes[word].fetch_or(bit, Ordering::Release);
        }
        if let Some(has_ttl) = ttl_change {
            if has_ttl {
                self.ttl_stripes[word].fetch_or(bit, Ordering::Relaxed);
            } else {
                self.ttl_stripes[word].fetch_and(!bit, Ordering::Relaxed);
            }
        }
    }

    /// Where `key` of `db` lives, computed without locking.
    #[inline]
    pub fn prefetch_token(&self, db: usize, key: &[u8]) -> Option<Prefetch> {
        if db >= self.databases() {
            return None;
        }
        let hash = self.hasher.hash_one(key);
        let stripe = if self.by_slot {
            u32::from(key_slot(key)) >> self.shift
        } else {
            self.stripe_of_hash(hash)
        };
        let long = key.len() > crate::keytable::KEY_INLINE;
        Some(Prefetch { id: self.global_id(db, stripe), long, repeat: false, hash })
    }

    /// Stage one: prefetches the key's bucket, without locking.
    #[inline]
    pub fn prefetch_bucket(&self, t: Prefetch) {
        if t.repeat {
            return;
        }
        let Some(slot) = self.slot_if(t.id) else { return };
        let base = slot.buckets.load(Ordering::Relaxed);
        if !base.is_null() {
            let mask = slot.mask.load(Ordering::Relaxed);
            // Address arithmetic only; the result is never dereferenced here.
            let addr = base.wrapping_add(((t.hash as usize) & (mask >> 2)) << (mask & 3));
            crate::table::prefetch(addr as *const u8);
        }
    }

    /// Stage two: under the stripe's lock (briefly), prefetches the first
    /// node of the key's chain. Skipped when the stripe is busy.
    #[inline]
    pub fn prefetch_node(&self, t: Prefetch) {
        if t.repeat {
            return;
        }
        if let Some(s) = self.slot_if(t.id).and_then(|s| s.stripe.try_lock()) {
            s.map.prefetch_node(t.hash);
        }
    }

    /// Stage three: under the stripe's lock (briefly), prefetches the
    /// chain's second slot (see [`crate::keytable::KeyTable::prefetch_next`]).
    #[inline]
    pub fn prefetch_next(&self, t: Prefetch) {
        if t.repeat {
            return;
        }
        if let Some(s) = self.slot_if(t.id).and_then(|s| s.stripe.try_lock()) {
            s.map.prefetch_next(t.hash, t.long);
        }
    }

    /// Stage four, for a key longer than a slot holds inline: under the
    /// stripe's lock (briefly), prefetches the key bytes of the first of
    /// the chain's first two slots whose length tag and hash fragment say
    /// it may be this key. Without it the compare waited for that line:
    /// redis-benchmark's INCR (`counter:<12 digits>`, 20 bytes) spent
    /// twice GET's CPU (`key:<12 digits>`, inline) at P=64 over 100,000
    /// keys though it runs 28% more instructions. Nothing for an inline
    /// key.
    #[inline]
    pub fn prefetch_key(&self, t: Prefetch) {
        if !t.long || t.repeat {
            return;
        }
        if let Some(s) = self.slot_if(t.id).and_then(|s| s.stripe.try_lock()) {
            s.map.prefetch_key(t.hash);
        }
    }

    /// For the member stages of a pipelined batch (a command one of whose
    /// arguments names a member of the key's set or sorted set or a field
    /// of its hash: SADD, SISMEMBER, HSET, HGET, ZADD, ZSCORE…): calls `f`
    /// with the key's value under its stripe's lock (briefly), or with
    /// `None` when the key is not there or the stripe is busy. For
    /// prefetching only: the key is not expired on the way, and what `f`
    /// sees may change before the command runs
    /// ([`Value::prefetch_member`]).
    #[inline]
    pub fn with_member_value(&self, t: Prefetch, key: &[u8], f: impl FnOnce(Option<&Value>)) {
        let Some(s) = self.slot_if(t.id).and_then(|s| s.stripe.try_lock()) else { return f(None) };
        f(s.map.find_hashed(key, t.hash).and_then(|(i, _)| s.map.at(i)).map(|(_, e)| &e.value));
    }

    /// A cheap pseudo-random number (xorshift), shared by all threads.
    pub fn rand(&self) -> u64 {
        let mut x = self.rand_state.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rand_state.store(x, Ordering::Relaxed);
        x
    }

    /// Whether any stripe of `db` ever held a key or a TTL (volatile)
    /// since it was last emptied, from the stripes' published hints and
    /// without locking: eviction skips the databases that say no.
    pub fn db_maybe_keys(&self, db: usize, volatile: bool) -> bool {
        let (base, end) = (db * self.stripes, (db + 1) * self.stripes);
        let map = if volatile { &self.ttl_stripes } else { &self.written_stripes };
        (base / 64..end.div_ceil(64)).any(|w| {
            let bits = map[w].load(Ordering::Relaxed);
            let lo = base.saturating_sub(w * 64);
            let hi = (end - w * 64).min(64);
            let mask = if hi - lo == 64 { u64::MAX } else { ((1u64 << (hi - lo)) - 1) << lo };
            bits & mask != 0
        })
    }

    /// Eviction's sampling (Redis's `dictGetSomeKeys` for the eviction
    /// pool): `n` keys of `db` (only keys with a TTL when `volatile`), each
    /// from a random stripe that has some, handed to `visit` with that
    /// stripe locked. A stripe is drawn at random until one has keys (by
    /// the published hints; after 32 empty draws, the next non-empty one
    /// after the last draw): walking forward from one random start would
    /// pick the stripes after long empty runs far more often, and leave
    /// the keys of others unsampled. Returns how many were visited: fewer
    /// than `n` only when `db` holds none.
    pub fn sample_keys(
        &self,
        db: usize,
        volatile: bool,
        n: usize,
        visit: &mut dyn FnMut(&[u8], &Entry, i64),
    ) -> usize {
        let mut seen = 0;
        'samples: for _ in 0..n {
            let mut start = 0;
            for probe in 0..self.stripes + 32 {
                let stripe = if probe < 32 {
                    start = self.rand() as usize;
                    start % self.stripes
                } else {
                    (start + probe - 32) % self.stripes
                };
                let Some(slot) = self.slot_if(self.global_id(db, stripe as u32)) else {
                    return seen;
                };
                let hint = if volatile { &slot.ttl_hint } else { &slot.len_hint };
                if hint.load(Ordering::Relaxed) == 0 {
                    continue;
                }
                let g = self.lock_stripe(db, stripe);
                let picked = if volatile {
                    g.ttl.random_index(|| self.rand()).and_then(|i| g.ttl.at(i)).map(|(k, _)| k)
                } else {
                    g.map.random_index(|| self.rand()).and_then(|i| g.map.at(i)).map(|(k, _)| k)
                };
                if let Some(k) = picked {
                    if let Some(e) = g.map.get(k) {
                        let at = if e.has_ttl() { g.expire_of(k) } else { NO_EXPIRE };
                        visit(k, e, at);
                        seen += 1;
                        continue 'samples;
                    }
                }
            }
            break;
        }
        seen
    }

    /// The estimated average remaining TTL (ms) of a database's keys with
    /// one, from active expiry's samples (INFO keyspace's `avg_ttl`).
    pub fn avg_ttl(&self, db: usize) -> i64 {
        self.avg_ttl.get(db).map_or(0, |a| a.load(Ordering::Relaxed))
    }

    /// Forgets a database's TTL estimate (it was emptied).
    pub fn reset_avg_ttl(&self, db: usize) {
        if let Some(a) = self.avg_ttl.get(db) {
            a.store(0, Ordering::Relaxed);
        }
    }

    /// Number of keys in a database (expired-but-undeleted included, as
    /// Redis's DBSIZE) and how many have a TTL.
    pub fn db_size(&self, db: usize) -> (usize, usize) {
        let mut keys = 0;
        let mut ttl = 0;
        for s in self.db_slots(db).into_iter().flatten() {
            let s = s.stripe.lock();
            keys += s.len();
            ttl += s.expires_len();
        }
        (keys, ttl)
    }

    /// Sums stripe statistics over all databases.
    pub fn stats(&self) -> StripeStats {
        let mut t = StripeStats::default();
        for s in (0..=self.databases).filter_map(|db| self.db_slots(db)).flat_map(|s| s.iter()) {
            let s = s.stripe.lock();
            t.expired_keys += s.stats.expired_keys;
        }
        t
    }

    /// One active-expiry pass over the stripes `part` of `parts` owns.
    /// Samples 20 TTL keys per stripe and repeats on a stripe while more
    /// than a quarter of its sample had expired, within `budget`.
    /// Returns keys expired.
    /// `on_expired(db, key)` is called for each deletion with the stripe
    /// still locked, so the engine can report it in order with writes.
    pub fn active_expire_cycle(
        &self,
        part: usize,
        parts: usize,
        now: i64,
        budget: std::time::Duration,
        on_expired: &mut dyn FnMut(usize, &[u8]),
        ready: &mut Vec<(u32, Box<[u8]>)>,
    ) -> usize {
        if !self.active_expire.load(Ordering::Relaxed)
            || now < self.held_until.load(Ordering::Relaxed)
        {
            return 0;
        }
        let start = std::time::Instant::now();
        let mut total = 0;
        let parts = parts.max(1);
        // Redis 7.0's activeExpireCycle: more keys per sample and a lower
        // acceptable share of expired keys as the effort goes up.
        let effort = self.active_expire_effort.load(Ordering::Relaxed).clamp(1, 10) as usize - 1;
        let per_sample = 20 + 20 / 4 * effort;
        let stale_pct = 10 - effort;
        for id in self.ttl_stripe_ids(part, parts) {
            let mut s = self.lock_global(id as u32);
            if self.expiry_held(now) {
                // Held since the pass began (a failover's pause): read
                // with the stripe held, as `Shared::quiesce` relies on.
                break;
            }
            if s.expires_len() > 0 {
                loop {
                    let db = id / self.stripes;
                    let got =
                        s.expire_sample(per_sample, now, || self.rand(), |k| on_expired(db, k));
                    total += got.expired;
                    if got.ttl_keys > 0 {
                        // Redis's running average: 2% of each sample.
                        let avg = got.ttl_sum / got.ttl_keys;
                        let slot = &self.avg_ttl[db];
                        let old = slot.load(Ordering::Relaxed);
                        let new = if old == 0 { avg } else { old / 50 * 49 + avg / 50 };
                        slot.store(new, Ordering::Relaxed);
                    }
                    if got.sampled == 0
                        || got.expired * 100 <= got.sampled * stale_pct
                        || start.elapsed() > budget
                    {
                        break;
                    }
                }
                // Keys blocked clients wait for that expired (a group
                // reader's stream): the caller serves them.
                ready.extend(s.ready.drain(..).map(|k| (id as u32, k)));
            }
            self.publish(id as u32, &s);
            drop(s);
            if start.elapsed() > budget {
                break;
            }
        }
        total
    }
}

impl Store {
    /// On a replica, what active expiry does (Redis's expireSlaveKeys):
    /// the keys its own clients gave a TTL that passed are deleted, each
    /// reported with `on_expired(db, key)`; its master's keys are left to
    /// the master. Stripes `part` of `parts`, as the expiry threads share
    /// them. Returns keys deleted.
    pub fn expire_replica_keys(
        &self,
        part: usize,
        parts: usize,
        now: i64,
        on_expired: &mut dyn FnMut(usize, &[u8]),
    ) -> usize {
        if !self.active_expire.load(Ordering::Relaxed)
            || now < self.held_until.load(Ordering::Relaxed)
        {
            return 0;
        }
        let parts = parts.max(1);
        let mut total = 0;
        for id in self.ttl_stripe_ids(part, parts) {
            let mut s = self.lock_global(id as u32);
            if s.own_ttl.is_some() {
                let db = id / self.stripes;
                total += s.expire_own(now, |k| on_expired(db, k));
                self.publish(id as u32, &s);
            }
        }
        total
    }

    /// The global ids of the stripes whose bit in `ttl_stripes` is set
    /// (they hold keys with a TTL) and that are `part` of `parts`; each
    /// word of the bitmap is read when the walk reaches it.
    fn ttl_stripe_ids(&self, part: usize, parts: usize) -> impl Iterator<Item = usize> + '_ {
        self.ttl_stripes
            .iter()
            .enumerate()
            .flat_map(|(w, word)| {
                let mut bits = word.load(Ordering::Relaxed);
                std::iter::from_fn(move || {
                    if bits == 0 {
                        return None;
                    }
                    let id = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    Some(id)
                })
            })
            .filter(move |id| id % parts == part)
    }
}

/// A stripe could not be locked without risking a deadlock: it is below
/// one already held and busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockOrder;

/// The stripes a command holds, in ascending global order, plus the clock
/// the command runs at. Handlers reach keys only through this.
pub struct Locks<'a> {
    store: &'a Store,
    held: SmallVec<[(u32, MutexGuard<'a, Stripe>); 4]>,
    /// Gates of databases without stripes that this command locked whole
    /// ([`acquire_db`](Self::acquire_db)); `gate_floor` is the first
    /// global id of the highest of them (0 without any): a stripe below
    /// it is out of order. Rare, so boxed and left out of the drop glue
    /// (`ManuallyDrop`: [`release`](Self::release) empties it), which is
    /// then as small as it was before gates existed, on every command.
    gates: ManuallyDrop<Option<Box<Vec<(usize, MutexGuard<'a, ()>)>>>>,
    gate_floor: u32,
    /// A key whose stripe and hash the caller computed already (the
    /// connection's prefetch), recognised by address: (ptr, len, token).
    memo: Option<(usize, usize, Prefetch)>,
    /// The command's clock, Unix milliseconds.
    pub now: i64,
    /// Whose deadlines the holder obeys, given to every stripe it holds.
    deadlines: Deadlines,
}

impl<'a> Locks<'a> {
    pub fn new(store: &'a Store, now: i64) -> Self {
        Locks {
            store,
            held: SmallVec::new(),
            gates: ManuallyDrop::new(None),
            gate_floor: 0,
            memo: None,
            now,
            deadlines: Deadlines::Enforced,
        }
    }

    /// Makes the holder obey `d`'s deadlines (a replay: the AOF's or a
    /// master's), on the stripes held now and those taken later.
    pub fn obey(&mut self, d: Deadlines) {
        self.deadlines = d;
        for (_, g) in self.held.iter_mut() {
            g.deadlines = d;
        }
    }

    /// Whether the holder replays an append-only file (see
    /// [`Deadlines::Loading`]).
    #[inline]
    pub fn loading(&self) -> bool {
        self.deadlines == Deadlines::Loading
    }

    /// Whether deadlines are suspended for this holder (Redis's
    /// `checkAlreadyExpired` is false for the master and while loading).
    #[inline]
    pub fn expiry_suspended(&self) -> bool {
        match self.deadlines {
            Deadlines::Enforced => false,
            Deadlines::Master => self.store.is_replica(),
            Deadlines::Loading => true,
        }
    }

    pub fn store(&self) -> &'a Store {
        self.store
    }

    /// Locks the given global ids (sorted and deduplicated here). An id
    /// below one already held is taken only if it is free at once (waiting
    /// for it could deadlock); otherwise [`LockOrder`] is returned, with
    /// the ids locked so far kept.
    pub fn acquire(&mut self, ids: &mut [u32]) -> Result<(), LockOrder> {
        ids.sort_unstable();
        let mut last = None;
        for &id in ids.iter() {
            if last == Some(id) || self.holds(id) {
                continue;
            }
            last = Some(id);
            self.lock(id)?;
        }
        Ok(())
    }

    /// Locks one stripe, as [`acquire`](Self::acquire) of that one id.
    #[inline]
    pub fn acquire_one(&mut self, id: u32) -> Result<(), LockOrder> {
        if self.holds(id) {
            return Ok(());
        }
        self.lock(id)
    }

    /// Locks one stripe when nothing is held yet (a client's single-key
    /// command): [`acquire_one`](Self::acquire_one) without its tests of
    /// what is held and its call, some 25 instructions of a pipelined GET.
    #[inline(always)]
    pub fn acquire_first(&mut self, id: u32) -> Result<(), LockOrder> {
        debug_assert!(self.held.is_empty());
        match self.store.slot_if(id) {
            Some(slot) if id >= self.gate_floor => {
                let mut g = self.store.lock_slot(slot, id);
                if self.deadlines != Deadlines::Enforced {
                    g.deadlines = self.deadlines;
                }
                // In place of `push`, a call (its spill test and growth
                // path) of some 20 instructions a command.
                // SAFETY: slot 0 lies within `held`'s capacity (at least
                // its inline 4), and `held` is empty (the caller holds
                // nothing yet), so slot 0 is unused and the length 1
                // covers exactly the element written. Were `held` not
                // empty, its first guard would be overwritten without
                // being dropped: a stripe left locked, never unsound.
                unsafe {
                    self.held.as_mut_ptr().write((id, g));
                    self.held.set_len(1);
                }
                Ok(())
            }
            _ => self.lock_slow(id),
        }
    }

    /// Locks the given global ids only if each is free right now (for a
    /// caller that must not wait: a stripe may be held by a busy script);
    /// [`LockOrder`] otherwise, with the ids locked so far kept.
    pub fn try_acquire(&mut self, ids: &mut [u32]) -> Result<(), LockOrder> {
        ids.sort_unstable();
        ids.iter().try_for_each(
            |&id| {
                if self.holds(id) {
                    Ok(())
                } else {
                    self.lock_out_of_order(id)
                }
            },
        )
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether stripe `id` is held.
    pub fn holds(&self, id: u32) -> bool {
        self.find(id).is_some()
    }

    /// Position of `id` in `held`, which is sorted (locks are taken in
    /// ascending order).
    #[inline(always)]
    fn find(&self, id: u32) -> Option<usize> {
        // One slice: each of `len` and `[0]` on the SmallVec tests
        // whether it spilled.
        let held = self.held.as_slice();
        match held.len() {
            0 => None,
            1 => (held[0].0 == id).then_some(0),
            _ => held.binary_search_by_key(&id, |(h, _)| *h).ok(),
        }
    }

    #[inline]
    fn lock(&mut self, id: u32) -> Result<(), LockOrder> {
        if let Some((max, _)) = self.held.last() {
            if id < *max {
                return self.lock_out_of_order(id);
            }
        }
        let slot = match self.store.slot_if(id) {
            Some(slot) if id >= self.gate_floor => slot,
            _ => return self.lock_slow(id),
        };
        let mut g = self.store.lock_slot(slot, id);
        if self.deadlines != Deadlines::Enforced {
            g.deadlines = self.deadlines;
        }
        self.held.push((id, g));
        Ok(())
    }

    /// In order for the stripes held, but below a held gate or in a
    /// database without stripes yet.
    #[cold]
    fn lock_slow(&mut self, id: u32) -> Result<(), LockOrder> {
        if id < self.gate_floor {
            return self.lock_out_of_order(id);
        }
        self.allocate(id, true)?;
        let mut g = self.store.lock_global(id);
        if self.deadlines != Deadlines::Enforced {
            g.deadlines = self.deadlines;
        }
        self.held.push((id, g));
        Ok(())
    }

    /// Gives stripe `id`'s database its stripes if it has none: under the
    /// database's gate, this command's own if it holds it, else taken in
    /// the lock order (waiting, when `wait`, only if nothing after it is
    /// held).
    #[cold]
    fn allocate(&mut self, id: u32, wait: bool) -> Result<(), LockOrder> {
        if self.store.slot_if(id).is_some() {
            return Ok(());
        }
        let db = self.store.db_of(id);
        if !self.holds_gate(db) {
            let gate = &self.store.gates[db];
            let _g = if wait && self.gate_in_order(db) {
                gate.lock()
            } else {
                gate.try_lock().ok_or(LockOrder)?
            };
            self.store.allocate(db);
            return Ok(());
        }
        self.store.allocate(db);
        Ok(())
    }

    /// Whether this command holds database `db`'s gate.
    fn holds_gate(&self, db: usize) -> bool {
        self.gates.as_ref().is_some_and(|g| g.iter().any(|(d, _)| *d == db))
    }

    /// Whether database `db`'s gate comes after everything held.
    fn gate_in_order(&self, db: usize) -> bool {
        let base = self.store.global_id(db, 0);
        self.held.last().is_none_or(|(max, _)| *max < base)
            && self.gates.iter().flat_map(|g| g.iter()).all(|(d, _)| *d < db)
    }

    /// Holds database `db`'s gate if it has no stripes (a command locking
    /// it whole): true while it has none, false when it has them (then
    /// they are locked as usual).
    fn gate(&mut self, db: usize) -> Result<bool, LockOrder> {
        if self.holds_gate(db) {
            return Ok(!self.store.db_allocated(db));
        }
        if self.store.db_allocated(db) {
            return Ok(false);
        }
        let gate = &self.store.gates[db];
        let g =
            if self.gate_in_order(db) { gate.lock() } else { gate.try_lock().ok_or(LockOrder)? };
        if self.store.db_allocated(db) {
            return Ok(false);
        }
        self.gates.get_or_insert_with(Box::default).push((db, g));
        self.gate_floor = self.gate_floor.max(self.store.global_id(db, 0));
        Ok(true)
    }

    /// Whether database `db` has no stripes: nothing in it to walk. A
    /// command that locked it whole keeps it so until it releases.
    pub fn db_absent(&self, db: usize) -> bool {
        !self.store.db_allocated(db)
    }

    /// Gives database `db` its stripes (a command about to fill a
    /// database it locked whole, such as SWAPDB's side without any).
    pub fn allocate_db(&mut self, db: usize) -> Result<(), LockOrder> {
        self.allocate(self.store.global_id(db, 0), true)
    }

    /// Out of order: only a stripe that is free right now can be taken
    /// without risking a deadlock.
    #[cold]
    fn lock_out_of_order(&mut self, id: u32) -> Result<(), LockOrder> {
        self.allocate(id, false)?;
        let mut g = self.store.slot(id).stripe.try_lock().ok_or(LockOrder)?;
        self.store.after_lock(id, &g);
        g.deadlines = self.deadlines;
        let pos = self.held.partition_point(|(h, _)| *h < id);
        self.held.insert(pos, (id, g));
        Ok(())
    }

    /// Locks the stripes `ids` and the whole of database `db` (which may
    /// be held by its gate, see [`acquire_db`](Self::acquire_db)), in
    /// ascending order.
    pub fn acquire_with_db(&mut self, ids: &mut [u32], db: usize) -> Result<(), LockOrder> {
        ids.sort_unstable();
        let split = ids.partition_point(|&id| id < self.store.global_id(db, 0));
        let (below, rest) = ids.split_at_mut(split);
        self.acquire(below)?;
        self.acquire_db(db)?;
        self.acquire(rest)
    }

    /// Locks every stripe of `db` that is not yet held (see
    /// [`acquire`](Self::acquire) for the order rule).
    /// A database without stripes is held by its gate instead.
    pub fn acquire_db(&mut self, db: usize) -> Result<(), LockOrder> {
        if self.gate(db)? {
            return Ok(());
        }
        let base = self.store.global_id(db, 0);
        let ids = base..base + self.store.stripes as u32;
        if self.held.last().is_none_or(|(max, _)| *max < base) {
            // The common case: nothing of this database or above is held,
            // so the ids can be locked as they come (already ascending).
            self.held.reserve(self.store.stripes);
            for id in ids {
                self.lock(id)?;
            }
            return Ok(());
        }
        let mut ids: Vec<u32> = ids.collect();
        self.acquire(&mut ids)
    }

    /// The stripe with global id `id`, locking it if needed. Callers lock
    /// what a command needs beforehand ([`acquire`](Self::acquire)), so
    /// this only locks stripes above all held ones (a walk in ascending
    /// order) — anything else is a bug in the caller's declaration of its
    /// keys, and panics rather than risk a deadlock.
    #[inline]
    pub fn stripe_id(&mut self, id: u32) -> &mut Stripe {
        let pos = match self.find(id) {
            Some(p) => p,
            None => self.lock_for_use(id),
        };
        &mut self.held.as_mut_slice()[pos].1
    }

    #[cold]
    fn lock_for_use(&mut self, id: u32) -> usize {
        if self.lock(id).is_err() {
            panic!("stripe {id} used without being locked beforehand (lock order)");
        }
        self.find(id).expect("just locked")
    }

    /// Remembers where `key` (this very slice) lives, so that accesses
    /// through it skip recomputing its slot and hash.
    #[inline]
    pub fn remember(&mut self, key: &[u8], t: Prefetch) {
        self.memo = Some((key.as_ptr() as usize, key.len(), t));
    }

    /// Drops what [`remember`](Self::remember) kept (a caller running
    /// several commands on one `Locks` whose keys' bytes do not outlive
    /// each command: a script).
    pub fn forget(&mut self) {
        self.memo = None;
    }

    #[inline]
    fn memo_for(&self, db: usize, key: &[u8]) -> Option<Prefetch> {
        match self.memo {
            Some((p, l, t))
                if p == key.as_ptr() as usize && l == key.len() && self.store.db_of(t.id) == db =>
            {
                Some(t)
            }
            _ => None,
        }
    }

    /// [`Stripe::modified`] for `key` of `db`, which must be held. When no
    /// held stripe has watchers or waiters (checked for up to eight held
    /// stripes), the key's stripe is not even looked up: a write pays a
    /// few loads for WATCH and blocking support it does not use.
    #[inline]
    pub fn modified(&mut self, db: usize, key: &[u8]) {
        if self.held.len() <= 8 && self.held.iter().all(|(_, s)| s.quiet()) {
            return;
        }
        self.stripe(db, key).modified(key);
    }

    /// The stripe holding `key` in `db`.
    #[inline]
    pub fn stripe(&mut self, db: usize, key: &[u8]) -> &mut Stripe {
        let id = match self.memo_for(db, key) {
            Some(t) => t.id,
            None => self.store.global_id(db, self.store.stripe_of(key)),
        };
        self.stripe_id(id)
    }

    /// Two different stripes at once (SWAPDB).
    pub fn pair(&mut self, a: u32, b: u32) -> (&mut Stripe, &mut Stripe) {
        self.stripe_id(a);
        self.stripe_id(b);
        let ia = self.find(a).expect("held");
        let ib = self.find(b).expect("held");
        assert_ne!(ia, ib);
        let (lo, hi) = if ia < ib { (ia, ib) } else { (ib, ia) };
        let (left, right) = self.held.split_at_mut(hi);
        let (x, y) = (&mut *left[lo].1, &mut *right[0].1);
        if ia < ib {
            (x, y)
        } else {
            (y, x)
        }
    }

    /// Moves what the held stripes noticed out of them: keys that became
    /// ready for blocked clients (as `(global stripe id, key)`) and keys
    /// deleted by lazy expiry (`expired(db, key)`, in order).
    #[inline(always)]
    pub fn take_signals(
        &mut self,
        ready: &mut Vec<(u32, Box<[u8]>)>,
        expired: impl FnMut(usize, &[u8]),
    ) {
        if self.held.iter().any(|(_, g)| !g.expired.is_empty() || !g.ready.is_empty()) {
            self.take_signals_slow(ready, expired);
        }
    }

    #[cold]
    fn take_signals_slow(
        &mut self,
        ready: &mut Vec<(u32, Box<[u8]>)>,
        mut expired: impl FnMut(usize, &[u8]),
    ) {
        let stripes = self.store.stripes;
        for (id, g) in self.held.iter_mut() {
            if !g.expired.is_empty() {
                let db = *id as usize / stripes;
                for k in g.expired.drain(..) {
                    expired(db, &k);
                }
            }
            if !g.ready.is_empty() {
                ready.extend(g.ready.drain(..).map(|k| (*id, k)));
            }
        }
    }

    /// Stripe `id`'s sizes and counters: exact when this command holds it,
    /// else as of its last release (read without locking).
    pub fn counts(&self, id: u32) -> StripeCounts {
        match self.find(id) {
            Some(p) => {
                let s = &self.held[p].1;
                StripeCounts {
                    keys: s.len(),
                    expires: s.expires_len(),
                    expired: s.stats.expired_keys,
                }
            }
            None => {
                let Some(slot) = self.store.slot_if(id) else { return StripeCounts::default() };
                StripeCounts {
                    keys: slot.len_hint.load(Ordering::Acquire) as usize,
                    expires: slot.ttl_hint.load(Ordering::Relaxed) as usize,
                    expired: slot.expired_hint.load(Ordering::Relaxed),
                }
            }
        }
    }

    /// [`counts`](Self::counts) summed over the stripes of `db`, visiting
    /// only stripes that were ever written or that this command holds.
    pub fn db_counts(&self, db: usize) -> StripeCounts {
        let base = self.store.global_id(db, 0) as usize;
        let end = base + self.store.stripes;
        let mut t = StripeCounts::default();
        let mut add = |c: StripeCounts| {
            t.keys += c.keys;
            t.expires += c.expires;
            t.expired += c.expired;
        };
        for (id, _) in self.held.iter() {
            if (base..end).contains(&(*id as usize)) {
                add(self.counts(*id));
            }
        }
        for w in base / 64..end.div_ceil(64) {
            let mut bits = self.store.written_stripes[w].load(Ordering::Acquire);
            while bits != 0 {
                let id = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if (base..end).contains(&id) && !self.holds(id as u32) {
                    add(self.counts(id as u32));
                }
            }
        }
        t
    }

    /// Database of global stripe id `id`.
    pub fn db_of(&self, id: u32) -> usize {
        self.store.db_of(id)
    }

    /// Releases everything.
    #[inline(always)]
    pub fn release(&mut self) {
        // A holder is mostly released and then dropped (the dispatcher
        // releases in place, then the drop releases again): the second
        // time finds nothing, in two tests rather than a call.
        // One stripe and no gate (a single-key command) is released here,
        // without the call and the loop (some 20 instructions).
        let n = self.held.len();
        if n == 1 && self.gates.is_none() {
            // SAFETY: the one element is initialised (the length was 1);
            // the length is 0 before it is read out, so it is owned once
            // (by `release_one`) and never dropped by `held` again. In
            // place of `pop`, whose tests (spilled, empty) were made above.
            let (id, g) = unsafe {
                self.held.set_len(0);
                std::ptr::read(self.held.as_ptr())
            };
            self.release_one(id, g);
        } else if n != 0 || self.gates.is_some() {
            self.release_held();
        }
    }

    #[inline(never)]
    fn release_held(&mut self) {
        while let Some((id, g)) = self.held.pop() {
            self.release_one(id, g);
        }
        if self.gates.is_some() {
            self.release_gates();
        }
    }

    /// Publishes stripe `id`'s sizes and table and unlocks it.
    #[inline(always)]
    fn release_one(&self, id: u32, mut g: MutexGuard<'a, Stripe>) {
        if self.deadlines != Deadlines::Enforced {
            g.deadlines = Deadlines::Enforced;
        }
        let slot = self.store.slot(id);
        self.store.publish_slot(slot, id, &g);
        let (base, mask, shift) = g.map.bucket_base();
        slot.buckets.store(base as *mut u8, Ordering::Relaxed);
        slot.mask.store(mask << 2 | shift as usize, Ordering::Relaxed);
    }

    /// Lets go of the gates held (see `gates`: not dropped otherwise).
    #[cold]
    fn release_gates(&mut self) {
        drop(self.gates.take());
        self.gate_floor = 0;
    }

    // ---- conveniences over the key's stripe ---------------------------

    pub fn get(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let now = self.now;
        match self.memo_for(db, key) {
            Some(t) => self.stripe_id(t.id).get_hashed(key, t.hash, now),
            None => self.stripe(db, key).get(key, now),
        }
    }

    pub fn contains(&mut self, db: usize, key: &[u8]) -> bool {
        let now = self.now;
        self.stripe(db, key).contains(key, now)
    }

    /// Whether `key` of `db` is there and not past its deadline, if its
    /// stripe is held (`None` otherwise); nothing is locked or expired.
    pub fn peek_held(&self, db: usize, key: &[u8]) -> Option<bool> {
        let id = self.store.global_id(db, self.store.stripe_of(key));
        let s = &self.held[self.find(id)?].1;
        Some(s.peek(key).is_some() && !s.is_expired(key, self.now))
    }

    /// Looks up `key` of `db` for writing ([`Stripe::entry_hashed`]), with
    /// the connection's prefetched stripe and hash when it has them.
    #[inline]
    pub fn entry<'s>(&'s mut self, db: usize, key: &'s [u8]) -> Lookup<'s> {
        let now = self.now;
        match self.memo_for(db, key) {
            Some(t) => self.stripe_id(t.id).entry_hashed(key, t.hash, now),
            None => {
                let s = self.stripe(db, key);
                let h = s.map.hash_of(key);
                s.entry_hashed(key, h, now)
            }
        }
    }

    pub fn insert(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value,
        expire_at: i64,
        lru: u32,
    ) -> Option<Record> {
        let now = self.now;
        let (s, h) = self.stripe_and_hash(db, key);
        let old = s.insert_with(key, h, value, expire_at, lru);
        if let Some(e) = &old {
            if e.expire_at != NO_EXPIRE && e.expire_at <= now && !s.expiry_suspended() {
                // Overwriting a key whose time had passed: it expired
                // first (reported as such), and the new one is a new key.
                s.note_expired(key);
                return None;
            }
        }
        old
    }

    /// [`insert`](Self::insert) when `key`'s stripe holds no TTLs at all,
    /// so that nothing there can have expired and a plain SET needs no
    /// lookup first: one stripe look-up for both questions. The value
    /// comes back untouched when the stripe holds some TTLs (the caller
    /// looks the key up, expiring it, then inserts).
    #[inline]
    pub fn insert_if_no_ttls(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value,
        expire_at: i64,
        lru: u32,
    ) -> Result<Option<Record>, Value> {
        let (s, h) = self.stripe_and_hash(db, key);
        if s.expires_len() > 0 {
            return Err(value);
        }
        // No TTL in the stripe: the old key, if any, had none and is live.
        Ok(s.insert_with(key, h, value, expire_at, lru))
    }

    /// `key`'s stripe, and the key's hash when the prefetch stage made it.
    #[inline(always)]
    fn stripe_and_hash(&mut self, db: usize, key: &[u8]) -> (&mut Stripe, Option<u64>) {
        match self.memo_for(db, key) {
            Some(t) => (self.stripe_id(t.id), Some(t.hash)),
            None => (self.stripe(db, key), None),
        }
    }

    /// Removes a live key (an expired one counts as absent).
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Record> {
        let now = self.now;
        let s = self.stripe(db, key);
        s.get(key, now)?;
        s.remove(key)
    }

    /// DEL's and UNLINK's removal (Redis's `delGenericCommand`: the key's
    /// expiry first, then the delete): an expired key is deleted by its
    /// expiry as any look-up deletes it, and is not counted; on a replica,
    /// whose look-ups leave a master's expired key in place, the delete
    /// then takes it, and counts it.
    pub fn remove_for_del(&mut self, db: usize, key: &[u8]) -> Option<Record> {
        let now = self.now;
        let s = self.stripe(db, key);
        let _ = s.get(key, now);
        s.remove(key)
    }

    pub fn set_expire(&mut self, db: usize, key: &[u8], expire_at: i64) -> bool {
        self.stripe(db, key).set_expire(key, expire_at)
    }

    /// Registers `flag` as watching `key` of `db`; returns whether the
    /// key counts as expired (there, past its deadline, not deleted).
    pub fn watch(&mut self, db: usize, key: &[u8], flag: &WatchFlag) -> bool {
        let now = self.now;
        let s = self.stripe(db, key);
        let expired = s.peek(key).is_some_and(Entry::has_ttl) && s.is_expired(key, now);
        s.watch(key, flag, expired);
        expired
    }

    /// Whether `flag`'s WATCH of `key` lapsed by expiry: the key counted
    /// as live (when watched, or since a SWAPDB brought it) and its
    /// deadline has passed since.
    pub fn watch_lapsed(&mut self, db: usize, key: &[u8], flag: &WatchFlag) -> bool {
        let now = self.now;
        let s = self.stripe(db, key);
        !s.watched_expired(key, flag)
            && s.peek(key).is_some_and(Entry::has_ttl)
            && s.is_expired(key, now)
    }

    /// Removes `flag` from the watchers of `key` in stripe `id`.
    pub fn unwatch(&mut self, id: u32, key: &[u8], flag: &WatchFlag) {
        self.stripe_id(id).unwatch(key, flag);
    }

    /// The expiry of `key` in `db` (Unix ms), or [`NO_EXPIRE`] when it has
    /// none or does not exist. Does not expire it.
    pub fn expire_of(&mut self, db: usize, key: &[u8]) -> i64 {
        self.stripe(db, key).expire_of(key)
    }
}

impl Drop for Locks<'_> {
    fn drop(&mut self) {
        // Not `release`, whose one-stripe path is inlined for the
        // dispatcher: a holder mostly drops empty, and every drop site
        // stays small.
        if !self.held.is_empty() || self.gates.is_some() {
            self.release_held();
        }
    }
}

#[cfg(test)]
#[path = "db_lazy_tests.rs"]
mod lazy_tests;

#[cfg(test)]
#[path = "db_replica_ttl_tests.rs"]
mod replica_ttl_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripe_by_slot_on_a_cluster_node_by_hash_elsewhere() {
        // A cluster node's stripe is the key's slot: its keys move with it.
        let node = Store::new(1, SLOTS);
        for k in [&b"foo"[..], b"{user1000}.following", b"key:000000000042"] {
            assert_eq!(node.stripe_of(k), u32::from(key_slot(k)));
            assert_eq!(node.prefetch_token(0, k).map(|t| t.id()), Some(u32::from(key_slot(k))));
        }
        // Elsewhere the stripe comes from the hash the prefetch carries, and
        // both ways of finding it agree, in every database.
        let store = Store::new(3, 1024);
        let mut seen = std::collections::HashSet::new();
        for i in 0..4096 {
            let k = format!("key:{i:012}");
            let s = store.stripe_of(k.as_bytes());
            assert!(s < 1024);
            for db in 0..3 {
                let t = store.prefetch_token(db, k.as_bytes()).expect("a database");
                assert_eq!(t.id(), store.global_id(db, s));
                assert_eq!(t.hash, store.hasher.hash_one(k.as_bytes()));
            }
            seen.insert(s);
        }
        // 4,096 keys over 1,024 stripes: all but a handful are used.
        assert!(seen.len() > 950, "{} stripes used", seen.len());
        // One stripe: everything in it.
        let one = Store::new(1, 1);
        assert_eq!(one.stripe_of(b"a"), 0);
        assert_eq!(one.stripe_of(b"zz"), 0);
    }

    #[test]
    fn lazy_expiry_and_watch() {
        let store = Store::new(2, 64);
        let mut l = Locks::new(&store, 1000);
        let flag: WatchFlag = Arc::new(AtomicBool::new(false));
        l.stripe(0, b"k").watch(b"k", &flag, false);
        l.insert(0, b"k", Value::from_arg(b"v"), 1500, 0);
        assert!(flag.swap(false, Ordering::AcqRel));
        assert!(l.get(0, b"k").is_some());
        l.now = 1500;
        assert!(l.get(0, b"k").is_none());
        assert!(flag.load(Ordering::Acquire), "expiry marks watchers");
        let (mut ready, mut expired) = (Vec::new(), Vec::new());
        l.take_signals(&mut ready, |db, k| expired.push((db, k.to_vec())));
        assert_eq!(expired, vec![(0, b"k".to_vec())], "lazy expiry is reported");
        assert_eq!(l.stripe(0, b"k").stats.expired_keys, 1);
        assert_eq!(l.stripe(0, b"k").expires_len(), 0);
    }

    /// `Locks::entry` finds a live key, misses a missing one, and an
    /// insert through the vacant entry is found afterwards with its hash
    /// reused (the same entry a plain `get` finds).
    #[test]
    fn entry_finds_live_keys_and_inserts_where_it_missed() {
        let store = Store::new(1, 64);
        let mut l = Locks::new(&store, 1000);
        l.insert(0, b"a", Value::from_arg(b"1"), NO_EXPIRE, 7);
        match l.entry(0, b"a") {
            Lookup::Live(e) => assert_eq!(e.lru, 7),
            Lookup::Absent(_) => panic!("a is live"),
        }
        match l.entry(0, b"b") {
            Lookup::Live(_) => panic!("b is missing"),
            Lookup::Absent(place) => {
                assert_eq!(place.key(), b"b");
                place.insert(Value::from_arg(b"2"), NO_EXPIRE, 9);
            }
        }
        let e = l.get(0, b"b").expect("inserted");
        assert_eq!(e.lru, 9);
        assert!(!e.has_ttl());
    }

    /// A key past its deadline while expiry is held (clients paused) is
    /// hidden, not deleted: the entry is vacant, and inserting over the
    /// hidden key reports it expired, as `Locks::insert` does (the engine
    /// turns that into the `expired` event and a propagated DEL).
    #[test]
    fn entry_over_a_hidden_expired_key_reports_it_expired() {
        let store = Store::new(1, 64);
        let mut l = Locks::new(&store, 1000);
        l.insert(0, b"k", Value::from_arg(b"v"), 1500, 0);
        drop(l);
        store.hold_expiry(3000);
        let mut l = Locks::new(&store, 2000);
        match l.entry(0, b"k") {
            Lookup::Live(_) => panic!("k is past its deadline"),
            Lookup::Absent(place) => place.insert(Value::from_arg(b"w"), NO_EXPIRE, 0),
        }
        let (mut ready, mut expired) = (Vec::new(), Vec::new());
        l.take_signals(&mut ready, |db, k| expired.push((db, k.to_vec())));
        assert_eq!(expired, vec![(0, b"k".to_vec())]);
        assert_eq!(l.stripe(0, b"k").stats.expired_keys, 1);
        assert_eq!(l.stripe(0, b"k").expires_len(), 0, "the new key has no TTL");
        assert!(l.get(0, b"k").is_some());
    }

    /// Whose deadlines a reader obeys comes from its locks, and only while
    /// it holds them: the AOF's replay sees a key past its deadline live,
    /// a master's stream sees it live on a replica only, and the next
    /// client to lock the stripe finds it expired.
    #[test]
    fn deadlines_are_the_lock_holders_not_the_threads() {
        let store = Store::new(1, 4);
        let mut l = Locks::new(&store, 1000);
        l.insert(0, b"k", Value::from_arg(b"v"), 1500, 0);
        drop(l);
        // (A replica's client only hides it: its master deletes it.)
        for (d, replica, live) in [
            (Deadlines::Loading, false, true),
            (Deadlines::Master, true, true),
            (Deadlines::Enforced, true, false),
        ] {
            store.set_replica(replica);
            let mut l = Locks::new(&store, 2000);
            l.obey(d);
            assert_eq!(l.get(0, b"k").is_some(), live, "{d:?}, replica {replica}");
            assert_eq!(l.expiry_suspended(), live, "{d:?}, replica {replica}");
        }
        // A master's stream on a server that is no longer a replica, then
        // a client on the same thread: the key expired, and is deleted.
        store.set_replica(false);
        let mut l = Locks::new(&store, 2000);
        l.obey(Deadlines::Master);
        assert!(!l.expiry_suspended());
        assert!(l.get(0, b"k").is_none());
        assert_eq!(l.stripe(0, b"k").stats.expired_keys, 1);
        drop(l);
        let mut l = Locks::new(&store, 2000);
        assert!(l.get(0, b"k").is_none());
    }

    /// The deadline lives in the TTL table and only a bit in the entry:
    /// every way of setting, replacing, clearing and removing a TTL keeps
    /// the two in step, and hands the old deadline back.
    #[test]
    fn ttl_bit_and_table_stay_in_step() {
        let store = Store::new(1, 4);
        let mut l = Locks::new(&store, 1000);
        let check = |l: &mut Locks, key: &[u8], want: i64| {
            let s = l.stripe(0, key);
            let bit = s.peek(key).map(Entry::has_ttl);
            assert_eq!(s.expire_of(key), want);
            assert_eq!(bit, s.peek(key).map(|_| want != NO_EXPIRE));
        };
        assert!(l.insert(0, b"a", Value::Int(1), 5000, 0).is_none());
        check(&mut l, b"a", 5000);
        assert_eq!(l.stripe(0, b"a").expires_len(), 1);
        // Overwrite with a new deadline: the old one is returned.
        let old = l.insert(0, b"a", Value::Int(2), 6000, 0).unwrap();
        assert_eq!(old.expire_at, 5000);
        check(&mut l, b"a", 6000);
        // Overwrite without a TTL (SET without KEEPTTL) clears it.
        let old = l.insert(0, b"a", Value::Int(3), NO_EXPIRE, 0).unwrap();
        assert_eq!(old.expire_at, 6000);
        check(&mut l, b"a", NO_EXPIRE);
        assert_eq!(l.stripe(0, b"a").expires_len(), 0);
        // EXPIRE, re-EXPIRE, PERSIST.
        assert!(l.set_expire(0, b"a", 7000));
        check(&mut l, b"a", 7000);
        assert!(l.set_expire(0, b"a", 8000));
        check(&mut l, b"a", 8000);
        assert_eq!(l.expire_of(0, b"a"), 8000);
        assert!(l.set_expire(0, b"a", NO_EXPIRE));
        check(&mut l, b"a", NO_EXPIRE);
        assert!(!l.set_expire(0, b"missing", 9000));
        // Removing a key with a TTL returns it and drops the deadline.
        assert!(l.set_expire(0, b"a", 9000));
        let r = l.remove(0, b"a").unwrap();
        assert_eq!((r.expire_at, r.value), (9000, Value::Int(3)));
        assert_eq!(l.stripe(0, b"a").expires_len(), 0);
        // Overwriting an expired key reports it as gone, not replaced.
        l.insert(0, b"b", Value::Int(1), 1500, 0);
        l.now = 2000;
        assert!(l.insert(0, b"b", Value::Int(2), NO_EXPIRE, 0).is_none());
        check(&mut l, b"b", NO_EXPIRE);
        // Entries iterate with their deadlines.
        l.insert(0, b"c", Value::Int(1), 9999, 0);
        let mut seen: Vec<(Vec<u8>, i64)> = Vec::new();
        for id in 0..4 {
            let s = l.stripe_id(id);
            seen.extend(s.iter_expiring().map(|(k, _, at)| (k.to_vec(), at)));
        }
        seen.sort();
        assert_eq!(seen, vec![(b"b".to_vec(), NO_EXPIRE), (b"c".to_vec(), 9999)]);
    }

    #[test]
    fn ascending_locking_and_pairs() {
        let store = Store::new(2, 16);
        let mut l = Locks::new(&store, 0);
        let mut ids = vec![store.global_id(1, 3), store.global_id(0, 5), store.global_id(0, 5)];
        l.acquire(&mut ids).unwrap();
        let (a, b) = l.pair(store.global_id(0, 5), store.global_id(1, 3));
        a.insert(b"x", Value::Int(1), NO_EXPIRE, 0);
        b.swap_data(a, 0);
        assert_eq!(b.len(), 1);
        assert_eq!(a.len(), 0);
    }

    #[test]
    fn out_of_order_locking_is_refused_not_a_panic() {
        let store = Store::new(1, 16);
        let mut l = Locks::new(&store, 0);
        l.acquire(&mut [5]).unwrap();
        // Free: taken at once, out of order, and kept sorted.
        l.acquire(&mut [3]).unwrap();
        assert!(l.holds(3) && l.holds(5));
        // Busy (another holder): refused instead of waited for.
        let other = store.lock_stripe(0, 1);
        assert_eq!(l.acquire(&mut [1]), Err(LockOrder));
        assert!(!l.holds(1));
        drop(other);
        l.acquire(&mut [1, 9]).unwrap();
        assert!(l.holds(1) && l.holds(9));
        l.stripe_id(12).insert(b"x", Value::Int(1), NO_EXPIRE, 0);
    }

    #[test]
    fn active_expiry_removes_due_keys() {
        let store = Store::new(1, 4);
        for i in 0..1000 {
            let mut l = Locks::new(&store, 0);
            let k = format!("k{i}");
            let at = if i % 2 == 0 { 10 } else { NO_EXPIRE };
            l.insert(0, k.as_bytes(), Value::Int(i), at, 0);
        }
        let mut n = 0;
        let mut reported = 0;
        for _ in 0..100 {
            n += store.active_expire_cycle(
                0,
                1,
                20,
                std::time::Duration::from_millis(50),
                &mut |db, _| {
                    assert_eq!(db, 0);
                    reported += 1;
                },
                &mut Vec::new(),
            );
        }
        assert_eq!(n, 500);
        assert_eq!(reported, 500, "every deletion is reported");
        assert_eq!(store.db_size(0), (500, 0));
    }
}
