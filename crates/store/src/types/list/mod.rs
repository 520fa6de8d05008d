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

mod chunks;

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

/// Writes `v` at `buf[pos..]` as a varint whose bytes read right to left
/// (the last byte holds the low bits); returns the position after it.
#[inline]
fn put_backlen(buf: &mut [u8], pos: usize, v: usize) -> usize {
    let n = varint_len(v);
    let mut x = v;
    for k in 0..n {
        let more = if k + 1 < n { 0x80 } else { 0 };
        buf[pos + n - 1 - k] = (x as u8 & 0x7f) | more;
        x >>= 7;
    }
    pos + n
}

/// Reads a backwards varint ending at `end`: (value, its first byte).
#[inline]
fn read_backlen(buf: &[u8], end: usize) -> (usize, usize) {
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

/// Encoded size of an element of `n` bytes.
#[inline]
fn entry_size(n: usize) -> usize {
    let head = varint_len(n) + n;
    head + varint_len(head)
}

/// Writes the entry for `v` at `buf[pos..]`; returns the position after it.
#[inline]
fn put_entry(buf: &mut [u8], pos: usize, v: &[u8]) -> usize {
    let mut p = pos;
    let mut x = v.len();
    while x >= 0x80 {
        buf[p] = x as u8 | 0x80;
        x >>= 7;
        p += 1;
    }
    buf[p] = x as u8;
    p += 1;
    buf[p..p + v.len()].copy_from_slice(v);
    p += v.len();
    put_backlen(buf, p, p - pos)
}

/// One node: `n` entries packed in `buf[lo..]`.
#[derive(Clone, Default)]
struct Chunk {
    buf: Vec<u8>,
    /// Bytes before `lo` are free room for pushes at the front.
    lo: u32,
    n: u32,
}

impl Chunk {
    fn with(v: &[u8]) -> Chunk {
        let mut c = Chunk::default();
        c.push_back(v);
        c
    }

    #[inline]
    fn len(&self) -> usize {
        self.n as usize
    }

    #[inline]
    fn begin(&self) -> usize {
        self.lo as usize
    }

    /// The element starting at `p` and the position after it.
    #[inline]
    fn at(&self, p: usize) -> (&[u8], usize) {
        let (len, at) = read_varint(&self.buf, p);
        let end = at + len;
        (&self.buf[at..end], end + varint_len(end - p))
    }

    /// The element ending at `e` and the position where it starts.
    #[inline]
    fn before(&self, e: usize) -> (&[u8], usize) {
        let (size, b) = read_backlen(&self.buf, e);
        let start = b - size;
        let (len, at) = read_varint(&self.buf, start);
        (&self.buf[at..at + len], start)
    }

    /// Byte position of element `i` (`i == len` gives the end), walking
    /// from the nearer end.
    fn pos(&self, i: usize) -> usize {
        let n = self.len();
        if i <= n / 2 {
            let mut p = self.begin();
            for _ in 0..i {
                p = self.at(p).1;
            }
            p
        } else {
            let mut p = self.buf.len();
            for _ in i..n {
                p = self.before(p).1;
            }
            p
        }
    }

    #[inline]
    fn get(&self, i: usize) -> &[u8] {
        self.at(self.pos(i)).0
    }

    /// Whether one more element of `n` bytes may join this chunk at its
    /// front or back (Redis's `_quicklistNodeAllowInsert`). At the back the
    /// free room at the front counts as used, so a queue's popped garbage
    /// never grows a chunk without bound.
    fn allows(&self, n: usize, fill: i32, front: bool) -> bool {
        if self.len() == 0 {
            return true;
        }
        let used = if front { self.buf.len() - self.begin() } else { self.buf.len() };
        let sz = used + entry_size(n);
        sz <= byte_limit(fill) && (fill < 0 || self.len() < fill.max(1) as usize)
    }

    fn push_back(&mut self, v: &[u8]) {
        if self.len() == 0 {
            self.buf.clear();
            self.lo = 0;
        }
        let sz = entry_size(v.len());
        grow_exact(&mut self.buf, sz);
        let p = self.buf.len();
        self.buf.resize(p + sz, 0);
        put_entry(&mut self.buf, p, v);
        self.n += 1;
    }

    /// Pushes at the front; `limit` is the chunk's byte bound
    /// ([`byte_limit`]).
    fn push_front(&mut self, v: &[u8], limit: usize) {
        let sz = entry_size(v.len());
        if self.begin() < sz {
            // Grow the front room geometrically, as a Vec grows its back,
            // but never past what the chunk may hold: a chunk filled by
            // LPUSH would otherwise end with up to half its buffer as
            // room no element can take (100-byte elements cost 181 bytes
            // each, against Redis's 105).
            let data = self.buf.len() - self.begin();
            let room = sz.max(data.max(16).min(limit.saturating_sub(data)));
            let mut nb = Vec::with_capacity(size_class(room + data));
            nb.resize(room, 0);
            nb.extend_from_slice(&self.buf[self.begin()..]);
            self.buf = nb;
            self.lo = room as u32;
        }
        let p = self.begin() - sz;
        put_entry(&mut self.buf, p, v);
        self.lo = p as u32;
        self.n += 1;
    }

    fn pop_front(&mut self) {
        self.lo = self.at(self.begin()).1 as u32;
        self.n -= 1;
    }

    fn pop_back(&mut self) {
        let start = self.before(self.buf.len()).1;
        self.buf.truncate(start);
        self.n -= 1;
    }

    /// Drops the first `k` elements.
    fn drain_front(&mut self, k: usize) {
        let k = k.min(self.len());
        self.lo = self.pos(k) as u32;
        self.n -= k as u32;
    }

    /// Drops the last `k` elements.
    fn drain_back(&mut self, k: usize) {
        let keep = self.len().saturating_sub(k);
        if keep < self.len() {
            let p = self.pos(keep);
            self.buf.truncate(p);
            self.n = keep as u32;
        }
    }

    /// Inserts before element `i` (`i < len`).
    fn insert(&mut self, i: usize, v: &[u8], limit: usize) {
        if i == 0 {
            return self.push_front(v, limit);
        }
        let p = self.pos(i);
        let sz = entry_size(v.len());
        grow_exact(&mut self.buf, sz);
        let mut enc = vec![0u8; sz];
        put_entry(&mut enc, 0, v);
        self.buf.splice(p..p, enc);
        self.n += 1;
    }

    fn remove(&mut self, i: usize) {
        if i == 0 {
            return self.pop_front();
        }
        if i + 1 == self.len() {
            return self.pop_back();
        }
        let p = self.pos(i);
        let q = self.at(p).1;
        self.buf.drain(p..q);
        self.n -= 1;
    }

    /// Moves elements `at..` into a new chunk.
    fn split_off(&mut self, at: usize) -> Chunk {
        let p = self.pos(at);
        let mut buf = Vec::with_capacity(size_class(self.buf.len() - p));
        buf.extend_from_slice(&self.buf[p..]);
        let right = Chunk { buf, lo: 0, n: (self.len() - at) as u32 };
        self.buf.truncate(p);
        self.n = at as u32;
        right
    }

    /// Removes elements equal to `v`, at most `budget` of them (0: all),
    /// scanning from the back when `rev`. Returns how many went.
    fn remove_eq(&mut self, v: &[u8], budget: usize, rev: bool) -> usize {
        let n = self.len();
        let mut gone = vec![false; n];
        let mut removed = 0;
        let (mut fp, mut bp) = (self.begin(), self.buf.len());
        for k in 0..n {
            let (i, e) = if rev {
                let (e, start) = self.before(bp);
                bp = start;
                (n - 1 - k, e)
            } else {
                let (e, next) = self.at(fp);
                fp = next;
                (k, e)
            };
            if e == v {
                gone[i] = true;
                removed += 1;
                if removed == budget {
                    break;
                }
            }
        }
        if removed > 0 {
            let mut kept = Vec::with_capacity(size_class(self.buf.len() - self.begin()));
            let mut p = self.begin();
            for g in gone {
                let next = self.at(p).1;
                if !g {
                    kept.extend_from_slice(&self.buf[p..next]);
                }
                p = next;
            }
            *self = Chunk { buf: kept, lo: 0, n: (n - removed) as u32 };
        }
        removed
    }

    fn heap_size(&self) -> usize {
        self.buf.capacity()
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
            Some(c) if c.allows(v.len(), fill, false) => c.push_back(v),
            _ => self.new_chunk(End::Tail, v),
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, v: &[u8]) {
        let fill = self.fill;
        match self.chunks.front_mut() {
            Some(c) if c.allows(v.len(), fill, true) => c.push_front(v, byte_limit(fill)),
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
        let limit = byte_limit(self.fill);
        let ch = &mut self.chunks[c];
        ch.remove(j);
        if j == ch.len() {
            ch.push_back(v);
        } else {
            ch.insert(j, v, limit);
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
            self.chunks[c].insert(j, v, byte_limit(fill));
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
        if count == 0 {
            return Iter { list: self, front: None, back: None, left: 0 };
        }
        let (c, j) = self.locate(start);
        let ch = &self.chunks[c];
        let front = Some(Cursor { chunk: ch, c, p: ch.pos(j) });
        let (c, j) = self.locate(start + count - 1);
        let ch = &self.chunks[c];
        let back = Some(Cursor { chunk: ch, c, p: ch.pos(j + 1) });
        Iter { list: self, front, back, left: count }
    }
}

/// A place in a list: chunk `c` (held, so that stepping within it
/// indexes nothing) and a byte position in it.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    chunk: &'a Chunk,
    c: usize,
    p: usize,
}

/// Iterator over a list's elements as byte slices.
pub struct Iter<'a> {
    list: &'a List,
    /// Next element from the front (its start).
    front: Option<Cursor<'a>>,
    /// Next element from the back (its end).
    back: Option<Cursor<'a>>,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let cur = self.front.as_mut()?;
        let (v, next) = cur.chunk.at(cur.p);
        self.left -= 1;
        if next == cur.chunk.buf.len() && self.left > 0 {
            // More elements remain, so a next chunk does.
            cur.c += 1;
            cur.chunk = &self.list.chunks[cur.c];
            cur.p = cur.chunk.begin();
        } else {
            cur.p = next;
        }
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
        let cur = self.back.as_mut()?;
        if cur.p == cur.chunk.begin() {
            cur.c -= 1;
            cur.chunk = &self.list.chunks[cur.c];
            cur.p = cur.chunk.buf.len();
        }
        let (v, start) = cur.chunk.before(cur.p);
        cur.p = start;
        self.left -= 1;
        Some(v)
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
    use std::collections::VecDeque;

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
                    // A deque holds two chunks or more; one is inline.
                    assert!(!matches!(&l.chunks, Chunks::Many(d) if d.len() < 2));
                    assert_eq!(m.is_empty(), matches!(l.chunks, Chunks::Empty));
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
        let lens: Vec<usize> = l.iter().map(<[u8]>::len).collect();
        assert_eq!(lens, vec![70_000, 16_383, 200, 127, 1, 0, 126, 128, 16_382, 16_384]);
        let back: Vec<usize> = l.iter().rev().map(<[u8]>::len).collect();
        assert_eq!(back, lens.iter().rev().copied().collect::<Vec<_>>());
        assert_eq!(l.get(2).map(<[u8]>::len), Some(200));
        assert_eq!(l.pop(End::Tail).map(|v| v.len()), Some(16_384));
        assert_eq!(l.pop(End::Head).map(|v| v.len()), Some(70_000));
        assert_eq!(l.len(), 8);
    }

    /// A ten-element list of short strings is one buffer of about the
    /// size Redis's listpack would be, and nothing else.
    #[test]
    fn small_list_is_compact() {
        let mut l = List::new(-2);
        for i in 0..10 {
            l.push_back(format!("value:{i}").as_bytes());
        }
        assert_eq!(l.chunk_count(), 1);
        // The chunk's buffer alone: the chunk is inline in the list.
        assert_eq!(l.heap_size(), 96);
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
