//! One chunk of a list: its elements packed in one buffer, each entry
//! either a literal or coded against the literal before it (front coding,
//! whose entry forms are shared with packed hashes and sorted sets:
//! `types/front.rs`).
//!
//! An entry is a header, its bytes and its header-plus-bytes size again as
//! a backwards varint, so a chunk is walked from either end as Redis walks
//! a listpack. The header's first byte says what follows:
//!
//! - `0x00..=0x7f`: a literal of that many bytes (an element shorter than
//!   128 bytes costs its bytes plus two, as in Redis);
//! - `0x80..=0x9f`: a longer literal, the low five bits of its length here
//!   and the rest in a varint after;
//! - `0xa0..=0xbf`: an integer entry, `0b101_ddddd`: the element is the
//!   canonical text of an integer (Redis's `string2ll` rules: no `+`, no
//!   leading zero, not `-0`), its anchor's integer plus `ddddd - 16`; no
//!   bytes follow (`1001` after `1000` takes 2 bytes, as many as Redis
//!   gives the integers 0 to 127);
//! - `0xc0..=0xfe`: a *coded* entry, `0b11_ccc_lll`: the element is its
//!   group's literal (the nearest literal before it, its *anchor*) less
//!   its last `ccc` bytes, followed by the `lll` bytes stored here;
//! - `0xff`: a coded entry whose cut and suffix length follow as varints.
//!
//! A literal and the coded entries after it form a group of at most
//! [`GROUP`] elements, which bounds the walk back to an anchor (RPUSH,
//! RPOP, LINDEX) to `GROUP - 1` entries. `value:1001` after `value:1000`
//! costs 3 bytes (header, `1`, size) where Redis's listpack takes 12; an
//! entry is coded only when that is shorter than the literal, so elements
//! that share nothing cost exactly what they did.
//!
//! Popping the head moves the chunk's start (`lo`) past it and leaves its
//! bytes in place: a coded entry whose anchor went that way still finds
//! it. The bytes before `lo` are overwritten only by a push at the front,
//! which first re-codes the head's group so that it starts with a literal
//! ([`Chunk::push_front`]). Edits in the middle re-code the one group they
//! touch.

use super::{grow_exact, read_backlen, size_class, varint_len};
#[cfg(test)]
use crate::types::front::common_prefix;
use crate::types::front::{self, choose, itoa, short_coded, Enc, CODED, INT};
// An element's integer when it is one's canonical text (Redis's
// `string2ll`: no `+`, no leading zeros, not `-0`, within i64).
use crate::value::parse_canonical_i64 as canonical_int;

/// Most elements in a group (a literal and the entries coded against it).
pub(super) const GROUP: usize = front::GROUP;

/// Decoded elements up to this size are built on the stack by
/// [`Chunk::with_value`].
const STACK: usize = 64;

/// The room a walk keeps for building a coded element ([`Chunk::build`]).
pub(super) const SMALL: usize = 32;

/// An entry's parsed header.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    /// Coded against its anchor (front coding or an integer entry).
    pub(super) coded: bool,
    /// An integer entry.
    int: bool,
    /// Coded: bytes of the anchor left out at its end; an integer entry:
    /// its difference from the anchor's plus 16.
    cut: usize,
    /// Where its stored bytes start.
    data: usize,
    /// How many bytes are stored.
    len: usize,
    /// Position after the entry.
    pub(super) end: usize,
}

/// An entry's size in a chunk: header, bytes and the backwards size.
#[inline]
fn size(e: &Enc<'_>) -> usize {
    let h = e.head_size();
    h + varint_len(h)
}

