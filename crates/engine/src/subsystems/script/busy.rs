//! The seam through which an event-loop thread keeps serving its other
//! clients while a script on it runs past `busy-reply-threshold` (what
//! Redis does with `processEventsWhileBlocked` from the Lua count hook).
//!
//! The engine owns no sockets and must not depend on the server: the
//! server hands a [`Hooks`] pair in its host (`Host::busy`). The script's
//! count hook (every 100,000 Lua instructions, as Redis's) calls
//! [`Hooks::during`] once the script is busy; the script's end calls
//! [`Hooks::ended`]. The server's hooks serve the calling thread's own
//! loop, and do nothing on a thread that runs none; without hooks
//! (tests, tools) the script just runs.
//!
//! What `during` may run is bounded by the dispatcher, not here: every
//! client command without `allow-busy` is answered BUSY by `check` before
//! it locks anything, so nothing it serves waits for the stripes the
//! script holds, and no script runs inside another (EVAL and FCALL are
//! not `allow-busy`).

use std::cell::Cell;

use crate::Shared;

/// What an event-loop thread does while a script of its own is busy.
#[derive(Clone, Copy)]
pub struct Hooks {
    /// Serve the thread's other connections (read, answer, accept),
    /// without waiting; called from the script's count hook.
    pub during: fn(&Shared),
    /// The busy script ended: the connections served meanwhile go back
    /// to their own loop.
    pub ended: fn(&Shared),
}

thread_local! {
    /// Set while `during` runs on this thread: it is never entered twice.
    static SERVING: Cell<bool> = const { Cell::new(false) };
}

/// From a busy script's count hook: lets the thread serve its other
/// clients. A panic in there is contained (it must not unwind through
/// Lua's C frames): the connection being served is dropped by its own
/// task later, the script carries on.
pub(crate) fn during(shared: &Shared) {
    let Some(hooks) = shared.host.busy else { return };
    if SERVING.with(|s| s.replace(true)) {
        return;
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (hooks.during)(shared)));
    SERVING.with(|s| s.set(false));
    if r.is_err() {
        crate::subsystems::log::warning("Serving clients while a script is busy panicked");
    }
}

/// A busy script of this thread ended.
pub(crate) fn ended(shared: &Shared) {
    if let Some(hooks) = shared.host.busy {
        (hooks.ended)(shared);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use resp::ReplyBuf;

    use super::*;
    use crate::tests::Harness;
    use crate::Session;

    thread_local! {
        static DURING: Cell<usize> = const { Cell::new(0) };
        static ENDED: Cell<usize> = const { Cell::new(0) };
        /// Another client of this thread, and what it was answered.
        static OTHER: RefCell<Option<Session>> = const { RefCell::new(None) };
        static REPLIES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    fn during(shared: &Shared) {
        DURING.with(|d| d.set(d.get() + 1));
        OTHER.with(|o| {
            let mut o = o.borrow_mut();
            let sess = o.as_mut().expect("the other client");
            for argv in
                [&["GET", "k"][..], &["WATCH", "k"], &["WATCH", "free"], &["SCRIPT", "KILL"]]
            {
                let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
                let mut out = ReplyBuf::new();
                crate::execute(shared, sess, &argv, &mut out);
                let r = String::from_utf8_lossy(&out.to_vec()).into_owned();
                REPLIES.with(|v| v.borrow_mut().push(r));
            }
        });
    }

    fn ended(_: &Shared) {
        ENDED.with(|e| e.set(e.get() + 1));
    }

    /// The hooks run only past the threshold: a script under it never
    /// calls them; one past it does, from its own thread, and what the
    /// other client sends there is answered without waiting for the
    /// stripes the script holds (BUSY for GET and for WATCH of its key,
    /// WATCH of a free key works) and SCRIPT KILL stops it.
    #[test]
    fn hooks_serve_the_thread_only_past_the_threshold() {
        let mut h = Harness::with_host(|_| crate::core::host::Host {
            busy: Some(Hooks { during, ended }),
            ..Default::default()
        });
        let other = h.shared.connect(String::new(), String::new(), -1);
        OTHER.with(|o| *o.borrow_mut() = Some(other));
        assert_eq!(h.run(&["EVAL", "for i = 1, 1e6 do end return 1", "1", "k"]), ":1\r\n");
        assert_eq!((DURING.with(Cell::get), ENDED.with(Cell::get)), (0, 0));
        assert_eq!(h.run(&["CONFIG", "SET", "busy-reply-threshold", "1"]), "+OK\r\n");
        let r = h.run(&["EVAL", "while true do end", "1", "k"]);
        assert!(r.starts_with("-ERR Script killed by user with SCRIPT KILL..."), "{r}");
        assert_eq!((DURING.with(Cell::get), ENDED.with(Cell::get)), (1, 1));
        let busy = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or \
                    SHUTDOWN NOSAVE.\r\n";
        let replies = REPLIES.with(|v| v.take());
        assert_eq!(replies, [busy, busy, "+OK\r\n", "+OK\r\n"]);
    }
}
