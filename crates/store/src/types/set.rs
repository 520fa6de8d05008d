//! The set value type and its two encodings, as Redis 7.0 has them.
//!
//! - `intset`: the members are all canonical 64-bit integers (Redis's
//!   `string2ll`), kept sorted in one packed buffer of 1-, 2-, 4- or
//!   8-byte little-endian words; the word width grows to fit the widest
//!   member and never shrinks (Redis's `intset.c` layout, plus a 1-byte
//!   width below Redis's narrowest, 2: members from -128 to 127 take one
//!   byte each; what Redis would hold, [`IntSet::width`], is reported
//!   wherever it shows: MEMORY USAGE, RDB and DUMP). Iteration is
//!   ascending, which clients can see (SMEMBERS of a small integer set is
//!   sorted).
//! - `hashtable`: any members, in a [`Table`] with unit values.
//!
//! A set starts as an intset when its first member is an integer and turns
//! into a hashtable, for good, when a non-integer is added or it grows past
//! `set-max-intset-entries` (the caller passes the limit in). Only adding
//! converts; removing never converts back.

use std::fmt;

use crate::bytes::SmallBytes;
use crate::table::Table;
use crate::value::{fmt_i64, parse_canonical_i64};

/// Redis caps the intset limit at 2^30 entries whatever the config says.
const INTSET_HARD_MAX: usize = 1 << 30;

/// Sorted integers packed at the narrowest width that fits them all.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct IntSet {
    /// `[width][members…]`: the word width (1, 2, 4 or 8) in the first
    /// byte, then the members; empty (no allocation, width 1) until
    /// written.
    /// One exact-size allocation behind one thin-enough pointer, so that a
    /// [`Set`] fits in a [`Value`](crate::Value) without a box of its own.
    data: Box<[u8]>,
}

fn width_for(v: i64) -> u8 {
    if i8::try_from(v).is_ok() {
        1
    } else if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl IntSet {
    pub fn new() -> Self {
        IntSet::default()
    }

    #[inline]
    fn w(&self) -> usize {
        self.data.first().map_or(1, |&w| usize::from(w))
    }

    /// The member words.
    #[inline]
    fn body(&self) -> &[u8] {
        self.data.get(1..).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.body().len() / self.w()
    }

    /// Bytes per member (2, 4 or 8) as Redis's intset header would say:
    /// Redis has no 1-byte width, and its width, like this one, only
    /// grows, so it is the stored width or 2, whichever is wider.
    pub fn width(&self) -> usize {
        self.w().max(2)
    }

    pub fn is_empty(&self) -> bool {
        self.body().is_empty()
    }

    /// The member at position `i` (ascending order).
    #[inline]
    pub fn get(&self, i: usize) -> i64 {
        let w = self.w();
        let b = &self.body()[i * w..i * w + w];
        match w {
            1 => i64::from(b[0] as i8),
            2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
            4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            _ => i64::from_le_bytes(b.try_into().expect("8-byte word")),
        }
    }

    fn put(buf: &mut [u8], w: usize, v: i64) {
        match w {
            1 => buf[0] = v as i8 as u8,
            2 => buf.copy_from_slice(&(v as i16).to_le_bytes()),
            4 => buf.copy_from_slice(&(v as i32).to_le_bytes()),
            _ => buf.copy_from_slice(&v.to_le_bytes()),
        }
    }

    /// Position of `v`, or where it would go.
    pub fn search(&self, v: i64) -> Result<usize, usize> {
        if width_for(v) > self.w() as u8 {
            // Wider than every member: below or above them all.
            return Err(if v < 0 { 0 } else { self.len() });
        }
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    pub fn contains(&self, v: i64) -> bool {
        self.search(v).is_ok()
    }

    /// Adds `v`; false if it was there.
    pub fn insert(&mut self, v: i64) -> bool {
        let need = width_for(v);
        if need > self.w() as u8 {
            self.upgrade(need);
        }
        let Err(pos) = self.search(v) else { return false };
        let w = self.w();
        // Grow by exactly one word, as Redis reallocates the intset.
        let mut data = std::mem::take(&mut self.data).into_vec();
        if data.is_empty() {
            data.push(w as u8);
        }
        data.reserve_exact(w);
        let at = 1 + pos * w;
        data.splice(at..at, std::iter::repeat_n(0, w));
        Self::put(&mut data[at..at + w], w, v);
        self.data = data.into_boxed_slice();
        true
    }

    fn upgrade(&mut self, width: u8) {
        let n = self.len();
        let w = usize::from(width);
        let mut data = vec![0u8; 1 + n * w];
        data[0] = width;
        for i in 0..n {
            Self::put(&mut data[1 + i * w..1 + i * w + w], w, self.get(i));
        }
        self.data = data.into_boxed_slice();
    }

    /// Removes `v`; false if it was absent.
    pub fn remove(&mut self, v: i64) -> bool {
        let Ok(pos) = self.search(v) else { return false };
        let w = self.w();
        let mut data = std::mem::take(&mut self.data).into_vec();
        data.drain(1 + pos * w..1 + pos * w + w);
        self.data = data.into_boxed_slice();
        true
    }

    /// Ascending iteration.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    pub fn heap_size(&self) -> usize {
        self.data.len()
    }
}

/// One member as a set stores it: an integer (intset) or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> Member<'a> {
    /// The member's bytes, formatting an integer into `buf`.
    pub fn bytes<'b>(&self, buf: &'b mut [u8; 24]) -> &'b [u8]
    where
        'a: 'b,
    {
        match *self {
            Member::Int(v) => {
                let n = fmt_i64(v, buf);
                &buf[..n]
            }
            Member::Str(s) => s,
        }
    }

    /// An owned copy.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = [0u8; 24];
        self.bytes(&mut buf).to_vec()
    }
}

