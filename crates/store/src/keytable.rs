//! The keyspace's own hash table: one 48-byte slot per key.
//!
//! The general [`Table`](crate::table::Table) keeps a 32-bit hash and a
//! chain link beside every `(key, value)`; with a 32-byte [`Entry`] that
//! is 64 bytes a node, 8 of them alignment padding. Here the chain link
//! lives in the entry's own spare word ([`Entry`]'s `link`, beside `lru`),
//! and no hash is kept: a chain is walked by comparing keys, which are
//! inline (no pointer to follow) up to 16 bytes, and a resize hashes the
//! keys again (amortised: once per key per doubling).
//!
//! A slot is a 16-byte key area and the 32-byte entry. The key's length
//! is not in the key area but in 5 bits of the entry's link word (its
//! "tag": 0 to 16 for an inline key of that length, [`HEAP`] for a longer
//! key, whose area then holds a pointer to its bytes and their length, or
//! [`FREE`] for a free slot, whose link is then the free list's), so all
//! 16 bytes hold key bytes: `key:<i>` keys, redis-benchmark's 16-byte
//! `key:<12 digits>` and memtier's `memtier-<i>` are all inline.
//!
//! The SCAN walk, the random pick and the shrinking rules are shared with
//! the general table ([`crate::chain`]). The slab is one array grown to
//! fill jemalloc size classes exactly ([`crate::table::grow_slab`]) until
//! it is large; then, once it is full, further slots come in fixed pieces
//! until they reach the array's next size class, where they are merged
//! into it (see [`PIECE`]).

use ahash::RandomState;

use crate::chain::{self, Shrink, Slab, MIN_BUCKETS};
use crate::db::{Entry, LINK_NIL};
use crate::table::{grow_slab, grown_capacity, prefetch};
use crate::value::Value;

const NIL: u32 = LINK_NIL;

/// Longest key kept inline in its slot.
pub const KEY_INLINE: usize = 16;
/// Tag of a slot whose key is on the heap.
const HEAP: u32 = KEY_INLINE as u32 + 1;
/// Tag of a free slot.
const FREE: u32 = 0x1f;

/// Slots a piece holds (1,536 bytes, a jemalloc size class).
///
/// A large slab's size classes are a quarter to an eighth apart, so one
/// array grown a class at a time leaves 5% of a stripe unused on average
/// (3 bytes a key at a million keys). Past the array's end, slots come
/// in pieces of this size instead, kept until another would pass the
/// array's next class; then the array grows to that class and the
/// pieces' slots move to its end, where their indices (and so the
/// chains) stay valid. Unused: at most a piece's worth. A lookup in the
/// array (most keys) costs what it did; a slot in a piece is one load
/// further (the piece's address).
const PIECE: usize = 32;
/// An array of fewer slots grows as a whole: its classes are closer than
/// a piece or two.
const PIECES_FROM: usize = 256;

/// A key's 16 bytes in its slot: the key itself, or (tag [`HEAP`]) a
/// `Box<[u8]>` the slot owns.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
union KeyArea {
    inline: [u8; KEY_INLINE],
    heap: HeapKey,
}

/// A key longer than [`KEY_INLINE`]: its allocation's parts, and 32 bits
/// of its hash. A chain walk passes over a heap key of another length or
/// fragment without reading its bytes: without the fragment every heap
/// key on the chain cost a cache miss and a `memcmp` (a quarter of the
/// CPU of INCR on redis-benchmark's 20-byte `counter:<i>` keys).
#[derive(Clone, Copy)]
#[repr(C)]
struct HeapKey {
    ptr: *mut u8,
    len: u32,
    hash: u32,
}

/// The hash bits a heap key keeps: neither the low ones (the bucket, the
/// same for a whole chain) nor the top ones (the stripe, outside cluster
/// mode the same for a whole table).
#[inline(always)]
fn fragment(h: u64) -> u32 {
    (h >> 22) as u32
}

#[repr(C)]
struct Slot {
    key: KeyArea,
    /// The entry; its link word holds the key's tag.
    entry: Entry,
}

// SAFETY: a slot's heap key is owned by the slot alone (a `Box<[u8]>`
// taken apart), so it moves between threads and is shared read-only as a
// `Box<[u8]>` would be.
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

impl Slot {
    fn used(key: &[u8], h: u64, mut entry: Entry) -> Slot {
        let area = if key.len() <= KEY_INLINE {
            let mut inline = [0u8; KEY_INLINE];
            inline[..key.len()].copy_from_slice(key);
            entry.set_key_tag(key.len() as u32);
            KeyArea { inline }
        } else {
            // Keys are at most 512 MB (`proto-max-bulk-len`'s bound).
            let len = u32::try_from(key.len()).expect("a key under 4 GB");
            let ptr = Box::into_raw(Box::<[u8]>::from(key)) as *mut u8;
            entry.set_key_tag(HEAP);
            KeyArea { heap: HeapKey { ptr, len, hash: fragment(h) } }
        };
        Slot { key: area, entry }
    }

    /// A free slot linking to the next free one.
    fn free(next: u32) -> Slot {
        let mut entry = Entry::new(Value::Int(0));
        entry.set_key_tag(FREE);
        entry.set_next(next);
        Slot { key: KeyArea { inline: [0; KEY_INLINE] }, entry }
    }

