//! Job ids: 40 ASCII characters, `D-` + 8 hex of the node id + `-` + 24
//! base64 characters of pseudo-random bits + `-` + the TTL in minutes as 4
//! hex digits whose parity tells the delivery guarantee (spec §1.2).
//!
//! The ids this node makes also say where their job is: characters 27..35
//! (48 of the 144 "random" bits) are the job's slot handle and a 16-bit
//! tag, masked by a hash of characters 11..27 (which are random), so a
//! lookup by id is one decode and one slot, with no hash table (see
//! [`JobId::with_handle`], [`JobId::handle`]). The spec asks only for a
//! collision-free base64 string (nothing parses it but a tie-break), and
//! the id still reads as random; the mask is fixed (not per run), so an id
//! read back from the AOF or an RDB file, or replayed on a replica, still
//! names the slot its job had.
//!
//! In cluster mode an id also says which cluster slot its job is in:
//! characters 22..27 are a Redis hash tag, `{` + 3 base64 characters +
//! `}`, chosen by the caller so that the id's key slot (Redis Cluster's
//! CRC16 rule) is its queue's ([`JobId::with_slot_tag`]). A cluster client
//! routes `ACKJOB id` as it routes `GET key`, and a node answers `-MOVED`
//! for a job of another node's slot without looking anything up. Disque's
//! validation (the length and the dashes) still passes; the random part
//! keeps 66 bits ahead of the tag, the first 64 of them the counter's.

use std::cmp::Ordering;

/// Length of a job id.
pub const ID_LEN: usize = 40;

/// A job id. Ordered by its random part first (bytes 11..), so that an
/// ordered map of jobs iterates in an order a scan cursor can resume
/// from (see [`JobId::scan_key`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobId(pub [u8; ID_LEN]);

impl std::fmt::Debug for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.0))
    }
}

impl Ord for JobId {
    /// Bytes 11..40 then 0..11, compared as big-endian words (the ordered
    /// indexes compare ids on every insert: inline word compares instead
    /// of a `memcmp` call; same order as comparing the bytes).
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        let w = |id: &JobId, at: usize| {
            u64::from_be_bytes(id.0[at..at + 8].try_into().expect("8 bytes"))
        };
        // 11..19, 19..27, 27..35, then 32..40 (overlapping 32..35, which
        // compared equal by then) and 0..8, 3..11 (overlapping likewise).
        for at in [11, 19, 27, 32, 0, 3] {
            match w(self, at).cmp(&w(o, at)) {
                Ordering::Equal => {}
                ne => return ne,
            }
        }
        Ordering::Equal
    }
}

impl PartialOrd for JobId {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl JobId {
    /// Disque's validation: exactly 40 bytes, `D` `-` at 0 and 1, `-` at
    /// 10 and 35; nothing else is checked.
    pub fn parse(b: &[u8]) -> Option<JobId> {
        if b.len() != ID_LEN || b[0] != b'D' || b[1] != b'-' || b[10] != b'-' || b[35] != b'-' {
            return None;
        }
        let mut id = [0u8; ID_LEN];
        id.copy_from_slice(b);
        Some(JobId(id))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The scan position of this id: its bytes 11..19 big-endian. Ids
    /// compare by these bytes first, so "every id whose key is at least
    /// `k`" is a contiguous tail of an ordered map.
    pub fn scan_key(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[11..19]);
        u64::from_be_bytes(b)
    }

    /// The smallest id with scan key `k` (a range bound).
    pub fn scan_floor(k: u64) -> JobId {
        let mut id = [0u8; ID_LEN];
        id[11..19].copy_from_slice(&k.to_be_bytes());
        JobId(id)
    }

