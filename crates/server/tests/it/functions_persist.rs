//! Function libraries in RDB files, AOF bases, a replica's full sync and
//! FUNCTION DUMP payloads, against redis-server 7.0.15 both ways: the
//! libraries one server saved answer FUNCTION LIST and FCALL on the other
//! exactly as a redis-server that loaded them with FUNCTION LOAD does; a
//! one-library FUNCTION DUMP is byte-identical (LZF included); files whose
//! library does not load stop both servers with the same messages.
//!
//! Redis keeps libraries in a dictionary with a random hash seed, so its
//! FUNCTION LIST and multi-library DUMP orders vary from run to run: lists
//! are compared sorted by library, payloads record by record.

use std::path::Path;
use std::time::{Duration, Instant};

use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

fn cmd<A: AsRef<[u8]>>(c: &mut Client, args: &[A]) -> Frame {
    c.send(args).expect("send");
    c.read_frame().expect("reply")
}

fn ok<A: AsRef<[u8]>>(c: &mut Client, args: &[A]) -> Frame {
    let r = cmd(c, args);
    assert!(!matches!(r, Frame::Error(_)), "{r:?}");
    r
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(Some(b)) | Frame::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

fn bulk(f: Frame) -> Vec<u8> {
    match f {
        Frame::Bulk(Some(b)) => b.to_vec(),
        other => panic!("not a bulk: {other:?}"),
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A library long enough for LZF (and repetitive enough to compress),
/// with several functions.
fn long_library() -> Vec<u8> {
    let mut code = b"#!lua name=longlib\n".to_vec();
    for i in 0..40 {
        code.extend_from_slice(
            format!(
                "-- function number {i}: returns its own number and the first key's value\n\
                 redis.register_function('long{i}', function(keys, args) \
                 return {{{i}, redis.call('GET', keys[1])}} end)\n"
            )
            .as_bytes(),
        );
    }
    code
}

/// The libraries the tests load: short, with flags and a description,
/// long, and one with bytes outside ASCII in a comment.
fn libraries() -> Vec<Vec<u8>> {
    vec![
        b"#!lua name=lib1\nredis.register_function('f1', function(keys, args) return redis.call('GET', keys[1]) end)".to_vec(),
        b"#!lua name=lib2\nredis.register_function{function_name='f2', callback=function(keys, args) return 'two' end, flags={'no-writes', 'allow-stale'}, description='the second'}".to_vec(),
        long_library(),
        b"#!lua name=bin_lib\n-- \xff\x00\xfe binary bytes in a comment\nredis.register_function('fbin', function(keys, args) return #args end)".to_vec(),
    ]
}

fn load_all(c: &mut Client, libs: &[Vec<u8>]) {
    c.wait_loaded();
    for l in libs {
        ok(c, &[&b"FUNCTION"[..], b"LOAD", l]);
    }
    ok(c, &["SET", "k", "value-of-k"]);
}

/// A reply as short text (strings lossy).
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

/// One library of FUNCTION LIST, its functions sorted (Redis's order is
/// its dictionary's).
fn render_library(l: &Frame) -> String {
    let Frame::Array(Some(fields)) = l else { panic!("{l:?}") };
    fields
        .iter()
        .map(|f| match f {
            Frame::Array(Some(fns)) => {
                let mut v: Vec<String> = fns.iter().map(render).collect();
                v.sort();
                v.join("; ")
            }
            other => render(other),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the libraries answer: FUNCTION LIST WITHCODE (one entry per
/// library, sorted) and a call of each function.
fn answers(c: &mut Client) -> Vec<String> {
    c.wait_loaded();
    let mut out = Vec::new();
    match cmd(c, &["FUNCTION", "LIST", "WITHCODE"]) {
        Frame::Array(Some(libs)) => {
            let mut libs: Vec<String> = libs.iter().map(render_library).collect();
            libs.sort();
            out.extend(libs);
        }
        other => panic!("FUNCTION LIST: {other:?}"),
    }
    let mut calls: Vec<Vec<&str>> = vec![
        vec!["FCALL", "f1", "1", "k"],
        vec!["FCALL_RO", "f2", "0"],
        vec!["FCALL", "fbin", "0", "a", "b", "c"],
        vec!["FCALL", "nosuch", "0"],
    ];
    let names: Vec<String> = (0..40).map(|i| format!("long{i}")).collect();
    for n in &names {
        calls.push(vec!["FCALL", n, "1", "k"]);
    }
    for a in calls {
        out.push(format!("{a:?} -> {}", render(&cmd(c, &a))));
    }
    out.push(render(&cmd(c, &["FUNCTION", "STATS"])));
    out
}

fn file(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The answers of a redis-server that loaded the libraries itself.
fn reference() -> Option<Vec<String>> {
    let redis = RedisServer::start()?;
    let mut r = redis.client();
    load_all(&mut r, &libraries());
    Some(answers(&mut r))
}

/// Equal lists, reporting the first difference only.
#[track_caller]
fn same(ours: &[String], theirs: &[String], what: &str) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(a, b, "{what}: item {i}");
    }
    assert_eq!(ours.len(), theirs.len(), "{what}: lengths");
}

#[test]
fn libraries_in_rdb_files_load_both_ways() {
    let Some(want) = reference() else { return };
    // Sluice → file → redis-server.
    let sdir = scratch_dir("fn-s");
    let sd = sdir.to_str().unwrap().to_string();
    let sluice = TestServer::start_with(&TestServer::default_bin(), &["--dir", &sd], Some(&sdir));
    let mut s = sluice.client();
    load_all(&mut s, &libraries());
    same(&answers(&mut s), &want, "Sluice after FUNCTION LOAD");
    ok(&mut s, &["SAVE"]);
    let rdir = scratch_dir("fn-r");
    std::fs::write(rdir.join("dump.rdb"), file(&sdir, "dump.rdb")).unwrap();
    let rd = rdir.to_str().unwrap().to_string();
    let redis = RedisServer::start_with(&["--dir", &rd], Some(&rdir)).expect("oracle");
    let mut r = redis.client();
    same(&answers(&mut r), &want, "redis-server on Sluice's file");
    // DEBUG RELOAD on Sluice keeps them (saved, emptied, loaded again).
    ok(&mut s, &["DEBUG", "RELOAD"]);
    same(&answers(&mut s), &want, "Sluice after DEBUG RELOAD");
    // BGSAVE too.
    ok(&mut s, &["FUNCTION", "DELETE", "bin_lib"]);
    ok(&mut s, &["BGSAVE"]);
    wait_for("the BGSAVE", || {
        text(&cmd(&mut s, &["INFO", "persistence"])).contains("rdb_bgsave_in_progress:0")
    });
    drop(sluice);
    // redis-server → file → Sluice.
    ok(&mut r, &["SAVE"]);
    let sdir2 = scratch_dir("fn-s2");
    std::fs::write(sdir2.join("dump.rdb"), file(&rdir, "dump.rdb")).unwrap();
    let sd2 = sdir2.to_str().unwrap().to_string();
    let sluice2 =
        TestServer::start_with(&TestServer::default_bin(), &["--dir", &sd2], Some(&sdir2));
    same(&answers(&mut sluice2.client()), &want, "Sluice on redis-server's file");
    drop(sluice2);
    // The BGSAVE file, without the deleted library, on redis-server.
    let rdir2 = scratch_dir("fn-r2");
    std::fs::write(rdir2.join("dump.rdb"), file(&sdir, "dump.rdb")).unwrap();
    let rd2 = rdir2.to_str().unwrap().to_string();
    let redis2 = RedisServer::start_with(&["--dir", &rd2], Some(&rdir2)).expect("oracle");
    let mut r2 = redis2.client();
    ok(&mut r, &["FUNCTION", "DELETE", "bin_lib"]);
    same(&answers(&mut r2), &answers(&mut r), "Sluice's BGSAVE file on redis-server");
    for d in [sdir, rdir, sdir2, rdir2] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// FUNCTION DUMP's records: the payload without its version and CRC,
/// split by the codec (compared as a set: Redis's order is random).
fn records(p: &[u8]) -> Vec<Vec<u8>> {
    let mut v = persist::functions::restore_payload(p, true).expect("a valid payload");
    v.sort();
    v
}

#[test]
fn function_dump_payloads_are_redis_bytes_and_restore_both_ways() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start();
    let (mut r, mut s) = (redis.client(), sluice.client());
    for compression in ["yes", "no"] {
        for c in [&mut r, &mut s] {
            ok(c, &["CONFIG", "SET", "rdbcompression", compression]);
        }
        // One library at a time: the payloads are byte-identical.
        for lib in libraries() {
            for c in [&mut r, &mut s] {
                ok(c, &["FUNCTION", "FLUSH"]);
                ok(c, &[&b"FUNCTION"[..], b"LOAD", &lib]);
            }
            let (theirs, ours) = (
                bulk(cmd(&mut r, &["FUNCTION", "DUMP"])),
                bulk(cmd(&mut s, &["FUNCTION", "DUMP"])),
            );
            assert_eq!(ours, theirs, "FUNCTION DUMP of {:?}", String::from_utf8_lossy(&lib[..20]));
        }
    }
    // Every library: the same records, and each server restores the other's.
    let all = libraries();
    for c in [&mut r, &mut s] {
        ok(c, &["FUNCTION", "FLUSH"]);
        load_all(c, &all);
    }
    let want = answers(&mut r);
    let (theirs, ours) =
        (bulk(cmd(&mut r, &["FUNCTION", "DUMP"])), bulk(cmd(&mut s, &["FUNCTION", "DUMP"])));
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(records(&ours), records(&theirs));
    ok(&mut s, &[&b"FUNCTION"[..], b"RESTORE", &theirs, b"FLUSH"]);
    same(&answers(&mut s), &want, "Sluice after restoring Redis's payload");
    ok(&mut r, &[&b"FUNCTION"[..], b"RESTORE", &ours, b"FLUSH"]);
    same(&answers(&mut r), &want, "redis-server after restoring Sluice's payload");
    // Errors, compared with Redis's.
    let seal = |body: &[u8]| {
        let mut p = body.to_vec();
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = persist::crc64::crc64(0, &p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    };
    let one = seal(&function2(&all[0]));
    let mut bad_crc = theirs.clone();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 1;
    let mut cases: Vec<Vec<Vec<u8>>> = vec![
        vec![bad_crc, b"FLUSH".to_vec()],
        vec![seal(b"\xf6\x01x\x03LUA\x00\x01y")],
        vec![seal(b"\x00\x01k\x01v")],
        vec![seal(b"\xf5\x40")],
        vec![seal(&function2(b"#!lua name=x"))],
        vec![seal(&function2(b"#!lua name=x\nnot lua!!"))],
        // One library that exists (with several, which one Redis names
        // depends on its dictionary's order).
        vec![one.clone()],
        vec![one.clone(), b"APPEND".to_vec()],
        vec![one, b"BOGUS".to_vec()],
        vec![b"short".to_vec()],
    ];
    let code = b"#!lua name=d\nredis.register_function('d', function() return 1 end)";
    cases.push(vec![seal(&[function2(code), function2(code)].concat())]);
    for case in cases {
        let mut argv: Vec<Vec<u8>> = vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec()];
        argv.extend(case);
        let (theirs, ours) = (cmd(&mut r, &argv), cmd(&mut s, &argv));
        assert_eq!(render(&ours), render(&theirs), "FUNCTION RESTORE {:?}", argv[2..].to_vec());
    }
    same(&answers(&mut s), &answers(&mut r), "after the errors");
}

fn shutdown(c: &mut Client) {
    c.send(&["SHUTDOWN", "NOSAVE"]).unwrap();
    let _ = c.read_to_close(Duration::from_secs(10));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Libraries half in the AOF's base (loaded before a rewrite), half in its
/// incremental file.
fn build_aof(c: &mut Client) {
    let libs = libraries();
    load_all(c, &libs[..2]);
    ok(c, &["BGREWRITEAOF"]);
    wait_for("the rewrite", || {
        text(&cmd(c, &["INFO", "persistence"])).contains("aof_rewrite_in_progress:0")
    });
    load_all(c, &libs[2..]);
}

fn aof_both_ways(flags: &[&str]) {
    let Some(want) = reference() else { return };
    let rdir = scratch_dir("fn-aof-r");
    let rd = rdir.to_str().unwrap().to_string();
    let redis =
        RedisServer::start_with(&[flags, &["--dir", &rd]].concat(), Some(&rdir)).expect("oracle");
    let mut r = redis.client();
    build_aof(&mut r);
    shutdown(&mut r);
    drop(redis);
    let sdir = scratch_dir("fn-aof-s");
    copy_dir(&rdir.join("appendonlydir"), &sdir.join("appendonlydir"));
    let sluice = TestServer::start_with(&TestServer::default_bin(), flags, Some(&sdir));
    let mut s = sluice.client();
    same(&answers(&mut s), &want, "Sluice on Redis's appendonlydir");
    shutdown(&mut s);
    drop(sluice);
    // Sluice's own directory, base written by Sluice, into redis-server.
    let sdir2 = scratch_dir("fn-aof-s2");
    let sluice = TestServer::start_with(&TestServer::default_bin(), flags, Some(&sdir2));
    let mut s = sluice.client();
    build_aof(&mut s);
    // Everything in the base now.
    ok(&mut s, &["BGREWRITEAOF"]);
    wait_for("the rewrite", || {
        text(&cmd(&mut s, &["INFO", "persistence"])).contains("aof_rewrite_in_progress:0")
    });
    shutdown(&mut s);
    drop(sluice);
    let back = scratch_dir("fn-aof-back");
    copy_dir(&sdir2.join("appendonlydir"), &back.join("appendonlydir"));
    let bd = back.to_str().unwrap().to_string();
    let redis =
        RedisServer::start_with(&[flags, &["--dir", &bd]].concat(), Some(&back)).expect("oracle");
    same(&answers(&mut redis.client()), &want, "redis-server on Sluice's appendonlydir");
    for d in [rdir, sdir, sdir2, back] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn libraries_in_appendonlydirs_load_both_ways() {
    aof_both_ways(&["--appendonly", "yes"]);
}

#[test]
fn libraries_in_command_bases_load_both_ways() {
    aof_both_ways(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
}

#[test]
fn a_redis_replica_gets_the_libraries_in_its_full_sync() {
    let Some(want) = reference() else { return };
    for diskless in ["no", "yes"] {
        let sluice = TestServer::start_with(
            &TestServer::default_bin(),
            &["--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0"],
            None,
        );
        let mut s = sluice.client();
        load_all(&mut s, &libraries());
        let port = sluice.port().to_string();
        let dir = scratch_dir("fn-replica");
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port], Some(&dir))
            .expect("oracle");
        let mut rc = replica.client();
        wait_for("the full sync", || {
            text(&cmd(&mut rc, &["INFO", "replication"])).contains("master_link_status:up")
                && matches!(cmd(&mut rc, &["EXISTS", "k"]), Frame::Integer(1))
        });
        // A replica refuses the calls of functions that may write; the
        // libraries are what counts here.
        let libs = |v: Vec<String>| -> Vec<String> {
            v.into_iter().filter(|l| !l.starts_with("[\"FCALL")).collect()
        };
        let what = format!("the replica after a full sync (diskless {diskless})");
        same(&libs(answers(&mut rc)), &libs(want.clone()), &what);
        drop(replica);
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn rdb_str(out: &mut Vec<u8>, s: &[u8]) {
    assert!(s.len() < 16384);
    if s.len() < 64 {
        out.push(s.len() as u8);
    } else {
        out.push(0x40 | (s.len() >> 8) as u8);
        out.push(s.len() as u8);
    }
    out.extend_from_slice(s);
}

/// An RDB file of version 10 holding `body` (no checksum).
fn rdb_file(body: &[u8]) -> Vec<u8> {
    let mut f = b"REDIS0010".to_vec();
    f.extend_from_slice(body);
    f.push(0xff);
    f.extend_from_slice(&[0; 8]);
    f
}

fn function2(code: &[u8]) -> Vec<u8> {
    let mut v = vec![0xf5];
    rdb_str(&mut v, code);
    v
}

/// Starts `bin` on `dir/dump.rdb`; whether it refused to start, and its
/// log's messages about libraries and loading.
fn start_on(bin: &Path, dir: &Path) -> (bool, Vec<String>) {
    let port = testkit::free_port().to_string();
    let log = dir.join("log.txt");
    let f = std::fs::File::create(&log).unwrap();
    let args = ["--port", &port, "--bind", "127.0.0.1", "--save", "", "--dir"];
    let mut child = std::process::Command::new(bin)
        .args(args)
        .arg(dir)
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let refused = loop {
        if let Ok(Some(_)) = child.try_wait() {
            break true;
        }
        if let Ok(mut c) = Client::connect(port.parse().unwrap()) {
            let pong = c.send(&["PING"]).and_then(|()| c.read_frame());
            if matches!(pong, Ok(Frame::Simple(_))) {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let msgs = text
        .lines()
        .map(|l| l.splitn(7, ' ').collect::<Vec<_>>())
        // Log lines only (Redis prints redis-check-rdb's report too).
        .filter(|w| w.len() == 7 && ["#", "*", "-", "."].contains(&w[5]))
        .map(|w| w[6])
        .filter(|m| m.contains("library") || m.contains("loading DB"))
        .map(str::to_string)
        .collect();
    (refused, msgs)
}

#[test]
fn libraries_that_do_not_load_stop_start_up_as_in_redis() {
    if !Path::new(testkit::REDIS_SERVER).is_file() {
        return;
    }
    let good = b"#!lua name=x\nredis.register_function('x', function() return 1 end)";
    let mut pre_ga = vec![0xf6];
    for s in [&b"x"[..], b"LUA"] {
        rdb_str(&mut pre_ga, s);
    }
    pre_ga.push(1);
    rdb_str(&mut pre_ga, b"a description");
    rdb_str(&mut pre_ga, b"redis.register_function('x', function() return 1 end)");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bad lua", function2(b"#!lua name=bad\nthis is not lua")),
        ("no metadata", function2(b"return 1")),
        ("unknown engine", function2(b"#!js name=x\nreturn 1")),
        ("no functions", function2(b"#!lua name=x\nlocal a = 1")),
        ("same library twice", [function2(good), function2(good)].concat()),
        (
            "same function twice",
            [
                function2(good),
                function2(b"#!lua name=y\nredis.register_function('x', function() return 2 end)"),
            ]
            .concat(),
        ),
        ("pre-GA record", pre_ga),
        ("good", function2(good)),
    ];
    for (what, body) in cases {
        let f = rdb_file(&body);
        let (sdir, rdir) = (scratch_dir("fn-bad-s"), scratch_dir("fn-bad-r"));
        std::fs::write(sdir.join("dump.rdb"), &f).unwrap();
        std::fs::write(rdir.join("dump.rdb"), &f).unwrap();
        let theirs = start_on(Path::new(testkit::REDIS_SERVER), &rdir);
        let ours = start_on(&TestServer::default_bin(), &sdir);
        assert_eq!(ours, theirs, "{what}");
        let _ = std::fs::remove_dir_all(sdir);
        let _ = std::fs::remove_dir_all(rdir);
    }
    // A torn library record: Redis says its payload failed to load.
    let mut torn = b"REDIS0010\xf5\x40\xff#!lua".to_vec();
    torn.truncate(16);
    let (sdir, rdir) = (scratch_dir("fn-torn-s"), scratch_dir("fn-torn-r"));
    std::fs::write(sdir.join("dump.rdb"), &torn).unwrap();
    std::fs::write(rdir.join("dump.rdb"), &torn).unwrap();
    let theirs = start_on(Path::new(testkit::REDIS_SERVER), &rdir);
    let ours = start_on(&TestServer::default_bin(), &sdir);
    assert_eq!(ours, theirs, "torn record");
    let _ = std::fs::remove_dir_all(sdir);
    let _ = std::fs::remove_dir_all(rdir);
}
