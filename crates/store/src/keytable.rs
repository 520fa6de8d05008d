//! The keyspace's own hash table: one 56-byte slot per key.
//!
//! The general [`Table`](crate::table::Table) keeps a 32-bit hash and a
//! chain link beside every `(key, value)`; with a 32-byte [`Entry`] that
//! is 64 bytes a node, 8 of them alignment padding. Here the chain link
//! lives in the entry's own spare word ([`Entry`]'s `link`, beside `lru`),
//! and no hash is kept: a chain is walked by comparing keys, which are
//! inline (no pointer to follow) up to 22 bytes, and a resize hashes the
//! keys again (amortised: once per key per doubling). A slot is
//! 24 (key) + 32 (entry) = 56 bytes, a free slot reusing the key's tag.
//!
//! The SCAN walk, the random pick and the shrinking rules are shared with
//! the general table ([`crate::chain`]); the slab grows to fill jemalloc size
//! classes exactly ([`crate::table::grow_slab`]).

use ahash::RandomState;

use crate::bytes::SmallBytes;
use crate::chain::{self, Shrink, Slab, MIN_BUCKETS};
use crate::db::{Entry, LINK_NIL};
use crate::table::{grow_slab, prefetch};

const NIL: u32 = LINK_NIL;

enum Slot {
    Used(SmallBytes, Entry),
    /// A free slab slot and the next free one.
    Free(u32),
}

/// The keys of one stripe.
#[repr(C)]
pub struct KeyTable {
    buckets: Vec<u32>,
    slots: Vec<Slot>,
    free: u32,
    len: usize,
    hasher: RandomState,
}

impl KeyTable {
    pub fn with_hasher(hasher: RandomState) -> Self {
        KeyTable { buckets: Vec::new(), slots: Vec::new(), free: NIL, len: 0, hasher }
    }

