//! `maxmemory`: eviction as Redis 7.0's `performEvictions` (evict.c).
//!
//! Before a client's command runs, while `maxmemory` is set, used memory
//! is compared with the limit; when over, keys are evicted by the
//! `maxmemory-policy` until what was freed covers the excess. Used memory
//! is the allocator's count (jemalloc's `stats.allocated`, asked at most
//! once a millisecond) kept current in between by each thread adding what
//! it allocated since it last looked (jemalloc's per-thread counters, two
//! loads): so a burst of writes inside one millisecond is seen, and what
//! an eviction frees is measured exactly, as Redis measures
//! `zmalloc_used_memory` around each deletion.
//!
//! The approximations are Redis's: `maxmemory-samples` keys sampled per
//! database into an eviction pool of 16 best candidates kept across calls
//! (LRU: longest idle; LFU: lowest decayed counter; TTL: nearest expiry);
//! the random policies pick a random key of the next database in turn.
//!
//! The per-key access field is the store entry's `lru` (32 bits, of which
//! Redis's 24 are used): seconds of the LRU clock, or under an LFU policy
//! the last decrement time in minutes (16 bits) and a logarithmic counter
//! (8 bits). Reads write it through [`Shared::access_stamp`], one load
//! whose top bit says "LFU": the default policy costs a plain store of the
//! clock, as before.
//!
//! Each evicted key is a unit of the effects record of its own (an
//! `evicted` event, a `DEL` propagated, tracking invalidated), as active
//! expiry does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::core::effects::Effects;
use crate::core::shared::Shared;

/// Top bit of the access stamp: an LFU policy is in force.
pub const LFU_BIT: u32 = 1 << 31;
/// Redis's initial counter of a new key under LFU.
pub const LFU_INIT_VAL: u32 = 5;
/// Candidates kept between calls (Redis's `EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

/// The eight `maxmemory-policy` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    NoEviction,
}

impl Policy {
    /// The configuration's spelling (the table validates it).
    pub fn parse(s: &str) -> Policy {
        match s {
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            "allkeys-lru" => Policy::AllkeysLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            _ => Policy::NoEviction,
        }
    }

    pub fn lfu(self) -> bool {
        matches!(self, Policy::VolatileLfu | Policy::AllkeysLfu)
    }

    pub fn lru(self) -> bool {
        matches!(self, Policy::VolatileLru | Policy::AllkeysLru)
    }

    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::VolatileRandom | Policy::AllkeysRandom)
    }
}

/// One candidate of the eviction pool.
struct Candidate {
    /// Higher is a better victim.
    score: u64,
    db: usize,
    key: Vec<u8>,
}

/// The eviction state shared by every thread (eviction runs one at a
/// time, as in Redis's single thread).
#[derive(Default)]
pub struct Evictor {
    /// Ascending by score: the best victim is last.
    pool: parking_lot::Mutex<Vec<Candidate>>,
    /// The random policies' next database (Redis's static `next_db`).
    next_db: std::sync::atomic::AtomicUsize,
    pub evicted_keys: std::sync::atomic::AtomicU64,
    /// Clients closed by `maxmemory-clients` (INFO `evicted_clients`).
    pub evicted_clients: std::sync::atomic::AtomicU64,
    /// When used memory was first seen over the limit (unix ms; 0: not
    /// over), and the total of the closed periods (INFO's
    /// `*_eviction_exceeded_time`).
    exceeded_since: std::sync::atomic::AtomicI64,
    exceeded_total: std::sync::atomic::AtomicU64,
}

impl Evictor {
    /// INFO's `total_eviction_exceeded_time` and
    /// `current_eviction_exceeded_time` (ms).
    pub fn exceeded_times(&self, now_ms: i64) -> (u64, u64) {
        let since = self.exceeded_since.load(Ordering::Relaxed);
        let cur = if since > 0 { (now_ms - since).max(0) as u64 } else { 0 };
        (self.exceeded_total.load(Ordering::Relaxed) + cur, cur)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        self.evicted_keys.store(0, Ordering::Relaxed);
        self.evicted_clients.store(0, Ordering::Relaxed);
        self.exceeded_total.store(0, Ordering::Relaxed);
    }

    fn over(&self, now_ms: i64, over: bool) {
        let since = self.exceeded_since.load(Ordering::Relaxed);
        if over && since == 0 {
            self.exceeded_since.store(now_ms.max(1), Ordering::Relaxed);
        } else if !over && since != 0 {
            self.exceeded_since.store(0, Ordering::Relaxed);
            self.exceeded_total.fetch_add((now_ms - since).max(0) as u64, Ordering::Relaxed);
        }
    }
}

