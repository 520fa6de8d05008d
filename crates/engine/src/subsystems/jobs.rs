//! The job queue's clockwork and persistence glue: the tick that runs
//! retries, delays and TTLs from the server's active-expiry timer, and
//! the whole-job records snapshots carry. The job queue's commands are the
//! `commands::queue` family; the job model is the `queue` crate.

use queue::{Job, JobId, JobRef, Jobs, Tick};
use store::Locks;

use crate::core::effects::Effects;
use crate::core::shared::Shared;

/// How many of `js`'s jobs are in cluster slot `slot` (their queue's
/// name's slot): SETSLOT refuses to migrate or give away a slot that holds
/// jobs. A walk of every job, for that rare administrative command.
pub fn in_slot(js: &Jobs, slot: u16) -> usize {
    js.iter().filter(|j| store::slot::key_slot(&j.queue) == slot).count()
}

/// Wake-ups handled per tick at most (the rest wait for the next tick,
/// 1000/hz ms later), so a mass expiry cannot stall the timer's thread.
const TICK_BUDGET: usize = 10_000;
/// Queues looked at per tick by the idle-queue collector.
const GC_VISIT: usize = 100;

/// Runs every job wake-up due at `now` (expiry, re-queue after RETRY or
/// DELAY) and collects idle queues, holding the job namespace's stripe.
/// Each changed job is one unit of the effects record (`DELJOB` for an
/// expired job, `LOADJOB`'s state form for a re-queued one), as active
/// expiry makes one per key; clients blocked on a queue that received a
/// job are served afterwards. Does nothing while a dataset loads.
pub fn tick(shared: &Shared, fx: &mut Effects, now: i64) {
    if shared.is_loading() {
        return;
    }
    let store = &shared.store;
    let jid = store.jobs_id();
    let mut locks = Locks::new(store, now);
    if locks.acquire(&mut [jid]).is_err() {
        return;
    }
    if store.expiry_held(now) {
        // Writes are held (a pause, a failover waiting for its target):
        // the job queue's timers wait too, as key expiry does, so the
        // replication offset holds still (`Shared::quiesce`).
        return;
    }
    let mut events = Vec::new();
    let mut js = shared.jobs.lock();
    if js.next_wake().is_some_and(|t| t <= now) {
        js.tick(now, TICK_BUDGET, &mut events);
    }
    if js.queues_len() > 0 {
        let stripe = locks.stripe_id(jid);
        let waiters = stripe.waiters.as_ref();
        js.collect_queues(now, GC_VISIT, |q| waiters.is_some_and(|t| t.get(q).is_some()));
    }
    if events.is_empty() {
        return;
    }
    let mut argv: Vec<Vec<u8>> = Vec::new();
    let mut changed = 0;
    for ev in &events {
        argv.clear();
        match ev {
            Tick::Expired(job) => {
                // Its WAITJOB waiters are served.
                locks.stripe_id(jid).readied(&job.id.0);
                argv.push(b"DELJOB".to_vec());
                argv.push(job.id.0.to_vec());
            }
            Tick::Requeued(id, queue) => {
                locks.stripe_id(jid).readied(queue);
                argv.push(b"LOADJOB".to_vec());
                job_args(&js, id, &mut argv);
            }
            Tick::Rescheduled(id) => {
                argv.push(b"LOADJOB".to_vec());
                job_args(&js, id, &mut argv);
            }
            Tick::Reopened(queue) => {
                // Only the waiters: nothing changed that a replica keeps.
                locks.stripe_id(jid).readied(queue);
                continue;
            }
        }
        changed += 1;
        fx.begin_command();
        if fx.propagating() {
            let refs: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
            fx.also(0, &refs);
        }
        fx.finish_unit();
    }
    drop(js);
    shared.stats.dirty.fetch_add(changed, std::sync::atomic::Ordering::Relaxed);
    let mut ready = Vec::new();
    locks.take_signals(&mut ready, |_, _| {});
    drop(locks);
    if !ready.is_empty() {
        crate::core::blocking::serve_ready(shared, &mut ready);
    }
}

/// Every job as a record ([`Job::encode_with`]), for a snapshot: taken
/// under the job namespace's stripe, so no job command is half done in
/// it. The caller holds no stripe.
pub fn records(shared: &Shared) -> Vec<Vec<u8>> {
    records_and_queues(shared).0
}

/// [`records`], and the settings of the queues that have any (paused,
/// rate-limited; `Jobs::queue_records`), taken together.
pub fn records_and_queues(shared: &Shared) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let store = &shared.store;
    let _held = store.lock_stripe(store.databases(), 0);
    records_now(shared)
}

