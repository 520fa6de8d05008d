//! A job's body: one allocation holding its length and then its bytes,
//! behind one pointer. A `Box<[u8]>` is a pointer and a length, 16 bytes
//! in every job slot; this is 8, which takes a slot from 112 bytes to 104
//! (see `jobs.rs`, `CHUNK`). The length costs 8 bytes in the body's own
//! allocation instead, which for most sizes stays in the same jemalloc
//! size class (100 bytes and 108 both take the 112-byte class).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ops::Deref;
use std::ptr::NonNull;

const HEADER: usize = std::mem::size_of::<usize>();

/// Immutable bytes behind a thin pointer (owned, like a `Box<[u8]>`).
pub struct Body(NonNull<u8>);

// SAFETY: a `Body` owns its allocation alone and never mutates it after
// construction, as a `Box<[u8]>` does.
unsafe impl Send for Body {}
// SAFETY: shared access only reads.
unsafe impl Sync for Body {}

fn layout(len: usize) -> Layout {
    // A slice that exists is far below `isize::MAX` bytes.
    Layout::from_size_align(HEADER + len, std::mem::align_of::<usize>()).expect("body layout")
}

impl Body {
    pub fn new(bytes: &[u8]) -> Body {
        let l = layout(bytes.len());
        // SAFETY: `l` has a non-zero size (the header).
        let p = unsafe { alloc(l) };
        let Some(p) = NonNull::new(p) else { handle_alloc_error(l) };
        // SAFETY: `p` is valid for `HEADER + len` bytes and aligned for a
        // `usize`; the source slice does not overlap a fresh allocation.
        unsafe {
            p.as_ptr().cast::<usize>().write(bytes.len());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.as_ptr().add(HEADER), bytes.len());
        }
        Body(p)
    }

    #[inline]
    pub fn len(&self) -> usize {
        // SAFETY: the header was written at construction and is aligned.
        unsafe { self.0.as_ptr().cast::<usize>().read() }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Deref for Body {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes follow the header, owned by
        // `self` for the borrow's lifetime.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(HEADER), self.len()) }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(self.0.as_ptr(), layout(self.len())) }
    }
}

impl Clone for Body {
    fn clone(&self) -> Body {
        Body::new(self)
    }
}

impl PartialEq for Body {
    fn eq(&self, o: &Body) -> bool {
        **self == **o
    }
}

impl Eq for Body {}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

impl From<&[u8]> for Body {
    fn from(b: &[u8]) -> Body {
        Body::new(b)
    }
}

impl From<Vec<u8>> for Body {
    fn from(b: Vec<u8>) -> Body {
        Body::new(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_its_bytes_behind_one_pointer() {
        assert_eq!(std::mem::size_of::<Body>(), 8);
        assert_eq!(std::mem::size_of::<Option<Body>>(), 8);
        for n in [0usize, 1, 7, 8, 100, 4096] {
            let v: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let b = Body::new(&v);
            assert_eq!(b.len(), n);
            assert_eq!(&*b, &v[..]);
            let c = b.clone();
            drop(b);
            assert_eq!(&*c, &v[..]);
        }
    }
}
