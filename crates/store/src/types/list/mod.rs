//! The list value type: a deque of packed chunks (Redis's quicklist idea).
//!
//! Each chunk keeps its elements back to back in one buffer, listpack
//! style: a varint length, the bytes, and the entry's length again
//! written backwards, so a chunk is walked from either end and an element
//! shorter than 128 bytes costs its bytes plus two, as in Redis. Chunks
//! are bounded by `list-max-listpack-size` as Redis bounds its listpack
//! nodes, which keeps middle inserts and removals cheap, and their buffers
//! are sized to the allocator's size classes. A chunk keeps free room
//! before its first element, so pushes and pops at either end are
//! amortised O(1). Redis 7.0 reports every list as `quicklist`, whatever
//! its size, so chunk boundaries are invisible. A list of one chunk (a
//! short list) holds it inline, with no chunk array ([`chunks`]).
//!
//! Must not depend on any other Sluice crate.

use std::fmt;

mod chunk;
mod chunks;

use std::borrow::Cow;

use chunk::Chunk;
use chunks::Chunks;

/// Redis's `SIZE_SAFETY_LIMIT`: the byte bound of a node when the fill is a
/// count of entries.
const SIZE_SAFETY_LIMIT: usize = 8192;

/// Bytes a chunk may hold for the negative fills -1 … -5.
const SIZE_LIMITS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// The byte bound of a chunk under `fill`: what `Chunk::allows` lets its
/// elements take, and so the most its front room ever needs to reach.
#[inline]
fn byte_limit(fill: i32) -> usize {
    if fill >= 0 {
        SIZE_SAFETY_LIMIT
    } else {
        SIZE_LIMITS[((-fill) as usize - 1).min(4)]
    }
}

/// The allocation jemalloc would hand out for `n` bytes: four size classes
/// per power of two above 64 bytes, 16-byte steps below. Growing a buffer
/// to the class instead of doubling it wastes at most a quarter.
pub fn size_class(n: usize) -> usize {
    let step = (n.next_power_of_two() / 8).max(16);
    n.div_ceil(step) * step
}

/// Makes room for `extra` more bytes, growing to a size class.
#[inline]
pub fn grow_exact(buf: &mut Vec<u8>, extra: usize) {
    if buf.capacity() - buf.len() < extra {
        let want = size_class(buf.len() + extra);
        buf.reserve_exact(want - buf.len());
    }
}

/// Bytes of `v` as a LEB128 varint.
#[inline]
pub(crate) fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends `v` as a LEB128 varint.
#[inline]
pub(crate) fn write_varint(buf: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Reads a varint at `pos`: (value, position after it).
#[inline]
pub(crate) fn read_varint(buf: &[u8], mut pos: usize) -> (usize, usize) {
    let b = buf[pos];
    if b < 0x80 {
        return (usize::from(b), pos + 1);
    }
    let mut v = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[pos];
        pos += 1;
        v |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            return (v, pos);
        }
        shift += 7;
    }
}

/// Reads a backwards varint ending at `end`: (value, its first byte).
#[inline]
pub(crate) fn read_backlen(buf: &[u8], end: usize) -> (usize, usize) {
    let mut p = end - 1;
    let b = buf[p];
    if b < 0x80 {
        return (usize::from(b), p);
    }
    let mut v = usize::from(b & 0x7f);
    let mut shift = 7;
    loop {
        p -= 1;
        let b = buf[p];
        v |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            return (v, p);
        }
        shift += 7;
    }
}

