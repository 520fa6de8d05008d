//! The ACL command: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT,
//! GENPASS, LOG, DRYRUN, LOAD, SAVE, HELP (the rules themselves and the
//! check live in [`crate::subsystems::acl`]).

use std::sync::atomic::Ordering;

use resp::ReplyBuf;

use crate::commands::server::reply_help;
use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::dispatch;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;
use crate::subsystems::acl::{self, ids, User};

pub const COMMANDS: &[Command] =
    &[Command::redis("ACL", crate::commands::server::container).subs(&[
        Command::redis("CAT", cat),
        Command::redis("DELUSER", deluser),
        Command::redis("DRYRUN", dryrun),
        Command::redis("GENPASS", genpass),
        Command::redis("GETUSER", getuser),
        Command::redis("HELP", help),
        Command::redis("LIST", list),
        Command::redis("LOAD", load),
        Command::redis("LOG", log),
        Command::redis("SAVE", save),
        Command::redis("SETUSER", setuser),
        Command::redis("USERS", users),
        Command::redis("WHOAMI", whoami),
    ])];

/// `acl-pubsub-default allchannels`: new users and selectors start with
/// every channel.
fn pubsub_all(cx: &mut Ctx) -> bool {
    cx.sess.conf(cx.shared).acl_pubsub_default == "allchannels"
}

fn setuser(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // MONITOR shows the user's name and rules as `(redacted)`.
    cx.sess.redact = !3;
    let name = args.req()?;
    if acl::has_spaces(name) {
        return Err(CmdError::err("Usernames can't contain spaces or null characters"));
    }
    let rest = args.rest();
    let ops = acl::merge_selectors(rest).map_err(|i| {
        let mut e = b"ERR Unmatched parenthesis in acl selector starting at '".to_vec();
        e.extend(rest[i].iter().copied().take_while(|&c| c != 0));
        e.extend_from_slice(b"'.");
        CmdError::Bytes(e)
    })?;
    let all = pubsub_all(cx);
    let old = cx.shared.acl.get(name);
    let mut u = match &old {
        Some(u) => (**u).clone(),
        None => User::new(name, all),
    };
    for op in &ops {
        if let Err(e) = u.apply(op, all) {
            let mut m = b"ERR Error in ACL SETUSER modifier '".to_vec();
            m.extend(op.iter().copied().take_while(|&c| c != 0));
            m.extend_from_slice(b"': ");
            m.extend_from_slice(e.text().as_bytes());
            return Err(CmdError::Bytes(m));
        }
    }
    // Subscribed clients of the user whose subscriptions the new channel
    // rules refuse go, when the rules were narrowed (Redis's
    // ACLKillPubsubClientsIfNeeded); the caller itself after its reply.
    if let Some(old) = &old {
        if let Some(upcoming) = acl::narrowed_channels(&u, old) {
            let gone = cx
                .shared
                .pubsub
                .violators(name, |ch, pattern| acl::subscription_allowed(&upcoming, ch, pattern));
            let me = cx.sess.handle.id;
            for h in gone {
                if h.id == me {
                    cx.sess.close_after_reply = true;
                } else {
                    h.kill();
                }
            }
        }
    }
    cx.shared.acl.put(u);
    cx.shared.state_changed();
    out.ok();
    Ok(())
}

/// Disconnects the clients authenticated as one of `names` (a deleted
/// user, or every user ACL LOAD replaced); the caller itself closes after
/// its reply, as the default user, unauthenticated.
fn kill_clients_of(cx: &mut Ctx, gone: impl Fn(&[u8]) -> bool) {
    let me = cx.sess.handle.id;
    let mut close_me = false;
    for h in cx.shared.clients.lock().values() {
        if gone(h.user.lock().as_slice()) {
            if h.id == me {
                close_me = true;
            } else {
                h.kill();
            }
        }
    }
    if close_me {
        cx.sess.close_after_reply = true;
        cx.sess.set_user(cx.shared, None);
        cx.sess.authenticated = false;
    }
}

fn deluser(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let names = args.rest();
    if names.iter().any(|n| *n == b"default") {
        return Err(CmdError::err("The 'default' user cannot be removed"));
    }
    let mut deleted = 0;
    for n in names {
        if cx.shared.acl.remove(n) {
            deleted += 1;
            kill_clients_of(cx, |u| u == *n);
        }
    }
    if deleted > 0 {
        cx.shared.state_changed();
    }
    out.int(deleted);
    Ok(())
}

