//! The Sluice server as a library: [`Server::start`] builds one server
//! (its shared state, its host, its listeners and event loops) from a
//! configuration and returns a handle that stops it. Everything a
//! server owns hangs off its `Shared` and its [`host::Node`], so two
//! servers can run in one process (tests do); only the process's signal
//! handlers are process-wide (`landing`, `crash`). The `sluice-server`
//! binary (`main.rs`) adds what is the process's: arguments, daemonizing,
//! the pid file, supervision, the banner and the signal handlers.
//!
//! Depends on `resp`, `store`, `engine` and `persist` (the job model only
//! through the engine); nothing depends on it but its binary and tests.

mod alloc;
pub mod crash;
pub mod host;
pub mod landing;
mod ldb;
pub mod main_thread;
mod network;
pub mod persistence;
pub mod process;
pub mod proctitle;
mod replication;

// The modules by their own names, wherever their folder is.
use network::{busy, conn, net, signal, tls, transport, unix};
use persistence::{aof, aof_load, durability};
use replication::{follow, migrate, repl};

use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use alloc::jemalloc_tune;
use engine::subsystems::config::Config;
use engine::subsystems::log::{self, Logger};
use engine::Shared;

/// A server whose listeners are bound and whose data set is not loaded
/// yet (the binary writes its pid file and banner in between, where
/// Redis does).
pub struct Bound {
    shared: Arc<Shared>,
    listeners: Vec<net::ListenerSet>,
    unix: Option<std::os::unix::net::UnixListener>,
    port: u16,
}

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    port: u16,
    loops: Option<std::thread::JoinHandle<()>>,
}

impl Bound {
    /// Builds the server's state from `config` and binds its listeners.
    /// Its threads log to `log` (and so does the calling thread from now
    /// on). `Err` is the reason, already logged where Redis logs it.
    pub fn new(mut config: Config, log: Arc<Logger>) -> Result<Bound, String> {
        // The server's own directory, absolute from now on: every file it
        // names is joined with it, and the process's working directory
        // (which other servers in the process share) is never changed.
        if !std::path::Path::new(&config.dir).is_absolute() {
            let cwd = std::env::current_dir().map_err(|e| format!("Can't get cwd: {e}"))?;
            let dir = std::fs::canonicalize(cwd.join(&config.dir))
                .map_err(|e| format!("Can't chdir to '{}': {e}", config.dir))?;
            config.dir = dir.to_string_lossy().into_owned();
        }
        log.set_dir(&config.dir);
        log::bind(log.clone());
        engine::core::table::Renames::build(engine::commands::table(), &config.rename_commands)?;
        let config_file = config.config_file.clone();
        let shared = Shared::with_host(config, engine::commands::table(), |weak| {
            host::build(weak, log.clone())
        });
        // Users from `user` lines or the ACL file (Redis loads them once
        // the server is initialized, and stops on any error).
        engine::commands::acl::load_at_startup(&shared)?;
        *shared.config_file.lock() = config_file;
        if let Ok(exe) = std::env::current_exe() {
            *shared.executable.lock() = exe.display().to_string();
        }
        shared.host.log.set_role(b'M');
        // Redis's `initial_memory_usage`: before any data is loaded.
        let startup = shared.mem_stats().used_memory;
        shared.mem_startup.store(startup, Ordering::Relaxed);
        let node = host::node(&shared);
        if tls::wanted(&shared.config.read()) {
            match tls::configure(&shared.config.read()) {
                Ok(ctx) => *node.tls.write() = Some(ctx),
                Err(()) => return Err("Failed to configure TLS. Check logs for more info.".into()),
            }
        }
        let listeners = net::bind_all(&shared)?;
        let unix = {
            let c = shared.config.read();
            unix::bind(node, &c.unixsocket, c.unixsocketperm, c.tcp_backlog)?
        };
        let tcp_or_tls = listeners.iter().any(|(_, ls)| !ls.is_empty());
        if !tcp_or_tls && unix.is_none() {
            return Err("Configured to not listen anywhere, exiting.".into());
        }
        let port = listeners
            .first()
            .and_then(|(_, ls)| ls.first())
            .and_then(|l| l.local_addr().ok())
            .map_or(0, |a| a.port());
        shared.port.store(u32::from(port), Ordering::Relaxed);
        replication::cluster::start(&shared, port)?;
        Ok(Bound { shared, listeners, unix, port })
    }

