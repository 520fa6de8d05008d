//! The end of an event-loop turn: where a thread's connections write the
//! replies of the batches they ran, together, as Redis writes every
//! client's replies at the end of its turn (`beforeSleep`).
//!
//! A connection that finished a pipelined batch (more than one request)
//! waits here before its write; a lone request's reply goes at once. The
//! first one wakes the thread's flusher task, which the runtime queues
//! behind the connections already woken in this turn (its run queue is
//! first in, first out); when the flusher runs, they have all run their
//! batches, and it wakes the waiting connections, which then write one
//! after the other. A client that several connections serve (a load
//! generator, an application's pool on the same host) is woken once by
//! the first of those writes and finds the others while it runs: writing
//! each reply as its batch ended woke it again between two batches, and
//! on one host that wake-up (a cross-CPU interrupt) was charged to the
//! server's `writev` (docs/benchmarks.md, "issue 27's table with system
//! time"). No system call and no driver poll is added: one more poll of
//! each waiting connection, and one of the flusher, per turn (GET at
//! P=16, fifty clients: 1,161 → 1,189 instructions a request; ZADD, MSET
//! and EVALSHA at P=16 spent 1.2–1.6× less CPU a request).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct Turn {
    /// The connections waiting for the end of the turn.
    waiting: RefCell<Vec<Waker>>,
    /// The thread's flusher, once it polled.
    flusher: RefCell<Option<Waker>>,
    /// The flusher is woken and not yet run.
    woken: Cell<bool>,
}

thread_local! {
    static TURN: Turn = Turn::default();
}

/// The thread's flusher task (spawned once by each event loop, on its own
/// runtime, as a connection's task is): wakes the waiting connections each
/// time it runs.
pub async fn flusher() {
    std::future::poll_fn(|cx: &mut Context<'_>| {
        TURN.with(|t| {
            t.woken.set(false);
            // Taken out while they are woken, then given back emptied:
            // the list keeps its room from turn to turn (no allocation
            // per turn).
            let mut waiting = std::mem::take(&mut *t.waiting.borrow_mut());
            for w in waiting.drain(..) {
                w.wake();
            }
            let mut slot = t.waiting.borrow_mut();
            if slot.is_empty() {
                *slot = waiting;
            }
            let mut f = t.flusher.borrow_mut();
            if !f.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *f = Some(cx.waker().clone());
            }
        });
        Poll::<()>::Pending
    })
    .await
}

/// Waits until the thread's connections woken in this turn have run (see
/// the module doc); at once on a thread without a flusher.
pub fn end_of_turn() -> EndOfTurn {
    EndOfTurn { queued: false }
}

pub struct EndOfTurn {
    queued: bool,
}

impl Future for EndOfTurn {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.queued {
            // Woken by the flusher (or by anything else: then the write
            // is early, never lost).
            return Poll::Ready(());
        }
        TURN.with(|t| {
            let flusher = t.flusher.borrow();
            let Some(f) = flusher.as_ref() else { return Poll::Ready(()) };
            t.waiting.borrow_mut().push(cx.waker().clone());
            if !t.woken.replace(true) {
                f.wake_by_ref();
            }
            self.queued = true;
            Poll::Pending
        })
    }
}
