//! Logging in Redis's format: `pid:M dd Mon yyyy hh:mm:ss.mmm * message`.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::Mutex;

/// Log levels, as Redis names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// Sets the minimum level and the destination (empty: standard output).
pub fn init(level: &str, file: &str) -> std::io::Result<()> {
    let l = match level {
        "debug" => Level::Debug,
        "verbose" => Level::Verbose,
        "warning" => Level::Warning,
        _ => Level::Notice,
    };
    LEVEL.store(l as u8, Ordering::Relaxed);
    if !file.is_empty() {
        let f = std::fs::OpenOptions::new().create(true).append(true).open(file)?;
        *FILE.lock() = Some(f);
    }
    Ok(())
}

fn stamp() -> String {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let mut tm: libc::tm = unsafe_zeroed_tm();
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

fn unsafe_zeroed_tm() -> libc::tm {
    // SAFETY: libc::tm is a plain C struct for which all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// Writes one log line if `level` is enabled.
pub fn log(level: Level, msg: &str) {
    if (level as u8) < LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let c = match level {
        Level::Debug => '.',
        Level::Verbose => '-',
        Level::Notice => '*',
        Level::Warning => '#',
    };
    let line = format!("{}:M {} {} {}\n", std::process::id(), stamp(), c, msg);
    let mut f = FILE.lock();
    match f.as_mut() {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stdout().lock().write_all(line.as_bytes());
        }
    }
}

pub fn notice(msg: &str) {
    log(Level::Notice, msg);
}

pub fn warning(msg: &str) {
    log(Level::Warning, msg);
}

pub fn verbose(msg: &str) {
    log(Level::Verbose, msg);
}
