//! One value in RDB form: Redis 7.0's object encodings (`rdbSaveObject`)
//! written byte for byte, and every encoding Redis 7.0 loads read back,
//! validated as it goes (`rdbLoadObject` with deep sanitization).

use store::types::list::List;
use store::types::set::Set;
use store::types::zset::{Limits as ZLimits, ZSet};
use store::types::Hash;
use store::value::parse_canonical_i64;
use store::Value;

use crate::lzf;
use crate::packed::{self, Elem, ListpackWriter};

/// The RDB version written (Redis 7.0).
pub const RDB_VERSION: u16 = 10;

/// Object types (`RDB_TYPE_*`).
pub mod ty {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS: u8 = crate::stream::STREAM_LISTPACKS;
    pub const STREAM_LISTPACKS_2: u8 = crate::stream::STREAM_LISTPACKS_2;
    pub const STREAM_LISTPACKS_3: u8 = crate::stream::STREAM_LISTPACKS_3;
}

const ENC_INT8: u64 = 0;
const ENC_INT16: u64 = 1;
const ENC_INT32: u64 = 2;
const ENC_LZF: u64 = 3;

/// Quicklist node containers (`QUICKLIST_NODE_CONTAINER_*`).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// The conversion thresholds that decide a loaded value's encoding.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub list_fill: i64,
    pub hash_max_entries: usize,
    pub hash_max_value: usize,
    pub set_max_intset: usize,
    pub zset: ZLimits,
}

impl Default for Limits {
    /// Redis 7.0's built-in defaults (its sample redis.conf says 128 hash
    /// entries; the server's own default is 512).
    fn default() -> Self {
        Limits {
            list_fill: -2,
            hash_max_entries: 512,
            hash_max_value: 64,
            set_max_intset: 512,
            zset: ZLimits { max_entries: 128, max_value: 64 },
        }
    }
}

/// Why decoding stopped, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Byte offset in the input.
    pub offset: usize,
    pub reason: &'static str,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at offset {}", self.reason, self.offset)
    }
}

/// Reason for a length marker that is no length (`0x82`–`0xBF`).
const INVALID_LEN: &str = "invalid length encoding";

/// Reason for a collection with no elements (Redis skips such keys when
/// loading a file and refuses them in RESTORE).
pub const EMPTY_KEY: &str = "empty key";

/// The reason of an error that only says the bytes ended (a streamed
/// load waits for more).
pub const SHORT: &str = "unexpected end of data";

// ------------------------------------------------------------------ writing

