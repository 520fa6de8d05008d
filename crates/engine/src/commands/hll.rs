//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST,
//! over string values in Redis's representation ([`crate::subsystems::hll`]).
//!
//! As in Redis, PFCOUNT of one key stores the cardinality it computed in
//! the value's header: a read-only command that dirties the key (watchers
//! fire, the command is propagated) without a keyspace event.
//!
//! A dense value is kept in four bits a register (`Value::Hll`, issue 27)
//! once a PF command writes it; PFADD and PFCOUNT work on that form, the
//! rarer commands on Redis's string, packed again after.

use std::borrow::Cow;

use resp::ReplyBuf;
use store::types::hll::Raise;
use store::{StrBuf, Value, NO_EXPIRE};

use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Flags};
use crate::subsystems::hll::{self, Corrupt, REGISTERS};

pub const COMMANDS: &[Command] = &[
    Command::redis("PFADD", pfadd),
    Command::redis("PFCOUNT", pfcount).flags(Flags::MAY_REPLICATE),
    Command::redis("PFMERGE", pfmerge),
    Command::redis("PFDEBUG", pfdebug),
    Command::redis("PFSELFTEST", pfselftest),
];

fn not_hll() -> CmdError {
    CmdError::Msg(Cow::Borrowed("WRONGTYPE Key is not a valid HyperLogLog string value."))
}

fn corrupt(_: Corrupt) -> CmdError {
    CmdError::Msg(Cow::Borrowed("INVALIDOBJ Corrupted HLL object detected"))
}

/// Redis's `isHLLObjectOrReply`: WRONGTYPE for another type or a string
/// that is not a HyperLogLog.
fn check_hll(v: &Value) -> Result<(), CmdError> {
    if let Value::Hll(_) = v {
        return Ok(());
    }
    let mut sb = StrBuf::new();
    let b = v.as_bytes(&mut sb).ok_or(CmdError::WrongType)?;
    if !hll::is_hll(b) {
        return Err(not_hll());
    }
    Ok(())
}

/// Merges the HyperLogLog at `key` into `max`: `None` if missing, else
/// whether it is dense.
fn merge_key(
    cx: &mut Ctx,
    key: &[u8],
    max: &mut [u8; REGISTERS],
) -> Result<Option<bool>, CmdError> {
    let Some(e) = cx.lookup_read(key) else { return Ok(None) };
    if let Value::Hll(p) = &e.value {
        hll::merge_packed(max, p);
        return Ok(Some(true));
    }
    check_hll(&e.value)?;
    let mut sb = StrBuf::new();
    let b = e.value.as_bytes(&mut sb).ok_or(CmdError::WrongType)?;
    hll::merge_into(max, b).map_err(corrupt)?;
    Ok(Some(hll::is_dense(b)))
}

/// The HyperLogLog at `key` for writing, made `raw` (Redis's
/// `dbUnshareStringValue`) and, when dense, packed; `None` if missing.
fn write_hll<'c>(cx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c mut Value>, CmdError> {
    let Some(e) = cx.lookup(key) else { return Ok(None) };
    // Checked before the value is made `raw`: a refused command leaves
    // the encoding alone.
    check_hll(&e.value)?;
    if !matches!(e.value, Value::Hll(_)) {
        e.value.make_raw();
        pack_dense(&mut e.value);
    }
    Ok(Some(&mut e.value))
}

/// A dense HyperLogLog held as Redis's string (promoted just now, loaded,
/// SET by a client) in four bits a register when its registers fit.
fn pack_dense(v: &mut Value) {
    if let Value::Raw(b) = v {
        if b.len() == hll::DENSE_SIZE {
            if let Some(p) = hll::pack(b) {
                *v = Value::Hll(p);
            }
        }
    }
}

/// Runs `f` on bytes that start with the value's 16-byte header (magic,
/// encoding, cached cardinality): the packed form's header, or the whole
/// string.
fn with_header<R>(v: &mut Value, f: impl FnOnce(&mut [u8]) -> R) -> R {
    match v {
        Value::Hll(p) => f(p.header_mut()),
        _ => f(&mut v.make_raw().expect("a string")),
    }
}

/// Adds one element, in the packed form while its registers fit it.
#[inline]
fn add_one(v: &mut Value, ele: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    if let Value::Hll(p) = v {
        match hll::add_packed(p, ele) {
            Raise::Raised => return Ok(true),
            Raise::Unchanged => return Ok(false),
            Raise::Full => {}
        }
    }
    hll::add(&mut v.make_raw().expect("a string"), ele, sparse_max)
}

fn sparse_max(cx: &mut Ctx) -> usize {
    cx.sess.conf(cx.shared).hll_sparse_max_bytes
}

