//! A queue's order: the slot handles of its queued jobs, ascending by
//! `(creation stamp, handle)`, in a ring of `u32`s. The stamps are not
//! kept here: a job's slot has its stamp, and the few operations that
//! compare (an insert out of order, a removal from the middle) read it
//! there through the `stamp_of` the caller passes, so a queued job costs
//! 4 bytes of ring (a `(stamp, handle)` key took 16). Jobs are queued
//! almost always in creation order (ADDJOB), so an insert is a
//! `push_back`; an older job (NACK, ENQUEUE or a retry of an old job,
//! loading) goes in by binary search. Removal from the front (GETJOB)
//! pops; removal from anywhere else (DEQUEUE, DELJOB, ACKJOB of a queued
//! job) marks the handle dead in place (found by binary search, order
//! kept) instead of moving half the ring, and dead handles are dropped
//! from the ends as they surface and all at once when they outnumber the
//! live ones. A dead handle's slot may already hold another job, so the
//! searches never read a dead entry's stamp: they step over dead entries
//! to the next live one.
//!
//! The caller keeps the invariant that every live handle in a ring is a
//! job queued in that queue (its slot is filled and its stamp unchanged).

use std::collections::VecDeque;

/// Set in a dead entry: handles stay below 2^31 (see `jobs.rs`, `claim`).
const DEAD: u32 = 1 << 31;

/// A job's place in the order.
#[inline]
fn key(stamp: u64, h: u32) -> u128 {
    (u128::from(stamp) << 64) | u128::from(h)
}

/// The queued handles of one queue, ascending, with tombstones.
#[derive(Debug, Default)]
pub(crate) struct Order {
    keys: VecDeque<u32>,
    live: usize,
}

impl Order {
    pub(crate) fn new() -> Order {
        Order::default()
    }

