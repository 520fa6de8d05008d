//! Redis's packed blobs as they appear inside RDB values: listpacks
//! (written and read), intsets (written and read), ziplists and zipmaps
//! (read only: Redis 7 no longer writes them). Every reader validates the
//! header, each entry's bounds and the terminator before trusting a byte.

use store::value::parse_canonical_i64;

/// One decoded element: listpacks and ziplists keep integers apart.
#[derive(Clone, Debug, PartialEq)]
pub enum Elem<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The element as bytes (integers in decimal).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Elem::Int(i) => i.to_string().into_bytes(),
            Elem::Str(s) => s.to_vec(),
        }
    }
}

// ---------------------------------------------------------------- listpack

/// Builds a listpack entry by entry, as Redis's `lpAppend` lays it out.
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        ListpackWriter::new()
    }
}

impl ListpackWriter {
    pub fn new() -> Self {
        ListpackWriter { buf: vec![0; 6], count: 0 }
    }

    /// Bytes the finished listpack would have (Redis's `lpBytes`).
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Appends a string, stored as an integer when it is one
    /// (`lpStringToInt64`).
    pub fn push(&mut self, s: &[u8]) {
        match parse_canonical_i64(s) {
            Some(v) => self.push_int(v),
            None => self.push_str(s),
        }
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = if v < 0 { (1i64 << 13) + v } else { v } as u64;
            b.push(((u >> 8) as u8) | 0xC0);
            b.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            b.push(0xF1);
            b.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            b.push(0xF2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if i32::try_from(v).is_ok() {
            b.push(0xF3);
            b.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            b.push(0xF4);
            b.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    pub fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xE0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_entry(start);
    }

    fn finish_entry(&mut self, start: usize) {
        let (b, n) = backlen(self.buf.len() - start);
        self.buf.extend_from_slice(&b[..n]);
        self.count += 1;
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xFF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let n = if self.count >= 65535 { 65535u16 } else { self.count as u16 };
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

/// The back-length field of an entry of `l` bytes (`lpEncodeBacklen`).
fn backlen(l: usize) -> ([u8; 5], usize) {
    let mut b = [0u8; 5];
    let n = match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    };
    for (k, slot) in b[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - k);
        *slot = ((l >> shift) & 127) as u8 | if k > 0 { 128 } else { 0 };
    }
    if n == 5 {
        b[0] = (l >> 28) as u8;
    }
    (b, n)
}

/// Decodes and validates a whole listpack.
pub fn listpack_entries(lp: &[u8]) -> Option<Vec<Elem<'_>>> {
    listpack_walk(lp, true)
}

/// [`listpack_entries`] without the header's element count: a stream
/// node's listpack, whose count Redis's `streamValidateListpackIntegrity`
/// does not check (it walks the entries the node's own counts announce).
pub fn listpack_entries_uncounted(lp: &[u8]) -> Option<Vec<Elem<'_>>> {
    listpack_walk(lp, false)
}

