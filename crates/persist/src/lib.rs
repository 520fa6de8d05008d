//! Persistence formats, compatible with Redis 7.0 both ways: the RDB codec
//! (values, DUMP payloads, whole files, function libraries), the
//! append-only file's manifest, command base and command reader, and the
//! CRC64 and LZF they use.
//!
//! Pure encoding and decoding over bytes; files, threads and commands are
//! the server's (except the file checkers in `src/bin`, `sluice-check-rdb`
//! and `sluice-check-aof`). Depends on `resp` (number formatting) and
//! `store` (the values it encodes); must not depend on the engine.

pub mod aof;
pub mod aof_base;
pub mod crc64;
pub mod file;
pub mod functions;
/// LZF lives in `store`, where the engine (DEBUG OBJECT's
/// `serializedlength`) finds it too.
pub use store::lzf;
pub mod packed;
pub mod stream;
pub mod value;

pub use value::{dump, restore, restore_why, Error, Limits, PayloadError, RDB_VERSION};