    #[inline(always)]
    fn is_used(&self) -> bool {
        self.entry.key_tag() != FREE
    }

    /// The key's bytes (empty for a free slot).
    #[inline(always)]
    fn key(&self) -> &[u8] {
        let tag = self.entry.key_tag();
        if tag <= KEY_INLINE as u32 {
            // SAFETY: an inline tag says the area holds `tag` key bytes.
            unsafe { &self.key.inline[..tag as usize] }
        } else if tag == HEAP {
            // SAFETY: a heap tag says the area holds a live `Box<[u8]>`'s
            // pointer and length, owned by this slot.
            unsafe { std::slice::from_raw_parts(self.key.heap.ptr, self.key.heap.len as usize) }
        } else {
            &[]
        }
    }

    /// The tag a slot holding `key` has.
    #[inline(always)]
    fn tag_of(key: &[u8]) -> u32 {
        if key.len() <= KEY_INLINE {
            key.len() as u32
        } else {
            HEAP
        }
    }

    /// Whether this used slot holds `key`, whose tag is `tag` and hash
    /// `h`: slots of another length are passed over on the tag alone, heap
    /// keys of another length or hash fragment without reading them.
    #[inline(always)]
    fn holds(&self, key: &[u8], tag: u32, h: u64) -> bool {
        if self.entry.key_tag() != tag {
            return false;
        }
        if tag <= KEY_INLINE as u32 {
            // SAFETY: an inline tag says the area holds `tag` key bytes.
            key_eq(unsafe { &self.key.inline[..key.len()] }, key)
        } else {
            // SAFETY: a heap tag: the area is a live `Box<[u8]>`'s parts.
            let HeapKey { ptr, len, hash } = unsafe { self.key.heap };
            // `key_eq`, not `==`: a key of 17 to 24 bytes (INCR's
            // `counter:__rand_int__`) is compared in three words, not by a
            // call to `bcmp` (some 20 instructions).
            hash == fragment(h)
                && len as usize == key.len()
                && key_eq(unsafe { std::slice::from_raw_parts(ptr, len as usize) }, key)
        }
    }

    /// Prefetches the slot's lines: 48-byte slots start at any multiple
    /// of 16, so half of them straddle two cache lines, and the one
    /// holding the end is fetched too.
    #[inline]
    fn prefetch(&self) {
        chain::prefetch_lines(self);
    }

    /// The bytes of this slot's heap key when its hash fragment is
    /// `hash`'s (it may then be the key hashed): for a prefetch.
    #[inline]
    fn heap_key_of(&self, hash: u64) -> Option<*const u8> {
        if self.entry.key_tag() != HEAP {
            return None;
        }
        // SAFETY: a heap tag: the area is a live `Box<[u8]>`'s parts.
        let HeapKey { ptr, hash: frag, .. } = unsafe { self.key.heap };
        (frag == fragment(hash)).then_some(ptr as *const u8)
    }

    /// Frees the heap key, if any, and makes the slot free; returns its entry.
    fn vacate(&mut self, next_free: u32) -> Entry {
        let old = std::mem::replace(self, Slot::free(next_free));
        let mut e = old.into_entry();
        e.set_key_tag(0);
        e.set_next(NIL);
        e
    }

    fn into_entry(self) -> Entry {
        let mut me = std::mem::ManuallyDrop::new(self);
        me.drop_key();
        // SAFETY: `me` is not dropped; its entry is moved out once.
        unsafe { std::ptr::read(&me.entry) }
    }

    fn drop_key(&mut self) {
        if self.entry.key_tag() == HEAP {
            // SAFETY: a heap tag: the area is a `Box<[u8]>` this slot owns,
            // freed once (the tag is cleared).
            unsafe {
                let HeapKey { ptr, len, .. } = self.key.heap;
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len as usize)));
            }
            self.entry.set_key_tag(0);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.drop_key();
    }
}

/// Narrow buckets' chain end.
const NARROW_NIL: u16 = u16::MAX;

/// The bucket array: each bucket the slab index of its chain's first slot.
/// 16 bits a bucket while every index fits (a stripe of fewer than 65,535
/// slots: 1,024 stripes a database hold 64M keys so), 32 bits past that;
/// at 1M keys that is 2 to 4 bytes a key instead of 4 to 8.
enum Buckets {
    Narrow(Box<[u16]>),
    Wide(Box<[u32]>),
}

impl Buckets {
    fn empty() -> Buckets {
        Buckets::Narrow(Box::new([]))
    }