fn listpack_walk(lp: &[u8], counted: bool) -> Option<Vec<Elem<'_>>> {
    if lp.len() < 7 || u32::from_le_bytes(lp[..4].try_into().ok()?) as usize != lp.len() {
        return None;
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    let end = lp.len() - 1;
    if lp[end] != 0xFF {
        return None;
    }
    let mut out = Vec::new();
    let mut p = 6;
    while p < end {
        let b = lp[p];
        let need = |n: usize| if p + n <= end { Some(()) } else { None };
        let (elem, hdr_and_data) = if b & 0x80 == 0 {
            (Elem::Int(i64::from(b)), 1)
        } else if b & 0xC0 == 0x80 {
            let n = usize::from(b & 0x3F);
            need(1 + n)?;
            (Elem::Str(&lp[p + 1..p + 1 + n]), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            need(2)?;
            let u = (u64::from(b & 0x1F) << 8) | u64::from(lp[p + 1]);
            let v = if u >= 1 << 12 { u as i64 - (1 << 13) } else { u as i64 };
            (Elem::Int(v), 2)
        } else if b & 0xF0 == 0xE0 {
            need(2)?;
            let n = (usize::from(b & 0x0F) << 8) | usize::from(lp[p + 1]);
            need(2 + n)?;
            (Elem::Str(&lp[p + 2..p + 2 + n]), 2 + n)
        } else {
            match b {
                0xF0 => {
                    need(5)?;
                    let n = u32::from_le_bytes(lp[p + 1..p + 5].try_into().ok()?) as usize;
                    if n > end - p - 5 {
                        return None;
                    }
                    (Elem::Str(&lp[p + 5..p + 5 + n]), 5 + n)
                }
                0xF1 => {
                    need(3)?;
                    (Elem::Int(i64::from(i16::from_le_bytes([lp[p + 1], lp[p + 2]]))), 3)
                }
                0xF2 => {
                    need(4)?;
                    let u = i32::from_le_bytes([0, lp[p + 1], lp[p + 2], lp[p + 3]]) >> 8;
                    (Elem::Int(i64::from(u)), 4)
                }
                0xF3 => {
                    need(5)?;
                    (Elem::Int(i64::from(i32::from_le_bytes(lp[p + 1..p + 5].try_into().ok()?))), 5)
                }
                0xF4 => {
                    need(9)?;
                    (Elem::Int(i64::from_le_bytes(lp[p + 1..p + 9].try_into().ok()?)), 9)
                }
                _ => return None,
            }
        };
        let (want, bl) = backlen(hdr_and_data);
        need(hdr_and_data + bl)?;
        if lp[p + hdr_and_data..p + hdr_and_data + bl] != want[..bl] {
            return None;
        }
        out.push(elem);
        p += hdr_and_data + bl;
    }
    if counted && declared != 65535 && usize::from(declared) != out.len() {
        return None;
    }
    Some(out)
}

// ------------------------------------------------------------------ intset

/// An intset blob of `values` (sorted ascending) at `width` bytes each.
pub fn intset_bytes(width: usize, len: usize, values: impl Iterator<Item = i64>) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + width * len);
    b.extend_from_slice(&(width as u32).to_le_bytes());
    b.extend_from_slice(&(len as u32).to_le_bytes());
    for v in values {
        match width {
            2 => b.extend_from_slice(&(v as i16).to_le_bytes()),
            4 => b.extend_from_slice(&(v as i32).to_le_bytes()),
            _ => b.extend_from_slice(&v.to_le_bytes()),
        }
    }
    b
}

/// Decodes an intset blob; its members must be strictly ascending.
pub fn intset_values(b: &[u8]) -> Option<Vec<i64>> {
    if b.len() < 8 {
        return None;
    }
    let w = u32::from_le_bytes(b[..4].try_into().ok()?) as usize;
    let n = u32::from_le_bytes(b[4..8].try_into().ok()?) as usize;
    if !matches!(w, 2 | 4 | 8) || n.checked_mul(w)? != b.len() - 8 {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for c in b[8..].chunks_exact(w) {
        let v = match w {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes(c.try_into().ok()?)),
            _ => i64::from_le_bytes(c.try_into().ok()?),
        };
        if out.last().is_some_and(|&l| l >= v) {
            return None;
        }
        out.push(v);
    }
    Some(out)
}

// ----------------------------------------------------------------- ziplist

