//! The list value type: a deque of packed chunks (Redis's quicklist idea).
//!
//! Each chunk keeps its elements' bytes back to back in one buffer plus a
//! `u32` start offset per element, so an element costs its bytes and four
//! more (a `Vec<SmallBytes>` would cost 24 per element, more than Redis's
//! listpack). Chunks are bounded by `list-max-listpack-size` as Redis
//! bounds its listpack nodes, which keeps middle inserts and removals
//! cheap. A chunk keeps free room before its first element, so pushes and
//! pops at either end are amortised O(1). Redis 7.0 reports every list as
//! `quicklist`, whatever its size, so chunk boundaries are invisible.
//!
//! Must not depend on any other Sluice crate.

use std::collections::VecDeque;
use std::fmt;

/// Redis's `SIZE_SAFETY_LIMIT`: the byte bound of a node when the fill is a
/// count of entries.
const SIZE_SAFETY_LIMIT: usize = 8192;

/// Bytes a chunk may hold for the negative fills -1 … -5.
const SIZE_LIMITS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// Per-element bookkeeping counted against the chunk bound (the offset).
const ENTRY_OVERHEAD: usize = 4;

/// One node: elements packed in `buf[lo..]`, element `i` starting at
/// `offs[i]` and ending where the next one starts (or at `buf.len()`).
#[derive(Clone, Default)]
struct Chunk {
    buf: Vec<u8>,
    /// Bytes before `lo` are free room for pushes at the front.
    lo: usize,
    offs: VecDeque<u32>,
}

impl Chunk {
    fn with(v: &[u8]) -> Chunk {
        let mut c = Chunk::default();
        c.push_back(v);
        c
    }

    #[inline]
    fn len(&self) -> usize {
        self.offs.len()
    }

    #[inline]
    fn end(&self, i: usize) -> usize {
        match self.offs.get(i + 1) {
            Some(&o) => o as usize,
            None => self.buf.len(),
        }
    }

    #[inline]
    fn get(&self, i: usize) -> &[u8] {
        &self.buf[self.offs[i] as usize..self.end(i)]
    }

    /// Whether one more element of `n` bytes may join this chunk at its
    /// front or back (Redis's `_quicklistNodeAllowInsert`). At the back the
    /// free room at the front counts as used, so a queue's popped garbage
    /// never grows a chunk without bound.
    fn allows(&self, n: usize, fill: i32, front: bool) -> bool {
        if self.len() == 0 {
            return true;
        }
        let used = if front { self.buf.len() - self.lo } else { self.buf.len() };
        let sz = used + n + (self.len() + 1) * ENTRY_OVERHEAD;
        if fill >= 0 {
            self.len() < fill.max(1) as usize && sz <= SIZE_SAFETY_LIMIT
        } else {
            sz <= SIZE_LIMITS[((-fill) as usize - 1).min(4)]
        }
    }

    fn push_back(&mut self, v: &[u8]) {
        if self.len() == 0 {
            self.buf.clear();
            self.lo = 0;
        }
        self.offs.push_back(self.buf.len() as u32);
        self.buf.extend_from_slice(v);
    }

    fn push_front(&mut self, v: &[u8]) {
        if self.lo < v.len() {
            // Grow the front room geometrically, as a Vec grows its back.
            let data = self.buf.len() - self.lo;
            let room = v.len().max(data).max(16);
            let mut nb = Vec::with_capacity(room + data);
            nb.resize(room, 0);
            nb.extend_from_slice(&self.buf[self.lo..]);
            let delta = (room - self.lo) as u32;
            for o in self.offs.iter_mut() {
                *o += delta;
            }
            self.buf = nb;
            self.lo = room;
        }
        self.lo -= v.len();
        self.buf[self.lo..self.lo + v.len()].copy_from_slice(v);
        self.offs.push_front(self.lo as u32);
    }

    fn pop_front(&mut self) {
        self.lo = self.end(0);
        self.offs.pop_front();
    }

    fn pop_back(&mut self) {
        if let Some(o) = self.offs.pop_back() {
            self.buf.truncate(o as usize);
        }
    }

    /// Drops the first `k` elements.
    fn drain_front(&mut self, k: usize) {
        self.lo = if k >= self.len() { self.buf.len() } else { self.offs[k] as usize };
        self.offs.drain(..k.min(self.len()));
    }