    /// `size` buckets, all empty; narrow when indices below `slots` fit.
    fn new(size: usize, slots: usize) -> Buckets {
        if slots < NARROW_NIL as usize {
            Buckets::Narrow(vec![NARROW_NIL; size].into_boxed_slice())
        } else {
            Buckets::Wide(vec![NIL; size].into_boxed_slice())
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        match self {
            Buckets::Narrow(b) => b.len(),
            Buckets::Wide(b) => b.len(),
        }
    }

    #[inline(always)]
    fn is_narrow(&self) -> bool {
        matches!(self, Buckets::Narrow(_))
    }

    /// The first slot of bucket `b`'s chain ([`NIL`] when empty).
    #[inline(always)]
    fn head(&self, b: usize) -> u32 {
        match self {
            Buckets::Narrow(v) => match v[b] {
                NARROW_NIL => NIL,
                i => u32::from(i),
            },
            Buckets::Wide(v) => v[b],
        }
    }

    #[inline(always)]
    fn set(&mut self, b: usize, i: u32) {
        match self {
            // NIL's low 16 bits are NARROW_NIL; other indices fit.
            Buckets::Narrow(v) => v[b] = i as u16,
            Buckets::Wide(v) => v[b] = i,
        }
    }

    /// Turns narrow buckets wide (the slab reached 65,535 slots).
    #[cold]
    fn widen(&mut self) {
        if let Buckets::Narrow(v) = self {
            let wide: Box<[u32]> =
                v.iter().map(|&i| if i == NARROW_NIL { NIL } else { u32::from(i) }).collect();
            *self = Buckets::Wide(wide);
        }
    }

    /// Start address, mask and log2 of a bucket's size (for prefetching).
    fn base(&self) -> (*const u8, usize, u32) {
        match self {
            Buckets::Narrow(v) => (v.as_ptr() as *const u8, v.len().saturating_sub(1), 1),
            Buckets::Wide(v) => (v.as_ptr() as *const u8, v.len().saturating_sub(1), 2),
        }
    }
}

/// The keys of one stripe.
#[repr(C)]
pub struct KeyTable {
    buckets: Buckets,
    /// The slab's array: slots `0..slots.len()`. Full while there are
    /// pieces, and not pushed to then.
    slots: Vec<Slot>,
    /// The slab's slots past the array, [`PIECE`] a piece (each
    /// allocated at that capacity, all full but the last).
    pieces: Vec<Vec<Slot>>,
    free: u32,
    len: usize,
    hasher: RandomState,
}

impl KeyTable {
    pub fn with_hasher(hasher: RandomState) -> Self {
        KeyTable {
            buckets: Buckets::empty(),
            slots: Vec::new(),
            pieces: Vec::new(),
            free: NIL,
            len: 0,
            hasher,
        }
    }

    /// Slot `i`, in the array or a piece; `None` past the slab's end (a
    /// chain's end, [`NIL`], is past it).
    #[inline(always)]
    fn slot(&self, i: u32) -> Option<&Slot> {
        match self.slots.get(i as usize) {
            Some(s) => Some(s),
            None => self.piece_slot(i),
        }
    }

    #[inline]
    fn piece_slot(&self, i: u32) -> Option<&Slot> {
        let j = (i as usize).wrapping_sub(self.slots.len());
        self.pieces.get(j / PIECE)?.get(j % PIECE)
    }

    #[inline(always)]
    fn slot_mut(&mut self, i: u32) -> Option<&mut Slot> {
        let n = self.slots.len();
        if (i as usize) < n {
            return self.slots.get_mut(i as usize);
        }
        self.piece_slot_mut(i)
    }

    #[inline]
    fn piece_slot_mut(&mut self, i: u32) -> Option<&mut Slot> {
        let j = (i as usize).wrapping_sub(self.slots.len());
        self.pieces.get_mut(j / PIECE)?.get_mut(j % PIECE)
    }

    /// Slot `i`, which must exist (an index from a chain or the free list).
    #[inline]
    fn slot_at(&mut self, i: u32) -> &mut Slot {
        self.slot_mut(i).expect("a slab index")
    }

    /// Slots in the slab, used and free.
    fn slot_count(&self) -> usize {
        match self.pieces.last() {
            None => self.slots.len(),
            Some(last) => self.slots.len() + (self.pieces.len() - 1) * PIECE + last.len(),
        }
    }

    /// Slots the slab has room for.
    fn slot_capacity(&self) -> usize {
        self.slots.capacity() + self.pieces.len() * PIECE
    }

    /// Appends a slot to the slab; returns its index.
    fn push_slot(&mut self, slot: Slot) -> u32 {
        let n = self.slot_count();
        // Indices must stay below NIL (64M keys a stripe).
        assert!(n < NIL as usize, "key table full");
        if self.pieces.is_empty() {
            if self.slots.len() < self.slots.capacity() {
                self.slots.push(slot);
                return n as u32;
            }
            if self.slots.capacity() < PIECES_FROM {
                grow_slab(&mut self.slots);
                self.slots.push(slot);
                return n as u32;
            }
        } else if let Some(last) = self.pieces.last_mut().filter(|p| p.len() < PIECE) {
            last.push(slot);
            return n as u32;
        }
        // The array and every piece are full. The array's next class holds
        // `next` slots (at least an eighth more, so past 256 at least a
        // piece more); all are full, so `n` is at most `next`.
        let next = grown_capacity::<Slot>(self.slots.capacity());
        if n + PIECE > next {
            self.merge_pieces(next);
            if n < next {
                self.slots.push(slot);
                return n as u32;
            }
        }
        let mut piece = Vec::with_capacity(PIECE);
        piece.push(slot);
        self.pieces.push(piece);
        n as u32
    }

    /// Grows the array to `cap` slots and moves the pieces' slots to its
    /// end, in order: every index stays the slot's.
    fn merge_pieces(&mut self, cap: usize) {
        self.slots.reserve_exact(cap - self.slots.len());
        for piece in std::mem::take(&mut self.pieces) {
            self.slots.extend(piece);
        }
    }

