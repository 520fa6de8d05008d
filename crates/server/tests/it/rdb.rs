//! RDB files and DUMP payloads against redis-server 7.0.15, both ways: a
//! data set with every type and encoding (at the thresholds, empty and big
//! values, binary keys, several databases, TTLs) saved by one server loads
//! into the other with every key, value, `OBJECT ENCODING` and expiry
//! equal, compared through both servers' replies; DUMP payloads are
//! byte-identical where Redis's order is deterministic and restore across
//! servers; corrupt payloads and files get Redis's exact errors.

use std::path::Path;
use std::time::{Duration, Instant};

use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

fn cmd(c: &mut Client, args: &[&[u8]]) -> Frame {
    c.send(args).expect("send");
    c.read_frame().expect("reply")
}

fn ok(c: &mut Client, args: &[&[u8]]) {
    let r = cmd(c, args);
    assert!(
        !matches!(r, Frame::Error(_)),
        "{:?} -> {r:?}",
        args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
    );
}

/// Sends many commands at once and checks none failed.
fn pipeline(c: &mut Client, cmds: &[Vec<Vec<u8>>]) {
    for a in cmds {
        c.send(a).expect("send");
    }
    for a in cmds {
        let r = c.read_frame().expect("reply");
        assert!(!matches!(r, Frame::Error(_)), "{:?} -> {r:?}", String::from_utf8_lossy(&a[0]));
    }
}

