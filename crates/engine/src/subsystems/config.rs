//! Runtime configuration: the values, with Redis's names and defaults, and
//! the one parameter table ([`PARAMS`]) that drives all three ways of
//! setting them: a redis.conf-syntax file ([`load_file`]), `--name value`
//! command-line flags ([`from_args`]) and `CONFIG GET/SET` at run time.
//!
//! Parsing follows Redis 7.0.15: `sdssplitargs` quoting, `memtoull` memory
//! units, the same bounds and the same error texts. Parameters Sluice does
//! not act on yet are still accepted, validated and reported ("inert"), so
//! tools that read or write them see Redis's behaviour.
//!
//! Depends on nothing but std and libc (for `strerror`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

mod doc;
pub mod effect;
mod load;
mod params;
mod special;

pub use doc::markdown;
pub use load::{from_args, load_file, repr, rewrite, rewrite_with, split_args, ConfigError};
pub use params::PARAMS;
pub use special::expand_proc_title;
pub use special::notify_to_string;
pub(crate) use special::os_error_text;

/// The version Sluice reports itself compatible with.
pub const REDIS_VERSION: &str = "7.0.15";

/// `client-output-buffer-limit` for one client class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// `notify-keyspace-events` flag bits (Redis's `NOTIFY_*`).
pub mod notify {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const KEYEVENT: u32 = 1 << 1;
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const KEY_MISS: u32 = 1 << 11;
    /// Bit 12 is Redis's NOTIFY_LOADED (modules only); the bits equal
    /// [`crate::core::effects::Class`]'s, so an event's class tests directly.
    pub const MODULE: u32 = 1 << 13;
    pub const NEW: u32 = 1 << 14;
    /// What `A` stands for (not `m` nor `n`).
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// The configuration. Field names follow the Redis parameter names.
#[derive(Clone, Debug)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    pub databases: usize,
    /// Event-loop threads; 0 means one per core (Sluice's own `threads`).
    pub threads: usize,
    /// Accepted for compatibility; Sluice's threads are `threads`.
    pub io_threads: u32,
    pub requirepass: Option<Vec<u8>>,
    pub maxclients: usize,
    /// The server's own directory: every file it names by a relative path
    /// (`dbfilename`, `appenddirname`, temporary files, a relative
    /// `logfile` or `aclfile`) is in it, as in Redis, which `chdir`s
    /// there. Absolute once a server starts or CONFIG SET changes it.
    pub dir: String,
    pub dbfilename: String,
    /// `save` points as (seconds, changes).
    pub save: Vec<(i64, i64)>,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appenddirname: String,
    pub appendfsync: String,
    pub aof_use_rdb_preamble: bool,
    pub aof_load_truncated: bool,
    pub aof_timestamp_enabled: bool,
    /// `aof-disable-auto-gc`: keep history AOF files (and their manifest
    /// lines) after a rewrite instead of deleting them.
    pub aof_disable_auto_gc: bool,
    pub no_appendfsync_on_rewrite: bool,
    pub auto_aof_rewrite_percentage: i64,
    pub auto_aof_rewrite_min_size: u64,
    pub rdbcompression: bool,
    pub rdbchecksum: bool,
    pub stop_writes_on_bgsave_error: bool,
    /// `rdb-key-save-delay`: microseconds a save waits per key (a test
    /// knob in Redis too: it makes a save slow enough to race writes).
    pub rdb_key_save_delay: i64,
    /// `key-load-delay`: microseconds loading waits per key (a test knob
    /// in Redis too: it makes the LOADING window observable).
    pub key_load_delay: i64,
    pub loglevel: String,
    pub logfile: String,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: usize,
    pub obuf_normal: ObufLimit,
    pub obuf_replica: ObufLimit,
    pub obuf_pubsub: ObufLimit,
    /// Clamped to 1..=500 as Redis does.
    pub hz: u32,
    /// Keys the client-side caching table may hold (0: no limit).
    pub tracking_table_max_keys: u64,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub tcp_backlog: u32,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    /// `acllog-max-len`: entries ACL LOG keeps.
    pub acllog_max_len: u64,
    /// `aclfile`: where ACL LOAD/SAVE read and write users (empty: none).
    pub aclfile: String,
    /// `acl-pubsub-default`: `resetchannels` (7.0's default) or
    /// `allchannels`, what a new user or selector starts with.
    pub acl_pubsub_default: String,
    pub maxmemory_samples: u32,
    /// Bytes, or a percentage of maxmemory when negative (`-N` = `N%`).
    pub maxmemory_clients: i64,
    pub daemonize: bool,
    pub pidfile: String,
    pub protected_mode: bool,
    pub lfu_log_factor: i64,
    pub lfu_decay_time: i64,
    /// How long one round of eviction may run (`evict::time_limit`).
    pub maxmemory_eviction_tenacity: i64,
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    pub list_max_listpack_size: i64,
    pub list_compress_depth: i64,
    pub stream_node_max_bytes: usize,
    pub stream_node_max_entries: i64,
    pub hll_sparse_max_bytes: usize,
    /// [`notify`] bits.
    pub notify_keyspace_events: u32,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    pub latency_monitor_threshold: i64,
    /// Per-command latency histograms (`INFO latencystats`).
    pub latency_tracking: bool,
    /// The percentiles `INFO latencystats` prints.
    pub latency_tracking_info_percentiles: Vec<f64>,
    pub busy_reply_threshold: i64,
    /// How much of a dataset loads between two turns at clients' commands
    /// (Redis's `loading-process-events-interval-bytes`; see
    /// [`Shared::await_load`](crate::core::shared::Shared::await_load)).
    pub loading_process_events_interval_bytes: i64,
    pub active_expire_effort: u32,
    pub unixsocket: String,
    pub unixsocketperm: u32,
    pub replicaof: Option<(String, u16)>,
    pub replica_read_only: bool,
    /// `replica-serve-stale-data`: whether a replica whose link is down
    /// answers data commands (else MASTERDOWN).
    pub replica_serve_stale_data: bool,
    pub masterauth: Option<Vec<u8>>,
    pub masteruser: String,
    pub repl_backlog_size: i64,
    /// `no`, `yes` or `local`.
    pub enable_protected_configs: String,
    pub enable_debug_command: String,
    pub enable_module_command: String,
    /// Absolute path of the config file, empty when none (INFO, REWRITE).
    pub config_file: String,
    /// `rename-command` directives from the file, in order (applied at
    /// a server builds its `Shared`, `Shared::renames`).
    pub rename_commands: Vec<(String, String)>,
    /// `user` directives (name, then rules), applied at start-up by
    /// [`crate::subsystems::acl`].
    pub users: Vec<Vec<String>>,
    /// `loadmodule` paths and `module.name value` parameters: Sluice
    /// loads no modules, so the server stops where Redis would fail.
    pub load_modules: Vec<String>,
    pub module_configs: Vec<String>,
    /// Values of inert parameters that differ from their defaults, by
    /// primary name, in the form CONFIG GET reports.
    pub inert: BTreeMap<&'static str, Vec<u8>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            // Redis's own default: every interface, IPv6 optional. Protected
            // mode (on by default) refuses non-loopback clients while the
            // default user has no password, so this exposes nothing more
            // than a redis-server started without a file does.
            bind: vec!["*".into(), "-::*".into()],
            databases: 16,
            threads: 0,
            io_threads: 1,
            requirepass: None,
            maxclients: 10000,
            dir: ".".into(),
            dbfilename: "dump.rdb".into(),
            save: vec![(3600, 1), (300, 100), (60, 10000)],
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appenddirname: "appendonlydir".into(),
            appendfsync: "everysec".into(),
            aof_use_rdb_preamble: true,
            aof_load_truncated: true,
            aof_timestamp_enabled: false,
            aof_disable_auto_gc: false,
            no_appendfsync_on_rewrite: false,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 << 20,
            rdbcompression: true,
            rdbchecksum: true,
            stop_writes_on_bgsave_error: true,
            rdb_key_save_delay: 0,
            key_load_delay: 0,
            loglevel: "notice".into(),
            logfile: String::new(),
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            obuf_normal: ObufLimit { hard: 0, soft: 0, soft_seconds: 0 },
            obuf_replica: ObufLimit { hard: 256 << 20, soft: 64 << 20, soft_seconds: 60 },
            obuf_pubsub: ObufLimit { hard: 32 << 20, soft: 8 << 20, soft_seconds: 60 },
            hz: 10,
            timeout: 0,
            tcp_keepalive: 300,
            tcp_backlog: 511,
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            acllog_max_len: 128,
            aclfile: String::new(),
            acl_pubsub_default: "resetchannels".into(),
            maxmemory_samples: 5,
            maxmemory_clients: 0,
            daemonize: false,
            pidfile: String::new(),
            protected_mode: true,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            maxmemory_eviction_tenacity: 10,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            hll_sparse_max_bytes: 3000,
            tracking_table_max_keys: 1_000_000,
            notify_keyspace_events: 0,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            busy_reply_threshold: 5000,
            loading_process_events_interval_bytes: 2 * 1024 * 1024,
            active_expire_effort: 1,
            unixsocket: String::new(),
            unixsocketperm: 0,
            replicaof: None,
            replica_read_only: true,
            replica_serve_stale_data: true,
            masterauth: None,
            masteruser: String::new(),
            repl_backlog_size: 1 << 20,
            enable_protected_configs: "no".into(),
            enable_debug_command: "no".into(),
            enable_module_command: "no".into(),
            config_file: String::new(),
            rename_commands: Vec::new(),
            users: Vec::new(),
            load_modules: Vec::new(),
            module_configs: Vec::new(),
            inert: BTreeMap::new(),
        }
    }
}

