//! Values and their compact encodings.

use crate::bytes::{RawStr, RawVec, SmallBytes};
use crate::types::hll::{self, PackedHll};
use crate::types::{Hash, List, Set, Stream, ZSet};

/// Longest string stored in the `embstr` encoding (Redis's
/// `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`).
pub const EMBSTR_MAX: usize = 44;

/// Integers below this are Redis's shared integers (`OBJECT REFCOUNT`
/// reports them as shared).
pub const SHARED_INTEGERS: i64 = 10_000;

/// A stored value. Strings carry the encoding Redis would report; the other
/// types are added by the data-type families.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string that is the canonical decimal form of an `i64`.
    Int(i64),
    /// A short string that was stored whole (`embstr`); inline when it
    /// fits in the value itself.
    Emb(SmallBytes),
    /// A string that may grow in place (`raw`: APPEND, SETRANGE, long
    /// values): the bytes' pointer, length and capacity held in the value
    /// itself ([`RawStr`]), one allocation of the bytes and nothing else.
    /// Build one with [`Value::raw`].
    Raw(RawStr),
    /// A dense HyperLogLog, four bits a register ([`PackedHll`]): a `raw`
    /// string whose every view is Redis's dense string, rebuilt on demand.
    /// A write through a string command makes it [`Value::Raw`] first.
    Hll(PackedHll),
    List(Box<List>),
    /// Hashes, sets and sorted sets are not boxed: each is 16 bytes, and a
    /// small one (a listpack, an intset) then costs its one allocation.
    Hash(Hash),
    Set(Set),
    ZSet(ZSet),
    Stream(Box<Stream>),
}

/// Room for a string value's bytes when the value does not hold them as
/// they are: an integer's digits, a packed HyperLogLog's Redis string.
#[derive(Default)]
pub struct StrBuf {
    small: [u8; 24],
    big: Vec<u8>,
}

impl StrBuf {
    pub fn new() -> StrBuf {
        StrBuf::default()
    }
}

/// The type names `TYPE` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String,
    List,
    Set,
    ZSet,
    Hash,
    Stream,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Hash => "hash",
            Kind::Stream => "stream",
        }
    }
}

impl Value {
    /// A pipelined command's member stage (`Store::with_member_value`):
    /// for a set or a hash in a hash table, or a sorted set in its big
    /// encoding, `member`'s hash there, with its bucket prefetched; 0 for
    /// anything else.
    #[inline]
    pub fn prefetch_member(&self, member: &[u8]) -> u64 {
        match self {
            Value::Set(s) => s.prefetch_member(member),
            Value::Hash(h) => h.prefetch_field(member),
            Value::ZSet(z) => z.prefetch_member(member),
            _ => 0,
        }
    }

    /// The stages after [`prefetch_member`](Self::prefetch_member): the
    /// first node of hash `h`'s chain, or (`second`) the next one.
    #[inline]
    pub fn prefetch_member_node(&self, h: u64, second: bool) {
        match self {
            Value::Set(s) => s.prefetch_member_node(h, second),
            Value::Hash(x) => x.prefetch_field_node(h, second),
            Value::ZSet(z) => z.prefetch_member_node(h, second),
            _ => {}
        }
    }

    /// Builds a string value the way Redis's `tryObjectEncoding` would store
    /// a client argument: `int` when it is a canonical 64-bit integer of at
    /// most 20 characters, `embstr` up to 44 bytes, else `raw`.
    pub fn from_arg(b: &[u8]) -> Value {
        if b.len() <= 20 {
            if let Some(i) = parse_canonical_i64(b) {
                return Value::Int(i);
            }
        }
        Value::str_exact(b)
    }

    /// Drops a value that was replaced, calling its drop glue only when
    /// it may own memory: an integer or an inline string (what a SET or
    /// an INCR usually overwrites) is let go in line, where the glue's
    /// out-of-line call was some 25 instructions of a pipelined INCR.
    #[inline(always)]
    pub fn discard(self) {
        if matches!(self, Value::Int(_) | Value::Emb(SmallBytes::Inline { .. })) {
            // Nothing to free: neither variant holds a pointer.
            std::mem::forget(self);
        } else {
            drop(self);
        }
    }