/// Minutes of the server clock, 16 bits (Redis's `LFUGetTimeInMinutes`).
pub fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) & 0xffff) as u32
}

/// The counter of an LFU field decayed by the periods elapsed since its
/// last decrement (Redis's `LFUDecrAndReturn`).
pub fn lfu_decayed(field: u32, now_min: u32, decay_time: u32) -> u32 {
    let ldt = (field >> 8) & 0xffff;
    let counter = field & 0xff;
    let elapsed = if now_min >= ldt { now_min - ldt } else { 65535 - ldt + now_min };
    let periods = elapsed.checked_div(decay_time).unwrap_or(0);
    counter.saturating_sub(periods)
}

/// A server's LFU parameters, copied from its configuration when it
/// changes ([`LfuParams::set`]): read by an access under an LFU policy.
pub struct LfuParams {
    log_factor: AtomicU32,
    decay_time: AtomicU32,
}

impl Default for LfuParams {
    fn default() -> Self {
        LfuParams { log_factor: AtomicU32::new(10), decay_time: AtomicU32::new(1) }
    }
}

impl LfuParams {
    /// Sets `lfu-log-factor` and `lfu-decay-time` for [`access`].
    pub fn set(&self, log_factor: i64, decay_time: i64) {
        self.log_factor.store(log_factor.clamp(0, i64::from(u32::MAX)) as u32, Ordering::Relaxed);
        self.decay_time.store(decay_time.clamp(0, i64::from(u32::MAX)) as u32, Ordering::Relaxed);
    }

    /// `lfu-decay-time`.
    pub fn decay_time(&self) -> u32 {
        self.decay_time.load(Ordering::Relaxed)
    }
}

/// What an access stores in a key's access field: the stamp's bits (the
/// LRU clock, or the LFU flag and minute) and, for LFU, where the
/// server's parameters are (read only under LFU).
#[derive(Clone, Copy)]
pub struct Stamp<'a> {
    pub bits: u32,
    pub lfu: &'a LfuParams,
}

/// The access field of a new key, from the access stamp.
#[inline]
pub fn fresh(stamp: Stamp<'_>) -> u32 {
    stamp.bits & !LFU_BIT
}

/// The access field of a key read or written now (`old` is its field):
/// the LRU clock, or under LFU the counter decayed and incremented.
#[inline]
pub fn access(stamp: Stamp<'_>, old: u32) -> u32 {
    if stamp.bits & LFU_BIT == 0 {
        stamp.bits
    } else {
        lfu_touch(old, stamp)
    }
}

/// An access under LFU (Redis's `updateLFU`): decay, then a logarithmic
/// increment (`LFULogIncr`), stamped with the current minute.
#[cold]
fn lfu_touch(field: u32, stamp: Stamp<'_>) -> u32 {
    let now_min = (stamp.bits >> 8) & 0xffff;
    let decay = stamp.lfu.decay_time.load(Ordering::Relaxed);
    let factor = stamp.lfu.log_factor.load(Ordering::Relaxed);
    let mut counter = lfu_decayed(field, now_min, decay);
    if counter < 255 {
        let r = random_unit();
        let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
        if r < 1.0 / (base * f64::from(factor) + 1.0) {
            counter += 1;
        }
    }
    (now_min << 8) | counter
}