// ---------------------------------------------------------------------------
// The parameter table.

/// Parameter flags (Redis's `*_CONFIG` flags that change behaviour here).
pub mod pflags {
    /// CONFIG SET refuses it ("can't set immutable config").
    pub const IMMUTABLE: u8 = 1;
    /// CONFIG SET refuses it unless `enable-protected-configs` allows.
    pub const PROTECTED: u8 = 2;
    /// Its value must not be logged.
    pub const SENSITIVE: u8 = 4;
    /// Takes several words (file) or a space-separated value (CONFIG SET).
    pub const MULTI_ARG: u8 = 8;
    /// CONFIG SET refuses it with -LOADING while the dataset loads
    /// (Redis's `DENY_LOADING_CONFIG`: `dir`, `appendonly`).
    pub const DENY_LOADING: u8 = 16;
    /// Left out of `CONFIG GET` patterns (Redis's `HIDDEN_CONFIG`); an
    /// exact name still finds it.
    pub const HIDDEN: u8 = 32;
    /// Acted on by the server process (start-up, logging, supervision,
    /// TLS) although the engine only stores it.
    pub const SERVER: u8 = 64;
}

use params::{num, yn};
use special::get_save;

/// A parsed value, before it is stored.
#[derive(Clone, Debug)]
pub enum Val {
    Bool(bool),
    Int(i128),
    Enum(&'static str),
    Str(Vec<u8>),
    Words(Vec<String>),
    Save(Vec<(i64, i64)>),
    Floats(Vec<f64>),
    /// (class index 0 normal / 1 replica / 2 pubsub, limit)
    Obuf(Vec<(usize, ObufLimit)>),
    Replica(Option<(String, u16)>),
    Flags(u32),
}

impl Val {
    fn b(&self) -> bool {
        matches!(self, Val::Bool(true))
    }
    fn i(&self) -> i128 {
        match self {
            Val::Int(v) => *v,
            _ => 0,
        }
    }
    fn s(self) -> String {
        match self {
            Val::Str(v) => String::from_utf8_lossy(&v).into_owned(),
            Val::Enum(e) => e.to_string(),
            _ => String::new(),
        }
    }
    fn bytes(self) -> Vec<u8> {
        match self {
            Val::Str(v) => v,
            _ => Vec::new(),
        }
    }
}

/// How a parameter's text is parsed and validated.
#[derive(Clone, Copy)]
pub enum Ty {
    Bool,
    /// Integer within bounds; `mem` accepts units, `pct` a trailing `%`
    /// (stored negative), `octal` base 8.
    Int {
        min: i128,
        max: i128,
        mem: bool,
        pct: bool,
        octal: bool,
    },
    Enum(&'static [&'static str]),
    /// A string, optionally validated.
    Str(Option<fn(&str) -> Result<(), &'static str>>),
    /// Its own parser over the words.
    Special(fn(&[&[u8]]) -> Result<Val, String>),
}

pub(crate) type Getter = fn(&Config) -> Vec<u8>;
pub(crate) type Setter = fn(&mut Config, Val);

/// Where a parameter's value lives.
#[derive(Clone, Copy)]
pub enum Slot {
    Field(Getter, Setter),
    /// Accepted and reported, not acted on; the default as CONFIG GET
    /// shows it.
    Inert(&'static str),
}

/// One configuration parameter.
#[derive(Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub flags: u8,
    pub ty: Ty,
    pub slot: Slot,
}

/// A parameter as named: its table entry and whether the alias was used
/// (Redis registers aliases as configs of their own, under their name).
#[derive(Clone, Copy)]
pub struct Named {
    pub param: &'static Param,
    pub alias: bool,
}

impl Named {
    /// The name it was registered under.
    pub fn name(&self) -> &'static str {
        if self.alias {
            self.param.alias.unwrap_or(self.param.name)
        } else {
            self.param.name
        }
    }

