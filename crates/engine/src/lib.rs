//! Commands: argument vector in, reply bytes out, in three layers:
//!
//! - [`core`]: the spec and table types, the door every caller runs a
//!   command through, the checks and the call, the context handlers run
//!   in, effects, blocking, outboxes, sessions and the shared state;
//! - [`subsystems`]: what the families and the core use that is not a
//!   command family (ACL, configuration, eviction, pub/sub, tracking,
//!   scripting, the slow log, the latency monitor, MONITOR's feed, the
//!   replication state, the job timer, …);
//! - [`commands`]: the command families, and the table built from them,
//!   which a server hands to the core (`Shared::with_host`).
//!
//! The core and the subsystems never import a family (`src/layering.rs`
//! checks it).
//!
//! Synchronous and socket-free; depends on `resp`, `store` and `queue` (the
//! job model) only. Must not depend on `persist` or `server`: the codec,
//! the files, the network and the allocator reach it through interfaces
//! the server installs (`docs/architecture.md`, *What the server plugs in*).

pub mod commands;
pub mod core;
pub mod subsystems;

pub use crate::core::dispatch::execute;
pub use crate::core::session::Session;
pub use crate::core::shared::Shared;
pub use crate::subsystems::config::Config;

#[cfg(test)]
mod layering;
#[cfg(test)]
mod tests;
