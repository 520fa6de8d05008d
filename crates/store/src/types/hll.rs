//! A dense HyperLogLog held in four bits a register (issue 27): what a
//! dense HLL string costs in memory, not what it looks like. Every string
//! view of the value is Redis's dense string, rebuilt on demand
//! ([`PackedHll::write_redis`]); the HLL algorithms live in the engine
//! (`subsystems::hll`) and use the register accessors here.
//!
//! Redis's dense string is a 16-byte header and 16,384 six-bit registers
//! (12,304 bytes, jemalloc's 14,336-byte class). Registers of one sketch
//! sit close together (the smallest is rarely 15 below the largest), so
//! this keeps each as a 4-bit offset from a base, the smallest register
//! (DataSketches' HLL_4): 8,192 bytes of nibbles, a nibble of 15 meaning
//! "in the exceptions table" (register index and its value, sorted by
//! index), and the count of registers at the base, so that when the last
//! of them is raised the base rises and the nibbles are rebuilt (at most
//! 63 times in a sketch's life). One fixed allocation of 10,240 bytes (a
//! jemalloc class) holds all of it, with room for 674 exceptions; a
//! sketch that would need more is kept as Redis's string instead (crafted
//! values only: a real sketch has a handful).
//!
//! Layout: the Redis header verbatim (magic, encoding, three unused
//! bytes, the cached cardinality), the base, one unused byte, the count at
//! the base (u16), the number of exceptions (u16), two unused bytes, the
//! nibbles (register `i` in byte `i / 2`, low nibble first), the
//! exceptions (u16 index, u8 value). The form is canonical: equal
//! registers and headers give equal bytes.

/// Registers in a sketch.
pub const REGISTERS: usize = 1 << 14;
/// Redis's header size.
pub const HDR: usize = 16;
/// Length of Redis's dense string.
pub const REDIS_DENSE_LEN: usize = HDR + REGISTERS * 6 / 8;
/// The header's encoding byte (its fifth) of a dense sketch.
pub const DENSE: u8 = 0;
/// The one allocation: a jemalloc size class.
pub const SIZE: usize = 10_240;

const BASE: usize = 16;
const AT_BASE: usize = 18;
const NEXC: usize = 20;
const NIBBLES: usize = 24;
const EXC: usize = NIBBLES + REGISTERS / 2;
/// Most exceptions the allocation holds.
pub const MAX_EXCEPTIONS: usize = (SIZE - EXC) / 3;
const ESC: u8 = 15;

/// A dense HyperLogLog in four bits a register (see the module's notes).
#[derive(Clone, PartialEq, Eq)]
pub struct PackedHll(Box<[u8; SIZE]>);

impl std::fmt::Debug for PackedHll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedHll(base {}, {} exceptions)", self.base(), self.exceptions())
    }
}

/// What [`PackedHll::raise`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raise {
    /// The register was already at least the value.
    Unchanged,
    Raised,
    /// The exceptions table is full: nothing was changed, and the caller
    /// keeps the sketch as Redis's string.
    Full,
}

impl PackedHll {
    fn zeroed() -> PackedHll {
        let b: Box<[u8]> = vec![0u8; SIZE].into_boxed_slice();
        PackedHll(b.try_into().expect("SIZE bytes"))
    }

    /// Packs Redis's dense string (`v` is one: [`REDIS_DENSE_LEN`] bytes
    /// with a dense header; the caller checked it). `None` if its
    /// registers need more exceptions than fit.
    pub fn pack(v: &[u8]) -> Option<PackedHll> {
        debug_assert_eq!(v.len(), REDIS_DENSE_LEN);
        let mut regs = [0u8; REGISTERS];
        unpack6(&v[HDR..], &mut regs);
        PackedHll::from_registers(v[..HDR].try_into().expect("a header"), &regs)
    }

    /// A sketch of `regs` (each below 64) under `header`; `None` if more
    /// than [`MAX_EXCEPTIONS`] registers sit 15 or more above the smallest.
    pub fn from_registers(header: &[u8; HDR], regs: &[u8; REGISTERS]) -> Option<PackedHll> {
        let base = *regs.iter().min().expect("registers");
        let over = regs.iter().filter(|&&r| r >= base + ESC).count();
        if over > MAX_EXCEPTIONS {
            return None;
        }
        let mut p = PackedHll::zeroed();
        p.fill(header, regs, base);
        Some(p)
    }

