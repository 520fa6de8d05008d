//! String commands: GET/SET and their variants, MGET/MSET, the INCR
//! family, APPEND, STRLEN, GETRANGE/SETRANGE and LCS.
//!
//! Variants share one body, as in Redis's `t_string.c`: SET, SETNX, SETEX,
//! PSETEX and GETSET go through [`set_with`], INCR/DECR/INCRBY/DECRBY
//! through `incr_with`, GET/GETDEL/GETSET through `get_with`. Encodings
//! follow Redis so OBJECT ENCODING agrees: stored arguments go through
//! `tryObjectEncoding` ([`Value::from_arg`]), in-place edits make `raw`,
//! the INCR family stores `int`.

use std::borrow::Cow;

use resp::ReplyBuf;
use store::{Value, NO_EXPIRE};

use crate::core::ctx::{eq_ic, expect_string, parse_i64, Args, Ctx, KeyEntry};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;
use crate::subsystems::ldouble::{self, LdError};

pub const COMMANDS: &[Command] = &[
    Command::redis("GET", get),
    Command::redis("SET", set),
    Command::redis("SETNX", setnx),
    Command::redis("SETEX", setex),
    Command::redis("PSETEX", psetex),
    Command::redis("GETSET", getset),
    Command::redis("GETDEL", getdel),
    Command::redis("GETEX", getex),
    Command::redis("MGET", mget),
    Command::redis("MSET", mset),
    Command::redis("MSETNX", msetnx),
    Command::redis("INCR", incr),
    Command::redis("DECR", decr),
    Command::redis("INCRBY", incrby),
    Command::redis("DECRBY", decrby),
    Command::redis("INCRBYFLOAT", incrbyfloat),
    Command::redis("APPEND", append),
    Command::redis("STRLEN", strlen),
    Command::redis("GETRANGE", getrange),
    Command::redis("SETRANGE", setrange),
    Command::redis("SUBSTR", getrange),
    Command::redis("LCS", lcs),
];

/// Writes a string entry's value as a bulk reply.
pub(crate) fn reply_string(v: &Value, out: &mut ReplyBuf) -> CmdResult {
    // Bytes held as they are go out without a scratch buffer (GET's hit).
    match v {
        Value::Emb(b) => {
            out.bulk(b);
            return Ok(());
        }
        Value::Raw(b) => {
            out.bulk(b);
            return Ok(());
        }
        _ => {}
    }
    let mut buf = store::StrBuf::new();
    match v.as_bytes(&mut buf) {
        Some(b) => {
            out.bulk(b);
            Ok(())
        }
        None => Err(CmdError::WrongType),
    }
}

// ---- GET, GETDEL, GETEX -------------------------------------------------

fn get(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    get_with(cx, key, out)?;
    Ok(())
}

/// Redis's `getGenericCommand`: replies with the value or a null; returns
/// whether the key existed. Inlined: GET's own body (a call of some ten
/// instructions a GET otherwise).
#[inline(always)]
fn get_with(cx: &mut Ctx, key: &[u8], out: &mut ReplyBuf) -> Result<bool, CmdError> {
    match cx.lookup_read(key) {
        Some(e) => reply_string(&e.value, out).map(|_| true),
        None => {
            out.null();
            Ok(false)
        }
    }
}

fn getdel(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    if get_with(cx, key, out)? {
        cx.delete(key);
        cx.changed(key, Class::GENERIC, "del", 1);
        cx.propagate_as(&[b"DEL", key]);
    }
    Ok(())
}

fn getex(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let o = parse_ext_opts(args, false)?;
    let now = cx.now();
    let (expire_at, ttl) = match cx.lookup_read(key) {
        None => {
            out.null();
            return Ok(());
        }
        Some(e) => {
            expect_string(e)?;
            // The expire is validated only once the key is known to be a string.
            let at = match o.expire {
                Some((unit, arg)) => Some(expire_at_ms(unit, arg, now, "getex")?),
                None => None,
            };
            reply_string(&e.value, out)?;
            (at, e.has_ttl())
        }
    };
    let absolute = matches!(o.expire, Some((ExpireUnit::ExAt | ExpireUnit::PxAt, _)));
    match expire_at {
        // An absolute time already past deletes the key (after the reply).
        Some(at) if absolute && cx.already_expired(at) => {
            cx.delete(key);
            cx.changed(key, Class::GENERIC, "del", 1);
            cx.propagate_as(&[b"DEL", key]);
        }
        Some(at) => {
            cx.keys.set_expire(cx.db, key, at);
            cx.changed(key, Class::GENERIC, "expire", 1);
            if cx.propagating() {
                let mut ms = resp::IntBuf::new();
                cx.propagate_as(&[b"PEXPIREAT", key, ms.format(at)]);
            }
        }
        None if o.persist && ttl => {
            cx.keys.set_expire(cx.db, key, NO_EXPIRE);
            cx.changed(key, Class::GENERIC, "persist", 1);
            cx.propagate_as(&[b"PERSIST", key]);
        }
        None => {}
    }
    Ok(())
}

// ---- SET and its variants ----------------------------------------------

/// Expiry given as an option: which unit, absolute or relative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExpireUnit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// Options of SET and its variants (and GETEX's PERSIST).
#[derive(Default, Debug)]
pub(crate) struct SetOpts<'a> {
    pub nx: bool,
    pub xx: bool,
    pub get: bool,
    pub keepttl: bool,
    pub persist: bool,
    pub expire: Option<(ExpireUnit, &'a [u8])>,
}

/// Converts an expire option to an absolute Unix-ms time, with Redis's
/// validation (`getExpireMillisecondsOrReply`).
pub(crate) fn expire_at_ms(
    unit: ExpireUnit,
    arg: &[u8],
    now: i64,
    cmd: &'static str,
) -> Result<i64, CmdError> {
    let v = parse_i64(arg)?;
    let secs = matches!(unit, ExpireUnit::Ex | ExpireUnit::ExAt);
    if v <= 0 || (secs && v > i64::MAX / 1000) {
        return Err(CmdError::InvalidExpire(cmd));
    }
    let mut ms = if secs { v * 1000 } else { v };
    if matches!(unit, ExpireUnit::Ex | ExpireUnit::Px) {
        // Redis adds and then checks the sign; overflow wraps negative.
        ms = ms.wrapping_add(now);
    }
    if ms <= 0 {
        return Err(CmdError::InvalidExpire(cmd));
    }
    Ok(ms)
}