/// A list value.
#[derive(Clone)]
pub struct List {
    /// One chunk inline, or a deque of them ([`chunks`]).
    chunks: Chunks,
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
        List { chunks: Chunks::Empty, len: 0, fill: fill.clamp(-5, 1 << 15) as i32 }
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
        self.chunks.array_size() + self.chunks.iter().map(Chunk::heap_size).sum::<usize>()
    }

    /// `list-max-listpack-size` the list was created with.
    pub fn fill(&self) -> i64 {
        i64::from(self.fill)
    }

    /// Elements per chunk, head to tail (Redis's quicklist nodes).
    pub fn chunk_sizes(&self) -> impl Iterator<Item = usize> + '_ {
        self.chunks.iter().map(Chunk::len)
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
            Some(c) if c.allows(v.len(), byte_limit(fill), fill, false) => c.push_back(v),
            _ => self.new_chunk(End::Tail, v),
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, v: &[u8]) {
        let fill = self.fill;
        match self.chunks.front_mut() {
            Some(c) if c.allows(v.len(), byte_limit(fill), fill, true) => {
                c.push_front(v, byte_limit(fill))
            }
            _ => self.new_chunk(End::Head, v),
        }
        self.len += 1;
    }

    fn new_chunk(&mut self, end: End, v: &[u8]) {
        match end {
            End::Head => self.chunks.push_front(Chunk::with(v)),
            End::Tail => self.chunks.push_back(Chunk::with(v)),
        }
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
                c.with_value(c.begin(), f);
                c.pop_front();
            }
            End::Tail => {
                c.with_value(c.before(c.buf.len()), f);
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
            for ci in (0..self.chunks.len()).rev() {
                let c = &self.chunks[ci];
                if rest <= c.len() {
                    return (ci, c.len() - rest);
                }
                rest -= c.len();
            }
        }
        unreachable!("index {i} within a list of {} elements", self.len)
    }

    /// Element `i` (0 is the head): borrowed when stored whole, built
    /// when coded against its group's first element.
    pub fn get(&self, i: usize) -> Option<Cow<'_, [u8]>> {
        if i >= self.len {
            return None;
        }
        let (c, j) = self.locate(i);
        let ch = &self.chunks[c];
        let p = ch.pos(j);
        let e = ch.entry(p);
        if !e.coded {
            return Some(Cow::Borrowed(ch.stored(&e)));
        }
        let mut num = [0u8; 24];
        let (a, b) = ch.parts(&e, ch.anchor(p), &mut num);
        Some(Cow::Owned([a, b].concat()))
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        if i >= self.len {
            return false;
        }
        let (c, j) = self.locate(i);
        self.chunks[c].set(j, v);
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
        let limit = byte_limit(fill);
        if self.chunks[c].allows(v.len(), limit, fill, false) {
            self.chunks[c].insert(j, v, limit);
        } else if j == 0 {
            // Between two chunks: join the previous one if it has room.
            match self.chunks.get_mut(c - 1) {
                Some(p) if p.allows(v.len(), limit, fill, false) => p.push_back(v),
                _ => self.chunks.insert(c, Chunk::with(v)),
            }
        } else {
            let right = self.chunks[c].split_off(j);
            self.chunks.insert(c + 1, right);
            if self.chunks[c].allows(v.len(), limit, fill, false) {
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
        Iter {
            list: self,
            front: None,
            back: None,
            start,
            end: start + count,
            left: count,
            rev: false,
            small: [0; chunk::SMALL],
            tmp: Vec::new(),
        }
    }

    /// Calls `f` with each element, head to tail.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        let mut it = self.iter();
        while let Some(v) = it.next() {
            f(v);
        }
    }

    /// Each element as an owned copy, head to tail (for writers that
    /// want an `Iterator`; a walk lends its elements instead).
    pub fn iter_owned(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        let mut it = self.iter();
        std::iter::from_fn(move || it.next().map(<[u8]>::to_vec))
    }

    /// All elements, owned (tests, conversions).
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len);
        self.for_each(|v| out.push(v.to_vec()));
        out
    }
}

/// [`Cursor::anchor`] when the group's literal is not known.
const NO_ANCHOR: usize = usize::MAX;

/// A place in a list: chunk `c` (held, so that stepping within it
/// indexes nothing), a byte position in it, and the anchor of the group
/// being walked when known.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    chunk: &'a Chunk,
    c: usize,
    p: usize,
    /// Position of the group's literal, [`NO_ANCHOR`] when not known (a
    /// plain word: a walk over literals only sets it per element).
    anchor: usize,
}

/// A walk over a list's elements, from either end. It lends each
/// element (`next`, `next_back`) rather than being an `Iterator`: an
/// element coded against its group's first one is built in the walk's
/// own buffer.
pub struct Iter<'a> {
    list: &'a List,
    /// Next element from the front (its start); found at the first step
    /// from the front, so that a walk from one end never looks for the
    /// other (LRANGE 0 99 walked 100 entries to find where it ends).
    front: Option<Cursor<'a>>,
    /// Next element from the back (its end), found likewise.
    back: Option<Cursor<'a>>,
    /// The range's first index and the one past its last.
    start: usize,
    end: usize,
    left: usize,
    /// `next` walks from the back (after [`Iter::rev`]).
    rev: bool,
    /// Where a coded element is built: `small` when it fits.
    small: [u8; chunk::SMALL],
    tmp: Vec<u8>,
}

