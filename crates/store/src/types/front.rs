//! Front coding, shared by list chunks, packed hashes and packed sorted
//! sets: an entry is a *literal* or coded against its *anchor*, the
//! nearest literal before it in the same column (a list's elements, a
//! hash's fields or its values, a sorted set's members).
//!
//! An entry's header says what follows (a list chunk adds the entry's
//! size after it, for its backward walks; the others walk forward only):
//!
//! - `0x00..=0x7f`: a literal of that many bytes;
//! - `0x80..=0x9f`: a longer literal, the low five bits of its length here
//!   and the rest in a varint after;
//! - `0xa0..=0xbf`: an integer entry, `0b101_ddddd`: the canonical text of
//!   an integer (Redis's `string2ll` rules), the anchor's integer plus
//!   `ddddd - 16`; no bytes follow;
//! - `0xc0..=0xfe`: a coded entry, `0b11_ccc_lll`: the anchor less its
//!   last `ccc` bytes, then the `lll` bytes stored here;
//! - `0xff`: a coded entry whose cut and suffix length follow as varints.
//!
//! An entry is coded only when that is shorter than the literal, so data
//! that shares nothing costs what a plain length-prefixed string does.
//! Must not depend on any other Sluice crate.

use std::fmt;
use std::ops::Deref;

use super::list::varint_len;
use crate::types::list::read_varint;
// An element's integer when it is one's canonical text (Redis's
// `string2ll`: no `+`, no leading zeros, not `-0`, within i64).
use crate::value::parse_canonical_i64 as canonical_int;

/// Most entries in a group (a literal and the entries coded against it)
/// that an encoder writes; a list chunk also relies on it to bound its
/// walks back to an anchor.
pub(crate) const GROUP: usize = 8;

/// First header byte of an integer entry; this and above depend on an
/// anchor.
pub(crate) const INT: u8 = 0xa0;
/// First header byte of a coded entry.
pub(crate) const CODED: u8 = 0xc0;
/// First header byte of a coded entry with varint fields.
pub(crate) const CODED_LONG: u8 = 0xff;

/// What an entry is written as.
#[derive(Clone, Copy)]
pub(crate) enum Enc<'v> {
    Lit(&'v [u8]),
    Coded {
        cut: usize,
        suffix: &'v [u8],
    },
    /// The anchor's integer plus `delta` (-16..=15).
    Int {
        delta: i64,
    },
}

/// Both counts of a coded entry fit its one-byte header.
#[inline]
pub(crate) fn short_coded(cut: usize, n: usize) -> bool {
    cut < 8 && n < 8 && (cut, n) != (7, 7)
}

impl Enc<'_> {
    /// Header plus stored bytes.
    #[inline]
    pub(crate) fn head_size(&self) -> usize {
        match *self {
            Enc::Lit(v) if v.len() < 0x80 => 1 + v.len(),
            Enc::Lit(v) => 1 + varint_len(v.len() >> 5) + v.len(),
            Enc::Int { .. } => 1,
            Enc::Coded { cut, suffix } if short_coded(cut, suffix.len()) => 1 + suffix.len(),
            Enc::Coded { cut, suffix } => {
                1 + varint_len(cut) + varint_len(suffix.len()) + suffix.len()
            }
        }
    }

    #[inline]
    pub(crate) fn is_lit(&self) -> bool {
        matches!(self, Enc::Lit(_))
    }

    /// Writes header and bytes at `buf[pos..]`; returns the position
    /// after them.
    #[inline]
    pub(crate) fn put_head(&self, buf: &mut [u8], pos: usize) -> usize {
        let mut tmp = [0u8; 21];
        let (head, bytes): (&[u8], &[u8]) = match *self {
            Enc::Lit(v) if v.len() < 0x80 => {
                tmp[0] = v.len() as u8;
                (&tmp[..1], v)
            }
            Enc::Lit(v) => {
                tmp[0] = 0x80 | (v.len() & 0x1f) as u8;
                let n = put_varint(&mut tmp, 1, v.len() >> 5);
                (&tmp[..n], v)
            }
            Enc::Int { delta } => {
                tmp[0] = INT | (delta + 16) as u8;
                (&tmp[..1], &[])
            }
            Enc::Coded { cut, suffix } if short_coded(cut, suffix.len()) => {
                tmp[0] = CODED | (cut as u8) << 3 | suffix.len() as u8;
                (&tmp[..1], suffix)
            }
            Enc::Coded { cut, suffix } => {
                tmp[0] = CODED_LONG;
                let n = put_varint(&mut tmp, 1, cut);
                let n = put_varint(&mut tmp, n, suffix.len());
                (&tmp[..n], suffix)
            }
        };
        let mut p = pos;
        buf[p..p + head.len()].copy_from_slice(head);
        p += head.len();
        buf[p..p + bytes.len()].copy_from_slice(bytes);
        p + bytes.len()
    }

    /// Appends header and bytes to `out`.
    #[inline]
    pub(crate) fn push_head(&self, out: &mut Vec<u8>) {
        match *self {
            Enc::Lit(v) if v.len() < 0x80 => {
                out.push(v.len() as u8);
                out.extend_from_slice(v);
            }
            Enc::Coded { cut, suffix } if short_coded(cut, suffix.len()) => {
                out.push(CODED | (cut as u8) << 3 | suffix.len() as u8);
                out.extend_from_slice(suffix);
            }
            _ => {
                let p = out.len();
                out.resize(p + self.head_size(), 0);
                self.put_head(out, p);
            }
        }
    }
}