fn pfadd(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let max = sparse_max(cx);
    let mut updated = 0u64;
    if !cx.exists(key) {
        cx.set(key, Value::raw(hll::new()), NO_EXPIRE);
        updated += 1;
    }
    let v = write_hll(cx, key)?.expect("present");
    let mut failed = None;
    for ele in args.rest() {
        match add_one(v, ele, max) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some(e) = failed {
        // Redis leaves what it added so far and reports nothing.
        return Err(corrupt(e));
    }
    // Promoted to dense by these additions.
    pack_dense(v);
    if updated > 0 {
        with_header(v, hll::invalidate);
        cx.changed(key, Class::STRING, "pfadd", updated);
    }
    out.int(i64::from(updated > 0));
    Ok(())
}

fn pfcount(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let keys = args.rest();
    if keys.len() > 1 {
        let mut max = Box::new([0u8; REGISTERS]);
        for k in keys {
            merge_key(cx, k, &mut max)?;
        }
        out.int(hll::count_registers(&max) as i64);
        return Ok(());
    }
    let key = keys[0];
    // A read (hit/miss counted) that may then store the cached count.
    match cx.lookup_read(key) {
        None => {
            out.int(0);
            return Ok(());
        }
        Some(e) => check_hll(&e.value)?,
    }
    let v = write_hll(cx, key)?.expect("present");
    let card = match with_header(v, |h| hll::cached(h)) {
        Some(c) => c,
        None => {
            let c = match v {
                Value::Hll(p) => hll::count_packed(p),
                _ => hll::count(&v.make_raw().expect("a string")).map_err(corrupt)?,
            };
            with_header(v, |h| hll::set_cache(h, c));
            cx.changed_silently(key, 1);
            c
        }
    };
    out.int(card as i64);
    Ok(())
}

fn pfmerge(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let dst = args.key()?;
    let mut max = Box::new([0u8; REGISTERS]);
    let mut dense = false;
    for k in std::iter::once(dst).chain(args.rest().iter().copied()) {
        dense |= merge_key(cx, k, &mut max)?.unwrap_or(false);
    }
    let sparse_max = sparse_max(cx);
    if !cx.exists(dst) {
        cx.set(dst, Value::raw(hll::new()), NO_EXPIRE);
    }
    let value = write_hll(cx, dst)?.expect("present");
    let mut raw = value.make_raw().expect("a string");
    let v: &mut Vec<u8> = &mut raw;
    if dense {
        hll::to_dense(v).map_err(corrupt)?;
    }
    for (i, &m) in max.iter().enumerate() {
        if m > 0 {
            // A corrupt destination was refused when it was merged.
            let _ = hll::raise(v, i, m, sparse_max);
        }
    }
    hll::invalidate(v);
    drop(raw);
    pack_dense(value);
    // Redis reports a merge as a mass PFADD.
    cx.changed(dst, Class::STRING, "pfadd", 1);
    out.ok();
    Ok(())
}

fn pfdebug(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let sub = args.req()?;
    let key = args.key()?;
    let Some(value) = write_hll(cx, key)? else {
        return Err(CmdError::err("The specified key does not exist"));
    };
    if let Value::Hll(p) = value {
        // Dense: nothing to convert.
        if eq_ic(sub, "GETREG") {
            out.array(REGISTERS);
            for i in 0..REGISTERS {
                out.int(i64::from(p.get(i)));
            }
            return Ok(());
        } else if eq_ic(sub, "DECODE") {
            return Err(CmdError::err("HLL encoding is not sparse"));
        } else if eq_ic(sub, "ENCODING") {
            out.simple(b"dense");
            return Ok(());
        } else if eq_ic(sub, "TODENSE") {
            out.int(0);
            return Ok(());
        }
    }
    let mut raw = value.make_raw().expect("a string");
    let v: &mut Vec<u8> = &mut raw;
    if eq_ic(sub, "GETREG") {
        let converted = !hll::is_dense(v);
        hll::to_dense(v).map_err(corrupt)?;
        out.array(REGISTERS);
        for r in hll::dense_registers(v) {
            out.int(i64::from(r));
        }
        drop(raw);
        if converted {
            // Redis counts the conversion so that it propagates.
            cx.dirty(1);
        }
    } else if eq_ic(sub, "DECODE") {
        if hll::is_dense(v) {
            return Err(CmdError::err("HLL encoding is not sparse"));
        }
        out.bulk(hll::decode(v).as_bytes());
    } else if eq_ic(sub, "ENCODING") {
        out.simple(if hll::is_dense(v) { b"dense" } else { b"sparse" });
    } else if eq_ic(sub, "TODENSE") {
        let converted = !hll::is_dense(v);
        hll::to_dense(v).map_err(corrupt)?;
        out.int(i64::from(converted));
        drop(raw);
        if converted {
            cx.dirty(1);
        }
    } else {
        let mut e = b"ERR Unknown PFDEBUG subcommand '".to_vec();
        e.extend(sub.iter().take_while(|&&c| c != 0));
        e.push(b'\'');
        return Err(CmdError::Bytes(e));
    }
    Ok(())
}

/// Checks the register packing and the estimator's error, as Redis's
/// PFSELFTEST does.
fn pfselftest(_cx: &mut Ctx, _args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    match hll_selftest() {
        Ok(()) => out.ok(),
        Err(e) => return Err(CmdError::Msg(Cow::Owned(format!("TESTFAILED {e}")))),
    }
    Ok(())
}

fn hll_selftest() -> Result<(), String> {
    // A sparse and a dense HyperLogLog fed the same elements agree, and
    // stay within a few standard errors of the truth.
    let mut sparse = hll::new();
    let mut dense = hll::new();
    hll::to_dense(&mut dense).map_err(|_| "conversion failed")?;
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut check = 1u64;
    for i in 1..=100_000u64 {
        let ele = i.to_le_bytes();
        hll::add(&mut sparse, &ele, 3000).map_err(|_| "corrupt sparse value")?;
        hll::add(&mut dense, &ele, 3000).map_err(|_| "corrupt dense value")?;
        if i == check {
            check *= 10;
            let a = hll::count(&sparse).map_err(|_| "corrupt sparse value")?;
            let b = hll::count(&dense).map_err(|_| "corrupt dense value")?;
            if a != b {
                return Err(format!("Sparse and dense counts differ at {i}: {a} vs {b}"));
            }
            let maxerr = (relerr * if i < 10 { 7.0 } else { 5.0 } * i as f64).max(1.0);
            if (b as f64 - i as f64).abs() > maxerr {
                return Err(format!(
                    "Too big error. card:{i} abserr:{}",
                    (b as f64 - i as f64).abs()
                ));
            }
        }
    }
    Ok(())
}