    #[inline]
    pub fn hash_of(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Bucket array address, mask (0 when empty) and log2 of a bucket's
    /// size, for prefetching.
    #[inline]
    pub fn bucket_base(&self) -> (*const u8, usize, u32) {
        self.buckets.base()
    }

    /// The first slot of `hash`'s chain, if any (for the prefetch stages).
    #[inline]
    fn chain_head(&self, hash: u64) -> Option<&Slot> {
        let n = self.buckets.len();
        if n == 0 {
            return None;
        }
        self.slot(self.buckets.head((hash as usize) & (n - 1)))
    }

    /// Prefetches the first slot of `hash`'s chain.
    #[inline]
    pub fn prefetch_node(&self, hash: u64) {
        if let Some(s) = self.chain_head(hash) {
            s.prefetch();
        }
    }

    /// The stage after [`KeyTable::prefetch_node`] (whose slot is
    /// expected in cache by now): the chain's second slot, which nothing
    /// else fetches ahead. With chains as long as the table's buckets
    /// allow, some 30% of a table's keys are not at their chain's head,
    /// and their compare waited for that line. A heap key (`long`)
    /// whose hash fragment the first slot holds skips it.
    #[inline]
    pub fn prefetch_next(&self, hash: u64, long: bool) {
        let Some(s) = self.chain_head(hash) else { return };
        if long && s.heap_key_of(hash).is_some() {
            return;
        }
        if let Some(s) = self.slot(s.entry.next()) {
            s.prefetch();
        }
    }

    /// Prefetches the bytes of the first heap key on `hash`'s chain
    /// whose hash fragment is `hash`'s (the chain's first two slots are
    /// expected in cache: [`KeyTable::prefetch_node`] and
    /// [`KeyTable::prefetch_next`] ran in the stages before).
    #[inline]
    pub fn prefetch_key(&self, hash: u64) {
        let Some(first) = self.chain_head(hash) else { return };
        // At most two slots: a slot further on is not in cache yet.
        let second = self.slot(first.entry.next());
        if let Some(ptr) = first.heap_key_of(hash).or_else(|| second?.heap_key_of(hash)) {
            prefetch(ptr);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Inlined into the GET and SET paths (a call here measured ~20
    /// instructions a lookup more with callgrind).
    #[inline(always)]
    fn find(&self, key: &[u8], h: u64) -> u32 {
        self.find_hashed(key, h).map_or(NIL, |(i, _)| i)
    }

    /// The index of `key`'s slot and whether its entry has a TTL, read
    /// in the same walk: a read that finds no TTL bit then reaches its
    /// entry with one more slot access ([`KeyTable::entry_mut`]), not two
    /// (a GET at P=64 over a million keys: 4% fewer instructions).
    #[inline(always)]
    pub fn find_hashed(&self, key: &[u8], h: u64) -> Option<(u32, bool)> {
        let n = self.buckets.len();
        if n == 0 {
            return None;
        }
        let mut i = self.buckets.head((h as usize) & (n - 1));
        let tag = Slot::tag_of(key);
        // A chain links only used slots, and ends at NIL (past the slab).
        while let Some(s) = self.slot(i) {
            if s.holds(key, tag, h) {
                return Some((i, s.entry.has_ttl()));
            }
            i = s.entry.next();
        }
        None
    }

    /// The entry of slot `i` if it is used (without its key, which
    /// [`KeyTable::at_mut`] also hands out).
    #[inline]
    pub fn entry_mut(&mut self, i: u32) -> Option<&mut Entry> {
        self.slot_mut(i).filter(|s| s.is_used()).map(|s| &mut s.entry)
    }

    #[inline]
    pub fn index_of_hashed(&self, key: &[u8], h: u64) -> Option<u32> {
        let i = self.find(key, h);
        (i != NIL).then_some(i)
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        let i = self.find(key, self.hash_of(key));
        self.at(i).map(|(_, e)| e)
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.find(key, self.hash_of(key)) != NIL
    }

    #[inline]
    pub fn at(&self, i: u32) -> Option<(&[u8], &Entry)> {
        let s = self.slot(i)?;
        s.is_used().then(|| (s.key(), &s.entry))
    }

    /// The entry is handed out whole: its link word (chain, key tag, TTL
    /// bit) is private to the store, so a caller cannot break the slot.
    #[inline]
    pub fn at_mut(&mut self, i: u32) -> Option<(&[u8], &mut Entry)> {
        let s = self.slot_mut(i)?;
        if !s.is_used() {
            return None;
        }
        let Slot { key, entry } = s;
        let tag = entry.key_tag();
        // SAFETY: as in `Slot::key`; the key area is not borrowed mutably.
        let k: &[u8] = unsafe {
            if tag == HEAP {
                std::slice::from_raw_parts(key.heap.ptr, key.heap.len as usize)
            } else {
                &key.inline[..tag as usize]
            }
        };
        Some((k, entry))
    }

    /// Inserts or replaces (the new entry's TTL bit is the caller's; its
    /// chain link is set here). Returns the old entry.
    pub fn insert_hashed(&mut self, key: &[u8], h: u64, mut val: Entry) -> Option<Entry> {
        let i = self.find(key, h);
        if i != NIL {
            let e = &mut self.slot_at(i).entry;
            val.adopt_link(e);
            return Some(std::mem::replace(e, val));
        }
        self.insert_new(key, h, val);
        None
    }

    fn insert_new(&mut self, key: &[u8], h: u64, mut val: Entry) -> u32 {
        if self.len + 1 > self.buckets.len() {
            self.resize((self.len + 1).next_power_of_two().max(MIN_BUCKETS));
        }
        let b = (h as usize) & (self.buckets.len() - 1);
        val.set_next(self.buckets.head(b));
        let slot = Slot::used(key, h, val);
        let i = if self.free != NIL {
            let i = self.free;
            let old = self.slot_at(i);
            debug_assert!(!old.is_used(), "free list");
            let next = old.entry.next();
            // Dropping a free slot frees nothing.
            *old = slot;
            self.free = next;
            i
        } else {
            let i = self.push_slot(slot);
            if i >= u32::from(NARROW_NIL) && self.buckets.is_narrow() {
                self.buckets.widen();
            }
            i
        };
        self.buckets.set(b, i);
        self.len += 1;
        i
    }

    /// Removes `key`, returning its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let h = self.hash_of(key);
        let i = self.find(key, h);
        if i == NIL {
            return None;
        }
        self.unlink(i, h);
        Some(self.take(i))
    }

    /// Takes slot `i` (unlinked already) out of the table.
    fn take(&mut self, i: u32) -> Entry {
        let free = self.free;
        let e = self.slot_at(i).vacate(free);
        self.free = i;
        self.len -= 1;
        self.maybe_shrink();
        e
    }

    /// Unlinks slot `i` from the chain of bucket `h`.
    fn unlink(&mut self, i: u32, h: u64) {
        let b = (h as usize) & (self.buckets.len() - 1);
        let next = self.next_of(i);
        if self.buckets.head(b) == i {
            self.buckets.set(b, next);
            return;
        }
        let mut p = self.buckets.head(b);
        while self.next_of(p) != i {
            p = self.next_of(p);
        }
        self.slot_at(p).entry.set_next(next);
    }

    #[inline]
    fn next_of(&self, i: u32) -> u32 {
        let s = self.slot(i).expect("a slab index");
        if s.is_used() {
            s.entry.next()
        } else {
            NIL
        }
    }

    fn maybe_shrink(&mut self) {
        match chain::shrink(self.len, self.buckets.len(), self.slot_count(), self.slot_capacity()) {
            Shrink::Keep => {}
            Shrink::Free => self.clear(),
            Shrink::Compact(size) => {
                self.compact();
                self.resize(size);
            }
        }
    }

    fn compact(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let pieces = std::mem::take(&mut self.pieces);
        self.slots = Vec::with_capacity(self.len);
        self.slots
            .extend(old.into_iter().chain(pieces.into_iter().flatten()).filter(Slot::is_used));
        self.free = NIL;
    }

    fn resize(&mut self, size: usize) {
        // Narrow while the slab's indices fit (a push past them widens).
        self.buckets = Buckets::new(size, self.slot_capacity());
        let mask = size - 1;
        let KeyTable { buckets, slots, pieces, hasher, .. } = self;
        let mut link = |i: usize, s: &mut Slot| {
            if s.is_used() {
                let b = (hasher.hash_one(s.key()) as usize) & mask;
                s.entry.set_next(buckets.head(b));
                buckets.set(b, i as u32);
            }
        };
        for (i, s) in slots.iter_mut().enumerate() {
            link(i, s);
        }
        // The array is full while there are pieces: a piece's slots follow.
        for (i, s) in (slots.len()..).zip(pieces.iter_mut().flatten()) {
            link(i, s);
        }
    }

    pub fn clear(&mut self) {
        *self = KeyTable::with_hasher(self.hasher.clone());
    }

    /// Moves the keys out, leaving an empty table with the same hasher.
    pub fn take_all(&mut self) -> KeyTable {
        std::mem::replace(self, KeyTable::with_hasher(self.hasher.clone()))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.slots
            .iter()
            .chain(self.pieces.iter().flatten())
            .filter(|s| s.is_used())
            .map(|s| (s.key(), &s.entry))
    }

    /// Visits one bucket at `cursor` and returns the next cursor; 0 when
    /// complete (see [`chain::scan`]).
    pub fn scan(&self, cursor: u64, mut visit: impl FnMut(&[u8], &Entry)) -> u64 {
        chain::scan(
            self,
            self.buckets.len(),
            |b| self.buckets.head(b),
            cursor,
            |i| {
                if let Some(s) = self.slot(i).filter(|s| s.is_used()) {
                    visit(s.key(), &s.entry);
                }
            },
        )
    }

    /// A random used slab index, uniform over the keys (see
    /// [`chain::random_slot`]; RANDOMKEY is Redis's fair pick).
    pub fn random_index(&self, rand: impl FnMut() -> u64) -> Option<u32> {
        chain::random_slot(self, self.len, rand)
    }
}

impl Slab for KeyTable {
    const NIL: u32 = NIL;

    fn slots(&self) -> usize {
        self.slot_count()
    }

    fn used(&self, i: u32) -> bool {
        self.slot(i).is_some_and(Slot::is_used)
    }

    fn next(&self, i: u32) -> u32 {
        self.next_of(i)
    }
}

/// Key equality without a call to `memcmp` for keys of up to 24 bytes
/// (most keys): with no stored hash to filter a chain, every node visited
/// is compared, so the compare must cost a few loads.
#[inline(always)]
pub fn key_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let w4 = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes"));
    match n {
        0 => true,
        // Command names (GET, SET) and short keys: no call to memcmp.
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        // Overlapping words cover the middle.
        4..=7 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        17..=24 => w8(a, 0) == w8(b, 0) && w8(a, 8) == w8(b, 8) && w8(a, n - 8) == w8(b, n - 8),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use std::collections::HashSet;

    fn entry(i: i64) -> Entry {
        Entry::new(Value::Int(i))
    }

    fn int(e: &Entry) -> i64 {
        match e.value {
            Value::Int(i) => i,
            _ => panic!("not an int"),
        }
    }

    /// The per-key cost of the keyspace (bench/memory `strings`,
    /// docs/memory.md) rests on this.
    /// Regression: a stripe whose only key was deleted kept its slab and
    /// buckets, so evicting keys spread one to a stripe freed nothing and
    /// `maxmemory` was not honoured (Redis's "is the memory limit
    /// honoured?" tests).
    #[test]
    fn an_emptied_table_gives_its_memory_back() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        t.insert_hashed(b"k", t.hash_of(b"k"), entry(1));
        assert!(t.slots.capacity() > 0 && t.buckets.len() > 0);
        assert!(t.remove(b"k").is_some());
        assert_eq!((t.slots.capacity(), t.buckets.len()), (0, 0));
        // Usable again afterwards.
        t.insert_hashed(b"k", t.hash_of(b"k"), entry(2));
        assert_eq!(t.get(b"k").map(int), Some(2));
    }

    /// The slab past [`PIECES_FROM`]: the array stays full while there are
    /// pieces, every piece but the last is full, what is allocated and
    /// unused stays under a piece's worth, and keys in pieces and merged
    /// arrays are found, also after removals reuse and compact the slab.
    #[test]
    fn pieces_keep_the_slab_within_a_piece_of_its_keys() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        let check = |t: &KeyTable| {
            if !t.pieces.is_empty() {
                assert_eq!(t.slots.len(), t.slots.capacity(), "array not full");
                for (n, p) in t.pieces.iter().enumerate() {
                    assert_eq!(p.capacity(), PIECE);
                    assert!(n + 1 == t.pieces.len() || p.len() == PIECE, "piece {n} not full");
                }
            }
        };
        let mut merges = 0;
        for i in 0..20_000usize {
            let k = format!("key:{i}");
            let had = t.pieces.len();
            t.insert_hashed(k.as_bytes(), t.hash_of(k.as_bytes()), entry(i as i64));
            merges += usize::from(had > 0 && t.pieces.is_empty());
            check(&t);
            if i >= 1000 {
                let unused = t.slot_capacity() - t.slot_count();
                assert!(unused < PIECE, "{unused} unused slots at {} keys", i + 1);
            }
        }
        assert!(merges >= 5, "only {merges} merges");
        let all = |t: &KeyTable, keep: &dyn Fn(usize) -> bool| {
            for i in 0..20_000usize {
                let k = format!("key:{i}");
                assert_eq!(t.get(k.as_bytes()).map(int), keep(i).then_some(i as i64), "{k}");
            }
            assert_eq!(t.iter().count(), t.len());
        };
        all(&t, &|_| true);
        // Free slots in the array and the pieces, then reused.
        for i in (0..20_000usize).step_by(7) {
            assert!(t.remove(format!("key:{i}").as_bytes()).is_some());
        }
        check(&t);
        all(&t, &|i| i % 7 != 0);
        for i in (0..20_000usize).step_by(7) {
            let k = format!("key:{i}");
            t.insert_hashed(k.as_bytes(), t.hash_of(k.as_bytes()), entry(i as i64));
        }
        all(&t, &|_| true);
        // Three quarters gone: the slab is compacted into one array.
        for i in 0..15_000usize {
            assert!(t.remove(format!("key:{i}").as_bytes()).is_some());
        }
        assert!(t.pieces.is_empty() && t.slot_capacity() < 8_000);
        all(&t, &|i| i >= 15_000);
        for i in 0..15_000usize {
            let k = format!("key:{i}");
            t.insert_hashed(k.as_bytes(), t.hash_of(k.as_bytes()), entry(i as i64));
            check(&t);
        }
        all(&t, &|_| true);
    }

    #[test]
    fn slot_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 48);
    }

