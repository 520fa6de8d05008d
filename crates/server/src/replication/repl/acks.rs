//! Connections in `DURABLE` mode waiting for replicas' acknowledgements
//! (`crate::network::durable`). Each batch waits for its own stream
//! offset to be acknowledged by its own number of replicas; an
//! acknowledgement wakes only the waits it satisfies. (A `Notify` woken
//! at every acknowledgement woke every connection in the mode, each to
//! take the replication lock and most to sleep again: with 50 pipelined
//! connections and two replicas, most polls of the master's loop were
//! such wake-ups.)
//!
//! Must not take the replication state's lock (`Master::inner`): it is
//! taken under it.
//!
//! Also [`Passes`]: how the WAITs parked in `Master::inner` are served
//! when two replicas' acknowledgement threads ask at once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Runs a pass over shared state (serving the parked WAITs) for every
/// caller, without making callers wait for each other: the first caller
/// runs passes until no other call came during its last one; a call
/// during a pass only makes it run once more (it may have looked before
/// that caller's change). Without it, a WAIT that two replicas'
/// acknowledgements satisfied together stayed parked when each thread's
/// pass saw only its own replica's: one took the waits, counted before
/// the other replica acknowledged and put them back, while the other
/// found no wait to serve.
#[derive(Default)]
pub(super) struct Passes {
    /// Calls not yet covered by a pass.
    calls: AtomicU64,
}

impl Passes {
    /// Runs `pass` now, or has the caller running it run it again.
    pub(super) fn run(&self, mut pass: impl FnMut()) {
        if self.calls.fetch_add(1, Ordering::AcqRel) != 0 {
            return;
        }
        loop {
            let seen = self.calls.load(Ordering::Acquire);
            pass();
            if self.calls.compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return;
            }
        }
    }
}

/// The acknowledged offsets and the waits on them.
#[derive(Default)]
pub(super) struct AckWaits {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `reached[k - 1]`: the offset that `k` online replicas have
    /// acknowledged (the k-th largest acknowledged offset).
    reached: Vec<i64>,
    waits: Vec<Entry>,
    next_id: u64,
}

struct Entry {
    id: u64,
    target: i64,
    want: usize,
    waker: Waker,
}

impl State {
    fn satisfied(&self, target: i64, want: usize) -> bool {
        want == 0 || self.reached.get(want - 1).is_some_and(|&o| o >= target)
    }
}

impl AckWaits {
    /// The online replicas' acknowledged offsets are now `offsets` (any
    /// order): wakes the waits they satisfy. Called under the replication
    /// lock, so that updates apply in the order they were read.
    pub(super) fn update(&self, offsets: impl Iterator<Item = i64>) {
        let mut s = self.state.lock();
        s.reached.clear();
        s.reached.extend(offsets);
        s.reached.sort_unstable_by(|a, b| b.cmp(a));
        if s.waits.is_empty() {
            return;
        }
        let mut i = 0;
        while i < s.waits.len() {
            let (target, want) = (s.waits[i].target, s.waits[i].want);
            if s.satisfied(target, want) {
                s.waits.swap_remove(i).waker.wake();
            } else {
                i += 1;
            }
        }
    }

    /// Resolves once `want` online replicas acknowledged `target` (as of
    /// the last acknowledgement read; the caller counts again exactly).
    pub(super) fn acked(&self, target: i64, want: usize) -> Acked<'_> {
        Acked { waits: self, target, want, id: None }
    }

    /// Waits parked (tests).
    #[cfg(test)]
    fn parked(&self) -> usize {
        self.state.lock().waits.len()
    }
}

/// The future of [`AckWaits::acked`].
pub struct Acked<'a> {
    waits: &'a AckWaits,
    target: i64,
    want: usize,
    /// Its entry among the waits, once parked.
    id: Option<u64>,
}

