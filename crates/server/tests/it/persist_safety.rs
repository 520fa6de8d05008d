//! Persistence safety against redis-server 7.0.15: corrupt RESTORE
//! payloads are refused as Redis refuses them with `sanitize-dump-payload
//! yes` (and logged with Redis's reasons), `DEBUG
//! SET-SKIP-CHECKSUM-VALIDATION`, a corrupt RDB at start-up, empty keys in
//! a file, FLUSHALL during a BGSAVE, what a failed BGSAVE refuses (PING,
//! scripts that may write), turning the AOF off during a rewrite,
//! `DEBUG LOADAOF`, and the AOF loading cases Redis's suite found: a
//! command cut at the end of the file, deadlines passed while replaying,
//! and an old-style `appendonly.aof` migrated into `appenddirname`.

use std::path::Path;
use std::time::{Duration, Instant};

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
        Frame::Bulk(Some(b)) | Frame::Simple(b) | Frame::Error(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn info_field(c: &mut Client, field: &str) -> String {
    let all = text(&line(c, "INFO persistence"));
    let prefix = format!("{field}:");
    all.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .trim()
        .to_string()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A DUMP payload: type byte, body, RDB version 9, CRC64.
fn payload(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![ty];
    p.extend_from_slice(body);
    p.extend_from_slice(&[9, 0]);
    let crc = persist::crc64::crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// An RDB string of a short blob.
fn blob(b: &[u8]) -> Vec<u8> {
    assert!(b.len() < 64);
    let mut out = vec![b.len() as u8];
    out.extend_from_slice(b);
    out
}

/// A ziplist of short strings (prevlen and tail offset right unless the
/// caller breaks them).
fn ziplist(items: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let (mut prev, mut tail) = (0usize, 10usize);
    for it in items {
        let start = body.len();
        tail = 10 + start;
        body.push(prev as u8);
        body.push(it.len() as u8);
        body.extend_from_slice(it);
        prev = body.len() - start;
    }
    let mut z = Vec::new();
    z.extend_from_slice(&((11 + body.len()) as u32).to_le_bytes());
    z.extend_from_slice(&(tail as u32).to_le_bytes());
    z.extend_from_slice(&(items.len() as u16).to_le_bytes());
    z.extend_from_slice(&body);
    z.push(0xFF);
    z
}

/// Payloads a deep integrity check refuses; each named for what is wrong.
fn corrupt_payloads() -> Vec<(&'static str, Vec<u8>)> {
    let mut wrong_tail = ziplist(&[b"a", b"1", b"b", b"2"]);
    wrong_tail[4] = 10;
    let mut wrong_count = ziplist(&[b"a", b"b"]);
    wrong_count[8] = 3;
    let mut bad_prevlen = ziplist(&[b"a", b"b", b"c"]);
    bad_prevlen[13] = 9;
    vec![
        (
            "hash ziplist with a duplicate field",
            payload(13, &blob(&ziplist(&[b"a", b"1", b"a", b"2"]))),
        ),
        ("hash ziplist with an odd count", payload(13, &blob(&ziplist(&[b"a", b"1", b"b"])))),
        ("zset ziplist whose tail offset is wrong", payload(12, &blob(&wrong_tail))),
        ("list ziplist whose count is wrong", payload(10, &blob(&wrong_count))),
        ("quicklist ziplist with a wrong prevlen", {
            let mut b = vec![1];
            b.extend_from_slice(&blob(&bad_prevlen));
            payload(14, &b)
        }),
        ("empty zipmap", payload(9, &blob(&[0, 0xFF]))),
        ("zipmap whose count byte is wrong", payload(9, &blob(&[2, 1, b'a', 1, 0, b'b', 0xFF]))),
        ("quicklist with an empty plain node", payload(18, &[1, 1, 0])),
        ("intset out of order", payload(11, &blob(&[2, 0, 0, 0, 2, 0, 0, 0, 5, 0, 3, 0]))),
    ]
}

#[test]
fn corrupt_payloads_are_refused_as_redis_refuses_them_when_sanitizing() {
    let Some(redis) = RedisServer::start_with(&["--sanitize-dump-payload", "yes"], None) else {
        return;
    };
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--sanitize-dump-payload", "yes", "--loglevel", "verbose"],
        None,
    );
    let (mut r, mut s) = (redis.client(), sluice.client());
    for (what, p) in corrupt_payloads() {
        let want = cmd(&mut r, &[b"RESTORE", b"k", b"0", &p]);
        let got = cmd(&mut s, &[b"RESTORE", b"k", b"0", &p]);
        assert_eq!(got, want, "{what}");
        assert_eq!(text(&got), "ERR Bad data format", "{what}");
        assert_eq!(text(&line(&mut s, "PING")), "PONG", "{what}: the server must stay up");
    }
    assert_eq!(cmd(&mut s, &[b"EXISTS", b"k"]), Frame::Integer(0));
    // Redis's reasons, at verbose, one per refused payload.
    let log = sluice.log_text();
    let refused = log.lines().filter(|l| l.contains("integrity check failed")).count();
    assert_eq!(refused, corrupt_payloads().len(), "{log}");
    assert!(log.contains("Zset ziplist integrity check failed"), "{log}");
    assert!(log.contains("Zipmap integrity check failed"), "{log}");
}

#[test]
fn skip_checksum_validation_applies_to_restore_as_in_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    let (mut r, mut s) = (redis.client(), sluice.client());
    let mut p = payload(0, &blob(b"hello"));
    let n = p.len();
    p[n - 8..].copy_from_slice(b"garbage!");
    for c in [&mut r, &mut s] {
        let refused = cmd(c, &[b"RESTORE", b"a", b"0", &p]);
        assert_eq!(text(&refused), "ERR DUMP payload version or checksum are wrong");
        assert_eq!(text(&line(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1")), "OK");
        assert_eq!(text(&cmd(c, &[b"RESTORE", b"a", b"0", &p])), "OK");
        assert_eq!(text(&line(c, "GET a")), "hello");
        assert_eq!(text(&line(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 0")), "OK");
        assert_eq!(text(&cmd(c, &[b"RESTORE", b"b", b"0", &p])), text(&refused));
    }
}

/// Starts `bin` in `dir` and waits for it to exit (it must refuse the
/// file); returns its log.
fn refused_start(bin: &Path, args: &[&str], dir: &Path) -> String {
    let log = dir.join("refused.log");
    let out = std::fs::File::create(&log).expect("log");
    let mut child = std::process::Command::new(bin)
        .args(args)
        .current_dir(dir)
        .stdout(out.try_clone().expect("clone"))
        .stderr(out)
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            assert!(!st.success(), "{} started with a corrupt file", bin.display());
            break;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("{} kept running with a corrupt file", bin.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_to_string(&log).unwrap_or_default()
}

#[test]
fn a_corrupt_rdb_at_start_up_is_reported_as_redis_reports_it() {
    let Some(redis) = RedisServer::start() else { return };
    let mut c = redis.client();
    line(&mut c, "SET k v");
    line(&mut c, "SAVE");
    let mut rdb = std::fs::read(redis.dir().join("dump.rdb")).expect("dump.rdb");
    let n = rdb.len();
    rdb[n - 8..].copy_from_slice(b"foobar00");
    for (name, bin) in [
        ("redis", Path::new("/usr/bin/redis-server").to_path_buf()),
        ("sluice", TestServer::default_bin()),
    ] {
        let dir = scratch_dir(&format!("corrupt-rdb-{name}"));
        std::fs::write(dir.join("dump.rdb"), &rdb).expect("write");
        let port = testkit::free_port().to_string();
        let log = refused_start(&bin, &["--port", &port, "--save", ""], &dir);
        assert!(log.contains("RDB CRC error"), "{name}: {log}");
    }
}

/// An RDB (version 9, no checksum) holding only empty collections.
fn rdb_of_empty_keys() -> Vec<u8> {
    let mut f = b"REDIS0009".to_vec();
    f.extend_from_slice(&[0xFE, 0]);
    for (ty, key) in [(2u8, &b"set"[..]), (4, b"hash"), (3, b"zset"), (1, b"list")] {
        f.push(ty);
        f.extend_from_slice(&blob(key));
        f.push(0);
    }
    f.push(0xFF);
    f.extend_from_slice(&[0; 8]);
    f
}

#[test]
fn empty_keys_in_a_file_are_skipped_and_named_as_redis_does() {
    let file = rdb_of_empty_keys();
    let rdir = scratch_dir("empty-keys-redis");
    std::fs::write(rdir.join("dump.rdb"), &file).expect("write");
    let Some(redis) = RedisServer::start_with(&[], Some(&rdir)) else { return };
    let sdir = scratch_dir("empty-keys-sluice");
    std::fs::write(sdir.join("dump.rdb"), &file).expect("write");
    let sluice = TestServer::start_with(&TestServer::default_bin(), &[], Some(&sdir));
    for mut c in [redis.client(), sluice.client()] {
        c.wait_loaded();
        assert_eq!(line(&mut c, "DBSIZE"), Frame::Integer(0));
    }
    for log in [redis.log_text(), sluice.log_text()] {
        for k in ["set", "hash", "zset", "list"] {
            assert!(log.contains(&format!("skipping empty key: {k}")), "{k}: {log}");
        }
        assert!(log.contains("keys loaded: 0, keys expired: 0, empty keys skipped: 4."), "{log}");
    }
}

#[test]
fn flushall_aborts_a_running_bgsave_without_a_failure_as_in_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    for mut c in [redis.client(), sluice.client()] {
        line(&mut c, "CONFIG SET rdb-key-save-delay 1000");
        let kv: Vec<String> = (0..5000).flat_map(|i| [format!("key:{i}"), i.to_string()]).collect();
        let mut mset: Vec<&[u8]> = vec![b"MSET"];
        mset.extend(kv.iter().map(String::as_bytes));
        assert_eq!(text(&cmd(&mut c, &mset)), "OK");
        assert_eq!(text(&line(&mut c, "BGSAVE")), "Background saving started");
        assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
        let start = Instant::now();
        assert_eq!(text(&line(&mut c, "FLUSHALL")), "OK");
        wait_for("the BGSAVE to stop", Duration::from_secs(2), || {
            info_field(&mut c, "rdb_bgsave_in_progress") == "0"
        });
        assert!(start.elapsed() < Duration::from_secs(2));
        // Not saved (the changes still count), not a failure, still writable.
        let changes: u64 = info_field(&mut c, "rdb_changes_since_last_save").parse().unwrap();
        assert!(changes >= 5000, "{changes}");
        assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
        assert_eq!(text(&line(&mut c, "SET x y")), "OK");
    }
}

fn aof_args() -> Vec<&'static str> {
    vec!["--appendonly", "yes", "--auto-aof-rewrite-percentage", "0"]
}

#[test]
fn turning_the_aof_off_kills_a_running_rewrite_as_in_redis() {
    let sluice = TestServer::start_with(&TestServer::default_bin(), &aof_args(), None);
    let mut c = sluice.client();
    c.wait_loaded();
    wait_for("the first rewrite", Duration::from_secs(10), || {
        info_field(&mut c, "aof_rewrite_in_progress") == "0"
    });
    line(&mut c, "SET k v");
    line(&mut c, "CONFIG SET rdb-key-save-delay 10000000");
    assert_eq!(
        text(&line(&mut c, "BGREWRITEAOF")),
        "Background append only file rewriting started"
    );
    let start = Instant::now();
    assert_eq!(text(&line(&mut c, "CONFIG SET appendonly no")), "OK");
    // Redis waits for the killed child before CONFIG SET answers.
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "0");
    assert!(sluice.log_text().contains("Killing running AOF rewrite child"));
    // A new rewrite is not refused as "already in progress".
    line(&mut c, "CONFIG SET rdb-key-save-delay 0");
    assert_eq!(text(&line(&mut c, "CONFIG SET appendonly yes")), "OK");
    wait_for("the rewrite that turns the AOF on", Duration::from_secs(10), || {
        info_field(&mut c, "aof_rewrite_in_progress") == "0"
            && info_field(&mut c, "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(
        text(&line(&mut c, "BGREWRITEAOF")),
        "Background append only file rewriting started"
    );
}

#[test]
fn debug_loadaof_loads_the_same_data_set_back() {
    let Some(redis) = RedisServer::start_with(&aof_args(), None) else { return };
    let sluice = TestServer::start_with(&TestServer::default_bin(), &aof_args(), None);
    for mut c in [redis.client(), sluice.client()] {
        c.wait_loaded();
        for l in ["SET s 1", "INCRBY s 41", "RPUSH l a b c", "HSET h f v g w", "SADD st x y"] {
            line(&mut c, l);
        }
        line(&mut c, "BGREWRITEAOF");
        wait_for("the rewrite", Duration::from_secs(10), || {
            info_field(&mut c, "aof_rewrite_in_progress") == "0"
        });
        for l in ["ZADD z 1 a 2 b", "SET gone x", "DEL gone", "SELECT 3", "SET other db"] {
            line(&mut c, l);
        }
        let before = text(&line(&mut c, "DEBUG DIGEST"));
        assert_eq!(text(&line(&mut c, "DEBUG LOADAOF")), "OK");
        assert_eq!(text(&line(&mut c, "DEBUG DIGEST")), before);
        assert_eq!(text(&line(&mut c, "GET other")), "db");
    }
    let (mut r, mut s) = (redis.client(), sluice.client());
    assert_eq!(text(&line(&mut s, "DEBUG DIGEST")), text(&line(&mut r, "DEBUG DIGEST")));
}

/// `dir/appendonlydir` holding one incremental file with `body`.
fn aof_dir(tag: &str, body: &[u8]) -> std::path::PathBuf {
    let dir = scratch_dir(tag);
    let ad = dir.join("appendonlydir");
    std::fs::create_dir_all(&ad).expect("mkdir");
    std::fs::write(
        ad.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .expect("manifest");
    std::fs::write(ad.join("appendonly.aof.1.incr.aof"), body).expect("incr");
    dir
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    testkit::encode(args, &mut out);
    out
}

#[test]
fn aof_command_cut_at_end_of_file_is_truncated_and_the_next_start_loads_it() {
    // Regression: a last command missing only its final "\n" loaded as a
    // clean file, and the next append made the file unreadable.
    let mut body = resp(&["INCR", "foo"]).repeat(5);
    let last = resp(&["INCR", "foo"]);
    body.extend_from_slice(&last[..last.len() - 1]);
    let mut args = aof_args();
    args.extend(["--aof-load-truncated", "yes"]);
    let dir = aof_dir("aof-short-sluice", &body);
    let rdir = aof_dir("aof-short-redis", &body);
    let Some(redis) = RedisServer::start_with(&args, Some(&rdir)) else { return };
    let mut r = redis.client();
    r.wait_loaded();
    {
        let sluice = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
        let mut s = sluice.client();
        s.wait_loaded();
        assert_eq!(text(&line(&mut s, "GET foo")), text(&line(&mut r, "GET foo")));
        assert_eq!(text(&line(&mut s, "GET foo")), "5");
        assert!(sluice.log_text().contains("Truncating the AOF appendonly.aof.1.incr.aof"));
        assert_eq!(text(&line(&mut s, "INCR foo")), "6");
    }
    let sluice = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
    let mut s = sluice.client();
    s.wait_loaded();
    assert_eq!(text(&line(&mut s, "GET foo")), "6");
}

#[test]
fn aof_replay_keeps_a_key_past_its_deadline_until_loading_ends() {
    // Regression: PEXPIREAT with a past time deleted the key mid-replay,
    // so the RPUSH after it made a new list without the deadline.
    let mut body = resp(&["RPUSH", "list", "foo"]);
    body.extend(resp(&["PEXPIREAT", "list", "1000"]));
    body.extend(resp(&["RPUSH", "list", "bar"]));
    let rdir = aof_dir("aof-expire-redis", &body);
    let sdir = aof_dir("aof-expire-sluice", &body);
    let Some(redis) = RedisServer::start_with(&aof_args(), Some(&rdir)) else { return };
    let sluice = TestServer::start_with(&TestServer::default_bin(), &aof_args(), Some(&sdir));
    for mut c in [redis.client(), sluice.client()] {
        c.wait_loaded();
        assert_eq!(line(&mut c, "LLEN list"), Frame::Integer(0));
    }
}

#[test]
fn aof_scripts_write_while_replayed_on_a_read_only_replica() {
    let mut body = resp(&["SELECT", "9"]);
    body.extend(resp(&["EVAL", "redis.call('set',KEYS[1],'100')", "1", "foo"]));
    body.extend(resp(&["EVAL", "redis.call('incr',KEYS[1])", "1", "foo"]));
    let mut args = aof_args();
    args.extend(["--replica-read-only", "yes", "--replicaof", "127.0.0.1", "1"]);
    let rdir = aof_dir("aof-ro-redis", &body);
    let sdir = aof_dir("aof-ro-sluice", &body);
    let Some(redis) = RedisServer::start_with(&args, Some(&rdir)) else { return };
    let sluice = TestServer::start_with(&TestServer::default_bin(), &args, Some(&sdir));
    for mut c in [redis.client(), sluice.client()] {
        c.wait_loaded();
        line(&mut c, "SELECT 9");
        assert_eq!(text(&line(&mut c, "GET foo")), "101");
    }
}

#[test]
fn an_old_style_aof_is_migrated_into_the_aof_directory_as_redis_does() {
    let mut body = resp(&["SET", "k1", "v1"]);
    body.extend(resp(&["SET", "k2", "v2"]));
    let mut manifests = Vec::new();
    for name in ["redis", "sluice"] {
        let dir = scratch_dir(&format!("aof-upgrade-{name}"));
        std::fs::write(dir.join("appendonly.aof"), &body).expect("old aof");
        let server: Box<dyn std::ops::Deref<Target = testkit::ServerProc>> = if name == "redis" {
            let Some(r) = RedisServer::start_with(&aof_args(), Some(&dir)) else { return };
            Box::new(r)
        } else {
            Box::new(TestServer::start_with(&TestServer::default_bin(), &aof_args(), Some(&dir)))
        };
        let mut c = server.client();
        c.wait_loaded();
        assert_eq!(text(&line(&mut c, "GET k2")), "v2", "{name}");
        assert!(!dir.join("appendonly.aof").exists(), "{name}");
        assert!(dir.join("appendonlydir/appendonly.aof").exists(), "{name}");
        assert!(server.log_text().contains("Successfully migrated an old-style AOF"), "{name}");
        manifests.push(
            std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest"))
                .expect("manifest"),
        );
    }
    assert_eq!(manifests[0], manifests[1]);
}

#[test]
fn aof_disable_auto_gc_keeps_history_files_until_turned_off_as_in_redis() {
    let Some(redis) = RedisServer::start_with(&aof_args(), None) else { return };
    let sluice = TestServer::start_with(&TestServer::default_bin(), &aof_args(), None);
    let mut seen = Vec::new();
    for server in [&*redis, &*sluice] {
        let mut c = server.client();
        c.wait_loaded();
        let manifest = || {
            std::fs::read_to_string(server.dir().join("appendonlydir/appendonly.aof.manifest"))
                .expect("manifest")
        };
        assert_eq!(text(&line(&mut c, "CONFIG SET aof-disable-auto-gc yes")), "OK");
        for _ in 0..2 {
            line(&mut c, "SET k v");
            wait_for("no rewrite running", Duration::from_secs(10), || {
                info_field(&mut c, "aof_rewrite_in_progress") == "0"
            });
            assert_eq!(
                text(&line(&mut c, "BGREWRITEAOF")),
                "Background append only file rewriting started"
            );
            wait_for("the rewrite", Duration::from_secs(10), || {
                info_field(&mut c, "aof_rewrite_in_progress") == "0"
            });
        }
        let kept = manifest();
        let history: Vec<&str> = kept.lines().filter(|l| l.ends_with("type h")).collect();
        assert_eq!(history.len(), 4, "{kept}");
        for h in &history {
            let name = h.split(' ').nth(1).unwrap();
            assert!(server.dir().join("appendonlydir").join(name).exists(), "{name}");
        }
        assert_eq!(text(&line(&mut c, "CONFIG SET aof-disable-auto-gc no")), "OK");
        let after = manifest();
        assert!(!after.contains("type h"), "{after}");
        wait_for("the history files to go", Duration::from_secs(5), || {
            history.iter().all(|h| {
                !server.dir().join("appendonlydir").join(h.split(' ').nth(1).unwrap()).exists()
            })
        });
        seen.push((kept, after));
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn restore_idletime_sets_idle_times_longer_than_the_uptime_as_redis() {
    // Regression: the LRU clock counted from start-up, so a fresh server
    // clamped RESTORE … IDLETIME 1000 to its own uptime.
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    for mut c in [redis.client(), sluice.client()] {
        line(&mut c, "SET foo bar");
        let Frame::Bulk(Some(p)) = line(&mut c, "DUMP foo") else { panic!("DUMP") };
        line(&mut c, "DEL foo");
        line(&mut c, "CONFIG SET maxmemory-policy allkeys-lru");
        assert_eq!(text(&cmd(&mut c, &[b"RESTORE", b"foo", b"0", &p, b"IDLETIME", b"1000"])), "OK");
        let Frame::Integer(idle) = line(&mut c, "OBJECT IDLETIME foo") else { panic!("idle") };
        assert!((1000..=1010).contains(&idle), "{idle}");
        assert_eq!(text(&line(&mut c, "GET foo")), "bar");
    }
}

/// DEBUG LOADAOF must not append what it replays to the AOF: the second
/// reload then met each FUNCTION LOAD twice ("Library already exists")
/// and the server stopped, and every reload doubled the file.
#[test]
fn debug_loadaof_does_not_append_what_it_replays() {
    let Some(redis) = RedisServer::start_with(&aof_args(), None) else { return };
    let sluice = TestServer::start_with(&TestServer::default_bin(), &aof_args(), None);
    let lib = "#!lua name=test\nredis.register_function('test', function() return 'hello' end)";
    let mut sizes = Vec::new();
    for (who, mut c) in [("redis", redis.client()), ("sluice", sluice.client())] {
        c.wait_loaded();
        line(&mut c, "BGREWRITEAOF");
        wait_for("the rewrite", Duration::from_secs(10), || {
            info_field(&mut c, "aof_rewrite_in_progress") == "0"
        });
        cmd(&mut c, &[b"FUNCTION", b"LOAD", lib.as_bytes()]);
        line(&mut c, "SET k v");
        // Redis may postpone the write while the rewrite's fsync runs in
        // the background; what it holds back shows in aof_buffer_length.
        wait_for("the AOF buffer to be written", Duration::from_secs(10), || {
            info_field(&mut c, "aof_buffer_length") == "0"
        });
        let before = info_field(&mut c, "aof_current_size");
        for _ in 0..3 {
            assert_eq!(text(&line(&mut c, "DEBUG LOADAOF")), "OK");
        }
        sizes.push((who, before, info_field(&mut c, "aof_current_size")));
        assert_eq!(text(&line(&mut c, "FCALL test 0")), "hello");
        line(&mut c, "FUNCTION DELETE test");
        assert_eq!(text(&line(&mut c, "DEBUG LOADAOF")), "OK");
        assert!(matches!(line(&mut c, "FUNCTION LIST"), Frame::Array(Some(v)) if v.is_empty()));
    }
    for (who, before, after) in sizes {
        assert_eq!(after, before, "the reloads changed {who}'s AOF size");
    }
}

#[test]
fn a_failed_bgsave_refuses_ping_and_scripts_that_may_write_as_redis_does() {
    // Redis's processCommand refuses PING with MISCONF, and a script whose
    // shebang (or function) does not say no-writes before it runs, even
    // one that would only read; a script without a shebang runs until a
    // write it calls is refused (the error then names the script).
    let rdir = scratch_dir("misconf-scripts-r");
    let sdir = scratch_dir("misconf-scripts-s");
    let Some(redis) = RedisServer::start_with(
        &["--dir", rdir.to_str().unwrap(), "--save", "3600 1"],
        Some(&rdir),
    ) else {
        return;
    };
    let sluice =
        TestServer::start_with(&TestServer::default_bin(), &["--save", "3600 1"], Some(&sdir));
    let lib: &[u8] = b"#!lua name=l\n\
        redis.register_function('w', function(k) return redis.call('set', k[1], 1) end)\n\
        redis.register_function('rw', function(k) return redis.call('get', k[1]) end)\n\
        redis.register_function{function_name='r', flags={'no-writes'},\n\
          callback=function(k) return redis.call('get', k[1]) end}";
    let (mut r, mut s) = (redis.client(), sluice.client());
    for (c, dir) in [(&mut r, &rdir), (&mut s, &sdir)] {
        assert_eq!(text(&line(c, "SET x x")), "OK");
        assert_eq!(text(&cmd(c, &[b"FUNCTION", b"LOAD", lib])), "l");
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(text(&line(c, "BGSAVE")), "Background saving started");
        wait_for("the BGSAVE to fail", Duration::from_secs(20), || {
            info_field(c, "rdb_last_bgsave_status") == "err"
        });
    }
    let eval = |script: &str, keys: &[&str]| -> Vec<Vec<u8>> {
        let mut v = vec![b"EVAL".to_vec(), script.as_bytes().to_vec()];
        v.push(keys.len().to_string().into_bytes());
        v.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
        v
    };
    let words = |l: &str| -> Vec<Vec<u8>> { l.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
    let steps: Vec<Vec<Vec<u8>>> = vec![
        words("PING"),
        words("PING hello"),
        words("GET x"),
        words("SET x y"),
        eval("return redis.call('set', KEYS[1], 1)", &["x"]),
        eval("return redis.call('get', KEYS[1])", &["x"]),
        eval("#!lua\nreturn redis.call('set', KEYS[1], 1)", &["x"]),
        eval("#!lua\nreturn redis.call('get', KEYS[1])", &["x"]),
        eval("#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", &["x"]),
        eval("#!lua\nreturn 1", &[]),
        words("FCALL w 1 x"),
        words("FCALL rw 1 x"),
        words("FCALL r 1 x"),
        words("FCALL_RO r 1 x"),
        words("MULTI"),
        words("PING"),
        words("EXEC"),
        words("MULTI"),
        words("GET x"),
        words("EXEC"),
        // Refused when queued, as a write command is: the EXEC aborts.
        words("MULTI"),
        eval("#!lua\nreturn redis.call('get', KEYS[1])", &["x"]),
        words("EXEC"),
        words("MULTI"),
        words("FCALL rw 1 x"),
        words("EXEC"),
        words("MULTI"),
        eval("#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", &["x"]),
        words("FCALL r 1 x"),
        eval("return redis.call('get', KEYS[1])", &["x"]),
        words("EXEC"),
        words("CONFIG SET stop-writes-on-bgsave-error no"),
        words("PING"),
        eval("#!lua\nreturn redis.call('get', KEYS[1])", &["x"]),
        words("CONFIG SET stop-writes-on-bgsave-error yes"),
        words("PING"),
    ];
    for step in &steps {
        let args: Vec<&[u8]> = step.iter().map(Vec::as_slice).collect();
        let want = cmd(&mut r, &args);
        assert_eq!(cmd(&mut s, &args), want, "{}", String::from_utf8_lossy(&step.concat()));
    }
    assert!(text(&line(&mut s, "PING")).starts_with("MISCONF "));
}

/// An AOF write that fails (here the next incremental file is a link to
/// /dev/full, so every write gets ENOSPC) refuses writes and PING with
/// Redis's `MISCONF Errors writing to the AOF file: …` until the AOF is
/// turned off, as Redis's writeCommandsDeniedByDiskError does; reads
/// keep working and the write that could not be written is not lost
/// from the file's order (it is retried, never skipped). Before, Sluice
/// logged the error, dropped the bytes and went on acknowledging writes.
#[test]
fn a_failed_aof_write_refuses_writes_as_redis_does() {
    let rdir = scratch_dir("aof-full-r");
    let sdir = scratch_dir("aof-full-s");
    let args = ["--appendonly", "yes", "--save", ""];
    let Some(redis) = RedisServer::start_with(&args, Some(&rdir)) else { return };
    let sluice = TestServer::start_with(&TestServer::default_bin(), &args, Some(&sdir));
    let (mut r, mut s) = (redis.client(), sluice.client());
    for (c, dir) in [(&mut r, &rdir), (&mut s, &sdir)] {
        assert_eq!(text(&line(c, "SET x 1")), "OK");
        // The rewrite opens the next incremental file: make it /dev/full.
        let aofdir = dir.join("appendonlydir");
        let manifest = std::fs::read_to_string(aofdir.join("appendonly.aof.manifest")).unwrap();
        let seq: u32 = manifest
            .lines()
            .filter(|l| l.contains(" type i"))
            .filter_map(|l| l.split(".incr.aof").next()?.rsplit('.').next()?.parse().ok())
            .max()
            .unwrap();
        let next = aofdir.join(format!("appendonly.aof.{}.incr.aof", seq + 1));
        std::os::unix::fs::symlink("/dev/full", &next).unwrap();
        assert_eq!(text(&line(c, "BGREWRITEAOF")), "Background append only file rewriting started");
        wait_for("the rewrite to end", Duration::from_secs(20), || {
            info_field(c, "aof_rewrite_in_progress") == "0"
                && info_field(c, "aof_rewrite_scheduled") == "0"
        });
        assert_eq!(text(&line(c, "SET y 1")), "OK");
        wait_for("the AOF write to fail", Duration::from_secs(20), || {
            info_field(c, "aof_last_write_status") == "err"
        });
    }
    // The write is retried (every turn, and once a second) but the error
    // is logged once every 30 seconds, as Redis logs it.
    std::thread::sleep(Duration::from_millis(2500));
    let errors = |log: String| log.matches("Error writing to the AOF file").count();
    assert_eq!(errors(sluice.log_text()), errors(redis.log_text()));
    assert_eq!(errors(sluice.log_text()), 1);
    for l in ["SET z 1", "PING", "GET x", "INCR x", "MULTI", "SET z 2", "EXEC", "GET y"] {
        let want = line(&mut r, l);
        assert_eq!(line(&mut s, l), want, "{l}");
    }
    assert_eq!(
        text(&line(&mut s, "SET z 1")),
        "MISCONF Errors writing to the AOF file: No space left on device"
    );
    // An AOF that is off refuses nothing.
    for l in ["CONFIG SET appendonly no", "SET z 1", "PING"] {
        let want = line(&mut r, l);
        assert_eq!(line(&mut s, l), want, "{l}");
    }
    assert_eq!(text(&line(&mut s, "SET z 1")), "OK");
}

/// What the AOF loader replays is not a client's call: after `DEBUG
/// LOADAOF`, and after a start that loads the file, `INFO commandstats`
/// and the slow log show only what clients ran, as Redis's loader runs
/// the file's commands outside `call()`. (Sluice counted them: a few, once
/// more than eight commands filled the loader's accumulators, and with the
/// accumulators per thread, all of those `DEBUG LOADAOF` replayed.)
#[test]
fn commands_loaded_from_the_aof_are_not_counted_as_calls() {
    enum Server {
        Redis(RedisServer),
        Sluice(TestServer),
    }
    let start = |redis: bool, dir: &Path| -> Option<Server> {
        Some(if redis {
            Server::Redis(RedisServer::start_with(&aof_args(), Some(dir))?)
        } else {
            Server::Sluice(TestServer::start_with(
                &TestServer::default_bin(),
                &aof_args(),
                Some(dir),
            ))
        })
    };
    let client = |s: &Server| match s {
        Server::Redis(r) => r.client(),
        Server::Sluice(t) => t.client(),
    };
    let names = |c: &mut Client| -> Vec<String> {
        let all = text(&line(c, "INFO commandstats"));
        let mut v: Vec<String> = all
            .lines()
            .filter_map(|l| l.strip_prefix("cmdstat_"))
            .map(|l| l.split(':').next().unwrap_or_default().to_string())
            .collect();
        v.sort();
        v
    };
    let slow = |c: &mut Client| -> Vec<String> {
        let Frame::Array(Some(entries)) = line(c, "SLOWLOG GET -1") else { panic!("SLOWLOG GET") };
        let argv0 = |e: &Frame| match e {
            Frame::Array(Some(f)) => match f.get(3) {
                Some(Frame::Array(Some(argv))) => text(&argv[0]).to_lowercase(),
                other => panic!("slow log entry {other:?}"),
            },
            other => panic!("slow log entry {other:?}"),
        };
        entries.iter().map(argv0).collect()
    };
    let writes = [
        "SET a 1",
        "INCR n",
        "APPEND a b",
        "LPUSH l x",
        "RPUSH l y",
        "SADD s m",
        "HSET h f v",
        "ZADD z 1 m",
        "PFADD p x",
        "SETEX e 100 v",
        "XADD st 1-1 f v",
        "SELECT 2",
        "SET b 2",
    ];
    let mut seen = Vec::new();
    for (redis, tag) in [(true, "aof-stats-redis"), (false, "aof-stats-sluice")] {
        let dir = scratch_dir(tag);
        let Some(server) = start(redis, &dir) else { return };
        let mut c = client(&server);
        c.wait_loaded();
        for l in writes {
            line(&mut c, l);
        }
        line(&mut c, "SELECT 0");
        line(&mut c, "CONFIG SET slowlog-log-slower-than 0");
        line(&mut c, "CONFIG RESETSTAT");
        line(&mut c, "SLOWLOG RESET");
        assert_eq!(text(&line(&mut c, "DEBUG LOADAOF")), "OK");
        let after_loadaof = (names(&mut c), slow(&mut c));
        // SHUTDOWN answers by closing the connection.
        c.send(&[b"SHUTDOWN"]).expect("send");
        let _ = c.read_frame();
        drop(server);
        let server = start(redis, &dir).expect("the restart");
        let mut c = client(&server);
        c.wait_loaded();
        assert_eq!(text(&line(&mut c, "DBSIZE")), "9", "the file loaded");
        seen.push((after_loadaof, names(&mut c)));
    }
    assert_eq!(seen[0], seen[1]);
}
