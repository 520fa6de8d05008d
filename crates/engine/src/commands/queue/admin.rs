//! Looking at jobs and queues: SHOW, QLEN, QPEEK, QSTAT, QSCAN, JSCAN; and
//! the queue settings: PAUSE (Disque's) and QSET (Sluice's rate limit).

use queue::{Ext, JobId, JobRef, Pause, State};
use resp::ReplyBuf;

use super::{jobs, ready, write_job};
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::error::{CmdError, CmdResult, JobError};
use crate::core::spec::{Command, Lock};

pub(super) const SHOW: Command = Command::sluice("SHOW", show).lock(Lock::Jobs);

fn show(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let id = JobId::parse(args.req()?).ok_or(JobError::BadId)?;
    let now = cx.now();
    let js = jobs(cx);
    match js.get(&id) {
        Some(j) => write_show(out, &j, js.ext(&id), js.wake_time(&id), &cx.shared.run_id, now),
        None => out.null(),
    }
    Ok(())
}

/// SHOW's 30-element array (also JSCAN REPLY ALL's items), and after it
/// the pairs of the job's extensions, if it has any (Disque's fields
/// stay where Disque's clients expect them).
fn write_show(
    out: &mut ReplyBuf,
    j: &JobRef,
    ext: Option<&Ext>,
    awake: Option<i64>,
    node: &str,
    now: i64,
) {
    let ext = ext.filter(|e| !e.is_empty());
    let extra = ext.map_or(0, |e| {
        [
            e.backoff.is_some(),
            e.dead_letter.is_some(),
            e.dead_from.is_some(),
            e.unique.is_some(),
            e.every.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count()
    });
    out.array(30 + 2 * extra);
    out.bulk(b"id");
    out.bulk(&j.id.0);
    out.bulk(b"queue");
    out.bulk(&j.queue);
    out.bulk(b"state");
    out.bulk(j.state.name().as_bytes());
    out.bulk(b"repl");
    out.int(i64::from(j.repl));
    out.bulk(b"ttl");
    out.int(((j.etime - now) / 1000).max(0));
    out.bulk(b"ctime");
    out.int(j.ctime as i64);
    out.bulk(b"delay");
    out.int(i64::from(j.delay));
    out.bulk(b"retry");
    out.int(i64::from(j.retry));
    out.bulk(b"nacks");
    out.int(i64::from(j.nacks));
    out.bulk(b"additional-deliveries");
    out.int(i64::from(j.deliveries));
    // The only node that may hold a copy is this one.
    out.bulk(b"nodes-delivered");
    out.array(1);
    out.bulk(node.as_bytes());
    out.bulk(b"nodes-confirmed");
    out.array(0);
    out.bulk(b"next-requeue-within");
    if j.qtime == 0 {
        out.null();
    } else {
        out.int(j.qtime - now);
    }
    out.bulk(b"next-awake-within");
    match awake {
        Some(t) => out.int(t - now),
        None => out.null(),
    }
    out.bulk(b"body");
    out.bulk(&j.body);
    let Some(e) = ext else { return };
    if let Some(b) = e.backoff {
        out.bulk(b"backoff");
        out.array(2);
        out.int(b.base_ms);
        out.int(b.max_ms);
    }
    if let Some((q, max)) = &e.dead_letter {
        out.bulk(b"dead-letter");
        out.array(2);
        out.bulk(q);
        out.int(i64::from(*max));
    }
    if let Some(q) = &e.dead_from {
        out.bulk(b"dead-lettered-from");
        out.bulk(q);
    }
    if let Some(k) = &e.unique {
        out.bulk(b"unique");
        out.bulk(k);
    }
    if let Some(every) = e.every {
        out.bulk(b"every");
        out.int(every.period_ms / 1000);
    }
}

pub(super) const QLEN: Command = Command::sluice("QLEN", qlen).lock(Lock::Jobs);

fn qlen(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let name = args.req()?;
    let n = jobs(cx).queue(name).map_or(0, |q| q.len());
    out.int(n as i64);
    Ok(())
}

pub(super) const QPEEK: Command = Command::sluice("QPEEK", qpeek).lock(Lock::Jobs);

fn qpeek(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let name = args.req()?;
    let count = parse_i64(args.req()?)?;
    let js = jobs(cx);
    let Some(q) = js.queue(name) else {
        out.array(0);
        return Ok(());
    };
    let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX).min(q.len());
    out.array(n);
    let ids: Box<dyn Iterator<Item = JobId>> =
        if count >= 0 { Box::new(js.queued_ids(q)) } else { Box::new(js.queued_ids(q).rev()) };
    for id in ids.take(n) {
        write_job(out, &js.get(&id).expect("queued jobs are registered"), false);
    }
    Ok(())
}

