//! A list's sequence of chunks, held so that a list of one chunk (most
//! lists) costs no allocation beyond its one buffer and the list itself.
//!
//! A `VecDeque<Chunk>` is 32 bytes in the list and, once it holds a
//! chunk, a 32-byte buffer of its own: a ten-element list of short
//! strings cost a 48-byte list, that buffer and the chunk's 96 bytes. Here
//! one chunk sits inline ([`Chunks::One`]); a second one moves them all
//! into a boxed deque, and a deque that drops back to one chunk (pops,
//! LTRIM, LREM) goes back inline. The enum is 32 bytes (the box and the
//! empty case fit in the niche of the chunk's buffer), so a list is
//! 48 bytes, jemalloc's 48-byte class, with nothing else besides its
//! chunks' buffers.
//!
//! Only what the list uses of a deque is offered: ends, indexing,
//! inserting a chunk in the middle, removal of emptied chunks.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

use super::Chunk;

/// The chunks of a list, head to tail.
#[derive(Clone, Default)]
pub(super) enum Chunks {
    #[default]
    Empty,
    One(Chunk),
    /// Two or more (briefly one or none, until the caller's operation
    /// ends and [`Chunks::settle`] runs). Boxed on purpose: the box's
    /// pointer fits beside the chunk's niche, the deque's 32 bytes would
    /// make the enum 40 and the list 56 (the 64-byte class).
    #[allow(clippy::box_collection)]
    Many(Box<VecDeque<Chunk>>),
}

impl Chunks {
    /// Number of chunks.
    #[inline]
    pub(super) fn len(&self) -> usize {
        match self {
            Chunks::Empty => 0,
            Chunks::One(_) => 1,
            Chunks::Many(d) => d.len(),
        }
    }

    /// Heap bytes of the chunk array itself (not of the chunks' buffers).
    pub(super) fn array_size(&self) -> usize {
        match self {
            Chunks::Many(d) => {
                std::mem::size_of::<VecDeque<Chunk>>() + d.capacity() * std::mem::size_of::<Chunk>()
            }
            _ => 0,
        }
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&Chunk> {
        match self {
            Chunks::Empty => None,
            Chunks::One(c) => (i == 0).then_some(c),
            Chunks::Many(d) => d.get(i),
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut Chunk> {
        match self {
            Chunks::Empty => None,
            Chunks::One(c) => (i == 0).then_some(c),
            Chunks::Many(d) => d.get_mut(i),
        }
    }

    #[inline]
    pub(super) fn front_mut(&mut self) -> Option<&mut Chunk> {
        self.get_mut(0)
    }

    #[inline]
    pub(super) fn back_mut(&mut self) -> Option<&mut Chunk> {
        match self {
            Chunks::Empty => None,
            Chunks::One(c) => Some(c),
            Chunks::Many(d) => d.back_mut(),
        }
    }

    /// Head to tail.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &Chunk> + '_ {
        let (a, b): (&[Chunk], &[Chunk]) = match self {
            Chunks::Empty => (&[], &[]),
            Chunks::One(c) => (std::slice::from_ref(c), &[]),
            Chunks::Many(d) => d.as_slices(),
        };
        a.iter().chain(b)
    }

    /// The deque, the chunks moved into one first if they were not.
    fn deque(&mut self) -> &mut VecDeque<Chunk> {
        if !matches!(self, Chunks::Many(_)) {
            let mut d = VecDeque::with_capacity(4);
            if let Chunks::One(c) = std::mem::take(self) {
                d.push_back(c);
            }
            *self = Chunks::Many(Box::new(d));
        }
        match self {
            Chunks::Many(d) => d,
            _ => unreachable!("made a deque above"),
        }
    }

    /// Back inline when one chunk (or none) is left.
    #[inline]
    fn settle(&mut self) {
        if let Chunks::Many(d) = self {
            if d.len() <= 1 {
                *self = match d.pop_front() {
                    Some(c) => Chunks::One(c),
                    None => Chunks::Empty,
                };
            }
        }
    }

    pub(super) fn push_front(&mut self, c: Chunk) {
        match self {
            Chunks::Empty => *self = Chunks::One(c),
            _ => self.deque().push_front(c),
        }
    }

    pub(super) fn push_back(&mut self, c: Chunk) {
        match self {
            Chunks::Empty => *self = Chunks::One(c),
            _ => self.deque().push_back(c),
        }
    }

    /// Inserts `c` so that it becomes chunk `i` (`i <= len`).
    pub(super) fn insert(&mut self, i: usize, c: Chunk) {
        match self {
            Chunks::Empty => *self = Chunks::One(c),
            _ => self.deque().insert(i, c),
        }
    }

    pub(super) fn pop_front(&mut self) {
        match self {
            Chunks::Empty => {}
            Chunks::One(_) => *self = Chunks::Empty,
            Chunks::Many(d) => {
                d.pop_front();
                self.settle();
            }
        }
    }

    pub(super) fn pop_back(&mut self) {
        match self {
            Chunks::Empty => {}
            Chunks::One(_) => *self = Chunks::Empty,
            Chunks::Many(d) => {
                d.pop_back();
                self.settle();
            }
        }
    }

    pub(super) fn clear(&mut self) {
        *self = Chunks::Empty;
    }

    /// Keeps the chunks `keep` says yes to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Chunk) -> bool) {
        match self {
            Chunks::Empty => {}
            Chunks::One(c) => {
                if !keep(c) {
                    *self = Chunks::Empty;
                }
            }
            Chunks::Many(d) => {
                d.retain(|c| keep(c));
                self.settle();
            }
        }
    }
}

impl Index<usize> for Chunks {
    type Output = Chunk;
    #[inline]
    fn index(&self, i: usize) -> &Chunk {
        match self.get(i) {
            Some(c) => c,
            None => panic!("chunk {i} of {}", self.len()),
        }
    }
}

impl IndexMut<usize> for Chunks {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut Chunk {
        let n = self.len();
        match self.get_mut(i) {
            Some(c) => c,
            None => panic!("chunk {i} of {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the list's memory depends on (docs/memory.md).
    #[test]
    fn one_chunk_is_inline_and_the_list_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Chunk>(), 32);
        assert_eq!(std::mem::size_of::<Chunks>(), 32);
        assert_eq!(std::mem::size_of::<super::super::List>(), 48);
    }

    /// Chunks move into a deque at the second and back inline at one,
    /// keeping their order.
    #[test]
    fn goes_to_a_deque_and_back() {
        let mut c = Chunks::default();
        c.push_back(Chunk::with(b"b"));
        assert!(matches!(c, Chunks::One(_)));
        c.push_front(Chunk::with(b"a"));
        c.insert(2, Chunk::with(b"d"));
        c.insert(2, Chunk::with(b"c"));
        assert_eq!(c.len(), 4);
        let firsts: Vec<Vec<u8>> = c.iter().map(|k| k.get(0)).collect();
        assert_eq!(firsts, [&b"a"[..], b"b", b"c", b"d"]);
        assert_eq!(c[3].get(0), b"d");
        c.pop_front();
        c.retain(|k| k.get(0) != b"c");
        c.pop_back();
        assert!(matches!(c, Chunks::One(_)));
        assert_eq!(c[0].get(0), b"b");
        assert!(c.get(1).is_none());
        c.pop_back();
        assert!(matches!(c, Chunks::Empty));
        assert_eq!(c.len(), 0);
    }
}
