//! Durable acknowledgement (`DURABLE`, `docs/durable.md`): how a
//! connection in that mode holds a batch's replies.
//!
//! The batch runs as any other, into the same reply buffer; the batch
//! loop notes which replies answered writes ([`Held::note`]: the
//! command dirtied the keyspace or the AOF numbered it). Then, before the
//! buffer is written, [`wait`] asks the replicas for an acknowledgement
//! once (`REPLCONF GETACK *`, shared by every batch fed before it; a
//! Sluice replica acknowledges each batch it applies without being
//! asked), asks the AOF for an fsync with `FSYNC`, and sleeps until
//! enough replicas acknowledged the stream offset reached by the batch,
//! the AOF fsynced the batch's last write, or the timeout. Replies keep
//! their order: everything after a held write waits with it, since the
//! whole batch is written at once. On a timeout each held write's reply
//! is replaced by an error that says how far it got; the others go out
//! unchanged.
//!
//! A connection not in the mode pays one branch per batch (which batch
//! loop runs); the held replies stay in the connection's reply buffer,
//! so they count toward its output limits as any reply does.

use std::future::Future;
use std::time::Duration;

use engine::core::session::Durable;
use resp::{Mark, ReplyBuf};

use crate::signal::Signal;

/// The replies of a batch that answered writes.
#[derive(Default)]
pub struct Held {
    /// Where the batch's first held reply starts.
    first: Option<Mark>,
    /// Each held reply, as a byte range counted from `first`.
    writes: Vec<(usize, usize)>,
}

/// What a command looked like before it ran, to tell a write after.
#[derive(Clone, Copy)]
pub struct Before {
    mark: Mark,
    dirty: u64,
    position: u64,
}

impl Held {
    /// The state before a command of a durable batch runs.
    #[inline]
    pub fn before(out: &ReplyBuf, sess: &engine::Session) -> Before {
        Before { mark: out.mark(), dirty: sess.stats.dirty, position: sess.fx.last_position() }
    }

    /// After the command: holds its reply if it wrote (dirtied the
    /// keyspace, or was numbered by the AOF) and replied at all (CLIENT
    /// REPLY OFF leaves nothing to hold or replace).
    #[inline]
    pub fn note(&mut self, out: &ReplyBuf, sess: &engine::Session, b: Before) {
        let wrote = sess.stats.dirty != b.dirty || sess.fx.last_position() != b.position;
        let len = out.since(b.mark);
        if !wrote || len == 0 {
            return;
        }
        let first = *self.first.get_or_insert(b.mark);
        let end = out.since(first);
        self.writes.push((end - len, end));
    }