fn getuser(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let Some(u) = cx.shared.acl.get(args.req()?) else {
        out.null();
        return Ok(());
    };
    out.map(6);
    out.bulk(b"flags");
    let flags = u.flag_names();
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(u.passwords.len());
    for p in &u.passwords {
        out.bulk(p.as_bytes());
    }
    selector_fields(&u.selectors[0], out);
    out.bulk(b"selectors");
    out.array(u.selectors.len() - 1);
    for s in &u.selectors[1..] {
        out.map(3);
        selector_fields(s, out);
    }
    Ok(())
}

fn selector_fields(s: &acl::Selector, out: &mut ReplyBuf) {
    out.bulk(b"commands");
    out.bulk(s.describe_commands().as_bytes());
    out.bulk(b"keys");
    out.bulk(s.describe_keys().as_bytes());
    out.bulk(b"channels");
    out.bulk(s.describe_channels().as_bytes());
}

fn list(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let users = cx.shared.acl.users();
    out.array(users.len());
    for u in users {
        let mut line = b"user ".to_vec();
        line.extend_from_slice(&u.name);
        line.push(b' ');
        line.extend_from_slice(u.describe().as_bytes());
        out.bulk(&line);
    }
    Ok(())
}

fn users(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let users = cx.shared.acl.users();
    out.array(users.len());
    for u in users {
        out.bulk(&u.name);
    }
    Ok(())
}

fn whoami(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.bulk(&cx.sess.user.name);
    Ok(())
}

fn cat(_cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    args.at_most(1)?;
    match args.next() {
        None => {
            out.array(crate::core::meta::CATEGORIES.len());
            for c in crate::core::meta::CATEGORIES {
                out.bulk(c.as_bytes());
            }
        }
        Some(name) => {
            let Some(flag) = acl::category(name) else {
                let mut e = b"ERR Unknown category '".to_vec();
                e.extend(name.iter().copied().take_while(|&c| c != 0).take(128));
                e.push(b'\'');
                return Err(CmdError::Bytes(e));
            };
            if !args.is_empty() {
                return Err(CmdError::WrongArity("acl|cat".into()));
            }
            let ids = ids();
            let mut names = Vec::new();
            for &t in &ids.tops {
                let c = &ids.list[t as usize];
                if c.meta.acl & flag != 0 {
                    names.push(c.name);
                }
                for &s in &c.subs {
                    if ids.list[s as usize].meta.acl & flag != 0 {
                        names.push(ids.list[s as usize].name);
                    }
                }
            }
            out.array(names.len());
            for n in names {
                out.bulk(n.as_bytes());
            }
        }
    }
    Ok(())
}

fn genpass(_cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    args.at_most(1)?;
    let bits = match args.next() {
        None => 256,
        Some(a) => resp::parse_i64(a).ok_or(CmdError::NotInteger)?,
    };
    if !args.is_empty() {
        return Err(CmdError::WrongArity("acl|genpass".into()));
    }
    if bits <= 0 || bits > 4096 {
        return Err(CmdError::err(
            "ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to 4096",
        ));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    random_bytes(&mut raw);
    let hex: Vec<u8> = raw
        .iter()
        .flat_map(|b| {
            [b"0123456789abcdef"[(b >> 4) as usize], b"0123456789abcdef"[(b & 15) as usize]]
        })
        .take(chars)
        .collect();
    out.bulk(&hex);
    Ok(())
}

/// Bytes from the kernel's random source (Redis's `getRandomBytes`).
fn random_bytes(buf: &mut [u8]) {
    use std::io::Read;
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf)).is_err() {
        // No /dev/urandom: a time-seeded xorshift, as a last resort.
        let mut x = crate::core::shared::unix_us() as u64 | 1;
        for b in buf {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
}

fn log(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    args.at_most(1)?;
    let mut count = 10i64;
    if let Some(a) = args.next() {
        if eq_ic(a, "RESET") {
            cx.shared.acl.log.lock().reset();
            out.ok();
            return Ok(());
        }
        count = resp::parse_i64(a).ok_or(CmdError::NotInteger)?.max(0);
    }
    let now = crate::core::shared::unix_ms();
    cx.shared.acl.log.lock().reply(count as usize, now, out);
    Ok(())
}

fn dryrun(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let name = args.req()?;
    let Some(u) = cx.shared.acl.get(name) else {
        let mut e = b"ERR User '".to_vec();
        e.extend(name.iter().copied().take_while(|&c| c != 0));
        e.extend_from_slice(b"' not found");
        return Err(CmdError::Bytes(e));
    };
    let argv = args.rest();
    let spec = match dispatch::lookup_full(cx.shared, argv) {
        Ok((_, spec)) => spec,
        Err(CmdError::WrongArity(n)) => return Err(CmdError::WrongArity(n)),
        Err(_) => {
            let mut e = b"ERR Command '".to_vec();
            e.extend(argv[0].iter().copied().take_while(|&c| c != 0));
            e.extend_from_slice(b"' not found");
            return Err(CmdError::Bytes(e));
        }
    };
    let id = crate::core::cmdstats::index_of(spec);
    match u.check(&acl::Check::new(spec, id, argv)) {
        Ok(()) => out.ok(),
        Err((d, pos)) => {
            let text = match d {
                acl::Denied::Cmd => format!(
                    "This user has no permissions to run the '{}' command",
                    ids().list[id].name
                ),
                acl::Denied::Key => format!(
                    "This user has no permissions to access the '{}' key",
                    String::from_utf8_lossy(argv[pos])
                ),
                _ => format!(
                    "This user has no permissions to access the '{}' channel",
                    String::from_utf8_lossy(argv[pos])
                ),
            };
            out.bulk(text.as_bytes());
        }
    }
    Ok(())
}

const NO_FILE: &str = "This Redis instance is not configured to use an ACL file. You may want to \
                       specify users via the ACL SETUSER command and then issue a CONFIG REWRITE \
                       (assuming you have a Redis configuration file set) in order to store users \
                       in the Redis configuration.";

fn load(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (file, path) = {
        let c = cx.sess.conf(cx.shared);
        (c.aclfile.clone(), c.path(&c.aclfile))
    };
    if file.is_empty() {
        return Err(CmdError::err(NO_FILE));
    }
    let all = pubsub_all(cx);
    let users = load_file(&path, &file, all).map_err(CmdError::err)?;
    cx.shared.acl.replace_all(users);
    // Every client of a user other than `default` goes (Redis frees the
    // old users and their clients; the default user is updated in place).
    kill_clients_of(cx, |u| u != b"default");
    cx.shared.state_changed();
    out.ok();
    Ok(())
}

/// Reads and parses an ACL file (ACL LOAD, start-up): `path` is `file`
/// in the server's `dir`; messages name `file`, as Redis's do.
pub fn load_file(
    path: &std::path::Path,
    file: &str,
    pubsub_all: bool,
) -> Result<std::collections::BTreeMap<Vec<u8>, User>, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{file}': {}",
            crate::subsystems::config::os_error_text(&e)
        )
    })?;
    acl::parse_file(&text, file, pubsub_all)
}

