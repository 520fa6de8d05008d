//! The `hashtable` encoding: a chained table whose node holds the field
//! and its value together.
//!
//! A node is 32 bits of the field's hash, the chain link and a [`Pair`]:
//! both strings inline when they fit together, else the one of at most
//! 22 bytes inline and the other in its own allocation, else both
//! outside. Nodes come in two widths ([`Pairs`]): narrow, 48 bytes, both
//! strings inline up to 37 bytes together (`name` → `Ada Lovelace`,
//! `field:123` → `value:123`), and wide, 56 bytes, inline up to 45 (two
//! strings of 22). The general table ([`Table`]) has 56-byte nodes with a
//! key and a value of 24 bytes each, inline up to 22 bytes each: a wide
//! node holds all of that and more, a narrow one is 8 bytes less for
//! every pair but those of 38 to 44 bytes of two short strings (48 and
//! the value's allocation against 56). A table takes the width that costs
//! less for its pairs, chosen again each time its buckets double, so it
//! never costs more than the general table's layout by more than what
//! the pairs added since the last doubling do.
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
use crate::types::list::size_class;

const NIL: u32 = u32::MAX;

/// Longest field and value, together, held inline in a narrow node.
const INLINE: usize = 37;
/// The same in a wide node: two strings of up to 22 bytes each.
const WIDE: usize = 45;
/// Longest single string held inline beside one on the heap.
const HALF: usize = 22;

