//! The big sorted-set encoding's index: an order-statistic B+tree over
//! (score, member), plus a member index for O(1) ZSCORE and ZSCAN.
//!
//! - Elements live in one slab addressed by `u32` (`Elem`: the member,
//!   its score, the member-index chain). An element never moves in the
//!   slab while it is in the set, so the tree and the index refer to it
//!   by number.
//! - Leaves hold up to `LCAP` (score, element) pairs in order, the scores
//!   side by side so that a search compares `f64`s in one or two cache
//!   lines and reads a member only on a score tie; leaves are linked both
//!   ways for range walks.
//! - Inner nodes hold, per child, the child's exact minimum (score and
//!   element), its element count (for rank) and its number. A search from
//!   the root touches a few cache lines per level, three or four levels
//!   for a million elements, where a skiplist follows ~20 links to
//!   scattered nodes.
//! - The member index is a chained hash table whose chains run through
//!   the elements (`hnext`), scanned in reverse-binary bucket order for
//!   ZSCAN, as Redis's dict is.
//!
//! Nothing here knows the protocol; `super` (the `ZSet` value) is the
//! only user.

use ahash::RandomState;

use crate::bytes::SmallBytes;

pub(super) const NIL: u32 = u32::MAX;
/// Slots of a leaf. 32 keeps a leaf's scores in four cache lines.
const LCAP: usize = 32;
/// Children of an inner node.
const ICAP: usize = 32;
/// A leaf or inner node below this many entries is refilled from a
/// sibling or merged into it.
const LMIN: usize = LCAP / 3;
const IMIN: usize = ICAP / 3;

pub(super) struct Elem {
    pub(super) member: SmallBytes,
    pub(super) score: f64,
    /// Next element in the same index bucket (or in the free list).
    pub(super) hnext: u32,
}

#[derive(Clone)]
pub(super) struct Leaf {
    len: u32,
    next: u32,
    prev: u32,
    scores: [f64; LCAP],
    elems: [u32; LCAP],
}

#[derive(Clone)]
struct Inner {
    len: u32,
    /// Each child's minimum: score and element.
    scores: [f64; ICAP],
    elems: [u32; ICAP],
    /// Elements under each child.
    counts: [u32; ICAP],
    kids: [u32; ICAP],
}

impl Leaf {
    fn empty() -> Leaf {
        Leaf { len: 0, next: NIL, prev: NIL, scores: [0.0; LCAP], elems: [NIL; LCAP] }
    }

    #[inline]
    fn n(&self) -> usize {
        self.len as usize
    }

    fn insert_at(&mut self, pos: usize, s: f64, e: u32) {
        let n = self.n();
        self.scores.copy_within(pos..n, pos + 1);
        self.elems.copy_within(pos..n, pos + 1);
        self.scores[pos] = s;
        self.elems[pos] = e;
        self.len += 1;
    }

    fn remove_at(&mut self, pos: usize) {
        let n = self.n();
        self.scores.copy_within(pos + 1..n, pos);
        self.elems.copy_within(pos + 1..n, pos);
        self.len -= 1;
    }
}

impl Inner {
    fn empty() -> Inner {
        Inner {
            len: 0,
            scores: [0.0; ICAP],
            elems: [NIL; ICAP],
            counts: [0; ICAP],
            kids: [NIL; ICAP],
        }
    }

    #[inline]
    fn n(&self) -> usize {
        self.len as usize
    }

    fn total(&self) -> u32 {
        self.counts[..self.n()].iter().sum()
    }

    fn insert_at(&mut self, pos: usize, key: (f64, u32), count: u32, kid: u32) {
        let n = self.n();
        self.scores.copy_within(pos..n, pos + 1);
        self.elems.copy_within(pos..n, pos + 1);
        self.counts.copy_within(pos..n, pos + 1);
        self.kids.copy_within(pos..n, pos + 1);
        self.scores[pos] = key.0;
        self.elems[pos] = key.1;
        self.counts[pos] = count;
        self.kids[pos] = kid;
        self.len += 1;
    }

    fn remove_at(&mut self, pos: usize) {
        let n = self.n();
        self.scores.copy_within(pos + 1..n, pos);
        self.elems.copy_within(pos + 1..n, pos);
        self.counts.copy_within(pos + 1..n, pos);
        self.kids.copy_within(pos + 1..n, pos);
        self.len -= 1;
    }
}