/// Appends an RDB length.
pub fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// `rdbEncodeInteger`: the integer forms of a string, when `v` fits.
fn write_enc_int(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[0xC0, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xC2);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// `rdbSaveRawString`: integer form for short canonical integers, LZF for
/// strings over 20 bytes when `compress` and it saves something, else the
/// bytes.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = parse_canonical_i64(s) {
            if write_enc_int(out, v) {
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        if let Some(z) = lzf::compress(s, s.len() - 4) {
            out.push(0xC3);
            write_len(out, z.len() as u64);
            write_len(out, s.len() as u64);
            out.extend_from_slice(&z);
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `rdbSaveLongLongAsStringObject`.
pub fn write_int(out: &mut Vec<u8>, v: i64) {
    if !write_enc_int(out, v) {
        let s = v.to_string();
        write_len(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

/// The type byte Redis 7.0 writes for `v`'s encoding.
pub fn value_type(v: &Value) -> u8 {
    match v {
        Value::Stream(_) => ty::STREAM_LISTPACKS_2,
        Value::Int(_) | Value::Emb(_) | Value::Raw(_) | Value::Hll(_) => ty::STRING,
        Value::List(_) => ty::LIST_QUICKLIST_2,
        Value::Set(s) => match *s {
            Set::Ints(_) => ty::SET_INTSET,
            Set::Hash(_) => ty::SET,
        },
        Value::ZSet(z) => {
            if z.encoding() == "listpack" {
                ty::ZSET_LISTPACK
            } else {
                ty::ZSET_2
            }
        }
        Value::Hash(h) => {
            if h.is_listpack() {
                ty::HASH_LISTPACK
            } else {
                ty::HASH
            }
        }
    }
}

/// Redis 7.0's `d2string`: integral values in the ±2^52 range as integers,
/// others with `%.17g`.
fn d2string(v: f64) -> Vec<u8> {
    if v == 0.0 {
        return if v.is_sign_negative() { b"-0".to_vec() } else { b"0".to_vec() };
    }
    if v.is_finite()
        && v > -4_503_599_627_370_495.0
        && v < 4_503_599_627_370_496.0
        && v == (v as i64) as f64
    {
        return (v as i64).to_string().into_bytes();
    }
    let mut buf = [0u8; 64];
    let n = resp::fmt_double(v, &mut buf);
    buf[..n].to_vec()
}

/// Splits a list into Redis 7.0 quicklist nodes as `RPUSH` of its elements
/// would (`_quicklistNodeAllowInsert`), so a DUMP of a list is Redis's.
fn list_nodes(l: &List) -> Vec<Vec<u8>> {
    const SIZE_SAFETY_LIMIT: usize = 8192;
    const LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
    let fill = l.fill();
    let mut nodes = Vec::new();
    let mut cur = ListpackWriter::new();
    let mut it = l.iter();
    while let Some(e) = it.next() {
        let allow = cur.count() > 0 && {
            let sz = e.len();
            let mut over = if sz < 254 { 1 } else { 5 };
            over += if sz < 64 {
                1
            } else if sz < 16384 {
                2
            } else {
                5
            };
            let new_sz = cur.bytes() + sz + over;
            if fill < 0 && new_sz <= LEVELS[((-fill) as usize - 1).min(4)] {
                true
            } else if new_sz > SIZE_SAFETY_LIMIT {
                false
            } else {
                (cur.count() as i64) < fill
            }
        };
        if !allow && cur.count() > 0 {
            nodes.push(std::mem::take(&mut cur).finish());
        }
        cur.push(e);
    }
    if cur.count() > 0 {
        nodes.push(cur.finish());
    }
    nodes
}

/// Appends `v` in RDB form (without its type byte).
pub fn write_value(out: &mut Vec<u8>, v: &Value, compress: bool) {
    match v {
        Value::Stream(st) => crate::stream::write_stream(out, st, compress),
        Value::Int(i) => write_int(out, *i),
        Value::Emb(b) => write_string(out, b, compress),
        Value::Raw(b) => write_string(out, b, compress),
        Value::Hll(h) => write_string(out, &h.to_redis(), compress),
        Value::List(l) => {
            let nodes = list_nodes(l);
            write_len(out, nodes.len() as u64);
            for n in nodes {
                write_len(out, CONTAINER_PACKED);
                write_string(out, &n, compress);
            }
        }
        Value::Set(s) => match s {
            Set::Ints(i) => {
                let blob = packed::intset_bytes(i.width(), i.len(), i.iter());
                write_string(out, &blob, compress);
            }
            Set::Hash(_) => {
                write_len(out, s.len() as u64);
                let mut buf = [0u8; 24];
                for m in s.iter() {
                    write_string(out, m.bytes(&mut buf), compress);
                }
            }
        },
        Value::ZSet(z) => {
            if z.encoding() == "listpack" {
                let mut w = ListpackWriter::new();
                for (m, s) in z.iter() {
                    w.push(&m);
                    w.push(&d2string(s));
                }
                write_string(out, &w.finish(), compress);
            } else {
                write_len(out, z.len() as u64);
                for (m, s) in z.range(0, usize::MAX, true) {
                    write_string(out, &m, compress);
                    out.extend_from_slice(&s.to_le_bytes());
                }
            }
        }
        Value::Hash(h) => {
            if h.is_listpack() {
                let mut w = ListpackWriter::new();
                for (f, v) in h.iter() {
                    w.push(&f);
                    w.push(&v);
                }
                write_string(out, &w.finish(), compress);
            } else {
                write_len(out, h.len() as u64);
                for (f, v) in h.iter() {
                    write_string(out, &f, compress);
                    write_string(out, &v, compress);
                }
            }
        }
    }
}

// ------------------------------------------------------------------ reading

/// A cursor over untrusted bytes; every read is bounds-checked.
pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

/// A string as stored: integers stay integers.
pub enum Str<'a> {
    Int(i64),
    Bytes(std::borrow::Cow<'a, [u8]>),
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn err(&self, reason: &'static str) -> Error {
        Error { offset: self.pos, reason }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn byte(&mut self) -> Result<u8, Error> {
        let b = *self.buf.get(self.pos).ok_or_else(|| self.err(SHORT))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn take(&mut self, n: u64) -> Result<&'a [u8], Error> {
        let left = (self.buf.len() - self.pos) as u64;
        if n > left {
            return Err(self.err(SHORT));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// A length, or `Err(enc)` for a special string encoding.
    fn len_or_enc(&mut self) -> Result<Result<u64, u64>, Error> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Ok(u64::from(b & 0x3F)),
            1 => Ok((u64::from(b & 0x3F) << 8) | u64::from(self.byte()?)),
            2 => match b {
                0x80 => Ok(u64::from(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))),
                0x81 => Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8"))),
                _ => return Err(self.err(INVALID_LEN)),
            },
            _ => Err(u64::from(b & 0x3F)),
        })
    }

    /// A plain length, read as Redis's `rdbLoadLen(rdb, NULL)` reads one:
    /// a string-encoding marker where a length is due gives its low six
    /// bits (Redis only tells the two apart when asked to).
    pub fn len(&mut self) -> Result<u64, Error> {
        Ok(self.len_or_enc()?.unwrap_or_else(|enc| enc))
    }

    /// A length where Redis does not check `rdbLoadLen`'s error value (a
    /// stream's ids and counters, checked only for a short read): an
    /// unknown length marker reads as `RDB_LENERR`, `u64::MAX`.
    pub fn len_unchecked(&mut self) -> Result<u64, Error> {
        let at = self.pos;
        match self.len() {
            Err(e) if e.reason == INVALID_LEN => {
                self.pos = at + 1;
                Ok(u64::MAX)
            }
            other => other,
        }
    }

    /// A string in any of its RDB forms.
    pub fn string(&mut self) -> Result<Str<'a>, Error> {
        match self.len_or_enc()? {
            Ok(n) => Ok(Str::Bytes(self.take(n)?.into())),
            Err(ENC_INT8) => Ok(Str::Int(i64::from(self.byte()? as i8))),
            Err(ENC_INT16) => {
                Ok(Str::Int(i64::from(i16::from_le_bytes(self.take(2)?.try_into().expect("2")))))
            }
            Err(ENC_INT32) => {
                Ok(Str::Int(i64::from(i32::from_le_bytes(self.take(4)?.try_into().expect("4")))))
            }
            Err(ENC_LZF) => {
                let clen = self.len()?;
                let len = self.len()?;
                // LZF expands at most 264 bytes per 3-byte reference.
                if len > clen.saturating_mul(90) {
                    return Err(self.err("invalid LZF lengths"));
                }
                let z = self.take(clen)?;
                if len == 0 {
                    // Redis's lzf_decompress returns 0 for no room, which
                    // is the length it wanted: the string is empty.
                    return Ok(Str::Bytes(Vec::new().into()));
                }
                lzf::decompress(z, len as usize)
                    .map(|v| Str::Bytes(v.into()))
                    .ok_or_else(|| self.err("invalid LZF data"))
            }
            Err(_) => Err(self.err("unknown string encoding")),
        }
    }

    /// A string's bytes.
    pub fn bytes(&mut self) -> Result<std::borrow::Cow<'a, [u8]>, Error> {
        Ok(match self.string()? {
            Str::Int(i) => i.to_string().into_bytes().into(),
            Str::Bytes(b) => b,
        })
    }

    fn binary_double(&mut self) -> Result<f64, Error> {
        Ok(f64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    /// `rdbLoadDoubleValue`: the text form of RDB_TYPE_ZSET.
    fn text_double(&mut self) -> Result<f64, Error> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let s = self.take(u64::from(n))?;
                std::str::from_utf8(s)
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .ok_or_else(|| self.err("invalid double"))
            }
        }
    }
}

/// A listpack zset's score as Redis's `zzlStrtod` reads it: C's `strtod`
/// over at most 127 bytes, taking the longest prefix that is a number (0
/// when none is). Redis's deep sanitization does not look at scores, so
/// whatever `strtod` makes of the bytes is what Redis serves.
fn zzl_strtod(b: &[u8]) -> f64 {
    let mut buf = [0u8; 128];
    let n = b.len().min(127);
    buf[..n].copy_from_slice(&b[..n]);
    // libc's strtod, not a parser of ours: the same prefix rules, hex
    // floats and rounding as the glibc Redis calls.
    // SAFETY: `buf` is NUL-terminated (byte 127 at the latest) and outlives
    // the call; a null end pointer is allowed.
    unsafe { libc::strtod(buf.as_ptr().cast(), std::ptr::null_mut()) }
}

/// Reads a value of type `t`.
pub fn read_value(r: &mut Reader<'_>, t: u8, lim: &Limits) -> Result<Value, Error> {
    let start = r.pos;
    let bad = |reason| Error { offset: start, reason };
    let v = match t {
        ty::STRING => match r.string()? {
            Str::Int(i) => Value::Int(i),
            Str::Bytes(b) => Value::loaded_string(&b),
        },
        ty::LIST => {
            let n = r.len()?;
            let mut l = List::new(lim.list_fill);
            for _ in 0..n {
                l.push_back(&r.bytes()?);
            }
            Value::List(Box::new(l))
        }
        ty::LIST_QUICKLIST | ty::LIST_QUICKLIST_2 => {
            let nodes = r.len()?;
            let mut l = List::new(lim.list_fill);
            for _ in 0..nodes {
                let container = if t == ty::LIST_QUICKLIST_2 { r.len()? } else { CONTAINER_PACKED };
                let blob = r.bytes()?;
                // (Redis refuses an empty node before looking at it.)
                if blob.is_empty() {
                    return Err(bad("Quicklist integrity check failed: empty node"));
                }
                match container {
                    CONTAINER_PLAIN => l.push_back(&blob),
                    CONTAINER_PACKED => {
                        let items = if t == ty::LIST_QUICKLIST_2 {
                            packed::listpack_entries(&blob)
                        } else {
                            packed::ziplist_entries(&blob)
                        }
                        .ok_or_else(|| {
                            bad(if t == ty::LIST_QUICKLIST_2 {
                                "Listpack integrity check failed."
                            } else {
                                "Ziplist integrity check failed."
                            })
                        })?;
                        // Redis refuses empty nodes only in deep sanitization;
                        // they carry nothing, so skipping them is equal.
                        for e in &items {
                            l.push_back(&e.to_vec());
                        }
                    }
                    _ => return Err(bad("Quicklist integrity check failed.")),
                }
            }
            Value::List(Box::new(l))
        }
        ty::LIST_ZIPLIST => {
            let blob = r.bytes()?;
            let items = packed::ziplist_entries(&blob)
                .ok_or_else(|| bad("List ziplist integrity check failed."))?;
            let mut l = List::new(lim.list_fill);
            for e in &items {
                l.push_back(&e.to_vec());
            }
            Value::List(Box::new(l))
        }
        ty::SET => {
            let n = r.len()?;
            let mut s = Set::new_ints();
            for _ in 0..n {
                if !s.add(&r.bytes()?, lim.set_max_intset) {
                    return Err(bad("Duplicate set members detected"));
                }
            }
            Value::Set(s)
        }
        ty::SET_INTSET => {
            let blob = r.bytes()?;
            let vals = packed::intset_values(&blob)
                .ok_or_else(|| bad("Intset integrity check failed."))?;
            let mut s = Set::new_ints();
            for v in vals {
                s.add_int(v, lim.set_max_intset);
            }
            Value::Set(s)
        }
        ty::ZSET | ty::ZSET_2 => {
            let n = r.len()?;
            let mut z = ZSet::new_skiplist();
            let mut maxlen = 0;
            let open = ZLimits { max_entries: usize::MAX, max_value: usize::MAX };
            for _ in 0..n {
                let m = r.bytes()?;
                let s = if t == ty::ZSET_2 { r.binary_double()? } else { r.text_double()? };
                if s.is_nan() {
                    return Err(bad("Zset with NAN score detected"));
                }
                maxlen = maxlen.max(m.len());
                if !z.set(&m, s, open) {
                    return Err(bad("Duplicate zset fields detected"));
                }
            }
            z.shrink_if_small(maxlen, lim.zset);
            Value::ZSet(z)
        }
        ty::ZSET_ZIPLIST | ty::ZSET_LISTPACK => {
            let zset_corrupt = if t == ty::ZSET_LISTPACK {
                "Zset listpack integrity check failed."
            } else {
                "Zset ziplist integrity check failed."
            };
            let blob = r.bytes()?;
            let items = if t == ty::ZSET_LISTPACK {
                packed::listpack_entries(&blob)
            } else {
                packed::ziplist_entries(&blob)
            }
            .ok_or_else(|| bad(zset_corrupt))?;
            if items.len() % 2 != 0 {
                return Err(bad(zset_corrupt));
            }
            let mut z = ZSet::new_listpack();
            let open = ZLimits { max_entries: usize::MAX, max_value: usize::MAX };
            for pair in items.chunks_exact(2) {
                let m = pair[0].to_vec();
                let s = match &pair[1] {
                    Elem::Int(i) => *i as f64,
                    Elem::Str(b) => Some(zzl_strtod(b))
                        .filter(|s| !s.is_nan())
                        .ok_or_else(|| bad("Zset ziplist integrity check failed: invalid score"))?,
                };
                if !z.set(&m, s, open) {
                    return Err(bad(zset_corrupt));
                }
            }
            if z.len() > lim.zset.max_entries {
                z.to_skiplist();
            }
            Value::ZSet(z)
        }
        ty::HASH => {
            let n = r.len()?;
            let mut h = Hash::new();
            for _ in 0..n {
                let f = r.bytes()?;
                let v = r.bytes()?;
                if !h.set(&f, &v, lim.hash_max_entries, lim.hash_max_value) {
                    return Err(bad("Duplicate hash fields detected"));
                }
            }
            Value::Hash(h)
        }
        ty::HASH_ZIPLIST | ty::HASH_LISTPACK => {
            let (corrupt, dup) = if t == ty::HASH_LISTPACK {
                (
                    "Hash listpack integrity check failed.",
                    "Hash listpack integrity check failed: listpack with dup elements",
                )
            } else {
                (
                    "Hash ziplist integrity check failed.",
                    "Hash ziplist integrity check failed: ziplist with dup elements",
                )
            };
            let blob = r.bytes()?;
            let items = if t == ty::HASH_LISTPACK {
                packed::listpack_entries(&blob)
            } else {
                packed::ziplist_entries(&blob)
            }
            .ok_or_else(|| bad(corrupt))?;
            if items.len() % 2 != 0 {
                return Err(bad(corrupt));
            }
            let mut h = Hash::new();
            for pair in items.chunks_exact(2) {
                let (f, v) = (pair[0].to_vec(), pair[1].to_vec());
                if !h.set(&f, &v, lim.hash_max_entries, lim.hash_max_value) {
                    return Err(bad(dup));
                }
            }
            Value::Hash(h)
        }
        ty::HASH_ZIPMAP => {
            let blob = r.bytes()?;
            let pairs =
                packed::zipmap_pairs(&blob).ok_or_else(|| bad("Zipmap integrity check failed."))?;
            let mut h = Hash::new();
            for (f, v) in pairs {
                if !h.set(f, v, lim.hash_max_entries, lim.hash_max_value) {
                    return Err(bad("Hash zipmap with dup elements"));
                }
            }
            Value::Hash(h)
        }
        ty::STREAM_LISTPACKS | ty::STREAM_LISTPACKS_2 | ty::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(crate::stream::read_stream(r, t)?))
        }
        _ => return Err(bad("Unknown RDB encoding type")),
    };
    let empty = match &v {
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Hash(h) => h.is_empty(),
        _ => false,
    };
    if empty {
        return Err(bad(EMPTY_KEY));
    }
    Ok(v)
}