    #[inline]
    pub fn hash_of(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Bucket array address and mask (for prefetching; 0 mask when empty).
    #[inline]
    pub fn bucket_base(&self) -> (*const u32, usize) {
        (self.buckets.as_ptr(), self.buckets.len().saturating_sub(1))
    }

    /// Prefetches the first slot of `hash`'s chain.
    #[inline]
    pub fn prefetch_node(&self, hash: u64) {
        if self.buckets.is_empty() {
            return;
        }
        let i = self.buckets[(hash as usize) & (self.buckets.len() - 1)];
        if let Some(s) = self.slots.get(i as usize) {
            let p = s as *const Slot as *const u8;
            prefetch(p);
            // 56-byte slots start at any multiple of 8, so most straddle
            // two cache lines: fetch the one holding the slot's end too.
            prefetch(p.wrapping_add(55));
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
        if self.buckets.is_empty() {
            return NIL;
        }
        let mut i = self.buckets[(h as usize) & (self.buckets.len() - 1)];
        // A chain links only used slots.
        while let Some(Slot::Used(k, e)) = self.slots.get(i as usize) {
            if key_eq(k, key) {
                return i;
            }
            i = e.next();
        }
        NIL
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
        match self.slots.get(i as usize)? {
            Slot::Used(k, e) => Some((k, e)),
            Slot::Free(_) => None,
        }
    }

    #[inline]
    pub fn at_mut(&mut self, i: u32) -> Option<(&[u8], &mut Entry)> {
        match self.slots.get_mut(i as usize)? {
            Slot::Used(k, e) => Some((k, e)),
            Slot::Free(_) => None,
        }
    }

    /// Inserts or replaces (the new entry's TTL bit is the caller's; its
    /// chain link is set here). Returns the old entry.
    pub fn insert_hashed(&mut self, key: &[u8], h: u64, mut val: Entry) -> Option<Entry> {
        let i = self.find(key, h);
        if i != NIL {
            let Slot::Used(_, e) = &mut self.slots[i as usize] else { unreachable!() };
            val.set_next(e.next());
            return Some(std::mem::replace(e, val));
        }
        self.insert_new(SmallBytes::new(key), h, val);
        None
    }

    fn insert_new(&mut self, key: SmallBytes, h: u64, mut val: Entry) -> u32 {
        if self.len + 1 > self.buckets.len() {
            self.resize((self.len + 1).next_power_of_two().max(MIN_BUCKETS));
        }
        let b = (h as usize) & (self.buckets.len() - 1);
        val.set_next(self.buckets[b]);
        let slot = Slot::Used(key, val);
        let i = if self.free != NIL {
            let i = self.free;
            let Slot::Free(next) = self.slots[i as usize] else { unreachable!("free list") };
            self.free = next;
            self.slots[i as usize] = slot;
            i
        } else {
            if self.slots.len() == self.slots.capacity() {
                grow_slab(&mut self.slots);
            }
            self.slots.push(slot);
            (self.slots.len() - 1) as u32
        };
        self.buckets[b] = i;
        self.len += 1;
        i
    }

    /// Removes `key`, returning its stored bytes and entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<(SmallBytes, Entry)> {
        let h = self.hash_of(key);
        let i = self.find(key, h);
        if i == NIL {
            return None;
        }
        self.unlink(i, h);
        Some(self.take(i))
    }

    /// Takes slot `i` (unlinked already) out of the table.
    fn take(&mut self, i: u32) -> (SmallBytes, Entry) {
        let old = std::mem::replace(&mut self.slots[i as usize], Slot::Free(self.free));
        self.free = i;
        self.len -= 1;
        let Slot::Used(k, mut e) = old else { unreachable!() };
        e.set_next(NIL);
        self.maybe_shrink();
        (k, e)
    }

    /// Unlinks slot `i` from the chain of bucket `h`.
    fn unlink(&mut self, i: u32, h: u64) {
        let b = (h as usize) & (self.buckets.len() - 1);
        let next = self.next_of(i);
        if self.buckets[b] == i {
            self.buckets[b] = next;
            return;
        }
        let mut p = self.buckets[b];
        while self.next_of(p) != i {
            p = self.next_of(p);
        }
        if let Slot::Used(_, e) = &mut self.slots[p as usize] {
            e.set_next(next);
        }
    }

    #[inline]
    fn next_of(&self, i: u32) -> u32 {
        match &self.slots[i as usize] {
            Slot::Used(_, e) => e.next(),
            Slot::Free(_) => NIL,
        }
    }

    fn maybe_shrink(&mut self) {
        match chain::shrink(self.len, self.buckets.len(), self.slots.len(), self.slots.capacity()) {
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
        self.slots = Vec::with_capacity(self.len);
        self.slots.extend(old.into_iter().filter(|s| matches!(s, Slot::Used(..))));
        self.free = NIL;
    }

    fn resize(&mut self, size: usize) {
        self.buckets.clear();
        self.buckets.resize(size, NIL);
        let mask = size - 1;
        for (i, s) in self.slots.iter_mut().enumerate() {
            if let Slot::Used(k, e) = s {
                let b = (self.hasher.hash_one(&**k) as usize) & mask;
                e.set_next(self.buckets[b]);
                self.buckets[b] = i as u32;
            }
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
        self.slots.iter().filter_map(|s| match s {
            Slot::Used(k, e) => Some((&**k, e)),
            Slot::Free(_) => None,
        })
    }

    /// Visits one bucket at `cursor` and returns the next cursor; 0 when
    /// complete (see [`chain::scan`]).
    pub fn scan(&self, cursor: u64, mut visit: impl FnMut(&[u8], &Entry)) -> u64 {
        chain::scan(self, &self.buckets, cursor, |i| {
            if let Slot::Used(k, e) = &self.slots[i as usize] {
                visit(k, e);
            }
        })
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
        self.slots.len()
    }

    fn used(&self, i: u32) -> bool {
        matches!(self.slots[i as usize], Slot::Used(..))
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
        assert!(t.slots.capacity() > 0 && !t.buckets.is_empty());
        assert!(t.remove(b"k").is_some());
        assert_eq!((t.slots.capacity(), t.buckets.capacity()), (0, 0));
        // Usable again afterwards.
        t.insert_hashed(b"k", t.hash_of(b"k"), entry(2));
        assert_eq!(t.get(b"k").map(int), Some(2));
    }

    #[test]
    fn slot_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 56);
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
            let (k, e) = t.remove(format!("k{i}").as_bytes()).unwrap();
            assert_eq!(&*k, format!("k{i}").as_bytes());
            assert_eq!(int(&e), if i == 10 { -10 } else { i });
        }
        for i in 0..2000 {
            assert_eq!(t.get(format!("k{i}").as_bytes()).is_some(), i % 2 == 1, "k{i}");
        }
        for i in (1..2000).step_by(4) {
            let (_, e) = t.remove(format!("k{i}").as_bytes()).unwrap();
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
}