    /// Same registered config (a name and its alias are different ones,
    /// as in Redis: `CONFIG SET x-ziplist 1 x-listpack 2` is no duplicate).
    pub fn same(&self, o: &Named) -> bool {
        std::ptr::eq(self.param, o.param) && self.alias == o.alias
    }
}

fn index() -> &'static std::collections::HashMap<String, Named> {
    static INDEX: OnceLock<std::collections::HashMap<String, Named>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut m = std::collections::HashMap::new();
        for param in PARAMS.iter() {
            let prev = m.insert(param.name.to_string(), Named { param, alias: false });
            assert!(prev.is_none(), "config {} declared twice", param.name);
            if let Some(a) = param.alias {
                m.insert(a.to_string(), Named { param, alias: true });
            }
        }
        m
    })
}

/// Finds a parameter by name or alias, ignoring ASCII case.
pub fn lookup(name: &[u8]) -> Option<Named> {
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    index().get(&name).copied()
}

/// Every registered name (primary names and aliases), in table order.
pub fn names() -> impl Iterator<Item = Named> {
    PARAMS.iter().flat_map(|param| {
        std::iter::once(Named { param, alias: false })
            .chain(param.alias.map(|_| Named { param, alias: true }))
    })
}

/// The names a `CONFIG GET` pattern can match (hidden ones left out).
pub fn visible_names() -> impl Iterator<Item = Named> {
    names().filter(|n| n.param.flags & pflags::HIDDEN == 0)
}

