//! The process's main thread runs the replication link.
//!
//! `kill -STOP` (how Redis's own tests freeze a replica) is handled by
//! the thread the kernel picks for the signal, the main thread: until it
//! runs, the others go on. On a loaded machine that takes milliseconds,
//! and a link thread of its own could still apply and acknowledge what
//! the master sent after the `kill` returned (`races/sigstop_link.py`:
//! 14 of 100 on a thread of its own; redis-server's one thread, 0). A
//! link on the main thread cannot: the data that wakes it meets the stop
//! first. So the binary's main thread, once the server runs, waits here
//! for the link (`spawn`) instead of for the event loops.
//!
//! A link that finds the main thread busy (the link of the previous
//! REPLICAOF still ending) waits for it up to a second on a thread of its
//! own, and runs there if it stays busy. Without [`install`] (the
//! library in tests), `spawn` is a plain thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use engine::subsystems::log;

type Job = Box<dyn FnOnce() + Send>;

struct Runner {
    /// Waiting for a job; taken (set false) by whoever hands it one.
    idle: AtomicBool,
    jobs: Mutex<Sender<Job>>,
    /// Taken by [`serve`].
    queue: Mutex<Option<Receiver<Job>>>,
}

static RUNNER: OnceLock<Runner> = OnceLock::new();

impl Runner {
    /// Hands `job` to the main thread if it is idle; gives it back if not.
    fn offer(&self, job: Job) -> Result<(), Job> {
        if self.idle.compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(job);
        }
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).send(job).map_err(|e| e.0)
    }
}

/// Makes [`spawn`] offer its jobs to the thread that will call
/// [`serve`] (a link started before then waits for it, up to a second).
pub fn install() {
    let (tx, rx) = channel::<Job>();
    let _ = RUNNER.set(Runner {
        idle: AtomicBool::new(false),
        jobs: Mutex::new(tx),
        queue: Mutex::new(Some(rx)),
    });
}

/// Runs the jobs [`spawn`] hands over, on the calling thread, forever
/// (after [`install`]; returns at once without it).
pub fn serve() {
    let Some(runner) = RUNNER.get() else { return };
    let Some(rx) = runner.queue.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    loop {
        runner.idle.store(true, Ordering::Release);
        match rx.recv() {
            // A job that panics ends as it would on a thread of its own
            // (the panic reported by the hook), not the process with it.
            Ok(job) => drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))),
            Err(_) => return,
        }
    }
}

/// Runs `f` on the main thread when it serves jobs and is free (or
/// becomes free within a second), else on a thread named `name`, with
/// the caller's logger either way.
pub fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let logger = log::current();
    let job: Job = Box::new(move || {
        if let Some(l) = logger {
            log::bind(l);
        }
        f()
    });
    let Some(runner) = RUNNER.get() else {
        return log::spawn(name, job).map(drop);
    };
    let job = match runner.offer(job) {
        Ok(()) => return Ok(()),
        Err(job) => job,
    };
    log::spawn(name, move || {
        let mut job = job;
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(5));
            match runner.offer(job) {
                Ok(()) => return,
                Err(back) => job = back,
            }
        }
        job()
    })
    .map(drop)
}
