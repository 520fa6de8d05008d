//! The shutdown sequence, as Redis 7.0's `prepareForShutdown` and
//! `finishShutdown`: shared by `SHUTDOWN` and by SIGTERM/SIGINT (which the
//! server's tick hands over through [`tick`]).
//!
//! - **Waiting for replicas.** Unless `NOW` is given or `shutdown-timeout`
//!   is 0, a master whose replicas have not all acknowledged
//!   `master_repl_offset` does not stop at once: it asks them for an
//!   acknowledgement, pauses writes and waits until they are in sync or
//!   the timeout passes ([`tick`] checks both). A `SHUTDOWN` client waits
//!   blocked meanwhile (counted in `blocked_clients`); INFO shows
//!   `shutdown_in_milliseconds`.
//! - **Finishing.** Logs the replicas' state, stops a background save,
//!   refuses to exit while the AOF's first rewrite is still writing (the
//!   data would exist nowhere else), saves the final snapshot when asked
//!   to, and then sets [`Shared::shutdown`]; the server's loops stop and
//!   the process exits. A failure (without `FORCE`) cancels the shutdown:
//!   the waiting clients get `Errors trying to SHUTDOWN. Check logs.` and
//!   writes resume.
//! - **Aborting.** `SHUTDOWN ABORT` cancels a shutdown that waits, or one a
//!   signal asked for that the tick has not started yet.
//!
//! Lock order: the state mutex is taken before anything the save takes
//! (stripes); no stripe is held while taking it (SHUTDOWN declares no key).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::core::blocking::{self, Waiter};
use crate::core::shared::Shared;
use crate::subsystems::log;

/// The reply of a `SHUTDOWN` that could not complete.
pub const FAILED: &str = "Errors trying to SHUTDOWN. Check logs.";

/// `SHUTDOWN`'s modifiers, or those `shutdown-on-sigint`/`-sigterm` give.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub save: bool,
    pub nosave: bool,
    pub now: bool,
    pub force: bool,
}

impl Flags {
    /// Parses the words of `shutdown-on-sigint`/`-sigterm` (`default`, or
    /// any of `save`, `nosave`, `now`, `force`).
    pub fn from_config(v: &[u8]) -> Flags {
        let words: Vec<&[u8]> = v.split(|&c| c == b' ').collect();
        let has = |w: &str| words.iter().any(|x| x.eq_ignore_ascii_case(w.as_bytes()));
        Flags { save: has("save"), nosave: has("nosave"), now: has("now"), force: has("force") }
    }
}

/// What asking for a shutdown led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Finished: [`Shared::shutdown`] is set, the process is exiting.
    Exit,
    /// Waiting for lagging replicas; [`tick`] finishes it.
    Waiting,
    /// Could not finish (a failed save, the first AOF rewrite running):
    /// cancelled, the server goes on.
    Failed,
}

/// The shutdown in progress, if any.
#[derive(Default)]
pub struct State {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Unix ms when the wait for replicas ends; 0 when no shutdown waits.
    deadline_ms: i64,
    flags: Flags,
    /// The SHUTDOWN clients blocked until it finishes or fails.
    blocked: Vec<Arc<Waiter>>,
}

impl State {
    /// INFO's `shutdown_in_milliseconds`: present only while a shutdown
    /// waits for replicas.
    pub fn remaining_ms(&self, now_ms: i64) -> Option<i64> {
        let d = self.inner.lock().deadline_ms;
        (d != 0).then(|| (d - now_ms).max(0))
    }

    /// Whether a shutdown waits for replicas.
    pub fn waiting(&self) -> bool {
        self.inner.lock().deadline_ms != 0
    }
}

/// `SHUTDOWN` (without ABORT) from a client that may block: finishes now,
/// or registers the client to wait for the shutdown a lagging replica
/// holds up (its own, or one already in progress). `dirty` is the
/// change count the final save records.
pub fn request(
    sh: &Shared,
    flags: Flags,
    dirty: u64,
    wait: impl FnOnce() -> Arc<Waiter>,
) -> Outcome {
    let mut g = sh.shutdown_state.inner.lock();
    if g.deadline_ms != 0 {
        // Redis blocks the client and its prepareForShutdown declines: it
        // waits with the shutdown already in progress.
        g.blocked.push(wait());
        return Outcome::Waiting;
    }
    let out = prepare(sh, &mut g, flags, dirty);
    if out == Outcome::Waiting {
        g.blocked.push(wait());
    }
    out
}

/// `SHUTDOWN ABORT`: false when there is nothing to abort.
pub fn abort(sh: &Shared) -> bool {
    if let Some(take) = sh.host.signals {
        take(sh);
    }
    let mut g = sh.shutdown_state.inner.lock();
    if g.deadline_ms != 0 {
        cancel(sh, &mut g);
    } else if sh.signalled.swap(false, Ordering::SeqCst) {
        // Asked by a signal, not started yet: forgetting it is enough.
        sh.pending_signal.store(0, Ordering::SeqCst);
    } else {
        return false;
    }
    log::notice("Shutdown manually aborted.");
    true
}