    /// Builds an id from the node prefix (8 hex characters), 18 random
    /// bytes and the job's TTL and retry.
    pub fn build(node: &[u8; 8], random: &[u8; 18], ttl_secs: i64, retry: i64) -> JobId {
        let mut id = [0u8; ID_LEN];
        id[0] = b'D';
        id[1] = b'-';
        id[2..10].copy_from_slice(node);
        id[10] = b'-';
        for (i, c) in random.chunks_exact(3).enumerate() {
            let v = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
            id[11 + i * 4..15 + i * 4].copy_from_slice(&b64_quad(v).to_le_bytes());
        }
        id[35] = b'-';
        let mut minutes = (ttl_secs / 60).clamp(0, 65535) as u16;
        // The parity carries the delivery guarantee: odd at-least-once.
        if retry > 0 {
            minutes |= 1;
        } else {
            minutes &= !1;
        }
        for j in 0..4 {
            id[36 + j] = HEX[((minutes >> (12 - 4 * j)) & 15) as usize];
        }
        JobId(id)
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// 12 bits to their two base64 characters, the first in the low byte
/// (8 KiB): an id rebuilt from its slot ([`SlotId::unpack`], on every
/// GETJOB) takes 12 lookups instead of 24.
static B64_PAIRS: [u16; 4096] = digit_pairs(B64, 6);

/// The table of every pair of `alphabet`'s digits (each `bits` wide, so
/// `N` is `alphabet.len()` squared): the pair's value to its two
/// characters, the first in the low byte.
const fn digit_pairs<const N: usize>(alphabet: &[u8], bits: u32) -> [u16; N] {
    let mask = (1usize << bits) - 1;
    let mut t = [0u16; N];
    let mut i = 0;
    while i < N {
        t[i] = alphabet[i >> bits] as u16 | (alphabet[i & mask] as u16) << 8;
        i += 1;
    }
    t
}

/// Four base64 characters of 24 bits, the first in the low byte.
#[inline]
fn b64_quad(v: u32) -> u32 {
    u32::from(B64_PAIRS[((v >> 12) & 4095) as usize])
        | u32::from(B64_PAIRS[(v & 4095) as usize]) << 16
}

/// Base64 character to its 6 bits; 0xFF for anything else.
const UNB64: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut i = 0;
    while i < 64 {
        t[B64[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Where a cluster id's hash tag (`{abc}`) starts, and its length.
const SLOT_TAG_AT: usize = 22;

/// Where the handle field starts, and its length in characters (48 bits).
const HANDLE_AT: usize = 27;
const HANDLE_CHARS: usize = 8;
/// The tag above the 32-bit handle: an id whose decoded field lacks it was
/// not made with a handle (another server's, or an older Sluice's).
const HANDLE_TAG: u64 = 0xD15C;
const MASK48: u64 = (1 << 48) - 1;

/// splitmix64's finaliser (a bijection).
#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl JobId {
    #[inline]
    fn word(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.0[at..at + 8].try_into().expect("8 bytes"))
    }

    /// The mask of the handle field: a hash of characters 11..27.
    #[inline]
    fn handle_mask(&self) -> u64 {
        mix(self.word(11) ^ self.word(19).rotate_left(32) ^ 0x5D1C_E0B5_A7E5_10B5) & MASK48
    }

    /// This id with the hash tag `{tag}` in characters 22..27 (cluster
    /// mode: the caller picks `tag` so the id hashes to its queue's slot).
    /// Before [`with_handle`](Self::with_handle), whose mask reads them.
    pub fn with_slot_tag(mut self, tag: [u8; 3]) -> JobId {
        self.0[SLOT_TAG_AT] = b'{';
        self.0[SLOT_TAG_AT + 1..SLOT_TAG_AT + 4].copy_from_slice(&tag);
        self.0[SLOT_TAG_AT + 4] = b'}';
        self
    }

    /// This id with slot handle `h` written in characters 27..35.
    pub fn with_handle(mut self, h: u32) -> JobId {
        self.set_handle(h);
        self
    }

    #[inline]
    fn set_handle(&mut self, h: u32) {
        let v = ((HANDLE_TAG << 32) | u64::from(h)) ^ self.handle_mask();
        let c = u64::from(b64_quad((v >> 24) as u32 & 0xFF_FFFF))
            | u64::from(b64_quad(v as u32 & 0xFF_FFFF)) << 32;
        self.0[HANDLE_AT..HANDLE_AT + HANDLE_CHARS].copy_from_slice(&c.to_le_bytes());
    }

    /// Equality by five words (the derived `==` calls `memcmp`).
    #[inline]
    pub(crate) fn same(&self, o: &JobId) -> bool {
        [0, 8, 16, 24, 32].iter().fold(0, |d, &at| d | (self.word(at) ^ o.word(at))) == 0
    }

    /// The slot handle written by [`with_handle`](Self::with_handle), if
    /// the id carries one (a hint: the caller checks the slot holds this
    /// id).
    #[inline]
    pub fn handle(&self) -> Option<u32> {
        let mut v = 0u64;
        for &c in &self.0[HANDLE_AT..HANDLE_AT + HANDLE_CHARS] {
            let d = UNB64[c as usize];
            if d == 0xFF {
                return None;
            }
            v = (v << 6) | u64::from(d);
        }
        let x = v ^ self.handle_mask();
        (x >> 32 == HANDLE_TAG).then_some(x as u32)
    }
}

/// Where the TTL's 4 hex digits start.
const MINUTES_AT: usize = 36;

/// An id as its job's slot keeps it: 15 bytes instead of 40. What a slot
/// can rebuild is not stored: `D-`, the dashes, the node prefix (an index
/// into the registry's short table of prefixes: one per server run whose
/// jobs are held) and the handle characters 27..35 (the slot's own
/// handle, see [`JobId::with_handle`]). Characters 11..27 are 16 base64
/// sextets in 12 bytes (a cluster id's `{`/`}` at 22 and 26 are a flag,
/// their sextets 0) and the TTL's 4 hex digits 2 bytes. An id that does
/// not have this shape (another server's, upper-case digits, or more than
/// [`MAX_NODES`] prefixes) is not packed: [`SlotId::FOREIGN`], the whole
/// id kept beside the slab.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct SlotId {
    sextets: [u8; 12],
    minutes: [u8; 2],
    /// The prefix's index in the node table, [`TAGGED`] for a cluster
    /// id's hash tag; `FOREIGN_FORM` for an id kept whole elsewhere.
    form: u8,
}

/// Distinct node prefixes a registry packs (bits 0..7 of `form`).
pub(crate) const MAX_NODES: usize = 127;
const TAGGED: u8 = 0x80;
const FOREIGN_FORM: u8 = 0x7F;

impl SlotId {
    /// The form of an id kept whole beside the slab.
    pub(crate) const FOREIGN: SlotId =
        SlotId { sextets: [0; 12], minutes: [0; 2], form: FOREIGN_FORM };

    #[inline]
    pub(crate) fn is_foreign(&self) -> bool {
        self.form == FOREIGN_FORM
    }

    /// Index of its node prefix in the registry's table.
    #[inline]
    pub(crate) fn node(&self) -> usize {
        usize::from(self.form & !TAGGED)
    }

    /// The packed form of `id`, just made by [`JobId::build`] from
    /// `random` and given a handle (no hash tag), with its node prefix at
    /// index `node`: the sextets are the first 12 random bytes, nothing
    /// to decode.
    #[inline]
    pub(crate) fn of_built(id: &JobId, random: &[u8; 18], node: usize) -> SlotId {
        let mut m = 0u16;
        for &c in &id.0[MINUTES_AT..] {
            m = (m << 4) | u16::from(unhex(c));
        }
        let mut sextets = [0u8; 12];
        sextets.copy_from_slice(&random[..12]);
        let s = SlotId { sextets, minutes: m.to_le_bytes(), form: node as u8 };
        debug_assert_eq!(id.pack_named(node), Some(s));
        s
    }

    /// Characters 11..27 (two words) and 36..40 of the id, each group of
    /// characters built in a register and stored at once.
    #[inline]
    fn chars(&self) -> (u64, u64, u32) {
        let s = &self.sextets;
        // Four characters of three bytes, first character lowest.
        let group = |g: usize| {
            u64::from(b64_quad(
                (u32::from(s[g]) << 16) | (u32::from(s[g + 1]) << 8) | u32::from(s[g + 2]),
            ))
        };
        let (lo, mut hi) = (group(0) | group(3) << 32, group(6) | group(9) << 32);
        if self.form & TAGGED != 0 {
            // Characters 22 and 26: bytes 3 and 7 of the second word.
            hi = (hi & !(0xFF << 24 | 0xFF << 56)) | u64::from(b'{') << 24 | u64::from(b'}') << 56;
        }
        // Stored high byte first: each byte is two hex digits.
        let x = u32::from(HEX_PAIRS[usize::from(self.minutes[1])])
            | u32::from(HEX_PAIRS[usize::from(self.minutes[0])]) << 16;
        (lo, hi, x)
    }

    /// The whole id, for the job in slot `h` whose node prefix is `node`
    /// (not for [`FOREIGN`](Self::FOREIGN)).
    #[inline]
    pub(crate) fn unpack(&self, h: u32, node: &[u8; 8]) -> JobId {
        let (lo, hi, x) = self.chars();
        let mut id = JobId([0u8; ID_LEN]);
        let b = &mut id.0;
        b[0] = b'D';
        b[1] = b'-';
        b[2..10].copy_from_slice(node);
        b[10] = b'-';
        b[11..19].copy_from_slice(&lo.to_le_bytes());
        b[19..27].copy_from_slice(&hi.to_le_bytes());
        b[35] = b'-';
        b[MINUTES_AT..].copy_from_slice(&x.to_le_bytes());
        id.set_handle(h);
        id
    }

    /// Whether `id`, which names this slot (its handle characters decode
    /// to the slot's handle), is the one packed here with node prefix
    /// `node`. The handle characters need no comparing: with characters
    /// 11..27 equal, the same handle gives the same characters.
    #[inline]
    pub(crate) fn matches(&self, id: &JobId, node: &[u8; 8]) -> bool {
        let (lo, hi, x) = self.chars();
        let b = &id.0;
        b[..2] == *b"D-"
            && b[2..10] == *node
            && b[10] == b'-'
            && id.word(11) == lo
            && id.word(19) == hi
            && b[35] == b'-'
            && b[MINUTES_AT..] == x.to_le_bytes()
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A byte to its two lower-case hex digits, the first in the low byte.
static HEX_PAIRS: [u16; 256] = digit_pairs(HEX, 4);

/// A lower-case hex digit's value; 0xFF for anything else.
#[inline]
fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => 0xFF,
    }
}

impl JobId {
    /// This id packed for slot `h` with its node prefix at index `node`
    /// of the registry's table, or None when it cannot be rebuilt from
    /// that form (it does not name slot `h`, or has another shape).
    /// `SlotId::unpack(h, prefix)` gives this id back exactly.
    #[cfg(test)]
    pub(crate) fn pack(&self, h: u32, node: usize) -> Option<SlotId> {
        if self.handle() != Some(h) {
            return None;
        }
        self.pack_named(node)
    }

    /// [`pack`](Self::pack) of an id known to name its slot.
    #[inline]
    pub(crate) fn pack_named(&self, node: usize) -> Option<SlotId> {
        let b = &self.0;
        if node >= MAX_NODES || b[0] != b'D' || b[1] != b'-' || b[10] != b'-' || b[35] != b'-' {
            return None;
        }
        let tagged = b[SLOT_TAG_AT] == b'{' && b[SLOT_TAG_AT + 4] == b'}';
        let mut sextets = [0u8; 12];
        for g in 0..4 {
            let mut v = 0u32;
            for j in 0..4 {
                let at = 11 + g * 4 + j;
                let d = if tagged && (at == SLOT_TAG_AT || at == SLOT_TAG_AT + 4) {
                    0
                } else {
                    UNB64[b[at] as usize]
                };
                if d == 0xFF {
                    return None;
                }
                v = (v << 6) | u32::from(d);
            }
            sextets[g * 3..g * 3 + 3].copy_from_slice(&v.to_be_bytes()[1..]);
        }
        let mut m = 0u16;
        for &c in &b[MINUTES_AT..] {
            let d = unhex(c);
            if d == 0xFF {
                return None;
            }
            m = (m << 4) | u16::from(d);
        }
        let form = node as u8 | if tagged { TAGGED } else { 0 };
        Some(SlotId { sextets, minutes: m.to_le_bytes(), form })
    }

    /// The node prefix (characters 2..10).
    #[inline]
    pub(crate) fn node_prefix(&self) -> [u8; 8] {
        self.0[2..10].try_into().expect("8 bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_ttl_parity() {
        let id = JobId::build(b"dcb833cf", &[0xab; 18], 86400, 30);
        let s = std::str::from_utf8(&id.0).unwrap();
        assert_eq!(s.len(), 40);
        assert!(s.starts_with("D-dcb833cf-"), "{s}");
        assert!(s.ends_with("-05a1"), "{s}");
        assert!(JobId::build(b"dcb833cf", &[1; 18], 86400, 0).0.ends_with(b"-05a0"));
        assert!(JobId::build(b"dcb833cf", &[1; 18], 59, 1).0.ends_with(b"-0001"));
        assert!(JobId::build(b"dcb833cf", &[1; 18], 59, 0).0.ends_with(b"-0000"));
        assert!(JobId::build(b"dcb833cf", &[1; 18], i64::MAX, 1).0.ends_with(b"-ffff"));
        assert_eq!(JobId::parse(&id.0), Some(id));
        assert!(JobId::parse(&id.0[..39]).is_none());
        let mut bad = id.0;
        bad[10] = b'x';
        assert!(JobId::parse(&bad).is_none());
    }

    /// The word compare orders ids as comparing bytes 11..40 then 0..11.
    #[test]
    fn order_is_the_byte_order() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut ids = Vec::new();
        for _ in 0..2000 {
            let mut id = [0u8; ID_LEN];
            for b in id.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Few distinct values, so that long common prefixes occur.
                *b = (x % 3) as u8;
            }
            ids.push(JobId(id));
        }
        for a in &ids {
            for b in ids.iter().take(200) {
                let bytes = a.0[11..].cmp(&b.0[11..]).then_with(|| a.0[..11].cmp(&b.0[..11]));
                assert_eq!(a.cmp(b), bytes);
            }
        }
    }

    #[test]
    fn handles_round_trip() {
        for (i, h) in [0u32, 1, 4095, 4096, 123_456_789, u32::MAX].into_iter().enumerate() {
            let id = JobId::build(b"dcb833cf", &[i as u8 * 37 + 1; 18], 86400, 30).with_handle(h);
            assert_eq!(id.handle(), Some(h));
            assert!(JobId::parse(&id.0).is_some());
            assert!(id.0[11..35].iter().all(|c| B64.contains(c)), "{id:?}");
            assert!(id.0.ends_with(b"-05a1"));
        }
        // Ids made without one (another server's) mostly carry none.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut with = 0;
        for _ in 0..10_000 {
            let mut r = [0u8; 18];
            for b in r.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            with += usize::from(JobId::build(b"00000000", &r, 60, 1).handle().is_some());
        }
        assert!(with <= 2, "{with}");
        let mut odd = JobId::build(b"00000000", &[1; 18], 60, 1).with_handle(7);
        odd.0[30] = b'!';
        assert_eq!(odd.handle(), None);
    }

    #[test]
    fn a_slot_tag_keeps_the_handle_and_the_format() {
        let id = JobId::build(b"dcb833cf", &[0x5a; 18], 86400, 30);
        let tagged = id.with_slot_tag(*b"a+/").with_handle(4097);
        assert_eq!(&tagged.0[22..27], b"{a+/}");
        assert_eq!(tagged.handle(), Some(4097));
        assert_eq!(JobId::parse(&tagged.0), Some(tagged));
        assert_eq!(tagged.0[..22], id.0[..22]);
        assert_eq!(tagged.0[35..], id.0[35..]);
    }

    #[test]
    fn scan_floor_sorts_first() {
        let id = JobId::build(b"00000000", &[7; 18], 100, 1);
        assert!(JobId::scan_floor(id.scan_key()) <= id);
        assert!(JobId::scan_floor(id.scan_key() + 1) > id);
    }

    /// A slot's packed form gives the id back exactly, tagged or not;
    /// ids of another shape, or naming another slot, do not pack.
    #[test]
    fn packed_ids_round_trip() {
        let node = *b"dcb833cf";
        for (i, h) in [0u32, 1, 4095, 5734, 123_456_789, (1 << 31) - 1].into_iter().enumerate() {
            for ttl in [0i64, 59, 60, 86400, i64::MAX] {
                for retry in [0i64, 1] {
                    let base = JobId::build(&node, &[i as u8 * 37 + 1; 18], ttl, retry);
                    for id in [base.with_handle(h), base.with_slot_tag(*b"a+/").with_handle(h)] {
                        let p = id.pack(h, 3).expect("packs");
                        assert_eq!(p.node(), 3);
                        assert!(!p.is_foreign());
                        assert_eq!(p.unpack(h, &node), id);
                        assert!(p.matches(&id, &node));
                        assert!(!p.matches(&id, b"dcb833ce"));
                        for at in (0..27).chain(35..40) {
                            let mut odd = id;
                            odd.0[at] ^= 1;
                            assert!(!p.matches(&odd, &node), "{odd:?}");
                        }
                        assert_eq!(id.pack(h ^ 1, 3), None);
                    }
                }
            }
        }
        let r = [0x3c; 18];
        let built = JobId::build(&node, &r, 7200, 0).with_handle(77);
        assert_eq!(Some(SlotId::of_built(&built, &r, 2)), built.pack(77, 2));
        let id = JobId::build(&node, &[5; 18], 60, 1).with_handle(9);
        assert_eq!(id.pack(9, MAX_NODES), None);
        for (at, c) in [(36, b'A'), (12, b'!'), (22, b'{'), (0, b'X'), (35, b'+')] {
            let mut odd = id;
            odd.0[at] = c;
            assert_eq!(odd.pack(9, 0), None, "{odd:?}");
        }
        // Disque's own ids carry no handle.
        let disque = JobId::parse(b"D-dcb833cf-F5qE0MkXQWfWAO2YC+X0YUvM-05a1").unwrap();
        assert_eq!(disque.pack(0, 0), None);
    }
}
