//! Server administration: CONFIG GET/SET/RESETSTAT/REWRITE/HELP.
//!
//! The parameters, their parsing and their error texts live in
//! `crate::subsystems::config`; this file is the command surface: 7.0's multi-pattern
//! GET, atomic multi-parameter SET, and the statistics reset.

use std::sync::atomic::Ordering;

use resp::ReplyBuf;

use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Lock};
use crate::subsystems::config::{self, pflags, Named};

pub const COMMANDS: &[Command] = &[Command::redis("CONFIG", container).subs(&[
    Command::redis("GET", config_get),
    Command::redis("SET", config_set),
    Command::redis("HELP", config_help),
    // Reads the stripes' expiry counters under their locks.
    Command::redis("RESETSTAT", config_resetstat).lock(Lock::AllDbs),
    Command::redis("REWRITE", config_rewrite),
])];

/// A container called without a known subcommand (the dispatcher already
/// answered unknown ones; this only runs for the bare name).
pub(crate) fn container(cx: &mut Ctx, _: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    Err(CmdError::WrongArity(cx.spec.name.to_ascii_lowercase()))
}

/// Writes Redis's `addReplyHelp` block for a container.
pub(crate) fn reply_help(out: &mut ReplyBuf, cmd: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(
        format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").as_bytes(),
    );
    for l in lines {
        out.simple(l.as_bytes());
    }
    out.simple(b"HELP");
    out.simple(b"    Prints this help.");
}

