//! The job queue's commands (Disque's, `docs/jobs.md`): ADDJOB
//! and GETJOB here, acknowledgements and state changes in [`ack`], the
//! inspection commands and PAUSE in [`admin`], the tick, snapshots and
//! INFO in [`tick`].
//!
//! Jobs live in `Shared::jobs` ([`queue::Jobs`]), beside the keyspace but
//! not in it. Every command here declares [`KeySpec::Jobs`], so the
//! dispatcher locks the job namespace's stripe (above every database's)
//! before the handler runs: EXEC, scripts and served waiters order job
//! commands with everything else, and the jobs mutex is only taken under
//! that stripe.
//!
//! Durability: every change to a job goes into the effects record as
//! `LOADJOB` (the whole job as a binary record, or the changed state of
//! several jobs) or `DELJOB` (see [`ack::LOADJOB`] and docs/jobs.md).

use parking_lot::MutexGuard;
use queue::{AddError, Backoff, Every, Ext, JobId, JobRef, Jobs, NewJob, MAX_SPAN_MS};
use resp::ReplyBuf;
use smallvec::SmallVec;

use crate::core::blocking;
use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::error::{CmdError, CmdResult, JobError};
use crate::core::spec::{Command, Lock};
use crate::subsystems::cluster::route;
use crate::subsystems::jobs::job_args;

mod ack;
mod admin;

pub const COMMANDS: &[Command] = &[
    ADDJOB,
    GETJOB,
    ack::ACKJOB,
    ack::FASTACK,
    ack::DELJOB,
    ack::NACK,
    ack::ENQUEUE,
    ack::DEQUEUE,
    ack::WORKING,
    ack::LOADJOB,
    ack::WAITJOB,
    admin::SHOW,
    admin::QLEN,
    admin::QPEEK,
    admin::QSTAT,
    admin::QSCAN,
    admin::JSCAN,
    admin::PAUSE,
    admin::QSET,
];

// ---- shared by the job commands ------------------------------------------

/// The jobs; only from a job command (the namespace's stripe is held).
fn jobs<'a>(cx: &Ctx<'a, '_>) -> MutexGuard<'a, Jobs> {
    cx.shared.jobs.lock()
}

/// Wakes the clients blocked on `queue` (a job was queued there).
fn ready(cx: &mut Ctx, queue: &[u8]) {
    cx.queue_ready(queue);
}

/// Parses every id first: one invalid id fails the command before
/// anything is done (spec §1.2).
fn parse_ids(args: &[&[u8]]) -> Result<SmallVec<[JobId; 8]>, CmdError> {
    args.iter().map(|a| JobId::parse(a).ok_or(CmdError::Job(JobError::BadId))).collect()
}

/// `[queue, id, body]`, or with counters
/// `[queue, id, body, "nacks", n, "additional-deliveries", n]`.
fn write_job(out: &mut ReplyBuf, j: &JobRef, counters: bool) {
    out.array(if counters { 7 } else { 3 });
    out.bulk(&j.queue);
    out.bulk(&j.id.0);
    out.bulk(&j.body);
    if counters {
        out.bulk(b"nacks");
        out.int(i64::from(j.nacks));
        out.bulk(b"additional-deliveries");
        out.int(i64::from(j.deliveries));
    }
}

/// Records a change of state of `changed` jobs: dirty, and propagated as
/// one `LOADJOB` of their states in place of the command (a job with
/// extensions as its whole record: dead-lettering moves it to another
/// queue, a periodic run changes its schedule).
fn propagate_states(cx: &mut Ctx, js: &Jobs, changed: &[JobId]) {
    if changed.is_empty() {
        return;
    }
    cx.dirty(changed.len() as u64);
    if cx.propagating() {
        let mut argv = vec![b"LOADJOB".to_vec()];
        for id in changed {
            job_args(js, id, &mut argv);
        }
        let refs: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
        cx.propagate_as(&refs);
    }
}

