//! Command declarations: one [`Command`] per command, beside its handler,
//! carrying only what is Sluice's own; the built [`CommandSpec`] joins it
//! with Redis's metadata ([`crate::core::meta`]) once, when the table is built.

use resp::ReplyBuf;

use crate::core::ctx::{Args, Ctx};
use crate::core::error::CmdResult;
use crate::core::meta::Meta;

/// Handler signature: parse arguments, one keyspace operation, write the reply.
pub type Handler = fn(&mut Ctx, &mut Args, &mut ReplyBuf) -> CmdResult;

/// What a command does before the dispatcher takes its locks, given its
/// arguments, with nothing held (see [`Command::before_lock`]).
pub type BeforeLock = fn(&crate::Shared, &[&[u8]]);

/// Redis's arity: positive is exact, negative is "at least |n|" (counting
/// the command name, and for subcommands the container name too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arity(pub i32);

impl Arity {
    pub fn accepts(self, argc: usize) -> bool {
        let n = self.0;
        if n >= 0 {
            argc == n as usize
        } else {
            argc >= n.unsigned_abs() as usize
        }
    }
}

/// Command flags, as `COMMAND INFO` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flags(pub u64);

impl Flags {
    pub const NONE: Flags = Flags(0);
    pub const WRITE: Flags = Flags(1 << 0);
    pub const READONLY: Flags = Flags(1 << 1);
    pub const DENYOOM: Flags = Flags(1 << 2);
    pub const ADMIN: Flags = Flags(1 << 3);
    pub const PUBSUB: Flags = Flags(1 << 4);
    pub const NOSCRIPT: Flags = Flags(1 << 5);
    pub const BLOCKING: Flags = Flags(1 << 6);
    pub const LOADING: Flags = Flags(1 << 7);
    pub const STALE: Flags = Flags(1 << 8);
    pub const SKIP_MONITOR: Flags = Flags(1 << 9);
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 10);
    pub const FAST: Flags = Flags(1 << 11);
    pub const NO_AUTH: Flags = Flags(1 << 12);
    pub const MAY_REPLICATE: Flags = Flags(1 << 13);
    pub const NO_MULTI: Flags = Flags(1 << 14);
    pub const MOVABLEKEYS: Flags = Flags(1 << 15);
    pub const ALLOW_BUSY: Flags = Flags(1 << 16);
    pub const NO_MANDATORY_KEYS: Flags = Flags(1 << 17);
    pub const NO_ASYNC_LOADING: Flags = Flags(1 << 18);
    pub const ASKING: Flags = Flags(1 << 19);
    /// Redis's own flags (what `COMMAND INFO` prints).
    pub const REDIS: Flags = Flags((1 << 20) - 1);

    // Sluice's own flags (bits 20 and up), never printed by COMMAND: what
    // the dispatcher needs to know that Redis's flags do not say.

    /// Its first argument is a pub/sub channel the ACL checks (PUBLISH,
    /// SPUBLISH; Redis's `ACLDoesCommandHaveChannels`).
    pub const CHANNEL_ARG1: Flags = Flags(1 << 20);
    /// Every argument is a channel the ACL checks (SUBSCRIBE, SSUBSCRIBE).
    pub const CHANNEL_ARGS: Flags = Flags(1 << 21);
    /// Every argument is a channel pattern, which the ACL compares
    /// literally with the user's (PSUBSCRIBE).
    pub const CHANNEL_PATTERNS: Flags = Flags(1 << 22);
    /// Runs a script (EVAL, FCALL and their variants): client tracking
    /// follows the commands the script calls, never the runner itself,
    /// even a read-only one (Redis's call() skips EVAL_RO, EVALSHA_RO and
    /// FCALL_RO); MONITOR is fed the runner as it starts, before the
    /// commands it calls, although SKIP_MONITOR keeps it out of the
    /// ordinary feed.
    pub const RUNS_SCRIPT: Flags = Flags(1 << 23);

    // More of Sluice's own flags (bits 24 and up), never printed by COMMAND: what
    // the dispatcher needs to know that Redis's flags do not say.

    /// Runs at once inside MULTI instead of being queued (MULTI, EXEC,
    /// DISCARD, WATCH, QUIT, RESET).
    pub const NO_QUEUE: Flags = Flags(1 << 24);
    /// Never held by CLIENT PAUSE (QUIT).
    pub const NO_PAUSE: Flags = Flags(1 << 25);
    /// Executes the queued transaction (EXEC): a rejection aborts it, and
    /// the queued commands' flags count for pause and maxmemory.
    pub const EXEC_TX: Flags = Flags(1 << 26);
    /// May change the session's database (SELECT): a transaction holding
    /// it locks every database.
    pub const CHANGES_DB: Flags = Flags(1 << 27);
    /// Allowed to a RESP2 client in pub/sub mode ((P|S)SUBSCRIBE,
    /// (P|S)UNSUBSCRIBE, PING, QUIT, RESET).
    pub const PUBSUB_CONTEXT: Flags = Flags(1 << 28);
    /// A command (container) after which `CLIENT CACHING` still holds
    /// for the next command (CLIENT: Redis 7.0 keeps the flag across any
    /// CLIENT subcommand).
    pub const KEEPS_CACHING: Flags = Flags(1 << 29);
    /// Refused unless `enable-debug-command` allows the client (`yes`, or
    /// `local` for a loopback or Unix-socket client): DEBUG, as Redis
    /// 7.0's `CMD_PROTECTED`, checked right after arity, before NOAUTH.
    pub const PROTECTED: Flags = Flags(1 << 30);
    /// Touches keys it was not given (SCAN, RANDOMKEY: the keys they find
    /// expired are deleted): run directly by a client, its unit's
    /// operations propagate without MULTI/EXEC, as Redis 7.0's
    /// `CMD_TOUCHES_ARBITRARY_KEYS`.
    pub const TOUCHES_ARBITRARY_KEYS: Flags = Flags(1 << 31);
    /// Run only as a replay applies it (the AOF's or a master's stream,
    /// a replayed transaction: `Caller::must_obey`), refused at the door
    /// for every other caller, queued or not: LOADJOB, as Disque's.
    pub const REPLAY_ONLY: Flags = Flags(1 << 32);
    /// Refused as a write is while writes are refused for a disk error
    /// (`stop-writes-on-bgsave-error`): PING, so that a health check sees
    /// the error, as Redis 7.0's processCommand refuses `pingCommand`.
    pub const DISK_ERROR_PROBE: Flags = Flags(1 << 33);
    /// Reports every client's state (INFO, CLIENT LIST) or changes what
    /// every other client's next command meets (FAILOVER, REPLICAOF,
    /// CLIENT PAUSE): a connection runs it only once the other event-loop
    /// threads took in, and ran, the input their sockets already held
    /// (`dispatch::Outcome::AfterInput`), so that it sees, and comes after,
    /// every command that reached the server before it, as Redis's one
    /// thread, which serves sockets in arrival order, does. Not for a
    /// command a client sends without waiting for its reply before an
    /// INFO on another connection (SHUTDOWN, which blocks): that INFO
    /// would only wait for the other loops to take the command in, and
    /// then run while the command itself still waits for its turn.
    pub const AFTER_INPUT: Flags = Flags(1 << 34);

    /// Names in the order Redis prints them.
    pub const NAMES: &'static [(Flags, &'static str)] = &[
        (Flags::WRITE, "write"),
        (Flags::READONLY, "readonly"),
        (Flags::DENYOOM, "denyoom"),
        (Flags::ADMIN, "admin"),
        (Flags::PUBSUB, "pubsub"),
        (Flags::NOSCRIPT, "noscript"),
        (Flags::BLOCKING, "blocking"),
        (Flags::LOADING, "loading"),
        (Flags::STALE, "stale"),
        (Flags::SKIP_MONITOR, "skip_monitor"),
        (Flags::SKIP_SLOWLOG, "skip_slowlog"),
        (Flags::ASKING, "asking"),
        (Flags::FAST, "fast"),
        (Flags::NO_AUTH, "no_auth"),
        (Flags::MAY_REPLICATE, "may_replicate"),
        (Flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (Flags::NO_ASYNC_LOADING, "no_async_loading"),
        (Flags::NO_MULTI, "no_multi"),
        (Flags::MOVABLEKEYS, "movablekeys"),
        (Flags::ALLOW_BUSY, "allow_busy"),
    ];

    pub const fn union(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }

    pub const fn has(self, o: Flags) -> bool {
        self.0 & o.0 == o.0
    }

    /// Whether any flag of `o` is set.
    pub const fn intersects(self, o: Flags) -> bool {
        self.0 & o.0 != 0
    }
}

