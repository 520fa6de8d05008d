//! The Redis wire format, and nothing else.
//!
//! Owns the request parser (RESP arrays of bulk strings and inline commands,
//! with Redis's limits and protocol-error wording), the reply encoder
//! ([`ReplyBuf`], RESP2 and RESP3 in compact chunks), the command encoder
//! ([`write_command`], for the AOF, the replication stream and clients) and
//! an owned [`Frame`] with its parser for clients and tests.
//!
//! Must not depend on any other Sluice crate, on I/O or on an async runtime.

mod command;
mod frame;
mod num;
mod parse;
mod reply;

pub use command::write_command;
pub use frame::{parse_frame, Frame, FrameError};
pub use num::{fmt_double, parse_i64, parse_u64};
pub use parse::{parse, split_args, ArgBuf, Limits, Parsed, ProtocolError, INLINE_MAX};
pub use reply::itoa_buf::Buf as IntBuf;
pub use reply::{Mark, Proto, ReplyBuf, CHUNK};
