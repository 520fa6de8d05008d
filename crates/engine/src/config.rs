//! Runtime configuration: the values, with Redis's names and defaults.
//!
//! The server fills this from a redis.conf-style file and `--name value`
//! flags; `CONFIG GET/SET` read and change it at run time.

/// `client-output-buffer-limit` for one client class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// The configuration. Field names follow the Redis parameter names.
#[derive(Clone, Debug)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    pub databases: usize,
    /// Event-loop threads; 0 means one per core.
    pub threads: usize,
    pub requirepass: Option<Vec<u8>>,
    pub maxclients: usize,
    pub dir: String,
    pub dbfilename: String,
    pub save: String,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appendfsync: String,
    pub loglevel: String,
    pub logfile: String,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: usize,
    pub obuf_normal: ObufLimit,
    pub obuf_replica: ObufLimit,
    pub obuf_pubsub: ObufLimit,
    pub hz: u32,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub tcp_backlog: u32,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    pub daemonize: bool,
    pub pidfile: String,
    pub protected_mode: bool,
    pub lfu_log_factor: i64,
    pub lfu_decay_time: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            bind: vec!["127.0.0.1".into(), "-::1".into()],
            databases: 16,
            threads: 0,
            requirepass: None,
            maxclients: 10000,
            dir: ".".into(),
            dbfilename: "dump.rdb".into(),
            save: "3600 1 300 100 60 10000".into(),
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appendfsync: "everysec".into(),
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
            daemonize: false,
            pidfile: String::new(),
            protected_mode: true,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
        }
    }
}

/// Builds the configuration from `redis-server`-style arguments (a config
/// file path first, then `--name value` pairs). Minimal form: flags only.
pub fn from_args(args: &[String]) -> Result<Config, String> {
    let mut c = Config::default();
    let mut i = 0;
    while i < args.len() {
        let name = args[i]
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument '{}'", args[i]))?;
        let val = args.get(i + 1).cloned().unwrap_or_default();
        let num = |v: &str| v.parse::<u64>().map_err(|_| format!("bad value for {name}: {v}"));
        match name {
            "port" => c.port = num(&val)? as u16,
            "threads" => c.threads = num(&val)? as usize,
            "databases" => c.databases = num(&val)? as usize,
            "bind" => c.bind = val.split_whitespace().map(String::from).collect(),
            "requirepass" => c.requirepass = Some(val.into_bytes()),
            "save" | "appendonly" | "dir" | "dbfilename" | "loglevel" | "logfile"
            | "maxclients" => {}
            _ => return Err(format!("Bad directive or wrong number of arguments: {name}")),
        }
        i += 2;
    }
    Ok(c)
}
