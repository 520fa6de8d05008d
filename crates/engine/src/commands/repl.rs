//! Replication commands: SYNC, PSYNC, REPLCONF, WAIT, ROLE, REPLICAOF
//! (and SLAVEOF), and the `# Replication` section of INFO, for a master
//! and for a replica.
//!
//! The stream itself — the backlog fed from the effects record, full and
//! partial resynchronisation, the replica connections — is the server's
//! (`crates/server/src/replication/`), behind the
//! [`Replication`](crate::subsystems::repl::Replication) seam, as the RDB
//! codec is behind [`crate::subsystems::snapshot::Snapshots`]. The
//! commands here only parse, answer what they can, and hand over:
//! `SYNC`/`PSYNC` record the request in the session's [`Handshake`] and
//! end the connection's command loop; the connection layer then gives the
//! socket to the server's replication, which answers `+FULLRESYNC` or
//! `+CONTINUE`.
//!
//! `REPLICAOF host port` hands over to the server's
//! [`Follow`](crate::subsystems::repl::Follow) (the replica side); ROLE
//! and INFO show the replica's view while it follows a master.

use resp::ReplyBuf;

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::shared::Shared;
use crate::core::spec::{Command, Flags};
use crate::subsystems::log;
use crate::subsystems::repl::{
    follow_view, master_down, min_replicas, replication, view, FailoverRequest, Handshake,
    SyncRequest,
};

/// The session's handshake, created by its first REPLCONF.
fn handshake<'s>(cx: &'s mut Ctx) -> &'s mut Handshake {
    cx.sess.replica.get_or_insert_with(Default::default)
}

pub const COMMANDS: &[Command] = &[
    Command::redis("SYNC", sync),
    Command::redis("PSYNC", psync),
    Command::redis("REPLCONF", replconf),
    Command::redis("WAIT", wait),
    Command::sluice("WAITAOF", waitaof),
    Command::redis("ROLE", role),
    // A write sent on another connection before these ran before them on
    // Redis's one thread: it must not meet the replica they make.
    Command::redis("REPLICAOF", replicaof).flags(Flags::AFTER_INPUT),
    Command::redis("SLAVEOF", replicaof).flags(Flags::AFTER_INPUT),
    Command::redis("FAILOVER", failover).flags(Flags::AFTER_INPUT),
];

fn sync(cx: &mut Ctx, _args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    request_sync(cx, out, SyncRequest::Sync)
}

fn psync(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let replid = args.req()?.to_vec();
    let offset = args.req()?;
    // `PSYNC replid offset FAILOVER`: a master handing over to us (its
    // FAILOVER) asks us to take its place first, if we follow it.
    if cx.sess.replica.as_ref().is_some_and(|h| h.sync.is_some()) {
        return Ok(());
    }
    if args.next().is_some_and(|a| eq_ic(a, "FAILOVER")) {
        if replid != view(cx.shared).replid.as_bytes() {
            return Err(CmdError::err("PSYNC FAILOVER replid must match my replid."));
        }
        if let Some(f) = cx.shared.host.follow.as_ref() {
            f.settle();
            f.promote();
        }
        log::notice(&format!(
            "MASTER MODE enabled (failover request from '{}')",
            String::from_utf8_lossy(&crate::subsystems::client_list::info_line(cx.shared, cx.sess))
        ));
    }
    let Ok(offset) = parse_i64(offset) else {
        log::warning(&format!(
            "Replica {} asks for synchronization but with a wrong offset",
            replica_name(cx)
        ));
        return Err(CmdError::NotInteger);
    };
    request_sync(cx, out, SyncRequest::Psync { replid, offset })
}

/// How Redis names a replica in its log (`replicationGetSlaveName`): its
/// announced or peer address and its `REPLCONF listening-port`.
fn replica_name(cx: &Ctx) -> String {
    let hs = cx.sess.replica.as_deref();
    let ip = match hs.and_then(|h| h.ip.clone()) {
        Some(ip) => ip,
        None => {
            let addr = &cx.sess.handle.addr;
            addr.rsplit_once(':').map_or(addr.as_str(), |(ip, _)| ip).to_string()
        }
    };
    match hs.map_or(0, |h| h.listening_port) {
        0 => format!("{ip}:<unknown-replica-port>"),
        port => format!("{ip}:{port}"),
    }
}

