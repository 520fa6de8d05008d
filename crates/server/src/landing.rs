//! The one place a Unix signal lands. SIGTERM and SIGINT are the
//! process's, not one server's: the handler only records the signal here
//! (async-signal-safe stores), and every server's tick takes each new
//! one ([`poll`]), logs it in Redis's signal-handler form and starts its
//! own shutdown. These statics are the only per-process mutable state
//! of the server crate besides the crash handler's (`crash.rs`), which
//! lands the same way.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use engine::log::Logger;
use engine::Shared;

/// The last SIGTERM or SIGINT received.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// How many have been received (a server takes each once).
static RECEIVED: AtomicU64 = AtomicU64::new(0);
/// A signal asked for a shutdown that no server has finished or
/// cancelled (a second SIGINT then exits at once, as Redis's
/// `sigShutdownHandler`); the servers' ticks keep it up to date.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);
/// The process's own server's log, for the line the handler must write
/// itself (it exits right after). Set by the binary, once.
static PROCESS_LOG: OnceLock<Arc<Logger>> = OnceLock::new();

/// Installs the SIGTERM/SIGINT handlers before the server says it is
/// ready, so a signal sent right after "Ready to accept connections" is
/// a shutdown, never the default action. `log` is where "You insist..."
/// goes.
pub fn install(log: Arc<Logger>) {
    let _ = PROCESS_LOG.set(log);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction with a handler that stores to
        // atomics (and, on a second SIGINT, logs and exits).
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
    if sig == libc::SIGINT && SHUTTING_DOWN.load(Ordering::SeqCst) {
        // Redis's sigShutdownHandler: a second SIGINT does not wait for
        // the shutdown (its save, its replicas); the save's temporary
        // file goes.
        if let Some(l) = PROCESS_LOG.get() {
            l.from_handler("You insist... exiting now.");
        }
        crate::persistence::remove_temp_files();
        // SAFETY: _exit ends the process without running atexit handlers
        // or unwinding, which a signal handler must not start.
        unsafe { libc::_exit(1) };
    }
    SIGNAL.store(sig, Ordering::SeqCst);
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
    RECEIVED.fetch_add(1, Ordering::SeqCst);
}

/// From a server's tick: takes a signal it has not seen (logging it as
/// Redis's handler does) and starts or finishes its shutdown
/// ([`engine::shutdown`]).
pub fn poll(sh: &Shared) {
    let node = crate::host::node(sh);
    let received = RECEIVED.load(Ordering::SeqCst);
    if node.signal_seen.swap(received, Ordering::SeqCst) != received {
        let sig = SIGNAL.load(Ordering::SeqCst);
        let name = if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
        sh.host.log.from_handler(&format!("Received {name} scheduling shutdown..."));
        sh.pending_signal.store(sig, Ordering::SeqCst);
        sh.signalled.store(true, Ordering::SeqCst);
    }
    engine::shutdown::tick(sh);
    // SHUTDOWN ABORT (or a failed shutdown) forgets the signal.
    if received > 0 && !sh.signalled.load(Ordering::SeqCst) {
        SHUTTING_DOWN.store(false, Ordering::SeqCst);
    }
}

/// How many signals the process has received (a new server starts past
/// them).
pub fn received() -> u64 {
    RECEIVED.load(Ordering::SeqCst)
}
