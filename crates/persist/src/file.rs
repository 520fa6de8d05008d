//! Whole RDB files: the header, AUX fields, SELECTDB/RESIZEDB, keys with
//! their expiry, EOF and the CRC64 trailer, as Redis 7.0's `rdbSave`
//! writes them; and a loader for versions 1–10 that validates everything
//! and reports the offset and reason of the first problem.

use std::io::{self, Write};

use store::Value;

use crate::crc64::crc64;
use crate::value::{self, Error, Limits, Reader, RDB_VERSION};

pub mod op {
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// Writes an RDB file through a buffer, keeping the running CRC.
pub struct Writer<W: Write> {
    w: W,
    buf: Vec<u8>,
    crc: u64,
    checksum: bool,
    compress: bool,
}

/// An AUX field's value.
pub enum Aux<'a> {
    Str(&'a str),
    Int(i64),
    /// Binary-safe (Sluice's own fields, e.g. `sluice-job`: Redis 7.0
    /// skips AUX fields it does not know).
    Bytes(&'a [u8]),
}

impl<W: Write> Writer<W> {
    /// Starts a file: magic, version and the AUX fields given (Redis 7.0
    /// writes `redis-ver`, `redis-bits`, `ctime`, `used-mem`, `aof-base`).
    pub fn new(w: W, aux: &[(&str, Aux<'_>)], compress: bool, checksum: bool) -> Self {
        let mut wr = Writer { w, buf: Vec::with_capacity(1 << 16), crc: 0, checksum, compress };
        wr.buf.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        for (k, v) in aux {
            wr.buf.push(op::AUX);
            value::write_string(&mut wr.buf, k.as_bytes(), compress);
            match v {
                Aux::Str(s) => value::write_string(&mut wr.buf, s.as_bytes(), compress),
                Aux::Int(i) => value::write_string(&mut wr.buf, i.to_string().as_bytes(), compress),
                Aux::Bytes(b) => value::write_string(&mut wr.buf, b, compress),
            }
        }
        wr
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        if self.checksum {
            self.crc = crc64(self.crc, &self.buf);
        }
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// SELECTDB and RESIZEDB for a database about to be written.
    pub fn select_db(&mut self, db: usize, keys: usize, expires: usize) -> io::Result<()> {
        self.buf.push(op::SELECTDB);
        value::write_len(&mut self.buf, db as u64);
        self.buf.push(op::RESIZEDB);
        value::write_len(&mut self.buf, keys as u64);
        value::write_len(&mut self.buf, expires as u64);
        self.spill()
    }

    /// SELECTDB alone: back to a database already started (a point-in-time
    /// save writes stripes in the order they are captured; loaders accept
    /// a database's keys in several runs).
    pub fn reselect_db(&mut self, db: usize) -> io::Result<()> {
        self.buf.push(op::SELECTDB);
        value::write_len(&mut self.buf, db as u64);
        self.spill()
    }

    /// One key (`rdbSaveKeyValuePair`; no LRU/LFU fields, as Redis without
    /// an LRU or LFU maxmemory policy).
    pub fn key(&mut self, key: &[u8], v: &Value, expire_at: i64) -> io::Result<()> {
        encode_key(&mut self.buf, key, v, expire_at, None, self.compress);
        self.spill()
    }

    /// Keys already encoded with [`encode_key`] (a stripe serialised while
    /// it was locked, written after it was released).
    pub fn encoded(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buf.len() + bytes.len() >= 1 << 16 {
            self.flush_buf()?;
        }
        if bytes.len() >= 1 << 16 {
            if self.checksum {
                self.crc = crc64(self.crc, bytes);
            }
            return self.w.write_all(bytes);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// One function library (`RDB_OPCODE_FUNCTION2`); Redis writes them
    /// after the AUX fields, before the databases.
    pub fn function(&mut self, code: &[u8]) -> io::Result<()> {
        crate::functions::write_record(&mut self.buf, code, self.compress);
        self.spill()
    }

    /// Whether values are LZF-compressed (`rdbcompression`).
    pub fn compress(&self) -> bool {
        self.compress
    }

    /// EOF and the checksum (zero when checksums are off); returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.buf.push(op::EOF);
        self.flush_buf()?;
        let crc = if self.checksum { self.crc } else { 0 };
        self.w.write_all(&crc.to_le_bytes())?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// Appends one key's record: expiry, idle time in seconds (written, as
/// Redis does, only under an LRU maxmemory policy), type, key, value.
pub fn encode_key(
    out: &mut Vec<u8>,
    key: &[u8],
    v: &Value,
    expire_at: i64,
    idle: Option<u64>,
    compress: bool,
) {
    let access = idle.map_or(Access::None, Access::Idle);
    encode_key_with(out, key, v, expire_at, access, compress);
}

/// What a key's record says of its accesses (Redis writes the idle time
/// under an LRU policy, the LFU counter under an LFU one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    None,
    Idle(u64),
    Freq(u8),
}

/// [`encode_key`] with either access field.
pub fn encode_key_with(
    out: &mut Vec<u8>,
    key: &[u8],
    v: &Value,
    expire_at: i64,
    access: Access,
    compress: bool,
) {
    if expire_at >= 0 {
        out.push(op::EXPIRETIME_MS);
        out.extend_from_slice(&expire_at.to_le_bytes());
    }
    match access {
        Access::None => {}
        Access::Idle(idle) => {
            out.push(op::IDLE);
            value::write_len(out, idle);
        }
        Access::Freq(freq) => {
            out.push(op::FREQ);
            out.push(freq);
        }
    }
    out.push(value::value_type(v));
    value::write_string(out, key, compress);
    value::write_value(out, v, compress);
}

/// What a loaded file held besides its keys.
#[derive(Debug, Default)]
pub struct Loaded {
    pub version: u16,
    pub keys_loaded: u64,
    /// Keys skipped because their TTL had passed.
    pub keys_expired: u64,
    /// Their databases and names, in file order: a master restarting
    /// feeds their deletion to its replicas (Redis's RDBFLAGS_FEED_REPL).
    /// Bounded by the file, which the loader holds whole.
    pub expired_names: Vec<(usize, Vec<u8>)>,
    /// Collections stored empty (skipped, as Redis does).
    pub empty_keys: u64,
    /// The names of the first [`EMPTY_NAMES_KEPT`] of those (Redis logs
    /// that many).
    pub empty_key_names: Vec<Vec<u8>>,
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// Function libraries' codes, in file order (pre-GA records already
    /// turned into code with its metadata line, as Redis 7.0.15 does).
    pub functions: Vec<Vec<u8>>,
    /// Bytes the file took, checksum included (an AOF's commands may
    /// follow an RDB preamble).
    pub consumed: usize,
}

/// How many skipped empty keys [`Loaded`] names.
pub const EMPTY_NAMES_KEPT: usize = 10;

/// A key as loaded.
pub struct LoadedKey<'a> {
    pub db: usize,
    pub key: &'a [u8],
    pub value: Value,
    /// Unix ms, or -1.
    pub expire_at: i64,
    /// Seconds idle, when the file says (an LRU policy saved it).
    pub idle: Option<u64>,
    /// The LFU counter, when the file says (an LFU policy saved it).
    pub freq: Option<u8>,
}

/// The function libraries at the head of a file (after its AUX fields,
/// before anything else: where Redis and Sluice write them), read without
/// loading the rest, so that a loader can compile them before any key, as
/// Redis does. Stops quietly at the first thing that is not one (or at
/// damage: [`load`] reports it).
pub fn leading_functions(buf: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    walk_head(buf, |r| {
        if let HeadRecord::Function(code) = r {
            out.push(code);
        }
    });
    out
}

/// The `used-mem` AUX field at the head of a file (the memory of the
/// server that wrote it, which Redis's INFO shows while a load whose size
/// is not known runs: `loading_rdb_used_mem`), read as [`leading_functions`]
/// reads. `None` when the head holds none or not a number; a negative one
/// reads as 0.
pub fn leading_used_mem(buf: &[u8]) -> Option<u64> {
    let mut found = None;
    walk_head(buf, |r| {
        if let HeadRecord::Aux(k, v) = r {
            if found.is_none() && k == b"used-mem" {
                found = std::str::from_utf8(v).ok().and_then(|t| t.parse::<i64>().ok());
            }
        }
    });
    found.map(|n| n.max(0) as u64)
}

/// One record of a file's head.
enum HeadRecord<'a> {
    Aux(&'a [u8], &'a [u8]),
    Function(Vec<u8>),
}

/// Hands `each` the AUX fields and function libraries at the head of a
/// file, in order, until the first other record, damage or the end of
/// `buf`.
fn walk_head(buf: &[u8], mut each: impl FnMut(HeadRecord<'_>)) {
    if buf.len() < 9 || &buf[..5] != b"REDIS" {
        return;
    }
    let mut r = Reader::new(&buf[9..]);
    loop {
        let Ok(t) = r.byte() else { return };
        match t {
            op::AUX => {
                let (Ok(k), Ok(v)) = (r.bytes(), r.bytes()) else { return };
                each(HeadRecord::Aux(&k, &v));
            }
            op::FUNCTION | op::FUNCTION2 => match crate::functions::read_record(&mut r, t) {
                Ok(code) => each(HeadRecord::Function(code)),
                Err(_) => return,
            },
            _ => return,
        }
    }
}

/// Loads a whole file held in memory. `databases` bounds SELECTDB; keys
/// whose expiry is before `now_ms` are skipped (a master's behaviour);
/// `sink` stores each key and may refuse it (a duplicate) with a reason.
pub fn load(
    buf: &[u8],
    lim: &Limits,
    databases: usize,
    now_ms: i64,
    check_crc: bool,
    mut sink: impl FnMut(LoadedKey<'_>) -> Result<(), &'static str>,
) -> Result<Loaded, Error> {
    let mut l = Loader::new(*lim, databases, now_ms, check_crc);
    l.feed(buf, true, &mut sink)?;
    Ok(l.finish())
}

/// An RDB image loaded as its bytes arrive (a replica's diskless load
/// reads its master's payload at the pace the keys load, as Redis's
/// loader reading from the socket does, and never holds it whole).
/// [`Loader::feed`] takes the bytes not consumed yet and parses as many
/// whole records as they hold; a record cut by the end of the bytes is
/// parsed again, whole, once more have come.
pub struct Loader {
    out: Loaded,
    lim: Limits,
    databases: usize,
    now_ms: i64,
    check_crc: bool,
    db: usize,
    expire_at: i64,
    idle: Option<u64>,
    freq: Option<u8>,
    /// The CRC64 of the bytes earlier feeds consumed (`out.consumed`),
    /// kept only when it is checked.
    crc: u64,
    header: bool,
    done: bool,
}

impl Loader {
    pub fn new(lim: Limits, databases: usize, now_ms: i64, check_crc: bool) -> Self {
        Loader {
            out: Loaded::default(),
            lim,
            databases,
            now_ms,
            check_crc,
            db: 0,
            expire_at: -1,
            idle: None,
            freq: None,
            crc: 0,
            header: false,
            done: false,
        }
    }

    /// Whether the image's end (EOF and its checksum) was read.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Bytes consumed by the feeds so far.
    pub fn consumed(&self) -> usize {
        self.out.consumed
    }

    /// What was loaded besides the keys (the image's size in `consumed`).
    pub fn finish(self) -> Loaded {
        self.out
    }

    /// Parses the whole records at the head of `buf` and returns how many
    /// bytes they took (the caller drops them and feeds the rest with
    /// what comes next). With `last`, `buf` is all there is: a record it
    /// cuts is the error it is for a whole file.
    pub fn feed<F>(&mut self, buf: &[u8], last: bool, sink: &mut F) -> Result<usize, Error>
    where
        F: FnMut(LoadedKey<'_>) -> Result<(), &'static str>,
    {
        let mut r = Reader::new(buf);
        let cut = |e: &Error| !last && e.reason == value::SHORT;
        if !self.header {
            if buf.len() < 9 && !last {
                return Ok(0);
            }
            self.header(&mut r)?;
        }
        let mut took = r.pos;
        while !self.done {
            match self.record(&mut r, buf, last, sink) {
                Ok(()) => took = r.pos,
                Err(e) if cut(&e) => break,
                Err(mut e) => {
                    // Offsets in errors are the image's.
                    e.offset += self.out.consumed;
                    return Err(e);
                }
            }
        }
        if self.check_crc && !self.done {
            self.crc = crc64(self.crc, &buf[..took]);
        }
        self.out.consumed += took;
        Ok(took)
    }

    fn header(&mut self, r: &mut Reader<'_>) -> Result<(), Error> {
        let magic = r.take(9).map_err(|_| Error { offset: 0, reason: "file too short" })?;
        if &magic[..5] != b"REDIS" {
            return Err(Error { offset: 0, reason: "wrong signature trying to load DB from file" });
        }
        self.out.version = std::str::from_utf8(&magic[5..])
            .ok()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|v| (1..=RDB_VERSION).contains(v))
            .ok_or(Error { offset: 5, reason: "can't handle RDB format version" })?;
        self.header = true;
        Ok(())
    }

    /// One record; what it changes is changed only once it is whole.
    fn record<F>(
        &mut self,
        r: &mut Reader<'_>,
        buf: &[u8],
        last: bool,
        sink: &mut F,
    ) -> Result<(), Error>
    where
        F: FnMut(LoadedKey<'_>) -> Result<(), &'static str>,
    {
        let out = &mut self.out;
        let t = r.byte()?;
        match t {
            op::EXPIRETIME => {
                let s = i32::from_le_bytes(r.take(4)?.try_into().expect("4"));
                self.expire_at = i64::from(s) * 1000;
                return Ok(());
            }
            op::EXPIRETIME_MS => {
                self.expire_at = i64::from_le_bytes(r.take(8)?.try_into().expect("8"));
                return Ok(());
            }
            op::FREQ => {
                self.freq = Some(r.byte()?);
                return Ok(());
            }
            op::IDLE => {
                self.idle = Some(r.len()?);
                return Ok(());
            }
            op::EOF => {
                if out.version >= 5 {
                    let at = r.pos;
                    let want = match r.take(8) {
                        Ok(b) => u64::from_le_bytes(b.try_into().expect("8")),
                        // Cut here: the rest may come.
                        Err(e) if !last => return Err(e),
                        Err(_) => return Err(Error { offset: at, reason: "missing checksum" }),
                    };
                    if self.check_crc && want != 0 && crc64(self.crc, &buf[..at]) != want {
                        return Err(Error { offset: at, reason: "RDB CRC error" });
                    }
                }
                self.done = true;
                return Ok(());
            }
            op::SELECTDB => {
                let at = r.pos;
                let n = r.len()?;
                if n >= self.databases as u64 {
                    return Err(Error {
                        offset: at,
                        reason: "data file was created with a server configured for more databases",
                    });
                }
                self.db = n as usize;
                return Ok(());
            }
            op::RESIZEDB => {
                r.len()?;
                r.len()?;
                return Ok(());
            }
            op::AUX => {
                let k = r.bytes()?.into_owned();
                let v = r.bytes()?.into_owned();
                out.aux.push((k, v));
                return Ok(());
            }
            op::FUNCTION | op::FUNCTION2 => {
                // A library record cut by the end of the bytes is one
                // that waits for more, not a library that fails to load.
                if !last && t == op::FUNCTION2 {
                    let mut probe = Reader { buf: r.buf, pos: r.pos };
                    probe.bytes().map_err(|e| Error { reason: value::SHORT, ..e })?;
                }
                out.functions.push(crate::functions::read_record(r, t)?);
                return Ok(());
            }
            op::MODULE_AUX => {
                return Err(r.err("modules are not supported"));
            }
            _ => {}
        }
        let key = r.bytes()?;
        let at = r.pos;
        let v = match value::read_value(r, t, &self.lim) {
            Ok(v) => v,
            Err(e) if e.reason == value::EMPTY_KEY => {
                out.empty_keys += 1;
                if out.empty_key_names.len() < EMPTY_NAMES_KEPT {
                    out.empty_key_names.push(key.into_owned());
                }
                (self.expire_at, self.idle, self.freq) = (-1, None, None);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let (db, expire_at, idle, freq) = (self.db, self.expire_at, self.idle, self.freq);
        if expire_at != -1 && expire_at < self.now_ms {
            out.keys_expired += 1;
            out.expired_names.push((db, key.into_owned()));
        } else {
            sink(LoadedKey { db, key: &key, value: v, expire_at, idle, freq })
                .map_err(|reason| Error { offset: at, reason })?;
            out.keys_loaded += 1;
        }
        (self.expire_at, self.idle, self.freq) = (-1, None, None);
        Ok(())
    }
}
