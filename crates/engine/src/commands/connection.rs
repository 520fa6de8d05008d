//! Connection commands: PING, ECHO, SELECT, HELLO, AUTH, RESET, QUIT.
//!
//! The client's protocol lives in the connection's `ReplyBuf` (`out.proto`),
//! which the server keeps for the connection's lifetime; `HELLO` and `RESET`
//! switch it and mirror it into the client handle for `CLIENT LIST`.

use std::sync::atomic::Ordering;

use resp::{Proto, ReplyBuf};

use crate::commands::client;
use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::multi;
use crate::core::session::ReplyMode;
use crate::core::spec::{Command, Flags};

/// The Redis version HELLO (and INFO) announce.
pub const REDIS_VERSION: &str = "7.0.15";

pub const COMMANDS: &[Command] = &[
    Command::redis("PING", ping).flags(Flags::PUBSUB_CONTEXT.union(Flags::DISK_ERROR_PROBE)),
    Command::redis("ECHO", echo),
    Command::redis("SELECT", select).flags(Flags::CHANGES_DB),
    Command::redis("HELLO", hello),
    Command::redis("AUTH", auth),
    Command::redis("RESET", reset).flags(Flags::NO_QUEUE.union(Flags::PUBSUB_CONTEXT)),
    // Redis 7.0 answers QUIT before anything else: before authentication,
    // queueing and CLIENT PAUSE, whatever its arguments.
    Command::redis("QUIT", quit)
        .flags(Flags::NO_QUEUE.union(Flags::NO_PAUSE).union(Flags::PUBSUB_CONTEXT)),
];

fn quit(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.ok();
    cx.sess.close_after_reply = true;
    Ok(())
}

fn ping(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if args.remaining() > 1 {
        return Err(CmdError::WrongArity("ping".into()));
    }
    if cx.sess.subs.total() > 0 && !out.is_resp3() {
        // In RESP2 pub/sub mode a reply must look like a message.
        out.array(2);
        out.bulk(b"pong");
        out.bulk(args.next().unwrap_or_default());
        return Ok(());
    }
    match args.next() {
        Some(msg) => out.bulk(msg),
        None => out.simple(b"PONG"),
    }
    Ok(())
}

fn echo(_cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.bulk(args.req()?);
    Ok(())
}

