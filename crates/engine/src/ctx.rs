//! What a handler sees: its arguments and a context with the locked keyspace.

use store::{Entry, Locks, Value};

use crate::error::{CmdError, CmdResult};
use crate::session::Session;
use crate::shared::Shared;
use crate::spec::CommandSpec;

/// A command's arguments after the name (and subcommand), with a cursor.
pub struct Args<'a> {
    argv: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> Args<'a> {
    /// `start` is the index of the first argument after the name(s).
    pub fn new(argv: &'a [&'a [u8]], start: usize) -> Self {
        Args { argv, pos: start }
    }

    /// The whole argument vector, command name included.
    pub fn argv(&self) -> &'a [&'a [u8]] {
        self.argv
    }

    /// Arguments not yet consumed.
    pub fn remaining(&self) -> usize {
        self.argv.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The rest, unconsumed.
    pub fn rest(&self) -> &'a [&'a [u8]] {
        &self.argv[self.pos..]
    }

    /// Next argument, if any.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<&'a [u8]> {
        let a = self.argv.get(self.pos)?;
        self.pos += 1;
        Some(a)
    }

    pub fn peek(&self) -> Option<&'a [u8]> {
        self.argv.get(self.pos).copied()
    }

    /// Next argument, required (a syntax error if missing; arity checks
    /// normally make that impossible).
    pub fn req(&mut self) -> Result<&'a [u8], CmdError> {
        self.next().ok_or(CmdError::Syntax)
    }

    /// Next argument as a key.
    pub fn key(&mut self) -> Result<&'a [u8], CmdError> {
        self.req()
    }

    /// Next argument as a strict 64-bit integer.
    pub fn i64(&mut self) -> Result<i64, CmdError> {
        parse_i64(self.req()?)
    }
}

/// Parses an integer argument with Redis's rules.
pub fn parse_i64(a: &[u8]) -> Result<i64, CmdError> {
    resp::parse_i64(a).ok_or(CmdError::NotInteger)
}

/// Case-insensitive ASCII comparison with an upper-case literal.
#[inline]
pub fn eq_ic(a: &[u8], upper: &str) -> bool {
    a.eq_ignore_ascii_case(upper.as_bytes())
}

/// Everything a handler may touch.
pub struct Ctx<'a, 'l> {
    pub shared: &'a Shared,
    pub sess: &'l mut Session,
    pub keys: &'l mut Locks<'a>,
    /// The selected database.
    pub db: usize,
    pub spec: &'static CommandSpec,
}

impl Ctx<'_, '_> {
    /// The command's clock, Unix milliseconds.
    #[inline]
    pub fn now(&self) -> i64 {
        self.keys.now
    }

    /// The server's LRU clock, stored in entries on access.
    #[inline]
    pub fn lru(&self) -> u32 {
        self.shared.lru_clock()
    }

    /// A live key of the selected database (counts a hit or miss).
    #[inline]
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let lru = self.shared.lru_clock();
        match self.keys.get(self.db, key) {
            Some(e) => {
                self.sess.stats.hits += 1;
                e.lru = lru;
                Some(e)
            }
            None => {
                self.sess.stats.misses += 1;
                None
            }
        }
    }

    /// A live key, without touching hit/miss counters (write paths).
    #[inline]
    pub fn lookup(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let lru = self.shared.lru_clock();
        let e = self.keys.get(self.db, key)?;
        e.lru = lru;
        Some(e)
    }

    /// A live key about to be modified in place (marks watchers).
    #[inline]
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let lru = self.shared.lru_clock();
        let e = self.keys.get_for_write(self.db, key)?;
        e.lru = lru;
        Some(e)
    }

    /// Sets a key's value with an expiry (or [`store::NO_EXPIRE`]).
    #[inline]
    pub fn set(&mut self, key: &[u8], value: Value, expire_at: i64) -> Option<Entry> {
        let lru = self.shared.lru_clock();
        self.keys.insert(self.db, key, value, expire_at, lru)
    }

    /// Deletes a live key.
    #[inline]
    pub fn delete(&mut self, key: &[u8]) -> Option<Entry> {
        self.keys.remove(self.db, key)
    }

    /// Whether a live key exists.
    #[inline]
    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.keys.contains(self.db, key)
    }
}

/// Requires a string value.
pub fn expect_string(e: &Entry) -> CmdResult {
    if e.value.is_string() {
        Ok(())
    } else {
        Err(CmdError::WrongType)
    }
}
