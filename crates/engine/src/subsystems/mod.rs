//! The subsystems: state and machinery that are not command families but
//! what the families and the core use (ACL, configuration, eviction,
//! background freeing, pub/sub, tracking, scripting, persistence's seam,
//! shutdown, logging, the slow log, the latency monitor, the MONITOR
//! feed, the replication handshake's state, Redis's number and pattern
//! routines).
//!
//! A subsystem may use the core and other subsystems; it never imports a
//! command family (`crate::commands`). `src/layering.rs` checks this.

pub mod acl;
pub mod client_list;
pub mod cluster;
pub mod config;
pub mod evict;
pub mod glob;
pub mod hll;
pub mod jobs;
pub mod latency;
pub mod lazyfree;
pub mod ldouble;
pub mod log;
pub mod migrate;
pub mod monitor;
pub mod pubsub;
pub mod rates;
pub mod repl;
pub mod script;
pub mod shutdown;
pub mod slowlog;
pub mod snapshot;
pub mod tracking;
