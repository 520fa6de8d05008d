//! A chained hash table keyed by byte strings, with Redis's SCAN guarantee.
//!
//! Nodes live in one slab (`Vec`), buckets hold slab indices, so a table
//! costs no allocation per entry beyond the key's own bytes. The bucket
//! array is a power of two and the SCAN cursor walks it in reverse-binary
//! order (Redis's `dictScan`), which returns every element present for the
//! whole iteration at least once even when the table grows or shrinks
//! between calls. Resizing is done all at once: a table is one lock stripe
//! (or one value), small enough that this costs microseconds, so Redis's
//! incremental rehashing is not needed here.

use ahash::RandomState;

use crate::bytes::SmallBytes;
use crate::chain::{self, Shrink, Slab, MIN_BUCKETS};
use crate::keytable::key_eq;
use crate::types::list::size_class;

const NIL: u32 = u32::MAX;

struct Node<V> {
    /// The low 32 bits of the key's hash: enough to pick a bucket (tables
    /// stay below 2^32 buckets) and to skip most non-matching keys, and
    /// with `next` it fills one 8-byte word instead of two.
    hash: u32,
    next: u32,
    /// `None` marks a free slab slot; `next` then links the free list.
    kv: Option<(SmallBytes, V)>,
}

/// Byte-keyed hash table. (`repr(C)`: the arrays a lookup reads first
/// lead, the hasher trails.)
#[repr(C)]
pub struct Table<V> {
    buckets: Vec<u32>,
    nodes: Vec<Node<V>>,
    free: u32,
    len: usize,
    hasher: RandomState,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> Table<V> {
    pub fn new() -> Self {
        Self::with_hasher(RandomState::new())
    }

    /// A table whose hashes a caller can compute ahead of time (the
    /// keyspace shares one seed across stripes so that a pipelined batch
    /// can prefetch before it locks).
    pub fn with_hasher(hasher: RandomState) -> Self {
        Table { buckets: Vec::new(), nodes: Vec::new(), free: NIL, len: 0, hasher }
    }

    /// The hash this table uses for `key`.
    #[inline]
    pub fn hash_of(&self, key: &[u8]) -> u64 {
        self.hash(key)
    }

    /// Bucket array address and mask (for prefetching; 0 mask when empty).
    #[inline]
    pub fn bucket_base(&self) -> (*const u32, usize) {
        (self.buckets.as_ptr(), self.buckets.len().saturating_sub(1))
    }

    /// A pipelined batch's member stages (`Store::with_member_value`):
    /// `key`'s hash in this table, with its bucket prefetched.
    #[inline]
    pub fn prefetch_bucket_of(&self, key: &[u8]) -> u64 {
        chain::prefetch_bucket(&self.buckets, self.hash(key))
    }

    /// The stages after: the first node of `hash`'s chain, or (`second`)
    /// the next one when the first is not `hash`'s.
    #[inline]
    pub fn prefetch_chain(&self, hash: u64, second: bool) {
        chain::prefetch_chain(&self.buckets, &self.nodes, hash, second, |n| {
            (n.hash != hash as u32).then_some(n.next)
        });
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of buckets (a power of two, or 0 before the first insert).
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    #[inline]
    fn find(&self, key: &[u8], h: u64) -> u32 {
        if self.buckets.is_empty() {
            return NIL;
        }
        let mut i = self.buckets[(h as usize) & (self.buckets.len() - 1)];
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.hash == h as u32 {
                if let Some((k, _)) = &n.kv {
                    if key_eq(k, key) {
                        return i;
                    }
                }
            }
            i = n.next;
        }
        NIL
    }

    /// Slab index of `key`, stable until the key is removed.
    pub fn index_of(&self, key: &[u8]) -> Option<u32> {
        self.index_of_hashed(key, self.hash(key))
    }

    /// [`index_of`](Self::index_of) with the key's hash already known
    /// (it must be this table's hash of `key`).
    #[inline]
    pub fn index_of_hashed(&self, key: &[u8], h: u64) -> Option<u32> {
        let i = self.find(key, h);
        (i != NIL).then_some(i)
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        let i = self.find(key, self.hash(key));
        if i == NIL {
            return None;
        }
        self.nodes[i as usize].kv.as_ref().map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let i = self.find(key, self.hash(key));
        if i == NIL {
            return None;
        }
        self.nodes[i as usize].kv.as_mut().map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.find(key, self.hash(key)) != NIL
    }

    /// Key and value at slab index `i`, if occupied.
    pub fn at(&self, i: u32) -> Option<(&[u8], &V)> {
        self.nodes.get(i as usize)?.kv.as_ref().map(|(k, v)| (&**k, v))
    }

    /// Mutable value at slab index `i`, if occupied.
    pub fn at_mut(&mut self, i: u32) -> Option<(&[u8], &mut V)> {
        self.nodes.get_mut(i as usize)?.kv.as_mut().map(|(k, v)| (&**k, v))
    }

    /// Inserts or replaces; returns the slab index and the old value.
    pub fn insert(&mut self, key: &[u8], val: V) -> (u32, Option<V>) {
        self.insert_hashed(key, self.hash(key), val)
    }

    /// [`insert`](Self::insert) with the key's hash already known.
    pub fn insert_hashed(&mut self, key: &[u8], h: u64, val: V) -> (u32, Option<V>) {
        let i = self.find(key, h);
        if i != NIL {
            let slot = &mut self.nodes[i as usize].kv.as_mut().expect("found node is occupied").1;
            return (i, Some(std::mem::replace(slot, val)));
        }
        (self.insert_new(SmallBytes::new(key), h, val), None)
    }

    /// Inserts a key known to be absent, reusing its stored bytes.
    pub fn insert_owned(&mut self, key: SmallBytes, val: V) -> u32 {
        let h = self.hash(&key);
        debug_assert!(self.find(&key, h) == NIL);
        self.insert_new(key, h, val)
    }

    fn insert_new(&mut self, key: SmallBytes, h: u64, val: V) -> u32 {
        if self.len + 1 > self.buckets.len() {
            self.resize((self.len + 1).next_power_of_two().max(MIN_BUCKETS));
        }
        let b = (h as usize) & (self.buckets.len() - 1);
        let node = Node { hash: h as u32, next: self.buckets[b], kv: Some((key, val)) };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            if self.nodes.len() == self.nodes.capacity() {
                grow_slab(&mut self.nodes);
            }
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        self.buckets[b] = i;
        self.len += 1;
        i
    }

    /// Removes `key`, returning its stored bytes and value.
    pub fn remove(&mut self, key: &[u8]) -> Option<(SmallBytes, V)> {
        if self.buckets.is_empty() {
            return None;
        }
        let h = self.hash(key);
        let b = (h as usize) & (self.buckets.len() - 1);
        let mut prev = NIL;
        let mut i = self.buckets[b];
        while i != NIL {
            let n = &self.nodes[i as usize];
            let hit = n.hash == h as u32 && n.kv.as_ref().is_some_and(|(k, _)| key_eq(k, key));
            let next = n.next;
            if hit {
                if prev == NIL {
                    self.buckets[b] = next;
                } else {
                    self.nodes[prev as usize].next = next;
                }
                let n = &mut self.nodes[i as usize];
                let kv = n.kv.take();
                n.next = self.free;
                self.free = i;
                self.len -= 1;
                self.maybe_shrink();
                return kv;
            }
            prev = i;
            i = next;
        }
        None
    }

    /// Removes the entry at slab index `i` (from [`random_index`] or
    /// [`index_of`]), returning its key and value without hashing the key
    /// again: the node's stored hash names its bucket.
    ///
    /// [`random_index`]: Self::random_index
    /// [`index_of`]: Self::index_of
    pub fn remove_at(&mut self, i: u32) -> Option<(SmallBytes, V)> {
        let n = self.nodes.get(i as usize)?;
        n.kv.as_ref()?;
        let b = (n.hash as usize) & (self.buckets.len() - 1);
        let next = n.next;
        if self.buckets[b] == i {
            self.buckets[b] = next;
        } else {
            let mut p = self.buckets[b];
            while self.nodes[p as usize].next != i {
                p = self.nodes[p as usize].next;
            }
            self.nodes[p as usize].next = next;
        }
        let n = &mut self.nodes[i as usize];
        let kv = n.kv.take();
        n.next = self.free;
        self.free = i;
        self.len -= 1;
        self.maybe_shrink();
        kv
    }

    fn maybe_shrink(&mut self) {
        match chain::shrink(self.len, self.buckets.len(), self.nodes.len(), self.nodes.capacity()) {
            Shrink::Keep => {}
            Shrink::Free => self.clear(),
            Shrink::Compact(size) => {
                self.compact();
                self.resize(size);
            }
        }
    }

    /// Moves occupied nodes to the front of the slab and frees the rest.
    /// Slab indices change; callers that keep indices must not rely on them
    /// across a removal.
    fn compact(&mut self) {
        let old = std::mem::take(&mut self.nodes);
        self.nodes = Vec::with_capacity(self.len);
        for n in old {
            if n.kv.is_some() {
                self.nodes.push(Node { next: NIL, ..n });
            }
        }
        self.free = NIL;
    }

    fn resize(&mut self, size: usize) {
        self.buckets.clear();
        self.buckets.resize(size, NIL);
        let mask = size - 1;
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if n.kv.is_some() {
                let b = (n.hash as usize) & mask;
                n.next = self.buckets[b];
                self.buckets[b] = i as u32;
            }
        }
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        *self = Table { hasher: self.hasher.clone(), ..Table::new() };
    }