fn v(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// Every type in every encoding, at and past the thresholds, in databases
/// 0, 1 and 15. Expiry times are absolute so both servers agree exactly.
fn populate(c: &mut Client) {
    let far = b"4102444800000"; // 2100-01-01, in ms
    let noisy: Vec<u8> =
        (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let lzf = "hello world, hello world, hello world! ".repeat(30);
    // Strings: int, embstr, raw, compressible, binary, empty, big.
    let mut cmds: Vec<Vec<Vec<u8>>> = vec![
        v(&[b"SET", b"s:int", b"12345"]),
        v(&[b"SET", b"s:int8", b"-100"]),
        v(&[b"SET", b"s:int32", b"2147483647"]),
        v(&[b"SET", b"s:int64", b"-9223372036854775808"]),
        v(&[b"SET", b"s:notint", b"0123"]),
        v(&[b"SET", b"s:emb", &[b'e'; 44]]),
        v(&[b"SET", b"s:raw", &[b'r'; 45]]),
        v(&[b"SET", b"s:empty", b""]),
        v(&[b"SET", b"s:lzf", lzf.as_bytes()]),
        v(&[b"SET", b"s:big", &noisy]),
        v(&[b"SET", b"\x00bin\xffkey\r\n", b"\x00\x01\x02"]),
        v(&[b"SET", b"s:ttl", b"v", b"PXAT", far]),
    ];
    cmds.push(v(&[b"APPEND", b"s:appended", b"77"]));
    // Lists: one element, mixed ints and strings, several nodes, a big element.
    cmds.push(v(&[b"RPUSH", b"l:one", b"x"]));
    for i in 0..300 {
        let e = if i % 3 == 0 { format!("{}", i * 1000 - 70000) } else { format!("elem-{i}") };
        cmds.push(v(&[b"RPUSH", b"l:mixed", e.as_bytes()]));
    }
    for i in 0..200 {
        cmds.push(v(&[b"RPUSH", b"l:nodes", format!("{i:0>100}").as_bytes()]));
    }
    cmds.push(v(&[b"RPUSH", b"l:bigelem", b"a", &[b'z'; 70_000], b"b"]));
    cmds.push(v(&[b"RPUSH", b"l:ttl", b"1", b"2"]));
    cmds.push(v(&[b"PEXPIREAT", b"l:ttl", far]));
    // Hashes: listpack at the thresholds (512 entries is Redis 7.0's built-in
    // default, 64 bytes), hashtable just past them.
    for i in 0..512 {
        cmds.push(v(&[b"HSET", b"h:lp512", format!("f{i}").as_bytes(), format!("{i}").as_bytes()]));
    }
    for i in 0..513 {
        cmds.push(v(&[
            b"HSET",
            b"h:ht513",
            format!("f{i}").as_bytes(),
            format!("v{i}").as_bytes(),
        ]));
    }
    cmds.push(v(&[b"HSET", b"h:val64", b"f", &[b'v'; 64]]));
    cmds.push(v(&[b"HSET", b"h:val65", b"f", &[b'v'; 65]]));
    cmds.push(v(&[b"HSET", b"h:ints", b"1", b"-1", b"2", b"100000", b"3", b"9223372036854775807"]));
    // Sets: intset at each width and at the threshold, hashtable past it.
    for i in 0..512 {
        cmds.push(v(&[b"SADD", b"set:is512", format!("{}", i * 7 - 1000).as_bytes()]));
    }
    for i in 0..513 {
        cmds.push(v(&[b"SADD", b"set:ht513", format!("{i}").as_bytes()]));
    }
    cmds.push(v(&[b"SADD", b"set:wide", b"1", b"-70000", b"5000000000"]));
    cmds.push(v(&[b"SADD", b"set:strs", b"a", b"b", b"c", b""]));
    // Sorted sets: listpack at the thresholds, skiplist past them, odd scores.
    for i in 0..128 {
        cmds.push(v(&[
            b"ZADD",
            b"z:lp128",
            format!("{}", i as f64 * 0.5).as_bytes(),
            format!("m{i}").as_bytes(),
        ]));
    }
    for i in 0..129 {
        cmds.push(v(&[b"ZADD", b"z:sl129", format!("{i}").as_bytes(), format!("m{i}").as_bytes()]));
    }
    cmds.push(v(&[
        b"ZADD",
        b"z:odd",
        b"inf",
        b"pinf",
        b"-inf",
        b"ninf",
        b"0.1",
        b"tenth",
        b"1e300",
        b"huge",
        b"-3",
        b"neg",
        b"4503599627370497",
        b"big",
        b"12",
        b"int",
    ]));
    cmds.push(v(&[b"ZADD", b"z:long", b"1", &[b'm'; 65]]));
    // Streams: one node, several nodes with tombstones and mixed field
    // sets, emptied by XDEL, and groups whose pending entries have
    // consumers (delivery times fixed by XCLAIM TIME; consumers' seen times
    // are the clock's, so their keys are `x:cons:*`).
    cmds.push(v(&[b"XADD", b"x:one", b"1-1", b"a", b"1", b"b", b"two"]));
    for i in 0..350u64 {
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        let val = if i % 4 == 0 { format!("{}", i * 1000) } else { format!("v{i:0>30}") };
        let field: &[u8] = if i % 7 == 0 { b"other" } else { b"f" };
        cmds.push(v(&[b"XADD", b"x:nodes", id.as_bytes(), field, val.as_bytes(), b"g", b"x"]));
        cmds.push(v(&[b"XADD", b"x:cons:g", id.as_bytes(), b"f", val.as_bytes()]));
    }
    for i in (0..350u64).step_by(5) {
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        cmds.push(v(&[b"XDEL", b"x:nodes", id.as_bytes()]));
    }
    cmds.push(v(&[b"XTRIM", b"x:nodes", b"MAXLEN", b"250"]));
    cmds.push(v(&[b"XADD", b"x:empty", b"5-5", b"f", b"v"]));
    cmds.push(v(&[b"XDEL", b"x:empty", b"5-5"]));
    cmds.push(v(&[b"XGROUP", b"CREATE", b"x:one", b"123", b"0"]));
    cmds.push(v(&[b"XGROUP", b"CREATE", b"x:nodes", b"late", b"1050-1"]));
    cmds.push(v(&[b"XGROUP", b"CREATE", b"x:cons:g", b"g1", b"0"]));
    cmds.push(v(&[b"XGROUP", b"CREATE", b"x:cons:g", b"g2", b"$"]));
    cmds.push(v(&[b"XGROUP", b"CREATECONSUMER", b"x:cons:g", b"g2", b"carol"]));
    cmds.push(v(&[
        b"XREADGROUP",
        b"GROUP",
        b"g1",
        b"alice",
        b"COUNT",
        b"5",
        b"STREAMS",
        b"x:cons:g",
        b">",
    ]));
    cmds.push(v(&[
        b"XREADGROUP",
        b"GROUP",
        b"g1",
        b"bob",
        b"COUNT",
        b"3",
        b"STREAMS",
        b"x:cons:g",
        b">",
    ]));
    cmds.push(v(&[b"XACK", b"x:cons:g", b"g1", b"1000-1"]));
    cmds.push(v(&[
        b"XCLAIM",
        b"x:cons:g",
        b"g1",
        b"bob",
        b"0",
        b"1000-2",
        b"1001-0",
        b"TIME",
        b"1234",
        b"RETRYCOUNT",
        b"7",
    ]));
    cmds.push(v(&[b"XDEL", b"x:cons:g", b"1001-1"]));
    // Other databases.
    cmds.push(v(&[b"SELECT", b"1"]));
    cmds.push(v(&[b"SET", b"db1:k", b"one"]));
    cmds.push(v(&[b"HSET", b"db1:h", b"a", b"b"]));
    cmds.push(v(&[b"SELECT", b"15"]));
    cmds.push(v(&[b"SET", b"db15:k", b"fifteen", b"PXAT", far]));
    cmds.push(v(&[b"SELECT", b"0"]));
    pipeline(c, &cmds);
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(Some(b)) | Frame::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn items(f: Frame) -> Vec<Vec<u8>> {
    match f {
        Frame::Array(Some(a)) => a
            .into_iter()
            .map(|x| match x {
                Frame::Bulk(Some(b)) => b,
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Waits until a server has loaded its data set (`-LOADING` meanwhile).
/// Every key of every database with its type, encoding, absolute expiry
/// and value, in a canonical order.
fn snapshot(c: &mut Client) -> Vec<String> {
    c.wait_loaded();
    let mut out = Vec::new();
    for db in 0..16 {
        ok(c, &[b"SELECT", db.to_string().as_bytes()]);
        let mut keys = items(cmd(c, &[b"KEYS", b"*"]));
        keys.sort();
        for k in keys {
            let ty = text(&cmd(c, &[b"TYPE", &k]));
            let enc = text(&cmd(c, &[b"OBJECT", b"ENCODING", &k]));
            let exp = text(&cmd(c, &[b"PEXPIRETIME", &k]));
            let val = match ty.as_str() {
                "string" => vec![text(&cmd(c, &[b"GET", &k]))],
                "list" => items(cmd(c, &[b"LRANGE", &k, b"0", b"-1"]))
                    .iter()
                    .map(|x| String::from_utf8_lossy(x).into_owned())
                    .collect(),
                "hash" => {
                    let flat = items(cmd(c, &[b"HGETALL", &k]));
                    let mut pairs: Vec<String> = flat
                        .chunks(2)
                        .map(|p| {
                            format!(
                                "{}={}",
                                String::from_utf8_lossy(&p[0]),
                                String::from_utf8_lossy(&p[1])
                            )
                        })
                        .collect();
                    pairs.sort();
                    pairs
                }
                "set" => {
                    let mut m: Vec<String> = items(cmd(c, &[b"SMEMBERS", &k]))
                        .iter()
                        .map(|x| String::from_utf8_lossy(x).into_owned())
                        .collect();
                    m.sort();
                    m
                }
                "zset" => items(cmd(c, &[b"ZRANGE", &k, b"0", b"-1", b"WITHSCORES"]))
                    .iter()
                    .map(|x| String::from_utf8_lossy(x).into_owned())
                    .collect(),
                "stream" => {
                    let mut out = vec![render(&cmd(c, &[b"XRANGE", &k, b"-", b"+"]))];
                    out.push(render(&cmd(c, &[b"XINFO", b"STREAM", &k, b"FULL"])));
                    let groups = match cmd(c, &[b"XINFO", b"GROUPS", &k]) {
                        Frame::Array(Some(g)) => g,
                        other => panic!("XINFO GROUPS: {other:?}"),
                    };
                    for g in groups {
                        let Frame::Array(Some(fields)) = g else { panic!("group") };
                        let Frame::Bulk(Some(name)) = &fields[1] else { panic!("name") };
                        out.push(render(&cmd(c, &[b"XPENDING", &k, name])));
                    }
                    out
                }
                other => panic!("unexpected type {other}"),
            };
            let vlen = val.iter().map(String::len).sum::<usize>();
            // Big values are summarised (their equality is still checked).
            let val = if vlen > 2000 {
                format!("{} items, {}", val.len(), fnv(&val))
            } else {
                val.join("|")
            };
            out.push(format!(
                "db{db} {:?} {ty} {enc} exp={exp} {val}",
                String::from_utf8_lossy(&k)
            ));
        }
    }
    ok(c, &[b"SELECT", b"0"]);
    out
}

/// A reply as text, with clock readings (integers that look like Unix ms:
/// seen and delivery times) blanked, as they differ between servers.
fn render(f: &Frame) -> String {
    match f {
        Frame::Integer(i) if *i >= 1_000_000_000_000 => "T".into(),
        Frame::Array(Some(a)) => {
            format!("[{}]", a.iter().map(render).collect::<Vec<_>>().join(","))
        }
        other => text(other),
    }
}

fn fnv(v: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for s in v {
        for b in s.bytes().chain(std::iter::once(0)) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

fn assert_same(a: &[String], b: &[String], what: &str) {
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "{what}");
    }
    assert_eq!(a.len(), b.len(), "{what}: key counts");
}

fn file_bytes(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn sluice_file_loads_into_redis_with_everything_equal() {
    let dir = scratch_dir("rdb-s2r");
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--dbfilename", "sluice.rdb"],
        Some(&dir),
    );
    let mut s = sluice.client();
    populate(&mut s);
    let before = snapshot(&mut s);
    assert_eq!(text(&cmd(&mut s, &[b"SAVE"])), "OK");
    let Some(redis) = RedisServer::start_with(
        &["--dir", dir.to_str().unwrap(), "--dbfilename", "sluice.rdb"],
        Some(&dir),
    ) else {
        return;
    };
    let mut r = redis.client();
    let loaded = snapshot(&mut r);
    assert_same(&before, &loaded, "Sluice's file as redis-server loaded it");
    // The same commands on redis-server give the same data set: the
    // encodings compared above are Redis's own.
    ok(&mut r, &[b"FLUSHALL"]);
    populate(&mut r);
    assert_same(&before, &snapshot(&mut r), "the data set built on redis-server");
    drop(sluice);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_file_loads_into_sluice_with_everything_equal() {
    let dir = scratch_dir("rdb-r2s");
    let Some(redis) = RedisServer::start_with(
        &["--dir", dir.to_str().unwrap(), "--dbfilename", "redis.rdb"],
        Some(&dir),
    ) else {
        return;
    };
    let mut r = redis.client();
    populate(&mut r);
    let before = snapshot(&mut r);
    assert_eq!(text(&cmd(&mut r, &[b"SAVE"])), "OK");
    std::fs::copy(dir.join("redis.rdb"), dir.join("lzf.rdb")).unwrap();
    // And once more without compression, so both string forms are read.
    ok(&mut r, &[b"CONFIG", b"SET", b"rdbcompression", b"no"]);
    assert_eq!(text(&cmd(&mut r, &[b"SAVE"])), "OK");
    std::fs::copy(dir.join("redis.rdb"), dir.join("plain.rdb")).unwrap();
    assert!(file_bytes(&dir, "plain.rdb").len() > file_bytes(&dir, "lzf.rdb").len());
    for name in ["lzf.rdb", "plain.rdb"] {
        let sluice =
            TestServer::start_with(&TestServer::default_bin(), &["--dbfilename", name], Some(&dir));
        let mut s = sluice.client();
        assert_same(&before, &snapshot(&mut s), name);
        let info = text(&cmd(&mut s, &[b"INFO", b"persistence"]));
        assert!(info.contains(&format!("rdb_last_load_keys_loaded:{}", before.len())), "{info}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sluice_writes_the_same_file_as_redis_for_deterministic_encodings() {
    // A data set without hashtables or skiplists (whose order is the hash
    // table's) is written byte for byte as redis-server writes it, apart
    // from the AUX fields (ctime, used-mem) and so the checksum.
    let dir = scratch_dir("rdb-bytes");
    let Some(redis) = RedisServer::start_with(
        &["--dir", dir.to_str().unwrap(), "--dbfilename", "r.rdb", "--enable-debug-command", "yes"],
        Some(&dir),
    ) else {
        return;
    };
    let sluice =
        TestServer::start_with(&TestServer::default_bin(), &["--dbfilename", "s.rdb"], Some(&dir));
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for c in [&mut redis.client(), &mut sluice.client()] {
        populate(c);
        let mut all = items(cmd(c, &[b"KEYS", b"*"]));
        all.retain(|k| {
            let e = text(&cmd(c, &[b"OBJECT", b"ENCODING", k]));
            e != "hashtable" && e != "skiplist" && !k.starts_with(b"x:cons:")
        });
        all.sort();
        keys = all;
    }
    let (mut r, mut s) = (redis.client(), sluice.client());
    for k in &keys {
        let a = cmd(&mut r, &[b"DUMP", k]);
        let b = cmd(&mut s, &[b"DUMP", k]);
        assert_eq!(a, b, "DUMP {}", String::from_utf8_lossy(k));
    }
    assert!(keys.len() > 20);
    // DEBUG OBJECT's serializedlength is the RDB form's length, for every
    // key (hash-ordered encodings too: their order does not change it).
    let field = |c: &mut Client, k: &[u8]| {
        let line = text(&cmd(c, &[b"DEBUG", b"OBJECT", k]));
        line.split(' ').find(|f| f.starts_with("serializedlength:")).map(str::to_string)
    };
    for k in items(cmd(&mut r, &[b"KEYS", b"*"])) {
        assert_eq!(field(&mut r, &k), field(&mut s, &k), "{}", String::from_utf8_lossy(&k));
    }
    let _ = (file_bytes, Duration::from_secs(0), Instant::now());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dump_payloads_restore_across_servers() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    let (mut r, mut s) = (redis.client(), sluice.client());
    populate(&mut r);
    populate(&mut s);
    let keys = items(cmd(&mut r, &[b"KEYS", b"*"]));
    for k in &keys {
        for dir in 0..2 {
            let (from, to) = if dir == 0 { (&mut r, &mut s) } else { (&mut s, &mut r) };
            let Frame::Bulk(Some(payload)) = cmd(from, &[b"DUMP", k]) else { panic!("DUMP") };
            let mut nk = b"copy:".to_vec();
            nk.extend_from_slice(k);
            let reply = cmd(to, &[b"RESTORE", &nk, b"0", &payload, b"REPLACE"]);
            assert_eq!(text(&reply), "OK", "{}", String::from_utf8_lossy(k));
        }
    }
    let a = snapshot(&mut r);
    let b = snapshot(&mut s);
    assert_same(&a, &b, "after restoring each other's payloads");
}

#[test]
fn restore_errors_match_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    let (mut r, mut s) = (redis.client(), sluice.client());
    for c in [&mut r, &mut s] {
        ok(c, &[b"RPUSH", b"list", b"a", b"b", b"c"]);
        ok(c, &[b"SET", b"str", b"hello"]);
    }
    let Frame::Bulk(Some(good)) = cmd(&mut r, &[b"DUMP", b"list"]) else { panic!() };
    let with_crc = |body: &[u8]| {
        let mut p = body.to_vec();
        p.extend_from_slice(&persist::crc64::crc64(0, body).to_le_bytes());
        p
    };
    let n = good.len();
    let mut bad_crc = good.clone();
    bad_crc[n - 1] ^= 1;
    let mut v11 = good[..n - 8].to_vec();
    v11[n - 10] = 11;
    let v11 = with_crc(&v11);
    let mut truncated_body = good[..n - 13].to_vec();
    truncated_body.extend_from_slice(&[10, 0]);
    let truncated = with_crc(&truncated_body);
    let unknown_type = with_crc(&[200, 1, b'x', 10, 0]);
    let empty_list = with_crc(&[18, 0, 10, 0]);
    let huge_len = with_crc(&[0, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 10, 0]);
    let string_ok = with_crc(&[0, 2, b'h', b'i', 10, 0]);
    let cases: Vec<Vec<Vec<u8>>> = vec![
        v(&[b"RESTORE", b"k", b"0", &good]),
        v(&[b"RESTORE", b"list", b"0", &good]),
        v(&[b"RESTORE", b"k", b"0", &bad_crc]),
        v(&[b"RESTORE", b"k", b"0", &v11]),
        v(&[b"RESTORE", b"k2", b"0", &truncated]),
        v(&[b"RESTORE", b"k3", b"0", &unknown_type]),
        v(&[b"RESTORE", b"k4", b"0", &empty_list]),
        v(&[b"RESTORE", b"k5", b"0", &huge_len]),
        v(&[b"RESTORE", b"k6", b"0", b"short"]),
        v(&[b"RESTORE", b"k7", b"0", &string_ok]),
        v(&[b"RESTORE", b"k8", b"-1", &string_ok]),
        v(&[b"RESTORE", b"k8", b"x", &string_ok]),
        v(&[b"RESTORE", b"k8", b"0", &string_ok, b"IDLETIME", b"-1"]),
        v(&[b"RESTORE", b"k8", b"0", &string_ok, b"FREQ", b"256"]),
        v(&[b"RESTORE", b"k8", b"0", &string_ok, b"FREQ", b"5", b"IDLETIME", b"5"]),
        v(&[b"RESTORE", b"k8", b"0", &string_ok, b"BOGUS"]),
        v(&[b"RESTORE", b"str", b"0", &string_ok, b"REPLACE", b"IDLETIME", b"10"]),
        v(&[b"RESTORE", b"k9", b"1", &string_ok, b"ABSTTL"]),
        v(&[b"RESTORE", b"str", b"1", &string_ok, b"ABSTTL", b"REPLACE"]),
        v(&[b"RESTORE", b"k10", b"100000", &string_ok]),
        v(&[b"GET", b"str"]),
        v(&[b"GET", b"k7"]),
        v(&[b"OBJECT", b"ENCODING", b"k"]),
        v(&[b"LRANGE", b"k", b"0", b"-1"]),
        v(&[b"EXISTS", b"k2", b"k3", b"k4", b"k5", b"k6", b"k9"]),
        v(&[b"DUMP", b"nosuchkey"]),
    ];
    for c in &cases {
        let a = cmd(&mut r, &c.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let b = cmd(&mut s, &c.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert_eq!(
            a,
            b,
            "{:?}",
            c.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect::<Vec<_>>()
        );
    }
    let pttl = |c: &mut Client| match cmd(c, &[b"PTTL", b"k10"]) {
        Frame::Integer(i) => i,
        f => panic!("{f:?}"),
    };
    assert!(pttl(&mut s) > 99_000 && pttl(&mut r) > 99_000);
}

#[test]
fn bgsave_lastsave_info_and_debug_reload() {
    let dir = scratch_dir("rdb-bg");
    let sluice = TestServer::start_with(&TestServer::default_bin(), &[], Some(&dir));
    let mut s = sluice.client();
    populate(&mut s);
    let before = snapshot(&mut s);
    let info = text(&cmd(&mut s, &[b"INFO", b"persistence"]));
    assert!(info.contains("rdb_bgsave_in_progress:0"), "{info}");
    assert!(!info.contains("rdb_changes_since_last_save:0\r"), "{info}");
    assert_eq!(text(&cmd(&mut s, &[b"BGSAVE"])), "Background saving started");
    let start = Instant::now();
    loop {
        let info = text(&cmd(&mut s, &[b"INFO", b"persistence"]));
        if info.contains("rdb_bgsave_in_progress:0") {
            assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
            assert!(info.contains("rdb_changes_since_last_save:0\r"), "{info}");
            assert!(info.contains("rdb_saves:1\r"), "{info}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dir.join("dump.rdb").is_file());
    assert_eq!(cmd(&mut s, &[b"BGSAVE", b"NOW"]), Frame::Error(b"ERR syntax error".to_vec()));
    // BGSAVE SCHEDULE during a BGSAVE is refused, as Redis refuses it
    // (SCHEDULE waits only for another kind of child:
    // save_progress::bgsave_while_saving_and_inside_exec_answers_as_redis);
    // a BGSAVE inside EXEC is scheduled and runs right after.
    ok(&mut s, &[b"CONFIG", b"SET", b"rdb-key-save-delay", b"10000"]);
    assert_eq!(text(&cmd(&mut s, &[b"BGSAVE"])), "Background saving started");
    assert_eq!(
        cmd(&mut s, &[b"BGSAVE", b"SCHEDULE"]),
        Frame::Error(b"ERR Background save already in progress".to_vec())
    );
    ok(&mut s, &[b"CONFIG", b"SET", b"rdb-key-save-delay", b"0"]);
    crate::common::wait_for("the BGSAVE to finish", Duration::from_secs(30), || {
        text(&cmd(&mut s, &[b"INFO", b"persistence"])).contains("rdb_bgsave_in_progress:0")
    });
    ok(&mut s, &[b"MULTI"]);
    ok(&mut s, &[b"BGSAVE"]);
    assert_eq!(
        cmd(&mut s, &[b"EXEC"]),
        Frame::Array(Some(vec![Frame::Simple(b"Background saving scheduled".to_vec())]))
    );
    let start = Instant::now();
    while !text(&cmd(&mut s, &[b"INFO", b"persistence"])).contains("rdb_saves:3\r") {
        assert!(start.elapsed() < Duration::from_secs(30), "the scheduled BGSAVE did not run");
        std::thread::sleep(Duration::from_millis(20));
    }
    // DEBUG RELOAD saves, empties and loads: nothing changes.
    ok(&mut s, &[b"SET", b"after", b"1"]);
    let mut expect = before.clone();
    expect.push("db0 \"after\" string int exp=-1 1".into());
    expect.sort();
    assert_eq!(text(&cmd(&mut s, &[b"DEBUG", b"RELOAD"])), "OK");
    let mut got = snapshot(&mut s);
    got.sort();
    assert_same(&expect, &got, "after DEBUG RELOAD");
    // A restart loads dump.rdb from dir.
    drop(s);
    drop(sluice);
    let again = TestServer::start_with(&TestServer::default_bin(), &[], Some(&dir));
    let mut s = again.client();
    let mut got = snapshot(&mut s);
    got.sort();
    assert_same(&expect, &got, "after a restart");
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corrupt_files_are_refused_with_offset_and_reason() {
    let dir = scratch_dir("rdb-bad");
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--dbfilename", "good.rdb"],
        Some(&dir),
    );
    let mut s = sluice.client();
    populate(&mut s);
    assert_eq!(text(&cmd(&mut s, &[b"SAVE"])), "OK");
    drop(s);
    drop(sluice);
    let good = file_bytes(&dir, "good.rdb");
    let mut flipped = good.clone();
    let mid = good.len() / 2;
    flipped[mid] ^= 0x55;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() - 20].to_vec()),
        ("half", good[..mid].to_vec()),
        ("flipped", flipped),
        ("badmagic", b"RADIS0010\xff".to_vec()),
        ("version", b"REDIS0011\xff\0\0\0\0\0\0\0\0".to_vec()),
    ];
    for (name, bytes) in cases {
        let file = format!("{name}.rdb");
        std::fs::write(dir.join(&file), &bytes).unwrap();
        let out = std::process::Command::new(TestServer::default_bin())
            // No TCP listener (`--port 0`); a Unix socket so that the
            // server has somewhere to listen and gets as far as loading.
            .args(["--port", "0", "--unixsocket", "s.sock", "--save", "", "--dbfilename", &file])
            .current_dir(&dir)
            .output()
            .expect("run sluice-server");
        assert!(!out.status.success(), "{name}: started on a bad file");
        let log = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(log.contains("offset") || log.contains("checksum"), "{name}: {log}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgsave_is_point_in_time_while_writes_race_it() {
    point_in_time(2000, &[], true);
}

#[test]
fn bgsave_stays_point_in_time_when_writers_wait_for_the_saver() {
    // With the capture queue bounded to a byte, every writer that captures
    // a stripe waits for the saver to write it out: the backpressure path.
    point_in_time(300, &[("SLUICE_SNAPSHOT_QUEUE_LIMIT", "1")], false);
}

/// Writes race a slowed BGSAVE; the file must hold the before-state.
fn point_in_time(n: usize, env: &[(&str, &str)], check_race: bool) {
    let dir = scratch_dir("rdb-pit");
    let sluice = TestServer::start_with_env(&TestServer::default_bin(), &[], Some(&dir), env);
    let mut s = sluice.client();
    let mut cmds = Vec::new();
    for db in [b"0", b"1"] {
        cmds.push(v(&[b"SELECT", db]));
        for i in 0..n {
            cmds.push(v(&[b"SET", format!("k:{i}").as_bytes(), format!("old-{i}").as_bytes()]));
        }
        cmds.push(v(&[b"RPUSH", b"list", b"a", b"b"]));
    }
    cmds.push(v(&[b"SELECT", b"0"]));
    pipeline(&mut s, &cmds);
    let before = snapshot(&mut s);
    ok(&mut s, &[b"CONFIG", b"SET", b"rdb-key-save-delay", b"500"]);
    assert_eq!(text(&cmd(&mut s, &[b"BGSAVE"])), "Background saving started");
    let mut w = sluice.client();
    let mut writes = Vec::new();
    for db in [b"1", b"0"] {
        writes.push(v(&[b"SELECT", db]));
        for i in (0..n).rev() {
            writes.push(v(&[b"SET", format!("k:{i}").as_bytes(), b"new"]));
            if i % 7 == 0 {
                writes.push(v(&[b"DEL", format!("k:{i}").as_bytes()]));
                writes.push(v(&[b"SET", format!("added:{i}").as_bytes(), b"x"]));
            }
        }
        writes.push(v(&[b"RPUSH", b"list", b"c"]));
        writes.push(v(&[b"FLUSHDB"]));
    }
    pipeline(&mut w, &writes);
    let info = text(&cmd(&mut s, &[b"INFO", b"persistence"]));
    if check_race {
        assert!(
            info.contains("rdb_bgsave_in_progress:1"),
            "the writes did not race the save: {info}"
        );
    }
    assert_eq!(cmd(&mut s, &[b"DBSIZE"]), Frame::Integer(0));
    let start = Instant::now();
    while !text(&cmd(&mut s, &[b"INFO", b"persistence"])).contains("rdb_bgsave_in_progress:0") {
        assert!(start.elapsed() < Duration::from_secs(60), "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    // redis-server reads the file back as the before-state.
    let Some(redis) = RedisServer::start_with(&["--dir", dir.to_str().unwrap()], Some(&dir)) else {
        return;
    };
    assert_same(&before, &snapshot(&mut redis.client()), "BGSAVE's file as redis-server loads it");
    drop(sluice);
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_exit(p: &mut testkit::ServerProc) {
    let start = Instant::now();
    while p.is_running() {
        assert!(start.elapsed() < Duration::from_secs(20), "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shutdown_sigterm_and_save_points_save() {
    // SHUTDOWN's argument errors, as redis-server gives them.
    if let Some(redis) = RedisServer::start() {
        let sluice = TestServer::start();
        let (mut r, mut s) = (redis.client(), sluice.client());
        for c in [
            v(&[b"SHUTDOWN", b"ABORT"]),
            v(&[b"SHUTDOWN", b"BOGUS"]),
            v(&[b"SHUTDOWN", b"SAVE", b"NOSAVE"]),
            v(&[b"SHUTDOWN", b"ABORT", b"NOW"]),
            v(&[b"MULTI"]),
            v(&[b"SHUTDOWN"]),
            v(&[b"SAVE"]),
            v(&[b"BGSAVE", b"SCHEDULE", b"X"]),
            v(&[b"DISCARD"]),
        ] {
            let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            assert_eq!(
                cmd(&mut r, &args),
                cmd(&mut s, &args),
                "{:?}",
                String::from_utf8_lossy(&c[1.min(c.len() - 1)])
            );
        }
    }
    let dir = scratch_dir("rdb-shutdown");
    let bin = TestServer::default_bin();
    // A save point of one change in one second fires a BGSAVE.
    let mut sluice = TestServer::start_with(&bin, &["--save", "1", "1"], Some(&dir));
    let mut s = sluice.client();
    ok(&mut s, &[b"SET", b"k1", b"v1"]);
    let start = Instant::now();
    while !text(&cmd(&mut s, &[b"INFO", b"persistence"])).contains("rdb_saves:1\r") {
        assert!(start.elapsed() < Duration::from_secs(10), "the save point did not fire");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(dir.join("dump.rdb").is_file());
    // SHUTDOWN saves (save points are set), closes the connection without
    // a reply and stops the process.
    ok(&mut s, &[b"SET", b"k2", b"v2"]);
    s.send(&[b"SHUTDOWN"]).unwrap();
    assert_eq!(s.read_to_close(Duration::from_secs(10)).unwrap(), b"");
    wait_exit(&mut sluice);
    drop(sluice);
    // SIGTERM saves too.
    let mut sluice = TestServer::start_with(&bin, &["--save", "3600", "1"], Some(&dir));
    let mut s = sluice.client();
    s.wait_loaded();
    assert_eq!(text(&cmd(&mut s, &[b"GET", b"k2"])), "v2");
    ok(&mut s, &[b"SET", b"k3", b"v3"]);
    // SAFETY: signalling the child process this test started.
    unsafe { libc::kill(sluice.pid() as i32, libc::SIGTERM) };
    wait_exit(&mut sluice);
    drop(sluice);
    // SHUTDOWN NOSAVE does not.
    let mut sluice = TestServer::start_with(&bin, &["--save", "3600", "1"], Some(&dir));
    let mut s = sluice.client();
    s.wait_loaded();
    assert_eq!(text(&cmd(&mut s, &[b"GET", b"k3"])), "v3");
    ok(&mut s, &[b"SET", b"k4", b"v4"]);
    s.send(&[&b"SHUTDOWN"[..], &b"NOSAVE"[..]]).unwrap();
    assert_eq!(s.read_to_close(Duration::from_secs(10)).unwrap(), b"");
    wait_exit(&mut sluice);
    drop(sluice);
    let sluice = TestServer::start_with(&bin, &[], Some(&dir));
    let mut s = sluice.client();
    s.wait_loaded();
    assert_eq!(cmd(&mut s, &[b"GET", b"k4"]), Frame::Bulk(None));
    assert_eq!(text(&cmd(&mut s, &[b"GET", b"k1"])), "v1");
    drop(sluice);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ziplist (the encoding of RDB versions before 10), built entry by entry.
fn ziplist(items: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut tail = 10;
    for it in items {
        let start = body.len();
        tail = 10 + start;
        if prev < 254 {
            body.push(prev as u8);
        } else {
            body.push(0xFE);
            body.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        let int = std::str::from_utf8(it)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|i| i.to_string().as_bytes() == *it);
        match int {
            Some(i) if (0..=12).contains(&i) => body.push(0xF1 + i as u8),
            Some(i) if i8::try_from(i).is_ok() => body.extend_from_slice(&[0xFE, i as u8]),
            Some(i) if i16::try_from(i).is_ok() => {
                body.push(0xC0);
                body.extend_from_slice(&(i as i16).to_le_bytes());
            }
            Some(i) if (-8_388_608..8_388_608).contains(&i) => {
                body.push(0xF0);
                body.extend_from_slice(&(i as i32).to_le_bytes()[..3]);
            }
            Some(i) if i32::try_from(i).is_ok() => {
                body.push(0xD0);
                body.extend_from_slice(&(i as i32).to_le_bytes());
            }
            Some(i) => {
                body.push(0xE0);
                body.extend_from_slice(&i.to_le_bytes());
            }
            None if it.len() < 64 => {
                body.push(it.len() as u8);
                body.extend_from_slice(it);
            }
            None if it.len() < 16384 => {
                body.extend_from_slice(&[0x40 | (it.len() >> 8) as u8, it.len() as u8]);
                body.extend_from_slice(it);
            }
            None => {
                body.push(0x80);
                body.extend_from_slice(&(it.len() as u32).to_be_bytes());
                body.extend_from_slice(it);
            }
        }
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

fn zipmap(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut z = vec![pairs.len() as u8];
    for (k, v) in pairs {
        z.push(k.len() as u8);
        z.extend_from_slice(k);
        z.push(v.len() as u8);
        z.push(0);
        z.extend_from_slice(v);
    }
    z.push(0xFF);
    z
}

fn rdb_str(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() < 64 {
        out.push(s.len() as u8);
    } else {
        out.push(0x80);
        out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

#[test]
fn older_encodings_load_as_redis_loads_them() {
    // A version-9 file with the encodings Redis 7 no longer writes but
    // still loads: ziplists (lists, hashes, sorted sets), quicklist v1,
    // zipmap, intset, the plain pre-ziplist types and second-precision
    // expiry. Both servers load it; every key must come out the same.
    let mut f = b"REDIS0009".to_vec();
    f.extend_from_slice(&[0xFE, 0]);
    let key = |f: &mut Vec<u8>, t: u8, k: &[u8]| {
        f.push(t);
        rdb_str(f, k);
    };
    let many: Vec<String> = (0..200)
        .map(|i| if i % 2 == 0 { (i * 977 - 50_000).to_string() } else { format!("e{i}") })
        .collect();
    let many: Vec<&[u8]> = many.iter().map(|s| s.as_bytes()).collect();
    key(&mut f, 10, b"zl:list");
    rdb_str(
        &mut f,
        &ziplist(&[b"a", b"7", b"-1", b"300", b"70000", b"5000000000", b"hello world"]),
    );
    key(&mut f, 14, b"ql1:list");
    f.push(2);
    rdb_str(&mut f, &ziplist(&many[..100]));
    rdb_str(&mut f, &ziplist(&many[100..]));
    key(&mut f, 13, b"zl:hash");
    rdb_str(&mut f, &ziplist(&[b"f1", b"v1", b"f2", b"12", b"n", b"-7"]));
    key(&mut f, 12, b"zl:zset");
    rdb_str(&mut f, &ziplist(&[b"a", b"1", b"b", b"2.5", b"c", b"300"]));
    key(&mut f, 9, b"zm:hash");
    rdb_str(&mut f, &zipmap(&[(b"k1", b"v1"), (b"k2", b"22")]));
    key(&mut f, 11, b"is:set");
    let mut is = vec![4, 0, 0, 0, 3, 0, 0, 0];
    for x in [-70000i32, 5, 100000] {
        is.extend_from_slice(&x.to_le_bytes());
    }
    rdb_str(&mut f, &is);
    key(&mut f, 1, b"plain:list");
    f.push(2);
    rdb_str(&mut f, b"x");
    rdb_str(&mut f, b"42");
    key(&mut f, 2, b"plain:set");
    f.push(2);
    rdb_str(&mut f, b"m1");
    rdb_str(&mut f, b"m2");
    key(&mut f, 3, b"plain:zset");
    f.push(3);
    rdb_str(&mut f, b"a");
    f.extend_from_slice(&[3, b'1', b'.', b'5']);
    rdb_str(&mut f, b"b");
    f.push(254); // +inf
    rdb_str(&mut f, b"c");
    f.push(255); // -inf
    key(&mut f, 4, b"plain:hash");
    f.push(1);
    rdb_str(&mut f, b"f");
    rdb_str(&mut f, &[b'v'; 100]);
    f.push(0xFD); // expiry in seconds (2033, a signed 32-bit number)
    f.extend_from_slice(&2_000_000_000u32.to_le_bytes());
    key(&mut f, 0, b"old:ttl");
    rdb_str(&mut f, b"v");
    f.push(0xFF);
    f.extend_from_slice(&[0; 8]); // no checksum
    let dir = scratch_dir("rdb-old");
    std::fs::write(dir.join("old.rdb"), &f).unwrap();
    let Some(redis) = RedisServer::start_with(
        &["--dir", dir.to_str().unwrap(), "--dbfilename", "old.rdb"],
        Some(&dir),
    ) else {
        return;
    };
    let expect = snapshot(&mut redis.client());
    let names: Vec<String> =
        expect.iter().map(|l| l.split(' ').nth(1).unwrap_or("").to_string()).collect();
    assert_eq!(expect.len(), 11, "{names:?}\n{}", redis.log_text());
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--dbfilename", "old.rdb"],
        Some(&dir),
    );
    assert_same(&expect, &snapshot(&mut sluice.client()), "a version-9 file");
    drop(sluice);
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn writes_stop_after_a_failed_bgsave_as_in_redis() {
    // The directory disappears under both servers, so their BGSAVE fails;
    // with save points set, writes then get MISCONF until a save succeeds
    // or stop-writes-on-bgsave-error is turned off.
    let rdir = scratch_dir("misconf-r");
    let sdir = scratch_dir("misconf-s");
    let Some(redis) = RedisServer::start_with(
        &["--dir", rdir.to_str().unwrap(), "--save", "3600", "1"],
        Some(&rdir),
    ) else {
        return;
    };
    let sluice =
        TestServer::start_with(&TestServer::default_bin(), &["--save", "3600", "1"], Some(&sdir));
    let (mut r, mut s) = (redis.client(), sluice.client());
    for (c, dir) in [(&mut r, &rdir), (&mut s, &sdir)] {
        ok(c, &[b"SET", b"a", b"1"]);
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(text(&cmd(c, &[b"BGSAVE"])), "Background saving started");
        let start = Instant::now();
        while !text(&cmd(c, &[b"INFO", b"persistence"])).contains("rdb_last_bgsave_status:err") {
            assert!(start.elapsed() < Duration::from_secs(20), "BGSAVE did not fail");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for line in [
        "SET b 2",
        "GET a",
        "DEL a",
        "MULTI",
        "SET c 3",
        "GET a",
        "EXEC",
        "MULTI",
        "GET a",
        "EXEC",
        "CONFIG SET stop-writes-on-bgsave-error no",
        "SET b 2",
        "CONFIG SET stop-writes-on-bgsave-error yes",
        "SET b 3",
        "SAVE",
        "SET b 4",
        "CONFIG SET save \"\"",
        "SET b 5",
        "GET b",
    ] {
        let args = testkit::args::split(line.as_bytes()).unwrap();
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert_eq!(cmd(&mut r, &args), cmd(&mut s, &args), "{line}");
    }
}

#[test]
fn idle_times_are_saved_under_an_lru_policy() {
    // Under an LRU maxmemory policy Redis saves each key's idle time; a
    // file from Sluice gives redis-server the idle times Sluice had.
    let dir = scratch_dir("rdb-lru");
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--maxmemory-policy", "allkeys-lru"],
        Some(&dir),
    );
    let mut s = sluice.client();
    ok(&mut s, &[b"SET", b"old", b"v"]);
    std::thread::sleep(Duration::from_millis(2300));
    ok(&mut s, &[b"SET", b"new", b"v"]);
    assert_eq!(text(&cmd(&mut s, &[b"SAVE"])), "OK");
    let Some(redis) = RedisServer::start_with(
        &["--dir", dir.to_str().unwrap(), "--maxmemory-policy", "allkeys-lru"],
        Some(&dir),
    ) else {
        return;
    };
    let mut r = redis.client();
    let idle = |c: &mut Client, k: &[u8]| match cmd(c, &[b"OBJECT", b"IDLETIME", k]) {
        Frame::Integer(i) => i,
        f => panic!("{f:?}"),
    };
    assert!((2..=4).contains(&idle(&mut r, b"old")), "{}", idle(&mut r, b"old"));
    assert!(idle(&mut r, b"new") <= 1);
    drop(sluice);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clients_get_loading_while_the_file_loads() {
    // key-load-delay (as in Redis's own tests) slows loading down so the
    // window is seen. (redis-server with a file this small answers nobody
    // until it has loaded: it serves clients between 2 MB chunks.)
    let dir = scratch_dir("rdb-loading");
    let sluice = TestServer::start_with(&TestServer::default_bin(), &[], Some(&dir));
    let mut s = sluice.client();
    let cmds: Vec<Vec<Vec<u8>>> =
        (0..40).map(|i| v(&[b"SET", format!("k{i}").as_bytes(), b"v"])).collect();
    pipeline(&mut s, &cmds);
    assert_eq!(text(&cmd(&mut s, &[b"SAVE"])), "OK");
    drop(s);
    drop(sluice);
    let sluice = TestServer::start_with(
        &TestServer::default_bin(),
        &["--key-load-delay", "50000"],
        Some(&dir),
    );
    let mut s = sluice.client();
    let loading = Frame::Error(b"LOADING Redis is loading the dataset in memory".to_vec());
    assert_eq!(cmd(&mut s, &[b"GET", b"k1"]), loading);
    // A pipeline's commands are refused together, as Redis answers them
    // in one turn: the client waited for this load once, not once a
    // command (50 waits would outlast the 2 s load).
    let started = Instant::now();
    for _ in 0..50 {
        s.send(&[&b"GET"[..], b"k1"]).unwrap();
    }
    for _ in 0..50 {
        assert_eq!(s.read_frame().unwrap(), loading);
    }
    assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());
    assert!(matches!(cmd(&mut s, &[b"LASTSAVE"]), Frame::Integer(_)));
    assert!(text(&cmd(&mut s, &[b"INFO", b"persistence"])).contains("\r\nloading:1\r\n"));
    s.wait_loaded();
    assert_eq!(text(&cmd(&mut s, &[b"GET", b"k1"])), "v");
    drop(sluice);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client whose command arrives while a small dataset loads gets its
/// answer once the load ends, not `-LOADING`: redis-server loads on its
/// one thread and turns to clients only every 2 MB of a load
/// (`loading-process-events-interval-bytes`), so no client ever sees a
/// load this small (a replica's full sync of a few keys, DEBUG RELOAD).
/// The load is slowed to some 40 ms (`key-load-delay`) so that the
/// second client's GET lands inside it.
#[test]
fn a_command_during_a_small_load_waits_for_it_as_in_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    for (name, port) in [("redis", redis.port()), ("sluice", sluice.port())] {
        let mut a = Client::connect(port).unwrap();
        let cmds: Vec<Vec<Vec<u8>>> =
            (0..20).map(|i| v(&[b"SET", format!("k{i}").as_bytes(), b"v"])).collect();
        pipeline(&mut a, &cmds);
        ok(&mut a, &[b"CONFIG", b"SET", b"key-load-delay", b"2000"]);
        for _ in 0..3 {
            let mut b = Client::connect(port).unwrap();
            a.send(&[&b"DEBUG"[..], b"RELOAD"]).unwrap();
            std::thread::sleep(Duration::from_millis(15));
            let started = Instant::now();
            assert_eq!(cmd(&mut b, &[b"GET", b"k1"]), Frame::Bulk(Some(b"v".to_vec())), "{name}");
            assert!(started.elapsed() < Duration::from_secs(2), "{name}");
            assert_eq!(a.read_frame().unwrap(), Frame::Simple(b"OK".to_vec()), "{name}");
        }
        ok(&mut a, &[b"CONFIG", b"SET", b"key-load-delay", b"0"]);
    }
}

/// Streams with consumers carry clock readings (seen and delivery times),
/// so their payloads are compared as a round trip: Redis's payload
/// restored into Sluice dumps back byte for byte, and Sluice's restored
/// into redis-server too; `XINFO STREAM FULL` (times included) agrees.
#[test]
fn stream_payloads_with_consumers_round_trip_byte_for_byte() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    let (mut r, mut s) = (redis.client(), sluice.client());
    populate(&mut r);
    populate(&mut s);
    for k in [&b"x:cons:g"[..], b"x:nodes", b"x:one", b"x:empty"] {
        for dir in 0..2 {
            let (from, to) = if dir == 0 { (&mut r, &mut s) } else { (&mut s, &mut r) };
            let Frame::Bulk(Some(p)) = cmd(from, &[b"DUMP", k]) else { panic!("DUMP") };
            assert_eq!(p[0], 19, "RDB_TYPE_STREAM_LISTPACKS_2");
            ok(to, &[b"RESTORE", b"copy", b"0", &p, b"REPLACE"]);
            assert_eq!(cmd(to, &[b"DUMP", b"copy"]), Frame::Bulk(Some(p.clone())));
            let full = |c: &mut Client, key: &[u8]| cmd(c, &[b"XINFO", b"STREAM", key, b"FULL"]);
            assert_eq!(full(from, k), full(to, b"copy"), "{}", String::from_utf8_lossy(k));
        }
    }
    // Corrupt stream payloads (checksums recomputed, so the decoder sees
    // them) load or get Redis's error, on both servers (redis-server
    // sanitizing payloads as Sluice always does).
    ok(&mut r, &[b"CONFIG", b"SET", b"sanitize-dump-payload", b"yes"]);
    let Frame::Bulk(Some(p)) = cmd(&mut r, &[b"DUMP", b"x:cons:g"]) else { panic!("DUMP") };
    let n = p.len();
    for at in [1, 3, 20, 40, n / 2, n - 40, n - 20, n - 11] {
        let mut bad = p.clone();
        bad[at] ^= 0x5a;
        let crc = persist::crc64::crc64(0, &bad[..n - 8]);
        bad[n - 8..].copy_from_slice(&crc.to_le_bytes());
        for c in [&mut r, &mut s] {
            let reply = cmd(c, &[b"RESTORE", b"bad", b"0", &bad, b"REPLACE"]);
            if !matches!(&reply, Frame::Simple(_)) {
                assert_eq!(reply, Frame::Error(b"ERR Bad data format".to_vec()), "byte {at}");
            }
        }
    }
}

/// One step of the DEBUG RELOAD scenario and what it left: the reply,
/// then the keys' values, whether `b` has a TTL, the libraries.
fn reload_step(c: &mut Client, dir: &Path, step: &str) -> String {
    let reply = if step == "rm dump.rdb" {
        let _ = std::fs::remove_file(dir.join("dump.rdb"));
        "removed".to_string()
    } else if let Some(code) = step.strip_prefix("FUNCTION LOAD ") {
        format!("{:?}", cmd(c, &[b"FUNCTION", b"LOAD", code.as_bytes()]))
    } else {
        let args: Vec<&[u8]> = step.split(' ').map(str::as_bytes).collect();
        format!("{:?}", cmd(c, &args))
    };
    let state = cmd(c, &[b"MGET", b"a", b"b", b"c", b"d"]);
    let ttl = match cmd(c, &[b"TTL", b"b"]) {
        Frame::Integer(t) => t > 0,
        other => panic!("{other:?}"),
    };
    let list = cmd(c, &[b"LRANGE", b"l", b"0", b"-1"]);
    let libs = cmd(c, &[b"FUNCTION", b"LIST"]);
    let libs = format!("{libs:?}").contains("l1");
    format!("{step} -> {reply}; {state:?} ttl={ttl} {list:?} lib={libs}")
}

/// DEBUG RELOAD with MERGE and NOFLUSH, step for step as redis-server
/// 7.0.15 (which panics on a duplicate key without MERGE: that case is
/// left out, see docs/persistence.md).
#[test]
fn debug_reload_merge_and_noflush_as_redis() {
    let steps = [
        "SET a 1",
        "SET b 2 EX 100",
        "RPUSH l x y",
        "SAVE",
        "SET a changed",
        "SET c 3",
        "DEL l",
        "DEBUG RELOAD NOSAVE MERGE",
        "SET a changed2",
        "PERSIST b",
        "SET d 4",
        "DEBUG RELOAD NOSAVE NOFLUSH MERGE",
        "FUNCTION LOAD #!lua name=l1\nredis.register_function('f', function() return 1 end)",
        "SAVE",
        "DEBUG RELOAD NOSAVE NOFLUSH",
        "DEBUG RELOAD NOFLUSH MERGE",
        "DEBUG RELOAD MERGE BOGUS",
        "FUNCTION FLUSH",
        "DEBUG RELOAD NOSAVE",
        "rm dump.rdb",
        "DEBUG RELOAD NOSAVE",
        "DEBUG RELOAD",
    ];
    let rdir = scratch_dir("reload-r");
    let rd = rdir.to_str().unwrap().to_string();
    let Some(redis) = RedisServer::start_with(&["--dir", &rd], Some(&rdir)) else { return };
    let sdir = scratch_dir("reload-s");
    let sd = sdir.to_str().unwrap().to_string();
    let sluice = TestServer::start_with(&TestServer::default_bin(), &["--dir", &sd], Some(&sdir));
    let (mut r, mut s) = (redis.client(), sluice.client());
    for step in steps {
        let theirs = reload_step(&mut r, &rdir, step);
        let ours = reload_step(&mut s, &sdir, step);
        assert_eq!(ours, theirs);
    }
    // Without MERGE a key of the file that is already there stops the
    // load: redis-server panics; Sluice logs and refuses.
    ok(&mut s, &[b"SET", b"a", b"1"]);
    ok(&mut s, &[b"SAVE"]);
    let e = cmd(&mut s, &[b"DEBUG", b"RELOAD", b"NOSAVE", b"NOFLUSH"]);
    assert_eq!(e, Frame::Error(b"ERR Error trying to load the RDB dump".to_vec()));
    assert_eq!(cmd(&mut s, &[b"GET", b"a"]), Frame::Bulk(Some(b"1".to_vec())));
    for d in [rdir, sdir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// `rdb_changes_since_last_save` as INFO reports it.
fn changes(c: &mut Client) -> i64 {
    let Frame::Bulk(Some(info)) = cmd(c, &[b"INFO", b"persistence"]) else { panic!("INFO") };
    let text = String::from_utf8_lossy(&info).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Bug: with save points set, Redis 7.0's FLUSHALL saves the emptied
/// data set in the foreground (the change count drops to 0 and the
/// file on disk holds no keys); Sluice only counted the keys removed.
/// Without save points it counts them, as before.
#[test]
fn flushall_saves_when_save_points_are_set() {
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    for name in ["redis", "sluice"] {
        let dir = scratch_dir(&format!("flushall-save-{name}"));
        let no_save: &[&str] = &["--save", ""];
        let (redis, sluice);
        let mut c = if name == "redis" {
            let Some(r) = RedisServer::start_with(no_save, Some(&dir)) else { return };
            redis = r;
            redis.client()
        } else {
            sluice = TestServer::start_with(bin, no_save, Some(&dir));
            sluice.client()
        };
        ok(&mut c, &[b"SET", b"a", b"1"]);
        ok(&mut c, &[b"FLUSHALL"]);
        assert_eq!(changes(&mut c), 2, "{name}: the write and the key removed");
        ok(&mut c, &[b"SAVE"]);
        ok(&mut c, &[b"CONFIG", b"SET", b"save", b"3600 1 300 100 60 10000"]);
        ok(&mut c, &[b"SET", b"key", b"value"]);
        assert_eq!(changes(&mut c), 1, "{name}");
        ok(&mut c, &[b"FLUSHALL"]);
        assert_eq!(changes(&mut c), 0, "{name}: FLUSHALL saved");
        // The file it wrote holds no keys: a restart from it finds none.
        ok(&mut c, &[b"SET", b"unsaved", b"x"]);
        ok(&mut c, &[b"DEBUG", b"RELOAD", b"NOSAVE"]);
        assert_eq!(cmd(&mut c, &[b"DBSIZE"]), Frame::Integer(0), "{name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A server started on a big RDB file reads it as it loads, as Redis's
/// rdbLoad reads its file: its peak RSS while loading stays near the data
/// set's, not the data set's plus the file's. Both servers load the same
/// 160 MB file (1,600 values of 100 KB, uncompressed) that redis-server
/// saved. Bug: Sluice read the whole file into memory first (peak about
/// 160 MB above the loaded data set).
#[test]
fn a_big_rdb_file_loads_without_being_held_whole_as_redis_loads_it() {
    let dir = scratch_dir("big-rdb");
    let file = ["--dbfilename", "big.rdb", "--rdbcompression", "no"];
    {
        let Some(redis) = RedisServer::start_with(&file, Some(&dir)) else { return };
        let mut c = redis.client();
        ok(&mut c, &[b"DEBUG", b"POPULATE", b"1600", b"big", b"100000"]);
        ok(&mut c, &[b"SAVE"]);
    }
    let size = std::fs::metadata(dir.join("big.rdb")).expect("the file").len();
    assert!(size > 160_000_000, "{size} bytes");
    let check = |name: &str, pid: u32, c: &mut Client| {
        crate::common::assert_loaded_at_data_set_cost(name, pid, c, 1600, Duration::from_secs(60))
    };
    let redis = RedisServer::start_with(&file, Some(&dir)).expect("redis");
    check("redis", redis.pid(), &mut redis.client());
    drop(redis);
    let sluice = TestServer::start_with(&TestServer::default_bin(), &file, Some(&dir));
    check("sluice", sluice.pid(), &mut sluice.client());
}
