//! Dense HyperLogLogs against redis-server, byte for byte: Sluice keeps a
//! dense value in four bits a register (store::types::hll), so every
//! string view of it (GET, GETRANGE, STRLEN, DUMP, DEBUG DIGEST-VALUE, a
//! script's GET, COPY, RDB through DEBUG RELOAD) must still be Redis's
//! dense string, and every PF command must answer and write what Redis
//! does: after PFADD, PFCOUNT (which caches the count in the header),
//! PFMERGE, writes through string commands and a reload.

use std::path::Path;

use testkit::diff::{Pair, Servers};
use testkit::escape;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Sends `a` to both and requires the same reply.
fn same(p: &mut Pair, a: &[String]) {
    let (r, s) = p.both(a).expect("replies");
    assert!(
        r == s,
        "{:?}\n  redis:  {}\n  sluice: {}",
        &a[..a.len().min(3)],
        escape(&r[..r.len().min(400)]),
        escape(&s[..s.len().min(400)])
    );
}

fn run(p: &mut Pair, a: &[&str]) {
    same(p, &args(a));
}

/// Every string view of `key`, and its HLL views.
fn views(p: &mut Pair, key: &str) {
    for a in [
        &["GET", key][..],
        &["STRLEN", key],
        &["GETRANGE", key, "0", "40"],
        &["GETRANGE", key, "1000", "1100"],
        &["SUBSTR", key, "-20", "-1"],
        &["DUMP", key],
        &["DEBUG", "DIGEST-VALUE", key],
        &["OBJECT", "ENCODING", key],
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", key],
        &["PFDEBUG", "ENCODING", key],
    ] {
        run(p, a);
    }
}

/// `n` elements `<tag>:<i>` from `from`, in one PFADD.
fn pfadd(p: &mut Pair, key: &str, tag: &str, from: usize, n: usize) {
    let mut a = vec!["PFADD".to_string(), key.to_string()];
    a.extend((from..from + n).map(|i| format!("{tag}:{i}")));
    same(p, &a);
}

#[test]
fn dense_hlls_read_back_as_redis_bytes() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let mut p = servers.connect();
    run(&mut p, &["FLUSHALL"]);
    // Sparse, then promoted by PFADD (one element at a time past the
    // sparse limit, so the promotion happens inside a PFADD's loop).
    pfadd(&mut p, "h", "a", 0, 500);
    views(&mut p, "h");
    for i in 500..3_000 {
        let a = args(&["PFADD", "h", &format!("a:{i}")]);
        let (r, s) = p.both(&a).expect("replies");
        assert_eq!(r, s, "PFADD h a:{i}");
    }
    views(&mut p, "h");
    // PFCOUNT caches the count in the header; PFADD invalidates it.
    run(&mut p, &["PFCOUNT", "h"]);
    views(&mut p, "h");
    run(&mut p, &["PFADD", "h", "a:0", "a:1"]);
    run(&mut p, &["GETRANGE", "h", "0", "15"]);
    run(&mut p, &["PFADD", "h", "new-element"]);
    run(&mut p, &["GETRANGE", "h", "0", "15"]);
    run(&mut p, &["PFCOUNT", "h"]);
    run(&mut p, &["PFDEBUG", "GETREG", "h"]);
    run(&mut p, &["PFDEBUG", "TODENSE", "h"]);
    run(&mut p, &["PFDEBUG", "DECODE", "h"]);
    // PFMERGE from a dense and a sparse source, PFCOUNT of several.
    pfadd(&mut p, "s", "b", 0, 50);
    run(&mut p, &["PFMERGE", "m", "h", "s"]);
    views(&mut p, "m");
    run(&mut p, &["PFCOUNT", "h", "s", "m"]);
    run(&mut p, &["PFMERGE", "s", "h"]);
    views(&mut p, "s");
    run(&mut p, &["PFCOUNT", "s"]);
    // Copies and the commands that hand the value back.
    run(&mut p, &["COPY", "h", "c"]);
    views(&mut p, "c");
    run(&mut p, &["GETSET", "c", "x"]);
    run(&mut p, &["COPY", "h", "c", "REPLACE"]);
    run(&mut p, &["SET", "c", "y", "GET"]);
    run(&mut p, &["COPY", "h", "c", "REPLACE"]);
    run(&mut p, &["GETDEL", "c"]);
    run(&mut p, &["COPY", "h", "c"]);
    run(&mut p, &["GETEX", "c", "PERSIST"]);
    run(&mut p, &["INCR", "c"]);
    run(&mut p, &["INCRBYFLOAT", "c", "1"]);
    run(&mut p, &["DEBUG", "DIGEST"]);
    // Writes through string commands: still a dense HLL when the length
    // holds (a register byte changed), not one when it does not.
    run(&mut p, &["SETRANGE", "c", "100", "\u{7f}xyz"]);
    views(&mut p, "c");
    run(&mut p, &["PFCOUNT", "c"]);
    run(&mut p, &["PFADD", "c", "after-setrange"]);
    views(&mut p, "c");
    run(&mut p, &["SETBIT", "c", "2000", "1"]);
    run(&mut p, &["BITFIELD", "c", "INCRBY", "u6", "3000", "7"]);
    run(&mut p, &["PFADD", "c", "after-setbit"]);
    views(&mut p, "c");
    run(&mut p, &["APPEND", "c", "!"]);
    run(&mut p, &["PFCOUNT", "c"]);
    run(&mut p, &["PFADD", "c", "z"]);
    run(&mut p, &["GET", "c"]);
    run(&mut p, &["SETRANGE", "h", "4", "Z"]);
    run(&mut p, &["PFCOUNT", "h"]);
    run(&mut p, &["SETRANGE", "h", "4", "\u{0}"]);
    run(&mut p, &["COPY", "m", "m2"]);
    // Through a reload (RDB save and load), then written again.
    run(&mut p, &["DEBUG", "RELOAD"]);
    for k in ["h", "m", "s", "c", "m2"] {
        views(&mut p, k);
    }
    run(&mut p, &["PFCOUNT", "m"]);
    pfadd(&mut p, "m", "c", 0, 200);
    views(&mut p, "m");
    run(&mut p, &["DEBUG", "DIGEST"]);
}