/// An entry's parsed header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Head {
    /// Coded against its anchor (front coding or an integer entry).
    pub(crate) coded: bool,
    /// An integer entry.
    pub(crate) int: bool,
    /// Coded: bytes of the anchor left out at its end; an integer entry:
    /// its difference from the anchor's plus 16.
    pub(crate) cut: usize,
    /// Where its stored bytes start.
    pub(crate) data: usize,
    /// How many bytes are stored.
    pub(crate) len: usize,
}

impl Head {
    /// Position after the stored bytes.
    #[inline]
    pub(crate) fn stop(&self) -> usize {
        self.data + self.len
    }
}

/// The header of the entry at `p`.
#[inline(always)]
pub(crate) fn head(buf: &[u8], p: usize) -> Head {
    let h = buf[p];
    if h < 0x80 {
        return Head { coded: false, int: false, cut: 0, data: p + 1, len: usize::from(h) };
    }
    if h >= CODED && h != CODED_LONG {
        let (cut, len) = (usize::from(h >> 3 & 7), usize::from(h & 7));
        return Head { coded: true, int: false, cut, data: p + 1, len };
    }
    head_slow(buf, p, h)
}

/// Position after the entry at `p` (its header and stored bytes).
#[inline(always)]
pub(crate) fn skip(buf: &[u8], p: usize) -> usize {
    let h = buf[p];
    if h < 0x80 {
        p + 1 + usize::from(h)
    } else if h >= CODED && h != CODED_LONG {
        p + 1 + usize::from(h & 7)
    } else {
        head_slow(buf, p, h).stop()
    }
}

/// Room for building a decoded string on the stack ([`build`]).
pub(crate) const SMALL: usize = 64;

/// Builds the coded entry `h` of `buf`, whose anchor's bytes are
/// `buf[anchor.0..][..anchor.1]`, in `small` (at least 48 bytes) when it
/// is short and not an integer entry; its length, or `None`.
#[inline(always)]
fn build_into(buf: &[u8], h: &Head, anchor: (usize, usize), small: &mut [u8]) -> Option<usize> {
    let (pd, pl) = (anchor.0, anchor.1.saturating_sub(h.cut));
    let (sd, sl) = (h.data, h.len);
    if h.int || pl > 32 || sl > 16 {
        return None;
    }
    // Fixed copies where the buffer runs on far enough (a few moves, no
    // memcpy call), the suffix's over the prefix's tail.
    if pd + 32 <= buf.len() {
        small[..32].copy_from_slice(&buf[pd..pd + 32]);
    } else {
        small[..pl].copy_from_slice(&buf[pd..pd + pl]);
    }
    if sd + 16 <= buf.len() {
        small[pl..pl + 16].copy_from_slice(&buf[sd..sd + 16]);
    } else {
        for (d, &b) in small[pl..pl + sl].iter_mut().zip(&buf[sd..sd + sl]) {
            *d = b;
        }
    }
    Some(pl + sl)
}

/// The string of entry `h` of `buf` whose anchor's bytes are
/// `buf[anchor.0..][..anchor.1]`: a literal's bytes, or a coded one built
/// in `small` (in `tmp` when longer).
#[inline(always)]
pub(crate) fn build<'s>(
    buf: &'s [u8],
    h: &Head,
    anchor: (usize, usize),
    small: &'s mut [u8; SMALL],
    tmp: &'s mut Vec<u8>,
) -> &'s [u8] {
    if !h.coded {
        return &buf[h.data..h.stop()];
    }
    match build_into(buf, h, anchor, small) {
        Some(n) => &small[..n],
        None => build_slow(buf, h, anchor, tmp),
    }
}

