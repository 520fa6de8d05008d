//! Per-command statistics (`INFO commandstats`, `INFO latencystats`) and
//! error statistics (`INFO errorstats`), filled as Redis 7.0 fills them.
//!
//! Each command and subcommand has a stable index: its position in the
//! flattened table ([`CommandSpec::index`], `Table::entries`). A thread adds
//! the calls it runs to a few accumulators of its own ([`local`], no lock
//! and no allocation per command), which the connection flushes into the
//! shared atomics once per batch, where `INFO` reads them. Latencies go
//! into one HDR histogram per command (Redis's layout: 1 ns to 1 s, 2
//! significant digits), so the percentiles print as Redis prints them.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::core::spec::CommandSpec;
use crate::core::table::Table;

/// A call's start, for its duration: the CPU's time-stamp counter where
/// it is invariant (one instruction; a `clock_gettime` per call would cost
/// the GET path ~10% more instructions), else the monotonic clock.
#[derive(Clone, Copy)]
pub struct Stopwatch(u64);

enum Clock {
    /// Ticks per microsecond as 32.32 fixed point: usec = ticks * k >> 32.
    Tsc(u64),
    Mono(std::time::Instant),
}

fn clock() -> &'static Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    CLOCK.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            if cpuinfo.contains(" constant_tsc") && cpuinfo.contains(" nonstop_tsc") {
                // Measured against the system clock over a few ms, once.
                let t0 = std::time::Instant::now();
                let r0 = tsc();
                std::thread::sleep(std::time::Duration::from_millis(5));
                let (r1, us) = (tsc(), t0.elapsed().as_nanos() as f64 / 1000.0);
                let per_us = (r1.wrapping_sub(r0)) as f64 / us;
                if per_us >= 1.0 {
                    return Clock::Tsc(((1u64 << 32) as f64 / per_us) as u64);
                }
            }
        }
        Clock::Mono(std::time::Instant::now())
    })
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64; it reads a counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

impl Stopwatch {
    // Always, as `lap`, which reads the clock through it.
    #[inline(always)]
    pub fn start() -> Stopwatch {
        match clock() {
            #[cfg(target_arch = "x86_64")]
            Clock::Tsc(_) => Stopwatch(tsc()),
            Clock::Mono(base) => Stopwatch(base.elapsed().as_nanos() as u64),
            #[allow(unreachable_patterns)]
            _ => Stopwatch(0),
        }
    }

    /// Microseconds since `start`.
    #[inline]
    pub fn usec(self) -> u64 {
        self.lap().0
    }

    /// A stopwatch started at an earlier reading (the end of the previous
    /// command of a batch), or now when there is none (0).
    #[inline]
    pub fn resume(reading: u64) -> Stopwatch {
        if reading != 0 {
            Stopwatch(reading)
        } else {
            Stopwatch::start()
        }
    }

    /// Microseconds since `start`, and the reading they end at (where
    /// the next command of a batch starts).
    // Always: in the dispatcher's two inlined bodies (the general and
    // the lean path) the inliner otherwise leaves it a call.
    #[inline(always)]
    pub fn lap(self) -> (u64, u64) {
        let now = Stopwatch::start().0;
        let d = now.saturating_sub(self.0);
        let us = match clock() {
            Clock::Tsc(k) => ((d as u128 * *k as u128) >> 32) as u64,
            Clock::Mono(_) => d / 1000,
        };
        (us, now)
    }
}

/// Measures the clock now rather than at the first call (start-up).
pub fn init_clock() {
    clock();
}

/// The stable index of a command or subcommand ([`CommandSpec::index`]).
#[inline]
pub fn index_of(spec: &CommandSpec) -> usize {
    spec.index()
}

