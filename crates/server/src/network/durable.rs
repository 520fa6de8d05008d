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

use engine::core::effects::ReplicaHold;
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
/// timeout; on a timeout, answers the line their replies become (see
/// [`replace_held`]). A kill or a wake-up of the connection (`notify`)
/// ends the wait early only when the connection was killed.
pub async fn wait(
    shared: &engine::Shared,
    sess: &engine::Session,
    mode: Durable,
    notify: &Signal,
) -> Option<String> {
    let node = crate::host::node(shared);
    let master = &node.master;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(mode.timeout_ms);
    let want = mode.replicas as usize;
    // A replica's own writes reach no replica of its own.
    let replica = shared.store.is_replica();
    // Another thread's batch may have ended the stream with its GETACK
    // since this batch ran (no new one is fed then): a replica answers it
    // with the offset before it, which holds every write of this batch.
    let target = master.offset_before_getack();
    let seq = sess.fx.last_position();
    if mode.fsync && node.durable.is_active() {
        node.aof.request_fsync();
    }
    let mut got = 0;
    if want > 0 && !replica {
        // The batch's stream and the request go out now, from this
        // thread, rather than when a sender thread gets the CPU: the
        // replica round trip starts before the wait, not after a wake-up.
        master.ask_for_acks_and_push();
        loop {
            got = master.acked_now(target);
            if got >= want || sess.handle.killed.load(std::sync::atomic::Ordering::Acquire) {
                break;
            }
            // Woken only once `want` replicas reached `target`, not at
            // every acknowledgement (`repl::Acked`).
            let acked = master.acked_by(target, want);
            tokio::pin!(acked);
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
        return None;
    }
    Some(refusal(got, want, mode, fsynced, aof_on))
}

/// Waits for the replies a command held for replicas (ADDJOB's
/// `REPLICATE n`, [`ReplicaHold`]): each until its number of online
/// replicas acknowledged the stream as it is now (it holds every write
/// of the batch), or its deadline. The replicas are asked once
/// (`REPLCONF GETACK *`). Then the replies whose deadline came first
/// become their errors, in one rewrite of `out` with the DURABLE mode's
/// `refused` replies, if any (both count their places from the buffer as
/// the batch left it).
pub async fn wait_for_copies(
    shared: &engine::Shared,
    sess: &engine::Session,
    out: &mut ReplyBuf,
    holds: Vec<ReplicaHold>,
    refused: Option<(Held, String)>,
    notify: &Signal,
) {
    let master = &crate::host::node(shared).master;
    // A DURABLE wait before this one may have ended the stream with its
    // GETACK: the batch's writes are before it.
    let target = master.offset_before_getack();
    let mut failed = vec![false; holds.len()];
    if !holds.is_empty() {
        master.ask_for_acks();
    }
    let mut pending: Vec<usize> = (0..holds.len()).collect();
    while !pending.is_empty() {
        let acked = master.acks().notified();
        tokio::pin!(acked);
        acked.as_mut().enable();
        let got = master.acked_now(target);
        let now = shared.clock.now_ms();
        pending.retain(|&i| {
            let h = &holds[i];
            if got >= h.replicas {
                return false;
            }
            failed[i] = now >= h.deadline_ms;
            !failed[i]
        });
        let Some(next) = pending.iter().map(|&i| holds[i].deadline_ms).min() else { break };
        if sess.handle.killed.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        // Looked at again at least hourly (a deadline can be a TTL years away).
        let ms = u64::try_from(next.saturating_sub(now)).unwrap_or(0).min(3_600_000);
        let sleep = tokio::time::sleep(Duration::from_millis(ms));
        tokio::pin!(sleep);
        std::future::poll_fn(|cx| {
            if acked.as_mut().poll(cx).is_ready()
                || notify.poll(cx).is_ready()
                || sleep.as_mut().poll(cx).is_ready()
            {
                return std::task::Poll::Ready(());
            }
            std::task::Poll::Pending
        })
        .await;
    }
    // Replies counted from the earliest start among those to replace.
    let mut starts: Vec<Mark> = holds.iter().map(|h| h.at).collect();
    starts.extend(refused.as_ref().and_then(|(h, _)| h.first));
    let Some(first) = starts.into_iter().max_by_key(|m| out.since(*m)) else { return };
    let from = |m: Mark| out.since(first) - out.since(m);
    // A reply both modes held gets the job's error (sorted first).
    let mut lines: Vec<(usize, usize, &[u8])> = holds
        .iter()
        .zip(&failed)
        .filter(|(h, f)| **f && h.len > 0)
        .map(|(h, _)| (from(h.at), from(h.at) + h.len, h.error.as_bytes()))
        .collect();
    if let Some((held, line)) = &refused {
        if let Some(base) = held.first.map(from) {
            lines.extend(held.writes.iter().map(|&(s, e)| (base + s, base + e, line.as_bytes())));
        }
    }
    lines.sort_by_key(|l| l.0);
    lines.dedup_by_key(|l| l.0);
    replace_lines(out, first, &lines);
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
pub fn replace_held(out: &mut ReplyBuf, held: &Held, line: &[u8]) {
    let Some(first) = held.first else { return };
    let lines: Vec<(usize, usize, &[u8])> =
        held.writes.iter().map(|&(s, e)| (s, e, line)).collect();
    replace_lines(out, first, &lines);
}

/// Replaces the replies at `(start, end)` (byte ranges counted from
/// `first`, in order, not overlapping) by their error lines.
fn replace_lines(out: &mut ReplyBuf, first: Mark, lines: &[(usize, usize, &[u8])]) {
    if lines.is_empty() {
        return;
    }
    let tail = out.split_off(first);
    let mut prev = 0;
    for &(start, end, line) in lines {
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
