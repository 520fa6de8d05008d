//! CLIENT: the connection's own settings (name, reply mode, no-evict), the
//! client registry (`LIST`, `INFO`, `KILL`) and server-wide `PAUSE`.
//!
//! Other connections are seen only through their [`ClientHandle`] in
//! `Shared::clients`; killing one sets its flag and wakes it, and its own
//! loop closes it. Killing yourself closes after this reply.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use resp::ReplyBuf;

use crate::commands;
use crate::core::ctx::help_reply;
use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::dispatch;
use crate::core::error::{CmdError, CmdResult};
use crate::core::session::{ClientHandle, ReplyMode};
use crate::core::shared::Pause;
use crate::core::spec::{Command, Flags};
use crate::subsystems::client_list::{client_line, Me};

const SUBS: &[Command] = &[
    Command::redis("CACHING", caching),
    Command::redis("GETNAME", getname),
    Command::redis("GETREDIR", getredir),
    Command::redis("HELP", help),
    Command::redis("ID", id),
    Command::redis("INFO", info),
    Command::redis("KILL", kill),
    Command::redis("LIST", list).flags(Flags::AFTER_INPUT),
    Command::redis("NO-EVICT", no_evict),
    // What other clients sent before the pause runs, as on Redis.
    Command::redis("PAUSE", pause).flags(Flags::AFTER_INPUT),
    Command::redis("REPLY", reply),
    Command::redis("SETNAME", setname),
    Command::redis("TRACKING", tracking),
    Command::redis("TRACKINGINFO", trackinginfo),
    Command::redis("UNBLOCK", unblock),
    Command::redis("UNPAUSE", unpause),
];

pub const COMMANDS: &[Command] =
    &[Command::redis("CLIENT", container).flags(Flags::KEEPS_CACHING).subs(SUBS)];

/// Only reached if the dispatcher lets a bare container through.
fn container(_: &mut Ctx, args: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    Err(CmdError::UnknownSubcommand {
        sub: argv.get(1).map_or_else(Vec::new, |s| s.to_vec()),
        cmd: argv[0].to_ascii_uppercase(),
    })
}

/// `CLIENT HELP`, line for line as Redis 7.0 prints it.
const HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Prints this help.",
];

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    help_reply(HELP, out);
    Ok(())
}

/// Sets (or, with an empty name, clears) the connection's name. Redis
/// allows only printable ASCII without spaces.
pub(crate) fn set_name(cx: &mut Ctx, name: &[u8]) -> CmdResult {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    *cx.sess.handle.name.lock() = if name.is_empty() { None } else { Some(name.to_vec()) };
    Ok(())
}

fn setname(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    set_name(cx, args.req()?)?;
    out.ok();
    Ok(())
}

