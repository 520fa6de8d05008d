//! The rules of Sluice's extensions to Disque's jobs (`docs/jobs.md`,
//! "Extensions"; the data is [`Ext`]): NACK back-off and dead-lettering
//! when a job is queued again, idempotency keys, periodic runs, and
//! per-queue delivery rates. Jobs without extensions never get here: the
//! callers in `jobs.rs` look at the (usually empty) extension table first.

use std::collections::BTreeSet;

use super::{Jobs, Pause, Queue};
use crate::ext::{Every, Ext};
use crate::id::JobId;
use crate::job::{Job, JobRef, QueueName, State, FLAG_QUEUED_ONCE};

/// How a request to queue a job again ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queued {
    /// Not queued (already queued, acknowledged, or at-most-once and
    /// delivered).
    Refused,
    /// Queued now (in its dead-letter queue if it had been delivered too
    /// many times).
    Now,
    /// NACKed with a back-off: queued when the back-off passes.
    Later,
}

/// What ACKJOB did to a job.
#[derive(Debug)]
pub enum Acked {
    /// Done and gone.
    Deleted(Job),
    /// A periodic job: this run is done, the job waits for its next one.
    Rescheduled,
}

/// Whether rate-limited queue `q` may deliver one more job at `now`
/// (and counts it). At most `q.rate` per window of one second, the window
/// starting at the first delivery after the previous one ended (as
/// BullMQ's limiter). A refused queue is listed in `reopen` for the end
/// of its window, when its waiters are served.
pub(super) fn take_rate(q: &mut Queue, reopen: &mut BTreeSet<(i64, QueueName)>, now: i64) -> bool {
    if now < q.window || now - q.window >= 1000 {
        q.window = now;
        q.taken = 0;
    }
    if q.taken >= q.rate {
        reopen.insert((q.window + 1000, q.name.clone()));
        return false;
    }
    q.taken += 1;
    true
}

/// A queue setting record (RDB AUX `sluice-queue`): version, pause flags,
/// rate (u32, little-endian), then the name.
const QUEUE_RECORD_VERSION: u8 = 1;

impl Jobs {
    /// Registers job `h`'s extensions (and its idempotency key).
    pub(super) fn attach(&mut self, h: u32, ext: Ext) {
        if let Some(k) = &ext.unique {
            self.unique.insert(k.clone(), self.reg.id_at(h));
        }
        self.reg.ext.insert(h, Box::new(ext));
    }

    /// Drops job `h`'s idempotency key (it is going).
    pub(super) fn forget_unique(&mut self, h: u32) {
        let Some(k) = self.reg.ext.get(&h).and_then(|e| e.unique.as_ref()) else { return };
        let id = self.reg.id_at(h);
        if self.unique.get(k) == Some(&id) {
            self.unique.remove(k);
        }
    }

    /// The job's extensions, if it has any.
    pub fn ext(&self, id: &JobId) -> Option<&Ext> {
        if self.reg.ext.is_empty() {
            return None;
        }
        self.reg.find(id).and_then(|h| self.reg.ext.get(&h)).map(|e| &**e)
    }

    /// Every job with its extensions, in scan (slot) order (snapshots).
    pub fn iter_with_ext(&self) -> impl Iterator<Item = (JobRef<'_>, Option<&Ext>)> {
        self.reg.from(0).map(|(h, e)| {
            (JobRef { id: self.reg.id_at(h), data: &e.data }, self.reg.ext.get(&h).map(|x| &**x))
        })
    }

    /// The job's whole record ([`Job::encode_with`]); false when unknown.
    pub fn record(&self, id: &JobId, out: &mut Vec<u8>) -> bool {
        match self.get(id) {
            Some(j) => {
                j.encode_with(self.ext(id), out);
                true
            }
            None => false,
        }
    }

    /// The live job holding idempotency key `key` (ADDJOB UNIQUE).
    pub fn unique_job(&self, key: &[u8]) -> Option<JobId> {
        self.unique.get(key).copied()
    }

    pub(super) fn is_periodic(&self, h: u32) -> bool {
        !self.reg.ext.is_empty() && self.reg.ext.get(&h).is_some_and(|e| e.every.is_some())
    }

