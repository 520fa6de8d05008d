//! The hash value type and its encodings.
//!
//! While small a hash is a `listpack`: an insertion-ordered vector of
//! (field, value) pairs with inline short strings, so HGETALL and friends
//! reply in the order Redis's listpack would. Past the configured
//! thresholds it becomes a `hashtable` ([`Table`]), as Redis converts, and
//! never goes back.

use std::fmt;

use crate::bytes::SmallBytes;
use crate::table::Table;

/// A hash value.
#[derive(Default)]
pub struct Hash {
    repr: Repr,
}

enum Repr {
    Pack(Vec<(SmallBytes, SmallBytes)>),
    Table(Table<SmallBytes>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Pack(Vec::new())
    }
}

/// Iterator over (field, value) pairs in encoding order.
pub enum Iter<'a> {
    Pack(std::slice::Iter<'a, (SmallBytes, SmallBytes)>),
    Table(Box<dyn Iterator<Item = (&'a [u8], &'a SmallBytes)> + 'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(it) => it.next().map(|(f, v)| (&f[..], &v[..])),
            Iter::Table(it) => it.next().map(|(f, v)| (f, &v[..])),
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
            Repr::Pack(v) => v.len(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        let strings: usize = match &self.repr {
            Repr::Pack(v) => v.iter().map(|(f, x)| f.heap_size() + x.heap_size()).sum(),
            Repr::Table(t) => t.iter().map(|(f, x)| f.len() + x.heap_size()).sum(),
        };
        let slots = match &self.repr {
            Repr::Pack(v) => v.capacity() * std::mem::size_of::<(SmallBytes, SmallBytes)>(),
            Repr::Table(t) => t.buckets() * 4 + t.len() * 2 * std::mem::size_of::<SmallBytes>(),
        };
        strings + slots
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Pack(v) => v.iter().find(|(f, _)| &f[..] == field).map(|(_, x)| &x[..]),
            Repr::Table(t) => t.get(field).map(|x| &x[..]),
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
            Repr::Pack(v) => match v.iter_mut().find(|(f, _)| &f[..] == field) {
                Some((_, x)) => {
                    *x = SmallBytes::new(value);
                    false
                }
                None => {
                    v.push((SmallBytes::new(field), SmallBytes::new(value)));
                    true
                }
            },
            Repr::Table(t) => t.insert(field, SmallBytes::new(value)).1.is_none(),
        };
        if self.is_listpack() && self.len() > max_entries {
            self.convert();
        }
        added
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Pack(v) => match v.iter().position(|(f, _)| &f[..] == field) {
                Some(i) => {
                    v.remove(i);
                    true
                }
                None => false,
            },
            Repr::Table(t) => t.remove(field).is_some(),
        }
    }

    /// Pairs in encoding order (insertion order for listpacks).
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Pack(v) => Iter::Pack(v.iter()),
            Repr::Table(t) => Iter::Table(Box::new(t.iter())),
        }
    }

    /// One step of HSCAN: visits some pairs and returns the next cursor. A
    /// listpack is visited whole and answers cursor 0, as Redis does.
    pub fn scan(&self, cursor: u64, mut visit: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Pack(v) => {
                for (f, x) in v {
                    visit(f, x);
                }
                0
            }
            Repr::Table(t) => t.scan(cursor, |f, x| visit(f, x)),
        }
    }

    /// A random pair (uniform for listpacks, bucket-biased for tables as
    /// in Redis).
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        match &self.repr {
            Repr::Pack(v) => {
                if v.is_empty() {
                    return None;
                }
                let (f, x) = &v[(rand() % v.len() as u64) as usize];
                Some((f, x))
            }
            Repr::Table(t) => {
                let i = t.random_index(rand)?;
                t.at(i).map(|(f, x)| (f, &x[..]))
            }
        }
    }

    fn convert(&mut self) {
        if let Repr::Pack(v) = &mut self.repr {
            let mut t = Table::new();
            for (f, x) in v.drain(..) {
                t.insert_owned(f, x);
            }
            self.repr = Repr::Table(t);
        }
    }
}

impl Clone for Hash {
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Pack(v) => Hash { repr: Repr::Pack(v.clone()) },
            Repr::Table(t) => {
                let mut n = Table::new();
                for (f, x) in t.iter() {
                    n.insert(f, x.clone());
                }
                Hash { repr: Repr::Table(n) }
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
}