fn getname(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    match &*cx.sess.handle.name.lock() {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    Ok(())
}

fn id(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.int(cx.sess.handle.id as i64);
    Ok(())
}

fn reply(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mode = args.req()?;
    if eq_ic(mode, "ON") {
        // Replies even when this command itself was to be skipped, as Redis.
        cx.sess.reply_mode = ReplyMode::On;
        out.ok();
    } else if eq_ic(mode, "OFF") {
        cx.sess.reply_mode = ReplyMode::Off;
    } else if eq_ic(mode, "SKIP") {
        if cx.sess.reply_mode != ReplyMode::Off {
            cx.sess.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

fn no_evict(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let v = args.req()?;
    let on = if eq_ic(v, "ON") {
        true
    } else if eq_ic(v, "OFF") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    cx.sess.handle.no_evict.store(on, Ordering::Relaxed);
    out.ok();
    Ok(())
}

// ---- client types ---------------------------------------------------------

/// Redis's client classes (`CLIENT LIST TYPE`, `CLIENT KILL TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Pubsub,
    Master,
}

fn parse_type(name: &[u8]) -> Result<ClientType, CmdError> {
    Ok(if eq_ic(name, "NORMAL") {
        ClientType::Normal
    } else if eq_ic(name, "SLAVE") || eq_ic(name, "REPLICA") {
        ClientType::Replica
    } else if eq_ic(name, "PUBSUB") {
        ClientType::Pubsub
    } else if eq_ic(name, "MASTER") {
        ClientType::Master
    } else {
        let mut e = b"ERR Unknown client type '".to_vec();
        e.extend(name.iter().copied().take_while(|&c| c != 0));
        e.push(b'\'');
        return Err(CmdError::Bytes(e));
    })
}

/// The class of a client: a replica is one; pub/sub does not report
/// through the handle yet, so every other client is normal.
fn client_type(h: &ClientHandle) -> ClientType {
    if crate::subsystems::repl::is_replica(h) {
        ClientType::Replica
    } else {
        ClientType::Normal
    }
}

// ---- CLIENT LIST / INFO ---------------------------------------------------

fn me(cx: &Ctx, args: &Args, out: &ReplyBuf) -> Me {
    let argv = args.argv();
    let top = commands::find(argv[0]).unwrap_or(cx.spec);
    Me {
        id: cx.sess.handle.id,
        cmd: dispatch::full_name(top, cx.spec),
        argv_mem: argv.iter().map(|a| a.len()).sum(),
        obl: out.len().min(resp::CHUNK),
        qbuf: argv.iter().map(|a| 1 + digits(a.len()) + 2 + a.len() + 2).sum::<usize>()
            + 1
            + digits(argv.len())
            + 2,
        dirty_cas: cx.sess.watch_flag.load(Ordering::Relaxed),
    }
}

/// Decimal digits of `n`.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Live clients in connection order (ids ascend), without those already
/// killed and about to close.
fn snapshot(cx: &Ctx) -> Vec<Arc<ClientHandle>> {
    if crate::subsystems::evict::client_limit(&cx.shared.config.read()) != 0 {
        // Pushes queued for a client by other threads count in its
        // `tot-mem` at once, but its own thread closes it only at its next
        // turn: a client they took past `maxmemory-clients` is closed now,
        // as Redis closes it before its next command, rather than listed.
        crate::subsystems::evict::evict_clients(cx.shared);
    }
    cx.shared
        .clients
        .lock()
        .values()
        .filter(|h| !h.killed.load(Ordering::Acquire))
        .cloned()
        .collect()
}

fn list(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let rest = args.rest();
    let mut ty = None;
    let mut ids: Option<Vec<u64>> = None;
    if rest.len() == 2 && eq_ic(rest[0], "TYPE") {
        ty = Some(parse_type(rest[1])?);
    } else if rest.len() > 1 && eq_ic(rest[0], "ID") {
        let mut v = Vec::with_capacity(rest.len() - 1);
        for a in &rest[1..] {
            v.push(resp::parse_i64(a).ok_or_else(|| CmdError::err("Invalid client ID"))? as u64);
        }
        ids = Some(v);
    } else if !rest.is_empty() {
        return Err(CmdError::Syntax);
    }
    let me = me(cx, args, out);
    let now = cx.now();
    let clients = snapshot(cx);
    let mut buf = Vec::new();
    match ids {
        // Redis answers in the order asked, repeats included.
        Some(ids) => {
            for id in ids {
                if let Some(h) = clients.iter().find(|h| h.id == id) {
                    client_line(&mut buf, h, now, &me);
                }
            }
        }
        None => {
            for h in clients.iter().filter(|h| ty.is_none_or(|t| client_type(h) == t)) {
                client_line(&mut buf, h, now, &me);
            }
        }
    }
    out.verbatim(&buf);
    Ok(())
}

fn info(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let me = me(cx, args, out);
    let mut buf = Vec::new();
    client_line(&mut buf, &cx.sess.handle, cx.now(), &me);
    out.verbatim(&buf);
    Ok(())
}

// ---- CLIENT KILL ----------------------------------------------------------

fn kill(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let rest = args.rest();
    let mut addr: Option<&[u8]> = None;
    let mut laddr: Option<&[u8]> = None;
    let mut ty = None;
    let mut id = None;
    let mut skipme = true;
    let mut user: Option<&[u8]> = None;
    // `CLIENT KILL addr:port` is the old form; it may kill the caller.
    let old = rest.len() == 1;
    if old {
        addr = Some(rest[0]);
        skipme = false;
    } else {
        let mut i = 0;
        while i < rest.len() {
            let opt = rest[i];
            let Some(&val) = rest.get(i + 1) else {
                return Err(CmdError::Syntax);
            };
            if eq_ic(opt, "ID") {
                match resp::parse_i64(val) {
                    Some(n) if n >= 1 => id = Some(n as u64),
                    _ => return Err(CmdError::err("client-id should be greater than 0")),
                }
            } else if eq_ic(opt, "TYPE") {
                ty = Some(parse_type(val)?);
            } else if eq_ic(opt, "ADDR") {
                addr = Some(val);
            } else if eq_ic(opt, "LADDR") {
                laddr = Some(val);
            } else if eq_ic(opt, "USER") {
                user = Some(val);
                if cx.shared.acl.get(val).is_none() {
                    let mut e = b"ERR No such user '".to_vec();
                    e.extend(val.iter().copied().take_while(|&c| c != 0));
                    e.push(b'\'');
                    return Err(CmdError::Bytes(e));
                }
            } else if eq_ic(opt, "SKIPME") {
                if eq_ic(val, "YES") {
                    skipme = true;
                } else if eq_ic(val, "NO") {
                    skipme = false;
                } else {
                    return Err(CmdError::Syntax);
                }
            } else {
                return Err(CmdError::Syntax);
            }
            i += 2;
        }
    }
    let my_id = cx.sess.handle.id;
    let mut killed = 0i64;
    let mut close_me = false;
    for h in snapshot(cx) {
        if addr.is_some_and(|a| a != h.addr.as_bytes())
            || laddr.is_some_and(|a| a != h.laddr.as_bytes())
            || ty.is_some_and(|t| client_type(&h) != t)
            || id.is_some_and(|i| i != h.id)
            || user.is_some_and(|u| u != h.user.lock().as_slice())
            || (h.id == my_id && skipme)
        {
            continue;
        }
        if h.id == my_id {
            close_me = true;
        } else {
            h.kill();
        }
        killed += 1;
    }
    // The master client is the replica's link, not a registered
    // connection: its type and its address (the master's) reach it.
    if let Some(f) = &cx.shared.host.follow {
        let by = ty.is_none_or(|t| t == ClientType::Master)
            && laddr.is_none()
            && id.is_none()
            && user.is_none()
            && (ty.is_some() || addr.is_some());
        if by
            && f.link_addr().is_some_and(|a| addr.is_none_or(|x| x == a.as_bytes()))
            && f.kill_link()
        {
            killed += 1;
        }
    }
    if old {
        if killed == 0 {
            return Err(CmdError::err("No such client"));
        }
        out.ok();
    } else {
        out.int(killed);
    }
    if close_me {
        cx.sess.close_after_reply = true;
    }
    Ok(())
}

// ---- CLIENT PAUSE / UNPAUSE -----------------------------------------------

fn pause(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    if argv.len() > 4 {
        return Err(CmdError::SubcommandSyntax { sub: argv[1].to_vec(), cmd: argv[0].to_vec() });
    }
    let timeout = args.req()?;
    let writes_only = match args.next() {
        None => false,
        Some(m) if eq_ic(m, "WRITE") => true,
        Some(m) if eq_ic(m, "ALL") => false,
        Some(_) => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let t = resp::parse_i64(timeout).ok_or(CmdError::TimeoutNotInteger)?;
    if t < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    // Redis 7.0 adds without an overflow check: a huge timeout wraps to a
    // past time, i.e. no pause.
    let until_ms = if t > 0 { t.wrapping_add(cx.now()) } else { 0 };
    set_pause(cx, Pause { until_ms, writes_only, ..Pause::default() });
    out.ok();
    Ok(())
}

fn unpause(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    set_pause(cx, Pause::default());
    out.ok();
    Ok(())
}

fn set_pause(cx: &Ctx, p: Pause) {
    // A shutdown's or a failover's hold on writes is not CLIENT PAUSE's
    // to lift.
    cx.shared.change_pause(|cur| {
        *cur = Pause { shutdown: cur.shutdown, failover: cur.failover, ..p };
    });
}

// ---- tracking and blocking -------------------------------------------------

fn unblock(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    if argv.len() > 4 {
        return Err(CmdError::SubcommandSyntax { sub: argv[1].to_vec(), cmd: argv[0].to_vec() });
    }
    let id = args.req()?;
    let mut error = false;
    if let Some(reason) = args.next() {
        if eq_ic(reason, "ERROR") {
            error = true;
        } else if !eq_ic(reason, "TIMEOUT") {
            return Err(CmdError::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR"));
        }
    }
    let id = resp::parse_i64(id).ok_or(CmdError::NotInteger)?;
    let done =
        u64::try_from(id).is_ok_and(|id| crate::core::blocking::unblock(cx.shared, id, error));
    if done && error {
        // Redis counts CLIENT UNBLOCK … ERROR as failed: an error reply
        // (the unblocked client's) was produced while it ran.
        crate::core::dispatch::count_failed(cx.shared, cx.sess, cx.spec);
    }
    out.int(i64::from(done));
    Ok(())
}

fn getredir(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let st = cx.sess.handle.tracking.lock();
    out.int(if st.on { st.redirect as i64 } else { -1 });
    Ok(())
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p]… [OPTIN]
/// [OPTOUT] [NOLOOP]`: options are parsed first (a bad one is a syntax
/// error whatever the mode), then checked as Redis does.
fn tracking(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mode = args.req()?;
    let mut opts = crate::subsystems::tracking::Options::default();
    while let Some(o) = args.next() {
        let more = args.remaining() > 0;
        if eq_ic(o, "REDIRECT") && more {
            if opts.redirect.is_some() {
                return Err(CmdError::err("A client can only redirect to a single other client"));
            }
            let id = resp::parse_i64(args.req()?).ok_or(CmdError::NotInteger)?;
            let target = u64::try_from(id).ok().and_then(|id| {
                cx.shared
                    .clients
                    .lock()
                    .get(&id)
                    .filter(|h| !h.killed.load(Ordering::Acquire))
                    .map(Arc::downgrade)
            });
            match target {
                Some(w) => opts.redirect = Some((id as u64, w)),
                None => {
                    return Err(CmdError::err("The client ID you want redirect to does not exist"))
                }
            }
        } else if eq_ic(o, "BCAST") {
            opts.bcast = true;
        } else if eq_ic(o, "OPTIN") {
            opts.optin = true;
        } else if eq_ic(o, "OPTOUT") {
            opts.optout = true;
        } else if eq_ic(o, "NOLOOP") {
            opts.noloop = true;
        } else if eq_ic(o, "PREFIX") && more {
            opts.prefixes.push(args.req()?);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if eq_ic(mode, "ON") {
        cx.shared.enable_tracking(cx.sess, opts)?;
    } else if eq_ic(mode, "OFF") {
        cx.shared.tracker.disable(cx.sess);
    } else {
        return Err(CmdError::Syntax);
    }
    out.ok();
    Ok(())
}

fn trackinginfo(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let st = cx.sess.handle.tracking.lock();
    let caching = cx.sess.caching;
    let mut flags: Vec<&[u8]> = vec![if st.on { b"on" } else { b"off" }];
    if st.bcast {
        flags.push(b"bcast");
    }
    if st.optin {
        flags.push(b"optin");
        if caching {
            flags.push(b"caching-yes");
        }
    }
    if st.optout {
        flags.push(b"optout");
        if caching {
            flags.push(b"caching-no");
        }
    }
    if st.noloop {
        flags.push(b"noloop");
    }
    if st.broken_redirect {
        flags.push(b"broken_redirect");
    }
    out.map(3);
    out.bulk(b"flags");
    out.set(flags.len());
    for f in flags {
        out.bulk(f);
    }
    out.bulk(b"redirect");
    out.int(if st.on { st.redirect as i64 } else { -1 });
    out.bulk(b"prefixes");
    out.array(st.prefixes.len());
    for p in &st.prefixes {
        out.bulk(p);
    }
    Ok(())
}

fn caching(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (on, optin, optout) = {
        let st = cx.sess.handle.tracking.lock();
        (st.on, st.optin, st.optout)
    };
    if !on {
        return Err(CmdError::err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN \
             or OPTOUT mode enabled",
        ));
    }
    let opt = args.req()?;
    if eq_ic(opt, "YES") {
        if !optin {
            return Err(CmdError::err(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if eq_ic(opt, "NO") {
        if !optout {
            return Err(CmdError::err(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    cx.sess.caching = true;
    out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::tests::Harness;

    fn second(h: &Harness, addr: &str) -> Harness {
        Harness {
            shared: h.shared.clone(),
            sess: h.shared.connect(addr.into(), "127.0.0.1:6379".into(), 9),
        }
    }

    /// The `key=value` pairs of a CLIENT LIST/INFO bulk reply's lines.
    fn lines(reply: &str) -> Vec<Vec<(String, String)>> {
        let body = reply.split_once("\r\n").unwrap().1.strip_suffix("\r\n").unwrap();
        let body = body.strip_prefix("txt:").unwrap_or(body);
        body.lines()
            .map(|l| {
                l.split(' ')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap();
                        (k.to_string(), v.to_string())
                    })
                    .collect()
            })
            .collect()
    }

    fn field<'a>(line: &'a [(String, String)], k: &str) -> &'a str {
        &line.iter().find(|(key, _)| key == k).unwrap().1
    }

    #[test]
    fn list_line_has_redis_fields_in_order() {
        let mut h = Harness::new();
        let reply = h.run(&["CLIENT", "LIST"]);
        let l = lines(&reply);
        assert_eq!(l.len(), 1);
        let keys: Vec<&str> = l[0].iter().map(|(k, _)| k.as_str()).collect();
        // redis-server 7.0.15's CLIENT LIST line.
        assert_eq!(
            keys.join(" "),
            "id addr laddr fd name age idle flags db sub psub ssub multi qbuf qbuf-free \
             argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp"
        );
        let id = h.sess.handle.id.to_string();
        assert_eq!(field(&l[0], "id"), id);
        assert_eq!(field(&l[0], "addr"), "127.0.0.1:1");
        assert_eq!(field(&l[0], "laddr"), "127.0.0.1:6379");
        assert_eq!(field(&l[0], "flags"), "N");
        assert_eq!(field(&l[0], "multi"), "-1");
        assert_eq!(field(&l[0], "argv-mem"), "10");
        assert_eq!(field(&l[0], "cmd"), "client|list");
        assert_eq!(field(&l[0], "user"), "default");
        assert_eq!(field(&l[0], "redir"), "-1");
        assert_eq!(field(&l[0], "resp"), "2");
        assert!(reply.ends_with("resp=2\n\r\n"));

        h.run(&["HELLO", "3", "SETNAME", "ab"]);
        h.run(&["CLIENT", "NO-EVICT", "on"]);
        h.run(&["SELECT", "2"]);
        let reply = h.run(&["CLIENT", "INFO"]);
        assert!(reply.starts_with('='), "{reply}");
        let l = lines(&reply);
        assert_eq!(field(&l[0], "name"), "ab");
        assert_eq!(field(&l[0], "flags"), "e");
        assert_eq!(field(&l[0], "db"), "2");
        assert_eq!(field(&l[0], "resp"), "3");
        assert_eq!(field(&l[0], "cmd"), "client|info");
    }

    #[test]
    fn list_filters() {
        let mut h = Harness::new();
        let mut b = second(&h, "127.0.0.1:2");
        b.run(&["MULTI"]);
        b.run(&["SET", "a", "b"]);
        let (ida, idb) = (h.sess.handle.id, b.sess.handle.id);
        let all = lines(&h.run(&["CLIENT", "LIST"]));
        assert_eq!(all.len(), 2);
        assert_eq!(field(&all[1], "flags"), "x");
        assert_eq!(field(&all[1], "multi"), "1");
        assert_eq!(field(&all[1], "cmd"), "NULL");
        assert_eq!(lines(&h.run(&["CLIENT", "LIST", "TYPE", "NORMAL"])).len(), 2);
        for ty in ["pubsub", "replica", "slave", "MASTER"] {
            assert_eq!(h.run(&["CLIENT", "LIST", "TYPE", ty]), "$0\r\n\r\n");
        }
        let l = lines(&h.run(&["CLIENT", "LIST", "ID", &idb.to_string(), "999", &ida.to_string()]));
        assert_eq!(field(&l[0], "id"), idb.to_string());
        assert_eq!(field(&l[1], "id"), ida.to_string());
        assert_eq!(h.run(&["CLIENT", "LIST", "ID", "99999", "-1"]), "$0\r\n\r\n");
        // Errors as redis-server 7.0.15 words them.
        assert_eq!(h.run(&["CLIENT", "LIST", "TYPE", "foo"]), "-ERR Unknown client type 'foo'\r\n");
        assert_eq!(h.run(&["CLIENT", "LIST", "TYPE", "normal", "x"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["CLIENT", "LIST", "TYPE"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["CLIENT", "LIST", "ID"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["CLIENT", "LIST", "FOO"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["CLIENT", "LIST", "ID", "abc"]), "-ERR Invalid client ID\r\n");
        assert_eq!(h.run(&["client", "list", "id", "1", "2", "x"]), "-ERR Invalid client ID\r\n");
    }

    #[test]
    fn kill() {
        let mut h = Harness::new();
        let b = second(&h, "127.0.0.1:2");
        let c = second(&h, "127.0.0.1:3");
        assert_eq!(
            h.run(&["CLIENT", "KILL"]),
            "-ERR wrong number of arguments for 'client|kill' command\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "KILL", "1.2.3.4:5"]), "-ERR No such client\r\n");
        // Three arguments are the old form: `ID` is taken as an address.
        assert_eq!(h.run(&["CLIENT", "KILL", "ID"]), "-ERR No such client\r\n");
        assert_eq!(
            h.run(&["CLIENT", "KILL", "ID", "0"]),
            "-ERR client-id should be greater than 0\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "KILL", "ID", "abc"]),
            "-ERR client-id should be greater than 0\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "KILL", "ID", "9999"]), ":0\r\n");
        assert_eq!(
            h.run(&["CLIENT", "KILL", "ID", "1", "TYPE", "foo"]),
            "-ERR Unknown client type 'foo'\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "KILL", "USER", "bob"]), "-ERR No such user 'bob'\r\n");
        assert_eq!(h.run(&["CLIENT", "KILL", "SKIPME", "maybe"]), "-ERR syntax error\r\n");
        // MAXAGE arrived after 7.0.
        assert_eq!(h.run(&["CLIENT", "KILL", "MAXAGE", "10"]), "-ERR syntax error\r\n");
        assert_eq!(
            h.run(&["CLIENT", "KILL", "ADDR", "x", "LADDR", "y", "FOO", "bar"]),
            "-ERR syntax error\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "KILL", "ADDR", "x", "SKIPME"]), "-ERR syntax error\r\n");

        assert_eq!(h.run(&["CLIENT", "KILL", "127.0.0.1:2"]), "+OK\r\n");
        assert!(b.sess.handle.killed.load(Ordering::Relaxed));
        assert_eq!(lines(&h.run(&["CLIENT", "LIST"])).len(), 2);
        // Already killed clients are not matched again.
        assert_eq!(h.run(&["CLIENT", "KILL", "127.0.0.1:2"]), "-ERR No such client\r\n");
        assert_eq!(h.run(&["CLIENT", "KILL", "USER", "default"]), ":1\r\n");
        assert!(c.sess.handle.killed.load(Ordering::Relaxed));
        assert!(!h.sess.close_after_reply);
        // SKIPME no kills the caller after its reply.
        assert_eq!(h.run(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"]), ":1\r\n");
        assert!(h.sess.close_after_reply);
        assert!(!h.sess.handle.killed.load(Ordering::Relaxed));

        let mut h = Harness::new();
        let id = h.sess.handle.id.to_string();
        assert_eq!(h.run(&["CLIENT", "KILL", "LADDR", "127.0.0.1:6379", "ID", &id]), ":0\r\n");
        assert_eq!(h.run(&["CLIENT", "KILL", "127.0.0.1:1"]), "+OK\r\n");
        assert!(h.sess.close_after_reply);
    }

    #[test]
    fn names_and_ids() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["CLIENT", "ID"]), format!(":{}\r\n", h.sess.handle.id));
        assert_eq!(
            h.run(&["CLIENT", "ID", "x"]),
            "-ERR wrong number of arguments for 'client|id' command\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "$-1\r\n");
        assert_eq!(h.run(&["CLIENT", "SETNAME", "a:b~!"]), "+OK\r\n");
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "$5\r\na:b~!\r\n");
        for bad in ["a b", "a\nb", "é"] {
            assert_eq!(
                h.run(&["CLIENT", "SETNAME", bad]),
                "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
            );
        }
        assert_eq!(h.run(&["CLIENT", "SETNAME", ""]), "+OK\r\n");
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "$-1\r\n");
    }

    #[test]
    fn container_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["CLIENT"]), "-ERR wrong number of arguments for 'client' command\r\n");
        assert_eq!(
            h.run(&["CLIENT", "FOO"]),
            "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"
        );
        assert_eq!(
            h.run(&["client", "foo"]),
            "-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "HELP", "x"]),
            "-ERR wrong number of arguments for 'client|help' command\r\n"
        );
        let help = h.run(&["CLIENT", "HELP"]);
        assert!(help.starts_with(
            "*48\r\n+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n\
             +CACHING (YES|NO)\r\n\
             +    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.\r\n"
        ));
        assert!(help.ends_with("+HELP\r\n+    Prints this help.\r\n"));
    }

    #[test]
    fn reply_modes() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["CLIENT", "REPLY", "maybe"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["CLIENT", "REPLY", "ON"]), "+OK\r\n");
        assert_eq!(h.run(&["CLIENT", "REPLY", "SKIP"]), "");
        assert_eq!(h.run(&["PING"]), "");
        assert_eq!(h.run(&["PING", "a"]), "$1\r\na\r\n");
        assert_eq!(h.run(&["CLIENT", "REPLY", "OFF"]), "");
        assert_eq!(h.run(&["PING"]), "");
        assert_eq!(h.run(&["NOPE"]), "");
        assert_eq!(h.run(&["CLIENT", "REPLY", "SKIP"]), "");
        assert_eq!(h.run(&["CLIENT", "REPLY", "ON"]), "+OK\r\n");
        assert_eq!(h.run(&["PING", "b"]), "$1\r\nb\r\n");
        assert_eq!(h.run(&["CLIENT", "REPLY", "SKIP"]), "");
        assert_eq!(h.run(&["CLIENT", "REPLY", "SKIP"]), "");
        assert_eq!(h.run(&["PING", "c"]), "");
        assert_eq!(h.run(&["PING", "d"]), "$1\r\nd\r\n");
        // Skipping MULTI's reply leaves the queued replies alone.
        assert_eq!(h.run(&["CLIENT", "REPLY", "SKIP"]), "");
        assert_eq!(h.run(&["MULTI"]), "");
        assert_eq!(h.run(&["SET", "a", "b"]), "+QUEUED\r\n");
        assert_eq!(h.run(&["EXEC"]), "*1\r\n+OK\r\n");
        // ON answers even in place of a skipped reply.
        assert_eq!(h.run(&["CLIENT", "REPLY", "SKIP"]), "");
        assert_eq!(h.run(&["CLIENT", "REPLY", "ON"]), "+OK\r\n");
    }

    #[test]
    fn no_evict_pause_and_stubs() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["CLIENT", "NO-EVICT", "maybe"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["CLIENT", "NO-EVICT", "on"]), "+OK\r\n");
        assert!(h.sess.handle.no_evict.load(Ordering::Relaxed));
        assert_eq!(h.run(&["CLIENT", "NO-EVICT", "OFF"]), "+OK\r\n");
        assert!(!h.sess.handle.no_evict.load(Ordering::Relaxed));

        assert_eq!(
            h.run(&["CLIENT", "PAUSE"]),
            "-ERR wrong number of arguments for 'client|pause' command\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "PAUSE", "abc"]),
            "-ERR timeout is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "PAUSE", "-1"]), "-ERR timeout is negative\r\n");
        assert_eq!(
            h.run(&["CLIENT", "PAUSE", "10", "foo"]),
            "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "PAUSE", "abc", "foo"]),
            "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "PAUSE", "10", "WRITE", "x"]),
            "-ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.\r\n"
        );
        let before = crate::core::shared::unix_ms();
        assert_eq!(h.run(&["CLIENT", "PAUSE", "5000", "write"]), "+OK\r\n");
        let p = *h.shared.pause.lock();
        assert!(p.writes_only && p.until_ms >= before + 5000 && p.until_ms < before + 6000);
        assert_eq!(h.run(&["CLIENT", "PAUSE", "100"]), "+OK\r\n");
        assert!(!h.shared.pause.lock().writes_only);
        // The pausing client is held like the others (nothing runs) until
        // the pause ends.
        assert_eq!(h.run(&["PING"]), "");
        h.shared.clock.advance(200);
        assert_eq!(h.run(&["PING"]), "+PONG\r\n");
        assert_eq!(
            h.run(&["CLIENT", "UNPAUSE", "x"]),
            "-ERR wrong number of arguments for 'client|unpause' command\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
        assert_eq!(h.shared.pause.lock().until_ms, 0);
        assert_eq!(h.run(&["CLIENT", "PAUSE", "9223372036854775807"]), "+OK\r\n");
        assert!(h.shared.pause.lock().until_ms < 0);
        assert_eq!(h.run(&["CLIENT", "PAUSE", "0"]), "+OK\r\n");
        assert_eq!(h.shared.pause.lock().until_ms, 0);

        assert_eq!(
            h.run(&["CLIENT", "UNBLOCK", "1", "foo"]),
            "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "UNBLOCK", "x", "foo"]),
            "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "UNBLOCK", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "UNBLOCK", "1"]), ":0\r\n");
        assert_eq!(h.run(&["CLIENT", "GETREDIR"]), ":-1\r\n");
        assert_eq!(
            h.run(&["CLIENT", "TRACKINGINFO"]),
            "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"
        );
        h.run(&["HELLO", "3"]);
        assert_eq!(
            h.run(&["CLIENT", "TRACKINGINFO"]),
            "%3\r\n$5\r\nflags\r\n~1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"
        );
        assert_eq!(
            h.run(&["CLIENT", "CACHING", "yes"]),
            "-ERR CLIENT CACHING can be called only when the client is in tracking mode with \
             OPTIN or OPTOUT mode enabled\r\n"
        );
    }
}