    /// A string value read from a snapshot or a DUMP payload: as a
    /// client's argument ([`Value::from_arg`]), except that a dense
    /// HyperLogLog (Redis's 12,304-byte string with a dense header) is
    /// held packed ([`PackedHll`]) from the start, as its first PF write
    /// would leave it, rather than at Redis's size until then. The
    /// packed form gives back the same bytes to every reader.
    pub fn loaded_string(b: &[u8]) -> Value {
        if b.len() == hll::REDIS_DENSE_LEN && b.starts_with(b"HYLL") && b[4] == hll::DENSE {
            if let Some(p) = PackedHll::pack(b) {
                return Value::Hll(p);
            }
        }
        Value::from_arg(b)
    }

    /// A string value without integer detection (`embstr` or `raw` by size).
    pub fn str_exact(b: &[u8]) -> Value {
        if b.len() <= EMBSTR_MAX {
            Value::Emb(SmallBytes::new(b))
        } else {
            Value::raw(b.to_vec())
        }
    }

    /// A `raw` string value owning `v`.
    pub fn raw(v: Vec<u8>) -> Value {
        Value::Raw(RawStr::from_vec(v))
    }

    pub fn kind(&self) -> Kind {
        match self {
            Value::Int(_) | Value::Emb(_) | Value::Raw(_) | Value::Hll(_) => Kind::String,
            Value::List(_) => Kind::List,
            Value::Hash(_) => Kind::Hash,
            Value::Set(_) => Kind::Set,
            Value::ZSet(_) => Kind::ZSet,
            Value::Stream(_) => Kind::Stream,
        }
    }

    pub fn is_string(&self) -> bool {
        self.kind() == Kind::String
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Emb(_) => "embstr",
            Value::Raw(_) | Value::Hll(_) => "raw",
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(s) => s.encoding(),
        }
    }

    /// String bytes, formatting integers (or rebuilding a packed
    /// HyperLogLog's string) into `buf`. `None` if not a string.
    pub fn as_bytes<'a>(&'a self, buf: &'a mut StrBuf) -> Option<&'a [u8]> {
        match self {
            Value::Int(i) => {
                let n = fmt_i64(*i, &mut buf.small);
                Some(&buf.small[..n])
            }
            Value::Emb(b) => Some(b),
            Value::Raw(v) => Some(v),
            Value::Hll(h) => {
                buf.big.resize(hll::REDIS_DENSE_LEN, 0);
                h.write_redis(&mut buf.big);
                Some(&buf.big)
            }
            _ => None,
        }
    }

    /// Length of the string form.
    pub fn str_len(&self) -> Option<usize> {
        match self {
            Value::Int(i) => {
                let mut b = [0u8; 24];
                Some(fmt_i64(*i, &mut b))
            }
            Value::Emb(b) => Some(b.len()),
            Value::Raw(v) => Some(v.len()),
            Value::Hll(_) => Some(hll::REDIS_DENSE_LEN),
            _ => None,
        }
    }

    /// Converts a string value to `raw` (Redis's `dbUnshareStringValue`)
    /// and returns its growable bytes.
    pub fn make_raw(&mut self) -> Option<RawVec<'_>> {
        match self {
            Value::Raw(_) => {}
            Value::Int(i) => {
                let mut b = [0u8; 24];
                let n = fmt_i64(*i, &mut b);
                *self = Value::raw(b[..n].to_vec());
            }
            Value::Emb(b) => *self = Value::raw(b.to_vec()),
            Value::Hll(h) => *self = Value::raw(h.to_redis()),
            _ => return None,
        }
        match self {
            Value::Raw(v) => Some(v.vec_mut()),
            _ => None,
        }
    }

    /// Approximate heap bytes owned by this value (for memory reports).
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Int(_) => 0,
            Value::Emb(b) => b.heap_size(),
            Value::Raw(v) => v.capacity(),
            Value::Hll(h) => h.heap_size(),
            Value::List(l) => l.heap_size(),
            Value::Hash(h) => h.heap_size(),
            Value::Set(s) => s.heap_size(),
            Value::ZSet(z) => z.heap_size(),
            Value::Stream(s) => s.heap_size(),
        }
    }
}