/// How the dispatcher finds and locks a command's keys, as built from
/// its declaration ([`Lock`]) and Redis's metadata.
#[derive(Clone, Copy, Debug)]
pub enum KeySpec {
    /// No keys.
    None,
    /// Redis's legacy (first, last, step); `last` negative counts from the
    /// end. Always taken from the metadata, never declared.
    Range { first: i32, last: i32, step: i32 },
    /// Every stripe of the selected database (KEYS, FLUSHDB, …).
    WholeDb,
    /// The selected database's stripes, which the handler locks itself as
    /// it walks them in ascending order (SCAN, RANDOMKEY: a call touches a
    /// few stripes, so locking all 1,024 up front would cost more than the
    /// command). `EXEC` locks them all beforehand, as for `WholeDb`.
    DbWalk,
    /// Every stripe of every database (FLUSHALL, SWAPDB).
    AllDbs,
    /// No key: the job namespace's one stripe, above every database's
    /// (the job queue's commands, `docs/jobs.md`).
    Jobs,
    /// Keys found by a function of the arguments (with their databases).
    Custom { find: FindKeys },
    /// As `Custom`, for a command that may also read keys that only the
    /// data names (SORT's BY/GET patterns): when `whole_db(args)` holds,
    /// every stripe of the selected database is locked instead, since
    /// those keys cannot be known before the call.
    CustomOrDb { find: FindKeys, whole_db: fn(&[&[u8]]) -> bool },
}

