//! `sluice-server`: the process. Configuration, listeners, event-loop
//! threads, connections, signals and logging; everything else is in the
//! library crates.
//!
//! Start-up follows redis-server 7.0.15 step by step (argument checks,
//! config, daemonize, the "is starting" lines, pid file, banner, "Server
//! initialized", "Ready to accept connections", supervisor readiness), so
//! process managers and scripts written for Redis work unchanged.
//!
//! Depends on `resp`, `store`, `engine` and `persist` (the job model only
//! through the engine); nothing depends on it.

mod aof;
mod aof_load;
mod busy;
mod conn;
mod crash;
mod follow;
mod ldb;
mod migrate;
mod net;
mod persistence;
mod process;
mod repl;
mod signal;
mod tls;
mod transport;
mod unix;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use engine::config::ConfigError;
use engine::log;
use engine::Shared;
use process::Supervisor;

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
    // As redis-server, only the first argument can be one of these.
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!(
                "Sluice server v={} sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=sluice-{VERSION}",
                engine::config::REDIS_VERSION
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
    let config = match engine::config::from_args(&args) {
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
    // Redis changes to `dir` while reading the configuration, so relative
    // `logfile` and `pidfile` paths are under it.
    if let Err(e) = std::env::set_current_dir(&config.dir) {
        log::warning(&format!("Can't chdir to '{}': {e}", config.dir));
        std::process::exit(1);
    }
    log::set_level(&config.loglevel);
    if log::set_file(&config.logfile).is_err() {
        std::process::exit(1);
    }
    let syslog = config.get_by_name("syslog-enabled").is_some_and(|v| v == b"yes");
    if syslog {
        let ident = config.get_by_name("syslog-ident").unwrap_or_default();
        let facility = config.get_by_name("syslog-facility").unwrap_or_default();
        log::enable_syslog(&String::from_utf8_lossy(&ident), &String::from_utf8_lossy(&facility));
    }
    ldb::install();
    let sup = process::supervisor(&config);
    let background = config.daemonize && sup == Supervisor::None;
    if background {
        process::daemonize();
    }
    log::warning("oO0OoO0OoO0Oo Sluice is starting oO0OoO0OoO0Oo");
    log::warning(&format!(
        "Sluice version={VERSION}, redis_version={}, bits=64, commit=00000000, modified=0, \
         pid={}, just started",
        engine::config::REDIS_VERSION,
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
    let threads = match config.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    engine::config::apply_oom_score(&config);
    process::disable_thp(&config);
    for w in config.no_effect_warnings() {
        log::warning(&w);
    }
    if let Err(e) = engine::commands::install_renames(&config.rename_commands) {
        log::warning(&e);
        std::process::exit(1);
    }
    let pid_file = process::pid_file(&config, background);
    let config_file = config.config_file.clone();
    let banner_cfg = config.clone();
    // After daemonizing: jemalloc's background thread would not survive
    // the fork.
    jemalloc_tune(config.get_by_name("jemalloc-bg-thread").is_none_or(|v| v == b"yes"));
    let shared = Shared::new(config);
    // Users from `user` lines or the ACL file (Redis loads them once the
    // server is initialized, and stops on any error).
    if let Err(e) = engine::commands::acl::load_at_startup(&shared) {
        log::warning(&e);
        std::process::exit(1);
    }
    let _ = shared.mem_probe.set(jemalloc_probe);
    let _ = shared.malloc.set(engine::shared::MallocHooks {
        stats: jemalloc_stats,
        purge: jemalloc_purge,
        mallctl: jemalloc_mallctl,
    });
    let _ = shared.thread_mem_probe.set(jemalloc_thread_net);
    *shared.config_file.lock() = config_file;
    if let Ok(exe) = std::env::current_exe() {
        *shared.executable.lock() = exe.display().to_string();
    }
    log::set_role(b'M');
    // Redis's `initial_memory_usage`: before any data is loaded.
    let startup = shared.mem_stats().used_memory;
    shared.mem_startup.store(startup, std::sync::atomic::Ordering::Relaxed);
    persistence::install(&shared);
    migrate::install(&shared);
    let aof = aof::install(&shared);
    repl::install(&shared);
    let follower = follow::install(&shared);
    if tls::wanted(&shared.config.read()) {
        match tls::configure(&shared.config.read()) {
            Ok(ctx) => tls::set_current(ctx),
            Err(()) => {
                log::warning("Failed to configure TLS. Check logs for more info.");
                std::process::exit(1);
            }
        }
    }
    let listeners = match net::bind_all(&shared) {
        Ok(l) => l,
        Err(e) => {
            log::warning(&e);
            std::process::exit(1);
        }
    };
    let unix = {
        let c = shared.config.read();
        unix::bind(&c.unixsocket, c.unixsocketperm, c.tcp_backlog)
    };
    let unix = match unix {
        Ok(u) => u,
        Err(e) => {
            log::warning(&e);
            std::process::exit(1);
        }
    };
    let tcp_or_tls = listeners.iter().any(|(_, ls)| !ls.is_empty());
    if !tcp_or_tls && unix.is_none() {
        log::warning("Configured to not listen anywhere, exiting.");
        std::process::exit(1);
    }
    let port = listeners
        .first()
        .and_then(|(_, ls)| ls.first())
        .and_then(|l| l.local_addr().ok())
        .map_or(0, |a| a.port());
    shared.port.store(u32::from(port), Ordering::Relaxed);
    if let Some(p) = &pid_file {
        process::write_pid_file(p);
        let _ = PID_FILE.set(p.clone());
    }
    install_signal_handlers();
    crash::install(&shared);
    process::banner(&banner_cfg, port, VERSION);
    log::verbose(&format!("{threads} event-loop threads."));
    log::warning("Server initialized");
    if banner_cfg.appendonly {
        // The AOF has priority over the RDB file, as in Redis.
        aof_load::load_at_startup(&shared, aof);
    } else {
        persistence::load_at_startup(&shared);
    }
    if let Some((host, port)) = &banner_cfg.replicaof {
        follower.start_from_config(host, *port);
    }
    persistence::start_save_points(&shared);
    aof::start_cron(&shared);
    if sup == Supervisor::Systemd {
        process::notify_systemd("STATUS=Sluice is loading...\n");
    }
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
    if tcp_or_tls {
        log::notice("Ready to accept connections");
    }
    if unix.is_some() {
        log::notice(&format!(
            "The server is now ready to accept connections at {}",
            banner_cfg.unixsocket
        ));
    }
    process::signal_ready(sup);
    net::run(shared.clone(), listeners, unix, threads);
    finish_exit();
}

/// The pid file written at start-up, removed at exit.
static PID_FILE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The last steps of a shutdown, after the event loops stopped.
fn finish_exit() {
    aof::flush_on_exit();
    // A background save cut short by the shutdown leaves its temporary
    // file; Redis removes its child's too.
    persistence::remove_temp_files();
    unix::remove_at_exit();
    if let Some(p) = PID_FILE.get() {
        log::notice("Removing the pid file.");
        let _ = std::fs::remove_file(p);
    }
    log::warning("Sluice is now ready to exit, bye bye...");
}

/// SHUTDOWN NOSAVE while a script is busy: the script's thread cannot
/// stop its loop (it is inside the script), so the process ends from
/// there, as Redis exits from its script hook. The script's writes so far
/// are not propagated (they would be once it ended).
pub fn exit_now() -> ! {
    busy::stop_listening();
    finish_exit();
    std::process::exit(0);
}

extern "C" fn on_signal(sig: libc::c_int) {
    use engine::shared::PENDING_SIGNAL;
    use engine::shutdown::SIGNALLED;
    if sig == libc::SIGINT && SIGNALLED.load(Ordering::SeqCst) {
        // Redis's sigShutdownHandler: a second SIGINT does not wait for
        // the shutdown (its save, its replicas); the save's temporary
        // file goes.
        log::from_handler("You insist... exiting now.");
        persistence::remove_temp_files();
        // SAFETY: _exit ends the process without running atexit handlers
        // or unwinding, which a signal handler must not start.
        unsafe { libc::_exit(1) };
    }
    let name = if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
    log::from_handler(&format!("Received {name} scheduling shutdown..."));
    PENDING_SIGNAL.store(sig, Ordering::SeqCst);
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// Installs the SIGTERM/SIGINT handlers before the server says it is
/// ready, so a signal sent right after "Ready to accept connections" is
/// a shutdown, never the default action.
fn install_signal_handlers() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction with a handler that logs and stores
        // to atomics (see `crash.rs` on logging from a handler).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Called from the server's tick: starts the shutdown a signal asked for
/// and finishes one that waits for replicas ([`engine::shutdown`]).
pub fn poll_signals(shared: &Arc<Shared>) {
    engine::shutdown::tick(shared);
}

/// jemalloc's statistics report (MEMORY MALLOC-STATS).
fn jemalloc_stats() -> String {
    extern "C" fn write(opaque: *mut libc::c_void, text: *const libc::c_char) {
        // SAFETY: `opaque` is the Vec passed below, alive for the call;
        // jemalloc hands a NUL-terminated string.
        unsafe {
            let out = &mut *(opaque as *mut Vec<u8>);
            out.extend_from_slice(std::ffi::CStr::from_ptr(text).to_bytes());
        }
    }
    let mut out: Vec<u8> = Vec::new();
    // SAFETY: the callback only appends to `out`; no options string.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(
            Some(write),
            (&mut out as *mut Vec<u8>).cast(),
            std::ptr::null(),
        );
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How long jemalloc keeps freed pages before giving them back to the OS.
/// jemalloc's default is 10 s; a keyspace that grows reallocates every
/// stripe's slab several times, and for 10 s the freed copies (a fifth of
/// the data) would stay resident. With the background thread purging, a
/// second keeps pages for reuse by bursts without holding them long.
const DIRTY_DECAY_MS: isize = 1000;

/// Applies `jemalloc-bg-thread` at start-up (Redis's default `yes`: a
/// thread of jemalloc's own gives freed pages back, off the request path)
/// and [`DIRTY_DECAY_MS`] to every arena.
fn jemalloc_tune(background_thread: bool) {
    use tikv_jemalloc_ctl::raw;
    // SAFETY: NUL-terminated control names, each written with the type
    // jemalloc documents for it (ssize_t, bool); failures are ignored (an
    // arena index not in use refuses the write).
    unsafe {
        let _ = raw::write(b"arenas.dirty_decay_ms\0", DIRTY_DECAY_MS);
        let arenas: u32 = raw::read(b"arenas.narenas\0").unwrap_or(0);
        for i in 0..arenas {
            let _ = raw::write(format!("arena.{i}.dirty_decay_ms\0").as_bytes(), DIRTY_DECAY_MS);
        }
        if background_thread {
            let _ = raw::write(b"background_thread\0", true);
        }
    }
}

/// Purges every arena's dirty pages (MEMORY PURGE), as Redis's
/// `jemalloc_purge` does.
fn jemalloc_purge() {
    // MALLCTL_ARENAS_ALL is 4096; the control takes no value.
    let name = b"arena.4096.purge\0";
    // SAFETY: a NUL-terminated control name and no input or output.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// The C library's text for an error number (Redis replies `strerror`).
fn strerror(e: i32) -> String {
    // SAFETY: strerror returns a NUL-terminated static (or thread) string.
    unsafe { std::ffi::CStr::from_ptr(libc::strerror(e)) }.to_string_lossy().into_owned()
}

/// DEBUG MALLCTL / MALLCTL-STR, as Redis's `mallctl_int` and
/// `mallctl_string`: an integer control is tried at 8, 4, 2 and 1 bytes
/// until jemalloc accepts the size; a write-only control is written.
fn jemalloc_mallctl(name: &[u8], value: Option<&[u8]>, string: bool) -> engine::shared::Mallctl {
    use engine::shared::Mallctl;
    use std::ffi::{c_char, c_void, CString};
    let Ok(cname) = CString::new(name) else { return Mallctl::Err(strerror(libc::ENOENT)) };
    let ctl = |old: *mut c_void, oldlen: *mut usize, new: *mut c_void, newlen: usize| {
        // SAFETY: a NUL-terminated name; the pointers are null or point
        // at live locals of the sizes given.
        unsafe { tikv_jemalloc_sys::mallctl(cname.as_ptr(), old, oldlen, new, newlen) }
    };
    if string {
        let mut old: *const c_char = std::ptr::null();
        let mut sz = std::mem::size_of::<*const c_char>();
        let rret = ctl((&raw mut old).cast(), &mut sz, std::ptr::null_mut(), 0);
        if rret != 0 && !(rret == libc::EPERM && value.is_some()) {
            return Mallctl::Err(strerror(rret));
        }
        let mut wret = 0;
        if let Some(v) = value {
            let cv = CString::new(v).unwrap_or_default();
            let mut p = cv.as_ptr();
            wret = if v == b"VOID" {
                ctl(std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
            } else {
                ctl(std::ptr::null_mut(), std::ptr::null_mut(), (&raw mut p).cast(), sz)
            };
        }
        return if rret == 0 {
            let text = if old.is_null() {
                Vec::new()
            } else {
                // SAFETY: jemalloc returned a NUL-terminated string it owns.
                unsafe { std::ffi::CStr::from_ptr(old) }.to_bytes().to_vec()
            };
            Mallctl::Str(text)
        } else if wret != 0 {
            Mallctl::Err(strerror(wret))
        } else {
            Mallctl::Done
        };
    }
    // Redis 7.0 hands its size variable to jemalloc, which on a size
    // mismatch sets it to the smaller of the two sizes: halved after that,
    // a 4-byte or 1-byte control never matches, and Redis 7.0 answers
    // "Invalid argument" for those. The same here.
    let mut val: i64 = value.and_then(resp::parse_i64).unwrap_or(0);
    let mut old: i64 = 0;
    let mut sz = std::mem::size_of::<i64>();
    while sz > 0 {
        let (newp, newlen) = match value {
            Some(_) => ((&raw mut val).cast::<c_void>(), sz),
            None => (std::ptr::null_mut(), 0),
        };
        let ret = ctl((&raw mut old).cast(), &mut sz, newp, newlen);
        if ret == 0 {
            return Mallctl::Int(old);
        }
        if ret == libc::EPERM
            && value.is_some()
            && ctl(std::ptr::null_mut(), std::ptr::null_mut(), newp, newlen) == 0
        {
            return Mallctl::Done;
        }
        if ret != libc::EINVAL {
            return Mallctl::Err(strerror(ret));
        }
        sz /= 2;
    }
    Mallctl::Err(strerror(libc::EINVAL))
}

/// This thread's bytes allocated minus freed (wrapping), from jemalloc's
/// per-thread counters: two loads through pointers looked up once per
/// thread (the maxmemory check between two `stats.allocated` readings).
fn jemalloc_thread_net() -> u64 {
    use tikv_jemalloc_ctl::thread::{allocatedp, deallocatedp, ThreadLocal};
    thread_local! {
        static COUNTERS: Option<(ThreadLocal<u64>, ThreadLocal<u64>)> =
            allocatedp::read().ok().zip(deallocatedp::read().ok());
    }
    COUNTERS.with(|c| c.map_or(0, |(a, d)| a.get().wrapping_sub(d.get())))
}

/// Memory figures for INFO from jemalloc's statistics (`used_memory` is
/// what the allocator has handed out, as Redis reports it).
fn jemalloc_probe() -> engine::shared::MemStats {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    let allocated = stats::allocated::read().unwrap_or(0) as u64;
    // Freed blocks a thread cache keeps count as allocated for jemalloc;
    // Redis's zmalloc counter frees them at once, and eviction measures
    // what it freed that way, so they are taken off.
    // SAFETY: the name is NUL-terminated and the value a size_t.
    let cached = unsafe {
        tikv_jemalloc_ctl::raw::read::<usize>(b"stats.arenas.4096.tcache_bytes\0").unwrap_or(0)
    } as u64;
    let used = allocated.saturating_sub(cached);
    let active = stats::active::read().unwrap_or(0) as u64;
    let resident = stats::resident::read().unwrap_or(0) as u64;
    let rss = engine::shared::statm_probe().used_memory_rss;
    engine::shared::MemStats {
        used_memory: used,
        used_memory_rss: rss,
        allocator_allocated: allocated,
        allocator_active: active,
        allocator_resident: resident,
        allocator: "jemalloc-5.3.0",
    }
}
