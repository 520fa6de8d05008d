//! The sorted-set value type and its two encodings, as Redis 7.0 has them.
//!
//! - `listpack` (small): one packed buffer of entries in order, each a
//!   member then its score, the score an integer varint when integral
//!   (see [`encode_score`]). Members are front-coded
//!   ([`crate::types::front`]): a literal (a length byte and the bytes
//!   under 128 bytes, as in Redis) or coded against the nearest literal
//!   member before it, when that is shorter (`member:1` after `member:0`
//!   takes 2 bytes). Lookups walk it, as Redis walks its listpack; it
//!   holds at most `zset-max-listpack-entries` entries of at most
//!   `zset-max-listpack-value` bytes (decoded).
//! - `skiplist` (big; the name is Redis's, which `OBJECT ENCODING`
//!   reports): an order-statistic B+tree over (score, member) with
//!   element counts for O(log n) rank, ZRANGE by index, insert and delete,
//!   plus a member index chained through the elements for O(1) ZSCORE and
//!   ZSCAN's cursor (`tree.rs`). Redis keeps a skiplist here; a search
//!   in the tree reads a few cache lines per level instead of one
//!   scattered node per link.
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
use crate::types::front::{head, skip, Column, Head, Seek, Str, INT, SMALL};

mod tree;

use tree::{Tree, NIL};

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

/// Decodes the score at `off`: (score, offset after it).
#[inline]
fn score_at(buf: &[u8], mut off: usize) -> (f64, usize) {
    let h = read_varint(buf, &mut off);
    let s = if h & 1 == 0 {
        let z = h >> 1;
        ((z >> 1) as i64 ^ -((z & 1) as i64)) as f64
    } else {
        let v = f64::from_le_bytes(buf[off..off + 8].try_into().expect("8 bytes"));
        off += 8;
        v
    };
    (s, off)
}