/// A key finder: pushes the (database, key) pairs of a command line.
pub type FindKeys = for<'a> fn(&[&'a [u8]], usize, &mut KeyList<'a>);

/// Keys of one command, as (database, key) pairs.
pub type KeyList<'a> = smallvec::SmallVec<[(usize, &'a [u8]); 8]>;

/// Command groups, as `COMMAND DOCS` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Generic,
    String,
    List,
    Set,
    SortedSet,
    Hash,
    Pubsub,
    Transactions,
    Connection,
    Server,
    Scripting,
    Hyperloglog,
    Cluster,
    Geo,
    Stream,
    Bitmap,
    Queue,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Generic => "generic",
            Group::String => "string",
            Group::List => "list",
            Group::Set => "set",
            Group::SortedSet => "sorted-set",
            Group::Hash => "hash",
            Group::Pubsub => "pubsub",
            Group::Transactions => "transactions",
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Scripting => "scripting",
            Group::Hyperloglog => "hyperloglog",
            Group::Cluster => "cluster",
            Group::Geo => "geo",
            Group::Stream => "stream",
            Group::Bitmap => "bitmap",
            Group::Queue => "queue",
        }
    }
}

/// How a declared command locks its keys: Sluice's own choice, beside
/// Redis's metadata (which says where the keys are, not how to lock them).
#[derive(Clone, Copy, Debug)]
pub enum Lock {
    /// The keys at Redis's legacy (first, last, step) from the metadata;
    /// none when the metadata has no range.
    Range,
    /// See [`KeySpec::WholeDb`].
    WholeDb,
    /// See [`KeySpec::DbWalk`].
    DbWalk,
    /// See [`KeySpec::AllDbs`].
    AllDbs,
    /// See [`KeySpec::Jobs`].
    Jobs,
    /// See [`KeySpec::Custom`].
    Custom { find: FindKeys },
    /// See [`KeySpec::CustomOrDb`].
    CustomOrDb { find: FindKeys, whole_db: fn(&[&[u8]]) -> bool },
}

/// Where a declared command's Redis facts (arity, flags, key specs,
/// group, docs) come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Redis 7.0's own metadata ([`crate::core::meta::redis70`]).
    Redis,
    /// Sluice's additions, in the same shape ([`crate::core::meta::sluice`]).
    Sluice,
}

/// One command (or subcommand) as a family declares it: its name, its
/// handler and only what is Sluice's own. Everything Redis's metadata
/// says (arity, Redis's flags, key range and key specs, group, summary,
/// since, complexity) is looked up by name when the table is built, so
/// this type has no place for it.
#[derive(Clone, Copy, Debug)]
pub struct Command {
    /// Upper-case name, e.g. `"GET"`; subcommands carry only their own
    /// part (`"GET"` under `CONFIG`).
    pub name: &'static str,
    pub handler: Handler,
    pub origin: Origin,
    /// Sluice's own flags (bits 20 and up), and `MAY_REPLICATE`, which
    /// Redis hides from `COMMAND` so the metadata cannot carry it.
    pub own_flags: Flags,
    pub lock: Lock,
    /// Run before a client's call takes every database's stripes
    /// ([`Lock::AllDbs`]); not by a caller that already holds its locks
    /// (EXEC, a script).
    pub before_lock: Option<BeforeLock>,
    /// Subcommands; a container's own handler is used when the name is
    /// not one of them (it answers "unknown subcommand").
    pub subcommands: &'static [Command],
}

impl Command {
    /// A Redis command: its facts come from Redis 7.0's metadata.
    pub const fn redis(name: &'static str, handler: Handler) -> Command {
        Command {
            name,
            handler,
            origin: Origin::Redis,
            own_flags: Flags::NONE,
            lock: Lock::Range,
            before_lock: None,
            subcommands: &[],
        }
    }

    /// A command Sluice adds: its facts come from `meta::sluice`.
    pub const fn sluice(name: &'static str, handler: Handler) -> Command {
        Command { origin: Origin::Sluice, ..Command::redis(name, handler) }
    }