/// Parses a timeout in milliseconds (ADDJOB's, GETJOB's).
fn parse_timeout_ms(a: &[u8]) -> Result<i64, CmdError> {
    match resp::parse_i64(a) {
        None => Err(CmdError::TimeoutNotInteger),
        Some(t) if t < 0 => Err(JobError::TimeoutNegative.into()),
        Some(t) => Ok(t),
    }
}

// ---- ADDJOB ----------------------------------------------------------------

const ADDJOB: Command = Command::sluice("ADDJOB", addjob).lock(Lock::Jobs);

/// ADDJOB's options, parsed before anything is touched.
struct AddOpts {
    replicate: i64,
    delay: i64,
    retry: Option<i64>,
    ttl: i64,
    maxlen: i64,
    /// Sluice's extensions: BACKOFF, DEADLETTER, UNIQUE, EVERY (seconds).
    ext: Ext,
    every: i64,
    /// `ASYNC`: reply at once, the copies follow through the stream.
    asynchronous: bool,
}

/// A span in milliseconds within (0, a year].
fn span_ms(a: &[u8]) -> Option<i64> {
    resp::parse_i64(a).filter(|v| (1..=MAX_SPAN_MS).contains(v))
}

fn parse_add(args: &[&[u8]]) -> Result<AddOpts, CmdError> {
    let mut o = AddOpts {
        replicate: 1,
        delay: 0,
        retry: None,
        ttl: 86400,
        maxlen: 0,
        ext: Ext::default(),
        every: 0,
        asynchronous: false,
    };
    let mut i = 0;
    while i < args.len() {
        let opt = args[i];
        let value = args.get(i + 1).copied();
        let num = |e: JobError| value.and_then(resp::parse_i64).ok_or(CmdError::Job(e));
        match value {
            Some(_) if eq_ic(opt, "REPLICATE") => {
                o.replicate = num(JobError::Replicate)?;
                if !(1..=65535).contains(&o.replicate) {
                    return Err(JobError::Replicate.into());
                }
            }
            Some(_) if eq_ic(opt, "TTL") => {
                o.ttl = num(JobError::Ttl)?;
                if o.ttl <= 0 {
                    return Err(JobError::Ttl.into());
                }
            }
            Some(_) if eq_ic(opt, "RETRY") => {
                let r = num(JobError::Retry)?;
                if r < 0 {
                    return Err(JobError::Retry.into());
                }
                o.retry = Some(r);
            }
            Some(_) if eq_ic(opt, "DELAY") => {
                o.delay = num(JobError::Delay)?;
                if o.delay < 0 {
                    return Err(JobError::Delay.into());
                }
            }
            Some(_) if eq_ic(opt, "MAXLEN") => {
                o.maxlen = num(JobError::MaxLenOption)?;
                if o.maxlen <= 0 {
                    return Err(JobError::MaxLenOption.into());
                }
            }
            _ if eq_ic(opt, "ASYNC") => {
                o.asynchronous = true;
                i += 1;
                continue;
            }
            Some(_) if eq_ic(opt, "UNIQUE") => {
                o.ext.unique = value.map(Into::into);
            }
            Some(_) if eq_ic(opt, "EVERY") => {
                o.every = num(JobError::Every)?;
                if !(1..=MAX_SPAN_MS / 1000).contains(&o.every) {
                    return Err(JobError::Every.into());
                }
            }
            // The two-value options: BACKOFF base-ms max-ms, DEADLETTER
            // queue max-deliveries.
            Some(_) if eq_ic(opt, "BACKOFF") => {
                let (base, max) = match args.get(i + 2) {
                    Some(m) => (span_ms(args[i + 1]), span_ms(m)),
                    None => (None, None),
                };
                match (base, max) {
                    (Some(base_ms), Some(max_ms)) if base_ms <= max_ms => {
                        o.ext.backoff = Some(Backoff { base_ms, max_ms })
                    }
                    _ => return Err(JobError::Backoff.into()),
                }
                i += 1;
            }
            Some(q) if eq_ic(opt, "DEADLETTER") => {
                let max = args.get(i + 2).and_then(|m| resp::parse_i64(m));
                match max.and_then(|m| u16::try_from(m).ok()).filter(|&m| m > 0) {
                    Some(m) => o.ext.dead_letter = Some((q.into(), m)),
                    None => return Err(JobError::DeadLetter.into()),
                }
                i += 1;
            }
            _ => return Err(CmdError::Syntax),
        }
        i += 2;
    }
    Ok(o)
}

