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

/// A growable byte string held in a value without a box: its pointer,
/// length and capacity are the value's own bytes (23 of them, byte-aligned,
/// so the value's tag fits beside them and a `Value` stays 24 bytes). A
/// `Box<Vec<u8>>` cost a 32-byte allocation for the vector's three words
/// on top of the bytes and a pointer chase to reach them; this holds what
/// `Vec` holds and hands out a real `Vec` for the few writers that grow it
/// ([`RawStr::vec_mut`]).
///
/// The length is 64 bits, the capacity 56 (64 PiB): a string past either
/// cannot be allocated.
#[repr(C, packed)]
pub struct RawStr {
    ptr: *mut u8,
    len: usize,
    cap: [u8; 7],
}

// SAFETY: a `RawStr` owns its bytes exactly as the `Vec<u8>` it was made
// from does; nothing else points at them.
unsafe impl Send for RawStr {}
// SAFETY: shared access only reads the bytes (`Deref`); writes need `&mut`.
unsafe impl Sync for RawStr {}

impl RawStr {
    /// Takes `v`'s allocation as it is (no copy, no shrink).
    pub fn from_vec(v: Vec<u8>) -> Self {
        let mut v = std::mem::ManuallyDrop::new(v);
        let (ptr, len, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
        RawStr { ptr, len, cap: pack_cap(cap) }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes allocated (the vector's capacity).
    #[inline]
    pub fn capacity(&self) -> usize {
        let c = self.cap;
        let mut w = [0u8; 8];
        w[..7].copy_from_slice(&c);
        usize::from_le_bytes(w)
    }

    /// The bytes as a `Vec` to grow or edit in place; written back when the
    /// guard drops (also on unwinding, so the allocation is never lost or
    /// freed twice).
    pub fn vec_mut(&mut self) -> RawVec<'_> {
        // SAFETY: the parts are those of a live `Vec<u8>` (from `from_vec`
        // or written back by an earlier guard); the guard is the only owner
        // until it writes them back.
        let v = unsafe { Vec::from_raw_parts(self.ptr, self.len, self.capacity()) };
        RawVec { owner: self, v: std::mem::ManuallyDrop::new(v) }
    }

    /// Gives the allocation back as a `Vec`.
    pub fn into_vec(self) -> Vec<u8> {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: as in `vec_mut`; `me` is not dropped, so the parts have
        // one owner, the returned vector.
        unsafe { Vec::from_raw_parts(me.ptr, me.len, me.capacity()) }
    }
}

fn pack_cap(cap: usize) -> [u8; 7] {
    assert!(cap >> 56 == 0, "a string of 64 PiB");
    let b = cap.to_le_bytes();
    [b[0], b[1], b[2], b[3], b[4], b[5], b[6]]
}

impl Drop for RawStr {
    fn drop(&mut self) {
        // SAFETY: as in `vec_mut`; this is the last use of the parts.
        drop(unsafe { Vec::from_raw_parts(self.ptr, self.len, self.capacity()) });
    }
}

impl Deref for RawStr {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialised bytes (a `Vec`'s parts),
        // borrowed for as long as `self` is.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl AsRef<[u8]> for RawStr {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Clone for RawStr {
    fn clone(&self) -> Self {
        RawStr::from_vec(self.to_vec())
    }
}

impl PartialEq for RawStr {
    fn eq(&self, o: &Self) -> bool {
        **self == **o
    }
}

impl Eq for RawStr {}

impl fmt::Debug for RawStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// A [`RawStr`]'s bytes lent out as a `Vec<u8>` ([`RawStr::vec_mut`]).
pub struct RawVec<'a> {
    owner: &'a mut RawStr,
    v: std::mem::ManuallyDrop<Vec<u8>>,
}

impl Deref for RawVec<'_> {
    type Target = Vec<u8>;
    #[inline]
    fn deref(&self) -> &Vec<u8> {
        &self.v
    }
}

impl std::ops::DerefMut for RawVec<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.v
    }
}

impl Drop for RawVec<'_> {
    fn drop(&mut self) {
        let (ptr, len, cap) = (self.v.as_mut_ptr(), self.v.len(), self.v.capacity());
        self.owner.ptr = ptr;
        self.owner.len = len;
        self.owner.cap = pack_cap(cap);
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

    #[test]
    fn raw_str_grows_through_its_vec_and_keeps_its_bytes() {
        assert_eq!(std::mem::size_of::<RawStr>(), 23);
        let mut r = RawStr::from_vec(b"hello".to_vec());
        assert_eq!(&*r, b"hello");
        {
            let mut v = r.vec_mut();
            v.extend_from_slice(&[b'!'; 1000]);
        }
        assert_eq!(r.len(), 1005);
        assert!(r.capacity() >= 1005);
        assert_eq!(&r[..6], b"hello!");
        let c = r.clone();
        assert_eq!(c, r);
        r.vec_mut().truncate(2);
        assert_eq!(&*r, b"he");
        assert_eq!(r.into_vec(), b"he".to_vec());
        let e = RawStr::from_vec(Vec::new());
        assert!(e.is_empty());
        assert_eq!(&*e, b"");
    }
}
