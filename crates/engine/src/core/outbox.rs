//! A client's outbox: everything that reaches a connection other than the
//! replies to its own requests as it runs them — the reply of a blocked
//! command served by another thread, and later pub/sub messages, tracking
//! invalidations and MONITOR lines. Producers on any thread push and wake
//! the connection; the connection moves the outbox into its reply buffer
//! at its next turn, so the pushes go out in the same write as its
//! replies, and counts what is waiting here against its output limit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// What a pushed message is, which decides how the connection delivers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The deferred reply to the client's own (blocked) command: subject
    /// to CLIENT REPLY as if the command had just run.
    Reply,
    /// Out of band (pub/sub messages, invalidations, MONITOR).
    Push,
    /// A push caused by the client's own running command that Redis
    /// writes before the command's reply (a keyspace notification it is
    /// subscribed to, the invalidation of a key tracked by a client that
    /// redirects here): the dispatcher moves it ahead of the reply.
    Early,
    /// A push caused by the client's own running command that Redis
    /// writes right after the command's reply (the invalidation of a key
    /// the client tracks itself, Redis 7.0's `tracking_pending_keys`): the
    /// connection takes it before the next request runs.
    After,
}

/// The queue (see the module doc). In declaration order (`repr(C)`):
/// what its connection reads on every turn first, beside the client
/// handle's hot fields.
#[derive(Default)]
#[repr(C)]
pub struct Outbox {
    /// Bytes queued, readable without the lock.
    bytes: AtomicUsize,
    /// Some queued message is [`Kind::Early`].
    early: std::sync::atomic::AtomicBool,
    /// Some queued message is [`Kind::After`].
    after: std::sync::atomic::AtomicBool,
    /// Bytes waiting in every outbox of the server (`Shared::in_transit`):
    /// handed from one thread to another, not yet in the receiving
    /// connection's reply buffer. Redis writes what a command queued for
    /// other clients before it reads the next command; here those bytes
    /// wait for the receiver's thread, so the maxmemory check leaves them
    /// out (`evict::perform`) rather than evict keys for memory that is on
    /// its way out.
    transit: Arc<AtomicUsize>,
    queue: Mutex<VecDeque<(Kind, Vec<u8>)>>,
}

impl Outbox {
    /// An outbox that counts its bytes into its server's `transit`.
    pub fn counting_in(transit: Arc<AtomicUsize>) -> Self {
        Outbox {
            transit,
            queue: Mutex::default(),
            bytes: AtomicUsize::new(0),
            early: std::sync::atomic::AtomicBool::new(false),
            after: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Queues `msg`; returns the bytes now waiting. The caller wakes the
    /// connection.
    pub fn push(&self, kind: Kind, msg: Vec<u8>) -> usize {
        let n = msg.len();
        let mut q = self.queue.lock();
        match kind {
            Kind::Early => self.early.store(true, Ordering::Release),
            Kind::After => self.after.store(true, Ordering::Release),
            Kind::Reply | Kind::Push => {}
        }
        q.push_back((kind, msg));
        self.transit.fetch_add(n, Ordering::Relaxed);
        self.bytes.fetch_add(n, Ordering::AcqRel) + n
    }

    /// Bytes waiting (one atomic load: the connection checks it per turn).
    #[inline]
    pub fn pending(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// Whether an [`Kind::Early`] message waits (one atomic load).
    #[inline]
    pub fn has_early(&self) -> bool {
        self.early.load(Ordering::Acquire)
    }

    /// Whether an [`Kind::After`] message waits (one atomic load).
    #[inline]
    pub fn has_after(&self) -> bool {
        self.after.load(Ordering::Acquire)
    }

    /// Takes the [`Kind::Early`] messages, in order, leaving the rest.
    pub fn drain_early(&self, each: impl FnMut(&[u8])) {
        self.drain_kind(Kind::Early, &self.early, each)
    }

    /// Takes the [`Kind::After`] messages, in order, leaving the rest.
    pub fn drain_after(&self, each: impl FnMut(&[u8])) {
        self.drain_kind(Kind::After, &self.after, each)
    }

    fn drain_kind(
        &self,
        which: Kind,
        flag: &std::sync::atomic::AtomicBool,
        mut each: impl FnMut(&[u8]),
    ) {
        let mut q = self.queue.lock();
        flag.store(false, Ordering::Release);
        let mut n = 0;
        q.retain(|(kind, msg)| {
            if *kind == which {
                n += msg.len();
                each(msg);
                false
            } else {
                true
            }
        });
        self.transit.fetch_sub(n, Ordering::Relaxed);
        self.bytes.fetch_sub(n, Ordering::AcqRel);
    }

    /// Takes everything queued, in order.
    pub fn drain(&self, mut each: impl FnMut(Kind, &[u8])) {
        let taken = {
            let mut q = self.queue.lock();
            self.early.store(false, Ordering::Release);
            self.after.store(false, Ordering::Release);
            std::mem::take(&mut *q)
        };
        let mut n = 0;
        for (kind, msg) in &taken {
            n += msg.len();
            each(*kind, msg);
        }
        self.transit.fetch_sub(n, Ordering::Relaxed);
        self.bytes.fetch_sub(n, Ordering::AcqRel);
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.transit.fetch_sub(*self.bytes.get_mut(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_counts_bytes() {
        let o = Outbox::default();
        assert_eq!(o.push(Kind::Push, b"ab".to_vec()), 2);
        assert_eq!(o.push(Kind::Reply, b"cde".to_vec()), 5);
        let mut seen = Vec::new();
        o.drain(|k, m| seen.push((k, m.to_vec())));
        assert_eq!(seen, vec![(Kind::Push, b"ab".to_vec()), (Kind::Reply, b"cde".to_vec())]);
        assert_eq!(o.pending(), 0);
    }
}
