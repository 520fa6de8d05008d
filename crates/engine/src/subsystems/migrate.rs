//! MIGRATE's seam: what the `MIGRATE` command (`commands::migrate`) asks
//! of the network ([`Transfer`]) and what came back ([`Transferred`]),
//! through the [`Migrator`] the server installs in `Host::migrator`
//! (`crates/server/src/replication/migrate.rs`).

/// One key to send: name, TTL in ms (0: none) and DUMP payload.
pub struct Item<'a> {
    pub key: &'a [u8],
    pub ttl: i64,
    pub payload: Vec<u8>,
}

/// What MIGRATE asks of the network.
pub struct Transfer<'a> {
    pub host: &'a [u8],
    pub port: &'a [u8],
    /// Milliseconds, for the connection and for each write and read.
    pub timeout_ms: u64,
    /// `AUTH [username] password` first.
    pub auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    pub db: i64,
    pub items: &'a [Item<'a>],
    pub replace: bool,
    /// Send `RESTORE-ASKING` rather than `RESTORE` (cluster mode).
    pub asking: bool,
}

/// Why the transfer stopped short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Connect,
    Write,
    Read,
}

/// What came back: the reply lines read (without CRLF), in order.
#[derive(Debug, Default)]
pub struct Transferred {
    /// AUTH's reply, when AUTH was sent and its reply read.
    pub auth: Option<Vec<u8>>,
    /// SELECT's reply, when SELECT was sent (the cached connection had
    /// another database selected) and its reply read.
    pub select: Option<Vec<u8>>,
    /// One line per RESTORE read, possibly fewer than the items.
    pub restores: Vec<Vec<u8>>,
    pub failure: Option<Failure>,
}

/// The network side of MIGRATE (the server's).
pub trait Migrator: Send + Sync {
    /// Sends the commands and reads the replies, retrying once on a fresh
    /// connection where Redis does (a failure before any RESTORE reply
    /// that is not a timeout).
    fn transfer(&self, t: &Transfer<'_>) -> Transferred;
    /// Connections kept open for later MIGRATEs (INFO's
    /// `migrate_cached_sockets`).
    fn cached_sockets(&self) -> usize;
}