    /// Drops the last `k` elements.
    fn drain_back(&mut self, k: usize) {
        let keep = self.len().saturating_sub(k);
        if keep < self.len() {
            self.buf.truncate(self.offs[keep] as usize);
            self.offs.truncate(keep);
        }
    }

    /// Inserts before element `i` (`i < len`).
    fn insert(&mut self, i: usize, v: &[u8]) {
        if i == 0 {
            return self.push_front(v);
        }
        let p = self.offs[i] as usize;
        self.buf.splice(p..p, v.iter().copied());
        self.offs.insert(i, p as u32);
        for o in self.offs.iter_mut().skip(i + 1) {
            *o += v.len() as u32;
        }
    }

    fn remove(&mut self, i: usize) {
        if i == 0 {
            return self.pop_front();
        }
        if i + 1 == self.len() {
            return self.pop_back();
        }
        let (p, q) = (self.offs[i] as usize, self.end(i));
        self.buf.drain(p..q);
        self.offs.remove(i);
        for o in self.offs.iter_mut().skip(i) {
            *o -= (q - p) as u32;
        }
    }

    /// Moves elements `at..` into a new chunk.
    fn split_off(&mut self, at: usize) -> Chunk {
        let mut right = Chunk::default();
        for i in at..self.len() {
            right.push_back(self.get(i));
        }
        self.drain_back(self.len() - at);
        right
    }

    /// Removes elements equal to `v`, at most `budget` of them (0: all),
    /// scanning from the back when `rev`. Returns how many went.
    fn remove_eq(&mut self, v: &[u8], budget: usize, rev: bool) -> usize {
        let n = self.len();
        let mut gone = vec![false; n];
        let mut removed = 0;
        for k in 0..n {
            let i = if rev { n - 1 - k } else { k };
            if self.get(i) == v {
                gone[i] = true;
                removed += 1;
                if removed == budget {
                    break;
                }
            }
        }
        if removed > 0 {
            let mut kept = Chunk::default();
            kept.buf.reserve(self.buf.len() - self.lo);
            for (i, g) in gone.iter().enumerate() {
                if !g {
                    kept.push_back(self.get(i));
                }
            }
            *self = kept;
        }
        removed
    }

    fn heap_size(&self) -> usize {
        self.buf.capacity() + self.offs.capacity() * 4
    }
}

/// A list value.
#[derive(Clone)]
pub struct List {
    chunks: VecDeque<Chunk>,
    len: usize,
    /// `list-max-listpack-size` when the list was created (as Redis keeps
    /// it in the quicklist).
    fill: i32,
}

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

impl Default for List {
    fn default() -> Self {
        List::new(-2)
    }
}

impl List {
    /// An empty list whose chunks follow `fill` (`list-max-listpack-size`).
    pub fn new(fill: i64) -> List {
        List { chunks: VecDeque::new(), len: 0, fill: fill.clamp(-5, 1 << 15) as i32 }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.chunks.iter().map(Chunk::heap_size).sum::<usize>()
    }

