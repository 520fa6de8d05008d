//! The core: what runs a command for any caller, and knows no family.
//!
//! The command's spec and the table type it is found in, the door every
//! caller comes through, the checks and the call, the context a handler
//! runs in, the effects record, blocking, outboxes, the session and the
//! state every connection shares. The core may use the subsystems
//! (`crate::subsystems`), whose state `Shared` holds; it never imports a
//! command family (`crate::commands`): the families' table is handed to
//! it when a server builds its `Shared`. `src/layering.rs` checks this.

pub mod blocking;
pub mod cmdstats;
pub mod ctx;
pub mod dispatch;
pub mod door;
pub mod effects;
pub mod error;
pub mod host;
pub mod meta;
pub mod multi;
pub mod outbox;
pub mod session;
pub mod shared;
pub mod spec;
pub mod table;
