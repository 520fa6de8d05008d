//! A connection's wake-up: other threads (a served blocked command, a
//! push to its outbox, CLIENT KILL, CLIENT UNPAUSE, a busy pass) raise
//! it, and the connection's task, waiting for its socket, wakes.
//!
//! It does what `tokio::sync::Notify::notify_one` / `notified` did here,
//! for less: a raise with no waiter is kept for the next wait (a permit),
//! and there is only ever one waiter, the connection's own task, so a
//! flag and one waker slot suffice. Notify queued a node in a locked
//! intrusive list on every wait and unlinked it again when the wait
//! ended, even when the socket woke the task; at P=1 that was one of the
//! larger costs of a request (callgrind, `bench/instructions --tests get
//! --pipelines 1`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

#[derive(Default)]
pub struct Signal {
    raised: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes the waiting task, or the next wait if none is waiting.
    pub fn raise(&self) {
        self.raised.store(true, Ordering::SeqCst);
        if let Some(w) = &*self.waker.lock() {
            w.wake_by_ref();
        }
    }

    /// Ready (and lowered) once raised; otherwise the task's waker is
    /// kept for [`raise`](Self::raise).
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.raised.load(Ordering::Relaxed) && self.raised.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        {
            let mut slot = self.waker.lock();
            match &mut *slot {
                Some(w) if w.will_wake(cx.waker()) => {}
                other => *other = Some(cx.waker().clone()),
            }
        }
        // A raise between the first check and the waker being kept saw
        // no waker (or the old one): look again. The lock orders the two.
        if self.raised.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(std::sync::atomic::AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn raise_before_wait_is_kept_once() {
        let s = Signal::new();
        let c = Arc::new(Count(Default::default()));
        let w = Waker::from(c.clone());
        let mut cx = Context::from_waker(&w);
        s.raise();
        assert!(s.poll(&mut cx).is_ready());
        assert!(s.poll(&mut cx).is_pending());
        assert_eq!(c.0.load(Ordering::SeqCst), 0);
        s.raise();
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert!(s.poll(&mut cx).is_ready());
        assert!(s.poll(&mut cx).is_pending());
    }

    #[test]
    fn raises_from_other_threads_are_never_lost() {
        // Each round a thread raises once while the waiter polls.
        let s = Arc::new(Signal::new());
        for _ in 0..2000 {
            let c = Arc::new(Count(Default::default()));
            let w = Waker::from(c.clone());
            let mut cx = Context::from_waker(&w);
            let r = s.clone();
            let t = std::thread::spawn(move || r.raise());
            let early = s.poll(&mut cx).is_ready();
            t.join().unwrap();
            if !early {
                // Waiting when the raise came: it woke this waker, and
                // the next poll sees it.
                assert_eq!(c.0.load(Ordering::SeqCst), 1, "raise lost");
                assert!(s.poll(&mut cx).is_ready(), "raise lost");
            }
            assert!(s.poll(&mut cx).is_pending());
        }
    }
}
