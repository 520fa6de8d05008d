//! What the server plugs into the engine, in one place: the [`Host`] a
//! server hands to [`Shared::with_host`](crate::Shared::with_host) when
//! it builds its shared state, fixed for the server's life. The engine
//! reaches the codec and the files (snapshots, the AOF), the replication
//! link, MIGRATE's sockets, the listeners and TLS, the allocator, the
//! busy-script loop, the Lua debugger's socket and the log only through
//! it, so two servers in one process each reach their own.
//!
//! [`Host::none`] is the host of the engine's own tests and tools: no
//! persistence, no network, the log on standard output.
//!
//! Depends on nothing of the engine's but the interfaces' own modules.

use std::any::Any;
use std::sync::Arc;

use crate::core::session::ClientHandle;
use crate::core::shared::{MallocHooks, MemStats};
use crate::subsystems::config::Config;
use crate::subsystems::log::Logger;
use crate::subsystems::migrate::Migrator;
use crate::subsystems::repl::{Follow, Replication};
use crate::subsystems::script::busy::Hooks;
use crate::subsystems::script::ldb::Channel;
use crate::subsystems::snapshot::{AppendOnly, Snapshots};

/// The listeners and TLS, as CONFIG SET reaches them.
pub trait Network: Send + Sync {
    /// Binds the listeners anew (CONFIG SET port/bind): the bind
    /// addresses, the port, the backlog.
    fn rebind(&self, addrs: &[String], port: u16, backlog: u32) -> Result<(), String>;
    /// Applies CONFIG SET of `tls-*` parameters (previous and new
    /// configuration): rebuilds the TLS context, moves the TLS listeners.
    /// `Err((listening, why))`: `listening` when binding failed, else the
    /// context could not be built.
    fn tls_apply(&self, prev: &Config, next: &Config) -> Result<(), (bool, String)>;
}

/// The allocator's probes and controls.
#[derive(Clone, Copy)]
pub struct Memory {
    /// Memory figures for INFO ([`crate::core::shared::statm_probe`] without
    /// an allocator of the server's).
    pub probe: fn() -> MemStats,
    /// This thread's bytes allocated minus freed (jemalloc's per-thread
    /// counters), for the maxmemory check between two probes.
    pub thread_net: Option<fn() -> u64>,
    /// MEMORY MALLOC-STATS, PURGE and DEBUG MALLCTL.
    pub malloc: Option<MallocHooks>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory { probe: crate::core::shared::statm_probe, thread_net: None, malloc: None }
    }
}

/// Opens the Lua debugger's channel on a client's connection (`None`
/// when its transport cannot be talked to directly, e.g. TLS).
pub type OpenChannel = fn(&Arc<ClientHandle>) -> Option<Box<dyn Channel>>;

/// Everything a server plugs into its engine. Each part is optional: a
/// command that needs a missing one answers an error, a feature without
/// one is off.
#[derive(Default)]
pub struct Host {
    /// DUMP/RESTORE payloads, SAVE, BGSAVE, DEBUG RELOAD, full syncs.
    pub snapshots: Option<Arc<dyn Snapshots>>,
    /// BGREWRITEAOF, CONFIG SET of the aof parameters, INFO's `aof_*`.
    pub aof: Option<Arc<dyn AppendOnly>>,
    /// The master side: SYNC, PSYNC, WAIT, INFO replication.
    pub replication: Option<Arc<dyn Replication>>,
    /// The replica side: REPLICAOF.
    pub follow: Option<Arc<dyn Follow>>,
    /// MIGRATE's cached connections.
    pub migrator: Option<Arc<dyn Migrator>>,
    /// CONFIG SET port/bind/tls-*.
    pub network: Option<Arc<dyn Network>>,
    pub memory: Memory,
    /// Serving the thread's other clients while a script is busy.
    pub busy: Option<Hooks>,
    /// The Lua debugger's channel.
    pub debugger: Option<OpenChannel>,
    /// Takes the process signals (SIGTERM, SIGINT) this server has not
    /// seen yet into `Shared::pending_signal` (SHUTDOWN ABORT and the
    /// tick look first).
    pub signals: Option<fn(&crate::Shared)>,
    /// The server's log (standard output at notice by default).
    pub log: Arc<Logger>,
    /// The server's own state, for its code that starts from `&Shared`
    /// (the engine never looks inside).
    pub server: Option<Arc<dyn Any + Send + Sync>>,
    /// The process title (`set-proc-title`, `proc-title-template`): off
    /// without it (a server in another program's process).
    pub proc_title: Option<ProcTitle>,
}

/// What the engine needs to retitle the process.
#[derive(Clone)]
pub struct ProcTitle {
    /// The name the process was started as (its `argv[0]`): the
    /// template's `{title}`.
    pub exec_name: String,
    /// Writes a title where `ps` and `/proc/PID/cmdline` read it.
    pub set: fn(&str),
}

impl Host {
    /// No persistence, no network: the engine's tests and tools.
    pub fn none() -> Host {
        Host::default()
    }
}
