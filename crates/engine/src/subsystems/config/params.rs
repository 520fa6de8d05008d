//! The parameter table: every parameter of Redis 7.0.15, with its name,
//! alias, flags, parser and storage (the special parsers are in
//! `special.rs`). An `inert` slot stores the text as CONFIG GET reports
//! it, for parameters read by name (`Config::get_by_name`); which ones
//! Sluice does not act on is in `effect.rs`.

use std::fmt;

use super::pflags::*;
use super::special::*;
use super::{notify_to_string, Getter, Param, Setter, Slot, Ty, Val};

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
    // Sluice's own (event-loop threads): hidden, so `CONFIG GET *` lists
    // Redis's parameters only, as tools that walk it expect.
    p(
        "threads",
        IMMUTABLE | HIDDEN,
        int(0, 1024),
        f(|c| num(c.threads), |c, v| c.threads = v.i() as usize),
    ),
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
    p(
        "supervised",
        IMMUTABLE | SERVER,
        Ty::Enum(&["upstart", "systemd", "auto", "no"]),
        inert("no"),
    ),
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
    p("syslog-enabled", IMMUTABLE | SERVER, Ty::Bool, inert("no")),
    p("syslog-ident", IMMUTABLE | SERVER, Ty::Str(None), inert("redis")),
    p(
        "syslog-facility",
        IMMUTABLE | SERVER,
        Ty::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        inert("local0"),
    ),
    p("crash-log-enabled", 0, Ty::Bool, inert("yes")),
    p("crash-memcheck-enabled", 0, Ty::Bool, inert("yes")),
    p("always-show-logo", IMMUTABLE | SERVER, Ty::Bool, inert("no")),
    p("set-proc-title", IMMUTABLE, Ty::Bool, inert("yes")),
    p(
        "proc-title-template",
        0,
        Ty::Str(Some(check_proc_title)),
        inert("{title} {listen-addr} {server-mode}"),
    ),
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
    p("dir", PROTECTED | DENY_LOADING, Ty::Special(parse_dir), f(get_dir, |c, v| c.dir = v.s())),
    p(
        "dbfilename",
        PROTECTED,
        Ty::Str(Some(check_dbfilename)),
        f(|c| c.dbfilename.clone().into_bytes(), |c, v| c.dbfilename = v.s()),
    ),
    p(
        "key-load-delay",
        HIDDEN,
        int(INT_MIN, INT_MAX),
        f(|c| num(c.key_load_delay), |c, v| c.key_load_delay = v.i() as i64),
    ),
    p(
        "rdb-key-save-delay",
        HIDDEN,
        int(INT_MIN, INT_MAX),
        f(|c| num(c.rdb_key_save_delay), |c, v| c.rdb_key_save_delay = v.i() as i64),
    ),
    p("rdbcompression", 0, Ty::Bool, f(|c| yn(c.rdbcompression), |c, v| c.rdbcompression = v.b())),
    p("rdbchecksum", IMMUTABLE, Ty::Bool, f(|c| yn(c.rdbchecksum), |c, v| c.rdbchecksum = v.b())),
    p(
        "stop-writes-on-bgsave-error",
        0,
        Ty::Bool,
        f(|c| yn(c.stop_writes_on_bgsave_error), |c, v| c.stop_writes_on_bgsave_error = v.b()),
    ),
    // Acted on by the server's replication cron.
    p("rdb-del-sync-files", SERVER, Ty::Bool, inert("no")),
    p("rdb-save-incremental-fsync", 0, Ty::Bool, inert("yes")),
    p("appendonly", DENY_LOADING, Ty::Bool, f(|c| yn(c.appendonly), |c, v| c.appendonly = v.b())),
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
    p(
        "no-appendfsync-on-rewrite",
        0,
        Ty::Bool,
        f(|c| yn(c.no_appendfsync_on_rewrite), |c, v| c.no_appendfsync_on_rewrite = v.b()),
    ),
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
    p(
        "aof-timestamp-enabled",
        0,
        Ty::Bool,
        f(|c| yn(c.aof_timestamp_enabled), |c, v| c.aof_timestamp_enabled = v.b()),
    ),
    p("aof-rewrite-incremental-fsync", 0, Ty::Bool, inert("yes")),
    p(
        "aof-disable-auto-gc",
        0,
        Ty::Bool,
        f(|c| yn(c.aof_disable_auto_gc), |c, v| c.aof_disable_auto_gc = v.b()),
    ),
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
    p(
        "maxmemory-eviction-tenacity",
        0,
        int(0, 100),
        f(
            |c| num(c.maxmemory_eviction_tenacity),
            |c, v| c.maxmemory_eviction_tenacity = v.i() as i64,
        ),
    ),
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
    p("oom-score-adj", SERVER, Ty::Special(parse_oom_mode), inert("no")),
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
    p(
        "latency-tracking",
        0,
        Ty::Bool,
        f(|c| yn(c.latency_tracking), |c, v| c.latency_tracking = v.b()),
    ),
    p(
        "latency-tracking-info-percentiles",
        MULTI_ARG,
        Ty::Special(parse_percentiles),
        f(get_percentiles, |c, v| {
            if let Val::Floats(p) = v {
                c.latency_tracking_info_percentiles = p;
            }
        }),
    ),
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
    p(
        "acllog-max-len",
        0,
        int(0, LONG_MAX),
        f(|c| num(c.acllog_max_len), |c, v| c.acllog_max_len = v.i() as u64),
    ),
    p(
        "aclfile",
        IMMUTABLE,
        Ty::Str(None),
        f(|c| c.aclfile.clone().into_bytes(), |c, v| c.aclfile = v.s()),
    ),
    p(
        "acl-pubsub-default",
        0,
        Ty::Enum(&["allchannels", "resetchannels"]),
        f(|c| c.acl_pubsub_default.clone().into_bytes(), |c, v| c.acl_pubsub_default = v.s()),
    ),
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
    pa(
        "replica-serve-stale-data",
        "slave-serve-stale-data",
        0,
        Ty::Bool,
        f(|c| yn(c.replica_serve_stale_data), |c, v| c.replica_serve_stale_data = v.b()),
    ),
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
    pa(
        "cluster-replica-validity-factor",
        "cluster-slave-validity-factor",
        0,
        int(0, INT_MAX),
        inert("10"),
    ),
    p("cluster-migration-barrier", 0, int(0, INT_MAX), inert("1")),
    p("cluster-allow-replica-migration", 0, Ty::Bool, inert("yes")),
    p("cluster-require-full-coverage", 0, Ty::Bool, inert("yes")),
    pa("cluster-replica-no-failover", "cluster-slave-no-failover", 0, Ty::Bool, inert("no")),
    p("cluster-allow-reads-when-down", 0, Ty::Bool, inert("no")),
    p("cluster-allow-pubsubshard-when-down", 0, Ty::Bool, inert("yes")),
    p("cluster-link-sendbuf-limit", 0, mem(0, ULLONG_MAX), inert("0")),
    p("cluster-announce-hostname", 0, Ty::Str(Some(check_hostname)), inert("")),
    p(
        "cluster-preferred-endpoint-type",
        0,
        Ty::Enum(&["ip", "hostname", "unknown-endpoint"]),
        inert("ip"),
    ),
    p("cluster-announce-ip", 0, Ty::Str(None), inert("")),
    p("cluster-announce-port", 0, int(0, 65535), inert("0")),
    p("cluster-announce-bus-port", 0, int(0, 65535), inert("0")),
    p("cluster-announce-tls-port", 0, int(0, 65535), inert("0")),
    // TLS (Redis built with TLS, as Debian's is): the server's `tls.rs`
    // reads these (SERVER); the others are what rustls cannot honour or
    // belong to features Sluice lacks (TLS replication, cluster).
    p("tls-port", SERVER, int(0, 65535), inert("0")),
    p("tls-cert-file", SERVER, Ty::Str(None), inert("")),
    p("tls-key-file", SERVER, Ty::Str(None), inert("")),
    p("tls-key-file-pass", 0, Ty::Str(None), inert("")),
    p("tls-client-cert-file", 0, Ty::Str(None), inert("")),
    p("tls-client-key-file", 0, Ty::Str(None), inert("")),
    p("tls-client-key-file-pass", 0, Ty::Str(None), inert("")),
    p("tls-dh-params-file", 0, Ty::Str(None), inert("")),
    p("tls-ca-cert-file", SERVER, Ty::Str(None), inert("")),
    p("tls-ca-cert-dir", SERVER, Ty::Str(None), inert("")),
    p("tls-auth-clients", SERVER, Ty::Enum(&["no", "yes", "optional"]), inert("yes")),
    p("tls-replication", 0, Ty::Bool, inert("no")),
    p("tls-cluster", 0, Ty::Bool, inert("no")),
    p("tls-protocols", SERVER, Ty::Str(None), inert("")),
    p("tls-ciphers", SERVER, Ty::Str(None), inert("")),
    p("tls-ciphersuites", SERVER, Ty::Str(None), inert("")),
    p("tls-prefer-server-ciphers", SERVER, Ty::Bool, inert("no")),
    p("tls-session-caching", SERVER, Ty::Bool, inert("yes")),
    p("tls-session-cache-size", SERVER, int(0, INT_MAX), inert("20480")),
    p("tls-session-cache-timeout", 0, int(0, INT_MAX), inert("300")),
    // Active defragmentation: Redis refuses `activedefrag yes` unless
    // built with its patched jemalloc (Debian's is not); Sluice has no
    // defragmenter either, so it answers as Debian's build does.
    p("activedefrag", 0, Ty::Special(parse_activedefrag), inert("no")),
    p("active-defrag-ignore-bytes", 0, mem(1, LONG_MAX), inert("104857600")),
    p("active-defrag-threshold-lower", 0, int(0, 1000), inert("10")),
    p("active-defrag-threshold-upper", 0, int(0, 1000), inert("100")),
    p("active-defrag-cycle-min", 0, int(1, 99), inert("1")),
    p("active-defrag-cycle-max", 0, int(1, 99), inert("25")),
    p("active-defrag-max-scan-fields", 0, int(1, LONG_MAX), inert("1000")),
    // CPU affinity lists (Redis's spelling, with underscores).
    p("server_cpulist", IMMUTABLE, Ty::Str(None), inert("")),
    p("bio_cpulist", IMMUTABLE, Ty::Str(None), inert("")),
    p("aof_rewrite_cpulist", IMMUTABLE, Ty::Str(None), inert("")),
    p("bgsave_cpulist", IMMUTABLE, Ty::Str(None), inert("")),
    // Process and shutdown.
    p(
        "oom-score-adj-values",
        MULTI_ARG | SERVER,
        Ty::Special(parse_oom_values),
        inert("0 200 800"),
    ),
    p("shutdown-on-sigint", MULTI_ARG, Ty::Special(parse_shutdown_flags), inert("default")),
    p("shutdown-on-sigterm", MULTI_ARG, Ty::Special(parse_shutdown_flags), inert("default")),
    p("socket-mark-id", IMMUTABLE, int(0, UINT_MAX), inert("0")),
    p("bind-source-addr", 0, Ty::Str(None), inert("")),
    p(
        "propagation-error-behavior",
        0,
        Ty::Enum(&["ignore", "panic", "panic-on-replicas"]),
        inert("ignore"),
    ),
    p("replica-ignore-disk-write-errors", 0, Ty::Bool, inert("no")),
    // Hidden in Redis (testing aids): reachable by exact name only.
    p("use-exit-on-panic", HIDDEN, Ty::Bool, inert("no")),
    p("watchdog-period", HIDDEN, int(0, INT_MAX), inert("0")),
    p(
        "loading-process-events-interval-bytes",
        HIDDEN,
        int(1024, INT_MAX),
        f(
            |c| num(c.loading_process_events_interval_bytes),
            |c, v| c.loading_process_events_interval_bytes = v.i() as i64,
        ),
    ),
];

fn get_percentiles(c: &super::Config) -> Vec<u8> {
    let parts: Vec<String> = c
        .latency_tracking_info_percentiles
        .iter()
        .map(|&p| crate::core::cmdstats::trim_double(p))
        .collect();
    parts.join(" ").into_bytes()
}
