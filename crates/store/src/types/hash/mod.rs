//! The hash value type and its encodings.
//!
//! While small a hash is a `listpack`: fields and values packed back to
//! back in one buffer, each string behind a varint length, in insertion
//! order so HGETALL and friends reply in the order Redis's listpack would.
//! A pair costs its bytes plus two (for strings under 128 bytes), as in
//! Redis. The buffer is one exact-size allocation and no count is kept
//! (it is a walk of at most `hash-max-listpack-entries` pairs, as every
//! listpack operation is), so a hash is 16 bytes and lives in its key's
//! value without a box of its own; appends reallocate as Redis's
//! `lpInsert` does, in place while the size class holds. Past the
//! configured thresholds it becomes a `hashtable` ([`Pairs`], a table
//! whose node holds a field and its value together), as Redis converts,
//! and never goes back.

mod pairs;

use std::fmt;

use crate::types::list::{read_varint, varint_len, write_varint};
use pairs::Pairs;
pub use pairs::PairsIter;

/// A hash value.
#[derive(Default)]
pub struct Hash {
    repr: Repr,
}

enum Repr {
    /// Pairs as `len field len value`, `len` a LEB128 varint.
    Pack(Box<[u8]>),
    /// Boxed: its pointer sits beside the packed buffer's, so a hash is
    /// 16 bytes whichever its encoding.
    Table(Box<Pairs>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Pack(Box::default())
    }
}

/// Runs `f` on the packed buffer as a vector, then stores it back at its
/// exact length (jemalloc resizes in place within a size class).
fn edit<R>(buf: &mut Box<[u8]>, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut v = std::mem::take(buf).into_vec();
    let r = f(&mut v);
    *buf = v.into_boxed_slice();
    r
}

/// Walks a packed buffer pair by pair.
#[derive(Clone)]
pub struct PackIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> PackIter<'a> {
    fn new(buf: &'a [u8]) -> Self {
        PackIter { buf, pos: 0 }
    }

    #[inline]
    fn string(&mut self) -> &'a [u8] {
        let (len, at) = read_varint(self.buf, self.pos);
        self.pos = at + len;
        &self.buf[at..at + len]
    }
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let f = self.string();
        Some((f, self.string()))
    }
}

/// Where `field` is in a packed buffer: (pair start, value start, pair end).
fn pack_find(buf: &[u8], field: &[u8]) -> Option<(usize, usize, usize)> {
    let mut pos = 0;
    while pos < buf.len() {
        let (flen, at) = read_varint(buf, pos);
        let vstart = at + flen;
        let (vlen, vat) = read_varint(buf, vstart);
        let end = vat + vlen;
        if flen == field.len() && &buf[at..vstart] == field {
            return Some((pos, vstart, end));
        }
        pos = end;
    }
    None
}

fn pack_push(buf: &mut Vec<u8>, s: &[u8]) {
    write_varint(buf, s.len());
    buf.extend_from_slice(s);
}

/// Iterator over (field, value) pairs in encoding order.
pub enum Iter<'a> {
    Pack(PackIter<'a>),
    Table(PairsIter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(it) => it.next(),
            Iter::Table(it) => it.next(),
        }
    }
}