/// A set value.
pub enum Set {
    Ints(IntSet),
    /// Boxed so that a set is 16 bytes (the table's pointer sits beside
    /// the intset's) and lives in the key's `Value` without a box.
    Hash(Box<Table<()>>),
}

impl Default for Set {
    fn default() -> Self {
        Set::Ints(IntSet::new())
    }
}

impl Clone for Set {
    /// A copy in the same encoding (Redis's `setTypeDup`, used by COPY).
    fn clone(&self) -> Self {
        match self {
            Set::Ints(i) => Set::Ints(i.clone()),
            Set::Hash(t) => {
                let mut n = Table::new();
                for (k, _) in t.iter() {
                    n.insert_owned(SmallBytes::new(k), ());
                }
                Set::Hash(Box::new(n))
            }
        }
    }
}

impl PartialEq for Set {
    fn eq(&self, o: &Self) -> bool {
        self.encoding() == o.encoding()
            && self.len() == o.len()
            && self.iter().all(|m| o.contains_member(m))
    }
}

impl fmt::Debug for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Set({}, {} members)", self.encoding(), self.len())
    }
}

impl Set {
    /// A pipelined command's member stage (`Store::with_member_value`): in
    /// a hash table, `member`'s hash with its bucket prefetched; 0 for an
    /// intset (one allocation, searched in place).
    #[inline]
    pub fn prefetch_member(&self, member: &[u8]) -> u64 {
        match self {
            Set::Ints(_) => 0,
            Set::Hash(t) => t.prefetch_bucket_of(member),
        }
    }

    /// The stages after [`prefetch_member`](Self::prefetch_member): the
    /// first node of its chain, or (`second`) the next one.
    #[inline]
    pub fn prefetch_member_node(&self, h: u64, second: bool) {
        if let Set::Hash(t) = self {
            t.prefetch_chain(h, second);
        }
    }

    /// An empty intset (Redis's `createIntsetObject`).
    pub fn new_ints() -> Set {
        Set::Ints(IntSet::new())
    }

