//! Command errors and the one place their Redis wording lives.

use std::borrow::Cow;

use resp::ReplyBuf;

/// Why a command failed. Converted to Redis's exact error line by
/// [`CmdError::write`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdError {
    WrongType,
    NotInteger,
    NotFloat,
    Syntax,
    Overflow,
    NoSuchKey,
    OutOfRange,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire(&'static str),
    /// `ERR timeout is not an integer or out of range`
    TimeoutNotInteger,
    StringTooLong,
    DbIndexOutOfRange,
    SameObject,
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand {
        sub: Vec<u8>,
        cmd: Vec<u8>,
    },
    /// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try <CMD> HELP.`
    /// (subcommands parsed by hand: DEBUG, and CLIENT PAUSE's extra arguments)
    SubcommandSyntax {
        sub: Vec<u8>,
        cmd: Vec<u8>,
    },
    /// `ERR wrong number of arguments for '<cmd>' command`
    WrongArity(String),
    NoAuth,
    /// Over `maxmemory` (noeviction, or nothing left to evict).
    Oom,
    /// Writes refused after a failed background save
    /// (`stop-writes-on-bgsave-error`).
    Misconf,
    /// Fewer good replicas than `min-replicas-to-write`.
    NoReplicas,
    /// A write on a replica with `replica-read-only yes`.
    ReadOnlyReplica,
    /// A data command on a replica whose link to its master is down,
    /// with `replica-serve-stale-data no`.
    MasterDown,
    /// The dataset is being loaded.
    Loading,
    /// A script (`EVAL`) has run past `busy-reply-threshold`.
    Busy,
    /// A function (`FCALL`) has run past `busy-reply-threshold`.
    BusyFunction,
    /// A caller that already holds stripes (EXEC, a script) ran a command
    /// needing a stripe below them: refused rather than risk a deadlock.
    LockOrder,
    /// DEBUG refused by `enable-debug-command`.
    DebugNotAllowed,
    /// A `REPLAY_ONLY` command (its name) from a caller that is not a
    /// replay: Disque's words for LOADJOB.
    ReplayOnly(&'static str),
    /// A complete error line without the leading `-` (it starts with its
    /// own code, e.g. `ERR ...` or `WRONGPASS ...`).
    Msg(Cow<'static, str>),
    /// Same, as bytes (when it quotes user input).
    Bytes(Vec<u8>),
    /// A cluster redirection or refusal (`MOVED`, `ASK`, `CROSSSLOT`,
    /// `TRYAGAIN`, `CLUSTERDOWN`), a complete line: refusing EXEC, it
    /// discards the transaction and is the reply itself (no EXECABORT).
    Cluster(Cow<'static, str>),
    /// The job queue's errors, Disque's words (spec §2).
    Job(JobError),
}

/// Errors of the job queue's commands, with Disque's exact texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobError {
    BadId,
    NoJob,
    TooLate,
    NoRepl,
    NoReplOom,
    NoReplTimeout,
    NoReplExpired,
    MaxLen,
    Paused,
    Replicate,
    Ttl,
    Retry,
    Delay,
    MaxLenOption,
    TimeoutNegative,
    RetryZeroReplicate,
    DelayOverTtl,
    Count,
    Cursor,
    State,
    ReplyType,
    BadRecord,
    Backoff,
    DeadLetter,
    Every,
    Rate,
}

impl JobError {
    pub fn text(self) -> &'static str {
        match self {
            JobError::BadId => "BADID Invalid Job ID format.",
            JobError::NoJob => "NOJOB Job not known in the context of this node.",
            JobError::TooLate => {
                "TOOLATE Half of job TTL already elapsed, you are no longer allowed to postpone \
                 the next delivery."
            }
            JobError::NoRepl => {
                "NOREPL Not enough reachable nodes for the requested replication level"
            }
            JobError::NoReplOom => {
                "NOREPL Not enough reachable nodes for the requested replication level, since I'm \
                 unable to hold a copy of the message for the following reason: I'm out of memory"
            }
            JobError::NoReplTimeout => {
                "NOREPL Timeout reached before replicating to the requested number of nodes"
            }
            JobError::NoReplExpired => {
                "NOREPL job removed (expired?) before the requested replication level was achieved"
            }
            JobError::MaxLen => "MAXLEN Queue is already longer than the specified MAXLEN count",
            JobError::Paused => "PAUSED Queue paused in input, try later",
            JobError::Replicate => "ERR REPLICATE must be between 1 and 65535",
            JobError::Ttl => "ERR TTL must be a number > 0",
            JobError::Retry => "ERR RETRY time must be a non negative number",
            JobError::Delay => "ERR DELAY time must be a non negative number",
            JobError::MaxLenOption => "ERR MAXLEN must be a positive number",
            JobError::TimeoutNegative => "ERR timeout is negative",
            // Two spaces before REPLICATE, as Disque has it.
            JobError::RetryZeroReplicate => {
                "ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once \
                 delivery)"
            }
            JobError::DelayOverTtl => {
                "ERR The specified DELAY is greater than TTL. Job refused since would never be \
                 delivered"
            }
            JobError::Count => "ERR COUNT must be a number greater than zero",
            JobError::Cursor => "ERR invalid cursor or option name",
            JobError::State => "ERR Invalid job state name",
            JobError::ReplyType => "ERR Invalid REPLY type, try ID or ALL",
            JobError::BadRecord => "ERR LOADJOB: malformed job record",
            // Sluice's extensions, in the style of Disque's option errors.
            JobError::Backoff => {
                "ERR BACKOFF must be two numbers of milliseconds, base > 0 and max >= base, at \
                 most a year"
            }
            JobError::DeadLetter => "ERR DEADLETTER max deliveries must be between 1 and 65535",
            JobError::Every => "ERR EVERY must be a number of seconds > 0, at most a year",
            JobError::Rate => "ERR RATE must be between 0 and 4294967295",
        }
    }
}

impl From<JobError> for CmdError {
    fn from(e: JobError) -> CmdError {
        CmdError::Job(e)
    }
}

/// Result of a handler.
pub type CmdResult = Result<(), CmdError>;

impl CmdError {
    /// `ERR <text>` built at run time.
    pub fn err(text: impl Into<String>) -> CmdError {
        CmdError::Msg(Cow::Owned(format!("ERR {}", text.into())))
    }

    /// The error line (without `-` and CRLF).
    pub fn text(&self) -> Cow<'_, [u8]> {
        let s: &'static str = match self {
            CmdError::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value"
            }
            CmdError::NotInteger => "ERR value is not an integer or out of range",
            CmdError::NotFloat => "ERR value is not a valid float",
            CmdError::Syntax => "ERR syntax error",
            CmdError::Overflow => "ERR increment or decrement would overflow",
            CmdError::NoSuchKey => "ERR no such key",
            CmdError::OutOfRange => "ERR index out of range",
            CmdError::TimeoutNotInteger => "ERR timeout is not an integer or out of range",
            CmdError::StringTooLong => {
                "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
            }
            CmdError::DbIndexOutOfRange => "ERR DB index is out of range",
            CmdError::SameObject => "ERR source and destination objects are the same",
            CmdError::NoAuth => "NOAUTH Authentication required.",
            CmdError::Oom => "OOM command not allowed when used memory > 'maxmemory'.",
            CmdError::Loading => "LOADING Redis is loading the dataset in memory",
            CmdError::Misconf => {
                "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to \
                 persist to disk. Commands that may modify the data set are disabled, because this \
                 instance is configured to report errors during writes if RDB snapshotting fails \
                 (stop-writes-on-bgsave-error option). Please check the Redis logs for details \
                 about the RDB error."
            }
            CmdError::NoReplicas => "NOREPLICAS Not enough good replicas to write.",
            CmdError::ReadOnlyReplica => "READONLY You can't write against a read only replica.",
            CmdError::MasterDown => {
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
            }
            CmdError::Busy => {
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
            }
            CmdError::BusyFunction => {
                "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN \
                 NOSAVE."
            }
            CmdError::DebugNotAllowed => {
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \
                 \"local\", you can run it from a local connection, otherwise you need to set this \
                 option in the configuration file, and then restart the server."
            }
            CmdError::LockOrder => {
                "ERR command needs keys outside those its caller locked beforehand"
            }
            CmdError::ReplayOnly(name) => {
                return Cow::Owned(
                    format!("ERR {name} is a special command only processed from AOF")
                        .into_bytes(),
                )
            }
            CmdError::InvalidExpire(cmd) => {
                return Cow::Owned(
                    format!("ERR invalid expire time in '{cmd}' command").into_bytes(),
                )
            }
            CmdError::UnknownSubcommand { sub, cmd } => {
                let mut v = b"ERR unknown subcommand '".to_vec();
                v.extend_from_slice(&sub[..sub.len().min(128)]);
                v.extend_from_slice(b"'. Try ");
                v.extend_from_slice(cmd);
                v.extend_from_slice(b" HELP.");
                return Cow::Owned(v);
            }
            CmdError::SubcommandSyntax { sub, cmd } => {
                // Redis prints the subcommand with %.128s (stops at NUL).
                let sub: Vec<u8> = sub.iter().copied().take_while(|&c| c != 0).take(128).collect();
                let mut v = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
                v.extend_from_slice(&sub);
                v.extend_from_slice(b"'. Try ");
                v.extend(cmd.iter().map(u8::to_ascii_uppercase));
                v.extend_from_slice(b" HELP.");
                return Cow::Owned(v);
            }
            CmdError::WrongArity(cmd) => {
                return Cow::Owned(
                    format!("ERR wrong number of arguments for '{cmd}' command").into_bytes(),
                )
            }
            CmdError::Msg(m) | CmdError::Cluster(m) => return Cow::Borrowed(m.as_bytes()),
            CmdError::Bytes(b) => return Cow::Borrowed(b),
            CmdError::Job(e) => e.text(),
        };
        Cow::Borrowed(s.as_bytes())
    }

    /// Writes the error reply.
    pub fn write(&self, out: &mut ReplyBuf) {
        out.error(&self.text());
    }
}