/// Disque's `addjobCommand`, on a single node: checks in the spec's
/// order (§2.1), then the job is registered and queued (or delayed).
fn addjob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let queue = args.req()?;
    let body = args.req()?;
    let timeout = args.req()?;
    let o = parse_add(args.rest())?;
    let timeout_ms = parse_timeout_ms(timeout)?;
    if o.replicate > 1 && o.retry == Some(0) {
        return Err(JobError::RetryZeroReplicate.into());
    }
    if o.delay >= o.ttl {
        return Err(JobError::DelayOverTtl.into());
    }
    let retry = o.retry.unwrap_or_else(|| (o.ttl / 10).clamp(1, 300));
    let slot_tag = cluster_tag(cx, queue, &o.ext)?;
    // The copies beyond this node's are its online replicas' (Disque's
    // reachable nodes): refused at once when there are too few.
    let copies = o.replicate as usize - 1;
    let reachable =
        if copies > 0 { crate::subsystems::repl::online_replicas(cx.shared) } else { 0 };
    if copies > reachable {
        return Err(JobError::NoRepl.into());
    }
    if let Some(k) = &o.ext.unique {
        // Idempotent: the job this key made is the answer, whatever the
        // rest of the request (nothing changes, nothing is propagated).
        if let Some(id) = jobs(cx).unique_job(k) {
            out.simple(&id.0);
            return Ok(());
        }
    }
    let maxmemory = cx.sess.conf(cx.shared).maxmemory;
    if maxmemory > 0 && cx.shared.over_maxmemory(maxmemory / 4 * 3) {
        // Disque's memory warning level 1 (75 %): this node may not keep
        // a copy, and its replicas cannot hold one without it (they follow
        // its stream), so it says why (too few replicas was refused above).
        return Err(JobError::NoReplOom.into());
    }
    let now = cx.now();
    let mut ext = o.ext;
    if o.every > 0 {
        // Runs are due from the first queueing on, every period.
        let first = now.saturating_add(o.delay.saturating_mul(1000));
        let ttl_ms = o.ttl.saturating_mul(1000);
        ext.every = Some(Every { period_ms: o.every * 1000, ttl_ms, anchor: first });
    }
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let job = NewJob {
        queue,
        body,
        repl: o.replicate as u16,
        ttl_secs: o.ttl,
        delay_secs: o.delay,
        retry_secs: retry,
        maxlen: usize::try_from(o.maxlen).unwrap_or(usize::MAX),
        ext,
        slot_tag,
    };
    let id = js.add(&job, now).map_err(|e| match e {
        AddError::MaxLen => JobError::MaxLen,
        AddError::Paused => JobError::Paused,
    })?;
    if o.delay == 0 {
        ready(cx, queue);
    }
    cx.dirty(1);
    if cx.propagating() {
        let mut rec = Vec::new();
        js.record(&id, &mut rec);
        cx.propagate_as(&[b"LOADJOB", &rec]);
    }
    let etime = js.get(&id).map_or(now, |j| j.etime);
    drop(js);
    let at = out.mark();
    out.simple(&id.0);
    if copies > 0 && !o.asynchronous {
        hold_for_copies(cx, out, at, copies, timeout_ms, now, etime);
    }
    Ok(())
}

/// In cluster mode, the hash tag that makes the new job's id hash to its
/// queue's slot (the router sent the ADDJOB here by the queue's name); a
/// dead-letter queue must be in that slot too, since a job never leaves
/// its node: `-CROSSSLOT` as for keys. `None` on a standalone server.
fn cluster_tag(cx: &Ctx, queue: &[u8], ext: &Ext) -> Result<Option<[u8; 3]>, CmdError> {
    if cx.shared.cluster.get().is_none() {
        return Ok(None);
    }
    let slot = store::slot::key_slot(queue);
    if ext.dead_letter.as_ref().is_some_and(|(dead, _)| store::slot::key_slot(dead) != slot) {
        return Err(route::Redirect::CrossSlot.into_error());
    }
    Ok(Some(route::job_tag(slot)))
}