/// A field and its value in `N + 3` bytes (40 or 48).
pub(super) enum Pair<const N: usize> {
    /// A free slab slot.
    Free,
    /// Both inline: the field, then the value, in `buf`.
    Both { flen: u8, vlen: u8, buf: [u8; N] },
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

impl<const N: usize> Pair<N> {
    fn new(f: &[u8], v: &[u8]) -> Self {
        if f.len() + v.len() <= N {
            let mut buf = [0u8; N];
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
    fn with_field(field: Box<[u8]>, v: &[u8]) -> Self {
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

    /// Field and value with one look at the layout (the walks' path).
    #[inline]
    pub(super) fn parts(&self) -> (&[u8], &[u8]) {
        match self {
            Pair::Free => (&[], &[]),
            Pair::Both { flen, vlen, buf } => {
                let (f, rest) = buf.split_at(*flen as usize);
                (f, &rest[..*vlen as usize])
            }
            Pair::Field { flen, field, value } => (&field[..*flen as usize], value),
            Pair::Value { vlen, value, field } => (field, &value[..*vlen as usize]),
            Pair::Out { field, value } => (field, value),
        }
    }

    #[inline]
    fn is_free(&self) -> bool {
        matches!(self, Pair::Free)
    }

    /// Replaces the value, keeping a field already on the heap there
    /// unless the pair now fits inline (the layout is always what
    /// [`new`](Self::new) would choose).
    #[inline]
    fn set_value(&mut self, v: &[u8]) {
        // The common update: both inline before and after, in place.
        if let Pair::Both { flen, vlen, buf } = self {
            let f = *flen as usize;
            if f + v.len() <= N {
                buf[f..f + v.len()].copy_from_slice(v);
                *vlen = v.len() as u8;
                return;
            }
        }
        *self = match std::mem::replace(self, Pair::Free) {
            Pair::Value { field, .. } | Pair::Out { field, .. } if field.len() + v.len() > N => {
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

struct Node<const N: usize> {
    /// The low 32 bits of the field's hash (bucket choice on resize, and
    /// most non-matching fields skipped without reading them).
    hash: u32,
    /// The chain's next slot, or the free list's while the slot is free.
    next: u32,
    pair: Pair<N>,
}

/// Field → value table of a big hash, in nodes of `N + 11` bytes.
pub(super) struct Slots<const N: usize> {
    buckets: Vec<u32>,
    nodes: Vec<Node<N>>,
    free: u32,
    len: usize,
    hasher: RandomState,
}

impl<const N: usize> Slots<N> {
    fn new() -> Self {
        Slots {
            buckets: Vec::new(),
            nodes: Vec::new(),
            free: NIL,
            len: 0,
            hasher: RandomState::new(),
        }
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

    /// `field`'s hash, with its bucket prefetched ([`Pairs::prefetch_bucket_of`]).
    #[inline]
    fn prefetch_bucket_of(&self, field: &[u8]) -> u64 {
        chain::prefetch_bucket(&self.buckets, self.hasher.hash_one(field))
    }

    /// The first node of hash `h`'s chain, or (`second`) the next one when
    /// the first is not `h`'s ([`Pairs::prefetch_chain`]).
    #[inline]
    fn prefetch_chain(&self, h: u64, second: bool) {
        chain::prefetch_chain(&self.buckets, &self.nodes, h, second, |n| {
            (n.hash != h as u32).then_some(n.next)
        });
    }

    pub(super) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        let i = self.find(field, self.hasher.hash_one(field));
        (i != NIL).then(|| self.nodes[i as usize].pair.value())
    }

    /// Sets `field` to `value` if it is there (None); else its hash.
    #[inline]
    fn update(&mut self, field: &[u8], value: &[u8]) -> Option<u64> {
        let h = self.hasher.hash_one(field);
        let i = self.find(field, h);
        if i != NIL {
            self.nodes[i as usize].pair.set_value(value);
            return None;
        }
        Some(h)
    }

    /// Adds a field known to be absent (converting from the listpack).
    fn add_new(&mut self, field: &[u8], value: &[u8]) {
        let h = self.hasher.hash_one(field);
        debug_assert!(self.find(field, h) == NIL);
        self.insert_new(h, Pair::new(field, value));
    }

    /// Whether the next insert of a new field rebuilds the buckets.
    #[inline]
    fn grows_next(&self) -> bool {
        self.len + 1 > self.buckets.len()
    }

    /// What wide nodes would save over narrow ones for these pairs, in
    /// bytes (negative: what they would cost).
    fn wide_gain(&self) -> i64 {
        self.nodes.iter().filter(|n| !n.pair.is_free()).map(|n| wide_gain(n.pair.parts())).sum()
    }

    /// The same table in nodes of another width: every slot where it was
    /// (free ones too, with the free list), so the slab order, and with it
    /// HGETALL's and HRANDFIELD's, is unchanged; the chains are rebuilt by
    /// the resize that follows.
    fn relayout<const M: usize>(self) -> Slots<M> {
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for n in self.nodes {
            let pair = if n.pair.is_free() {
                Pair::Free
            } else {
                let (f, v) = n.pair.parts();
                Pair::new(f, v)
            };
            nodes.push(Node { hash: n.hash, next: n.next, pair });
        }
        Slots { buckets: self.buckets, nodes, free: self.free, len: self.len, hasher: self.hasher }
    }

    fn insert_new(&mut self, h: u64, pair: Pair<N>) {
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
            Shrink::Free => *self = Slots { hasher: self.hasher.clone(), ..Slots::new() },
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
    fn iter(&self) -> SlotsIter<'_, N> {
        SlotsIter { nodes: self.nodes.iter() }
    }

    /// Visits one bucket at `cursor` and returns the next cursor (0 when
    /// the scan is complete).
    #[inline]
    pub(super) fn scan(&self, cursor: u64, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
        chain::scan(
            self,
            self.buckets.len(),
            |b| self.buckets[b],
            cursor,
            |i| {
                let p = &self.nodes[i as usize].pair;
                let (f, v) = p.parts();
                visit(f, v);
            },
        )
    }

    /// A random pair, uniform over the pairs.
    pub(super) fn random(&self, rand: impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        let i = chain::random_slot(self, self.len, rand)?;
        let p = &self.nodes[i as usize].pair;
        Some(p.parts())
    }

    /// Approximate heap bytes owned.
    pub(super) fn heap_size(&self) -> usize {
        let strings: usize = self.nodes.iter().map(|n| n.pair.heap_size()).sum();
        strings + self.buckets.len() * 4 + self.nodes.capacity() * std::mem::size_of::<Node<N>>()
    }
}

/// What a wide node saves over a narrow one for a pair of these strings:
/// 8 bytes more for every pair but those that fit inline only in the wide
/// one, which save the allocation of the string the narrow node puts out.
fn wide_gain((f, v): (&[u8], &[u8])) -> i64 {
    let (f, v) = (f.len(), v.len());
    if f + v <= INLINE || f + v > WIDE || f > HALF && v > HALF {
        -8
    } else {
        size_class(if f <= HALF { v } else { f }) as i64 - 8
    }
}

/// A big hash's table, in narrow nodes (48 bytes) while most of its pairs
/// fit in 37 bytes or need the heap anyway, in wide ones (56 bytes, both
/// strings inline up to 22 bytes each, the general table's layout) while
/// pairs of 38 to 45 bytes make those cheaper. The width is chosen again
/// each time the bucket array doubles (the pairs are walked then anyway),
/// from what each would cost for the pairs held.
pub(super) enum Pairs {
    Narrow(Slots<INLINE>),
    Wide(Slots<WIDE>),
}

macro_rules! each {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            Pairs::Narrow($t) => $e,
            Pairs::Wide($t) => $e,
        }
    };
}

impl Pairs {
    pub(super) fn new() -> Self {
        Pairs::Narrow(Slots::new())
    }

    pub(super) fn len(&self) -> usize {
        each!(self, t => t.len)
    }

    /// For a pipelined command's member stage: `field`'s hash, with its
    /// bucket prefetched (see `Store::with_member_value`).
    #[inline]
    pub(super) fn prefetch_bucket_of(&self, field: &[u8]) -> u64 {
        each!(self, t => t.prefetch_bucket_of(field))
    }

    /// The stages after: the first node of hash `h`'s chain, or its second.
    #[inline]
    pub(super) fn prefetch_chain(&self, h: u64, second: bool) {
        each!(self, t => t.prefetch_chain(h, second))
    }

    #[inline]
    pub(super) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        each!(self, t => t.get(field))
    }

    /// Sets `field` to `value`; true if the field is new.
    pub(super) fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let Some(h) = each!(self, t => t.update(field, value)) else {
            return false;
        };
        // The hasher moves with the table, so `h` holds after a move.
        if each!(self, t => t.grows_next()) {
            self.choose_width();
        }
        each!(self, t => t.insert_new(h, Pair::new(field, value)));
        true
    }

    /// Adds a field known to be absent.
    pub(super) fn add_new(&mut self, field: &[u8], value: &[u8]) {
        if each!(self, t => t.grows_next()) {
            self.choose_width();
        }
        each!(self, t => t.add_new(field, value))
    }

    /// Before the buckets double: moves to the other width if it costs
    /// less for the pairs held (a move copies every pair once, as the
    /// resize walks every node once).
    fn choose_width(&mut self) {
        let gain = each!(self, t => t.wide_gain());
        let wide = matches!(self, Pairs::Wide(_));
        if (gain > 0) != wide {
            *self = match std::mem::replace(self, Pairs::new()) {
                Pairs::Narrow(t) => Pairs::Wide(t.relayout()),
                Pairs::Wide(t) => Pairs::Narrow(t.relayout()),
            };
        }
    }

    pub(super) fn remove(&mut self, field: &[u8]) -> bool {
        each!(self, t => t.remove(field))
    }

    /// Pairs in slab order.
    pub(super) fn iter(&self) -> PairsIter<'_> {
        match self {
            Pairs::Narrow(t) => PairsIter::Narrow(t.iter()),
            Pairs::Wide(t) => PairsIter::Wide(t.iter()),
        }
    }

    #[inline]
    pub(super) fn scan(&self, cursor: u64, visit: impl FnMut(&[u8], &[u8])) -> u64 {
        each!(self, t => t.scan(cursor, visit))
    }

    pub(super) fn random(&self, rand: impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        each!(self, t => t.random(rand))
    }

    pub(super) fn heap_size(&self) -> usize {
        each!(self, t => t.heap_size())
    }

    /// Whether the nodes are the wide ones (tests).
    #[cfg(test)]
    fn is_wide(&self) -> bool {
        matches!(self, Pairs::Wide(_))
    }
}

/// Pairs of a big hash in slab order.
#[derive(Clone)]
pub enum PairsIter<'a> {
    Narrow(SlotsIter<'a, INLINE>),
    Wide(SlotsIter<'a, WIDE>),
}

impl<'a> Iterator for PairsIter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            PairsIter::Narrow(it) => it.next(),
            PairsIter::Wide(it) => it.next(),
        }
    }
}

impl<const N: usize> Slab for Slots<N> {
    const NIL: u32 = NIL;