// Redis's histogram: hdr_init(1, 1_000_000_000, 2): 256 sub-buckets (half
// 128), unit magnitude 0, 23 buckets.
//
// Ours, not the `hdrhistogram` crate's: its percentiles are the same (p0
// to p100 over 20M samples), but its `Histogram` records through `&mut
// self`, and these counts are shared by every connection thread. Measured
// (release, 2 shared cores, best of 5, 20M records): these relaxed atomic
// adds 0.297 s; the crate's histogram behind a mutex 0.808 s (0.193 s
// unshared, which would mean a histogram per thread per command).
const SUB_HALF_MAG: u32 = 7;
const SUB_HALF: i64 = 1 << SUB_HALF_MAG;
const SUB_MASK: i64 = 255;
const COUNTS: usize = 24 * 128;
const HIST_MAX_NS: i64 = 1_000_000_000;

fn bucket_index(v: i64) -> i64 {
    // pow2ceiling - unit_magnitude - (sub_bucket_half_count_magnitude + 1)
    (64 - (v | SUB_MASK).leading_zeros() as i64) - (SUB_HALF_MAG as i64 + 1)
}

fn counts_index(v: i64) -> usize {
    let b = bucket_index(v);
    let sub = v >> b;
    (((b + 1) << SUB_HALF_MAG) + (sub - SUB_HALF)) as usize
}

fn value_at_index(i: usize) -> i64 {
    let mut b = (i as i64 >> SUB_HALF_MAG) - 1;
    let mut sub = (i as i64 & (SUB_HALF - 1)) + SUB_HALF;
    if b < 0 {
        sub -= SUB_HALF;
        b = 0;
    }
    sub << b
}

fn highest_equivalent(v: i64) -> i64 {
    let b = bucket_index(v);
    let sub = v >> b;
    let lowest = sub << b;
    let adjusted = if sub >= 256 { b + 1 } else { b };
    lowest + (1i64 << adjusted) - 1
}

/// One command's latency histogram, in nanoseconds.
struct Hist {
    counts: Box<[AtomicU64]>,
    total: AtomicU64,
}

impl Hist {
    fn new() -> Hist {
        Hist { counts: (0..COUNTS).map(|_| AtomicU64::new(0)).collect(), total: AtomicU64::new(0) }
    }

    /// `hdr_value_at_percentile`.
    fn value_at_percentile(&self, p: f64) -> i64 {
        let total = self.total.load(Relaxed);
        let want = (((p.min(100.0) / 100.0) * total as f64) + 0.5) as i64;
        let want = want.max(1) as u64;
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c.load(Relaxed);
            if seen >= want {
                let v = value_at_index(i);
                return if p == 0.0 { v } else { highest_equivalent(v) };
            }
        }
        0
    }
}

#[derive(Default)]
struct Slot {
    calls: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    hist: OnceLock<Hist>,
}

/// The server-wide statistics.
pub struct CmdStats {
    /// The table the slots follow (one per entry, in order).
    table: &'static Table,
    slots: Box<[Slot]>,
    /// Error replies by prefix (`ERR`, `WRONGTYPE`, …); touched only when
    /// an error is replied.
    errors: Mutex<BTreeMap<Vec<u8>, u64>>,
    total_errors: AtomicU64,
}

impl CmdStats {
    /// Statistics for every command and subcommand of `table`.
    pub fn new(table: &'static Table) -> Self {
        init_clock();
        CmdStats {
            table,
            slots: (0..table.entries().len()).map(|_| Slot::default()).collect(),
            errors: Mutex::new(BTreeMap::new()),
            total_errors: AtomicU64::new(0),
        }
    }
}

/// Redis's error prefix: the first word of the error line when a space
/// comes within its first 31 bytes, else `ERR`.
pub fn error_prefix(text: &[u8]) -> &[u8] {
    match text.iter().take(31).position(|&c| c == b' ') {
        Some(i) => &text[..i],
        None => b"ERR",
    }
}

impl CmdStats {
    /// Counts one error reply (`text` without the leading `-`).
    pub fn error(&self, text: &[u8]) {
        self.total_errors.fetch_add(1, Relaxed);
        let prefix = error_prefix(text);
        let mut m = self.errors.lock();
        match m.get_mut(prefix) {
            Some(n) => *n += 1,
            None => {
                m.insert(prefix.to_vec(), 1);
            }
        }
    }

