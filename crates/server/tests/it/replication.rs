//! A real redis-server 7.0.15 follows Sluice: started with `--replicaof`
//! Sluice, it takes a full resynchronisation (diskless and disk-based)
//! while several clients write every type in several databases (with
//! MULTI, EVAL and expiring keys), then follows the stream; both end with
//! the same contents, compared key by key through typed reads. After
//! `CLIENT KILL TYPE replica` the replica comes back with a partial
//! resynchronisation. WAIT with and without a replica, ROLE and INFO
//! replication against a real Redis master's, and `redis-cli --rdb`
//! taking a backup that redis-server loads.
//!
//! Runs in about 10 s (debug build).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{
    cmd, info, info_keys, pipelined, s, sorted, text, wait_for, wait_synced, writers,
};
use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

/// Every key of every database, described by typed reads; expiry times
/// apart.
type Contents = BTreeMap<(usize, Vec<u8>), String>;

fn contents(c: &mut Client) -> (Contents, BTreeMap<(usize, Vec<u8>), i64>) {
    let mut out = BTreeMap::new();
    let mut expiry = BTreeMap::new();
    for db in 0..16usize {
        cmd(c, &["SELECT", &db.to_string()]);
        let Frame::Array(Some(keys)) = cmd(c, &["KEYS", "*"]) else { panic!("KEYS") };
        let keys: Vec<Vec<u8>> = keys
            .into_iter()
            .filter_map(|k| if let Frame::Bulk(Some(k)) = k { Some(k) } else { None })
            .collect();
        let types = pipelined(
            c,
            &keys.iter().map(|k| vec![b"TYPE".to_vec(), k.clone()]).collect::<Vec<_>>(),
        );
        let mut reads = Vec::new();
        for (k, ty) in keys.iter().zip(&types) {
            let mut r: Vec<Vec<Vec<u8>>> = match text(ty).as_str() {
                // PFCOUNT caches its result in the string: compare counts.
                "string" if k.starts_with(b"hll:") => vec![vec![b"PFCOUNT".to_vec(), k.clone()]],
                "string" => vec![vec![b"GET".to_vec(), k.clone()]],
                "list" => vec![vec![b"LRANGE".to_vec(), k.clone(), b"0".to_vec(), b"-1".to_vec()]],
                "hash" => vec![vec![b"HGETALL".to_vec(), k.clone()]],
                "set" => vec![vec![b"SMEMBERS".to_vec(), k.clone()]],
                "zset" => vec![vec![
                    b"ZRANGE".to_vec(),
                    k.clone(),
                    b"0".to_vec(),
                    b"-1".to_vec(),
                    b"WITHSCORES".to_vec(),
                ]],
                "stream" => vec![
                    vec![b"XRANGE".to_vec(), k.clone(), b"-".to_vec(), b"+".to_vec()],
                    vec![b"XINFO".to_vec(), b"GROUPS".to_vec(), k.clone()],
                    vec![b"XPENDING".to_vec(), k.clone(), b"g".to_vec()],
                ],
                // Expired between KEYS and TYPE.
                "none" => vec![],
                other => panic!("unexpected type {other}"),
            };
            r.push(vec![b"PEXPIRETIME".to_vec(), k.clone()]);
            reads.push(r);
        }
        let flat: Vec<Vec<Vec<u8>>> = reads.iter().flatten().cloned().collect();
        let mut replies = pipelined(c, &flat).into_iter();
        for ((k, ty), r) in keys.iter().zip(&types).zip(&reads) {
            let mut desc = text(ty);
            for (j, _) in r.iter().enumerate().skip(1) {
                let f = replies.next().unwrap();
                desc += &match (text(ty).as_str(), j) {
                    ("hash", _) => sorted(f, 2),
                    ("set", _) => sorted(f, 1),
                    // XINFO GROUPS: name, consumers, pending, last id (a
                    // Redis replica's entries-read and lag are its own).
                    ("stream", 2) => match f {
                        Frame::Array(Some(gs)) => gs
                            .iter()
                            .map(|g| match g {
                                Frame::Array(Some(fs)) => format!(" {:?}", &fs[..fs.len().min(8)]),
                                other => format!(" {other:?}"),
                            })
                            .collect(),
                        other => format!(" {other:?}"),
                    },
                    _ => format!(" {f:?}"),
                };
            }
            let Some(Frame::Integer(at)) = replies.next() else { panic!("PEXPIRETIME") };
            if desc == "none" {
                continue;
            }
            out.insert((db, k.clone()), desc);
            expiry.insert((db, k.clone()), at);
        }
    }
    cmd(c, &["SELECT", "0"]);
    (out, expiry)
}