    /// ACKJOB/FASTACK: a job is deleted, except a periodic one, whose run
    /// is over: it waits for its next run. None when unknown.
    pub fn ack(&mut self, id: &JobId, now: i64) -> Option<Acked> {
        let h = self.reg.find(id)?;
        if self.is_periodic(h) {
            self.next_run(h, now);
            return Some(Acked::Rescheduled);
        }
        self.delete(id).map(Acked::Deleted)
    }

    /// Ends periodic job `h`'s run at `now`: out of its queue, back to
    /// its own queue if it was dead-lettered, counters cleared, active
    /// until its next run on the schedule, when it is queued as new (a
    /// fresh creation stamp and TTL).
    pub(super) fn next_run(&mut self, h: u32, now: i64) {
        let ext = self.reg.ext.get_mut(&h).expect("periodic job");
        let every = ext.every.expect("periodic job");
        let next = every.next_after(now);
        ext.every = Some(Every { anchor: next, ..every });
        let home = ext.dead_from.take();
        let was = self.reg.wake_at(h);
        self.dequeue_at(h);
        let ctime = self.gen.next_ctime(now);
        let name = home.map(|q| self.queue_name(&q));
        let j = &mut self.reg.at_mut(h).data;
        if let Some(n) = name {
            j.queue = n;
        }
        j.state = State::Active;
        j.ctime = ctime;
        j.qtime = next.max(1);
        j.etime = next.saturating_add(every.ttl_ms);
        j.nacks = 0;
        j.deliveries = 0;
        j.flags = 0;
        self.reg.reindex(h, Some(was));
    }

    /// A counted queueing of job `h` (which has extensions): when it
    /// reaches the job's MAXDELIVERIES, the job moves to its dead-letter
    /// queue (and `None` lets the caller queue it there now); a NACK with
    /// a back-off counts the NACK and queues the job when the back-off
    /// passes (its first queueing then, so not counted again).
    pub(super) fn extended_requeue(&mut self, h: u32, nack: bool, now: i64) -> Option<Queued> {
        let j = &self.reg.at(h).data;
        if !(nack || j.has(FLAG_QUEUED_ONCE)) {
            return None;
        }
        let e = self.reg.ext.get(&h)?;
        let total = u32::from(j.nacks) + u32::from(j.deliveries) + 1;
        if let (Some((dlq, max)), None) = (&e.dead_letter, &e.dead_from) {
            if total >= u32::from(*max) {
                let (dlq, from): (Box<[u8]>, Box<[u8]>) = (dlq.clone(), j.queue[..].into());
                let name = self.queue_name(&dlq);
                self.reg.ext.get_mut(&h).expect("extended").dead_from = Some(from);
                self.reg.at_mut(h).data.queue = name;
                return None;
            }
        }
        let backoff = e.backoff.filter(|_| nack)?;
        let was = self.reg.wake_at(h);
        let j = &mut self.reg.at_mut(h).data;
        j.nacks = j.nacks.saturating_add(1);
        j.flags &= !FLAG_QUEUED_ONCE;
        j.qtime = now.saturating_add(backoff.delay(j.nacks)).max(now + 1);
        self.reg.reindex(h, Some(was));
        Some(Queued::Later)
    }

    /// QSET RATE: at most `rate` deliveries a second from queue `name` (0:
    /// no limit). Creates the queue for a limit. Returns the previous rate.
    pub fn set_rate(&mut self, name: &[u8], rate: u32, now: i64) -> u32 {
        if rate == 0 && !self.queues.contains_key(name) {
            return 0;
        }
        let q = self.queue_entry(name, now);
        std::mem::replace(&mut q.rate, rate)
    }

    /// The settings of every queue that has any (paused, rate-limited),
    /// as records for a snapshot.
    pub fn queue_records(&self) -> Vec<Vec<u8>> {
        self.queues
            .values()
            .filter(|q| q.pause != Pause::NONE || q.rate != 0)
            .map(|q| {
                let mut r = Vec::with_capacity(6 + q.name.len());
                r.push(QUEUE_RECORD_VERSION);
                r.push(q.pause.0);
                r.extend_from_slice(&q.rate.to_le_bytes());
                r.extend_from_slice(&q.name);
                r
            })
            .collect()
    }

