//! The sorted-set value type and its two encodings, as Redis 7.0 has them.
//!
//! - `listpack` (small): one packed buffer of entries in order, each
//!   `[member length as LEB128][member bytes][score]`, the score an
//!   integer varint when integral (see [`encode_entry`]). Lookups
//!   walk it, as Redis walks its listpack; it holds at most
//!   `zset-max-listpack-entries` entries of at most
//!   `zset-max-listpack-value` bytes.
//! - `skiplist` (big): Redis's skiplist with rank spans (O(log n) rank,
//!   ZRANGE by index, insert and delete), its nodes in one slab addressed
//!   by `u32`, plus a member index chained through the nodes for O(1)
//!   ZSCORE and ZSCAN's cursor.
//!
//! Order is by score, then member bytes (memcmp). Scores are never NaN.
//! A set converts to `skiplist` when an add would exceed either limit (the
//! caller passes them in) and never converts back by itself; store
//! commands call [`ZSet::shrink_if_small`] where Redis 7.0 does.
//!
//! Commands see one shape whatever the encoding: everything is a range of
//! ranks, found with [`ZSet::count_below`] for score and lex bounds.

use std::cmp::Ordering;
use std::fmt;

use crate::bytes::SmallBytes;
use ahash::RandomState;

const NIL: u32 = u32::MAX;
const MAX_LEVEL: usize = 32;
/// Header node of the skiplist slab.
const HEAD: u32 = 0;

/// The conversion thresholds (`zset-max-listpack-entries`/`-value`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_entries: usize,
    pub max_value: usize,
}

/// Element order: score, then member bytes.
#[inline]
pub fn cmp(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    match s1.partial_cmp(&s2) {
        Some(Ordering::Equal) | None => m1.cmp(m2),
        Some(o) => o,
    }
}

/// One end of a lex range (`-`, `+`, `[member`, `(member`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LexBound<'a> {
    Min,
    Max,
    Incl(&'a [u8]),
    Excl(&'a [u8]),
}

impl LexBound<'_> {
    /// `m` is at or above this bound taken as a range's minimum.
    #[inline]
    pub fn below_or_at(self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Incl(v) => m >= v,
            LexBound::Excl(v) => m > v,
        }
    }

    /// `m` is at or below this bound taken as a range's maximum.
    #[inline]
    pub fn above_or_at(self, m: &[u8]) -> bool {
        match self {
            LexBound::Max => true,
            LexBound::Min => false,
            LexBound::Incl(v) => m <= v,
            LexBound::Excl(v) => m < v,
        }
    }
}

/// `s` is inside the score range's lower end.
#[inline]
pub fn score_gte_min(s: f64, min: f64, minex: bool) -> bool {
    if minex {
        s > min
    } else {
        s >= min
    }
}

/// `s` is inside the score range's upper end.
#[inline]
pub fn score_lte_max(s: f64, max: f64, maxex: bool) -> bool {
    if maxex {
        s < max
    } else {
        s <= max
    }
}

// ---- listpack ---------------------------------------------------------------

/// The entries, in one exact-size allocation. No count is kept: it costs
/// a walk of at most `zset-max-listpack-entries` entries, as every other
/// listpack operation does, and without it a sorted set is 16 bytes, which
/// makes its box (one per key) 16 bytes instead of 32.
#[derive(Clone, Default, PartialEq)]
struct Packed {
    buf: Box<[u8]>,
}

#[inline]
fn read_varint(buf: &[u8], off: &mut usize) -> u64 {
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*off];
        *off += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return n;
        }
        shift += 7;
    }
}

fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Integral scores below this magnitude are stored as integers.
const EXACT_INT: f64 = 9_007_199_254_740_992.0; // 2^53

/// Decodes the entry at `off`: (member, score, offset of the next entry).
#[inline]
fn entry_at(buf: &[u8], mut off: usize) -> (&[u8], f64, usize) {
    let n = read_varint(buf, &mut off) as usize;
    let m = &buf[off..off + n];
    off += n;
    let h = read_varint(buf, &mut off);
    let s = if h & 1 == 0 {
        let z = h >> 1;
        ((z >> 1) as i64 ^ -((z & 1) as i64)) as f64
    } else {
        let v = f64::from_le_bytes(buf[off..off + 8].try_into().expect("8 bytes"));
        off += 8;
        v
    };
    (m, s, off)
}

