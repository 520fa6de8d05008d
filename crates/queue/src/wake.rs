//! The wake-up index: keys `(time word, handle)` as one `u128` in a
//! min-heap. Wake-up times mostly arrive in increasing order (now +
//! RETRY or TTL), so a push sifts up a step or two where a B-tree insert
//! searches and shifts a node. A key is never taken out of the middle:
//! when a job moves or goes, its old key stays behind, stale, and is
//! dropped when it is due and at the top (the owner says which keys are
//! live); once stale keys outnumber the live ones the heap is rebuilt
//! without them, so it stays within about twice the jobs. A stale key is
//! not popped when it is left behind: a job acknowledged soon after it was
//! queued leaves a key near the top (the earliest re-queue time), and
//! popping it then cost a sift-down of the whole heap's depth per ACKJOB;
//! a rebuild drops it for a constant share instead.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::packed::Packed;

#[derive(Debug, Default)]
pub(crate) struct Wake {
    /// 12 bytes a key (`packed.rs`).
    heap: BinaryHeap<Reverse<Packed>>,
    /// Keys left behind (an estimate: a key pushed twice counts once).
    stale: usize,
}

impl Wake {
    pub(crate) fn new() -> Wake {
        Wake::default()
    }

    pub(crate) fn push(&mut self, k: u128) {
        self.heap.push(Reverse(Packed::new(k)));
    }

    /// Notes that one pushed key is no longer live; rebuilds the heap from
    /// the live keys when the stale ones are too many.
    pub(crate) fn left(&mut self, live: impl Fn(u128) -> bool) {
        self.stale += 1;
        if self.stale > self.heap.len() / 2 + 1024 {
            self.heap.retain(|&Reverse(k)| live(k.get()));
            self.stale = 0;
        }
    }

    /// Drops the smallest key, known stale.
    pub(crate) fn pop_stale(&mut self) {
        self.heap.pop();
        self.stale = self.stale.saturating_sub(1);
    }

    /// Drops stale keys from the top, so [`Wake::first`] is live.
    #[cfg(test)]
    pub(crate) fn settle(&mut self, live: impl Fn(u128) -> bool) {
        while let Some(&Reverse(k)) = self.heap.peek() {
            if live(k.get()) {
                break;
            }
            self.heap.pop();
            self.stale = self.stale.saturating_sub(1);
        }
    }

    /// The smallest key, live or stale (no live key is smaller).
    pub(crate) fn first(&self) -> Option<u128> {
        self.heap.peek().map(|&Reverse(k)| k.get())
    }

    /// Takes the smallest key.
    #[cfg(test)]
    pub(crate) fn pop(&mut self) -> Option<u128> {
        self.heap.pop().map(|Reverse(k)| k.get())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    /// A model owner: each handle's current key; stale keys are those
    /// that are not.
    fn fire_order(ops: &[(u32, Option<u64>)]) {
        let mut w = Wake::new();
        let mut cur: HashMap<u32, u128> = HashMap::new();
        let mut want = BTreeSet::new();
        let key = |t: u64, h: u32| (u128::from(t) << 64) | u128::from(h);
        for &(h, t) in ops {
            if let Some(old) = cur.remove(&h) {
                want.remove(&old);
                let c = cur.clone();
                w.left(move |k| c.get(&(k as u32)) == Some(&k));
            }
            if let Some(t) = t {
                cur.insert(h, key(t, h));
                want.insert(key(t, h));
                w.push(key(t, h));
            }
            let c = cur.clone();
            w.settle(move |k| c.get(&(k as u32)) == Some(&k));
            assert_eq!(w.first(), want.first().copied());
        }
        // Firing order: every live key once, ascending, stale ones skipped.
        let mut fired = Vec::new();
        loop {
            let c = cur.clone();
            w.settle(move |k| c.get(&(k as u32)) == Some(&k));
            let Some(k) = w.pop() else { break };
            cur.remove(&(k as u32));
            fired.push(k);
        }
        assert_eq!(fired, want.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn fires_in_time_order_whatever_the_push_order() {
        fire_order(&[(1, Some(50)), (2, Some(10)), (3, Some(30)), (4, Some(10)), (5, Some(70))]);
    }

    #[test]
    fn moved_and_removed_keys_never_fire() {
        fire_order(&[
            (1, Some(50)),
            (2, Some(10)),
            (3, Some(30)),
            (2, Some(90)), // moved later: its key at 10 is stale
            (3, None),     // gone
            (4, Some(20)),
            (4, Some(5)),  // moved earlier
            (1, Some(50)), // moved to the same time: pushed twice, fires once
        ]);
    }

    #[test]
    fn stale_keys_are_rebuilt_away() {
        let mut ops = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let h = (x % 300) as u32;
            ops.push((h, if x.is_multiple_of(5) { None } else { Some(i + (x >> 50)) }));
        }
        fire_order(&ops);
        // And the heap does not keep every key ever pushed.
        let mut w = Wake::new();
        for i in 0..10_000u128 {
            w.push(i << 64);
            let cur = i << 64;
            w.left(move |k| k == cur);
        }
        assert!(w.len() < 3_000, "{} keys held for one live", w.len());
    }
}
