//! What a handler sees: its arguments and a context with the locked keyspace.
//!
//! Handlers reach keys only through [`Ctx`]: its lookups expire keys
//! lazily and stamp the LRU/LFU access field, [`Ctx::entry`] looks a key
//! up for writing (occupied, or vacant with the place to insert it), and
//! its effects calls ([`Ctx::changed`], [`Ctx::changed_or_emptied`], …)
//! record what a write owes WATCH, blocked clients, notifications and
//! propagation. Stripes are the store's and the dispatcher's business.

use store::{Entry, Locks, Lookup, Record, Value};

use crate::core::dispatch::Caller;
use crate::core::effects::{Class, Effects};
use crate::core::error::{CmdError, CmdResult};
use crate::core::session::Session;
use crate::core::shared::Shared;
use crate::core::spec::CommandSpec;

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
        // Not `ok_or(CmdError::Syntax)`: that builds the error on every
        // call and drops it when there is an argument, an out-of-line
        // `drop_in_place` of the whole enum (7 instructions per GET).
        match self.next() {
            Some(a) => Ok(a),
            None => Err(CmdError::Syntax),
        }
    }

    /// Next argument as a key.
    pub fn key(&mut self) -> Result<&'a [u8], CmdError> {
        self.req()
    }

    /// A container's subcommand takes at most `n` arguments after its
    /// name: more is Redis's `addReplySubcommandSyntaxError`, checked
    /// before anything else the subcommand parses.
    pub fn at_most(&self, n: usize) -> Result<(), CmdError> {
        let argv = self.argv;
        if argv.len() > 2 + n {
            return Err(CmdError::SubcommandSyntax {
                sub: argv[1].to_vec(),
                cmd: argv[0].to_vec(),
            });
        }
        Ok(())
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

/// An integer argument in `min..=max`, as Redis's
/// `getRangeLongFromObjectOrReply` checks it: not an integer is
/// `NotInteger`, out of the range is the error that names the bounds.
pub fn parse_range(a: &[u8], min: i64, max: i64) -> Result<i64, CmdError> {
    let v = parse_i64(a)?;
    if v < min || v > max {
        return Err(CmdError::err(format!(
            "value is out of range, value must between {min} and {max}"
        )));
    }
    Ok(v)
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
    /// Who runs the command (a client, EXEC, a script, …).
    pub caller: Caller,
    /// Set by a served blocked command that found nothing it can take:
    /// the client keeps waiting (see [`crate::core::blocking`]).
    pub still_waiting: bool,
}

impl<'a> Ctx<'a, '_> {
    /// The command's clock, Unix milliseconds.
    #[inline]
    pub fn now(&self) -> i64 {
        self.keys.now
    }

    /// Whether an absolute expiry time `when` is already past, so that
    /// setting it deletes the key (Redis's `checkAlreadyExpired`): never
    /// while a replica applies its master's stream.
    #[inline]
    pub fn already_expired(&self, when: i64) -> bool {
        when <= self.keys.now && !self.keys.expiry_suspended()
    }

    /// The access stamp (`evict::access` turns it into a key's access
    /// field; `evict::fresh` into a new key's).
    #[inline]
    pub fn lru(&self) -> crate::subsystems::evict::Stamp<'a> {
        self.shared.access_stamp()
    }

    /// A live key of the selected database (counts a hit or miss).
    /// Always inlined: GET's whole path, and left out of line it cost GET
    /// 30 instructions more (bench/instructions, after a change elsewhere
    /// in the store moved LLVM's inlining decision).
    #[inline(always)]
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let stamp = self.shared.access_stamp();
        match self.keys.get(self.db, key) {
            Some(e) => {
                self.sess.stats.hits += 1;
                e.lru = crate::subsystems::evict::access(stamp, e.lru);
                Some(e)
            }
            None => {
                self.sess.stats.misses += 1;
                self.sess.fx.event(Class::KEY_MISS, "keymiss", self.db, key);
                None
            }
        }
    }

    /// The expiry (Unix ms) of `key` in the selected database, or
    /// [`store::NO_EXPIRE`]: a second lookup, for keys whose entry says
    /// they have a TTL ([`Entry::has_ttl`]).
    pub fn expire_of(&mut self, key: &[u8]) -> i64 {
        let db = self.db;
        self.keys.expire_of(db, key)
    }

    /// A live key, without touching hit/miss counters (write paths).
    #[inline]
    pub fn lookup(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let stamp = self.shared.access_stamp();
        let e = self.keys.get(self.db, key)?;
        e.lru = crate::subsystems::evict::access(stamp, e.lru);
        Some(e)
    }

    /// A live key about to be modified in place; the handler reports the
    /// change with [`changed`](Self::changed) once it is made.
    #[inline]
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.lookup(key)
    }

    /// Looks `key` up for writing: the live entry (its access stamped, as
    /// [`lookup`](Self::lookup)), or a vacant one whose
    /// [`insert`](Vacant::insert) adds the key where the lookup ended
    /// (Redis's `dbAdd`: a fresh access stamp and the `new` event). One
    /// lookup either way, with the connection's prefetched hash when it
    /// has one. The handler reports the change afterwards
    /// ([`changed`](Self::changed) or
    /// [`changed_or_emptied`](Self::changed_or_emptied)).
    #[inline]
    pub fn entry<'c>(&'c mut self, key: &'c [u8]) -> KeyEntry<'c> {
        let stamp = self.shared.access_stamp();
        let db = self.db;
        match self.keys.entry(db, key) {
            Lookup::Live(e) => {
                e.lru = crate::subsystems::evict::access(stamp, e.lru);
                KeyEntry::Occupied(e)
            }
            Lookup::Absent(place) => KeyEntry::Vacant(Vacant {
                place,
                fx: &mut self.sess.fx,
                db,
                lru: crate::subsystems::evict::fresh(stamp),
            }),
        }
    }

    // ---- the effects record (crate::core::effects) ---------------------------

    /// Reports that `key` of the selected database changed: marks its
    /// watchers, makes it ready for clients blocked on it, adds `dirty` to
    /// the dirty count (Redis's numbers: HSET adds the fields it set) and
    /// records the keyspace event. Call once per key and event, with the
    /// locks held (i.e. from the handler).
    #[inline]
    pub fn changed(&mut self, key: &[u8], class: Class, event: &'static str, dirty: u64) {
        let db = self.db;
        self.changed_in(db, key, class, event, dirty);
    }

    /// [`changed`](Self::changed) for a key of database `db` (MOVE, COPY …
    /// DB, SWAPDB).
    #[inline]
    pub fn changed_in(
        &mut self,
        db: usize,
        key: &[u8],
        class: Class,
        event: &'static str,
        dirty: u64,
    ) {
        self.keys.modified(db, key);
        let fx = &mut self.sess.fx;
        fx.add_dirty(dirty);
        fx.event(class, event, db, key);
        fx.key(db, key);
    }

    /// Reports a change that Redis makes without a keyspace event (PFCOUNT
    /// storing the cardinality it computed): watchers, readiness, tracking
    /// and the dirty count, as [`changed`](Self::changed).
    #[inline]
    pub fn changed_silently(&mut self, key: &[u8], dirty: u64) {
        let db = self.db;
        self.keys.modified(db, key);
        let fx = &mut self.sess.fx;
        fx.add_dirty(dirty);
        fx.key(db, key);
    }

    /// Records a change Redis makes without `signalModifiedKey` (a stream's
    /// consumer-group state: XGROUP, XREADGROUP, XACK, XCLAIM, and XSETID):
    /// the dirty count and the event, while WATCH and tracking are left
    /// alone. `ready` still wakes the key's blocked clients (XGROUP
    /// DESTROY, for its group's readers).
    pub fn changed_unwatched(
        &mut self,
        key: &[u8],
        event: Option<(Class, &'static str)>,
        dirty: u64,
        ready: bool,
    ) {
        let db = self.db;
        if ready {
            self.keys.stripe(db, key).readied(key);
        }
        let fx = &mut self.sess.fx;
        fx.add_dirty(dirty);
        if let Some((class, name)) = event {
            fx.event(class, name, db, key);
        }
    }

    /// Reports a write to the list, hash, set or sorted set at `key`, as
    /// [`changed`](Self::changed); when the write left it `emptied`, the
    /// key is deleted and Redis's `del` event follows the command's own
    /// (Redis never keeps an empty aggregate). The one place the families
    /// end a write that may empty a collection.
    #[inline]
    pub fn changed_or_emptied(
        &mut self,
        key: &[u8],
        class: Class,
        event: &'static str,
        dirty: u64,
        emptied: bool,
    ) {
        self.changed(key, class, event, dirty);
        if emptied {
            self.delete(key);
            self.notify(Class::GENERIC, "del", key);
        }
    }

    /// A `…STORE` command's result (SINTERSTORE and the other set and
    /// sorted-set algebra, ZRANGESTORE, SORT … STORE, GEORADIUS … STORE,
    /// GEOSEARCHSTORE, BITOP), as Redis writes it: a result replaces
    /// `key`'s value and TTL (`new` when the key did not exist) and is
    /// reported as `event` with `dirty` changes; no result (an empty one)
    /// deletes `key`, reported as `del` with one change when it existed.
    pub fn store_or_delete(
        &mut self,
        key: &[u8],
        result: Option<Value>,
        class: Class,
        event: &'static str,
        dirty: u64,
    ) {
        match result {
            Some(value) => {
                self.set(key, value, store::NO_EXPIRE);
                self.changed(key, class, event, dirty);
            }
            None => {
                if self.delete(key).is_some() {
                    self.changed(key, Class::GENERIC, "del", 1);
                }
            }
        }
    }

    /// Records a further keyspace event for a key already reported
    /// changed (`del` after a pop emptied a list, `new`, `rename_to` …).
    #[inline]
    pub fn notify(&mut self, class: Class, event: &'static str, key: &[u8]) {
        let db = self.db;
        self.sess.fx.event(class, event, db, key);
    }

    /// [`notify`](Self::notify) in database `db`.
    pub fn notify_in(&mut self, db: usize, class: Class, event: &'static str, key: &[u8]) {
        self.sess.fx.event(class, event, db, key);
    }

    /// Reports that the databases' keys were all removed (FLUSHDB,
    /// FLUSHALL): client-side caches are told to drop everything.
    pub fn flushed(&mut self) {
        self.sess.fx.flushed();
    }

    /// Adds to the dirty count without a key (FLUSHALL's extra one, …).
    #[inline]
    pub fn dirty(&mut self, n: u64) {
        self.sess.fx.add_dirty(n);
    }

    /// Whether the propagated form is recorded: check before building a
    /// rewrite that costs something (formatting a timestamp).
    #[inline]
    pub fn propagating(&self) -> bool {
        self.sess.fx.propagating()
    }

    /// Propagates this command as `argv` (Redis's rewrite: `SET … EX` as
    /// `SET … PXAT`, a served `BLPOP` as `LPOP`, …).
    #[inline]
    pub fn propagate_as(&mut self, argv: &[&[u8]]) {
        self.sess.fx.rewrite(argv);
    }

    /// Propagates `argv` besides (before) this command's own form.
    pub fn also_propagate(&mut self, argv: &[&[u8]]) {
        let db = self.db;
        self.sess.fx.also(db, argv);
    }

    /// This command is not propagated as itself.
    pub fn no_propagate(&mut self) {
        self.sess.fx.prevent();
    }

    /// This command is propagated even if it changed nothing (FLUSHDB and
    /// FLUSHALL, as Redis's `forceCommandPropagation`).
    pub fn force_propagate(&mut self) {
        self.sess.fx.force();
    }

    /// Whether a blocking command may wait here (not inside EXEC or a
    /// script, where blocking commands act as their non-blocking forms).
    /// A served command that cannot take anything calls
    /// [`blocking::block`](crate::core::blocking::block) again to keep waiting.
    #[inline]
    pub fn may_block(&self) -> bool {
        self.caller.may_block() || self.caller.serves_waiter()
    }

    /// The keys a blocking command should look at: all of `keys`, or when
    /// it runs again to be served, only the one that became ready (Redis
    /// 7.0 serves a waiter from the key that was signalled).
    pub fn waited_keys<'k>(&self, keys: &'k [&'k [u8]]) -> &'k [&'k [u8]] {
        match &self.sess.serving {
            Some(k) => keys.iter().position(|x| **x == **k).map_or(keys, |i| &keys[i..=i]),
            None => keys,
        }
    }

    /// Sets a key's value with an expiry (or [`store::NO_EXPIRE`]);
    /// returns the live entry it replaced. A key that did not exist (or
    /// had expired) is reported `new`, as Redis's `dbAdd`; the command
    /// reports its own change with [`changed`](Self::changed).
    #[inline]
    pub fn set(&mut self, key: &[u8], value: Value, expire_at: i64) -> Option<Record> {
        let stamp = self.shared.access_stamp();
        let old = self.keys.insert(
            self.db,
            key,
            value,
            expire_at,
            crate::subsystems::evict::fresh(stamp),
        );
        self.after_set(key, &old, stamp);
        old
    }

    /// [`set`](Self::set) when the key's stripe holds no TTLs (nothing
    /// there can have expired, so no lookup need come first: a plain
    /// SET's one stripe look-up); the value back, nothing done, when it
    /// holds some.
    #[inline]
    pub fn set_if_no_ttls(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at: i64,
    ) -> Result<Option<Record>, Value> {
        let stamp = self.shared.access_stamp();
        let old = self.keys.insert_if_no_ttls(
            self.db,
            key,
            value,
            expire_at,
            crate::subsystems::evict::fresh(stamp),
        )?;
        self.after_set(key, &old, stamp);
        Ok(old)
    }

    /// What a set reports: `new` for a key that was not there, and
    /// under LFU the old key's counter kept.
    #[inline(always)]
    fn after_set(
        &mut self,
        key: &[u8],
        old: &Option<Record>,
        stamp: crate::subsystems::evict::Stamp<'_>,
    ) {
        match old {
            None => self.sess.fx.event(Class::NEW, "new", self.db, key),
            // Under LFU an overwritten key keeps its (touched) counter, as
            // Redis's dbSetValue.
            Some(o) if stamp.bits & crate::subsystems::evict::LFU_BIT != 0 => {
                self.keep_lfu(key, o.lru, stamp)
            }
            Some(_) => {}
        }
    }

    #[cold]
    fn keep_lfu(&mut self, key: &[u8], old: u32, stamp: crate::subsystems::evict::Stamp<'_>) {
        if let Some(e) = self.keys.get(self.db, key) {
            e.lru = crate::subsystems::evict::access(stamp, old);
        }
    }

    /// Reports a key the command created without [`set`](Self::set)
    /// (through the stripe): Redis's `new` event.
    #[inline]
    pub fn created(&mut self, key: &[u8]) {
        let db = self.db;
        self.sess.fx.event(Class::NEW, "new", db, key);
    }

    /// Adds `key` to database `db` as Redis's `dbAdd` after a
    /// `dbDelete` (COPY … REPLACE): whatever was there is replaced, the
    /// key gets a fresh access field and the `new` event is recorded.
    pub fn add_in(&mut self, db: usize, key: &[u8], value: Value, expire_at: i64) {
        let lru = crate::subsystems::evict::fresh(self.shared.access_stamp());
        self.keys.insert(db, key, value, expire_at, lru);
        self.sess.fx.event(Class::NEW, "new", db, key);
    }

    /// Sets a key's access field from RESTORE's `IDLETIME` or `FREQ`, as
    /// Redis's `objectSetLRUOrLFU`: the frequency counts under an LFU
    /// policy, the idle time under any other; a negative one is not given.
    pub fn set_access(&mut self, key: &[u8], idle: i64, freq: i64) {
        let stamp = self.shared.access_stamp();
        let field = if stamp.bits & crate::subsystems::evict::LFU_BIT != 0 {
            (freq >= 0).then(|| crate::subsystems::evict::fresh(stamp) & !0xff | freq as u32)
        } else {
            let clock = self.shared.lru_clock();
            (idle >= 0).then(|| crate::subsystems::evict::lru_idle_stamp(clock, idle as u64))
        };
        if let Some(field) = field {
            if let Some(e) = self.keys.get(self.db, key) {
                e.lru = field;
            }
        }
    }

    /// Deletes a live key.
    #[inline]
    pub fn delete(&mut self, key: &[u8]) -> Option<Record> {
        self.keys.remove(self.db, key)
    }

    /// DEL's and UNLINK's delete: as [`delete`](Self::delete), except that
    /// on a replica a master's key past its deadline (kept by expiry there)
    /// is deleted and counted, as Redis's `delGenericCommand` does.
    pub fn delete_for_del(&mut self, key: &[u8]) -> Option<Record> {
        self.keys.remove_for_del(self.db, key)
    }

    /// A key's entry as it is: not expired, not stamped, no hit or miss
    /// counted (DEBUG OBJECT's view).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let db = self.db;
        self.keys.stripe(db, key).peek(key)
    }

    /// Whether `key` is there but past its deadline; it is then deleted,
    /// as Redis's `expireIfNeeded` (SCAN's last filter). A missing key is
    /// not expired.
    pub fn expire_if_due(&mut self, key: &[u8]) -> bool {
        let (db, now) = (self.db, self.keys.now);
        let s = self.keys.stripe(db, key);
        if s.peek(key).is_some_and(Entry::has_ttl) && s.is_expired(key, now) {
            s.get(key, now);
            return true;
        }
        false
    }

    /// Stripe `id` of the keyspace as a whole, for the commands that walk
    /// or empty a database stripe by stripe (KEYS, SCAN, RANDOMKEY,
    /// FLUSHDB): they see keys in bulk, not one by one, so they get the
    /// stripe itself. Every other handler goes through the key lookups
    /// above.
    #[inline]
    pub fn stripe_at(&mut self, id: u32) -> &mut store::Stripe {
        self.keys.stripe_id(id)
    }

    // ---- the job queue's readiness -----------------------------------

    /// Makes the clients blocked on job queue `queue` ready (a job was
    /// queued there); the job namespace's stripe is held.
    pub fn queue_ready(&mut self, queue: &[u8]) {
        let id = self.shared.store.jobs_id();
        self.keys.stripe_id(id).readied(queue);
    }

    /// How many clients wait on job queue `queue` (the job namespace's
    /// stripe is held).
    pub fn queue_waiters(&mut self, queue: &[u8]) -> usize {
        let id = self.shared.store.jobs_id();
        let s = self.keys.stripe_id(id);
        s.waiters.as_ref().and_then(|t| t.get(queue)).map_or(0, |q| q.len())
    }

    /// Whether a live key exists.
    #[inline]
    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.keys.contains(self.db, key)
    }
}

