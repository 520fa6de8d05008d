//! Consumer groups: XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER,
//! DELCONSUMER, HELP), XACK and XPENDING, as Redis 7.0's `t_stream.c`.

use std::borrow::Cow;

use resp::ReplyBuf;
use store::types::stream::{StreamId, ENTRIES_READ_INVALID};
use store::{Value, NO_EXPIRE};

use crate::commands::server::reply_help;
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

use super::{parse_interval_id, parse_strict_id, read_stream, reply_id, write_stream};

pub const XACK: Command = Command::redis("XACK", xack);

pub const XPENDING: Command = Command::redis("XPENDING", xpending);

const SUBS: &[Command] = &[
    Command::redis("CREATE", create),
    Command::redis("SETID", setid),
    Command::redis("DESTROY", destroy),
    Command::redis("CREATECONSUMER", createconsumer),
    Command::redis("DELCONSUMER", delconsumer),
    Command::redis("HELP", help),
];

pub const XGROUP: Command = Command::redis("XGROUP", crate::commands::server::container).subs(SUBS);

fn msg(m: &'static str) -> CmdError {
    CmdError::Msg(Cow::Borrowed(m))
}

fn sub_syntax(args: &Args) -> CmdError {
    let argv = args.argv();
    CmdError::SubcommandSyntax { sub: argv[1].to_vec(), cmd: argv[0].to_vec() }
}

fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    let mut m = b"NOGROUP No such consumer group '".to_vec();
    m.extend_from_slice(group);
    m.extend_from_slice(b"' for key name '");
    m.extend_from_slice(key);
    m.push(b'\'');
    CmdError::Bytes(m)
}

fn needs_key() -> CmdError {
    msg("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
}

fn entries_read_arg(a: &[u8]) -> Result<i64, CmdError> {
    let n = parse_i64(a)?;
    if n < 0 && n != ENTRIES_READ_INVALID {
        return Err(msg("ERR value for ENTRIESREAD must be positive or -1"));
    }
    Ok(n)
}

/// The key's stream and group, for the subcommands that need both.
fn existing(cx: &mut Ctx, key: &[u8], group: &[u8]) -> CmdResult {
    let s = write_stream(cx, key)?.ok_or_else(needs_key)?;
    if s.group(group).is_none() {
        return Err(no_group(key, group));
    }
    Ok(())
}

fn create(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group, id_arg) = (argv[2], argv[3], argv[4]);
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < argv.len() {
        if eq_ic(argv[i], "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if eq_ic(argv[i], "ENTRIESREAD") && i + 1 < argv.len() {
            entries_read = entries_read_arg(argv[i + 1])?;
            i += 2;
        } else {
            return Err(sub_syntax(args));
        }
    }
    let exists = write_stream(cx, key)?.is_some();
    if !exists && !mkstream {
        return Err(needs_key());
    }
    if argv.len() > 8 {
        return Err(sub_syntax(args));
    }
    let id = if id_arg == b"$" {
        write_stream(cx, key)?.map_or(StreamId::MIN, |s| s.last_id)
    } else {
        parse_strict_id(id_arg)?
    };
    if !exists {
        cx.set(key, Value::Stream(Box::default()), NO_EXPIRE);
        cx.changed_silently(key, 0);
    }
    let s = write_stream(cx, key)?.expect("present");
    if !s.create_group(group, id, entries_read) {
        return Err(msg("BUSYGROUP Consumer Group name already exists"));
    }
    out.ok();
    cx.changed_unwatched(key, Some((Class::STREAM, "xgroup-create")), 1, false);
    Ok(())
}

fn setid(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group, id_arg) = (argv[2], argv[3], argv[4]);
    let mut entries_read = ENTRIES_READ_INVALID;
    // Redis's order: the options (ENTRIESREAD <n>, any number of times),
    // then the key and group, then the argument count.
    let mut i = 5;
    while i < argv.len() {
        if eq_ic(argv[i], "ENTRIESREAD") && i + 1 < argv.len() {
            entries_read = entries_read_arg(argv[i + 1])?;
            i += 2;
        } else {
            return Err(sub_syntax(args));
        }
    }
    existing(cx, key, group)?;
    if argv.len() != 5 && argv.len() != 7 {
        return Err(sub_syntax(args));
    }
    let s = write_stream(cx, key)?.expect("present");
    let id = if id_arg == b"$" {
        s.last_id
    } else {
        super::parse_id_with(
            id_arg,
            super::IdRules { missing_seq: 0, strict: false, partial: false },
        )?
        .0
    };
    let g = s.group_mut(group).expect("present");
    g.last_id = id;
    g.entries_read = entries_read;
    out.ok();
    cx.changed_unwatched(key, Some((Class::STREAM, "xgroup-setid")), 1, false);
    Ok(())
}