impl Param {
    /// Whether Sluice acts on this parameter (false: accepted, stored and
    /// reported only; [`effect::not_in_effect`] says why).
    pub fn has_effect(&self) -> bool {
        effect::not_in_effect(self.name).is_none()
    }
}

/// The warning logged when a parameter without effect is set.
pub fn no_effect_warning(name: &str, value: &[u8]) -> String {
    effect::warning(name, value)
}

impl Config {
    /// One warning per parameter Sluice does not act on whose value
    /// differs from the default (start-up), and per ignored directive.
    pub fn no_effect_warnings(&self) -> Vec<String> {
        let def = Config::default();
        let mut out = Vec::new();
        for param in PARAMS.iter().filter(|p| !p.has_effect()) {
            let n = Named { param, alias: false };
            let v = self.get(n);
            // `save` points: Redis would snapshot with the defaults too.
            let differs = if param.name == "save" { !v.is_empty() } else { v != def.get(n) };
            if differs {
                out.push(no_effect_warning(param.name, &v));
            }
        }
        out
    }
}

impl Ty {
    /// Parses and validates the words of a value (one word unless
    /// MULTI_ARG), with Redis's error texts.
    pub fn parse(&self, args: &[&[u8]]) -> Result<Val, String> {
        let one = args.first().copied().unwrap_or(b"");
        match *self {
            Ty::Bool => {
                if one.eq_ignore_ascii_case(b"yes") {
                    Ok(Val::Bool(true))
                } else if one.eq_ignore_ascii_case(b"no") {
                    Ok(Val::Bool(false))
                } else {
                    Err("argument must be 'yes' or 'no'".into())
                }
            }
            Ty::Int { min, max, mem, pct, octal } => {
                let v = parse_number(one, mem, pct, octal)?;
                if pct && v < 0 {
                    if v < min {
                        return Err(format!(
                            "percentage argument must be less or equal to {}",
                            -min
                        ));
                    }
                } else if v < min || v > max {
                    return Err(if octal {
                        format!("argument must be between {min:o} and {max:o} inclusive")
                    } else {
                        format!("argument must be between {min} and {max} inclusive")
                    });
                }
                Ok(Val::Int(v))
            }
            Ty::Enum(values) => {
                match values.iter().find(|v| one.eq_ignore_ascii_case(v.as_bytes())) {
                    Some(v) => Ok(Val::Enum(v)),
                    None => Err(format!(
                        "argument(s) must be one of the following: {}",
                        values.join(", ")
                    )),
                }
            }
            Ty::Str(check) => {
                if let Some(check) = check {
                    check(&String::from_utf8_lossy(one))?;
                }
                Ok(Val::Str(one.to_vec()))
            }
            Ty::Special(parse) => parse(args),
        }
    }

