//! `sluice-server`: the process around one server of the `server`
//! library: arguments, the configuration, the log's destination,
//! daemonizing, the pid file, supervision, the banner and the signal
//! handlers.
//!
//! Start-up follows redis-server 7.0.15 step by step (argument checks,
//! config, daemonize, the "is starting" lines, pid file, banner, "Server
//! initialized", "Ready to accept connections", supervisor readiness), so
//! process managers and scripts written for Redis work unchanged.
//!
//! Depends on `resp`, `store`, `engine` and `persist` (the job model only
//! through the engine); nothing depends on it.

use std::sync::Arc;

use engine::subsystems::config::ConfigError;
use engine::subsystems::log::{self, Logger};
use server::process::{self, Supervisor};
use server::Bound;

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn usage() -> ! {
    eprint!(
        "Usage: ./sluice-server [/path/to/redis.conf] [options] [-]\n\
         \x20      ./sluice-server - (read config from stdin)\n\
         \x20      ./sluice-server -v or --version\n\
         \x20      ./sluice-server -h or --help\n\
         \n\
         Examples:\n\
         \x20      ./sluice-server (run the server with default conf)\n\
         \x20      echo 'maxmemory 128mb' | ./sluice-server -\n\
         \x20      ./sluice-server /etc/redis/6379.conf\n\
         \x20      ./sluice-server --port 7777\n\
         \x20      ./sluice-server --port 7777 --replicaof 127.0.0.1 8888\n\
         \x20      ./sluice-server /etc/myredis.conf --loglevel verbose -\n\
         \x20      ./sluice-server /etc/myredis.conf --loglevel verbose\n\
         \n\
         Sluice takes redis-server's configuration files and flags; it has no\n\
         sentinel mode, memory tester (--test-memory) or --check-system.\n"
    );
    std::process::exit(1);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Before any other thread: the title's room includes the environment
    // strings, which move to the heap (`set-proc-title`).
    server::proctitle::init();
    // As redis-server, only the first argument can be one of these.
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!(
                "Sluice server v={} sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=sluice-{VERSION}",
                engine::subsystems::config::REDIS_VERSION
            );
            return;
        }
        Some("-h" | "--help") => usage(),
        Some("--test-memory") if args.len() == 1 => {
            eprint!(
                "Please specify the amount of memory to test in megabytes.\n\
                 Example: ./sluice-server --test-memory 4096\n\n"
            );
            std::process::exit(1);
        }
        Some("--test-memory") => {
            eprintln!(
                "Sluice has no memory tester: use memtester or memtest86 (redis-server \
                 --test-memory also works)."
            );
            std::process::exit(1);
        }
        Some("--check-system") => {
            eprintln!("Sluice has no --check-system: its start-up log reports what it finds.");
            std::process::exit(1);
        }
        Some("--sentinel") => {
            eprintln!("Sluice has no sentinel mode: run redis-sentinel to monitor Sluice.");
            std::process::exit(1);
        }
        _ => {}
    }
    let config = match engine::subsystems::config::from_args(&args, engine::commands::table()) {
        Ok(c) => c,
        Err(e @ ConfigError::Open { .. }) => {
            log::warning(&e.to_string());
            std::process::exit(1);
        }
        Err(e) => {
            eprint!("{e}");
            std::process::exit(1);
        }
    };
    // Redis changes to `dir` while reading the configuration. The server
    // joins the files it names with its `dir` itself (and CONFIG SET dir
    // changes only that); the process moves there too, as Redis's does,
    // for what is the process's: a relative `pidfile`, `unixsocket` or
    // TLS file, core dumps.
    if let Err(e) = std::env::set_current_dir(&config.dir) {
        log::warning(&format!("Can't chdir to '{}': {e}", config.dir));
        std::process::exit(1);
    }
    let logger = Arc::new(Logger::default());
    log::bind(logger.clone());
    logger.set_level(&config.loglevel);
    if logger.set_file(&config.logfile).is_err() {
        std::process::exit(1);
    }
    let syslog = config.get_by_name("syslog-enabled").is_some_and(|v| v == b"yes");
    if syslog {
        let ident = config.get_by_name("syslog-ident").unwrap_or_default();
        let facility = config.get_by_name("syslog-facility").unwrap_or_default();
        logger.enable_syslog(&String::from_utf8_lossy(&ident), &String::from_utf8_lossy(&facility));
    }
    let sup = process::supervisor(&config);
    let background = config.daemonize && sup == Supervisor::None;
    if background {
        process::daemonize();
    }
    log::warning("oO0OoO0OoO0Oo Sluice is starting oO0OoO0OoO0Oo");
    log::warning(&format!(
        "Sluice version={VERSION}, redis_version={}, bits=64, commit=00000000, modified=0, \
         pid={}, just started",
        engine::subsystems::config::REDIS_VERSION,
        std::process::id()
    ));
    if args.is_empty() {
        log::warning(
            "Warning: no config file specified, using the default config. In order to specify \
             a config file use ./sluice-server /path/to/redis.conf",
        );
    } else {
        log::warning("Configuration loaded");
    }
    process::log_supervision(&config, sup);
    process::disable_thp(&config);
    for w in config.no_effect_warnings() {
        log::warning(&w);
    }
    let pid_file = process::pid_file(&config, background);
    let banner_cfg = config.clone();
    // After daemonizing: jemalloc's background thread would not survive
    // the fork.
    server::jemalloc_tune(config.get_by_name("jemalloc-bg-thread").is_none_or(|v| v == b"yes"));
    let bound = match Bound::new(config, logger.clone()) {
        Ok(b) => b,
        Err(e) => {
            log::warning(&e);
            std::process::exit(1);
        }
    };
    engine::subsystems::config::apply_oom_score(&bound.shared().oom, &banner_cfg);
    engine::subsystems::config::apply_proc_title(&bound.shared().host, &banner_cfg);
    let port = bound.port();
    if let Some(p) = &pid_file {
        process::write_pid_file(p);
        let _ = server::host::node(bound.shared()).pid_file.set(p.clone());
    }
    server::landing::install(bound.shared());
    server::crash::install(bound.shared());
    process::banner(&banner_cfg, port, VERSION);
    log::warning("Server initialized");
    if let Some(m) = banner_cfg.load_modules.first() {
        log::warning(&format!("Module {m} failed to load: Sluice does not load Redis modules"));
        log::warning(&format!("Can't load module from {m}: server aborting"));
        std::process::exit(1);
    }
    if !banner_cfg.module_configs.is_empty() {
        log::warning(
            "Module Configuration detected without loadmodule directive or no ApplyConfig call: \
             aborting",
        );
        std::process::exit(1);
    }
    let (tcp_or_tls, unix) = bound.listens();
    server::main_thread::install();
    let server = bound.run();
    if sup == Supervisor::Systemd {
        process::notify_systemd("STATUS=Sluice is loading...\n");
    }
    // Redis says it is ready once the data set is loaded, after "DB
    // loaded from disk" (or never, when the load fails and it exits).
    // Sluice loads on a thread of its own and answers -LOADING meanwhile,
    // so these lines wait for the load: a script that waits for them, or
    // reads the log's last line for the load's outcome (Redis's own
    // integration/aof does), sees Redis's order.
    let sh = server.shared().clone();
    let unixsocket = banner_cfg.unixsocket.clone();
    let ready = log::spawn("sluice-ready", move || {
        while sh.is_loading() && !sh.shutdown.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if tcp_or_tls {
            log::notice("Ready to accept connections");
        }
        if unix {
            log::notice(&format!("The server is now ready to accept connections at {unixsocket}"));
        }
        process::signal_ready(sup);
    });
    if let Err(e) = ready {
        log::warning(&format!("Can't start the readiness thread: {e}"));
    }
    // The event loops are waited for on a thread of their own: the main
    // thread runs the replication link (`server::main_thread`).
    let waiter = std::thread::Builder::new().name("sluice-wait".into());
    match waiter.spawn(move || {
        server.wait();
        std::process::exit(0)
    }) {
        Ok(_) => server::main_thread::serve(),
        Err(e) => log::warning(&format!("Can't start the waiting thread: {e}")),
    }
    // Only if the waiting thread could not start: without the loops
    // there is no server.
    std::process::exit(1);
}
