//! The parameter table: every parameter Sluice knows, with its Redis
//! name, alias, flags, parser and storage, plus the parsers of the special
//! ones (`save`, `bind`, `client-output-buffer-limit`, `dir`, ...).

use std::fmt;
use std::path::{Path, PathBuf};

use super::pflags::*;
use super::{
    c_strtoll, notify, parse_memory, Config, Getter, ObufLimit, Param, Setter, Slot, Ty, Val,
};

const fn p(name: &'static str, flags: u8, ty: Ty, slot: Slot) -> Param {
    Param { name, alias: None, flags, ty, slot }
}
const fn pa(name: &'static str, alias: &'static str, flags: u8, ty: Ty, slot: Slot) -> Param {
    Param { name, alias: Some(alias), flags, ty, slot }
}
const fn int(min: i128, max: i128) -> Ty {
    Ty::Int { min, max, mem: false, pct: false, octal: false }
}
const fn mem(min: i128, max: i128) -> Ty {
    Ty::Int { min, max, mem: true, pct: false, octal: false }
}
const fn f(get: Getter, set: Setter) -> Slot {
    Slot::Field(get, set)
}
const fn inert(default: &'static str) -> Slot {
    Slot::Inert(default)
}

const INT_MAX: i128 = i32::MAX as i128;
const INT_MIN: i128 = i32::MIN as i128;
const LONG_MAX: i128 = i64::MAX as i128;
const UINT_MAX: i128 = u32::MAX as i128;
const ULLONG_MAX: i128 = u64::MAX as i128;

const YES_NO_LOCAL: &[&str] = &["no", "yes", "local"];
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

pub(super) fn num(v: impl fmt::Display) -> Vec<u8> {
    v.to_string().into_bytes()
}
pub(super) fn yn(b: bool) -> Vec<u8> {
    (if b { "yes" } else { "no" }).as_bytes().to_vec()
}

