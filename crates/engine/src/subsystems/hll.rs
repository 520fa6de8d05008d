//! HyperLogLog values in Redis's own representation, byte for byte, so a
//! value copied between Redis and Sluice (GET/SET, DUMP/RESTORE) counts the
//! same on both: a 16-byte header (`HYLL`, the encoding, three unused
//! bytes, the cached cardinality in little-endian with its top bit meaning
//! "stale"), then 16,384 six-bit registers, either dense (12,288 bytes,
//! packed least significant bit first) or sparse (run-length opcodes
//! `ZERO` 00xxxxxx, `XZERO` 01xxxxxx yyyyyyyy, `VAL` 1vvvvvxx). The
//! algorithms — MurmurHash64A with Redis's seed, the sparse opcode splits
//! and merges, the promotion rules, Ertl's estimator — follow Redis 7.0's
//! `hyperloglog.c` so that the bytes written are the bytes Redis writes.
//!
//! The value comes from clients (SET of a crafted string), so nothing here
//! trusts it: every decoder is bounds-checked and reports corruption as
//! [`Corrupt`], never a panic.

use store::types::hll::{PackedHll, Raise};
use store::types::list::grow_exact;

/// Registers index bits.
pub const P: u32 = 14;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
const Q: u32 = 64 - P;
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// Header size.
pub const HDR: usize = 16;
/// Size of a dense value.
pub const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);

const DENSE: u8 = 0;
const SPARSE: u8 = 1;

const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

/// The value is not a well-formed HyperLogLog (Redis's `INVALIDOBJ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// Redis's `isHLLObjectOrReply` check: magic, a known encoding, and the
/// exact size for dense values.
pub fn is_hll(v: &[u8]) -> bool {
    v.len() >= HDR
        && &v[..4] == b"HYLL"
        && v[4] <= SPARSE
        && (v[4] != DENSE || v.len() == DENSE_SIZE)
}

/// Whether a (checked) value is dense.
pub fn is_dense(v: &[u8]) -> bool {
    v[4] == DENSE
}

/// A new, empty HyperLogLog (sparse: one XZERO covering every register).
pub fn new() -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        push_xzero(&mut v, n);
        left -= n;
    }
    v
}

fn push_xzero(v: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    v.push((l >> 8) as u8 | 0x40);
    v.push((l & 0xff) as u8);
}

fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2) | (len as u8 - 1) | 0x80
}

/// The cached cardinality, if valid.
pub fn cached(v: &[u8]) -> Option<u64> {
    let c = u64::from_le_bytes(v[8..16].try_into().expect("8 bytes"));
    (v[15] & 0x80 == 0).then_some(c)
}

/// Stores the cached cardinality.
pub fn set_cache(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale.
pub fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// Redis's MurmurHash64A (little-endian reads, as on x86-64).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the run length of its hash
/// (Redis's `hllPatLen`).
pub fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc83b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

#[inline]
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) as u8) & REGISTER_MAX
}

#[inline]
fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let v = u16::from(val);
    regs[byte] &= !((u16::from(REGISTER_MAX) << fb) as u8);
    regs[byte] |= (v << fb) as u8;
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((u16::from(REGISTER_MAX) >> (8 - fb)) as u8);
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Sets a dense register if `count` is larger; whether it changed.
fn dense_raise(v: &mut [u8], i: usize, count: u8) -> bool {
    let regs = &mut v[HDR..];
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

/// One sparse opcode: (registers covered, value, bytes).
#[inline]
fn sparse_op(s: &[u8], p: usize) -> (usize, u8, usize) {
    let b = s[p];
    if b & 0xc0 == 0 {
        (usize::from(b & 0x3f) + 1, 0, 1)
    } else if b & 0x80 == 0 {
        let lo = usize::from(s.get(p + 1).copied().unwrap_or(0));
        (((usize::from(b & 0x3f) << 8) | lo) + 1, 0, 2)
    } else {
        (usize::from(b & 0x3) + 1, ((b >> 2) & 0x1f) + 1, 1)
    }
}

/// The registers a one-byte opcode covers, by its byte (`ZERO` 00xxxxxx
/// and `VAL` 1vvvvvxx: x + 1); 0 for the first byte of an `XZERO`, whose
/// count needs the next byte.
const SPAN1: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = if b & 0x80 != 0 {
            (b & 0x3) as u8 + 1
        } else if b & 0x40 == 0 {
            (b & 0x3f) as u8 + 1
        } else {
            0
        };
        b += 1;
    }
    t
};

