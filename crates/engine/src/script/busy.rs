//! The seam through which an event-loop thread keeps serving its other
//! clients while a script on it runs past `busy-reply-threshold` (what
//! Redis does with `processEventsWhileBlocked` from the Lua count hook).
//!
//! The engine owns no sockets and must not depend on the server: the
//! server installs, per event-loop thread, a [`Hooks`] pair. The script's
//! count hook (every 100,000 Lua instructions, as Redis's) calls
//! [`Hooks::during`] once the script is busy; the script's end calls
//! [`Hooks::ended`]. Threads without hooks (tests, tools) just run the
//! script, as before.
//!
//! What `during` may run is bounded by the dispatcher, not here: every
//! client command without `allow-busy` is answered BUSY by `check` before
//! it locks anything, so nothing it serves waits for the stripes the
//! script holds, and no script runs inside another (EVAL and FCALL are
//! not `allow-busy`).

use std::cell::Cell;

use crate::Shared;

/// What an event-loop thread does while a script of its own is busy.
pub struct Hooks {
    /// Serve the thread's other connections (read, answer, accept),
    /// without waiting; called from the script's count hook.
    pub during: fn(&Shared),
    /// The busy script ended: the connections served meanwhile go back
    /// to their own loop.
    pub ended: fn(&Shared),
}

thread_local! {
    static HOOKS: Cell<Option<&'static Hooks>> = const { Cell::new(None) };
    /// Set while `during` runs: it is never entered twice.
    static SERVING: Cell<bool> = const { Cell::new(false) };
}

/// Installs this thread's hooks (the server does, once per event loop).
pub fn install(hooks: &'static Hooks) {
    HOOKS.with(|h| h.set(Some(hooks)));
}

/// From a busy script's count hook: lets the thread serve its other
/// clients. A panic in there is contained (it must not unwind through
/// Lua's C frames): the connection being served is dropped by its own
/// task later, the script carries on.
pub(crate) fn during(shared: &Shared) {
    let Some(hooks) = HOOKS.with(|h| h.get()) else { return };
    if SERVING.with(|s| s.replace(true)) {
        return;
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (hooks.during)(shared)));
    SERVING.with(|s| s.set(false));
    if r.is_err() {
        crate::log::warning("Serving clients while a script is busy panicked");
    }
}

/// A busy script of this thread ended.
pub(crate) fn ended(shared: &Shared) {
    if let Some(hooks) = HOOKS.with(|h| h.get()) {
        (hooks.ended)(shared);
    }
}
