//! The command table: every family lists its declarations once; lookup is
//! ASCII case-insensitive and allocation-free.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::spec::CommandSpec;

pub mod command;
pub mod connection;
pub mod info;
pub mod keys;
pub mod server;
pub mod string;
pub mod tx;

pub use command::markdown;

/// Every family's declarations.
pub const FAMILIES: &[&[CommandSpec]] = &[
    string::COMMANDS,
    keys::COMMANDS,
    tx::COMMANDS,
    connection::COMMANDS,
    server::COMMANDS,
    info::COMMANDS,
    command::COMMANDS,
];

/// All top-level commands.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    FAMILIES.iter().flat_map(|f| f.iter())
}

fn index() -> &'static HashMap<Box<[u8]>, &'static CommandSpec> {
    static INDEX: OnceLock<HashMap<Box<[u8]>, &'static CommandSpec>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut m = HashMap::new();
        for spec in all() {
            let prev = m.insert(spec.name.as_bytes().to_ascii_uppercase().into(), spec);
            assert!(prev.is_none(), "command {} declared twice", spec.name);
        }
        m
    })
}

/// Finds a top-level command by name, ignoring ASCII case.
#[inline]
pub fn find(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    let up = &mut buf[..name.len()];
    up.copy_from_slice(name);
    up.make_ascii_uppercase();
    index().get(&*up).copied()
}