    /// Number of chunks (Redis's `ql_nodes`).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    pub fn push(&mut self, end: End, v: &[u8]) {
        match end {
            End::Head => self.push_front(v),
            End::Tail => self.push_back(v),
        }
    }

    pub fn push_back(&mut self, v: &[u8]) {
        let fill = self.fill;
        match self.chunks.back_mut() {
            Some(c) if c.allows(v.len(), fill, false) => c.push_back(v),
            _ => self.chunks.push_back(Chunk::with(v)),
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, v: &[u8]) {
        let fill = self.fill;
        match self.chunks.front_mut() {
            Some(c) if c.allows(v.len(), fill, true) => c.push_front(v),
            _ => self.chunks.push_front(Chunk::with(v)),
        }
        self.len += 1;
    }

    /// Removes the element at `end`, handing its bytes to `f` first.
    /// Returns false when the list is empty.
    pub fn pop_with(&mut self, end: End, f: impl FnOnce(&[u8])) -> bool {
        let Some(c) = (match end {
            End::Head => self.chunks.front_mut(),
            End::Tail => self.chunks.back_mut(),
        }) else {
            return false;
        };
        match end {
            End::Head => {
                f(c.get(0));
                c.pop_front();
            }
            End::Tail => {
                f(c.get(c.len() - 1));
                c.pop_back();
            }
        }
        if c.len() == 0 {
            match end {
                End::Head => self.chunks.pop_front(),
                End::Tail => self.chunks.pop_back(),
            };
        }
        self.len -= 1;
        true
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let mut v = None;
        self.pop_with(end, |b| v = Some(b.to_vec()));
        v
    }

    /// (chunk, position in chunk) of element `i < len`, walking from the
    /// nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut rest = i;
            for (ci, c) in self.chunks.iter().enumerate() {
                if rest < c.len() {
                    return (ci, rest);
                }
                rest -= c.len();
            }
        } else {
            let mut rest = self.len - i;
            for (ci, c) in self.chunks.iter().enumerate().rev() {
                if rest <= c.len() {
                    return (ci, c.len() - rest);
                }
                rest -= c.len();
            }
        }
        unreachable!("index {i} within a list of {} elements", self.len)
    }

    /// Element `i` (0 is the head).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        let (c, j) = self.locate(i);
        Some(self.chunks[c].get(j))
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        if i >= self.len {
            return false;
        }
        let (c, j) = self.locate(i);
        let ch = &mut self.chunks[c];
        ch.remove(j);
        if j == ch.len() {
            ch.push_back(v);
        } else {
            ch.insert(j, v);
        }
        true
    }

    /// Inserts `v` so that it becomes element `i` (`i <= len`).
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        if i == 0 {
            return self.push_front(v);
        }
        if i >= self.len {
            return self.push_back(v);
        }
        let (c, j) = self.locate(i);
        let fill = self.fill;
        if self.chunks[c].allows(v.len(), fill, false) {
            self.chunks[c].insert(j, v);
        } else if j == 0 {
            // Between two chunks: join the previous one if it has room.
            match self.chunks.get_mut(c - 1) {
                Some(p) if p.allows(v.len(), fill, false) => p.push_back(v),
                _ => self.chunks.insert(c, Chunk::with(v)),
            }
        } else {
            let right = self.chunks[c].split_off(j);
            self.chunks.insert(c + 1, right);
            if self.chunks[c].allows(v.len(), fill, false) {
                self.chunks[c].push_back(v);
            } else {
                self.chunks.insert(c + 1, Chunk::with(v));
            }
        }
        self.len += 1;
    }

    /// Removes `front` elements from the head and `back` from the tail.
    pub fn trim(&mut self, mut front: usize, mut back: usize) {
        if front + back >= self.len {
            self.chunks.clear();
            self.len = 0;
            return;
        }
        self.len -= front + back;
        while front > 0 {
            let c = self.chunks.front_mut().expect("elements remain");
            if c.len() <= front {
                front -= c.len();
                self.chunks.pop_front();
            } else {
                c.drain_front(front);
                front = 0;
            }
        }
        while back > 0 {
            let c = self.chunks.back_mut().expect("elements remain");
            if c.len() <= back {
                back -= c.len();
                self.chunks.pop_back();
            } else {
                c.drain_back(back);
                back = 0;
            }
        }
    }

    /// Removes elements equal to `v`: at most `count` from the head when
    /// `count > 0`, from the tail when `count < 0`, all when 0 (LREM).
    pub fn remove_eq(&mut self, v: &[u8], count: i64) -> usize {
        let rev = count < 0;
        let budget = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        let mut removed = 0;
        let n = self.chunks.len();
        for k in 0..n {
            let ci = if rev { n - 1 - k } else { k };
            let left = if budget == 0 { 0 } else { budget - removed };
            removed += self.chunks[ci].remove_eq(v, left, rev);
            if budget != 0 && removed >= budget {
                break;
            }
        }
        if removed > 0 {
            self.chunks.retain(|c| c.len() > 0);
            self.len -= removed;
        }
        removed
    }

    /// All elements, head to tail (double-ended).
    pub fn iter(&self) -> Iter<'_> {
        self.range(0, self.len)
    }

    /// `count` elements from index `start` (clamped to the list).
    pub fn range(&self, start: usize, count: usize) -> Iter<'_> {
        let start = start.min(self.len);
        let count = count.min(self.len - start);
        let front = if count == 0 { (0, 0) } else { self.locate(start) };
        let back = if count == 0 {
            (0, 0)
        } else {
            let (c, j) = self.locate(start + count - 1);
            (c, j + 1)
        };
        Iter { list: self, front, back, left: count }
    }
}