    /// Applies a record of [`queue_records`](Self::queue_records); false
    /// when it is malformed.
    pub fn load_queue_record(&mut self, b: &[u8], now: i64) -> bool {
        let Some((name, pause, rate)) = Jobs::decode_queue_record(b) else {
            return false;
        };
        let q = self.queue_entry(name, now);
        q.pause = pause;
        q.rate = rate;
        true
    }

    /// A record of [`queue_records`](Self::queue_records) read back:
    /// the queue's name, pause flags and rate (an AOF rewrite without the
    /// RDB preamble turns it into `PAUSE` and `QSET`).
    pub fn decode_queue_record(b: &[u8]) -> Option<(&[u8], Pause, u32)> {
        if b.len() < 6 || b[0] != QUEUE_RECORD_VERSION || b[1] > Pause::ALL.0 {
            return None;
        }
        let rate = u32::from_le_bytes(b[2..6].try_into().expect("4 bytes"));
        Some((&b[6..], Pause(b[1]), rate))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{NewJob, Tick};
    use super::*;
    use crate::ext::Backoff;

    const T0: i64 = 1_700_000_000_000;

    fn job<'a>(queue: &'a str, ext: Ext) -> NewJob<'a> {
        NewJob {
            queue: queue.as_bytes(),
            body: b"body",
            repl: 1,
            ttl_secs: 1000,
            delay_secs: 0,
            retry_secs: 100,
            maxlen: 0,
            ext,
            slot_tag: None,
        }
    }

    fn fire(js: &mut Jobs, now: i64) -> Vec<Tick> {
        let mut out = vec![];
        js.tick(now, 100, &mut out);
        out
    }

    #[test]
    fn nack_backoff_grows_to_its_cap_and_counts_once() {
        let mut js = Jobs::new(b"00", 1);
        let b = Backoff { base_ms: 1000, max_ms: 3000 };
        let a = js.add(&job("q", Ext { backoff: Some(b), ..Ext::default() }), T0).unwrap();
        let mut now = T0;
        for (n, wait) in [(1, 1000), (2, 2000), (3, 3000), (4, 3000)] {
            assert_eq!(js.fetch(b"q", now), Some(a));
            assert_eq!(js.requeue(&a, true, now), Queued::Later);
            assert_eq!(js.get(&a).unwrap().state, State::Active);
            assert!(fire(&mut js, now + wait - 300).is_empty(), "nack {n} early");
            now += wait + 300;
            let got = fire(&mut js, now);
            assert!(matches!(&got[..], [Tick::Requeued(id, _)] if *id == a), "{n}: {got:?}");
            let j = js.get(&a).unwrap();
            assert_eq!((j.state, j.nacks, j.deliveries), (State::Queued, n, 0));
        }
    }

    #[test]
    fn dead_letter_after_max_deliveries_then_retried_there() {
        let mut js = Jobs::new(b"00", 1);
        let e = Ext { dead_letter: Some((b"dead".as_slice().into(), 3)), ..Ext::default() };
        let a = js.add(&job("q", e), T0).unwrap();
        // Delivery 1, NACK; delivery 2, retry timer; delivery 3, NACK.
        assert_eq!(js.fetch(b"q", T0), Some(a));
        assert_eq!(js.requeue(&a, true, T0), Queued::Now);
        assert_eq!(js.fetch(b"q", T0), Some(a));
        let got = fire(&mut js, T0 + 101_000);
        assert!(matches!(&got[..], [Tick::Requeued(_, q)] if &q[..] == b"q"), "{got:?}");
        assert_eq!(js.fetch(b"q", T0 + 101_000), Some(a));
        assert_eq!(js.requeue(&a, true, T0 + 101_000), Queued::Now);
        let j = js.get(&a).unwrap();
        assert_eq!((&j.queue[..], j.nacks, j.deliveries), (&b"dead"[..], 2, 1));
        assert_eq!(js.queue(b"q").unwrap().len(), 0);
        assert_eq!(js.queue(b"dead").unwrap().len(), 1);
        assert_eq!(js.ext(&a).unwrap().dead_from.as_deref(), Some(&b"q"[..]));
        // Once dead, it is retried in the dead-letter queue as any job.
        assert_eq!(js.fetch(b"dead", T0 + 101_000), Some(a));
        assert_eq!(js.requeue(&a, true, T0 + 101_000), Queued::Now);
        assert_eq!(js.queue(b"dead").unwrap().len(), 1);
    }

    #[test]
    fn unique_keys_live_as_long_as_their_job() {
        let mut js = Jobs::new(b"00", 1);
        let e = Ext { unique: Some(b"k".as_slice().into()), ..Ext::default() };
        let a = js.add(&job("q", e.clone()), T0).unwrap();
        assert_eq!(js.unique_job(b"k"), Some(a));
        // Read back (a replica, a restart): the key comes with the job.
        let mut rec = Vec::new();
        assert!(js.record(&a, &mut rec));
        let (j, x) = Job::decode_with(&rec).unwrap();
        let mut copy = Jobs::new(b"11", 2);
        copy.insert_with(j, x, T0);
        assert_eq!(copy.unique_job(b"k"), Some(a));
        assert!(js.delete(&a).is_some());
        assert_eq!(js.unique_job(b"k"), None);
        assert!(js.reg.ext.is_empty());
    }

    #[test]
    fn a_periodic_job_runs_again_after_each_ack_and_each_ttl() {
        let mut js = Jobs::new(b"00", 1);
        let every = Every { period_ms: 10_000, ttl_ms: 5_000, anchor: T0 };
        let mut nj = job("q", Ext { every: Some(every), ..Ext::default() });
        nj.ttl_secs = 5;
        let a = js.add(&nj, T0).unwrap();
        assert_eq!(js.fetch(b"q", T0), Some(a));
        assert!(matches!(js.ack(&a, T0 + 2_000), Some(Acked::Rescheduled)));
        let j = js.get(&a).unwrap();
        assert_eq!((j.state, j.qtime, j.etime), (State::Active, T0 + 10_000, T0 + 15_000));
        assert!(fire(&mut js, T0 + 9_000).is_empty());
        let got = fire(&mut js, T0 + 10_000);
        assert!(matches!(&got[..], [Tick::Requeued(..)]), "{got:?}");
        assert_eq!(js.get(&a).unwrap().deliveries, 0);
        // Never acknowledged: the run ends with its TTL, the job stays.
        let got = fire(&mut js, T0 + 15_000);
        assert!(matches!(&got[..], [Tick::Rescheduled(id)] if *id == a), "{got:?}");
        let j = js.get(&a).unwrap();
        assert_eq!((j.state, j.qtime), (State::Active, T0 + 20_000));
        assert_eq!(js.queue(b"q").unwrap().len(), 0);
        assert!(js.delete(&a).is_some());
    }

    #[test]
    fn a_rate_limited_queue_delivers_n_a_second_and_reopens() {
        let mut js = Jobs::new(b"00", 1);
        for _ in 0..5 {
            js.add(&job("q", Ext::default()), T0).unwrap();
        }
        assert_eq!(js.set_rate(b"q", 2, T0), 0);
        assert!(js.fetch(b"q", T0).is_some());
        assert!(js.fetch(b"q", T0 + 500).is_some());
        assert!(js.fetch(b"q", T0 + 999).is_none());
        assert!(fire(&mut js, T0 + 999).is_empty());
        let got = fire(&mut js, T0 + 1000);
        assert!(matches!(&got[..], [Tick::Reopened(q)] if &q[..] == b"q"), "{got:?}");
        assert!(js.fetch(b"q", T0 + 1000).is_some());
        // The setting survives a snapshot; an idle limited queue stays.
        let recs = js.queue_records();
        let mut copy = Jobs::new(b"11", 2);
        assert!(copy.load_queue_record(&recs[0], T0));
        assert_eq!(copy.queue(b"q").unwrap().rate, 2);
        assert_eq!(copy.collect_queues(T0 + 1_000_000, 10, |_| false), 0);
        assert!(!copy.load_queue_record(&recs[0][..5], T0));
    }
}