/// Appends an entry: member length, member, then the score as a tagged
/// varint (low bit 0: a zigzag integer, as small integral scores are
/// most common; 1: an `f64` follows), the way a listpack stores
/// integral scores as integers.
fn encode_entry(out: &mut Vec<u8>, m: &[u8], s: f64) {
    write_varint(out, m.len() as u64);
    out.extend_from_slice(m);
    // Redis's listpack keeps scores as text, and -0 goes in as the integer 0.
    if s.fract() == 0.0 && s.abs() < EXACT_INT {
        let i = s as i64;
        let z = ((i << 1) ^ (i >> 63)) as u64;
        write_varint(out, z << 1);
    } else {
        out.push(1);
        out.extend_from_slice(&s.to_le_bytes());
    }
}

impl Packed {
    /// Number of entries.
    fn count(&self) -> usize {
        let mut off = 0;
        let mut n = 0;
        while off < self.buf.len() {
            off = entry_at(&self.buf, off).2;
            n += 1;
        }
        n
    }

    /// Runs `f` on the buffer as a vector, then stores it back at its
    /// exact size.
    fn edit(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let mut v = std::mem::take(&mut self.buf).into_vec();
        f(&mut v);
        self.buf = v.into_boxed_slice();
    }

    fn iter(&self) -> PackIter<'_> {
        PackIter { buf: &self.buf, off: 0 }
    }

    /// (offset, rank, score) of `m`.
    fn find(&self, m: &[u8]) -> Option<(usize, usize, f64)> {
        let mut off = 0;
        let mut rank = 0;
        while off < self.buf.len() {
            let (k, s, next) = entry_at(&self.buf, off);
            if k == m {
                return Some((off, rank, s));
            }
            off = next;
            rank += 1;
        }
        None
    }

    /// Offset of the entry of rank `r` (or the end).
    fn offset_of(&self, r: usize) -> usize {
        let mut off = 0;
        for _ in 0..r {
            if off >= self.buf.len() {
                break;
            }
            off = entry_at(&self.buf, off).2;
        }
        off
    }

    /// Inserts an absent member at its place.
    fn insert(&mut self, m: &[u8], s: f64) {
        let mut off = 0;
        while off < self.buf.len() {
            let (k, ks, next) = entry_at(&self.buf, off);
            if cmp(ks, k, s, m) == Ordering::Greater {
                break;
            }
            off = next;
        }
        let mut e = Vec::with_capacity(m.len() + 12);
        encode_entry(&mut e, m, s);
        // Grow by exactly the entry, as Redis reallocates its listpack.
        self.edit(|buf| {
            buf.reserve_exact(e.len());
            buf.splice(off..off, e);
        });
    }

    fn remove_at(&mut self, off: usize) {
        let next = entry_at(&self.buf, off).2;
        self.edit(|buf| {
            buf.drain(off..next);
        });
    }

    /// Removes ranks `lo..hi`.
    fn remove_range(&mut self, lo: usize, hi: usize) {
        let a = self.offset_of(lo);
        let mut b = a;
        for _ in lo..hi {
            b = entry_at(&self.buf, b).2;
        }
        self.edit(|buf| {
            buf.drain(a..b);
        });
    }
}

struct PackIter<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (&'a [u8], f64);

    #[inline]
    fn next(&mut self) -> Option<(&'a [u8], f64)> {
        if self.off >= self.buf.len() {
            return None;
        }
        let (m, s, next) = entry_at(self.buf, self.off);
        self.off = next;
        Some((m, s))
    }
}

// ---- skiplist ---------------------------------------------------------------

/// One level of a node. Links live in one arena, each node's levels
/// side by side, and a link carries what a search needs of the node it
/// points to (its score and where its levels are), so a search step costs
/// one cache miss, as a step in Redis's skiplist does.
#[derive(Clone, Copy, Default)]
struct Link {
    next: u32,
    /// Elements crossed by following `next` (wrapping arithmetic, as in
    /// Redis, where a link to the end may carry 0).
    span: u32,
    /// Arena offset of `next`'s levels.
    next_off: u32,
    /// Score of `next`.
    score: f64,
}

struct Node {
    member: SmallBytes,
    score: f64,
    back: u32,
    /// Next node in the same member-index bucket.
    hnext: u32,
    /// Arena offset and count of this node's levels.
    off: u32,
    height: u32,
}

/// The skiplist and its member index. The index is a chained hash table
/// whose chains run through the nodes themselves (`hnext`), so a member
/// is stored once and the index costs one bucket word per element; its
/// buckets are scanned in reverse-binary order for ZSCAN, as `Table` is.
struct Skip {
    nodes: Vec<Node>,
    free: Vec<u32>,
    links: Vec<Link>,
    /// Freed level blocks, by height.
    free_links: Vec<Vec<u32>>,
    level: usize,
    len: usize,
    tail: u32,
    buckets: Vec<u32>,
    hasher: RandomState,
    rng: u64,
}

