//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO, over string values, as Redis 7.0's `bitops.c` answers them.
//!
//! Bits are numbered from the most significant bit of the first byte. A
//! string grows (zero-filled) only as far as a write reaches, and offsets
//! are bounded by `proto-max-bulk-len`. Reads past the end see zeros. A
//! write turns the value `raw` (Redis's `dbUnshareStringValue`), as
//! `OBJECT ENCODING` shows; BITOP stores a `raw` string whatever its size.

use resp::ReplyBuf;
use store::{Value, NO_EXPIRE};

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

pub const COMMANDS: &[Command] = &[
    Command::redis("SETBIT", setbit),
    Command::redis("GETBIT", getbit),
    Command::redis("BITCOUNT", bitcount),
    Command::redis("BITPOS", bitpos),
    Command::redis("BITOP", bitop),
    Command::redis("BITFIELD", bitfield),
    Command::redis("BITFIELD_RO", bitfield_ro),
];

const OFFSET_ERR: &str = "bit offset is not an integer or out of range";

/// Redis's `getBitOffsetFromArgument`: a bit offset, or with `#` (BITFIELD
/// only) a multiple of the field width; bounded by `proto-max-bulk-len`.
fn bit_offset(cx: &mut Ctx, a: &[u8], bits: Option<u32>) -> Result<u64, CmdError> {
    let hashed = bits.filter(|_| a.first() == Some(&b'#'));
    let digits = if hashed.is_some() { &a[1..] } else { a };
    let mut off = resp::parse_i64(digits).ok_or_else(|| CmdError::err(OFFSET_ERR))?;
    if let Some(b) = hashed {
        off = off.wrapping_mul(i64::from(b));
    }
    let limit = cx.sess.conf(cx.shared).proto_max_bulk_len;
    if off < 0 || (off >> 3) >= limit {
        return Err(CmdError::err(OFFSET_ERR));
    }
    Ok(off as u64)
}

/// Bit `i` of `p` (zero past the end).
#[inline]
fn bit_at(p: &[u8], i: u64) -> bool {
    p.get((i >> 3) as usize).is_some_and(|b| b & (0x80 >> (i & 7)) != 0)
}

/// Redis's `lookupStringForBitCommand`: the string at `key`, created or
/// grown (zero-filled, made `raw`) so that bit `maxbit` exists. Returns
/// whether it was created or grew.
fn string_for_write<'c>(
    cx: &'c mut Ctx,
    key: &[u8],
    maxbit: u64,
) -> Result<(store::RawVec<'c>, bool), CmdError> {
    let need = (maxbit >> 3) as usize + 1;
    let exists = match cx.lookup(key) {
        Some(e) if !e.value.is_string() => return Err(CmdError::WrongType),
        Some(_) => true,
        None => false,
    };
    if !exists {
        cx.set(key, Value::raw(vec![0; need]), NO_EXPIRE);
    }
    let e = cx.lookup(key).expect("present");
    let mut v = e.value.make_raw().expect("a string");
    let grew = v.len() < need;
    if grew {
        // To the allocation's size class, not twice the capacity: a bitmap
        // grows by scattered writes, each as far as it needs (Redis's
        // sdsgrowzero asks for twice that).
        let extra = need - v.len();
        store::types::list::grow_exact(&mut v, extra);
        v.resize(need, 0);
    }
    Ok((v, grew || !exists))
}

// ---- SETBIT, GETBIT ------------------------------------------------------

fn setbit(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let offset = bit_offset(cx, args.req()?, None)?;
    const BIT_ERR: &str = "bit is not an integer or out of range";
    let on = resp::parse_i64(args.req()?).ok_or_else(|| CmdError::err(BIT_ERR))?;
    if on & !1 != 0 {
        return Err(CmdError::err(BIT_ERR));
    }
    let (mut v, dirty) = string_for_write(cx, key, offset)?;
    let (byte, mask) = ((offset >> 3) as usize, 0x80u8 >> (offset & 7));
    let was = v[byte] & mask != 0;
    if dirty || was != (on == 1) {
        if on == 1 {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        drop(v);
        cx.changed(key, Class::STRING, "setbit", 1);
    }
    out.int(i64::from(was));
    Ok(())
}

fn getbit(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let offset = bit_offset(cx, args.req()?, None)?;
    let mut ib = store::StrBuf::new();
    let set = match cx.lookup_read(key) {
        Some(e) => bit_at(e.value.as_bytes(&mut ib).ok_or(CmdError::WrongType)?, offset),
        None => false,
    };
    out.int(i64::from(set));
    Ok(())
}

// ---- BITCOUNT, BITPOS ----------------------------------------------------

/// A BITCOUNT/BITPOS range in bits, inclusive, after Redis's index rules
/// (negative from the end, clamped); `None` when empty.
fn bit_range(len: usize, start: i64, end: i64, in_bits: bool) -> Option<(u64, u64)> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| (if i < 0 { total.saturating_add(i) } else { i }).max(0);
    let (start, end) = (fix(start), fix(end).min(total - 1));
    if start > end {
        return None;
    }
    let (s, e) = (start as u64, end as u64);
    Some(if in_bits { (s, e) } else { (s * 8, e * 8 + 7) })
}