/// Every parameter, in the order CONFIG GET reports them.
pub static PARAMS: &[Param] = &[
    // Network and clients.
    p("port", 0, int(0, 65535), f(|c| num(c.port), |c, v| c.port = v.i() as u16)),
    p(
        "bind",
        MULTI_ARG,
        Ty::Special(parse_bind),
        f(
            |c| c.bind.join(" ").into_bytes(),
            |c, v| {
                if let Val::Words(w) = v {
                    c.bind = w;
                }
            },
        ),
    ),
    p(
        "unixsocket",
        IMMUTABLE,
        Ty::Str(None),
        f(|c| c.unixsocket.clone().into_bytes(), |c, v| c.unixsocket = v.s()),
    ),
    p(
        "unixsocketperm",
        IMMUTABLE,
        Ty::Int { min: 0, max: 0o777, mem: false, pct: false, octal: true },
        f(
            |c| format!("{:o}", c.unixsocketperm).into_bytes(),
            |c, v| c.unixsocketperm = v.i() as u32,
        ),
    ),
    p("protected-mode", 0, Ty::Bool, f(|c| yn(c.protected_mode), |c, v| c.protected_mode = v.b())),
    p(
        "tcp-backlog",
        IMMUTABLE,
        int(0, INT_MAX),
        f(|c| num(c.tcp_backlog), |c, v| c.tcp_backlog = v.i() as u32),
    ),
    p(
        "tcp-keepalive",
        0,
        int(0, INT_MAX),
        f(|c| num(c.tcp_keepalive), |c, v| c.tcp_keepalive = v.i() as u64),
    ),
    p("timeout", 0, int(0, INT_MAX), f(|c| num(c.timeout), |c, v| c.timeout = v.i() as u64)),
    p(
        "maxclients",
        0,
        int(1, UINT_MAX),
        f(|c| num(c.maxclients), |c, v| c.maxclients = v.i() as usize),
    ),
    p(
        "requirepass",
        SENSITIVE,
        Ty::Str(None),
        f(
            |c| c.requirepass.clone().unwrap_or_default(),
            |c, v| {
                let b = v.bytes();
                c.requirepass = if b.is_empty() { None } else { Some(b) };
            },
        ),
    ),
    p(
        "client-query-buffer-limit",
        0,
        mem(1024 * 1024, LONG_MAX),
        f(
            |c| num(c.client_query_buffer_limit),
            |c, v| c.client_query_buffer_limit = v.i() as usize,
        ),
    ),
    p(
        "client-output-buffer-limit",
        MULTI_ARG,
        Ty::Special(parse_obuf),
        f(get_obuf, |c, v| {
            if let Val::Obuf(list) = v {
                for (class, lim) in list {
                    match class {
                        0 => c.obuf_normal = lim,
                        1 => c.obuf_replica = lim,
                        _ => c.obuf_pubsub = lim,
                    }
                }
            }
        }),
    ),
    p(
        "proto-max-bulk-len",
        0,
        mem(1024 * 1024, LONG_MAX),
        f(|c| num(c.proto_max_bulk_len), |c, v| c.proto_max_bulk_len = v.i() as i64),
    ),
    p("threads", IMMUTABLE, int(0, 1024), f(|c| num(c.threads), |c, v| c.threads = v.i() as usize)),
    p(
        "io-threads",
        IMMUTABLE,
        int(1, 128),
        f(|c| num(c.io_threads), |c, v| c.io_threads = v.i() as u32),
    ),
    p("io-threads-do-reads", IMMUTABLE, Ty::Bool, inert("no")),
    // General.
    p(
        "databases",
        IMMUTABLE,
        int(1, INT_MAX),
        f(|c| num(c.databases), |c, v| c.databases = v.i() as usize),
    ),
    p("hz", 0, int(0, INT_MAX), f(|c| num(c.hz), |c, v| c.hz = v.i().clamp(1, 500) as u32)),
    p("dynamic-hz", 0, Ty::Bool, inert("yes")),
    p("daemonize", IMMUTABLE, Ty::Bool, f(|c| yn(c.daemonize), |c, v| c.daemonize = v.b())),
    p("supervised", IMMUTABLE, Ty::Enum(&["upstart", "systemd", "auto", "no"]), inert("no")),
    p(
        "pidfile",
        IMMUTABLE,
        Ty::Str(None),
        f(|c| c.pidfile.clone().into_bytes(), |c, v| c.pidfile = v.s()),
    ),
    p(
        "loglevel",
        0,
        Ty::Enum(&["debug", "verbose", "notice", "warning"]),
        f(|c| c.loglevel.clone().into_bytes(), |c, v| c.loglevel = v.s()),
    ),
    p(
        "logfile",
        IMMUTABLE,
        Ty::Str(None),
        f(|c| c.logfile.clone().into_bytes(), |c, v| c.logfile = v.s()),
    ),
    p("syslog-enabled", IMMUTABLE, Ty::Bool, inert("no")),
    p("syslog-ident", IMMUTABLE, Ty::Str(None), inert("redis")),
    p(
        "syslog-facility",
        IMMUTABLE,
        Ty::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        inert("local0"),
    ),
    p("crash-log-enabled", 0, Ty::Bool, inert("yes")),
    p("crash-memcheck-enabled", 0, Ty::Bool, inert("yes")),
    p("always-show-logo", IMMUTABLE, Ty::Bool, inert("no")),
    p("set-proc-title", IMMUTABLE, Ty::Bool, inert("yes")),
    p("proc-title-template", 0, Ty::Str(None), inert("{title} {listen-addr} {server-mode}")),
    p(
        "enable-protected-configs",
        IMMUTABLE,
        Ty::Enum(YES_NO_LOCAL),
        f(
            |c| c.enable_protected_configs.clone().into_bytes(),
            |c, v| c.enable_protected_configs = v.s(),
        ),
    ),
    p(
        "enable-debug-command",
        IMMUTABLE,
        Ty::Enum(YES_NO_LOCAL),
        f(|c| c.enable_debug_command.clone().into_bytes(), |c, v| c.enable_debug_command = v.s()),
    ),
    p(
        "enable-module-command",
        IMMUTABLE,
        Ty::Enum(YES_NO_LOCAL),
        f(|c| c.enable_module_command.clone().into_bytes(), |c, v| c.enable_module_command = v.s()),
    ),
    p("disable-thp", IMMUTABLE, Ty::Bool, inert("yes")),
    p("jemalloc-bg-thread", 0, Ty::Bool, inert("yes")),
    p("ignore-warnings", 0, Ty::Str(None), inert("")),
    // Snapshotting and AOF.
    p(
        "save",
        MULTI_ARG,
        Ty::Special(parse_save),
        f(get_save, |c, v| {
            if let Val::Save(s) = v {
                c.save = s;
            }
        }),
    ),
    p("dir", PROTECTED, Ty::Special(parse_dir), f(get_dir, |c, v| c.dir = v.s())),
    p(
        "dbfilename",
        PROTECTED,
        Ty::Str(Some(check_dbfilename)),
        f(|c| c.dbfilename.clone().into_bytes(), |c, v| c.dbfilename = v.s()),
    ),
    p("rdbcompression", 0, Ty::Bool, f(|c| yn(c.rdbcompression), |c, v| c.rdbcompression = v.b())),
    p("rdbchecksum", IMMUTABLE, Ty::Bool, f(|c| yn(c.rdbchecksum), |c, v| c.rdbchecksum = v.b())),
    p(
        "stop-writes-on-bgsave-error",
        0,
        Ty::Bool,
        f(|c| yn(c.stop_writes_on_bgsave_error), |c, v| c.stop_writes_on_bgsave_error = v.b()),
    ),
    p("rdb-del-sync-files", 0, Ty::Bool, inert("no")),
    p("rdb-save-incremental-fsync", 0, Ty::Bool, inert("yes")),
    p("appendonly", 0, Ty::Bool, f(|c| yn(c.appendonly), |c, v| c.appendonly = v.b())),
    p(
        "appendfilename",
        IMMUTABLE,
        Ty::Str(Some(check_appendfilename)),
        f(|c| c.appendfilename.clone().into_bytes(), |c, v| c.appendfilename = v.s()),
    ),
    p(
        "appenddirname",
        IMMUTABLE,
        Ty::Str(Some(check_appenddirname)),
        f(|c| c.appenddirname.clone().into_bytes(), |c, v| c.appenddirname = v.s()),
    ),
    p(
        "appendfsync",
        0,
        Ty::Enum(&["everysec", "always", "no"]),
        f(|c| c.appendfsync.clone().into_bytes(), |c, v| c.appendfsync = v.s()),
    ),
    p("no-appendfsync-on-rewrite", 0, Ty::Bool, inert("no")),
    p(
        "auto-aof-rewrite-percentage",
        0,
        int(0, INT_MAX),
        f(
            |c| num(c.auto_aof_rewrite_percentage),
            |c, v| c.auto_aof_rewrite_percentage = v.i() as i64,
        ),
    ),
    p(
        "auto-aof-rewrite-min-size",
        0,
        mem(0, LONG_MAX),
        f(|c| num(c.auto_aof_rewrite_min_size), |c, v| c.auto_aof_rewrite_min_size = v.i() as u64),
    ),
    p(
        "aof-load-truncated",
        0,
        Ty::Bool,
        f(|c| yn(c.aof_load_truncated), |c, v| c.aof_load_truncated = v.b()),
    ),
    p(
        "aof-use-rdb-preamble",
        0,
        Ty::Bool,
        f(|c| yn(c.aof_use_rdb_preamble), |c, v| c.aof_use_rdb_preamble = v.b()),
    ),
    p("aof-timestamp-enabled", 0, Ty::Bool, inert("no")),
    p("aof-rewrite-incremental-fsync", 0, Ty::Bool, inert("yes")),
    p("aof-disable-auto-gc", 0, Ty::Bool, inert("no")),
    // Memory.
    p(
        "maxmemory",
        0,
        mem(0, ULLONG_MAX),
        f(|c| num(c.maxmemory), |c, v| c.maxmemory = v.i() as u64),
    ),
    p(
        "maxmemory-policy",
        0,
        Ty::Enum(POLICIES),
        f(|c| c.maxmemory_policy.clone().into_bytes(), |c, v| c.maxmemory_policy = v.s()),
    ),
    p(
        "maxmemory-samples",
        0,
        int(1, INT_MAX),
        f(|c| num(c.maxmemory_samples), |c, v| c.maxmemory_samples = v.i() as u32),
    ),
    p("maxmemory-eviction-tenacity", 0, int(0, 100), inert("10")),
    p(
        "maxmemory-clients",
        0,
        Ty::Int { min: -100, max: LONG_MAX, mem: true, pct: true, octal: false },
        f(
            |c| {
                if c.maxmemory_clients < 0 {
                    format!("{}%", -c.maxmemory_clients).into_bytes()
                } else {
                    num(c.maxmemory_clients)
                }
            },
            |c, v| c.maxmemory_clients = v.i() as i64,
        ),
    ),
    p(
        "lfu-log-factor",
        0,
        int(0, INT_MAX),
        f(|c| num(c.lfu_log_factor), |c, v| c.lfu_log_factor = v.i() as i64),
    ),
    p(
        "lfu-decay-time",
        0,
        int(0, INT_MAX),
        f(|c| num(c.lfu_decay_time), |c, v| c.lfu_decay_time = v.i() as i64),
    ),
    p(
        "active-expire-effort",
        0,
        int(1, 10),
        f(|c| num(c.active_expire_effort), |c, v| c.active_expire_effort = v.i() as u32),
    ),
    p("activerehashing", 0, Ty::Bool, inert("yes")),
    p("lazyfree-lazy-eviction", 0, Ty::Bool, inert("no")),
    p("lazyfree-lazy-expire", 0, Ty::Bool, inert("no")),
    p("lazyfree-lazy-server-del", 0, Ty::Bool, inert("no")),
    p("lazyfree-lazy-user-del", 0, Ty::Bool, inert("no")),
    p("lazyfree-lazy-user-flush", 0, Ty::Bool, inert("no")),
    p("oom-score-adj", 0, Ty::Enum(&["no", "yes", "relative", "absolute"]), inert("no")),
    // Encodings.
    pa(
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        0,
        int(0, LONG_MAX),
        f(
            |c| num(c.hash_max_listpack_entries),
            |c, v| c.hash_max_listpack_entries = v.i() as usize,
        ),
    ),
    pa(
        "hash-max-listpack-value",
        "hash-max-ziplist-value",
        0,
        mem(0, LONG_MAX),
        f(|c| num(c.hash_max_listpack_value), |c, v| c.hash_max_listpack_value = v.i() as usize),
    ),
    p(
        "set-max-intset-entries",
        0,
        int(0, LONG_MAX),
        f(|c| num(c.set_max_intset_entries), |c, v| c.set_max_intset_entries = v.i() as usize),
    ),
    pa(
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        0,
        int(0, LONG_MAX),
        f(
            |c| num(c.zset_max_listpack_entries),
            |c, v| c.zset_max_listpack_entries = v.i() as usize,
        ),
    ),
    pa(
        "zset-max-listpack-value",
        "zset-max-ziplist-value",
        0,
        mem(0, LONG_MAX),
        f(|c| num(c.zset_max_listpack_value), |c, v| c.zset_max_listpack_value = v.i() as usize),
    ),
    pa(
        "list-max-listpack-size",
        "list-max-ziplist-size",
        0,
        int(INT_MIN, INT_MAX),
        f(|c| num(c.list_max_listpack_size), |c, v| c.list_max_listpack_size = v.i() as i64),
    ),
    p(
        "list-compress-depth",
        0,
        int(0, INT_MAX),
        f(|c| num(c.list_compress_depth), |c, v| c.list_compress_depth = v.i() as i64),
    ),
    p(
        "stream-node-max-bytes",
        0,
        mem(0, LONG_MAX),
        f(|c| num(c.stream_node_max_bytes), |c, v| c.stream_node_max_bytes = v.i() as usize),
    ),
    p(
        "stream-node-max-entries",
        0,
        int(0, LONG_MAX),
        f(|c| num(c.stream_node_max_entries), |c, v| c.stream_node_max_entries = v.i() as i64),
    ),
    p(
        "hll-sparse-max-bytes",
        0,
        mem(0, LONG_MAX),
        f(|c| num(c.hll_sparse_max_bytes), |c, v| c.hll_sparse_max_bytes = v.i() as usize),
    ),
    // Events, diagnostics.
    p(
        "notify-keyspace-events",
        0,
        Ty::Special(parse_notify),
        f(
            |c| notify_to_string(c.notify_keyspace_events).into_bytes(),
            |c, v| {
                if let Val::Flags(x) = v {
                    c.notify_keyspace_events = x;
                }
            },
        ),
    ),
    p(
        "slowlog-log-slower-than",
        0,
        int(-1, LONG_MAX),
        f(|c| num(c.slowlog_log_slower_than), |c, v| c.slowlog_log_slower_than = v.i() as i64),
    ),
    p(
        "slowlog-max-len",
        0,
        int(0, LONG_MAX),
        f(|c| num(c.slowlog_max_len), |c, v| c.slowlog_max_len = v.i() as u64),
    ),
    p(
        "latency-monitor-threshold",
        0,
        int(0, LONG_MAX),
        f(|c| num(c.latency_monitor_threshold), |c, v| c.latency_monitor_threshold = v.i() as i64),
    ),
    p("latency-tracking", 0, Ty::Bool, inert("yes")),
    pa(
        "busy-reply-threshold",
        "lua-time-limit",
        0,
        int(0, LONG_MAX),
        f(|c| num(c.busy_reply_threshold), |c, v| c.busy_reply_threshold = v.i() as i64),
    ),
    p(
        "tracking-table-max-keys",
        0,
        int(0, LONG_MAX),
        f(|c| num(c.tracking_table_max_keys), |c, v| c.tracking_table_max_keys = v.i() as u64),
    ),
    p("acllog-max-len", 0, int(0, LONG_MAX), inert("128")),
    p("aclfile", IMMUTABLE, Ty::Str(None), inert("")),
    p("acl-pubsub-default", 0, Ty::Enum(&["allchannels", "resetchannels"]), inert("resetchannels")),
    p("sanitize-dump-payload", 0, Ty::Enum(&["no", "yes", "clients"]), inert("no")),
    p("shutdown-timeout", 0, int(0, INT_MAX), inert("10")),
    // Replication and cluster.
    pa(
        "replicaof",
        "slaveof",
        IMMUTABLE | MULTI_ARG,
        Ty::Special(parse_replicaof),
        f(
            |c| {
                c.replicaof
                    .as_ref()
                    .map(|(h, p)| format!("{h} {p}"))
                    .unwrap_or_default()
                    .into_bytes()
            },
            |c, v| {
                if let Val::Replica(r) = v {
                    c.replicaof = r;
                }
            },
        ),
    ),
    p(
        "masterauth",
        SENSITIVE,
        Ty::Str(None),
        f(
            |c| c.masterauth.clone().unwrap_or_default(),
            |c, v| {
                let b = v.bytes();
                c.masterauth = if b.is_empty() { None } else { Some(b) };
            },
        ),
    ),
    p(
        "masteruser",
        SENSITIVE,
        Ty::Str(None),
        f(|c| c.masteruser.clone().into_bytes(), |c, v| c.masteruser = v.s()),
    ),
    pa(
        "replica-read-only",
        "slave-read-only",
        0,
        Ty::Bool,
        f(|c| yn(c.replica_read_only), |c, v| c.replica_read_only = v.b()),
    ),
    pa("replica-serve-stale-data", "slave-serve-stale-data", 0, Ty::Bool, inert("yes")),
    pa("replica-lazy-flush", "slave-lazy-flush", 0, Ty::Bool, inert("no")),
    pa("replica-ignore-maxmemory", "slave-ignore-maxmemory", 0, Ty::Bool, inert("yes")),
    pa("replica-priority", "slave-priority", 0, int(0, INT_MAX), inert("100")),
    pa("replica-announce-ip", "slave-announce-ip", 0, Ty::Str(None), inert("")),
    pa("replica-announce-port", "slave-announce-port", 0, int(0, 65535), inert("0")),
    p("replica-announced", 0, Ty::Bool, inert("yes")),
    p(
        "repl-backlog-size",
        0,
        mem(1, LONG_MAX),
        f(|c| num(c.repl_backlog_size), |c, v| c.repl_backlog_size = v.i() as i64),
    ),
    p("repl-backlog-ttl", 0, int(0, LONG_MAX), inert("3600")),
    p("repl-timeout", 0, int(1, INT_MAX), inert("60")),
    pa("repl-ping-replica-period", "repl-ping-slave-period", 0, int(1, INT_MAX), inert("10")),
    p("repl-disable-tcp-nodelay", 0, Ty::Bool, inert("no")),
    p("repl-diskless-sync", 0, Ty::Bool, inert("yes")),
    p("repl-diskless-sync-delay", 0, int(0, INT_MAX), inert("5")),
    p("repl-diskless-sync-max-replicas", 0, int(0, INT_MAX), inert("0")),
    p("repl-diskless-load", 0, Ty::Enum(&["disabled", "on-empty-db", "swapdb"]), inert("disabled")),
    pa("min-replicas-to-write", "min-slaves-to-write", 0, int(0, INT_MAX), inert("0")),
    pa("min-replicas-max-lag", "min-slaves-max-lag", 0, int(0, INT_MAX), inert("10")),
    p("cluster-enabled", IMMUTABLE, Ty::Bool, inert("no")),
    p("cluster-config-file", IMMUTABLE, Ty::Str(None), inert("nodes.conf")),
    p("cluster-node-timeout", 0, int(0, LONG_MAX), inert("15000")),
    p("cluster-port", IMMUTABLE, int(0, 65535), inert("0")),
];

