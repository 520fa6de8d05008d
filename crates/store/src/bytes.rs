//! `SmallBytes`: a byte string stored inline when short.
//!
//! Keys and short string values are mostly under 23 bytes; keeping them
//! inside the table node (instead of behind a pointer) saves one cache
//! miss per lookup and one allocation per key.

use std::fmt;
use std::ops::Deref;

/// Longest string kept inline.
pub const INLINE_MAX: usize = 22;

/// An immutable byte string, inline up to [`INLINE_MAX`] bytes.
#[derive(Clone)]
pub enum SmallBytes {
    Inline { len: u8, buf: [u8; INLINE_MAX] },
    Heap(Box<[u8]>),
}

impl SmallBytes {
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE_MAX {
            let mut buf = [0u8; INLINE_MAX];
            buf[..b.len()].copy_from_slice(b);
            SmallBytes::Inline { len: b.len() as u8, buf }
        } else {
            SmallBytes::Heap(b.into())
        }
    }

    /// Heap bytes owned (0 when inline).
    pub fn heap_size(&self) -> usize {
        match self {
            SmallBytes::Inline { .. } => 0,
            SmallBytes::Heap(b) => b.len(),
        }
    }
}

impl Deref for SmallBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, buf } => &buf[..*len as usize],
            SmallBytes::Heap(b) => b,
        }
    }
}

impl AsRef<[u8]> for SmallBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl From<&[u8]> for SmallBytes {
    fn from(b: &[u8]) -> Self {
        SmallBytes::new(b)
    }
}

impl PartialEq for SmallBytes {
    fn eq(&self, o: &Self) -> bool {
        **self == **o
    }
}

impl Eq for SmallBytes {}

impl fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap() {
        assert_eq!(std::mem::size_of::<SmallBytes>(), 24);
        assert_eq!(std::mem::size_of::<Option<SmallBytes>>(), 24);
        let a = SmallBytes::new(b"hello");
        assert!(matches!(a, SmallBytes::Inline { .. }));
        assert_eq!(&*a, b"hello");
        let long = vec![7u8; 23];
        let b = SmallBytes::new(&long);
        assert!(matches!(b, SmallBytes::Heap(_)));
        assert_eq!(&*b, &long[..]);
    }
}
