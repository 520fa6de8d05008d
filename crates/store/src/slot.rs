//! Redis Cluster key slots: CRC16 (XMODEM) of the key, or of its `{hash tag}`.

/// Number of cluster slots.
pub const SLOTS: usize = 16384;

/// The byte-at-a-time table (`TABLES[0]`) and the tables that push a
/// byte's contribution through one to seven more bytes, for eight bytes
/// per step ("slicing by eight"; the CRC is linear, so the eight
/// contributions are independent and xor together).
const fn crc16_tables() -> [[u16; 256]; 8] {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut j = 0;
        while j < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            j += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static CRC16: [[u16; 256]; 8] = crc16_tables();

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster uses.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    let mut eights = data.chunks_exact(8);
    for c in &mut eights {
        crc = CRC16[7][((crc >> 8) as u8 ^ c[0]) as usize]
            ^ CRC16[6][(crc as u8 ^ c[1]) as usize]
            ^ CRC16[5][c[2] as usize]
            ^ CRC16[4][c[3] as usize]
            ^ CRC16[3][c[4] as usize]
            ^ CRC16[2][c[5] as usize]
            ^ CRC16[1][c[6] as usize]
            ^ CRC16[0][c[7] as usize];
    }
    let mut chunks = eights.remainder().chunks_exact(4);
    for c in &mut chunks {
        crc = CRC16[3][((crc >> 8) as u8 ^ c[0]) as usize]
            ^ CRC16[2][(crc as u8 ^ c[1]) as usize]
            ^ CRC16[1][c[2] as usize]
            ^ CRC16[0][c[3] as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc << 8) ^ CRC16[0][(((crc >> 8) as u8) ^ b) as usize];
    }
    crc
}

/// Whether `key` holds a `{` (eight bytes at a time: a key without one,
/// the common case, is not looked at byte by byte).
#[inline]
fn has_brace(key: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let x = u64::from_le_bytes(c.try_into().expect("8 bytes")) ^ (ONES * b'{' as u64);
        // A zero byte in x: a `{` in the chunk.
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return true;
        }
    }
    chunks.remainder().contains(&b'{')
}

/// The cluster slot of `key`, honouring `{hash tags}` as Redis does: the
/// first `{` with a non-empty `}`-terminated tag after it.
pub fn key_slot(key: &[u8]) -> u16 {
    if has_brace(key) {
        if let Some(open) = key.iter().position(|&c| c == b'{') {
            if let Some(len) = key[open + 1..].iter().position(|&c| c == b'}') {
                if len > 0 {
                    return crc16(&key[open + 1..open + 1 + len]) & (SLOTS as u16 - 1);
                }
            }
        }
    }
    crc16(key) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_cluster_slots() {
        // Values from the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    /// The byte-at-a-time CRC, as the reference for the sliced one.
    fn crc16_bytewise(data: &[u8]) -> u16 {
        let mut crc: u16 = 0;
        for &b in data {
            for i in 0..8 {
                let bit = ((b >> (7 - i)) & 1) as u16;
                let top = (crc >> 15) & 1;
                crc <<= 1;
                if top ^ bit != 0 {
                    crc ^= 0x1021;
                }
            }
        }
        crc
    }

    #[test]
    fn sliced_crc_matches_bitwise() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..100 {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(crc16(&data), crc16_bytewise(&data), "length {len}");
        }
    }

    #[test]
    fn braces_found_anywhere() {
        for len in 1..40 {
            for at in 0..len {
                let mut k = vec![b'z'; len];
                k[at] = b'{';
                assert!(has_brace(&k));
                k[at] = b'{' ^ 0x80;
                assert!(!has_brace(&k));
            }
        }
        assert!(!has_brace(b""));
    }
}
