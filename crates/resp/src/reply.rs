//! The reply encoder.
//!
//! [`ReplyBuf`] is a connection's pending output: a queue of fixed-size
//! chunks of encoded reply bytes. Deep pipelines therefore cost the server
//! about the size of their replies, never a doubling vector or an object
//! per reply. Handlers write through the typed methods; the connection
//! drains chunks to the socket with vectored writes.
//!
//! A buffer has a limit (a client's `client-output-buffer-limit`): the
//! first chunk that would start past it marks the buffer *over*, and from
//! then on the bytes written are counted but not kept, so a command whose
//! reply grows with a number in the request (SRANDMEMBER with a huge
//! negative count) costs at most the limit; it checks [`ReplyBuf::is_over`]
//! to stop early, and the connection closes the client, as Redis does
//! from `_addReplyProtoToList`. The check is made once per chunk, never
//! per reply.

use std::collections::VecDeque;
use std::io::IoSlice;

use crate::num::fmt_double;

/// Size of one output chunk. Replies larger than this get a chunk of their own.
pub const CHUNK: usize = 16 * 1024;

/// The allocation jemalloc hands out for a chunk of `n` bytes: a
/// [`CHUNK`] or smaller is taken as is (`CHUNK` is a size class), a
/// larger one is rounded up to its class (four per power of two).
#[inline]
fn alloc_class(n: usize) -> usize {
    if n <= CHUNK {
        return n;
    }
    let step = n.next_power_of_two() >> 3;
    (n + step - 1) & !(step - 1)
}

/// Protocol version of a connection, switched by `HELLO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Proto {
    #[default]
    Resp2,
    Resp3,
}

/// A position in a [`ReplyBuf`], to undo a partial reply.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    chunks: usize,
    tail_len: usize,
    total: usize,
}

/// A buffer's limit when none is set: bounded all the same, so that no
/// request number can size the server's memory (2 GiB; Redis's normal
/// clients default to no limit at all).
pub const DEFAULT_LIMIT: usize = 2 << 30;

/// Encoded replies waiting to be written.
#[derive(Debug)]
pub struct ReplyBuf {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes of the front chunk already written to the socket.
    head_sent: usize,
    /// Unwritten bytes in all chunks.
    total: usize,
    pub proto: Proto,
    /// Unwritten bytes past which no new chunk is kept.
    limit: usize,
    /// Went past `limit`: what is written is counted, not kept.
    over: bool,
    /// Where writes go once over (reused, never grown past one write).
    sink: Vec<u8>,
}

impl Default for ReplyBuf {
    fn default() -> Self {
        ReplyBuf {
            chunks: VecDeque::new(),
            head_sent: 0,
            total: 0,
            proto: Proto::default(),
            limit: DEFAULT_LIMIT,
            over: false,
            sink: Vec::new(),
        }
    }
}

pub(crate) mod itoa_buf {
    /// Two decimal digits per step.
    pub(super) const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
                                2021222324252627282930313233343536373839\
                                4041424344454647484950515253545556575859\
                                6061626364656667686970717273747576777879\
                                8081828384858687888990919293949596979899";

    /// How many decimal digits `u` has (1 for 0). Small values, the
    /// usual counts and counters, take one or two comparisons.
    #[inline]
    pub(super) fn decimal_len(u: u64) -> usize {
        if u < 10 {
            1
        } else if u < 100 {
            2
        } else if u < 1000 {
            3
        } else {
            u.ilog10() as usize + 1
        }
    }

    /// A tiny stack formatter for integers (no allocation).
    #[derive(Default)]
    pub struct Buf([u8; 32]);
    impl Buf {
        pub fn new() -> Self {
            Buf([0; 32])
        }

