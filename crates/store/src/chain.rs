//! What the two chained hash tables ([`Table`](crate::table::Table) and
//! the keyspace's [`KeyTable`](crate::keytable::KeyTable)) share: a slab
//! of slots linked into chains from a power-of-two bucket array. Here are
//! the parts that do not touch a key: the SCAN step in Redis's
//! reverse-binary cursor order, the uniform random pick and the shrinking
//! rule; and the prefetches of a pipelined batch's member stages, which a
//! big hash's table and a sorted set's member index use as well. The
//! lookup and insert paths stay in each table, where the slot layout
//! decides their cost.

use crate::table::prefetch;

/// A table's slab as the shared walks see it.
pub(crate) trait Slab {
    /// The chain's end (each table has its own: the keyspace's links
    /// share a word with the TTL bit).
    const NIL: u32;
    /// Slots, used and free.
    fn slots(&self) -> usize;
    /// Whether slot `i` holds an entry.
    fn used(&self, i: u32) -> bool;
    /// The next slot of `i`'s chain ([`NIL`](Self::NIL) at the end).
    fn next(&self, i: u32) -> u32;
}

/// Prefetches both ends of `x`: a slab's stride is not a cache line, so
/// a slot may straddle two, and the part a lookup reads first may be in
/// either.
#[inline]
pub(crate) fn prefetch_lines<T>(x: &T) {
    let p = x as *const T as *const u8;
    prefetch(p);
    prefetch(p.wrapping_add(std::mem::size_of::<T>() - 1));
}

/// A member stage's first step: prefetches the bucket of hash `h` in a
/// `u32` bucket array (a power of two long, or empty); returns `h`.
#[inline]
pub(crate) fn prefetch_bucket(buckets: &[u32], h: u64) -> u64 {
    if !buckets.is_empty() {
        prefetch(buckets.as_ptr().wrapping_add((h as usize) & (buckets.len() - 1)) as *const u8);
    }
    h
}

/// The steps after: prefetches the first slot of hash `h`'s chain (its
/// bucket fetched a step before); with `second`, the slot after it
/// instead (the first fetched a step before), when `next` gives one: the
/// chain's next slot when the first is not `h`'s, `None` when it is.
#[inline]
pub(crate) fn prefetch_chain<T>(
    buckets: &[u32],
    slots: &[T],
    h: u64,
    second: bool,
    next: impl FnOnce(&T) -> Option<u32>,
) {
    if buckets.is_empty() {
        return;
    }
    let mut i = buckets[(h as usize) & (buckets.len() - 1)];
    if second {
        match slots.get(i as usize).and_then(next) {
            Some(n) => i = n,
            None => return,
        }
    }
    if let Some(s) = slots.get(i as usize) {
        prefetch_lines(s);
    }
}

/// Visits the slots of the bucket at `cursor` (of `buckets`, whose chain
/// heads `head` gives) and returns the next cursor
/// (0 when the scan is complete). The cursor counts with its bits
/// reversed (Redis's `dictScan`): every entry present for the whole
/// iteration is visited at least once, even when the bucket array grows
/// or shrinks between steps. (Inlined: one call visits a bucket, and a
/// caller's visit closure kept out of line costs a call per element.)
#[inline(always)]
pub(crate) fn scan<S: Slab>(
    s: &S,
    buckets: usize,
    head: impl Fn(usize) -> u32,
    cursor: u64,
    mut visit: impl FnMut(u32),
) -> u64 {
    if buckets == 0 {
        return 0;
    }
    let mask = (buckets - 1) as u64;
    let mut i = head((cursor & mask) as usize);
    while i != S::NIL && s.used(i) {
        visit(i);
        i = s.next(i);
    }
    next_cursor(cursor, mask)
}

/// The cursor after `cursor` for a bucket array of `mask + 1` buckets:
/// the high bits set, the reversed value incremented, reversed back.
fn next_cursor(cursor: u64, mask: u64) -> u64 {
    (cursor | !mask).reverse_bits().wrapping_add(1).reverse_bits()
}