    fn fill(&mut self, header: &[u8; HDR], regs: &[u8; REGISTERS], base: u8) {
        let b = &mut self.0;
        b.fill(0);
        b[..HDR].copy_from_slice(header);
        b[BASE] = base;
        let mut at_base = 0u16;
        let mut n = 0usize;
        for (i, pair) in regs.chunks_exact(2).enumerate() {
            let mut byte = 0u8;
            for (k, &r) in pair.iter().enumerate() {
                let off = r - base;
                at_base += u16::from(off == 0);
                let nib = if off >= ESC {
                    let at = EXC + 3 * n;
                    b[at..at + 2].copy_from_slice(&((2 * i + k) as u16).to_le_bytes());
                    b[at + 2] = r;
                    n += 1;
                    ESC
                } else {
                    off
                };
                byte |= nib << (4 * k);
            }
            b[NIBBLES + i] = byte;
        }
        b[AT_BASE..AT_BASE + 2].copy_from_slice(&at_base.to_le_bytes());
        b[NEXC..NEXC + 2].copy_from_slice(&(n as u16).to_le_bytes());
    }

    /// Redis's header: magic, encoding, unused bytes, cached cardinality.
    pub fn header(&self) -> &[u8; HDR] {
        self.0[..HDR].try_into().expect("a header")
    }

    pub fn header_mut(&mut self) -> &mut [u8; HDR] {
        (&mut self.0[..HDR]).try_into().expect("a header")
    }

    fn base(&self) -> u8 {
        self.0[BASE]
    }

    fn at_base(&self) -> u16 {
        u16::from_le_bytes([self.0[AT_BASE], self.0[AT_BASE + 1]])
    }

    /// How many registers sit in the exceptions table.
    pub fn exceptions(&self) -> usize {
        usize::from(u16::from_le_bytes([self.0[NEXC], self.0[NEXC + 1]]))
    }

    #[inline]
    fn nibble(&self, i: usize) -> u8 {
        (self.0[NIBBLES + i / 2] >> (4 * (i & 1))) & 0xf
    }

    #[inline]
    fn set_nibble(&mut self, i: usize, nib: u8) {
        let b = &mut self.0[NIBBLES + i / 2];
        let shift = 4 * (i & 1);
        *b = (*b & !(0xf << shift)) | (nib << shift);
    }