        /// Writes `v` in decimal so that it ends at `end`; returns where
        /// it starts.
        #[inline]
        fn digits_to(&mut self, v: i64, end: usize) -> usize {
            let mut n = v.unsigned_abs();
            let mut i = end;
            while n >= 100 {
                let d = (n % 100) as usize * 2;
                n /= 100;
                i -= 2;
                self.0[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
            }
            if n >= 10 {
                let d = n as usize * 2;
                i -= 2;
                self.0[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
            } else {
                i -= 1;
                self.0[i] = b'0' + n as u8;
            }
            if v < 0 {
                i -= 1;
                self.0[i] = b'-';
            }
            i
        }

        pub fn format(&mut self, v: i64) -> &[u8] {
            let i = self.digits_to(v, 32);
            &self.0[i..]
        }

        /// `<prefix><v>\r\n`, a whole reply line.
        #[inline]
        pub fn line(&mut self, prefix: u8, v: i64) -> &[u8] {
            self.0[30] = b'\r';
            self.0[31] = b'\n';
            let i = self.digits_to(v, 30) - 1;
            self.0[i] = prefix;
            &self.0[i..]
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn formats_like_display() {
            let mut vals = vec![i64::MIN, i64::MAX, i64::MIN + 1, -1, 0, 1];
            let mut p: i64 = 1;
            for _ in 0..19 {
                vals.extend([p - 1, p, p + 1, -p, -(p - 1), 5 * p]);
                p = p.saturating_mul(10);
            }
            for v in vals {
                assert_eq!(super::Buf::new().format(v), v.to_string().as_bytes());
                assert_eq!(super::Buf::new().line(b':', v), format!(":{v}\r\n").as_bytes());
            }
        }
    }
}

impl ReplyBuf {
    pub fn new() -> Self {
        Self::default()
    }

    /// Unwritten bytes.
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Bytes the buffer holds allocated: its chunks as the allocator
    /// sizes them (a large reply's exact-size chunk is rounded up to its
    /// size class, up to a quarter more, which `used_memory` sees and
    /// `maxmemory-clients` must see too) and the queue that holds them.
    #[inline]
    pub fn allocated(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Vec<u8>>()
            + self.chunks.iter().map(|c| alloc_class(c.capacity())).sum::<usize>()
    }

    pub fn is_resp3(&self) -> bool {
        self.proto == Proto::Resp3
    }

    /// Sets the limit in bytes (0: [`DEFAULT_LIMIT`]).
    pub fn set_limit(&mut self, bytes: usize) {
        self.limit = if bytes == 0 { DEFAULT_LIMIT } else { bytes };
    }

    /// Whether the buffer went past its limit: the reply being built is
    /// lost and the client is to be closed.
    #[inline]
    pub fn is_over(&self) -> bool {
        self.over
    }

    #[inline]
    fn tail(&mut self, need: usize) -> &mut Vec<u8> {
        // The back chunk is found once when it has room (a reply's usual
        // case): finding it again was some 10 instructions a reply.
        if let Some(c) = self.chunks.back_mut() {
            if c.capacity() - c.len() >= need {
                let c: *mut Vec<u8> = c;
                // SAFETY: `c` comes from `back_mut`'s borrow of
                // `self.chunks`, which this return extends to the borrow
                // of `self` the caller holds; nothing else touches `self`
                // on this path (the borrow checker refuses the direct
                // return only because the borrow continues on the other).
                return unsafe { &mut *c };
            }
        }
        self.new_tail(need)
    }

    /// The back chunk has no room for `need` bytes: a new one, or past the
    /// limit the scratch chunk.
    #[inline(never)]
    fn new_tail(&mut self, need: usize) -> &mut Vec<u8> {
        if self.total > self.limit {
            return self.spill(need);
        }
        self.chunks.push_back(Vec::with_capacity(CHUNK.max(need)));
        self.chunks.back_mut().expect("a chunk was just ensured")
    }

    /// Past the limit: a scratch chunk to write into and forget.
    #[cold]
    fn spill(&mut self, need: usize) -> &mut Vec<u8> {
        self.over = true;
        self.sink.clear();
        self.sink.reserve(need);
        &mut self.sink
    }

    /// Appends encoded bytes as they are.
    #[inline]
    pub fn raw(&mut self, b: &[u8]) {
        self.total += b.len();
        if b.len() > CHUNK {
            if self.total > self.limit {
                self.over = true;
                return;
            }
            // Large payloads: fill the current chunk's room first so that
            // small replies around it stay packed, then one exact chunk.
            self.chunks.push_back(b.to_vec());
            return;
        }
        self.tail(b.len()).extend_from_slice(b);
    }

    #[inline]
    fn raw3(&mut self, a: &[u8], b: &[u8], c: &[u8]) {
        let n = a.len() + b.len() + c.len();
        if n > CHUNK {
            self.raw(a);
            self.raw(b);
            self.raw(c);
            return;
        }
        self.total += n;
        let t = self.tail(n);
        t.extend_from_slice(a);
        t.extend_from_slice(b);
        t.extend_from_slice(c);
    }

    /// Remembers the current end, to [`truncate`](Self::truncate) to later.
    pub fn mark(&self) -> Mark {
        Mark {
            chunks: self.chunks.len(),
            tail_len: self.chunks.back().map_or(0, Vec::len),
            total: self.total,
        }
    }

    /// Drops everything written after `m`. Must not be called after bytes
    /// past `m` were drained.
    pub fn truncate(&mut self, m: Mark) {
        self.chunks.truncate(m.chunks.max(1).min(self.chunks.len()));
        if m.chunks == 0 {
            self.chunks.clear();
            self.head_sent = 0;
        } else if let Some(t) = self.chunks.back_mut() {
            t.truncate(m.tail_len);
        }
        self.total = m.total;
    }

    /// Removes and returns everything written after `m` (to put
    /// something before it). Same precondition as [`truncate`](Self::truncate).
    pub fn split_off(&mut self, m: Mark) -> Vec<u8> {
        // Sized by the bytes kept: past the limit `total` counts more.
        let mut v = Vec::with_capacity((self.total - m.total).min(self.kept()));
        if m.chunks == 0 {
            for (i, c) in self.chunks.iter().enumerate() {
                v.extend_from_slice(if i == 0 { &c[self.head_sent..] } else { &c[..] });
            }
        } else {
            v.extend_from_slice(&self.chunks[m.chunks - 1][m.tail_len..]);
            for c in self.chunks.iter().skip(m.chunks) {
                v.extend_from_slice(c);
            }
        }
        self.truncate(m);
        v
    }

    /// Unwritten bytes the chunks hold (`total` but for what went past
    /// the limit).
    fn kept(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum::<usize>() - self.head_sent
    }

    /// Bytes written since `m`.
    pub fn since(&self, m: Mark) -> usize {
        self.total - m.total
    }

    /// An empty buffer for a reply built aside (its length goes first),
    /// with this one's protocol and the room left under its limit.
    pub fn side(&self) -> ReplyBuf {
        ReplyBuf {
            proto: self.proto,
            limit: self.limit.saturating_sub(self.total).max(1),
            ..ReplyBuf::default()
        }
    }

    /// Moves all of `other`'s bytes to the end of this buffer (an `other`
    /// that went past its limit puts this one over too).
    pub fn append(&mut self, other: &mut ReplyBuf) {
        self.over |= other.over;
        while let Some(mut c) = other.chunks.pop_front() {
            if other.head_sent > 0 {
                c.drain(..other.head_sent);
                other.head_sent = 0;
            }
            if c.len() <= CHUNK / 4 {
                self.raw(&c);
            } else {
                self.total += c.len();
                if self.total > self.limit {
                    self.over = true;
                } else {
                    self.chunks.push_back(c);
                }
            }
        }
        other.total = 0;
    }

    /// The unwritten bytes when they are all in one chunk (the replies
    /// of a request or of a short pipeline): one slice to write.
    #[inline]
    pub fn single(&self) -> Option<&[u8]> {
        match self.chunks.len() {
            1 => self.chunks.front().map(|c| &c[self.head_sent..]),
            _ => None,
        }
    }

    /// Fills `out` with slices of unwritten bytes; returns how many.
    pub fn io_slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (i, c) in self.chunks.iter().enumerate() {
            if n == out.len() {
                break;
            }
            let s = if i == 0 { &c[self.head_sent..] } else { &c[..] };
            if s.is_empty() {
                continue;
            }
            out[n] = IoSlice::new(s);
            n += 1;
        }
        n
    }

    /// Marks `n` bytes as written to the socket.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        if n == self.total && self.chunks.len() == 1 {
            // All of one chunk written (a request's or a batch's replies,
            // the common case): it stays, emptied, as the general path
            // keeps it, without the queue's pop and push.
            if let Some(c) = self.chunks.front_mut().filter(|c| c.capacity() == CHUNK) {
                c.clear();
                self.total = 0;
                self.head_sent = 0;
                return;
            }
        }
        self.consume_chunks(n);
    }

