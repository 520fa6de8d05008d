//! String commands.

use resp::ReplyBuf;
use store::{Value, NO_EXPIRE};

use crate::ctx::{eq_ic, expect_string, Args, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::spec::{CommandSpec, Flags, Group, KeySpec};

const W: Flags = Flags::WRITE.union(Flags::DENYOOM);
const R: Flags = Flags::READONLY;

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("GET", 2, R.union(Flags::FAST), KeySpec::range(1, 1, 1), Group::String,
        "Returns the string value of a key.", get).complexity("O(1)"),
    CommandSpec::new("SET", -3, W, KeySpec::range(1, 1, 1), Group::String,
        "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", set)
        .complexity("O(1)"),
];

/// Writes a string entry's value as a bulk reply.
pub(crate) fn reply_string(v: &Value, out: &mut ReplyBuf) -> CmdResult {
    let mut buf = [0u8; 24];
    match v.as_bytes(&mut buf) {
        Some(b) => {
            out.bulk(b);
            Ok(())
        }
        None => Err(CmdError::WrongType),
    }
}

fn get(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    match cx.lookup_read(key) {
        Some(e) => reply_string(&e.value, out),
        None => {
            out.null();
            Ok(())
        }
    }
}

/// Expiry given as an option: which unit, absolute or relative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExpireUnit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// Options of SET and its variants.
#[derive(Default, Debug)]
pub(crate) struct SetOpts<'a> {
    pub nx: bool,
    pub xx: bool,
    pub get: bool,
    pub keepttl: bool,
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
    let v = crate::ctx::parse_i64(arg)?;
    let secs = matches!(unit, ExpireUnit::Ex | ExpireUnit::ExAt);
    if v <= 0 || (secs && v > i64::MAX / 1000) {
        return Err(CmdError::InvalidExpire(cmd));
    }
    let mut ms = if secs { v * 1000 } else { v };
    if matches!(unit, ExpireUnit::Ex | ExpireUnit::Px) {
        ms = ms.wrapping_add(now);
    }
    if ms <= 0 {
        return Err(CmdError::InvalidExpire(cmd));
    }
    Ok(ms)
}

fn parse_set_opts<'a>(args: &mut Args<'a>) -> Result<SetOpts<'a>, CmdError> {
    let mut o = SetOpts::default();
    while let Some(a) = args.next() {
        let has_next = args.peek().is_some();
        let expire_free = !o.keepttl && o.expire.is_none();
        if eq_ic(a, "NX") && !o.xx {
            o.nx = true;
        } else if eq_ic(a, "XX") && !o.nx {
            o.xx = true;
        } else if eq_ic(a, "GET") {
            o.get = true;
        } else if eq_ic(a, "KEEPTTL") && o.expire.is_none() {
            o.keepttl = true;
        } else if let Some(unit) = expire_unit(a) {
            // The same unit may repeat (the last wins); mixing is an error.
            let same = matches!(o.expire, Some((u, _)) if u == unit);
            if !has_next || !(expire_free || same) {
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
    let opts = parse_set_opts(args)?;
    set_with(cx, key, val, &opts, "set", out)
}

/// The shared body of SET, SETNX, SETEX, PSETEX and GETSET (Redis's
/// `setGenericCommand`). Writes the reply: OK, the old value (GET), or
/// a null when NX/XX prevented the write.
pub(crate) fn set_with(
    cx: &mut Ctx,
    key: &[u8],
    val: &[u8],
    o: &SetOpts,
    cmd: &'static str,
    out: &mut ReplyBuf,
) -> CmdResult {
    let expire_at = match o.expire {
        Some((unit, arg)) => expire_at_ms(unit, arg, cx.now(), cmd)?,
        None => NO_EXPIRE,
    };
    let old = cx.lookup(key);
    let found = old.is_some();
    let old_ttl = old.as_ref().map_or(NO_EXPIRE, |e| e.expire_at);
    if o.get {
        match old {
            Some(e) => {
                expect_string(e)?;
                reply_string(&e.value, out)?;
            }
            None => out.null(),
        }
    }
    if (o.nx && found) || (o.xx && !found) {
        if !o.get {
            out.null();
        }
        return Ok(());
    }
    let expire_at = if o.keepttl && expire_at == NO_EXPIRE { old_ttl } else { expire_at };
    cx.set(key, Value::from_arg(val), expire_at);
    if !o.get {
        out.ok();
    }
    Ok(())
}
