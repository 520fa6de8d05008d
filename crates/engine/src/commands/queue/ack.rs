//! Commands that change jobs by id: ACKJOB, FASTACK, DELJOB (deletions,
//! propagated as `DELJOB`), NACK, ENQUEUE, DEQUEUE, WORKING (state
//! changes, propagated as `LOADJOB`'s state form), and LOADJOB itself,
//! which replays both forms.

use queue::{Job, JobId, State};
use resp::ReplyBuf;
use smallvec::SmallVec;

use super::{parse_ids, propagate_states, ready};
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult, JobError};
use crate::core::spec::{Command, Flags, Lock};

pub(super) const ACKJOB: Command = Command::sluice("ACKJOB", ackjob).lock(Lock::Jobs);

pub(super) const FASTACK: Command = Command::sluice("FASTACK", ackjob).lock(Lock::Jobs);

pub(super) const DELJOB: Command = Command::sluice("DELJOB", ackjob).lock(Lock::Jobs);

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

pub(super) const NACK: Command = Command::sluice("NACK", nack).lock(Lock::Jobs);

pub(super) const ENQUEUE: Command = Command::sluice("ENQUEUE", enqueue).lock(Lock::Jobs);

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

pub(super) const DEQUEUE: Command = Command::sluice("DEQUEUE", dequeue).lock(Lock::Jobs);

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

pub(super) const WORKING: Command = Command::sluice("WORKING", working).lock(Lock::Jobs);

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

pub(super) const LOADJOB: Command =
    Command::sluice("LOADJOB", loadjob).flags(Flags::REPLAY_ONLY).lock(Lock::Jobs);

/// `LOADJOB <record> [<record> ...]` registers whole jobs from their
/// binary records (ADDJOB's propagated form; a record starts with its
/// version byte); `LOADJOB <id> <state> <qtime> <nacks> <deliveries>
/// <flags> [...]` sets the state of known jobs (what GETJOB, NACK,
/// ENQUEUE, DEQUEUE, WORKING and the retry timer propagate). Accepted only
/// from a replay, as in Disque — including a replayed transaction, the
/// form in which the effects record wraps units of several commands: its
/// `REPLAY_ONLY` flag has the door refuse a client's call, alone, queued
/// in its own MULTI, or from a script. Records whose TTL passed are
/// dropped.
fn loadjob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
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
