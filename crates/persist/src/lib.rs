//! Persistence formats: the RDB codec (values, DUMP payloads, whole
//! files), compatible with Redis 7.0 both ways.
//!
//! Pure encoding and decoding over bytes; files, threads and commands are
//! the server's (except `sluice-check-rdb`, the file checker in `src/bin`). Depends on `resp` (number formatting) and `store` (the
//! values it encodes); must not depend on the engine.

pub mod aof;
pub mod aof_base;
pub mod crc64;
pub mod file;
pub mod functions;
pub mod lzf;
pub mod packed;
pub mod stream;
pub mod value;

pub use value::{dump, restore, restore_why, Error, Limits, PayloadError, RDB_VERSION};
