//! Loading the append-only files at start-up, as Redis 7.0's
//! `loadAppendOnlyFiles`: the manifest, then the base (an RDB preamble,
//! or commands) and each incremental file in order, each command run
//! through the dispatcher as the AOF client (`dispatch::replay`). A torn
//! last file is cut at its last complete command when
//! `aof-load-truncated` is set (an unfinished `MULTI` is reverted), with
//! Redis's log lines; anything else wrong stops the server saying where
//! and why.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use engine::core::dispatch;
use engine::core::shared::unix_ms;
use engine::{Session, Shared};
use persist::aof::{self, Item, Manifest, StreamError};
use resp::ReplyBuf;

use crate::log;
use crate::persistence;

/// How loading one file ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A torn tail was cut at the offset.
    Truncated,
    Empty,
}

/// Reads the manifest in the AOF directory `dirname` (in the server's
/// `dir`), if there is one. `Err` carries Redis's fatal lines, which name
/// the file relative to `dir`.
pub fn read_manifest(dirname: &Path, filename: &str) -> Result<Option<Manifest>, Vec<String>> {
    let path = dirname.join(aof::manifest_name(filename));
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(vec![format!(
                "Fatal error: can't open the AOF manifest file {} for reading: {e}",
                Path::new(dirname.file_name().unwrap_or_default())
                    .join(aof::manifest_name(filename))
                    .display()
            )])
        }
    };
    Manifest::parse(&text).map(Some).map_err(|e| {
        let mut lines = vec!["\n*** FATAL AOF MANIFEST FILE ERROR ***\n".to_string()];
        if let Some((n, l)) = e.line {
            lines.push(format!("Reading the manifest file, at line {n}\n"));
            lines.push(format!(">>> '{l}'\n"));
        }
        lines.push(format!("{}\n", e.reason));
        lines
    })
}