    #[test]
    fn insert_get_replace_remove_keep_chains() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        for i in 0..2000 {
            let k = format!("k{i}");
            assert!(t.insert_hashed(k.as_bytes(), t.hash_of(k.as_bytes()), entry(i)).is_none());
        }
        assert_eq!(t.len(), 2000);
        let old = t.insert_hashed(b"k10", t.hash_of(b"k10"), entry(-10)).unwrap();
        assert_eq!(int(&old), 10);
        assert_eq!(int(t.get(b"k10").unwrap()), -10);
        for i in (0..2000).step_by(2) {
            let e = t.remove(format!("k{i}").as_bytes()).unwrap();
            assert_eq!(int(&e), if i == 10 { -10 } else { i });
        }
        for i in 0..2000 {
            assert_eq!(t.get(format!("k{i}").as_bytes()).is_some(), i % 2 == 1, "k{i}");
        }
        for i in (1..2000).step_by(4) {
            let e = t.remove(format!("k{i}").as_bytes()).unwrap();
            assert_eq!(int(&e), i);
        }
        assert_eq!(t.len(), 500);
        for i in 0..2000 {
            assert_eq!(t.contains_key(format!("k{i}").as_bytes()), i % 4 == 3, "k{i}");
        }
    }

    #[test]
    fn key_eq_agrees_with_slices() {
        let base: Vec<u8> = (0..40u8).collect();
        for n in 0..40 {
            let a = &base[..n];
            assert!(key_eq(a, a));
            for i in 0..n {
                let mut b = a.to_vec();
                b[i] ^= 1;
                assert!(!key_eq(a, &b), "len {n}, byte {i}");
            }
            assert!(!key_eq(a, &base[..n + 1]));
        }
    }

    /// The TTL bit beside the chain link survives relinking (resizes,
    /// removals of chain neighbours).
    #[test]
    fn ttl_bit_survives_relinking() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        for i in 0..1000 {
            let k = format!("k{i}");
            let mut e = entry(i);
            e.set_ttl_bit(i % 3 == 0);
            t.insert_hashed(k.as_bytes(), t.hash_of(k.as_bytes()), e);
        }
        for i in (0..1000).step_by(5) {
            t.remove(format!("k{i}").as_bytes());
        }
        for i in 0..1000 {
            if let Some(e) = t.get(format!("k{i}").as_bytes()) {
                assert_eq!(e.has_ttl(), i % 3 == 0, "k{i}");
            }
        }
    }

    #[test]
    fn scan_survives_resizes() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        let put = |t: &mut KeyTable, k: String| {
            let h = t.hash_of(k.as_bytes());
            t.insert_hashed(k.as_bytes(), h, entry(0));
        };
        for i in 0..500 {
            put(&mut t, format!("stay{i}"));
        }
        let mut seen = HashSet::new();
        let (mut cursor, mut step) = (0, 0);
        loop {
            cursor = t.scan(cursor, |k, _| {
                seen.insert(k.to_vec());
            });
            if step < 20 {
                for j in 0..200 {
                    put(&mut t, format!("tmp{step}-{j}"));
                }
            } else if step < 40 {
                for j in 0..200 {
                    t.remove(format!("tmp{}-{j}", step - 20).as_bytes());
                }
            }
            step += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500 {
            assert!(seen.contains(format!("stay{i}").as_bytes()), "missed stay{i}");
        }
    }

    /// The keyspace's random pick is uniform over the keys (it was a
    /// random bucket then a random chain element, which favours keys in
    /// short chains), also with free slots left by removals.
    #[test]
    fn random_index_is_uniform_over_keys() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        for i in 0..300 {
            let k = format!("k{i}");
            let h = t.hash_of(k.as_bytes());
            t.insert_hashed(k.as_bytes(), h, entry(i));
        }
        for i in (0..300).step_by(5) {
            t.remove(format!("k{i}").as_bytes());
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut hits = vec![0u32; 300];
        for _ in 0..200 * t.len() {
            let i = t.random_index(&mut rnd).unwrap();
            hits[int(t.at(i).unwrap().1) as usize] += 1;
        }
        let chi: f64 = (0..300)
            .filter(|i| i % 5 != 0)
            .map(|i| (f64::from(hits[i]) - 200.0).powi(2) / 200.0)
            .sum();
        assert!((0..300).step_by(5).all(|i| hits[i] == 0));
        // df = 239: its 99.99th percentile is about 330.
        assert!(chi < 330.0, "chi-square {chi}");
    }

    /// The slot layout against a `HashMap` reference: keys and values of
    /// random lengths around the inline limits (0, 1, 15 to 17 bytes for
    /// keys, 22 and 44 for values, long ones), TTL bits set and cleared,
    /// replacements, deletes, and growth and shrinking of the table.
    #[test]
    fn slots_agree_with_a_hashmap_over_random_lengths() {
        use std::collections::HashMap;
        const LENS: [usize; 14] = [0, 1, 2, 7, 8, 15, 16, 17, 18, 22, 23, 24, 45, 100];
        for seed in 1..=6u64 {
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut t = KeyTable::with_hasher(RandomState::new());
            let mut reference: HashMap<Vec<u8>, (Value, bool)> = HashMap::new();
            // Keys share a prefix, so inline keys differ in their last bytes.
            let key = |r: u64| {
                let len = LENS[(r % LENS.len() as u64) as usize];
                let id = (r >> 8) % 3000;
                let mut k: Vec<u8> = id.to_le_bytes().iter().cycle().take(len).copied().collect();
                if let Some(b) = k.last_mut() {
                    *b ^= (id >> 7) as u8;
                }
                k
            };
            let value = |r: u64| {
                let len = LENS[(r % LENS.len() as u64) as usize].max(1) - 1;
                match r % 5 {
                    0 => Value::Int(r as i64),
                    _ => Value::str_exact(&vec![(r >> 16) as u8; len]),
                }
            };
            let rounds = if seed % 2 == 0 { 20_000 } else { 6_000 };
            for round in 0..rounds {
                let r = rnd();
                let k = key(rnd());
                // Deletes win in the second half: the table shrinks again.
                let delete_share = if round < rounds / 2 { 3 } else { 6 };
                match r % 10 {
                    n if n < delete_share => {
                        let got = t.remove(&k).map(|e| (e.value.clone(), e.has_ttl()));
                        assert_eq!(got, reference.remove(&k), "remove {k:?}");
                    }
                    _ => {
                        let v = value(rnd());
                        let ttl = r % 3 == 0;
                        let mut e = Entry::new(v.clone());
                        e.set_ttl_bit(ttl);
                        let h = t.hash_of(&k);
                        let old = t.insert_hashed(&k, h, e).map(|e| {
                            let ttl = e.has_ttl();
                            (e.value, ttl)
                        });
                        assert_eq!(old, reference.insert(k.clone(), (v, ttl)), "insert {k:?}");
                    }
                }
                if r % 7 == 0 {
                    // Set or clear a TTL bit in place.
                    let k = key(rnd());
                    let h = t.hash_of(&k);
                    if let Some(i) = t.index_of_hashed(&k, h) {
                        let (stored, e) = t.at_mut(i).unwrap();
                        assert_eq!(stored, &k[..]);
                        let on = !e.has_ttl();
                        e.set_ttl_bit(on);
                        reference.get_mut(&k).unwrap().1 = on;
                    }
                }
            }
            assert_eq!(t.len(), reference.len());
            for (k, (v, ttl)) in &reference {
                let e = t.get(k).unwrap_or_else(|| panic!("lost {k:?}"));
                assert_eq!((&e.value, e.has_ttl()), (v, *ttl), "{k:?}");
            }
            let mut seen: Vec<Vec<u8>> = t.iter().map(|(k, _)| k.to_vec()).collect();
            seen.sort();
            let mut want: Vec<Vec<u8>> = reference.keys().cloned().collect();
            want.sort();
            assert_eq!(seen, want);
            let mut scanned = HashSet::new();
            let mut cursor = 0;
            loop {
                cursor = t.scan(cursor, |k, _| {
                    scanned.insert(k.to_vec());
                });
                if cursor == 0 {
                    break;
                }
            }
            assert_eq!(scanned.len(), reference.len());
        }
    }

    /// Heap keys are freed with their slot, on removal, replacement of the
    /// whole table and drop (run under Miri or a leak checker to see it).
    #[test]
    fn long_keys_round_trip() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        let long: Vec<u8> = (0..200u8).collect();
        for n in [16, 17, 200] {
            let k = &long[..n];
            t.insert_hashed(k, t.hash_of(k), entry(n as i64));
        }
        assert_eq!(t.slots[0].entry.key_tag(), 16);
        assert_eq!(t.slots[1].entry.key_tag(), HEAP);
        assert_eq!(t.iter().map(|(k, _)| k.len()).collect::<Vec<_>>(), [16, 17, 200]);
        assert_eq!(int(&t.remove(&long[..17]).unwrap()), 17);
        assert_eq!(t.get(&long[..200]).map(int), Some(200));
        assert!(t.get(&long[..17]).is_none());
        t.insert_hashed(b"short", t.hash_of(b"short"), entry(5));
        // The freed slot is reused by the short key.
        assert_eq!(t.slots.len(), 3);
        assert_eq!(t.at(1).map(|(k, _)| k), Some(&b"short"[..]));
    }

    /// Buckets are 16 bits while the slab's indices fit, and turn 32 bits
    /// wide when a push passes 65,534 slots; a table shrunk below that is
    /// narrow again. Every key stays reachable through both changes.
    #[test]
    fn buckets_widen_and_narrow_with_the_slab() {
        let mut t = KeyTable::with_hasher(RandomState::new());
        let put = |t: &mut KeyTable, i: i64| {
            let k = format!("k{i}");
            t.insert_hashed(k.as_bytes(), t.hash_of(k.as_bytes()), entry(i));
        };
        for i in 0..65_534 {
            put(&mut t, i);
        }
        assert!(t.buckets.is_narrow());
        for i in 65_534..70_000 {
            put(&mut t, i);
        }
        assert!(!t.buckets.is_narrow());
        let count = |t: &KeyTable| {
            let (mut n, mut cursor) = (0, 0);
            loop {
                cursor = t.scan(cursor, |_, _| n += 1);
                if cursor == 0 {
                    return n;
                }
            }
        };
        assert_eq!(count(&t), 70_000);
        for i in 0..70_000 {
            assert_eq!(t.get(format!("k{i}").as_bytes()).map(int), Some(i), "k{i}");
        }
        for i in 0..60_000 {
            t.remove(format!("k{i}").as_bytes()).unwrap();
        }
        assert!(t.buckets.is_narrow());
        assert_eq!(count(&t), 10_000);
        for i in 0..70_000 {
            assert_eq!(t.get(format!("k{i}").as_bytes()).map(int), (i >= 60_000).then_some(i));
        }
    }
}
