//! The job model of Sluice's job queue (Disque's commands): job ids, jobs
//! and their states, queues ordered by creation time, and one ordered
//! index of wake-up times that drives retries, delays and TTLs.
//!
//! Pure data structures and rules, no protocol, no locks, no clock: every
//! operation takes the time (Unix ms) it happens at, so the engine's
//! clock (which tests move) is the only time there is. The engine
//! (`engine/src/commands/queue/`) holds one [`Jobs`] behind the job
//! namespace's lock and turns its results into replies and effects.
//! Must not depend on any other Sluice crate.
//!
//! `docs/jobs.md` describes the commands and their semantics: Disque's
//! single-node parts (<https://github.com/antirez/disque>).

mod body;
mod ext;
mod id;
mod job;
mod jobs;
mod order;
mod packed;
mod wake;

pub use body::Body;
pub use ext::{Backoff, Every, Ext, MAX_SPAN_MS};
pub use id::{JobId, ID_LEN};
pub use job::{
    DecodeError, Job, JobData, JobRef, QueueName, State, FLAG_DELIVERED, FLAG_QUEUED_ONCE,
};
pub use jobs::{Acked, AddError, Jobs, NewJob, Pause, Queue, Queued, Tick};
