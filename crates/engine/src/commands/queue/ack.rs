//! Commands that change jobs by id: ACKJOB, FASTACK, DELJOB (deletions,
//! propagated as `DELJOB`), NACK, ENQUEUE, DEQUEUE, WORKING (state
//! changes, propagated as `LOADJOB`'s state form), and LOADJOB itself,
//! which replays both forms.

use queue::{Job, JobId, State};
use resp::ReplyBuf;
use smallvec::SmallVec;

use super::{job_cmd, parse_ids, propagate_states, ready};
use crate::ctx::{Args, Ctx};
use crate::error::{CmdError, CmdResult, JobError};
use crate::spec::{CommandSpec, Flags};

pub(super) const ACKJOB: CommandSpec = job_cmd(
    "ACKJOB",
    -1,
    Flags::WRITE.union(Flags::FAST),
    "Acknowledges jobs: they are done and forgotten (Disque).",
    ackjob,
);

pub(super) const FASTACK: CommandSpec = job_cmd(
    "FASTACK",
    -1,
    Flags::WRITE.union(Flags::FAST),
    "Acknowledges jobs by deleting them at once (Disque).",
    ackjob,
);

pub(super) const DELJOB: CommandSpec = job_cmd(
    "DELJOB",
    -1,
    Flags::WRITE.union(Flags::FAST),
    "Deletes jobs, whatever their state (Disque).",
    ackjob,
);

/// ACKJOB, FASTACK and DELJOB are one thing on a single node: a known job
/// is deleted at once (an ACK needs no retention when no other node may
/// hold a copy, spec §3.8); unknown ids are ignored. The reply counts the
/// jobs deleted; they are propagated as `DELJOB`.
fn ackjob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let ids = parse_ids(args.rest())?;
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let mut gone: SmallVec<[JobId; 8]> = SmallVec::new();
    for id in &ids {
        if js.delete(id).is_some() {
            gone.push(*id);
        }
    }
    drop(js);
    propagate_deletions(cx, &gone);
    out.int(gone.len() as i64);
    Ok(())
}

fn propagate_deletions(cx: &mut Ctx, gone: &[JobId]) {
    if gone.is_empty() {
        return;
    }
    cx.dirty(gone.len() as u64);
    if cx.propagating() {
        let mut argv: Vec<&[u8]> = Vec::with_capacity(gone.len() + 1);
        argv.push(b"DELJOB");
        argv.extend(gone.iter().map(|id| &id.0[..]));
        cx.propagate_as(&argv);
    }
}

pub(super) const NACK: CommandSpec = job_cmd(
    "NACK",
    -1,
    Flags::WRITE.union(Flags::DENYOOM).union(Flags::FAST),
    "Puts fetched jobs back in their queues now, counting a NACK (Disque).",
    nack,
);

pub(super) const ENQUEUE: CommandSpec = job_cmd(
    "ENQUEUE",
    -1,
    Flags::WRITE.union(Flags::DENYOOM).union(Flags::FAST),
    "Puts active jobs in their queues now (Disque).",
    enqueue,
);

fn nack(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    requeue(cx, args, true, out)
}

fn enqueue(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    requeue(cx, args, false, out)
}

/// NACK and ENQUEUE: every known active job is queued now (refused
/// silently for at-most-once jobs already queued or delivered). The input
/// pause does not apply (spec §1.8).
fn requeue(cx: &mut Ctx, args: &mut Args, nack: bool, out: &mut ReplyBuf) -> CmdResult {
    let ids = parse_ids(args.rest())?;
    let now = cx.now();
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let mut moved: SmallVec<[JobId; 8]> = SmallVec::new();
    for id in &ids {
        if js.get(id).is_some_and(|j| j.state == State::Active) && js.enqueue(id, nack, now) {
            moved.push(*id);
            let q = js.get(id).expect("queued").queue.clone();
            ready(cx, &q);
        }
    }
    propagate_states(cx, &js, &moved);
    out.int(moved.len() as i64);
    Ok(())
}

