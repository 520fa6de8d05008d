//! Time to live: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (with NX/XX/GT/LT),
//! TTL, PTTL, EXPIRETIME, PEXPIRETIME and PERSIST.

use resp::ReplyBuf;
use store::NO_EXPIRE;

use super::read_notouch;
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};

/// The NX/XX/GT/LT options of the EXPIRE family.
#[derive(Clone, Copy, Debug, Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_flags(args: &mut Args) -> Result<ExpireFlags, CmdError> {
    let mut f = ExpireFlags::default();
    for &opt in args.rest().get(1..).unwrap_or(&[]) {
        if eq_ic(opt, "NX") {
            f.nx = true;
        } else if eq_ic(opt, "XX") {
            f.xx = true;
        } else if eq_ic(opt, "GT") {
            f.gt = true;
        } else if eq_ic(opt, "LT") {
            f.lt = true;
        } else {
            // Redis formats the option with %s: it ends at a NUL byte.
            let end = opt.iter().position(|&c| c == 0).unwrap_or(opt.len());
            let mut m = b"ERR Unsupported option ".to_vec();
            m.extend_from_slice(&opt[..end]);
            return Err(CmdError::Bytes(m));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if f.gt && f.lt {
        return Err(CmdError::err("GT and LT options at the same time are not compatible"));
    }
    Ok(f)
}

/// Relative or absolute, seconds or milliseconds.
#[derive(Clone, Copy)]
struct Unit {
    secs: bool,
    relative: bool,
    name: &'static str,
}

pub(super) fn expire(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    expire_with(cx, args, Unit { secs: true, relative: true, name: "expire" }, out)
}

pub(super) fn pexpire(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    expire_with(cx, args, Unit { secs: false, relative: true, name: "pexpire" }, out)
}

pub(super) fn expireat(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    expire_with(cx, args, Unit { secs: true, relative: false, name: "expireat" }, out)
}

pub(super) fn pexpireat(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    expire_with(cx, args, Unit { secs: false, relative: false, name: "pexpireat" }, out)
}

/// Redis's `expireGenericCommand`: options, then the time (negative times
/// are allowed; only overflow is an error), then the key. A time not in
/// the future deletes the key and still answers 1.
fn expire_with(cx: &mut Ctx, args: &mut Args, unit: Unit, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let flags = parse_flags(args)?;
    let mut when = parse_i64(args.req()?)?;
    let bad = || CmdError::InvalidExpire(unit.name);
    if unit.secs {
        when = when.checked_mul(1000).ok_or_else(bad)?;
    }
    if unit.relative {
        if when > i64::MAX - cx.now() {
            return Err(bad());
        }
        when += cx.now();
    }
    let Some(e) = cx.lookup(key) else {
        out.int(0);
        return Ok(());
    };
    let current = if e.has_ttl() { cx.expire_of(key) } else { NO_EXPIRE };
    let refused = (flags.nx && current != NO_EXPIRE)
        || (flags.xx && current == NO_EXPIRE)
        // No TTL counts as infinite: GT never beats it, LT always does.
        || (flags.gt && (current == NO_EXPIRE || when <= current))
        || (flags.lt && current != NO_EXPIRE && when >= current);
    if refused {
        out.int(0);
        return Ok(());
    }
    if cx.already_expired(when) {
        cx.delete(key);
        cx.changed(key, Class::GENERIC, "del", 1);
        cx.propagate_as(&[b"DEL", key]);
    } else {
        let db = cx.db;
        cx.keys.set_expire(db, key, when);
        cx.changed(key, Class::GENERIC, "expire", 1);
        if cx.propagating() {
            // Redis 7.0 rewrites the name and the time, and keeps the
            // NX/XX/GT/LT flags as they came.
            let argv = args.argv();
            let mut ms = resp::IntBuf::new();
            let mut rewritten: smallvec::SmallVec<[&[u8]; 6]> = smallvec::SmallVec::new();
            rewritten.push(if eq_ic(argv[0], "PEXPIREAT") { argv[0] } else { b"PEXPIREAT" });
            rewritten.push(key);
            rewritten.push(ms.format(when));
            rewritten.extend_from_slice(&argv[3..]);
            cx.propagate_as(&rewritten);
        }
    }
    out.int(1);
    Ok(())
}

pub(super) fn ttl(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    ttl_with(cx, args, false, false, out)
}

pub(super) fn pttl(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    ttl_with(cx, args, true, false, out)
}

pub(super) fn expiretime(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    ttl_with(cx, args, false, true, out)
}

pub(super) fn pexpiretime(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    ttl_with(cx, args, true, true, out)
}

/// -2 for a missing key, -1 without a TTL; seconds are rounded to the
/// nearest, as Redis's `ttlGenericCommand` does (also for EXPIRETIME).
fn ttl_with(cx: &mut Ctx, args: &mut Args, ms: bool, abs: bool, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let now = cx.now();
    let Some(e) = read_notouch(cx, key) else {
        out.int(-2);
        return Ok(());
    };
    if !e.has_ttl() {
        out.int(-1);
        return Ok(());
    }
    let at = cx.expire_of(key);
    let t = if abs { at } else { at - now }.max(0);
    out.int(if ms { t } else { (t + 500) / 1000 });
    Ok(())
}

pub(super) fn persist(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let has_ttl = cx.lookup(key).is_some_and(|e| e.has_ttl());
    if has_ttl {
        let db = cx.db;
        cx.keys.set_expire(db, key, NO_EXPIRE);
        cx.changed(key, Class::GENERIC, "persist", 1);
    }
    out.int(i64::from(has_ttl));
    Ok(())
}
