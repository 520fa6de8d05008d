//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS and HELP,
//! with Redis 7.0's fields (maps in RESP3, flat arrays in RESP2).
//!
//! `radix-tree-nodes` counts the nodes of Redis's rax over the node keys;
//! Sluice counts those of the same compressed radix tree
//! ([`Stream::rax_nodes`]).

use resp::ReplyBuf;
use store::types::stream::{Group, Stream, StreamId, ENTRIES_READ_INVALID};

use crate::commands::server::reply_help;
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

use super::{read_stream, reply_entry, reply_id};

const SUBS: &[Command] = &[
    Command::redis("STREAM", stream),
    Command::redis("GROUPS", groups),
    Command::redis("CONSUMERS", consumers),
    Command::redis("HELP", help),
];

pub const XINFO: Command = Command::redis("XINFO", crate::commands::server::container).subs(SUBS);

fn need(cx: &mut Ctx, key: &[u8]) -> Result<(), CmdError> {
    read_stream(cx, key)?.ok_or(CmdError::NoSuchKey).map(|_| ())
}

fn opt_int(out: &mut ReplyBuf, v: Option<u64>) {
    match v {
        Some(v) => out.int(v as i64),
        None => out.null(),
    }
}

fn entries_read(out: &mut ReplyBuf, g: &Group) {
    if g.entries_read == ENTRIES_READ_INVALID {
        out.null();
    } else {
        out.int(g.entries_read);
    }
}

fn stream(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let key = argv[2];
    let mut full = false;
    let mut count: i64 = 10;
    let bad = || CmdError::SubcommandSyntax { sub: argv[1].to_vec(), cmd: argv[0].to_vec() };
    // Redis looks the key up (WRONGTYPE, "no such key") before it
    // parses FULL and COUNT.
    need(cx, key)?;
    if argv.len() > 3 {
        if argv.len() > 6 || !eq_ic(argv[3], "FULL") {
            return Err(bad());
        }
        full = true;
        if argv.len() > 4 {
            if argv.len() != 6 || !eq_ic(argv[4], "COUNT") {
                return Err(bad());
            }
            count = parse_i64(argv[5])?.max(0);
        }
    }
    let now = cx.now();
    let s = read_stream(cx, key)?.expect("present");
    out.map(if full { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.rax_nodes() as i64);
    out.bulk(b"last-generated-id");
    reply_id(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    reply_id(out, s.max_deleted);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    reply_id(out, s.first_id);
    if !full {
        out.bulk(b"groups");
        out.int(s.groups().count() as i64);
        for (name, last) in [(&b"first-entry"[..], false), (&b"last-entry"[..], true)] {
            out.bulk(name);
            let mut found = None;
            s.range(StreamId::MIN, StreamId::MAX, last, |e| {
                found = Some(e);
                false
            });
            match found {
                Some(e) => reply_entry(out, &e),
                None => out.null(),
            }
        }
        return Ok(());
    }
    out.bulk(b"entries");
    let limit = if count == 0 { usize::MAX } else { count as usize };
    let mut found = Vec::new();
    s.range(StreamId::MIN, StreamId::MAX, false, |e| {
        found.push(e);
        found.len() < limit
    });
    out.array(found.len());
    for e in &found {
        reply_entry(out, e);
    }
    out.bulk(b"groups");
    out.array(s.groups().count());
    for (name, g) in s.groups() {
        full_group(out, s, name, g, limit, now);
    }
    Ok(())
}

fn full_group(out: &mut ReplyBuf, s: &Stream, name: &[u8], g: &Group, limit: usize, now: i64) {
    out.map(7);
    out.bulk(b"name");
    out.bulk(name);
    out.bulk(b"last-delivered-id");
    reply_id(out, g.last_id);
    out.bulk(b"entries-read");
    entries_read(out, g);
    out.bulk(b"lag");
    opt_int(out, s.lag(g));
    out.bulk(b"pel-count");
    out.int(g.pel.len() as i64);
    out.bulk(b"pending");
    let pel: Vec<_> = g.pel.iter().take(limit).collect();
    out.array(pel.len());
    for (id, n) in pel {
        out.array(4);
        reply_id(out, *id);
        out.bulk(&n.consumer);
        out.int(n.delivery_time);
        out.int(n.delivery_count as i64);
    }
    out.bulk(b"consumers");
    out.array(g.consumers.len());
    for (cname, c) in &g.consumers {
        out.map(4);
        out.bulk(b"name");
        out.bulk(cname);
        out.bulk(b"seen-time");
        out.int(c.seen_time);
        out.bulk(b"pel-count");
        out.int(c.pel.len() as i64);
        out.bulk(b"pending");
        let pel: Vec<_> = c.pel.iter().take(limit).collect();
        out.array(pel.len());
        for id in pel {
            let n = &g.pel[id];
            out.array(3);
            reply_id(out, *id);
            out.int(n.delivery_time);
            out.int(n.delivery_count as i64);
        }
    }
    let _ = now;
}

fn groups(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.argv()[2];
    need(cx, key)?;
    let s = read_stream(cx, key)?.expect("present");
    out.array(s.groups().count());
    for (name, g) in s.groups() {
        out.map(6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(g.consumers.len() as i64);
        out.bulk(b"pending");
        out.int(g.pel.len() as i64);
        out.bulk(b"last-delivered-id");
        reply_id(out, g.last_id);
        out.bulk(b"entries-read");
        entries_read(out, g);
        out.bulk(b"lag");
        opt_int(out, s.lag(g));
    }
    Ok(())
}

fn consumers(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group) = (argv[2], argv[3]);
    need(cx, key)?;
    let now = cx.now();
    let s = read_stream(cx, key)?.expect("present");
    let Some(g) = s.group(group) else {
        let mut m = b"NOGROUP No such consumer group '".to_vec();
        m.extend_from_slice(group);
        m.extend_from_slice(b"' for key name '");
        m.extend_from_slice(key);
        m.push(b'\'');
        return Err(CmdError::Bytes(m));
    };
    out.array(g.consumers.len());
    for (name, c) in &g.consumers {
        out.map(3);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"pending");
        out.int(c.pel.len() as i64);
        out.bulk(b"idle");
        out.int((now - c.seen_time).max(0));
    }
    Ok(())
}

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    reply_help(
        out,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}
