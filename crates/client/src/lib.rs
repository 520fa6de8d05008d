//! An async (tokio) client for Sluice and any Redis: one [`Connection`] per
//! socket with RESP2 or RESP3 (`HELLO`), AUTH/SELECT on connect and
//! timeouts; explicit [`Pipeline`]s (one write, all replies in order, a
//! failing command does not fail the batch); and [`AutoClient`], a cloneable
//! handle whose concurrent callers share one socket and have their requests
//! coalesced into one write per event-loop turn; and [`ClusterClient`] for
//! a Redis Cluster: one connection per master, pipelines split by slot,
//! `-MOVED`/`-ASK`/`-TRYAGAIN` followed ([`slot`] has the key → slot rule).
//!
//! Replies are [`resp::Frame`]s parsed by the `resp` crate; [`scan`] skips
//! replies without building them, for load generators.

mod auto;
mod cluster;
mod conn;
mod error;
mod pipeline;
pub mod scan;
pub mod slot;

pub use auto::{AutoClient, AutoStats};
pub use cluster::{ClusterClient, ClusterStats, SlotMap};
pub use conn::{Config, Connection};
pub use error::{Error, Result};
pub use pipeline::{Pipeline, Reply};
pub use resp::{Frame, Proto};
