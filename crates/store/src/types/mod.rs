//! The aggregate value types: one module each, owned by its family.

pub mod front;
pub mod hash;
pub mod hll;
pub mod list;
pub mod set;
pub mod stream;
#[cfg(test)]
pub(crate) mod test_rng;
pub mod zset;

pub use front::Str;
pub use hash::Hash;
pub use hll::PackedHll;
pub use list::{End as ListEnd, List};
pub use set::Set;
pub use stream::{Stream, StreamId};
pub use zset::ZSet;
