//! What Sluice adds to a Disque job (`docs/jobs.md`, "Extensions"): NACK
//! back-off, a dead-letter queue, an idempotency key and a period. Few
//! jobs carry any of it, so it lives beside the slab (a table by slot
//! handle, see `jobs.rs`) instead of in every 112-byte slot, and its part
//! of the record is written only when present: a job without extensions
//! keeps Disque's record version 1, byte for byte.

/// Longest back-off or period accepted, ms (a year): the delays are added
/// to Unix ms times, which must not overflow.
pub const MAX_SPAN_MS: i64 = 365 * 24 * 3600 * 1000;

/// A job's extensions; `Default` is none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ext {
    /// NACK back-off: the n-th NACK queues the job after
    /// `min(base × 2^(n-1), max)` ms instead of at once.
    pub backoff: Option<Backoff>,
    /// Dead-letter queue and the deliveries allowed before a job goes
    /// there (nacks + additional deliveries reaching `max`).
    pub dead_letter: Option<(Box<[u8]>, u16)>,
    /// The queue a dead-lettered job came from.
    pub dead_from: Option<Box<[u8]>>,
    /// Idempotency key: ADDJOB with the same key while this job exists
    /// answers this job's id.
    pub unique: Option<Box<[u8]>>,
    /// Periodic job: queued again every `every_ms` after each run.
    pub every: Option<Every>,
}

/// NACK back-off parameters, ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base_ms: i64,
    pub max_ms: i64,
}

impl Backoff {
    /// The delay before the job queued by its `nacks`-th NACK (1-based).
    pub fn delay(self, nacks: u16) -> i64 {
        let shift = u32::from(nacks.max(1) - 1).min(62);
        self.base_ms.saturating_mul(1i64 << shift).min(self.max_ms)
    }
}

/// A periodic job's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Every {
    /// The period, ms.
    pub period_ms: i64,
    /// Each run's time to live, ms (the job's TTL at ADDJOB).
    pub ttl_ms: i64,
    /// Unix ms the current run was due: the next is the first of
    /// `anchor + k × period` after the run ends.
    pub anchor: i64,
}

impl Every {
    /// The first run time after `now` on this schedule.
    pub fn next_after(self, now: i64) -> i64 {
        let p = self.period_ms.max(1);
        if now < self.anchor {
            return self.anchor;
        }
        let k = (now - self.anchor) / p + 1;
        self.anchor.saturating_add(k.saturating_mul(p))
    }
}

impl Ext {
    pub fn is_empty(&self) -> bool {
        *self == Ext::default()
    }

