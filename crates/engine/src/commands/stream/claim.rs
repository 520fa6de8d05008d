//! XCLAIM and XAUTOCLAIM: pending entries change owner. As in Redis 7.0
//! each claim (and each pending entry dropped because its entry was
//! deleted) is propagated as an idempotent `XCLAIM … FORCE JUSTID`, never
//! the command itself.

use std::borrow::Cow;

use resp::ReplyBuf;
use store::types::stream::{Group, Nack, Stream, StreamId};
use store::Value;

use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

use super::read::{setid_argv, xclaim_argv};
use super::{parse_id_with, parse_interval_id, reply_entry, reply_id, IdRules};

pub const XCLAIM: Command = Command::redis("XCLAIM", xclaim);

pub const XAUTOCLAIM: Command = Command::redis("XAUTOCLAIM", xautoclaim);

fn msg(m: &'static str) -> CmdError {
    CmdError::Msg(Cow::Borrowed(m))
}

fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    let mut m = b"NOGROUP No such key '".to_vec();
    m.extend_from_slice(key);
    m.extend_from_slice(b"' or consumer group '");
    m.extend_from_slice(group);
    m.push(b'\'');
    CmdError::Bytes(m)
}

fn int_or(a: &[u8], m: &'static str) -> Result<i64, CmdError> {
    resp::parse_i64(a).ok_or_else(|| CmdError::Msg(Cow::Owned(format!("ERR {m}"))))
}

