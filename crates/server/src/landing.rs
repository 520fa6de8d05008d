//! The one place a Unix signal lands. SIGTERM and SIGINT are the
//! process's, not one server's: the handler only records the signal here
//! (async-signal-safe stores), and every server's tick takes each new
//! one ([`take`], [`poll`]), logs it in Redis's signal-handler form and
//! starts its own shutdown; the binary's own server is also reached by
//! the handler itself, at once, as Redis's is. These statics are the
//! only per-process mutable state of the server crate besides the crash
//! handler's (`crash.rs`), which lands the same way.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use engine::Shared;

/// The last SIGTERM or SIGINT received.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// How many have been received (a server takes each once).
static RECEIVED: AtomicU64 = AtomicU64::new(0);
/// The process's own server (the binary's), which the handler reaches
/// at once as Redis's does: it logs the signal, records it (so SHUTDOWN
/// ABORT sees it even while DEBUG PAUSE-CRON holds the tick) and, on a
/// second SIGINT during its shutdown, exits. Set by the binary, once.
static PROCESS: OnceLock<Arc<Shared>> = OnceLock::new();

/// Installs the SIGTERM/SIGINT handlers before the server says it is
/// ready, so a signal sent right after "Ready to accept connections" is
/// a shutdown, never the default action. `process` is the binary's own
/// server.
pub fn install(process: &Arc<Shared>) {
    let _ = PROCESS.set(process.clone());
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction with a handler that stores to
        // atomics and logs (see `crash.rs` on logging from a handler).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    let process = PROCESS.get();
    if let Some(sh) = process {
        if sig == libc::SIGINT && sh.signalled.load(Ordering::SeqCst) {
            // Redis's sigShutdownHandler: a second SIGINT does not wait
            // for the shutdown (its save, its replicas); the save's
            // temporary file goes.
            sh.host.log.from_signal("You insist... exiting now.");
            // The lock is not waited for in a signal handler.
            if let Some(c) = sh.config.try_read() {
                crate::persistence::remove_temp_files(&c.dir);
            }
            // SAFETY: _exit ends the process without running atexit
            // handlers or unwinding, which a signal handler must not start.
            unsafe { libc::_exit(1) };
        }
    }
    // Nothing here may allocate, block on a lock or touch std's thread
    // handle: the handler can run on any thread, one being spawned too.
    let logged = process.is_some_and(|sh| {
        sh.host.log.from_signal(if sig == libc::SIGINT {
            "Received SIGINT scheduling shutdown..."
        } else {
            "Received SIGTERM scheduling shutdown..."
        })
    });
    SIGNAL.store(sig, Ordering::SeqCst);
    let received = RECEIVED.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(sh) = process {
        // A line the handler could not write is the tick's to write
        // ([`take`] logs a signal its server has not seen).
        if logged {
            crate::host::node(sh).signal_seen.store(received, Ordering::SeqCst);
        }
        sh.pending_signal.store(sig, Ordering::SeqCst);
        sh.signalled.store(true, Ordering::SeqCst);
    }
}

/// Takes a signal the server has not seen into its shared state,
/// logging it as Redis's handler does (`Host::signals`: SHUTDOWN ABORT
/// takes them first; the tick does, even while DEBUG PAUSE-CRON holds
/// the rest of it, as Redis's handler records the signal then).
pub fn take(sh: &Shared) {
    let node = crate::host::node(sh);
    let received = RECEIVED.load(Ordering::SeqCst);
    if node.signal_seen.swap(received, Ordering::SeqCst) != received {
        let sig = SIGNAL.load(Ordering::SeqCst);
        let name = if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
        sh.host.log.from_handler(&format!("Received {name} scheduling shutdown..."));
        sh.pending_signal.store(sig, Ordering::SeqCst);
        sh.signalled.store(true, Ordering::SeqCst);
    }
}

/// From a server's tick (not while DEBUG PAUSE-CRON holds it): takes a
/// new signal and starts or finishes the shutdown ([`engine::subsystems::shutdown`]).
pub fn poll(sh: &Shared) {
    take(sh);
    engine::subsystems::shutdown::tick(sh);
}

/// How many signals the process has received (a new server starts past
/// them).
pub fn received() -> u64 {
    RECEIVED.load(Ordering::SeqCst)
}
