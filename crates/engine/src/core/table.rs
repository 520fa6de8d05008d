//! The command table's type and its lookup. The core does not know the
//! families: the families' layer (`crate::commands`) lists their
//! declarations and builds one [`Table`] from them ([`Table::build`]),
//! which a server hands to its `Shared` (`Shared::with_host`). Each
//! declaration is joined with its metadata by name here, once, never per
//! command; lookup is ASCII case-insensitive and allocation-free.
//!
//! The configuration loader is handed the table too (its `rename-command`
//! checks). What has no `Shared` at hand deep inside (the ACL's command
//! ids, built once) reads the table [`install`]ed when it was built or
//! handed to a `Shared`.

use std::sync::OnceLock;

use crate::core::meta::{self, Meta};
use crate::core::spec::{Command, CommandSpec, Origin};

/// The command table: every top-level command, bucketed for lookup, and
/// the flattened list of commands and subcommands whose positions are
/// their stable indices (commandstats, ACL bitmaps). Specs live as long
/// as the process and are compared by address (`dispatch::full_name`, the
/// ACL and COMMAND tables).
pub struct Table {
    tops: &'static [CommandSpec],
    /// Commands bucketed by (name length, first letter): a lookup
    /// compares against one to three names, with no hashing and no copy.
    buckets: Vec<Vec<&'static CommandSpec>>,
    entries: Vec<Entry>,
}

/// One command or subcommand of the table, with its metadata; its
/// position in [`Table::entries`] is its stable index
/// ([`CommandSpec::index`]).
pub struct Entry {
    pub top: &'static CommandSpec,
    pub spec: &'static CommandSpec,
    pub meta: &'static Meta,
    /// Indices of the implemented subcommands' entries.
    pub subs: Vec<usize>,
    sub_metas: Vec<&'static Meta>,
}

impl Entry {
    /// Lower-case full name: `get`, `config|get`.
    pub fn name(&self) -> &'static str {
        self.meta.name
    }

    /// Metadata of the subcommands the table implements.
    pub fn sub_metas(&self) -> Vec<&'static Meta> {
        self.sub_metas.clone()
    }
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

impl Table {
    /// Joins every family's declarations (in the order `COMMAND` lists
    /// them) with their metadata. Panics on a declaration without
    /// metadata, a name declared twice or one too long: the table is
    /// fixed at build time, so these are programming errors.
    pub fn build(families: &[&[Command]]) -> Table {
        let mut tops = Vec::new();
        // Stable indices in the flattened order: a command, then its
        // subcommands.
        let mut next = 0u32;
        for decl in families.iter().flat_map(|f| f.iter()) {
            let top = decl.name.to_ascii_lowercase();
            let top_index = next;
            next += 1 + decl.subcommands.len() as u32;
            let subs: Vec<CommandSpec> = (top_index + 1..)
                .zip(decl.subcommands)
                .map(|(index, s)| {
                    let full = format!("{top}|{}", s.name.to_ascii_lowercase());
                    CommandSpec::build(s, meta_of(s, &full), &[], index)
                })
                .collect();
            let subs: &'static [CommandSpec] = Box::leak(subs.into_boxed_slice());
            tops.push(CommandSpec::build(decl, meta_of(decl, &top), subs, top_index));
        }
        let tops: &'static [CommandSpec] = Box::leak(tops.into_boxed_slice());
        let mut buckets = vec![Vec::new(); MAX_NAME * 32];
        let mut entries = Vec::new();
        for spec in tops {
            let n = spec.name.as_bytes();
            assert!(!n.is_empty() && n.len() < MAX_NAME, "command name {} too long", spec.name);
            let b: &mut Vec<&'static CommandSpec> = &mut buckets[bucket(n.len(), n[0])];
            assert!(!b.iter().any(|s| s.name == spec.name), "command {} declared twice", spec.name);
            b.push(spec);
            let at = entries.len();
            debug_assert_eq!(at, spec.index());
            let subs: Vec<usize> = (at + 1..=at + spec.subcommands.len()).collect();
            let sub_metas = spec.subcommands.iter().map(|s| s.meta()).collect();
            entries.push(Entry { top: spec, spec, meta: spec.meta(), subs, sub_metas });
            for s in spec.subcommands {
                debug_assert_eq!(entries.len(), s.index());
                entries.push(Entry {
                    top: spec,
                    spec: s,
                    meta: s.meta(),
                    subs: vec![],
                    sub_metas: vec![],
                });
            }
        }
        Table { tops, buckets, entries }
    }

    /// Finds a top-level command by name, ignoring ASCII case.
    #[inline]
    pub fn find(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        if name.is_empty() || name.len() >= MAX_NAME {
            return None;
        }
        self.buckets[bucket(name.len(), name[0])]
            .iter()
            .find(|s| name.eq_ignore_ascii_case(s.name.as_bytes()))
            .copied()
    }

