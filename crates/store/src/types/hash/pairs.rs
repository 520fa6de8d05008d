//! The `hashtable` encoding: a chained table whose node holds the field
//! and its value together.
//!
//! A node is 48 bytes: 32 bits of the field's hash, the chain link, and a
//! [`Pair`] of 40 bytes holding both strings inline when they fit in 37
//! bytes together (`name` → `Ada Lovelace`, `field:123` → `value:123`),
//! else the shorter one inline (up to 22 bytes) and the other in its own
//! allocation, else both outside. The general table ([`Table`]) keeps a
//! key and a value of 24 bytes each (56-byte nodes); here a pair whose
//! strings are at most 22 bytes each but over 37 together is the one case
//! that costs more (48 bytes and the value's allocation, 16 or 32, against
//! 56), and every other pair costs 8 bytes less, or more than that when one
//! string was past 22 bytes and now sits inline beside a short one.
//!
//! Everything that decides an order is the general table's, so HGETALL,
//! HSCAN and HRANDFIELD behave as they did: the slab's order for
//! iteration (free slots reused last-freed first, compaction on shrink),
//! Redis's reverse-binary cursor over the bucket array for SCAN
//! ([`chain::scan`]), a uniform slab slot for a random pick.
//!
//! [`Table`]: crate::table::Table

use ahash::RandomState;

use crate::chain::{self, Shrink, Slab, MIN_BUCKETS};
use crate::keytable::key_eq;
use crate::table::grow_slab;

const NIL: u32 = u32::MAX;

/// Longest field and value, together, held inline.
const INLINE: usize = 37;
/// Longest single string held inline beside one on the heap.
const HALF: usize = 22;

/// A field and its value in 40 bytes.
pub(super) enum Pair {
    /// A free slab slot.
    Free,
    /// Both inline: the field, then the value, in `buf`.
    Both { flen: u8, vlen: u8, buf: [u8; INLINE] },
    /// The field inline, the value on the heap.
    Field { flen: u8, field: [u8; HALF], value: Box<[u8]> },
    /// The value inline, the field on the heap.
    Value { vlen: u8, value: [u8; HALF], field: Box<[u8]> },
    /// Both on the heap.
    Out { field: Box<[u8]>, value: Box<[u8]> },
}

fn inline<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut b = [0u8; N];
    b[..s.len()].copy_from_slice(s);
    b
}

impl Pair {
    fn new(f: &[u8], v: &[u8]) -> Pair {
        if f.len() + v.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..f.len()].copy_from_slice(f);
            buf[f.len()..f.len() + v.len()].copy_from_slice(v);
            Pair::Both { flen: f.len() as u8, vlen: v.len() as u8, buf }
        } else if f.len() <= HALF {
            Pair::Field { flen: f.len() as u8, field: inline(f), value: v.into() }
        } else {
            Pair::with_field(f.into(), v)
        }
    }

    /// A pair whose field is already on the heap (too long to sit inline
    /// beside any value).
    fn with_field(field: Box<[u8]>, v: &[u8]) -> Pair {
        if v.len() <= HALF {
            Pair::Value { vlen: v.len() as u8, value: inline(v), field }
        } else {
            Pair::Out { field, value: v.into() }
        }
    }

    #[inline]
    pub(super) fn field(&self) -> &[u8] {
        match self {
            Pair::Free => &[],
            Pair::Both { flen, buf, .. } => &buf[..*flen as usize],
            Pair::Field { flen, field, .. } => &field[..*flen as usize],
            Pair::Value { field, .. } | Pair::Out { field, .. } => field,
        }
    }

    #[inline]
    pub(super) fn value(&self) -> &[u8] {
        match self {
            Pair::Free => &[],
            Pair::Both { flen, vlen, buf } => &buf[*flen as usize..(*flen + *vlen) as usize],
            Pair::Value { vlen, value, .. } => &value[..*vlen as usize],
            Pair::Field { value, .. } | Pair::Out { value, .. } => value,
        }
    }

    fn is_free(&self) -> bool {
        matches!(self, Pair::Free)
    }

    /// Replaces the value, keeping a field already on the heap there
    /// unless the pair now fits inline (the layout is always what
    /// [`new`](Self::new) would choose).
    fn set_value(&mut self, v: &[u8]) {
        *self = match std::mem::replace(self, Pair::Free) {
            Pair::Value { field, .. } | Pair::Out { field, .. }
                if field.len() + v.len() > INLINE =>
            {
                Pair::with_field(field, v)
            }
            old => Pair::new(old.field(), v),
        };
    }

    /// Heap bytes owned (requested sizes).
    fn heap_size(&self) -> usize {
        match self {
            Pair::Free | Pair::Both { .. } => 0,
            Pair::Field { value, .. } => value.len(),
            Pair::Value { field, .. } => field.len(),
            Pair::Out { field, value } => field.len() + value.len(),
        }
    }
}

struct Node {
    /// The low 32 bits of the field's hash (bucket choice on resize, and
    /// most non-matching fields skipped without reading them).
    hash: u32,
    /// The chain's next slot, or the free list's while the slot is free.
    next: u32,
    pair: Pair,
}

