//! The keyspace: databases split into lock stripes, entries, values and
//! their compact encodings, expiry and WATCH marks.
//!
//! Knows nothing of the protocol or of commands; must not depend on any
//! other Sluice crate.

pub mod bytes;
mod chain;
mod db;
mod keytable;
pub mod lzf;
pub mod slot;
pub mod table;
pub mod types;
pub mod value;

pub use bytes::{RawStr, RawVec, SmallBytes};
pub use db::{
    Absent, Deadlines, Entry, LockOrder, Locks, Lookup, Prefetch, Record, SnapshotHook, Store,
    Stripe, StripeCounts, StripeStats, Waiter, WatchFlag, NO_EXPIRE,
};
pub use keytable::key_eq;
pub use table::Table;
pub use value::{Kind, StrBuf, Value};