    /// All top-level commands, in declaration order.
    pub fn tops(&self) -> impl Iterator<Item = &'static CommandSpec> {
        self.tops.iter()
    }

    /// Every command, each followed by its subcommands, in table order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry for a command line's command (`name` or
    /// `container|sub`), ignoring case.
    pub fn entry_by_name(&self, name: &[u8]) -> Option<&Entry> {
        let (top, spec) = match name.iter().position(|&c| c == b'|') {
            None => {
                let t = self.find(name)?;
                (t, t)
            }
            Some(i) => {
                let top = self.find(&name[..i])?;
                let sub = &name[i + 1..];
                (top, top.subcommands.iter().find(|s| sub.eq_ignore_ascii_case(s.name.as_bytes()))?)
            }
        };
        self.entry_of(top, spec)
    }

    /// The entry of a (top, spec) pair.
    pub fn entry_of(&self, top: &CommandSpec, spec: &CommandSpec) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| std::ptr::eq(e.top, top) && std::ptr::eq(e.spec, spec))
            .or_else(|| {
                self.entries.iter().find(|e| e.top.name == top.name && e.spec.name == spec.name)
            })
    }
}

static INSTALLED: OnceLock<&'static Table> = OnceLock::new();

/// Installs the process's command table; the families' layer does it once,
/// when it builds the table. Installing another table is a programming
/// error.
pub fn install(table: &'static Table) {
    let t = *INSTALLED.get_or_init(|| table);
    assert!(std::ptr::eq(t, table), "a second command table installed");
}

/// The installed table, for what runs with no `Shared` at hand. Panics
/// when none is installed: the families' layer (`engine::commands::table`)
/// must have built it first.
pub fn installed() -> &'static Table {
    INSTALLED.get().expect("no command table installed: call engine::commands::table() first")
}

/// `rename-command` from the configuration file, applied once when a
/// server builds its shared state (`Shared::renames`): the names clients
/// (and scripts, EXEC, the AOF and a master's stream, as in Redis) call
/// the commands by. The original table ([`Table::find`]) keeps serving
/// COMMAND, ACL and the configuration's own checks.
pub struct Renames {
    table: &'static Table,
    /// New names (lower case) and their commands.
    added: Vec<(Vec<u8>, &'static CommandSpec)>,
    /// Commands no longer reachable under their original name.
    removed: Vec<&'static CommandSpec>,
}

impl Renames {
    fn new(table: &'static Table) -> Renames {
        Renames { table, added: Vec::new(), removed: Vec::new() }
    }

    fn find(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        if let Some((_, spec)) = self.added.iter().find(|(n, _)| name.eq_ignore_ascii_case(n)) {
            return Some(spec);
        }
        self.table.find(name).filter(|s| !self.removed.iter().any(|r| std::ptr::eq(*r, *s)))
    }

    /// Applies the configuration's `rename-command` pairs in order, as
    /// Redis applies each line to its command table: the command goes
    /// from its current name to the new one, or away when the new name is
    /// empty. `None` when there are none; an error names the pair that
    /// cannot apply.
    pub fn build(
        table: &'static Table,
        pairs: &[(String, String)],
    ) -> Result<Option<Renames>, String> {
        if pairs.is_empty() {
            return Ok(None);
        }
        build_renames(table, pairs).map(Some)
    }
}

/// Whether `pairs` apply in order to `table`, with Redis's error text for
/// the first that does not (the configuration loader checks each line
/// so).
pub fn check_renames(
    table: &'static Table,
    pairs: &[(String, String)],
) -> Result<(), &'static str> {
    build_renames(table, pairs).map(|_| ()).map_err(|e| {
        if e.starts_with("Target") {
            "Target command name already exists"
        } else {
            "No such command in rename-command"
        }
    })
}

fn build_renames(table: &'static Table, pairs: &[(String, String)]) -> Result<Renames, String> {
    let mut r = Renames::new(table);
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

/// Finds a top-level command by the name it is called by: the server's
/// table, with `rename-command` applied.
#[inline]
pub fn find_called(shared: &crate::Shared, name: &[u8]) -> Option<&'static CommandSpec> {
    match &shared.renames {
        None => shared.table.find(name),
        Some(r) => r.find(name),
    }
}

/// Whether `rename-command` moved `spec` away from its own name (a
/// connection then does not reuse it by name, see `dispatch`).
pub fn is_renamed(shared: &crate::Shared, spec: &'static CommandSpec) -> bool {
    shared.renames.as_ref().is_some_and(|r| r.removed.iter().any(|s| std::ptr::eq(*s, spec)))
}

#[cfg(test)]
mod tests {
    use super::Renames;

    #[test]
    fn renames_apply_in_order_as_redis_applies_its_lines() {
        // Test modules may build the families' table (`src/layering.rs`
        // reads a file only up to its tests).
        let table = crate::commands::table();
        let flushdb = table.find(b"FLUSHDB").unwrap();
        let get = table.find(b"GET").unwrap();
        let mut r = Renames::new(table);
        r.removed.push(flushdb);
        r.added.push((b"badger".to_vec(), flushdb));
        r.removed.push(get);
        assert!(r.find(b"flushdb").is_none());
        assert!(r.find(b"get").is_none());
        assert!(std::ptr::eq(r.find(b"BADGER").unwrap(), flushdb));
        assert!(r.find(b"set").is_some());
    }

    #[test]
    fn handler_arguments_start_after_the_command_or_subcommand_name() {
        let table = crate::commands::table();
        for top in table.tops() {
            assert_eq!(top.first_arg(), 1, "{}", top.name);
            for sub in top.subcommands {
                assert_eq!(sub.first_arg(), 2, "{}|{}", top.name, sub.name);
            }
        }
    }
}
