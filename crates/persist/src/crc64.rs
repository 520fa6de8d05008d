//! CRC-64/Jones (reflected, polynomial 0xad93d23594c935a9, init 0, no final
//! xor): the checksum Redis puts after an RDB file and a DUMP payload. The
//! `crc` crate catalogues it as `CRC_64_REDIS`; its 16-way sliced table
//! gives the same bytes faster than our own slice-by-8 did (release build,
//! 2 shared cores, best of 5: 64 MiB 0.140 s → 0.090 s, 1 KiB ×65,536
//! 0.140 s → 0.116 s, 32 B ×2M 0.125 s → 0.116 s).

use crc::{Crc, Table, CRC_64_REDIS};

static CRC: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

/// Continues a CRC over `data` (start with 0).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    // The crate reflects an initial value as it reflects the algorithm's
    // own; a running CRC is already the reflected register, so it goes in
    // reflected back.
    let mut d = CRC.digest_with_initial(crc.reverse_bits());
    d.update(data);
    d.finalize()
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value_matches_redis_crc64_test() {
        // Redis's crc64.c self-test: crc64(0, "123456789") = 0xe9c6d914c4b8d9ca.
        assert_eq!(super::crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let long = b"This is a longer test string for the CRC-64 function over many bytes";
        let split = super::crc64(super::crc64(0, &long[..13]), &long[13..]);
        assert_eq!(split, super::crc64(0, long));
        // Redis's crc64.c self-test over its long text (with its NUL).
        let li = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat non proident, sunt in culpa qui officia deserunt mollit anim id est laborum.\0";
        assert_eq!(super::crc64(0, li), 0xc779_4709_e696_83b3);
    }
}