    /// [`consume`](Self::consume) over several chunks, or a part of one.
    #[inline(never)]
    fn consume_chunks(&mut self, mut n: usize) {
        self.total -= n;
        while n > 0 {
            let front = self.chunks.front().expect("consume beyond buffered bytes");
            let left = front.len() - self.head_sent;
            if n >= left {
                n -= left;
                let c = self.chunks.pop_front().expect("front exists");
                self.head_sent = 0;
                // Keep one emptied chunk to avoid reallocating on the next batch.
                if self.chunks.is_empty() && c.capacity() == CHUNK {
                    let mut c = c;
                    c.clear();
                    self.chunks.push_back(c);
                }
            } else {
                self.head_sent += n;
                n = 0;
            }
        }
        if self.total == 0 && self.chunks.len() == 1 {
            self.chunks[0].clear();
            self.head_sent = 0;
        }
    }

    /// Copies out all unwritten bytes (tests and in-process harnesses).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.total.min(self.kept()));
        for (i, c) in self.chunks.iter().enumerate() {
            v.extend_from_slice(if i == 0 { &c[self.head_sent..] } else { &c[..] });
        }
        v
    }

    /// Drops everything but the first chunk's allocation: for a buffer
    /// reused for many small replies (a script's `redis.call`).
    pub fn reset(&mut self) {
        self.chunks.truncate(1);
        match self.chunks.front_mut() {
            // A large reply's exact chunk is not kept.
            Some(c) if c.capacity() > CHUNK => self.chunks.clear(),
            Some(c) => c.clear(),
            None => {}
        }
        self.head_sent = 0;
        self.total = 0;
        self.over = false;
        self.sink = Vec::new();
    }

    /// The unwritten bytes, when they are in one chunk.
    pub fn contiguous(&self) -> Option<&[u8]> {
        match self.chunks.len() {
            0 => Some(&[]),
            1 => Some(&self.chunks[0][self.head_sent..]),
            _ => None,
        }
    }

    /// Drops everything.
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.head_sent = 0;
        self.total = 0;
        self.over = false;
        self.sink = Vec::new();
    }

    // ---- typed replies -------------------------------------------------

    /// `+s\r\n`
    #[inline]
    pub fn simple(&mut self, s: &[u8]) {
        self.raw3(b"+", s, b"\r\n");
    }

    #[inline]
    pub fn ok(&mut self) {
        self.raw(b"+OK\r\n");
    }

    /// `-msg\r\n`; CR and LF inside `msg` become spaces, as Redis does.
    pub fn error(&mut self, msg: &[u8]) {
        if msg.iter().any(|&c| c == b'\r' || c == b'\n') {
            let clean: Vec<u8> =
                msg.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect();
            self.raw3(b"-", &clean, b"\r\n");
        } else {
            self.raw3(b"-", msg, b"\r\n");
        }
    }

    /// `<prefix><v>\r\n`, written in place: one room check, the digits
    /// two at a time from their end. Through a stack buffer and `raw`
    /// (zeroing the buffer, bounds checks, `extend_from_slice`) an
    /// INCR's reply was some 100 instructions (callgrind, P=64).
    #[inline]
    fn prefixed_int(&mut self, prefix: u8, v: i64) {
        let neg = usize::from(v < 0);
        let mut u = v.unsigned_abs();
        let digits = itoa_buf::decimal_len(u);
        let n = 1 + neg + digits + 2;
        self.total += n;
        let t = self.tail(n);
        let at = t.len();
        // SAFETY: `tail(n)` left room for `n` more bytes; the prefix, the
        // sign, `digits` digits (written backwards from `end`, which is
        // `digits` past their start: `decimal_len` counts exactly the
        // digits of `u`) and the line end are those `n` bytes, all
        // written before the length is set. Pair reads stay inside
        // `PAIRS` (an index below 100, times two, plus one).
        unsafe {
            let p = t.as_mut_ptr().add(at);
            *p = prefix;
            *p.add(1) = b'-';
            let mut end = p.add(1 + neg + digits);
            end.cast::<[u8; 2]>().write_unaligned(*b"\r\n");
            let pairs = itoa_buf::PAIRS.as_ptr();
            while u >= 100 {
                let d = (u % 100) as usize * 2;
                u /= 100;
                end = end.sub(2);
                end.cast::<[u8; 2]>().write_unaligned(pairs.add(d).cast::<[u8; 2]>().read());
            }
            if u >= 10 {
                end = end.sub(2);
                let d = u as usize * 2;
                end.cast::<[u8; 2]>().write_unaligned(pairs.add(d).cast::<[u8; 2]>().read());
            } else {
                *end.sub(1) = b'0' + u as u8;
            }
            t.set_len(at + n);
        }
    }

    /// `:v\r\n`
    #[inline]
    pub fn int(&mut self, v: i64) {
        // 0 and 1 (HSET's, SADD's, EXISTS's usual replies) as constants
        // copied in line: through `prefixed_int`, a call, HSET at P=16 ran
        // some 30 instructions a request more.
        match v {
            0 => self.raw(b":0\r\n"),
            1 => self.raw(b":1\r\n"),
            _ => self.prefixed_int(b':', v),
        }
    }

    /// `$len\r\nbytes\r\n`
    #[inline]
    pub fn bulk(&mut self, b: &[u8]) {
        if b.len() < 100 {
            self.small_bulk(b);
        } else {
            self.long_bulk(b);
        }
    }

    /// A bulk string under 100 bytes (a GET's usual reply), written in
    /// place: one room check, the one- or two-digit length by hand, the
    /// payload as word copies. Four `extend_from_slice` calls and an
    /// integer formatting were 166 of a pipelined GET's 1,700
    /// instructions (callgrind, `bench/instructions --tests get
    /// --pipelines 64`).
    #[inline]
    fn small_bulk(&mut self, b: &[u8]) {
        let len = b.len();
        debug_assert!(len < 100);
        let digits = 1 + usize::from(len >= 10);
        let n = 1 + digits + 2 + len + 2;
        self.total += n;
        let t = self.tail(n);
        let at = t.len();
        // SAFETY: `tail(n)` left room for `n` more bytes, and exactly `n`
        // are written below, inside it, before the length is set.
        unsafe {
            let p = t.as_mut_ptr().add(at);
            *p = b'$';
            if len >= 10 {
                *p.add(1) = b'0' + (len / 10) as u8;
            }
            *p.add(digits) = b'0' + (len % 10) as u8;
            let q = p.add(1 + digits);
            q.cast::<[u8; 2]>().write_unaligned(*b"\r\n");
            copy_short(b, q.add(2));
            q.add(2 + len).cast::<[u8; 2]>().write_unaligned(*b"\r\n");
            t.set_len(at + n);
        }
    }

    fn long_bulk(&mut self, b: &[u8]) {
        let mut nb = itoa_buf::Buf::new();
        let len = nb.format(b.len() as i64);
        let n = 1 + len.len() + 2 + b.len() + 2;
        if n > CHUNK {
            self.raw3(b"$", len, b"\r\n");
            self.raw(b);
            self.raw(b"\r\n");
            return;
        }
        self.total += n;
        let t = self.tail(n);
        t.push(b'$');
        t.extend_from_slice(len);
        t.extend_from_slice(b"\r\n");
        t.extend_from_slice(b);
        t.extend_from_slice(b"\r\n");
    }

    /// A bulk string of an integer's decimal form.
    pub fn bulk_int(&mut self, v: i64) {
        let mut b = itoa_buf::Buf::new();
        self.bulk(b.format(v));
    }

    /// Null bulk: `$-1` in RESP2, `_` in RESP3.
    #[inline]
    pub fn null(&mut self) {
        match self.proto {
            Proto::Resp2 => self.raw(b"$-1\r\n"),
            Proto::Resp3 => self.raw(b"_\r\n"),
        }
    }

    /// Null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        match self.proto {
            Proto::Resp2 => self.raw(b"*-1\r\n"),
            Proto::Resp3 => self.raw(b"_\r\n"),
        }
    }

    /// Array header.
    #[inline]
    pub fn array(&mut self, n: usize) {
        self.prefixed_int(b'*', n as i64);
    }

    /// Map header: `%n` in RESP3, an array of 2n in RESP2.
    pub fn map(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.prefixed_int(b'*', 2 * n as i64),
            Proto::Resp3 => self.prefixed_int(b'%', n as i64),
        }
    }

    /// Set header: `~n` in RESP3, an array in RESP2.
    pub fn set(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.prefixed_int(b'*', n as i64),
            Proto::Resp3 => self.prefixed_int(b'~', n as i64),
        }
    }

    /// Out-of-band push header: `>n` in RESP3, an array in RESP2.
    pub fn push(&mut self, n: usize) {
        match self.proto {
            Proto::Resp2 => self.prefixed_int(b'*', n as i64),
            Proto::Resp3 => self.prefixed_int(b'>', n as i64),
        }
    }

    /// A double: `,v` in RESP3, a bulk string in RESP2 (`%.17g`).
    pub fn double(&mut self, v: f64) {
        let mut b = [0u8; 64];
        let n = fmt_double(v, &mut b);
        match self.proto {
            Proto::Resp2 => self.bulk(&b[..n]),
            Proto::Resp3 => self.raw3(b",", &b[..n], b"\r\n"),
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, v: bool) {
        match (self.proto, v) {
            (Proto::Resp2, true) => self.raw(b":1\r\n"),
            (Proto::Resp2, false) => self.raw(b":0\r\n"),
            (Proto::Resp3, true) => self.raw(b"#t\r\n"),
            (Proto::Resp3, false) => self.raw(b"#f\r\n"),
        }
    }

    /// Verbatim text (`=len\r\ntxt:...`) in RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, s: &[u8]) {
        match self.proto {
            Proto::Resp2 => self.bulk(s),
            Proto::Resp3 => {
                let mut nb = itoa_buf::Buf::new();
                let len = nb.format(s.len() as i64 + 4);
                let mut head = Vec::with_capacity(32);
                head.push(b'=');
                head.extend_from_slice(len);
                head.extend_from_slice(b"\r\ntxt:");
                self.raw(&head);
                self.raw(s);
                self.raw(b"\r\n");
            }
        }
    }
}

