//! COMMAND's metadata replies against redis-server 7.0.15, over the whole
//! command table: for every command and subcommand Sluice implements,
//! `COMMAND INFO` and `COMMAND DOCS` reply bytes equal Redis's, in RESP2
//! and RESP3; `COMMAND`, `COMMAND COUNT` and `COMMAND LIST [FILTERBY …]`
//! equal Redis's restricted to Sluice's table; `COMMAND GETKEYS` and
//! `GETKEYSANDFLAGS` equal Redis's for many command lines; the errors of
//! COMMAND's subcommands equal Redis's.
//!
//! Redis lists a container's subcommands (and `COMMAND`'s entries) in the
//! order of a dictionary seeded at random per process, so those lists are
//! compared after sorting them by name, and Redis's are first filtered to
//! what Sluice implements. Everything else is compared byte for byte.

use std::collections::BTreeSet;
use std::path::Path;

use resp::Frame;
use testkit::{escape, scenario, scratch_dir, Client, RedisServer, TestServer};

struct Both {
    redis: Client,
    sluice: Client,
}

impl Both {
    fn cmd(&mut self, args: &[&str]) -> (Vec<u8>, Vec<u8>) {
        (self.redis.cmd(args).unwrap(), self.sluice.cmd(args).unwrap())
    }
}

fn parse(b: &[u8]) -> Frame {
    let (f, used) = resp::parse_frame(b).unwrap().unwrap();
    assert_eq!(used, b.len());
    f
}