    /// The port of the first TCP (or TLS) listener (0: none).
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Whether it listens on TCP or TLS, and on a Unix socket.
    pub fn listens(&self) -> (bool, bool) {
        (self.listeners.iter().any(|(_, ls)| !ls.is_empty()), self.unix.is_some())
    }

    /// Loads the data set (the AOF, else the RDB file) in the
    /// background, follows `replicaof`, starts the crons and the event
    /// loops: the server serves from here on.
    pub fn run(self) -> Server {
        let Bound { shared, listeners, unix, port } = self;
        let node = host::node(&shared);
        let threads = match shared.config.read().threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        log::verbose(&format!("{threads} event-loop threads."));
        let (appendonly, replicaof) = {
            let c = shared.config.read();
            (c.appendonly, c.replicaof.clone())
        };
        if appendonly {
            // The AOF has priority over the RDB file, as in Redis.
            aof_load::load_at_startup(&shared, node.aof.clone());
        } else {
            persistence::load_at_startup(&shared);
        }
        if let Some((host, port)) = &replicaof {
            node.follower.start_from_config(host, *port);
        }
        repl::start_cron(&node.master);
        migrate::start_cron(&node.migrate);
        persistence::start_save_points(&shared);
        aof::start_cron(&shared, &node.aof);
        let sh = shared.clone();
        let loops = log::spawn("sluice-main", move || net::run(sh, listeners, unix, threads));
        let loops = match loops {
            Ok(j) => Some(j),
            Err(e) => {
                log::warning(&format!("Can't start the event loops: {e}"));
                shared.shutdown.store(true, Ordering::Release);
                None
            }
        };
        Server { shared, port, loops }
    }
}

impl Server {
    /// Builds, binds and runs a server: [`Bound::new`] then
    /// [`Bound::run`].
    pub fn start(config: Config, log: Arc<Logger>) -> Result<Server, String> {
        Ok(Bound::new(config, log)?.run())
    }

    /// The port of the first TCP (or TLS) listener (0: none).
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Waits until the server shuts down (SHUTDOWN, a signal, [`stop`](Self::stop)),
    /// then does the last steps of its exit.
    pub fn wait(mut self) {
        if let Some(j) = self.loops.take() {
            let _ = j.join();
        }
        finish_exit(&self.shared);
    }

    /// Stops the server now, without saving (as `SHUTDOWN NOSAVE`
    /// without its replies), and waits for its loops to end.
    pub fn stop(self) {
        busy::stop_listening(&self.shared);
        self.shared.shutdown.store(true, Ordering::Release);
        self.wait();
    }
}

/// The last steps of a shutdown, after the event loops stopped, logged
/// to this server's log (the calling thread's from now on).
fn finish_exit(shared: &Shared) {
    log::bind(shared.host.log.clone());
    let node = host::node(shared);
    aof::flush_on_exit(&node.aof);
    // A background save cut short by the shutdown leaves its temporary
    // file; Redis removes its child's too.
    persistence::remove_temp_files(&shared.config.read().dir);
    unix::remove_at_exit(node);
    if let Some(p) = node.pid_file.get() {
        log::notice("Removing the pid file.");
        let _ = std::fs::remove_file(p);
    }
    log::warning("Sluice is now ready to exit, bye bye...");
}

/// SHUTDOWN NOSAVE while a script is busy: the script's thread cannot
/// stop its loop (it is inside the script), so the process ends from
/// there, as Redis exits from its script hook. The script's writes so far
/// are not propagated (they would be once it ended).
pub(crate) fn exit_now(shared: &Shared) -> ! {
    busy::stop_listening(shared);
    finish_exit(shared);
    std::process::exit(0);
}
