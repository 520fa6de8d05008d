//! Commands: the table, the dispatcher, the context handlers run in, and
//! one file per command family. Argument vector in, reply bytes out.
//!
//! Synchronous and socket-free; depends on `resp`, `store` and `queue` (the
//! job model) only. Must not depend on `persist` or `server`: the codec,
//! the files, the network and the allocator reach it through interfaces
//! the server installs (`docs/architecture.md`, *What the server plugs in*).

pub mod acl;
pub mod blocking;
pub mod cmdstats;
pub mod commands;
pub mod config;
pub mod ctx;
pub mod dispatch;
pub mod door;
pub mod effects;
pub mod error;
pub mod evict;
pub mod glob;
pub mod hll;
pub mod host;
pub mod lazyfree;
pub mod ldouble;
pub mod log;
pub mod meta;
pub mod outbox;
pub mod pubsub;
pub mod rates;
pub mod script;
pub mod session;
pub mod shared;
pub mod shutdown;
pub mod snapshot;
pub mod spec;
pub mod tracking;

pub use config::Config;
pub use dispatch::execute;
pub use session::Session;
pub use shared::Shared;

#[cfg(test)]
mod tests;
