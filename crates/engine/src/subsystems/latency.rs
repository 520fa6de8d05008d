//! The latency monitor's events, as Redis 7.0's `latency.c`: named
//! sources of latency (`command`, `fast-command`, `expire-cycle`, …), each
//! keeping the last 160 per-second maxima at or above
//! `latency-monitor-threshold` and its all-time maximum. The callers that
//! measure (the dispatcher through `slowlog::record`, active expiry) add
//! samples only when the threshold is set; the `LATENCY` commands are the
//! `commands::latency` family.

use parking_lot::Mutex;

/// Redis's LATENCY_TS_LEN: samples kept per event.
pub(crate) const TS_LEN: usize = 160;

#[derive(Clone, Copy, Default)]
pub(crate) struct Sample {
    /// Unix seconds; 0 for an unused slot.
    pub(crate) time: i64,
    pub(crate) ms: u64,
}

pub(crate) struct Series {
    pub(crate) idx: usize,
    pub(crate) max: u64,
    pub(crate) samples: [Sample; TS_LEN],
}

/// The server's latency events, in the order they first occurred.
#[derive(Default)]
pub struct Monitor {
    pub(crate) events: Mutex<Vec<(String, Box<Series>)>>,
}

impl Monitor {
    /// `latencyAddSample`: one sample of `ms` for `event` at unix second
    /// `now`; samples of the same second keep their maximum.
    pub fn add(&self, event: &str, ms: u64, now: i64) {
        let mut g = self.events.lock();
        let i = match g.iter().position(|(n, _)| n == event) {
            Some(i) => i,
            None => {
                let s = Series { idx: 0, max: 0, samples: [Sample::default(); TS_LEN] };
                g.push((event.to_string(), Box::new(s)));
                g.len() - 1
            }
        };
        let ts = &mut g[i].1;
        ts.max = ts.max.max(ms);
        let prev = (ts.idx + TS_LEN - 1) % TS_LEN;
        if ts.samples[prev].time == now {
            ts.samples[prev].ms = ts.samples[prev].ms.max(ms);
            return;
        }
        ts.samples[ts.idx] = Sample { time: now, ms };
        ts.idx = (ts.idx + 1) % TS_LEN;
    }

    /// Forgets `event` (case-insensitive), or every event: how many went.
    pub(crate) fn reset(&self, event: Option<&[u8]>) -> usize {
        let mut g = self.events.lock();
        let before = g.len();
        g.retain(|(n, _)| event.is_some_and(|e| !e.eq_ignore_ascii_case(n.as_bytes())));
        before - g.len()
    }
}

impl Series {
    /// Used samples, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN).map(|j| self.samples[(self.idx + j) % TS_LEN]).filter(|s| s.time != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_of_one_second_keep_their_maximum() {
        let m = Monitor::default();
        m.add("command", 5, 100);
        m.add("command", 9, 100);
        m.add("command", 3, 100);
        m.add("command", 2, 101);
        let g = m.events.lock();
        let s: Vec<(i64, u64)> = g[0].1.iter().map(|s| (s.time, s.ms)).collect();
        assert_eq!(s, vec![(100, 9), (101, 2)]);
        assert_eq!(g[0].1.max, 9);
    }
}
