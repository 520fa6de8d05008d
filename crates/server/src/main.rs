//! `sluice-server`: the process. Configuration, listeners, event-loop
//! threads, connections, signals and logging; everything else is in the
//! library crates.
//!
//! Depends on every other Sluice crate; nothing depends on it.

mod conn;
mod log;
mod net;
mod persistence;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use engine::Shared;

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-v" || a == "--version") {
        println!("Sluice server v={VERSION} (Redis 7.0.15 compatible)");
        return;
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("Usage: sluice-server [/path/to/redis.conf] [--option value ...]");
        println!("Without arguments the server starts with embedded defaults (port 6379).");
        return;
    }
    let config = match engine::config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = log::init(&config.loglevel, &config.logfile) {
        eprintln!("Can't open the log file: {e}");
        std::process::exit(1);
    }
    let threads = match config.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    if let Err(e) = std::env::set_current_dir(&config.dir) {
        eprintln!("Can't chdir to '{}': {e}", config.dir);
        std::process::exit(1);
    }
    let config_file = config.config_file.clone();
    let shared = Shared::new(config);
    let _ = shared.mem_probe.set(jemalloc_probe);
    *shared.config_file.lock() = config_file;
    if let Ok(exe) = std::env::current_exe() {
        *shared.executable.lock() = exe.display().to_string();
    }
    log::notice("oO0OoO0OoO0Oo Sluice is starting oO0OoO0OoO0Oo");
    log::notice(&format!(
        "Sluice version={VERSION}, bits=64, pid={}, just started",
        std::process::id()
    ));
    if args.is_empty() {
        log::warning("No config file specified, using the default config.");
    }
    persistence::install(&shared);
    let listeners = match net::bind_all(&shared) {
        Ok(l) => l,
        Err(e) => {
            log::warning(&e);
            std::process::exit(1);
        }
    };
    let port = listeners.first().and_then(|l| l.local_addr().ok()).map_or(0, |a| a.port());
    shared.port.store(u32::from(port), Ordering::Relaxed);
    log::notice(&format!("Running mode=standalone, port={port}, threads={threads}."));
    log::notice("Server initialized");
    persistence::load_at_startup(&shared);
    persistence::start_save_points(&shared);
    log::notice("Ready to accept connections tcp");
    net::run(shared.clone(), listeners, threads);
    log::notice("Sluice is now ready to exit, bye bye...");
}

/// Waits for SIGTERM or SIGINT and starts a clean shutdown.
async fn signals(shared: Arc<Shared>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    log::warning(&format!("Received {name} scheduling shutdown..."));
    log::notice("User requested shutdown...");
    persistence::save_on_signal(&shared);
    shared.shutdown.store(true, Ordering::Relaxed);
}

/// Memory figures for INFO from jemalloc's statistics (`used_memory` is
/// what the allocator has handed out, as Redis reports it).
fn jemalloc_probe() -> engine::shared::MemStats {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    let allocated = stats::allocated::read().unwrap_or(0) as u64;
    let active = stats::active::read().unwrap_or(0) as u64;
    let resident = stats::resident::read().unwrap_or(0) as u64;
    let rss = engine::shared::statm_probe().used_memory_rss;
    engine::shared::MemStats {
        used_memory: allocated,
        used_memory_rss: rss,
        allocator_allocated: allocated,
        allocator_active: active,
        allocator_resident: resident,
        allocator: "jemalloc-5.3.0",
    }
}