/// A key looked up for writing ([`Ctx::entry`]).
pub enum KeyEntry<'c> {
    /// The live key, its access already stamped.
    Occupied(&'c mut Entry),
    /// No live key (an expired one was deleted on the way).
    Vacant(Vacant<'c>),
}

impl<'c> KeyEntry<'c> {
    /// The live entry, if any (a handler that does not create the key).
    #[inline]
    pub fn occupied(self) -> Option<&'c mut Entry> {
        match self {
            KeyEntry::Occupied(e) => Some(e),
            KeyEntry::Vacant(_) => None,
        }
    }
}

/// Where a missing key goes: [`insert`](Vacant::insert) adds it.
pub struct Vacant<'c> {
    place: store::Absent<'c>,
    fx: &'c mut Effects,
    db: usize,
    /// The new key's access field (`evict::fresh`).
    lru: u32,
}

impl Vacant<'_> {
    /// Adds the key without a TTL (watchers and readiness are marked) and
    /// records Redis's `new` event; the handler reports its own change
    /// after, as for an existing key.
    #[inline]
    pub fn insert(self, value: Value) {
        let Vacant { place, fx, db, lru } = self;
        let key = place.key();
        place.insert(value, store::NO_EXPIRE, lru);
        fx.event(Class::NEW, "new", db, key);
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

/// Writes a HELP reply: one status line per text line.
pub fn help_reply(lines: &[&str], out: &mut resp::ReplyBuf) {
    out.array(lines.len());
    for l in lines {
        out.simple(l.as_bytes());
    }
}
