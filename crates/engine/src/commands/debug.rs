//! Server diagnostics: TIME and DEBUG (the subcommands Redis's test suites
//! use: SLEEP, RELOAD, OBJECT, POPULATE, PROTOCOL, DIGEST, SET-ACTIVE-EXPIRE,
//! LOG, PAUSE-CRON, …, and Sluice's EFFECTS for the effects tests).
//!
//! `DEBUG SLEEP` blocks the calling thread, as it blocks Redis's only one.

use std::sync::atomic::Ordering;

use resp::ReplyBuf;
use store::Value;

use crate::core::ctx::help_reply;
use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::shared::unix_us;
use crate::core::spec::{Command, Flags, KeyList, Lock};

pub const COMMANDS: &[Command] = &[
    Command::redis("TIME", time),
    Command::redis("DEBUG", debug)
        .flags(Flags::PROTECTED)
        .lock(Lock::CustomOrDb { find: debug_keys, whole_db: debug_whole_db }),
];

/// `DEBUG OBJECT key` reads one key of the selected database,
/// `DEBUG DIGEST-VALUE key ...` several.
fn debug_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    if argv.len() == 3 && eq_ic(argv[1], "OBJECT") {
        keys.push((db, argv[2]));
    }
    if argv.len() >= 2 && eq_ic(argv[1], "DIGEST-VALUE") {
        keys.extend(argv[2..].iter().map(|k| (db, *k)));
    }
}

/// `DEBUG POPULATE` writes keys it names itself: the whole database.
fn debug_whole_db(argv: &[&[u8]]) -> bool {
    argv.len() >= 3 && eq_ic(argv[1], "POPULATE")
}

fn time(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let us = unix_us();
    out.array(2);
    out.bulk_int(us / 1_000_000);
    out.bulk_int(us % 1_000_000);
    Ok(())
}

/// `DEBUG HELP`, line for line as Redis 7.0 prints it (it lists
/// subcommands Sluice does not have; those answer the syntax error).
const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "ASSERT",
    "    Crash by assertion failed.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "CRASH-AND-RECOVER [<milliseconds>]",
    "    Hard crash and restart after a <milliseconds> delay (default 0).",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LEAK <string>",
    "    Create a memory leak of the input string.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "HTSTATS <dbid>",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "REPLICATE <string>",
    "    Replicates the provided string to replicas, allowing data divergence.",
    "MALLCTL <key> [<val>]",
    "    Get or set a malloc tuning integer.",
    "MALLCTL-STR <key> [<val>]",
    "    Get or set a malloc tuning string.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "OOM",
    "    Crash the server simulating an out-of-memory error.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "RESTART [<milliseconds>]",
    "    Graceful restart: save config, db, restart after a <milliseconds> delay (default 0).",
    "SDSLEN <key>",
    "    Show low level SDS string info representing `key` and value.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "STRUCTSIZE",
    "    Return the size of different Redis core C structures.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "CLIENT-EVICTION",
    "    Show low level client eviction pools info (maxmemory-clients).",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
    "HELP",
    "    Prints this help.",
];

/// DEBUG MALLCTL <name> [int] and MALLCTL-STR <name> [str|VOID]: Redis's
/// `mallctl_int` / `mallctl_string` (arguments past the value ignored).
fn mallctl(cx: &mut Ctx, args: &[&[u8]], string: bool, out: &mut ReplyBuf) -> CmdResult {
    let Some(h) = cx.shared.host.memory.malloc.as_ref() else { return Err(CmdError::Syntax) };
    if !string {
        if let Some(v) = args.get(1) {
            resp::parse_i64(v).ok_or(CmdError::NotInteger)?;
        }
    }
    match (h.mallctl)(args[0], args.get(1).copied(), string) {
        crate::core::shared::Mallctl::Int(v) => out.int(v),
        crate::core::shared::Mallctl::Str(v) => out.bulk(&v),
        crate::core::shared::Mallctl::Done => out.ok(),
        crate::core::shared::Mallctl::Err(e) => {
            return Err(CmdError::Msg(format!("ERR {e}").into()))
        }
    }
    Ok(())
}