/// [`build`] for integer entries and long strings.
#[inline(never)]
fn build_slow<'s>(
    buf: &'s [u8],
    h: &Head,
    anchor: (usize, usize),
    tmp: &'s mut Vec<u8>,
) -> &'s [u8] {
    tmp.clear();
    let a = &buf[anchor.0..anchor.0 + anchor.1];
    if h.int {
        let mut num = [0u8; 24];
        tmp.extend_from_slice(int_text(h, a, &mut num));
    } else {
        tmp.extend_from_slice(&a[..a.len().saturating_sub(h.cut)]);
        tmp.extend_from_slice(&buf[h.data..h.stop()]);
    }
    tmp
}

/// [`head`] past a short literal.
#[inline(never)]
pub(crate) fn head_slow(buf: &[u8], p: usize, h: u8) -> Head {
    let (coded, cut, data, len) = if h < 0x80 {
        (false, 0, p + 1, usize::from(h))
    } else if h < INT {
        let (hi, q) = read_varint(buf, p + 1);
        (false, 0, q, usize::from(h & 0x1f) | hi << 5)
    } else if h < CODED {
        (true, usize::from(h & 0x1f), p + 1, 0)
    } else if h != CODED_LONG {
        (true, usize::from(h >> 3 & 7), p + 1, usize::from(h & 7))
    } else {
        let (cut, q) = read_varint(buf, p + 1);
        let (len, q) = read_varint(buf, q);
        (true, cut, q, len)
    };
    Head { coded, int: (INT..CODED).contains(&h), cut, data, len }
}

/// Writes `v` as a varint at `buf[p..]`; returns the position after it.
#[inline]
pub(crate) fn put_varint(buf: &mut [u8], mut p: usize, mut v: usize) -> usize {
    while v >= 0x80 {
        buf[p] = v as u8 | 0x80;
        v >>= 7;
        p += 1;
    }
    buf[p] = v as u8;
    p + 1
}

/// `x` as text in `buf`.
#[inline]
pub(crate) fn itoa(x: i64, buf: &mut [u8; 24]) -> &[u8] {
    let n = crate::value::fmt_i64(x, buf);
    &buf[..n]
}

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
#[inline]
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The shortest of `v` as a literal, `v` coded against `anchor` and, when
/// both are integers close together, an integer entry.
#[inline]
pub(crate) fn choose<'v>(anchor: &[u8], v: &'v [u8]) -> Enc<'v> {
    let numeric = |b: &[u8]| b.first().is_some_and(|&c| c.is_ascii_digit() || c == b'-');
    if numeric(v) && numeric(anchor) {
        if let (Some(x), Some(a)) = (canonical_int(v), canonical_int(anchor)) {
            if let Some(d) = x.checked_sub(a).filter(|d| (-16..16).contains(d)) {
                return Enc::Int { delta: d };
            }
        }
    }
    let shared = common_prefix(anchor, v);
    if shared < 2 {
        return Enc::Lit(v);
    }
    let coded = Enc::Coded { cut: anchor.len() - shared, suffix: &v[shared..] };
    // A list chunk adds the size after the header, which grows with it,
    // so the shorter header is the shorter entry there too.
    if coded.head_size() < Enc::Lit(v).head_size() {
        coded
    } else {
        Enc::Lit(v)
    }
}

/// The integer entry `h`'s text, given its anchor's bytes.
#[inline]
pub(crate) fn int_text<'n>(h: &Head, anchor: &[u8], num: &'n mut [u8; 24]) -> &'n [u8] {
    // The anchor is canonical and the sum in range: both were checked
    // when the entry was written.
    let x = canonical_int(anchor).unwrap_or(0).wrapping_add(h.cut as i64 - 16);
    itoa(x, num)
}

/// Decoded strings up to this size are built inline in a [`Str`].
pub const INLINE: usize = 62;

/// A string read from a front-coded buffer: borrowed when it is a
/// literal, built (inline when short) when coded.
#[derive(Clone)]
pub enum Str<'a> {
    Ref(&'a [u8]),
    Inline(u8, [u8; INLINE]),
    Heap(Vec<u8>),
}