pub(super) const QSTAT: Command = Command::sluice("QSTAT", qstat).lock(Lock::Jobs);

fn qstat(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let name = args.req()?;
    let now = cx.now();
    let blocked = waiting(cx, name);
    let js = jobs(cx);
    let Some(q) = js.queue(name) else {
        out.null_array();
        return Ok(());
    };
    // Disque's 20 elements, and the rate limit when one is set.
    out.array(if q.rate > 0 { 22 } else { 20 });
    out.bulk(b"name");
    out.bulk(name);
    out.bulk(b"len");
    out.int(q.len() as i64);
    out.bulk(b"age");
    out.int((now - q.ctime) / 1000);
    out.bulk(b"idle");
    out.int((now - q.atime) / 1000);
    out.bulk(b"blocked");
    out.int(blocked as i64);
    // Federation (other nodes sending jobs) does not exist on one node.
    out.bulk(b"import-from");
    out.array(0);
    out.bulk(b"import-rate");
    out.int(0);
    out.bulk(b"jobs-in");
    out.int(q.jobs_in as i64);
    out.bulk(b"jobs-out");
    out.int(q.jobs_out as i64);
    out.bulk(b"pause");
    out.bulk(q.pause.name().as_bytes());
    if q.rate > 0 {
        out.bulk(b"rate");
        out.int(i64::from(q.rate));
    }
    Ok(())
}

/// Clients waiting on queue `name` (its stripe is held).
fn waiting(cx: &mut Ctx, name: &[u8]) -> usize {
    cx.queue_waiters(name)
}

pub(super) const QSCAN: Command = Command::sluice("QSCAN", qscan).lock(Lock::Jobs);

/// QSCAN/JSCAN's common options: the cursor (any word that is no
/// option), COUNT and BUSYLOOP.
struct Scan {
    cursor: Option<u64>,
    count: usize,
    all: bool,
}

impl Scan {
    fn new() -> Scan {
        Scan { cursor: None, count: 100, all: false }
    }

    /// Takes a common option or the cursor; false when `a` is neither.
    fn take(&mut self, a: &[u8], args: &mut Args) -> Result<(), CmdError> {
        if eq_ic(a, "COUNT") && !args.is_empty() {
            let n = parse_i64(args.req()?)?;
            self.count = usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        } else if eq_ic(a, "BUSYLOOP") {
            self.all = true;
        } else if self.cursor.is_some() {
            return Err(CmdError::Syntax);
        } else {
            let c = std::str::from_utf8(a).ok().and_then(|s| s.parse::<u64>().ok());
            self.cursor = Some(c.ok_or(JobError::Cursor)?);
        }
        Ok(())
    }
}

fn qscan(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut s = Scan::new();
    let (mut minlen, mut maxlen, mut rate) = (None, None, None);
    while let Some(a) = args.next() {
        let has_value = !args.is_empty();
        if eq_ic(a, "MINLEN") && has_value {
            minlen = Some(parse_i64(args.req()?)?);
        } else if eq_ic(a, "MAXLEN") && has_value {
            maxlen = Some(parse_i64(args.req()?)?);
        } else if eq_ic(a, "IMPORTRATE") && has_value {
            rate = Some(parse_i64(args.req()?)?);
        } else {
            s.take(a, args)?;
        }
    }
    let js = jobs(cx);
    let (next, names) = js.scan_queues(s.cursor.unwrap_or(0), s.count, s.all, |q| {
        let len = q.len() as i64;
        // No federation: every queue's import rate is 0.
        minlen.is_none_or(|m| len >= m)
            && maxlen.is_none_or(|m| len <= m)
            && rate.is_none_or(|r| r <= 0)
    });
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(names.len());
    for n in &names {
        out.bulk(n);
    }
    Ok(())
}