/// The server's tick: starts the shutdown a signal asked for (with that
/// signal's `shutdown-on-*` flags), and finishes a waiting one once its
/// replicas are in sync or its time is up.
pub fn tick(sh: &Shared) {
    if sh.shutdown.load(Ordering::Relaxed) {
        return;
    }
    let mut g = sh.shutdown_state.inner.lock();
    if g.deadline_ms == 0 {
        if !sh.signalled.load(Ordering::SeqCst) {
            return;
        }
        let sig = sh.pending_signal.load(Ordering::SeqCst);
        let name = if sig == libc::SIGINT { "shutdown-on-sigint" } else { "shutdown-on-sigterm" };
        let words = sh.config.read().get_by_name(name).unwrap_or_default();
        let dirty = sh.stats.dirty.load(Ordering::Relaxed);
        prepare(sh, &mut g, Flags::from_config(&words), dirty);
        return;
    }
    if crate::core::shared::unix_ms() >= g.deadline_ms || replicas_in_sync(sh) {
        let dirty = sh.stats.dirty.load(Ordering::Relaxed);
        finish(sh, &mut g, dirty);
    }
}

/// Redis's `prepareForShutdown`.
fn prepare(sh: &Shared, g: &mut Inner, mut flags: Flags, dirty: u64) -> Outcome {
    // A save while loading would overwrite the file with half of it.
    if sh.is_loading() {
        flags.save = false;
        flags.nosave = true;
    }
    g.flags = flags;
    log::warning("User requested shutdown...");
    let timeout_s = sh.config.read().get_by_name("shutdown-timeout").map_or(0, |v| {
        std::str::from_utf8(&v).ok().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0)
    });
    if !flags.now && timeout_s != 0 && !replicas_in_sync(sh) {
        g.deadline_ms = crate::core::shared::unix_ms() + timeout_s * 1000;
        if let Some(r) = sh.host.replication.as_ref() {
            r.request_ack();
        }
        set_write_pause(sh, true);
        log::notice("Waiting for replicas before shutting down.");
        return Outcome::Waiting;
    }
    finish(sh, g, dirty)
}

/// Redis's `isReadyToShutdown`: every replica (in any state) acknowledged
/// the whole stream.
fn replicas_in_sync(sh: &Shared) -> bool {
    let Some(r) = sh.host.replication.as_ref() else { return true };
    let v = r.view();
    v.replicas.iter().all(|x| x.ack_offset == v.offset)
}

/// Redis's `finishShutdown`, its log lines included.
fn finish(sh: &Shared, g: &mut Inner, dirty: u64) -> Outcome {
    let flags = g.flags;
    if let Some(r) = sh.host.replication.as_ref() {
        let v = r.view();
        let mut lagging = 0;
        for x in v.replicas.iter().filter(|x| x.ack_offset != v.offset) {
            lagging += 1;
            let lag = if x.state == "online" { x.lag } else { 0 };
            log::warning(&format!(
                "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={}.",
                x.ip,
                x.port,
                v.offset - x.ack_offset,
                x.state
            ));
        }
        if !v.replicas.is_empty() {
            log::notice(&format!(
                "{} of {} replicas are in sync when shutting down.",
                v.replicas.len() - lagging,
                v.replicas.len()
            ));
        }
    }
    // A background save would race with the final one; it goes, and with
    // it its temporary file.
    if sh.persist.bgsave_in_progress.load(Ordering::Acquire) {
        log::warning("There is a child saving an .rdb. Killing it!");
        if let Some(s) = sh.host.snapshots.as_ref() {
            s.abort_bgsave();
        }
    }
    if let Some(aof) = sh.host.aof.as_ref() {
        let info = aof.info();
        if info.enabled && info.wait_rewrite {
            // The AOF's first rewrite holds the only complete copy it will
            // have: exiting now would leave an AOF without the data.
            if !flags.force {
                log::warning("Writing initial AOF, can't exit.");
                return fail(sh, g);
            }
            log::warning("Writing initial AOF. Exit anyway.");
        }
    }
    let points = !sh.config.read().save.is_empty();
    if (points && !flags.nosave) || flags.save {
        log::notice("Saving the final RDB snapshot before exiting.");
        let saved = sh.host.snapshots.as_ref().is_none_or(|s| s.save(dirty).is_ok());
        if !saved {
            if !flags.force {
                log::warning("Error trying to save the DB, can't exit.");
                return fail(sh, g);
            }
            log::warning("Error trying to save the DB. Exit anyway.");
        }
    }
    sh.shutdown.store(true, Ordering::Release);
    Outcome::Exit
}

fn fail(sh: &Shared, g: &mut Inner) -> Outcome {
    log::warning("Errors trying to shut down the server. Check the logs for more information.");
    cancel(sh, g);
    Outcome::Failed
}

/// Redis's `cancelShutdown`: the waiting clients get the error, writes
/// resume, a signal's request is forgotten.
fn cancel(sh: &Shared, g: &mut Inner) {
    sh.signalled.store(false, Ordering::SeqCst);
    sh.pending_signal.store(0, Ordering::SeqCst);
    let was_waiting = g.deadline_ms != 0;
    g.deadline_ms = 0;
    g.flags = Flags::default();
    for w in g.blocked.drain(..) {
        // The client's connection ends the wait (and its count).
        blocking::serve_keyless(&w, format!("-ERR {FAILED}\r\n").into_bytes());
    }
    if was_waiting {
        set_write_pause(sh, false);
    }
}

/// Holds writes while a shutdown waits for replicas (Redis's
/// `PAUSE_DURING_SHUTDOWN`), beside any CLIENT PAUSE.
fn set_write_pause(sh: &Shared, on: bool) {
    sh.change_pause(|p| p.shutdown = on);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_flags_read_as_redis_words_them() {
        assert_eq!(Flags::from_config(b"default"), Flags::default());
        let f = Flags::from_config(b"nosave now force");
        assert!(f.nosave && f.now && f.force && !f.save);
        assert!(Flags::from_config(b"save").save);
    }
}