impl Skip {
    fn new() -> Skip {
        let head = Node {
            member: SmallBytes::new(b""),
            score: 0.0,
            back: NIL,
            hnext: NIL,
            off: 0,
            height: MAX_LEVEL as u32,
        };
        Skip {
            nodes: vec![head],
            free: Vec::new(),
            links: vec![Link { next: NIL, ..Link::default() }; MAX_LEVEL],
            free_links: Vec::new(),
            level: 1,
            len: 0,
            tail: NIL,
            buckets: Vec::new(),
            hasher: RandomState::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    #[inline]
    fn bucket_of(&self, m: &[u8]) -> usize {
        (self.hasher.hash_one(m) as usize) & (self.buckets.len() - 1)
    }

    /// The node holding `m`.
    fn find(&self, m: &[u8]) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut i = self.buckets[self.bucket_of(m)];
        while i != NIL {
            let n = self.n(i);
            if &*n.member == m {
                return Some(i);
            }
            i = n.hnext;
        }
        None
    }

    fn index_add(&mut self, idx: u32) {
        // Grown once the index holds as many members as buckets, shrunk
        // under 10% full, as Redis sizes its dicts.
        if self.len > self.buckets.len() {
            // The rehash walks the list, which already holds `idx`.
            self.rehash(self.len.next_power_of_two().max(4));
            return;
        }
        let b = self.bucket_of(&self.nodes[idx as usize].member);
        self.nodes[idx as usize].hnext = self.buckets[b];
        self.buckets[b] = idx;
    }

    fn index_remove(&mut self, idx: u32) {
        let b = self.bucket_of(&self.nodes[idx as usize].member);
        let next = self.n(idx).hnext;
        if self.buckets[b] == idx {
            self.buckets[b] = next;
        } else {
            let mut i = self.buckets[b];
            while i != NIL {
                if self.n(i).hnext == idx {
                    self.nodes[i as usize].hnext = next;
                    break;
                }
                i = self.n(i).hnext;
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
        // Every live node: walk the level-0 list.
        let mut x = self.link(HEAD, 0).next;
        while x != NIL {
            let b = (self.hasher.hash_one(&*self.nodes[x as usize].member) as usize) & mask;
            self.nodes[x as usize].hnext = self.buckets[b];
            self.buckets[b] = x;
            x = self.link(x, 0).next;
        }
    }

    #[inline]
    fn n(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    #[inline]
    fn link(&self, i: u32, l: usize) -> Link {
        self.links[self.nodes[i as usize].off as usize + l]
    }

    /// Whether following `l` stays before (score, member).
    #[inline]
    fn before(&self, l: Link, score: f64, member: &[u8]) -> bool {
        if l.next == NIL || l.score > score {
            false
        } else if l.score < score {
            true
        } else {
            &*self.n(l.next).member < member
        }
    }

    /// Finds room for `h` levels in the arena.
    fn alloc_links(&mut self, h: usize) -> u32 {
        if let Some(o) = self.free_links.get_mut(h).and_then(Vec::pop) {
            return o;
        }
        let o = self.links.len() as u32;
        self.links.resize(self.links.len() + h, Link::default());
        o
    }

    fn free_links(&mut self, off: u32, h: usize) {
        if self.free_links.len() <= h {
            self.free_links.resize_with(h + 1, Vec::new);
        }
        self.free_links[h].push(off);
    }

    fn random_level(&mut self) -> usize {
        let mut l = 1;
        loop {
            // xorshift64*: levels only need to be well spread.
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 48;
            if r >= 0xFFFF / 4 || l >= MAX_LEVEL {
                return l;
            }
            l += 1;
        }
    }

    /// Redis's `zslInsert` for an absent (score, member).
    fn insert(&mut self, score: f64, member: SmallBytes) {
        // Arena offsets of the update nodes' levels.
        let mut update = [0u32; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let (mut x, mut xo) = (HEAD, 0u32);
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let l = self.links[xo as usize + i];
                if !self.before(l, score, &member) {
                    break;
                }
                rank[i] = rank[i].wrapping_add(l.span);
                (x, xo) = (l.next, l.next_off);
            }
            update[i] = xo;
        }
        let prev = x;
        let lvl = self.random_level();
        if lvl > self.level {
            for i in self.level..lvl {
                rank[i] = 0;
                update[i] = 0;
                self.links[i].span = self.len as u32;
            }
            self.level = lvl;
        }
        let off = self.alloc_links(lvl);
        let node = Node {
            member,
            score,
            back: if prev == HEAD { NIL } else { prev },
            hnext: NIL,
            off,
            height: lvl as u32,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        for i in 0..lvl {
            let uo = update[i] as usize + i;
            let u = self.links[uo];
            let crossed = rank[0].wrapping_sub(rank[i]);
            self.links[off as usize + i] = Link { span: u.span.wrapping_sub(crossed), ..u };
            self.links[uo] =
                Link { next: idx, span: crossed.wrapping_add(1), next_off: off, score };
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(lvl) {
            let l = &mut self.links[u as usize + i];
            l.span = l.span.wrapping_add(1);
        }
        let next = self.link(idx, 0).next;
        if next != NIL {
            self.nodes[next as usize].back = idx;
        } else {
            self.tail = idx;
        }
        self.len += 1;
        self.index_add(idx);
    }

    /// Redis's `zslDelete`: removes (score, member), returning its stored bytes.
    fn delete(&mut self, score: f64, member: &[u8]) -> Option<SmallBytes> {
        let mut update = [0u32; MAX_LEVEL];
        let mut xo = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let l = self.links[xo as usize + i];
                if !self.before(l, score, member) {
                    break;
                }
                xo = l.next_off;
            }
            update[i] = xo;
        }
        let x = self.links[xo as usize].next;
        if x == NIL || self.n(x).score != score || &*self.n(x).member != member {
            return None;
        }
        let x_off = self.n(x).off as usize;
        for (i, &u) in update.iter().enumerate().take(self.level) {
            let uo = u as usize + i;
            let ul = self.links[uo];
            if ul.next == x {
                let xl = self.links[x_off + i];
                self.links[uo] = Link { span: ul.span.wrapping_add(xl.span).wrapping_sub(1), ..xl };
            } else {
                self.links[uo].span = ul.span.wrapping_sub(1);
            }
        }
        let next = self.link(x, 0).next;
        let back = self.n(x).back;
        if next != NIL {
            self.nodes[next as usize].back = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.link(HEAD, self.level - 1).next == NIL {
            self.level -= 1;
        }
        self.len -= 1;
        self.index_remove(x);
        let node = &mut self.nodes[x as usize];
        let m = std::mem::replace(&mut node.member, SmallBytes::new(b""));
        let (off, h) = (node.off, node.height as usize);
        self.free.push(x);
        self.free_links(off, h);
        if self.len == 0 {
            // Give the slabs back when the set empties.
            self.nodes.truncate(1);
            self.nodes.shrink_to_fit();
            self.links.truncate(MAX_LEVEL);
            self.links.shrink_to_fit();
            self.free = Vec::new();
            self.free_links = Vec::new();
            self.buckets = Vec::new();
        }
        Some(m)
    }

    /// Number of leading elements for which `before` holds.
    fn count_below(&self, before: &impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut x = HEAD;
        let mut rank = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let l = self.link(x, i);
                if l.next == NIL {
                    break;
                }
                let n = self.n(l.next);
                if !before(n.score, &n.member) {
                    break;
                }
                rank = rank.wrapping_add(l.span);
                x = l.next;
            }
        }
        rank as usize
    }

    /// Node of 0-based rank `r` (< len).
    fn node_at(&self, r: usize) -> u32 {
        let target = r as u32 + 1;
        let mut x = HEAD;
        let mut traversed = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let l = self.link(x, i);
                if l.next == NIL || traversed.wrapping_add(l.span) > target {
                    break;
                }
                traversed = traversed.wrapping_add(l.span);
                x = l.next;
            }
            if traversed == target {
                return x;
            }
        }
        x
    }
}