fn destroy(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group) = (argv[2], argv[3]);
    let s = write_stream(cx, key)?.ok_or_else(needs_key)?;
    let removed = s.groups.as_mut().is_some_and(|g| g.remove(group).is_some());
    if removed {
        out.int(1);
        // Readers blocked on the group are served -NOGROUP.
        cx.changed_unwatched(key, Some((Class::STREAM, "xgroup-destroy")), 1, true);
    } else {
        out.int(0);
    }
    Ok(())
}

fn createconsumer(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group, consumer) = (argv[2], argv[3], argv[4]);
    existing(cx, key, group)?;
    let now = cx.now();
    let s = write_stream(cx, key)?.expect("present");
    let created = s.group_mut(group).expect("present").ensure_consumer(consumer, now);
    out.int(i64::from(created));
    if created {
        cx.changed_unwatched(key, Some((Class::STREAM, "xgroup-createconsumer")), 1, false);
    }
    Ok(())
}

fn delconsumer(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group, consumer) = (argv[2], argv[3], argv[4]);
    existing(cx, key, group)?;
    let s = write_stream(cx, key)?.expect("present");
    let pending = s.group_mut(group).expect("present").delete_consumer(consumer);
    out.int(pending.unwrap_or(0) as i64);
    if pending.is_some() {
        cx.changed_unwatched(key, Some((Class::STREAM, "xgroup-delconsumer")), 1, false);
    }
    Ok(())
}

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    reply_help(
        out,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
    Ok(())
}

fn xack(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let group = args.req()?;
    let exists = match read_stream(cx, key)? {
        Some(s) => s.group(group).is_some(),
        None => false,
    };
    if !exists {
        out.int(0);
        return Ok(());
    }
    let ids = args.rest().iter().map(|a| parse_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let s = write_stream(cx, key)?.expect("present");
    let g = s.group_mut(group).expect("present");
    let mut acked = 0u64;
    for id in ids {
        if let Some(n) = g.pel.remove(&id) {
            if let Some(c) = g.consumers.get_mut(&n.consumer) {
                c.pel.remove(&id);
            }
            acked += 1;
        }
    }
    if acked > 0 {
        cx.changed_unwatched(key, None, acked, false);
    }
    out.int(acked as i64);
    Ok(())
}

fn xpending(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group) = (argv[1], argv[2]);
    let argc = argv.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut range = None;
    let mut consumer = None;
    let mut min_idle = 0i64;
    if argc >= 6 {
        let mut at = 3;
        if eq_ic(argv[3], "IDLE") {
            min_idle = parse_i64(argv[4])?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = parse_i64(argv[at + 2])?.max(0);
        let (mut start, ex) = parse_interval_id(argv[at], 0)?;
        if ex {
            start = start.incr().ok_or_else(|| msg("ERR invalid start ID for the interval"))?;
        }
        let (mut end, ex) = parse_interval_id(argv[at + 1], u64::MAX)?;
        if ex {
            end = end.decr().ok_or_else(|| msg("ERR invalid end ID for the interval"))?;
        }
        consumer = argv.get(at + 3).copied();
        range = Some((start, end, count));
    }
    let now = cx.now();
    let s = read_stream(cx, key)?;
    let Some(g) = s.and_then(|s| s.group(group)) else {
        let mut m = b"NOGROUP No such key '".to_vec();
        m.extend_from_slice(key);
        m.extend_from_slice(b"' or consumer group '");
        m.extend_from_slice(group);
        m.push(b'\'');
        return Err(CmdError::Bytes(m));
    };
    let Some((start, end, count)) = range else {
        out.array(4);
        out.int(g.pel.len() as i64);
        match (g.pel.first_key_value(), g.pel.last_key_value()) {
            (Some((a, _)), Some((b, _))) => {
                reply_id(out, *a);
                reply_id(out, *b);
                let with: Vec<_> = g.consumers.iter().filter(|(_, c)| !c.pel.is_empty()).collect();
                out.array(with.len());
                for (name, c) in with {
                    out.array(2);
                    out.bulk(name);
                    out.bulk_int(c.pel.len() as i64);
                }
            }
            _ => {
                out.null();
                out.null();
                out.null_array();
            }
        }
        return Ok(());
    };
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumers.get(name) {
            Some(c) => c.pel.range(start..).take_while(|id| **id <= end).copied().collect(),
            None => {
                out.array(0);
                return Ok(());
            }
        },
        None => g.pel.range(start..).take_while(|(id, _)| **id <= end).map(|(id, _)| *id).collect(),
    };
    let mut rows = Vec::new();
    for id in ids {
        if rows.len() as i64 >= count {
            break;
        }
        let n = &g.pel[&id];
        if min_idle != 0 && now - n.delivery_time < min_idle {
            continue;
        }
        rows.push((id, n));
    }
    out.array(rows.len());
    for (id, n) in rows {
        out.array(4);
        reply_id(out, id);
        out.bulk(&n.consumer);
        out.int((now - n.delivery_time).max(0));
        out.int(n.delivery_count as i64);
    }
    Ok(())
}