    /// Whether a reply is held.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// Waits until the held writes are acknowledged as `mode` asks, or its
/// timeout; on a timeout, rewrites their replies in `out` as errors. A
/// kill or a wake-up of the connection (`notify`) ends the wait early
/// only when the connection was killed.
pub async fn wait(
    shared: &engine::Shared,
    sess: &engine::Session,
    out: &mut ReplyBuf,
    held: Held,
    mode: Durable,
    notify: &Signal,
) {
    let node = crate::host::node(shared);
    let master = &node.master;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(mode.timeout_ms);
    let want = mode.replicas as usize;
    // A replica's own writes reach no replica of its own.
    let replica = shared.store.is_replica();
    let target = engine::subsystems::repl::Replication::offset(&**master);
    let seq = sess.fx.last_position();
    if mode.fsync && node.durable.is_active() {
        node.aof.request_fsync();
    }
    let mut got = 0;
    if want > 0 && !replica {
        master.ask_for_acks();
        loop {
            let acked = master.acks().notified();
            tokio::pin!(acked);
            acked.as_mut().enable();
            got = master.acked_now(target);
            if got >= want || sess.handle.killed.load(std::sync::atomic::Ordering::Acquire) {
                break;
            }
            let sleep = tokio::time::sleep_until(deadline);
            tokio::pin!(sleep);
            let timed_out = std::future::poll_fn(|cx| {
                if acked.as_mut().poll(cx).is_ready() || notify.poll(cx).is_ready() {
                    return std::task::Poll::Ready(false);
                }
                sleep.as_mut().poll(cx).map(|()| true)
            })
            .await;
            if timed_out {
                got = master.acked_now(target);
                break;
            }
        }
    }
    let aof_on = node.durable.is_active();
    let fsynced = !mode.fsync || node.durable.wait_fsynced(seq, deadline).await;
    if got >= want && fsynced {
        return;
    }
    let why = refusal(got, want, mode, fsynced, aof_on);
    replace_held(out, &held, why.as_bytes());
}

/// The error a held write's reply becomes.
fn refusal(got: usize, want: usize, mode: Durable, fsynced: bool, aof_on: bool) -> String {
    let t = mode.timeout_ms;
    let local =
        if aof_on { "not fsynced by the local AOF" } else { "not fsynced: appendonly is off" };
    if got < want {
        let mut s = format!(
            "NOREPLICAS Write applied locally, acknowledged by {got} of {want} replicas within {t} ms"
        );
        if !fsynced {
            s.push_str("; ");
            s.push_str(local);
        }
        s
    } else if aof_on {
        format!(
            "NOFSYNC Write applied locally and acknowledged by {got} of {want} replicas, but {local} \
             within {t} ms"
        )
    } else {
        format!(
            "NOFSYNC Write applied locally and acknowledged by {got} of {want} replicas, but {local}"
        )
    }
}

/// Replaces each held reply in `out` by the error `line` (without `-`).
fn replace_held(out: &mut ReplyBuf, held: &Held, line: &[u8]) {
    let Some(first) = held.first else { return };
    let tail = out.split_off(first);
    let mut prev = 0;
    for &(start, end) in &held.writes {
        out.raw(&tail[prev..start]);
        out.error(line);
        prev = end;
    }
    out.raw(&tail[prev..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_replies_are_replaced_in_place_and_the_rest_kept() {
        engine::commands::table(); // a session reads the installed table
        let mut sess = engine::Session::detached(1);
        let mut out = ReplyBuf::new();
        out.raw(b"+before\r\n");
        let mut held = Held::default();
        // A write, a read, a write.
        let b = Held::before(&out, &sess);
        out.ok();
        sess.stats.dirty += 1;
        held.note(&out, &sess, b);
        let b = Held::before(&out, &sess);
        out.bulk(b"v");
        held.note(&out, &sess, b);
        let b = Held::before(&out, &sess);
        out.int(2);
        sess.stats.dirty += 1;
        held.note(&out, &sess, b);
        assert_eq!(held.writes.len(), 2);
        replace_held(&mut out, &held, b"NOREPLICAS no");
        assert_eq!(
            String::from_utf8(out.to_vec()).unwrap(),
            "+before\r\n-NOREPLICAS no\r\n$1\r\nv\r\n-NOREPLICAS no\r\n"
        );
    }

    #[test]
    fn a_write_without_a_reply_is_not_held() {
        engine::commands::table(); // a session reads the installed table
        let mut sess = engine::Session::detached(1);
        let out = ReplyBuf::new();
        let mut held = Held::default();
        let b = Held::before(&out, &sess);
        sess.stats.dirty += 1;
        held.note(&out, &sess, b);
        assert!(held.is_empty());
    }

    #[test]
    fn refusals_say_how_far_the_write_got() {
        let m = Durable { replicas: 2, timeout_ms: 500, fsync: false };
        assert_eq!(
            refusal(1, 2, m, true, false),
            "NOREPLICAS Write applied locally, acknowledged by 1 of 2 replicas within 500 ms"
        );
        let m = Durable { replicas: 1, timeout_ms: 50, fsync: true };
        assert_eq!(
            refusal(0, 1, m, false, true),
            "NOREPLICAS Write applied locally, acknowledged by 0 of 1 replicas within 50 ms; not \
             fsynced by the local AOF"
        );
        assert_eq!(
            refusal(1, 1, m, false, false),
            "NOFSYNC Write applied locally and acknowledged by 1 of 1 replicas, but not fsynced: \
             appendonly is off"
        );
    }
}