pub(super) const DEQUEUE: CommandSpec = job_cmd(
    "DEQUEUE",
    -1,
    Flags::WRITE.union(Flags::FAST),
    "Takes queued jobs out of their queues, leaving them active (Disque).",
    dequeue,
);

fn dequeue(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let ids = parse_ids(args.rest())?;
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let mut moved: SmallVec<[JobId; 8]> = SmallVec::new();
    for id in &ids {
        if js.dequeue(id) {
            moved.push(*id);
        }
    }
    propagate_states(cx, &js, &moved);
    out.int(moved.len() as i64);
    Ok(())
}

pub(super) const WORKING: CommandSpec = job_cmd(
    "WORKING",
    2,
    Flags::WRITE.union(Flags::FAST),
    "Postpones a job's next delivery by its retry period (Disque).",
    working,
);

/// WORKING: replies the job's retry period, after which the worker should
/// call again; refused past half of the job's life (spec §2.7).
fn working(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let id = JobId::parse(args.req()?).ok_or(JobError::BadId)?;
    let now = cx.now();
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let retry = js
        .working(&id, now)
        .map_err(|late| CmdError::Job(if late { JobError::TooLate } else { JobError::NoJob }))?;
    propagate_states(cx, &js, &[id]);
    out.int(i64::from(retry));
    Ok(())
}

pub(super) const LOADJOB: CommandSpec = job_cmd(
    "LOADJOB",
    -2,
    Flags::WRITE.union(Flags::LOADING),
    "Restores jobs as recorded in the AOF or a replication stream (internal).",
    loadjob,
);

/// `LOADJOB <record> [<record> ...]` registers whole jobs from their
/// binary records (ADDJOB's propagated form; a record starts with its
/// version byte); `LOADJOB <id> <state> <qtime> <nacks> <deliveries>
/// <flags> [...]` sets the state of known jobs (what GETJOB, NACK,
/// ENQUEUE, DEQUEUE, WORKING and the retry timer propagate). Accepted only
/// from a replay, as in Disque — including a replayed transaction, the
/// form in which the effects record wraps units of several commands. A
/// client's call is refused alone, queued in its own MULTI, or from a
/// script. Records whose TTL passed are dropped.
fn loadjob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if !cx.caller.must_obey() {
        return Err(JobError::LoadJobFromClient.into());
    }
    let rest = args.rest();
    let now = cx.now();
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let mut n = 0;
    if rest.len().is_multiple_of(6) && JobId::parse(rest[0]).is_some() {
        let mut states = Vec::with_capacity(rest.len() / 6);
        for s in rest.chunks(6) {
            states.push(parse_state(s).ok_or(JobError::BadRecord)?);
        }
        for (id, state, qtime, nacks, deliveries, flags) in states {
            if js.restore_state(&id, state, qtime, nacks, deliveries, flags, now) {
                n += 1;
                if state == State::Queued {
                    let q = js.get(&id).expect("restored").queue.clone();
                    ready(cx, &q);
                }
            }
        }
    } else {
        let jobs: Vec<Job> = rest
            .iter()
            .map(|r| Job::decode(r))
            .collect::<Result<_, _>>()
            .map_err(|_| JobError::BadRecord)?;
        for job in jobs {
            if job.etime <= now {
                continue;
            }
            let (queued, q) = (job.state == State::Queued, job.queue.clone());
            js.insert(job, now);
            n += 1;
            if queued {
                ready(cx, &q);
            }
        }
    }
    drop(js);
    cx.dirty(n);
    out.int(n as i64);
    Ok(())
}

type StateRec = (JobId, State, i64, u16, u16, u8);

fn parse_state(a: &[&[u8]]) -> Option<StateRec> {
    let num = |b: &[u8]| resp::parse_i64(b);
    Some((
        JobId::parse(a[0])?,
        State::from_name(a[1])?,
        num(a[2])?,
        u16::try_from(num(a[3])?).ok()?,
        u16::try_from(num(a[4])?).ok()?,
        u8::try_from(num(a[5])?).ok()?,
    ))
}
