//! Command declarations: one [`CommandSpec`] per command, beside its handler.

use resp::ReplyBuf;

use crate::ctx::{Args, Ctx};
use crate::error::CmdResult;

/// Handler signature: parse arguments, one keyspace operation, write the reply.
pub type Handler = fn(&mut Ctx, &mut Args, &mut ReplyBuf) -> CmdResult;

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
pub struct Flags(pub u32);

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
}

/// Where a command's keys are, for locking and for `COMMAND INFO`.
#[derive(Clone, Copy, Debug)]
pub enum KeySpec {
    /// No keys.
    None,
    /// Redis's (first, last, step); `last` negative counts from the end.
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
    Custom {
        /// Reported in `COMMAND INFO` as (first, last, step).
        legacy: (i32, i32, i32),
        find: for<'a> fn(&[&'a [u8]], usize, &mut KeyList<'a>),
    },
    /// As `Custom` (and reported the same way), for a command that may also
    /// read keys that only the data names (SORT's BY/GET patterns): when
    /// `whole_db(args)` holds, every stripe of the selected database is
    /// locked instead, since those keys cannot be known before the call.
    CustomOrDb {
        legacy: (i32, i32, i32),
        find: for<'a> fn(&[&'a [u8]], usize, &mut KeyList<'a>),
        whole_db: fn(&[&[u8]]) -> bool,
    },
}

/// Keys of one command, as (database, key) pairs.
pub type KeyList<'a> = smallvec::SmallVec<[(usize, &'a [u8]); 8]>;

impl KeySpec {
    pub const fn range(first: i32, last: i32, step: i32) -> KeySpec {
        KeySpec::Range { first, last, step }
    }

    /// (first, last, step) as `COMMAND INFO` reports it.
    pub fn legacy(&self) -> (i32, i32, i32) {
        match *self {
            KeySpec::Range { first, last, step } => (first, last, step),
            KeySpec::Custom { legacy, .. } | KeySpec::CustomOrDb { legacy, .. } => legacy,
            _ => (0, 0, 0),
        }
    }
}

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

/// One command (or subcommand) declaration.
#[derive(Clone, Copy, Debug)]
pub struct CommandSpec {
    /// Upper-case name, e.g. `"GET"`; subcommands carry only their own
    /// part (`"GET"` under `CONFIG`).
    pub name: &'static str,
    pub arity: Arity,
    pub flags: Flags,
    pub keys: KeySpec,
    pub group: Group,
    /// Version of Redis that introduced it, for `COMMAND DOCS`.
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    pub handler: Handler,
    /// Subcommands; a container's own handler is used when the name is
    /// not one of them (it answers "unknown subcommand").
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    /// A container or plain command with defaults for the optional fields.
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: Flags,
        keys: KeySpec,
        group: Group,
        summary: &'static str,
        handler: Handler,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity: Arity(arity),
            flags,
            keys,
            group,
            since: "1.0.0",
            summary,
            complexity: "",
            handler,
            subcommands: &[],
        }
    }

    pub const fn since(mut self, v: &'static str) -> CommandSpec {
        self.since = v;
        self
    }

    pub const fn complexity(mut self, c: &'static str) -> CommandSpec {
        self.complexity = c;
        self
    }

    pub const fn subs(mut self, s: &'static [CommandSpec]) -> CommandSpec {
        self.subcommands = s;
        self
    }
}
