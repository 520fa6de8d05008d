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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

#[derive(Default)]
pub struct Signal {
    raised: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// The kept waker's data and vtable pointers (what `Waker::will_wake`
    /// compares), written and read by the waiting task alone: a wait by
    /// the task whose waker is kept already needs neither the lock nor a
    /// second look at the flag (a raise wakes the kept waker).
    kept: (AtomicUsize, AtomicUsize),
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
        let (data, vtable) = waker_id(cx.waker());
        if self.kept.0.load(Ordering::Relaxed) == data
            && self.kept.1.load(Ordering::Relaxed) == vtable
        {
            // This waker is kept (it stays until another replaces it): a
            // raise after the look above sets the flag and then wakes it,
            // so the task is polled again and sees the flag then.
            return Poll::Pending;
        }
        {
            let mut slot = self.waker.lock();
            match &mut *slot {
                Some(w) if w.will_wake(cx.waker()) => {}
                other => *other = Some(cx.waker().clone()),
            }
            self.kept.0.store(data, Ordering::Relaxed);
            self.kept.1.store(vtable, Ordering::Relaxed);
        }
        // A raise between the first check and the waker being kept saw
        // no waker (or the old one): look again. The lock orders the two.
        if self.raised.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// What `Waker::will_wake` compares: the data and vtable pointers.
#[inline]
fn waker_id(w: &Waker) -> (usize, usize) {
    (w.data() as usize, w.vtable() as *const std::task::RawWakerVTable as usize)
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

    /// The same waker wait after wait (a connection's task), as the kept
    /// waker's fast path sees it: no raise from another thread is lost.
    #[test]
    fn raises_to_a_kept_waker_are_never_lost() {
        let s = Arc::new(Signal::new());
        let c = Arc::new(Count(Default::default()));
        let w = Waker::from(c.clone());
        let mut cx = Context::from_waker(&w);
        assert!(s.poll(&mut cx).is_pending());
        for round in 1..=2000 {
            let before = c.0.load(Ordering::SeqCst);
            let r = s.clone();
            let t = std::thread::spawn(move || r.raise());
            let early = s.poll(&mut cx).is_ready();
            t.join().unwrap();
            if !early {
                // The raise came while this waker was kept: it woke it,
                // and the next poll sees the raise.
                assert_eq!(c.0.load(Ordering::SeqCst), before + 1, "raise lost in round {round}");
                assert!(s.poll(&mut cx).is_ready(), "raise lost in round {round}");
            }
            assert!(s.poll(&mut cx).is_pending());
        }
        // Another waker replaces the kept one, and is the one woken.
        let c2 = Arc::new(Count(Default::default()));
        let w2 = Waker::from(c2.clone());
        assert!(s.poll(&mut Context::from_waker(&w2)).is_pending());
        let woken = c.0.load(Ordering::SeqCst);
        s.raise();
        assert_eq!((c.0.load(Ordering::SeqCst), c2.0.load(Ordering::SeqCst)), (woken, 1));
    }
}