/// DEBUG CLUSTERLINK KILL TO|FROM|ALL <node-id>: the bus closes that
/// node's links at once (Redis's `freeClusterLink`), to be made anew.
fn clusterlink_kill(cx: &mut Ctx, dir: &[u8], node: &[u8]) -> CmdResult {
    let Some(c) = cx.shared.cluster.get() else {
        return Err(CmdError::err("Debug option only available for cluster mode enabled setup!"));
    };
    let found = {
        let st = c.state.read();
        st.find(node).map(|i| st.nodes[i].id)
    };
    let Some(n) = found else {
        let mut l = b"ERR Unknown node ".to_vec();
        l.extend_from_slice(node);
        return Err(CmdError::Bytes(l));
    };
    let (to, from) = if eq_ic(dir, "FROM") {
        (false, true)
    } else if eq_ic(dir, "TO") {
        (true, false)
    } else if eq_ic(dir, "ALL") {
        (true, true)
    } else {
        let mut l = b"ERR Unknown direction ".to_vec();
        l.extend_from_slice(dir);
        return Err(CmdError::Bytes(l));
    };
    if let Some(bus) = c.bus.get() {
        bus.kill_links(&n, to, from);
    }
    Ok(())
}

fn debug(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let sub = argv[1];
    match argv.len() {
        2 if eq_ic(sub, "HELP") => help_reply(HELP, out),
        3 if eq_ic(sub, "SLEEP") => {
            sleep_seconds(strtod(argv[2]));
            out.ok();
        }
        // Only with an allocator that has controls (jemalloc), as Redis.
        n if n >= 3
            && (eq_ic(sub, "MALLCTL") || eq_ic(sub, "MALLCTL-STR"))
            && cx.shared.host.memory.malloc.as_ref().is_some() =>
        {
            mallctl(cx, &argv[2..], eq_ic(sub, "MALLCTL-STR"), out)?
        }
        n if n >= 3 && eq_ic(sub, "REPLICATE") => {
            crate::subsystems::repl::feed_command(cx.shared, &argv[2..]);
            out.ok();
        }
        3 if eq_ic(sub, "SET-ACTIVE-EXPIRE") => {
            cx.shared.store.active_expire.store(atoi(argv[2]) != 0, Ordering::Relaxed);
            out.ok();
        }
        5 if eq_ic(sub, "CLUSTERLINK") && eq_ic(argv[2], "KILL") => {
            clusterlink_kill(cx, argv[3], argv[4])?;
            out.ok();
        }
        3 if eq_ic(sub, "OBJECT") => object(cx, argv[2], out)?,
        2 if eq_ic(sub, "DIGEST") => digest(cx, out)?,
        _ if eq_ic(sub, "DIGEST-VALUE") => digest_value(cx, &argv[2..], out),
        3 if eq_ic(sub, "PROTOCOL") => protocol(cx, argv[2], out)?,
        3..=5 if eq_ic(sub, "POPULATE") => populate(cx, &argv[2..], out)?,
        3 if eq_ic(sub, "LOG") => {
            crate::subsystems::log::warning(&format!(
                "DEBUG LOG: {}",
                String::from_utf8_lossy(argv[2])
            ));
            out.ok();
        }
        3 if eq_ic(sub, "ERROR") => {
            // The argument as the error line, as is (no `ERR` added),
            // line breaks made spaces.
            let line = argv[2].iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c });
            return Err(CmdError::Bytes(line.collect()));
        }
        3 if eq_ic(sub, "QUICKLIST-PACKED-THRESHOLD") => {
            // Accepted as Redis validates it; Sluice's list chunks have no
            // plain nodes, so the threshold changes nothing.
            match crate::subsystems::config::parse_memory(argv[2]) {
                Some(sz) if sz <= (1u64 << 32) - (1 << 20) => out.ok(),
                _ => {
                    return Err(CmdError::err(
                        "argument must be a memory value bigger than 1 and smaller than 4gb",
                    ))
                }
            }
        }
        3 if eq_ic(sub, "SET-DISABLE-DENY-SCRIPTS") => {
            // Scripts may then call `noscript` commands (Redis's
            // script_disable_deny_script, a testing aid its HELP omits).
            cx.shared.scripts.deny_disabled.store(atoi(argv[2]) != 0, Ordering::Relaxed);
            out.ok();
        }
        3 if eq_ic(sub, "SET-SKIP-CHECKSUM-VALIDATION") => {
            cx.shared.persist.skip_checksum.store(atoi(argv[2]) != 0, Ordering::Relaxed);
            out.ok();
        }
        2 if eq_ic(sub, "CONFIG-REWRITE-FORCE-ALL") => {
            crate::commands::server::rewrite_config(cx, true)
                .map_err(|_| CmdError::err("CONFIG-REWRITE-FORCE-ALL failed"))?;
            out.ok();
        }
        4 if eq_ic(sub, "REPLYBUFFER") => {
            // Sluice's reply buffer is a list of fixed 16 KB chunks
            // (CLIENT LIST `rbs`): it has no size of its own to grow or
            // shrink, so there is nothing for these to turn off; they are
            // checked as Redis checks them.
            let what = argv[2];
            if eq_ic(what, "PEAK-RESET-TIME") {
                let v = argv[3];
                if !eq_ic(v, "NEVER") && !eq_ic(v, "RESET") {
                    resp::parse_i64(v).ok_or(CmdError::NotInteger)?;
                }
            } else if !eq_ic(what, "RESIZING") {
                return Err(CmdError::SubcommandSyntax {
                    sub: argv[1].to_vec(),
                    cmd: argv[0].to_vec(),
                });
            }
            out.ok();
        }
        3 if eq_ic(sub, "PAUSE-CRON") => {
            cx.shared.cron_paused.store(atoi(argv[2]) != 0, Ordering::Relaxed);
            out.ok();
        }
        2 if eq_ic(sub, "SEGFAULT") => {
            // The crash handler (the server's) writes the crash report,
            // then the signal's default action ends the process.
            // SAFETY: raising a signal has no memory effects here.
            unsafe { libc::raise(libc::SIGSEGV) };
        }
        2 if eq_ic(sub, "PANIC") => {
            let exit = cx.sess.conf(cx.shared).get_by_name("use-exit-on-panic");
            panic_now(
                &format!(
                    "DEBUG PANIC called at Unix time {}",
                    crate::core::shared::unix_ms() / 1000
                ),
                exit.is_some_and(|v| v == b"yes"),
            );
        }
        2 if eq_ic(sub, "CHANGE-REPL-ID") => out.ok(),
        2 if eq_ic(sub, "STRINGMATCH-TEST") => {
            stringmatch_test();
            out.simple(b"Apparently Redis did not crash: test passed");
        }
        3 if eq_ic(sub, "EFFECTS") => effects(cx, argv[2], out)?,
        _ if eq_ic(sub, "RELOAD") => reload(cx, &argv[2..], out)?,
        3 if eq_ic(sub, "AOF-FLUSH-SLEEP") => {
            if let Some(aof) = cx.shared.host.aof.as_ref() {
                aof.set_flush_sleep(atoi(argv[2]).clamp(0, i64::from(i32::MAX)) as u64);
            }
            out.ok();
        }
        2 if eq_ic(sub, "LOADAOF") => {
            let aof =
                cx.shared.host.aof.as_ref().cloned().ok_or_else(|| CmdError::err("no AOF"))?;
            aof.reload().map_err(|e| CmdError::err(&e))?;
            out.ok();
        }
        _ => return Err(CmdError::SubcommandSyntax { sub: sub.to_vec(), cmd: argv[0].to_vec() }),
    }
    Ok(())
}