/// `BIT` or `BYTE` (syntax error otherwise): whether the unit is bits.
fn unit(a: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(a, "BIT") {
        Ok(true)
    } else if eq_ic(a, "BYTE") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

fn popcount(p: &[u8]) -> u64 {
    let mut chunks = p.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        n += u64::from(u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones());
    }
    n + chunks.remainder().iter().map(|b| u64::from(b.count_ones())).sum::<u64>()
}

fn bitcount(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    // Redis 7.0 looks the key up before it reads the range: a missing key
    // answers 0 whatever follows.
    let mut ib = store::StrBuf::new();
    let Some(e) = cx.lookup_read(key) else {
        out.int(0);
        return Ok(());
    };
    let p = e.value.as_bytes(&mut ib).ok_or(CmdError::WrongType)?;
    let range = match args.remaining() {
        0 => bit_range(p.len(), 0, -1, false),
        2 | 3 => {
            let start = parse_i64(args.req()?)?;
            let end = parse_i64(args.req()?)?;
            if start < 0 && end < 0 && start > end {
                out.int(0);
                return Ok(());
            }
            let in_bits = match args.next() {
                Some(u) => unit(u)?,
                None => false,
            };
            bit_range(p.len(), start, end, in_bits)
        }
        _ => return Err(CmdError::Syntax),
    };
    let n = match range {
        None => 0,
        Some((s, e)) => {
            let (sb, eb) = ((s >> 3) as usize, (e >> 3) as usize);
            let mut n = popcount(&p[sb..=eb]);
            // Bits of the edge bytes outside the range.
            n -= u64::from((p[sb] & !(0xffu8 >> (s & 7))).count_ones());
            n -= u64::from((p[eb] & (0x7fu8 >> (e & 7))).count_ones());
            n
        }
    };
    out.int(n as i64);
    Ok(())
}