/// Copies a short `src` (under 100 bytes) to `dst`: up to 16 bytes as two
/// overlapping word copies (no call to `memcpy`), longer ones by `memcpy`.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes and not overlap `src`.
#[inline(always)]
unsafe fn copy_short(src: &[u8], dst: *mut u8) {
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY: every read stays inside `src` and every write inside
    // `dst[..n]` (the two words overlap when n < 16, the halves when n < 8).
    unsafe {
        if n >= 8 {
            if n <= 16 {
                let a = s.cast::<u64>().read_unaligned();
                let b = s.add(n - 8).cast::<u64>().read_unaligned();
                dst.cast::<u64>().write_unaligned(a);
                dst.add(n - 8).cast::<u64>().write_unaligned(b);
            } else {
                std::ptr::copy_nonoverlapping(s, dst, n);
            }
        } else if n >= 4 {
            let a = s.cast::<u32>().read_unaligned();
            let b = s.add(n - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else {
            for i in 0..n {
                *dst.add(i) = *s.add(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// jemalloc's classes above 16 KiB: four per power of two.
    #[test]
    fn big_chunks_count_at_their_size_class() {
        for (n, class) in [
            (CHUNK, CHUNK),
            (CHUNK + 1, 20 << 10),
            (100_008, 112 << 10),
            (112 << 10, 112 << 10),
            ((112 << 10) + 1, 128 << 10),
            (1 << 20, 1 << 20),
            ((1 << 20) + 1, 1280 << 10),
        ] {
            assert_eq!(alloc_class(n), class, "{n}");
        }
        let mut b = ReplyBuf::new();
        b.raw(&vec![b'x'; 100_000]);
        assert!(b.allocated() >= 112 << 10, "{}", b.allocated());
    }

    #[test]
    fn bulk_of_every_short_length_wherever_the_chunk_ends() {
        let payload: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
        for len in 0..300 {
            // Before: nothing, and so much that the reply straddles a chunk.
            for pre in [0, CHUNK - 1 - len.min(CHUNK - 1), CHUNK - 3] {
                let mut r = ReplyBuf::new();
                r.raw(&vec![b'x'; pre]);
                r.bulk(&payload[..len]);
                let mut want = vec![b'x'; pre];
                want.extend_from_slice(format!("${len}\r\n").as_bytes());
                want.extend_from_slice(&payload[..len]);
                want.extend_from_slice(b"\r\n");
                assert_eq!(r.len(), want.len(), "len {len} pre {pre}");
                assert_eq!(r.to_vec(), want, "len {len} pre {pre}");
            }
        }
    }

    /// Integer lines written in place: every digit count, both signs,
    /// the extremes, and a line that straddles where a chunk ends.
    #[test]
    fn integer_lines_of_every_length_wherever_the_chunk_ends() {
        let mut vals = vec![i64::MIN, i64::MAX, i64::MIN + 1, -1, 0, 1];
        let mut p: i64 = 1;
        for _ in 0..19 {
            vals.extend([p - 1, p, p + 1, -p, -(p - 1), 5 * p, -5 * p]);
            p = p.saturating_mul(10);
        }
        for v in vals {
            for pre in [0, CHUNK - 2, CHUNK - 5] {
                let mut r = ReplyBuf::new();
                r.raw(&vec![b'x'; pre]);
                r.int(v);
                r.array(v.unsigned_abs() as usize % 1000);
                let mut want = vec![b'x'; pre];
                want.extend_from_slice(format!(":{v}\r\n").as_bytes());
                want.extend_from_slice(format!("*{}\r\n", v.unsigned_abs() % 1000).as_bytes());
                assert_eq!(r.len(), want.len(), "{v} pre {pre}");
                assert_eq!(r.to_vec(), want, "{v} pre {pre}");
            }
        }
    }

    /// A reply that grows without end (SRANDMEMBER with a huge negative
    /// count) costs the limit and a chunk, not what it counts.
    #[test]
    fn writes_past_the_limit_are_counted_not_kept() {
        let mut r = ReplyBuf::new();
        r.set_limit(100_000);
        r.int(1);
        let big = vec![b'y'; CHUNK * 2];
        let mut n = 0;
        while !r.is_over() {
            r.bulk(b"member");
            n += 1;
            assert!(n < 1_000_000, "never went over");
        }
        for _ in 0..1_000_000 {
            r.bulk(b"member");
            r.int(123_456);
        }
        r.bulk(&big);
        let mut other = ReplyBuf::new();
        other.raw(&big);
        r.append(&mut other);
        assert!(r.allocated() <= 100_000 + 2 * CHUNK, "{} allocated", r.allocated());
        assert!(r.len() > 10_000_000);
        assert!(r.to_vec().len() <= 100_000 + CHUNK);
        // A buffer reused for the next caller starts under its limit.
        r.clear();
        assert!(!r.is_over());
        r.ok();
        assert_eq!(r.to_vec(), b"+OK\r\n");
    }

    #[test]
    fn split_off_returns_what_follows_a_mark() {
        for pre in [0, 10, CHUNK - 3, CHUNK + 5] {
            let mut r = ReplyBuf::new();
            r.raw(&vec![b'a'; pre]);
            let m = r.mark();
            r.raw(b"xyz");
            r.raw(&vec![b'b'; CHUNK]);
            let tail = r.split_off(m);
            assert_eq!(tail.len(), 3 + CHUNK);
            assert!(tail.starts_with(b"xyzb"));
            assert_eq!(r.to_vec(), vec![b'a'; pre]);
            r.raw(b"!");
            r.raw(&tail);
            assert_eq!(r.len(), pre + 4 + CHUNK);
        }
    }

    #[test]
    fn encodes_resp2_and_resp3() {
        let mut r = ReplyBuf::new();
        r.ok();
        r.int(-42);
        r.bulk(b"hi");
        r.null();
        r.map(1);
        r.double(1.5);
        assert_eq!(r.to_vec(), b"+OK\r\n:-42\r\n$2\r\nhi\r\n$-1\r\n*2\r\n$3\r\n1.5\r\n");
        let mut r = ReplyBuf { proto: Proto::Resp3, ..Default::default() };
        r.null();
        r.map(1);
        r.double(1.5);
        r.boolean(true);
        assert_eq!(r.to_vec(), b"_\r\n%1\r\n,1.5\r\n#t\r\n");
    }

    #[test]
    fn truncate_and_consume_across_chunks() {
        let mut r = ReplyBuf::new();
        r.simple(b"A");
        let m = r.mark();
        let big = vec![b'x'; CHUNK * 2];
        r.bulk(&big);
        r.int(5);
        r.truncate(m);
        assert_eq!(r.to_vec(), b"+A\r\n");
        for _ in 0..10_000 {
            r.int(7);
        }
        let want = r.to_vec();
        let mut got = Vec::new();
        while !r.is_empty() {
            let mut sl = [IoSlice::new(&[]); 4];
            let n = r.io_slices(&mut sl);
            let take = sl[..n].iter().map(|s| s.len()).sum::<usize>().min(777);
            let mut left = take;
            for s in &sl[..n] {
                let k = s.len().min(left);
                got.extend_from_slice(&s[..k]);
                left -= k;
            }
            r.consume(take);
        }
        assert_eq!(got, want);
    }

    /// The one-chunk paths (`single`, `consume` of everything) leave the
    /// buffer as the general path does: a full write keeps the standard
    /// chunk, emptied; an exact-size chunk (a big reply) is let go; a
    /// part written leaves the rest to write.
    #[test]
    fn one_chunk_written_whole_or_in_part() {
        let mut r = ReplyBuf::new();
        r.simple(b"OK");
        assert_eq!(r.single(), Some(&b"+OK\r\n"[..]));
        let kept = r.allocated();
        r.consume(2);
        assert_eq!(r.single(), Some(&b"K\r\n"[..]));
        assert_eq!(r.len(), 3);
        r.consume(3);
        assert!(r.is_empty());
        assert_eq!(r.single(), Some(&b""[..]));
        assert_eq!(r.allocated(), kept);
        r.int(42);
        assert_eq!(r.to_vec(), b":42\r\n");
        r.consume(r.len());

        let mut big = ReplyBuf::new();
        big.raw(&vec![b'x'; CHUNK + 10]);
        assert_eq!(big.single().map(<[u8]>::len), Some(CHUNK + 10));
        big.consume(CHUNK + 10);
        assert!(big.is_empty());
        assert_eq!(big.single(), None, "the exact-size chunk is not kept");

        let mut two = ReplyBuf::new();
        two.raw(&vec![b'y'; CHUNK - 1]);
        two.raw(b"zz");
        assert_eq!(two.single(), None);
    }

    #[test]
    fn errors_lose_newlines() {
        let mut r = ReplyBuf::new();
        r.error(b"ERR a\r\nb");
        assert_eq!(r.to_vec(), b"-ERR a  b\r\n");
    }
}