/// A sketch grown until its smallest register leaves 0 (the packed form's
/// base rises and its offsets are rebuilt): the same bytes throughout.
#[test]
fn dense_hll_past_every_register_set() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let mut p = servers.connect();
    run(&mut p, &["FLUSHALL"]);
    let step = 2_000;
    for round in 0..150 {
        pfadd(&mut p, "big", "e", round * step, step);
        if round % 30 == 29 {
            run(&mut p, &["PFCOUNT", "big"]);
            views(&mut p, "big");
        }
    }
    let (r, _) = p.both(&args(&["PFDEBUG", "GETREG", "big"])).expect("replies");
    assert!(!r.windows(4).any(|w| w == b"\n:0\r"), "every register is set by now");
    views(&mut p, "big");
    run(&mut p, &["DEBUG", "RELOAD"]);
    pfadd(&mut p, "big", "f", 0, 1_000);
    run(&mut p, &["PFCOUNT", "big"]);
    views(&mut p, "big");
}

/// `used_memory` from INFO memory.
fn used_memory(c: &mut testkit::Client) -> i64 {
    let info = String::from_utf8_lossy(&c.cmd(&["INFO", "memory"]).unwrap()).into_owned();
    info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
}

/// Dense sketches read from an RDB file (DEBUG RELOAD, DUMP/RESTORE) are
/// held packed at once, not at Redis's 12,304 bytes until their next PF
/// write; every view of them is still Redis's bytes.
#[test]
fn dense_hlls_loaded_packed() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let mut p = servers.connect();
    run(&mut p, &["FLUSHALL"]);
    run(&mut p, &["CONFIG", "SET", "hll-sparse-max-bytes", "0"]);
    let keys: Vec<String> = (0..100).map(|i| format!("d{i}")).collect();
    for k in &keys {
        pfadd(&mut p, k, k, 0, 3);
    }
    run(&mut p, &["PFDEBUG", "ENCODING", "d0"]);
    let before = used_memory(&mut p.sluice);
    run(&mut p, &["DEBUG", "RELOAD"]);
    let after = used_memory(&mut p.sluice);
    // Unpacked they would be 4,096 bytes a key more (12,304 bytes in
    // jemalloc's 14,336 class against the packed 10,240): 410 KB here;
    // packed, the reload's own difference is some 50 KB.
    assert!(after - before < 150_000, "used_memory {before} before DEBUG RELOAD, {after} after");
    // DUMP and RESTORE: the same bytes, held packed too.
    let (r, s) = p.both(&args(&["DUMP", "d1"])).expect("replies");
    assert_eq!(escape(&s), escape(&r));
    let payload = &s[s.iter().position(|&b| b == b'\n').unwrap() + 1..s.len() - 2];
    for c in [&mut p.redis, &mut p.sluice] {
        let mut cmd = b"*4\r\n$7\r\nRESTORE\r\n$2\r\nr1\r\n$1\r\n0\r\n".to_vec();
        cmd.extend(format!("${}\r\n", payload.len()).as_bytes());
        cmd.extend_from_slice(payload);
        cmd.extend_from_slice(b"\r\n");
        c.send_raw(&cmd).unwrap();
        assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
    }
    for k in ["d0", "d1", "d99", "r1"] {
        views(&mut p, k);
    }
    pfadd(&mut p, "r1", "x", 0, 500);
    views(&mut p, "r1");
    run(&mut p, &["PFCOUNT", "d5", "r1"]);
    run(&mut p, &["DEBUG", "DIGEST"]);
}