/// Field → value table of a big hash.
pub(super) struct Pairs {
    buckets: Vec<u32>,
    nodes: Vec<Node>,
    free: u32,
    len: usize,
    hasher: RandomState,
}

impl Pairs {
    pub(super) fn new() -> Self {
        Pairs {
            buckets: Vec::new(),
            nodes: Vec::new(),
            free: NIL,
            len: 0,
            hasher: RandomState::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn find(&self, field: &[u8], h: u64) -> u32 {
        if self.buckets.is_empty() {
            return NIL;
        }
        let mut i = self.buckets[(h as usize) & (self.buckets.len() - 1)];
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.hash == h as u32 && key_eq(n.pair.field(), field) {
                return i;
            }
            i = n.next;
        }
        NIL
    }

    pub(super) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        let i = self.find(field, self.hasher.hash_one(field));
        (i != NIL).then(|| self.nodes[i as usize].pair.value())
    }

    /// Sets `field` to `value`; true if the field is new.
    pub(super) fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let h = self.hasher.hash_one(field);
        let i = self.find(field, h);
        if i != NIL {
            self.nodes[i as usize].pair.set_value(value);
            return false;
        }
        self.insert_new(h, Pair::new(field, value));
        true
    }

    /// Adds a field known to be absent (converting from the listpack).
    pub(super) fn add_new(&mut self, field: &[u8], value: &[u8]) {
        let h = self.hasher.hash_one(field);
        debug_assert!(self.find(field, h) == NIL);
        self.insert_new(h, Pair::new(field, value));
    }

    fn insert_new(&mut self, h: u64, pair: Pair) {
        if self.len + 1 > self.buckets.len() {
            self.resize((self.len + 1).next_power_of_two().max(MIN_BUCKETS));
        }
        let b = (h as usize) & (self.buckets.len() - 1);
        let node = Node { hash: h as u32, next: self.buckets[b], pair };
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
    }

    /// Removes `field`; true if it was there.
    pub(super) fn remove(&mut self, field: &[u8]) -> bool {
        if self.buckets.is_empty() {
            return false;
        }
        let h = self.hasher.hash_one(field);
        let b = (h as usize) & (self.buckets.len() - 1);
        let mut prev = NIL;
        let mut i = self.buckets[b];
        while i != NIL {
            let n = &self.nodes[i as usize];
            let hit = n.hash == h as u32 && key_eq(n.pair.field(), field);
            let next = n.next;
            if hit {
                if prev == NIL {
                    self.buckets[b] = next;
                } else {
                    self.nodes[prev as usize].next = next;
                }
                let n = &mut self.nodes[i as usize];
                n.pair = Pair::Free;
                n.next = self.free;
                self.free = i;
                self.len -= 1;
                self.maybe_shrink();
                return true;
            }
            prev = i;
            i = next;
        }
        false
    }

    fn maybe_shrink(&mut self) {
        match chain::shrink(self.len, self.buckets.len(), self.nodes.len(), self.nodes.capacity()) {
            Shrink::Keep => {}
            Shrink::Free => *self = Pairs { hasher: self.hasher.clone(), ..Pairs::new() },
            Shrink::Compact(size) => {
                let old = std::mem::take(&mut self.nodes);
                self.nodes = Vec::with_capacity(self.len);
                self.nodes.extend(old.into_iter().filter(|n| !n.pair.is_free()));
                self.free = NIL;
                self.resize(size);
            }
        }
    }

    fn resize(&mut self, size: usize) {
        self.buckets.clear();
        self.buckets.resize(size, NIL);
        let mask = size - 1;
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if !n.pair.is_free() {
                let b = (n.hash as usize) & mask;
                n.next = self.buckets[b];
                self.buckets[b] = i as u32;
            }
        }
    }

    /// Pairs in slab order.
    pub(super) fn iter(&self) -> PairsIter<'_> {
        PairsIter { nodes: self.nodes.iter() }
    }

    /// Visits one bucket at `cursor` and returns the next cursor (0 when
    /// the scan is complete).
    pub(super) fn scan(&self, cursor: u64, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
        chain::scan(
            self,
            self.buckets.len(),
            |b| self.buckets[b],
            cursor,
            |i| {
                let p = &self.nodes[i as usize].pair;
                visit(p.field(), p.value());
            },
        )
    }

    /// A random pair, uniform over the pairs.
    pub(super) fn random(&self, rand: impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        let i = chain::random_slot(self, self.len, rand)?;
        let p = &self.nodes[i as usize].pair;
        Some((p.field(), p.value()))
    }

    /// Approximate heap bytes owned.
    pub(super) fn heap_size(&self) -> usize {
        let strings: usize = self.nodes.iter().map(|n| n.pair.heap_size()).sum();
        strings + self.buckets.len() * 4 + self.nodes.capacity() * std::mem::size_of::<Node>()
    }
}

impl Slab for Pairs {
    const NIL: u32 = NIL;