/// Both servers hold the same keys with the same values and expiry
/// times (the stream carries them absolute: `PEXPIREAT`, `SET … PXAT`).
fn assert_same(master: &mut Client, replica: &mut Client) {
    // The keys written to expire at once are gone on both.
    std::thread::sleep(Duration::from_millis(100));
    let (a, at) = contents(master);
    let (b, bt) = contents(replica);
    assert!(a.len() > 100, "the load wrote too little: {}", a.len());
    let only_a: Vec<_> = a.keys().filter(|k| !b.contains_key(*k)).take(5).collect();
    let only_b: Vec<_> = b.keys().filter(|k| !a.contains_key(*k)).take(5).collect();
    assert!(only_a.is_empty() && only_b.is_empty(), "keys differ: {only_a:?} / {only_b:?}");
    for (k, v) in &a {
        if v != &b[k] {
            let cut = |s: &str| s.chars().take(400).collect::<String>();
            panic!("value of {k:?}: {} vs {}", cut(v), cut(&b[k]));
        }
        let (x, y) = (at[k], bt[k]);
        assert!(x == y, "expiry of {k:?}: {x} vs {y}");
    }
}

/// One round of writes of client `t`: every type, two databases, a
/// transaction, a script, keys that expire soon, shared keys every client
/// writes (their order must be the master's).
fn round(c: &mut Client, t: usize, i: usize) {
    let mut cmds: Vec<Vec<String>> = vec![
        s(&format!("SET s:{t}:{i} v{i} EX 1000")),
        s("INCR shared:ctr"),
        s(&format!("LPUSH shared:list {t}-{i}")),
        s(&format!("RPUSH l:{t} a{i} b{i} c{i}")),
        s(&format!("LPOP l:{t}")),
        s(&format!("HSET h:{t} f{i} v{i} n 1")),
        s(&format!("HINCRBY h:{t} n {i}")),
        s(&format!("SADD set:{t} m{i} x{i} y{i}")),
        s(&format!("SPOP set:{t}")),
        s(&format!("ZADD z:{t} {i} m{i}")),
        s(&format!("ZINCRBY z:{t} 2.5 m0")),
        s(&format!("XADD st:{t} * f v{i}")),
        s(&format!("XREADGROUP GROUP g c{} COUNT 2 STREAMS st:{t} >", i % 2)),
        s(&format!("PFADD hll:{t} a{i} b{}", i * 7)),
        s(&format!("SETBIT bm:{t} {} 1", i * 7)),
        s(&format!("GEOADD geo:{t} {}.5 {}.25 m{i}", i % 170, i % 80)),
        s(&format!("SET tmp:{t}:{i} x PX 30")),
        s(&format!("EXPIRE s:{t}:{} 500", i / 2)),
        s("SELECT 2"),
        s(&format!("SET db2:{t}:{i} {i}")),
        s(&format!("HSET db2h:{t} f{i} {i}")),
        s("SELECT 0"),
        s("MULTI"),
        s("INCR shared:tx"),
        s(&format!("RPUSH shared:txlist {t}-{i}")),
        s("EXEC"),
    ];
    cmds.push(vec![
        "EVAL".into(),
        "redis.call('SET', KEYS[1], ARGV[1]); redis.call('INCRBY', KEYS[2], ARGV[1]); return 1"
            .into(),
        "2".into(),
        format!("ev:{t}"),
        "shared:evctr".into(),
        i.to_string(),
    ]);
    if i % 5 == 4 {
        cmds.push(s(&format!("DEL s:{t}:{}", i - 3)));
        cmds.push(s(&format!("GET tmp:{t}:{}", i - 4)));
    }
    for a in &cmds {
        c.send(a).expect("send");
    }
    for a in &cmds {
        let r = c.read_frame().expect("reply");
        assert!(!matches!(r, Frame::Error(_)), "{a:?} -> {r:?}");
    }
}

