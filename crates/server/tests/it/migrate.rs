//! MIGRATE against redis-server 7.0.15: the same scenario — every type,
//! TTLs, COPY, REPLACE, KEYS, AUTH/AUTH2, a cached connection, the
//! target's errors (BUSYKEY, AUTH, a database out of range), syntax
//! errors, a refused connection and a target that never answers — runs
//! redis-server → redis-server (the reference), Sluice → redis-server,
//! Sluice → Sluice and redis-server → Sluice, and every pair must give
//! the same replies, leave the same contents on both sides and (with
//! `appendonly yes` on the source) propagate the same commands. A
//! redis-server in cluster mode (which sends RESTORE-ASKING) migrates
//! into Sluice as into itself.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use persist::aof::{CommandReader, Item, Manifest};
use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

fn cmd<A: AsRef<[u8]>>(c: &mut Client, args: &[A]) -> Frame {
    c.send(args).expect("send");
    c.read_frame().expect("reply")
}

fn line(c: &mut Client, l: &str) -> Frame {
    let args: Vec<&str> = l.split(' ').map(|a| if a == "''" { "" } else { a }).collect();
    cmd(c, &args)
}

fn render(f: &Frame) -> String {
    match f {
        Frame::Array(Some(a)) => {
            format!("[{}]", a.iter().map(render).collect::<Vec<_>>().join(", "))
        }
        Frame::Bulk(Some(b)) | Frame::Simple(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Frame::Error(e) => format!("-{}", String::from_utf8_lossy(e)),
        other => format!("{other:?}"),
    }
}

fn items(f: Frame) -> Vec<String> {
    match f {
        Frame::Array(Some(a)) => a.iter().map(render).collect(),
        other => vec![render(&other)],
    }
}

/// Databases 0 and 3, key by key: type, TTL in tens of seconds, rounded
/// up (MIGRATE sends a relative TTL, and the runs take different times)
/// and value.
fn contents(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    for db in [0, 3] {
        line(c, &format!("SELECT {db}"));
        let mut keys = items(line(c, "KEYS *"));
        keys.sort();
        for k in keys {
            let k = k.trim_matches('"').to_string();
            let ty = render(&cmd(c, &["TYPE", &k]));
            let ttl = match cmd(c, &["PTTL", &k]) {
                Frame::Integer(t) if t > 0 => (t + 9999) / 10000 * 10,
                Frame::Integer(t) => t,
                other => panic!("{other:?}"),
            };
            let mut val = match ty.as_str() {
                "\"string\"" => vec![render(&cmd(c, &["GET", &k]))],
                "\"list\"" => items(cmd(c, &["LRANGE", &k, "0", "-1"])),
                "\"hash\"" => items(cmd(c, &["HGETALL", &k])),
                "\"set\"" => items(cmd(c, &["SMEMBERS", &k])),
                "\"zset\"" => items(cmd(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])),
                "\"stream\"" => vec![
                    render(&cmd(c, &["XRANGE", &k, "-", "+"])),
                    render(&cmd(c, &["XINFO", "GROUPS", &k])),
                ],
                other => panic!("type {other}"),
            };
            if matches!(ty.as_str(), "\"hash\"" | "\"set\"") {
                val.sort();
            }
            out.push(format!("db{db} {k} {ty} ttl={ttl} {}", val.join("|")));
        }
    }
    line(c, "SELECT 0");
    out
}

/// Every type, in several encodings, with and without a TTL.
fn populate(c: &mut Client) {
    let big = "x".repeat(5000);
    let mut cmds: Vec<String> = vec![
        "FLUSHALL".into(),
        "SET s:int 12345".into(),
        "SET s:str hello".into(),
        format!("SET s:big {big}"),
        "SET s:ttl v PX 100000".into(),
        "RPUSH l a b c 1 2 3".into(),
        "HSET h f1 v1 f2 v2".into(),
        "SADD si 1 2 3".into(),
        "SADD ss a b c".into(),
        "ZADD z 1 a 2.5 b -3 c".into(),
        "XADD x 1-1 f v".into(),
        "XADD x 2-1 g w".into(),
        "XGROUP CREATE x grp 0".into(),
        "XREADGROUP GROUP grp alice COUNT 1 STREAMS x >".into(),
        "PEXPIRE h 200000".into(),
        "SET busy source".into(),
        "SET copyme c".into(),
        "SET authme a".into(),
        "SET partial1 p1".into(),
        "SET partial2 p2".into(),
    ];
    for i in 0..200 {
        cmds.push(format!("RPUSH lbig element-{i:04}-{big}", big = &big[..100]));
        cmds.push(format!("HSET hbig field{i} value{i}"));
        cmds.push(format!("ZADD zbig {i} member{i}"));
        cmds.push(format!("SADD sbig member{i}"));
    }
    for l in cmds {
        let r = line(c, &l);
        assert!(!matches!(r, Frame::Error(_)), "{l}: {r:?}");
    }
}

