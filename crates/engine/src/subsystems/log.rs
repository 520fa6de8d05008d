//! The server log, in Redis's format and with its destinations:
//! `pid:R dd Mon yyyy hh:mm:ss.mmm L message`, where R is the role (`C`
//! before the server is initialised, then `M`) and L the level (`.`
//! debug, `-` verbose, `*` notice, `#` warning). Lines go to standard
//! output, or to `logfile` (opened for each line, as Redis does, so
//! rotated files are picked up), and to syslog when enabled.
//!
//! Each server has its own [`Logger`] (its level, file, role), handed to
//! the engine in its [`Host`](crate::core::host::Host). The free functions
//! (`log::warning`, …) write to the logger bound to the calling thread
//! ([`bind`]): every thread a server starts serves that one server, so a
//! thread-local is the thread's own state, not the process's. A thread
//! with none bound (a test's, a tool's) writes at notice to standard
//! output. Depends on std and libc only.

use std::cell::RefCell;
use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

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

/// One server's log: where its lines go and which it keeps.
pub struct Logger {
    level: AtomicU8,
    role: AtomicU8,
    syslog: AtomicBool,
    /// The log file; empty means standard output. A relative one is in
    /// the server's `dir` (`path` is the two joined): Redis opens it
    /// afresh for every line, relative to the directory it is in now.
    file: Mutex<String>,
    dir: Mutex<String>,
    path: Mutex<std::path::PathBuf>,
}

impl Default for Logger {
    fn default() -> Self {
        Logger {
            level: AtomicU8::new(Level::Notice as u8),
            role: AtomicU8::new(b'C'),
            syslog: AtomicBool::new(false),
            file: Mutex::new(String::new()),
            dir: Mutex::new(String::new()),
            path: Mutex::new(std::path::PathBuf::new()),
        }
    }
}

impl Logger {
    /// Sets the minimum level (`loglevel`, also at CONFIG SET).
    pub fn set_level(&self, name: &str) {
        self.level.store(Level::from_name(name) as u8, Ordering::Relaxed);
    }

    /// Whether a line of this level would be written.
    pub fn enabled(&self, level: Level) -> bool {
        level as u8 >= self.level.load(Ordering::Relaxed)
    }

    /// Sends lines to `path` (empty: standard output). Fails, as Redis's
    /// start-up check does, when the file cannot be opened for appending.
    pub fn set_file(&self, path: &str) -> std::io::Result<()> {
        let full = std::path::Path::new(&*self.dir.lock()).join(path);
        if !path.is_empty() {
            std::fs::OpenOptions::new().create(true).append(true).open(&full)?;
        }
        *self.file.lock() = path.to_string();
        *self.path.lock() = full;
        Ok(())
    }

    /// The server's directory (`dir`, at start-up and CONFIG SET): a
    /// relative log file is there from now on.
    pub fn set_dir(&self, dir: &str) {
        *self.dir.lock() = dir.to_string();
        let full = std::path::Path::new(dir).join(&*self.file.lock());
        *self.path.lock() = full;
    }

    /// The role letter from now on (`M` once the server is initialised,
    /// `S` while it follows a master).
    pub fn set_role(&self, role: u8) {
        self.role.store(role, Ordering::Relaxed);
    }

    /// Also sends lines to syslog, as `syslog-enabled yes` does (syslog
    /// is the process's: the last server to enable it names it).
    pub fn enable_syslog(&self, ident: &str, facility: &str) {
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
        self.syslog.store(true, Ordering::Relaxed);
    }

    /// Writes one log line if `level` is enabled.
    pub fn log(&self, level: Level, msg: &str) {
        if !self.enabled(level) {
            return;
        }
        let c = match level {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning => '#',
        };
        let role = self.role.load(Ordering::Relaxed) as char;
        self.write_out(&format!("{}:{role} {} {c} {msg}\n", std::process::id(), stamp()));
        self.to_syslog(level, msg);
    }

    /// Writes text as it is (Redis's `LL_RAW`: the start-up logo).
    pub fn raw(&self, level: Level, text: &str) {
        if self.enabled(level) {
            self.write_out(text);
            self.to_syslog(level, text);
        }
    }

    /// A line about a signal, in Redis's form for lines its signal
    /// handler writes (`pid:signal-handler (unix time) message`).
    pub fn from_handler(&self, msg: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.write_out(&format!("{}:signal-handler ({now}) {msg}\n", std::process::id()));
        self.to_syslog(Level::Warning, msg);
    }