fn setup_streams(c: &mut Client, t: usize) {
    cmd(c, &s(&format!("XGROUP CREATE st:{t} g 0 MKSTREAM")));
}

fn preload(c: &mut Client, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        for i in chunk {
            c.send(&s(&format!("SET pre:{i} {i}"))).unwrap();
        }
        for _ in chunk {
            c.read_frame().unwrap();
        }
    }
}

fn follow(diskless: bool) {
    let Some(_oracle) = RedisServer::start() else { return };
    drop(_oracle);
    let mode = if diskless { "yes" } else { "no" };
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--repl-diskless-sync", mode, "--repl-diskless-sync-delay", "0"],
        None,
    );
    let mut m = sluice.client();
    preload(&mut m, 5_000);
    for t in 0..3 {
        setup_streams(&mut m, t);
        round(&mut m, t, 0);
    }
    // A slow snapshot: the writers below change keys it has not reached.
    cmd(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "100"]);
    let stop = Arc::new(AtomicBool::new(false));
    let ws = writers(sluice.port(), 3, &stop, round);
    std::thread::sleep(Duration::from_millis(100));
    let port = sluice.port().to_string();
    let dir = scratch_dir("replica");
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port], Some(&dir))
        .expect("redis-server");
    let mut r = replica.client();
    wait_for("the link", Duration::from_secs(30), || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for w in ws {
        w.join().unwrap();
    }
    cmd(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_synced(&mut m, &mut r);
    assert_same(&mut m, &mut r);
    let log = sluice.log_text();
    let target = if diskless { "replicas sockets" } else { "disk" };
    assert!(log.contains(&format!("Starting BGSAVE for SYNC with target: {target}")), "{log}");

    // WAIT with a replica: acknowledged at once, or at the timeout with
    // the replicas that did.
    assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), Frame::Integer(1));
    let t0 = Instant::now();
    assert_eq!(cmd(&mut m, &["WAIT", "2", "200"]), Frame::Integer(1));
    // The deadline is in whole milliseconds (Redis's `mstime() + timeout`)
    // and passes in the millisecond after it (`timeout < now`): never
    // before 200 ms on this side's clock.
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    // PUBLISH reaches the replica's subscribers, as from a Redis master.
    let mut sub = replica.client();
    cmd(&mut sub, &["SUBSCRIBE", "news"]);
    assert_eq!(cmd(&mut m, &["PUBLISH", "news", "hello"]), Frame::Integer(0));
    let msg = sub.read_frame().expect("message on the replica");
    assert_eq!(
        msg,
        Frame::Array(Some(
            ["message", "news", "hello"]
                .iter()
                .map(|x| Frame::Bulk(Some(x.as_bytes().to_vec())))
                .collect()
        ))
    );
    // min-replicas-to-write 1 is met by the replica.
    assert_eq!(
        cmd(&mut m, &s("CONFIG SET min-replicas-to-write 1")),
        Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(cmd(&mut m, &s("SET mrw 1")), Frame::Simple(b"OK".to_vec()));
    assert_eq!(info(&mut m, "replication", "min_slaves_good_slaves").as_deref(), Some("1"));
    cmd(&mut m, &s("CONFIG SET min-replicas-to-write 0"));
    // Not a client in INFO clients (Redis counts clients minus replicas):
    // the writers are gone, this connection is the one left.
    wait_for("the writers to go", Duration::from_secs(5), || {
        info(&mut m, "clients", "connected_clients").as_deref() == Some("1")
    });
    // In CLIENT LIST as a replica.
    let list = text(&cmd(&mut m, &["CLIENT", "LIST", "TYPE", "replica"]));
    assert!(list.contains("flags=S") && list.contains("cmd=psync"), "{list}");

    // A brief disconnect: the replica comes back with a partial resync.
    let stop = Arc::new(AtomicBool::new(false));
    let ws = writers(sluice.port(), 2, &stop, round);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(cmd(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]), Frame::Integer(1));
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    for w in ws {
        w.join().unwrap();
    }
    wait_synced(&mut m, &mut r);
    assert_same(&mut m, &mut r);
    assert_eq!(info(&mut m, "stats", "sync_full").as_deref(), Some("1"));
    assert_eq!(info(&mut m, "stats", "sync_partial_ok").as_deref(), Some("1"));
    assert!(replica.log_text().contains("Successful partial resynchronization with master"));
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_replica_follows_diskless() {
    follow(true);
}