fn bulk_str(f: &Frame) -> String {
    match f {
        Frame::Bulk(Some(b)) => String::from_utf8(b.clone()).unwrap(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// Sorts (and, with `keep`, filters) the subcommand list of a
/// `COMMAND INFO` entry: its 10th element.
fn canon_info(f: &mut Frame, keep: &BTreeSet<String>) {
    let Frame::Array(Some(fields)) = f else { return };
    if let Some(Frame::Array(Some(subs))) = fields.get_mut(9) {
        subs.retain(|s| match s {
            Frame::Array(Some(v)) => keep.contains(&bulk_str(&v[0])),
            _ => true,
        });
        subs.sort_by_key(|s| match s {
            Frame::Array(Some(v)) => bulk_str(&v[0]),
            _ => String::new(),
        });
    }
}

/// The same for a `COMMAND DOCS` value: its `subcommands` map.
fn canon_docs(f: &mut Frame, keep: &BTreeSet<String>) {
    let Frame::Map(fields) = f else { return };
    for (k, v) in fields.iter_mut() {
        if bulk_str(k) == "subcommands" {
            if let Frame::Map(subs) = v {
                subs.retain(|(n, _)| keep.contains(&bulk_str(n)));
                subs.sort_by_key(|(n, _)| bulk_str(n));
            }
        }
    }
}

/// RESP2 maps arrive as flat arrays: turn `COMMAND DOCS`'s reply into
/// (name, value) pairs in either protocol.
fn pairs(f: Frame) -> Vec<(String, Frame)> {
    match f {
        Frame::Map(v) => v.into_iter().map(|(k, v)| (bulk_str(&k), v)).collect(),
        Frame::Array(Some(v)) => {
            let mut it = v.into_iter();
            let mut out = vec![];
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((bulk_str(&k), v));
            }
            out
        }
        other => panic!("not a map: {other:?}"),
    }
}

fn canon_docs_any(f: &mut Frame, keep: &BTreeSet<String>) {
    match f {
        Frame::Map(_) => canon_docs(f, keep),
        Frame::Array(Some(v)) => {
            // RESP2: [k, v, k, v, …]; the subcommands value is [name, map…].
            let mut i = 0;
            while i + 1 < v.len() {
                if bulk_str(&v[i]) == "subcommands" {
                    if let Frame::Array(Some(subs)) = &mut v[i + 1] {
                        let mut p: Vec<(Frame, Frame)> = vec![];
                        let mut it = std::mem::take(subs).into_iter();
                        while let (Some(n), Some(d)) = (it.next(), it.next()) {
                            if keep.contains(&bulk_str(&n)) {
                                p.push((n, d));
                            }
                        }
                        p.sort_by_key(|(n, _)| bulk_str(n));
                        *subs = p.into_iter().flat_map(|(n, d)| [n, d]).collect();
                    }
                }
                i += 2;
            }
        }
        _ => {}
    }
}

fn names_of(reply: &[u8]) -> BTreeSet<String> {
    match parse(reply) {
        Frame::Array(Some(v)) | Frame::Set(v) => v.iter().map(bulk_str).collect(),
        other => panic!("not a list: {other:?}"),
    }
}

/// Sluice's own commands (the job queue, group `queue`; DURABLE) and
/// WAITAOF (Redis 7.2's): Redis 7.0 has none of them, so the comparisons
/// leave them out.
const SLUICE_ONLY: &[&str] = &[
    "ackjob", "addjob", "deljob", "dequeue", "durable", "enqueue", "fastack", "getjob", "jscan",
    "loadjob", "nack", "pause", "qlen", "qpeek", "qscan", "qset", "qstat", "show", "waitaof",
    "waitjob", "working",
];

fn redis_names(all: BTreeSet<String>) -> BTreeSet<String> {
    all.into_iter().filter(|n| !SLUICE_ONLY.contains(&n.as_str())).collect()
}

fn start() -> Option<(RedisServer, TestServer, std::path::PathBuf)> {
    let dir = scratch_dir("cmdmeta");
    let redis = RedisServer::start_with(&[], Some(&dir))?;
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    let sluice = TestServer::start_with(bin, &[], Some(&dir));
    Some((redis, sluice, dir))
}

fn connect(redis: &RedisServer, sluice: &TestServer, resp3: bool) -> Both {
    let mut b = Both { redis: redis.client(), sluice: sluice.client() };
    if resp3 {
        b.cmd(&["HELLO", "3"]);
    }
    b
}

#[test]
fn info_and_docs_for_every_command() {
    let Some((redis, sluice, dir)) = start() else { return };
    let mut diffs = vec![];
    for resp3 in [false, true] {
        let mut b = connect(&redis, &sluice, resp3);
        let ours = redis_names(names_of(&b.sluice.cmd(&["COMMAND", "LIST"]).unwrap()));
        let theirs = names_of(&b.redis.cmd(&["COMMAND", "LIST"]).unwrap());
        assert!(ours.len() > 100, "{}", ours.len());
        let extra: Vec<_> = ours.difference(&theirs).collect();
        assert!(extra.is_empty(), "not Redis 7.0 commands: {extra:?}");
        for name in &ours {
            for sub in ["INFO", "DOCS"] {
                let (r, s) = b.cmd(&["COMMAND", sub, name]);
                if r == s {
                    continue;
                }
                // A container: Redis's subcommands, filtered and sorted.
                let (mut fr, mut fs) = (parse(&r), parse(&s));
                if let (Frame::Array(Some(vr)), Frame::Array(Some(vs))) = (&mut fr, &mut fs) {
                    for f in vr.iter_mut().chain(vs.iter_mut()) {
                        if sub == "INFO" {
                            canon_info(f, &ours);
                        } else {
                            canon_docs_any(f, &ours);
                        }
                    }
                }
                if let (Frame::Map(vr), Frame::Map(vs)) = (&mut fr, &mut fs) {
                    for (_, f) in vr.iter_mut().chain(vs.iter_mut()) {
                        canon_docs(f, &ours);
                    }
                }
                let (er, es) = (scenario::encode(&fr), scenario::encode(&fs));
                if er != es {
                    diffs.push(format!(
                        "COMMAND {sub} {name} (resp3: {resp3})\n  redis:  {}\n  sluice: {}",
                        escape(&er),
                        escape(&es)
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(diffs.is_empty(), "{} replies differ:\n{}", diffs.len(), diffs.join("\n"));
}

#[test]
fn whole_table_count_and_lists() {
    let Some((redis, sluice, dir)) = start() else { return };
    let mut b = connect(&redis, &sluice, false);
    let all = names_of(&b.sluice.cmd(&["COMMAND", "LIST"]).unwrap());
    let all_tops = all.iter().filter(|n| !n.contains('|')).count();
    assert_eq!(b.sluice.cmd(&["COMMAND", "COUNT"]).unwrap(), format!(":{all_tops}\r\n").as_bytes());
    let ours = redis_names(all);
    let tops: BTreeSet<String> = ours.iter().filter(|n| !n.contains('|')).cloned().collect();
    assert_eq!(b.redis.cmd(&["COMMAND", "COUNT"]).unwrap(), b":240\r\n");

    // COMMAND, COMMAND INFO and COMMAND DOCS without names: Sluice's
    // entries, each equal to Redis's.
    for args in [&["COMMAND"][..], &["COMMAND", "INFO"][..]] {
        let (r, s) = b.cmd(args);
        let by_name = |f: Frame| -> Vec<(String, Vec<u8>)> {
            let Frame::Array(Some(v)) = f else { panic!("not an array") };
            let mut out: Vec<(String, Vec<u8>)> = v
                .into_iter()
                .map(|mut e| {
                    canon_info(&mut e, &ours);
                    let Frame::Array(Some(fields)) = &e else { panic!() };
                    (bulk_str(&fields[0]), scenario::encode(&e))
                })
                .collect();
            out.sort();
            out
        };
        let mine: Vec<_> =
            by_name(parse(&s)).into_iter().filter(|(n, _)| tops.contains(n)).collect();
        let theirs: Vec<_> =
            by_name(parse(&r)).into_iter().filter(|(n, _)| tops.contains(n)).collect();
        assert_eq!(mine.len(), tops.len());
        assert!(mine == theirs, "{args:?}: entries differ");
    }
    let (r, s) = b.cmd(&["COMMAND", "DOCS"]);
    let canon = |f: Frame| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = pairs(f)
            .into_iter()
            .map(|(n, mut d)| {
                canon_docs_any(&mut d, &ours);
                (n, scenario::encode(&d))
            })
            .collect();
        v.sort();
        v
    };
    let theirs: Vec<_> = canon(parse(&r)).into_iter().filter(|(n, _)| tops.contains(n)).collect();
    let mine: Vec<_> = canon(parse(&s)).into_iter().filter(|(n, _)| tops.contains(n)).collect();
    assert!(mine == theirs, "COMMAND DOCS: entries differ");

    // LIST with filters: Redis's answer restricted to Sluice's table.
    let mut filters: Vec<Vec<String>> = vec![];
    for cat in [
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "bitmap",
        "hyperloglog",
        "geo",
        "stream",
        "pubsub",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "scripting",
        "nosuch",
        "READ",
        "",
    ] {
        filters.push(vec!["ACLCAT".into(), cat.into()]);
    }
    for pat in ["*", "z*", "config|*", "*|*", "[a-c]*", "?et", "*store*", "CONFIG*", "x\\"] {
        filters.push(vec!["PATTERN".into(), pat.into()]);
    }
    filters.push(vec!["MODULE".into(), "nosuch".into()]);
    let mut diffs = vec![];
    for f in &filters {
        let mut args = vec!["COMMAND", "LIST", "FILTERBY"];
        args.extend(f.iter().map(|s| s.as_str()));
        let (r, s) = b.cmd(&args);
        let theirs: BTreeSet<String> =
            names_of(&r).into_iter().filter(|n| ours.contains(n)).collect();
        let mine = redis_names(names_of(&s));
        if mine != theirs {
            diffs.push(format!("{args:?}: redis {theirs:?}\n  sluice {mine:?}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Command lines for GETKEYS/GETKEYSANDFLAGS, with keys found by range,
/// keyword and keynum specs and by Redis's own finders (SORT, SET).
const KEY_LINES: &[&str] = &[
    "get k",
    "set k v",
    "set k v get",
    "set k v ex 10 GET",
    "mset a 1 b 2 c 3",
    "mset a 1 b",
    "mget a b c",
    "del a b c",
    "exists a",
    "rename a b",
    "renamenx a b",
    "copy a b db 1",
    "move a 1",
    "lmove a b left right",
    "blmove a b left right 0",
    "rpoplpush a b",
    "brpoplpush a b 0",
    "blpop a b c 0",
    "lmpop 2 a b left",
    "lmpop 2 a b left count 2",
    "lmpop 0 a left",
    "lmpop 3 a b left",
    "lmpop x a left",
    "lmpop -1 a left",
    "blmpop 0 2 a b left",
    "zmpop 1 a min",
    "bzmpop 0 2 a b max count 3",
    "bzpopmin a b 0",
    "zunionstore d 2 a b",
    "zunionstore d 2 a b weights 1 2",
    "zunionstore d 0 a",
    "zunionstore d 5 a",
    "zinterstore d 1 a",
    "zdiffstore d 2 a b",
    "zunion 2 a b",
    "zinter 2 a b withscores",
    "zdiff 1 a",
    "zintercard 2 a b limit 3",
    "zrangestore d s 0 -1",
    "sintercard 2 a b",
    "sinterstore d a b",
    "sunionstore d a",
    "smove a b m",
    "sort s",
    "sort s by w get # store d",
    "sort s store d limit 0 1 store e",
    "sort s store",
    "sort_ro s by w",
    "hset h f v",
    "hgetall h",
    "incrbyfloat k 1.5",
    "getex k persist",
    "getdel k",
    "expire k 10",
    "object encoding k",
    "object freq k",
    "debug object k",
    "type k",
    "touch a b",
    "unlink a b",
    "watch a b",
    "setrange k 0 v",
    "append k v",
    "lpush l a b",
    "linsert l before a b",
    "lpos l a rank 1",
    "sadd s a",
    "spop s 2",
    "srandmember s",
    "zadd z 1 a",
    "zrangebyscore z 0 1",
    "pfadd k a",
    "bitcount k",
    "bitop and d a b",
    "xadd s * f v",
    "xread streams a b 0 0",
    "eval s 2 a b c",
    "eval s 0",
    "eval s x",
    "fcall f 1 a",
    "publish c m",
    "ping x",
    "dbsize x",
    "config get x",
    "get",
    "get a b",
    "nosuch a",
    "object nosuch a",
    "scan 0",
    "keys *",
];

#[test]
fn getkeys_and_flags() {
    let Some((redis, sluice, dir)) = start() else { return };
    let mut diffs = vec![];
    let mut compared = 0;
    for resp3 in [false, true] {
        let mut b = connect(&redis, &sluice, resp3);
        let ours = names_of(&b.sluice.cmd(&["COMMAND", "LIST"]).unwrap());
        for line in KEY_LINES {
            let words: Vec<&str> = line.split(' ').collect();
            let name = words[0];
            let implemented = ours.contains(name)
                || (words.len() > 1 && ours.contains(&format!("{name}|{}", words[1])));
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                let mut args = vec!["COMMAND", sub];
                args.extend(&words);
                let (r, s) = b.cmd(&args);
                if !implemented {
                    // Not in Sluice's table: Redis's own reply for an
                    // unknown command.
                    assert_eq!(s, b"-ERR Invalid command specified\r\n", "{line}");
                    continue;
                }
                compared += 1;
                if r != s {
                    diffs.push(format!(
                        "COMMAND {sub} {line} (resp3: {resp3})\n  redis:  {}\n  sluice: {}",
                        escape(&r),
                        escape(&s)
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(compared > 100, "{compared}");
    assert!(diffs.is_empty(), "{} replies differ:\n{}", diffs.len(), diffs.join("\n"));
}

#[test]
fn errors_of_command_subcommands() {
    let Some((redis, sluice, dir)) = start() else { return };
    let mut b = connect(&redis, &sluice, false);
    let mut diffs = vec![];
    for line in [
        "COMMAND FOO",
        "COMMAND COUNT x",
        "COMMAND HELP x",
        "COMMAND GETKEYS",
        "COMMAND GETKEYS get",
        "COMMAND GETKEYSANDFLAGS get",
        "COMMAND LIST FILTERBY",
        "COMMAND LIST FILTERBY ACLCAT",
        "COMMAND LIST FILTERBY ACLCAT read x",
        "COMMAND LIST FILTERBY FOO x",
        "COMMAND LIST x",
        "COMMAND INFO nosuch get config|nosuch config|get",
        "COMMAND INFO GET",
        "COMMAND INFO CONFIG|GET",
        "COMMAND DOCS nosuch GET",
        "COMMAND DOCS config|nosuch",
        "COMMAND HELP",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        let (r, s) = b.cmd(&args);
        if r != s {
            diffs.push(format!("{line}\n  redis:  {}\n  sluice: {}", escape(&r), escape(&s)));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// INFO commandstats/errorstats/latencystats after the same commands on
/// both servers: calls, rejected and failed counts and error counts equal
/// (usec differ, so they are left out), and latency lines exist for the
/// same commands.
#[test]
fn command_and_error_stats() {
    let Some((redis, sluice, dir)) = start() else { return };
    let mut b = connect(&redis, &sluice, false);
    let mut other = connect(&redis, &sluice, true);
    let script: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["GET", "k"],
        &["GET"],
        &["GET", "a", "b"],
        &["INCR", "k"],
        &["LPUSH", "k", "x"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "NOSUCH"],
        &["CONFIG", "GET"],
        &["CONFIG"],
        &["NOSUCHCMD", "x"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["INCR", "k"],
        &["LPUSH", "a", "x"],
        &["EXEC"],
        &["MULTI"],
        &["GET"],
        &["EXEC"],
        &["EXEC"],
        &["DISCARD"],
        &["EXPIRE", "k", "10"],
        &["DEL", "k"],
        &["BLPOP", "nokey", "0.01"],
        &["HSET", "h", "f", "v"],
        &["HGET", "h", "f"],
        &["ZADD", "z", "1", "a"],
        &["ZADD", "z", "x", "a"],
        &["OBJECT", "ENCODING", "h"],
        &["OBJECT", "FREQ", "h"],
        &["COMMAND", "COUNT"],
        &["COMMAND", "INFO", "get"],
        &["CLIENT", "SETNAME", "x"],
        &["PING"],
        &["ECHO", "x"],
        &["SELECT", "99"],
        &["SET", "k", "v", "EX", "0"],
        &["SORT", "h"],
        // redis.call's refusals count as the command's rejected calls
        // (wrong arity included, which Sluice missed), its failures as
        // the command's failed calls.
        &["EVAL", "return redis.pcall('hlen')", "0"],
        &["EVAL", "return redis.pcall('nosuchcmd')", "0"],
        &["EVAL_RO", "return redis.pcall('append', 'k', 'v')", "0"],
        &["EVAL", "return redis.pcall('hget', 'k', 'f')", "0"],
        &["EVAL", "return redis.pcall('strlen', 'h')", "0"],
    ];
    for args in script {
        b.cmd(args);
    }
    // Protocol errors are error replies too.
    for bad in [&b"*1\r\n$x\r\n"[..], b"\"unbalanced\r\n"] {
        for port in [redis.port(), sluice.port()] {
            let mut c = Client::connect(port).unwrap();
            c.send_raw(bad).unwrap();
            let reply = c.read_reply().unwrap();
            assert!(reply.starts_with(b"-ERR Protocol error"), "{}", escape(&reply));
        }
    }
    // A blocked client served by another's push counts one call.
    b.redis.send(&["BLPOP", "q", "0"]).unwrap();
    b.sluice.send(&["BLPOP", "q", "0"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    other.cmd(&["RPUSH", "q", "x"]);
    b.redis.read_reply().unwrap();
    b.sluice.read_reply().unwrap();
    // A wait ended by CLIENT UNBLOCK … ERROR: a failed call and an
    // UNBLOCKED error; one ended without error: a call.
    for error in [true, false] {
        let id = |c: &mut Client| -> String {
            let r = c.cmd(&["CLIENT", "ID"]).unwrap();
            String::from_utf8(r[1..r.len() - 2].to_vec()).unwrap()
        };
        let (rid, sid) = (id(&mut b.redis), id(&mut b.sluice));
        b.redis.send(&["BRPOP", "q2", "0"]).unwrap();
        b.sluice.send(&["BRPOP", "q2", "0"]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let how = if error { "ERROR" } else { "TIMEOUT" };
        other.redis.cmd(&["CLIENT", "UNBLOCK", &rid, how]).unwrap();
        other.sluice.cmd(&["CLIENT", "UNBLOCK", &sid, how]).unwrap();
        let (r, s) = (b.redis.read_reply().unwrap(), b.sluice.read_reply().unwrap());
        assert_eq!(r, s);
    }

    let stats = |c: &mut Client, section: &str| -> BTreeSet<String> {
        let r = c.cmd(&["INFO", section]).unwrap();
        let f = parse(&r);
        let text = match f {
            Frame::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
            Frame::Verbatim(_, t) => String::from_utf8(t).unwrap(),
            other => panic!("{other:?}"),
        };
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                // Keep what is deterministic: counts, names.
                let (name, fields) = l.split_once(':').unwrap_or((l, ""));
                // Percentiles keep their names (`p99.9`), not values.
                let kept: Vec<&str> = fields
                    .split(',')
                    .filter(|f| !f.starts_with("usec"))
                    .map(|f| if f.starts_with('p') { f.split('=').next().unwrap() } else { f })
                    .collect();
                format!("{name}:{}", kept.join(","))
            })
            .collect()
    };
    let mut diffs = vec![];
    for section in ["commandstats", "errorstats", "latencystats"] {
        let (r, s) = (stats(&mut b.redis, section), stats(&mut b.sluice, section));
        if r != s {
            let only_r: Vec<_> = r.difference(&s).collect();
            let only_s: Vec<_> = s.difference(&r).collect();
            diffs.push(format!("{section}: redis only {only_r:?}\n  sluice only {only_s:?}"));
        }
    }
    let total = |c: &mut Client| -> String {
        let r = String::from_utf8(c.cmd(&["INFO", "stats"]).unwrap()).unwrap();
        r.lines().find(|l| l.starts_with("total_error_replies:")).unwrap().to_string()
    };
    let (tr, ts) = (total(&mut b.redis), total(&mut b.sluice));
    if tr != ts {
        diffs.push(format!("redis {tr}, sluice {ts}"));
    }
    // CONFIG RESETSTAT clears them all; the reset itself then counts.
    b.cmd(&["CONFIG", "RESETSTAT"]);
    for section in ["commandstats", "errorstats", "latencystats"] {
        let (r, s) = (stats(&mut b.redis, section), stats(&mut b.sluice, section));
        if r != s {
            diffs.push(format!("after RESETSTAT, {section}: redis {r:?}\n  sluice {s:?}"));
        }
    }
    // Which percentiles are printed, and their configuration's errors.
    for args in [
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "0 100 99.99999 1e1"][..],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "101"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "abc"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "50 nan"],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
    ] {
        let (r, s) = b.cmd(args);
        if r != s {
            diffs.push(format!("{args:?}: redis {}, sluice {}", escape(&r), escape(&s)));
        }
    }
    let (r, s) = (stats(&mut b.redis, "latencystats"), stats(&mut b.sluice, "latencystats"));
    if r != s {
        diffs.push(format!("percentiles: redis {r:?}\n  sluice {s:?}"));
    }
    b.cmd(&["CONFIG", "SET", "latency-tracking-info-percentiles", ""]);
    let (r, s) = (stats(&mut b.redis, "latencystats"), stats(&mut b.sluice, "latencystats"));
    if r != s {
        diffs.push(format!("no percentiles: redis {r:?}\n  sluice {s:?}"));
    }
    // latency-tracking no: no new histograms.
    b.cmd(&["CONFIG", "SET", "latency-tracking", "no"]);
    b.cmd(&["LLEN", "q"]);
    let (r, s) = (stats(&mut b.redis, "latencystats"), stats(&mut b.sluice, "latencystats"));
    if r != s {
        diffs.push(format!("latency-tracking no: redis {r:?}\n  sluice {s:?}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