    /// [`from_handler`](Self::from_handler) from inside a signal handler:
    /// async-signal-safe, so no allocation, no blocking lock, no std
    /// stream (std's stdout lock reads the thread's handle, and a handler
    /// that runs on a thread being spawned, before std has set that
    /// handle, makes the spawn abort the process), no syslog (Redis's
    /// `serverLogFromHandler` does not either). The line is built on the
    /// stack and written with `write(2)`. Returns false, having written
    /// nothing, when the log's settings are being changed at that moment
    /// or the line does not fit: the caller then leaves the line to the
    /// server's tick.
    pub fn from_signal(&self, msg: &str) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut line = StackBuf::<512>::new();
        line.num(u64::from(std::process::id()));
        line.push(b":signal-handler (");
        line.num(now);
        line.push(b") ");
        line.push(msg.as_bytes());
        line.push(b"\n");
        if line.overflow {
            return false;
        }
        let (Some(file), Some(path)) = (self.file.try_lock(), self.path.try_lock()) else {
            return false;
        };
        if file.is_empty() {
            // SAFETY: writes the initialised bytes of a stack buffer to
            // standard output.
            unsafe { libc::write(1, line.bytes().as_ptr().cast(), line.bytes().len()) };
            return true;
        }
        let mut name = StackBuf::<4096>::new();
        name.push(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()));
        name.push(b"\0");
        if name.overflow || name.bytes()[..name.len - 1].contains(&0) {
            return false;
        }
        // SAFETY: a NUL-terminated path in a stack buffer; the descriptor
        // is closed before returning.
        unsafe {
            let fd = libc::open(
                name.bytes().as_ptr().cast(),
                libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
                0o644,
            );
            if fd < 0 {
                return true;
            }
            libc::write(fd, line.bytes().as_ptr().cast(), line.bytes().len());
            libc::close(fd);
        }
        true
    }

    fn write_out(&self, text: &str) {
        let file = self.file.lock();
        let path = self.path.lock();
        if file.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        } else if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&*path)
        {
            let _ = f.write_all(text.as_bytes());
        }
    }

    fn to_syslog(&self, level: Level, msg: &str) {
        if !self.syslog.load(Ordering::Relaxed) {
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
}

/// A fixed buffer on the stack, for lines built where nothing may
/// allocate (a signal handler).
struct StackBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    overflow: bool,
}

impl<const N: usize> StackBuf<N> {
    fn new() -> Self {
        StackBuf { buf: [0; N], len: 0, overflow: false }
    }

    fn push(&mut self, b: &[u8]) {
        match self.buf.get_mut(self.len..self.len + b.len()) {
            Some(dst) => {
                dst.copy_from_slice(b);
                self.len += b.len();
            }
            None => self.overflow = true,
        }
    }

    fn num(&mut self, n: u64) {
        // itoa formats on the stack: nothing allocates.
        self.push(itoa::Buffer::new().format(n).as_bytes());
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

thread_local! {
    /// The logger of the server this thread works for.
    static CURRENT: RefCell<Option<Arc<Logger>>> = const { RefCell::new(None) };
}

/// Makes `logger` this thread's log (a server's threads call it first).
pub fn bind(logger: Arc<Logger>) {
    CURRENT.with(|c| *c.borrow_mut() = Some(logger));
}

/// This thread's logger, to hand to a thread it starts.
pub fn current() -> Option<Arc<Logger>> {
    CURRENT.try_with(|c| c.borrow().clone()).ok().flatten()
}

/// Starts a named thread that logs where this one does (the threads a
/// server starts keep writing to its log).
pub fn spawn<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let logger = current();
    std::thread::Builder::new().name(name.into()).spawn(move || {
        if let Some(l) = logger {
            bind(l);
        }
        f()
    })
}

/// Runs `f` with this thread's logger (a default one when none is bound).
fn with<R>(f: impl FnOnce(&Logger) -> R) -> R {
    match current() {
        Some(l) => f(&l),
        None => f(&Logger::default()),
    }
}

/// Whether a line of this level would be written to this thread's log.
pub fn enabled(level: Level) -> bool {
    with(|l| l.enabled(level))
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

/// Writes one line to this thread's log if `level` is enabled.
pub fn log(level: Level, msg: &str) {
    with(|l| l.log(level, msg));
}

/// A line about a signal that landed on this thread (a crash), to this
/// thread's log in Redis's signal-handler form.
pub fn from_handler(msg: &str) {
    with(|l| l.from_handler(msg));
}

/// Writes text as it is to this thread's log.
pub fn raw(level: Level, text: &str) {
    with(|l| l.raw(level, text));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The signal-safe line is Redis's `serverLogFromHandler` line and
    /// reaches the log file; a line too long for its buffer is left to
    /// the caller.
    #[test]
    fn from_signal_writes_redis_handler_lines_to_the_file() {
        let dir = std::env::temp_dir().join(format!("sluice-log-signal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let l = Logger::default();
        l.set_dir(dir.to_str().unwrap());
        l.set_file("s.log").unwrap();
        assert!(l.from_signal("Received SIGTERM scheduling shutdown..."));
        assert!(!l.from_signal(&"x".repeat(600)));
        let text = std::fs::read_to_string(dir.join("s.log")).unwrap();
        let pid = std::process::id();
        let (head, rest) = text.split_once(") ").unwrap();
        let secs: u64 =
            head.strip_prefix(&format!("{pid}:signal-handler (")).unwrap().parse().unwrap();
        assert!(secs > 1_700_000_000, "{text}");
        assert_eq!(rest, "Received SIGTERM scheduling shutdown...\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
