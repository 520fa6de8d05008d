//! Connection commands: PING, ECHO, SELECT, …

use resp::ReplyBuf;

use crate::ctx::{Args, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::spec::{CommandSpec, Flags, Group, KeySpec};

const CONN: Flags = Flags::FAST.union(Flags::LOADING).union(Flags::STALE);

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "PING",
        -1,
        Flags::FAST,
        KeySpec::None,
        Group::Connection,
        "Returns the server's liveliness response.",
        ping,
    )
    .complexity("O(1)"),
    CommandSpec::new(
        "ECHO",
        2,
        Flags::FAST,
        KeySpec::None,
        Group::Connection,
        "Returns the given string.",
        echo,
    )
    .complexity("O(1)"),
    CommandSpec::new(
        "SELECT",
        2,
        CONN,
        KeySpec::None,
        Group::Connection,
        "Changes the selected database.",
        select,
    )
    .complexity("O(1)"),
];

fn ping(_cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if args.remaining() > 1 {
        return Err(CmdError::WrongArity("ping".into()));
    }
    match args.next() {
        Some(msg) => out.bulk(msg),
        None => out.simple(b"PONG"),
    }
    Ok(())
}

fn echo(_cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.bulk(args.req()?);
    Ok(())
}

fn select(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let n = resp::parse_i64(args.req()?).ok_or(CmdError::InvalidDbIndex)?;
    if n < 0 || n as usize >= cx.shared.store.databases() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    cx.sess.db = n as usize;
    cx.db = n as usize;
    cx.sess.handle.db.store(n as usize, std::sync::atomic::Ordering::Relaxed);
    out.ok();
    Ok(())
}