    /// Moves the entries out, leaving an empty table with the same hasher.
    pub fn take(&mut self) -> Table<V> {
        std::mem::replace(self, Table { hasher: self.hasher.clone(), ..Table::new() })
    }

    /// Iterates over all entries in slab order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.nodes.iter().filter_map(|n| n.kv.as_ref().map(|(k, v)| (&**k, v)))
    }

    /// Iterates mutably over all entries.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut V)> {
        self.nodes.iter_mut().filter_map(|n| n.kv.as_mut().map(|(k, v)| (&**k, v)))
    }

    /// Visits one bucket at `cursor` and returns the next cursor; 0 means
    /// the scan is complete (see [`chain::scan`]).
    pub fn scan(&self, cursor: u64, mut visit: impl FnMut(&[u8], &V)) -> u64 {
        chain::scan(
            self,
            self.buckets.len(),
            |b| self.buckets[b],
            cursor,
            |i| {
                if let Some((k, v)) = &self.nodes[i as usize].kv {
                    visit(k, v);
                }
            },
        )
    }

    /// A random occupied slab index, uniform over the entries, using
    /// `rand` as the source of randomness (see [`chain::random_slot`]).
    pub fn random_index(&self, rand: impl FnMut() -> u64) -> Option<u32> {
        chain::random_slot(self, self.len, rand)
    }
}