/// First bit equal to `bit` in `p` within bits `from..=to`.
fn find_bit(p: &[u8], from: u64, to: u64, bit: bool) -> Option<u64> {
    let skip: u8 = if bit { 0 } else { 0xff };
    let mut i = from;
    while i <= to {
        if i & 63 == 0 && i + 63 <= to {
            let b = (i >> 3) as usize;
            if p[b..b + 8].iter().all(|&x| x == skip) {
                i += 64;
                continue;
            }
        }
        if i & 7 == 0 && i + 7 <= to && p[(i >> 3) as usize] == skip {
            i += 8;
            continue;
        }
        if bit_at(p, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn bitpos(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let bit = args.i64()?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::err("The bit argument must be 1 or 0."));
    }
    let bit = bit == 1;
    let mut ib = store::StrBuf::new();
    // A missing key is an endless run of zeros.
    let Some(e) = cx.lookup_read(key) else {
        out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let p = e.value.as_bytes(&mut ib).ok_or(CmdError::WrongType)?;
    let (range, end_given) = match args.remaining() {
        0 => (bit_range(p.len(), 0, -1, false), false),
        1..=3 => {
            let start = parse_i64(args.req()?)?;
            let end = args.next();
            // The unit is read before the end, as Redis does.
            let in_bits = match args.next() {
                Some(u) => unit(u)?,
                None => false,
            };
            let end_v = end.map(parse_i64).transpose()?;
            (bit_range(p.len(), start, end_v.unwrap_or(-1), in_bits), end_v.is_some())
        }
        _ => return Err(CmdError::Syntax),
    };
    let pos = match range {
        None => -1,
        Some((s, e)) => match find_bit(p, s, e, bit) {
            Some(i) => i as i64,
            // Looking for a clear bit with no end given, the string counts
            // as padded with zeros: the first bit past it.
            None if !bit && !end_given => e as i64 + 1,
            None => -1,
        },
    };
    out.int(pos);
    Ok(())
}

// ---- BITOP ---------------------------------------------------------------

fn bitop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let name = args.req()?;
    let op = if eq_ic(name, "AND") {
        Op::And
    } else if eq_ic(name, "OR") {
        Op::Or
    } else if eq_ic(name, "XOR") {
        Op::Xor
    } else if eq_ic(name, "NOT") {
        Op::Not
    } else {
        return Err(CmdError::Syntax);
    };
    let dst = args.key()?;
    let srcs = args.rest();
    if op == Op::Not && srcs.len() != 1 {
        return Err(CmdError::err("BITOP NOT must be called with a single source key."));
    }
    // The sources' bytes (a missing key is an empty string), all read
    // before the destination is written (it may be one of them).
    let mut inputs: Vec<Vec<u8>> = Vec::with_capacity(srcs.len());
    for k in srcs {
        let mut ib = store::StrBuf::new();
        match cx.lookup_read(k) {
            Some(e) => inputs.push(e.value.as_bytes(&mut ib).ok_or(CmdError::WrongType)?.to_vec()),
            None => inputs.push(Vec::new()),
        }
    }
    let maxlen = inputs.iter().map(Vec::len).max().unwrap_or(0);
    if maxlen == 0 {
        cx.store_or_delete(dst, None, Class::STRING, "set", 1);
        out.int(0);
        return Ok(());
    }
    let mut res = vec![0u8; maxlen];
    let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    for (i, r) in res.iter_mut().enumerate() {
        let mut it = inputs.iter();
        let first = byte(it.next().expect("one source"), i);
        *r = match op {
            Op::Not => !first,
            Op::And => it.fold(first, |a, v| a & byte(v, i)),
            Op::Or => it.fold(first, |a, v| a | byte(v, i)),
            Op::Xor => it.fold(first, |a, v| a ^ byte(v, i)),
        };
    }
    cx.store_or_delete(dst, Some(Value::raw(res)), Class::STRING, "set", 1);
    out.int(maxlen as i64);
    Ok(())
}

// ---- BITFIELD ------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq)]
enum FieldOp {
    Get,
    Set,
    Incr,
}

#[derive(Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

/// Redis's `getBitfieldTypeFromArgument`: `i1`..`i64` or `u1`..`u63`.
fn field_type(a: &[u8]) -> Result<(bool, u32), CmdError> {
    const ERR: &str = "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
    let signed = match a.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(CmdError::err(ERR)),
    };
    // Redis reads the width as a C string.
    let digits = &a[1..];
    let digits = &digits[..digits.iter().position(|&c| c == 0).unwrap_or(digits.len())];
    match resp::parse_i64(digits) {
        Some(b) if b >= 1 && b <= if signed { 64 } else { 63 } => Ok((signed, b as u32)),
        _ => Err(CmdError::err(ERR)),
    }
}

fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |v, j| (v << 1) | u64::from(bit_at(p, offset + j)))
}

fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned(p, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        v |= u64::MAX << bits;
    }
    v as i64
}

fn set_field(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let i = offset + j;
        let mask = 0x80u8 >> (i & 7);
        let b = &mut p[(i >> 3) as usize];
        if (value >> (u64::from(bits) - 1 - j)) & 1 == 1 {
            *b |= mask;
        } else {
            *b &= !mask;
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: `Some(result)` to store, or
/// `None` when the operation fails (OVERFLOW FAIL).
fn add_unsigned(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max: u64 = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let over = value > max || (incr > 0 && incr > maxincr);
    let under = !over && incr < 0 && incr < minincr;
    if !over && !under {
        return Some(value.wrapping_add(incr as u64));
    }
    match ow {
        Overflow::Wrap => {
            let res = value.wrapping_add(incr as u64);
            Some(if bits == 64 { res } else { res & !(u64::MAX << bits) })
        }
        Overflow::Sat => Some(if over { max } else { 0 }),
        Overflow::Fail => None,
    }
}

/// Redis's `checkSignedBitfieldOverflow`, as [`add_unsigned`].
fn add_signed(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let over =
        value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr);
    let under = !over
        && (value < min
            || (bits != 64 && incr < minincr)
            || (value < 0 && incr < 0 && incr < minincr));
    if !over && !under {
        return Some(value.wrapping_add(incr));
    }
    match ow {
        Overflow::Wrap => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let mask = u64::MAX << bits;
                if c & (1 << (bits - 1)) != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            Some(c as i64)
        }
        Overflow::Sat => Some(if over { max } else { min }),
        Overflow::Fail => None,
    }
}