// ---- the value ----------------------------------------------------------------

enum Enc {
    Pack(Packed),
    Skip(Box<Skip>),
}

/// A sorted-set value.
pub struct ZSet {
    enc: Enc,
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::new_listpack()
    }
}

impl Clone for ZSet {
    /// A copy in the same encoding (COPY).
    fn clone(&self) -> Self {
        match &self.enc {
            Enc::Pack(p) => ZSet { enc: Enc::Pack(p.clone()) },
            Enc::Skip(_) => {
                let mut z = ZSet::new_skiplist();
                for (m, s) in self.iter() {
                    z.insert_new(m, s);
                }
                z
            }
        }
    }
}

impl PartialEq for ZSet {
    fn eq(&self, o: &Self) -> bool {
        self.encoding() == o.encoding() && self.len() == o.len() && self.iter().eq(o.iter())
    }
}

impl fmt::Debug for ZSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZSet({}, {} members)", self.encoding(), self.len())
    }
}

/// Iterator over a range of ranks, in either direction.
pub struct Range<'a> {
    inner: RangeInner<'a>,
    left: usize,
}

enum RangeInner<'a> {
    Pack(PackIter<'a>),
    PackRev(&'a [u8], Vec<u32>),
    Skip(&'a Skip, u32, bool),
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], f64);

    #[inline]
    fn next(&mut self) -> Option<(&'a [u8], f64)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match &mut self.inner {
            RangeInner::Pack(it) => it.next(),
            RangeInner::PackRev(buf, offs) => {
                let (m, s, _) = entry_at(buf, offs.pop()? as usize);
                Some((m, s))
            }
            RangeInner::Skip(sl, x, rev) => {
                if *x == NIL {
                    return None;
                }
                let n = sl.n(*x);
                *x = if *rev { n.back } else { sl.links[n.off as usize].next };
                Some((&n.member, n.score))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Range<'_> {}

impl ZSet {
    /// An empty listpack.
    pub fn new_listpack() -> ZSet {
        ZSet { enc: Enc::Pack(Packed::default()) }
    }

    /// An empty skiplist.
    pub fn new_skiplist() -> ZSet {
        ZSet { enc: Enc::Skip(Box::new(Skip::new())) }
    }

    /// The encoding ZADD creates a key in (Redis 7.0's `zaddGenericCommand`):
    /// skiplist when listpacks are disabled or the first member is too long.
    pub fn new_for(first_len: usize, lim: Limits) -> ZSet {
        if lim.max_entries == 0 || first_len > lim.max_value {
            ZSet::new_skiplist()
        } else {
            ZSet::new_listpack()
        }
    }

    pub fn len(&self) -> usize {
        match &self.enc {
            Enc::Pack(p) => p.count(),
            Enc::Skip(s) => s.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match &self.enc {
            Enc::Pack(_) => "listpack",
            Enc::Skip(_) => "skiplist",
        }
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match &self.enc {
            Enc::Pack(p) => p.buf.len(),
            Enc::Skip(s) => {
                let members: usize = s.nodes.iter().map(|n| n.member.heap_size()).sum();
                s.nodes.capacity() * std::mem::size_of::<Node>()
                    + s.links.capacity() * std::mem::size_of::<Link>()
                    + members
                    + s.buckets.capacity() * 4
            }
        }
    }

    /// The score of `m`.
    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match &self.enc {
            Enc::Pack(p) => p.find(m).map(|(_, _, s)| s),
            Enc::Skip(s) => s.find(m).map(|i| s.n(i).score),
        }
    }

    /// 0-based rank of `m` (from the top when `rev`) and its score.
    pub fn rank(&self, m: &[u8], rev: bool) -> Option<(usize, f64)> {
        let (r, s) = match &self.enc {
            Enc::Pack(p) => p.find(m).map(|(_, r, s)| (r, s))?,
            Enc::Skip(sl) => {
                let s = sl.n(sl.find(m)?).score;
                let below = sl.count_below(&|ns, nm| cmp(ns, nm, s, m) == Ordering::Less);
                (below, s)
            }
        };
        Some((if rev { self.len() - 1 - r } else { r }, s))
    }

    /// Converts to a skiplist (Redis's `zsetConvert`).
    pub fn to_skiplist(&mut self) {
        if let Enc::Pack(p) = &self.enc {
            let mut sl = Skip::new();
            for (m, s) in p.iter() {
                sl.insert(s, SmallBytes::new(m));
            }
            self.enc = Enc::Skip(Box::new(sl));
        }
    }

    /// Back to a listpack when it fits (Redis's
    /// `zsetConvertToListpackIfNeeded`; `max_member` is the longest member
    /// the caller added).
    pub fn shrink_if_small(&mut self, max_member: usize, lim: Limits) {
        if matches!(self.enc, Enc::Skip(_))
            && self.len() <= lim.max_entries
            && max_member <= lim.max_value
        {
            let mut buf = Vec::new();
            for (m, s) in self.iter() {
                encode_entry(&mut buf, m, s);
            }
            self.enc = Enc::Pack(Packed { buf: buf.into_boxed_slice() });
        }
    }

    /// Inserts a member known to be absent, without conversion checks.
    fn insert_new(&mut self, m: &[u8], s: f64) {
        match &mut self.enc {
            Enc::Pack(p) => p.insert(m, s),
            Enc::Skip(sl) => sl.insert(s, SmallBytes::new(m)),
        }
    }

    /// Sets `m`'s score, adding it if absent (true when added), converting
    /// to a skiplist as Redis's `zsetAdd` does.
    pub fn set(&mut self, m: &[u8], s: f64, lim: Limits) -> bool {
        match &mut self.enc {
            Enc::Pack(p) => {
                if let Some((off, _, cur)) = p.find(m) {
                    if cur != s {
                        p.remove_at(off);
                        p.insert(m, s);
                    }
                    return false;
                }
                if m.len() > lim.max_value || p.count() + 1 > lim.max_entries {
                    self.to_skiplist();
                    self.insert_new(m, s);
                } else {
                    p.insert(m, s);
                }
                true
            }
            Enc::Skip(sl) => match sl.find(m).map(|i| sl.n(i).score) {
                Some(old) => {
                    if old != s {
                        let owned = sl.delete(old, m).expect("dict and skiplist agree");
                        sl.insert(s, owned);
                    }
                    false
                }
                None => {
                    sl.insert(s, SmallBytes::new(m));
                    true
                }
            },
        }
    }

    /// Removes `m`; its score if it was there.
    pub fn remove(&mut self, m: &[u8]) -> Option<f64> {
        match &mut self.enc {
            Enc::Pack(p) => {
                let (off, _, s) = p.find(m)?;
                p.remove_at(off);
                Some(s)
            }
            Enc::Skip(sl) => {
                let s = sl.n(sl.find(m)?).score;
                sl.delete(s, m);
                Some(s)
            }
        }
    }

    /// Number of leading elements (in ascending order) for which `before`
    /// holds; `before` must hold for a prefix of the order and nothing after.
    pub fn count_below(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.enc {
            Enc::Pack(p) => p.iter().take_while(|&(m, s)| before(s, m)).count(),
            Enc::Skip(sl) => sl.count_below(&before),
        }
    }

    /// Ascending ranks `lo..hi` of the elements whose scores are in the
    /// range (`lo >= hi` when none are).
    pub fn score_span(&self, min: f64, minex: bool, max: f64, maxex: bool) -> (usize, usize) {
        let lo = self.count_below(|s, _| !score_gte_min(s, min, minex));
        let hi = self.count_below(|s, _| score_lte_max(s, max, maxex));
        (lo, hi)
    }

    /// Ascending ranks `lo..hi` of the members in a lex range (meaningful
    /// when all scores are equal, as in Redis).
    pub fn lex_span(&self, min: LexBound<'_>, max: LexBound<'_>) -> (usize, usize) {
        let lo = self.count_below(|_, m| !min.below_or_at(m));
        let hi = self.count_below(|_, m| max.above_or_at(m));
        (lo, hi)
    }

    /// Ranks `lo..hi` (ascending ranks; `hi` is clamped to the length),
    /// walked from `lo` up, or from `hi - 1` down when `rev`.
    pub fn range(&self, lo: usize, hi: usize, rev: bool) -> Range<'_> {
        let hi = hi.min(self.len());
        let left = hi.saturating_sub(lo);
        if left == 0 {
            return Range { inner: RangeInner::PackRev(&[], Vec::new()), left: 0 };
        }
        let inner = match &self.enc {
            Enc::Pack(p) if !rev => {
                RangeInner::Pack(PackIter { buf: &p.buf, off: p.offset_of(lo) })
            }
            Enc::Pack(p) => {
                let mut offs = Vec::with_capacity(left);
                let mut off = p.offset_of(lo);
                for _ in 0..left {
                    offs.push(off as u32);
                    off = entry_at(&p.buf, off).2;
                }
                RangeInner::PackRev(&p.buf, offs)
            }
            Enc::Skip(sl) => {
                let start = if rev { sl.node_at(hi - 1) } else { sl.node_at(lo) };
                RangeInner::Skip(sl, start, rev)
            }
        };
        Range { inner, left }
    }

    /// Every element in ascending order.
    pub fn iter(&self) -> Range<'_> {
        self.range(0, usize::MAX, false)
    }

    /// The element of 0-based ascending rank `r`.
    pub fn get(&self, r: usize) -> Option<(&[u8], f64)> {
        self.range(r, r + 1, false).next()
    }

    /// Removes ranks `lo..hi`; how many went.
    pub fn remove_range(&mut self, lo: usize, hi: usize) -> usize {
        let hi = hi.min(self.len());
        if lo >= hi {
            return 0;
        }
        if let Enc::Pack(p) = &mut self.enc {
            p.remove_range(lo, hi);
            return hi - lo;
        }
        let gone: Vec<(SmallBytes, f64)> =
            self.range(lo, hi, false).map(|(m, s)| (SmallBytes::new(m), s)).collect();
        if let Enc::Skip(sl) = &mut self.enc {
            for (m, s) in gone {
                sl.delete(s, &m);
            }
        }
        hi - lo
    }

    /// Removes up to `count` lowest (or, with `max`, highest) elements and
    /// returns them in the order popped (ZPOPMIN/ZPOPMAX/ZMPOP/BZPOP*).
    /// Pops up to `count` lowest (or highest, `max`) members, handing each
    /// to `f` in pop order before removing them; returns how many. No
    /// copy of the members is made.
    pub fn pop_with(&mut self, count: usize, max: bool, mut f: impl FnMut(&[u8], f64)) -> usize {
        let n = count.min(self.len());
        let (lo, hi) = if max { (self.len() - n, self.len()) } else { (0, n) };
        self.range(lo, hi, max).for_each(|(m, s)| f(m, s));
        self.remove_range(lo, hi);
        n
    }

    /// [`pop_with`](Self::pop_with) into owned pairs.
    pub fn pop(&mut self, count: usize, max: bool) -> Vec<(SmallBytes, f64)> {
        let mut v = Vec::with_capacity(count.min(self.len()));
        self.pop_with(count, max, |m, s| v.push((SmallBytes::new(m), s)));
        v
    }

    /// One ZSCAN step: a skiplist visits one bucket of its member table and
    /// returns the next cursor; a listpack visits everything and returns 0.
    pub fn scan<'s>(&'s self, cursor: u64, mut visit: impl FnMut(&'s [u8], f64)) -> u64 {
        match &self.enc {
            Enc::Pack(p) => {
                p.iter().for_each(|(m, s)| visit(m, s));
                0
            }
            Enc::Skip(sl) => {
                if sl.buckets.is_empty() {
                    return 0;
                }
                let mask = (sl.buckets.len() - 1) as u64;
                let mut i = sl.buckets[(cursor & mask) as usize];
                while i != NIL {
                    let n = sl.n(i);
                    visit(&n.member, n.score);
                    i = n.hnext;
                }
                // Reverse-binary increment of the cursor (Redis's dictScan).
                (cursor | !mask).reverse_bits().wrapping_add(1).reverse_bits()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
        z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
    }

    /// Both encodings, driven by the same pseudo-random operations, agree
    /// with a sorted reference at every step.
    #[test]
    fn encodings_agree_with_a_reference() {
        let mut a = ZSet::new_listpack();
        let big = Limits { max_entries: 10_000, max_value: 64 };
        let mut b = ZSet::new_skiplist();
        let mut reference: Vec<(f64, Vec<u8>)> = Vec::new();
        let mut x = 12345u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..4000 {
            let m = format!("m{}", rnd() % 300).into_bytes();
            let s = match rnd() % 20 {
                0 => f64::INFINITY,
                1 => f64::NEG_INFINITY,
                2 => 1e300,
                3 => -9_007_199_254_740_993.0,
                _ => ((rnd() % 200) as f64 - 100.0) / 4.0,
            };
            match rnd() % 4 {
                0 => {
                    a.remove(&m);
                    b.remove(&m);
                    reference.retain(|(_, k)| *k != m);
                }
                _ => {
                    let added = a.set(&m, s, big);
                    assert_eq!(added, b.set(&m, s, big));
                    reference.retain(|(_, k)| *k != m);
                    reference.push((s, m.clone()));
                }
            }
            reference.sort_by(|p, q| cmp(p.0, &p.1, q.0, &q.1));
            if step % 97 == 0 {
                let want: Vec<(Vec<u8>, f64)> =
                    reference.iter().map(|(s, m)| (m.clone(), *s)).collect();
                assert_eq!(all(&a), want);
                assert_eq!(all(&b), want);
                for (r, (s, m)) in reference.iter().enumerate() {
                    assert_eq!(a.rank(m, false), Some((r, *s)));
                    assert_eq!(b.rank(m, false), Some((r, *s)));
                    assert_eq!(b.get(r).map(|(k, _)| k.to_vec()), Some(m.clone()));
                }
                let n = reference.len();
                let rev: Vec<_> = b.range(3, n.saturating_sub(2), true).collect();
                let rev_a: Vec<_> = a.range(3, n.saturating_sub(2), true).collect();
                assert_eq!(rev, rev_a);
                for (s, m) in &reference {
                    assert_eq!(b.score(m), Some(*s));
                }
                let mut scanned = Vec::new();
                let mut c = 0;
                loop {
                    c = b.scan(c, |m, s| scanned.push((m.to_vec(), s)));
                    if c == 0 {
                        break;
                    }
                }
                scanned.sort_by(|p, q| cmp(p.1, &p.0, q.1, &q.0));
                assert_eq!(scanned, all(&b));
                let below = |s: f64, _: &[u8]| s < 0.0;
                assert_eq!(a.count_below(below), b.count_below(below));
            }
        }
        assert_eq!(a.encoding(), "listpack");
        assert_eq!(b.encoding(), "skiplist");
        let pa = a.pop(5, true);
        let pb = b.pop(5, true);
        assert_eq!(pa, pb);
        assert_eq!(a.remove_range(2, 10), b.remove_range(2, 10));
        assert_eq!(all(&a), all(&b));
        assert_eq!(b.clone(), b);
    }

    #[test]
    fn score_and_lex_spans() {
        let lim = Limits { max_entries: 128, max_value: 64 };
        for mut z in [ZSet::new_listpack(), ZSet::new_skiplist()] {
            for (m, s) in [(&b"a"[..], 1.0), (b"b", 2.0), (b"c", 2.0), (b"d", 3.0)] {
                z.set(m, s, lim);
            }
            assert_eq!(z.score_span(2.0, false, 3.0, true), (1, 3));
            assert_eq!(z.score_span(2.0, true, f64::INFINITY, false), (3, 4));
            assert_eq!(z.score_span(5.0, false, 1.0, false).1, 1);
            let mut l = ZSet::new_listpack();
            for m in [&b"a"[..], b"b", b"c", b"d"] {
                l.set(m, 0.0, lim);
            }
            assert_eq!(l.lex_span(LexBound::Incl(b"b"), LexBound::Excl(b"d")), (1, 3));
            assert_eq!(l.lex_span(LexBound::Min, LexBound::Max), (0, 4));
            assert_eq!(l.lex_span(LexBound::Excl(b"a"), LexBound::Min), (1, 0));
        }
    }

    #[test]
    fn converts_at_redis_thresholds() {
        let lim = Limits { max_entries: 3, max_value: 5 };
        let mut z = ZSet::new_for(5, lim);
        assert_eq!(z.encoding(), "listpack");
        for m in [&b"a"[..], b"b", b"c"] {
            assert!(z.set(m, 1.0, lim));
        }
        assert!(!z.set(b"c", 2.0, lim));
        assert_eq!(z.encoding(), "listpack");
        assert!(z.set(b"d", 0.5, lim));
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(all(&z)[0], (b"d".to_vec(), 0.5));
        z.remove(b"d");
        assert_eq!(z.encoding(), "skiplist");
        z.shrink_if_small(1, lim);
        assert_eq!(z.encoding(), "listpack");
        assert!(z.set(b"longer", 1.0, lim));
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(ZSet::new_for(6, lim).encoding(), "skiplist");
        assert_eq!(
            ZSet::new_for(1, Limits { max_entries: 0, max_value: 5 }).encoding(),
            "skiplist"
        );
        let mut seen = Vec::new();
        let mut c = 0;
        loop {
            c = z.scan(c, |m, _| seen.push(m.to_vec()));
            if c == 0 {
                break;
            }
        }
        seen.sort();
        assert_eq!(seen, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"longer".to_vec()]);
    }
    /// ZSCAN's guarantee: an element present for the whole scan is
    /// returned at least once, while the set grows and shrinks between
    /// steps.
    #[test]
    fn scan_returns_every_stable_element_across_resizes() {
        let lim = Limits { max_entries: 0, max_value: 64 };
        let mut z = ZSet::new_skiplist();
        for i in 0..300 {
            z.set(format!("stable{i}").as_bytes(), i as f64, lim);
        }
        let mut seen = std::collections::HashSet::new();
        let (mut cursor, mut step) = (0, 0);
        loop {
            cursor = z.scan(cursor, |m, _| {
                seen.insert(m.to_vec());
            });
            step += 1;
            // Grow a lot, then shrink back below the start.
            if step < 40 {
                for j in 0..50 {
                    z.set(format!("tmp{step}-{j}").as_bytes(), 0.5, lim);
                }
            } else {
                let tmp: Vec<Vec<u8>> = z
                    .iter()
                    .filter(|(m, _)| m.starts_with(b"tmp"))
                    .map(|(m, _)| m.to_vec())
                    .collect();
                for m in tmp.iter().take(200) {
                    z.remove(m);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..300 {
            assert!(seen.contains(format!("stable{i}").as_bytes()), "stable{i} missed");
        }
    }
}