impl<'a> Str<'a> {
    /// `a` then `b`.
    #[inline]
    pub(crate) fn concat(a: &[u8], b: &[u8]) -> Str<'a> {
        let n = a.len() + b.len();
        if n <= INLINE {
            let mut s = [0u8; INLINE];
            s[..a.len()].copy_from_slice(a);
            s[a.len()..n].copy_from_slice(b);
            Str::Inline(n as u8, s)
        } else {
            Str::Heap([a, b].concat())
        }
    }

    /// The entry `h` of `buf` whose anchor's bytes are `buf[anchor.0..][..anchor.1]`.
    #[inline(always)]
    pub(crate) fn decode(buf: &'a [u8], h: &Head, anchor: (usize, usize)) -> Str<'a> {
        if !h.coded {
            return Str::Ref(&buf[h.data..h.stop()]);
        }
        let mut s = [0u8; INLINE];
        match build_into(buf, h, anchor, &mut s) {
            Some(n) => Str::Inline(n as u8, s),
            None if !h.int => {
                let pl = anchor.1.saturating_sub(h.cut);
                Str::concat(&buf[anchor.0..anchor.0 + pl], &buf[h.data..h.stop()])
            }
            None => {
                let mut v = Vec::new();
                build_slow(buf, h, anchor, &mut v);
                Str::concat(&v, &[])
            }
        }
    }

    /// The bytes, owned.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Str::Heap(v) => v,
            s => s.to_vec(),
        }
    }
}

impl Deref for Str<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Str::Ref(s) => s,
            Str::Inline(n, b) => &b[..usize::from(*n)],
            Str::Heap(v) => v,
        }
    }
}

impl AsRef<[u8]> for Str<'_> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl<'a> From<&'a [u8]> for Str<'a> {
    #[inline]
    fn from(s: &'a [u8]) -> Self {
        Str::Ref(s)
    }
}

impl PartialEq for Str<'_> {
    fn eq(&self, o: &Self) -> bool {
        **self == **o
    }
}

impl PartialEq<[u8]> for Str<'_> {
    fn eq(&self, o: &[u8]) -> bool {
        **self == *o
    }
}

impl PartialEq<&[u8]> for Str<'_> {
    fn eq(&self, o: &&[u8]) -> bool {
        **self == **o
    }
}

impl fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// One column's place in a forward walk or an encoder: its anchor's
/// stored bytes (start, length) and how many entries its group holds so
/// far (0: no anchor yet).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Column {
    at: u32,
    len: u32,
    n: u32,
}

impl Column {
    #[inline]
    pub(crate) fn anchor(&self) -> (usize, usize) {
        (self.at as usize, self.len as usize)
    }

    /// Reads the entry at `p` of this column; returns its header and
    /// notes it.
    #[inline(always)]
    pub(crate) fn step(&mut self, buf: &[u8], p: usize) -> Head {
        let h = head(buf, p);
        if h.coded {
            self.n += 1;
        } else {
            *self = Column { at: h.data as u32, len: h.len as u32, n: 1 };
        }
        h
    }

    /// Steps over the entry at `p` of this column; returns the position
    /// after it (no header is built for the common forms).
    #[inline(always)]
    pub(crate) fn pass(&mut self, buf: &[u8], p: usize) -> usize {
        let h = buf[p];
        if h < 0x80 {
            *self = Column { at: p as u32 + 1, len: u32::from(h), n: 1 };
            p + 1 + usize::from(h)
        } else if h >= CODED && h != CODED_LONG {
            self.n += 1;
            p + 1 + usize::from(h & 7)
        } else {
            self.step(buf, p).stop()
        }
    }