    /// An empty set in the encoding that can hold `first` (Redis's
    /// `setTypeCreate`).
    pub fn new_for(first: &[u8]) -> Set {
        if parse_canonical_i64(first).is_some() {
            Set::new_ints()
        } else {
            Set::Hash(Box::default())
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            Set::Ints(i) => i.len(),
            Set::Hash(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Ints(_) => "intset",
            Set::Hash(_) => "hashtable",
        }
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match self {
            Set::Ints(i) => i.heap_size(),
            // Slab node (hash, link, inline key) plus its bucket slot.
            Set::Hash(t) => t.len() * 32 + t.buckets() * 4,
        }
    }

    /// Turns an intset into a hashtable (Redis's `setTypeConvert`).
    fn convert(&mut self) {
        if let Set::Ints(i) = self {
            let mut t = Table::new();
            let mut buf = [0u8; 24];
            for v in i.iter() {
                let n = fmt_i64(v, &mut buf);
                t.insert_owned(SmallBytes::new(&buf[..n]), ());
            }
            *self = Set::Hash(Box::new(t));
        }
    }

    /// Adds a member; false if it was there. `max_intset` is
    /// `set-max-intset-entries`.
    pub fn add(&mut self, m: &[u8], max_intset: usize) -> bool {
        if let Set::Ints(_) = self {
            match parse_canonical_i64(m) {
                Some(v) => return self.add_int(v, max_intset),
                None => self.convert(),
            }
        }
        match self {
            // One hash and one probe: insert reports whether it was there.
            Set::Hash(t) => t.insert(m, ()).1.is_none(),
            Set::Ints(_) => false,
        }
    }

    /// Adds an integer member.
    pub fn add_int(&mut self, v: i64, max_intset: usize) -> bool {
        match self {
            Set::Ints(i) => {
                if !i.insert(v) {
                    return false;
                }
                if i.len() > max_intset.min(INTSET_HARD_MAX) {
                    self.convert();
                }
                true
            }
            Set::Hash(_) => {
                let mut buf = [0u8; 24];
                let n = fmt_i64(v, &mut buf);
                self.add(&buf[..n], max_intset)
            }
        }
    }

    /// Adds a member taken from another set.
    pub fn add_member(&mut self, m: Member<'_>, max_intset: usize) -> bool {
        match m {
            Member::Int(v) => self.add_int(v, max_intset),
            Member::Str(s) => self.add(s, max_intset),
        }
    }

    /// Removes a member; false if it was absent.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Ints(i) => parse_canonical_i64(m).is_some_and(|v| i.remove(v)),
            Set::Hash(t) => t.remove(m).is_some(),
        }
    }

    /// Removes a member taken from another set.
    pub fn remove_member(&mut self, m: Member<'_>) -> bool {
        match (self, m) {
            (Set::Ints(i), Member::Int(v)) => i.remove(v),
            (s, m) => {
                let mut buf = [0u8; 24];
                s.remove(m.bytes(&mut buf))
            }
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Ints(i) => parse_canonical_i64(m).is_some_and(|v| i.contains(v)),
            Set::Hash(t) => t.contains_key(m),
        }
    }

    /// Membership of a member taken from another set.
    pub fn contains_member(&self, m: Member<'_>) -> bool {
        match (self, m) {
            (Set::Ints(i), Member::Int(v)) => i.contains(v),
            (s, m) => {
                let mut buf = [0u8; 24];
                s.contains(m.bytes(&mut buf))
            }
        }
    }

    /// Every member: ascending for an intset, table order otherwise.
    pub fn iter(&self) -> SetIter<'_> {
        match self {
            Set::Ints(i) => SetIter::Ints(i, 0),
            Set::Hash(t) => SetIter::Hash(Box::new(t.iter())),
        }
    }

    /// A random member of a non-empty set, `rand` being the randomness.
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<Member<'_>> {
        match self {
            Set::Ints(i) => {
                if i.is_empty() {
                    return None;
                }
                Some(Member::Int(i.get((rand() % i.len() as u64) as usize)))
            }
            Set::Hash(t) => {
                let idx = t.random_index(rand)?;
                t.at(idx).map(|(k, _)| Member::Str(k))
            }
        }
    }

    /// Removes and returns a random member.
    pub fn pop_random(&mut self, mut rand: impl FnMut() -> u64) -> Option<PoppedMember> {
        match self {
            Set::Ints(i) => {
                if i.is_empty() {
                    return None;
                }
                let v = i.get((rand() % i.len() as u64) as usize);
                i.remove(v);
                Some(PoppedMember::Int(v))
            }
            Set::Hash(t) => {
                let idx = t.random_index(rand)?;
                // Moves the stored member out: no copy, no second hash.
                t.remove_at(idx).map(|(key, ())| PoppedMember::Str(key))
            }
        }
    }

    /// One SSCAN step: a hashtable visits one bucket and returns the next
    /// cursor; an intset visits everything and returns 0 (Redis answers
    /// small encodings in one step whatever the cursor).
    pub fn scan<'s>(&'s self, cursor: u64, mut visit: impl FnMut(Member<'s>)) -> u64 {
        match self {
            Set::Ints(i) => {
                i.iter().for_each(|v| visit(Member::Int(v)));
                0
            }
            Set::Hash(t) => {
                // The table's visitor sees short-lived borrows; note slab
                // indices and resolve them against the table afterwards.
                let mut found: Vec<u32> = Vec::new();
                let next = t.scan(cursor, |k, _| found.extend(t.index_of(k)));
                for i in found {
                    if let Some((k, _)) = t.at(i) {
                        visit(Member::Str(k));
                    }
                }
                next
            }
        }
    }
}

/// A member removed from a set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoppedMember {
    Int(i64),
    Str(SmallBytes),
}