    /// `total_error_replies`.
    pub fn total_errors(&self) -> u64 {
        self.total_errors.load(Relaxed)
    }

    /// Adds a session's accumulators; `track` says whether latency
    /// tracking is on.
    pub fn flush(&self, local: &mut LocalCmdStats, track: bool) {
        for a in local.acc[..local.n_acc].iter_mut() {
            let s = &self.slots[a.idx as usize];
            if a.calls > 0 {
                s.calls.fetch_add(a.calls as u64, Relaxed);
                s.usec.fetch_add(a.usec, Relaxed);
            }
            if a.rejected > 0 {
                s.rejected.fetch_add(a.rejected as u64, Relaxed);
            }
            if a.failed > 0 {
                s.failed.fetch_add(a.failed as u64, Relaxed);
            }
            *a = Acc { idx: a.idx, ..Acc::default() };
        }
        // The accumulators stay, emptied, for the commands that come
        // next (a connection flushes after each batch, mostly of the
        // same command); dropped only when all are taken.
        if local.n_acc == ACCS {
            local.n_acc = 0;
            local.acc[local.last_acc & (ACCS - 1)].idx = NONE;
        }
        let record = |(idx, usec, n): (u32, u32, u32)| {
            let h = self.slots[idx as usize].hist.get_or_init(Hist::new);
            let ns = (usec as i64).saturating_mul(1000).clamp(1, HIST_MAX_NS);
            h.counts[counts_index(ns)].fetch_add(n as u64, Relaxed);
            h.total.fetch_add(n as u64, Relaxed);
        };
        if track {
            local.samples[..local.n_samples].iter().copied().for_each(record);
            if local.run.2 > 0 {
                record(local.run);
            }
        }
        local.n_samples = 0;
        // The run stays too, empty, for the same command's next call.
        local.run.2 = 0;
    }

    /// `CONFIG RESETSTAT`.
    pub fn reset(&self) {
        for s in self.slots.iter() {
            for c in [&s.calls, &s.usec, &s.rejected, &s.failed] {
                c.store(0, Relaxed);
            }
            if let Some(h) = s.hist.get() {
                for c in h.counts.iter() {
                    c.store(0, Relaxed);
                }
                h.total.store(0, Relaxed);
            }
        }
        self.errors.lock().clear();
        self.total_errors.store(0, Relaxed);
    }

    /// `INFO commandstats` lines.
    pub fn commandstats(&self, out: &mut String) {
        use std::fmt::Write;
        for (s, e) in self.slots.iter().zip(self.table.entries()) {
            let (calls, usec) = (s.calls.load(Relaxed), s.usec.load(Relaxed));
            let (rejected, failed) = (s.rejected.load(Relaxed), s.failed.load(Relaxed));
            if calls == 0 && rejected == 0 && failed == 0 {
                continue;
            }
            let per = if calls == 0 { 0.0 } else { usec as f64 / calls as f64 };
            let _ = write!(
                out,
                "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per:.2},\
                 rejected_calls={rejected},failed_calls={failed}\r\n",
                e.name()
            );
        }
    }

    /// `INFO errorstats` lines.
    pub fn errorstats(&self, out: &mut String) {
        for (prefix, n) in self.errors.lock().iter() {
            out.push_str("errorstat_");
            out.push_str(&String::from_utf8_lossy(prefix));
            out.push_str(&format!(":count={n}\r\n"));
        }
    }