    /// Reads and decodes the entry at `p`; returns it and the position
    /// after its stored bytes.
    #[inline(always)]
    pub(crate) fn read<'b>(&mut self, buf: &'b [u8], p: usize) -> (Str<'b>, usize) {
        let h = self.step(buf, p);
        (Str::decode(buf, &h, self.anchor()), h.stop())
    }

    /// Reads the entry at `p`; lends its string (built in `small` or
    /// `tmp` when coded) and the position after it.
    #[inline(always)]
    pub(crate) fn lend<'s>(
        &mut self,
        buf: &'s [u8],
        p: usize,
        small: &'s mut [u8; SMALL],
        tmp: &'s mut Vec<u8>,
    ) -> (&'s [u8], usize) {
        let h = self.step(buf, p);
        (build(buf, &h, self.anchor(), small, tmp), h.stop())
    }

    /// Whether the entry `h` of `buf` (read with this column's state) is `v`,
    /// without building it.
    #[inline]
    pub(crate) fn equals(&self, buf: &[u8], h: &Head, v: &[u8]) -> bool {
        if !h.coded {
            return h.len == v.len() && &buf[h.data..h.stop()] == v;
        }
        let a = &buf[self.at as usize..(self.at + self.len) as usize];
        if h.int {
            let mut num = [0u8; 24];
            return int_text(h, a, &mut num) == v;
        }
        let pl = a.len().saturating_sub(h.cut);
        pl + h.len == v.len() && a[..pl] == v[..pl] && buf[h.data..h.stop()] == v[pl..]
    }

    /// How `v` is written in this column before entries coded against
    /// this anchor, which it must not take from them: coded when that is
    /// shorter, whatever the group's size.
    #[inline]
    pub(crate) fn choose_within<'v>(&self, buf: &[u8], v: &'v [u8]) -> Enc<'v> {
        if self.n == 0 {
            return Enc::Lit(v);
        }
        choose(&buf[self.at as usize..(self.at + self.len) as usize], v)
    }

    /// How `v` is written next in this column, after `buf`'s entries.
    #[inline]
    pub(crate) fn choose<'v>(&self, buf: &[u8], v: &'v [u8]) -> Enc<'v> {
        if self.n == 0 || self.n as usize >= GROUP {
            return Enc::Lit(v);
        }
        choose(&buf[self.at as usize..(self.at + self.len) as usize], v)
    }

    /// Appends `v` to `out` as the column's next entry.
    #[inline]
    pub(crate) fn push(&mut self, out: &mut Vec<u8>, v: &[u8]) {
        let e = self.choose(out, v);
        e.push_head(out);
        self.note(&e, out.len());
    }

    /// Notes `e`, just written to end at `stop`, as the column's next entry.
    #[inline]
    pub(crate) fn note(&mut self, e: &Enc<'_>, stop: usize) {
        if let Enc::Lit(v) = e {
            *self = Column { at: (stop - v.len()) as u32, len: v.len() as u32, n: 1 };
        } else {
            self.n += 1;
        }
    }
}

/// Looks for one string down a column: a coded entry is compared by its
/// length and suffix once the anchor's shared prefix with the string is
/// known (once per anchor), not byte by byte.
pub(crate) struct Seek<'v> {
    v: &'v [u8],
    /// Bytes the column's anchor shares with `v`; `usize::MAX`: not known.
    shared: usize,
}

impl<'v> Seek<'v> {
    #[inline]
    pub(crate) fn new(v: &'v [u8]) -> Self {
        Seek { v, shared: usize::MAX }
    }

    /// Whether the entry `h`, just stepped over with `col`, is the string.
    #[inline(always)]
    pub(crate) fn is(&mut self, col: &Column, buf: &[u8], h: &Head) -> bool {
        let v = self.v;
        if !h.coded {
            self.shared = usize::MAX;
            return h.len == v.len() && buf[h.data..h.stop()] == *v;
        }
        if h.int {
            return col.equals(buf, h, v);
        }
        let (at, alen) = col.anchor();
        let pl = alen.saturating_sub(h.cut);
        if pl + h.len != v.len() {
            return false;
        }
        if self.shared == usize::MAX {
            self.shared = common_prefix(&buf[at..at + alen], v);
        }
        pl <= self.shared && short_eq(&buf[h.data..h.stop()], &v[pl..])
    }
}

/// `a == b` for slices of one length, inline for the few bytes of a
/// short suffix (a `memcmp` call costs more than the compare).
#[inline(always)]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    if a.len() <= 8 {
        let mut d = 0;
        for i in 0..a.len().min(b.len()) {
            d |= a[i] ^ b[i];
        }
        d == 0
    } else {
        a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column written with `push` reads back, and coded entries are
    /// compared without being built.
    #[test]
    fn column_round_trip() {
        let long = vec![b'q'; 300];
        let vals: Vec<Vec<u8>> = vec![
            b"field:0".to_vec(),
            b"field:1".to_vec(),
            b"field:10".to_vec(),
            b"x".to_vec(),
            b"1000".to_vec(),
            b"1007".to_vec(),
            b"".to_vec(),
            [&long[..], b"a"].concat(),
            [&long[..], b"b"].concat(),
            long[..200].to_vec(),
            b"https://example.com/a/very/long/path/that/is/past/the/inline/size/1".to_vec(),
            b"https://example.com/a/very/long/path/that/is/past/the/inline/size/2".to_vec(),
        ];
        let mut out = Vec::new();
        let mut w = Column::default();
        for v in &vals {
            w.push(&mut out, v);
        }
        let mut r = Column::default();
        let mut p = 0;
        for v in &vals {
            let h = r.step(&out, p);
            assert!(r.equals(&out, &h, v));
            assert!(!r.equals(&out, &h, b"nope"));
            assert_eq!(&*Str::decode(&out, &h, r.anchor()), &v[..]);
            p = h.stop();
        }
        assert_eq!(p, out.len());
        // Two bytes for `field:1` after `field:0`, as the notes promise.
        assert_eq!(choose(b"field:0", b"field:1").head_size(), 2);
    }
}