    /// Sluice's own flags. Redis's flags come from the metadata: declaring
    /// one here is a compile-time error (except `MAY_REPLICATE`, see
    /// [`Command::own_flags`]).
    ///
    /// ```
    /// # use engine::core::spec::{Command, Flags};
    /// # use engine::core::{ctx::{Args, Ctx}, error::CmdResult};
    /// # fn h(_: &mut Ctx, _: &mut Args, _: &mut resp::ReplyBuf) -> CmdResult { Ok(()) }
    /// const PING: Command = Command::redis("PING", h).flags(Flags::PUBSUB_CONTEXT);
    /// ```
    ///
    /// ```compile_fail
    /// # use engine::core::spec::{Command, Flags};
    /// # use engine::core::{ctx::{Args, Ctx}, error::CmdResult};
    /// # fn h(_: &mut Ctx, _: &mut Args, _: &mut resp::ReplyBuf) -> CmdResult { Ok(()) }
    /// const PING: Command = Command::redis("PING", h).flags(Flags::FAST);
    /// ```
    pub const fn flags(mut self, f: Flags) -> Command {
        assert!(
            f.0 & Flags::REDIS.0 & !Flags::MAY_REPLICATE.0 == 0,
            "Redis's command flags come from the metadata"
        );
        self.own_flags = self.own_flags.union(f);
        self
    }

    pub const fn lock(mut self, l: Lock) -> Command {
        self.lock = l;
        self
    }

    /// What must happen before the command's stripes are locked: FLUSHALL
    /// ends a running snapshot first, as Redis kills its saving child, so
    /// that the snapshot does not copy every stripe FLUSHALL is about to
    /// empty (a stripe is captured when a writer first locks it).
    pub const fn before_lock(mut self, f: BeforeLock) -> Command {
        self.before_lock = Some(f);
        self
    }

    pub const fn subs(mut self, s: &'static [Command]) -> Command {
        self.subcommands = s;
        self
    }
}

/// One command (or subcommand) of the built table: its declaration joined
/// with its metadata once, at start-up ([`CommandSpec::build`]). The
/// dispatcher reads `arity`, `flags` and `keys` here, without a lookup.
#[derive(Clone, Copy, Debug)]
pub struct CommandSpec {
    /// As declared ([`Command::name`]).
    pub name: &'static str,
    /// The metadata's.
    pub arity: Arity,
    /// The metadata's flags with the declaration's own.
    pub flags: Flags,
    /// The declared [`Lock`], with the metadata's range.
    pub keys: KeySpec,
    pub handler: Handler,
    /// As declared ([`Command::before_lock`]).
    pub before_lock: Option<BeforeLock>,
    pub subcommands: &'static [CommandSpec],
    /// Private, so that a spec is only made by [`CommandSpec::build`].
    meta: &'static Meta,
    /// Its position in the table's flattened list (`Table::entries`): the
    /// stable index commandstats and the ACL bitmaps use.
    index: u32,
    /// Where its handler's arguments start: 1 for a command, 2 for a
    /// subcommand (its own name is `argv[1]`), known once here rather
    /// than found by comparing names on every call.
    first_arg: u8,
}

impl CommandSpec {
    /// Joins a declaration with its metadata; `subcommands` are the
    /// declaration's own subcommands, already built.
    pub fn build(
        decl: &Command,
        meta: &'static Meta,
        subcommands: &'static [CommandSpec],
        index: u32,
    ) -> CommandSpec {
        let keys = match decl.lock {
            Lock::Range if meta.first != 0 => {
                KeySpec::Range { first: meta.first, last: meta.last, step: meta.step }
            }
            Lock::Range => KeySpec::None,
            Lock::WholeDb => KeySpec::WholeDb,
            Lock::DbWalk => KeySpec::DbWalk,
            Lock::AllDbs => KeySpec::AllDbs,
            Lock::Jobs => KeySpec::Jobs,
            Lock::Custom { find } => KeySpec::Custom { find },
            Lock::CustomOrDb { find, whole_db } => KeySpec::CustomOrDb { find, whole_db },
        };
        CommandSpec {
            name: decl.name,
            arity: Arity(meta.arity),
            flags: Flags(u64::from(meta.flags)).union(decl.own_flags),
            keys,
            handler: decl.handler,
            before_lock: decl.before_lock,
            subcommands,
            meta,
            index,
            first_arg: if meta.name.contains('|') { 2 } else { 1 },
        }
    }

    /// Its stable index: its position in the table's flattened list of
    /// commands and subcommands (commandstats, ACL bitmaps).
    #[inline]
    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// Where its handler's arguments start in `argv`: after the command's
    /// name, or after a subcommand's name too.
    #[inline]
    pub fn first_arg(&self) -> usize {
        self.first_arg as usize
    }

    /// Its metadata (Redis's, or Sluice's for a command Sluice adds).
    pub fn meta(&self) -> &'static Meta {
        self.meta
    }
}