    fn slots(&self) -> usize {
        self.nodes.len()
    }

    fn used(&self, i: u32) -> bool {
        !self.nodes[i as usize].pair.is_free()
    }

    fn next(&self, i: u32) -> u32 {
        self.nodes[i as usize].next
    }
}

/// Pairs of a table in slab order.
#[derive(Clone)]
pub struct PairsIter<'a> {
    nodes: std::slice::Iter<'a, Node>,
}

impl<'a> Iterator for PairsIter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.nodes.by_ref().find(|n| !n.pair.is_free()).map(|n| (n.pair.field(), n.pair.value()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Per-field memory depends on these (bench/memory, docs/memory.md).
    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Pair>(), 40);
        assert_eq!(std::mem::size_of::<Node>(), 48);
    }

    /// Each layout at its edges, and values moving between them.
    #[test]
    fn pairs_take_every_layout() {
        let s = |n: usize, b: u8| vec![b; n];
        let cases = [
            (0, 0),
            (0, 37),
            (37, 0),
            (15, 22),
            (22, 15),
            (22, 16),
            (16, 22),
            (22, 22),
            (1, 38),
            (22, 200),
            (23, 0),
            (23, 14),
            (23, 15),
            (300, 22),
            (23, 23),
            (70_000, 70_000),
        ];
        let layout = |p: &Pair| match p {
            Pair::Both { .. } => 0,
            Pair::Field { .. } => 1,
            Pair::Value { .. } => 2,
            Pair::Out { .. } => 3,
            Pair::Free => unreachable!(),
        };
        let want = |f: usize, v: usize| {
            if f + v <= INLINE {
                0
            } else if f <= HALF {
                1
            } else if v <= HALF {
                2
            } else {
                3
            }
        };
        for (f, v) in cases {
            let p = Pair::new(&s(f, b'f'), &s(v, b'v'));
            assert_eq!((p.field(), p.value()), (&s(f, b'f')[..], &s(v, b'v')[..]), "{f} {v}");
            assert_eq!(layout(&p), want(f, v), "{f} {v}");
            for w in [0, 1, 14, 15, 22, 23, 37, 38, 100] {
                let mut q = Pair::new(&s(f, b'f'), &s(v, b'v'));
                q.set_value(&s(w, b'w'));
                assert_eq!(
                    (q.field(), q.value()),
                    (&s(f, b'f')[..], &s(w, b'w')[..]),
                    "{f} {v} {w}"
                );
                assert_eq!(layout(&q), want(f, w), "{f} {v} {w}");
            }
        }
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Random strings of adversarial lengths: around every layout's edge,
    /// with bytes that include zeros and 0xff.
    fn string(r: &mut Rng, tag: u8) -> Vec<u8> {
        let len = match r.below(10) {
            0 => 0,
            1..=3 => 10 + r.below(30) as usize,
            4 => 14 + r.below(10) as usize,
            5 => r.below(300) as usize,
            _ => r.below(8) as usize,
        };
        let mut s: Vec<u8> =
            (0..len).map(|_| [0u8, 0xff, tag, b'a'][r.below(4) as usize]).collect();
        if !s.is_empty() {
            s[0] = tag;
        }
        s
    }

    /// Sets, removes, lookups, SCAN and random picks against a `HashMap`,
    /// through growth, shrinking and compaction.
    #[test]
    fn matches_a_model() {
        for seed in 1..6u64 {
            let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut t = Pairs::new();
            let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            let mut fields: Vec<Vec<u8>> = Vec::new();
            for step in 0..40_000 {
                let f = if fields.is_empty() || r.below(3) == 0 {
                    let f = string(&mut r, b'f');
                    fields.push(f.clone());
                    f
                } else {
                    fields[r.below(fields.len() as u64) as usize].clone()
                };
                // Grow for 25,000 steps, then mostly remove.
                let remove = if step < 25_000 { r.below(4) == 0 } else { r.below(10) < 8 };
                if remove {
                    assert_eq!(t.remove(&f), model.remove(&f).is_some());
                } else {
                    let v = string(&mut r, b'v');
                    assert_eq!(t.set(&f, &v), model.insert(f.clone(), v).is_none());
                }
                assert_eq!(t.get(&f), model.get(&f).map(|v| &v[..]));
                assert_eq!(t.len(), model.len());
                if step % 5_000 == 0 || step == 39_999 {
                    let all: HashMap<Vec<u8>, Vec<u8>> =
                        t.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                    assert_eq!(all.len(), t.len());
                    assert_eq!(all, model);
                    let mut seen = HashMap::new();
                    let mut c = 0;
                    loop {
                        c = t.scan(c, |f, v| {
                            seen.insert(f.to_vec(), v.to_vec());
                        });
                        if c == 0 {
                            break;
                        }
                    }
                    assert_eq!(seen, model);
                    let mut x = seed;
                    if let Some((f, v)) = t.random(|| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        x >> 11
                    }) {
                        assert_eq!(model.get(f).map(|v| &v[..]), Some(v));
                    }
                }
            }
        }
    }
}