fn is_base_name(s: &str) -> bool {
    !s.contains('/')
}
fn check_dbfilename(s: &str) -> Result<(), &'static str> {
    if is_base_name(s) {
        Ok(())
    } else {
        Err("dbfilename can't be a path, just a filename")
    }
}
fn check_appendfilename(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        Err("appendfilename can't be empty")
    } else if !is_base_name(s) {
        Err("appendfilename can't be a path, just a filename")
    } else {
        Ok(())
    }
}
fn check_appenddirname(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        Err("appenddirname can't be empty")
    } else if !is_base_name(s) {
        Err("appenddirname can't be a path, just a dirname")
    } else {
        Ok(())
    }
}

pub(super) fn words(args: &[&[u8]]) -> Vec<String> {
    args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

fn parse_bind(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() > 16 {
        return Err("Too many bind addresses specified.".into());
    }
    if args.len() == 1 && args[0].is_empty() {
        return Ok(Val::Words(Vec::new()));
    }
    Ok(Val::Words(words(args)))
}

fn parse_save(args: &[&[u8]]) -> Result<Val, String> {
    let args = if args.len() == 1 && args[0].is_empty() { &[][..] } else { args };
    if args.len() & 1 == 1 {
        return Err("Invalid save parameters".into());
    }
    let mut out = Vec::new();
    for pair in args.chunks(2) {
        let secs = c_strtoll(pair[0], 10).filter(|&v| v >= 1);
        let changes = c_strtoll(pair[1], 10).filter(|&v| v >= 0);
        match (secs, changes) {
            // Redis keeps `changes` in an int.
            (Some(s), Some(c)) => out.push((s, c as i32 as i64)),
            _ => return Err("Invalid save parameters".into()),
        }
    }
    Ok(Val::Save(out))
}

pub(super) fn get_save(c: &Config) -> Vec<u8> {
    let parts: Vec<String> = c.save.iter().map(|(s, n)| format!("{s} {n}")).collect();
    parts.join(" ").into_bytes()
}

fn parse_obuf(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() & 3 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut out = Vec::new();
    for a in args.chunks(4) {
        let class = match a[0].to_ascii_lowercase().as_slice() {
            b"normal" => 0,
            b"slave" | b"replica" => 1,
            b"pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
        };
        let hard = parse_memory(a[1]);
        let soft = parse_memory(a[2]);
        let secs = c_strtoll(a[3], 10).map(|v| v as i32).filter(|&v| v >= 0);
        match (hard, soft, secs) {
            (Some(hard), Some(soft), Some(secs)) => {
                out.push((class, ObufLimit { hard, soft, soft_seconds: secs as u64 }))
            }
            _ => {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                )
            }
        }
    }
    Ok(Val::Obuf(out))
}