    /// The canonical text of a parsed value (for inert parameters).
    fn canonical(&self, v: &Val) -> Vec<u8> {
        match (self, v) {
            (_, Val::Bool(b)) => yn(*b),
            (Ty::Int { pct: true, .. }, Val::Int(i)) if *i < 0 => format!("{}%", -i).into_bytes(),
            (Ty::Int { octal: true, .. }, Val::Int(i)) => format!("{i:o}").into_bytes(),
            (_, Val::Int(i)) => num(i),
            (_, Val::Enum(e)) => e.as_bytes().to_vec(),
            (_, Val::Str(s)) => s.clone(),
            _ => Vec::new(),
        }
    }
}

/// Redis's `numericParseString`: memory units, percent, octal or a plain
/// `string2ll` integer, in that order of attempts.
fn parse_number(s: &[u8], mem: bool, pct: bool, octal: bool) -> Result<i128, String> {
    if mem {
        if let Some(v) = parse_memory(s) {
            // Redis keeps the result in a `long long`: a huge value wraps
            // negative, which a percent parameter then reads as a percent.
            return Ok(if pct { v as i64 as i128 } else { v as i128 });
        }
    }
    if pct && s.len() > 1 && s.ends_with(b"%") {
        if let Some(v) = resp::parse_i64(&s[..s.len() - 1]) {
            if v >= 0 {
                return Ok(-(v as i128));
            }
        }
    }
    if octal {
        if let Some(v) = c_strtoll(s, 8) {
            return Ok(v as i128);
        }
    }
    if !mem && !pct && !octal {
        if let Some(v) = resp::parse_i64(s) {
            return Ok(v as i128);
        }
    }
    Err(if mem && pct {
        "argument must be a memory or percent value"
    } else if mem {
        "argument must be a memory value"
    } else if octal {
        "argument couldn't be parsed as an octal number"
    } else {
        "argument couldn't be parsed into an integer"
    }
    .into())
}

/// Redis's `memtoull`: digits then an optional unit (b, k, kb, m, mb, g,
/// gb; k/m/g are powers of 1000, kb/mb/gb of 1024), case-insensitive.
/// Digits may be absent (the value is then 0), as with `strtoull`.
pub fn parse_memory(s: &[u8]) -> Option<u64> {
    if s.first() == Some(&b'-') {
        return None;
    }
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let unit = &s[digits..];
    let mul: u64 = match unit.to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits >= 128 {
        return None;
    }
    // strtoull saturates on overflow and only EINVAL is checked.
    let mut v: u64 = 0;
    for &c in &s[..digits] {
        v = v.saturating_mul(10).saturating_add(u64::from(c - b'0'));
    }
    Some(v.wrapping_mul(mul))
}

/// C's `strtoll(s, &end, base)` with `*end == '\0'` required: leading
/// whitespace and a sign allowed, saturating, an empty string is 0.
fn c_strtoll(s: &[u8], base: u32) -> Option<i64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: i128 = 0;
    while i < s.len() {
        match (s[i] as char).to_digit(base) {
            Some(d) => v = (v * base as i128 + d as i128).min(i64::MAX as i128 + 1),
            None => break,
        }
        i += 1;
    }
    if i == start {
        // No digits: end points at the start of the string.
        return if s.is_empty() { Some(0) } else { None };
    }
    if i != s.len() {
        return None;
    }
    let v = if neg { -v } else { v };
    Some(v.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
}

impl Config {
    /// The value of a parameter as CONFIG GET reports it.
    pub fn get(&self, n: Named) -> Vec<u8> {
        match n.param.slot {
            Slot::Field(get, _) => get(self),
            Slot::Inert(default) => {
                self.inert.get(n.param.name).cloned().unwrap_or_else(|| default.as_bytes().to_vec())
            }
        }
    }