    /// Live handles.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The first position whose live entries all sort at or after `k`
    /// (every live entry before it sorts before `k`). Reads the stamps of
    /// live entries only.
    fn lower_bound(&self, k: u128, stamp_of: &impl Fn(u32) -> u64) -> usize {
        let (mut lo, mut hi) = (0, self.keys.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // The first live entry at or after `mid`, before `hi`.
            let Some(j) = (mid..hi).find(|&j| self.keys[j] & DEAD == 0) else {
                hi = mid;
                continue;
            };
            let h = self.keys[j];
            if key(stamp_of(h), h) < k {
                lo = j + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Adds job `h` (not present) created at `stamp` in its place.
    pub(crate) fn insert(&mut self, h: u32, stamp: u64, stamp_of: impl Fn(u32) -> u64) {
        debug_assert!(h & DEAD == 0, "slot handle at or above 2^31");
        let k = key(stamp, h);
        self.live += 1;
        // The ends are live (`trim`).
        match self.keys.back() {
            Some(&b) if key(stamp_of(b), b) > k => {
                let at = self.lower_bound(k, &stamp_of);
                self.keys.insert(at, h);
            }
            _ => self.keys.push_back(h),
        }
    }

    /// Removes live job `h` created at `stamp`; false when it is not there.
    pub(crate) fn remove(&mut self, h: u32, stamp: u64, stamp_of: impl Fn(u32) -> u64) -> bool {
        let at = self.lower_bound(key(stamp, h), &stamp_of);
        // `h` is the first live entry from `at` on, if it is here (dead
        // entries may be in the way: skip them).
        let found = (at..self.keys.len()).find(|&i| self.keys[i] & DEAD == 0);
        match found {
            Some(i) if self.keys[i] == h => {
                self.keys[i] |= DEAD;
                self.live -= 1;
                self.tidy();
                true
            }
            _ => false,
        }
    }

    /// Takes the first live handle.
    pub(crate) fn pop_first(&mut self) -> Option<u32> {
        while let Some(h) = self.keys.pop_front() {
            if h & DEAD == 0 {
                self.live -= 1;
                self.trim();
                return Some(h);
            }
        }
        None
    }

    /// Live handles, in order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.keys.iter().copied().filter(|&h| h & DEAD == 0)
    }

    /// Drops dead entries at the ends, and every dead entry once they are
    /// more than the live ones (so the ring stays within twice the queue).
    fn tidy(&mut self) {
        self.trim();
        if self.keys.len() > 2 * self.live + 16 {
            self.keys.retain(|&h| h & DEAD == 0);
        }
    }

    fn trim(&mut self) {
        while self.keys.front().is_some_and(|&h| h & DEAD != 0) {
            self.keys.pop_front();
        }
        while self.keys.back().is_some_and(|&h| h & DEAD != 0) {
            self.keys.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    /// An order and its model: the live jobs' stamps by handle (what the
    /// slots would say) and the ordered set of `(stamp, handle)`.
    #[derive(Default)]
    struct Model {
        o: Order,
        stamps: HashMap<u32, u64>,
        want: BTreeSet<(u64, u32)>,
    }

    impl Model {
        fn insert(&mut self, stamp: u64, h: u32) {
            assert!(self.stamps.insert(h, stamp).is_none(), "handle {h} is live");
            self.want.insert((stamp, h));
            let st = &self.stamps;
            self.o.insert(h, stamp, |x| st[&x]);
            self.check();
        }

        fn remove(&mut self, stamp: u64, h: u32) -> bool {
            let st = &self.stamps;
            let r = self.o.remove(h, stamp, |x| st[&x]);
            assert_eq!(r, self.want.remove(&(stamp, h)));
            if r {
                self.stamps.remove(&h);
            }
            self.check();
            r
        }

        fn pop(&mut self) -> Option<u32> {
            let h = self.o.pop_first();
            assert_eq!(h, self.want.pop_first().map(|(_, h)| h));
            if let Some(h) = h {
                self.stamps.remove(&h);
            }
            h
        }

        fn check(&self) {
            assert_eq!(self.o.len(), self.want.len());
            assert_eq!(self.o.is_empty(), self.want.is_empty());
            let hs: Vec<u32> = self.want.iter().map(|&(_, h)| h).collect();
            assert_eq!(self.o.iter().collect::<Vec<_>>(), hs);
            assert_eq!(
                self.o.iter().rev().collect::<Vec<_>>(),
                hs.into_iter().rev().collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn out_of_order_inserts_sort() {
        let mut m = Model::default();
        for (s, h) in [(10, 1), (20, 2), (5, 3), (30, 4), (15, 5), (1, 6), (25, 7)] {
            m.insert(s, h);
        }
        assert_eq!(m.pop(), Some(6));
        assert_eq!(m.pop(), Some(3));
    }

    #[test]
    fn removal_from_the_middle_keeps_order_and_length() {
        let mut m = Model::default();
        for s in 0..100u64 {
            m.insert(s, s as u32);
        }
        for s in (10..90u64).step_by(3) {
            assert!(m.remove(s, s as u32));
            assert!(!m.remove(s, s as u32), "a dead entry is not removed twice");
        }
        // The same job queued again after its removal (NACK after DEQUEUE).
        m.insert(13, 13);
        assert!(m.remove(13, 13));
        assert!(!m.remove(500, 1));
        while m.pop().is_some() {}
        assert!(m.want.is_empty() && m.o.is_empty());
    }

    /// A dead entry's slot reused by a newer job (a different stamp) must
    /// not mislead the searches: they never read a dead entry's stamp.
    #[test]
    fn a_dead_entrys_reused_handle_does_not_mislead_the_search() {
        let mut m = Model::default();
        for s in 0..40u64 {
            m.insert(10 * s, s as u32);
        }
        for h in 5..30u32 {
            assert!(m.remove(10 * u64::from(h), h));
        }
        // Handles 5..30 come back as jobs older and newer than all.
        for h in 5..18u32 {
            m.insert(u64::from(h), h);
        }
        for h in 18..30u32 {
            m.insert(1_000 + u64::from(h), h);
        }
        for h in (5..30u32).step_by(2) {
            let s = if h < 18 { u64::from(h) } else { 1_000 + u64::from(h) };
            assert!(m.remove(s, h));
        }
        while m.pop().is_some() {}
    }

    #[test]
    fn random_operations_match_an_ordered_set() {
        let mut m = Model::default();
        let mut free: Vec<u32> = (0..64).rev().collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut stamp = 1000u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 8 {
                0..=3 => {
                    // A new job (2 in 3), or an old one queued again.
                    let Some(h) = free.pop() else { continue };
                    stamp += 1;
                    let s = if x.is_multiple_of(3) { stamp - (x >> 40) % 200 } else { stamp };
                    m.insert(s, h);
                }
                4 | 5 => {
                    let k = m.want.iter().nth((x >> 20) as usize % (m.want.len() + 1)).copied();
                    if let Some((s, h)) = k {
                        assert!(m.remove(s, h));
                        free.push(h);
                    }
                }
                _ => {
                    if let Some(h) = m.pop() {
                        free.push(h);
                    }
                }
            }
            assert!(m.o.keys.len() <= 2 * m.o.live + 16);
        }
        m.check();
    }
}