fn get_obuf(c: &Config) -> Vec<u8> {
    let one = |n: &str, l: &ObufLimit| format!("{n} {} {} {}", l.hard, l.soft, l.soft_seconds);
    format!(
        "{} {} {}",
        one("normal", &c.obuf_normal),
        one("slave", &c.obuf_replica),
        one("pubsub", &c.obuf_pubsub)
    )
    .into_bytes()
}

fn parse_replicaof(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() != 2 {
        return Err("wrong number of arguments".into());
    }
    if args[0].eq_ignore_ascii_case(b"no") && args[1].eq_ignore_ascii_case(b"one") {
        return Ok(Val::Replica(None));
    }
    match c_strtoll(args[1], 10) {
        Some(port) if (0..=65535).contains(&port) && !args[1].is_empty() => {
            Ok(Val::Replica(Some((String::from_utf8_lossy(args[0]).into_owned(), port as u16))))
        }
        _ => Err("Invalid master port".into()),
    }
}

/// Text of an OS error, as `strerror` words it.
pub(super) fn os_error_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            // SAFETY: strerror returns a pointer to a NUL-terminated static
            // (or thread-local) message string, copied out at once.
            let p = unsafe { libc::strerror(code) };
            if p.is_null() {
                e.to_string()
            } else {
                // SAFETY: non-null, NUL-terminated per strerror's contract.
                unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        }
        None => e.to_string(),
    }
}

