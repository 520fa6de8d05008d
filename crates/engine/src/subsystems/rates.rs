//! Instantaneous rates for INFO (`instantaneous_ops_per_sec`,
//! `instantaneous_input_kbps`, `instantaneous_output_kbps`), as Redis's
//! `trackInstantaneousMetric`: the server's 100 ms timer samples the
//! running totals; a rate is the mean of the last 16 per-interval rates.

use parking_lot::Mutex;

const SAMPLES: usize = 16;

#[derive(Clone, Copy, Default)]
struct Metric {
    last_ms: i64,
    last: u64,
    samples: [u64; SAMPLES],
    idx: usize,
}

impl Metric {
    fn track(&mut self, now_ms: i64, value: u64) {
        let t = now_ms - self.last_ms;
        let delta = value.saturating_sub(self.last);
        self.samples[self.idx] = if t > 0 { delta * 1000 / t as u64 } else { 0 };
        self.idx = (self.idx + 1) % SAMPLES;
        self.last_ms = now_ms;
        self.last = value;
    }

    fn get(&self) -> u64 {
        self.samples.iter().sum::<u64>() / SAMPLES as u64
    }
}

/// Commands, input bytes and output bytes per second.
#[derive(Default)]
pub struct Rates {
    m: Mutex<[Metric; 3]>,
}

impl Rates {
    /// One sample of the totals (commands processed, bytes in, bytes out).
    pub fn track(&self, now_ms: i64, totals: [u64; 3]) {
        let mut m = self.m.lock();
        for (m, v) in m.iter_mut().zip(totals) {
            m.track(now_ms, v);
        }
    }

    /// (ops/s, input KiB/s, output KiB/s).
    pub fn get(&self) -> (u64, f64, f64) {
        let m = self.m.lock();
        (m[0].get(), m[1].get() as f64 / 1024.0, m[2].get() as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_rate_fills_in_over_sixteen_samples() {
        let r = Rates::default();
        r.track(1_000, [0, 0, 0]);
        for i in 1..=16u64 {
            r.track(1_000 + 100 * i as i64, [100 * i, 1024 * i, 0]);
        }
        // 100 commands per 100 ms; the first sample (from nothing) is 0.
        let (ops, kin, kout) = r.get();
        assert_eq!(ops, 1000);
        assert!((kin - 10.0).abs() < 1e-9 && kout == 0.0);
    }
}
