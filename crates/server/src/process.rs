//! What the process does around serving, as redis-server 7.0.15 does it:
//! daemonizing, the pid file, supervision (systemd's `sd_notify`,
//! upstart's `SIGSTOP`), `oom-score-adj`, and the start-up banner.
//!
//! Unix only; uses libc directly where std has no equivalent.

use std::io::Write;

use engine::subsystems::log::{self, Level};
use engine::Config;

/// Redis's `CONFIG_DEFAULT_PID_FILE`, used when daemonized without one.
const DEFAULT_PID_FILE: &str = "/var/run/redis.pid";

/// Who supervises the process (`supervised`, after auto-detection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Supervisor {
    None,
    Systemd,
    Upstart,
}

fn inert(cfg: &Config, name: &str) -> String {
    cfg.get_by_name(name).map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default()
}

/// Redis's `redisIsSupervised`: `auto` looks at the environment.
pub fn supervisor(cfg: &Config) -> Supervisor {
    let mode = inert(cfg, "supervised");
    let upstart = std::env::var_os("UPSTART_JOB").is_some();
    let systemd = std::env::var_os("NOTIFY_SOCKET").is_some();
    match mode.as_str() {
        "auto" if upstart => Supervisor::Upstart,
        "auto" if systemd => Supervisor::Systemd,
        "upstart" => Supervisor::Upstart,
        "systemd" => Supervisor::Systemd,
        _ => Supervisor::None,
    }
}

/// Logs what supervision was found, as Redis does at start-up.
pub fn log_supervision(cfg: &Config, sup: Supervisor) {
    match sup {
        Supervisor::Systemd => {
            if std::env::var_os("NOTIFY_SOCKET").is_none() {
                log::warning(
                    "systemd supervision requested or auto-detected, but NOTIFY_SOCKET \
                     environment variable not found!",
                );
            } else {
                log::notice("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.");
            }
        }
        Supervisor::Upstart => {
            log::notice("supervised by upstart, will stop to signal readiness.");
        }
        Supervisor::None if inert(cfg, "supervised") != "no" => {
            log::warning("supervised by auto, but no supervisor found");
        }
        Supervisor::None => {}
    }
}

/// Forks into the background: the parent exits 0, the child starts a new
/// session with standard streams on /dev/null (Redis's `daemonize`). Must
/// run before any thread is started.
pub fn daemonize() {
    // SAFETY: called while the process is single-threaded; the parent only
    // exits and the child continues with its own copy of everything.
    unsafe {
        match libc::fork() {
            -1 => return,
            0 => {}
            _ => libc::_exit(0),
        }
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
}

/// The pid file this run writes, if any (`pidfile`, or Redis's default
/// when daemonized without one).
pub fn pid_file(cfg: &Config, background: bool) -> Option<String> {
    if !cfg.pidfile.is_empty() {
        Some(cfg.pidfile.clone())
    } else if background {
        Some(DEFAULT_PID_FILE.to_string())
    } else {
        None
    }
}

/// Writes the pid file; a failure is logged, not fatal (as in Redis).
pub fn write_pid_file(path: &str) {
    let r = std::fs::File::create(path).and_then(|mut f| writeln!(f, "{}", std::process::id()));
    if let Err(e) = r {
        log::warning(&format!("Failed to write PID file: {}", os_error(&e)));
    }
}

fn os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    // "No such file or directory (os error 2)" -> strerror's words.
    match s.rfind(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Tells systemd (`NOTIFY_SOCKET`) a state change, as `sd_notify` does.
pub fn notify_systemd(msg: &str) {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let path = path.to_string_lossy().into_owned();
    let addr = if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes())
    } else {
        SocketAddr::from_pathname(&path)
    };
    let sent = addr.and_then(|a| UnixDatagram::unbound()?.send_to_addr(msg.as_bytes(), &a));
    if let Err(e) = sent {
        log::warning(&format!("Can't send notification to systemd: {e}"));
    }
}

/// Signals readiness to the supervisor, after "Ready to accept
/// connections".
pub fn signal_ready(sup: Supervisor) {
    match sup {
        Supervisor::Systemd => {
            notify_systemd("STATUS=Ready to accept connections\n");
            notify_systemd("READY=1\n");
        }
        Supervisor::Upstart => {
            std::env::remove_var("UPSTART_JOB");
            // SAFETY: raising a signal at ourselves; upstart resumes us.
            unsafe { libc::raise(libc::SIGSTOP) };
        }
        Supervisor::None => {}
    }
}

/// The start-up banner: the logo with version, mode, `Port:` and `PID:`
/// in Redis's layout when `always-show-logo` is on or the log goes to a
/// terminal, else Redis's one line.
pub fn banner(cfg: &Config, port: u16, version: &str) {
    use std::io::IsTerminal;
    let always = inert(cfg, "always-show-logo") == "yes";
    let syslog = inert(cfg, "syslog-enabled") == "yes";
    let show = always || (!syslog && cfg.logfile.is_empty() && std::io::stdout().is_terminal());
    let mode = if inert(cfg, "cluster-enabled") == "yes" { "cluster" } else { "standalone" };
    if !show {
        log::notice(&format!("Running mode={mode}, port={port}."));
        return;
    }
    let pid = std::process::id();
    let text = [
        String::new(),
        "            ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~".to_string(),
        "       .~~~~   |  |  |  |  |  |  |   ~~~~.  ".to_string(),
        format!("     ~~~  ~~~~|~~|~~|~~|~~|~~|~~|~~~~   ~~~     Sluice {version} (Redis {} compatible) 64 bit", engine::subsystems::config::REDIS_VERSION),
        "   ~~~  ~~~~  |  |  |  |  |  |  |  ~~~~  ~~~ ".to_string(),
        format!("  |~~~~~~~~~~~|  |  |  |  |  |  |~~~~~~~~~~~|     Running in {mode} mode"),
        format!("  |  ~~~~~~   |==|==|==|==|==|==|   ~~~~~~  |     Port: {port}"),
        format!("  |     ~~~~~~|  |  |  |  |  |  |~~~~~~     |     PID: {pid}"),
        "  |~~~~~~~~~~~|  |  |  |  |  |  |~~~~~~~~~~~|".to_string(),
        "  |   ~~~~~~  |  |  |  |  |  |  |  ~~~~~~   |".to_string(),
        "  |       ~~~~|__|__|__|__|__|__|~~~~       |".to_string(),
        "   \\~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~/ ".to_string(),
        "      ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~   ".to_string(),
        String::new(),
        String::new(),
    ];
    log::raw(Level::Notice, &text.join("\n"));
}

/// `disable-thp yes` (the default): when the kernel's transparent huge
/// pages are `always` on, turns them off for this process, as Redis does
/// (huge pages make fork-less writes no cheaper and inflate RSS and
/// latency spikes). Other THP modes need nothing.
pub fn disable_thp(cfg: &Config) {
    if cfg.get_by_name("disable-thp").is_some_and(|v| v == b"no") {
        return;
    }
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if mode.contains("[always]") {
        // SAFETY: prctl with integer arguments only.
        let ret = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if ret != 0 {
            engine::subsystems::log::warning(
                "WARNING You have Transparent Huge Pages (THP) support enabled in your kernel. \
                 This will create latency and memory usage issues with Redis. To fix this issue \
                 run the command 'echo madvise > /sys/kernel/mm/transparent_hugepage/enabled' \
                 as root, and add it to your /etc/rc.local in order to retain the setting after \
                 a reboot. Redis must be restarted after THP is disabled (set to 'madvise' or \
                 'never').",
            );
        }
    }
}
