//! Scripting's commands: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and
//! `SCRIPT`, declared here with the other families; what runs a script
//! (the cache, the Lua states, locking and starting over, the checks of a
//! script's flags, BUSY and kill) is the scripting subsystem's
//! (`subsystems/script`). `FUNCTION` and `FCALL` are in [`super::function`].

use resp::ReplyBuf;

use crate::core::ctx::{eq_ic, help_reply, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Flags, KeyList, Lock};
use crate::subsystems::script;

const EVAL_KEYS: Lock = Lock::Custom { find: eval_keys };

pub const COMMANDS: &[Command] = &[
    Command::redis("EVAL", eval)
        .flags(Flags::MAY_REPLICATE.union(Flags::RUNS_SCRIPT))
        .lock(EVAL_KEYS),
    Command::redis("EVALSHA", evalsha)
        .flags(Flags::MAY_REPLICATE.union(Flags::RUNS_SCRIPT))
        .lock(EVAL_KEYS),
    Command::redis("EVAL_RO", eval_ro).flags(Flags::RUNS_SCRIPT).lock(EVAL_KEYS),
    Command::redis("EVALSHA_RO", evalsha_ro).flags(Flags::RUNS_SCRIPT).lock(EVAL_KEYS),
    Command::redis("SCRIPT", container).subs(SCRIPT_SUBS),
];

const SCRIPT_SUBS: &[Command] = &[
    Command::redis("DEBUG", script_debug),
    Command::redis("EXISTS", script_exists),
    Command::redis("FLUSH", script_flush),
    Command::redis("HELP", script_help),
    Command::redis("KILL", script_kill),
    Command::redis("LOAD", script_load),
];

/// The declared keys: `numkeys` names after the script (locked before the
/// handler runs).
pub(crate) fn eval_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    let Some(n) = argv.get(2).and_then(|a| resp::parse_i64(a)) else { return };
    if n > 0 && (n as usize) <= argv.len().saturating_sub(3) {
        for &k in &argv[3..3 + n as usize] {
            keys.push((db, k));
        }
    }
}

fn eval(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    script::eval(cx, args, out, false, false)
}

fn evalsha(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    script::eval(cx, args, out, true, false)
}

fn eval_ro(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    script::eval(cx, args, out, false, true)
}

fn evalsha_ro(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    script::eval(cx, args, out, true, true)
}

/// Only reached for a bare `SCRIPT`, which arity rejects first.
fn container(_: &mut Ctx, args: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    Err(CmdError::UnknownSubcommand {
        sub: args.peek().unwrap_or_default().to_vec(),
        cmd: b"SCRIPT".to_vec(),
    })
}

const HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

fn script_help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    help_reply(HELP, out);
    Ok(())
}

fn script_load(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let body = args.req()?;
    let (sha, _) = script::load(cx, body)?;
    out.bulk(&sha);
    Ok(())
}

fn script_exists(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let rest = args.rest();
    out.array(rest.len());
    for a in rest {
        let found = a.len() == 40 && {
            let mut sha = [0u8; 40];
            for (d, s) in sha.iter_mut().zip(a.iter()) {
                *d = s.to_ascii_lowercase();
            }
            cx.shared.scripts.get(&sha).is_some()
        };
        out.int(found as i64);
    }
    Ok(())
}

fn script_flush(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    match args.rest() {
        [] => {}
        [m] if eq_ic(m, "SYNC") || eq_ic(m, "ASYNC") => {}
        _ => return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option")),
    }
    cx.shared.scripts.flush();
    out.ok();
    Ok(())
}

fn script_kill(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    script::kill_running(cx, false, out)
}

fn script_debug(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mode = args.req()?;
    // Replies still unwritten would come after the debugger's own output,
    // which goes straight to the socket.
    if !out.is_empty() {
        return Err(CmdError::err("SCRIPT DEBUG must be called outside a pipeline"));
    }
    cx.sess.ldb = if eq_ic(mode, "NO") {
        None
    } else if eq_ic(mode, "YES") {
        Some(script::ldb::Mode::Yes)
    } else if eq_ic(mode, "SYNC") {
        Some(script::ldb::Mode::Sync)
    } else {
        return Err(CmdError::err("Use SCRIPT DEBUG YES/SYNC/NO"));
    };
    out.ok();
    Ok(())
}