fn save(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (file, path) = {
        let c = cx.sess.conf(cx.shared);
        (c.aclfile.clone(), c.path(&c.aclfile))
    };
    if file.is_empty() {
        return Err(CmdError::err(NO_FILE));
    }
    let text = acl::file_text(&cx.shared.acl.users());
    let mut tmp = path.clone().into_os_string();
    tmp.push(format!(".tmp-{}-{}", std::process::id(), crate::core::shared::unix_ms()));
    let r = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        crate::subsystems::log::warning(&format!("Writing ACL file for ACL SAVE: {e}"));
        return Err(CmdError::err(
            "There was an error trying to save the ACLs. Please check the server logs for more \
             information",
        ));
    }
    out.ok();
    Ok(())
}

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    reply_help(
        out,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}

/// Applies the configuration's users at start-up (Redis's
/// `ACLLoadUsersAtStartup`): `user` lines, or the ACL file, not both.
pub fn load_at_startup(shared: &crate::Shared) -> Result<(), String> {
    let (users, file, path, all) = {
        let c = shared.config.read();
        let path = c.path(&c.aclfile);
        (c.users.clone(), c.aclfile.clone(), path, c.acl_pubsub_default == "allchannels")
    };
    if !file.is_empty() && !users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting \
                    an ACL file path is invalid. This setup is very likely to lead to \
                    configuration errors and security holes, please define either an ACL file \
                    or declare users directly in your redis.conf, but not both."
            .into());
    }
    let mut seen: Vec<&String> = Vec::new();
    for words in &users {
        let name = &words[0];
        if seen.contains(&name) {
            return Err(format!(
                "Error in user declaration '{name}': {}",
                acl::RuleError::Already.text()
            ));
        }
        seen.push(name);
        if acl::has_spaces(name.as_bytes()) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let args: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
        let ops = acl::merge_selectors(&args).map_err(|i| {
            format!("Error in user declaration '{}': Unmatched parenthesis", words[i + 1])
        })?;
        let mut u = match shared.acl.get(name.as_bytes()) {
            Some(d) => {
                let mut d = (*d).clone();
                d.apply(b"reset", all).ok();
                d
            }
            None => User::new(name.as_bytes(), all),
        };
        for op in &ops {
            u.apply(op, all).map_err(|e| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{name}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        shared.acl.put(u);
    }
    if !file.is_empty() {
        let users = load_file(&path, &file, all)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        shared.acl.replace_all(users);
    }
    shared.config_epoch.fetch_add(1, Ordering::Release);
    Ok(())
}
