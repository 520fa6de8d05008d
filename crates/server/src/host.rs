//! One server's own state and what it plugs into its engine: [`Node`]
//! holds the AOF, the replication (master and replica sides), the TLS
//! context, the listeners and the snapshot flags of one server, and
//! [`build`] makes the engine's [`Host`] of them when the server builds
//! its `Shared`. Nothing here is a process static: two servers in one
//! process each have their own `Node`. Server code that starts from a
//! `&Shared` finds its node with [`node`].

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, OnceLock, Weak};

use engine::core::host::{Host, Network};
use engine::subsystems::config::Config;
use engine::subsystems::log::Logger;
use engine::Shared;
use parking_lot::{Mutex, RwLock};
use rustls::ServerConfig;
use tokio::sync::mpsc;

use crate::aof::Aof;
use crate::durability::Position;
use crate::follow::Follower;
use crate::net::{bind_addrs, Kind, ListenerSet};
use crate::repl::Master;

/// One server's state that the engine does not hold.
pub struct Node {
    pub aof: Arc<Aof>,
    pub master: Arc<Master>,
    pub follower: Arc<Follower>,
    pub migrate: Arc<crate::migrate::Net>,
    /// What a connection waits on before it answers a write.
    pub durable: Arc<Position>,
    /// The context new TLS connections are accepted with.
    pub tls: RwLock<Option<Arc<ServerConfig>>>,
    /// Where CONFIG SET port/tls-port hands new listeners (thread 0's
    /// accept loops take them); set when the loops start.
    pub listener_tx: OnceLock<mpsc::UnboundedSender<ListenerSet>>,
    /// Every open TCP (and TLS) listener's socket, whatever its thread
    /// (`busy::stop_listening`).
    pub open_listeners: Mutex<Vec<RawFd>>,
    /// Set while a snapshot runs: one at a time (BGSAVE, SAVE and the AOF
    /// rewrite share it).
    pub snapshot_busy: Arc<AtomicBool>,
    /// Set to stop the running snapshot (`persistence::cancel_running`);
    /// its capture hook holds it too, so that a cancelled snapshot copies
    /// no more stripes.
    pub snapshot_cancel: Arc<AtomicBool>,
    /// Which snapshot runs (`persistence::SnapshotRun`): what may be
    /// cancelled is decided under this lock.
    pub snapshot_run: Mutex<crate::persistence::SnapshotRun>,
    /// `socket-mark-id` (immutable, read once at start-up; 0: none).
    pub socket_mark: AtomicU32,
    /// The Unix socket's file, removed at exit.
    pub unix_path: OnceLock<String>,
    /// The pid file written at start-up, removed at exit.
    pub pid_file: OnceLock<String>,
    /// The busy pass's turn among the loops (`busy::pick`).
    pub busy_next: std::sync::atomic::AtomicUsize,
    /// The last process signal this server took (`landing`).
    pub signal_seen: AtomicU64,
    /// Each event-loop thread's index and runtime, as it starts
    /// (`net::others_took_input`).
    pub loops: Mutex<Vec<(usize, tokio::runtime::Handle)>>,
}

/// The node of the server `sh` belongs to. Every `Shared` the server
/// crate handles is built by [`build`], so the node is always there.
pub fn node(sh: &Shared) -> &Node {
    sh.host
        .server
        .as_ref()
        .and_then(|s| s.downcast_ref::<Node>())
        .expect("a server's Shared is built with its Node")
}

/// The engine's host for a server being built: its node and the engine's
/// views of it.
pub fn build(weak: &Weak<Shared>, log: Arc<Logger>) -> Host {
    let durable = Arc::new(Position::default());
    let aof = crate::aof::new(weak, durable.clone());
    let master = crate::repl::new(weak);
    let follower = crate::follow::new(weak);
    let snapshots = Arc::new(crate::persistence::Rdb::new(weak));
    let migrate = crate::migrate::new();
    let node = Arc::new(Node {
        aof: aof.clone(),
        master: master.clone(),
        follower: follower.clone(),
        migrate: migrate.clone(),
        durable,
        tls: RwLock::new(None),
        listener_tx: OnceLock::new(),
        open_listeners: Mutex::new(Vec::new()),
        snapshot_busy: snapshots.busy_flag(),
        snapshot_cancel: Arc::new(AtomicBool::new(false)),
        snapshot_run: Mutex::new(Default::default()),
        socket_mark: AtomicU32::new(0),
        unix_path: OnceLock::new(),
        pid_file: OnceLock::new(),
        loops: Mutex::new(Vec::new()),
        busy_next: std::sync::atomic::AtomicUsize::new(0),
        signal_seen: AtomicU64::new(crate::landing::received()),
    });
    Host {
        snapshots: Some(snapshots),
        aof: Some(Arc::new(crate::aof::Seam(aof))),
        replication: Some(master),
        follow: Some(follower),
        migrator: Some(migrate),
        network: Some(Arc::new(Net(weak.clone()))),
        memory: crate::alloc::memory(),
        busy: Some(crate::busy::HOOKS),
        debugger: Some(crate::ldb::open),
        signals: Some(crate::landing::take),
        log,
        server: Some(node),
        proc_title: crate::proctitle::hook(),
    }
}

/// CONFIG SET port/bind/tls-*, through the server's listeners.
struct Net(Weak<Shared>);

const PORT_ERR: &str = "Unable to listen on this port. Check server logs.";

impl Net {
    fn send(&self, set: ListenerSet) -> bool {
        let Some(sh) = self.0.upgrade() else { return false };
        node(&sh).listener_tx.get().is_some_and(|tx| tx.send(set).is_ok())
    }
}

impl Network for Net {
    fn rebind(&self, addrs: &[String], port: u16, backlog: u32) -> Result<(), String> {
        // The new listeners are bound by the command's thread (so a
        // failure is its reply) and handed to thread 0, whose accept loops
        // then replace the old ones (Redis's changeListenPort).
        let Some(sh) = self.0.upgrade() else { return Err(PORT_ERR.into()) };
        let ls = bind_addrs(&sh, addrs, port, backlog, Kind::Tcp).map_err(|_| PORT_ERR)?;
        if self.send((Kind::Tcp, ls)) {
            Ok(())
        } else {
            Err(PORT_ERR.into())
        }
    }

    fn tls_apply(&self, prev: &Config, next: &Config) -> Result<(), (bool, String)> {
        // Redis's applyTlsCfg and applyTLSPort: the context is rebuilt
        // whenever TLS is wanted; a new tls-port moves (or closes, for 0)
        // the TLS listeners.
        const CTX_ERR: &str = "Unable to update TLS configuration. Check server logs.";
        let Some(sh) = self.0.upgrade() else { return Err((false, CTX_ERR.into())) };
        let ctx = if crate::tls::wanted(next) {
            Some(crate::tls::configure(next).map_err(|()| (false, CTX_ERR.to_string()))?)
        } else {
            None
        };
        let port = crate::tls::port(next);
        if port != crate::tls::port(prev) {
            let ls = if port == 0 {
                Vec::new()
            } else {
                bind_addrs(&sh, &next.bind, port, next.tcp_backlog, Kind::Tls)
                    .map_err(|_| (true, PORT_ERR.to_string()))?
            };
            if !self.send((Kind::Tls, ls)) {
                return Err((true, PORT_ERR.to_string()));
            }
        }
        if let Some(ctx) = ctx {
            *node(&sh).tls.write() = Some(ctx);
        }
        Ok(())
    }
}
