//! The client's error type.

use std::fmt;

/// What can go wrong talking to a server.
#[derive(Debug)]
pub enum Error {
    /// The socket failed (connect, read or write).
    Io(std::io::Error),
    /// The server sent bytes that are not RESP, or a reply of an
    /// unexpected shape for a typed helper.
    Protocol(String),
    /// The server answered with an error reply (the text after `-`).
    Server(String),
    /// No answer within the configured timeout.
    Timeout,
    /// The connection was closed (by the server, or after an earlier error).
    Closed,
}

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Protocol(m) => write!(f, "protocol error: {m}"),
            Error::Server(m) => write!(f, "server error: {m}"),
            Error::Timeout => f.write_str("timed out"),
            Error::Closed => f.write_str("connection closed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<resp::FrameError> for Error {
    fn from(e: resp::FrameError) -> Self {
        Error::Protocol(e.0)
    }
}

impl Error {
    /// Whether this is an error reply from the server (the connection is
    /// still usable), as opposed to a transport failure.
    pub fn is_server(&self) -> bool {
        matches!(self, Error::Server(_))
    }
}