/// Redis's serverPanic: the "Guru Meditation" lines and a stack trace,
/// then `exit(1)` with `use-exit-on-panic yes`, else abort (whose SIGABRT
/// gives the server's crash report). DEBUG PANIC and
/// `propagation-error-behavior` end the process here.
pub fn panic_now(why: &str, exit_on_panic: bool) -> ! {
    crate::subsystems::log::warning("------------------------------------------------");
    crate::subsystems::log::warning("!!! Software Failure. Press left mouse button to continue");
    crate::subsystems::log::warning(&format!("Guru Meditation: {why}"));
    if exit_on_panic {
        let trace = std::backtrace::Backtrace::force_capture();
        crate::subsystems::log::raw(
            crate::subsystems::log::Level::Warning,
            &format!("\n------ STACK TRACE ------\n{trace}\n"),
        );
        std::process::exit(1);
    }
    std::process::abort();
}

/// `DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]`: save (unless NOSAVE), empty
/// the keyspace (unless NOFLUSH) and load the file again, its keys and
/// libraries replacing those of the same name with MERGE (through the
/// server's persistence).
fn reload(cx: &mut Ctx, opts: &[&[u8]], out: &mut ReplyBuf) -> CmdResult {
    let mut o = crate::subsystems::snapshot::Reload { save: true, flush: true, merge: false };
    for a in opts {
        if eq_ic(a, "NOSAVE") {
            o.save = false;
        } else if eq_ic(a, "NOFLUSH") {
            o.flush = false;
        } else if eq_ic(a, "MERGE") {
            o.merge = true;
        } else {
            return Err(CmdError::err(
                "DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    let snap = crate::subsystems::snapshot::installed(cx.shared)?;
    let dirty =
        cx.shared.stats.dirty.load(Ordering::Relaxed) + cx.sess.stats.dirty + cx.sess.fx.dirty;
    match snap.reload(o, dirty) {
        Ok(()) => out.ok(),
        // (7.0.15's words; 7.2 adds ", check server logs.")
        Err(_) => return Err(CmdError::err("Error trying to load the RDB dump")),
    }
    Ok(())
}

/// `DEBUG EFFECTS START|TAKE|STOP`, Sluice's test hook on the effects
/// record (not in Redis): START installs a recording consumer (replacing
/// any earlier one), TAKE replies with what it saw since — the propagated
/// stream as a replica would read it, the keyspace events as
/// `[name, db, key]`, and the dirty total — and STOP removes it. The
/// differential tests compare these with redis-server's replica stream,
/// notifications and `rdb_changes_since_last_save`.
fn effects(cx: &mut Ctx, what: &[u8], out: &mut ReplyBuf) -> CmdResult {
    use crate::core::effects::{Consumer, Recorder};
    let shared = cx.shared;
    let take_old = || shared.debug_recorder.lock().take();
    if eq_ic(what, "START") || eq_ic(what, "STOP") {
        if let Some(old) = take_old() {
            let old: std::sync::Arc<dyn Consumer> = old;
            shared.remove_consumer(&old);
        }
        if eq_ic(what, "START") {
            let r = Recorder::new();
            *shared.debug_recorder.lock() = Some(r.clone());
            shared.add_consumer(r);
        }
        out.ok();
        return Ok(());
    }
    if !eq_ic(what, "TAKE") {
        return Err(CmdError::Syntax);
    }
    let Some(r) = shared.debug_recorder.lock().clone() else {
        return Err(CmdError::err("no effects recorder: DEBUG EFFECTS START first"));
    };
    let rec = r.take();
    out.array(3);
    out.array(rec.stream.len());
    for cmd in &rec.stream {
        out.array(cmd.len());
        for a in cmd {
            out.bulk(a);
        }
    }
    out.array(rec.events.len());
    for (_, name, db, key) in &rec.events {
        out.array(3);
        out.bulk(name.as_bytes());
        out.int(*db as i64);
        out.bulk(key);
    }
    out.int(rec.dirty as i64);
    Ok(())
}

/// `DEBUG DIGEST`: every database's keys, one stripe at a time (the
/// command holds no stripe of its own outside a transaction).
fn digest(cx: &mut Ctx, out: &mut ReplyBuf) -> CmdResult {
    use crate::commands::digest as dg;
    if cx.sess.in_exec {
        return Err(CmdError::err("DEBUG DIGEST is not supported inside MULTI by Sluice"));
    }
    let store = &cx.shared.store;
    let now = cx.now();
    let mut total = [0u8; 20];
    for db in (0..store.databases()).filter(|&db| store.db_allocated(db)) {
        let mut mixed = false;
        for stripe in 0..store.stripes() {
            let g = store.lock_stripe(db, stripe);
            for (k, e, at) in g.iter_expiring() {
                // Logically expired keys count, as in Redis's dict walk,
                // unless already gone; skip only those past due here to
                // keep a lazily expired key from changing the result.
                if at != store::NO_EXPIRE && at <= now {
                    continue;
                }
                if !mixed {
                    dg::mix_db(&mut total, db);
                    mixed = true;
                }
                dg::add_key(&mut total, &dg::key_digest(k, e));
            }
        }
    }
    out.simple(dg::hex(&total).as_bytes());
    Ok(())
}

/// `DEBUG DIGEST-VALUE key ...`: each value's digest (zeros when absent).
fn digest_value(cx: &mut Ctx, keys: &[&[u8]], out: &mut ReplyBuf) {
    use crate::commands::digest as dg;
    out.array(keys.len());
    let db = cx.db;
    for k in keys {
        let mut d = [0u8; 20];
        if let Some(e) = cx.keys.get(db, k) {
            dg::value_digest(&mut d, e);
        }
        out.simple(dg::hex(&d).as_bytes());
    }
}

/// `DEBUG PROTOCOL <type>`: a sample reply of each RESP type.
fn protocol(cx: &mut Ctx, name: &[u8], out: &mut ReplyBuf) -> CmdResult {
    let resp3 = out.is_resp3();
    match () {
        _ if eq_ic(name, "STRING") => out.bulk(b"Hello World"),
        _ if eq_ic(name, "INTEGER") => out.int(12345),
        // Redis's sample value, not π.
        #[allow(clippy::approx_constant)]
        _ if eq_ic(name, "DOUBLE") => out.double(3.141),
        _ if eq_ic(name, "BIGNUM") => {
            let n = b"1234567999999999999999999999999999999";
            if resp3 {
                out.raw(b"(");
                out.raw(n);
                out.raw(b"\r\n");
            } else {
                out.bulk(n);
            }
        }
        _ if eq_ic(name, "NULL") => out.null(),
        _ if eq_ic(name, "ARRAY") || eq_ic(name, "SET") => {
            if eq_ic(name, "SET") {
                out.set(3);
            } else {
                out.array(3);
            }
            for j in 0..3 {
                out.int(j);
            }
        }
        _ if eq_ic(name, "MAP") => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        _ if eq_ic(name, "ATTRIB") => {
            if resp3 {
                out.raw(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        _ if eq_ic(name, "PUSH") => {
            if !resp3 {
                return Err(CmdError::err("RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            cx.sess.mark_pushed(out);
            out.bulk(b"Some real reply following the push reply");
        }
        _ if eq_ic(name, "TRUE") => out.boolean(true),
        _ if eq_ic(name, "FALSE") => out.boolean(false),
        _ if eq_ic(name, "VERBATIM") => out.verbatim(b"This is a verbatim\nstring"),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

/// `DEBUG POPULATE count [prefix] [size]`: `prefix:N` = `value:N`
/// (zero-padded or cut to `size`), skipping keys that exist; watchers
/// see the change, nothing is propagated or counted dirty, as in Redis.
fn populate(cx: &mut Ctx, args: &[&[u8]], out: &mut ReplyBuf) -> CmdResult {
    let positive = |a: &[u8]| match resp::parse_i64(a) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(CmdError::err("value is out of range, must be positive")),
    };
    let count = positive(args[0])?;
    let prefix = args.get(1).copied().unwrap_or(b"key");
    let size = match args.get(2) {
        Some(a) => positive(a)? as usize,
        None => 0,
    };
    cx.no_propagate();
    let mut key = Vec::new();
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.extend_from_slice(format!(":{j}").as_bytes());
        if cx.exists(&key) {
            continue;
        }
        let text = format!("value:{j}").into_bytes();
        let val = if size == 0 {
            text
        } else {
            let mut v = vec![0u8; size];
            let n = size.min(text.len());
            v[..n].copy_from_slice(&text[..n]);
            v
        };
        cx.set(&key, store::Value::str_exact(&val), store::NO_EXPIRE);
        cx.changed_silently(&key, 0);
    }
    out.ok();
    Ok(())
}

/// `DEBUG STRINGMATCH-TEST`: random patterns against random strings
/// through the glob matcher, as Redis's `stringmatchlen_fuzz_test`; a
/// panic would end the connection's thread, so reaching the reply is
/// the test.
fn stringmatch_test() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut pat = Vec::new();
    let mut text = Vec::new();
    for _ in 0..100_000 {
        pat.clear();
        text.clear();
        const PAT: &[u8] = b"*?[]\\^-ab";
        const TEXT: &[u8] = b"ab*?[]\\";
        pat.extend((0..rnd() % 10).map(|_| PAT[(rnd() % PAT.len() as u64) as usize]));
        text.extend((0..rnd() % 10).map(|_| TEXT[(rnd() % TEXT.len() as u64) as usize]));
        let _ = crate::subsystems::glob::matches(&pat, &text, false);
    }
}

/// Blocks the calling thread, as Redis's `nanosleep` does.
fn sleep_seconds(secs: f64) {
    let us = secs * 1e6;
    if us >= 1.0 {
        std::thread::sleep(std::time::Duration::from_micros(us.min(u64::MAX as f64) as u64));
    }
}

/// C's `strtod`: the longest numeric prefix, 0 when there is none.
fn strtod(b: &[u8]) -> f64 {
    let s = String::from_utf8_lossy(b);
    let s = s.trim_start();
    (1..=s.len())
        .rev()
        .filter(|&n| s.is_char_boundary(n))
        .find_map(|n| s[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// C's `atoi`: optional sign and leading digits, 0 when there are none.
fn atoi(b: &[u8]) -> i64 {
    let b = b.trim_ascii_start();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut v: i64 = 0;
    for &c in digits.iter().take_while(|c| c.is_ascii_digit()) {
        v = v.wrapping_mul(10).wrapping_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// `DEBUG OBJECT key`. Like Redis it looks the key up without expiring it
/// or touching its access time.
fn object(cx: &mut Ctx, key: &[u8], out: &mut ReplyBuf) -> CmdResult {
    let clock = cx.shared.lru_clock();
    let shared_ints = {
        let c = cx.shared.config.read();
        c.maxmemory == 0
            || !(c.maxmemory_policy.contains("lru") || c.maxmemory_policy.contains("lfu"))
    };
    // With the server's RDB codec installed, the length is the value's
    // real RDB form (aggregates included); else strings are estimated here.
    let codec =
        cx.shared.host.snapshots.as_ref().cloned().map(|s| (s, cx.sess.conf(cx.shared).clone()));
    let Some(e) = cx.peek(key) else {
        return Err(CmdError::NoSuchKey);
    };
    let serialized = match &codec {
        // The payload is the type byte, the value, 2 bytes of version and 8 of CRC.
        Some((s, cfg)) => s.dump(&e.value, cfg).len() - 11,
        None => serialized_len(&e.value),
    };
    let refcount: i64 = match e.value {
        Value::Int(v) if shared_ints && (0..store::value::SHARED_INTEGERS).contains(&v) => {
            i64::from(i32::MAX)
        }
        _ => 1,
    };
    let line = format!(
        "Value at:{:p} refcount:{refcount} encoding:{} serializedlength:{} lru:{} \
         lru_seconds_idle:{}",
        &e.value,
        e.value.encoding(),
        serialized,
        e.lru,
        clock.saturating_sub(e.lru),
    );
    out.simple(line.as_bytes());
    Ok(())
}

/// Bytes of an RDB length prefix.
fn rdb_len_size(n: usize) -> usize {
    match n {
        0..=63 => 1,
        64..=16383 => 2,
        _ if n <= u32::MAX as usize => 5,
        _ => 9,
    }
}

/// Bytes of RDB's integer encoding of `v`, when it has one (8, 16 or 32 bits).
fn rdb_int_size(v: i64) -> Option<usize> {
    if i8::try_from(v).is_ok() {
        Some(2)
    } else if i16::try_from(v).is_ok() {
        Some(3)
    } else if i32::try_from(v).is_ok() {
        Some(5)
    } else {
        None
    }
}

/// The size RDB would write for a value (Redis's `rdbSavedObjectLen`, with
/// `rdbcompression yes`).
fn serialized_len(v: &Value) -> usize {
    match v {
        Value::Int(i) => rdb_int_size(*i).unwrap_or_else(|| {
            let mut b = [0u8; 24];
            let n = store::value::fmt_i64(*i, &mut b);
            rdb_len_size(n) + n
        }),
        Value::Emb(b) => string_len(b),
        Value::Raw(b) => string_len(b),
        Value::Hll(h) => string_len(&h.to_redis()),
        // Aggregates get their RDB sizes with the RDB codec (persistence).
        Value::List(_) | Value::Hash(_) | Value::Set(_) | Value::ZSet(_) | Value::Stream(_) => 0,
    }
}

fn string_len(b: &[u8]) -> usize {
    if b.len() <= 11 {
        if let Some(n) = store::value::parse_canonical_i64(b).and_then(rdb_int_size) {
            return n;
        }
    }
    // Longer strings are stored LZF-compressed when that saves 4+ bytes.
    if b.len() > 20 {
        if let Some(c) = store::lzf::compress(b, b.len() - 4) {
            return 1 + rdb_len_size(c.len()) + rdb_len_size(b.len()) + c.len();
        }
    }
    rdb_len_size(b.len()) + b.len()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::tests::Harness;

    #[test]
    fn time_reply() {
        let mut h = Harness::new();
        let r = h.run(&["TIME"]);
        let parts: Vec<&str> = r.split("\r\n").collect();
        assert_eq!(parts[0], "*2");
        assert_eq!(parts[1], "$10");
        assert!(parts[2].bytes().all(|c| c.is_ascii_digit()));
        let us: i64 = parts[4].parse().unwrap();
        assert!((0..1_000_000).contains(&us));
        assert_eq!(parts[3], format!("${}", parts[4].len()));
        assert_eq!(h.run(&["TIME", "x"]), "-ERR wrong number of arguments for 'time' command\r\n");
    }

    /// DEBUG OBJECT's line without its address and LRU clock.
    fn object(h: &mut Harness, key: &str) -> String {
        let r = h.run(&["DEBUG", "OBJECT", key]);
        let rest = r.strip_prefix("+Value at:0x").unwrap_or_else(|| panic!("{r}"));
        let (_, rest) = rest.split_once(' ').unwrap();
        let (head, lru) = rest.split_once(" lru:").unwrap();
        assert!(lru.contains(" lru_seconds_idle:"), "{r}");
        head.to_string()
    }

    #[test]
    fn debug_object() {
        let mut h = Harness::new();
        for (k, v) in [
            ("i1", "5"),
            ("i2", "12345"),
            ("i3", "-5"),
            ("i4", "100000"),
            ("i5", "12345678901"),
            ("s1", "hello"),
            ("s2", "123456789012"),
            ("s4", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
            ("s6", "-0"),
            ("s7", "007"),
        ] {
            assert_eq!(h.run(&["SET", k, v]), "+OK\r\n");
        }
        // As redis-server 7.0.15 reports them.
        for (k, want) in [
            ("i1", "refcount:2147483647 encoding:int serializedlength:2"),
            ("i2", "refcount:1 encoding:int serializedlength:3"),
            ("i3", "refcount:1 encoding:int serializedlength:2"),
            ("i4", "refcount:1 encoding:int serializedlength:5"),
            ("i5", "refcount:1 encoding:int serializedlength:12"),
            ("s1", "refcount:1 encoding:embstr serializedlength:6"),
            ("s2", "refcount:1 encoding:int serializedlength:13"),
            ("s4", "refcount:1 encoding:raw serializedlength:63"),
            ("s6", "refcount:1 encoding:embstr serializedlength:3"),
            ("s7", "refcount:1 encoding:embstr serializedlength:4"),
            ("I1", ""),
        ] {
            if want.is_empty() {
                assert_eq!(h.run(&["debug", "object", k]), "-ERR no such key\r\n");
            } else {
                assert_eq!(object(&mut h, k), want, "{k}");
            }
        }
        assert_eq!(
            h.run(&["DEBUG", "OBJECT", "i1", "x"]),
            "-ERR unknown subcommand or wrong number of arguments for 'OBJECT'. Try DEBUG HELP.\r\n"
        );
    }

    #[test]
    fn debug_subcommands() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["DEBUG"]), "-ERR wrong number of arguments for 'debug' command\r\n");
        assert_eq!(
            h.run(&["DEBUG", "foo"]),
            "-ERR unknown subcommand or wrong number of arguments for 'foo'. Try DEBUG HELP.\r\n"
        );
        assert_eq!(
            h.run(&["debug", "sleep"]),
            "-ERR unknown subcommand or wrong number of arguments for 'sleep'. Try DEBUG HELP.\r\n"
        );
        assert_eq!(
            h.run(&["DEBUG", "HELP", "x"]),
            "-ERR unknown subcommand or wrong number of arguments for 'HELP'. Try DEBUG HELP.\r\n"
        );
        assert_eq!(h.run(&["DEBUG", "SLEEP", "0"]), "+OK\r\n");
        assert_eq!(h.run(&["DEBUG", "SLEEP", "abc"]), "+OK\r\n");
        assert_eq!(h.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
        assert!(!h.shared.store.active_expire.load(Ordering::Relaxed));
        assert_eq!(h.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), "+OK\r\n");
        assert!(h.shared.store.active_expire.load(Ordering::Relaxed));
        assert_eq!(h.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "abc"]), "+OK\r\n");
        assert!(!h.shared.store.active_expire.load(Ordering::Relaxed));
        let help = h.run(&["DEBUG", "HELP"]);
        assert!(help.starts_with(
            "*106\r\n+DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n\
             +AOF-FLUSH-SLEEP <microsec>\r\n"
        ));
        assert!(help.ends_with("+HELP\r\n+    Prints this help.\r\n"));
    }

    /// serializedlength of strings redis-server 7.0.15 LZF-compresses (or
    /// finds incompressible), including matches that reach the very end.
    #[test]
    fn lzf_lengths_match_redis() {
        for (want, s) in [
            (9, "aaaaaaaaaaaaaaaaaaaaa"),
            (11, "aaaaaaaaaaaaaaaaaaaaaa"),
            (12, "aaaaaaaaaaaaaaaaaaaaaaa"),
            (13, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
            (21, "aaaaaaaaaaaaaaaaaaaa"),
            (38, "dlXYqgbcZnchcrnbsdhudlsbqgbcnnchcrnbsZhu"),
            (45, "jtgcsmxlcqmsZegxjZgcsmxlcqmsmegxjtgcsmxXcqmsmegxjtgcsmxlcqmsmegx"),
            (30, "gkthvZyspujgktZvayspujgkthvayspujgkthvayspujY"),
            (16, "smnnsmnnsmnnsmnnsmYnsm"),
            (22, "bbbbbbbabbabbbbabaaaabbbb"),
            (29, "abbbabbababaababbaababbabbaaababbaabbabbabaa"),
            (22, "rhiqgnrjmdyrhiqgnrjmdyrhiqgnrjmdyrhiqgnr"),
            (30, "gidakfgidakfZidakfgidakfgidakfgidakfYidakZgid"),
            (67, "yxx yxy  yzx xyz xxyyyzzzxzyxx xx xxzxyxxyzyxyyyxzyyyzxzx y    xx"),
            (17, "yypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmzyypmz"),
            (23, "hhgdhbcfddefaabfbdcfhc"),
            (23, "baccaaaabacabaccbcabbb"),
            (31, "fnawZhvlsldhyZZYwzhvlsldhyfnaw"),
        ] {
            assert_eq!(super::string_len(s.as_bytes()), want, "{s}");
        }
    }

    #[test]
    fn c_number_parsing() {
        assert_eq!(super::strtod(b"0.25"), 0.25);
        assert_eq!(super::strtod(b" 1.5s"), 1.5);
        assert_eq!(super::strtod(b"abc"), 0.0);
        assert_eq!(super::atoi(b"12x"), 12);
        assert_eq!(super::atoi(b"-3"), -3);
        assert_eq!(super::atoi(b"x1"), 0);
    }
}
