//! The slow log, and the place where a finished call is offered to it and
//! to the latency monitor. Its commands (`SLOWLOG GET | LEN | RESET |
//! HELP`) are the `commands::slowlog` family.
//!
//! The dispatcher already times every call for `INFO commandstats`
//! (`cmdstats::Stopwatch`); it compares that duration with one threshold
//! the session caches from its configuration ([`slow_threshold`]), so a
//! fast call costs one comparison and nothing else. Only a call at or over
//! the threshold comes here ([`record`]), where the slow log and the
//! latency monitor apply their own limits as Redis does.

use std::collections::VecDeque;

use parking_lot::Mutex;

use crate::core::session::Session;
use crate::core::shared::Shared;
use crate::core::spec::{CommandSpec, Flags};
use crate::subsystems::config::Config;

/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const MAX_ARGC: usize = 32;
const MAX_STRING: usize = 128;

/// One slow call, as `SLOWLOG GET` replies it.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    /// Unix seconds when it was logged.
    pub(crate) time: i64,
    pub(crate) usec: u64,
    pub(crate) argv: Vec<Vec<u8>>,
    pub(crate) peer: String,
    pub(crate) name: Vec<u8>,
}

/// The server's slow log, newest first.
#[derive(Default)]
pub struct SlowLog {
    pub(crate) inner: Mutex<Inner>,
}

#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) entries: VecDeque<Entry>,
    next_id: u64,
}

/// The smallest duration (µs) worth a look by [`record`] under `c`:
/// `u64::MAX` when neither the slow log nor the latency monitor is on.
pub fn slow_threshold(c: &Config) -> u64 {
    let slowlog = if c.slowlog_log_slower_than >= 0 && c.slowlog_max_len > 0 {
        c.slowlog_log_slower_than as u64
    } else {
        u64::MAX
    };
    let latency = if c.latency_monitor_threshold > 0 {
        (c.latency_monitor_threshold as u64).saturating_mul(1000)
    } else {
        u64::MAX
    };
    slowlog.min(latency)
}

/// A call of `spec` with `argv` took `usec`, at least the session's
/// threshold: logs it where the slow log and the latency monitor want it
/// (`slowlogPushCurrentCommand`, `latencyAddSampleIfNeeded("command")`).
#[cold]
#[inline(never)]
pub fn record(shared: &Shared, sess: &mut Session, spec: &CommandSpec, argv: &[&[u8]], usec: u64) {
    let (slower_than, max_len, latency_ms) = {
        let c = sess.conf(shared);
        (c.slowlog_log_slower_than, c.slowlog_max_len, c.latency_monitor_threshold)
    };
    if latency_ms > 0 && (usec / 1000) as i64 >= latency_ms {
        let event = if spec.flags.has(Flags::FAST) { "fast-command" } else { "command" };
        shared.latency.add(event, usec / 1000, shared.clock.now_ms() / 1000);
    }
    if slower_than < 0 || max_len == 0 || (usec as i64) < slower_than {
        return;
    }
    if spec.flags.has(Flags::SKIP_SLOWLOG) {
        return;
    }
    let n = argv.len().min(MAX_ARGC);
    let mut args = Vec::with_capacity(n);
    for (i, a) in argv[..n].iter().enumerate() {
        if n < argv.len() && i == n - 1 {
            let more = argv.len() - n + 1;
            args.push(format!("... ({more} more arguments)").into_bytes());
        } else if sess.redact & (1u64 << i.min(63)) != 0 {
            args.push(b"(redacted)".to_vec());
        } else if a.len() > MAX_STRING {
            let mut v = a[..MAX_STRING].to_vec();
            v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
            args.push(v);
        } else {
            args.push(a.to_vec());
        }
    }
    let name = sess.handle.name.lock().clone().unwrap_or_default();
    let entry = Entry {
        id: 0,
        time: shared.clock.now_ms() / 1000,
        usec,
        argv: args,
        peer: sess.handle.addr.clone(),
        name,
    };
    shared.slowlog.push(entry, max_len);
}

impl SlowLog {
    fn push(&self, mut e: Entry, max_len: u64) {
        let mut g = self.inner.lock();
        e.id = g.next_id;
        g.next_id += 1;
        g.entries.push_front(e);
        // A shorter slowlog-max-len takes effect at the next push, as in Redis.
        g.entries.truncate(max_len as usize);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the log (ids keep counting).
    pub fn reset(&self) {
        self.inner.lock().entries.clear();
    }
}
