//! The command table: every family lists its declarations once; lookup is
//! ASCII case-insensitive and allocation-free.

use std::sync::OnceLock;

use crate::spec::CommandSpec;

pub mod acl;
pub mod bitmap;
pub mod client;
pub mod cluster;
pub mod command;
pub mod connection;
pub mod debug;
pub mod digest;
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

/// Every family's declarations. A `static`, not a `const`: specs are
/// compared by address (`dispatch::full_name`, the ACL and COMMAND
/// tables), and every use of a `const` may get its own copy of the
/// data; with optimisation, code inlined into two codegen units saw two
/// different addresses for one command.
pub static FAMILIES: &[&[CommandSpec]] = &[
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
    crate::script::COMMANDS,
    crate::script::function::COMMANDS,
    stream::COMMANDS,
    slowlog::COMMANDS,
    latency::COMMANDS,
    memory::COMMANDS,
    repl::COMMANDS,
    queue::COMMANDS,
];

/// All top-level commands.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    FAMILIES.iter().flat_map(|f| f.iter())
}

/// Commands bucketed by (name length, first letter): a lookup compares
/// against one to three names, with no hashing and no copy.
struct Index {
    buckets: Vec<Vec<&'static CommandSpec>>,
}

const MAX_NAME: usize = 32;

fn bucket(len: usize, first: u8) -> usize {
    len * 32 + (first.to_ascii_uppercase() & 31) as usize
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut buckets = vec![Vec::new(); MAX_NAME * 32];
        for spec in all() {
            let n = spec.name.as_bytes();
            assert!(!n.is_empty() && n.len() < MAX_NAME, "command name {} too long", spec.name);
            let b: &mut Vec<&'static CommandSpec> = &mut buckets[bucket(n.len(), n[0])];
            assert!(!b.iter().any(|s| s.name == spec.name), "command {} declared twice", spec.name);
            b.push(spec);
        }
        Index { buckets }
    })
}

/// Finds a top-level command by name, ignoring ASCII case.
#[inline]
pub fn find(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.is_empty() || name.len() >= MAX_NAME {
        return None;
    }
    index().buckets[bucket(name.len(), name[0])]
        .iter()
        .find(|s| name.eq_ignore_ascii_case(s.name.as_bytes()))
        .copied()
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
}
