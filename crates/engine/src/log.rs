//! The server log, in Redis's format and with its destinations:
//! `pid:R dd Mon yyyy hh:mm:ss.mmm L message`, where R is the role (`C`
//! before the server is initialised, then `M`) and L the level (`.`
//! debug, `-` verbose, `*` notice, `#` warning). Lines go to standard
//! output, or to `logfile` (opened for each line, as Redis does, so
//! rotated files are picked up), and to syslog when enabled.
//!
//! A process-wide sink: the engine logs from CONFIG SET, the server from
//! start-up, signals and shutdown. Depends on std and libc only.

use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use parking_lot::Mutex;

/// Log levels, as Redis names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

impl Level {
    /// The level a `loglevel` value names (notice for anything else).
    pub fn from_name(s: &str) -> Level {
        match s {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "warning" => Level::Warning,
            _ => Level::Notice,
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static ROLE: AtomicU8 = AtomicU8::new(b'C');
static SYSLOG: AtomicBool = AtomicBool::new(false);
/// The log file; empty means standard output.
static FILE: Mutex<String> = Mutex::new(String::new());

/// Sets the minimum level (`loglevel`, also at CONFIG SET).
pub fn set_level(name: &str) {
    LEVEL.store(Level::from_name(name) as u8, Ordering::Relaxed);
}

/// Whether a line of this level would be written.
pub fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Sends lines to `path` (empty: standard output). Fails, as Redis's
/// start-up check does, when the file cannot be opened for appending.
pub fn set_file(path: &str) -> std::io::Result<()> {
    if !path.is_empty() {
        std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    }
    *FILE.lock() = path.to_string();
    Ok(())
}

/// The role letter from now on (`M` once the server is initialised).
pub fn set_role(role: u8) {
    ROLE.store(role, Ordering::Relaxed);
}

/// Also sends lines to syslog, as `syslog-enabled yes` does.
pub fn enable_syslog(ident: &str, facility: &str) {
    let facility = match facility {
        "user" => libc::LOG_USER,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => libc::LOG_LOCAL0,
    };
    // openlog keeps the pointer: the ident must live for the process.
    let ident: &'static CString =
        Box::leak(Box::new(CString::new(ident.replace('\0', "")).unwrap_or_default()));
    // SAFETY: a NUL-terminated string that is never freed.
    unsafe { libc::openlog(ident.as_ptr(), libc::LOG_PID | libc::LOG_NDELAY, facility) };
    SYSLOG.store(true, Ordering::Relaxed);
}

fn stamp() -> String {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    // SAFETY: libc::tm is a plain C struct for which all-zero is valid.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to valid, initialised locals.
    unsafe {
        libc::gettimeofday(&mut tv, std::ptr::null_mut());
        libc::localtime_r(&tv.tv_sec, &mut tm);
    }
    const MON: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MON[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tv.tv_usec / 1000
    )
}

fn write_out(text: &str) {
    let file = FILE.lock();
    if file.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    } else if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&*file) {
        let _ = f.write_all(text.as_bytes());
    }
}

fn to_syslog(level: Level, msg: &str) {
    if !SYSLOG.load(Ordering::Relaxed) {
        return;
    }
    let prio = match level {
        Level::Debug => libc::LOG_DEBUG,
        Level::Verbose => libc::LOG_INFO,
        Level::Notice => libc::LOG_NOTICE,
        Level::Warning => libc::LOG_WARNING,
    };
    if let Ok(m) = CString::new(msg.replace('\0', "")) {
        // SAFETY: constant format string with one NUL-terminated argument.
        unsafe { libc::syslog(prio, c"%s".as_ptr(), m.as_ptr()) };
    }
}

/// Writes one log line if `level` is enabled.
pub fn log(level: Level, msg: &str) {
    if !enabled(level) {
        return;
    }
    let c = match level {
        Level::Debug => '.',
        Level::Verbose => '-',
        Level::Notice => '*',
        Level::Warning => '#',
    };
    let role = ROLE.load(Ordering::Relaxed) as char;
    write_out(&format!("{}:{role} {} {c} {msg}\n", std::process::id(), stamp()));
    to_syslog(level, msg);
}

/// Writes text as it is (Redis's `LL_RAW`: the start-up logo).
pub fn raw(level: Level, text: &str) {
    if enabled(level) {
        write_out(text);
        to_syslog(level, text);
    }
}

/// A line from a signal handler, in Redis's form for those
/// (`pid:signal-handler (unix time) message`).
pub fn from_handler(msg: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    write_out(&format!("{}:signal-handler ({now}) {msg}\n", std::process::id()));
    to_syslog(Level::Warning, msg);
}

pub fn warning(msg: &str) {
    log(Level::Warning, msg);
}

pub fn notice(msg: &str) {
    log(Level::Notice, msg);
}

pub fn verbose(msg: &str) {
    log(Level::Verbose, msg);
}
