//! The MONITOR feed: clients that see every command the server runs, as
//! Redis prints them (`+<unix time>.<µs> [<db> <addr>] "ARG" …`). The
//! `MONITOR` command that joins it is the `commands::monitor` family.
//!
//! The dispatcher's `call` feeds the monitors after a command ran (so a
//! transaction's commands appear as EXEC runs them, before the `EXEC`
//! line), except commands flagged ADMIN or SKIP_MONITOR, a blocked
//! client's command served again, and replayed ones; lines reach each
//! monitor through its outbox. Arguments a handler marked secret (AUTH's,
//! HELLO's AUTH pair) are printed `(redacted)`. A monitor may not touch
//! the keyspace afterwards; RESET ends monitoring.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::core::dispatch::Caller;
use crate::core::session::Session;
use crate::core::shared::Shared;
use crate::core::spec::{CommandSpec, Flags};

/// Stops a session's monitoring (RESET, disconnect).
pub fn stop(shared: &Shared, sess: &mut Session) {
    if !sess.monitor {
        return;
    }
    sess.monitor = false;
    sess.update_modal();
    sess.handle.monitor.store(false, Ordering::Relaxed);
    let mut m = shared.monitors.write();
    m.retain(|h| h.id != sess.handle.id);
    shared.nmonitors.store(m.len(), Ordering::Release);
}

/// Appends `a` quoted as Redis's `sdscatrepr` does.
pub(crate) fn repr(line: &mut Vec<u8>, a: &[u8]) {
    line.push(b'"');
    for &c in a {
        match c {
            b'\\' | b'"' => line.extend_from_slice(&[b'\\', c]),
            b'\n' => line.extend_from_slice(b"\\n"),
            b'\r' => line.extend_from_slice(b"\\r"),
            b'\t' => line.extend_from_slice(b"\\t"),
            7 => line.extend_from_slice(b"\\a"),
            8 => line.extend_from_slice(b"\\b"),
            0x20..=0x7e => line.push(c),
            _ => {
                let mut s = String::new();
                let _ = write!(s, "\\x{c:02x}");
                line.extend_from_slice(s.as_bytes());
            }
        }
    }
    line.push(b'"');
}

/// Feeds one executed command to every monitor (called by `call` when
/// monitors exist).
#[cold]
pub fn feed(
    shared: &Shared,
    sess: &mut Session,
    spec: &CommandSpec,
    argv: &[&[u8]],
    caller: Caller,
) {
    let redact = std::mem::take(&mut sess.redact);
    if spec.flags.0 & (Flags::ADMIN.0 | Flags::SKIP_MONITOR.0) != 0
        || matches!(caller, Caller::Served | Caller::Replay)
        // QUIT: Redis answers it before running anything.
        || sess.close_after_reply
    {
        return;
    }
    send(shared, sess, argv, caller, redact);
}

/// Feeds a script run (EVAL, FCALL and their variants) to the monitors as
/// it starts, before the commands it calls: Redis shows the script's own
/// line first although the command is flagged skip_monitor.
#[cold]
pub fn feed_script(shared: &Shared, sess: &mut Session, argv: &[&[u8]], caller: Caller) {
    if matches!(caller, Caller::Client | Caller::Exec) {
        send(shared, sess, argv, caller, 0);
    }
}

fn send(shared: &Shared, sess: &mut Session, argv: &[&[u8]], caller: Caller, redact: u64) {
    let us = crate::core::shared::unix_us();
    let mut line = Vec::with_capacity(64);
    let who = match caller {
        Caller::Script { .. } => "lua".to_string(),
        _ => sess.handle.addr.clone(),
    };
    line.extend_from_slice(
        format!("+{}.{:06} [{} {}]", us / 1_000_000, us % 1_000_000, sess.db, who).as_bytes(),
    );
    for (i, a) in argv.iter().enumerate() {
        line.push(b' ');
        if redact & (1u64 << i.min(63)) != 0 {
            line.extend_from_slice(b"\"(redacted)\"");
        } else {
            repr(&mut line, a);
        }
    }
    line.extend_from_slice(b"\r\n");
    for m in shared.monitors.read().iter() {
        if !m.killed.load(Ordering::Acquire) {
            m.push(line.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_like_sdscatrepr() {
        let mut v = Vec::new();
        super::repr(&mut v, b"a \"b\\\n\r\t\x07\x08\x00\xff~");
        assert_eq!(v, b"\"a \\\"b\\\\\\n\\r\\t\\a\\b\\x00\\xff~\"");
    }
}