/// A random used slot, uniform over the entries: a uniform slab slot,
/// drawn again while it is free. (A random bucket then a random element
/// of its chain, Redis's `dictGetRandomKey`, favours the entries of short
/// chains: Redis's SRANDMEMBER/HRANDFIELD distribution tests fail on it;
/// RANDOMKEY uses Redis's fair variant.) [`shrink`] keeps a slab at least
/// three quarters used, so a draw takes 4/3 tries on average.
pub(crate) fn random_slot<S: Slab>(
    s: &S,
    len: usize,
    mut rand: impl FnMut() -> u64,
) -> Option<u32> {
    if len == 0 {
        return None;
    }
    let n = s.slots() as u64;
    for _ in 0..64 {
        let i = (rand() % n) as u32;
        if s.used(i) {
            return Some(i);
        }
    }
    // Vanishingly rare (or a small slab of mostly free slots): the next
    // used slot after a random one.
    let start = rand() % n;
    (0..n).map(|k| ((start + k) % n) as u32).find(|&i| s.used(i))
}

/// Smallest bucket array.
pub(crate) const MIN_BUCKETS: usize = 4;
/// Smallest slab compacted for its free slots alone.
const MIN_COMPACT: usize = 16;

/// What a table does after a removal.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Shrink {
    /// Nothing.
    Keep,
    /// Emptied: give everything back.
    Free,
    /// Compact the slab, then rebuild `n` buckets.
    Compact(usize),
}

/// The shrinking rule after a removal from a table of `len` entries in
/// `buckets` buckets and a slab of `slots` slots (`allocated` of them
/// allocated).
///
/// An emptied table gives everything back whatever its size: the keyspace
/// is spread over a thousand stripes a database, and one key alone in its
/// stripe costs its table's smallest slab and bucket array (what eviction
/// must free for the key's room to be reused, as Redis frees a dict
/// entry). Under 10% full the buckets shrink, as Redis does
/// (`HASHTABLE_MIN_FILL`). Free slots are reused only by the same table's
/// inserts: when keys move between tables (eviction deletes here while
/// writes insert elsewhere) a slab would keep the most it ever held, so a
/// quarter free is given back, at a copy of the rest (at least a quarter
/// of the slab's removals ago).
pub(crate) fn shrink(len: usize, buckets: usize, slots: usize, allocated: usize) -> Shrink {
    if len == 0 {
        return if allocated > 0 { Shrink::Free } else { Shrink::Keep };
    }
    if buckets > MIN_BUCKETS && len * 10 < buckets {
        Shrink::Compact(len.next_power_of_two().max(MIN_BUCKETS))
    } else if slots >= MIN_COMPACT && len * 4 < slots * 3 {
        Shrink::Compact(buckets)
    } else {
        Shrink::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's `dictScan` order over 8 buckets: 0 4 2 6 1 5 3 7, then 0.
    #[test]
    fn cursor_order_is_reverse_binary() {
        let mut c = 0;
        let mut seen = Vec::new();
        loop {
            c = next_cursor(c, 7);
            if c == 0 {
                break;
            }
            seen.push(c);
        }
        assert_eq!(seen, [4, 2, 6, 1, 5, 3, 7]);
        // A cursor from a larger table carries on in the smaller one's
        // order: 8 buckets' cursor 5 (101b) after a shrink to 4 buckets
        // visits bucket 1, then goes on at 3.
        assert_eq!(next_cursor(5, 3), 3);
    }

    #[test]
    fn shrink_rules() {
        assert_eq!(shrink(0, 4, 4, 4), Shrink::Free);
        assert_eq!(shrink(0, 0, 0, 0), Shrink::Keep);
        assert_eq!(shrink(3, 64, 40, 40), Shrink::Compact(4));
        assert_eq!(shrink(20, 32, 32, 32), Shrink::Compact(32));
        assert_eq!(shrink(30, 32, 32, 32), Shrink::Keep);
        assert_eq!(shrink(5, 8, 12, 12), Shrink::Keep);
    }
}