/// Appends a score as a tagged varint (low bit 0: a zigzag integer, as
/// small integral scores are most common; 1: an `f64` follows), the way a
/// listpack stores integral scores as integers.
fn encode_score(out: &mut Vec<u8>, s: f64) {
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

/// What [`Packed::rewrite`] does at the entry it starts at.
enum Change<'m> {
    /// Removes that many entries.
    Remove(usize),
    /// Inserts a member and its score before it.
    Insert(&'m [u8], f64),
}

/// A place in a packed buffer: an entry's start, its rank and the
/// members' anchor.
#[derive(Clone, Copy, Default)]
struct Walk {
    off: usize,
    rank: usize,
    col: Column,
}

/// A member found in a packed buffer.
struct Hit {
    /// The walk before its entry, and before the one before it.
    before: Walk,
    prev: Option<Walk>,
    /// Its member's header, its score and the next entry's start.
    head: Head,
    score: f64,
    next: usize,
}

impl Packed {
    /// Number of entries.
    fn count(&self) -> usize {
        let mut off = 0;
        let mut n = 0;
        while off < self.buf.len() {
            off = score_at(&self.buf, skip(&self.buf, off)).1;
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
        PackIter { buf: &self.buf, w: Walk::default() }
    }

    /// Where `m` is.
    #[inline]
    fn find(&self, m: &[u8]) -> Option<Hit> {
        let buf = &self.buf[..];
        let mut w = Walk::default();
        let mut seek = Seek::new(m);
        let mut prev = None;
        while w.off < buf.len() {
            let before = w;
            let head = w.col.step(buf, w.off);
            let (score, next) = score_at(buf, head.stop());
            if seek.is(&w.col, buf, &head) {
                return Some(Hit { before, prev, head, score, next });
            }
            prev = Some(before);
            w.off = next;
            w.rank += 1;
        }
        None
    }

    /// The walk at rank `r` (or the end).
    fn walk_to(&self, r: usize) -> Walk {
        let mut w = Walk::default();
        while w.rank < r && w.off < self.buf.len() {
            let h = w.col.step(&self.buf, w.off);
            w.off = score_at(&self.buf, h.stop()).1;
            w.rank += 1;
        }
        w
    }

    /// Applies `change` at `from` and codes the members after it afresh,
    /// up to the first literal at or past `past` (which, with everything
    /// after it, needs nothing before it), against the anchor before
    /// `from`. One pass, one allocation.
    fn rewrite(&mut self, from: Walk, past: usize, change: Change<'_>) {
        let old: &[u8] = &self.buf;
        let mut out = Vec::with_capacity(old.len() + 2 * SMALL);
        // The writing column reads its anchor before `from` in the copy of
        // the head, and new ones where it writes them.
        out.extend_from_slice(&old[..from.off]);
        let (mut r, mut w) = (from.col, from.col);
        let mut drop = 0;
        match change {
            Change::Remove(k) => drop = k,
            Change::Insert(m, s) => {
                w.push(&mut out, m);
                encode_score(&mut out, s);
            }
        }
        let (mut small, mut tmp) = ([0u8; SMALL], Vec::new());
        let mut p = from.off;
        while p < old.len() {
            if p >= past && old[p] < INT {
                break;
            }
            let (m, q) = r.lend(old, p, &mut small, &mut tmp);
            let next = score_at(old, q).1;
            if drop > 0 {
                drop -= 1;
            } else {
                w.push(&mut out, m);
                out.extend_from_slice(&old[q..next]);
            }
            p = next;
        }
        out.extend_from_slice(&old[p..]);
        self.buf = out.into_boxed_slice();
    }

    /// Inserts an absent member at its place.
    fn insert(&mut self, m: &[u8], s: f64) {
        let buf = &self.buf[..];
        let mut w = Walk::default();
        while w.off < buf.len() {
            let mut c = w.col;
            let h = c.step(buf, w.off);
            let (ks, next) = score_at(buf, h.stop());
            let after = match ks.partial_cmp(&s) {
                Some(Ordering::Equal) | None => &*Str::decode(buf, &h, c.anchor()) > m,
                Some(o) => o == Ordering::Greater,
            };
            if after {
                break;
            }
            w = Walk { off: next, rank: w.rank + 1, col: c };
        }
        let before_coded = w.off < buf.len() && buf[w.off] >= INT;
        let e = if before_coded { w.col.choose_within(buf, m) } else { w.col.choose(buf, m) };
        if e.is_lit() && before_coded {
            // The entries after it would take it for their anchor.
            return self.rewrite(w, w.off + 1, Change::Insert(m, s));
        }
        let mut enc = Vec::with_capacity(e.head_size() + 9);
        e.push_head(&mut enc);
        encode_score(&mut enc, s);
        // Grow by exactly the entry, as Redis reallocates its listpack.
        self.edit(|buf| {
            buf.reserve_exact(enc.len());
            buf.splice(w.off..w.off, enc);
        });
    }

    /// Gives the member `hit` found the score `s`.
    fn rescore(&mut self, hit: &Hit, m: &[u8], s: f64) {
        // Still between its neighbours: only the score changes.
        let buf = &self.buf[..];
        let at = hit.head.stop();
        let below = match hit.prev {
            None => true,
            Some(mut w) => {
                let h = w.col.step(buf, w.off);
                let (ps, _) = score_at(buf, h.stop());
                cmp(ps, &Str::decode(buf, &h, w.col.anchor()), s, m) == Ordering::Less
            }
        };
        let above = hit.next >= buf.len() || {
            let mut c = hit.before.col;
            c.step(buf, hit.before.off);
            let h = c.step(buf, hit.next);
            let (ns, _) = score_at(buf, h.stop());
            cmp(s, m, ns, &Str::decode(buf, &h, c.anchor())) == Ordering::Less
        };
        if below && above {
            let mut enc = Vec::with_capacity(9);
            encode_score(&mut enc, s);
            let next = hit.next;
            self.edit(|b| {
                b.splice(at..next, enc);
            });
            return;
        }
        self.remove_hit(hit);
        self.insert(m, s);
    }

    fn remove_hit(&mut self, hit: &Hit) {
        let (off, next) = (hit.before.off, hit.next);
        if !hit.head.coded && next < self.buf.len() && self.buf[next] >= INT {
            // Its anchor's entries follow.
            return self.rewrite(hit.before, next, Change::Remove(1));
        }
        self.edit(|buf| {
            buf.drain(off..next);
        });
    }

    /// Removes ranks `lo..hi`.
    fn remove_range(&mut self, lo: usize, hi: usize) {
        let from = self.walk_to(lo);
        let mut b = from.off;
        let mut lit = false;
        for _ in lo..hi {
            let h = head(&self.buf, b);
            lit |= !h.coded;
            b = score_at(&self.buf, h.stop()).1;
        }
        if lit && b < self.buf.len() && self.buf[b] >= INT {
            return self.rewrite(from, b, Change::Remove(hi - lo));
        }
        self.edit(|buf| {
            buf.drain(from.off..b);
        });
    }
}

/// Walks a packed buffer entry by entry.
struct PackIter<'a> {
    buf: &'a [u8],
    w: Walk,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (Str<'a>, f64);

    #[inline]
    fn next(&mut self) -> Option<(Str<'a>, f64)> {
        if self.w.off >= self.buf.len() {
            return None;
        }
        let (m, p) = self.w.col.read(self.buf, self.w.off);
        let (s, next) = score_at(self.buf, p);
        self.w.off = next;
        Some((m, s))
    }
}

// ---- the value ----------------------------------------------------------------

enum Enc {
    Pack(Packed),
    Tree(Box<Tree>),
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
            Enc::Tree(_) => {
                let mut z = ZSet::new_skiplist();
                for (m, s) in self.iter() {
                    z.insert_new(&m, s);
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
    /// The entries' starts, each with the members' anchor before it.
    PackRev(&'a [u8], Vec<(u32, Column)>),
    Tree(&'a Tree, u32, usize, bool),
}

impl<'a> Iterator for Range<'a> {
    type Item = (Str<'a>, f64);

    #[inline]
    fn next(&mut self) -> Option<(Str<'a>, f64)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match &mut self.inner {
            RangeInner::Pack(it) => it.next(),
            RangeInner::PackRev(buf, offs) => {
                let (off, mut col) = offs.pop()?;
                let (m, p) = col.read(buf, off as usize);
                Some((m, score_at(buf, p).0))
            }
            RangeInner::Tree(t, l, pos, rev) => {
                if *l == NIL {
                    return None;
                }
                let (s, e) = t.slot(*l, *pos);
                (*l, *pos) = t.step(*l, *pos, *rev);
                Some((Str::Ref(&t.elem(e).member), s))
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
        ZSet { enc: Enc::Tree(Box::new(Tree::new())) }
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
            Enc::Tree(s) => s.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A pipelined command's member stage (`Store::with_member_value`): in
    /// the big encoding, `m`'s hash in the member index with its bucket
    /// prefetched; 0 for a listpack (one allocation, read from its start).
    #[inline]
    pub fn prefetch_member(&self, m: &[u8]) -> u64 {
        match &self.enc {
            Enc::Pack(_) => 0,
            Enc::Tree(t) => t.prefetch_bucket_of(m),
        }
    }

    /// The stages after [`prefetch_member`](Self::prefetch_member): the
    /// first element of its index chain, or (`second`) the next one.
    #[inline]
    pub fn prefetch_member_node(&self, h: u64, second: bool) {
        if let Enc::Tree(t) = &self.enc {
            t.prefetch_chain(h, second);
        }
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match &self.enc {
            Enc::Pack(_) => "listpack",
            Enc::Tree(_) => "skiplist",
        }
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match &self.enc {
            Enc::Pack(p) => p.buf.len(),
            Enc::Tree(t) => t.heap_size(),
        }
    }

    /// The score of `m`.
    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match &self.enc {
            Enc::Pack(p) => p.find(m).map(|h| h.score),
            Enc::Tree(t) => t.find(m).map(|e| t.elem(e).score),
        }
    }

    /// 0-based rank of `m` (from the top when `rev`) and its score.
    pub fn rank(&self, m: &[u8], rev: bool) -> Option<(usize, f64)> {
        let (r, s) = match &self.enc {
            Enc::Pack(p) => p.find(m).map(|h| (h.before.rank, h.score))?,
            Enc::Tree(t) => {
                let e = t.find(m)?;
                (t.rank_of(e), t.elem(e).score)
            }
        };
        Some((if rev { self.len() - 1 - r } else { r }, s))
    }

    /// Converts to a skiplist (Redis's `zsetConvert`).
    pub fn to_skiplist(&mut self) {
        if let Enc::Pack(p) = &self.enc {
            let mut t = Tree::new();
            for (m, s) in p.iter() {
                t.insert(s, SmallBytes::new(&m));
            }
            self.enc = Enc::Tree(Box::new(t));
        }
    }

    /// Back to a listpack when it fits (Redis's
    /// `zsetConvertToListpackIfNeeded`; `max_member` is the longest member
    /// the caller added).
    pub fn shrink_if_small(&mut self, max_member: usize, lim: Limits) {
        if matches!(self.enc, Enc::Tree(_))
            && self.len() <= lim.max_entries
            && max_member <= lim.max_value
        {
            let mut buf = Vec::new();
            let mut col = Column::default();
            for (m, s) in self.iter() {
                col.push(&mut buf, &m);
                encode_score(&mut buf, s);
            }
            self.enc = Enc::Pack(Packed { buf: buf.into_boxed_slice() });
        }
    }

    /// Inserts a member known to be absent, without conversion checks.
    fn insert_new(&mut self, m: &[u8], s: f64) {
        match &mut self.enc {
            Enc::Pack(p) => p.insert(m, s),
            Enc::Tree(t) => t.insert(s, SmallBytes::new(m)),
        }
    }

    /// Sets `m`'s score, adding it if absent (true when added), converting
    /// to a skiplist as Redis's `zsetAdd` does.
    pub fn set(&mut self, m: &[u8], s: f64, lim: Limits) -> bool {
        match &mut self.enc {
            Enc::Pack(p) => {
                if let Some(hit) = p.find(m) {
                    if hit.score != s {
                        p.rescore(&hit, m, s);
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
            Enc::Tree(t) => match t.find(m) {
                Some(e) => {
                    if t.elem(e).score != s {
                        t.rescore(e, s);
                    }
                    false
                }
                None => {
                    t.insert(s, SmallBytes::new(m));
                    true
                }
            },
        }
    }

    /// Removes `m`; its score if it was there.
    pub fn remove(&mut self, m: &[u8]) -> Option<f64> {
        match &mut self.enc {
            Enc::Pack(p) => {
                let hit = p.find(m)?;
                p.remove_hit(&hit);
                Some(hit.score)
            }
            Enc::Tree(t) => {
                let e = t.find(m)?;
                let s = t.elem(e).score;
                t.delete_elem(e);
                Some(s)
            }
        }
    }

    /// Number of leading elements (in ascending order) for which `before`
    /// holds; `before` must hold for a prefix of the order and nothing after.
    pub fn count_below(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.enc {
            Enc::Pack(p) => p.iter().take_while(|(m, s)| before(*s, m)).count(),
            Enc::Tree(t) => t.count_below(|s, e| before(s, &t.elem(e).member)),
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
            Enc::Pack(p) if !rev => RangeInner::Pack(PackIter { buf: &p.buf, w: p.walk_to(lo) }),
            Enc::Pack(p) => {
                let mut offs = Vec::with_capacity(left);
                let w = p.walk_to(lo);
                let (mut off, mut col) = (w.off, w.col);
                for _ in 0..left {
                    offs.push((off as u32, col));
                    let h = col.step(&p.buf, off);
                    off = score_at(&p.buf, h.stop()).1;
                }
                RangeInner::PackRev(&p.buf, offs)
            }
            Enc::Tree(t) => {
                let (l, pos) = if rev { t.at(hi - 1) } else { t.at(lo) };
                RangeInner::Tree(t, l, pos, rev)
            }
        };
        Range { inner, left }
    }

    /// Every element in ascending order.
    pub fn iter(&self) -> Range<'_> {
        self.range(0, usize::MAX, false)
    }

    /// The element of 0-based ascending rank `r`.
    pub fn get(&self, r: usize) -> Option<(Str<'_>, f64)> {
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
        if let Enc::Tree(t) = &mut self.enc {
            // Element numbers stay valid while others are removed.
            let (mut l, mut pos) = t.at(lo);
            let mut gone = Vec::with_capacity(hi - lo);
            for _ in lo..hi {
                gone.push(t.slot(l, pos).1);
                (l, pos) = t.step(l, pos, false);
            }
            for e in gone {
                t.delete_elem(e);
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
        self.range(lo, hi, max).for_each(|(m, s)| f(&m, s));
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
    pub fn scan<'s>(&'s self, cursor: u64, mut visit: impl FnMut(Str<'s>, f64)) -> u64 {
        match &self.enc {
            Enc::Pack(p) => {
                p.iter().for_each(|(m, s)| visit(m, s));
                0
            }
            Enc::Tree(t) => {
                if t.buckets.is_empty() {
                    return 0;
                }
                let mask = (t.buckets.len() - 1) as u64;
                let mut i = t.buckets[(cursor & mask) as usize];
                while i != NIL {
                    let n = t.elem(i);
                    visit(Str::Ref(&n.member), n.score);
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

    /// The tree's own invariants (order, counts, minima, leaf chain, index).
    fn check(z: &ZSet) {
        if let Enc::Tree(t) = &z.enc {
            t.check();
        }
    }

    use crate::types::test_rng::Rng;

    /// A reference sorted set: a `BTreeSet` of (score bits in order, member)
    /// and a member → score map.
    #[derive(Default)]
    struct Model {
        set: std::collections::BTreeSet<(Key, Vec<u8>)>,
        by_member: std::collections::HashMap<Vec<u8>, f64>,
    }

    /// An `f64` ordered as the sorted set orders scores (never NaN;
    /// -0 equals 0, as `cmp` has it).
    #[derive(Clone, Copy, PartialEq)]
    struct Key(f64);
    impl Eq for Key {}
    impl PartialOrd for Key {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Key {
        fn cmp(&self, o: &Self) -> Ordering {
            self.0.partial_cmp(&o.0).expect("no NaN")
        }
    }

    impl Model {
        fn set(&mut self, m: &[u8], s: f64) -> bool {
            let old = self.by_member.insert(m.to_vec(), s);
            if let Some(o) = old {
                self.set.remove(&(Key(o), m.to_vec()));
            }
            self.set.insert((Key(s), m.to_vec()));
            old.is_none()
        }
        fn remove(&mut self, m: &[u8]) -> Option<f64> {
            let s = self.by_member.remove(m)?;
            self.set.remove(&(Key(s), m.to_vec()));
            Some(s)
        }
        fn all(&self) -> Vec<(Vec<u8>, f64)> {
            self.set.iter().map(|(k, m)| (m.clone(), k.0)).collect()
        }
    }

    /// Pops `k` from the lowest (highest with `max`) on both; the same.
    fn check_pop(z: &mut ZSet, model: &mut Model, k: usize, max: bool) {
        let got = z.pop(k, max);
        let mut want = Vec::new();
        for _ in 0..k {
            let e = if max { model.set.last() } else { model.set.first() };
            let Some((s, m)) = e.cloned() else { break };
            model.remove(&m);
            want.push((SmallBytes::new(&m), s.0));
        }
        assert_eq!(got, want);
    }

    /// Ranks `lo..hi` (reversed with `rev`) on both; the same pairs.
    fn check_range(z: &ZSet, model: &Model, lo: usize, hi: usize, rev: bool) {
        let n = model.set.len();
        let got: Vec<(Vec<u8>, f64)> = z.range(lo, hi, rev).map(|(m, s)| (m.to_vec(), s)).collect();
        let mut want: Vec<(Vec<u8>, f64)> = model
            .set
            .iter()
            .skip(lo)
            .take(hi.min(n).saturating_sub(lo))
            .map(|(k, m)| (m.clone(), k.0))
            .collect();
        if rev {
            want.reverse();
        }
        assert_eq!(got, want);
    }

    /// Removes ranks `lo..hi` on both; the same count.
    fn check_remove_range(z: &mut ZSet, model: &mut Model, lo: usize, hi: usize) {
        let gone: Vec<Vec<u8>> =
            model.set.iter().skip(lo).take(hi.saturating_sub(lo)).map(|x| x.1.clone()).collect();
        assert_eq!(z.remove_range(lo, hi), gone.len());
        for m in gone {
            model.remove(&m);
        }
    }

    fn score(r: &mut Rng) -> f64 {
        match r.below(30) {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            2 => -0.0,
            3 => 0.0,
            // Few distinct scores: many ties, decided by the member.
            4..=12 => r.below(8) as f64,
            _ => (r.below(100_000) as f64 - 50_000.0) / 8.0,
        }
    }

    /// Random operations on the big encoding against the reference:
    /// adds, updates, removes, rank and score/lex ranges, pops, rank
    /// range removals; the tree's invariants after every step.
    fn against_model(seed: u64, steps: usize, members: u64, every: usize) {
        let lim = Limits { max_entries: 0, max_value: 64 };
        let mut r = Rng(seed);
        let mut z = ZSet::new_skiplist();
        let mut model = Model::default();
        for step in 0..steps {
            let m = format!("m{}", r.below(members)).into_bytes();
            match r.below(100) {
                0..=54 => {
                    let s = score(&mut r);
                    assert_eq!(z.set(&m, s, lim), model.set(&m, s));
                }
                55..=79 => assert_eq!(z.remove(&m), model.remove(&m)),
                80..=84 => {
                    let (k, max) = (r.below(40) as usize, r.below(2) == 1);
                    check_pop(&mut z, &mut model, k, max);
                }
                85..=87 => {
                    let n = model.set.len() as u64;
                    let lo = r.below(n + 2) as usize;
                    let hi = lo + r.below(60) as usize;
                    check_remove_range(&mut z, &mut model, lo, hi);
                }
                88..=90 => {
                    // A burst of ascending or descending adds (end splits).
                    let base = r.below(1000) as f64;
                    let down = r.below(2) == 1;
                    for i in 0..r.below(200) {
                        let s = if down { base - i as f64 } else { base + i as f64 };
                        let m = format!("b{}", r.below(members)).into_bytes();
                        assert_eq!(z.set(&m, s, lim), model.set(&m, s));
                    }
                }
                _ => {
                    let n = model.set.len();
                    if n > 0 {
                        let i = r.below(n as u64) as usize;
                        let (s, m) = model.set.iter().nth(i).cloned().expect("in range");
                        assert_eq!(z.rank(&m, false), Some((i, s.0)));
                        assert_eq!(z.rank(&m, true), Some((n - 1 - i, s.0)));
                        assert_eq!(z.score(&m), Some(s.0));
                        assert_eq!(z.get(i).map(|(k, s)| (k.to_vec(), s)), Some((m.clone(), s.0)));
                    }
                    let lo = r.below(n as u64 + 3) as usize;
                    let hi = if r.below(4) == 0 {
                        lo.saturating_sub(1)
                    } else {
                        lo + r.below(100) as usize
                    };
                    let rev = r.below(2) == 1;
                    check_range(&z, &model, lo, hi, rev);
                    let (a, b) = (score(&mut r), score(&mut r));
                    let (minex, maxex) = (r.below(2) == 1, r.below(2) == 1);
                    let lo =
                        model.set.iter().filter(|(s, _)| !score_gte_min(s.0, a, minex)).count();
                    let hi = model.set.iter().filter(|(s, _)| score_lte_max(s.0, b, maxex)).count();
                    assert_eq!(z.score_span(a, minex, b, maxex), (lo, hi));
                }
            }
            assert_eq!(z.len(), model.set.len());
            if step % every == 0 {
                check(&z);
                assert_eq!(all(&z), model.all());
            }
        }
        check(&z);
        assert_eq!(all(&z), model.all());
        // Empty it in random order.
        let mut left: Vec<Vec<u8>> = model.by_member.keys().cloned().collect();
        while !left.is_empty() {
            let m = left.swap_remove(r.below(left.len() as u64) as usize);
            assert_eq!(z.remove(&m), model.remove(&m));
            if left.len().is_multiple_of(97) {
                check(&z);
            }
        }
        assert!(z.is_empty());
        assert_eq!(z.encoding(), "skiplist");
    }

    /// A member of one of the shapes the front coding meets.
    fn member(r: &mut Rng, shape: u64) -> Vec<u8> {
        let i = r.below(60);
        match shape {
            0 => format!("member:{i}").into_bytes(),
            1 => format!("{}", 1000 + i).into_bytes(),
            2 => (0..r.below(10)).map(|_| r.below(256) as u8).collect(),
            3 => {
                let mut v = vec![b'p'; 130 + r.below(3) as usize];
                v.extend_from_slice(format!("{i}").as_bytes());
                v
            }
            _ => format!("m{i}").into_bytes(),
        }
    }

    /// The packed encoding against the reference, with members that share
    /// prefixes (front-coded), integers, random bytes and long ones: adds,
    /// rescores, removes, pops, rank range removals, ranges both ways,
    /// ranks, then conversion to the tree and back.
    #[test]
    fn packed_agrees_with_a_reference() {
        let lim = Limits { max_entries: 100_000, max_value: 1000 };
        for seed in 1..80u64 {
            let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut z = ZSet::new_listpack();
            let mut model = Model::default();
            let shape = r.below(5);
            for _ in 0..300 {
                let sh = if r.below(8) == 0 { r.below(5) } else { shape };
                let m = member(&mut r, sh);
                match r.below(100) {
                    0..=49 => {
                        let s = if r.below(3) == 0 { 1.0 } else { score(&mut r) };
                        assert_eq!(z.set(&m, s, lim), model.set(&m, s));
                    }
                    50..=69 => assert_eq!(z.remove(&m), model.remove(&m)),
                    70..=74 => {
                        let (k, max) = (r.below(5) as usize, r.below(2) == 1);
                        check_pop(&mut z, &mut model, k, max);
                    }
                    75..=79 => {
                        let n = model.set.len() as u64;
                        let lo = r.below(n + 2) as usize;
                        let hi = lo + r.below(6) as usize;
                        check_remove_range(&mut z, &mut model, lo, hi);
                    }
                    _ => {
                        let n = model.set.len();
                        for (i, (s, m)) in model.set.iter().enumerate() {
                            assert_eq!(z.rank(m, false), Some((i, s.0)));
                            assert_eq!(z.score(m), Some(s.0));
                            assert_eq!(
                                z.get(i).map(|(k, s)| (k.to_vec(), s)),
                                Some((m.clone(), s.0))
                            );
                        }
                        let lo = r.below(n as u64 + 2) as usize;
                        let hi = lo + r.below(12) as usize;
                        for rev in [false, true] {
                            check_range(&z, &model, lo, hi, rev);
                        }
                        let mut scanned = Vec::new();
                        assert_eq!(z.scan(0, |m, s| scanned.push((m.to_vec(), s))), 0);
                        assert_eq!(scanned, model.all());
                    }
                }
                assert_eq!(z.len(), model.set.len());
                assert_eq!(all(&z), model.all(), "seed {seed}");
                assert_eq!(z.encoding(), "listpack");
            }
            let mut t = z.clone();
            t.to_skiplist();
            assert_eq!(all(&t), model.all());
            t.shrink_if_small(200, Limits { max_entries: 1000, max_value: 1000 });
            assert_eq!(t.encoding(), "listpack");
            assert_eq!(all(&t), model.all());
        }
    }

    /// Ten `member:<i>` with scores 0 to 9 take 44 bytes (100 plain);
    /// members sharing nothing take exactly what they did.
    #[test]
    fn packed_sizes() {
        let lim = Limits { max_entries: 128, max_value: 64 };
        let mut z = ZSet::new_listpack();
        for i in 0..10 {
            z.set(format!("member:{i}").as_bytes(), i as f64, lim);
        }
        assert_eq!(z.heap_size(), 44);
        let mut z = ZSet::new_listpack();
        let mut r = Rng(3);
        for i in 0..10 {
            let m: Vec<u8> = (0..10).map(|_| b'a' + r.below(26) as u8).collect();
            z.set(&m, i as f64, lim);
        }
        assert_eq!(z.heap_size(), 10 * 12);
    }

    #[test]
    fn tree_agrees_with_a_reference_small() {
        for seed in 1..40 {
            against_model(seed * 7919, 3000, 300, 1);
        }
    }

    #[test]
    fn tree_agrees_with_a_reference_large() {
        // Tens of thousands of members: three levels.
        against_model(42, 60_000, 60_000, 10_000);
    }

    /// Lex ranges over equal scores, against a sorted reference.
    #[test]
    fn tree_lex_spans() {
        let lim = Limits { max_entries: 0, max_value: 64 };
        let mut r = Rng(99);
        let mut z = ZSet::new_skiplist();
        let mut want = std::collections::BTreeSet::new();
        for _ in 0..5000 {
            let m = format!("{:x}", r.below(1 << 20)).into_bytes();
            z.set(&m, 0.0, lim);
            want.insert(m);
        }
        check(&z);
        for _ in 0..300 {
            let a = format!("{:x}", r.below(1 << 20)).into_bytes();
            let b = format!("{:x}", r.below(1 << 20)).into_bytes();
            let (min, max) = (LexBound::Incl(&a), LexBound::Excl(&b));
            let lo = want.iter().filter(|m| !min.below_or_at(m)).count();
            let hi = want.iter().filter(|m| max.above_or_at(m)).count();
            assert_eq!(z.lex_span(min, max), (lo, hi));
        }
    }

    /// Ascending and descending loads fill their leaves (the end split),
    /// so memory per element stays low.
    #[test]
    fn ordered_loads_fill_nodes() {
        let lim = Limits { max_entries: 0, max_value: 64 };
        for down in [false, true] {
            let mut z = ZSet::new_skiplist();
            for i in 0..100_000 {
                let s = if down { -(i as f64) } else { i as f64 };
                z.set(format!("member:{i}").as_bytes(), s, lim);
            }
            check(&z);
            let Enc::Tree(t) = &z.enc else { unreachable!() };
            let leaves = t.leaves.len() - t.free_leaves_len();
            assert!(leaves <= 100_000 / 32 + 2, "{leaves} leaves (down: {down})");
        }
    }
}