pub(super) const JSCAN: Command = Command::sluice("JSCAN", jscan).lock(Lock::Jobs);

fn jscan(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut s = Scan::new();
    let mut queue: Option<&[u8]> = None;
    let mut states: Vec<State> = Vec::new();
    let mut reply_all = false;
    while let Some(a) = args.next() {
        let has_value = !args.is_empty();
        if eq_ic(a, "QUEUE") && has_value {
            queue = Some(args.req()?);
        } else if eq_ic(a, "STATE") && has_value {
            states.push(State::from_name(args.req()?).ok_or(JobError::State)?);
        } else if eq_ic(a, "REPLY") && has_value {
            let r = args.req()?;
            reply_all = if eq_ic(r, "ALL") {
                true
            } else if eq_ic(r, "ID") {
                false
            } else {
                return Err(JobError::ReplyType.into());
            };
        } else {
            s.take(a, args)?;
        }
    }
    let now = cx.now();
    let js = jobs(cx);
    let (next, ids) = js.scan_jobs(s.cursor.unwrap_or(0), s.count, s.all, |j| {
        queue.is_none_or(|q| *j.queue == *q) && (states.is_empty() || states.contains(&j.state))
    });
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(ids.len());
    for id in &ids {
        if reply_all {
            let j = js.get(id).expect("scanned");
            write_show(out, &j, js.ext(id), js.wake_time(id), &cx.shared.run_id, now);
        } else {
            out.simple(&id.0);
        }
    }
    Ok(())
}

pub(super) const PAUSE: Command = Command::sluice("PAUSE", pause).lock(Lock::Jobs);

/// PAUSE: `in`, `out`, `all` and `none` accumulate into the new state,
/// which replaces the old one if any of them is given; `state` only
/// reports; `bcast` has no other node to tell.
fn pause(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let name = args.req()?;
    let mut set: Option<Pause> = None;
    for a in args.rest() {
        let add = if eq_ic(a, "IN") {
            Pause::IN
        } else if eq_ic(a, "OUT") {
            Pause::OUT
        } else if eq_ic(a, "ALL") {
            Pause::ALL
        } else if eq_ic(a, "NONE") {
            Pause::NONE
        } else if eq_ic(a, "STATE") || eq_ic(a, "BCAST") {
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let acc = set.unwrap_or(Pause::NONE);
        set = Some(if add == Pause::NONE { Pause::NONE } else { Pause(acc.0 | add.0) });
    }
    let now = cx.now();
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let before = js.queue(name).map_or(Pause::NONE, |q| q.pause);
    let after = js.set_pause(name, set, now);
    drop(js);
    if after != before {
        cx.dirty(1);
        if before.has(Pause::OUT) && !after.has(Pause::OUT) {
            // Clients waiting on the queue are served now.
            ready(cx, name);
        }
    }
    out.simple(after.name().as_bytes());
    Ok(())
}

pub(super) const QSET: Command = Command::sluice("QSET", qset).lock(Lock::Jobs);

/// `QSET queue RATE n` (Sluice's): at most `n` deliveries a second from
/// the queue, 0 for no limit. Replies OK; propagated as itself when the
/// setting changes (snapshots carry it as the queue's record). A queue
/// with a limit is kept while idle, as a paused one is.
fn qset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let name = args.req()?;
    let mut rate = None;
    while let Some(a) = args.next() {
        if eq_ic(a, "RATE") && !args.is_empty() {
            let n = resp::parse_i64(args.req()?).and_then(|n| u32::try_from(n).ok());
            rate = Some(n.ok_or(JobError::Rate)?);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(rate) = rate else { return Err(CmdError::Syntax) };
    let now = cx.now();
    let shared = cx.shared;
    let before = shared.jobs.lock().set_rate(name, rate, now);
    if before != rate {
        cx.dirty(1);
        if rate == 0 || rate > before {
            // More may be delivered now: the queue's waiters are tried.
            ready(cx, name);
        }
    }
    out.ok();
    Ok(())
}