    /// The exceptions table's slot for register `i`: `Ok(slot)` if there,
    /// else where it would go.
    fn find_exception(&self, i: usize) -> Result<usize, usize> {
        let n = self.exceptions();
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let at = EXC + 3 * mid;
            let idx = usize::from(u16::from_le_bytes([self.0[at], self.0[at + 1]]));
            match idx.cmp(&i) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Register `i` (below [`REGISTERS`]).
    #[inline]
    pub fn get(&self, i: usize) -> u8 {
        let nib = self.nibble(i);
        if nib != ESC {
            return self.base() + nib;
        }
        match self.find_exception(i) {
            Ok(slot) => self.0[EXC + 3 * slot + 2],
            // Not reached: a nibble of 15 always has its exception.
            Err(_) => self.base() + ESC,
        }
    }

    /// Raises register `i` to `val` (below 64) if that is higher.
    pub fn raise(&mut self, i: usize, val: u8) -> Raise {
        let nib = self.nibble(i);
        let base = self.base();
        if nib != ESC {
            let cur = base + nib;
            if val <= cur {
                return Raise::Unchanged;
            }
            let off = val - base;
            if off >= ESC {
                let n = self.exceptions();
                if n == MAX_EXCEPTIONS {
                    return Raise::Full;
                }
                let slot = self.find_exception(i).expect_err("not an exception yet");
                let at = EXC + 3 * slot;
                self.0.copy_within(at..EXC + 3 * n, at + 3);
                self.0[at..at + 2].copy_from_slice(&(i as u16).to_le_bytes());
                self.0[at + 2] = val;
                self.0[NEXC..NEXC + 2].copy_from_slice(&((n + 1) as u16).to_le_bytes());
                self.set_nibble(i, ESC);
            } else {
                self.set_nibble(i, off);
            }
            if nib == 0 {
                let left = self.at_base() - 1;
                self.0[AT_BASE..AT_BASE + 2].copy_from_slice(&left.to_le_bytes());
                if left == 0 {
                    self.rebase();
                }
            }
            return Raise::Raised;
        }
        match self.find_exception(i) {
            Ok(slot) => {
                let at = EXC + 3 * slot + 2;
                if val <= self.0[at] {
                    return Raise::Unchanged;
                }
                self.0[at] = val;
                Raise::Raised
            }
            Err(_) => Raise::Unchanged,
        }
    }

    /// The last register at the base was raised: the base becomes the
    /// smallest register and every offset is rebuilt. Exceptions only
    /// leave the table, so the new form fits.
    #[cold]
    fn rebase(&mut self) {
        let mut regs = [0u8; REGISTERS];
        self.registers(&mut regs);
        let header = *self.header();
        let base = *regs.iter().min().expect("registers");
        self.fill(&header, &regs, base);
    }

    /// Every register, in order.
    pub fn registers(&self, out: &mut [u8; REGISTERS]) {
        let base = self.base();
        for (pair, &b) in out.chunks_exact_mut(2).zip(&self.0[NIBBLES..EXC]) {
            pair[0] = base + (b & 0xf);
            pair[1] = base + (b >> 4);
        }
        for e in self.0[EXC..EXC + 3 * self.exceptions()].chunks_exact(3) {
            out[usize::from(u16::from_le_bytes([e[0], e[1]]))] = e[2];
        }
    }

    /// How many registers hold each value (what the estimator reads).
    pub fn histogram(&self) -> [u64; 64] {
        let mut by_nib = [0u64; 16];
        for &b in &self.0[NIBBLES..EXC] {
            by_nib[usize::from(b & 0xf)] += 1;
            by_nib[usize::from(b >> 4)] += 1;
        }
        let mut histo = [0u64; 64];
        let base = usize::from(self.base());
        for (k, &c) in by_nib[..usize::from(ESC)].iter().enumerate() {
            if c > 0 {
                histo[base + k] += c;
            }
        }
        for e in self.0[EXC..EXC + 3 * self.exceptions()].chunks_exact(3) {
            histo[usize::from(e[2])] += 1;
        }
        histo
    }

    /// Writes Redis's dense string into `out` ([`REDIS_DENSE_LEN`] bytes).
    pub fn write_redis(&self, out: &mut [u8]) {
        let mut regs = [0u8; REGISTERS];
        self.registers(&mut regs);
        out[..HDR].copy_from_slice(self.header());
        pack6(&regs, &mut out[HDR..REDIS_DENSE_LEN]);
    }

    /// Redis's dense string.
    pub fn to_redis(&self) -> Vec<u8> {
        let mut v = vec![0u8; REDIS_DENSE_LEN];
        self.write_redis(&mut v);
        v
    }

    /// Bytes allocated.
    pub fn heap_size(&self) -> usize {
        SIZE
    }
}

/// Six-bit registers packed least significant bit first, as Redis does.
fn pack6(regs: &[u8; REGISTERS], out: &mut [u8]) {
    for (r, o) in regs.chunks_exact(4).zip(out.chunks_exact_mut(3)) {
        let w =
            u32::from(r[0]) | u32::from(r[1]) << 6 | u32::from(r[2]) << 12 | u32::from(r[3]) << 18;
        o.copy_from_slice(&w.to_le_bytes()[..3]);
    }
}

fn unpack6(v: &[u8], regs: &mut [u8; REGISTERS]) {
    for (r, b) in regs.chunks_exact_mut(4).zip(v.chunks_exact(3)) {
        let w = u32::from_le_bytes([b[0], b[1], b[2], 0]);
        r[0] = (w & 63) as u8;
        r[1] = (w >> 6 & 63) as u8;
        r[2] = (w >> 12 & 63) as u8;
        r[3] = (w >> 18 & 63) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::test_rng::Rng;

    fn header() -> [u8; HDR] {
        let mut h = [0u8; HDR];
        h[..4].copy_from_slice(b"HYLL");
        h[5..8].copy_from_slice(&[1, 2, 3]);
        h[8..16].copy_from_slice(&0x8000_0000_0000_1234u64.to_le_bytes());
        h
    }

    fn redis_of(h: &[u8; HDR], regs: &[u8; REGISTERS]) -> Vec<u8> {
        let mut v = vec![0u8; REDIS_DENSE_LEN];
        v[..HDR].copy_from_slice(h);
        pack6(regs, &mut v[HDR..]);
        v
    }

    fn check(p: &PackedHll, h: &[u8; HDR], regs: &[u8; REGISTERS]) {
        let mut got = [0u8; REGISTERS];
        p.registers(&mut got);
        assert!(got == *regs, "registers differ");
        for i in (0..REGISTERS).step_by(97) {
            assert_eq!(p.get(i), regs[i], "register {i}");
        }
        assert_eq!(p.to_redis(), redis_of(h, regs));
        let mut histo = [0u64; 64];
        for &r in regs.iter() {
            histo[usize::from(r)] += 1;
        }
        assert_eq!(p.histogram(), histo);
        // Canonical: rebuilding from the registers gives the same bytes.
        assert_eq!(*p, PackedHll::from_registers(h, regs).unwrap());
        assert_eq!(p.at_base() as usize, regs.iter().filter(|&&r| r == p.base()).count());
    }

    #[test]
    fn six_bit_round_trip() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ 3);
        let mut regs = [0u8; REGISTERS];
        for r in regs.iter_mut() {
            *r = (rng.next() % 64) as u8;
        }
        let v = redis_of(&header(), &regs);
        let mut back = [0u8; REGISTERS];
        unpack6(&v[HDR..], &mut back);
        assert!(back == regs);
    }

