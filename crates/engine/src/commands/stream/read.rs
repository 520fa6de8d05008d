//! XREAD and XREADGROUP (Redis's `xreadCommand`), blocking through
//! [`crate::core::blocking`]: a reader that finds nothing parks on its keys with
//! its `$` ids resolved (and, without COUNT, Redis's blocked count of
//! 1000), and is run again as a served waiter when a key changes.
//!
//! A served run follows Redis's `serveClientsBlockedOnStreamKey`: a key is
//! served when the stream's last id (not its last live entry) is past the
//! waited id, and a reader whose group was destroyed gets `-NOGROUP`.

use std::borrow::Cow;

use resp::{Proto, ReplyBuf};
use store::types::stream::{Nack, Stream, StreamId, ENTRIES_READ_INVALID};
use store::{Kind, Value};

use crate::core::blocking;
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, KeyList, Lock};

use super::{parse_strict_id, reply_entry, reply_id};

/// Without COUNT, a served blocked reader gets at most this many entries.
const BLOCKED_DEFAULT_COUNT: i64 = 1000;

pub const XREAD: Command = Command::redis("XREAD", xread).lock(Lock::Custom { find: xread_keys });

pub const XREADGROUP: Command =
    Command::redis("XREADGROUP", xreadgroup).lock(Lock::Custom { find: xread_keys });

/// Keys of XREAD/XREADGROUP: the first half of what follows STREAMS,
/// found by walking the options as the handler does (a group or consumer
/// named `STREAMS` is not the keyword).
fn xread_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i];
        if (eq_ic(o, "BLOCK") || eq_ic(o, "COUNT")) && more > 0 {
            i += 2;
        } else if eq_ic(o, "GROUP") && more >= 2 {
            i += 3;
        } else if eq_ic(o, "STREAMS") && more > 0 {
            let start = i + 1;
            let n = (argv.len() - start) / 2;
            for k in &argv[start..start + n] {
                keys.push((db, k));
            }
            return;
        } else {
            i += 1;
        }
    }
}

fn xread(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    read_with(cx, args, false, out)
}

fn xreadgroup(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    read_with(cx, args, true, out)
}

fn msg(m: &'static str) -> CmdError {
    CmdError::Msg(Cow::Borrowed(m))
}

/// An id to read after: `>` is the group's last delivered id.
#[derive(Clone, Copy, PartialEq)]
enum After {
    Id(StreamId),
    New,
}