/// The tree, its element slab and the member index.
pub(super) struct Tree {
    pub(super) elems: Vec<Elem>,
    /// Head of the free elements, chained through `hnext`.
    free_elem: u32,
    pub(super) leaves: Vec<Leaf>,
    free_leaves: Vec<u32>,
    inners: Vec<Inner>,
    free_inners: Vec<u32>,
    root: u32,
    /// Levels of inner nodes above the leaves (0: the root is a leaf).
    height: u32,
    pub(super) first: u32,
    pub(super) last: u32,
    pub(super) len: usize,
    pub(super) buckets: Vec<u32>,
    hasher: RandomState,
}

impl Tree {
    pub(super) fn new() -> Tree {
        Tree {
            elems: Vec::new(),
            free_elem: NIL,
            leaves: vec![Leaf::empty()],
            free_leaves: Vec::new(),
            inners: Vec::new(),
            free_inners: Vec::new(),
            root: 0,
            height: 0,
            first: 0,
            last: 0,
            len: 0,
            buckets: Vec::new(),
            hasher: RandomState::new(),
        }
    }

    #[inline]
    pub(super) fn elem(&self, e: u32) -> &Elem {
        &self.elems[e as usize]
    }

    #[inline]
    fn member(&self, e: u32) -> &[u8] {
        &self.elems[e as usize].member
    }

    #[inline]
    pub(super) fn leaf(&self, l: u32) -> &Leaf {
        &self.leaves[l as usize]
    }

    /// (score, element) at a leaf slot.
    #[inline]
    pub(super) fn slot(&self, l: u32, pos: usize) -> (f64, u32) {
        let lf = self.leaf(l);
        (lf.scores[pos], lf.elems[pos])
    }

    /// The slot after (`rev`: before) `(l, pos)`, or `(NIL, 0)`.
    #[inline]
    pub(super) fn step(&self, l: u32, pos: usize, rev: bool) -> (u32, usize) {
        let lf = self.leaf(l);
        if rev {
            if pos > 0 {
                (l, pos - 1)
            } else if lf.prev == NIL {
                (NIL, 0)
            } else {
                (lf.prev, self.leaf(lf.prev).n() - 1)
            }
        } else if pos + 1 < lf.n() {
            (l, pos + 1)
        } else {
            (lf.next, 0)
        }
    }

    // ---- the member index ----------------------------------------------------

    #[inline]
    fn bucket_of(&self, m: &[u8]) -> usize {
        (self.hasher.hash_one(m) as usize) & (self.buckets.len() - 1)
    }

    /// For a pipelined command's member stage: `m`'s hash in the member
    /// index, with its bucket prefetched.
    #[inline]
    pub(super) fn prefetch_bucket_of(&self, m: &[u8]) -> u64 {
        crate::chain::prefetch_bucket(&self.buckets, self.hasher.hash_one(m))
    }

    /// The stages after: the first element of hash `h`'s index chain, or
    /// (`second`) the one after it (an element keeps no hash to tell
    /// whether the first is the member: the second is fetched regardless).
    #[inline]
    pub(super) fn prefetch_chain(&self, h: u64, second: bool) {
        crate::chain::prefetch_chain(&self.buckets, &self.elems, h, second, |e| Some(e.hnext));
    }