/// The stream at `key` with group `group` (NOGROUP otherwise).
fn with_group<'c>(cx: &'c mut Ctx, key: &[u8], group: &[u8]) -> Result<&'c mut Stream, CmdError> {
    match cx.lookup_write(key).map(|e| &mut e.value) {
        Some(Value::Stream(s)) if s.group(group).is_some() => Ok(s),
        Some(Value::Stream(_)) | None => Err(no_group(key, group)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// Gives pending entry `id` to `consumer` (creating the consumer).
fn take(g: &mut Group, id: StreamId, consumer: &[u8], now: i64) -> bool {
    let created = g.ensure_consumer(consumer, now);
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.seen_time = now;
    }
    let old = g.pel.get(&id).map(|n| n.consumer.clone());
    if let Some(old) = old {
        if *old != *consumer {
            if let Some(c) = g.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
        }
    }
    if let Some(n) = g.pel.get_mut(&id) {
        n.consumer = consumer.into();
    }
    g.consumers.get_mut(consumer).expect("there").pel.insert(id);
    created
}

fn drop_pending(g: &mut Group, id: StreamId) -> Option<Nack> {
    let n = g.pel.remove(&id)?;
    if let Some(c) = g.consumers.get_mut(&n.consumer) {
        c.pel.remove(&id);
    }
    Some(n)
}

/// A pending entry whose stream entry was deleted: it leaves the PEL and
/// goes out to replicas as an XCLAIM that forgets it (Redis's
/// `streamPropagateXCLAIM` of a deleted entry). Whether it was pending.
fn forget_deleted(
    g: &mut Group,
    key: &[u8],
    group: &[u8],
    id: StreamId,
    props: &mut Vec<Vec<Vec<u8>>>,
) -> bool {
    let Some(n) = drop_pending(g, id) else { return false };
    props.push(xclaim_argv(
        key,
        group,
        &n.consumer,
        id,
        n.delivery_time,
        n.delivery_count,
        g.last_id,
    ));
    true
}

fn xclaim(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group, consumer) = (argv[1], argv[2], argv[3]);
    with_group(cx, key, group)?;
    let min_idle = int_or(argv[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let strict = IdRules { missing_seq: 0, strict: true, partial: false };
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argv.len() {
        match parse_id_with(argv[j], strict) {
            Ok((id, _)) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = cx.now();
    let (mut force, mut justid) = (false, false);
    let mut retry: Option<i64> = None;
    let mut time: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let opt = argv[j];
        if eq_ic(opt, "FORCE") {
            force = true;
        } else if eq_ic(opt, "JUSTID") {
            justid = true;
        } else if eq_ic(opt, "IDLE") && more > 0 {
            j += 1;
            time = Some(now - int_or(argv[j], "Invalid IDLE option argument for XCLAIM")?);
        } else if eq_ic(opt, "TIME") && more > 0 {
            j += 1;
            time = Some(int_or(argv[j], "Invalid TIME option argument for XCLAIM")?);
        } else if eq_ic(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            retry = Some(int_or(argv[j], "Invalid RETRYCOUNT option argument for XCLAIM")?);
        } else if eq_ic(opt, "LASTID") && more > 0 {
            j += 1;
            last_id = super::parse_strict_id(argv[j])?;
        } else {
            let mut m = b"ERR Unrecognized XCLAIM option '".to_vec();
            m.extend_from_slice(opt.split(|&c| c == 0).next().unwrap_or(b""));
            m.push(b'\'');
            return Err(CmdError::Bytes(m));
        }
        j += 1;
    }
    let time = match time {
        Some(t) if (0..=now).contains(&t) => t,
        _ => now,
    };
    let propagating = cx.propagating();
    let s = with_group(cx, key, group)?;
    let mut props: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut propagate_last = false;
    let mut dirty = 0u64;
    let mut created = false;
    {
        let g = s.group_mut(group).expect("checked");
        if last_id > g.last_id {
            g.last_id = last_id;
            propagate_last = true;
        }
    }
    let mut claimed: Vec<(StreamId, bool)> = Vec::new();
    for id in ids {
        let exists = s.get(id).is_some();
        let g = s.group_mut(group).expect("checked");
        if !exists {
            if forget_deleted(g, key, group, id, &mut props) {
                propagate_last = false;
                dirty += 1;
            }
            continue;
        }
        let had = g.pel.contains_key(&id);
        if !had {
            if !force {
                continue;
            }
            g.pel.insert(
                id,
                Nack { delivery_time: now, delivery_count: 1, consumer: Box::from(&b""[..]) },
            );
        } else if min_idle > 0 && now - g.pel[&id].delivery_time < min_idle {
            continue;
        }
        created |= take(g, id, consumer, now);
        let n = g.pel.get_mut(&id).expect("there");
        n.delivery_time = time;
        match retry {
            Some(r) if r >= 0 => n.delivery_count = r as u64,
            _ if !justid => n.delivery_count += 1,
            _ => {}
        }
        let (t, c) = (n.delivery_time, n.delivery_count);
        props.push(xclaim_argv(key, group, consumer, id, t, c, g.last_id));
        propagate_last = false;
        dirty += 1;
        claimed.push((id, true));
    }
    if propagate_last {
        let g = s.group(group).expect("checked");
        props.push(setid_argv(key, group, g.last_id, g.entries_read));
        dirty += 1;
    }
    out.array(claimed.len());
    for (id, _) in &claimed {
        if justid {
            reply_id(out, *id);
        } else {
            match s.get(*id) {
                Some(e) => reply_entry(out, &e),
                None => out.null(),
            }
        }
    }
    finish(cx, key, created, dirty, &props, propagating);
    Ok(())
}

/// Reports what a claim did: the consumer it created, its dirty count,
/// and the XCLAIMs that stand for it.
fn finish(
    cx: &mut Ctx,
    key: &[u8],
    created: bool,
    dirty: u64,
    props: &[Vec<Vec<u8>>],
    propagating: bool,
) {
    cx.no_propagate();
    if created {
        cx.changed_unwatched(key, Some((Class::STREAM, "xgroup-createconsumer")), 1, false);
    }
    cx.changed_unwatched(key, None, dirty, false);
    if propagating {
        for p in props {
            let refs: Vec<&[u8]> = p.iter().map(|a| &a[..]).collect();
            cx.also_propagate(&refs);
        }
    }
}

fn xautoclaim(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (key, group, consumer) = (argv[1], argv[2], argv[3]);
    let min_idle = int_or(argv[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let (mut start, ex) = parse_interval_id(argv[5], 0)?;
    if ex {
        start = start.incr().ok_or_else(|| msg("ERR invalid start ID for the interval"))?;
    }
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if eq_ic(argv[j], "COUNT") && more > 0 {
            let max = i64::MAX / 16;
            count = match resp::parse_i64(argv[j + 1]) {
                Some(n) if (1..=max).contains(&n) => n,
                _ => return Err(msg("ERR COUNT must be > 0")),
            };
            j += 1;
        } else if eq_ic(argv[j], "JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = cx.now();
    let propagating = cx.propagating();
    let s = with_group(cx, key, group)?;
    let pel: Vec<StreamId> =
        s.group(group).expect("checked").pel.range(start..).map(|(id, _)| *id).collect();
    let mut attempts = count.saturating_mul(10);
    let mut props = Vec::new();
    let mut deleted = Vec::new();
    let mut claimed = Vec::new();
    let mut dirty = 0u64;
    let mut created = false;
    let mut i = 0;
    let mut eof = false;
    loop {
        if attempts == 0 {
            break;
        }
        attempts -= 1;
        if count == 0 {
            break;
        }
        let Some(&id) = pel.get(i) else {
            eof = true;
            break;
        };
        i += 1;
        let exists = s.get(id).is_some();
        let g = s.group_mut(group).expect("checked");
        if !exists {
            forget_deleted(g, key, group, id, &mut props);
            dirty += 1;
            deleted.push(id);
            count -= 1;
            continue;
        }
        if min_idle > 0 && now - g.pel[&id].delivery_time < min_idle {
            continue;
        }
        created |= take(g, id, consumer, now);
        let n = g.pel.get_mut(&id).expect("there");
        n.delivery_time = now;
        if !justid {
            n.delivery_count += 1;
        }
        let (t, c) = (n.delivery_time, n.delivery_count);
        props.push(xclaim_argv(key, group, consumer, id, t, c, g.last_id));
        dirty += 1;
        claimed.push(id);
        count -= 1;
    }
    let cursor = if eof { StreamId::MIN } else { pel.get(i).copied().unwrap_or(StreamId::MIN) };
    out.array(3);
    reply_id(out, cursor);
    out.array(claimed.len());
    for id in &claimed {
        if justid {
            reply_id(out, *id);
        } else {
            reply_entry(out, &s.get(*id).expect("exists"));
        }
    }
    out.array(deleted.len());
    for id in &deleted {
        reply_id(out, *id);
    }
    finish(cx, key, created, dirty, &props, propagating);
    Ok(())
}
