//! MIGRATE, as Redis 7.0's `migrateCommand`: DUMP the keys, send them to
//! another server as `RESTORE`s (after `AUTH` and `SELECT` when needed),
//! read its replies, delete the keys it acknowledged (unless COPY) and
//! propagate that as one `DEL`.
//!
//! The handler never sees a socket: the network side is the
//! [`Migrator`](crate::subsystems::migrate::Migrator) the server installs
//! in `Host::migrator` (a cached connection per `host:port`, blocking I/O
//! bounded by the timeout). The
//! handler holds the keys' stripes for the whole round trip, so nothing
//! changes a key between its DUMP and its deletion; Redis blocks the
//! whole server meanwhile, Sluice the keys' stripes and the connection's
//! thread.

use resp::ReplyBuf;

use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, KeyList, Lock};
use crate::subsystems::migrate::{Failure, Item, Transfer};

/// MIGRATE's keys for locking: [`crate::core::meta::migrate_key_positions`],
/// the positions the ACL check and COMMAND GETKEYS use too.
fn migrate_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    for pos in crate::core::meta::migrate_key_positions(argv) {
        keys.push((db, argv[pos]));
    }
}

pub const COMMANDS: &[Command] =
    &[Command::redis("MIGRATE", migrate).lock(Lock::Custom { find: migrate_keys })];

struct Options<'a> {
    copy: bool,
    replace: bool,
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    /// Index of the first key in argv, and how many.
    first: usize,
    count: usize,
    /// Arguments MONITOR shows as `(redacted)` (the credentials).
    redact: u64,
}

fn parse<'a>(argv: &[&'a [u8]]) -> Result<Options<'a>, CmdError> {
    let mut o = Options { copy: false, replace: false, auth: None, first: 3, count: 1, redact: 0 };
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let a = argv[j];
        if eq_ic(a, "COPY") {
            o.copy = true;
        } else if eq_ic(a, "REPLACE") {
            o.replace = true;
        } else if eq_ic(a, "AUTH") {
            if more == 0 {
                return Err(CmdError::Syntax);
            }
            j += 1;
            o.auth = Some((None, argv[j]));
            o.redact |= 1 << j.min(63);
        } else if eq_ic(a, "AUTH2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            o.auth = Some((Some(argv[j + 1]), argv[j + 2]));
            o.redact |= 3 << (j + 1).min(62);
            j += 2;
        } else if eq_ic(a, "KEYS") {
            if !argv[3].is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty \
                     string",
                ));
            }
            o.first = j + 1;
            o.count = argv.len() - j - 1;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

fn migrate(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let o = parse(argv)?;
    // As Redis's redactClientCommandArgument, for MONITOR.
    cx.sess.redact |= o.redact;
    // Redis reads the timeout first, then the database.
    let mut timeout = crate::core::ctx::parse_i64(argv[5])?;
    let db = crate::core::ctx::parse_i64(argv[4])?;
    if timeout <= 0 {
        timeout = 1000;
    }
    let snap = crate::subsystems::snapshot::installed(cx.shared)?;
    let net = cx
        .shared
        .host
        .migrator
        .as_ref()
        .cloned()
        .ok_or_else(|| CmdError::err("MIGRATE is not available in this process"))?;
    let cfg = cx.sess.conf(cx.shared).clone();
    let now = cx.now();
    let mut items = Vec::new();
    for &key in &argv[o.first..o.first + o.count] {
        let Some(e) = cx.lookup_read(key) else { continue };
        let (has_ttl, payload) = (e.has_ttl(), snap.dump(&e.value, &cfg));
        let mut ttl = 0;
        if has_ttl {
            ttl = cx.expire_of(key) - now;
            if ttl < 0 {
                continue;
            }
            ttl = ttl.max(1);
        }
        items.push(Item { key, ttl, payload });
    }
    if items.is_empty() {
        cx.no_propagate();
        out.simple(b"NOKEY");
        return Ok(());
    }
    let t = Transfer {
        host: argv[1],
        port: argv[2],
        timeout_ms: timeout as u64,
        auth: o.auth,
        db,
        items: &items,
        replace: o.replace,
        // A cluster node's keys go to a node importing their slot, which
        // serves them only under ASKING (Redis sends RESTORE-ASKING then).
        asking: cx.shared.cluster.get().is_some(),
    };
    let got = net.transfer(&t);
    match got.failure {
        Some(Failure::Connect) => {
            return Err(CmdError::Msg("IOERR error or timeout connecting to the client".into()))
        }
        Some(Failure::Write) => {
            return Err(CmdError::Msg("IOERR error or timeout writing to target instance".into()))
        }
        _ => {}
    }
    let failed = |l: &Option<Vec<u8>>| l.as_ref().is_some_and(|l| l.first() == Some(&b'-'));
    let early = if failed(&got.auth) {
        got.auth.as_ref()
    } else if failed(&got.select) {
        got.select.as_ref()
    } else {
        None
    };
    let mut target_error: Option<Vec<u8>> = None;
    let mut deleted: Vec<&[u8]> = Vec::new();
    for (item, line) in items.iter().zip(&got.restores) {
        if early.is_some() || line.first() == Some(&b'-') {
            if target_error.is_none() {
                let e = early.unwrap_or(line);
                let mut msg = b"ERR Target instance replied with error: ".to_vec();
                msg.extend_from_slice(&e[1..]);
                target_error = Some(msg);
            }
        } else if !o.copy {
            cx.delete(item.key);
            cx.changed(item.key, crate::core::effects::Class::GENERIC, "del", 1);
            deleted.push(item.key);
        }
    }
    if deleted.is_empty() {
        cx.no_propagate();
    } else {
        let mut del: Vec<&[u8]> = vec![b"DEL"];
        del.extend_from_slice(&deleted);
        cx.propagate_as(&del);
    }
    if let Some(e) = target_error {
        return Err(CmdError::Bytes(e));
    }
    if got.failure.is_some() || got.restores.len() < items.len() {
        return Err(CmdError::Msg("IOERR error or timeout reading to target instance".into()));
    }
    out.ok();
    Ok(())
}