    /// The element holding `m`.
    pub(super) fn find(&self, m: &[u8]) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut i = self.buckets[self.bucket_of(m)];
        while i != NIL {
            let n = self.elem(i);
            if &*n.member == m {
                return Some(i);
            }
            i = n.hnext;
        }
        None
    }

    fn index_add(&mut self, e: u32) {
        // Grown once the index holds as many members as buckets, shrunk
        // under 10% full, as Redis sizes its dicts.
        if self.len > self.buckets.len() {
            // The rehash walks the tree, which already holds `e`.
            self.rehash(self.len.next_power_of_two().max(4));
            return;
        }
        let b = self.bucket_of(self.member(e));
        self.elems[e as usize].hnext = self.buckets[b];
        self.buckets[b] = e;
    }

    fn index_remove(&mut self, e: u32) {
        let b = self.bucket_of(self.member(e));
        let next = self.elem(e).hnext;
        if self.buckets[b] == e {
            self.buckets[b] = next;
        } else {
            let mut i = self.buckets[b];
            while i != NIL {
                if self.elem(i).hnext == e {
                    self.elems[i as usize].hnext = next;
                    break;
                }
                i = self.elem(i).hnext;
            }
        }
        if self.buckets.len() > 4 && self.len * 10 < self.buckets.len() {
            self.rehash(self.len.next_power_of_two().max(4));
        }
    }

    fn rehash(&mut self, size: usize) {
        self.buckets.clear();
        self.buckets.resize(size, NIL);
        self.buckets.shrink_to_fit();
        let mask = size - 1;
        let mut l = self.first;
        while l != NIL {
            for p in 0..self.leaf(l).n() {
                let e = self.leaf(l).elems[p];
                let b = (self.hasher.hash_one(self.member(e)) as usize) & mask;
                self.elems[e as usize].hnext = self.buckets[b];
                self.buckets[b] = e;
            }
            l = self.leaf(l).next;
        }
    }

    // ---- slabs -----------------------------------------------------------------

    fn alloc_elem(&mut self, member: SmallBytes, score: f64) -> u32 {
        let el = Elem { member, score, hnext: NIL };
        if self.free_elem != NIL {
            let e = self.free_elem;
            self.free_elem = self.elem(e).hnext;
            self.elems[e as usize] = el;
            e
        } else {
            self.elems.push(el);
            (self.elems.len() - 1) as u32
        }
    }

    fn free_elem(&mut self, e: u32) -> SmallBytes {
        let el = &mut self.elems[e as usize];
        let m = std::mem::replace(&mut el.member, SmallBytes::new(b""));
        el.hnext = self.free_elem;
        self.free_elem = e;
        m
    }

    fn alloc_leaf(&mut self) -> u32 {
        match self.free_leaves.pop() {
            Some(l) => {
                self.leaves[l as usize] = Leaf::empty();
                l
            }
            None => {
                self.leaves.push(Leaf::empty());
                (self.leaves.len() - 1) as u32
            }
        }
    }

    fn alloc_inner(&mut self) -> u32 {
        match self.free_inners.pop() {
            Some(i) => {
                self.inners[i as usize] = Inner::empty();
                i
            }
            None => {
                self.inners.push(Inner::empty());
                (self.inners.len() - 1) as u32
            }
        }
    }

    // ---- ordering ----------------------------------------------------------------

    /// How many of the sorted keys `(scores[i], elems[i])` are below
    /// `(s, e)`: the scores decide, members are read only on a tie.
    #[inline]
    fn below(&self, scores: &[f64], elems: &[u32], s: f64, e: u32) -> usize {
        let lo = scores.partition_point(|&x| x < s);
        if scores.get(lo) != Some(&s) {
            return lo;
        }
        let ties = scores[lo..].partition_point(|&x| x <= s);
        let m = self.member(e);
        lo + elems[lo..lo + ties].partition_point(|&x| x != e && self.member(x) < m)
    }

    /// The child of inner node `i` whose subtree holds (or would hold) `(s, e)`.
    #[inline]
    fn child_for(&self, i: u32, s: f64, e: u32) -> usize {
        let node = &self.inners[i as usize];
        let n = node.n();
        let r = self.below(&node.scores[..n], &node.elems[..n], s, e);
        if r < n && node.elems[r] == e {
            r
        } else {
            r.saturating_sub(1)
        }
    }

    /// The minimum key of a node at `level` (0: a leaf).
    #[inline]
    fn min_of(&self, node: u32, level: u32) -> (f64, u32) {
        if level == 0 {
            let l = self.leaf(node);
            (l.scores[0], l.elems[0])
        } else {
            let i = &self.inners[node as usize];
            (i.scores[0], i.elems[0])
        }
    }

    #[inline]
    fn count_of(&self, node: u32, level: u32) -> u32 {
        if level == 0 {
            self.leaf(node).len
        } else {
            self.inners[node as usize].total()
        }
    }

    // ---- insertion -------------------------------------------------------------

    /// Adds an absent member.
    pub(super) fn insert(&mut self, score: f64, member: SmallBytes) {
        let e = self.alloc_elem(member, score);
        self.link(score, e);
        self.len += 1;
        self.index_add(e);
    }

    /// Puts element `e` (in the slab, not in the tree) at its place.
    fn link(&mut self, s: f64, e: u32) {
        if let Some((right, rkey)) = self.ins(self.root, self.height, s, e, true, true) {
            let old = self.root;
            let r = self.alloc_inner();
            let lkey = self.min_of(old, self.height);
            let lcount = self.count_of(old, self.height);
            let rcount = self.count_of(right, self.height);
            let node = &mut self.inners[r as usize];
            node.insert_at(0, lkey, lcount, old);
            node.insert_at(1, rkey, rcount, right);
            self.root = r;
            self.height += 1;
        }
    }

    /// Inserts into the subtree at `node`; returns a new right sibling
    /// and its minimum when the node split. `leftmost`/`rightmost`: the
    /// node is the first/last of its level, where a split at the end
    /// leaves the full node full (ascending or descending loads fill
    /// their nodes instead of leaving them half empty).
    fn ins(
        &mut self,
        node: u32,
        level: u32,
        s: f64,
        e: u32,
        leftmost: bool,
        rightmost: bool,
    ) -> Option<(u32, (f64, u32))> {
        if level == 0 {
            let lf = self.leaf(node);
            let n = lf.n();
            let pos = self.below(&lf.scores[..n], &lf.elems[..n], s, e);
            if n < LCAP {
                self.leaves[node as usize].insert_at(pos, s, e);
                return None;
            }
            let sp = if rightmost && pos == LCAP {
                LCAP
            } else if leftmost && pos == 0 {
                0
            } else {
                LCAP / 2
            };
            let r = self.alloc_leaf();
            let (a, b) = two_mut(&mut self.leaves, node as usize, r as usize);
            let m = LCAP - sp;
            b.scores[..m].copy_from_slice(&a.scores[sp..]);
            b.elems[..m].copy_from_slice(&a.elems[sp..]);
            b.len = m as u32;
            a.len = sp as u32;
            b.next = a.next;
            b.prev = node;
            a.next = r;
            if pos < sp || (pos == sp && sp < LCAP) {
                a.insert_at(pos, s, e);
            } else {
                b.insert_at(pos - sp, s, e);
            }
            if b.next == NIL {
                self.last = r;
            } else {
                let nx = b.next;
                self.leaves[nx as usize].prev = r;
            }
            return Some((r, self.min_of(r, 0)));
        }
        let ci = self.child_for(node, s, e);
        let n = self.inners[node as usize].n();
        let kid = self.inners[node as usize].kids[ci];
        let split = self.ins(kid, level - 1, s, e, leftmost && ci == 0, rightmost && ci == n - 1);
        let kmin = self.min_of(kid, level - 1);
        let nd = &mut self.inners[node as usize];
        nd.counts[ci] += 1;
        nd.scores[ci] = kmin.0;
        nd.elems[ci] = kmin.1;
        let (right, rkey) = split?;
        let rcount = self.count_of(right, level - 1);
        let nd = &mut self.inners[node as usize];
        nd.counts[ci] -= rcount;
        if n < ICAP {
            nd.insert_at(ci + 1, rkey, rcount, right);
            return None;
        }
        let pos = ci + 1;
        let sp = if rightmost && pos == ICAP {
            ICAP
        } else if leftmost && pos == 1 {
            1
        } else {
            ICAP / 2
        };
        let r = self.alloc_inner();
        let (a, b) = two_mut(&mut self.inners, node as usize, r as usize);
        let m = ICAP - sp;
        b.scores[..m].copy_from_slice(&a.scores[sp..]);
        b.elems[..m].copy_from_slice(&a.elems[sp..]);
        b.counts[..m].copy_from_slice(&a.counts[sp..]);
        b.kids[..m].copy_from_slice(&a.kids[sp..]);
        b.len = m as u32;
        a.len = sp as u32;
        if pos <= sp && sp < ICAP {
            a.insert_at(pos, rkey, rcount, right);
        } else {
            b.insert_at(pos - sp, rkey, rcount, right);
        }
        Some((r, (b.scores[0], b.elems[0])))
    }

    // ---- deletion --------------------------------------------------------------

    /// Removes element `e` (score `s`) from the tree, keeping it in the slab.
    fn unlink(&mut self, s: f64, e: u32) {
        self.del(self.root, self.height, s, e);
        // Collapse a root with one child.
        while self.height > 0 && self.inners[self.root as usize].len == 1 {
            let old = self.root;
            self.root = self.inners[old as usize].kids[0];
            self.free_inners.push(old);
            self.height -= 1;
        }
    }

    fn del(&mut self, node: u32, level: u32, s: f64, e: u32) {
        if level == 0 {
            let lf = self.leaf(node);
            let n = lf.n();
            let pos = self.below(&lf.scores[..n], &lf.elems[..n], s, e);
            debug_assert_eq!(lf.elems[pos], e, "the tree holds the element");
            self.leaves[node as usize].remove_at(pos);
            return;
        }
        let ci = self.child_for(node, s, e);
        let kid = self.inners[node as usize].kids[ci];
        self.del(kid, level - 1, s, e);
        self.inners[node as usize].counts[ci] -= 1;
        let (kn, min) = if level == 1 {
            (self.leaf(kid).n(), LMIN)
        } else {
            (self.inners[kid as usize].n(), IMIN)
        };
        if kn == 0 {
            // A node made by a split at the end may hold one entry.
            self.drop_child(node, ci, level - 1);
        } else if kn < min && self.inners[node as usize].n() > 1 {
            self.rebalance(node, ci, level - 1);
        } else {
            let kmin = self.min_of(kid, level - 1);
            let nd = &mut self.inners[node as usize];
            nd.scores[ci] = kmin.0;
            nd.elems[ci] = kmin.1;
        }
    }

    /// Frees the empty child `ci` of `node` (children at `level`).
    fn drop_child(&mut self, node: u32, ci: usize, level: u32) {
        let kid = self.inners[node as usize].kids[ci];
        if level == 0 {
            let (prev, next) = (self.leaf(kid).prev, self.leaf(kid).next);
            if prev == NIL {
                self.first = next;
            } else {
                self.leaves[prev as usize].next = next;
            }
            if next == NIL {
                self.last = prev;
            } else {
                self.leaves[next as usize].prev = prev;
            }
            self.free_leaves.push(kid);
        } else {
            self.free_inners.push(kid);
        }
        self.inners[node as usize].remove_at(ci);
    }

    /// Child `ci` of `node` (children at `level`) fell under its minimum:
    /// merge it with a sibling, or move entries over from one.
    fn rebalance(&mut self, node: u32, ci: usize, level: u32) {
        let ai = if ci > 0 { ci - 1 } else { ci };
        let bi = ai + 1;
        let (a, b) = {
            let nd = &self.inners[node as usize];
            (nd.kids[ai], nd.kids[bi])
        };
        let cap = if level == 0 { LCAP } else { ICAP };
        let (an, bn) = if level == 0 {
            (self.leaf(a).n(), self.leaf(b).n())
        } else {
            (self.inners[a as usize].n(), self.inners[b as usize].n())
        };
        if an + bn <= cap {
            // Merge b into a.
            if level == 0 {
                let (x, y) = two_mut(&mut self.leaves, a as usize, b as usize);
                x.scores[an..an + bn].copy_from_slice(&y.scores[..bn]);
                x.elems[an..an + bn].copy_from_slice(&y.elems[..bn]);
                x.len = (an + bn) as u32;
                x.next = y.next;
                if y.next == NIL {
                    self.last = a;
                } else {
                    let nx = y.next;
                    self.leaves[nx as usize].prev = a;
                }
                self.free_leaves.push(b);
            } else {
                let (x, y) = two_mut(&mut self.inners, a as usize, b as usize);
                x.scores[an..an + bn].copy_from_slice(&y.scores[..bn]);
                x.elems[an..an + bn].copy_from_slice(&y.elems[..bn]);
                x.counts[an..an + bn].copy_from_slice(&y.counts[..bn]);
                x.kids[an..an + bn].copy_from_slice(&y.kids[..bn]);
                x.len = (an + bn) as u32;
                self.free_inners.push(b);
            }
            let nd = &mut self.inners[node as usize];
            nd.counts[ai] += nd.counts[bi];
            nd.remove_at(bi);
        } else {
            // Even them out: move `k` entries across the boundary.
            let want = (an + bn) / 2;
            if level == 0 {
                let (x, y) = two_mut(&mut self.leaves, a as usize, b as usize);
                if an < want {
                    let k = want - an;
                    x.scores[an..want].copy_from_slice(&y.scores[..k]);
                    x.elems[an..want].copy_from_slice(&y.elems[..k]);
                    y.scores.copy_within(k..bn, 0);
                    y.elems.copy_within(k..bn, 0);
                } else {
                    let k = an - want;
                    y.scores.copy_within(0..bn, k);
                    y.elems.copy_within(0..bn, k);
                    y.scores[..k].copy_from_slice(&x.scores[want..an]);
                    y.elems[..k].copy_from_slice(&x.elems[want..an]);
                }
                x.len = want as u32;
                y.len = (an + bn - want) as u32;
            } else {
                let (x, y) = two_mut(&mut self.inners, a as usize, b as usize);
                if an < want {
                    let k = want - an;
                    x.scores[an..want].copy_from_slice(&y.scores[..k]);
                    x.elems[an..want].copy_from_slice(&y.elems[..k]);
                    x.counts[an..want].copy_from_slice(&y.counts[..k]);
                    x.kids[an..want].copy_from_slice(&y.kids[..k]);
                    y.scores.copy_within(k..bn, 0);
                    y.elems.copy_within(k..bn, 0);
                    y.counts.copy_within(k..bn, 0);
                    y.kids.copy_within(k..bn, 0);
                } else {
                    let k = an - want;
                    y.scores.copy_within(0..bn, k);
                    y.elems.copy_within(0..bn, k);
                    y.counts.copy_within(0..bn, k);
                    y.kids.copy_within(0..bn, k);
                    y.scores[..k].copy_from_slice(&x.scores[want..an]);
                    y.elems[..k].copy_from_slice(&x.elems[want..an]);
                    y.counts[..k].copy_from_slice(&x.counts[want..an]);
                    y.kids[..k].copy_from_slice(&x.kids[want..an]);
                }
                x.len = want as u32;
                y.len = (an + bn - want) as u32;
            }
            let (ac, bc) = (self.count_of(a, level), self.count_of(b, level));
            let bmin = self.min_of(b, level);
            let nd = &mut self.inners[node as usize];
            nd.counts[ai] = ac;
            nd.counts[bi] = bc;
            nd.scores[bi] = bmin.0;
            nd.elems[bi] = bmin.1;
        }
        let amin = self.min_of(a, level);
        let nd = &mut self.inners[node as usize];
        nd.scores[ai] = amin.0;
        nd.elems[ai] = amin.1;
    }

    /// Removes element `e` from the tree, the index and the slab.
    pub(super) fn delete_elem(&mut self, e: u32) -> SmallBytes {
        let s = self.elem(e).score;
        self.unlink(s, e);
        self.len -= 1;
        self.index_remove(e);
        let m = self.free_elem(e);
        if self.len == 0 {
            // Give the slabs back when the set empties.
            *self = Tree::new();
        }
        m
    }

    /// Moves element `e` to a new score.
    pub(super) fn rescore(&mut self, e: u32, s: f64) {
        let old = self.elem(e).score;
        self.unlink(old, e);
        self.elems[e as usize].score = s;
        self.link(s, e);
    }

    // ---- rank ----------------------------------------------------------------

    /// Number of leading elements for which `before(score, element)`
    /// holds (a prefix of the order).
    pub(super) fn count_below(&self, before: impl Fn(f64, u32) -> bool) -> usize {
        let (mut node, mut level, mut acc) = (self.root, self.height, 0usize);
        while level > 0 {
            let nd = &self.inners[node as usize];
            let n = nd.n();
            // Children whose minimum is before: a prefix.
            let k = partition(n, |i| before(nd.scores[i], nd.elems[i]));
            if k == 0 {
                return acc;
            }
            acc += nd.counts[..k - 1].iter().map(|&c| c as usize).sum::<usize>();
            node = nd.kids[k - 1];
            level -= 1;
        }
        let lf = self.leaf(node);
        acc + partition(lf.n(), |i| before(lf.scores[i], lf.elems[i]))
    }

    /// 0-based rank of element `e`.
    pub(super) fn rank_of(&self, e: u32) -> usize {
        let s = self.elem(e).score;
        let (mut node, mut level, mut acc) = (self.root, self.height, 0usize);
        while level > 0 {
            let ci = self.child_for(node, s, e);
            let nd = &self.inners[node as usize];
            acc += nd.counts[..ci].iter().map(|&c| c as usize).sum::<usize>();
            node = nd.kids[ci];
            level -= 1;
        }
        let lf = self.leaf(node);
        acc + self.below(&lf.scores[..lf.n()], &lf.elems[..lf.n()], s, e)
    }

    /// Leaf and slot of 0-based rank `r` (< len).
    pub(super) fn at(&self, mut r: usize) -> (u32, usize) {
        let (mut node, mut level) = (self.root, self.height);
        while level > 0 {
            let nd = &self.inners[node as usize];
            let mut i = 0;
            while i + 1 < nd.n() && r >= nd.counts[i] as usize {
                r -= nd.counts[i] as usize;
                i += 1;
            }
            node = nd.kids[i];
            level -= 1;
        }
        (node, r)
    }

    /// Bytes owned on the heap.
    pub(super) fn heap_size(&self) -> usize {
        let members: usize = self.elems.iter().map(|n| n.member.heap_size()).sum();
        self.elems.capacity() * std::mem::size_of::<Elem>()
            + self.leaves.capacity() * std::mem::size_of::<Leaf>()
            + self.inners.capacity() * std::mem::size_of::<Inner>()
            + (self.free_leaves.capacity() + self.free_inners.capacity()) * 4
            + members
            + self.buckets.capacity() * 4
    }

    #[cfg(test)]
    pub(super) fn free_leaves_len(&self) -> usize {
        self.free_leaves.len()
    }

    /// Checks every invariant (tests).
    #[cfg(test)]
    pub(super) fn check(&self) {
        use std::cmp::Ordering;
        fn walk(t: &Tree, node: u32, level: u32, out: &mut Vec<u32>, root: bool) -> usize {
            if level == 0 {
                let l = t.leaf(node);
                assert!(root || l.n() >= LMIN.min(1), "empty leaf");
                out.extend_from_slice(&l.elems[..l.n()]);
                for p in 0..l.n() {
                    assert_eq!(t.elem(l.elems[p]).score, l.scores[p]);
                }
                return l.n();
            }
            let nd = &t.inners[node as usize];
            assert!(nd.n() >= if root { 2 } else { 1 });
            let mut total = 0;
            for i in 0..nd.n() {
                let c = walk(t, nd.kids[i], level - 1, out, false);
                assert_eq!(c as u32, nd.counts[i], "count of child {i}");
                assert_eq!(t.min_of(nd.kids[i], level - 1), (nd.scores[i], nd.elems[i]));
                total += c;
            }
            total
        }
        let mut order = Vec::new();
        assert_eq!(walk(self, self.root, self.height, &mut order, true), self.len);
        for w in order.windows(2) {
            let (a, b) = (self.elem(w[0]), self.elem(w[1]));
            assert_eq!(super::cmp(a.score, &a.member, b.score, &b.member), Ordering::Less, "order");
        }
        // The leaf chain visits the same elements, both ways.
        let mut chain = Vec::new();
        let mut l = self.first;
        let mut prev = NIL;
        while l != NIL {
            assert_eq!(self.leaf(l).prev, prev);
            chain.extend_from_slice(&self.leaf(l).elems[..self.leaf(l).n()]);
            prev = l;
            l = self.leaf(l).next;
        }
        assert_eq!(prev, self.last);
        assert_eq!(chain, order);
        for &e in &order {
            assert_eq!(self.find(self.member(e)), Some(e));
        }
    }
}

/// Number of leading `i < n` for which `p(i)` holds (a prefix).
#[inline]
fn partition(n: usize, p: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if p(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Two distinct elements of a slab, both mutable.
#[inline]
fn two_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    debug_assert_ne!(a, b);
    if a < b {
        let (x, y) = v.split_at_mut(b);
        (&mut x[a], &mut y[0])
    } else {
        let (x, y) = v.split_at_mut(a);
        (&mut y[0], &mut x[b])
    }
}
