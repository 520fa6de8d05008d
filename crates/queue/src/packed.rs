//! A 96-bit index key in 12 bytes. The wake-up heap (`wake.rs`) holds
//! one key per job: a 64-bit word (the wake-up time) and a 32-bit slot
//! handle. As a `u128` a key takes 16 bytes (and aligns to 16); as three
//! `u32`s it takes 12. The heap computes with `u128` keys
//! (`word << 64 | handle`); this is only how they are stored.

use std::cmp::Ordering;

/// A key `word << 64 | handle` stored as three `u32`s, most significant
/// first (ordered as the `u128` it packs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Packed([u32; 3]);

impl Packed {
    #[inline]
    pub(crate) fn new(k: u128) -> Packed {
        debug_assert!((k >> 32) as u32 == 0, "bits 32..64 of a key are zero");
        Packed([(k >> 96) as u32, (k >> 64) as u32, k as u32])
    }

    #[inline]
    pub(crate) fn get(self) -> u128 {
        let [hi, mid, low] = self.0;
        (u128::from(hi) << 96) | (u128::from(mid) << 64) | u128::from(low)
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
            u128::from(u32::MAX),
            1 << 64,
            (1 << 64) | u128::from(u32::MAX),
            (u128::from(u32::MAX) << 64) | 7,
            u128::from(u32::MAX) << 96,
            (u128::from(u64::MAX) << 64) | 3,
            (u128::from(u64::MAX) << 64) | u128::from(u32::MAX),
        ];
        for w in keys.windows(2) {
            assert_eq!(Packed::new(w[0]).get(), w[0]);
            assert_eq!(Packed::new(w[1]).get(), w[1]);
            assert!(Packed::new(w[0]) < Packed::new(w[1]), "{:x} < {:x}", w[0], w[1]);
        }
    }
}