fn config_help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    reply_help(
        out,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

fn config_get(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    // (name as reported, parameter); a parameter is reported once per
    // registered name, names compared without case as Redis's dict does.
    let mut found: Vec<(Vec<u8>, Named)> = Vec::new();
    let seen = |found: &[(Vec<u8>, Named)], name: &[u8]| {
        found.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
    };
    for pat in args.rest() {
        if !pat.iter().any(|c| matches!(c, b'[' | b'*' | b'?')) {
            if seen(&found, pat) {
                continue;
            }
            if let Some(n) = config::lookup(pat) {
                found.push((pat.to_vec(), n));
            }
            continue;
        }
        for n in config::visible_names() {
            if seen(&found, n.name().as_bytes()) {
                continue;
            }
            if crate::subsystems::glob::matches(pat, n.name().as_bytes(), true) {
                found.push((n.name().as_bytes().to_vec(), n));
            }
        }
    }
    let cfg = cx.shared.config.read();
    out.map(found.len());
    for (name, n) in &found {
        out.bulk(name);
        out.bulk(&cfg.get(*n));
    }
    Ok(())
}

/// Whether `enable-protected-configs` lets this client change protected
/// parameters (`local`: loopback or unix-socket clients only).
fn protected_allowed(cx: &Ctx, setting: &str) -> bool {
    match setting {
        "yes" => true,
        "local" => {
            let a = &cx.sess.handle.addr;
            a.starts_with("127.0.0.1:") || a.starts_with("[::1]:") || !a.contains(':')
        }
        _ => false,
    }
}

fn config_set(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let rest = args.rest();
    if rest.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    let protected_setting = cx.shared.config.read().enable_protected_configs.clone();
    let mut chosen: Vec<(Named, &[u8])> = Vec::with_capacity(rest.len() / 2);
    // Redis checks every name first and reports the first problem; an
    // unknown name wins only if nothing failed before it.
    let mut failure: Option<CmdError> = None;
    for (i, pair) in rest.chunks(2).enumerate() {
        let (name, value) = (pair[0], pair[1]);
        let Some(n) = config::lookup(name) else {
            if failure.is_none() {
                let mut m =
                    b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
                m.extend_from_slice(name);
                m.push(b'\'');
                failure = Some(CmdError::Bytes(m));
            }
            continue;
        };
        // A sensitive value (masterauth, requirepass) never reaches the
        // slow log or a monitor, even when the command fails (Redis
        // redacts every one it finds before any other check).
        if n.param.flags & pflags::SENSITIVE != 0 {
            cx.sess.redact |= 1u64 << (3 + 2 * i).min(63);
        }
        if failure.is_some() {
            continue;
        }
        let why = if n.param.flags & pflags::IMMUTABLE != 0 {
            Some("can't set immutable config")
        } else if n.param.flags & pflags::PROTECTED != 0
            && !protected_allowed(cx, &protected_setting)
        {
            Some("can't set protected config")
        } else if chosen.iter().any(|(c, _)| c.same(&n)) {
            Some("duplicate parameter")
        } else {
            None
        };
        if let Some(why) = why {
            failure = Some(set_failed(name, why));
            continue;
        }
        chosen.push((n, value));
    }
    if let Some(e) = failure {
        return Err(e);
    }
    // Redis's server.loading is set during an asynchronous load too.
    if (cx.shared.is_loading() || cx.shared.is_async_loading())
        && chosen.iter().any(|(n, _)| n.param.flags & pflags::DENY_LOADING != 0)
    {
        return Err(CmdError::Loading);
    }
    // All or nothing: apply to a copy, publish only if every value parsed.
    let mut next = cx.shared.config.read().clone();
    for (n, value) in &chosen {
        let words: Vec<&[u8]> = if n.param.flags & pflags::MULTI_ARG != 0 {
            // sdssplitlen on " ": an empty value is zero words.
            if value.is_empty() {
                Vec::new()
            } else {
                value.split(|&c| c == b' ').collect()
            }
        } else {
            vec![*value]
        };
        next.set(*n, &words).map_err(|e| set_failed(n.name().as_bytes(), &e))?;
    }
    let names: Vec<Named> = chosen.iter().map(|(n, _)| *n).collect();
    if let Err((n, why)) = next.apply_set(&names, &cx.shared.oom) {
        // What the apply functions did for the new values is undone.
        config::apply_oom_score(&cx.shared.oom, &cx.shared.config.read());
        crate::subsystems::log::warning(&format!(
            "Failed applying new configuration. Possibly related to new {} setting. Restoring \
             previous settings.",
            n.param.name
        ));
        return Err(set_failed(n.name().as_bytes(), &why));
    }
    // TLS: the server rebuilds its context and moves the TLS listeners
    // (Redis's applyTlsCfg, applyTLSPort); a failure restores everything.
    if let (Some(apply), Some((first, _))) =
        (cx.shared.host.network.as_ref(), chosen.iter().find(|(n, _)| n.name().starts_with("tls-")))
    {
        let result = apply.tls_apply(&cx.shared.config.read(), &next);
        if let Err((listening, why)) = result {
            // Redis names the parameter whose apply function failed.
            let name = if listening {
                "tls-port"
            } else {
                chosen
                    .iter()
                    .map(|(n, _)| n.name())
                    .find(|n| n.starts_with("tls-") && *n != "tls-port")
                    .unwrap_or(first.name())
            };
            crate::subsystems::log::warning(&format!(
                "Failed applying new configuration. Possibly related to new {name} setting. \
                 Restoring previous settings."
            ));
            return Err(set_failed(name.as_bytes(), &why));
        }
    }
    // A new port or bind list moves the listeners, as Redis's
    // changeListenPort and changeBindAddr do; failing to bind restores
    // everything.
    let (old_port, old_bind) = {
        let c = cx.shared.config.read();
        (c.port, c.bind.clone())
    };
    if next.port != old_port || next.bind != old_bind {
        if let Some(net) = &cx.shared.host.network {
            if let Err(why) = net.rebind(&next.bind, next.port, next.tcp_backlog) {
                config::apply_oom_score(&cx.shared.oom, &cx.shared.config.read());
                let (name, why): (&[u8], &str) = if next.port != old_port {
                    (b"port", &why)
                } else {
                    (b"bind", "Failed to bind to specified addresses.")
                };
                crate::subsystems::log::warning(&format!(
                    "Failed applying new configuration. Possibly related to new {} setting. \
                     Restoring previous settings.",
                    String::from_utf8_lossy(name)
                ));
                return Err(set_failed(name, why));
            }
        }
    }
    cx.shared.host.log.set_level(&next.loglevel);
    for (n, _) in &chosen {
        if !n.param.has_effect() {
            crate::subsystems::log::warning(&config::no_effect_warning(n.name(), &next.get(*n)));
        }
    }
    let max = next.maxmemory;
    if chosen.iter().any(|(n, _)| n.name() == "requirepass") {
        // The default user's password follows (Redis's updateRequirePass).
        cx.shared.acl.set_default_password(next.requirepass.as_deref().filter(|p| !p.is_empty()));
    }
    let prev = std::mem::replace(&mut *cx.shared.config.write(), next);
    cx.shared.config_epoch.fetch_add(1, Ordering::Release);
    if let Some(aof) = cx.shared.host.aof.as_ref() {
        // Turning the AOF on starts a rewrite, which may fail (Redis's
        // startAppendOnly): the change is then undone.
        if let Err(why) = aof.config_changed(!cx.keys.is_empty()) {
            *cx.shared.config.write() = prev;
            cx.shared.config_epoch.fetch_add(1, Ordering::Release);
            return Err(set_failed(b"appendonly", &why));
        }
    }
    // Freed before a lower maxmemory evicts: the old configuration is
    // not memory to make room for.
    drop(prev);
    cx.shared.config_applied();
    // A relative log file follows `dir`, as Redis's does after chdir.
    cx.shared.host.log.set_dir(&cx.shared.config.read().dir);
    if chosen.iter().any(|(n, _)| n.name() == "proc-title-template") {
        config::apply_proc_title(&cx.shared.host, &cx.shared.config.read());
    }
    if max > 0 && cx.caller.is_request() && chosen.iter().any(|(n, _)| n.name() == "maxmemory") {
        // A lower limit evicts at once, as Redis's updateMaxmemory (each
        // evicted key a unit of its own, outside this command's). Not
        // inside EXEC, which may hold the stripes eviction would lock:
        // the next command evicts then.
        let mut fx = crate::core::effects::Effects::default();
        let _ = crate::subsystems::evict::perform(cx.shared, &mut fx, max);
    }
    if chosen.iter().any(|(n, _)| matches!(n.name(), "maxmemory" | "maxmemory-clients")) {
        // A lower client limit closes clients at once (Redis's
        // applyClientMaxMemoryUsage).
        crate::subsystems::evict::evict_clients(cx.shared);
    }
    out.ok();
    Ok(())
}

fn set_failed(name: &[u8], why: &str) -> CmdError {
    let mut m = b"ERR CONFIG SET failed (possibly related to argument '".to_vec();
    m.extend_from_slice(name);
    m.extend_from_slice(b"') - ");
    m.extend_from_slice(why.as_bytes());
    CmdError::Bytes(m)
}

fn config_resetstat(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let sh = cx.shared;
    cx.sess.stats = Default::default();
    // SAFETY: the only reference taken, dropped at once.
    *unsafe { crate::core::cmdstats::local() } = Default::default();
    sh.cmdstats.reset();
    let s = &sh.stats;
    for c in [
        &s.connections_received,
        &s.rejected_connections,
        &s.commands_processed,
        &s.keyspace_hits,
        &s.keyspace_misses,
        &s.net_input_bytes,
        &s.net_output_bytes,
        &s.rejected_calls,
        &s.failed_calls,
        &s.client_qbuf_limit_disconnections,
        &s.client_obuf_limit_disconnections,
        &s.reads_processed,
        &s.writes_processed,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    let (live_in, live_out) = sh.live_net_bytes();
    s.net_input_base.store(live_in, Ordering::Relaxed);
    s.net_output_base.store(live_out, Ordering::Relaxed);
    let (live_reads, live_writes) = sh.live_io_counts();
    s.reads_base.store(live_reads, Ordering::Relaxed);
    s.writes_base.store(live_writes, Ordering::Relaxed);
    let (_, expired, _) = super::info::keyspace_counts(cx);
    sh.expired_keys_base.store(expired, Ordering::Relaxed);
    sh.evictor.reset_stats();
    sh.lazyfree.reset_stats();
    if let Some(r) = &sh.host.replication {
        r.reset_sync_stats();
    }
    let used = sh.mem_stats().used_memory;
    sh.mem_peak.store(used, Ordering::Relaxed);
    out.ok();
    Ok(())
}

fn config_rewrite(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    rewrite_config(cx, false)?;
    out.ok();
    Ok(())
}

/// CONFIG REWRITE, and DEBUG CONFIG-REWRITE-FORCE-ALL (`force_all`: every
/// parameter written, defaults included).
pub(crate) fn rewrite_config(cx: &mut Ctx, force_all: bool) -> CmdResult {
    let mut cfg = cx.shared.config.read().clone();
    // The master followed now, as Redis's rewriteConfigReplicaOfOption
    // writes it (none on a master), whatever the file said at start-up.
    if let Some(f) = &cx.shared.host.follow {
        cfg.replicaof = f.view().map(|v| (v.host, v.port));
    }
    if cfg.config_file.is_empty() {
        return Err(CmdError::err("The server is running without a config file"));
    }
    let users: Vec<String> = if cfg.aclfile.is_empty() {
        cx.shared
            .acl
            .users()
            .iter()
            .map(|u| format!("user {} {}", String::from_utf8_lossy(&u.name), u.describe()))
            .collect()
    } else {
        Vec::new()
    };
    config::rewrite_with(&cfg, &cfg.config_file, &users, force_all)
        .map_err(|e| CmdError::err(format!("Rewriting config file: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;

    fn sorted_pairs(reply: &str) -> Vec<String> {
        // "*2N\r\n" then $len/value lines; pair them up and sort.
        let lines: Vec<&str> = reply.split("\r\n").collect();
        let vals: Vec<&str> = lines.iter().skip(1).skip(1).step_by(2).copied().collect();
        let mut pairs: Vec<String> =
            vals.chunks(2).filter(|c| c.len() == 2).map(|c| format!("{}={}", c[0], c[1])).collect();
        pairs.sort();
        pairs
    }

    // Expected values below are redis-server 7.0.15's replies.
    #[test]
    fn config_get_patterns() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["CONFIG", "GET", "MAXMEMORY"]), "*2\r\n$9\r\nMAXMEMORY\r\n$1\r\n0\r\n");
        assert_eq!(
            h.run(&["CONFIG", "GET", "MAXMEMORY", "maxmemory"]),
            "*2\r\n$9\r\nMAXMEMORY\r\n$1\r\n0\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "GET", "nosuch"]), "*0\r\n");
        assert_eq!(
            sorted_pairs(&h.run(&["CONFIG", "GET", "*ziplist*"])),
            vec![
                "hash-max-ziplist-entries=512",
                "hash-max-ziplist-value=64",
                "list-max-ziplist-size=-2",
                "zset-max-ziplist-entries=128",
                "zset-max-ziplist-value=64"
            ]
        );
        assert_eq!(
            sorted_pairs(&h.run(&["CONFIG", "GET", "*max-*-entries*"])),
            vec![
                "hash-max-listpack-entries=512",
                "hash-max-ziplist-entries=512",
                "set-max-intset-entries=512",
                "zset-max-listpack-entries=128",
                "zset-max-ziplist-entries=128"
            ]
        );
        assert_eq!(
            sorted_pairs(&h.run(&["CONFIG", "GET", "maxmemory", "maxmemory", "maxmem*"])),
            vec![
                "maxmemory-clients=0",
                "maxmemory-eviction-tenacity=10",
                "maxmemory-policy=noeviction",
                "maxmemory-samples=5",
                "maxmemory=0"
            ]
        );
        assert_eq!(
            h.run(&["CONFIG", "GET", "client-output-buffer-limit"]),
            "*2\r\n$26\r\nclient-output-buffer-limit\r\n$67\r\n\
             normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60\r\n"
        );
        // redis-server 7.0.15 started without a file answers `* -::*`.
        assert_eq!(h.run(&["CONFIG", "GET", "bind"]), "*2\r\n$4\r\nbind\r\n$6\r\n* -::*\r\n");
        assert_eq!(
            h.run(&["CONFIG", "GET"]),
            "-ERR wrong number of arguments for 'config|get' command\r\n"
        );
    }

    #[test]
    fn config_set_errors() {
        let mut h = Harness::new();
        let cases: &[(&[&str], &str)] = &[
            (&["appendonly", "maybe"], "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'"),
            (&["maxmemory", "1x"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
            (&["maxmemory", "1.5gb"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
            (&["maxmemory", "-1"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
            (&["hz", "abc"], "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"),
            (&["port", "70000"], "-ERR CONFIG SET failed (possibly related to argument 'port') - argument must be between 0 and 65535 inclusive"),
            (&["databases", "4"], "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"),
            (&["foo", "bar"], "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
            (&["maxmemory", "10mb", "maxmemory", "20mb"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter"),
            (&["maxmemory", "10mb", "foo", "1"], "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
            (&["hash-max-ziplist-entries", "abc"], "-ERR CONFIG SET failed (possibly related to argument 'hash-max-ziplist-entries') - argument couldn't be parsed into an integer"),
            (&["maxmemory-policy", "foo"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"),
            (&["save", "1 2 3"], "-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
            (&["save", "x 1"], "-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
            (&["client-output-buffer-limit", "normal 1 2"], "-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Wrong number of arguments in buffer limit configuration."),
            (&["client-output-buffer-limit", "master 1 2 3"], "-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Invalid client class specified in buffer limit configuration."),
            (&["client-output-buffer-limit", "normal 1mb 2 x"], "-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Error in hard, soft or soft_seconds setting in buffer limit configuration."),
            (&["dir", "/nonexistent"], "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"),
            (&["dbfilename", "a/b"], "-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config"),
            (&["loglevel", "foo"], "-ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning"),
            (&["maxclients", "0"], "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive"),
            (&["maxmemory", "0", "databases", "4"], "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"),
            (&["databases", "4", "foo", "1"], "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"),
            (&["list-max-ziplist-size", "3.5"], "-ERR CONFIG SET failed (possibly related to argument 'list-max-ziplist-size') - argument couldn't be parsed into an integer"),
            (&["timeout", "-1"], "-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive"),
            (&["lfu-log-factor", "01"], "-ERR CONFIG SET failed (possibly related to argument 'lfu-log-factor') - argument couldn't be parsed into an integer"),
            (&["maxmemory", " 1"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
            (&["maxmemory", "+1"], "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
        ];
        for (args, want) in cases {
            let mut argv = vec!["CONFIG", "SET"];
            argv.extend_from_slice(args);
            assert_eq!(h.run(&argv), format!("{want}\r\n"), "{args:?}");
        }
        assert_eq!(h.run(&["CONFIG", "SET", "maxmemory", "1", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(
            h.run(&["CONFIG", "SET", "maxmemory"]),
            "-ERR wrong number of arguments for 'config|set' command\r\n"
        );
        // Nothing of a failed multi-set is applied.
        assert_eq!(h.run(&["CONFIG", "GET", "maxmemory"]), "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
    }

    #[test]
    fn config_set_values() {
        let mut h = Harness::new();
        let epoch = h.shared.config_epoch.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(h.run(&["CONFIG", "SET", "maxmemory", "kb"]), "+OK\r\n");
        assert_eq!(h.run(&["CONFIG", "GET", "maxmemory"]), "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
        assert_eq!(h.run(&["CONFIG", "SET", "maxmemory", "1K"]), "+OK\r\n");
        assert_eq!(
            h.run(&["CONFIG", "GET", "maxmemory"]),
            "*2\r\n$9\r\nmaxmemory\r\n$4\r\n1000\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "SET", "hz", "1000"]), "+OK\r\n");
        assert_eq!(h.run(&["CONFIG", "GET", "hz"]), "*2\r\n$2\r\nhz\r\n$3\r\n500\r\n");
        assert_eq!(
            h.run(&[
                "CONFIG",
                "SET",
                "hash-max-ziplist-entries",
                "100",
                "hash-max-listpack-entries",
                "200"
            ]),
            "+OK\r\n"
        );
        assert_eq!(
            h.run(&["CONFIG", "GET", "hash-max-ziplist-entries"]),
            "*2\r\n$24\r\nhash-max-ziplist-entries\r\n$3\r\n200\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "SET", "save", ""]), "+OK\r\n");
        assert_eq!(h.run(&["CONFIG", "GET", "save"]), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
        assert_eq!(h.run(&["CONFIG", "SET", "save", "100 10 20 3"]), "+OK\r\n");
        assert_eq!(h.run(&["CONFIG", "GET", "save"]), "*2\r\n$4\r\nsave\r\n$11\r\n100 10 20 3\r\n");
        assert_eq!(
            h.run(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 2kb 5"]),
            "+OK\r\n"
        );
        assert_eq!(
            h.run(&["CONFIG", "GET", "client-output-buffer-limit"]),
            "*2\r\n$26\r\nclient-output-buffer-limit\r\n$62\r\n\
             normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2048 5\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]), "+OK\r\n");
        assert_eq!(
            h.run(&["CONFIG", "GET", "notify-keyspace-events"]),
            "*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "SET", "activerehashing", "NO"]), "+OK\r\n");
        assert_eq!(
            h.run(&["CONFIG", "GET", "activerehashing"]),
            "*2\r\n$15\r\nactiverehashing\r\n$2\r\nno\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "SET", "maxmemory-clients", "10%"]), "+OK\r\n");
        assert_eq!(
            h.run(&["CONFIG", "GET", "maxmemory-clients"]),
            "*2\r\n$17\r\nmaxmemory-clients\r\n$3\r\n10%\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "SET", "requirepass", "secret"]), "+OK\r\n");
        assert_eq!(h.shared.config.read().requirepass.as_deref(), Some(&b"secret"[..]));
        assert!(h.shared.config_epoch.load(std::sync::atomic::Ordering::Relaxed) > epoch);
    }

    #[test]
    fn config_misc() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["CONFIG", "FOO"]),
            "-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n"
        );
        assert_eq!(h.run(&["CONFIG"]), "-ERR wrong number of arguments for 'config' command\r\n");
        assert_eq!(
            h.run(&["CONFIG", "REWRITE"]),
            "-ERR The server is running without a config file\r\n"
        );
        assert_eq!(h.run(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
        let help = h.run(&["CONFIG", "HELP"]);
        assert!(help.starts_with(
            "*11\r\n+CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET <pattern>\r\n"
        ));
        assert!(help.ends_with("+HELP\r\n+    Prints this help.\r\n"));
    }
}