fn select(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // getIntFromObjectOrReply: an int first, then the index's range.
    let n = crate::core::ctx::parse_range(args.req()?, i32::MIN.into(), i32::MAX.into())?;
    if n != 0 && cx.shared.cluster.get().is_some() {
        return Err(CmdError::err("SELECT is not allowed in cluster mode"));
    }
    if n < 0 || n as usize >= cx.shared.store.databases() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    cx.sess.db = n as usize;
    cx.db = n as usize;
    cx.sess.handle.db.store(n as usize, std::sync::atomic::Ordering::Relaxed);
    out.ok();
    Ok(())
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Checks a username/password pair against the ACL users (Redis's
/// `ACLAuthenticateUser`): a disabled user never authenticates, a
/// `nopass` one with any password. A failure is logged (reason `auth`,
/// object the command's name as sent) and answered WRONGPASS.
fn authenticate(cx: &mut Ctx, cmd: &[u8], user: &[u8], pass: &[u8]) -> CmdResult {
    let ok = match cx.shared.acl.get(user) {
        Some(u) if u.enabled() => {
            u.nopass() || {
                let h = crate::subsystems::acl::sha256::hex(pass);
                // Compared in constant time, as Redis's time_independent_strcmp.
                u.passwords.iter().any(|p| {
                    p.len() == h.len()
                        && p.bytes().zip(h.bytes()).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
                })
            }
        }
        _ => false,
    }
    .then(|| cx.shared.acl.get(user))
    .flatten();
    match ok {
        Some(u) => {
            cx.sess.set_user(cx.shared, Some(u));
            Ok(())
        }
        None => {
            let context = if cx.sess.multi.is_some() {
                crate::subsystems::acl::log::Context::Multi
            } else {
                crate::subsystems::acl::log::Context::Toplevel
            };
            crate::subsystems::acl::gate::log(
                cx.shared,
                cx.sess,
                crate::subsystems::acl::Denied::Auth,
                context,
                cmd,
                user,
            );
            Err(CmdError::Msg(WRONGPASS.into()))
        }
    }
}

fn set_proto(cx: &mut Ctx, out: &mut ReplyBuf, ver: u32) {
    out.proto = if ver == 3 { Proto::Resp3 } else { Proto::Resp2 };
    cx.sess.handle.resp.store(ver, Ordering::Relaxed);
}

fn hello(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut ver = 0;
    if let Some(v) = args.next() {
        let v = resp::parse_i64(v)
            .ok_or_else(|| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::Msg("NOPROTO unsupported protocol version".into()));
        }
        ver = v as u32;
    }
    // Options take effect one by one, as in Redis: a later bad option leaves
    // an earlier AUTH or SETNAME applied.
    while let Some(opt) = args.next() {
        let more = args.remaining();
        if eq_ic(opt, "AUTH") && more >= 2 {
            // MONITOR shows the pair as `(redacted)`.
            let i = args.argv().len() - args.remaining();
            cx.sess.redact |= 3 << i.min(62);
            let (user, pass) = (args.req()?, args.req()?);
            authenticate(cx, args.argv()[0], user, pass)?;
        } else if eq_ic(opt, "SETNAME") && more >= 1 {
            client::set_name(cx, args.req()?)?;
        } else {
            let opt: Vec<u8> = opt.iter().copied().take_while(|&c| c != 0).collect();
            let mut e = b"ERR Syntax error in HELLO option '".to_vec();
            e.extend_from_slice(&opt);
            e.push(b'\'');
            return Err(CmdError::Bytes(e));
        }
    }
    if !cx.sess.authenticated && !cx.shared.acl.default_open() {
        return Err(CmdError::Msg(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
             the RESP protocol version at the same time"
                .into(),
        ));
    }
    if ver != 0 {
        set_proto(cx, out, ver);
    }
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if out.proto == Proto::Resp3 { 3 } else { 2 });
    out.bulk(b"id");
    out.int(cx.sess.handle.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn auth(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // MONITOR shows every argument as `(redacted)`.
    cx.sess.redact = !1;
    if args.remaining() > 2 {
        return Err(CmdError::Syntax);
    }
    if args.remaining() == 1 {
        if cx.shared.acl.default_user().nopass() {
            return Err(CmdError::err(
                "AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?",
            ));
        }
        let pass = args.req()?;
        authenticate(cx, args.argv()[0], b"default", pass)?;
    } else {
        let (user, pass) = (args.req()?, args.req()?);
        authenticate(cx, args.argv()[0], user, pass)?;
    }
    out.ok();
    Ok(())
}

/// Returns the connection to its state right after connecting (Redis's
/// `clearClientConnectionState`).
fn reset(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cx.sess.multi = None;
    cx.sess.handle.in_multi.store(false, Ordering::Relaxed);
    cx.sess.handle.multi_len.store(-1, Ordering::Relaxed);
    cx.sess.handle.multi_mem.store(0, Ordering::Relaxed);
    // RESET declares no keys, so it holds no stripes here.
    multi::unwatch_all(cx.shared, cx.sess);
    cx.sess.db = 0;
    cx.db = 0;
    cx.sess.handle.db.store(0, Ordering::Relaxed);
    set_proto(cx, out, 2);
    cx.sess.set_user(cx.shared, None);
    cx.shared.pubsub.leave(&mut cx.sess.subs, &cx.sess.handle);
    cx.sess.update_modal();
    cx.shared.tracker.disable(cx.sess);
    crate::subsystems::monitor::stop(cx.shared, cx.sess);
    *cx.sess.handle.name.lock() = None;
    cx.sess.handle.no_evict.store(false, Ordering::Relaxed);
    // Sluice's DURABLE mode is connection state too.
    cx.sess.durable = None;
    *cx.sess.handle.durable.lock() = None;
    cx.sess.reply_mode = ReplyMode::On;
    out.simple(b"RESET");
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;
    use crate::{Config, Shared};

    /// HELLO's map as redis-server 7.0.15 sends it, for client id `id`.
    fn hello_reply(resp3: bool, id: u64) -> String {
        let (head, proto) = if resp3 { ("%7", 3) } else { ("*14", 2) };
        format!(
            "{head}\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n\
             $5\r\nproto\r\n:{proto}\r\n$2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n\
             $4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
        )
    }

    fn with_password() -> Harness {
        let shared = Shared::new(
            Config { requirepass: Some(b"secret".to_vec()), ..Config::default() },
            crate::commands::table(),
        );
        let sess = shared.connect("127.0.0.1:2".into(), "127.0.0.1:6379".into(), -1);
        Harness { shared, sess }
    }

    #[test]
    fn hello_switches_protocol() {
        let mut h = Harness::new();
        let id = h.sess.handle.id;
        assert_eq!(h.run(&["HELLO"]), hello_reply(false, id));
        assert_eq!(h.run(&["HELLO", "3"]), hello_reply(true, id));
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "_\r\n");
        // Without a version the protocol stays as it is.
        assert_eq!(h.run(&["hello"]), hello_reply(true, id));
        assert_eq!(h.run(&["HELLO", "2"]), hello_reply(false, id));
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "$-1\r\n");
        assert_eq!(h.run(&["HELLO", "4"]), "-NOPROTO unsupported protocol version\r\n");
        assert_eq!(h.run(&["HELLO", "1"]), "-NOPROTO unsupported protocol version\r\n");
        assert_eq!(h.run(&["HELLO", "-1"]), "-NOPROTO unsupported protocol version\r\n");
        assert_eq!(
            h.run(&["HELLO", "abc"]),
            "-ERR Protocol version is not an integer or out of range\r\n"
        );
        assert_eq!(
            h.run(&["HELLO", "99999999999999999999"]),
            "-ERR Protocol version is not an integer or out of range\r\n"
        );
    }

    #[test]
    fn hello_options() {
        let mut h = Harness::new();
        let id = h.sess.handle.id;
        // Without requirepass the default user accepts any password.
        assert_eq!(h.run(&["HELLO", "3", "AUTH", "default", "x"]), hello_reply(true, id));
        assert_eq!(
            h.run(&["HELLO", "3", "AUTH", "default", "x", "SETNAME", "a", "SETNAME", "b"]),
            hello_reply(true, id)
        );
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "$1\r\nb\r\n");
        assert_eq!(h.run(&["HELLO", "3", "SETNAME", ""]), hello_reply(true, id));
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "_\r\n");
        assert_eq!(h.run(&["HELLO", "2"]), hello_reply(false, id));
        assert_eq!(h.run(&["HELLO", "3", "FOO"]), "-ERR Syntax error in HELLO option 'FOO'\r\n");
        assert_eq!(h.run(&["HELLO", "3", "AUTH"]), "-ERR Syntax error in HELLO option 'AUTH'\r\n");
        assert_eq!(
            h.run(&["HELLO", "3", "AUTH", "a"]),
            "-ERR Syntax error in HELLO option 'AUTH'\r\n"
        );
        assert_eq!(
            h.run(&["HELLO", "3", "SETNAME"]),
            "-ERR Syntax error in HELLO option 'SETNAME'\r\n"
        );
        assert_eq!(
            h.run(&["HELLO", "3", "SETNAME", "a b"]),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
        );
        assert_eq!(
            h.run(&["HELLO", "2", "AUTH", "a", "b", "SETNAME", "x"]),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        // Options apply in order: the name is set before the bad option.
        assert_eq!(
            h.run(&["HELLO", "3", "SETNAME", "x", "FOO"]),
            "-ERR Syntax error in HELLO option 'FOO'\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "$1\r\nx\r\n");
    }

    #[test]
    fn auth_without_password() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["AUTH", "x"]),
            "-ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?\r\n"
        );
        assert_eq!(h.run(&["AUTH", "default", "x"]), "+OK\r\n");
        assert_eq!(
            h.run(&["AUTH", "foo", "x"]),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        assert_eq!(h.run(&["AUTH", "a", "b", "c"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["AUTH"]), "-ERR wrong number of arguments for 'auth' command\r\n");
    }

    #[test]
    fn auth_with_password() {
        const WRONGPASS: &str =
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
        const NOAUTH_HELLO: &str = "-NOAUTH HELLO must be called with the client already \
            authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to \
            authenticate the client and select the RESP protocol version at the same time\r\n";
        let mut h = with_password();
        let id = h.sess.handle.id;
        assert_eq!(h.run(&["PING"]), "-NOAUTH Authentication required.\r\n");
        assert_eq!(
            h.run(&["HELLO", "3", "SETNAME", "a b"]),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
        );
        assert_eq!(h.run(&["HELLO", "3", "AUTH", "default", "bad", "SETNAME", "a b"]), WRONGPASS);
        assert_eq!(h.run(&["HELLO", "3"]), NOAUTH_HELLO);
        assert_eq!(h.run(&["HELLO"]), NOAUTH_HELLO);
        assert_eq!(h.run(&["HELLO", "5"]), "-NOPROTO unsupported protocol version\r\n");
        assert_eq!(h.run(&["AUTH", "bad"]), WRONGPASS);
        assert_eq!(h.run(&["AUTH", "default", "bad"]), WRONGPASS);
        assert_eq!(h.run(&["AUTH", "x", "y"]), WRONGPASS);
        assert_eq!(h.run(&["CLIENT", "ID"]), "-NOAUTH Authentication required.\r\n");
        assert_eq!(h.run(&["RESET"]), "+RESET\r\n");
        assert_eq!(h.run(&["AUTH", "secret"]), "+OK\r\n");
        assert_eq!(h.run(&["HELLO"]), hello_reply(false, id));
        assert_eq!(h.run(&["RESET"]), "+RESET\r\n");
        assert_eq!(h.run(&["PING"]), "-NOAUTH Authentication required.\r\n");
        assert_eq!(h.run(&["AUTH", "default", "secret"]), "+OK\r\n");
        assert_eq!(h.run(&["PING"]), "+PONG\r\n");
        // A failed AUTH does not log an authenticated client out.
        assert_eq!(h.run(&["AUTH", "bad"]), WRONGPASS);
        assert_eq!(h.run(&["PING"]), "+PONG\r\n");

        // HELLO AUTH authenticates even when a later option fails.
        let mut h = with_password();
        assert_eq!(
            h.run(&["HELLO", "3", "AUTH", "default", "secret", "FOO"]),
            "-ERR Syntax error in HELLO option 'FOO'\r\n"
        );
        assert_eq!(h.run(&["PING"]), "+PONG\r\n");
        let mut h = with_password();
        assert_eq!(
            h.run(&["HELLO", "3", "AUTH", "default", "bad", "AUTH", "default", "secret"]),
            WRONGPASS
        );
        assert_eq!(h.run(&["PING"]), "-NOAUTH Authentication required.\r\n");
        let id = h.sess.handle.id;
        assert_eq!(h.run(&["HELLO", "3", "AUTH", "default", "secret"]), hello_reply(true, id));
        assert_eq!(h.run(&["PING"]), "+PONG\r\n");
    }

    #[test]
    fn reset_clears_connection_state() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SET", "k", "v"]), "+OK\r\n");
        h.run(&["HELLO", "3", "SETNAME", "n"]);
        assert_eq!(h.run(&["SELECT", "3"]), "+OK\r\n");
        assert_eq!(h.run(&["CLIENT", "NO-EVICT", "on"]), "+OK\r\n");
        assert_eq!(h.run(&["WATCH", "k"]), "+OK\r\n");
        assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
        assert_eq!(h.run(&["GET", "k"]), "+QUEUED\r\n");
        assert_eq!(h.run(&["RESET"]), "+RESET\r\n");
        assert_eq!(h.run(&["CLIENT", "GETNAME"]), "$-1\r\n");
        assert_eq!(h.run(&["GET", "k"]), "$1\r\nv\r\n");
        assert_eq!(h.run(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
        assert!(h.sess.watched.is_empty());
        assert!(!h.sess.handle.no_evict.load(std::sync::atomic::Ordering::Relaxed));
        // Reply mode is back on: RESET's own reply is sent.
        assert_eq!(h.run(&["CLIENT", "REPLY", "OFF"]), "");
        assert_eq!(h.run(&["RESET"]), "+RESET\r\n");
        assert_eq!(h.run(&["PING"]), "+PONG\r\n");
    }
}