/// Redis's `parseExtendedStringArgumentsOrReply`: SET takes NX, XX, GET,
/// KEEPTTL; GETEX takes PERSIST; both take one expire unit (which may
/// repeat, the last value winning). Any conflict is a syntax error.
fn parse_ext_opts<'a>(args: &mut Args<'a>, set: bool) -> Result<SetOpts<'a>, CmdError> {
    let mut o = SetOpts::default();
    while let Some(a) = args.next() {
        let has_next = args.peek().is_some();
        let no_expire = o.expire.is_none();
        if set && eq_ic(a, "NX") && !o.xx {
            o.nx = true;
        } else if set && eq_ic(a, "XX") && !o.nx {
            o.xx = true;
        } else if set && eq_ic(a, "GET") {
            o.get = true;
        } else if set && eq_ic(a, "KEEPTTL") && no_expire {
            o.keepttl = true;
        } else if !set && eq_ic(a, "PERSIST") && no_expire {
            o.persist = true;
        } else if let Some(unit) = expire_unit(a) {
            let same = matches!(o.expire, Some((u, _)) if u == unit);
            if !has_next || o.keepttl || o.persist || !(no_expire || same) {
                return Err(CmdError::Syntax);
            }
            o.expire = Some((unit, args.req()?));
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

fn expire_unit(a: &[u8]) -> Option<ExpireUnit> {
    if eq_ic(a, "EX") {
        Some(ExpireUnit::Ex)
    } else if eq_ic(a, "PX") {
        Some(ExpireUnit::Px)
    } else if eq_ic(a, "EXAT") {
        Some(ExpireUnit::ExAt)
    } else if eq_ic(a, "PXAT") {
        Some(ExpireUnit::PxAt)
    } else {
        None
    }
}

fn set(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let val = args.req()?;
    // A plain `SET key value` (what pipelines mostly send) skips the
    // options' parse: some 25 instructions of a pipelined SET.
    let opts = if args.is_empty() { SetOpts::default() } else { parse_ext_opts(args, true)? };
    let written = set_with(cx, key, val, &opts, "set", out)?;
    if written && opts.get && opts.expire.is_none() && cx.propagating() {
        // Replicas need no GET: Redis 7.0 drops every GET argument (with
        // an expire the command was rewritten whole already).
        let argv: smallvec::SmallVec<[&[u8]; 8]> = args
            .argv()
            .iter()
            .enumerate()
            .filter(|(i, a)| *i < 3 || !eq_ic(a, "GET"))
            .map(|(_, a)| *a)
            .collect();
        cx.propagate_as(&argv);
    }
    if !opts.get {
        if written {
            out.ok();
        } else {
            out.null();
        }
    }
    Ok(())
}

fn setnx(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let val = args.req()?;
    let opts = SetOpts { nx: true, ..Default::default() };
    let written = set_with(cx, key, val, &opts, "setnx", out)?;
    out.int(i64::from(written));
    Ok(())
}

fn setex(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    setex_with(cx, args, ExpireUnit::Ex, "setex", out)
}

fn psetex(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    setex_with(cx, args, ExpireUnit::Px, "psetex", out)
}

fn setex_with(
    cx: &mut Ctx,
    args: &mut Args,
    unit: ExpireUnit,
    cmd: &'static str,
    out: &mut ReplyBuf,
) -> CmdResult {
    let key = args.key()?;
    let ttl = args.req()?;
    let val = args.req()?;
    let opts = SetOpts { expire: Some((unit, ttl)), ..Default::default() };
    set_with(cx, key, val, &opts, cmd, out)?;
    out.ok();
    Ok(())
}

fn getset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let val = args.req()?;
    let opts = SetOpts { get: true, ..Default::default() };
    set_with(cx, key, val, &opts, "getset", out)?;
    cx.propagate_as(&[b"SET", key, val]);
    Ok(())
}

/// The shared body of SET, SETNX, SETEX, PSETEX and GETSET (Redis's
/// `setGenericCommand`). With GET it replies with the old value (or a
/// null); otherwise the caller replies. Returns whether the key was
/// written (false when NX/XX prevented it).
pub(crate) fn set_with(
    cx: &mut Ctx,
    key: &[u8],
    val: &[u8],
    o: &SetOpts,
    cmd: &'static str,
    out: &mut ReplyBuf,
) -> Result<bool, CmdError> {
    let expire_at = match o.expire {
        Some((unit, arg)) => expire_at_ms(unit, arg, cx.now(), cmd)?,
        None => NO_EXPIRE,
    };
    // Built once: the plain SET's attempt below hands it back when it
    // cannot use it.
    let mut value = None;
    // GET reads the old value as GET would (hit/miss counted, type checked).
    let old_ttl = if o.get {
        match cx.lookup_read(key) {
            Some(e) => {
                reply_string(&e.value, out)?;
                Some(e.has_ttl())
            }
            None => {
                out.null();
                None
            }
        }
    } else if !(o.nx || o.xx || o.keepttl) {
        // A plain SET needs the old key only to expire it first (Redis's
        // lookupKeyWrite: its `expired` event and DEL come before the
        // SET); in a stripe without TTLs there is nothing to expire, and
        // the key is set in the same look-up of its stripe.
        match cx.set_if_no_ttls(key, Value::from_arg(val), expire_at) {
            Ok(old) => {
                if let Some(r) = old {
                    r.value.discard();
                }
                return set_done(cx, key, val, o, expire_at);
            }
            Err(v) => value = Some(v),
        }
        cx.lookup(key).map(|e| e.has_ttl())
    } else {
        cx.lookup(key).map(|e| e.has_ttl())
    };
    let found = old_ttl.is_some();
    if (o.nx && found) || (o.xx && !found) {
        return Ok(false);
    }
    let expire_at = match old_ttl {
        Some(true) if o.keepttl => cx.expire_of(key),
        Some(false) if o.keepttl => NO_EXPIRE,
        _ => expire_at,
    };
    cx.set(key, value.unwrap_or_else(|| Value::from_arg(val)), expire_at);
    set_done(cx, key, val, o, expire_at)
}

/// What a SET that wrote reports: the change, and for an expiry its
/// absolute form to replicas and the AOF and its `expire` event.
#[inline(always)]
fn set_done(
    cx: &mut Ctx,
    key: &[u8],
    val: &[u8],
    o: &SetOpts,
    expire_at: i64,
) -> Result<bool, CmdError> {
    cx.changed(key, Class::STRING, "set", 1);
    if o.expire.is_some() {
        // Replicas and the AOF get an absolute time (Redis 7.0's rewrite
        // drops NX/XX/GET: the outcome is known).
        if cx.propagating() {
            let mut ms = resp::IntBuf::new();
            cx.propagate_as(&[b"SET", key, val, b"PXAT", ms.format(expire_at)]);
        }
        cx.notify(Class::GENERIC, "expire", key);
    }
    Ok(true)
}

// ---- MGET, MSET, MSETNX --------------------------------------------------

fn mget(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.array(args.remaining());
    while let Some(key) = args.next() {
        // A key of another type reads as missing, without an error.
        match cx.lookup_read(key) {
            Some(e) if e.value.is_string() => reply_string(&e.value, out)?,
            _ => out.null(),
        }
    }
    Ok(())
}

fn mset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    mset_with(cx, args, false, out)
}

fn msetnx(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    mset_with(cx, args, true, out)
}

/// Redis's `msetGenericCommand`: with `nx`, nothing is set when any key
/// exists.
fn mset_with(cx: &mut Ctx, args: &mut Args, nx: bool, out: &mut ReplyBuf) -> CmdResult {
    let pairs = args.rest();
    if pairs.len() % 2 == 1 {
        let name = if nx { "msetnx" } else { "mset" };
        return Err(CmdError::WrongArity(name.into()));
    }
    if nx && pairs.chunks_exact(2).any(|kv| cx.lookup(kv[0]).is_some()) {
        out.int(0);
        return Ok(());
    }
    for kv in pairs.chunks_exact(2) {
        cx.set(kv[0], Value::from_arg(kv[1]), NO_EXPIRE);
        cx.changed(kv[0], Class::STRING, "set", 1);
    }
    if nx {
        out.int(1);
    } else {
        out.ok();
    }
    Ok(())
}

// ---- INCR family -----------------------------------------------------------

fn incr(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    incr_with(cx, key, 1, out)
}

fn decr(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    incr_with(cx, key, -1, out)
}

fn incrby(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let by = args.i64()?;
    incr_with(cx, key, by, out)
}

fn decrby(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let by = args.i64()?;
    if by == i64::MIN {
        return Err(CmdError::Msg(Cow::Borrowed("ERR decrement would overflow")));
    }
    incr_with(cx, key, -by, out)
}

/// A string value as a strict integer (Redis's `getLongLongFromObject`).
fn int_of(v: &Value) -> Result<i64, CmdError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Emb(b) => parse_i64(b),
        Value::Raw(b) => parse_i64(b),
        Value::Hll(h) => parse_i64(&h.to_redis()),
        #[allow(unreachable_patterns)]
        _ => Err(CmdError::WrongType),
    }
}

/// Redis's `incrDecrCommand`: the result is stored as `int`, keeping the
/// key's TTL.
fn incr_with(cx: &mut Ctx, key: &[u8], by: i64, out: &mut ReplyBuf) -> CmdResult {
    let v = match cx.entry(key) {
        KeyEntry::Occupied(e) => {
            expect_string(e)?;
            let v = int_of(&e.value)?.checked_add(by).ok_or(CmdError::Overflow)?;
            std::mem::replace(&mut e.value, Value::Int(v)).discard();
            v
        }
        KeyEntry::Vacant(place) => {
            place.insert(Value::Int(by));
            by
        }
    };
    cx.changed(key, Class::STRING, "incrby", 1);
    out.int(v);
    Ok(())
}

fn incrbyfloat(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let by = args.req()?;
    let mut buf = [0u8; ldouble::LD_BUF];
    let n = match cx.entry(key) {
        KeyEntry::Occupied(e) => {
            expect_string(e)?;
            let mut ib = store::StrBuf::new();
            let cur = e.value.as_bytes(&mut ib).ok_or(CmdError::WrongType)?;
            let n = ldouble::incr_by(Some(cur), by, &mut buf).map_err(ld_error)?;
            // Stored as Redis's createStringObject: embstr or raw by size.
            e.value = Value::str_exact(&buf[..n]);
            n
        }
        KeyEntry::Vacant(place) => {
            let n = ldouble::incr_by(None, by, &mut buf).map_err(ld_error)?;
            place.insert(Value::str_exact(&buf[..n]));
            n
        }
    };
    cx.changed(key, Class::STRING, "incrbyfloat", 1);
    // Replicas get the result, not the float arithmetic (which could
    // round differently there).
    cx.propagate_as(&[b"SET", key, &buf[..n], b"KEEPTTL"]);
    out.bulk(&buf[..n]);
    Ok(())
}

fn ld_error(e: LdError) -> CmdError {
    match e {
        LdError::BadCurrent | LdError::BadIncr => CmdError::NotFloat,
        LdError::NotFinite => {
            CmdError::Msg(Cow::Borrowed("ERR increment would produce NaN or Infinity"))
        }
    }
}

// ---- APPEND, STRLEN, GETRANGE, SETRANGE ---------------------------------

/// Redis's `checkStringLength`: `size + append` must fit in
/// proto-max-bulk-len.
fn check_string_length(limit: i64, size: usize, append: usize) -> CmdResult {
    if size as i128 + append as i128 > i128::from(limit) {
        return Err(CmdError::StringTooLong);
    }
    Ok(())
}

fn append(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let val = args.req()?;
    let limit = cx.sess.conf(cx.shared).proto_max_bulk_len;
    let total = match cx.entry(key) {
        KeyEntry::Occupied(e) => {
            expect_string(e)?;
            check_string_length(limit, e.value.str_len().unwrap_or(0), val.len())?;
            // Appending makes the value `raw`, even when nothing is appended.
            let mut total = 0;
            if let Some(mut v) = e.value.make_raw() {
                v.extend_from_slice(val);
                total = v.len();
            }
            total
        }
        KeyEntry::Vacant(place) => {
            place.insert(Value::from_arg(val));
            val.len()
        }
    };
    cx.changed(key, Class::STRING, "append", 1);
    out.int(total as i64);
    Ok(())
}