    /// `INFO latencystats` lines, for `percentiles` (Redis's default: 50,
    /// 99, 99.9).
    pub fn latencystats(&self, out: &mut String, percentiles: &[f64]) {
        use std::fmt::Write;
        for (s, e) in self.slots.iter().zip(self.table.entries()) {
            let Some(h) = s.hist.get() else { continue };
            if h.total.load(Relaxed) == 0 && s.calls.load(Relaxed) == 0 {
                continue;
            }
            let _ = write!(out, "latency_percentiles_usec_{}:", e.name());
            for (i, p) in percentiles.iter().enumerate() {
                let v = h.value_at_percentile(*p) as f64 / 1000.0;
                let sep = if i + 1 < percentiles.len() { "," } else { "" };
                let _ = write!(out, "p{}={v:.3}{sep}", trim_double(*p));
            }
            out.push_str("\r\n");
        }
    }
}

impl CmdStats {
    fn hist_of(&self, name: &str) -> Option<&Hist> {
        let i = self.table.entries().iter().position(|e| e.name() == name)?;
        self.slots[i].hist.get().filter(|h| h.total.load(Relaxed) > 0)
    }

    /// Full names of the commands with latency samples (LATENCY HISTOGRAM).
    pub fn with_histograms(&self) -> Vec<String> {
        self.table
            .entries()
            .iter()
            .zip(self.slots.iter())
            .filter(|(_, s)| s.hist.get().is_some_and(|h| h.total.load(Relaxed) > 0))
            .map(|(e, _)| e.name().to_string())
            .collect()
    }

    /// Whether command `name` (a full name, lower case) has samples.
    pub fn has_histogram(&self, name: &str) -> bool {
        self.hist_of(name).is_some()
    }

    /// `fillCommandCDF`: the calls and the cumulative counts at each power
    /// of two from 1,024 ns (hdr_iter_log_init(1024, 2)), as (µs, count),
    /// only where the count grew.
    pub fn cdf(&self, name: &str) -> (u64, Vec<(i64, u64)>) {
        let Some(h) = self.hist_of(name) else { return (0, Vec::new()) };
        let total = h.total.load(Relaxed);
        let mut points = Vec::new();
        let (mut level, mut cum, mut prev) = (1024i64, 0u64, 0u64);
        let mut i = 0usize;
        'report: loop {
            // hdr's log iterator: another step while counts remain or the
            // next bucket already passes the next reporting level.
            let lowest = lowest_equivalent(level);
            if !(cum < total || (i < COUNTS && value_at_index(i) > lowest)) {
                break;
            }
            loop {
                if i > 0 && value_at_index(i - 1) >= lowest {
                    let v = value_at_index(i - 1);
                    if cum > prev {
                        points.push((highest_equivalent(v) / 1000, cum));
                    }
                    prev = cum;
                    level *= 2;
                    continue 'report;
                }
                if i >= COUNTS {
                    break 'report;
                }
                cum += h.counts[i].load(Relaxed);
                i += 1;
            }
        }
        (total, points)
    }
}

fn lowest_equivalent(v: i64) -> i64 {
    let b = bucket_index(v);
    (v >> b) << b
}

