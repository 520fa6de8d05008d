//! A queue's order: the keys (`(creation stamp, handle)` as one `u128`)
//! of its queued jobs, ascending, in a ring. Jobs are queued almost
//! always in creation order (ADDJOB), so an insert is a `push_back`; an
//! older key (NACK, ENQUEUE or a retry of an old job, loading) goes in by
//! binary search. Removal from the front (GETJOB) pops; removal from
//! anywhere else (DEQUEUE, DELJOB, ACKJOB of a queued job) marks the key
//! dead in place (found by binary search, order kept) instead of moving
//! half the ring, and dead keys are dropped from the ends as they surface
//! and all at once when they outnumber the live ones.

use std::collections::VecDeque;

use crate::packed::Packed;

/// Set in a dead key: above any handle (the low word holds a `u32`), so
/// the key still sorts by its creation stamp and never equals a live one
/// (stored in the handle's top bit, see `packed.rs`).
const DEAD: u128 = 1 << 63;

/// The queued keys of one queue, ascending, with tombstones.
#[derive(Debug, Default)]
pub(crate) struct Order {
    /// 12 bytes a key (`packed.rs`).
    keys: VecDeque<Packed>,
    live: usize,
}

impl Order {
    pub(crate) fn new() -> Order {
        Order::default()
    }

    /// Live keys.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Adds `k` (not present) in its place.
    pub(crate) fn insert(&mut self, k: u128) {
        self.live += 1;
        match self.keys.back() {
            Some(&b) if b.get() & !DEAD > k => {
                let at = self.keys.partition_point(|&x| x.get() & !DEAD < k);
                self.keys.insert(at, Packed::new(k));
            }
            _ => self.keys.push_back(Packed::new(k)),
        }
    }

    /// Removes live key `k`; false when it is not there.
    pub(crate) fn remove(&mut self, k: u128) -> bool {
        let at = self.keys.partition_point(|&x| x.get() & !DEAD < k);
        // Dead copies of `k` (the same job queued, then dequeued) sort
        // with it; the live one is among them.
        let mut i = at;
        while i < self.keys.len() && self.keys[i].get() & !DEAD == k {
            if self.keys[i].get() == k {
                self.keys[i] = Packed::new(k | DEAD);
                self.live -= 1;
                self.tidy();
                return true;
            }
            i += 1;
        }
        false
    }

    /// Takes the smallest live key.
    pub(crate) fn pop_first(&mut self) -> Option<u128> {
        while let Some(k) = self.keys.pop_front() {
            let k = k.get();
            if k & DEAD == 0 {
                self.live -= 1;
                self.trim();
                return Some(k);
            }
        }
        None
    }

    /// Live keys, ascending.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = u128> + '_ {
        self.keys.iter().map(|k| k.get()).filter(|&k| k & DEAD == 0)
    }

    /// Drops dead keys at the ends, and every dead key once they are
    /// more than the live ones (so the ring stays within twice the queue).
    fn tidy(&mut self) {
        self.trim();
        if self.keys.len() > 2 * self.live + 16 {
            self.keys.retain(|&k| k.get() & DEAD == 0);
        }
    }

    fn trim(&mut self) {
        while self.keys.front().is_some_and(|&k| k.get() & DEAD != 0) {
            self.keys.pop_front();
        }
        while self.keys.back().is_some_and(|&k| k.get() & DEAD != 0) {
            self.keys.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn k(stamp: u64, h: u32) -> u128 {
        (u128::from(stamp) << 64) | u128::from(h)
    }

    /// Every operation against a BTreeSet, the structure it replaced.
    fn check(o: &Order, want: &BTreeSet<u128>) {
        assert_eq!(o.len(), want.len());
        assert_eq!(o.is_empty(), want.is_empty());
        assert_eq!(o.iter().collect::<Vec<_>>(), want.iter().copied().collect::<Vec<_>>());
        assert_eq!(
            o.iter().rev().collect::<Vec<_>>(),
            want.iter().rev().copied().collect::<Vec<_>>()
        );
    }

    #[test]
    fn out_of_order_inserts_sort() {
        let mut o = Order::new();
        let mut want = BTreeSet::new();
        for (s, h) in [(10, 1), (20, 2), (5, 3), (30, 4), (15, 5), (1, 6), (25, 7)] {
            o.insert(k(s, h));
            want.insert(k(s, h));
            check(&o, &want);
        }
        assert_eq!(o.pop_first(), Some(k(1, 6)));
        assert_eq!(o.pop_first(), Some(k(5, 3)));
    }

    #[test]
    fn removal_from_the_middle_keeps_order_and_length() {
        let mut o = Order::new();
        let mut want = BTreeSet::new();
        for s in 0..100u64 {
            o.insert(k(s, s as u32));
            want.insert(k(s, s as u32));
        }
        for s in (10..90u64).step_by(3) {
            assert!(o.remove(k(s, s as u32)));
            assert!(!o.remove(k(s, s as u32)), "a dead key is not removed twice");
            want.remove(&k(s, s as u32));
            check(&o, &want);
        }
        // The same job queued again after its removal (NACK after DEQUEUE).
        o.insert(k(13, 13));
        want.insert(k(13, 13));
        check(&o, &want);
        assert!(o.remove(k(13, 13)));
        want.remove(&k(13, 13));
        check(&o, &want);
        assert!(!o.remove(k(500, 1)));
        while let Some(x) = o.pop_first() {
            assert_eq!(Some(x), want.pop_first());
        }
        assert!(want.is_empty() && o.is_empty());
    }

    #[test]
    fn random_operations_match_an_ordered_set() {
        let mut o = Order::new();
        let mut want = BTreeSet::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut stamp = 1000u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 8 {
                0..=2 => {
                    stamp += 1;
                    let key = k(stamp, (x >> 32) as u32 % 64);
                    if want.insert(key) {
                        o.insert(key);
                    }
                }
                3 => {
                    let key = k(stamp - (x >> 40) % 200, (x >> 32) as u32 % 64);
                    if want.insert(key) {
                        o.insert(key);
                    }
                }
                4 | 5 => {
                    let key = want.iter().nth((x >> 20) as usize % (want.len() + 1)).copied();
                    if let Some(key) = key {
                        want.remove(&key);
                        assert!(o.remove(key));
                    }
                }
                _ => assert_eq!(o.pop_first(), want.pop_first()),
            }
            assert_eq!(o.len(), want.len());
        }
        check(&o, &want);
        assert!(o.keys.len() <= 2 * o.live + 16);
    }
}