fn failover(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let repl = replication(cx.shared);
    if argv.len() == 2 && eq_ic(argv[1], "ABORT") {
        if !repl.is_some_and(|r| r.abort_failover()) {
            return Err(CmdError::err("No failover in progress."));
        }
        out.ok();
        return Ok(());
    }
    let mut req = FailoverRequest::default();
    let mut j = 1;
    while j < argv.len() {
        if eq_ic(argv[j], "TIMEOUT") && j + 1 < argv.len() && req.timeout_ms == 0 {
            req.timeout_ms = parse_i64(argv[j + 1])?;
            if req.timeout_ms <= 0 {
                return Err(CmdError::err("FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if eq_ic(argv[j], "TO") && j + 2 < argv.len() && req.target.is_none() {
            let port = parse_i64(argv[j + 2])?;
            req.target = Some((String::from_utf8_lossy(argv[j + 1]).into_owned(), port));
            j += 3;
        } else if eq_ic(argv[j], "FORCE") && !req.force {
            req.force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(repl) = repl else {
        return Err(CmdError::err("FAILOVER requires connected replicas."));
    };
    repl.failover(req, follow_view(cx.shared).is_some()).map_err(CmdError::err)?;
    out.ok();
    Ok(())
}

/// Turns the connection into a replica once this reply (none) is out.
fn request_sync(cx: &mut Ctx, out: &mut ReplyBuf, req: SyncRequest) -> CmdResult {
    if cx.sess.replica.as_ref().is_some_and(|h| h.sync.is_some()) {
        return Ok(());
    }
    if replication(cx.shared).is_none() {
        return Err(CmdError::err("replication is not available in this process"));
    }
    if replication(cx.shared).is_some_and(|r| r.view().failover_state != "no-failover") {
        return Err(CmdError::Bytes(b"NOMASTERLINK Can't SYNC while failing over".to_vec()));
    }
    if master_down(cx.shared) {
        // A replica relays its master's stream: not without a link.
        return Err(CmdError::Bytes(
            b"NOMASTERLINK Can't SYNC while not connected with my master".to_vec(),
        ));
    }
    if !out.is_empty() {
        return Err(CmdError::err("SYNC and PSYNC are invalid with pending output"));
    }
    // A filtered payload only goes to the socket (Redis never writes one
    // to the snapshot file).
    let hs = handshake(cx);
    if hs.rdb_filter_only.is_some() && !hs.capa_eof {
        return Err(CmdError::err("Filtered replica requires EOF capability"));
    }
    handshake(cx).sync = Some(req);
    // The connection stops running commands; the server's replication
    // takes the socket over (see the module docs).
    cx.sess.close_after_reply = true;
    Ok(())
}

fn replconf(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    for pair in argv[1..].chunks(2) {
        let (opt, val) = (pair[0], pair[1]);
        if eq_ic(opt, "listening-port") {
            let port = parse_i64(val)?;
            handshake(cx).listening_port = port as u16;
        } else if eq_ic(opt, "ip-address") {
            if val.len() >= 46 {
                return Err(CmdError::Msg(
                    format!(
                        "ERR REPLCONF ip-address provided by replica instance is too long: {} \
                         bytes",
                        val.len()
                    )
                    .into(),
                ));
            }
            handshake(cx).ip = Some(String::from_utf8_lossy(val).into_owned());
        } else if eq_ic(opt, "capa") {
            if eq_ic(val, "eof") {
                handshake(cx).capa_eof = true;
            } else if eq_ic(val, "psync2") {
                handshake(cx).capa_psync2 = true;
            }
        } else if eq_ic(opt, "ack") || eq_ic(opt, "getack") {
            // From a client that is not a replica (a replica's ACKs are
            // read by the server's replication), and GETACK on a master:
            // Redis answers nothing at all.
            return Ok(());
        } else if eq_ic(opt, "rdb-filter-only") {
            // Include filters; by default the payload holds neither keys
            // nor functions. "functions" is the only filter there is.
            let mut functions = false;
            for f in val.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty()) {
                if eq_ic(f, "functions") {
                    functions = true;
                } else {
                    let mut e = b"ERR Unsupported rdb-filter-only option: ".to_vec();
                    e.extend_from_slice(f);
                    return Err(CmdError::Bytes(e));
                }
            }
            handshake(cx).rdb_filter_only = Some(functions);
        } else if eq_ic(opt, "rdb-only") {
            // Accepted (redis-cli --rdb sends it); the replica is sent the
            // snapshot and the stream as any other.
            parse_i64(val)?;
        } else {
            let mut e = b"ERR Unrecognized REPLCONF option: ".to_vec();
            e.extend_from_slice(opt);
            return Err(CmdError::Bytes(e));
        }
    }
    out.ok();
    Ok(())
}

fn wait(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let numreplicas = args.i64()?;
    let timeout = parse_timeout_ms(args.req()?)?;
    if cx.shared.store.is_replica() {
        return Err(CmdError::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 \
             if a replica is configured to be writable (which is not the default) writes to \
             replicas are just local and are not propagated.",
        ));
    }
    let Some(repl) = replication(cx.shared) else {
        out.int(0);
        return Ok(());
    };
    let offset = repl.offset();
    let acked = repl.acked(offset);
    // Redis checks the count as a long, then waits for it as an int:
    // 4611686018427387904 waits for 0 replicas (answered at once).
    let wanted = numreplicas as i32 as i64;
    let numreplicas = numreplicas.min(wanted);
    if acked as i64 >= numreplicas || !cx.may_block() {
        out.int(acked as i64);
        return Ok(());
    }
    let r = repl.clone();
    let argv = args.argv();
    let w = crate::core::blocking::block_keyless(
        cx,
        argv,
        timeout,
        Box::new(move || {
            let mut b = ReplyBuf::new();
            b.int(r.acked(offset) as i64);
            b.to_vec()
        }),
    );
    repl.wait(w, offset, numreplicas.max(0) as usize);
    Ok(())
}

/// WAITAOF (Redis 7.2's): blocks until this client's writes are fsynced
/// by the local AOF (`numlocal`, 0 or 1) and by `numreplicas` replicas'
/// AOFs (their `REPLCONF ACK … FACK`), or the timeout; answers both
/// counts. The local part compares the AOF's fsynced sequence number with
/// the client's last write's (exact, as Redis's `c->woff`); the replicas'
/// part the stream offset now, as WAIT does.
fn waitaof(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let numlocal = parse_i64(args.req()?)?;
    if !(0..=1).contains(&numlocal) {
        return Err(CmdError::err("value is out of range, value must between 0 and 1"));
    }
    let numreplicas = parse_i64(args.req()?)?;
    if numreplicas < 0 {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    let timeout = parse_timeout_ms(args.req()?)?;
    if cx.shared.store.is_replica() {
        return Err(CmdError::err(
            "WAITAOF cannot be used with replica instances. Please also note that writes to \
             replicas are just local and are not propagated.",
        ));
    }
    let aof = cx.shared.host.aof.clone();
    let fsynced = || aof.as_ref().and_then(|a| a.fsynced());
    if numlocal > 0 && fsynced().is_none() {
        return Err(CmdError::err(WAITAOF_NO_AOF));
    }
    let seq = cx.sess.fx.last_position();
    let local_now = fsynced().is_some_and(|f| f >= seq);
    let repl = replication(cx.shared);
    let offset = repl.as_ref().map_or(0, |r| r.offset());
    let replicas_now = repl.as_ref().map_or(0, |r| r.aof_acked(offset));
    let reply = |local: bool, replicas: usize| {
        let mut b = ReplyBuf::new();
        b.array(2);
        b.int(i64::from(local));
        b.int(replicas as i64);
        b.to_vec()
    };
    let done = i64::from(local_now) >= numlocal && replicas_now as i64 >= numreplicas;
    let Some(repl) = repl.filter(|_| !done && cx.may_block()) else {
        out.raw(&reply(local_now, replicas_now));
        return Ok(());
    };
    let r = repl.clone();
    let w = crate::core::blocking::block_keyless(
        cx,
        args.argv(),
        timeout,
        Box::new(move || {
            let local = aof.as_ref().and_then(|a| a.fsynced());
            if numlocal > 0 && local.is_none() {
                return format!("-ERR {WAITAOF_NO_AOF}\r\n").into_bytes();
            }
            reply(local.is_some_and(|f| f >= seq), r.aof_acked(offset))
        }),
    );
    let numreplicas = numreplicas.min(i64::from(i32::MAX)) as usize;
    repl.wait_aof(w, numlocal > 0, seq, offset, numreplicas);
    Ok(())
}

/// WAITAOF's refusal while the AOF is off (also a blocked WAITAOF's
/// reply when the AOF is turned off under it).
pub const WAITAOF_NO_AOF: &str =
    "WAITAOF cannot be used when numlocal is set but appendonly is disabled.";

/// WAIT's timeout: milliseconds, with Redis's texts.
fn parse_timeout_ms(a: &[u8]) -> Result<i64, CmdError> {
    let ms = parse_i64(a).map_err(|_| CmdError::TimeoutNotInteger)?;
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    Ok(ms)
}

fn role(cx: &mut Ctx, _args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if let Some(f) = follow_view(cx.shared) {
        out.array(5);
        out.bulk(b"slave");
        out.bulk(f.host.as_bytes());
        out.int(i64::from(f.port));
        out.bulk(f.state.as_bytes());
        out.int(if f.state == "connected" { f.applied_offset } else { -1 });
        return Ok(());
    }
    let view = view(cx.shared);
    out.array(3);
    out.bulk(b"master");
    out.int(view.offset);
    let online: Vec<_> = view.replicas.iter().filter(|r| r.state == "online").collect();
    out.array(online.len());
    for r in online {
        out.array(3);
        out.bulk(r.ip.as_bytes());
        out.bulk_int(i64::from(r.port));
        out.bulk_int(r.ack_offset);
    }
    Ok(())
}

fn replicaof(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if cx.shared.cluster.get().is_some() {
        return Err(CmdError::err("REPLICAOF not allowed in cluster mode."));
    }
    let (host, port) = (args.req()?, args.req()?);
    let follow = cx.shared.host.follow.as_ref().cloned();
    if eq_ic(host, "NO") && eq_ic(port, "ONE") {
        if let Some(f) = follow {
            if f.promote() {
                log::notice(&format!(
                    "MASTER MODE enabled (user request from '{}')",
                    String::from_utf8_lossy(&crate::subsystems::client_list::info_line(
                        cx.shared, cx.sess
                    ))
                ));
            }
        }
        out.ok();
        return Ok(());
    }
    if cx.sess.replica.as_ref().is_some_and(|h| h.sync.is_some()) {
        return Err(CmdError::err("Command is not valid when client is a replica."));
    }
    let port = match parse_i64(port) {
        Ok(p) if (0..=65535).contains(&p) => p as u16,
        _ => return Err(CmdError::err("Invalid master port")),
    };
    let Some(f) = follow else {
        return Err(CmdError::err("replication is not available in this process"));
    };
    let host = String::from_utf8_lossy(host).into_owned();
    if !f.follow(&host, port) {
        log::notice(
            "REPLICAOF would result into synchronization with the master we are already \
             connected with. No operation performed.",
        );
        out.simple(b"OK Already connected to specified master");
        return Ok(());
    }
    log::notice(&format!(
        "REPLICAOF {host}:{port} enabled (user request from '{}')",
        String::from_utf8_lossy(&crate::subsystems::client_list::info_line(cx.shared, cx.sess))
    ));
    out.ok();
    Ok(())
}

/// INFO's `# Replication` section, master side, in Redis 7.0's order.
pub fn info_section(sh: &Shared, t: &mut String) {
    use std::fmt::Write;
    let v = view(sh);
    let cfg = sh.config.read();
    let (backlog_size, min_to_write) = (cfg.repl_backlog_size, min_replicas(&cfg).0);
    drop(cfg);
    t.push_str("# Replication\r\n");
    match follow_view(sh) {
        None => t.push_str("role:master\r\n"),
        Some(f) => {
            let _ = write!(
                t,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\n\
                 master_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\n\
                 slave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
                f.host,
                f.port,
                if f.state == "connected" { "up" } else { "down" },
                f.last_io.unwrap_or(-1),
                u8::from(f.state == "sync"),
                f.read_offset,
                f.applied_offset,
            );
            let now = crate::core::shared::unix_ms() / 1000;
            if let Some((size, read, last)) = f.transfer {
                let perc = if size > 0 { read as f64 / size as f64 * 100.0 } else { 0.0 };
                let _ = write!(
                    t,
                    "master_sync_total_bytes:{size}\r\nmaster_sync_read_bytes:{read}\r\n\
                     master_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\n\
                     master_sync_last_io_seconds_ago:{last}\r\n",
                    size - read
                );
            }
            if f.state != "connected" {
                let down = if f.down_since > 0 { now - f.down_since } else { -1 };
                let _ = write!(t, "master_link_down_since_seconds:{down}\r\n");
            }
            let cfg = sh.config.read();
            let num = |n: &str| {
                cfg.get_by_name(n)
                    .and_then(|v| std::str::from_utf8(&v).ok().and_then(|s| s.parse::<i64>().ok()))
                    .unwrap_or(0)
            };
            let announced = cfg.get_by_name("replica-announced").is_none_or(|v| v == b"yes");
            let _ = write!(
                t,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
                num("replica-priority"),
                u8::from(cfg.replica_read_only),
                u8::from(announced),
            );
        }
    }
    let _ = write!(t, "connected_slaves:{}\r\n", v.replicas.len());
    if min_to_write > 0 {
        let _ = write!(t, "min_slaves_good_slaves:{}\r\n", v.good_replicas);
    }
    for (i, r) in v.replicas.iter().enumerate() {
        let _ = write!(
            t,
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            r.ip, r.port, r.state, r.ack_offset, r.lag
        );
    }
    let (first, histlen) = v.backlog.unwrap_or((0, 0));
    let _ = write!(
        t,
        "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\n\
         master_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\n\
         repl_backlog_size:{backlog_size}\r\nrepl_backlog_first_byte_offset:{first}\r\n\
         repl_backlog_histlen:{histlen}\r\n",
        v.failover_state,
        v.replid,
        v.replid2,
        v.offset,
        v.second_offset,
        u8::from(v.backlog.is_some()),
    );
}