    /// `name` in the server's own `dir` (an absolute `name` stays as it
    /// is): where Redis, having changed into `dir`, opens it.
    pub fn path(&self, name: impl AsRef<std::path::Path>) -> std::path::PathBuf {
        std::path::Path::new(&self.dir).join(name)
    }

    /// Parses, validates and stores one parameter's value; the error is
    /// Redis's text (without the "CONFIG SET failed" framing).
    pub fn set(&mut self, n: Named, args: &[&[u8]]) -> Result<(), String> {
        // A relative `dir` is relative to the current one, as Redis's
        // chdir makes it (a second `dir` line, CONFIG SET dir sub).
        let (path, joined);
        let args = match args {
            [d] if n.param.name == "dir" && !d.is_empty() && !d.starts_with(b"/") => {
                use std::os::unix::ffi::{OsStrExt, OsStringExt};
                path = self.path(std::ffi::OsStr::from_bytes(d)).into_os_string().into_vec();
                joined = [&path[..]];
                &joined[..]
            }
            _ => args,
        };
        let v = n.param.ty.parse(args)?;
        self.store(n.param, v);
        Ok(())
    }

    /// What Redis's apply functions do after CONFIG SET stored new
    /// values: adjust values the way Redis's apply does, and act on the
    /// process (`oom-score-adj`). (TLS is applied by the server, through
    /// `Host::network`.)
    /// `Err` names the parameter and Redis's error; the caller keeps the
    /// old configuration then.
    pub fn apply_set(&mut self, set: &[Named], oom: &OomState) -> Result<(), (Named, String)> {
        let inert = |c: &Config, k: &str| c.get_by_name(k).unwrap_or_default();
        for n in set {
            match n.param.name {
                // resizeReplicationBacklog's minimum.
                "repl-backlog-size" => self.repl_backlog_size = self.repl_backlog_size.max(16384),
                // The watchdog needs at least two cron periods.
                "watchdog-period" => {
                    let v: i64 = String::from_utf8_lossy(&inert(self, "watchdog-period"))
                        .parse()
                        .unwrap_or(0);
                    let min = (1000 / i64::from(self.hz.max(1))) * 2;
                    if v != 0 && v < min {
                        self.inert.insert("watchdog-period", min.to_string().into_bytes());
                    }
                }
                "oom-score-adj" | "oom-score-adj-values" if !apply_oom_score(oom, self) => {
                    return Err((
                        *n,
                        "Failed to set current oom_score_adj. Check server logs.".into(),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn store(&mut self, param: &'static Param, v: Val) {
        match param.slot {
            Slot::Field(_, set) => set(self, v),
            Slot::Inert(_) => {
                let text = param.ty.canonical(&v);
                self.inert.insert(param.name, text);
            }
        }
    }

    /// Looks a parameter up by name and reads it (tests, INFO).
    pub fn get_by_name(&self, name: &str) -> Option<Vec<u8>> {
        lookup(name.as_bytes()).map(|n| self.get(n))
    }

    /// `save` as Redis prints it ("3600 1 300 100").
    pub fn save_string(&self) -> String {
        String::from_utf8_lossy(&get_save(self)).into_owned()
    }
}

/// What a server did to the process's `oom_score_adj` (the score is the
/// process's; with two servers in one process the last to write wins).
#[derive(Default)]
pub struct OomState {
    /// Whether the server is a replica: `oom-score-adj-values` has a
    /// value per role (master, replica; the third is for a fork child,
    /// which Sluice does not make).
    replica: std::sync::atomic::AtomicBool,
    /// Whether Sluice changed `oom_score_adj`, and the score from before
    /// it did (Redis's `oom_score_adjusted_by_redis` and
    /// `oom_score_adj_base`).
    adjusted: parking_lot::Mutex<(bool, i64)>,
}

/// Retitles the process from `cfg` (Redis's redisSetProcTitle): at
/// start-up and when `proc-title-template` changes; not with
/// `set-proc-title no`, nor for a server without the host's hook.
pub fn apply_proc_title(host: &crate::core::host::Host, cfg: &Config) {
    let Some(pt) = &host.proc_title else { return };
    if cfg.get_by_name("set-proc-title").is_some_and(|v| v == b"no") {
        return;
    }
    (pt.set)(&expand_proc_title(cfg, &pt.exec_name));
}

/// The server's role changed: the score follows its class.
pub fn set_oom_role(oom: &OomState, cfg: &Config, replica: bool) {
    oom.replica.store(replica, std::sync::atomic::Ordering::Relaxed);
    apply_oom_score(oom, cfg);
}

/// Redis's setOOMScoreAdj: with `oom-score-adj` on, writes this role's
/// value to `/proc/self/oom_score_adj` (added to the score the process
/// had when it was turned on, for `relative`/`yes`); turning it off
/// restores that score. False when the file cannot be read or written
/// (logged, as Redis does).
pub fn apply_oom_score(oom: &OomState, cfg: &Config) -> bool {
    const PATH: &str = "/proc/self/oom_score_adj";
    let mode = cfg.get_by_name("oom-score-adj").unwrap_or_default();
    let mut st = oom.adjusted.lock();
    let score = if mode != b"no" {
        if !st.0 {
            match std::fs::read_to_string(PATH) {
                Ok(v) => st.1 = v.trim().parse::<i64>().unwrap_or(0),
                Err(e) => {
                    crate::subsystems::log::warning(&format!(
                        "Unable to read oom_score_adj: {}",
                        special::os_error_text(&e)
                    ));
                    return false;
                }
            }
            st.0 = true;
        }
        let values = cfg.get_by_name("oom-score-adj-values").unwrap_or_default();
        let class = usize::from(oom.replica.load(std::sync::atomic::Ordering::Relaxed));
        let v: i64 = String::from_utf8_lossy(&values)
            .split(' ')
            .nth(class)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let v = if mode == b"absolute" { v } else { v + st.1 };
        v.clamp(-1000, 1000)
    } else if st.0 {
        st.0 = false;
        st.1
    } else {
        return true;
    };
    if let Err(e) = std::fs::write(PATH, format!("{score}\n")) {
        crate::subsystems::log::warning(&format!(
            "Unable to write oom_score_adj: {}",
            special::os_error_text(&e)
        ));
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units_as_memtoull() {
        assert_eq!(parse_memory(b"1gb"), Some(1 << 30));
        assert_eq!(parse_memory(b"100mb"), Some(100 << 20));
        assert_eq!(parse_memory(b"1k"), Some(1000));
        assert_eq!(parse_memory(b"1K"), Some(1000));
        assert_eq!(parse_memory(b"2KB"), Some(2048));
        assert_eq!(parse_memory(b"kb"), Some(0));
        assert_eq!(parse_memory(b""), Some(0));
        assert_eq!(parse_memory(b"1x"), None);
        assert_eq!(parse_memory(b"-1"), None);
        assert_eq!(parse_memory(b" 1"), None);
        assert_eq!(parse_memory(b"+1"), None);
        assert_eq!(parse_memory(b"1.5gb"), None);
    }

    #[test]
    fn glob() {
        assert!(crate::subsystems::glob::matches(
            b"*max-*-entries*",
            b"hash-max-listpack-entries",
            true
        ));
        assert!(crate::subsystems::glob::matches(b"MAXMEM*", b"maxmemory", true));
        assert!(!crate::subsystems::glob::matches(b"maxmem?", b"maxmemory", true));
        assert!(crate::subsystems::glob::matches(b"h[a-c]sh", b"hash", false));
        assert!(!crate::subsystems::glob::matches(b"h[^a]sh", b"hash", false));
        assert!(crate::subsystems::glob::matches(b"a\\*b", b"a*b", false));
        // As stringmatchlen: the loop never runs on an empty string.
        assert!(!crate::subsystems::glob::matches(b"*", b"", false));
    }

    #[test]
    fn every_param_default_parses() {
        // Each default must be accepted by its own parser (inert ones).
        for n in names() {
            let c = Config::default();
            let v = c.get(n);
            if n.param.flags & pflags::MULTI_ARG != 0 {
                continue;
            }
            let mut c2 = Config::default();
            if n.param.name == "dir" {
                continue;
            }
            c2.set(n, &[&v]).unwrap_or_else(|e| panic!("{}: {e}", n.name()));
            assert_eq!(c2.get(n), v, "{}", n.name());
        }
    }
}