/// Writes the entry at `buf[pos..]`; returns the position after it.
#[inline]
fn put(e: &Enc<'_>, buf: &mut [u8], pos: usize) -> usize {
    let p = e.put_head(buf, pos);
    put_backlen(buf, p, p - pos)
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

/// Encodes `vals` as one or more whole groups (the first a literal).
fn encode<V: AsRef<[u8]>>(vals: &[V]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut anchor = 0;
    for (k, v) in vals.iter().enumerate() {
        let v = v.as_ref();
        let e = if k == 0 || k - anchor >= GROUP {
            Enc::Lit(v)
        } else {
            choose(vals[anchor].as_ref(), v)
        };
        if let Enc::Lit(_) = e {
            anchor = k;
        }
        let p = out.len();
        out.resize(p + size(&e), 0);
        put(&e, &mut out, p);
    }
    out
}

/// Encoded size of an element of `n` bytes written as a literal (the
/// most it can take).
#[inline]
pub(super) fn entry_size(n: usize) -> usize {
    let head = if n < 0x80 { 1 + n } else { 1 + varint_len(n >> 5) + n };
    head + varint_len(head)
}

/// One node: `n` entries packed in `buf[lo..]`.
#[derive(Clone, Default)]
pub(super) struct Chunk {
    pub(super) buf: Vec<u8>,
    /// Bytes before `lo` are free room for pushes at the front (and may
    /// still hold the anchor of the head's group, see the module notes).
    lo: u32,
    n: u32,
}

impl Chunk {
    pub(super) fn with(v: &[u8]) -> Chunk {
        let mut c = Chunk::default();
        c.push_back(v);
        c
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.n as usize
    }

    #[inline]
    pub(super) fn begin(&self) -> usize {
        self.lo as usize
    }

    /// Position after the entry at `p`.
    #[inline(always)]
    fn next(&self, p: usize) -> usize {
        let h = self.buf[p];
        if h < 0x7f {
            // A short literal: header, bytes, a one-byte size.
            p + usize::from(h) + 2
        } else {
            self.entry(p).end
        }
    }

    /// The entry starting at `p`.
    #[inline(always)]
    pub(super) fn entry(&self, p: usize) -> Entry {
        let h = self.buf[p];
        if h < 0x7f {
            let len = usize::from(h);
            return Entry { coded: false, int: false, cut: 0, data: p + 1, len, end: p + len + 2 };
        }
        self.entry_slow(p, h)
    }

    /// [`Chunk::entry`] past a short literal.
    #[inline(never)]
    fn entry_slow(&self, p: usize, h: u8) -> Entry {
        let hd = front::head_slow(&self.buf, p, h);
        let e = hd.stop();
        Entry {
            coded: hd.coded,
            int: hd.int,
            cut: hd.cut,
            data: hd.data,
            len: hd.len,
            end: e + varint_len(e - p),
        }
    }

    /// Start of the entry ending at `e`.
    #[inline]
    pub(super) fn before(&self, e: usize) -> usize {
        let (size, b) = read_backlen(&self.buf, e);
        b - size
    }

    /// The literal's bytes of the anchor at `a`.
    #[inline]
    pub(super) fn lit(&self, a: usize) -> &[u8] {
        let e = self.entry(a);
        debug_assert!(!e.coded);
        &self.buf[e.data..e.data + e.len]
    }

    /// Position of the literal that the entry at `p` belongs to (`p`
    /// itself for a literal); it may lie before `lo`.
    #[inline]
    pub(super) fn anchor(&self, mut p: usize) -> usize {
        while self.buf[p] >= INT {
            p = self.before(p);
        }
        p
    }

    /// (start, length) of the literal's bytes at `a`.
    #[inline]
    pub(super) fn lit_range(&self, a: usize) -> (usize, usize) {
        let e = self.entry(a);
        (e.data, e.len)
    }

    /// The element of coded entry `e` whose anchor's bytes are at `lit`
    /// ((start, length)), built in `small` or, when longer, `tmp`.
    #[inline]
    pub(super) fn build<'s>(
        &'s self,
        e: &Entry,
        lit: (usize, usize),
        small: &'s mut [u8; SMALL],
        tmp: &'s mut Vec<u8>,
    ) -> &'s [u8] {
        let buf = &self.buf[..];
        let (pd, pl) = (lit.0, lit.1 - e.cut.min(lit.1));
        let (sd, sl) = (e.data, e.len);
        if !e.int && pl <= 16 && sl <= 16 && pd + 16 <= buf.len() && sd + 16 <= buf.len() {
            // Fixed 16-byte copies (a few moves, no memcpy call), the
            // suffix's over the prefix's tail.
            small[..16].copy_from_slice(&buf[pd..pd + 16]);
            small[pl..pl + 16].copy_from_slice(&buf[sd..sd + 16]);
            return &small[..pl + sl];
        }
        let mut num = [0u8; 24];
        let (x, y) = if e.int {
            let a = canonical_int(&buf[lit.0..lit.0 + lit.1]).unwrap_or(0);
            (itoa(a.wrapping_add(e.cut as i64 - 16), &mut num), &[][..])
        } else {
            (&buf[pd..pd + pl], &buf[sd..sd + sl])
        };
        tmp.clear();
        tmp.extend_from_slice(x);
        tmp.extend_from_slice(y);
        tmp
    }

    /// The bytes stored in entry `e` (a literal's element).
    #[inline]
    pub(super) fn stored(&self, e: &Entry) -> &[u8] {
        &self.buf[e.data..e.data + e.len]
    }

    /// The element of entry `e` in two pieces: the stored bytes of a
    /// literal; (anchor's first bytes, suffix) for a coded entry whose
    /// anchor is at `a`; an integer entry's text, written in `num`.
    #[inline]
    pub(super) fn parts<'s>(
        &'s self,
        e: &Entry,
        a: usize,
        num: &'s mut [u8; 24],
    ) -> (&'s [u8], &'s [u8]) {
        let stored = &self.buf[e.data..e.data + e.len];
        if !e.coded {
            return (stored, &[]);
        }
        let anchor = self.lit(a);
        if e.int {
            // The anchor is canonical and the sum in range: both were
            // checked when the entry was written.
            let x = canonical_int(anchor).unwrap_or(0).wrapping_add(e.cut as i64 - 16);
            return (itoa(x, num), &[]);
        }
        (&anchor[..anchor.len() - e.cut], stored)
    }

    /// Hands the element at `p` to `f`, built on the stack when coded and
    /// short.
    #[inline]
    pub(super) fn with_value<R>(&self, p: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let e = self.entry(p);
        if !e.coded {
            return f(&self.buf[e.data..e.data + e.len]);
        }
        let mut num = [0u8; 24];
        let (a, b) = self.parts(&e, self.anchor(p), &mut num);
        let n = a.len() + b.len();
        if n <= STACK {
            let mut tmp = [0u8; STACK];
            tmp[..a.len()].copy_from_slice(a);
            tmp[a.len()..n].copy_from_slice(b);
            f(&tmp[..n])
        } else {
            f(&[a, b].concat())
        }
    }

    /// Element at `p`, owned.
    #[cfg(test)]
    pub(super) fn value(&self, p: usize) -> Vec<u8> {
        self.with_value(p, <[u8]>::to_vec)
    }

    /// The live elements from position `p` to the end, each with its
    /// position, in order.
    fn scan(&self, mut p: usize, mut f: impl FnMut(usize, &[u8])) {
        let mut anchor = None;
        let mut tmp = Vec::new();
        while p < self.buf.len() {
            let e = self.entry(p);
            if e.coded {
                let a = *anchor.get_or_insert_with(|| self.anchor(p));
                let mut num = [0u8; 24];
                let (x, y) = self.parts(&e, a, &mut num);
                tmp.clear();
                tmp.extend_from_slice(x);
                tmp.extend_from_slice(y);
                f(p, &tmp);
            } else {
                anchor = Some(p);
                f(p, &self.buf[e.data..e.data + e.len]);
            }
            p = e.end;
        }
    }

    /// Byte position of element `i` (`i == len` gives the end), walking
    /// from the nearer end.
    pub(super) fn pos(&self, i: usize) -> usize {
        let n = self.len();
        if i <= n / 2 {
            let mut p = self.begin();
            for _ in 0..i {
                p = self.next(p);
            }
            p
        } else {
            let mut p = self.buf.len();
            for _ in i..n {
                p = self.before(p);
            }
            p
        }
    }

    /// Element `i`, owned.
    #[cfg(test)]
    pub(super) fn get(&self, i: usize) -> Vec<u8> {
        self.value(self.pos(i))
    }

    /// Whether one more element of `n` bytes may join this chunk at its
    /// front or back (Redis's `_quicklistNodeAllowInsert`, counting the
    /// element as a literal). At the back the free room at the front
    /// counts as used, so a queue's popped garbage never grows a chunk
    /// without bound.
    pub(super) fn allows(&self, n: usize, limit: usize, fill: i32, front: bool) -> bool {
        if self.len() == 0 {
            return true;
        }
        let used = if front { self.buf.len() - self.begin() } else { self.buf.len() };
        let sz = used + entry_size(n);
        sz <= limit && (fill < 0 || self.len() < fill.max(1) as usize)
    }

    /// Writes `e` at the end.
    #[inline]
    fn append(&mut self, e: Enc<'_>) {
        let sz = size(&e);
        grow_exact(&mut self.buf, sz);
        let short = match e {
            Enc::Lit(v) if v.len() < 0x7f => Some((v.len() as u8, v)),
            Enc::Coded { cut, suffix } if short_coded(cut, suffix.len()) => {
                Some((CODED | (cut as u8) << 3 | suffix.len() as u8, suffix))
            }
            Enc::Int { delta } => Some((INT | (delta + 16) as u8, &[][..])),
            _ => None,
        };
        if let Some((h, bytes)) = short {
            // Header, bytes and a one-byte size, with no zero-fill first.
            self.buf.push(h);
            self.buf.extend_from_slice(bytes);
            self.buf.push(bytes.len() as u8 + 1);
            self.n += 1;
            return;
        }
        let p = self.buf.len();
        self.buf.resize(p + sz, 0);
        put(&e, &mut self.buf, p);
        self.n += 1;
    }

    pub(super) fn push_back(&mut self, v: &[u8]) {
        if self.len() == 0 {
            self.buf.clear();
            self.lo = 0;
            return self.append(Enc::Lit(v));
        }
        // The last entry's group: its anchor and how many it holds.
        let mut p = self.before(self.buf.len());
        let mut count = 1;
        while self.buf[p] >= INT {
            p = self.before(p);
            count += 1;
        }
        let e = if count < GROUP { choose(self.lit(p), v) } else { Enc::Lit(v) };
        self.append(e);
    }

    /// Pushes at the front; `limit` is the chunk's byte bound.
    pub(super) fn push_front(&mut self, v: &[u8], limit: usize) {
        if self.len() > 0 && self.buf[self.begin()] >= INT {
            // The head's anchor is before `lo`, where the new entry goes.
            let b = self.group_end(self.begin());
            self.recode(self.begin(), b, |_| {});
        }
        let e = Enc::Lit(v);
        let sz = size(&e);
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
        put(&e, &mut self.buf, p);
        self.lo = p as u32;
        self.n += 1;
    }

    pub(super) fn pop_front(&mut self) {
        self.lo = self.entry(self.begin()).end as u32;
        self.n -= 1;
    }

    pub(super) fn pop_back(&mut self) {
        let start = self.before(self.buf.len());
        self.buf.truncate(start);
        self.n -= 1;
    }

    /// Drops the first `k` elements.
    pub(super) fn drain_front(&mut self, k: usize) {
        let k = k.min(self.len());
        self.lo = self.pos(k) as u32;
        self.n -= k as u32;
    }

    /// Drops the last `k` elements.
    pub(super) fn drain_back(&mut self, k: usize) {
        let keep = self.len().saturating_sub(k);
        if keep < self.len() {
            let p = self.pos(keep);
            self.buf.truncate(p);
            self.n = keep as u32;
        }
    }

    /// Position after the group of the entry at `p`: the next literal or
    /// the end.
    fn group_end(&self, p: usize) -> usize {
        let mut q = self.entry(p).end;
        while q < self.buf.len() && self.buf[q] >= INT {
            q = self.entry(q).end;
        }
        q
    }

    /// Re-codes the live entries in `a..b` (`a` at or after `lo`, `b` a
    /// literal or the end), after `edit` changed their elements.
    fn recode(&mut self, a: usize, b: usize, edit: impl FnOnce(&mut Vec<Vec<u8>>)) {
        let mut vals = Vec::with_capacity(GROUP + 1);
        let mut anchor = None;
        let mut p = a;
        while p < b {
            let e = self.entry(p);
            let at = *anchor.get_or_insert_with(|| self.anchor(p));
            let mut num = [0u8; 24];
            let (x, y) = self.parts(&e, at, &mut num);
            vals.push([x, y].concat());
            if !e.coded {
                anchor = Some(p);
            }
            p = e.end;
        }
        let before = vals.len();
        edit(&mut vals);
        let enc = encode(&vals);
        grow_exact(&mut self.buf, enc.len().saturating_sub(b - a));
        self.buf.splice(a..b, enc);
        self.n = (self.n as usize + vals.len() - before) as u32;
    }

    /// Changes element `i`'s group with `edit`, given the group's elements
    /// and `i`'s place among them.
    fn edit_at(&mut self, i: usize, edit: impl FnOnce(&mut Vec<Vec<u8>>, usize)) {
        let p = self.pos(i);
        let a = self.anchor(p).max(self.begin());
        let b = self.group_end(p);
        let mut k = 0;
        let mut q = a;
        while q < p {
            q = self.entry(q).end;
            k += 1;
        }
        self.recode(a, b, |vals| edit(vals, k));
    }

    /// Inserts before element `i` (`i < len`).
    pub(super) fn insert(&mut self, i: usize, v: &[u8], limit: usize) {
        if i == 0 {
            return self.push_front(v, limit);
        }
        self.edit_at(i, |vals, k| vals.insert(k, v.to_vec()));
    }

    /// Replaces element `i` (`i < len`).
    pub(super) fn set(&mut self, i: usize, v: &[u8]) {
        self.edit_at(i, |vals, k| vals[k] = v.to_vec());
    }

    /// Moves elements `at..` into a new chunk.
    pub(super) fn split_off(&mut self, at: usize) -> Chunk {
        let p = self.pos(at);
        let mut right =
            Chunk { buf: Vec::with_capacity(size_class(self.buf.len() - p)), lo: 0, n: 0 };
        self.scan(p, |_, v| right.push_back(v));
        self.buf.truncate(p);
        self.n = at as u32;
        right
    }

    /// Removes elements equal to `v`, at most `budget` of them (0: all),
    /// scanning from the back when `rev`. Returns how many went.
    pub(super) fn remove_eq(&mut self, v: &[u8], budget: usize, rev: bool) -> usize {
        let mut hits = Vec::new();
        self.scan(self.begin(), |p, e| {
            if e == v {
                hits.push(p);
            }
        });
        if budget != 0 && hits.len() > budget {
            if rev {
                hits.drain(..hits.len() - budget);
            } else {
                hits.truncate(budget);
            }
        }
        if !hits.is_empty() {
            let mut kept = Chunk {
                buf: Vec::with_capacity(size_class(self.buf.len() - self.begin())),
                lo: 0,
                n: 0,
            };
            let mut next = hits.iter().peekable();
            self.scan(self.begin(), |p, e| {
                if next.peek() == Some(&&p) {
                    next.next();
                } else {
                    kept.push_back(e);
                }
            });
            *self = kept;
        }
        hits.len()
    }

    pub(super) fn heap_size(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry sizes the module notes promise.
    #[test]
    fn entry_sizes() {
        assert_eq!(size(&Enc::Lit(b"value:1000")), 12);
        assert_eq!(size(&choose(b"value:1000", b"value:1001")), 3);
        assert_eq!(size(&choose(b"value:1000", b"value:1000")), 2);
        assert_eq!(size(&choose(b"value:1000", b"other")), 7);
        assert_eq!(size(&choose(b"1000", b"1015")), 2);
        assert_eq!(size(&choose(b"-5", b"10")), 2);
        assert!(matches!(choose(b"1000", b"1016"), Enc::Coded { .. }));
        // Not canonical: coded or literal, never an integer entry.
        for v in [&b"01001"[..], b"+1001", b"-0", b" 1001", b"1001.0", b"1001 "] {
            assert!(!matches!(choose(b"1000", v), Enc::Int { .. }), "{v:?}");
        }
        assert!(!matches!(choose(b"-0", b"1"), Enc::Int { .. }));
        // Sharing one byte codes nothing.
        assert!(matches!(choose(b"ab", b"ac"), Enc::Lit(_)));
        for (a, b, n) in [
            (&b"0123456789abcdefX"[..], &b"0123456789abcdefY"[..], 16),
            (b"abc", b"abd", 2),
            (b"", b"a", 0),
            (b"01234567", b"01234567", 8),
            (b"0123456x9", b"0123456y9", 7),
        ] {
            assert_eq!(common_prefix(a, b), n);
        }
        for n in [0usize, 1, 127, 128, 8191, 8192, 16_383, 16_384, 1 << 20] {
            let v = vec![7u8; n];
            assert_eq!(entry_size(n), size(&Enc::Lit(&v)), "{n}");
        }
    }

    /// Redis's `string2ll` rules, and text back.
    #[test]
    fn canonical_integers() {
        let yes = ["0", "1", "-1", "9223372036854775807", "-9223372036854775808", "1000"];
        for t in yes {
            let x = canonical_int(t.as_bytes()).unwrap_or_else(|| panic!("{t}"));
            assert_eq!(itoa(x, &mut [0; 24]), t.as_bytes());
        }
        let no = [
            "",
            "-",
            "-0",
            "+1",
            "01",
            "00",
            " 1",
            "1 ",
            "1.0",
            "9223372036854775808",
            "-9223372036854775809",
            "12345678901234567890",
            "1a",
            "--1",
        ];
        for t in no {
            assert_eq!(canonical_int(t.as_bytes()), None, "{t}");
        }
    }

    /// Every header form reads back as written, from both ends.
    #[test]
    fn headers_round_trip() {
        let long = vec![b'x'; 300];
        let mut anchor = b"abcdefghij".to_vec();
        anchor.extend_from_slice(&long);
        let cases: Vec<Vec<u8>> = vec![
            anchor.clone(),
            b"abcdefghij".to_vec(),                // cut 300: long form
            [&anchor[..], b"0123456789"].concat(), // suffix 10: long form
            [&anchor[..anchor.len() - 7], b"1234567"].concat(), // 7, 7: long form
            [&anchor[..anchor.len() - 6], b"1234567"].concat(), // 6, 7: short
            anchor.clone(),                        // 0, 0
            b"ab".to_vec(),
            Vec::new(),
            b"-9223372036854775808".to_vec(),
            b"-9223372036854775793".to_vec(), // anchor + 15
            b"-9223372036854775807".to_vec(),
            b"9223372036854775807".to_vec(),
            b"9223372036854775791".to_vec(), // anchor - 16
            b"9223372036854775800".to_vec(),
        ];
        let mut c = Chunk::default();
        for v in &cases {
            c.push_back(v);
        }
        let mut got = Vec::new();
        c.scan(c.begin(), |_, v| got.push(v.to_vec()));
        assert_eq!(got, cases);
        for (i, v) in cases.iter().enumerate() {
            assert_eq!(&c.get(i), v, "{i}");
        }
    }
}
