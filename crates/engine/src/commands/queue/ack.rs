//! Commands that change jobs by id: ACKJOB, FASTACK, DELJOB (deletions,
//! propagated as `DELJOB`), NACK, ENQUEUE, DEQUEUE, WORKING (state
//! changes, propagated as `LOADJOB`'s state form), LOADJOB itself, which
//! replays both forms, and WAITJOB, which waits for a job to go.

use queue::{Acked, Job, JobId, Queued, State};
use resp::ReplyBuf;
use smallvec::SmallVec;

use super::{jobs, parse_ids, parse_timeout_ms, propagate_states, ready};
use crate::core::blocking;
use crate::core::ctx::eq_ic;
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult, JobError};
use crate::core::spec::{Command, Flags, Lock};

pub(super) const ACKJOB: Command = Command::sluice("ACKJOB", ackjob).lock(Lock::Jobs);

pub(super) const FASTACK: Command = Command::sluice("FASTACK", ackjob).lock(Lock::Jobs);

pub(super) const DELJOB: Command = Command::sluice("DELJOB", deljob).lock(Lock::Jobs);

fn ackjob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    ack_with(cx, args, true, out)
}

fn deljob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    ack_with(cx, args, false, out)
}

/// ACKJOB, FASTACK and DELJOB are one thing on a single node: a known job
/// is deleted at once (an ACK needs no retention when no other node may
/// hold a copy, spec §3.8); unknown ids are ignored. The reply counts the
/// jobs deleted; they are propagated as `DELJOB`. Except (`ack`) for a
/// periodic job, whose run is done: it stays for its next run
/// (propagated as its record); only DELJOB deletes it.
fn ack_with(cx: &mut Ctx, args: &mut Args, ack: bool, out: &mut ReplyBuf) -> CmdResult {
    let ids = parse_ids(args.rest())?;
    let now = cx.now();
    let shared = cx.shared;
    let mut js = shared.jobs.lock();
    let mut gone: SmallVec<[JobId; 8]> = SmallVec::new();
    let mut again: SmallVec<[JobId; 8]> = SmallVec::new();
    for id in &ids {
        let done = if ack { js.ack(id, now) } else { js.delete(id).map(Acked::Deleted) };
        match done {
            Some(Acked::Deleted(_)) => gone.push(*id),
            Some(Acked::Rescheduled) => again.push(*id),
            None => {}
        }
    }
    if !again.is_empty() {
        // Before the deletions' form: a command propagates one rewrite.
        cx.dirty(again.len() as u64);
        if cx.propagating() {
            let mut argv = vec![b"LOADJOB".to_vec()];
            for id in &again {
                crate::subsystems::jobs::job_args(&js, id, &mut argv);
            }
            let refs: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
            if gone.is_empty() {
                cx.propagate_as(&refs);
            } else {
                cx.also_propagate(&refs);
            }
        }
    }
    drop(js);
    propagate_deletions(cx, &gone);
    out.int((gone.len() + again.len()) as i64);
    Ok(())
}

/// Deleted jobs: dirty, their WAITJOB waiters served, propagated as one
/// `DELJOB`.
fn propagate_deletions(cx: &mut Ctx, gone: &[JobId]) {
    if gone.is_empty() {
        return;
    }
    cx.dirty(gone.len() as u64);
    for id in gone {
        // Nothing to do unless someone waits in the job namespace.
        ready(cx, &id.0);
    }
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
        if !js.get(id).is_some_and(|j| j.state == State::Active) {
            continue;
        }
        match js.requeue(id, nack, now) {
            Queued::Refused => {}
            // NACKed with a back-off: counted, queued later by the tick.
            Queued::Later => moved.push(*id),
            Queued::Now => {
                moved.push(*id);
                let q = js.get(id).expect("queued").queue.clone();
                ready(cx, &q);
            }
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
    // Parsed whole before anything changes. A record starts with its
    // version byte, never with an id's `D-`, so the forms mix.
    let mut items = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        if JobId::parse(rest[i]).is_some() {
            let s = rest.get(i..i + 6).and_then(parse_state).ok_or(JobError::BadRecord)?;
            items.push(Load::State(s));
            i += 6;
        } else {
            let (job, ext) = Job::decode_with(rest[i]).map_err(|_| JobError::BadRecord)?;
            items.push(Load::Whole(job, ext));
            i += 1;
        }
    }
    for item in items {
        match item {
            Load::State((id, state, qtime, nacks, deliveries, flags)) => {
                if js.restore_state(&id, state, qtime, nacks, deliveries, flags, now) {
                    n += 1;
                    if state == State::Queued {
                        let q = js.get(&id).expect("restored").queue.clone();
                        ready(cx, &q);
                    }
                }
            }
            Load::Whole(job, ext) => {
                if job.etime <= now {
                    continue;
                }
                let (queued, q) = (job.state == State::Queued, job.queue.clone());
                js.insert_with(job, ext, now);
                n += 1;
                if queued {
                    ready(cx, &q);
                }
            }
        }
    }
    drop(js);
    cx.dirty(n);
    out.int(n as i64);
    Ok(())
}

type StateRec = (JobId, State, i64, u16, u16, u8);

/// One item of LOADJOB's arguments.
enum Load {
    State(StateRec),
    Whole(Job, Option<queue::Ext>),
}

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

pub(super) const WAITJOB: Command = Command::sluice("WAITJOB", waitjob).lock(Lock::Jobs);

/// `WAITJOB id [TIMEOUT ms]` (Sluice's): replies 1 once the job is gone
/// (acknowledged, deleted or expired; at once for an unknown id: no
/// acknowledgement is kept on one node), or a null when TIMEOUT passes (0,
/// the default, waits forever). Waits through the blocking seam on the id
/// in the job namespace, which deletions make ready; inside MULTI/EXEC and
/// scripts it does not wait (as GETJOB), and answers the null at once.
fn waitjob(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let id = JobId::parse(args.req()?).ok_or(JobError::BadId)?;
    let mut timeout = 0;
    while let Some(a) = args.next() {
        if eq_ic(a, "TIMEOUT") && !args.is_empty() {
            timeout = parse_timeout_ms(args.req()?)?;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if jobs(cx).get(&id).is_none() {
        out.int(1);
        return Ok(());
    }
    if !cx.may_block() {
        out.null_array();
        return Ok(());
    }
    blocking::block_on_queues(cx, argv, &[&id.0], timeout);
    Ok(())
}
