//! Lazy freeing, as Redis's lazyfree.c: UNLINK (and DEL with
//! `lazyfree-lazy-user-del yes`) hands a value whose freeing costs more
//! than [`THRESHOLD`] allocations to a background thread, so the command
//! (and the stripe it holds) does not wait for it. INFO reports
//! `lazyfree_pending_objects` and `lazyfreed_objects`.
//!
//! FLUSHALL and FLUSHDB with ASYNC (or `lazyfree-lazy-user-flush yes`)
//! hand each stripe's whole key table over, counted as its keys, as
//! Redis's `emptyDbAsync` does.
//!
//! The other lazy-free points of Redis (expiry, eviction, implicit
//! deletes) free in place in Sluice: see `config/effect.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};

use parking_lot::Mutex;
use store::Value;

/// Redis's LAZYFREE_THRESHOLD: values cheaper to free than this are freed
/// at once (handing them over would cost more).
pub const THRESHOLD: usize = 64;

/// What the background thread frees: one value, or a detached key
/// table counted as the keys it held.
enum Job {
    Value(Value),
    Keys(#[allow(dead_code)] Box<dyn Send>, u64),
}

/// The background freer and its counters.
#[derive(Default)]
pub struct LazyFree {
    tx: Mutex<Option<Sender<Job>>>,
    pending: std::sync::Arc<AtomicU64>,
    freed: std::sync::Arc<AtomicU64>,
}

impl LazyFree {
    /// Frees `v` now, or on the background thread when it is costly
    /// (`lazy`: the caller asks for a lazy free).
    pub fn free(&self, v: Value, lazy: bool) {
        if !lazy || effort(&v) <= THRESHOLD {
            return drop(v);
        }
        self.hand_over(Job::Value(v), 1);
    }

    /// Frees a stripe's detached key table (`keys` keys) on the
    /// background thread, whatever its size.
    pub fn free_keys(&self, table: Box<dyn Send>, keys: u64) {
        self.hand_over(Job::Keys(table, keys), keys);
    }

    fn hand_over(&self, job: Job, count: u64) {
        let mut tx = self.tx.lock();
        if tx.is_none() {
            *tx = self.start();
        }
        let Some(sender) = tx.as_ref() else { return drop(job) };
        self.pending.fetch_add(count, Ordering::Relaxed);
        if let Err(e) = sender.send(job) {
            self.pending.fetch_sub(count, Ordering::Relaxed);
            drop(e.0);
        }
    }

    fn start(&self) -> Option<Sender<Job>> {
        let (tx, rx) = channel::<Job>();
        let (pending, freed) = (self.pending.clone(), self.freed.clone());
        std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                for job in rx {
                    let n = match job {
                        Job::Value(v) => {
                            drop(v);
                            1
                        }
                        Job::Keys(t, n) => {
                            drop(t);
                            n
                        }
                    };
                    pending.fetch_sub(n, Ordering::Relaxed);
                    freed.fetch_add(n, Ordering::Relaxed);
                }
            })
            .ok()?;
        Some(tx)
    }

    /// Values handed over and not freed yet.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Values freed in the background since start (or CONFIG RESETSTAT).
    pub fn freed(&self) -> u64 {
        self.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        self.freed.store(0, Ordering::Relaxed);
    }
}

/// Redis's lazyfreeGetFreeEffort: about how many allocations freeing the
/// value takes (1 for a compact encoding).
pub fn effort(v: &Value) -> usize {
    match v {
        Value::Int(_) | Value::Emb(_) | Value::Raw(_) | Value::Hll(_) => 1,
        // Quicklist nodes of about 8 KB (the default list-max-listpack-size).
        Value::List(l) => l.heap_size() / 8192 + 1,
        Value::Hash(h) if h.encoding() == "hashtable" => h.len(),
        Value::Set(s) if s.encoding() == "hashtable" => s.len(),
        Value::ZSet(z) if z.encoding() == "skiplist" => z.len(),
        Value::Stream(s) => {
            let groups: usize = s.groups().map(|(_, g)| 1 + g.pel.len()).sum();
            s.nodes().count() + groups
        }
        _ => 1,
    }
}
