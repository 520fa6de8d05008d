//! Persistence commands: DUMP and RESTORE (payloads byte-compatible with
//! Redis 7.0.15), SAVE, BGSAVE, LASTSAVE, BGREWRITEAOF. The codec and the files are
//! behind [`crate::subsystems::snapshot::Snapshots`], which the server installs.

use std::sync::atomic::Ordering;

use resp::ReplyBuf;
use store::NO_EXPIRE;

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;
use crate::subsystems::snapshot::{RestoreError, Snapshots};

pub const COMMANDS: &[Command] = &[
    Command::redis("DUMP", dump),
    Command::redis("RESTORE", restore),
    // What a cluster node's MIGRATE sends; outside a cluster it is RESTORE
    // (ASKING only matters to a cluster's slot checks), as in Redis.
    Command::redis("RESTORE-ASKING", restore),
    Command::redis("SAVE", save),
    Command::redis("BGSAVE", bgsave),
    Command::redis("BGREWRITEAOF", bgrewriteaof),
    Command::redis("SHUTDOWN", shutdown),
    Command::redis("LASTSAVE", lastsave),
];

fn snapshots(cx: &Ctx) -> Result<std::sync::Arc<dyn Snapshots>, CmdError> {
    crate::subsystems::snapshot::installed(cx.shared)
}

/// `server.dirty` as this command sees it (the INFO figure).
fn dirty_now(cx: &mut Ctx) -> u64 {
    cx.shared.stats.dirty.load(Ordering::Relaxed) + cx.sess.stats.dirty + cx.sess.fx.dirty
}

fn dump(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let snap = snapshots(cx)?;
    let key = args.key()?;
    let cfg = cx.sess.conf(cx.shared).clone();
    match cx.lookup_read(key) {
        Some(e) => out.bulk(&snap.dump(&e.value, &cfg)),
        None => out.null(),
    }
    Ok(())
}