    /// Heap bytes it holds (memory estimates).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Ext>()
            + self.dead_letter.as_ref().map_or(0, |(q, _)| q.len())
            + self.dead_from.as_ref().map_or(0, |q| q.len())
            + self.unique.as_ref().map_or(0, |k| k.len())
    }

    /// Appends the record's extension section: tagged fields, each a tag
    /// byte and a u32 length before its bytes (little-endian numbers).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let mut field = |tag: u8, parts: &[&[u8]]| {
            out.push(tag);
            let len: usize = parts.iter().map(|p| p.len()).sum();
            out.extend_from_slice(&(len as u32).to_le_bytes());
            for p in parts {
                out.extend_from_slice(p);
            }
        };
        if let Some(b) = self.backoff {
            field(TAG_BACKOFF, &[&b.base_ms.to_le_bytes(), &b.max_ms.to_le_bytes()]);
        }
        if let Some((q, max)) = &self.dead_letter {
            field(TAG_DEAD_LETTER, &[&max.to_le_bytes(), q]);
        }
        if let Some(q) = &self.dead_from {
            field(TAG_DEAD_FROM, &[q]);
        }
        if let Some(k) = &self.unique {
            field(TAG_UNIQUE, &[k]);
        }
        if let Some(e) = self.every {
            field(
                TAG_EVERY,
                &[&e.period_ms.to_le_bytes(), &e.ttl_ms.to_le_bytes(), &e.anchor.to_le_bytes()],
            );
        }
    }

    /// Reads the section written by [`encode`](Self::encode) (all of `b`).
    /// An unknown tag, a short field or a value out of bounds is an error.
    pub(crate) fn decode(mut b: &[u8]) -> Option<Ext> {
        let mut e = Ext::default();
        let i64_at = |v: &[u8], at: usize| {
            v.get(at..at + 8).map(|s| i64::from_le_bytes(s.try_into().expect("8 bytes")))
        };
        let span = |v: i64| (1..=MAX_SPAN_MS).contains(&v);
        while !b.is_empty() {
            let tag = b[0];
            let len = u32::from_le_bytes(b.get(1..5)?.try_into().ok()?) as usize;
            let v = b.get(5..5usize.checked_add(len)?)?;
            b = &b[5 + len..];
            match tag {
                TAG_BACKOFF if len == 16 => {
                    let (base_ms, max_ms) = (i64_at(v, 0)?, i64_at(v, 8)?);
                    if !span(base_ms) || !span(max_ms) || base_ms > max_ms {
                        return None;
                    }
                    e.backoff = Some(Backoff { base_ms, max_ms });
                }
                TAG_DEAD_LETTER if len >= 2 => {
                    let max = u16::from_le_bytes([v[0], v[1]]);
                    if max == 0 {
                        return None;
                    }
                    e.dead_letter = Some((v[2..].into(), max));
                }
                TAG_DEAD_FROM => e.dead_from = Some(v.into()),
                TAG_UNIQUE => e.unique = Some(v.into()),
                TAG_EVERY if len == 24 => {
                    let (period_ms, ttl_ms, anchor) =
                        (i64_at(v, 0)?, i64_at(v, 8)?, i64_at(v, 16)?);
                    if !span(period_ms) || ttl_ms <= 0 || anchor < 0 {
                        return None;
                    }
                    e.every = Some(Every { period_ms, ttl_ms, anchor });
                }
                _ => return None,
            }
        }
        Some(e)
    }
}

const TAG_BACKOFF: u8 = 1;
const TAG_DEAD_LETTER: u8 = 2;
const TAG_DEAD_FROM: u8 = 3;
const TAG_UNIQUE: u8 = 4;
const TAG_EVERY: u8 = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = Backoff { base_ms: 100, max_ms: 1000 };
        let got: Vec<i64> = (1..=6).map(|n| b.delay(n)).collect();
        assert_eq!(got, [100, 200, 400, 800, 1000, 1000]);
        let huge = Backoff { base_ms: MAX_SPAN_MS, max_ms: MAX_SPAN_MS };
        assert_eq!(huge.delay(u16::MAX), MAX_SPAN_MS);
        assert_eq!(b.delay(0), 100);
    }

    /// What a job with extensions costs beside its slot (docs/jobs.md).
    #[test]
    fn an_ext_is_112_bytes() {
        assert_eq!(std::mem::size_of::<Ext>(), 112);
    }

    #[test]
    fn next_run_is_on_the_schedule() {
        let e = Every { period_ms: 1000, ttl_ms: 5000, anchor: 10_000 };
        assert_eq!(e.next_after(9_000), 10_000);
        assert_eq!(e.next_after(10_000), 11_000);
        assert_eq!(e.next_after(13_500), 14_000);
    }

    #[test]
    fn section_round_trips_and_rejects_bad_fields() {
        let e = Ext {
            backoff: Some(Backoff { base_ms: 5, max_ms: 60_000 }),
            dead_letter: Some((b"dead\r\n".as_slice().into(), 3)),
            dead_from: Some(b"q".as_slice().into()),
            unique: Some(b"".as_slice().into()),
            every: Some(Every { period_ms: 1000, ttl_ms: 2000, anchor: 77 }),
        };
        let mut b = Vec::new();
        e.encode(&mut b);
        assert_eq!(Ext::decode(&b), Some(e));
        for n in 0..b.len() {
            // A prefix that ends between fields is a valid shorter section.
            if let Some(got) = Ext::decode(&b[..n]) {
                assert!(got.every.is_none(), "prefix {n}");
            }
        }
        assert_eq!(Ext::decode(&[9, 0, 0, 0, 0]), None);
        let bad = Ext { backoff: Some(Backoff { base_ms: 10, max_ms: 5 }), ..Ext::default() };
        let mut b = Vec::new();
        bad.encode(&mut b);
        assert_eq!(Ext::decode(&b), None);
    }
}