/// Decodes and validates a ziplist (RDB versions before 10).
pub fn ziplist_entries(z: &[u8]) -> Option<Vec<Elem<'_>>> {
    if z.len() < 11 || u32::from_le_bytes(z[..4].try_into().ok()?) as usize != z.len() {
        return None;
    }
    let declared = u16::from_le_bytes([z[8], z[9]]);
    let end = z.len() - 1;
    if z[end] != 0xFF {
        return None;
    }
    let tail = u32::from_le_bytes(z[4..8].try_into().ok()?) as usize;
    let mut out = Vec::new();
    let mut p = 10;
    let mut prev_len = 0usize;
    // Where the last entry starts (the header's end when there is none):
    // the header's tail offset must say the same.
    let mut last_start = 10;
    while p < end {
        let start = p;
        last_start = start;
        // prevlen
        let pl = if z[p] < 254 {
            p += 1;
            usize::from(z[start])
        } else if z[p] == 254 {
            if p + 5 > end {
                return None;
            }
            p += 5;
            u32::from_le_bytes(z[start + 1..start + 5].try_into().ok()?) as usize
        } else {
            return None;
        };
        if pl != prev_len {
            return None;
        }
        if p >= end {
            return None;
        }
        let b = z[p];
        let need = |q: usize, n: usize| if q + n <= end { Some(()) } else { None };
        let elem = match b >> 6 {
            0 => {
                let n = usize::from(b & 0x3F);
                need(p + 1, n)?;
                p += 1 + n;
                Elem::Str(&z[p - n..p])
            }
            1 => {
                need(p, 2)?;
                let n = (usize::from(b & 0x3F) << 8) | usize::from(z[p + 1]);
                need(p + 2, n)?;
                p += 2 + n;
                Elem::Str(&z[p - n..p])
            }
            2 => {
                if b != 0x80 {
                    return None;
                }
                need(p, 5)?;
                let n = u32::from_be_bytes(z[p + 1..p + 5].try_into().ok()?) as usize;
                need(p + 5, n)?;
                p += 5 + n;
                Elem::Str(&z[p - n..p])
            }
            _ => {
                let (v, n) = match b {
                    0xC0 => {
                        need(p, 3)?;
                        (i64::from(i16::from_le_bytes([z[p + 1], z[p + 2]])), 3)
                    }
                    0xD0 => {
                        need(p, 5)?;
                        (i64::from(i32::from_le_bytes(z[p + 1..p + 5].try_into().ok()?)), 5)
                    }
                    0xE0 => {
                        need(p, 9)?;
                        (i64::from_le_bytes(z[p + 1..p + 9].try_into().ok()?), 9)
                    }
                    0xF0 => {
                        need(p, 4)?;
                        (i64::from(i32::from_le_bytes([0, z[p + 1], z[p + 2], z[p + 3]]) >> 8), 4)
                    }
                    0xFE => {
                        need(p, 2)?;
                        (i64::from(z[p + 1] as i8), 2)
                    }
                    0xF1..=0xFD => (i64::from(b & 0x0F) - 1, 1),
                    _ => return None,
                };
                p += n;
                Elem::Int(v)
            }
        };
        prev_len = p - start;
        out.push(elem);
    }
    if declared != 65535 && usize::from(declared) != out.len() {
        return None;
    }
    if tail != last_start {
        return None;
    }
    Some(out)
}

// ------------------------------------------------------------------ zipmap

/// Decodes a zipmap (hashes in RDB files before version 4).
pub fn zipmap_pairs(z: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    if z.len() < 2 || *z.last()? != 0xFF {
        return None;
    }
    let end = z.len() - 1;
    let mut p = 1;
    let mut out = Vec::new();
    let len_at = |p: usize| -> Option<(usize, usize)> {
        match *z.get(p)? {
            b @ 0..=253 => Some((usize::from(b), p + 1)),
            254 => {
                Some((u32::from_le_bytes(z.get(p + 1..p + 5)?.try_into().ok()?) as usize, p + 5))
            }
            _ => None,
        }
    };
    while p < end {
        let (kl, q) = len_at(p)?;
        let k = z.get(q..q.checked_add(kl)?)?;
        let (vl, q) = len_at(q + kl)?;
        let free = usize::from(*z.get(q)?);
        let v = z.get(q + 1..(q + 1).checked_add(vl)?)?;
        p = q + 1 + vl + free;
        if p > end {
            return None;
        }
        out.push((k, v));
    }
    // Redis's deep check: not empty, and the count byte right unless it
    // says "too many to count" (254 and up).
    if out.is_empty() || (z[0] < 254 && usize::from(z[0]) != out.len()) {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_round_trip_every_encoding() {
        let vals: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"-32768".to_vec(),
            b"32767".to_vec(),
            b"8388607".to_vec(),
            b"-8388608".to_vec(),
            b"2147483647".to_vec(),
            b"-2147483649".to_vec(),
            b"9223372036854775807".to_vec(),
            b"".to_vec(),
            b"-0".to_vec(),
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 4096],
            vec![b'v'; 20000],
        ];
        let mut w = ListpackWriter::new();
        for v in &vals {
            w.push(v);
        }
        let lp = w.finish();
        let got: Vec<Vec<u8>> = listpack_entries(&lp).unwrap().iter().map(Elem::to_vec).collect();
        assert_eq!(got, vals);
        for cut in [0, 5, 7, lp.len() / 2, lp.len() - 1] {
            assert!(listpack_entries(&lp[..cut]).is_none());
        }
    }

    #[test]
    fn intset_round_trip_and_order_check() {
        let b = intset_bytes(4, 3, [-5i64, 3, 70000].into_iter());
        assert_eq!(intset_values(&b).unwrap(), vec![-5, 3, 70000]);
        let bad = intset_bytes(2, 2, [3i64, 3].into_iter());
        assert!(intset_values(&bad).is_none());
    }
}
