//! The blocking sorted-set pops: BZPOPMIN, BZPOPMAX and BZMPOP. They pop
//! at once like ZPOPMIN/ZPOPMAX/ZMPOP when a key holds a sorted set, and
//! otherwise wait through `crate::core::blocking` (as BLPOP does for lists).

use resp::ReplyBuf;

use store::Kind;

use crate::commands::zset::ops::{numkeys_at_1, parse_mpop, pop_reply, PopReply};
use crate::core::blocking;
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, KeyList, Lock};

pub const COMMANDS: &[Command] = &[
    Command::redis("BZPOPMIN", bzpopmin),
    Command::redis("BZPOPMAX", bzpopmax),
    Command::redis("BZMPOP", bzmpop).lock(Lock::Custom { find: bzmpop_keys }),
];

/// BZPOP*'s reply: `[key, member, score]`.
const fn single(max: bool) -> PopReply {
    PopReply { max, emit_key: true, nested: false, nil_when_empty: true }
}

/// BZMPOP's reply: `[key, [[member, score], …]]`, as ZMPOP's.
const fn multi(max: bool) -> PopReply {
    PopReply { max, emit_key: true, nested: true, nil_when_empty: true }
}

fn bzpopmin(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    bzpop_with(cx, args, false, out)
}

fn bzpopmax(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    bzpop_with(cx, args, true, out)
}

/// Redis's `blockingGenericZpopCommand` for BZPOPMIN/BZPOPMAX.
fn bzpop_with(cx: &mut Ctx, args: &mut Args, max: bool, out: &mut ReplyBuf) -> CmdResult {
    let (timeout, keys) = args.rest().split_last().ok_or(CmdError::Syntax)?;
    let timeout = blocking::parse_timeout(timeout)?;
    pop_or_block(cx, args.argv(), keys, None, single(max), timeout, out)
}

/// Lock finder of BZMPOP: ZMPOP's, after the timeout.
fn bzmpop_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    if argv.len() > 1 {
        numkeys_at_1(&argv[1..], db, keys);
    }
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
fn bzmpop(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let timeout = args.req()?;
    let (keys, max, count) = parse_mpop(args)?;
    let timeout = blocking::parse_timeout(timeout)?;
    pop_or_block(cx, args.argv(), keys, Some(count), multi(max), timeout, out)
}

/// Pops from the first sorted set among `keys`, else (outside EXEC)
/// blocks; inside EXEC replies a null array as the non-blocking forms do.
fn pop_or_block<'k>(
    cx: &mut Ctx,
    argv: &[&[u8]],
    keys: &'k [&'k [u8]],
    count: Option<usize>,
    how: PopReply,
    timeout: i64,
    out: &mut ReplyBuf,
) -> CmdResult {
    let keys = cx.waited_keys(keys);
    let mark = out.mark();
    if pop_reply(cx, keys, count, how, out)? {
        return Ok(());
    }
    if cx.may_block() {
        // Nothing was popped: the null reply just written is withdrawn.
        out.truncate(mark);
        blocking::block(cx, argv, keys, Kind::ZSet, timeout);
    }
    Ok(())
}
