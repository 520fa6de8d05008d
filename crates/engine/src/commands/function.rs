//! Redis Functions' commands: `FUNCTION LOAD | DELETE | FLUSH | LIST |
//! STATS | KILL | DUMP | RESTORE | HELP`, `FCALL` and `FCALL_RO`, declared
//! with the other families. The registry and a function's run are the
//! scripting subsystem's (`subsystems/script/function.rs`); a library's
//! encoding in DUMP payloads is the host's (`Host::snapshots`).

use std::sync::Arc;

use resp::ReplyBuf;

use crate::core::ctx::{eq_ic, help_reply, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Flags, Lock};
use crate::subsystems::script;
use crate::subsystems::script::function::{self, Library};

const FCALL_KEYS: Lock = Lock::Custom { find: super::scripting::eval_keys };

pub const COMMANDS: &[Command] = &[
    Command::redis("FCALL", fcall)
        .flags(Flags::MAY_REPLICATE.union(Flags::RUNS_SCRIPT))
        .lock(FCALL_KEYS),
    Command::redis("FCALL_RO", fcall_ro).flags(Flags::RUNS_SCRIPT).lock(FCALL_KEYS),
    Command::redis("FUNCTION", container).subs(SUBS),
];

/// The subcommands that change the registry hold every stripe, as FLUSHALL
/// does (no key is reported): a snapshot's instant, which holds them all,
/// then falls cleanly before or after them, so the libraries a snapshot
/// takes agree with where the AOF and the replication stream switch.
const WRITE_KEYS: Lock = Lock::AllDbs;

const SUBS: &[Command] = &[
    Command::redis("DUMP", dump),
    Command::redis("RESTORE", restore).lock(WRITE_KEYS),
    Command::redis("DELETE", delete).lock(WRITE_KEYS),
    Command::redis("FLUSH", flush).lock(WRITE_KEYS),
    Command::redis("HELP", help),
    Command::redis("KILL", kill),
    Command::redis("LIST", list),
    Command::redis("LOAD", load).lock(WRITE_KEYS),
    Command::redis("STATS", stats),
];

fn container(_: &mut Ctx, args: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    Err(CmdError::UnknownSubcommand {
        sub: args.peek().unwrap_or_default().to_vec(),
        cmd: b"FUNCTION".to_vec(),
    })
}

const HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    help_reply(HELP, out);
    Ok(())
}

fn load(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // As Redis parses it: every argument but the last is an option
    // (REPLACE, any number of times), the last is the code.
    let rest = args.rest();
    let (&code, opts) =
        rest.split_last().ok_or_else(|| CmdError::err("Function code is missing"))?;
    let mut replace = false;
    for o in opts {
        if !eq_ic(o, "REPLACE") {
            return Err(CmdError::err(
                "Unknown option given: ".to_string() + &String::from_utf8_lossy(o),
            ));
        }
        replace = true;
    }
    let name = function::load_library(cx.shared, code, replace)?;
    cx.dirty(1);
    out.bulk(name.as_bytes());
    Ok(())
}

fn snapshots(cx: &Ctx) -> Result<Arc<dyn crate::subsystems::snapshot::Snapshots>, CmdError> {
    crate::subsystems::snapshot::installed(cx.shared)
}

fn dump(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let snap = snapshots(cx)?;
    let codes = function::library_codes(cx.shared);
    let cfg = cx.sess.conf(cx.shared).clone();
    out.bulk(&snap.function_dump(&codes, &cfg));
    Ok(())
}

fn restore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // Too many arguments before the policy's words (Redis's order).
    if args.remaining() > 2 {
        return Err(CmdError::SubcommandSyntax {
            sub: args.argv()[1].to_vec(),
            cmd: b"FUNCTION".to_vec(),
        });
    }
    let payload = args.req()?;
    let policy = match args.next() {
        None => function::Policy::Append,
        Some(p) if eq_ic(p, "APPEND") => function::Policy::Append,
        Some(p) if eq_ic(p, "REPLACE") => function::Policy::Replace,
        Some(p) if eq_ic(p, "FLUSH") => function::Policy::Flush,
        Some(_) => {
            return Err(CmdError::err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    let snap = snapshots(cx)?;
    let cfg = cx.sess.conf(cx.shared).clone();
    let codes = snap.function_restore(payload, &cfg).map_err(CmdError::err)?;
    function::restore_libraries(cx.shared, &codes, policy)?;
    cx.dirty(1);
    out.ok();
    Ok(())
}

fn delete(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let name = String::from_utf8_lossy(args.req()?).into_owned();
    function::delete_library(cx.shared, &name)?;
    cx.dirty(1);
    out.ok();
    Ok(())
}

fn flush(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    args.at_most(1)?;
    match args.rest() {
        [] => {}
        [m] if eq_ic(m, "SYNC") || eq_ic(m, "ASYNC") => {}
        _ => return Err(CmdError::err("FUNCTION FLUSH only supports SYNC|ASYNC option")),
    }
    function::clear_libraries(cx.shared);
    cx.dirty(1);
    cx.force_propagate();
    out.ok();
    Ok(())
}

fn list(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut pattern: Option<&[u8]> = None;
    let mut with_code = false;
    while let Some(a) = args.next() {
        if eq_ic(a, "WITHCODE") && !with_code {
            with_code = true;
        } else if eq_ic(a, "LIBRARYNAME") && pattern.is_none() {
            pattern = Some(
                args.next().ok_or_else(|| CmdError::err("library name argument was not given"))?,
            );
        } else {
            return Err(CmdError::err(format!("Unknown argument {}", String::from_utf8_lossy(a))));
        }
    }
    let libs: Vec<Arc<Library>> = function::libraries(cx.shared)
        .into_iter()
        .filter(|l| {
            pattern.is_none_or(|p| crate::subsystems::glob::matches(p, l.name.as_bytes(), false))
        })
        .collect();
    out.array(libs.len());
    for lib in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for f in &lib.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.description {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names = f.flags.names();
            out.set(names.len());
            for n in names {
                out.simple(n.as_bytes());
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

fn stats(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // While an EVAL script is busy, Redis answers its BUSY text.
    if cx.shared.scripts.is_busy() {
        if let e @ CmdError::Busy = cx.shared.scripts.busy_error() {
            return Err(e);
        }
    }
    let (libraries, functions) = function::counts(cx.shared);
    out.map(2);
    out.bulk(b"running_script");
    cx.shared.scripts.reply_running_function(out);
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libraries as i64);
    out.bulk(b"functions_count");
    out.int(functions as i64);
    Ok(())
}

fn kill(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    script::kill_running(cx, true, out)
}

fn fcall(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    function::fcall(cx, args, out, false)
}

fn fcall_ro(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    function::fcall(cx, args, out, true)
}