/// A uniform number in [0, 1) from a per-thread xorshift.
fn random_unit() -> f64 {
    thread_local! {
        static STATE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            x = crate::core::shared::unix_us() as u64 | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// The access stamp readers store (see the module's doc): the LRU
/// clock, or under LFU the flag, the minute and the initial counter.
/// Redis's `LRU_CLOCK_MAX`: the LRU clock is Unix seconds on 24 bits,
/// wrapping every 194 days.
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

/// The LRU clock at `unix_ms` (Redis's `getLRUClock`).
pub fn lru_clock_at(unix_ms: i64) -> u32 {
    (unix_ms / 1000) as u32 & LRU_CLOCK_MAX
}

/// Seconds since a key stamped `lru` was accessed, the clock having
/// wrapped at most once since (Redis's `estimateObjectIdleTime`).
pub fn lru_idle(clock: u32, lru: u32) -> u32 {
    let lru = lru & LRU_CLOCK_MAX;
    if clock >= lru {
        clock - lru
    } else {
        clock + (LRU_CLOCK_MAX - lru)
    }
}

/// The stamp of a key idle for `idle` seconds (Redis's
/// `objectSetLRUOrLFU`: an idle time past the clock's start lands half
/// way round the clock, so it reads as long idle).
pub fn lru_idle_stamp(clock: u32, idle: u64) -> u32 {
    match u64::from(clock).checked_sub(idle) {
        Some(at) => at as u32,
        None => (clock + LRU_CLOCK_MAX / 2) % LRU_CLOCK_MAX,
    }
}

pub fn stamp(lfu: bool, lru_clock: u32, now_ms: i64) -> u32 {
    if lfu {
        LFU_BIT | (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
    } else {
        lru_clock & !LFU_BIT
    }
}

/// How long one round of eviction may run, from
/// `maxmemory-eviction-tenacity` (Redis's evictionTimeLimitUs): 50 us per
/// step up to 10 (the default, 500 us), then 15% more per step, no limit
/// at 100.
pub fn time_limit(tenacity: i64) -> std::time::Duration {
    let us = match tenacity {
        ..=10 => 50 * tenacity.max(0) as u64,
        11..=99 => (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        _ => return std::time::Duration::MAX,
    };
    std::time::Duration::from_micros(us)
}

/// Why eviction could not bring memory under the limit.
pub struct OutOfMemory;

/// Redis's `performEvictions`, run before a client's command while
/// `maxmemory` is set. `Err` means over the limit with nothing (more)
/// to evict: DENYOOM commands are then refused.
pub fn perform(shared: &Shared, fx: &mut Effects, max: u64) -> Result<(), OutOfMemory> {
    // Messages on their way to another thread's client are left out (see
    // `outbox::in_transit`); once in that client's reply buffer they count.
    let transit = shared.in_transit.load(Ordering::Relaxed) as u64;
    let mut used = shared.used_memory_now().saturating_sub(transit);
    let now = shared.clock.now_ms();
    let mut closing = 0;
    if used > max {
        // Clients over `maxmemory-clients` go before any key (Redis's
        // processCommand runs evictClients before performEvictions).
        evict_clients(shared);
        // What closing clients still hold, then the allocator, with the
        // registry held so that no client is marked closing in between
        // (`evict_clients` marks under it): one marked after the sum but
        // before the measurement would be in the measurement only, and
        // keys would go for memory on its way out. A client frees its
        // buffers before it leaves the registry, so one that finishes
        // closing in between is left out of both.
        let registry = shared.clients.lock();
        closing = closing_clients_mem(&registry);
        // Measured before keys go: the running figure can be ahead of the
        // allocator by what other threads freed since the last
        // measurement (clients closed by `maxmemory-clients` among them),
        // and a key evicted on that account is lost for nothing.
        used = shared.used_memory_measured().saturating_sub(transit);
        drop(registry);
    }
    if used > max {
        // Replicas' part of the replication buffer and the AOF buffer are
        // not counted (Redis's freeMemoryGetNotCountedMemory): looked at
        // only when over the limit.
        let aof = shared.host.aof.as_ref().map_or(0, |a| a.info().buffer_length);
        used = used.saturating_sub(crate::subsystems::repl::not_counted(shared) + aof + closing);
    }
    if used <= max {
        shared.evictor.over(now, false);
        return Ok(());
    }
    shared.evictor.over(now, true);
    let (policy, samples, limit) = {
        let c = shared.config.read();
        let limit = time_limit(c.maxmemory_eviction_tenacity);
        (Policy::parse(&c.maxmemory_policy), c.maxmemory_samples.max(1) as usize, limit)
    };
    if policy == Policy::NoEviction {
        return Err(OutOfMemory);
    }
    let to_free = used - max;
    let probe = shared.thread_allocated().is_some();
    let start = std::time::Instant::now();
    let mut freed: u64 = 0;
    let mut evicted = 0usize;
    fx.sync(&shared.effects);
    while freed < to_free {
        let Some((db, key)) = pick(shared, policy, samples) else {
            break;
        };
        let mut g = shared.store.lock_stripe(db, shared.store.stripe_of(&key) as usize);
        // What the deletion alone frees, as Redis measures
        // zmalloc_used_memory around dbSyncDelete: not what reporting it
        // costs (the propagated DEL, invalidation messages to tracking
        // clients), which would otherwise make each eviction call for
        // more (Redis's "eviction feedback loop").
        let before = shared.thread_allocated();
        let Some(e) = g.remove(&key) else { continue };
        let size = estimate(&key, &e);
        drop(e);
        let after = shared.thread_allocated();
        // Reported with the stripe held, so that the DEL is ordered
        // before any write to the key that follows.
        fx.begin_command();
        fx.evicted(db, &key);
        fx.finish_unit();
        drop(g);
        evicted += 1;
        freed += match (before, after) {
            (Some(a), Some(b)) => (a.wrapping_sub(b) as i64).max(0) as u64,
            _ => size,
        };
        // Redis's time limit, looked at every 16 keys: the rest waits
        // for the next command.
        if evicted.is_multiple_of(16) && start.elapsed() > limit {
            break;
        }
    }
    shared.evictor.evicted_keys.fetch_add(evicted as u64, Ordering::Relaxed);
    // Brings the shared figure up to date with what this thread freed
    // (from the allocator's counters; the estimate without them).
    if probe {
        shared.used_memory_now();
    } else {
        shared.used_memory_freed(freed.min(used));
    }
    if freed >= to_free {
        shared.evictor.over(now, false);
        Ok(())
    } else if evicted > 0 {
        // Out of time, not of keys (Redis's EVICT_RUNNING).
        Ok(())
    } else {
        Err(OutOfMemory)
    }
}

/// The `maxmemory-clients` limit in bytes (0: off). A negative setting
/// is a percentage of `maxmemory` (off without one); a limit is at least
/// 128 KB, as Redis's getClientEvictionLimit keeps a bad setting from
/// cutting every client off.
pub fn client_limit(c: &crate::subsystems::config::Config) -> u64 {
    let limit = match c.maxmemory_clients {
        0 => return 0,
        n if n < 0 => c.maxmemory.saturating_mul(n.unsigned_abs()) / 100,
        n => n as u64,
    };
    if limit == 0 {
        0
    } else {
        limit.max(128 << 10)
    }
}

/// `maxmemory-clients` (Redis 7.0's client eviction): while the clients'
/// memory (the sum of CLIENT LIST's `tot-mem`) passes the limit, the
/// client using the most is closed, unless it set `CLIENT NO-EVICT on`.
/// Run by a connection whose memory grew while the running sum
/// ([`Shared::clients_mem`]) is over the limit, by CONFIG SET, and from
/// the server's timer; this walk over every client is the exact check.
pub fn evict_clients(shared: &Shared) {
    let limit = client_limit(&shared.config.read());
    if limit == 0 {
        return;
    }
    // Held while clients are marked: two threads that find the sum over
    // the limit at once close enough clients between them, not each its
    // own share, and key eviction's reading of what closing clients
    // hold (`perform`) sees no client marked halfway through it.
    let guard = shared.clients.lock();
    // What CLIENT LIST's `tot-mem` shows: the connection's last published
    // figure and the pushes other threads queued for it since (Redis
    // appends those to its reply list, and counts them, at once).
    let mem = |h: &crate::core::session::ClientHandle| {
        (h.tot_mem.load(Ordering::Relaxed) + h.outbox.pending()) as u64
    };
    // Replicas are neither counted nor evicted (Redis's
    // clientEvictionAllowed: normal and pub/sub clients only).
    let counted = |h: &&Arc<crate::core::session::ClientHandle>| {
        !h.killed.load(Ordering::Relaxed) && !h.replica.load(Ordering::Relaxed)
    };
    let mut total: u64 = guard.values().filter(counted).map(|h| mem(h)).sum();
    while total >= limit {
        let Some(h) = guard
            .values()
            .filter(counted)
            .filter(|h| !h.no_evict.load(Ordering::Relaxed))
            .max_by_key(|h| mem(h))
        else {
            break;
        };
        crate::subsystems::log::verbose(&format!(
            "Evicting client: id={} addr={} laddr={} tot-mem={}",
            h.id,
            h.addr,
            h.laddr,
            mem(h)
        ));
        total -= mem(h).min(total);
        h.kill();
        shared.evictor.evicted_clients.fetch_add(1, Ordering::Relaxed);
    }
}

/// What clients closed but not yet freed hold (their last `tot-mem`).
/// Redis frees an evicted or killed client at once; here its connection's
/// thread frees it when it next runs, so until then its memory is on its
/// way out and must not make keys be evicted (client eviction closing
/// clients over `maxmemory-clients` would otherwise evict keys too).
fn closing_clients_mem(clients: &BTreeMap<u64, Arc<crate::core::session::ClientHandle>>) -> u64 {
    clients
        .values()
        .filter(|h| h.killed.load(Ordering::Relaxed))
        .map(|h| h.tot_mem.load(Ordering::Relaxed) as u64)
        .sum()
}

/// A key's footprint when the allocator cannot say (engine unit tests).
fn estimate(key: &[u8], e: &store::Record) -> u64 {
    use store::Value;
    let value = match &e.value {
        Value::Int(_) => 0,
        Value::Emb(b) => b.len(),
        Value::Raw(v) => v.capacity(),
        Value::Hll(h) => h.heap_size(),
        // Only reached without the allocator's counters: a rough guess.
        _ => 256,
    };
    (key.len() + 64 + value) as u64
}

/// The next victim: `(db, key)`.
fn pick(shared: &Shared, policy: Policy, samples: usize) -> Option<(usize, Vec<u8>)> {
    let store = &shared.store;
    let dbs = store.databases();
    let volatile = policy.volatile();
    if policy.random() {
        for _ in 0..dbs {
            let db = shared.evictor.next_db.fetch_add(1, Ordering::Relaxed) % dbs;
            if !store.db_maybe_keys(db, volatile) {
                continue;
            }
            let mut found = None;
            store.sample_keys(db, volatile, 1, &mut |k, _, _| found = Some(k.to_vec()));
            if let Some(k) = found {
                return Some((db, k));
            }
        }
        return None;
    }
    let clock = shared.lru_clock();
    let decay = shared.lfu.decay_time();
    let now_min = lfu_minutes(shared.clock.now_ms());
    let mut pool = shared.evictor.pool.lock();
    loop {
        let mut sampled = 0;
        for db in 0..dbs {
            if !store.db_maybe_keys(db, volatile) {
                continue;
            }
            sampled += store.sample_keys(db, volatile, samples, &mut |k, e, expire_at| {
                let score = match policy {
                    Policy::VolatileTtl => u64::MAX - expire_at as u64,
                    p if p.lfu() => 255 - u64::from(lfu_decayed(e.lru, now_min, decay)),
                    _ => u64::from(lru_idle(clock, e.lru)),
                };
                offer(&mut pool, score, db, k);
            });
        }
        if sampled == 0 {
            return None;
        }
        // The best candidate that still exists (the pool may hold keys
        // deleted since they were sampled).
        while let Some(c) = pool.pop() {
            let g = store.lock_stripe(c.db, store.stripe_of(&c.key) as usize);
            let live = match g.peek(&c.key) {
                Some(e) => !volatile || e.has_ttl(),
                None => false,
            };
            drop(g);
            if live {
                return Some((c.db, c.key));
            }
        }
    }
}

/// Redis's `evictionPoolPopulate` insertion: the pool stays sorted and
/// bounded; a candidate worse than a full pool's worst is dropped.
fn offer(pool: &mut Vec<Candidate>, score: u64, db: usize, key: &[u8]) {
    if pool.iter().any(|c| c.db == db && c.key == key) {
        return;
    }
    let at = pool.partition_point(|c| c.score < score);
    if pool.len() >= POOL_SIZE {
        if at == 0 {
            return;
        }
        pool.remove(0);
        pool.insert(at - 1, Candidate { score, db, key: key.to_vec() });
    } else {
        pool.insert(at, Candidate { score, db, key: key.to_vec() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_decay_follows_redis() {
        // 3 minutes idle with lfu-decay-time 1: three periods off.
        assert_eq!(lfu_decayed((10 << 8) | 20, 13, 1), 17);
        assert_eq!(lfu_decayed((10 << 8) | 2, 13, 1), 0);
        assert_eq!(lfu_decayed((10 << 8) | 20, 13, 0), 20);
        // The minute counter wraps at 16 bits (Redis counts 65535 - ldt +
        // now: 9 minutes here, four periods of 2).
        assert_eq!(lfu_decayed((65530 << 8) | 20, 4, 2), 16);
    }

    #[test]
    fn tenacity_follows_redis() {
        use std::time::Duration;
        assert_eq!(time_limit(0), Duration::ZERO);
        assert_eq!(time_limit(10), Duration::from_micros(500));
        assert_eq!(time_limit(11), Duration::from_micros(575));
        // About two minutes at 99, as Redis's comment says.
        assert!((100..140).contains(&time_limit(99).as_secs()));
        assert_eq!(time_limit(100), Duration::MAX);
    }

    #[test]
    fn pool_keeps_the_best_sixteen() {
        let mut pool = Vec::new();
        for s in 0..40u64 {
            offer(&mut pool, (s * 7) % 40, 0, format!("k{s}").as_bytes());
        }
        assert_eq!(pool.len(), POOL_SIZE);
        let scores: Vec<u64> = pool.iter().map(|c| c.score).collect();
        assert_eq!(scores, (24..40).collect::<Vec<_>>());
        offer(&mut pool, 1, 0, b"worse");
        assert!(pool.iter().all(|c| c.key != b"worse"));
    }
}