impl Future for Acked<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut s = this.waits.state.lock();
        if s.satisfied(this.target, this.want) {
            if let Some(id) = this.id.take() {
                s.waits.retain(|e| e.id != id);
            }
            return Poll::Ready(());
        }
        match this.id.and_then(|id| s.waits.iter_mut().find(|e| e.id == id)) {
            Some(e) => e.waker.clone_from(cx.waker()),
            None => {
                // First poll, or woken (its entry went with the wake) by
                // an update that a later one undid (a replica gone).
                let id = s.next_id;
                s.next_id += 1;
                let (target, want) = (this.target, this.want);
                s.waits.push(Entry { id, target, want, waker: cx.waker().clone() });
                this.id = Some(id);
            }
        }
        Poll::Pending
    }
}

impl Drop for Acked<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.waits.state.lock().waits.retain(|e| e.id != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll(f: &mut Pin<&mut Acked<'_>>, c: &Arc<Count>) -> bool {
        let waker = Waker::from(c.clone());
        f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready()
    }

    #[test]
    fn an_acknowledgement_wakes_only_the_waits_it_satisfies() {
        let w = AckWaits::default();
        let (a, b) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
        // a: offset 100 on 2 replicas; b: offset 300 on 1.
        let mut fa = std::pin::pin!(w.acked(100, 2));
        let mut fb = std::pin::pin!(w.acked(300, 1));
        assert!(!poll(&mut fa, &a) && !poll(&mut fb, &b));
        assert_eq!(w.parked(), 2);
        // One replica at 200: neither is satisfied, nobody is woken.
        w.update([200, 50].into_iter());
        assert_eq!((a.0.load(Ordering::Relaxed), b.0.load(Ordering::Relaxed)), (0, 0));
        // The second reaches 120: a is (two at >= 100), b is not.
        w.update([120, 200].into_iter());
        assert_eq!((a.0.load(Ordering::Relaxed), b.0.load(Ordering::Relaxed)), (1, 0));
        assert!(poll(&mut fa, &a));
        assert!(!poll(&mut fb, &b));
        assert_eq!(w.parked(), 1);
        w.update([300, 120].into_iter());
        assert_eq!(b.0.load(Ordering::Relaxed), 1);
        assert!(poll(&mut fb, &b));
        assert_eq!(w.parked(), 0);
    }

    #[test]
    fn a_call_during_a_pass_makes_the_running_pass_run_again() {
        // Another thread's call that comes while a pass runs (simulated
        // from inside the pass, where the interleaving is certain) does
        // not run a pass of its own and is not lost: the running caller
        // runs one more. A call after the passes ended runs its own.
        let p = Passes::default();
        let mut runs = 0;
        p.run(|| {
            runs += 1;
            if runs == 1 {
                p.run(|| unreachable!("a second pass at once"));
            }
        });
        assert_eq!(runs, 2);
        p.run(|| runs += 1);
        assert_eq!(runs, 3);
    }

    #[test]
    fn concurrent_callers_each_have_a_pass_after_their_call() {
        // Each caller bumps its own counter and then calls: some pass
        // that starts after the bump must see it.
        let p = Arc::new(Passes::default());
        let bumps = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (p, bumps, seen) = (p.clone(), bumps.clone(), seen.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        bumps.fetch_add(1, Ordering::SeqCst);
                        p.run(|| {
                            seen.fetch_max(bumps.load(Ordering::SeqCst), Ordering::SeqCst);
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(seen.load(Ordering::SeqCst), 40_000);
    }

    #[test]
    fn a_dropped_wait_leaves_no_entry_and_more_replicas_than_exist_never_resolve() {
        let w = AckWaits::default();
        let c = Arc::new(Count(AtomicUsize::new(0)));
        {
            let mut f = std::pin::pin!(w.acked(10, 3));
            w.update([50, 50].into_iter());
            assert!(!poll(&mut f, &c));
            assert_eq!(w.parked(), 1);
        }
        assert_eq!(w.parked(), 0);
        assert_eq!(c.0.load(Ordering::Relaxed), 0);
    }
}
