//! The command table: every family lists its declarations once
//! ([`crate::spec::Command`]: name, handler, Sluice's own facts); the table
//! joins them with Redis's metadata once, at first use, and lookup is
//! ASCII case-insensitive and allocation-free.

use std::sync::OnceLock;

use crate::meta::{self, Meta};
use crate::spec::{Command, CommandSpec, Origin};

pub mod acl;
pub(crate) mod algebra;
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
    crate::script::COMMANDS,
    crate::script::function::COMMANDS,
    stream::COMMANDS,
    slowlog::COMMANDS,
    latency::COMMANDS,
    memory::COMMANDS,
    repl::COMMANDS,
    queue::COMMANDS,
];

/// All top-level commands of the built table.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    table().tops.iter()
}

/// The command table, built once from [`FAMILIES`] and the metadata:
/// each declaration is joined with its metadata by name here, never per
/// command. Specs live as long as the process and are compared by
/// address (`dispatch::full_name`, the ACL and COMMAND tables).
struct Table {
    tops: &'static [CommandSpec],
    /// Commands bucketed by (name length, first letter): a lookup
    /// compares against one to three names, with no hashing and no copy.
    buckets: Vec<Vec<&'static CommandSpec>>,
}

const MAX_NAME: usize = 32;

fn bucket(len: usize, first: u8) -> usize {
    len * 32 + (first.to_ascii_uppercase() & 31) as usize
}

/// The metadata of a declared command (`full` is `get` or `config|get`).
fn meta_of(decl: &Command, full: &str) -> &'static Meta {
    let found = match decl.origin {
        Origin::Redis => meta::find(full),
        Origin::Sluice => meta::find_sluice(full),
    };
    found.unwrap_or_else(|| panic!("{full}: declared as {:?} but has no metadata", decl.origin))
}

fn build(decl: &Command, full: &str, subs: &'static [CommandSpec]) -> CommandSpec {
    CommandSpec::build(decl, meta_of(decl, full), subs)
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut tops = Vec::new();
        for decl in FAMILIES.iter().flat_map(|f| f.iter()) {
            let top = decl.name.to_ascii_lowercase();
            let subs: Vec<CommandSpec> = decl
                .subcommands
                .iter()
                .map(|s| build(s, &format!("{top}|{}", s.name.to_ascii_lowercase()), &[]))
                .collect();
            tops.push(build(decl, &top, Box::leak(subs.into_boxed_slice())));
        }
        let tops: &'static [CommandSpec] = Box::leak(tops.into_boxed_slice());
        let mut buckets = vec![Vec::new(); MAX_NAME * 32];
        for spec in tops {
            let n = spec.name.as_bytes();
            assert!(!n.is_empty() && n.len() < MAX_NAME, "command name {} too long", spec.name);
            let b: &mut Vec<&'static CommandSpec> = &mut buckets[bucket(n.len(), n[0])];
            assert!(!b.iter().any(|s| s.name == spec.name), "command {} declared twice", spec.name);
            b.push(spec);
        }
        Table { tops, buckets }
    })
}

/// Finds a top-level command by name, ignoring ASCII case.
#[inline]
pub fn find(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.is_empty() || name.len() >= MAX_NAME {
        return None;
    }
    table().buckets[bucket(name.len(), name[0])]
        .iter()
        .find(|s| name.eq_ignore_ascii_case(s.name.as_bytes()))
        .copied()
}

/// `rename-command` from the configuration file, applied once when a
/// server builds its shared state (`Shared::renames`): the names clients
/// (and scripts, EXEC, the AOF and a master's stream, as in Redis) call
/// the commands by. The original table ([`find`]) keeps serving COMMAND,
/// ACL and the configuration's own checks.
#[derive(Default)]
pub struct Renames {
    /// New names (lower case) and their commands.
    added: Vec<(Vec<u8>, &'static CommandSpec)>,
    /// Commands no longer reachable under their original name.
    removed: Vec<&'static CommandSpec>,
}

impl Renames {
    fn find(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        if let Some((_, spec)) = self.added.iter().find(|(n, _)| name.eq_ignore_ascii_case(n)) {
            return Some(spec);
        }
        find(name).filter(|s| !self.removed.iter().any(|r| std::ptr::eq(*r, *s)))
    }
}

impl Renames {
    /// Applies the configuration's `rename-command` pairs in order, as
    /// Redis applies each line to its command table: the command goes
    /// from its current name to the new one, or away when the new name is
    /// empty. `None` when there are none; an error names the pair that
    /// cannot apply.
    pub fn build(pairs: &[(String, String)]) -> Result<Option<Renames>, String> {
        if pairs.is_empty() {
            return Ok(None);
        }
        build_renames(pairs).map(Some)
    }
}

/// Whether `pairs` apply in order, with Redis's error text for the first
/// that does not (the configuration loader checks each line so).
pub fn check_renames(pairs: &[(String, String)]) -> Result<(), &'static str> {
    build_renames(pairs).map(|_| ()).map_err(|e| {
        if e.starts_with("Target") {
            "Target command name already exists"
        } else {
            "No such command in rename-command"
        }
    })
}

fn build_renames(pairs: &[(String, String)]) -> Result<Renames, String> {
    let mut r = Renames::default();
    for (from, to) in pairs {
        let Some(spec) = r.find(from.as_bytes()) else {
            return Err(format!("No such command in rename-command: {from}"));
        };
        if let Some(i) = r.added.iter().position(|(n, _)| from.as_bytes().eq_ignore_ascii_case(n)) {
            r.added.remove(i);
        } else {
            r.removed.push(spec);
        }
        if !to.is_empty() {
            if r.find(to.as_bytes()).is_some() {
                return Err(format!("Target command name already exists: {to}"));
            }
            r.added.push((to.to_ascii_lowercase().into_bytes(), spec));
        }
    }
    Ok(r)
}

/// Finds a top-level command by the name it is called by: [`find`], with
/// `rename-command` applied.
#[inline]
pub fn find_called(shared: &crate::Shared, name: &[u8]) -> Option<&'static CommandSpec> {
    match &shared.renames {
        None => find(name),
        Some(r) => r.find(name),
    }
}

/// Whether `rename-command` moved `spec` away from its own name (a
/// connection then does not reuse it by name, see `dispatch`).
pub fn is_renamed(shared: &crate::Shared, spec: &'static CommandSpec) -> bool {
    shared.renames.as_ref().is_some_and(|r| r.removed.iter().any(|s| std::ptr::eq(*s, spec)))
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
    fn renames_apply_in_order_as_redis_applies_its_lines() {
        let flushdb = super::find(b"FLUSHDB").unwrap();
        let get = super::find(b"GET").unwrap();
        let mut r = super::Renames::default();
        r.removed.push(flushdb);
        r.added.push((b"badger".to_vec(), flushdb));
        r.removed.push(get);
        assert!(r.find(b"flushdb").is_none());
        assert!(r.find(b"get").is_none());
        assert!(std::ptr::eq(r.find(b"BADGER").unwrap(), flushdb));
        assert!(r.find(b"set").is_some());
    }
}