impl<'a> Iter<'a> {
    /// Elements not yet walked.
    pub fn len(&self) -> usize {
        self.left
    }

    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// The same walk, tail first.
    #[must_use]
    pub fn rev(mut self) -> Iter<'a> {
        self.rev = !self.rev;
        self
    }

    /// The next element (from the tail after [`Iter::rev`]).
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Option<&[u8]> {
        if self.rev {
            self.step_back()
        } else {
            self.step()
        }
    }

    /// The next element from the other end.
    #[inline]
    pub fn next_back(&mut self) -> Option<&[u8]> {
        if self.rev {
            self.step()
        } else {
            self.step_back()
        }
    }

    /// Calls `f` with each element left.
    pub fn for_each(mut self, mut f: impl FnMut(&[u8])) {
        while let Some(v) = self.next() {
            f(v);
        }
    }

    /// Index (from where the walk started) of the first element `f`
    /// accepts.
    pub fn position(mut self, mut f: impl FnMut(&[u8]) -> bool) -> Option<usize> {
        let mut i = 0;
        while let Some(v) = self.next() {
            if f(v) {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    #[inline]
    fn step(&mut self) -> Option<&[u8]> {
        if self.left == 0 {
            return None;
        }
        let list = self.list;
        let start = self.start;
        let cur = self.front.get_or_insert_with(|| {
            let (c, j) = list.locate(start);
            let ch = &list.chunks[c];
            Cursor { chunk: ch, c, p: ch.pos(j), anchor: NO_ANCHOR }
        });
        let ch = cur.chunk;
        let p = cur.p;
        let e = ch.entry(p);
        let lit = if e.coded {
            if cur.anchor == NO_ANCHOR {
                cur.anchor = ch.anchor(p);
            }
            Some(ch.lit_range(cur.anchor))
        } else {
            cur.anchor = p;
            None
        };
        self.left -= 1;
        if e.end == ch.buf.len() && self.left > 0 {
            // More elements remain, so a next chunk does.
            cur.c += 1;
            cur.chunk = &self.list.chunks[cur.c];
            cur.p = cur.chunk.begin();
            cur.anchor = NO_ANCHOR;
        } else {
            cur.p = e.end;
        }
        Some(match lit {
            None => ch.stored(&e),
            Some(lit) => ch.build(&e, lit, &mut self.small, &mut self.tmp),
        })
    }

    #[inline]
    fn step_back(&mut self) -> Option<&[u8]> {
        if self.left == 0 {
            return None;
        }
        let list = self.list;
        let end = self.end;
        let cur = self.back.get_or_insert_with(|| {
            let (c, j) = list.locate(end - 1);
            let ch = &list.chunks[c];
            Cursor { chunk: ch, c, p: ch.pos(j + 1), anchor: NO_ANCHOR }
        });
        if cur.p == cur.chunk.begin() {
            cur.c -= 1;
            cur.chunk = &self.list.chunks[cur.c];
            cur.p = cur.chunk.buf.len();
            cur.anchor = NO_ANCHOR;
        }
        let ch = cur.chunk;
        let start = ch.before(cur.p);
        cur.p = start;
        self.left -= 1;
        let e = ch.entry(start);
        if !e.coded {
            // Entries before it belong to an earlier group.
            cur.anchor = NO_ANCHOR;
            return Some(ch.stored(&e));
        }
        if cur.anchor == NO_ANCHOR {
            cur.anchor = ch.anchor(start);
        }
        let lit = ch.lit_range(cur.anchor);
        Some(ch.build(&e, lit, &mut self.small, &mut self.tmp))
    }
}

impl PartialEq for List {
    fn eq(&self, o: &List) -> bool {
        if self.len != o.len {
            return false;
        }
        let (mut a, mut b) = (self.iter(), o.iter());
        while let (Some(x), Some(y)) = (a.next(), b.next()) {
            if x != y {
                return false;
            }
        }
        true
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut l = f.debug_list();
        self.for_each(|v| {
            l.entry(&String::from_utf8_lossy(v));
        });
        l.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// What a walk lends, owned.
    fn fwd(mut it: Iter<'_>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(v) = it.next() {
            out.push(v.to_vec());
        }
        out
    }

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
                    assert_eq!(fwd(l.iter()), Vec::from(m.clone()));
                    assert_eq!(fwd(l.iter().rev()), m.iter().rev().cloned().collect::<Vec<_>>());
                    assert!(l.chunks.iter().all(|c| c.len() > 0));
                    // A deque holds two chunks or more; one is inline.
                    assert!(!matches!(&l.chunks, Chunks::Many(d) if d.len() < 2));
                    assert_eq!(m.is_empty(), matches!(l.chunks, Chunks::Empty));
                    if !m.is_empty() {
                        let s = rnd(m.len() as u64) as usize;
                        let n = rnd(10) as usize;
                        let want: Vec<Vec<u8>> = m.iter().skip(s).take(n).cloned().collect();
                        assert_eq!(fwd(l.range(s, n)), want);
                        assert_eq!(
                            fwd(l.range(s, n).rev()),
                            want.into_iter().rev().collect::<Vec<_>>()
                        );
                        assert_eq!(l.get(s).as_deref(), Some(&m[s][..]));
                    }
                }
            }
        }
    }

    /// An element the property test pushes: prefix-sharing, binary, long
    /// and number-like bytes, so every header form, group boundary and
    /// anchor case runs.
    fn element(rnd: &mut impl FnMut(u64) -> u64) -> Vec<u8> {
        const STEMS: [&[u8]; 8] =
            [b"value:", b"", b"007", b"+1", b"-0", b" 1", b"12345678901234567890", b"\xff\x00\xc0"];
        let stem = STEMS[rnd(STEMS.len() as u64) as usize];
        let mut v = stem.to_vec();
        match rnd(12) {
            0 => v.extend((0..rnd(300)).map(|_| rnd(256) as u8)),
            1 if rnd(20) == 0 => v.extend(std::iter::repeat_n(b'z', 8190 + rnd(20) as usize)),
            2 => v.truncate(rnd(v.len() as u64 + 1) as usize),
            3 => v.extend(std::iter::repeat_n(0xff, rnd(9) as usize)),
            _ => v.extend_from_slice(rnd(2000).to_string().as_bytes()),
        }
        v
    }

    /// The chunk coding against a `VecDeque` model: random pushes, pops,
    /// inserts, sets, removals, trims and ranges over elements that share
    /// prefixes or not, at fills that split chunks often and rarely.
    #[test]
    fn coded_chunks_match_a_model() {
        for (round, fill) in
            [(0u64, -2i64), (1, 5), (2, 1), (3, -1), (4, 16), (5, -5), (6, 128)].into_iter()
        {
            let mut l = List::new(fill);
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ round.wrapping_mul(0x1234_5678_9abc_def1);
            let mut rnd = |n: u64| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed % n.max(1)
            };
            for step in 0..6000 {
                let v = element(&mut rnd);
                let len = m.len() as u64;
                match rnd(14) {
                    0..=2 => {
                        l.push_back(&v);
                        m.push_back(v);
                    }
                    3 | 4 => {
                        l.push_front(&v);
                        m.push_front(v);
                    }
                    5 => {
                        let mut got = None;
                        l.pop_with(End::Head, |b| got = Some(b.to_vec()));
                        assert_eq!(got, m.pop_front());
                    }
                    6 => assert_eq!(l.pop(End::Tail), m.pop_back()),
                    7 => {
                        let i = rnd(len + 1) as usize;
                        l.insert(i, &v);
                        m.insert(i, v);
                    }
                    8 if len > 0 => {
                        let i = rnd(len) as usize;
                        assert!(l.set(i, &v));
                        m[i] = v;
                    }
                    9 if len > 0 => {
                        // LREM of an element present, from either end.
                        let x = m[rnd(len) as usize].clone();
                        let c = rnd(5) as i64 - 2;
                        let mut idx: Vec<usize> = (0..m.len()).filter(|&i| m[i] == x).collect();
                        if c < 0 {
                            idx.reverse();
                        }
                        if c != 0 {
                            idx.truncate(c.unsigned_abs() as usize);
                        }
                        idx.sort_unstable();
                        for &i in idx.iter().rev() {
                            m.remove(i);
                        }
                        assert_eq!(l.remove_eq(&x, c), idx.len());
                    }
                    10 if len > 4 => {
                        let (a, b) = (rnd(len / 3) as usize, rnd(len / 3) as usize);
                        l.trim(a, b);
                        m.drain(..a);
                        m.truncate(m.len() - b);
                    }
                    11 if len > 0 => {
                        let i = rnd(len) as usize;
                        assert_eq!(l.get(i).as_deref(), Some(&m[i][..]), "step {step}");
                    }
                    12 if len > 0 => {
                        let s = rnd(len) as usize;
                        let n = rnd(40) as usize;
                        let want: Vec<Vec<u8>> = m.iter().skip(s).take(n).cloned().collect();
                        assert_eq!(fwd(l.range(s, n)), want, "step {step}");
                        let back: Vec<Vec<u8>> = want.into_iter().rev().collect();
                        assert_eq!(fwd(l.range(s, n).rev()), back, "step {step}");
                        // Both ends of one walk meet in the middle.
                        let mut it = l.range(s, n);
                        let mut got = VecDeque::new();
                        let mut k = 0;
                        loop {
                            let v = if k % 2 == 0 {
                                it.next().map(<[u8]>::to_vec)
                            } else {
                                it.next_back().map(<[u8]>::to_vec)
                            };
                            match v {
                                Some(v) if k % 2 == 0 => got.push_back((k, v)),
                                Some(v) => got.push_back((k, v)),
                                None => break,
                            }
                            k += 1;
                        }
                        assert_eq!(got.len(), n.min(m.len() - s));
                    }
                    _ => {}
                }
                assert_eq!(l.len(), m.len());
                if step % 97 == 0 {
                    assert_eq!(l.to_vecs(), Vec::from(m.clone()), "fill {fill} step {step}");
                    assert!(l.chunks.iter().all(|c| c.len() > 0));
                }
            }
            assert_eq!(l.to_vecs(), Vec::from(m.clone()));
            assert_eq!(fwd(l.iter().rev()), m.iter().rev().cloned().collect::<Vec<_>>());
        }
    }

    /// A queue (push at the tail, pop at the head) walks its head's
    /// group past `lo`; a push at the front then re-codes that group.
    #[test]
    fn front_push_after_pops_recodes_the_head_group() {
        let mut l = List::new(-2);
        for i in 0..20 {
            l.push_back(format!("value:{i}").as_bytes());
        }
        for _ in 0..3 {
            l.pop(End::Head);
        }
        l.push_front(b"new");
        l.push_front(b"value:x");
        let mut want: Vec<Vec<u8>> = vec![b"value:x".to_vec(), b"new".to_vec()];
        want.extend((3..20).map(|i| format!("value:{i}").into_bytes()));
        assert_eq!(l.to_vecs(), want);
        assert_eq!(fwd(l.iter().rev()), want.iter().rev().cloned().collect::<Vec<_>>());
    }

    #[test]
    fn size_classes_follow_jemalloc() {
        let got: Vec<usize> = [1, 16, 17, 40, 100, 129, 200, 257, 8192, 8193]
            .iter()
            .map(|&n| size_class(n))
            .collect();
        assert_eq!(got, vec![16, 16, 32, 48, 112, 160, 224, 320, 8192, 10240]);
    }

    /// Entries of every length class (1-, 2- and 3-byte varints) survive
    /// pushes, pops and iteration from both ends.
    #[test]
    fn long_entries_round_trip() {
        let mut l = List::new(-5);
        let sizes = [0usize, 1, 126, 127, 128, 200, 16_382, 16_383, 16_384, 70_000];
        for (k, &n) in sizes.iter().enumerate() {
            let v = vec![b'a' + k as u8; n];
            if k % 2 == 0 {
                l.push_back(&v);
            } else {
                l.push_front(&v);
            }
        }
        let lens: Vec<usize> = fwd(l.iter()).iter().map(Vec::len).collect();
        assert_eq!(lens, vec![70_000, 16_383, 200, 127, 1, 0, 126, 128, 16_382, 16_384]);
        let back: Vec<usize> = fwd(l.iter().rev()).iter().map(Vec::len).collect();
        assert_eq!(back, lens.iter().rev().copied().collect::<Vec<_>>());
        assert_eq!(l.get(2).map(|v| v.len()), Some(200));
        assert_eq!(l.pop(End::Tail).map(|v| v.len()), Some(16_384));
        assert_eq!(l.pop(End::Head).map(|v| v.len()), Some(70_000));
        assert_eq!(l.len(), 8);
    }

    /// A ten-element list of short strings is one buffer, each element
    /// after the first coded against it (`value:1` is 3 bytes after
    /// `value:0`), and nothing else: 9 + 9 × 3 bytes in the 48-byte class
    /// (Redis's listpack: 106 bytes).
    #[test]
    fn small_list_is_compact() {
        let mut l = List::new(-2);
        for i in 0..10 {
            l.push_back(format!("value:{i}").as_bytes());
        }
        assert_eq!(l.chunk_count(), 1);
        // The chunk's buffer alone: the chunk is inline in the list.
        assert_eq!(l.heap_size(), 48);
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

    /// Regression: a chunk filled at the front doubled its front room
    /// past the chunk's byte bound, so an LPUSHed list of 100-byte
    /// elements kept up to half of every 8 KB chunk empty (181 bytes an
    /// element). Now only the last size class's rounding is left.
    #[test]
    fn lpush_chunks_do_not_keep_room_past_their_bound() {
        for fill in [-1, -2, -5, 128] {
            let mut l = List::new(fill);
            for _ in 0..20_000 {
                l.push_front(&[b'x'; 100]);
            }
            let per = l.heap_size() as f64 / l.len() as f64;
            // 102 bytes of entry, a few percent of chunk slack.
            assert!(per < 112.0, "fill {fill}: {per} bytes per element");
        }
    }
}