impl PoppedMember {
    pub fn as_member(&self) -> Member<'_> {
        match self {
            PoppedMember::Int(v) => Member::Int(*v),
            PoppedMember::Str(s) => Member::Str(s),
        }
    }
}

/// Iterator over a set's members.
pub enum SetIter<'a> {
    Ints(&'a IntSet, usize),
    Hash(Box<dyn Iterator<Item = (&'a [u8], &'a ())> + 'a>),
}

impl<'a> Iterator for SetIter<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            SetIter::Ints(i, pos) => {
                if *pos >= i.len() {
                    return None;
                }
                *pos += 1;
                Some(Member::Int(i.get(*pos - 1)))
            }
            SetIter::Hash(it) => it.next().map(|(k, _)| Member::Str(k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intset_widths_and_order() {
        let mut s = IntSet::new();
        assert!(s.insert(5));
        assert!(s.insert(-3));
        assert!(!s.insert(5));
        assert_eq!(s.heap_size(), 3, "the width byte and two 1-byte words");
        assert_eq!(s.width(), 2, "Redis's narrowest");
        assert!(s.insert(-128) && s.insert(127));
        assert_eq!((s.heap_size(), s.width()), (5, 2));
        assert!(s.insert(128));
        assert_eq!((s.heap_size(), s.width()), (11, 2), "2-byte words from 128");
        assert!(s.remove(128) && s.remove(-128) && s.remove(127));
        assert!(s.insert(100_000));
        assert!(s.insert(-5_000_000_000));
        assert!(s.insert(i64::MAX));
        assert!(s.insert(i64::MIN));
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![i64::MIN, -5_000_000_000, -3, 5, 100_000, i64::MAX]
        );
        assert!(s.contains(100_000));
        assert!(!s.contains(4));
        assert!(s.remove(-3));
        assert!(!s.remove(-3));
        assert_eq!(s.len(), 5);
    }

    /// Against a sorted-set model, with members drawn around every width
    /// boundary: the members, their order and the width Redis would
    /// report (2, or the widest member's width ever, as an intset never
    /// narrows).
    #[test]
    fn intset_matches_a_model() {
        let edges = [0i64, 1, -1, 127, 128, -128, -129, 32_767, 32_768, -32_769, 1 << 31, i64::MIN];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..200 {
            let mut s = IntSet::new();
            let mut m = std::collections::BTreeSet::new();
            let mut widest = 2;
            // Most rounds stay narrow, so the 1-byte words get exercised.
            let span = [4u64, 300, 70_000, u64::MAX][round % 4];
            for _ in 0..60 {
                let r = rnd();
                let v = if r % 7 == 0 {
                    edges[(r >> 8) as usize % edges.len()]
                } else {
                    ((r >> 8) % span) as i64 - (span / 2) as i64
                };
                if r % 3 == 0 {
                    assert_eq!(s.remove(v), m.remove(&v), "{v}");
                } else {
                    assert_eq!(s.insert(v), m.insert(v), "{v}");
                    widest = widest.max(usize::from(width_for(v)));
                }
                assert_eq!(s.len(), m.len());
                assert_eq!(s.width(), widest);
                assert!(s.iter().eq(m.iter().copied()));
                assert!(s.contains(v) == m.contains(&v));
            }
        }
    }

    #[test]
    fn converts_on_string_and_on_size() {
        let mut s = Set::new_for(b"1");
        assert_eq!(s.encoding(), "intset");
        assert!(s.add(b"1", 3));
        assert!(s.add(b"2", 3));
        assert!(s.add(b"3", 3));
        assert_eq!(s.encoding(), "intset");
        assert!(!s.add(b"3", 3));
        assert!(s.add(b"4", 3));
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.contains(b"4") && s.contains_member(Member::Int(1)));

        let mut s = Set::new_for(b"01");
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.add(b"01", 512));
        let mut s = Set::new_ints();
        s.add(b"7", 512);
        s.add(b"x", 512);
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 2);
        assert!(s.contains(b"7") && s.contains(b"x"));
        assert!(!s.contains(b"07"));
    }

    #[test]
    fn clone_keeps_encoding_and_members() {
        let mut s = Set::new_ints();
        for m in [&b"a"[..], b"b", b"3"] {
            s.add(m, 512);
        }
        let c = s.clone();
        assert_eq!(c, s);
        assert_eq!(c.encoding(), "hashtable");
        let mut r = c.clone();
        let mut x = 7u64;
        let p = r.pop_random(|| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            x >> 11
        });
        assert!(p.is_some());
        assert_eq!(r.len(), 2);
        assert!(s.contains_member(p.unwrap().as_member()));
    }
}