    fn slots(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    fn used(&self, i: u32) -> bool {
        !self.nodes[i as usize].pair.is_free()
    }

    #[inline]
    fn next(&self, i: u32) -> u32 {
        self.nodes[i as usize].next
    }
}

/// Pairs of a table in slab order.
#[derive(Clone)]
pub struct SlotsIter<'a, const N: usize> {
    nodes: std::slice::Iter<'a, Node<N>>,
}

impl<'a, const N: usize> Iterator for SlotsIter<'a, N> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.nodes.by_ref().find(|n| !n.pair.is_free()).map(|n| n.pair.parts())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Per-field memory depends on these (bench/memory, docs/memory.md).
    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Pair<INLINE>>(), 40);
        assert_eq!(std::mem::size_of::<Node<INLINE>>(), 48);
        assert_eq!(std::mem::size_of::<Pair<WIDE>>(), 48);
        assert_eq!(std::mem::size_of::<Node<WIDE>>(), 56);
    }

    /// Pairs of 20 + 20 bytes turn the nodes wide (56 bytes, both inline,
    /// instead of 48 and a 32-byte value); short pairs added after turn
    /// them narrow again. The slab order, which HGETALL replies in, is
    /// kept through both moves.
    #[test]
    fn width_follows_the_pairs() {
        let mut t = Pairs::new();
        let long = |i: usize, c: &str| format!("{c}{i:019}");
        for i in 0..300 {
            assert!(t.set(long(i, "f").as_bytes(), long(i, "v").as_bytes()));
        }
        assert!(t.is_wide());
        for i in (0..300).step_by(7) {
            assert!(t.remove(long(i, "f").as_bytes()));
        }
        let before: Vec<(Vec<u8>, Vec<u8>)> =
            t.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        for i in 0..3000 {
            assert!(t.set(format!("s{i}").as_bytes(), b"x"));
        }
        assert!(!t.is_wide());
        let after: Vec<(Vec<u8>, Vec<u8>)> =
            t.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        // The removed fields' slots were reused first, the rest appended.
        let kept: Vec<_> = after.iter().filter(|(f, _)| f[0] == b'f').cloned().collect();
        assert_eq!(kept, before);
        assert_eq!(t.len(), 300 - 43 + 3000);
        for i in 0..300 {
            let want = (i % 7 != 0).then(|| long(i, "v"));
            assert_eq!(t.get(long(i, "f").as_bytes()), want.as_deref().map(str::as_bytes));
        }
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
        let layout = |p: &Pair<INLINE>| match p {
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
            let p = Pair::<INLINE>::new(&s(f, b'f'), &s(v, b'v'));
            assert_eq!((p.field(), p.value()), (&s(f, b'f')[..], &s(v, b'v')[..]), "{f} {v}");
            assert_eq!(p.parts(), (p.field(), p.value()));
            assert_eq!(layout(&p), want(f, v), "{f} {v}");
            for w in [0, 1, 14, 15, 22, 23, 37, 38, 100] {
                let mut q = Pair::<INLINE>::new(&s(f, b'f'), &s(v, b'v'));
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

    use crate::types::test_rng::Rng;

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
    /// through growth, shrinking, compaction and changes of node width.
    #[test]
    fn matches_a_model() {
        let mut widths = [false; 2];
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
                widths[usize::from(t.is_wide())] = true;
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
        assert_eq!(widths, [true, true], "both node widths were exercised");
    }
}