fn restore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let snap = snapshots(cx)?;
    let argv = args.argv();
    let key = argv[1];
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (-1i64, -1i64);
    let mut j = 4;
    while j < argv.len() {
        let more = argv.len() - j - 1;
        let a = argv[j];
        if eq_ic(a, "REPLACE") {
            replace = true;
        } else if eq_ic(a, "ABSTTL") {
            absttl = true;
        } else if eq_ic(a, "IDLETIME") && more >= 1 && freq == -1 {
            idle = parse_i64(argv[j + 1])?;
            if idle < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            j += 1;
        } else if eq_ic(a, "FREQ") && more >= 1 && idle == -1 {
            freq = parse_i64(argv[j + 1])?;
            if !(0..=255).contains(&freq) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if !replace && cx.lookup_write(key).is_some() {
        return Err(CmdError::Msg("BUSYKEY Target key name already exists.".into()));
    }
    let mut ttl = parse_i64(argv[2])?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let cfg = cx.sess.conf(cx.shared).clone();
    let value = snap.restore(argv[3], &cfg).map_err(|e| match e {
        RestoreError::VersionOrChecksum => {
            CmdError::err("DUMP payload version or checksum are wrong")
        }
        RestoreError::BadFormat => CmdError::err("Bad data format"),
    })?;
    let deleted = replace && cx.delete(key).is_some();
    if ttl != 0 && !absttl {
        ttl = ttl.saturating_add(cx.now());
    }
    if ttl != 0 && cx.already_expired(ttl) {
        // Already expired on arrival: as Redis, the old key (if replaced)
        // goes, and the command propagates as DEL.
        if deleted {
            cx.changed(key, Class::GENERIC, "del", 1);
            cx.propagate_as(&[b"DEL", key]);
        }
        out.ok();
        return Ok(());
    }
    cx.set(key, value, if ttl != 0 { ttl } else { NO_EXPIRE });
    cx.set_access(key, idle, freq);
    cx.changed(key, Class::GENERIC, "restore", 1);
    if ttl != 0 && !absttl && cx.propagating() {
        // Propagated with the absolute time, as Redis rewrites it.
        let abs = ttl.to_string();
        let mut v: Vec<&[u8]> = argv.to_vec();
        v[2] = abs.as_bytes();
        v.push(b"ABSTTL");
        cx.propagate_as(&v);
    }
    out.ok();
    Ok(())
}

fn save(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let snap = snapshots(cx)?;
    if cx.shared.persist.bgsave_in_progress.load(Ordering::Acquire) {
        return Err(CmdError::err("Background save already in progress"));
    }
    let dirty = dirty_now(cx);
    match snap.save(dirty) {
        Ok(()) => out.ok(),
        Err(_) => return Err(CmdError::Msg("ERR".into())),
    }
    Ok(())
}

fn bgrewriteaof(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let aof = cx
        .shared
        .host
        .aof
        .as_ref()
        .cloned()
        .ok_or_else(|| CmdError::err("persistence is not available in this process"))?;
    match aof.rewrite(!cx.keys.is_empty()) {
        Ok(status) => out.simple(status.as_bytes()),
        Err(e) => return Err(CmdError::err(e)),
    }
    Ok(())
}

fn bgsave(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let snap = snapshots(cx)?;
    // SCHEDULE is accepted and changes nothing: in Redis it waits for its
    // other child, an AOF rewrite, which a save here does not wait for
    // (it starts at once).
    match args.next() {
        None => {}
        Some(a) if eq_ic(a, "SCHEDULE") && args.is_empty() => {}
        Some(_) => return Err(CmdError::Syntax),
    }
    // Redis's bgsaveCommand: a save under way refuses another, SCHEDULE
    // or not; inside a transaction the save is scheduled (the server cron
    // starts it, here within 100 ms), as Redis forks no child in EXEC.
    if cx.shared.persist.bgsave_in_progress.load(Ordering::Acquire) {
        return Err(CmdError::err("Background save already in progress"));
    }
    if cx.sess.in_exec {
        cx.shared.persist.bgsave_scheduled.store(true, Ordering::Release);
        out.simple(b"Background saving scheduled");
        return Ok(());
    }
    let dirty = dirty_now(cx);
    match snap.bgsave(dirty, !cx.keys.is_empty()) {
        Ok(()) => out.simple(b"Background saving started"),
        Err(e) => return Err(CmdError::err(e)),
    }
    Ok(())
}

fn lastsave(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.int(cx.shared.persist.last_save.load(Ordering::Relaxed));
    Ok(())
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`, as Redis 7.0: the
/// sequence itself (waiting for lagging replicas, the final save) is
/// [`crate::subsystems::shutdown`]'s. The client gets no reply when the server
/// exits, only the closed connection; it waits blocked while the
/// shutdown waits for replicas.
fn shutdown(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut flags = crate::subsystems::shutdown::Flags::default();
    let mut abort = false;
    while let Some(a) = args.next() {
        if eq_ic(a, "NOSAVE") {
            flags.nosave = true;
        } else if eq_ic(a, "SAVE") {
            flags.save = true;
        } else if eq_ic(a, "NOW") {
            flags.now = true;
        } else if eq_ic(a, "FORCE") {
            flags.force = true;
        } else if eq_ic(a, "ABORT") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (abort && flags != crate::subsystems::shutdown::Flags::default())
        || (flags.nosave && flags.save)
    {
        return Err(CmdError::Syntax);
    }
    if abort {
        if !crate::subsystems::shutdown::abort(cx.shared) {
            return Err(CmdError::err("No shutdown in progress."));
        }
        out.ok();
        return Ok(());
    }
    if !flags.now && cx.caller.denies_blocking() {
        return Err(CmdError::err(
            "SHUTDOWN without NOW or ABORT isn't allowed for DENY BLOCKING client",
        ));
    }
    // While a script is busy only NOSAVE may stop the server (a save
    // would wait for the stripes the script holds), as in Redis.
    if !flags.nosave && cx.shared.scripts.is_busy() {
        return Err(cx.shared.scripts.busy_error());
    }
    let dirty = dirty_now(cx);
    let argv = args.argv();
    let failed: crate::core::blocking::TimeoutReply =
        Box::new(|| format!("-ERR {}\r\n", crate::subsystems::shutdown::FAILED).into_bytes());
    let shared = cx.shared;
    match crate::subsystems::shutdown::request(shared, flags, dirty, || {
        crate::core::blocking::block_keyless(cx, argv, 0, failed)
    }) {
        crate::subsystems::shutdown::Outcome::Exit => cx.sess.handle.kill(),
        crate::subsystems::shutdown::Outcome::Waiting => {}
        crate::subsystems::shutdown::Outcome::Failed => {
            return Err(CmdError::err(crate::subsystems::shutdown::FAILED));
        }
    }
    Ok(())
}