fn read_with(cx: &mut Ctx, args: &mut Args, grouped: bool, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let mut timeout: Option<i64> = None;
    let mut count: i64 = 0;
    let mut streams_arg = 0;
    let mut n = 0;
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut noack = false;
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i];
        if eq_ic(o, "BLOCK") && more > 0 {
            // Refused from scripts before the timeout is read, naming the
            // command as it was called (Redis's xreadCommand).
            if cx.caller.in_script() {
                let mut m = b"ERR ".to_vec();
                m.extend_from_slice(argv[0]);
                m.extend_from_slice(b" command is not allowed with BLOCK option from scripts");
                return Err(CmdError::Bytes(m));
            }
            i += 1;
            let t = parse_i64(argv[i]).map_err(|_| CmdError::TimeoutNotInteger)?;
            if t < 0 {
                return Err(msg("ERR timeout is negative"));
            }
            timeout = Some(t);
        } else if eq_ic(o, "COUNT") && more > 0 {
            i += 1;
            count = parse_i64(argv[i])?.max(0);
        } else if eq_ic(o, "STREAMS") && more > 0 {
            streams_arg = i + 1;
            let c = argv.len() - streams_arg;
            if !c.is_multiple_of(2) {
                // 7.0.15 says XREAD and '$' for XREADGROUP too.
                return Err(msg("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            n = c / 2;
            break;
        } else if eq_ic(o, "GROUP") && more >= 2 {
            if !grouped {
                return Err(msg(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((argv[i + 1], argv[i + 2]));
            i += 2;
        } else if eq_ic(o, "NOACK") {
            if !grouped {
                return Err(msg(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if streams_arg == 0 {
        return Err(CmdError::Syntax);
    }
    if grouped && group.is_none() {
        return Err(msg("ERR Missing GROUP option for XREADGROUP"));
    }
    let keys = &argv[streams_arg..streams_arg + n];
    let id_args = &argv[streams_arg + n..];

    // Resolve every id (and the groups) before serving anything.
    let served = cx.caller.serves_waiter();
    let mut ids: Vec<After> = Vec::with_capacity(n);
    let only = cx.waited_keys(keys).first().copied().filter(|_| served);
    for (key, a) in keys.iter().zip(id_args) {
        let s = match super::read_stream(cx, key) {
            Ok(None) | Err(CmdError::WrongType) if served && grouped && only == Some(*key) => {
                return Err(msg("UNBLOCKED the stream key no longer exists"));
            }
            r => r?,
        };
        // Served from another key, as Redis 7.0 serves a waiter from the
        // key that was signalled: a group gone with this key (a FLUSHDB
        // that signalled that one first) is not this run's error.
        let other = only.is_some_and(|k| k != *key);
        if let Some((g, _)) = group.filter(|_| !other) {
            if s.and_then(|s| s.group(g)).is_none() {
                if served {
                    return Err(msg(
                        "NOGROUP the consumer group this client was blocked on no longer exists",
                    ));
                }
                let mut m = b"NOGROUP No such key '".to_vec();
                m.extend_from_slice(key);
                m.extend_from_slice(b"' or consumer group '");
                m.extend_from_slice(g);
                m.extend_from_slice(b"' in XREADGROUP with GROUP option");
                return Err(CmdError::Bytes(m));
            }
        }
        if *a == b"$" {
            if grouped {
                return Err(msg("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            ids.push(After::Id(s.map_or(StreamId::MIN, |s| s.last_id)));
        } else if *a == b">" {
            if !grouped {
                return Err(msg("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            ids.push(After::New);
        } else {
            ids.push(After::Id(parse_strict_id(a)?));
        }
    }

    // What a group read did goes out as XCLAIM / XGROUP, never as itself.
    if grouped {
        cx.no_propagate();
    }

    // Serve what can be served now (only the ready key when served).
    let mut body = out.side();
    let mut served_keys = 0usize;
    for (j, key) in keys.iter().enumerate() {
        if only.is_some_and(|k| k != *key) {
            continue;
        }
        let n = match group {
            None => read_plain(cx, key, ids[j], count, served, &mut body)?,
            Some((g, c)) => {
                let how = Grouped { group: g, consumer: c, noack, after: ids[j], count };
                read_group(cx, key, how, served, &mut body)?
            }
        };
        served_keys += usize::from(n);
    }
    if served_keys > 0 {
        match out.proto {
            Proto::Resp2 => out.array(served_keys),
            Proto::Resp3 => out.map(served_keys),
        }
        out.append(&mut body);
        return Ok(());
    }
    if let Some(t) = timeout {
        if cx.may_block() {
            let wait = waiting_argv(argv, streams_arg, n, count, &ids);
            let refs: Vec<&[u8]> = wait.iter().map(|a| &a[..]).collect();
            // A group reader also ends when its key goes (with an error).
            blocking::block_with(cx, &refs, keys, Kind::Stream, grouped, t);
            return Ok(());
        }
    }
    out.null_array();
    Ok(())
}

/// The command a blocked reader runs again: `$` resolved to the id it
/// stood for, and COUNT set to what Redis serves a blocked reader.
fn waiting_argv(
    argv: &[&[u8]],
    streams_arg: usize,
    n: usize,
    count: i64,
    ids: &[After],
) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![argv[0].to_vec()];
    let c = if count > 0 { count } else { BLOCKED_DEFAULT_COUNT };
    v.push(b"COUNT".to_vec());
    v.push(c.to_string().into_bytes());
    // Options other than COUNT (BLOCK, GROUP, NOACK) as given.
    let mut i = 1;
    while i < streams_arg - 1 {
        let a = argv[i];
        if eq_ic(a, "COUNT") {
            i += 2;
            continue;
        }
        if eq_ic(a, "BLOCK") {
            v.push(a.to_vec());
            v.push(argv[i + 1].to_vec());
            i += 2;
            continue;
        }
        if eq_ic(a, "GROUP") {
            v.extend([a.to_vec(), argv[i + 1].to_vec(), argv[i + 2].to_vec()]);
            i += 3;
            continue;
        }
        v.push(a.to_vec());
        i += 1;
    }
    v.push(b"STREAMS".to_vec());
    v.extend(argv[streams_arg..streams_arg + n].iter().map(|k| k.to_vec()));
    for id in ids {
        v.push(match id {
            After::Id(id) => id.to_vec(),
            After::New => b">".to_vec(),
        });
    }
    v
}

/// XREAD of one key: whether it was served (its `[key, entries]` written).
fn read_plain(
    cx: &mut Ctx,
    key: &[u8],
    after: After,
    count: i64,
    served: bool,
    out: &mut ReplyBuf,
) -> Result<bool, CmdError> {
    let After::Id(gt) = after else { return Ok(false) };
    let Some(s) = super::read_stream(cx, key)? else { return Ok(false) };
    if s.is_empty() && !served {
        return Ok(false);
    }
    let top = if served { s.last_id } else { s.edge_id(true).unwrap_or(StreamId::MIN) };
    if top <= gt {
        return Ok(false);
    }
    let start = gt.incr().unwrap_or(StreamId::MAX);
    let limit = if count > 0 { count as usize } else { usize::MAX };
    let mut found = Vec::new();
    s.range(start, StreamId::MAX, false, |e| {
        found.push(e);
        found.len() < limit
    });
    key_header(out, key);
    out.array(found.len());
    for e in &found {
        reply_entry(out, e);
    }
    Ok(true)
}

fn key_header(out: &mut ReplyBuf, key: &[u8]) {
    if out.proto == Proto::Resp2 {
        out.array(2);
    }
    out.bulk(key);
}

struct Grouped<'a> {
    group: &'a [u8],
    consumer: &'a [u8],
    noack: bool,
    after: After,
    count: i64,
}

/// XREADGROUP of one key (whose group exists).
fn read_group(
    cx: &mut Ctx,
    key: &[u8],
    how: Grouped,
    served: bool,
    out: &mut ReplyBuf,
) -> Result<bool, CmdError> {
    let now = cx.now();
    let propagating = cx.propagating();
    let Some(Value::Stream(s)) = cx.lookup_write(key).map(|e| &mut e.value) else {
        return Ok(false);
    };
    let s: &mut Stream = s;
    let limit = if how.count > 0 { how.count as usize } else { usize::MAX };
    let mut props: Vec<Vec<Vec<u8>>> = Vec::new();
    let g = s.group(how.group).expect("checked");
    let group_last = g.last_id;
    let (history, gt) = match how.after {
        After::Id(id) => (true, id),
        After::New => {
            let top = if served { s.last_id } else { s.edge_id(true).unwrap_or(StreamId::MIN) };
            if s.is_empty() && !served || top <= group_last {
                // Nothing new: Redis creates the consumer only when serving.
                return Ok(false);
            }
            (false, group_last)
        }
    };
    let start = gt.incr().unwrap_or(StreamId::MAX);
    let g = s.group_mut(how.group).expect("checked");
    let created = g.ensure_consumer(how.consumer, now);
    g.consumers.get_mut(how.consumer).expect("there").seen_time = now;
    key_header(out, key);
    let mut dirty = u64::from(created);
    if history {
        // The consumer's own pending entries from `start`.
        let pel: Vec<StreamId> = {
            let g = s.group(how.group).expect("checked");
            let c = &g.consumers[how.consumer];
            c.pel.range(start..).take(limit).copied().collect()
        };
        out.array(pel.len());
        let mut delivered = Vec::new();
        for id in pel {
            match s.get(id) {
                Some(e) => {
                    reply_entry(out, &e);
                    delivered.push(id);
                }
                None => {
                    out.array(2);
                    reply_id(out, id);
                    out.null_array();
                }
            }
        }
        let g = s.group_mut(how.group).expect("checked");
        for id in delivered {
            if let Some(n) = g.pel.get_mut(&id) {
                n.delivery_time = now;
                n.delivery_count += 1;
            }
        }
    } else {
        let mut found = Vec::new();
        s.range(start, StreamId::MAX, false, |e| {
            found.push(e.id);
            found.len() < limit
        });
        out.array(found.len());
        for id in &found {
            reply_entry(out, &s.get(*id).expect("just seen"));
        }
        let mut propagate_last = false;
        for id in found {
            let (tomb, est) = (s.range_has_tombstones(id, StreamId::MAX), s.estimate_distance(id));
            let added = s.entries_added;
            let g = s.group_mut(how.group).expect("checked");
            if id > g.last_id {
                if g.entries_read != ENTRIES_READ_INVALID && !tomb {
                    g.entries_read += 1;
                } else if added > 0 {
                    g.entries_read = est.map_or(ENTRIES_READ_INVALID, |v| v as i64);
                }
                g.last_id = id;
                propagate_last |= how.noack;
            }
            if !how.noack {
                if let Some(old) = g.pel.get(&id).map(|n| n.consumer.clone()) {
                    if let Some(c) = g.consumers.get_mut(&old) {
                        c.pel.remove(&id);
                    }
                }
                g.pel.insert(
                    id,
                    Nack { delivery_time: now, delivery_count: 1, consumer: how.consumer.into() },
                );
                g.consumers.get_mut(how.consumer).expect("there").pel.insert(id);
                if propagating {
                    props.push(xclaim_argv(key, how.group, how.consumer, id, now, 1, g.last_id));
                }
            }
        }
        if propagate_last && propagating {
            let g = s.group(how.group).expect("checked");
            props.push(setid_argv(key, how.group, g.last_id, g.entries_read));
        }
        dirty += 1;
    }
    if history {
        dirty += 1;
    }
    if created {
        cx.changed_unwatched(key, Some((Class::STREAM, "xgroup-createconsumer")), 0, false);
        if how.noack && propagating {
            let argv: [&[u8]; 5] = [b"XGROUP", b"CREATECONSUMER", key, how.group, how.consumer];
            cx.also_propagate(&argv);
        }
    }
    // Serving a blocked reader dirties only by the consumer it creates
    // (Redis's serveClientsBlockedOnStreamKey has no dirty++ of its own).
    cx.changed_unwatched(key, None, if served { u64::from(created) } else { dirty }, false);
    for p in &props {
        let refs: Vec<&[u8]> = p.iter().map(|a| &a[..]).collect();
        cx.also_propagate(&refs);
    }
    Ok(true)
}

/// Redis's `streamPropagateXCLAIM`.
pub(crate) fn xclaim_argv(
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    id: StreamId,
    time: i64,
    count: u64,
    last: StreamId,
) -> Vec<Vec<u8>> {
    vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        consumer.to_vec(),
        b"0".to_vec(),
        id.to_vec(),
        b"TIME".to_vec(),
        time.to_string().into_bytes(),
        b"RETRYCOUNT".to_vec(),
        count.to_string().into_bytes(),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        last.to_vec(),
    ]
}

/// Redis's `streamPropagateGroupID`.
pub(crate) fn setid_argv(key: &[u8], group: &[u8], last: StreamId, read: i64) -> Vec<Vec<u8>> {
    vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group.to_vec(),
        last.to_vec(),
        b"ENTRIESREAD".to_vec(),
        read.to_string().into_bytes(),
    ]
}