#[test]
fn redis_replica_follows_disk_based() {
    follow(false);
}

#[test]
fn wait_without_replicas_as_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    let (mut a, mut b) = (redis.client(), sluice.client());
    for line in ["WAIT 0 0", "WAIT 1 100", "WAIT abc 0", "WAIT 0 -1", "WAIT 0 abc", "WAIT -1 0"] {
        let t0 = Instant::now();
        let x = cmd(&mut a, &s(line));
        let ta = t0.elapsed();
        let t0 = Instant::now();
        let y = cmd(&mut b, &s(line));
        let tb = t0.elapsed();
        assert_eq!(x, y, "{line}");
        if line == "WAIT 1 100" {
            // Both servers count the timeout from a clock read in whole
            // milliseconds: a little under 100 ms can be seen here.
            let min = Duration::from_millis(95);
            assert!(ta >= min && tb >= min, "redis {ta:?}, sluice {tb:?}");
        }
    }
    for line in [
        "REPLCONF",
        "REPLCONF foo",
        "REPLCONF foo bar",
        "REPLCONF listening-port abc",
        "REPLCONF listening-port 1234 capa eof capa psync2",
        "REPLCONF rdb-only x",
        "REPLICAOF NO ONE",
        "ROLE",
        // min-replicas-to-write with no replica: writes refused.
        "CONFIG SET min-replicas-to-write 1",
        "SET k v",
        "GET k",
        "MULTI",
        "SET k v",
        "EXEC",
    ] {
        assert_eq!(cmd(&mut a, &s(line)), cmd(&mut b, &s(line)), "{line}");
    }
    assert_eq!(info_keys(&mut a, "replication"), info_keys(&mut b, "replication"));
    for line in ["CONFIG SET min-replicas-to-write 0", "SET k v"] {
        assert_eq!(cmd(&mut a, &s(line)), cmd(&mut b, &s(line)), "{line}");
    }
    // A replica of a master that is not there: the same replies and
    // INFO fields (link down, down-since), then a master again.
    for line in
        ["REPLICAOF 127.0.0.1 1", "REPLICAOF 127.0.0.1 1", "REPLICAOF 127.0.0.1 x", "SET k v"]
    {
        assert_eq!(cmd(&mut a, &s(line)), cmd(&mut b, &s(line)), "{line}");
    }
    assert_eq!(info_keys(&mut a, "replication"), info_keys(&mut b, "replication"));
    for f in ["role", "master_link_status", "master_last_io_seconds_ago", "master_sync_in_progress"]
    {
        assert_eq!(info(&mut a, "replication", f), info(&mut b, "replication", f), "{f}");
    }
    assert_eq!(cmd(&mut a, &s("REPLICAOF NO ONE")), cmd(&mut b, &s("REPLICAOF NO ONE")));
    assert_eq!(info_keys(&mut a, "replication"), info_keys(&mut b, "replication"));
}