/// The sparse opcode covering register `index`: its offset (the value's
/// length when the opcodes end before it), the first register it covers,
/// and the offset of the opcode before it. PFADD of a sparse value is this
/// walk (up to `hll-sparse-max-bytes` of opcodes, 3,000 by default), so
/// each opcode costs one table load and one test.
#[inline]
fn sparse_find(s: &[u8], index: usize) -> (usize, usize, Option<usize>) {
    let mut p = HDR;
    let mut first = 0usize;
    let mut prev = usize::MAX;
    while let Some(&b) = s.get(p) {
        let mut span = usize::from(SPAN1[usize::from(b)]);
        let mut len = 1;
        if span == 0 {
            let lo = s.get(p + 1).copied().unwrap_or(0);
            span = ((usize::from(b & 0x3f) << 8) | usize::from(lo)) + 1;
            len = 2;
        }
        if index < first + span {
            break;
        }
        prev = p;
        p += len;
        first += span;
    }
    (p, first, (prev != usize::MAX).then_some(prev))
}

/// Converts a sparse value to dense in place (Redis's
/// `hllSparseToDense`); a dense one is left alone.
pub fn to_dense(v: &mut Vec<u8>) -> Result<(), Corrupt> {
    if v[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&v[..HDR]);
    dense[4] = DENSE;
    let mut idx = 0usize;
    let mut p = HDR;
    while p < v.len() {
        let (run, val, len) = sparse_op(v, p);
        // Any opcode past the last register makes the value corrupt,
        // even one after all 16,384 were covered (Redis's
        // CVE-2025-32023 fix, in the 7.0.15 builds distributions ship).
        if run + idx > REGISTERS {
            return Err(Corrupt);
        }
        if val > 0 {
            for i in idx..idx + run {
                dense_set(&mut dense[HDR..], i, val);
            }
        }
        idx += run;
        p += len;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    *v = dense;
    Ok(())
}

/// Raises register `index` to `count` in a sparse value (Redis's
/// `hllSparseSet`): splits the opcode covering it, merges equal
/// neighbours, and promotes to dense when the value is too big for a VAL
/// opcode or the value would outgrow `max_bytes`. Whether it changed.
fn sparse_raise(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering the register.
    let end = v.len();
    let (p, first, prev) = sparse_find(v, index);
    if p >= end {
        return Err(Corrupt);
    }
    let (span, val, oplen) = sparse_op(v, p);
    if p + oplen > end {
        // (Redis also reads a truncated XZERO's missing byte as 0 here and
        // then writes past the value; this refuses it instead.)
        return Err(Corrupt);
    }
    let is_xzero = oplen == 2;
    let is_val = val > 0;
    // Step 2: the trivial cases.
    if is_val {
        if val >= count {
            return Ok(false);
        }
        if span == 1 {
            v[p] = val_op(count, 1);
            merge_after(v, prev);
            return Ok(true);
        }
    } else if !is_xzero && span == 1 {
        v[p] = val_op(count, 1);
        merge_after(v, prev);
        return Ok(true);
    }
    // The general case: split the opcode into up to three.
    let last = first + span - 1;
    let mut seq: smallvec::SmallVec<[u8; 5]> = smallvec::SmallVec::new();
    let zeros = |seq: &mut smallvec::SmallVec<[u8; 5]>, len: usize| {
        if len > ZERO_MAX_LEN {
            let l = len - 1;
            seq.push((l >> 8) as u8 | 0x40);
            seq.push((l & 0xff) as u8);
        } else {
            seq.push((len - 1) as u8);
        }
    };
    if !is_val {
        if index != first {
            zeros(&mut seq, index - first);
        }
        seq.push(val_op(count, 1));
        if index != last {
            zeros(&mut seq, last - index);
        }
    } else {
        if index != first {
            seq.push(val_op(val, index - first));
        }
        seq.push(val_op(count, 1));
        if index != last {
            seq.push(val_op(val, last - index));
        }
    }
    // Step 3: put the sequence in place of the opcode.
    let delta = seq.len() as isize - oplen as isize;
    if delta > 0 && v.len() + delta as usize > max_bytes {
        return promote(v, index, count);
    }
    if delta > 0 {
        // To the next size class, not double: a sparse value grows by a
        // few bytes at a time and most stay sparse for good, so doubling
        // left a third of each one empty.
        grow_exact(v, delta as usize);
    }
    v.splice(p..p + oplen, seq);
    merge_after(v, prev);
    Ok(true)
}

/// Step 4 of `hllSparseSet`: merges adjacent VAL opcodes of equal value,
/// scanning up to five opcodes from `prev` (or the start).
fn merge_after(v: &mut Vec<u8>, prev: Option<usize>) {
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let b = v[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        }
        if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && v[p + 1] & 0x80 != 0 {
            let (l1, v1, _) = sparse_op(v, p);
            let (l2, v2, _) = sparse_op(v, p + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                v[p + 1] = val_op(v1, l1 + l2);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(v)?;
    // A promotion only happens when the register needs raising.
    dense_raise(v, index, count);
    Ok(true)
}

/// Adds an element (Redis's `hllAdd`): whether a register changed.
pub fn add(v: &mut Vec<u8>, ele: &[u8], sparse_max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    match v[4] {
        DENSE => Ok(dense_raise(v, index, count)),
        SPARSE => sparse_raise(v, index, count, sparse_max_bytes),
        _ => Err(Corrupt),
    }
}

/// Raises register `index` to `count` whatever the encoding (PFMERGE's
/// write of the merged registers).
pub fn raise(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<(), Corrupt> {
    match v[4] {
        DENSE => {
            dense_raise(v, index, count);
            Ok(())
        }
        _ => sparse_raise(v, index, count, sparse_max_bytes).map(|_| ()),
    }
}

/// A dense value in four bits a register (`store::types::hll`), if `v` is
/// a dense HyperLogLog whose registers fit that form.
pub fn pack(v: &[u8]) -> Option<PackedHll> {
    if is_hll(v) && is_dense(v) {
        PackedHll::pack(v)
    } else {
        None
    }
}

/// Adds an element to a packed dense value: what [`add`] does to its
/// Redis string, or [`Raise::Full`] (nothing changed) when the register
/// does not fit the packed form.
#[inline]
pub fn add_packed(p: &mut PackedHll, ele: &[u8]) -> Raise {
    let (index, count) = pat_len(ele);
    p.raise(index, count)
}

/// [`count`] of a packed dense value (the same histogram, so the same
/// estimate).
pub fn count_packed(p: &PackedHll) -> u64 {
    estimate(&p.histogram())
}

/// [`merge_into`] from a packed dense value.
pub fn merge_packed(max: &mut [u8; REGISTERS], p: &PackedHll) {
    let mut regs = [0u8; REGISTERS];
    p.registers(&mut regs);
    for (m, r) in max.iter_mut().zip(regs) {
        *m = (*m).max(r);
    }
}

/// Merges a (checked) value's registers into `max` (Redis's `hllMerge`).
pub fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Corrupt> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        return Ok(());
    }
    let mut i = 0usize;
    let mut p = HDR;
    while p < v.len() {
        let (run, val, len) = sparse_op(v, p);
        // As in `to_dense`: an opcode past the last register is corrupt.
        if run + i > REGISTERS {
            return Err(Corrupt);
        }
        if val > 0 {
            for m in &mut max[i..i + run] {
                *m = (*m).max(val);
            }
        }
        i += run;
        p += len;
    }
    if i != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// The registers of a dense value, for `PFDEBUG GETREG`.
pub fn dense_registers(v: &[u8]) -> impl Iterator<Item = u8> + '_ {
    (0..REGISTERS).map(move |i| dense_get(&v[HDR..], i))
}

/// The opcodes of a sparse value as `PFDEBUG DECODE` prints them.
pub fn decode(v: &[u8]) -> String {
    let mut out = String::new();
    let mut p = HDR;
    while p < v.len() {
        let (run, val, len) = sparse_op(v, p);
        if !out.is_empty() {
            out.push(' ');
        }
        match (val, len) {
            (0, 1) => out.push_str(&format!("z:{run}")),
            (0, _) => out.push_str(&format!("Z:{run}")),
            _ => out.push_str(&format!("v:{val},{run}")),
        }
        p += len;
    }
    out
}

/// The estimated cardinality of a (checked) value (Redis's `hllCount`).
pub fn count(v: &[u8]) -> Result<u64, Corrupt> {
    let mut histo = [0u64; 64];
    if v[4] == DENSE {
        for r in dense_registers(v) {
            histo[usize::from(r)] += 1;
        }
    } else {
        let mut idx = 0usize;
        let mut p = HDR;
        while p < v.len() {
            let (run, val, len) = sparse_op(v, p);
            idx += run;
            histo[usize::from(val)] += run as u64;
            p += len;
        }
        if idx != REGISTERS {
            return Err(Corrupt);
        }
    }
    Ok(estimate(&histo))
}

/// The cardinality of merged registers (PFCOUNT of several keys).
pub fn count_registers(max: &[u8; REGISTERS]) -> u64 {
    let mut histo = [0u64; 64];
    for &r in max {
        histo[usize::from(r)] += 1;
    }
    estimate(&histo)
}

/// Ertl's estimator ("New cardinality estimation algorithms for
/// HyperLogLog sketches"), as Redis 7.0 computes it.
fn estimate(histo: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// Runs every decoder over untrusted bytes, as the commands would (the
/// fuzz target and the tests call it): errors are fine, panics are not.
pub fn exercise(bytes: &[u8]) {
    if !is_hll(bytes) {
        return;
    }
    let _ = count(bytes);
    let mut max = Box::new([0u8; REGISTERS]);
    let _ = merge_into(&mut max, bytes);
    let mut v = bytes.to_vec();
    for ele in [&b"a"[..], b"b", b"hello", b"12345678901"] {
        if add(&mut v, ele, 3000).is_err() {
            break;
        }
    }
    let _ = raise(&mut bytes.to_vec(), 100, 40, 3000);
    let _ = raise(&mut bytes.to_vec(), REGISTERS - 1, 3, 3000);
    let mut d = bytes.to_vec();
    if to_dense(&mut d).is_ok() {
        let _ = count(&d);
    }
    if !is_dense(bytes) {
        let _ = decode(bytes);
    }
    check_packed(bytes);
}

/// A dense value and its packed form agree: the same string back, the
/// same count, the same merge, and the same bytes and replies after the
/// same additions (whichever form they leave it in). Panics if not.
fn check_packed(bytes: &[u8]) {
    let Some(mut p) = pack(bytes) else { return };
    assert_eq!(p.to_redis(), bytes, "round trip");
    assert_eq!(Ok(count_packed(&p)), count(bytes), "count");
    let mut a = Box::new([0u8; REGISTERS]);
    let mut b = Box::new([0u8; REGISTERS]);
    merge_into(&mut a, bytes).expect("dense values merge");
    merge_packed(&mut b, &p);
    assert!(a == b, "merge");
    let mut plain = bytes.to_vec();
    let mut packed_full = false;
    for i in 0..300u32 {
        let ele = i.to_le_bytes();
        let want = add(&mut plain, &ele, 3000).expect("dense values take additions");
        if !packed_full {
            match add_packed(&mut p, &ele) {
                Raise::Full => packed_full = true,
                r => assert_eq!(r == Raise::Raised, want, "PFADD reply"),
            }
        }
        if !packed_full && i % 100 == 0 {
            assert_eq!(p.to_redis(), plain, "bytes after additions");
        }
    }
    if !packed_full {
        assert_eq!(p.to_redis(), plain, "bytes after additions");
        assert_eq!(Ok(count_packed(&p)), count(&plain), "count after additions");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift64 stream from `seed` (non-zero).
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Random dense values (registers in a narrow band, a wide one, and
    /// a few far out) and additions: the packed form gives the plain
    /// form's bytes, counts and PFADD replies.
    #[test]
    fn packed_dense_values_match_the_plain_form() {
        let mut next = xorshift(0x2545f4914f6cdd1d);
        for round in 0..24u64 {
            let mut v = vec![0u8; DENSE_SIZE];
            v[..4].copy_from_slice(b"HYLL");
            v[4] = DENSE;
            for b in &mut v[5..16] {
                *b = next() as u8;
            }
            let lo = (round % 6) as u8 * 10;
            let width = [1, 4, 16, 64][(round % 4) as usize];
            for i in 0..REGISTERS {
                let r = if next().is_multiple_of(500) {
                    next() % 64
                } else {
                    u64::from(lo) + next() % width
                };
                dense_set(&mut v[HDR..], i, r.min(63) as u8);
            }
            check_packed(&v);
        }
        // A real sketch, promoted from sparse and grown past the point
        // where its smallest register leaves 0.
        let mut v = new();
        for i in 0..400_000u32 {
            add(&mut v, &i.to_le_bytes(), 3000).unwrap();
            if i % 50_000 == 0 && is_dense(&v) {
                check_packed(&v);
            }
        }
        let p = pack(&v).unwrap();
        assert!(p.histogram()[0] == 0, "the base has risen");
        check_packed(&v);
    }

    #[test]
    fn dense_registers_round_trip() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn estimates_stay_within_the_standard_error() {
        let mut v = new();
        for i in 0..100_000u32 {
            add(&mut v, format!("ele:{i}").as_bytes(), 3000).unwrap();
            if [10, 100, 1000, 10_000, 99_999].contains(&i) {
                let got = count(&v).unwrap() as f64;
                let want = f64::from(i + 1);
                assert!((got - want).abs() / want < 0.05, "{i}: {got}");
            }
        }
        assert!(is_dense(&v));
    }

    #[test]
    fn corrupt_values_are_errors_not_panics() {
        let mut v = new();
        v.truncate(HDR + 1);
        assert_eq!(count(&v), Err(Corrupt));
        let mut max = [0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &v), Err(Corrupt));
        assert_eq!(to_dense(&mut v.clone()), Err(Corrupt));
        assert!(add(&mut v, b"x", 3000).is_err() || count(&v).is_err());
        // Every single-byte mutation of a small sparse value is handled.
        let mut base = new();
        for e in 0..20 {
            add(&mut base, format!("{e}").as_bytes(), 3000).unwrap();
        }
        for pos in HDR..base.len() {
            for b in [0u8, 0x3f, 0x40, 0x7f, 0x80, 0xff] {
                let mut m = base.clone();
                m[pos] = b;
                exercise(&m);
                m.truncate(pos + 1);
                exercise(&m);
            }
        }
    }

    #[test]
    fn random_bytes_after_a_header_never_panic() {
        let mut next = xorshift(0x9e3779b97f4a7c15);
        for round in 0..3000 {
            let len = HDR + (next() % 64) as usize;
            let mut v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            v[..4].copy_from_slice(b"HYLL");
            v[4] = SPARSE;
            exercise(&v);
            if round % 100 == 0 {
                let mut d: Vec<u8> = (0..DENSE_SIZE).map(|_| next() as u8).collect();
                d[..4].copy_from_slice(b"HYLL");
                d[4] = DENSE;
                exercise(&d);
            }
        }
    }
}
