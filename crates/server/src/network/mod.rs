//! The network side of a server: listeners and event-loop threads
//! (`net`), a client connection's loop (`conn`) over any `transport`
//! (plain TCP, TLS, Unix sockets), the connection's wake-up `signal`,
//! the `DURABLE` mode's held replies (`durable`), a client socket's
//! `recv` and `send` (`sys`), the end of a turn where a thread's
//! connections write their replies together (`turn`), and serving a
//! thread's clients while its script is busy (`busy`).
//! Depends on the engine for commands and on the server's `host` for its
//! own state; never on persistence or replication but through the
//! engine's host or `Node`.

pub mod busy;
pub mod conn;
pub mod durable;
pub mod net;
pub mod signal;
pub mod sys;
pub mod tls;
pub mod transport;
pub mod turn;
pub mod unix;