/// Synchronous `REPLICATE n`: the reply (at `at`) waits until `copies`
/// replicas acknowledged the stream that carries the job, or the ADDJOB
/// timeout (0: none), or the job's TTL, whichever comes first; then it
/// becomes Disque's error for the one that came. The job stays either
/// way (as after Disque's best-effort cleanup, it may still be
/// delivered). From MULTI/EXEC, a script or the AOF nothing can wait:
/// it replies at once, as with `ASYNC`; with CLIENT REPLY OFF there is no
/// reply to hold.
fn hold_for_copies(
    cx: &mut Ctx,
    out: &ReplyBuf,
    at: resp::Mark,
    copies: usize,
    timeout: i64,
    now: i64,
    etime: i64,
) {
    if !cx.caller.may_block() || cx.sess.reply_mode != crate::core::session::ReplyMode::On {
        return;
    }
    let by_timeout = if timeout > 0 { now.saturating_add(timeout) } else { i64::MAX };
    let (deadline_ms, error) = if by_timeout < etime {
        (by_timeout, JobError::NoReplTimeout)
    } else {
        (etime, JobError::NoReplExpired)
    };
    let len = out.since(at);
    cx.sess.fx.hold_for_replicas(crate::core::effects::ReplicaHold {
        at,
        len,
        replicas: copies,
        deadline_ms,
        error: error.text(),
    });
}

// ---- GETJOB ----------------------------------------------------------------

const GETJOB: Command = Command::sluice("GETJOB", getjob).lock(Lock::Jobs);

struct GetOpts {
    nohang: bool,
    timeout: i64,
    count: usize,
    counters: bool,
}

/// GETJOB: one job from each non-empty queue in turn until COUNT; when
/// none, waits (one job per wake-up, first come first served).
fn getjob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let mut o = GetOpts { nohang: false, timeout: 0, count: 1, counters: false };
    let mut from = None;
    while let Some(a) = args.next() {
        let last = args.is_empty();
        if eq_ic(a, "NOHANG") {
            o.nohang = true;
        } else if eq_ic(a, "WITHCOUNTERS") {
            o.counters = true;
        } else if eq_ic(a, "TIMEOUT") && !last {
            o.timeout = parse_timeout_ms(args.req()?)?;
        } else if eq_ic(a, "COUNT") && !last {
            match resp::parse_i64(args.req()?) {
                Some(n) if n > 0 => o.count = usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(JobError::Count.into()),
            }
        } else if eq_ic(a, "FROM") {
            from = Some(args.rest());
            break;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let queues = match from {
        Some(q) if !q.is_empty() => q,
        _ => return Err(CmdError::Syntax),
    };
    let now = cx.now();
    // A served waiter takes one job, from the queue that became ready.
    let served = cx.caller.serves_waiter();
    let (look, count) = if served { (cx.waited_keys(queues), 1) } else { (queues, o.count) };
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let mut got: SmallVec<[JobId; 8]> = SmallVec::new();
    loop {
        let before = got.len();
        for q in look {
            if got.len() == count {
                break;
            }
            if let Some(id) = js.fetch(q, now) {
                got.push(id);
            }
        }
        if got.len() == before || got.len() == count {
            break;
        }
    }
    if !got.is_empty() {
        out.array(got.len());
        for id in &got {
            write_job(out, &js.get(id).expect("fetched"), o.counters);
        }
        propagate_states(cx, &js, &got);
        return Ok(());
    }
    if o.nohang || !cx.may_block() {
        for q in queues {
            js.touch_queue(q, now);
        }
        out.null_array();
        return Ok(());
    }
    for q in queues {
        // Waiting is an access; a queue is created to wait on.
        js.touch_queue(q, now);
    }
    drop(js);
    blocking::block_on_queues(cx, argv, queues, o.timeout);
    Ok(())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ext;