impl Hash {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(buf) => PackIter::new(buf).count(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Pack(buf) => buf.is_empty(),
            Repr::Table(t) => t.len() == 0,
        }
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Pack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Pack(_))
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Pack(buf) => buf.len(),
            Repr::Table(t) => t.heap_size(),
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Pack(buf) => pack_find(buf, field).map(|(_, vstart, end)| {
                let (_, at) = read_varint(buf, vstart);
                &buf[at..end]
            }),
            Repr::Table(t) => t.get(field),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; true if the field is new. Converts to the
    /// hashtable when either string is longer than `max_value` or the
    /// listpack grows past `max_entries` (Redis 7.0's `hashTypeSet`).
    pub fn set(
        &mut self,
        field: &[u8],
        value: &[u8],
        max_entries: usize,
        max_value: usize,
    ) -> bool {
        if field.len() > max_value || value.len() > max_value {
            self.convert();
        }
        let added = match &mut self.repr {
            Repr::Pack(buf) => match pack_find(buf, field) {
                Some((_, vstart, end)) => {
                    let (vlen, at) = read_varint(buf, vstart);
                    if vlen == value.len() {
                        buf[at..end].copy_from_slice(value);
                    } else {
                        let mut enc = Vec::with_capacity(varint_len(value.len()) + value.len());
                        pack_push(&mut enc, value);
                        edit(buf, |v| {
                            v.splice(vstart..end, enc);
                        });
                    }
                    false
                }
                None => {
                    let need = varint_len(field.len())
                        + field.len()
                        + varint_len(value.len())
                        + value.len();
                    edit(buf, |v| {
                        v.reserve_exact(need);
                        pack_push(v, field);
                        pack_push(v, value);
                    });
                    true
                }
            },
            Repr::Table(t) => t.set(field, value),
        };
        // Redis checks the count after every listpack write (a lowered
        // `hash-max-listpack-entries` converts on an update too). A pair
        // takes at least two bytes, so only a buffer that could hold more
        // than the limit is walked.
        if let Repr::Pack(buf) = &self.repr {
            if buf.len() / 2 > max_entries && PackIter::new(buf).count() > max_entries {
                self.convert();
            }
        }
        added
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Pack(buf) => match pack_find(buf, field) {
                Some((start, _, end)) => {
                    edit(buf, |v| {
                        v.drain(start..end);
                    });
                    true
                }
                None => false,
            },
            Repr::Table(t) => t.remove(field),
        }
    }

    /// Pairs in encoding order (insertion order for listpacks).
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Pack(buf) => Iter::Pack(PackIter::new(buf)),
            Repr::Table(t) => Iter::Table(t.iter()),
        }
    }

    /// One step of HSCAN: visits some pairs and returns the next cursor. A
    /// listpack is visited whole and answers cursor 0, as Redis does.
    #[inline]
    pub fn scan(&self, cursor: u64, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Pack(buf) => {
                for (f, x) in PackIter::new(buf) {
                    visit(f, x);
                }
                0
            }
            Repr::Table(t) => t.scan(cursor, visit),
        }
    }

    /// A random pair (uniform for listpacks, bucket-biased for tables as
    /// in Redis).
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        match &self.repr {
            Repr::Pack(buf) => {
                let n = PackIter::new(buf).count() as u64;
                if n == 0 {
                    return None;
                }
                PackIter::new(buf).nth((rand() % n) as usize)
            }
            Repr::Table(t) => t.random(rand),
        }
    }

    fn convert(&mut self) {
        if let Repr::Pack(buf) = &self.repr {
            let mut t = Pairs::new();
            for (f, x) in PackIter::new(buf) {
                t.add_new(f, x);
            }
            self.repr = Repr::Table(Box::new(t));
        }
    }
}

impl Clone for Hash {
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Pack(buf) => Hash { repr: Repr::Pack(buf.clone()) },
            Repr::Table(t) => {
                let mut c = Pairs::new();
                for (f, x) in t.iter() {
                    c.add_new(f, x);
                }
                Hash { repr: Repr::Table(Box::new(c)) }
            }
        }
    }
}

impl PartialEq for Hash {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(f) == Some(v))
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in self.iter() {
            m.entry(&String::from_utf8_lossy(k), &String::from_utf8_lossy(v));
        }
        m.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Hash;

    #[test]
    fn keeps_order_then_converts() {
        let mut h = Hash::new();
        assert!(h.set(b"b", b"1", 3, 64));
        assert!(h.set(b"a", b"2", 3, 64));
        assert!(!h.set(b"b", b"3", 3, 64));
        let v: Vec<_> = h.iter().collect();
        assert_eq!(v, vec![(&b"b"[..], &b"3"[..]), (&b"a"[..], &b"2"[..])]);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"c", b"", 3, 64);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"d", b"", 3, 64);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"b"), Some(&b"3"[..]));
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert_eq!(h.len(), 3);
        assert_eq!(h.clone(), h);
    }

    /// Values change length in place (1- and 2-byte varints), fields are
    /// found past long neighbours, and removal keeps the rest in order.
    #[test]
    fn packed_pairs_resize_in_place() {
        let mut h = Hash::new();
        let long = vec![b'x'; 300];
        assert!(h.set(b"a", b"1", 128, 1000));
        assert!(h.set(&long, b"2", 128, 1000));
        assert!(h.set(b"c", &long, 128, 1000));
        assert!(!h.set(b"a", &long, 128, 1000));
        assert!(!h.set(&long, b"", 128, 1000));
        assert!(!h.set(b"a", b"short", 128, 1000));
        assert_eq!(h.get(b"a"), Some(&b"short"[..]));
        assert_eq!(h.get(&long), Some(&b""[..]));
        assert_eq!(h.get(b"c"), Some(&long[..]));
        assert_eq!(h.get(b"d"), None);
        assert!(h.remove(&long));
        let fields: Vec<&[u8]> = h.iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec![&b"a"[..], b"c"]);
        assert_eq!(h.len(), 2);
        assert_eq!(h.encoding(), "listpack");
        let mut n = 0u64;
        assert!(h
            .random(|| {
                n += 1;
                n
            })
            .is_some());
        assert!(h.remove(b"a") && h.remove(b"c"));
        assert!(h.is_empty() && h.get(b"a").is_none() && h.iter().next().is_none());
    }
}
