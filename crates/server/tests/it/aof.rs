//! The append-only file against redis-server 7.0.15: the same scenario
//! run on both servers with `appendonly yes` leaves the same commands in
//! their incremental files (absolute times aside); an appendonlydir
//! written by either server loads into the other with the same data set;
//! torn and corrupt files give Redis's log lines (compared with what
//! redis-server logs for the very same files); BGREWRITEAOF, CONFIG SET
//! appendonly and the INFO fields.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use persist::aof::{CommandReader, Item, Manifest};
use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

fn cmd(c: &mut Client, args: &[&[u8]]) -> Frame {
    c.send(args).expect("send");
    c.read_frame().expect("reply")
}

fn line(c: &mut Client, l: &str) -> Frame {
    let args: Vec<&[u8]> = l.split(' ').map(str::as_bytes).collect();
    cmd(c, &args)
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(Some(b)) | Frame::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn info(c: &mut Client) -> String {
    text(&cmd(c, &[b"INFO", b"persistence"]))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The manifest of `dir/appendonlydir`.
fn manifest(dir: &Path) -> Manifest {
    let text = std::fs::read(dir.join("appendonlydir/appendonly.aof.manifest")).expect("manifest");
    Manifest::parse(&text).expect("parse manifest")
}

/// The commands of every incremental file, with absolute times (integers
/// of 10 or more digits: unix seconds or ms) blanked.
fn incr_commands(dir: &Path) -> Vec<String> {
    let m = manifest(dir);
    let mut out = Vec::new();
    for i in &m.incr {
        let bytes = std::fs::read(dir.join("appendonlydir").join(&i.name)).expect("incr file");
        let mut r = CommandReader::new(&bytes, 0);
        while let Some(item) = r.next_item().expect("well-formed incr file") {
            if let Item::Command { argv, .. } = item {
                let words: Vec<String> = argv
                    .iter()
                    .map(|a| {
                        let s = String::from_utf8_lossy(a).into_owned();
                        if s.len() >= 10 && s.bytes().all(|b| b.is_ascii_digit()) {
                            "T".into()
                        } else {
                            s
                        }
                    })
                    .collect();
                out.push(words.join(" "));
            }
        }
    }
    out
}

/// Commands of every family, in Redis's propagation forms: relative
/// expiries become absolute, blocking pops served become pops, scripts
/// propagate their effects, a transaction is wrapped in MULTI/EXEC, a
/// key found expired goes out as DEL before the command that met it.
const SCENARIO: &[&str] = &[
    // Strings and expiry forms.
    "SET s1 v1",
    "SET s2 v2 EX 100",
    "SET s3 v3 PX 100000",
    "SET s4 v4 EXAT 4102444800",
    "SET s5 v5 KEEPTTL",
    "SETEX s6 100 v6",
    "PSETEX s7 100000 v7",
    "SETNX s1 no",
    "SETNX s8 yes",
    "GETSET s1 v1b",
    "GETEX s1 EX 200",
    "GETEX s1 PERSIST",
    "GETDEL s8",
    "APPEND s1 tail",
    "INCR n1",
    "INCRBY n1 10",
    "DECRBY n1 3",
    "INCRBYFLOAT f1 1.5",
    "INCRBYFLOAT f1 2.25e2",
    "MSET m1 a m2 b",
    "MSETNX m3 c m4 d",
    "SETRANGE s1 2 XY",
    "SET s9 x NX GET",
    "SET s9 y XX GET",
    // Keys.
    "EXPIRE s1 100",
    "PEXPIRE s9 100000",
    "EXPIREAT m1 4102444800",
    "PEXPIREAT m2 4102444800000",
    "PERSIST m2",
    "EXPIRE m3 -1",
    "RENAME m4 m4b",
    "RENAMENX m4b m5",
    "COPY m5 m6",
    "DEL m5 nokey",
    "UNLINK m6",
    "TOUCH s1",
    "MOVE s9 3",
    "SELECT 3",
    "SET db3key x",
    "SWAPDB 3 4",
    "SELECT 0",
    // Lists.
    "RPUSH l1 a b c d e",
    "LPUSH l1 z",
    "LPUSHX nolist x",
    "LINSERT l1 BEFORE c cc",
    "LSET l1 0 zz",
    "LREM l1 1 b",
    "LTRIM l1 0 4",
    "LPOP l1",
    "RPOP l1 2",
    "RPOPLPUSH l1 l2",
    "LMOVE l2 l1 LEFT RIGHT",
    "BLPOP l1 0.1",
    "BRPOPLPUSH l1 l3 0.1",
    "BLMOVE l3 l1 RIGHT LEFT 0.1",
    "LMPOP 1 l1 LEFT COUNT 1",
    "BLMPOP 0.1 1 l1 RIGHT",
    "BLPOP emptylist 0.01",
    // Hashes.
    "HSET h1 a 1 b 2 c 3",
    "HSETNX h1 a x",
    "HSETNX h1 d 4",
    "HMSET h1 e 5",
    "HDEL h1 b nofield",
    "HINCRBY h1 a 5",
    "HINCRBYFLOAT h1 c 0.5",
    // Sets.
    "SADD st1 a b c d",
    "SREM st1 d",
    "SMOVE st1 st2 a",
    "SINTERSTORE st3 st1 st2",
    "SUNIONSTORE st4 st1 st2",
    "SDIFFSTORE st5 st1 st2",
    "SADD st6 x",
    "SPOP st6",
    // Sorted sets.
    "ZADD z1 1 a 2 b 3 c 4 d",
    "ZADD z1 XX INCR 10 a",
    "ZINCRBY z1 2.5 b",
    "ZREM z1 d",
    "ZPOPMIN z1",
    "ZPOPMAX z1 1",
    "ZADD z2 1 x 2 y 3 z",
    "ZREMRANGEBYSCORE z2 3 3",
    "ZREMRANGEBYRANK z2 0 0",
    "ZADD z3 0 a 0 b 0 c",
    "ZREMRANGEBYLEX z3 [a [a",
    "ZUNIONSTORE z4 2 z1 z2",
    "ZINTERSTORE z5 2 z1 z2",
    "ZRANGESTORE z6 z3 0 -1",
    "BZPOPMIN z3 0.1",
    "BZPOPMAX z3 0.1",
    "ZMPOP 1 z1 MIN",
    "BZMPOP 0.1 1 z4 MAX COUNT 2",
    // Streams with explicit IDs.
    "XADD x1 1-1 f v",
    "XADD x1 2-1 f v2",
    "XADD x1 MAXLEN 5 3-1 f v3",
    "XGROUP CREATE x1 g1 0",
    "XREADGROUP GROUP g1 c1 COUNT 1 STREAMS x1 >",
    "XACK x1 g1 1-1",
    "XREADGROUP GROUP g1 c1 STREAMS x1 >",
    "XCLAIM x1 g1 c2 0 2-1",
    "XDEL x1 3-1",
    "XTRIM x1 MAXLEN 1",
    "XSETID x1 10-0",
    "XGROUP CREATECONSUMER x1 g1 c3",
    "XGROUP DELCONSUMER x1 g1 c3",
    "XGROUP SETID x1 g1 0",
    "XGROUP DESTROY x1 g1",
    // Bitmaps, HyperLogLog, geo.
    "SETBIT b1 7 1",
    "SETBIT b1 100 1",
    "BITOP OR b2 b1 b1",
    "BITFIELD b3 SET u8 0 200 INCRBY u8 0 100",
    "PFADD hll1 a b c",
    "PFADD hll2 c d",
    "PFMERGE hll3 hll1 hll2",
    "GEOADD g1 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOSEARCHSTORE g2 g1 FROMLONLAT 15 37 BYRADIUS 200 km ASC",
    // Scripts propagate their effects.
    "EVAL redis.call('set','sc1','1');redis.call('incr','sc1') 0",
    "EVAL redis.call('set',KEYS[1],ARGV[1]) 1 sc2 val",
    "EVAL return 1 0",
    // Transactions.
    "MULTI",
    "SET t1 1",
    "INCR t1",
    "LPUSH t2 a",
    "EXEC",
    "MULTI",
    "SET t3 1",
    "EXEC",
    "MULTI",
    "GET t1",
    "EXEC",
    // Expiry found lazily: DEL before the command, in MULTI/EXEC (active
    // expiry, which would make it a DEL of its own, is off).
    "DEBUG SET-ACTIVE-EXPIRE 0",
    "SET lazy x PX 1",
    "DEBUG SLEEP 0.05",
    "SET lazy y",
    "DEBUG SET-ACTIVE-EXPIRE 1",
    // Flushes.
    "SELECT 5",
    "SET db5 x",
    "FLUSHDB",
    "SELECT 0",
];

/// Runs the scenario on one connection (the blocking part on two).
fn run_scenario(port: u16) {
    let mut c = Client::connect(port).unwrap();
    let mut blocked = Client::connect(port).unwrap();
    for l in SCENARIO {
        let r = line(&mut c, l);
        if let Frame::Error(e) = &r {
            // Errors are part of the scenario too (MOVE to a db holding
            // the key…); they must not propagate.
            let _ = e;
        }
    }
    // A blocked pop served by another client's push propagates as a pop.
    blocked.send(&[&b"BLPOP"[..], b"served", b"0"]).unwrap();
    wait_for("the BLPOP to block", || text(&line(&mut c, "CLIENT LIST")).contains("cmd=blpop"));
    line(&mut c, "RPUSH served a b");
    assert!(matches!(blocked.read_frame().unwrap(), Frame::Array(Some(_))));
    blocked.send(&[&b"BZPOPMIN"[..], b"zserved", b"0"]).unwrap();
    wait_for("the BZPOPMIN to block", || {
        text(&line(&mut c, "CLIENT LIST")).contains("cmd=bzpopmin")
    });
    line(&mut c, "ZADD zserved 1 a 2 b");
    assert!(matches!(blocked.read_frame().unwrap(), Frame::Array(Some(_))));
    line(&mut c, "FLUSHALL");
    line(&mut c, "SET last 1");
}

fn start_pair(tag: &str, extra: &[&str]) -> Option<(TestServer, RedisServer, PathBuf, PathBuf)> {
    let sdir = scratch_dir(&format!("{tag}-s"));
    let rdir = scratch_dir(&format!("{tag}-r"));
    let mut args = vec!["--appendonly", "yes", "--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    let mut rargs = args.clone();
    let rd = rdir.to_str().unwrap().to_string();
    rargs.extend_from_slice(&["--dir", &rd]);
    let redis = RedisServer::start_with(&rargs, Some(&rdir))?;
    let sluice = TestServer::start_with(&TestServer::default_bin(), &args, Some(&sdir));
    Some((sluice, redis, sdir, rdir))
}

#[test]
fn incremental_files_match_redis_command_for_command() {
    let Some((sluice, redis, sdir, rdir)) = start_pair("aof-diff", &["--appendfsync", "always"])
    else {
        return;
    };
    sluice.client().wait_loaded();
    redis.client().wait_loaded();
    run_scenario(redis.port());
    run_scenario(sluice.port());
    let theirs = incr_commands(&rdir);
    let ours = incr_commands(&sdir);
    for (i, (a, b)) in theirs.iter().zip(&ours).enumerate() {
        assert_eq!(
            a,
            b,
            "command {i} differs; redis around it: {:?}",
            &theirs[i.saturating_sub(3)..(i + 3).min(theirs.len())]
        );
    }
    assert_eq!(theirs.len(), ours.len(), "command counts: redis {theirs:?}\nsluice {ours:?}");
    drop((sluice, redis));
    let _ = std::fs::remove_dir_all(&sdir);
    let _ = std::fs::remove_dir_all(&rdir);
}

/// Every key of every database with its type, absolute expiry and value
/// (members sorted where the type has no order), in a canonical order.
fn snapshot(c: &mut Client) -> Vec<String> {
    c.wait_loaded();
    let items = |f: Frame| -> Vec<String> {
        match f {
            Frame::Array(Some(a)) => a.iter().map(text).collect(),
            other => vec![text(&other)],
        }
    };
    let mut out = Vec::new();
    for db in 0..16 {
        line(c, &format!("SELECT {db}"));
        let mut keys = items(cmd(c, &[b"KEYS", b"*"]));
        keys.sort();
        for k in keys {
            let kb = k.as_bytes();
            let ty = text(&cmd(c, &[b"TYPE", kb]));
            let exp = text(&cmd(c, &[b"PEXPIRETIME", kb]));
            let mut val = match ty.as_str() {
                "string" => vec![text(&cmd(c, &[b"GET", kb]))],
                "list" => items(cmd(c, &[b"LRANGE", kb, b"0", b"-1"])),
                "hash" => items(cmd(c, &[b"HGETALL", kb])).chunks(2).map(|p| p.join("=")).collect(),
                "set" => items(cmd(c, &[b"SMEMBERS", kb])),
                "zset" => items(cmd(c, &[b"ZRANGE", kb, b"0", b"-1", b"WITHSCORES"])),
                "stream" => vec![
                    format!("{:?}", cmd(c, &[b"XRANGE", kb, b"-", b"+"])),
                    format!("{:?}", cmd(c, &[b"XINFO", b"GROUPS", kb])),
                ],
                other => panic!("unexpected type {other}"),
            };
            if matches!(ty.as_str(), "hash" | "set") {
                val.sort();
            }
            out.push(format!("db{db} {k:?} {ty} exp={exp} {}", val.join("|")));
        }
    }
    line(c, "SELECT 0");
    out
}

/// A data set built by the scenario, a BGREWRITEAOF half-way (so the base
/// holds part of it and the incremental file the rest) and a thousand
/// more keys.
fn build(c: &mut Client) {
    for l in &SCENARIO[..SCENARIO.len() / 2] {
        line(c, l);
    }
    line(c, "BGREWRITEAOF");
    wait_for("the rewrite", || info(c).contains("aof_rewrite_in_progress:0"));
    for l in &SCENARIO[SCENARIO.len() / 2..] {
        line(c, l);
    }
    line(c, "SET lazy gone PX 1");
    for i in 0..1000 {
        c.send(&[b"SET".to_vec(), format!("k:{i}").into_bytes(), format!("v{i}").into_bytes()])
            .unwrap();
    }
    for _ in 0..1000 {
        c.read_frame().unwrap();
    }
    line(c, "HSET big:h f1 v1 f2 v2");
    line(c, "ZADD big:z 1.5 a 2.5 b");
    // More than 64 items (a base of commands splits them), a stream with
    // a group, pending entries and a consumer without any.
    for i in 0..150 {
        line(c, &format!("RPUSH big:l e{i}"));
        line(c, &format!("SADD big:s m{i}"));
        line(c, &format!("ZADD big:zz {i}.25 m{i}"));
        line(c, &format!("HSET big:hh f{i} v{i}"));
    }
    for i in 1..=5 {
        line(c, &format!("XADD big:x {i}-0 f v{i}"));
    }
    line(c, "XDEL big:x 2-0");
    line(c, "XGROUP CREATE big:x g 0");
    line(c, "XREADGROUP GROUP g alice COUNT 2 STREAMS big:x >");
    line(c, "XGROUP CREATECONSUMER big:x g bob");
    line(c, "XADD big:empty MAXLEN 0 1-1 a b");
    line(c, "PEXPIRE big:l 100000000");
}

/// SHUTDOWN NOSAVE (the AOF is fsynced on the way out), waiting for the
/// connection to close.
fn shutdown(c: &mut Client) {
    c.send(&[&b"SHUTDOWN"[..], b"NOSAVE"]).unwrap();
    let _ = c.read_to_close(Duration::from_secs(10));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn appendonlydirs_load_both_ways() {
    both_ways(&["--appendonly", "yes", "--aof-timestamp-enabled", "yes"]);
}

/// The same with bases of commands (`aof-use-rdb-preamble no`) on both
/// sides.
#[test]
fn appendonlydirs_with_command_bases_load_both_ways() {
    both_ways(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
}

fn both_ways(flags: &[&str]) {
    let rdir = scratch_dir("aof-r2s");
    let rd = rdir.to_str().unwrap().to_string();
    let Some(redis) = RedisServer::start_with(&[flags, &["--dir", &rd]].concat(), Some(&rdir))
    else {
        return;
    };
    let mut r = redis.client();
    build(&mut r);
    let before = snapshot(&mut r);
    assert!(before.len() > 1000);
    shutdown(&mut r);
    drop(redis);
    // Redis's directory, as Redis left it, into Sluice.
    let sdir = scratch_dir("aof-r2s-s");
    copy_dir(&rdir.join("appendonlydir"), &sdir.join("appendonlydir"));
    let sluice = TestServer::start_with(&TestServer::default_bin(), flags, Some(&sdir));
    let mut s = sluice.client();
    assert_eq!(snapshot(&mut s), before, "Redis's appendonlydir as Sluice loaded it");
    // Sluice appends to Redis's files and rewrites them; Redis reads them back.
    line(&mut s, "SET added-by-sluice 1");
    line(&mut s, "BGREWRITEAOF");
    wait_for("the rewrite", || info(&mut s).contains("aof_rewrite_in_progress:0"));
    line(&mut s, "RPUSH after-rewrite a b");
    let base = manifest(&sdir).base.expect("a base").name;
    let want = if flags.contains(&"no") { ".base.aof" } else { ".base.rdb" };
    assert!(base.ends_with(want), "{base}");
    let ours = snapshot(&mut s);
    assert_eq!(ours.len(), before.len() + 2);
    shutdown(&mut s);
    drop(sluice);
    let back = scratch_dir("aof-s2r");
    copy_dir(&sdir.join("appendonlydir"), &back.join("appendonlydir"));
    let bd = back.to_str().unwrap().to_string();
    let redis =
        RedisServer::start_with(&[flags, &["--dir", &bd]].concat(), Some(&back)).expect("oracle");
    assert_eq!(snapshot(&mut redis.client()), ours, "Sluice's appendonlydir as Redis loaded it");
    drop(redis);
    for d in [rdir, sdir, back] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The messages of a server log (pid, role, date and level cut off) that
/// are about loading the AOF.
fn aof_messages(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.splitn(7, ' ').nth(6))
        .filter(|m| {
            ["AOF", "append", "DB loaded", "Truncat", "short read", "MULTI", "Unknown command"]
                .iter()
                .any(|w| m.contains(w))
                && !m.contains("Opening")
                && !m.contains("Creating")
        })
        .map(str::to_string)
        .collect()
}

/// Starts `bin` on `dir` with the AOF on and returns its AOF messages,
/// whether it refused to start (exited) or loaded (then it is stopped).
fn load_messages(bin: &Path, dir: &Path, extra: &[&str]) -> (bool, Vec<String>) {
    let port = testkit::free_port().to_string();
    let mut args = vec![
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = dir.join(format!("log-{port}.txt"));
    let f = std::fs::File::create(&out).unwrap();
    let mut child = std::process::Command::new(bin)
        .args(&args)
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let refused = loop {
        if let Ok(Some(_)) = child.try_wait() {
            break true;
        }
        let log = std::fs::read_to_string(&out).unwrap_or_default();
        if log.contains("DB loaded from append only file") {
            std::thread::sleep(Duration::from_millis(50));
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{log}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let log = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    (refused, aof_messages(&log))
}

/// Runs both servers on copies of `dir` and compares what they say.
fn same_verdict(dir: &Path, extra: &[&str]) -> (bool, Vec<String>, PathBuf, PathBuf) {
    let sdir = scratch_dir("aof-verdict-s");
    let rdir = scratch_dir("aof-verdict-r");
    copy_dir(&dir.join("appendonlydir"), &sdir.join("appendonlydir"));
    copy_dir(&dir.join("appendonlydir"), &rdir.join("appendonlydir"));
    let theirs = load_messages(Path::new(testkit::REDIS_SERVER), &rdir, extra);
    let ours = load_messages(&TestServer::default_bin(), &sdir, extra);
    // Durations differ; the rest must not.
    let strip = |v: &[String]| -> Vec<String> {
        v.iter().map(|m| m.split(": 0.").next().unwrap_or(m).to_string()).collect()
    };
    assert_eq!(strip(&ours.1), strip(&theirs.1), "what the servers said about {extra:?}");
    assert_eq!(ours.0, theirs.0, "refused to start");
    (ours.0, ours.1, sdir, rdir)
}

#[test]
fn torn_and_corrupt_files_get_redis_messages() {
    if !Path::new(testkit::REDIS_SERVER).is_file() {
        return;
    }
    let dir = scratch_dir("aof-torn");
    {
        let sluice = TestServer::start_with(
            &TestServer::default_bin(),
            &["--appendonly", "yes", "--appendfsync", "always"],
            Some(&dir),
        );
        let mut s = sluice.client();
        s.wait_loaded();
        line(&mut s, "SET a 1");
        line(&mut s, "MULTI");
        line(&mut s, "SET b 2");
        line(&mut s, "SET b2 2");
        line(&mut s, "EXEC");
        line(&mut s, "SET c 3");
    }
    let m = manifest(&dir);
    let incr = dir.join("appendonlydir").join(&m.incr[0].name);
    let good = std::fs::read(&incr).unwrap();
    // A torn last command: loaded anyway, cut at the last whole command.
    let mut torn = good.clone();
    torn.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nd\r\n$2\r\n4");
    std::fs::write(&incr, &torn).unwrap();
    let (refused, msgs, sdir, rdir) = same_verdict(&dir, &[]);
    assert!(!refused);
    assert!(msgs.iter().any(|m| m.contains("Truncating the AOF")), "{msgs:?}");
    let name = &m.incr[0].name;
    let cut = std::fs::read(sdir.join("appendonlydir").join(name)).unwrap();
    assert_eq!(cut, good, "the torn tail is cut off on disk");
    assert_eq!(cut, std::fs::read(rdir.join("appendonlydir").join(name)).unwrap());
    // The same with aof-load-truncated no: refused.
    let (refused, msgs, ..) = same_verdict(&dir, &["--aof-load-truncated", "no"]);
    assert!(refused);
    assert!(msgs.iter().any(|m| m.contains("Unexpected end of file")), "{msgs:?}");
    // An unfinished MULTI at the end is reverted.
    let at = good.windows(5).position(|w| w == b"MULTI").unwrap() - 8;
    let end_exec = good.windows(4).position(|w| w == b"EXEC").unwrap() - 8;
    let mut open_multi = good[..end_exec].to_vec();
    std::fs::write(&incr, &open_multi).unwrap();
    let (refused, msgs, sdir, _) = same_verdict(&dir, &[]);
    assert!(!refused);
    assert!(msgs.iter().any(|m| m.contains("Revert incomplete MULTI/EXEC")), "{msgs:?}");
    open_multi.truncate(at);
    assert_eq!(std::fs::read(sdir.join("appendonlydir").join(name)).unwrap(), open_multi);
    // Garbage in the middle: refused, with the file named.
    let mut corrupt = good.clone();
    corrupt.splice(at..at, b"garbage\r\n".iter().copied());
    std::fs::write(&incr, &corrupt).unwrap();
    let (refused, msgs, ..) = same_verdict(&dir, &[]);
    assert!(refused);
    assert!(msgs.iter().any(|m| m.contains("Bad file format")), "{msgs:?}");
    // A command neither server knows.
    let mut unknown = good.clone();
    unknown.extend_from_slice(b"*1\r\n$7\r\nNOTACMD\r\n");
    std::fs::write(&incr, &unknown).unwrap();
    let (refused, msgs, ..) = same_verdict(&dir, &[]);
    assert!(refused);
    assert!(msgs.iter().any(|m| m.contains("Unknown command 'NOTACMD'")), "{msgs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} missing from {info}"))
        .trim()
        .to_string()
}

/// The lines of a manifest file, for comparison.
fn manifest_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap_or_default()
}

/// BGREWRITEAOF with the AOF off, CONFIG SET appendonly yes and no at run
/// time, a rewrite behind a BGSAVE, an automatic rewrite: the same
/// replies, manifests and INFO fields as redis-server, and the data set
/// survives a restart.
#[test]
fn rewrites_and_config_set_appendonly_as_redis() {
    let sdir = scratch_dir("aof-rt-s");
    let rdir = scratch_dir("aof-rt-r");
    let rd = rdir.to_str().unwrap().to_string();
    let Some(redis) = RedisServer::start_with(&["--dir", &rd], Some(&rdir)) else { return };
    let sluice = TestServer::start_with(&TestServer::default_bin(), &[], Some(&sdir));
    let mut both = [(sluice.client(), sdir.clone()), (redis.client(), rdir.clone())];
    let mut steps: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    for (i, (c, dir)) in both.iter_mut().enumerate() {
        let log = &mut steps[i];
        line(c, "SET a 1");
        log.push(text(&line(c, "BGREWRITEAOF")));
        wait_for("rewrite", || field(&info(c), "aof_rewrite_in_progress") == "0");
        log.push(manifest_text(dir));
        log.push(text(&line(c, "CONFIG SET appendonly yes")));
        wait_for("rewrite", || field(&info(c), "aof_rewrite_in_progress") == "0");
        line(c, "SET b 2");
        log.push(manifest_text(dir));
        let inf = info(c);
        for f in ["aof_enabled", "aof_rewrites", "aof_last_bgrewrite_status", "aof_pending_rewrite"]
        {
            log.push(format!("{f}={}", field(&inf, f)));
        }
        // The aof_* field names, in order.
        let names: Vec<&str> = inf
            .lines()
            .filter(|l| l.starts_with("aof_"))
            .map(|l| l.split(':').next().unwrap())
            .collect();
        log.push(names.join(","));
        // A rewrite asked for while a BGSAVE runs is scheduled, then runs.
        line(c, "CONFIG SET rdb-key-save-delay 200000");
        line(c, "BGSAVE");
        log.push(text(&line(c, "BGREWRITEAOF")));
        log.push(field(&info(c), "aof_rewrite_scheduled"));
        line(c, "CONFIG SET rdb-key-save-delay 0");
        wait_for("scheduled rewrite", || {
            let inf = info(c);
            field(&inf, "aof_rewrites") == "3" && field(&inf, "aof_rewrite_in_progress") == "0"
        });
        log.push(manifest_text(dir));
        // Off again: nothing more is appended.
        log.push(text(&line(c, "CONFIG SET appendonly no")));
        log.push(field(&info(c), "aof_enabled"));
        line(c, "SET c 3");
        // Inside a transaction holding a key's stripe: the rewrite begins
        // after it (a snapshot needs every stripe).
        line(c, "MULTI");
        line(c, "SET d 4");
        line(c, "CONFIG SET appendonly yes");
        line(c, "BGREWRITEAOF");
        log.push(format!("{:?}", line(c, "EXEC")));
        wait_for("rewrite after EXEC", || {
            let inf = info(c);
            field(&inf, "aof_rewrite_in_progress") == "0"
                && field(&inf, "aof_rewrite_scheduled") == "0"
                && field(&inf, "aof_rewrites") == "4"
        });
        log.push(manifest_text(dir));
        line(c, "DEL d");
        line(c, "CONFIG SET appendonly no");
    }
    assert_eq!(steps[0], steps[1], "sluice (left) and redis (right)");
    // Sluice's directory (the last base has a, b and c; d was deleted
    // before the AOF went off) loads just that.
    drop(both);
    drop(sluice);
    let again =
        TestServer::start_with(&TestServer::default_bin(), &["--appendonly", "yes"], Some(&sdir));
    let mut c = again.client();
    c.wait_loaded();
    let bulk = |v: Option<&[u8]>| Frame::Bulk(v.map(<[u8]>::to_vec));
    assert_eq!(
        line(&mut c, "MGET a b c d"),
        Frame::Array(Some(vec![bulk(Some(b"1")), bulk(Some(b"2")), bulk(Some(b"3")), bulk(None)]))
    );
    // Automatic rewrite: past the minimum size and 100% growth.
    line(&mut c, "CONFIG SET auto-aof-rewrite-min-size 1000");
    let before = field(&info(&mut c), "aof_rewrites");
    for i in 0..100 {
        line(&mut c, &format!("SET key{i} {}", "x".repeat(50)));
    }
    wait_for("automatic rewrite", || field(&info(&mut c), "aof_rewrites") != before);
    drop(again);
    let _ = std::fs::remove_dir_all(&sdir);
    let _ = std::fs::remove_dir_all(&rdir);
}

/// Each fsync policy writes what it acknowledges and, idle, costs nothing
/// (the writer thread sleeps; `everysec` wakes to fsync once).
#[test]
fn every_policy_appends_and_idles() {
    for policy in ["always", "everysec", "no"] {
        let dir = scratch_dir(&format!("aof-idle-{policy}"));
        let s = TestServer::start_with(
            &TestServer::default_bin(),
            &["--appendonly", "yes", "--appendfsync", policy],
            Some(&dir),
        );
        let mut c = s.client();
        c.wait_loaded();
        line(&mut c, "SET k v");
        assert_eq!(incr_commands(&dir), ["SELECT 0", "SET k v"], "{policy}");
        let before = crate::common::cpu_secs(s.pid());
        std::thread::sleep(Duration::from_millis(1500));
        let used = crate::common::cpu_secs(s.pid()) - before;
        assert!(used < 0.3, "{policy}: {used} s of CPU while idle");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Regression: a transaction read back from the AOF ran its queue as a
/// client's EXEC, so `XTRIM … LIMIT` without `~` (the exact trim a master
/// or the AOF writes out) was refused inside MULTI/EXEC instead of taking
/// the replay's exemption. The same appendonlydir loads into redis-server
/// and into Sluice with the same data set.
#[test]
fn replayed_multi_with_xtrim_limit_loads_as_redis() {
    let mut aof = Vec::new();
    let mut put = |args: &[&str]| {
        aof.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            aof.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    };
    put(&["SELECT", "0"]);
    for i in 1..=6 {
        put(&["XADD", "s", &format!("{i}-0"), "f", &format!("v{i}")]);
    }
    put(&["MULTI"]);
    put(&["XTRIM", "s", "MAXLEN", "3", "LIMIT", "100"]);
    put(&["XADD", "s", "MAXLEN", "2", "LIMIT", "100", "7-0", "f", "v7"]);
    put(&["EXEC"]);
    put(&["SET", "after", "1"]);
    let write = |dir: &Path| {
        let d = dir.join("appendonlydir");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("appendonly.aof.manifest"),
            "file appendonly.aof.1.incr.aof seq 1 type i\n",
        )
        .unwrap();
        std::fs::write(d.join("appendonly.aof.1.incr.aof"), &aof).unwrap();
    };
    let flags = ["--appendonly", "yes"];
    let rdir = scratch_dir("aof-xtrim-r");
    write(&rdir);
    let rd = rdir.to_str().unwrap().to_string();
    let Some(redis) = RedisServer::start_with(&[&flags[..], &["--dir", &rd]].concat(), Some(&rdir))
    else {
        return;
    };
    let mut r = redis.client();
    let theirs = snapshot(&mut r);
    // Redis applied the trims: two entries left, and the write after them.
    assert_eq!(text(&line(&mut r, "XLEN s")), "2");
    assert_eq!(text(&line(&mut r, "GET after")), "1");
    drop(redis);
    let sdir = scratch_dir("aof-xtrim-s");
    write(&sdir);
    let sluice = TestServer::start_with(&TestServer::default_bin(), &flags, Some(&sdir));
    assert_eq!(snapshot(&mut sluice.client()), theirs, "the appendonlydir as Sluice loaded it");
    drop(sluice);
    for d in [rdir, sdir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// An AOF loads at the cost of its data set, not of the data set and the
/// files as well: Redis reads its base and incremental files as it loads
/// them. Both servers load the same appendonlydir, written by
/// redis-server: a 160 MB RDB base (1,600 values of 100 KB, uncompressed)
/// and a 60 MB incremental file (600 SETs of 100 KB values). Bug: Sluice
/// read each file whole first (peak about 160 MB above the loaded data
/// set).
#[test]
fn a_big_aof_loads_without_its_files_being_held_whole_as_redis_loads_it() {
    let dir = scratch_dir("big-aof");
    let args = ["--appendonly", "yes", "--dbfilename", "none.rdb", "--rdbcompression", "no"];
    {
        let Some(redis) = RedisServer::start_with(&args, Some(&dir)) else { return };
        let mut c = redis.client();
        line(&mut c, "DEBUG POPULATE 1600 big 100000");
        line(&mut c, "BGREWRITEAOF");
        wait_for("the rewrite", || {
            let i = info(&mut c);
            i.contains("aof_rewrite_in_progress:0") && i.contains("aof_rewrite_scheduled:0")
        });
        let mut value = vec![0u8; 100_000];
        for i in 0..600u32 {
            for (j, b) in value.iter_mut().enumerate() {
                *b = (j as u32).wrapping_mul(2_654_435_761).wrapping_add(i).to_le_bytes()[1];
            }
            let key = format!("set:{i}");
            assert_eq!(
                cmd(&mut c, &[b"SET", key.as_bytes(), &value]),
                Frame::Simple(b"OK".to_vec())
            );
        }
        // Everything written out before the files are measured: with
        // `appendfsync everysec` on a busy disk, Redis holds back its
        // buffer while the last fsync runs (up to 2 s), and killing it
        // then left the incremental file short (58.7 MB once, under the
        // full suite's load).
        shutdown(&mut c);
    }
    let m = manifest(&dir);
    let aofdir = dir.join("appendonlydir");
    let base =
        std::fs::metadata(aofdir.join(&m.base.as_ref().expect("a base").name)).expect("base");
    assert!(base.len() > 160_000_000, "base {} bytes", base.len());
    let incr: u64 =
        m.incr.iter().map(|i| std::fs::metadata(aofdir.join(&i.name)).unwrap().len()).sum();
    assert!(incr > 60_000_000, "incremental files {incr} bytes");
    let check = |name: &str, pid: u32, c: &mut Client| {
        crate::common::assert_loaded_at_data_set_cost(name, pid, c, 2200, Duration::from_secs(90))
    };
    let redis = RedisServer::start_with(&args, Some(&dir)).expect("redis");
    check("redis", redis.pid(), &mut redis.client());
    drop(redis);
    let sluice = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
    check("sluice", sluice.pid(), &mut sluice.client());
    drop(sluice);
    let _ = std::fs::remove_dir_all(dir);
}