/// `dir`: Redis `chdir`s at once; the engine only checks the directory is
/// usable and keeps its absolute path (the server changes directory).
fn parse_dir(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() != 1 {
        return Err("wrong number of arguments".into());
    }
    let path = PathBuf::from(String::from_utf8_lossy(args[0]).into_owned());
    let meta = std::fs::metadata(&path).map_err(|e| os_error_text(&e))?;
    if !meta.is_dir() {
        return Err("Not a directory".into());
    }
    let abs = std::fs::canonicalize(&path).map_err(|e| os_error_text(&e))?;
    Ok(Val::Str(abs.to_string_lossy().into_owned().into_bytes()))
}

fn get_dir(c: &Config) -> Vec<u8> {
    let p = Path::new(&c.dir);
    if p.is_absolute() {
        return c.dir.clone().into_bytes();
    }
    match std::env::current_dir() {
        Ok(cwd) => {
            let full = if c.dir == "." { cwd } else { cwd.join(p) };
            full.to_string_lossy().into_owned().into_bytes()
        }
        Err(_) => Vec::new(),
    }
}

fn parse_notify(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() != 1 {
        return Err("wrong number of arguments".into());
    }
    let mut flags = 0;
    for &ch in args[0] {
        flags |= match ch {
            b'A' => notify::ALL,
            b'g' => notify::GENERIC,
            b'$' => notify::STRING,
            b'l' => notify::LIST,
            b's' => notify::SET,
            b'h' => notify::HASH,
            b'z' => notify::ZSET,
            b'x' => notify::EXPIRED,
            b'e' => notify::EVICTED,
            b'K' => notify::KEYSPACE,
            b'E' => notify::KEYEVENT,
            b't' => notify::STREAM,
            b'm' => notify::KEY_MISS,
            b'd' => notify::MODULE,
            b'n' => notify::NEW,
            _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        };
    }
    Ok(Val::Flags(flags))
}

/// `notify-keyspace-events` flags as Redis prints them.
pub fn notify_to_string(flags: u32) -> String {
    use notify::*;
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, ch) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(ch);
            }
        }
    }
    for (bit, ch) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(ch);
        }
    }
    s
}