/// Applies queue settings read back from a snapshot; false at the first
/// malformed record.
pub fn load_queue_records<'a>(
    shared: &Shared,
    recs: impl Iterator<Item = &'a [u8]>,
    now: i64,
) -> bool {
    let store = &shared.store;
    let _held = store.lock_stripe(store.databases(), 0);
    let mut js = shared.jobs.lock();
    for r in recs {
        if !js.load_queue_record(r, now) {
            return false;
        }
    }
    true
}

/// [`records_and_queues`] for a caller that may hold the job namespace's stripe
/// itself (FLUSHALL's save, inside a transaction that touched jobs): the
/// registry's own lock gives a consistent set.
pub fn records_now(shared: &Shared) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let js = shared.jobs.lock();
    let jobs = js
        .iter_with_ext()
        .map(|(j, e)| {
            let mut r = Vec::new();
            j.encode_with(e, &mut r);
            r
        })
        .collect();
    (jobs, js.queue_records())
}

/// Registers jobs read back from a snapshot, dropping the expired ones.
/// Returns (loaded, expired), or the error of the first bad record.
pub fn load_records<'a>(
    shared: &Shared,
    recs: impl Iterator<Item = &'a [u8]>,
    now: i64,
) -> Result<(usize, usize), queue::DecodeError> {
    let store = &shared.store;
    let _held = store.lock_stripe(store.databases(), 0);
    let mut js = shared.jobs.lock();
    let (mut loaded, mut expired) = (0, 0);
    for r in recs {
        let (job, ext) = Job::decode_with(r)?;
        if job.etime <= now {
            expired += 1;
            continue;
        }
        js.insert_with(job, ext, now);
        loaded += 1;
    }
    Ok((loaded, expired))
}

/// Records (and queue settings) per `LOADJOB` in a base of commands, as
/// Redis's rewrite puts 64 items in a command.
const RECORDS_PER_LOADJOB: usize = 64;

/// Appends to `out`, in RESP, the commands that rebuild the snapshot's
/// jobs and queue settings: `LOADJOB` of their records, then `PAUSE` and
/// `QSET` per queue that has a setting (the base of an AOF rewrite
/// without the RDB preamble, which otherwise has no place for them).
/// Ignores a queue record it cannot read (a snapshot writes only good ones).
pub fn rewrite_commands<'a>(
    jobs: impl Iterator<Item = &'a [u8]>,
    queues: impl Iterator<Item = &'a [u8]>,
    out: &mut Vec<u8>,
) {
    let mut argv: Vec<&[u8]> = Vec::with_capacity(RECORDS_PER_LOADJOB + 1);
    for rec in jobs {
        if argv.is_empty() {
            argv.push(b"LOADJOB");
        }
        argv.push(rec);
        if argv.len() > RECORDS_PER_LOADJOB {
            resp::write_command(out, &argv);
            argv.clear();
        }
    }
    if !argv.is_empty() {
        resp::write_command(out, &argv);
    }
    for rec in queues {
        let Some((name, pause, rate)) = Jobs::decode_queue_record(rec) else { continue };
        if pause != queue::Pause::NONE {
            resp::write_command(out, &[b"PAUSE", name, pause.name().as_bytes()]);
        }
        if rate != 0 {
            resp::write_command(out, &[b"QSET", name, b"RATE", rate.to_string().as_bytes()]);
        }
    }
}

/// Drops every job and queue (DEBUG RELOAD, before loading a file).
pub fn clear(shared: &Shared) {
    let store = &shared.store;
    let _held = store.lock_stripe(store.databases(), 0);
    shared.jobs.lock().clear();
}

/// A changed job in `LOADJOB`'s argument forms: its state, or its whole
/// record when it has extensions (dead-lettering moves it to another
/// queue, a periodic run changes its schedule: the state form cannot say).
pub(crate) fn job_args(js: &Jobs, id: &JobId, argv: &mut Vec<Vec<u8>>) {
    if js.ext(id).is_some() {
        let mut rec = Vec::new();
        if js.record(id, &mut rec) {
            argv.push(rec);
        }
    } else if let Some(j) = js.get(id) {
        state_args(&j, argv);
    }
}

/// The arguments of `LOADJOB`'s state form for one job: id, state,
/// qtime, nacks, additional deliveries, flags.
pub(crate) fn state_args(j: &JobRef, argv: &mut Vec<Vec<u8>>) {
    argv.push(j.id.0.to_vec());
    argv.push(j.state.name().as_bytes().to_vec());
    argv.push(j.qtime.to_string().into_bytes());
    argv.push(j.nacks.to_string().into_bytes());
    argv.push(j.deliveries.to_string().into_bytes());
    argv.push(j.flags.to_string().into_bytes());
}