impl<V> Slab for Table<V> {
    const NIL: u32 = NIL;

    fn slots(&self) -> usize {
        self.nodes.len()
    }

    fn used(&self, i: u32) -> bool {
        self.nodes[i as usize].kv.is_some()
    }

    fn next(&self, i: u32) -> u32 {
        self.nodes[i as usize].next
    }
}

/// Grows a full slab by an eighth to a quarter (not by doubling), to the
/// most elements that fit the jemalloc size class the new size falls in:
/// jemalloc hands out whole classes (four per power of two), so a
/// capacity that stops short of the class end would be paid for anyway.
/// A full slab then wastes what the class spacing leaves (9% on average
/// over the last quarter-step) instead of up to half.
pub(crate) fn grow_slab<T>(v: &mut Vec<T>) {
    let new_cap = grown_capacity::<T>(v.capacity());
    v.reserve_exact(new_cap - v.len());
}

/// The capacity [`grow_slab`] grows a slab of `cap` elements of `T` to.
pub(crate) fn grown_capacity<T>(cap: usize) -> usize {
    let elem = std::mem::size_of::<T>().max(1);
    let want = (cap + (cap / 8).max(4)) * elem;
    (size_class(want) / elem).max(cap + 1)
}

/// Hints the CPU to load the cache line at `p`. Never faults, whatever `p`.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it does not dereference for the program
    // and cannot fault, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Regression: a table emptied from its smallest size kept its slab
    /// and buckets (see `KeyTable`'s test of the same name).
    #[test]
    fn an_emptied_table_gives_its_memory_back() {
        let mut t: Table<i64> = Table::new();
        t.insert(b"k", 1);
        assert!(t.nodes.capacity() > 0);
        assert!(t.remove(b"k").is_some());
        assert_eq!((t.nodes.capacity(), t.buckets.capacity()), (0, 0));
        t.insert(b"k", 2);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn size_classes_are_jemallocs() {
        let classes: Vec<usize> = [1, 17, 33, 48, 49, 65, 81, 129, 160, 161, 4097, 57000, 57345]
            .iter()
            .map(|&n| size_class(n))
            .collect();
        assert_eq!(classes, [16, 32, 48, 48, 64, 80, 96, 160, 160, 192, 5120, 57344, 65536]);
        let mut v: Vec<[u8; 56]> = Vec::new();
        let mut caps = Vec::new();
        for _ in 0..1000 {
            if v.len() == v.capacity() {
                grow_slab(&mut v);
                caps.push(v.capacity());
            }
            v.push([0; 56]);
        }
        // Every capacity fills its class to within one element.
        for c in caps {
            assert!(size_class(c * 56) - c * 56 < 56, "{c}");
        }
    }

    /// Per-element memory depends on these (bench/memory, docs/benchmarks.md).
    #[test]
    fn node_sizes() {
        use std::mem::size_of;
        assert_eq!(size_of::<Node<()>>(), 32);
        assert_eq!(size_of::<Node<SmallBytes>>(), 56);
        // The TTL table's node: key and deadline.
        assert_eq!(size_of::<Node<i64>>(), 40);
    }

    #[test]
    fn insert_get_remove() {
        let mut t = Table::new();
        for i in 0..1000u32 {
            assert!(t.insert(format!("k{i}").as_bytes(), i).1.is_none());
        }
        assert_eq!(t.len(), 1000);
        assert_eq!(t.get(b"k10"), Some(&10));
        assert_eq!(t.insert(b"k10", 11).1, Some(10));
        for i in 0..990u32 {
            assert!(t.remove(format!("k{i}").as_bytes()).is_some());
        }
        assert_eq!(t.len(), 10);
        assert!(t.buckets() <= 64);
        assert_eq!(t.get(b"k995"), Some(&995));
        assert!(t.get(b"k5").is_none());
    }

    /// SCAN returns every element present for the whole iteration at least
    /// once, even when the table grows and shrinks between steps.
    #[test]
    fn scan_survives_resizes() {
        let mut t = Table::new();
        for i in 0..500u32 {
            t.insert(format!("stay{i}").as_bytes(), ());
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut step = 0u32;
        loop {
            cursor = t.scan(cursor, |k, _| {
                seen.insert(k.to_vec());
            });
            // Grow a lot, then shrink a lot, while scanning.
            if step < 20 {
                for j in 0..200u32 {
                    t.insert(format!("tmp{step}-{j}").as_bytes(), ());
                }
            } else if step < 40 {
                for j in 0..200u32 {
                    t.remove(format!("tmp{}-{j}", step - 20).as_bytes());
                }
            }
            step += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500u32 {
            assert!(seen.contains(format!("stay{i}").as_bytes()), "missed stay{i}");
        }
    }

    #[test]
    fn remove_at_unlinks_from_any_chain_position() {
        let mut t = Table::new();
        for i in 0..200u32 {
            t.insert(format!("k{i}").as_bytes(), i);
        }
        for i in (0..200u32).step_by(3) {
            let key = format!("k{i}");
            let idx = t.index_of(key.as_bytes()).unwrap();
            let (k, v) = t.remove_at(idx).unwrap();
            assert_eq!((&*k, v), (key.as_bytes(), i));
            assert!(t.remove_at(idx).is_none());
        }
        for i in 0..200u32 {
            assert_eq!(t.get(format!("k{i}").as_bytes()).is_some(), i % 3 != 0, "k{i}");
        }
        assert_eq!(t.len(), 200 - 67);
    }

    /// A random bucket then a random chain element favoured the entries of
    /// short chains (Redis's SRANDMEMBER/HRANDFIELD histogram tests
    /// failed); draws are now uniform over the entries, also after
    /// removals left free slots.
    #[test]
    fn random_index_is_uniform_over_entries() {
        let mut t = Table::new();
        for k in 0..400u32 {
            t.insert(format!("k{k}").as_bytes(), k);
        }
        for k in (0..400u32).step_by(7) {
            t.remove(format!("k{k}").as_bytes());
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let draws = 200 * t.len();
        let mut hits = vec![0u32; 400];
        for _ in 0..draws {
            let i = t.random_index(&mut rnd).unwrap();
            hits[*t.at(i).unwrap().1 as usize] += 1;
        }
        let expect = 200.0;
        let chi: f64 = (0..400u32)
            .filter(|k| k % 7 != 0)
            .map(|k| (f64::from(hits[k as usize]) - expect).powi(2) / expect)
            .sum();
        // df = 342: its 99.99th percentile is about 450.
        assert!(chi < 450.0, "chi-square {chi}");
    }

    #[test]
    fn random_index_finds_members() {
        let mut t = Table::new();
        t.insert(b"a", 1);
        t.insert(b"b", 2);
        let mut x = 12345u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut got = HashSet::new();
        for _ in 0..100 {
            let i = t.random_index(&mut rnd).unwrap();
            got.insert(t.at(i).unwrap().0.to_vec());
        }
        assert_eq!(got.len(), 2);
    }
}
