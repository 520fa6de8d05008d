//! An async (tokio) client for Sluice and any Redis: one [`Connection`] per
//! socket with RESP2 or RESP3 (`HELLO`), AUTH/SELECT on connect and
//! timeouts; explicit [`Pipeline`]s (one write, all replies in order, a
//! failing command does not fail the batch); and [`AutoClient`], a cloneable
//! handle whose concurrent callers share one socket and have their requests
//! coalesced into one write per event-loop turn.
//!
//! Replies are [`resp::Frame`]s parsed by the `resp` crate; [`scan`] skips
//! replies without building them, for load generators.

mod auto;
mod conn;
mod error;
mod pipeline;
pub mod scan;

pub use auto::{AutoClient, AutoStats};
pub use conn::{Config, Connection};
pub use error::{Error, Result};
pub use pipeline::{Pipeline, Reply};
pub use resp::{Frame, Proto};