/// A port that refuses connections, and one that accepts and never
/// answers (kept open by the returned listener).
fn dead_ports() -> (u16, TcpListener) {
    let refused = testkit::free_port();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    (refused, silent)
}

/// The scenario: the source's replies, then both sides' contents.
fn scenario(src: &mut Client, dst: &mut Client, dst_port: u16) -> Vec<String> {
    let (refused, silent) = dead_ports();
    let silent_port = silent.local_addr().unwrap().port();
    populate(src);
    line(dst, "FLUSHALL");
    line(dst, "SET busy target");
    line(dst, "SELECT 3");
    line(dst, "SET partial2 there");
    line(dst, "SELECT 0");
    let p = dst_port;
    let steps: Vec<String> = vec![
        format!("MIGRATE 127.0.0.1 {p} s:int 0 5000"),
        format!("MIGRATE 127.0.0.1 {p} nosuchkey 0 5000"),
        format!("MIGRATE 127.0.0.1 {p} '' 0 5000 KEYS s:str s:big s:ttl nosuch l h si ss z x"),
        format!("MIGRATE 127.0.0.1 {p} '' 3 5000 KEYS lbig hbig zbig sbig"),
        format!("MIGRATE 127.0.0.1 {p} busy 0 5000"),
        format!("MIGRATE 127.0.0.1 {p} busy 0 5000 COPY"),
        format!("MIGRATE 127.0.0.1 {p} busy 0 5000 REPLACE COPY"),
        format!("MIGRATE 127.0.0.1 {p} copyme 3 5000 COPY"),
        format!("MIGRATE 127.0.0.1 {p} copyme 3 5000 COPY REPLACE"),
        // One acknowledged, one refused by the target: the first goes.
        format!("MIGRATE 127.0.0.1 {p} '' 3 5000 KEYS partial1 partial2"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 AUTH nopass"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 AUTH2 someone nopass"),
        format!("MIGRATE 127.0.0.1 {p} authme 99 5000"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 KEYS authme"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 BOGUS"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 AUTH"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 AUTH2 user"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 abc"),
        format!("MIGRATE 127.0.0.1 {p} authme abc 5000"),
        format!("MIGRATE 127.0.0.1 {p} authme 0"),
        format!("MIGRATE 127.0.0.1 {refused} authme 0 200"),
        format!("MIGRATE 127.0.0.1 {silent_port} authme 0 200"),
        format!("MIGRATE 127.0.0.1 {silent_port} '' 0 200 KEYS nosuch"),
    ];
    let mut out = Vec::new();
    for s in &steps {
        let shown = s.replace(&p.to_string(), "P");
        let shown = shown.replace(&refused.to_string(), "REFUSED");
        let shown = shown.replace(&silent_port.to_string(), "SILENT");
        out.push(format!("{shown} -> {}", render(&line(src, s))));
    }
    // With a password on the target: AUTH, then the cached (authenticated)
    // connection without AUTH.
    line(dst, "CONFIG SET requirepass secret");
    for s in [
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 AUTH wrong"),
        format!("MIGRATE 127.0.0.1 {p} authme 0 5000 AUTH secret REPLACE"),
        format!("MIGRATE 127.0.0.1 {p} s:str 0 5000 REPLACE"),
    ] {
        line(src, "SET s:str again");
        out.push(format!("{} -> {}", s.replace(&p.to_string(), "P"), render(&line(src, &s))));
    }
    line(dst, "CONFIG SET requirepass ''");
    out.push("-- source".into());
    out.extend(contents(src));
    out.push("-- target".into());
    out.extend(contents(dst));
    drop(silent);
    out
}

/// The commands of the source's incremental AOF files (times blanked).
fn incr_commands(dir: &Path) -> Vec<String> {
    let text = std::fs::read(dir.join("appendonlydir/appendonly.aof.manifest")).expect("manifest");
    let m = Manifest::parse(&text).expect("manifest");
    let mut out = Vec::new();
    for i in &m.incr {
        let bytes = std::fs::read(dir.join("appendonlydir").join(&i.name)).expect("incr");
        let mut r = CommandReader::new(&bytes, 0);
        while let Some(item) = r.next_item().expect("well-formed") {
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

enum Kind {
    Redis,
    Sluice,
}

struct Proc {
    _redis: Option<RedisServer>,
    _sluice: Option<TestServer>,
    port: u16,
    dir: std::path::PathBuf,
}

fn start(kind: Kind, extra: &[&str]) -> Proc {
    let dir = scratch_dir("migrate");
    let d = dir.to_str().unwrap().to_string();
    let args = [extra, &["--dir", &d]].concat();
    match kind {
        Kind::Redis => {
            let r = RedisServer::start_with(&args, Some(&dir)).expect("oracle");
            Proc { port: r.port(), _redis: Some(r), _sluice: None, dir }
        }
        Kind::Sluice => {
            let s = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
            Proc { port: s.port(), _redis: None, _sluice: Some(s), dir }
        }
    }
}

fn wait_aof_idle(c: &mut Client) {
    let start = Instant::now();
    while matches!(line(c, "PING"), Frame::Error(_)) {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    while !render(&line(c, "INFO persistence")).contains("aof_rewrite_in_progress:0") {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_pair(src: Kind, dst: Kind) -> (Vec<String>, Vec<String>) {
    // `always`: under everysec Redis may postpone its AOF write up to 2 s
    // while a background fsync runs, and the file would lag the replies.
    let s = start(src, &["--appendonly", "yes", "--appendfsync", "always"]);
    let d = start(dst, &[]);
    let mut sc = Client::connect(s.port).unwrap();
    let mut dc = Client::connect(d.port).unwrap();
    wait_aof_idle(&mut sc);
    let replies = scenario(&mut sc, &mut dc, d.port);
    let aof = incr_commands(&s.dir);
    for p in [&s, &d] {
        let _ = std::fs::remove_dir_all(&p.dir);
    }
    (replies, aof)
}

#[track_caller]
fn same(ours: &[String], theirs: &[String], what: &str) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(a, b, "{what}: line {i}");
    }
    assert_eq!(ours.len(), theirs.len(), "{what}: lengths\n{ours:#?}\n{theirs:#?}");
}

#[test]
fn migrate_between_every_pair_as_redis_to_redis() {
    if !Path::new(testkit::REDIS_SERVER).is_file() {
        return;
    }
    let (want, want_aof) = run_pair(Kind::Redis, Kind::Redis);
    // The scenario did move keys and propagated DELs.
    assert!(want.iter().any(|l| l.contains("KEYS lbig") && l.ends_with("\"OK\"")), "{want:#?}");
    assert!(want_aof.iter().any(|c| c.starts_with("DEL s:str s:big")), "{want_aof:#?}");
    assert!(want.iter().any(|l| l.contains("AUTH secret REPLACE -> \"OK\"")), "{want:#?}");
    let (r, aof) = run_pair(Kind::Sluice, Kind::Redis);
    same(&r, &want, "Sluice → redis-server");
    same(&aof, &want_aof, "Sluice → redis-server, the source's AOF");
    let (r, aof) = run_pair(Kind::Sluice, Kind::Sluice);
    same(&r, &want, "Sluice → Sluice");
    same(&aof, &want_aof, "Sluice → Sluice, the source's AOF");
    let (r, _) = run_pair(Kind::Redis, Kind::Sluice);
    same(&r, &want, "redis-server → Sluice");
}

/// A redis-server in cluster mode sends RESTORE-ASKING; Sluice takes it
/// as a redis-server does.
#[test]
fn a_cluster_node_migrates_into_sluice_with_restore_asking() {
    if !Path::new(testkit::REDIS_SERVER).is_file() {
        return;
    }
    let dir = scratch_dir("migrate-cluster");
    let d = dir.to_str().unwrap().to_string();
    let conf = dir.join("nodes.conf");
    let node = RedisServer::start_with(
        &["--cluster-enabled", "yes", "--cluster-config-file", conf.to_str().unwrap(), "--dir", &d],
        Some(&dir),
    )
    .expect("oracle");
    let mut n = node.client();
    line(&mut n, "CLUSTER ADDSLOTSRANGE 0 16383");
    let start = Instant::now();
    while !render(&line(&mut n, "CLUSTER INFO")).contains("cluster_state:ok") {
        assert!(start.elapsed() < Duration::from_secs(20), "the cluster never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let redis = RedisServer::start().expect("oracle");
    let sluice = TestServer::start();
    let mut results = Vec::new();
    for port in [redis.port(), sluice.port()] {
        let mut t = Client::connect(port).unwrap();
        line(&mut t, "FLUSHALL");
        line(&mut t, "SET {a}busy there");
        let mut out = Vec::new();
        for l in ["SET {a}1 v PX 100000", "RPUSH {a}2 x y", "SET {a}busy here", "ZADD {a}3 1 m"] {
            line(&mut n, l);
        }
        for l in [
            format!("MIGRATE 127.0.0.1 {port} {{a}}1 0 5000"),
            format!("MIGRATE 127.0.0.1 {port} '' 0 5000 KEYS {{a}}2 {{a}}busy {{a}}3"),
            format!("MIGRATE 127.0.0.1 {port} {{a}}busy 0 5000 REPLACE"),
        ] {
            out.push(render(&line(&mut n, &l)));
        }
        out.extend(contents(&mut t));
        let mut left = items(line(&mut n, "KEYS *"));
        left.sort();
        out.extend(left);
        results.push(out);
    }
    same(&results[1], &results[0], "cluster node → Sluice");
    let _ = std::fs::remove_dir_all(dir);
}

/// How many connections the target has besides the test's own, and how
/// many it ever accepted.
fn target_conns(t: &mut Client) -> (usize, i64) {
    let list = render(&line(t, "CLIENT LIST"));
    let n = list.matches("id=").count() - 1;
    let info = render(&line(t, "INFO stats"));
    let total = info
        .split("\\r\\n")
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_connections_received");
    (n, total)
}

/// The source's INFO `migrate_cached_sockets`.
fn cached_sockets(c: &mut Client) -> String {
    let info = render(&line(c, "INFO stats"));
    info.split("\\r\\n")
        .find_map(|l| l.strip_prefix("migrate_cached_sockets:"))
        .unwrap_or("missing")
        .to_string()
}

/// The connection cache (and the source's count of it, INFO's
/// `migrate_cached_sockets`): a second MIGRATE to the same target reuses the
/// connection (no SELECT needed, no new connection), and 10 s unused
/// closes it; the same on a redis-server source and a Sluice one.
#[test]
fn migrate_connections_are_cached_for_ten_seconds_as_in_redis() {
    if !Path::new(testkit::REDIS_SERVER).is_file() {
        return;
    }
    let run = |src_is_redis: bool| {
        let target = RedisServer::start().expect("oracle");
        let (_r, _s, port) = if src_is_redis {
            let r = RedisServer::start().expect("oracle");
            let p = r.port();
            (Some(r), None, p)
        } else {
            let s = TestServer::start();
            let p = s.port();
            (None, Some(s), p)
        };
        let mut src = Client::connect(port).unwrap();
        let mut t = target.client();
        let tp = target.port();
        let mut out = Vec::new();
        let (_, base) = target_conns(&mut t);
        for k in ["a", "b"] {
            line(&mut src, &format!("SET {k} 1"));
            out.push(render(&line(&mut src, &format!("MIGRATE 127.0.0.1 {tp} {k} 0 1000"))));
            let (n, total) = target_conns(&mut t);
            out.push(format!("open {n}, connections made {}", total - base));
            out.push(format!("source's cache: {}", cached_sockets(&mut src)));
        }
        std::thread::sleep(Duration::from_millis(12_500));
        out.push(format!("after 12.5 s: open {}", target_conns(&mut t).0));
        out.push(format!("source's cache: {}", cached_sockets(&mut src)));
        out
    };
    let theirs = std::thread::spawn(move || run(true));
    let ours = run(false);
    let theirs = theirs.join().unwrap();
    assert_eq!(ours, theirs);
    assert!(theirs[theirs.len() - 2].ends_with("open 0"), "{theirs:?}");
    assert_eq!(theirs[4], "open 1, connections made 1", "{theirs:?}");
    assert_eq!(theirs[5], "source's cache: 1", "{theirs:?}");
}