/// Loads every file the manifest names. `Err` is the last log line of
/// the failure (the others are logged on the way).
pub fn load_all(sh: &Arc<Shared>, m: &Manifest) -> Result<(), String> {
    let dirname = crate::aof::dir_of(&sh.config.read());
    let files: Vec<_> = m.load_order().collect();
    let total = files.len();
    let sizes = files_size(&dirname, m).inspect_err(|msg| log::warning(msg))?;
    if sizes == 0 {
        return Ok(());
    }
    sh.set_load_size(sizes);
    let start_all = Instant::now();
    for (i, f) in files.iter().enumerate() {
        let last = i + 1 == total;
        let start = Instant::now();
        let out = load_file(sh, &dirname, &f.name)?;
        if out == Outcome::Truncated && !last {
            return Err(format!("Truncated AOF file {} is not the last file", f.name));
        }
        if out != Outcome::Empty {
            let what = if f.kind == aof::Kind::Base { "base" } else { "incr" };
            log::notice(&format!(
                "DB loaded from {what} file {}: {:.3} seconds",
                f.name,
                start.elapsed().as_secs_f64()
            ));
        }
    }
    log::notice(&format!(
        "DB loaded from append only file: {:.3} seconds",
        start_all.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// How many bytes of an AOF's commands load between two reports of the
/// load's progress.
const PROGRESS_STEP: usize = 64 << 10;

/// Loads one file (Redis's `loadSingleAppendOnlyFile`). The file is read
/// as it is loaded, a megabyte at a time (an RDB base through
/// [`persistence::load_reader`]), as Redis reads it with `fread`: the
/// memory a load takes is the data set and the command being read, not
/// the file as well.
pub fn load_file(sh: &Arc<Shared>, dirname: &Path, name: &str) -> Result<Outcome, String> {
    let path = dirname.join(name);
    let cant_open = |e: io::Error| {
        let m = format!("Fatal error: can't open the append log file {name} for reading: {e}");
        log::warning(&m);
        m
    };
    // Redis's words for an fread that fails.
    let cant_read = |e: io::Error| {
        let m = format!("Unrecoverable error reading the append only file {name}: {e}");
        log::warning(&m);
        m
    };
    let mut file = File::open(&path).map_err(cant_open)?;
    let mut head = Vec::with_capacity(5);
    (&mut file).take(5).read_to_end(&mut head).map_err(cant_read)?;
    if head.is_empty() {
        return Ok(Outcome::Empty);
    }
    let mut start = 0;
    if aof::is_rdb(&head) {
        log::notice("Reading RDB base file on AOF loading...");
        file.seek(SeekFrom::Start(0)).map_err(cant_read)?;
        let base = persistence::load_reader(sh, &mut file, false, unix_ms(), sh.clock.now_ms());
        match base {
            Ok(l) => {
                if l.aux.iter().any(|(k, v)| k == b"aof-base" && v == b"1") {
                    log::notice("RDB is base AOF");
                }
                persistence::log_done_loading(&l);
                start = l.consumed;
            }
            Err(persistence::LoadError::Library(e)) => {
                log::warning(&format!("Failed loading library, {e}"));
                let m = format!("Error reading the RDB base file {name}, AOF loading aborted");
                log::warning(&m);
                return Err(m);
            }
            Err(persistence::LoadError::Rdb(e)) => {
                log::warning(&format!("Short read or corrupt RDB base file {name}: {e}"));
                let m = format!("Error reading the RDB base file {name}, AOF loading aborted");
                log::warning(&m);
                return Err(m);
            }
        }
    }
    file.seek(SeekFrom::Start(start as u64)).map_err(cant_read)?;
    let truncate = sh.config.read().aof_load_truncated;
    let delay = sh.config.read().key_load_delay;
    let mut sess = Session::detached(u64::MAX);
    let mut out = ReplyBuf::new();
    let mut valid_up_to = start;
    let mut valid_before_multi = start;
    // What of the file was counted as loaded (INFO's loading_loaded_bytes,
    // and what clients waiting on the load measure it by), told every
    // `PROGRESS_STEP` bytes as Redis tells it every 1,024 commands.
    let mut counted = start;
    let fail = |m: String| {
        log::warning(&m);
        Err(m)
    };
    let read =
        aof::read_stream(&mut file, start, persistence::LOAD_READ, |item| -> Result<(), String> {
            match item {
                Item::Annotation { end, .. } => {
                    if truncate {
                        valid_up_to = end;
                    }
                }
                Item::Command { argv, end } => {
                    if argv[0].eq_ignore_ascii_case(b"MULTI") {
                        valid_before_multi = valid_up_to;
                    }
                    if dispatch::replay_loaded(sh, &mut sess, &argv, &mut out).is_err() {
                        return Err(format!(
                            "Unknown command '{}' reading the append only file {name}",
                            String::from_utf8_lossy(argv[0])
                        ));
                    }
                    if let Some(e) = out.contiguous().filter(|b| b.first() == Some(&b'-')) {
                        log::warning(&format!(
                            "== CRITICAL == This server is sending an error to its \
                         AOF-loading-client: '{}' after processing the command '{}'",
                            String::from_utf8_lossy(&e[1..]).trim_end(),
                            String::from_utf8_lossy(argv[0])
                        ));
                        crate::follow::propagation_error(
                            sh,
                            false,
                            "server",
                            "AOF-loading-client",
                            argv[0],
                        );
                    }
                    out.clear();
                    if truncate {
                        valid_up_to = end;
                    }
                    if end - counted >= PROGRESS_STEP {
                        sh.load_progressed(end - counted);
                        counted = end;
                    }
                    super::debug_delay(delay);
                }
            }
            Ok(())
        });
    // A command cut short at the end of the file.
    let short = match read {
        Ok(()) => false,
        Err(aof::StreamStop::Stream(StreamError::Truncated)) => true,
        Err(aof::StreamStop::Stream(StreamError::Format { .. })) => {
            return fail(format!(
                "Bad file format reading the append only file {name}: make a backup of \
                 your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
            ));
        }
        Err(aof::StreamStop::Read(e)) => return Err(cant_read(e)),
        Err(aof::StreamStop::Caller(m)) => return fail(m),
    };
    if let Ok(md) = file.metadata() {
        sh.load_progressed((md.len() as usize).saturating_sub(counted));
    }
    let torn = sess.in_multi();
    let ended_cleanly = !short && !torn;
    if ended_cleanly {
        return Ok(Outcome::Ok);
    }
    if torn {
        log::warning(&format!("Revert incomplete MULTI/EXEC transaction in AOF file {name}"));
        valid_up_to = valid_before_multi;
    }
    // A short read (or a MULTI never closed): Redis's uxeof.
    if truncate {
        log::warning(&format!("!!! Warning: short read while loading the AOF file {name}!!!"));
        log::warning(&format!("!!! Truncating the AOF {name} at offset {valid_up_to} !!!"));
        let cut = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(valid_up_to as u64));
        match cut {
            Ok(()) => {
                log::warning(&format!(
                    "AOF {name} loaded anyway because aof-load-truncated is enabled"
                ));
                if sess.in_multi() {
                    // The queued commands of the torn transaction are dropped.
                    let mut o = ReplyBuf::new();
                    let _ = dispatch::replay_loaded(sh, &mut sess, &[b"DISCARD"], &mut o);
                }
                return Ok(Outcome::Truncated);
            }
            Err(e) => log::warning(&format!("Error truncating the AOF file {name}: {e}")),
        }
    }
    fail(format!(
        "Unexpected end of file reading the append only file {name}. You can: 1) Make a \
         backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) \
         Alternatively you can set the 'aof-load-truncated' configuration option to yes and \
         restart the server."
    ))
}

/// Whether an AOF of Redis before 7.0 (one `appendfilename` file in the
/// working directory) is to move into `appenddirname` as the base, in
/// Redis's three cases: no directory, no manifest, or a manifest naming
/// only that file as its base while the directory lacks it.
fn needs_upgrade(dir: &Path, dirname: &str, filename: &str, m: &Manifest) -> bool {
    if !dir.join(filename).is_file() {
        return false;
    }
    let aofdir = dir.join(dirname);
    let only_old_base = m.incr.is_empty()
        && m.base.as_ref().is_some_and(|b| b.name == filename)
        && !aofdir.join(filename).exists();
    !aofdir.is_dir() || (m.base.is_none() && m.incr.is_empty()) || only_old_base
}

/// Redis's `aofUpgradePrepare`: the old file becomes base number 1 of a
/// new manifest, and moves into the directory.
fn upgrade(dir: &Path, dirname: &str, filename: &str, m: &mut Manifest) -> Result<(), String> {
    let aofdir = dir.join(dirname);
    std::fs::create_dir_all(&aofdir)
        .map_err(|e| format!("Can't open or create append-only dir {dirname}: {e}"))?;
    m.base = Some(aof::Info { name: filename.to_string(), seq: 1, kind: aof::Kind::Base });
    m.base_seq = 1;
    crate::aof::persist_manifest(&aofdir, filename, m)
        .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
    std::fs::rename(dir.join(filename), aofdir.join(filename)).map_err(|e| {
        format!("Error trying to rename the existing AOF to the new directory: {e}.")
    })?;
    log::notice(&format!(
        "Successfully migrated an old-style AOF into the AOF directory ({dirname})."
    ));
    Ok(())
}

/// The size of the files `m` names, together (INFO's
/// `loading_total_bytes`); `Err` names the first that cannot be read.
fn files_size(dirname: &Path, m: &Manifest) -> Result<u64, String> {
    m.load_order().try_fold(0u64, |sum, f| match std::fs::metadata(dirname.join(&f.name)) {
        Ok(md) => Ok(sum + md.len()),
        Err(e) => Err(format!("The append log file {} doesn't exist: {e}", f.name)),
    })
}

/// [`files_size`] of the configured AOF, for the load's first moment (0
/// when the manifest or a file cannot be read: the load reports why).
fn startup_size(sh: &Shared) -> u64 {
    let (dirname, filename) = {
        let c = sh.config.read();
        (crate::aof::dir_of(&c), c.appendfilename.clone())
    };
    let Ok(Some(m)) = read_manifest(&dirname, &filename) else { return 0 };
    files_size(&dirname, &m).unwrap_or(0)
}

/// Start-up with `appendonly yes`: loads the AOF (which has priority over
/// the RDB file, as in Redis) on a thread of its own while clients get
/// `-LOADING`, then opens the incremental file and starts appending.
pub fn load_at_startup(sh: &Arc<Shared>, aof: Arc<crate::aof::Aof>) {
    sh.start_load(startup_size(sh));
    let sh2 = sh.clone();
    let spawned = log::spawn("aof-load", move || {
        let (dir, dirname, filename) = {
            let c = sh2.config.read();
            (PathBuf::from(&c.dir), c.appenddirname.clone(), c.appendfilename.clone())
        };
        let mut m = match read_manifest(&dir.join(&dirname), &filename) {
            Ok(m) => m.unwrap_or_default(),
            Err(lines) => {
                for l in lines {
                    log::warning(&l);
                }
                std::process::exit(1);
            }
        };
        if needs_upgrade(&dir, &dirname, &filename, &m) {
            if let Err(e) = upgrade(&dir, &dirname, &filename, &mut m) {
                log::warning(&e);
                std::process::exit(1);
            }
        }
        if (m.base.is_some() || !m.incr.is_empty()) && load_all(&sh2, &m).is_err() {
            std::process::exit(1);
        }
        if let Err(e) = aof.open_on_start(&sh2, m) {
            log::warning(&format!("Can't open the append-only file: {e}"));
            std::process::exit(1);
        }
        sh2.persist.last_save.store(engine::core::shared::unix_ms() / 1000, Ordering::Relaxed);
        sh2.set_loading(false);
    });
    if let Err(e) = spawned {
        log::warning(&format!("Can't start loading the data set: {e}"));
        std::process::exit(1);
    }
}
