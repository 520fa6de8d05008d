//! Dev-only test infrastructure: start the servers under test and talk to
//! them the way a plain client would.
//!
//! - [`TestServer`] runs the `sluice-server` binary on a free port,
//!   [`RedisServer`] runs the oracle `/usr/bin/redis-server` 7.0; both are
//!   killed on drop.
//! - [`Client`] is a blocking client that sends raw bytes or commands and
//!   reads back exactly one reply's bytes.
//! - [`diff`] is the one differential runner: steps played on the oracle
//!   and on Sluice, answers compared; its [`diff::Servers`] also serve the
//!   randomized differential tests.
//! - [`scenario`] parses the text scenarios (`tests/scenarios`,
//!   `tests/effects`) and says how two replies are compared; [`effects`]
//!   watches what both servers do besides replying; [`transcript`] parses
//!   the multi-connection scripts.
//!
//! - [`cluster`] makes small Redis Clusters with `redis-cli --cluster create`.
//! - [`abuse`] generates hostile commands from Redis's command table.
//!
//! Depends on `resp` and `engine` (its command metadata); never used by
//! non-test code.

pub mod abuse;
pub mod args;
mod client;
pub mod cluster;
pub mod diff;
pub mod effects;
pub mod scenario;
mod server;
pub mod transcript;

pub use client::{escape, Client};

/// Appends `args` as a RESP array of bulk strings (a request) to `out`.
pub fn encode<A: AsRef<[u8]>>(args: &[A], out: &mut Vec<u8>) {
    resp::write_command(out, args)
}
pub use server::{
    free_port, oracle_required, scratch_dir, RedisServer, ServerProc, TestServer, REDIS_SERVER,
};