fn bitfield(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    bitfield_with(cx, args, out, false)
}

fn bitfield_ro(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    bitfield_with(cx, args, out, true)
}

/// Redis's `bitfieldGeneric`: every subcommand is parsed before the key is
/// touched; a write creates or grows the string to the farthest bit any
/// write reaches (even when OVERFLOW FAIL then skips every write), and
/// each write made counts once in the dirty count.
fn bitfield_with(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, read_only: bool) -> CmdResult {
    let key = args.key()?;
    let mut ops: smallvec::SmallVec<[Field; 4]> = smallvec::SmallVec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    while let Some(sub) = args.next() {
        let left = args.remaining();
        let op = if eq_ic(sub, "GET") && left >= 2 {
            FieldOp::Get
        } else if eq_ic(sub, "SET") && left >= 3 {
            FieldOp::Set
        } else if eq_ic(sub, "INCRBY") && left >= 3 {
            FieldOp::Incr
        } else if eq_ic(sub, "OVERFLOW") && left >= 1 {
            let t = args.req()?;
            overflow = if eq_ic(t, "WRAP") {
                Overflow::Wrap
            } else if eq_ic(t, "SAT") {
                Overflow::Sat
            } else if eq_ic(t, "FAIL") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(args.req()?)?;
        let offset = bit_offset(cx, args.req()?, Some(bits))?;
        let mut value = 0;
        if op != FieldOp::Get {
            let last = offset + u64::from(bits) - 1;
            highest = Some(highest.map_or(last, |h| h.max(last)));
            value = args.i64()?;
        }
        ops.push(Field { op, signed, bits, offset, value, overflow });
    }
    let Some(highest) = highest else {
        // Only reads: a missing key reads as zeros.
        let mut ib = store::StrBuf::new();
        let e = cx.lookup_read(key);
        let p: &[u8] = match e {
            Some(e) => e.value.as_bytes(&mut ib).ok_or(CmdError::WrongType)?,
            None => &[],
        };
        out.array(ops.len());
        for f in &ops {
            reply_get(p, f, out);
        }
        return Ok(());
    };
    if read_only {
        return Err(CmdError::err("BITFIELD_RO only supports the GET subcommand"));
    }
    let (mut v, grew) = string_for_write(cx, key, highest)?;
    let p: &mut [u8] = &mut v;
    out.array(ops.len());
    let mut changes = 0;
    for f in &ops {
        if f.op == FieldOp::Get {
            reply_get(p, f, out);
            continue;
        }
        // The reply (the new value for INCRBY, the old one for SET) and
        // what to store; `None` to store nothing (OVERFLOW FAIL).
        let (ret, new): (i64, Option<u64>) = if f.signed {
            let old = get_signed(p, f.offset, f.bits);
            match f.op {
                FieldOp::Incr => {
                    let n = add_signed(old, f.value, f.bits, f.overflow);
                    (n.unwrap_or(0), n.map(|v| v as u64))
                }
                _ => (old, add_signed(f.value, 0, f.bits, f.overflow).map(|v| v as u64)),
            }
        } else {
            let old = get_unsigned(p, f.offset, f.bits);
            match f.op {
                FieldOp::Incr => {
                    let n = add_unsigned(old, f.value, f.bits, f.overflow);
                    (n.unwrap_or(0) as i64, n)
                }
                _ => (old as i64, add_unsigned(f.value as u64, 0, f.bits, f.overflow)),
            }
        };
        match new {
            Some(n) => {
                // Dirty only when the string was made or grew, or the
                // field's bits changed (Redis 7.0).
                let before = get_unsigned(p, f.offset, f.bits);
                set_field(p, f.offset, f.bits, n);
                if grew || get_unsigned(p, f.offset, f.bits) != before {
                    changes += 1;
                }
                out.int(ret);
            }
            None => out.null(),
        }
    }
    drop(v);
    if changes > 0 {
        cx.changed(key, Class::STRING, "setbit", changes);
    }
    Ok(())
}

fn reply_get(p: &[u8], f: &Field, out: &mut ReplyBuf) {
    if f.signed {
        out.int(get_signed(p, f.offset, f.bits));
    } else {
        out.int(get_unsigned(p, f.offset, f.bits) as i64);
    }
}