/// ROLE and INFO replication with one online replica: the same shape as
/// a redis-server master's with a redis-server replica.
#[test]
fn role_and_info_shape_as_redis_master() {
    let Some(rm) = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"], None) else {
        return;
    };
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--repl-diskless-sync-delay", "0"],
        None,
    );
    let mut shapes = Vec::new();
    for port in [rm.port(), sluice.port()] {
        let dir = scratch_dir("replica");
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &port.to_string()], Some(&dir))
                .expect("redis-server");
        let mut m = Client::connect(port).unwrap();
        cmd(&mut m, &["SET", "k", "v"]);
        let mut r = replica.client();
        wait_synced(&mut m, &mut r);
        assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), Frame::Integer(1));
        let role = cmd(&mut m, &["ROLE"]);
        let Frame::Array(Some(parts)) = &role else { panic!("{role:?}") };
        let shape = testkit::scenario::shape(&role);
        assert_eq!(parts[0], Frame::Bulk(Some(b"master".to_vec())));
        let Frame::Array(Some(reps)) = &parts[2] else { panic!("{role:?}") };
        let Frame::Array(Some(rep)) = &reps[0] else { panic!("{role:?}") };
        assert_eq!(text(&rep[1]), replica.port().to_string());
        let slave0 = info(&mut m, "replication", "slave0").unwrap();
        let fields: Vec<String> =
            slave0.split(',').map(|f| f.split('=').next().unwrap().to_string()).collect();
        assert!(slave0.contains(&format!("port={}", replica.port())), "{slave0}");
        assert!(slave0.contains("state=online"), "{slave0}");
        shapes.push((shape, info_keys(&mut m, "replication"), fields));
        drop(replica);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(shapes[0], shapes[1]);
}

