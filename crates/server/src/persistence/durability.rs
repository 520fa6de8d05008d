//! The durability position a connection waits on before it answers a
//! write (group commit): a sequence number the persistence side advances
//! once what it numbers is written (and fsynced, under `appendfsync
//! always`). The connection knows the position, not who advances it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One server's position (see the module doc).
#[derive(Default)]
pub struct Position {
    /// The last sequence number handed out (a write's place).
    appended: AtomicU64,
    /// The largest sequence number made durable.
    acked: AtomicU64,
    /// The largest sequence number fsynced (WAITAOF, `DURABLE … FSYNC`);
    /// `acked` under `appendfsync always`, behind it otherwise.
    fsynced: AtomicU64,
    /// Something advances the position (the AOF is on); while not,
    /// nobody waits.
    active: AtomicBool,
    /// Connections waiting for `acked`.
    notify: tokio::sync::Notify,
}

impl Position {
    /// The persistence side numbered a write `seq` (its lock held, so
    /// numbers only grow).
    pub fn appended(&self, seq: u64) {
        self.appended.store(seq, Ordering::Relaxed);
    }

    /// Everything up to `seq` is durable (written; `fsynced` too when
    /// the writer just fsynced it): wakes the waiting connections.
    pub fn advance(&self, seq: u64, fsynced: bool) {
        self.acked.store(seq, Ordering::Release);
        if fsynced {
            self.fsynced.store(seq, Ordering::Release);
        }
        self.notify.notify_waiters();
    }

    /// The largest sequence number fsynced, while writes are numbered.
    pub fn fsynced(&self) -> Option<u64> {
        self.active.load(Ordering::Acquire).then(|| self.fsynced.load(Ordering::Acquire))
    }

    /// Whether something numbers writes (the AOF is on).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Waits until `seq` is fsynced, the AOF is turned off (`false`), or
    /// `deadline` passes (`false`).
    pub async fn wait_fsynced(&self, seq: u64, deadline: tokio::time::Instant) -> bool {
        loop {
            let n = self.notify.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if !self.active.load(Ordering::Acquire) {
                return false;
            }
            if self.fsynced.load(Ordering::Acquire) >= seq {
                return true;
            }
            if tokio::time::timeout_at(deadline, n).await.is_err() {
                return self.fsynced.load(Ordering::Acquire) >= seq;
            }
        }
    }

    /// Whether writes are numbered at all; turning it off releases the
    /// waiters.
    pub fn set_active(&self, on: bool) {
        self.active.store(on, Ordering::Release);
        if !on {
            self.notify.notify_waiters();
        }
    }

    /// The last number handed out (a connection delivering a reply that
    /// another thread's write produced waits for everything so far).
    pub fn last(&self) -> u64 {
        if self.active.load(Ordering::Relaxed) {
            self.appended.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Waits until `seq` is durable (or nothing numbers writes any more).
    pub async fn wait(&self, seq: u64) {
        loop {
            let n = self.notify.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.acked.load(Ordering::Acquire) >= seq || !self.active.load(Ordering::Acquire) {
                return;
            }
            n.await;
        }
    }
}
