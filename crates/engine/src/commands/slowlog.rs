//! SLOWLOG GET | LEN | RESET | HELP: the slow log's commands. The log
//! itself, and what the dispatcher offers it, is the
//! `subsystems::slowlog` subsystem.

use resp::ReplyBuf;

use crate::commands::server::reply_help;
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

pub const COMMANDS: &[Command] = &[Command::redis("SLOWLOG", crate::commands::server::container)
    .subs(&[
        Command::redis("GET", get),
        Command::redis("LEN", len),
        Command::redis("RESET", reset),
        Command::redis("HELP", help),
    ])];

fn get(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    args.at_most(1)?;
    let count = match args.next() {
        None => 10,
        Some(a) => match resp::parse_i64(a) {
            Some(n) if n >= -1 => n,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        },
    };
    let g = cx.shared.slowlog.inner.lock();
    let n = if count == -1 { g.entries.len() } else { g.entries.len().min(count as usize) };
    out.array(n);
    for e in g.entries.iter().take(n) {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time);
        out.int(e.usec as i64);
        out.array(e.argv.len());
        for a in &e.argv {
            out.bulk(a);
        }
        out.bulk(e.peer.as_bytes());
        out.bulk(&e.name);
    }
    Ok(())
}

fn len(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.int(cx.shared.slowlog.len() as i64);
    Ok(())
}

fn reset(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cx.shared.slowlog.reset();
    out.ok();
    Ok(())
}

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    reply_help(
        out,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}
