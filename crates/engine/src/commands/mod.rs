//! The command families, and the table built from them: every family lists
//! its declarations once ([`crate::core::spec::Command`]: name, handler,
//! Sluice's own facts); [`table`] joins them with Redis's metadata once,
//! at first use ([`Table::build`]), and that table is what a server hands
//! to the core (`Shared::with_host`). The core never finds it here: this
//! layer depends on the core and the subsystems, not the reverse
//! (`src/layering.rs`).

use std::sync::OnceLock;

use crate::core::spec::{Command, CommandSpec};
use crate::core::table::Table;

pub mod acl;
pub(crate) mod algebra;
pub mod bitmap;
pub mod client;
pub mod cluster;
pub mod command;
pub mod connection;
pub mod debug;
pub mod digest;
pub mod durable;
pub mod function;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod info;
pub mod keys;
pub mod latency;
pub mod list;
pub mod memory;
pub mod migrate;
pub mod monitor;
pub mod persist;
pub mod pubsub;
pub mod queue;
pub mod repl;
pub mod scripting;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod sort;
pub mod stream;
pub mod string;
pub mod tx;
pub mod zset;
pub mod zset_blocking;

pub use command::markdown;

/// Every family's declarations, in the order `COMMAND` lists them.
pub static FAMILIES: &[&[Command]] = &[
    string::COMMANDS,
    acl::COMMANDS,
    set::COMMANDS,
    keys::COMMANDS,
    migrate::COMMANDS,
    list::COMMANDS,
    hash::COMMANDS,
    sort::COMMANDS,
    tx::COMMANDS,
    connection::COMMANDS,
    client::COMMANDS,
    cluster::COMMANDS,
    debug::COMMANDS,
    server::COMMANDS,
    info::COMMANDS,
    command::COMMANDS,
    zset::COMMANDS,
    zset_blocking::COMMANDS,
    pubsub::COMMANDS,
    monitor::COMMANDS,
    bitmap::COMMANDS,
    hll::COMMANDS,
    geo::COMMANDS,
    persist::COMMANDS,
    scripting::COMMANDS,
    function::COMMANDS,
    stream::COMMANDS,
    slowlog::COMMANDS,
    latency::COMMANDS,
    memory::COMMANDS,
    repl::COMMANDS,
    queue::COMMANDS,
    durable::COMMANDS,
];

/// The table of every family's commands, built once and installed for
/// what has no `Shared` at hand ([`crate::core::table::installed`]).
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    let t = TABLE.get_or_init(|| Table::build(FAMILIES));
    crate::core::table::install(t);
    t
}

/// All top-level commands of the built table.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    table().tops()
}

/// Finds a top-level command of [`table`] by name, ignoring ASCII case
/// (`rename-command` aside: the core's `table::find_called` applies it).
#[inline]
pub fn find(name: &[u8]) -> Option<&'static CommandSpec> {
    table().find(name)
}

#[cfg(test)]
mod lookup_tests {
    #[test]
    fn finds_every_command_in_any_case() {
        for spec in super::all() {
            let lower = spec.name.to_ascii_lowercase();
            assert!(std::ptr::eq(super::find(lower.as_bytes()).unwrap(), spec));
            assert!(std::ptr::eq(super::find(spec.name.as_bytes()).unwrap(), spec));
        }
        assert!(super::find(b"").is_none());
        assert!(super::find(b"NOSUCHCOMMAND").is_none());
        assert!(super::find(&[0xff; 40]).is_none());
    }

    #[test]
    fn every_spec_index_is_its_entry_position() {
        for (i, e) in super::table().entries().iter().enumerate() {
            assert_eq!(e.spec.index(), i, "{}", e.name());
        }
    }
}