/// `%f` with trailing zeros (and a trailing dot) removed, as Redis prints
/// a percentile's name.
pub fn trim_double(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[derive(Clone, Copy, Default, Debug)]
struct Acc {
    idx: u32,
    calls: u32,
    rejected: u32,
    failed: u32,
    usec: u64,
}

impl Acc {
    const EMPTY: Acc = Acc { idx: 0, calls: 0, rejected: 0, failed: 0, usec: 0 };
}

const ACCS: usize = 8;
const SAMPLES: usize = 32;

/// A thread's counters between flushes: a few per-command accumulators
/// and run-length-merged latency samples (command, usec, count).
#[derive(Clone, Debug)]
pub struct LocalCmdStats {
    acc: [Acc; ACCS],
    n_acc: usize,
    /// The accumulator used last (a batch repeats one command): below
    /// `n_acc`, or its `idx` is [`NONE`] (after a flush).
    last_acc: usize,
    samples: [(u32, u32, u32); SAMPLES],
    n_samples: usize,
    /// The latest run of samples (command, usec, count), kept out of
    /// `samples` until another begins: a batch's calls of one command
    /// mostly take the same microseconds, and adding to this run is one
    /// compare and one increment. A count of 0: empty (flushed), its
    /// command and usec kept for the next call to match.
    run: (u32, u32, u32),
}

/// No command (`idx` of an unused accumulator or run).
const NONE: u32 = u32::MAX;

impl Default for LocalCmdStats {
    fn default() -> Self {
        LocalCmdStats::new()
    }
}

thread_local! {
    /// This thread's accumulators, shared by every session the thread
    /// runs. What they hold is per command, not per client, and each
    /// caller flushes at the end of its unit of work (a connection after
    /// its batch, which runs from its first command to its last without
    /// giving up the thread), so which session a call came from does not
    /// matter. As a session's own (616 bytes) they were two or three cold
    /// cache lines a batch with a thousand connections taking turns; the
    /// thread's stay in cache.
    static LOCAL: UnsafeCell<LocalCmdStats> = const { UnsafeCell::new(LocalCmdStats::new()) };
}

/// This thread's accumulators.
///
/// # Safety
///
/// The caller holds the reference only while it has no other from this
/// function (it does not call back here before its last use: the
/// accumulators' own methods and [`CmdStats::flush`] never do). A plain
/// access, not a closure through `LocalKey::with`: that one was not
/// inlined on the request path (a call and some 25 instructions a
/// command).
#[inline(always)]
pub unsafe fn local<'a>() -> &'a mut LocalCmdStats {
    // SAFETY: the cell is this thread's and lives as long as the thread;
    // exclusivity is the caller's promise.
    unsafe { &mut *LOCAL.with(|l| l.get()) }
}

impl LocalCmdStats {
    /// Empty accumulators.
    pub const fn new() -> Self {
        let mut acc = [Acc::EMPTY; ACCS];
        acc[0].idx = NONE;
        LocalCmdStats {
            acc,
            n_acc: 0,
            last_acc: 0,
            samples: [(0, 0, 0); SAMPLES],
            n_samples: 0,
            run: (NONE, 0, 0),
        }
    }

    /// Whether the buffers are full and must be flushed before more is
    /// added.
    #[inline]
    pub fn full(&self) -> bool {
        self.n_acc == ACCS || self.n_samples == SAMPLES
    }

    /// The stable index of `spec` (a field of the spec since the table
    /// numbers them: no lookup to remember between calls).
    #[inline]
    pub fn index(&mut self, spec: &CommandSpec) -> usize {
        spec.index()
    }

    #[inline]
    fn acc(&mut self, idx: usize) -> &mut Acc {
        let idx = idx as u32;
        // The mask spares a bounds check: `last_acc` is below ACCS.
        let last = self.last_acc & (ACCS - 1);
        if self.acc[last].idx == idx {
            return &mut self.acc[last];
        }
        self.acc_slow(idx)
    }

    #[cold]
    fn acc_slow(&mut self, idx: u32) -> &mut Acc {
        let i = match self.acc[..self.n_acc].iter().position(|a| a.idx == idx) {
            Some(i) => i,
            None => {
                debug_assert!(self.n_acc < ACCS);
                let i = self.n_acc.min(ACCS - 1);
                self.n_acc = i + 1;
                self.acc[i] = Acc { idx, ..Acc::default() };
                i
            }
        };
        self.last_acc = i;
        &mut self.acc[i]
    }

    /// One completed call of command `idx` that took `usec`.
    #[inline(always)]
    pub fn call(&mut self, idx: usize, usec: u64, failed: bool) {
        let a = self.acc(idx);
        a.calls += 1;
        a.usec += usec;
        a.failed += u32::from(failed);
        let usec = usec.min(u32::MAX as u64) as u32;
        if self.run.0 == idx as u32 && self.run.1 == usec {
            self.run.2 += 1;
        } else {
            self.new_run(idx as u32, usec);
        }
    }

    /// Ends the latest run of samples (into `samples`, which has room:
    /// the caller flushed when it was full) and starts one.
    #[cold]
    fn new_run(&mut self, idx: u32, usec: u32) {
        if self.run.2 > 0 {
            let i = self.n_samples.min(SAMPLES - 1);
            self.samples[i] = self.run;
            self.n_samples = i + 1;
        }
        self.run = (idx, usec, 1);
    }

    /// The samples taken since the last flush, and none after (what a
    /// flush records).
    #[cfg(test)]
    fn take_samples(&mut self) -> Vec<(u32, u32, u32)> {
        let mut v = self.samples[..self.n_samples].to_vec();
        v.extend((self.run.2 > 0).then_some(self.run));
        self.n_samples = 0;
        self.run.2 = 0;
        v
    }

    /// One call of command `idx` refused before it ran.
    pub fn rejected(&mut self, idx: usize) {
        self.acc(idx).rejected += 1;
    }

    /// A failure counted apart from a call (a wait ended by an error).
    pub fn failed(&mut self, idx: usize) {
        self.acc(idx).failed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwatch_measures_microseconds() {
        let w = Stopwatch::start();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let us = w.usec();
        assert!((19_000..2_000_000).contains(&us), "{us}");
    }

    #[test]
    fn local_stats_keep_every_call_and_sample_across_runs_and_flushes() {
        let mut l = LocalCmdStats::default();
        let calls = [(3, 0), (3, 0), (3, 1), (5, 0), (3, 0), (3, 0), (5, 2), (5, 2)];
        for &(idx, us) in &calls {
            assert!(!l.full());
            l.call(idx, us, idx == 5);
        }
        let acc = |l: &LocalCmdStats, idx: u32| {
            l.acc[..l.n_acc].iter().find(|a| a.idx == idx).map(|a| (a.calls, a.usec, a.failed))
        };
        assert_eq!(acc(&l, 3), Some((5, 1, 0)));
        assert_eq!(acc(&l, 5), Some((3, 4, 3)));
        let mut got = l.take_samples();
        got.sort();
        assert_eq!(got, vec![(3, 0, 2), (3, 0, 2), (3, 1, 1), (5, 0, 1), (5, 2, 2)]);
        assert_eq!(l.take_samples().len(), 0);
        // The same usec again after the samples were taken: a new sample.
        l.call(5, 2, false);
        assert_eq!(l.take_samples(), vec![(5, 2, 1)]);
        // As a flush of full accumulators leaves them: the command used
        // last must not match.
        l.n_acc = 0;
        l.acc[l.last_acc & (ACCS - 1)].idx = NONE;
        l.call(5, 7, false);
        assert_eq!(acc(&l, 5), Some((1, 7, 0)));
        assert_eq!(l.take_samples(), vec![(5, 7, 1)]);
    }

    #[test]
    fn hdr_layout_matches_redis() {
        // Redis prints 1 ns (a 0 us call) as 0.001 and 1 us as 1.003 at
        // p50 (INFO latencystats of a fresh redis-server).
        let h = Hist::new();
        let rec = |ns: i64, n: u64| {
            h.counts[counts_index(ns)].fetch_add(n, Relaxed);
            h.total.fetch_add(n, Relaxed);
        };
        rec(1000, 3);
        assert_eq!(h.value_at_percentile(50.0), 1003);
        rec(1, 10);
        assert_eq!(h.value_at_percentile(50.0), 1);
        assert_eq!(h.value_at_percentile(99.0), 1003);
        rec(5000, 100);
        assert_eq!(h.value_at_percentile(99.9), 5023);
        assert_eq!(trim_double(99.9), "99.9");
        assert_eq!(trim_double(50.0), "50");
        assert_eq!(error_prefix(b"WRONGTYPE Operation against"), b"WRONGTYPE");
        assert_eq!(error_prefix(b"NOSPACEATALLINTHISVERYLONGERRORMESSAGE x"), b"ERR");
    }
}