fn strlen(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let n = match cx.lookup_read(key) {
        Some(e) => {
            expect_string(e)?;
            e.value.str_len().unwrap_or(0)
        }
        None => 0,
    };
    out.int(n as i64);
    Ok(())
}

/// GETRANGE and SUBSTR.
fn getrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let start = args.i64()?;
    let end = args.i64()?;
    let Some(e) = cx.lookup_read(key) else {
        out.bulk(b"");
        return Ok(());
    };
    let mut ib = store::StrBuf::new();
    let s = e.value.as_bytes(&mut ib).ok_or(CmdError::WrongType)?;
    match substr_range(s.len(), start, end) {
        Some((from, to)) => out.bulk(&s[from..=to]),
        None => out.bulk(b""),
    }
    Ok(())
}

/// GETRANGE's index rules: negative counts from the end, both clamped to
/// the string; `None` for an empty result.
fn substr_range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let len = len as i128;
    let fix = |i: i64| {
        let i = i128::from(i);
        (if i < 0 { len + i } else { i }).max(0)
    };
    let start = fix(start);
    let end = fix(end).min(len - 1);
    (start <= end).then_some((start as usize, end as usize))
}

fn setrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let offset = args.i64()?;
    let val = args.req()?;
    if offset < 0 {
        return Err(CmdError::Msg(Cow::Borrowed("ERR offset is out of range")));
    }
    let cur_len = match cx.lookup(key) {
        Some(e) => {
            expect_string(e)?;
            Some(e.value.str_len().unwrap_or(0))
        }
        None => None,
    };
    if val.is_empty() {
        // Nothing to write: report the current length, create nothing.
        out.int(cur_len.unwrap_or(0) as i64);
        return Ok(());
    }
    check_string_length(cx.sess.conf(cx.shared).proto_max_bulk_len, offset as usize, val.len())?;
    let (offset, end) = (offset as usize, offset as usize + val.len());
    let total = match cx.lookup_write(key) {
        Some(e) => {
            let mut total = 0;
            if let Some(mut v) = e.value.make_raw() {
                if v.len() < end {
                    // To the size class, as a bitmap grows (bitmap.rs).
                    let extra = end - v.len();
                    store::types::list::grow_exact(&mut v, extra);
                    v.resize(end, 0);
                }
                v[offset..end].copy_from_slice(val);
                total = v.len();
            }
            total
        }
        None => {
            let mut v = vec![0u8; end];
            v[offset..].copy_from_slice(val);
            cx.set(key, Value::raw(v), NO_EXPIRE);
            end
        }
    };
    cx.changed(key, Class::STRING, "setrange", 1);
    out.int(total as i64);
    Ok(())
}

// ---- LCS ---------------------------------------------------------------------

/// One range of an LCS IDX reply: (a start, a end, b start, b end).
type LcsMatch = (u32, u32, u32, u32);