/// Canonical decimal integer check (Redis's `string2l`).
pub fn parse_canonical_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, d) = if b[0] == b'-' { (true, &b[1..]) } else { (false, b) };
    if !matches!(d.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut v: i128 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(c - b'0');
        if v > i128::from(i64::MAX) + 1 {
            return None;
        }
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

/// Formats an integer into `buf`, returning its length.
pub fn fmt_i64(v: i64, buf: &mut [u8; 24]) -> usize {
    let mut tmp = [0u8; 24];
    let mut n = v.unsigned_abs();
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        tmp[i] = b'-';
    }
    let len = tmp.len() - i;
    buf[..len].copy_from_slice(&tmp[i..]);
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_follow_redis_thresholds() {
        assert_eq!(Value::from_arg(b"123").encoding(), "int");
        assert_eq!(Value::from_arg(b"0123").encoding(), "embstr");
        assert_eq!(Value::from_arg(b"-9223372036854775808").encoding(), "int");
        assert_eq!(Value::from_arg(b"9223372036854775808").encoding(), "embstr");
        assert_eq!(Value::from_arg(&[b'a'; 44]).encoding(), "embstr");
        assert_eq!(Value::from_arg(&[b'a'; 45]).encoding(), "raw");
        let mut v = Value::from_arg(b"12");
        v.make_raw().unwrap().push(b'3');
        assert_eq!(v, Value::raw(b"123".to_vec()));
    }

    /// The member stages find a table only in a set or hash held as one,
    /// hash as the table itself does (its bucket is the member's), and
    /// take any hash, present or not, without harm.
    #[test]
    fn member_prefetch_finds_tables_only() {
        use crate::types::{Hash, Set};
        let mut ints = Set::new_ints();
        ints.add(b"1", 512);
        let mut small = Hash::new();
        small.set(b"f", b"v", 128, 64);
        for v in [Value::from_arg(b"x"), Value::Set(ints), Value::Hash(small)] {
            assert_eq!(v.prefetch_member(b"1"), 0);
            v.prefetch_member_node(12345, false);
            v.prefetch_member_node(12345, true);
        }
        let mut zsmall = crate::types::ZSet::new_listpack();
        zsmall.set(b"1", 1.0, crate::types::zset::Limits { max_entries: 128, max_value: 64 });
        assert_eq!(Value::ZSet(zsmall).prefetch_member(b"1"), 0);
        let mut zset = crate::types::ZSet::new_skiplist();
        let mut set = Set::new_for(b"m");
        let mut hash = Hash::new();
        for i in 0..300 {
            set.add(format!("m:{i}").as_bytes(), 512);
            zset.set(
                format!("m:{i}").as_bytes(),
                f64::from(i),
                crate::types::zset::Limits { max_entries: 128, max_value: 64 },
            );
            hash.set(format!("f:{i}").as_bytes(), b"v", 128, 64);
        }
        assert_eq!(set.encoding(), "hashtable");
        assert_eq!(hash.encoding(), "hashtable");
        let set = Value::Set(set);
        let Value::Set(Set::Hash(t)) = &set else { unreachable!() };
        assert_eq!(set.prefetch_member(b"m:7"), t.hash_of(b"m:7"));
        for v in [set, Value::Hash(hash), Value::ZSet(zset)] {
            for m in [&b"m:7"[..], b"f:7", b"absent"] {
                let h = v.prefetch_member(m);
                assert_ne!(h, 0);
                v.prefetch_member_node(h, false);
                v.prefetch_member_node(h, true);
                v.prefetch_member_node(!h, true);
            }
        }
    }
}

#[cfg(test)]
mod size_tests {
    /// The per-key cost depends on these staying small.
    #[test]
    fn value_and_entry_sizes() {
        // Held in the `Value` itself, beside its tag.
        assert_eq!(std::mem::size_of::<crate::types::Set>(), 16);
        assert_eq!(std::mem::size_of::<crate::types::ZSet>(), 16);
        assert_eq!(std::mem::size_of::<crate::types::Hash>(), 16);
        assert_eq!(std::mem::size_of::<super::Value>(), 24);
        assert_eq!(std::mem::size_of::<crate::Entry>(), 32);
    }
}
