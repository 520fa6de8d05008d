//! Crash reports, as Redis's `sigsegvHandler`: on SIGSEGV, SIGBUS,
//! SIGFPE, SIGILL and SIGABRT the process logs a bug report (with
//! `crash-log-enabled yes`, the default) — the "crashed by signal" line,
//! who sent the signal or the faulting address, a stack trace — then dies
//! of the same signal with its default action, so a supervisor sees the
//! real cause. DEBUG SEGFAULT reaches here, and DEBUG PANIC's abort.
//!
//! The report allocates and takes the log's lock, which a handler should
//! not; Redis's report is no safer (it calls into the allocator for its
//! INFO dump). An alarm bounds it: if the report itself hangs (a crash
//! inside the allocator), SIGALRM's default action ends the process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use engine::subsystems::log;
use engine::Shared;

/// The server, for the handler to read `crash-log-enabled` (without
/// waiting for the configuration's lock).
static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();
/// Set by the first crash: a second signal during the report ends the
/// process at once.
static CRASHING: AtomicBool = AtomicBool::new(false);

const SIGNALS: [libc::c_int; 5] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGABRT];

/// Installs the handlers (once the server is set up, as Redis does).
pub fn install(shared: &Arc<Shared>) {
    let _ = SHARED.set(shared.clone());
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction with an SA_SIGINFO handler of the
        // right signature; SA_RESETHAND restores the default action as
        // the handler starts, so re-raising the signal ends the process.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_crash
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_RESETHAND;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether `crash-log-enabled` is on (yes when the configuration is busy).
fn report_enabled() -> bool {
    SHARED.get().is_none_or(|sh| {
        sh.config
            .try_read()
            .is_none_or(|c| c.get_by_name("crash-log-enabled").is_none_or(|v| v == b"yes"))
    })
}

extern "C" fn on_crash(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    if !CRASHING.swap(true, Ordering::SeqCst) && report_enabled() {
        // SAFETY: alarm has no memory effects.
        unsafe { libc::alarm(10) };
        report(sig, info);
    }
    // SAFETY: the action is the default again (SA_RESETHAND): the process
    // ends of `sig`, as it would have without the handler.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

fn report(sig: libc::c_int, info: *mut libc::siginfo_t) {
    log::raw(
        log::Level::Warning,
        "\n\n=== SLUICE BUG REPORT START: Cut & paste starting from here ===\n",
    );
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler
    // (null only when raised without one).
    let (code, pid, uid, addr) = match unsafe { info.as_ref() } {
        Some(i) => unsafe { (i.si_code, i.si_pid(), i.si_uid(), i.si_addr()) },
        None => (0, 0, 0, std::ptr::null_mut()),
    };
    log::from_handler(&format!(
        "Sluice {} (redis_version {}) crashed by signal: {sig}, si_code: {code}",
        env!("CARGO_PKG_VERSION"),
        engine::subsystems::config::REDIS_VERSION
    ));
    if code == libc::SI_USER || code == libc::SI_TKILL {
        log::from_handler(&format!("Killed by PID: {pid}, UID: {uid}"));
    } else if sig == libc::SIGSEGV || sig == libc::SIGBUS {
        log::from_handler(&format!("Accessing address: {addr:p}"));
    }
    let trace = std::backtrace::Backtrace::force_capture();
    log::raw(log::Level::Warning, &format!("\n------ STACK TRACE ------\n{trace}\n"));
    log::raw(
        log::Level::Warning,
        "\n=== SLUICE BUG REPORT END. Make sure to include from START to END. ===\n\n",
    );
}
