//! A 96-bit index key in 12 bytes. The ordered indexes (`order.rs`,
//! `wake.rs`) hold one key per job: a 64-bit word (creation stamp or
//! wake-up time) and a 32-bit slot handle. As a `u128` each key takes 16
//! bytes (and aligns to 16); as three `u32`s it takes 12, which is 8 bytes
//! a job across the two indexes. The indexes compute with `u128` keys
//! (`word << 64 | handle`); this is only how they are stored.

use std::cmp::Ordering;

/// Bit 63 of a key: free in a `word << 64 | handle` key, and the one
/// flag an index may set there (the queue order's tombstone). Stored as
/// bit 31 of the handle word, so handles must stay below 2^31 (2^31 job
/// slots would be 240 GB of slots alone; the slab never gets there).
const FLAG: u128 = 1 << 63;

/// A key `word << 64 | flag << 63 | handle` stored as three `u32`s, most
/// significant first (ordered as the `u128` it packs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Packed([u32; 3]);

impl Packed {
    #[inline]
    pub(crate) fn new(k: u128) -> Packed {
        debug_assert!(k as u32 & (1 << 31) == 0, "slot handle at or above 2^31");
        debug_assert!((k >> 32) as u32 & 0x7fff_ffff == 0, "bits 32..63 of a key are zero");
        let low = k as u32 | (((k & FLAG) >> 32) as u32);
        Packed([(k >> 96) as u32, (k >> 64) as u32, low])
    }

    #[inline]
    pub(crate) fn get(self) -> u128 {
        let [hi, mid, low] = self.0;
        (u128::from(hi) << 96)
            | (u128::from(mid) << 64)
            | (u128::from(low & (1 << 31)) << 32)
            | u128::from(low & 0x7fff_ffff)
    }
}

impl Ord for Packed {
    #[inline]
    fn cmp(&self, o: &Packed) -> Ordering {
        self.get().cmp(&o.get())
    }
}

impl PartialOrd for Packed {
    #[inline]
    fn partial_cmp(&self, o: &Packed) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_to_twelve_bytes_and_round_trips_in_order() {
        assert_eq!(std::mem::size_of::<Packed>(), 12);
        let keys = [
            0u128,
            1,
            0x7fff_ffff,
            FLAG,
            FLAG | 5,
            1 << 64,
            (1 << 64) | FLAG | 0x7fff_ffff,
            (u128::from(u64::MAX) << 64) | 3,
            (u128::from(u64::MAX) << 64) | FLAG | 0x7fff_ffff,
        ];
        for w in keys.windows(2) {
            assert_eq!(Packed::new(w[0]).get(), w[0]);
            assert!(Packed::new(w[0]) < Packed::new(w[1]), "{:x} < {:x}", w[0], w[1]);
        }
    }
}