/// `redis-cli --rdb` takes a backup from Sluice; redis-server loads it.
#[test]
fn redis_cli_rdb_backup_loads_in_redis() {
    if !Path::new("/usr/bin/redis-cli").is_file() || RedisServer::start().is_none() {
        return;
    }
    let sluice = TestServer::start();
    let mut m = sluice.client();
    for t in 0..2 {
        setup_streams(&mut m, t);
        for i in 0..60 {
            round(&mut m, t, i);
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    let dir = scratch_dir("backup");
    let file = dir.join("backup.rdb");
    let st = std::process::Command::new("/usr/bin/redis-cli")
        .args(["-p", &sluice.port().to_string(), "--rdb"])
        .arg(&file)
        .output()
        .expect("redis-cli");
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let redis = RedisServer::start_with(&["--dbfilename", "backup.rdb"], Some(&dir)).unwrap();
    let mut r = redis.client();
    wait_for("loading", Duration::from_secs(10), || {
        info(&mut r, "persistence", "loading").as_deref() == Some("0")
    });
    assert_same(&mut m, &mut r);
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A replica that stops reading (SIGSTOP) is disconnected once the stream
/// it has not been sent passes the `replica` class of
/// `client-output-buffer-limit`; resumed, it resynchronises in full (what
/// it missed is no longer in the backlog) and ends equal.
#[test]
fn lagging_replica_is_disconnected_at_its_output_limit() {
    let Some(_oracle) = RedisServer::start() else { return };
    drop(_oracle);
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--repl-diskless-sync-delay", "0"],
        None,
    );
    let mut m = sluice.client();
    cmd(&mut m, &["CONFIG", "SET", "client-output-buffer-limit", "replica 1mb 0 0"]);
    preload(&mut m, 200);
    let port = sluice.port().to_string();
    let dir = scratch_dir("replica");
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port], Some(&dir))
        .expect("redis-server");
    let mut r = replica.client();
    wait_synced(&mut m, &mut r);
    let signal = |sig: &str| {
        let st = std::process::Command::new("kill")
            .args([sig, &replica.pid().to_string()])
            .status()
            .expect("kill");
        assert!(st.success());
    };
    signal("-STOP");
    let big = vec![b'x'; 256 * 1024];
    let cmds: Vec<Vec<Vec<u8>>> = (0..64)
        .map(|i| vec![b"SET".to_vec(), format!("big:{i}").into_bytes(), big.clone()])
        .collect();
    pipelined(&mut m, &cmds);
    wait_for("the replica's disconnection", Duration::from_secs(20), || {
        sluice.log_text().contains("overcoming of output buffer limits")
    });
    signal("-CONT");
    wait_synced(&mut m, &mut r);
    assert_same(&mut m, &mut r);
    assert_eq!(info(&mut m, "stats", "sync_full").as_deref(), Some("2"));
    // The replica gone, the backlog is freed after repl-backlog-ttl, and
    // the replication id changes with it.
    let replid = info(&mut m, "replication", "master_replid");
    cmd(&mut m, &["CONFIG", "SET", "repl-backlog-ttl", "1"]);
    drop(replica);
    wait_for("the backlog to be freed", Duration::from_secs(10), || {
        info(&mut m, "replication", "repl_backlog_active").as_deref() == Some("0")
    });
    assert_ne!(info(&mut m, "replication", "master_replid"), replid);
    assert_eq!(info(&mut m, "replication", "connected_slaves").as_deref(), Some("0"));
    assert!(sluice
        .log_text()
        .contains("Replication backlog freed after 1 seconds without connected replicas."));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a master's directory holds after a disk-based full sync, and what
/// it logged about it: with `rdb-del-sync-files yes` and no persistence
/// the file goes once the replica has it; with save points, or with the
/// option off, it stays (and the sync counted as a save).
fn after_disk_sync(master: &mut testkit::ServerProc, dir: &Path) -> Vec<String> {
    let mut m = master.client();
    let before = cmd(&mut m, &["LASTSAVE"]);
    std::thread::sleep(Duration::from_millis(1100));
    cmd(&mut m, &["SET", "k", "v"]);
    let rdir = scratch_dir("del-sync-replica");
    let replica = RedisServer::start_with(
        &["--replicaof", "127.0.0.1", &master.port().to_string()],
        Some(&rdir),
    )
    .expect("redis-server");
    let mut r = replica.client();
    wait_synced(&mut m, &mut r);
    assert_eq!(cmd(&mut r, &["GET", "k"]), Frame::Bulk(Some(b"v".to_vec())));
    // Redis's cron removes the file within a second or two.
    std::thread::sleep(Duration::from_millis(2500));
    let mut out = vec![
        format!("dump.rdb there: {}", dir.join("dump.rdb").exists()),
        format!("LASTSAVE moved: {}", cmd(&mut m, &["LASTSAVE"]) != before),
        format!("changes: {:?}", info(&mut m, "persistence", "rdb_changes_since_last_save")),
    ];
    let log = master.log_text();
    out.extend(
        log.lines()
            .filter(|l| l.contains("Removing the RDB") || l.contains("Starting BGSAVE for SYNC"))
            .map(|l| l.splitn(7, ' ').nth(6).unwrap_or(l).to_string()),
    );
    drop(replica);
    let _ = std::fs::remove_dir_all(rdir);
    out
}

#[test]
fn rdb_del_sync_files_as_redis() {
    if !Path::new(testkit::REDIS_SERVER).is_file() {
        return;
    }
    for (extra, removed) in [
        (&["--rdb-del-sync-files", "yes"][..], true),
        (&["--rdb-del-sync-files", "no"][..], false),
        (&["--rdb-del-sync-files", "yes", "--save", "3600 1"][..], false),
    ] {
        let flags = [&["--repl-diskless-sync", "no"][..], extra].concat();
        let (rdir, sdir) = (scratch_dir("del-sync-r"), scratch_dir("del-sync-s"));
        let (rd, sd) = (rdir.to_str().unwrap().to_string(), sdir.to_str().unwrap().to_string());
        let mut redis =
            RedisServer::start_with(&[&flags[..], &["--dir", &rd]].concat(), Some(&rdir))
                .expect("redis-server");
        let theirs = after_disk_sync(&mut redis, &rdir);
        assert_eq!(theirs[0], format!("dump.rdb there: {}", !removed), "{theirs:?}");
        let mut sluice = TestServer::start_with(
            &TestServer::default_bin(),
            &[&flags[..], &["--dir", &sd]].concat(),
            Some(&sdir),
        );
        let ours = after_disk_sync(&mut sluice, &sdir);
        assert_eq!(ours, theirs, "{extra:?}");
        for d in [rdir, sdir] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