    #[test]
    fn random_raises_match_a_plain_model() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ 11);
        for round in 0..40 {
            let h = header();
            let mut regs = [0u8; REGISTERS];
            // Start anywhere from empty to a high, narrow band.
            let lo = (round % 5) as u8 * 8;
            if round % 2 == 1 {
                for r in regs.iter_mut() {
                    *r = lo + (rng.next() % 4) as u8;
                }
            }
            let mut p = PackedHll::pack(&redis_of(&h, &regs)).unwrap();
            check(&p, &h, &regs);
            for step in 0..20_000 {
                let i = (rng.next() as usize) % REGISTERS;
                // Mostly small raises, some far ones (exceptions).
                let val = if rng.below(50) == 0 {
                    (rng.next() % 64) as u8
                } else {
                    (regs[i] + (rng.next() % 3) as u8).min(63)
                };
                let want = val > regs[i];
                match p.raise(i, val) {
                    Raise::Full => {
                        // Nothing changed; a sketch this wide is plain.
                        check(&p, &h, &regs);
                        let mut wide = regs;
                        wide[i] = val;
                        assert!(PackedHll::from_registers(&h, &wide).is_none());
                        break;
                    }
                    r => assert_eq!(r == Raise::Raised, want, "step {step}"),
                }
                if want {
                    regs[i] = val;
                }
                if step % 2_000 == 0 {
                    check(&p, &h, &regs);
                }
            }
            check(&p, &h, &regs);
        }
    }

    #[test]
    fn the_base_rises_when_its_last_register_does() {
        let h = header();
        let mut regs = [5u8; REGISTERS];
        regs[7] = 30; // an exception at base 5, a nibble once the base is 19
        let mut p = PackedHll::from_registers(&h, &regs).unwrap();
        assert_eq!(p.exceptions(), 1);
        for (i, r) in regs.iter_mut().enumerate() {
            if i != 7 {
                assert_eq!(p.raise(i, 19), Raise::Raised);
                *r = 19;
            }
        }
        assert_eq!(p.base(), 19);
        assert_eq!(p.exceptions(), 0);
        check(&p, &h, &regs);
    }

    #[test]
    fn too_many_exceptions_stay_plain() {
        let h = header();
        let mut regs = [0u8; REGISTERS];
        for i in 0..MAX_EXCEPTIONS {
            regs[i * 3] = 63;
        }
        let mut p = PackedHll::from_registers(&h, &regs).unwrap();
        check(&p, &h, &regs);
        assert_eq!(p.raise(1, 20), Raise::Full);
        check(&p, &h, &regs);
        regs[1] = 20;
        assert!(PackedHll::from_registers(&h, &regs).is_none());
    }
}
