//! CRC-64/Jones (reflected, polynomial 0xad93d23594c935a9, init 0, no final
//! xor): the checksum Redis puts after an RDB file and a DUMP payload.

const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const fn make_table() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ POLY_REFLECTED } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            s += 1;
        }
        i += 1;
    }
    t
}

static TABLE: [[u64; 256]; 8] = make_table();

/// Continues a CRC over `data` (start with 0).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let x = crc ^ u64::from_le_bytes(c.try_into().expect("8 bytes"));
        crc = TABLE[7][(x & 0xff) as usize]
            ^ TABLE[6][((x >> 8) & 0xff) as usize]
            ^ TABLE[5][((x >> 16) & 0xff) as usize]
            ^ TABLE[4][((x >> 24) & 0xff) as usize]
            ^ TABLE[3][((x >> 32) & 0xff) as usize]
            ^ TABLE[2][((x >> 40) & 0xff) as usize]
            ^ TABLE[1][((x >> 48) & 0xff) as usize]
            ^ TABLE[0][(x >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = TABLE[0][((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
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
    }
}