// ------------------------------------------------------------ DUMP payloads

/// Why a RESTORE payload was refused (Redis's two error replies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// `-ERR DUMP payload version or checksum are wrong`
    VersionOrChecksum,
    /// `-ERR Bad data format`
    BadFormat,
}

/// A DUMP payload: type, value, RDB version (2 bytes LE), CRC64 (8 bytes LE).
pub fn dump(v: &Value, compress: bool) -> Vec<u8> {
    let mut out = vec![value_type(v)];
    write_value(&mut out, v, compress);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crate::crc64::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a RESTORE payload (`verifyDumpPayload` then `rdbLoadObject`).
pub fn restore(p: &[u8], lim: &Limits, check_crc: bool) -> Result<Value, PayloadError> {
    restore_why(p, lim, check_crc).map_err(|(e, _)| e)
}

/// [`restore`], with where and why the value did not decode (what Redis
/// logs when a payload fails its checks).
pub fn restore_why(
    p: &[u8],
    lim: &Limits,
    check_crc: bool,
) -> Result<Value, (PayloadError, Option<Error>)> {
    if p.len() < 10 {
        return Err((PayloadError::VersionOrChecksum, None));
    }
    let n = p.len();
    let ver = u16::from_le_bytes([p[n - 10], p[n - 9]]);
    if ver > RDB_VERSION {
        return Err((PayloadError::VersionOrChecksum, None));
    }
    if check_crc {
        let want = u64::from_le_bytes(p[n - 8..].try_into().expect("8"));
        if crate::crc64::crc64(0, &p[..n - 8]) != want {
            return Err((PayloadError::VersionOrChecksum, None));
        }
    }
    // Redis reads the value from the whole payload (`rioInitWithBuffer`
    // over all of it): a value may run on into the footer's bytes, and
    // what is left after it is not looked at.
    let mut r = Reader::new(p);
    let bad = |e| (PayloadError::BadFormat, Some(e));
    let t = r.byte().map_err(bad)?;
    read_value(&mut r, t, lim).map_err(bad)
}

#[cfg(test)]
mod tests {
    /// `DEBUG OBJECT … serializedlength` that redis-server 7.0.15 reports
    /// for these strings (LZF-compressed or not, with matches reaching the
    /// very end), measured on the oracle.
    #[test]
    fn string_lengths_match_redis() {
        for (want, s) in [
            (9, "aaaaaaaaaaaaaaaaaaaaa"),
            (11, "aaaaaaaaaaaaaaaaaaaaaa"),
            (12, "aaaaaaaaaaaaaaaaaaaaaaa"),
            (13, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
            (21, "aaaaaaaaaaaaaaaaaaaa"),
            (38, "dlXYqgbcZnchcrnbsdhudlsbqgbcnnchcrnbsZhu"),
            (45, "jtgcsmxlcqmsZegxjZgcsmxlcqmsmegxjtgcsmxXcqmsmegxjtgcsmxlcqmsmegx"),
            (30, "gkthvZyspujgktZvayspujgkthvayspujgkthvayspujY"),
            (16, "smnnsmnnsmnnsmnnsmYnsm"),
            (22, "bbbbbbbabbabbbbabaaaabbbb"),
            (29, "abbbabbababaababbaababbabbaaababbaabbabbabaa"),
            (22, "rhiqgnrjmdyrhiqgnrjmdyrhiqgnrjmdyrhiqgnr"),
            (30, "gidakfgidakfZidakfgidakfgidakfgidakfYidakZgid"),
            (67, "yxx yxy  yzx xyz xxyyyzzzxzyxx xx xxzxyxxyzyxyyyxzyyyzxzx y    xx"),
            (17, "yypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmz"),
            (23, "hhgdhbcfddefaabfbdcfhc"),
            (23, "baccaaaabacabaccbcabbb"),
            (31, "fnawZhvlsldhyZZYwzhvlsldhyfnaw"),
        ] {
            let mut out = Vec::new();
            super::write_string(&mut out, s.as_bytes(), true);
            assert_eq!(out.len(), want, "{s}");
        }
    }
}