/// Iterator over a list's elements as byte slices.
pub struct Iter<'a> {
    list: &'a List,
    /// Next element from the front: (chunk, position).
    front: (usize, usize),
    /// One past the next element from the back: (chunk, position).
    back: (usize, usize),
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (c, j) = self.front;
        let ch = &self.list.chunks[c];
        let v = ch.get(j);
        self.front = if j + 1 == ch.len() { (c + 1, 0) } else { (c, j + 1) };
        self.left -= 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (mut c, mut j) = self.back;
        if j == 0 {
            c -= 1;
            j = self.list.chunks[c].len();
        }
        j -= 1;
        self.back = (c, j);
        self.left -= 1;
        Some(self.list.chunks[c].get(j))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl PartialEq for List {
    fn eq(&self, o: &List) -> bool {
        self.len == o.len && self.iter().eq(o.iter())
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compares against a plain VecDeque model under a mixed workload with
    /// small chunks, so every split and boundary path runs.
    #[test]
    fn matches_a_model() {
        for fill in [-1i64, 1, 3, 7] {
            let mut l = List::new(fill);
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            let mut rnd = |n: u64| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed % n
            };
            for step in 0..4000 {
                let v =
                    vec![b'a' + rnd(5) as u8; rnd(if step % 97 == 0 { 3000 } else { 9 }) as usize];
                match rnd(10) {
                    0 | 1 => {
                        l.push_front(&v);
                        m.push_front(v);
                    }
                    2 | 3 => {
                        l.push_back(&v);
                        m.push_back(v);
                    }
                    4 => assert_eq!(l.pop(End::Head), m.pop_front()),
                    5 => assert_eq!(l.pop(End::Tail), m.pop_back()),
                    6 => {
                        let i = rnd(m.len() as u64 + 1) as usize;
                        l.insert(i, &v);
                        m.insert(i, v);
                    }
                    7 if !m.is_empty() => {
                        let i = rnd(m.len() as u64) as usize;
                        assert!(l.set(i, &v));
                        m[i] = v;
                    }
                    8 => {
                        let c = rnd(5) as i64 - 2;
                        let mut n = 0;
                        if c >= 0 {
                            let mut k = 0;
                            m.retain(|e| {
                                let hit = *e == v && (c == 0 || k < c);
                                k += i64::from(hit);
                                n += usize::from(hit);
                                !hit
                            });
                        } else {
                            let mut k = 0;
                            let mut r: Vec<_> = m.drain(..).rev().collect();
                            r.retain(|e| {
                                let hit = *e == v && k < -c;
                                k += i64::from(hit);
                                n += usize::from(hit);
                                !hit
                            });
                            m = r.into_iter().rev().collect();
                        }
                        assert_eq!(l.remove_eq(&v, c), n);
                    }
                    _ if m.len() > 40 => {
                        let (a, b) = (rnd(4) as usize, rnd(4) as usize);
                        l.trim(a, b);
                        m.drain(..a);
                        for _ in 0..b {
                            m.pop_back();
                        }
                    }
                    _ => {}
                }
                assert_eq!(l.len(), m.len());
                if step % 50 == 0 {
                    assert!(l.iter().eq(m.iter().map(|v| &v[..])));
                    assert!(l.iter().rev().eq(m.iter().rev().map(|v| &v[..])));
                    assert!(l.chunks.iter().all(|c| c.len() > 0));
                    if !m.is_empty() {
                        let s = rnd(m.len() as u64) as usize;
                        let n = rnd(10) as usize;
                        assert!(l.range(s, n).eq(m.iter().skip(s).take(n).map(|v| &v[..])));
                        assert!(l.range(s, n).rev().eq(m
                            .iter()
                            .skip(s)
                            .take(n)
                            .rev()
                            .map(|v| &v[..])));
                        assert_eq!(l.get(s), Some(&m[s][..]));
                    }
                }
            }
        }
    }

    #[test]
    fn queue_pattern_keeps_chunks_bounded() {
        let mut l = List::new(-2);
        for i in 0..100_000u32 {
            l.push_back(&i.to_le_bytes());
            if i >= 10 {
                l.pop(End::Head);
            }
        }
        assert_eq!(l.len(), 10);
        assert!(l.heap_size() < 64 * 1024, "{}", l.heap_size());
    }
}