fn lcs(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    const NOT_STRINGS: &str = "ERR The specified keys must contain string values";
    let ka = args.key()?;
    let kb = args.key()?;
    // Redis checks the keys' types before it looks at the options.
    let mut fetch = |k: &[u8]| -> Result<Vec<u8>, CmdError> {
        let mut ib = store::StrBuf::new();
        match cx.lookup_read(k) {
            None => Ok(Vec::new()),
            Some(e) => match e.value.as_bytes(&mut ib) {
                Some(b) => Ok(b.to_vec()),
                None => Err(CmdError::Msg(Cow::Borrowed(NOT_STRINGS))),
            },
        }
    };
    let a = fetch(ka);
    let b = fetch(kb);
    let (a, b) = (a?, b?);

    let (mut getlen, mut getidx, mut withmatchlen, mut minmatchlen) = (false, false, false, 0i64);
    while let Some(opt) = args.next() {
        if eq_ic(opt, "IDX") {
            getidx = true;
        } else if eq_ic(opt, "LEN") {
            getlen = true;
        } else if eq_ic(opt, "WITHMATCHLEN") {
            withmatchlen = true;
        } else if eq_ic(opt, "MINMATCHLEN") && !args.is_empty() {
            minmatchlen = args.i64()?.max(0);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if getlen && getidx {
        return Err(CmdError::err("If you want both the length and indexes, please just use IDX."));
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(CmdError::err("String too long for LCS"));
    }
    // The table is (|a|+1)·(|b|+1) u32s; Redis refuses when that transient
    // memory exceeds proto-max-bulk-len, or when it cannot be allocated.
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
    let bytes = cells * 4;
    let limit = cx.sess.conf(cx.shared).proto_max_bulk_len;
    if bytes < usize::MAX as u128 && bytes > limit.max(0) as u128 {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let mut table: Vec<u32> = Vec::new();
    if bytes >= usize::MAX as u128 || table.try_reserve_exact(cells as usize).is_err() {
        return Err(CmdError::err(
            "Insufficient memory, failed allocating transient memory for LCS",
        ));
    }
    table.resize(cells as usize, 0);

    let (alen, blen) = (a.len(), b.len());
    let at = |i: usize, j: usize| j + i * (blen + 1);
    for i in 1..=alen {
        for j in 1..=blen {
            table[at(i, j)] = if a[i - 1] == b[j - 1] {
                table[at(i - 1, j - 1)] + 1
            } else {
                table[at(i - 1, j)].max(table[at(i, j - 1)])
            };
        }
    }
    let len = table[at(alen, blen)];

    // Walk back from the end, collecting the common string and, for IDX,
    // the ranges of contiguous matches (longest-suffix first, as Redis).
    let computelcs = getidx || !getlen;
    let mut result = vec![0u8; if computelcs { len as usize } else { 0 }];
    let mut matches: Vec<LcsMatch> = Vec::new();
    let (mut i, mut j, mut idx) = (alen, blen, len as usize);
    let unset = alen as u32;
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (unset, 0u32, 0u32, 0u32);
    while computelcs && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            let (ii, jj) = ((i - 1) as u32, (j - 1) as u32);
            if a_start == unset {
                (a_start, a_end, b_start, b_end) = (ii, ii, jj, jj);
            } else if a_start == ii + 1 && b_start == jj + 1 {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[at(i - 1, j)] > table[at(i, j - 1)] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != unset {
                emit = true;
            }
        }
        if emit {
            let match_len = a_end.wrapping_sub(a_start).wrapping_add(1);
            if getidx && (minmatchlen == 0 || i64::from(match_len) >= minmatchlen) {
                matches.push((a_start, a_end, b_start, b_end));
            }
            a_start = unset;
        }
    }

    if getidx {
        out.map(2);
        out.bulk(b"matches");
        out.array(matches.len());
        for &(a0, a1, b0, b1) in &matches {
            out.array(2 + usize::from(withmatchlen));
            out.array(2);
            out.int(a0.into());
            out.int(a1.into());
            out.array(2);
            out.int(b0.into());
            out.int(b1.into());
            if withmatchlen {
                out.int(i64::from(a1 - a0 + 1));
            }
        }
        out.bulk(b"len");
        out.int(len.into());
    } else if getlen {
        out.int(len.into());
    } else {
        out.bulk(&result);
    }
    Ok(())
}

// Expected replies below come from redis-server 7.0.15 (the same command
// sequences were replayed against it); OBJECT ENCODING and TTL, which are
// not string commands, are read from the store instead.
#[cfg(test)]
mod tests {
    use resp::{Proto, ReplyBuf};
    use store::NO_EXPIRE;

    use crate::core::shared::unix_ms;
    use crate::tests::Harness;

    trait Resp3 {
        fn run3(&mut self, argv: &[&str]) -> String;
    }

    impl Resp3 for Harness {
        fn run3(&mut self, argv: &[&str]) -> String {
            let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
            let mut out = ReplyBuf::new();
            out.proto = Proto::Resp3;
            crate::execute(&self.shared, &mut self.sess, &argv, &mut out);
            String::from_utf8_lossy(&out.to_vec()).into_owned()
        }
    }

    /// (encoding, expire_at) of a live key in db 0.
    fn entry(h: &Harness, key: &str) -> Option<(&'static str, i64)> {
        let store = &h.shared.store;
        let s = store.lock_stripe(0, store.stripe_of(key.as_bytes()) as usize);
        let e = s.peek(key.as_bytes())?;
        let at = s.expire_of(key.as_bytes());
        assert_eq!(e.has_ttl(), at != NO_EXPIRE, "the TTL bit agrees with the TTL table");
        let live = at == NO_EXPIRE || at > unix_ms();
        live.then(|| (e.value.encoding(), at))
    }

    /// OBJECT ENCODING.
    fn enc(h: &Harness, key: &str) -> &'static str {
        entry(h, key).map_or("", |e| e.0)
    }

    /// Milliseconds to live, or -1 (no TTL) / -2 (no key), as PTTL.
    fn pttl(h: &Harness, key: &str) -> i64 {
        match entry(h, key) {
            None => -2,
            Some((_, NO_EXPIRE)) => -1,
            Some((_, at)) => (at - unix_ms()).max(0),
        }
    }

    /// TTL's rounding of [`pttl`].
    fn ttl(h: &Harness, key: &str) -> i64 {
        match pttl(h, key) {
            ms if ms < 0 => ms,
            ms => (ms + 500) / 1000,
        }
    }

    fn assert_pttl(h: &Harness, key: &str, expected: i64) {
        let got = pttl(h, key);
        assert!((expected - got).abs() <= 100, "pttl {key}: {got}, expected about {expected}");
    }

    #[test]
    fn failed_writes_do_not_touch_watchers() {
        let mut h = Harness::new();
        let mut other = Harness {
            shared: h.shared.clone(),
            sess: h.shared.connect(String::new(), String::new(), -1),
        };
        assert_eq!(h.run(&["SET", "k", "abc"]), "+OK\r\n");
        assert_eq!(h.run(&["WATCH", "k"]), "+OK\r\n");
        assert_eq!(other.run(&["INCR", "k"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(other.run(&["INCRBYFLOAT", "k", "1"]), "-ERR value is not a valid float\r\n");
        assert_eq!(other.run(&["SETRANGE", "k", "1", ""]), ":3\r\n");
        assert_eq!(other.run(&["GETEX", "k"]), "$3\r\nabc\r\n");
        assert_eq!(other.run(&["SET", "k", "x", "NX"]), "$-1\r\n");
        assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
        assert_eq!(h.run(&["GET", "k"]), "+QUEUED\r\n");
        assert_eq!(h.run(&["EXEC"]), "*1\r\n$3\r\nabc\r\n");
        // A successful in-place change does abort the transaction.
        assert_eq!(h.run(&["WATCH", "k"]), "+OK\r\n");
        assert_eq!(other.run(&["APPEND", "k", "d"]), ":4\r\n");
        assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
        assert_eq!(h.run(&["GET", "k"]), "+QUEUED\r\n");
        assert_eq!(h.run(&["EXEC"]), "*-1\r\n");
    }

    #[test]
    fn get_and_set_basics() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["get", "k"]), "$-1\r\n");
        assert_eq!(h.run(&["set", "k", "v"]), "+OK\r\n");
        assert_eq!(h.run(&["get", "k"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["set", "k", "123"]), "+OK\r\n");
        assert_eq!(h.run(&["get", "k"]), "$3\r\n123\r\n");
        assert_eq!(h.run(&["set", "k", ""]), "+OK\r\n");
        assert_eq!(h.run(&["get", "k"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["strlen", "k"]), ":0\r\n");
        assert_eq!(h.run(&["set", "k", "v", "extra"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k"]), "-ERR wrong number of arguments for 'set' command\r\n");
        assert_eq!(
            h.run(&["get", "k", "v"]),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
    }

    #[test]
    fn set_option_combinations() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["set", "k", "v", "ex", "10", "ex", "20"]), "+OK\r\n");
        assert_eq!(ttl(&h, "k"), 20);
        assert_eq!(h.run(&["set", "k", "v", "ex", "10", "px", "20"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "px", "10", "px", "20000"]), "+OK\r\n");
        assert_pttl(&h, "k", 20000);
        assert_eq!(h.run(&["set", "k", "v", "exat", "10", "exat", "20"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "k", "v", "pxat", "10", "exat", "20"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "keepttl", "keepttl"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "k", "v", "ex", "10", "keepttl"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "keepttl", "ex", "10"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "keepttl", "px", "10"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "nx", "xx"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "xx", "nx"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "nx", "nx"]), "$-1\r\n");
        assert_eq!(h.run(&["set", "k", "v", "xx", "xx"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "k", "v", "get", "get"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["set", "k", "v", "ex"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "px"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "exat"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "pxat"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "persist"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "ex", "10", "persist"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "NX", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["set", "k", "v", "gEt", "Ex", "10"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), 10);
        assert_eq!(h.run(&["set", "k", "v", "GeT", "KeepTtl"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), 10);
    }

    #[test]
    fn set_expire_values() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "abc"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "1.5"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "99999999999999999999"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "0"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "-1"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "px", "0"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "px", "-100"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "exat", "0"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "pxat", "-1"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "9223372036854775807"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "9223372036854774"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "9223372036854775"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "px", "9223372036854775807"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "px", "9223372036854775000"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "k", "v", "ex", "9223372036854775808"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["set", "k", "v", "pxat", "9223372036854775807"]), "+OK\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":1\r\n");
        assert_eq!(h.run(&["set", "k", "v", "exat", "9223372036854775"]), "+OK\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":1\r\n");
        assert_eq!(
            h.run(&["set", "k", "v", "exat", "9223372036854776"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(h.run(&["set", "k", "v", "pxat", "1"]), "+OK\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":0\r\n");
        assert_eq!(h.run(&["set", "k", "v", "exat", "1"]), "+OK\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":0\r\n");
        assert_eq!(h.run(&["set", "k", "v", "ex", "100"]), "+OK\r\n");
        assert_eq!(ttl(&h, "k"), 100);
        assert_eq!(h.run(&["set", "k", "v", "px", "100000"]), "+OK\r\n");
        assert_eq!(ttl(&h, "k"), 100);
        assert_eq!(h.run(&["set", "k", "v", "exat", "1", "xx"]), "+OK\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":0\r\n");
    }

    #[test]
    fn set_nx_xx_get() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["set", "k", "v", "xx"]), "$-1\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":0\r\n");
        assert_eq!(h.run(&["set", "k", "v", "nx"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "k", "w", "nx"]), "$-1\r\n");
        assert_eq!(h.run(&["get", "k"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["set", "k", "w", "xx"]), "+OK\r\n");
        assert_eq!(h.run(&["get", "k"]), "$1\r\nw\r\n");
        assert_eq!(h.run(&["set", "k", "x", "nx", "get"]), "$1\r\nw\r\n");
        assert_eq!(h.run(&["get", "k"]), "$1\r\nw\r\n");
        assert_eq!(h.run(&["set", "k", "y", "xx", "get"]), "$1\r\nw\r\n");
        assert_eq!(h.run(&["set", "nk", "v", "xx", "get"]), "$-1\r\n");
        assert_eq!(h.run(&["exists", "nk"]), ":0\r\n");
        assert_eq!(h.run(&["set", "nk", "v", "nx", "get"]), "$-1\r\n");
        assert_eq!(h.run(&["get", "nk"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["set", "nk", "z", "get"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["set", "k", "v", "ex", "10"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "k", "w", "get", "keepttl"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), 10);
        assert_eq!(h.run(&["set", "k", "v", "ex", "1", "nx"]), "$-1\r\n");
        assert_eq!(
            h.run(&["set", "k", "v", "xx", "ex", "0"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(
            h.run(&["set", "nk2", "v", "ex", "0", "nx"]),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        assert_eq!(h.run(&["set", "nk3", "v", "ex", "10", "xx"]), "$-1\r\n");
        assert_eq!(h.run(&["exists", "nk3"]), ":0\r\n");
        assert_eq!(h.run(&["set", "k", "v", "keepttl"]), "+OK\r\n");
        assert_eq!(ttl(&h, "k"), 10);
        assert_eq!(h.run(&["set", "k", "v"]), "+OK\r\n");
        assert_eq!(ttl(&h, "k"), -1);
    }

    #[test]
    fn set_encodings() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["set", "e", "123"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "int");
        assert_eq!(h.run(&["set", "e", "-123"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "int");
        assert_eq!(h.run(&["set", "e", "0123"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "embstr");
        assert_eq!(h.run(&["set", "e", "abc"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "embstr");
        assert_eq!(h.run(&["set", "e", "9223372036854775807"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "int");
        assert_eq!(h.run(&["set", "e", "9223372036854775808"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "embstr");
        assert_eq!(h.run(&["set", "e", "-0"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "embstr");
        assert_eq!(h.run(&["set", "e", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]), "+OK\r\n");
        assert_eq!(enc(&h, "e"), "embstr");
        assert_eq!(
            h.run(&["set", "e", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]),
            "+OK\r\n"
        );
        assert_eq!(enc(&h, "e"), "raw");
        assert_eq!(h.run(&["setnx", "e2", "1234"]), ":1\r\n");
        assert_eq!(enc(&h, "e2"), "int");
        assert_eq!(h.run(&["setex", "e3", "100", "12"]), "+OK\r\n");
        assert_eq!(enc(&h, "e3"), "int");
        assert_eq!(h.run(&["psetex", "e4", "100000", "xyz"]), "+OK\r\n");
        assert_eq!(enc(&h, "e4"), "embstr");
        assert_eq!(h.run(&["getset", "e4", "55"]), "$3\r\nxyz\r\n");
        assert_eq!(enc(&h, "e4"), "int");
        assert_eq!(
            h.run(&[
                "mset",
                "e5",
                "77",
                "e6",
                "-0",
                "e7",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            ]),
            "+OK\r\n"
        );
        assert_eq!(enc(&h, "e5"), "int");
        assert_eq!(enc(&h, "e6"), "embstr");
        assert_eq!(enc(&h, "e7"), "raw");
        assert_eq!(h.run(&["msetnx", "e8", "1", "e9", "x"]), ":1\r\n");
        assert_eq!(enc(&h, "e8"), "int");
        assert_eq!(enc(&h, "e9"), "embstr");
    }

    #[test]
    fn setnx_setex_psetex() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["setnx", "k", "v"]), ":1\r\n");
        assert_eq!(h.run(&["setnx", "k", "w"]), ":0\r\n");
        assert_eq!(h.run(&["get", "k"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["setnx"]), "-ERR wrong number of arguments for 'setnx' command\r\n");
        assert_eq!(
            h.run(&["setnx", "k"]),
            "-ERR wrong number of arguments for 'setnx' command\r\n"
        );
        assert_eq!(
            h.run(&["setnx", "k", "v", "x"]),
            "-ERR wrong number of arguments for 'setnx' command\r\n"
        );
        assert_eq!(
            h.run(&["setex", "k", "0", "v"]),
            "-ERR invalid expire time in 'setex' command\r\n"
        );
        assert_eq!(
            h.run(&["setex", "k", "-1", "v"]),
            "-ERR invalid expire time in 'setex' command\r\n"
        );
        assert_eq!(
            h.run(&["setex", "k", "abc", "v"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["setex", "k", "9223372036854775", "v"]),
            "-ERR invalid expire time in 'setex' command\r\n"
        );
        assert_eq!(h.run(&["setex", "k", "10", "v"]), "+OK\r\n");
        assert_eq!(ttl(&h, "k"), 10);
        assert_eq!(h.run(&["get", "k"]), "$1\r\nv\r\n");
        assert_eq!(
            h.run(&["setex", "k", "10"]),
            "-ERR wrong number of arguments for 'setex' command\r\n"
        );
        assert_eq!(
            h.run(&["psetex", "k", "0", "v"]),
            "-ERR invalid expire time in 'psetex' command\r\n"
        );
        assert_eq!(
            h.run(&["psetex", "k", "-5", "v"]),
            "-ERR invalid expire time in 'psetex' command\r\n"
        );
        assert_eq!(
            h.run(&["psetex", "k", "1.5", "v"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["psetex", "k", "10000", "w"]), "+OK\r\n");
        assert_pttl(&h, "k", 10000);
        assert_eq!(h.run(&["get", "k"]), "$1\r\nw\r\n");
        assert_eq!(h.run(&["setex", "k", "20", "x"]), "+OK\r\n");
        assert_eq!(ttl(&h, "k"), 20);
    }

    #[test]
    fn getset_and_getdel() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["getset", "k", "v"]), "$-1\r\n");
        assert_eq!(h.run(&["getset", "k", "w"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["get", "k"]), "$1\r\nw\r\n");
        assert_eq!(h.run(&["set", "k", "v", "ex", "100"]), "+OK\r\n");
        assert_eq!(h.run(&["getset", "k", "w"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), -1);
        assert_eq!(
            h.run(&["getset", "k"]),
            "-ERR wrong number of arguments for 'getset' command\r\n"
        );
        assert_eq!(h.run(&["getdel", "k"]), "$1\r\nw\r\n");
        assert_eq!(h.run(&["getdel", "k"]), "$-1\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":0\r\n");
        assert_eq!(h.run(&["getdel"]), "-ERR wrong number of arguments for 'getdel' command\r\n");
        assert_eq!(
            h.run(&["getdel", "a", "b"]),
            "-ERR wrong number of arguments for 'getdel' command\r\n"
        );
        assert_eq!(h.run(&["set", "n", "42"]), "+OK\r\n");
        assert_eq!(h.run(&["getdel", "n"]), "$2\r\n42\r\n");
        assert_eq!(h.run(&["getdel", "n"]), "$-1\r\n");
    }

    #[test]
    fn getex_options() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["getex", "k"]), "$-1\r\n");
        assert_eq!(h.run(&["set", "k", "v"]), "+OK\r\n");
        assert_eq!(h.run(&["getex", "k"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), -1);
        assert_eq!(h.run(&["getex", "k", "ex", "10"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), 10);
        assert_eq!(h.run(&["getex", "k", "persist"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), -1);
        assert_eq!(h.run(&["getex", "k", "persist"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), -1);
        assert_eq!(h.run(&["getex", "k", "px", "5000", "px", "6000"]), "$1\r\nv\r\n");
        assert_pttl(&h, "k", 6000);
        assert_eq!(h.run(&["getex", "k", "ex", "10", "persist"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "k", "persist", "ex", "10"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "k", "persist", "persist"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["getex", "k", "keepttl"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "k", "nx"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "k", "xx"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "k", "get"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "k", "ex"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "k", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(
            h.run(&["getex", "k", "ex", "0"]),
            "-ERR invalid expire time in 'getex' command\r\n"
        );
        assert_eq!(
            h.run(&["getex", "k", "ex", "-1"]),
            "-ERR invalid expire time in 'getex' command\r\n"
        );
        assert_eq!(
            h.run(&["getex", "k", "ex", "abc"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["getex", "k", "px", "0"]),
            "-ERR invalid expire time in 'getex' command\r\n"
        );
        assert_eq!(
            h.run(&["getex", "k", "exat", "0"]),
            "-ERR invalid expire time in 'getex' command\r\n"
        );
        assert_eq!(
            h.run(&["getex", "k", "ex", "9223372036854775"]),
            "-ERR invalid expire time in 'getex' command\r\n"
        );
        assert_eq!(
            h.run(&["getex", "k", "px", "9223372036854775807"]),
            "-ERR invalid expire time in 'getex' command\r\n"
        );
        assert_eq!(h.run(&["getex", "nokey", "ex", "0"]), "$-1\r\n");
        assert_eq!(h.run(&["getex", "nokey", "ex", "abc"]), "$-1\r\n");
        assert_eq!(h.run(&["getex", "nokey", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["getex", "nokey", "persist"]), "$-1\r\n");
        assert_eq!(h.run(&["getex", "k", "exat", "1"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":0\r\n");
        assert_eq!(h.run(&["set", "k", "v"]), "+OK\r\n");
        assert_eq!(h.run(&["getex", "k", "pxat", "1"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["exists", "k"]), ":0\r\n");
        assert_eq!(h.run(&["set", "k", "v"]), "+OK\r\n");
        assert_eq!(h.run(&["getex", "k", "EX", "100"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), 100);
        assert_eq!(h.run(&["getex", "k", "PXAT", "9999999999999"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["getex", "k", "Persist"]), "$1\r\nv\r\n");
        assert_eq!(ttl(&h, "k"), -1);
        assert_eq!(h.run(&["getex"]), "-ERR wrong number of arguments for 'getex' command\r\n");
        assert_eq!(h.run(&["set", "n", "7"]), "+OK\r\n");
        assert_eq!(h.run(&["getex", "n", "ex", "100"]), "$1\r\n7\r\n");
        assert_eq!(ttl(&h, "n"), 100);
    }

    #[test]
    fn mget_mset_msetnx() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["mget", "a", "b", "c"]), "*3\r\n$-1\r\n$-1\r\n$-1\r\n");
        assert_eq!(h.run(&["mset", "a", "1", "b", "2"]), "+OK\r\n");
        assert_eq!(h.run(&["mget", "a", "b", "c"]), "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n");
        assert_eq!(h.run(&["mget", "a"]), "*1\r\n$1\r\n1\r\n");
        assert_eq!(h.run(&["mget"]), "-ERR wrong number of arguments for 'mget' command\r\n");
        assert_eq!(
            h.run(&["mset", "a", "1", "b"]),
            "-ERR wrong number of arguments for 'mset' command\r\n"
        );
        assert_eq!(h.run(&["mset", "a"]), "-ERR wrong number of arguments for 'mset' command\r\n");
        assert_eq!(h.run(&["mset"]), "-ERR wrong number of arguments for 'mset' command\r\n");
        assert_eq!(h.run(&["mset", "a", "3", "a", "4"]), "+OK\r\n");
        assert_eq!(h.run(&["get", "a"]), "$1\r\n4\r\n");
        assert_eq!(h.run(&["msetnx", "a", "1", "c", "3"]), ":0\r\n");
        assert_eq!(h.run(&["exists", "c"]), ":0\r\n");
        assert_eq!(h.run(&["msetnx", "c", "3", "d", "4"]), ":1\r\n");
        assert_eq!(h.run(&["mget", "c", "d"]), "*2\r\n$1\r\n3\r\n$1\r\n4\r\n");
        assert_eq!(h.run(&["msetnx", "c", "3", "e", "5"]), ":0\r\n");
        assert_eq!(h.run(&["exists", "e"]), ":0\r\n");
        assert_eq!(h.run(&["msetnx", "x", "1", "x", "2"]), ":1\r\n");
        assert_eq!(h.run(&["get", "x"]), "$1\r\n2\r\n");
        assert_eq!(
            h.run(&["msetnx", "a", "1", "b"]),
            "-ERR wrong number of arguments for 'msetnx' command\r\n"
        );
        assert_eq!(
            h.run(&["msetnx", "a"]),
            "-ERR wrong number of arguments for 'msetnx' command\r\n"
        );
        assert_eq!(h.run(&["set", "t", "v", "ex", "100"]), "+OK\r\n");
        assert_eq!(h.run(&["mset", "t", "w"]), "+OK\r\n");
        assert_eq!(ttl(&h, "t"), -1);
    }

    #[test]
    fn incr_decr_family() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["incr", "n"]), ":1\r\n");
        assert_eq!(h.run(&["incrby", "n", "9999"]), ":10000\r\n");
        assert_eq!(h.run(&["decr", "n"]), ":9999\r\n");
        assert_eq!(h.run(&["decrby", "n", "5"]), ":9994\r\n");
        assert_eq!(h.run(&["decrby", "n", "-5"]), ":9999\r\n");
        assert_eq!(h.run(&["incrby", "n", "-10000"]), ":-1\r\n");
        assert_eq!(
            h.run(&["incrby", "n", "abc"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["incrby", "n", "1.5"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["incrby", "n", ""]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(
            h.run(&["incrby", "n", "99999999999999999999"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["decrby", "n", "-9223372036854775808"]),
            "-ERR decrement would overflow\r\n"
        );
        assert_eq!(
            h.run(&["decrby", "n", "9223372036854775808"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["decrby", "n", "abc"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["incr"]), "-ERR wrong number of arguments for 'incr' command\r\n");
        assert_eq!(
            h.run(&["incr", "a", "b"]),
            "-ERR wrong number of arguments for 'incr' command\r\n"
        );
        assert_eq!(
            h.run(&["incrby", "n"]),
            "-ERR wrong number of arguments for 'incrby' command\r\n"
        );
        assert_eq!(h.run(&["get", "n"]), "$2\r\n-1\r\n");
        assert_eq!(h.run(&["set", "m", "9223372036854775807"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "m"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(h.run(&["incrby", "m", "0"]), ":9223372036854775807\r\n");
        assert_eq!(h.run(&["incrby", "m", "-1"]), ":9223372036854775806\r\n");
        assert_eq!(h.run(&["decrby", "m", "9223372036854775807"]), ":-1\r\n");
        assert_eq!(h.run(&["set", "m", "-9223372036854775808"]), "+OK\r\n");
        assert_eq!(h.run(&["decr", "m"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(h.run(&["decrby", "m", "1"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(h.run(&["incrby", "m", "-1"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(h.run(&["incrby", "m", "9223372036854775807"]), ":-1\r\n");
        assert_eq!(h.run(&["set", "m", "-1"]), "+OK\r\n");
        assert_eq!(h.run(&["incrby", "m", "-9223372036854775807"]), ":-9223372036854775808\r\n");
        assert_eq!(h.run(&["decr", "m"]), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(h.run(&["set", "s", "abc"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", " 1"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", "1 "]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", "01"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", "+1"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", "1.0"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", "12345678901234567890"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", ""]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", "-0"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "s"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["set", "s", "10"]), "+OK\r\n");
        assert_eq!(h.run(&["append", "s", "0"]), ":3\r\n");
        assert_eq!(enc(&h, "s"), "raw");
        assert_eq!(h.run(&["incr", "s"]), ":101\r\n");
        assert_eq!(enc(&h, "s"), "int");
        assert_eq!(h.run(&["get", "s"]), "$3\r\n101\r\n");
        assert_eq!(h.run(&["set", "t", "5", "ex", "100"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "t"]), ":6\r\n");
        assert_eq!(ttl(&h, "t"), 100);
        assert_eq!(h.run(&["decrby", "t", "10"]), ":-4\r\n");
        assert_eq!(ttl(&h, "t"), 100);
        assert_eq!(enc(&h, "t"), "int");
        assert_eq!(h.run(&["decr", "newkey"]), ":-1\r\n");
        assert_eq!(enc(&h, "newkey"), "int");
    }

    #[test]
    fn incrbyfloat_long_double() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["set", "x", "10.5"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "x", "0.1"]), "$4\r\n10.6\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", "5.0e3"]), "$4\r\n5000\r\n");
        assert_eq!(
            h.run(&["incrbyfloat", "y", "-inf"]),
            "-ERR increment would produce NaN or Infinity\r\n"
        );
        assert_eq!(
            h.run(&["incrbyfloat", "y", "inf"]),
            "-ERR increment would produce NaN or Infinity\r\n"
        );
        assert_eq!(
            h.run(&["incrbyfloat", "y", "+inf"]),
            "-ERR increment would produce NaN or Infinity\r\n"
        );
        assert_eq!(h.run(&["incrbyfloat", "y", "nan"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", " 1"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", "1 "]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", ""]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", "abc"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", "1e5000"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", "1e-5000"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["get", "y"]), "$4\r\n5000\r\n");
        assert_eq!(h.run(&["set", "n", "-1e-30"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "n", "0"]), "$1\r\n0\r\n");
        assert_eq!(h.run(&["incrbyfloat", "w", "1\0abc"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["incrbyfloat", "w", "0x10"]), "$2\r\n16\r\n");
        assert_eq!(h.run(&["incrbyfloat", "w", "1e-4940"]), "$2\r\n16\r\n");
        assert_eq!(h.run(&["incrbyfloat", "w2", "1e-4950"]), "$1\r\n0\r\n");
        assert_eq!(h.run(&["incrbyfloat", "w3", "-0.0"]), "$1\r\n0\r\n");
        assert_eq!(enc(&h, "w3"), "embstr");
        assert_eq!(h.run(&["set", "nf", "abc"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "nf", "1"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["set", "nf", ""]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "nf", "1"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["set", "nf", " 1"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "nf", "1"]), "-ERR value is not a valid float\r\n");
        assert_eq!(h.run(&["set", "t", "5", "ex", "100"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "t", "1.5"]), "$3\r\n6.5\r\n");
        assert_eq!(ttl(&h, "t"), 100);
        assert_eq!(enc(&h, "t"), "embstr");
        assert_eq!(h.run(&["set", "x", "3.0"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "x", "0"]), "$1\r\n3\r\n");
        assert_eq!(enc(&h, "x"), "embstr");
        assert_eq!(h.run(&["set", "x", "1e2"]), "+OK\r\n");
        assert_eq!(h.run(&["incr", "x"]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run(&["incrbyfloat", "x", "1e-5"]), "$9\r\n100.00001\r\n");
        assert_eq!(h.run(&["incrbyfloat", "x", "1.1e2"]), "$21\r\n210.00001000000000001\r\n");
        assert_eq!(h.run(&["set", "y", "5"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "y", "0.3"]), "$3\r\n5.3\r\n");
        assert_eq!(
            h.run(&["incrbyfloat", "y", "1.23456789012345678901"]),
            "$19\r\n6.53456789012345679\r\n"
        );
        assert_eq!(h.run(&["incrbyfloat", "y", "-6.53456789012345678901"]), "$1\r\n0\r\n");
        assert_eq!(h.run(&["set", "z", "1e300"]), "+OK\r\n");
        assert_eq!(
            h.run(&["incrbyfloat", "z", "1"]),
            "$301\r\n1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144\r\n"
        );
        assert_eq!(h.run(&["incrbyfloat", "z2", "1e-17"]), "$19\r\n0.00000000000000001\r\n");
        assert_eq!(h.run(&["incrbyfloat", "z2", "1e-18"]), "$19\r\n0.00000000000000001\r\n");
        assert_eq!(h.run(&["incrbyfloat", "z3", "-1e-17"]), "$20\r\n-0.00000000000000001\r\n");
        assert_eq!(
            h.run(&["incrbyfloat", "lg", "123456789012345678901234567890123456789012345"]),
            "$45\r\n123456789012345678896802277657040928322355200\r\n"
        );
        assert_eq!(enc(&h, "lg"), "raw");
        assert_eq!(
            h.run(&["incrbyfloat", "lg2", "12345678901234567890123456.5"]),
            "$26\r\n12345678901234567890337792\r\n"
        );
        assert_eq!(enc(&h, "lg2"), "embstr");
        assert_eq!(h.run(&["set", "i", "9223372036854775807"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "i", "1"]), "$19\r\n9223372036854775808\r\n");
        assert_eq!(h.run(&["set", "i", "-17"]), "+OK\r\n");
        assert_eq!(h.run(&["incrbyfloat", "i", "0.5"]), "$5\r\n-16.5\r\n");
        assert_eq!(h.run(&["set", "big", "1.1e4932"]), "+OK\r\n");
        assert_eq!(
            h.run(&["incrbyfloat", "big", "1.1e4932"]),
            "-ERR increment would produce NaN or Infinity\r\n"
        );
        assert_eq!(
            h.run(&["incrbyfloat"]),
            "-ERR wrong number of arguments for 'incrbyfloat' command\r\n"
        );
        assert_eq!(
            h.run(&["incrbyfloat", "x"]),
            "-ERR wrong number of arguments for 'incrbyfloat' command\r\n"
        );
    }

    #[test]
    fn append_and_strlen() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["strlen", "nokey"]), ":0\r\n");
        assert_eq!(h.run(&["append", "a", "12"]), ":2\r\n");
        assert_eq!(enc(&h, "a"), "int");
        assert_eq!(h.run(&["append", "a", ""]), ":2\r\n");
        assert_eq!(enc(&h, "a"), "raw");
        assert_eq!(h.run(&["get", "a"]), "$2\r\n12\r\n");
        assert_eq!(
            h.run(&["append", "b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]),
            ":45\r\n"
        );
        assert_eq!(enc(&h, "b"), "raw");
        assert_eq!(h.run(&["append", "c", "abc"]), ":3\r\n");
        assert_eq!(enc(&h, "c"), "embstr");
        assert_eq!(h.run(&["append", "c", "def"]), ":6\r\n");
        assert_eq!(enc(&h, "c"), "raw");
        assert_eq!(h.run(&["get", "c"]), "$6\r\nabcdef\r\n");
        assert_eq!(h.run(&["strlen", "c"]), ":6\r\n");
        assert_eq!(h.run(&["append", "new", ""]), ":0\r\n");
        assert_eq!(h.run(&["exists", "new"]), ":1\r\n");
        assert_eq!(h.run(&["strlen", "new"]), ":0\r\n");
        assert_eq!(h.run(&["set", "i", "12345"]), "+OK\r\n");
        assert_eq!(h.run(&["strlen", "i"]), ":5\r\n");
        assert_eq!(h.run(&["set", "i", "-1"]), "+OK\r\n");
        assert_eq!(h.run(&["strlen", "i"]), ":2\r\n");
        assert_eq!(h.run(&["set", "t", "v", "ex", "100"]), "+OK\r\n");
        assert_eq!(h.run(&["append", "t", "w"]), ":2\r\n");
        assert_eq!(ttl(&h, "t"), 100);
        assert_eq!(h.run(&["append"]), "-ERR wrong number of arguments for 'append' command\r\n");
        assert_eq!(
            h.run(&["append", "a"]),
            "-ERR wrong number of arguments for 'append' command\r\n"
        );
    }

    #[test]
    fn proto_max_bulk_len_limits() {
        let mut h = Harness::new();
        h.shared.config.write().proto_max_bulk_len = 1048576;
        assert_eq!(h.run(&["set", "p", "aaaa"]), "+OK\r\n");
        assert_eq!(h.run(&["setrange", "p", "1048570", "aaaa"]), ":1048574\r\n");
        assert_eq!(h.run(&["append", "p", "aa"]), ":1048576\r\n");
        assert_eq!(
            h.run(&["append", "p", "a"]),
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        );
        assert_eq!(h.run(&["append", "p", ""]), ":1048576\r\n");
        assert_eq!(h.run(&["strlen", "p"]), ":1048576\r\n");
        assert_eq!(h.run(&["setrange", "p", "1048576", ""]), ":1048576\r\n");
        assert_eq!(
            h.run(&["setrange", "p", "1048576", "a"]),
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        );
        assert_eq!(h.run(&["setrange", "p", "0", ""]), ":1048576\r\n");
        assert_eq!(h.run(&["setrange", "p2", "1048576", ""]), ":0\r\n");
        assert_eq!(h.run(&["exists", "p2"]), ":0\r\n");
        assert_eq!(
            h.run(&["setrange", "p2", "1048576", "a"]),
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        );
        assert_eq!(h.run(&["setrange", "p2", "1048575", "a"]), ":1048576\r\n");
        assert_eq!(h.run(&["strlen", "p2"]), ":1048576\r\n");
        assert_eq!(
            h.run(&["setrange", "p2", "9223372036854775807", "x"]),
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        );
        assert_eq!(
            h.run(&["setrange", "p3", "9223372036854775807", "x"]),
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        );
        assert_eq!(h.run(&["setrange", "p3", "9223372036854775807", ""]), ":0\r\n");
    }

    #[test]
    fn setrange_command() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["setrange", "nokey", "0", ""]), ":0\r\n");
        assert_eq!(h.run(&["exists", "nokey"]), ":0\r\n");
        assert_eq!(h.run(&["setrange", "nokey", "5", ""]), ":0\r\n");
        assert_eq!(h.run(&["exists", "nokey"]), ":0\r\n");
        assert_eq!(h.run(&["setrange", "nokey", "-1", "x"]), "-ERR offset is out of range\r\n");
        assert_eq!(h.run(&["setrange", "nokey", "-1", ""]), "-ERR offset is out of range\r\n");
        assert_eq!(
            h.run(&["setrange", "nokey", "abc", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["setrange", "nokey", "1.5", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["setrange", "nokey", "99999999999999999999", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["set", "i", "12345"]), "+OK\r\n");
        assert_eq!(h.run(&["setrange", "i", "1", ""]), ":5\r\n");
        assert_eq!(enc(&h, "i"), "int");
        assert_eq!(h.run(&["setrange", "i", "1", "x"]), ":5\r\n");
        assert_eq!(enc(&h, "i"), "raw");
        assert_eq!(h.run(&["get", "i"]), "$5\r\n1x345\r\n");
        assert_eq!(h.run(&["setrange", "i", "7", "yz"]), ":9\r\n");
        assert_eq!(h.run(&["get", "i"]), "$9\r\n1x345\0\0yz\r\n");
        assert_eq!(h.run(&["strlen", "i"]), ":9\r\n");
        assert_eq!(h.run(&["setrange", "r", "3", "ab"]), ":5\r\n");
        assert_eq!(h.run(&["get", "r"]), "$5\r\n\0\0\0ab\r\n");
        assert_eq!(enc(&h, "r"), "raw");
        assert_eq!(h.run(&["setrange", "r2", "0", "1"]), ":1\r\n");
        assert_eq!(enc(&h, "r2"), "raw");
        assert_eq!(h.run(&["get", "r2"]), "$1\r\n1\r\n");
        assert_eq!(h.run(&["set", "s", "hello"]), "+OK\r\n");
        assert_eq!(h.run(&["setrange", "s", "1", ""]), ":5\r\n");
        assert_eq!(enc(&h, "s"), "embstr");
        assert_eq!(h.run(&["setrange", "s", "0", "HELLOWORLD"]), ":10\r\n");
        assert_eq!(h.run(&["get", "s"]), "$10\r\nHELLOWORLD\r\n");
        assert_eq!(h.run(&["set", "t", "v", "ex", "100"]), "+OK\r\n");
        assert_eq!(h.run(&["setrange", "t", "0", "w"]), ":1\r\n");
        assert_eq!(ttl(&h, "t"), 100);
        assert_eq!(
            h.run(&["setrange"]),
            "-ERR wrong number of arguments for 'setrange' command\r\n"
        );
        assert_eq!(
            h.run(&["setrange", "k", "0"]),
            "-ERR wrong number of arguments for 'setrange' command\r\n"
        );
    }

    #[test]
    fn getrange_and_substr() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["set", "s", "hello"]), "+OK\r\n");
        assert_eq!(h.run(&["getrange", "s", "0", "-1"]), "$5\r\nhello\r\n");
        assert_eq!(h.run(&["getrange", "s", "1", "3"]), "$3\r\nell\r\n");
        assert_eq!(h.run(&["getrange", "s", "-3", "-1"]), "$3\r\nllo\r\n");
        assert_eq!(h.run(&["getrange", "s", "-1", "-3"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["getrange", "s", "-100", "-1"]), "$5\r\nhello\r\n");
        assert_eq!(h.run(&["getrange", "s", "0", "100"]), "$5\r\nhello\r\n");
        assert_eq!(h.run(&["getrange", "s", "5", "10"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["getrange", "s", "4", "10"]), "$1\r\no\r\n");
        assert_eq!(h.run(&["getrange", "s", "3", "1"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["getrange", "s", "-100", "-100"]), "$1\r\nh\r\n");
        assert_eq!(h.run(&["getrange", "s", "0", "-100"]), "$1\r\nh\r\n");
        assert_eq!(h.run(&["getrange", "s", "-1", "0"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["getrange", "s", "0", "0"]), "$1\r\nh\r\n");
        assert_eq!(
            h.run(&["getrange", "s", "abc", "1"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["getrange", "s", "0", "abc"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["getrange", "s", "1.5", "2"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["getrange", "nokey", "0", "-1"]), "$0\r\n\r\n");
        assert_eq!(
            h.run(&["getrange", "nokey", "abc", "-1"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["getrange", "nokey", "0", "abc"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["set", "e", ""]), "+OK\r\n");
        assert_eq!(h.run(&["getrange", "e", "0", "-1"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["getrange", "e", "-1", "0"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["set", "i", "-12345"]), "+OK\r\n");
        assert_eq!(h.run(&["getrange", "i", "0", "-1"]), "$6\r\n-12345\r\n");
        assert_eq!(h.run(&["getrange", "i", "1", "2"]), "$2\r\n12\r\n");
        assert_eq!(
            h.run(&["getrange", "s", "9223372036854775807", "-9223372036854775808"]),
            "$0\r\n\r\n"
        );
        assert_eq!(
            h.run(&["getrange", "s", "-9223372036854775808", "9223372036854775807"]),
            "$5\r\nhello\r\n"
        );
        assert_eq!(
            h.run(&["getrange", "s", "-9223372036854775808", "-9223372036854775808"]),
            "$1\r\nh\r\n"
        );
        assert_eq!(h.run(&["substr", "s", "1", "3"]), "$3\r\nell\r\n");
        assert_eq!(h.run(&["substr", "s", "-2", "-1"]), "$2\r\nlo\r\n");
        assert_eq!(h.run(&["substr", "nokey", "0", "1"]), "$0\r\n\r\n");
        assert_eq!(
            h.run(&["substr", "s", "1"]),
            "-ERR wrong number of arguments for 'substr' command\r\n"
        );
        assert_eq!(
            h.run(&["getrange", "s", "1"]),
            "-ERR wrong number of arguments for 'getrange' command\r\n"
        );
        assert_eq!(
            h.run(&["getrange", "s", "1", "2", "3"]),
            "-ERR wrong number of arguments for 'getrange' command\r\n"
        );
    }

    #[test]
    fn lcs_command() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["mset", "a", "ohmytext", "b", "mynewtext"]), "+OK\r\n");
        assert_eq!(h.run(&["lcs", "a", "b"]), "$6\r\nmytext\r\n");
        assert_eq!(h.run(&["lcs", "a", "b", "len"]), ":6\r\n");
        assert_eq!(
            h.run(&["lcs", "a", "b", "idx"]),
            "*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "a", "b", "idx", "minmatchlen", "4"]),
            "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "a", "b", "idx", "minmatchlen", "4", "withmatchlen"]),
            "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "a", "b", "idx", "withmatchlen"]),
            "*4\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n"
        );
        assert_eq!(h.run(&["lcs", "a", "b", "withmatchlen"]), "$6\r\nmytext\r\n");
        assert_eq!(h.run(&["lcs", "a", "b", "withmatchlen", "len"]), ":6\r\n");
        assert_eq!(
            h.run(&["lcs", "a", "b", "len", "idx"]),
            "-ERR If you want both the length and indexes, please just use IDX.\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "a", "b", "idx", "len"]),
            "-ERR If you want both the length and indexes, please just use IDX.\r\n"
        );
        assert_eq!(h.run(&["lcs", "a", "b", "minmatchlen"]), "-ERR syntax error\r\n");
        assert_eq!(
            h.run(&["lcs", "a", "b", "minmatchlen", "abc"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "a", "b", "minmatchlen", "-5", "idx"]),
            "*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "a", "b", "MinMatchLen", "2", "IDX", "WithMatchLen"]),
            "*4\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n"
        );
        assert_eq!(h.run(&["lcs", "a", "b", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["lcs", "a", "b", "idx", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["lcs", "a", "nokey"]), "$0\r\n\r\n");
        assert_eq!(
            h.run(&["lcs", "a", "nokey", "idx"]),
            "*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"
        );
        assert_eq!(h.run(&["lcs", "nokey1", "nokey2", "len"]), ":0\r\n");
        assert_eq!(h.run(&["lcs", "nokey1", "nokey2"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["lcs", "a", "b", "len", "len"]), ":6\r\n");
        assert_eq!(h.run(&["lcs", "a", "a"]), "$8\r\nohmytext\r\n");
        assert_eq!(h.run(&["set", "n1", "12345"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "n2", "2345"]), "+OK\r\n");
        assert_eq!(h.run(&["lcs", "n1", "n2"]), "$4\r\n2345\r\n");
        assert_eq!(
            h.run(&["lcs", "n1", "n2", "idx"]),
            "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:1\r\n:4\r\n*2\r\n:0\r\n:3\r\n$3\r\nlen\r\n:4\r\n"
        );
        assert_eq!(h.run(&["lcs", "a"]), "-ERR wrong number of arguments for 'lcs' command\r\n");
        assert_eq!(h.run(&["set", "x", "abcabcabc"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "y", "cba"]), "+OK\r\n");
        assert_eq!(
            h.run(&["lcs", "x", "y", "idx", "withmatchlen"]),
            "*4\r\n$7\r\nmatches\r\n*3\r\n*3\r\n*2\r\n:6\r\n:6\r\n*2\r\n:2\r\n:2\r\n:1\r\n*3\r\n*2\r\n:4\r\n:4\r\n*2\r\n:1\r\n:1\r\n:1\r\n*3\r\n*2\r\n:2\r\n:2\r\n*2\r\n:0\r\n:0\r\n:1\r\n$3\r\nlen\r\n:3\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "y", "x", "idx", "withmatchlen"]),
            "*4\r\n$7\r\nmatches\r\n*3\r\n*3\r\n*2\r\n:2\r\n:2\r\n*2\r\n:6\r\n:6\r\n:1\r\n*3\r\n*2\r\n:1\r\n:1\r\n*2\r\n:4\r\n:4\r\n:1\r\n*3\r\n*2\r\n:0\r\n:0\r\n*2\r\n:2\r\n:2\r\n:1\r\n$3\r\nlen\r\n:3\r\n"
        );
        assert_eq!(h.run(&["set", "x1", "aaaa"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "y1", "aa"]), "+OK\r\n");
        assert_eq!(
            h.run(&["lcs", "x1", "y1", "idx"]),
            "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:2\r\n"
        );
        assert_eq!(
            h.run(&["lcs", "y1", "x1", "idx", "withmatchlen"]),
            "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:0\r\n:1\r\n*2\r\n:2\r\n:3\r\n:2\r\n$3\r\nlen\r\n:2\r\n"
        );
        assert_eq!(h.run(&["set", "p1", "xx\0yy"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "p2", "\0y"]), "+OK\r\n");
        assert_eq!(h.run(&["lcs", "p1", "p2"]), "$2\r\n\0y\r\n");
    }

    #[test]
    fn lcs_memory_guard() {
        let mut h = Harness::new();
        h.shared.config.write().proto_max_bulk_len = 1048576;
        assert_eq!(h.run(&["set", "a", "a".repeat(511).as_str()]), "+OK\r\n");
        assert_eq!(h.run(&["lcs", "a", "a", "len"]), ":511\r\n");
        assert_eq!(h.run(&["lcs", "a", "nokey", "len"]), ":0\r\n");
        assert_eq!(h.run(&["setrange", "a", "511", "b"]), ":512\r\n");
        assert_eq!(
            h.run(&["lcs", "a", "a", "len"]),
            "-ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len\r\n"
        );
        assert_eq!(h.run(&["strlen", "a"]), ":512\r\n");
        assert_eq!(
            h.run(&["lcs", "a", "b", "idx"]),
            "*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n"
        );
        assert_eq!(h.run(&["lcs", "a", "b", "foo"]), "-ERR syntax error\r\n");
    }

    #[test]
    fn resp3_replies() {
        let mut h = Harness::new();
        assert_eq!(h.run3(&["get", "nokey"]), "_\r\n");
        assert_eq!(h.run(&["set", "a", "ohmytext"]), "+OK\r\n");
        assert_eq!(h.run(&["set", "b", "mynewtext"]), "+OK\r\n");
        assert_eq!(h.run3(&["lcs", "a", "b", "idx", "withmatchlen"]), "%2\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n");
        assert_eq!(h.run3(&["mget", "a", "nokey"]), "*2\r\n$8\r\nohmytext\r\n_\r\n");
        assert_eq!(h.run3(&["set", "a", "x", "get"]), "$8\r\nohmytext\r\n");
        assert_eq!(h.run3(&["set", "nokey", "x", "xx"]), "_\r\n");
        assert_eq!(h.run3(&["set", "nokey", "x", "xx", "get"]), "_\r\n");
        assert_eq!(h.run3(&["getex", "nokey2"]), "_\r\n");
        assert_eq!(h.run3(&["incrbyfloat", "f", "1.5"]), "$3\r\n1.5\r\n");
    }
}

#[cfg(test)]
mod growth_tests {
    use crate::tests::Harness;

    /// Heap bytes held by a string key's value in db 0.
    fn held(h: &Harness, key: &str) -> usize {
        let store = &h.shared.store;
        let s = store.lock_stripe(0, store.stripe_of(key.as_bytes()) as usize);
        s.peek(key.as_bytes()).expect("key").value.heap_size()
    }

    /// A string grown by SETBIT, BITFIELD or SETRANGE holds its length's
    /// size class, not twice its capacity (or, as Redis's sdsgrowzero,
    /// twice its length).
    #[test]
    fn strings_grown_by_bit_and_range_writes_keep_to_their_size_class() {
        let mut h = Harness::new();
        for (i, bit) in
            [3_000u64 * 8, 3_600 * 8, 4_200 * 8, 7_000 * 8, 8_191 * 8].iter().enumerate()
        {
            assert_eq!(h.run(&["setbit", "bm", &bit.to_string(), "1"]), ":0\r\n", "{i}");
            let len = (bit / 8 + 1) as usize;
            let held = held(&h, "bm");
            assert!(held >= len && held <= store::types::list::size_class(len), "{len}: {held}");
        }
        assert_eq!(h.run(&["bitfield", "bf", "set", "u8", "#4999", "7"]), "*1\r\n:0\r\n");
        assert!(held(&h, "bf") <= store::types::list::size_class(5_000));
        assert_eq!(h.run(&["setrange", "r", "0", "abc"]), ":3\r\n");
        for end in [2_500usize, 3_100, 6_000] {
            assert_eq!(
                h.run(&["setrange", "r", &(end - 3).to_string(), "xyz"]),
                format!(":{end}\r\n")
            );
            let held = held(&h, "r");
            assert!(held >= end && held <= store::types::list::size_class(end), "{end}: {held}");
        }
        assert_eq!(h.run(&["getrange", "r", "0", "2"]), "$3\r\nabc\r\n");
        assert_eq!(h.run(&["getbit", "bm", "24000"]), ":1\r\n");
    }
}
