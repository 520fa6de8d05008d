//! The Lua debugger (`SCRIPT DEBUG`, `redis-cli --ldb`) against
//! redis-server 7.0.15: the same sessions, byte for byte, over raw
//! sockets (the debugger's replies, its `<endsession>`, the EVAL's reply
//! and the connection's close), and through Debian's `redis-cli --ldb`
//! as a person uses it. A `YES` session's writes are rolled back as
//! Redis's forked session's are; a `SYNC` session's stay.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use testkit::{RedisServer, TestServer};

fn sluice() -> TestServer {
    TestServer::start_with(Path::new(env!("CARGO_BIN_EXE_sluice-server")), &[], None)
}

fn enc(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// What a step got back: every byte until the reply was complete and
/// nothing more came for a moment, and whether the server closed.
fn exchange(s: &mut TcpStream, bytes: &[u8]) -> (Vec<u8>, bool) {
    s.write_all(bytes).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let complete = matches!(resp::parse_frame(&got), Ok(Some(_)));
        s.set_read_timeout(Some(Duration::from_millis(if complete { 100 } else { 500 }))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) if complete || Instant::now() > deadline => return (got, false),
            Err(_) => {}
        }
    }
}

/// Runs `steps` (raw request bytes) on a fresh connection to each server
/// and asserts the same bytes come back at each step.
fn same_session(redis: u16, sluice: u16, steps: &[Vec<u8>]) {
    let mut a = TcpStream::connect(("127.0.0.1", redis)).unwrap();
    let mut b = TcpStream::connect(("127.0.0.1", sluice)).unwrap();
    for (i, st) in steps.iter().enumerate() {
        let ra = exchange(&mut a, st);
        let rb = exchange(&mut b, st);
        assert!(!ra.0.is_empty() || ra.1, "step {i}: redis-server answered nothing");
        assert_eq!(
            (String::from_utf8_lossy(&rb.0), rb.1),
            (String::from_utf8_lossy(&ra.0), ra.1),
            "step {i} ({:?}): sluice (left) differs from redis-server",
            String::from_utf8_lossy(st)
        );
        if ra.1 {
            break;
        }
    }
}

fn cmd(args: &[&str]) -> Vec<u8> {
    enc(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>())
}

const SCRIPT: &str = "local a = 1\n\
local t = {1,2,'x',{k=true}}\n\
redis.call('set','foo',KEYS[1])\n\
redis.pcall('hget','foo','f')\n\
redis.debug('hello', a, t)\n\
local x = redis.call('get','foo')\n\
redis.breakpoint()\n\
redis.pcall('get','a','b','c','d','e','f','g','h','i','j','k','l')\n\
return x\n";

#[test]
fn debugger_session_matches_redis_step_by_step() {
    let Some(redis) = RedisServer::start() else { return };
    let sl = sluice();
    let mut steps = vec![
        cmd(&["SCRIPT", "DEBUG", "SYNC"]),
        cmd(&["EVAL", SCRIPT, "1", "k1", "a1"]),
        cmd(&["print"]),
        cmd(&["n"]),
        cmd(&["s"]),
        cmd(&["next"]),
        cmd(&["print"]),
        cmd(&["p", "t"]),
        cmd(&["p", "KEYS"]),
        cmd(&["p", "ARGV"]),
        cmd(&["p", "nope"]),
        cmd(&["l"]),
        cmd(&["list", "2", "1"]),
        cmd(&["w"]),
        cmd(&["t"]),
        cmd(&["e", "a", "+", "1"]),
        cmd(&["eval", "1+"]),
        cmd(&["eval", "{1,'two',{3}}"]),
        cmd(&["r", "set", "big", &"x".repeat(300)]),
        cmd(&["redis", "get", "big"]),
        cmd(&["m"]),
        cmd(&["maxlen", "10"]),
        cmd(&["r", "get", "big"]),
        cmd(&["maxlen", "0"]),
        cmd(&["r", "ping"]),
        cmd(&["b", "6"]),
        cmd(&["b"]),
        cmd(&["b", "6"]),
        cmd(&["b", "99", "x", "-3"]),
        cmd(&["help"]),
        cmd(&["frobnicate"]),
        cmd(&["r"]),
        cmd(&["s"]),
        cmd(&["c"]),
        cmd(&["b", "-6"]),
        cmd(&["b", "0"]),
        cmd(&["c"]),
        cmd(&["s"]),
        cmd(&["s"]),
    ];
    // The last steps end the session: <endsession>, the reply, the close.
    steps.push(cmd(&["c"]));
    same_session(redis.port(), sl.port(), &steps);
}

#[test]
fn debugger_protocol_errors_and_bounds_match_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let sl = sluice();
    // NULs in a command's name (Redis compares it as a C string).
    let start = [cmd(&["SCRIPT", "DEBUG", "SYNC"]), cmd(&["EVAL", "return 'hello'", "0"])];
    let mut steps = start.to_vec();
    for name in [&b"hello\0world"[..], b"hello\0", b"\0hello", b"s\0x"] {
        steps.push(enc(&[name]));
    }
    same_session(redis.port(), sl.port(), &steps);
    // `redis` with 100 arguments: an unknown command, the server fine.
    let mut big = b"*101\r\n$5\r\nredis\r\n".to_vec();
    for _ in 0..100 {
        big.extend_from_slice(b"$4\r\ntest\r\n");
    }
    let mut steps = start.to_vec();
    steps.push(big);
    steps.push(cmd(&["c"]));
    same_session(redis.port(), sl.port(), &steps);
    // Not a request at all: the script fails with "protocol error".
    let mut steps = start.to_vec();
    steps.push(b"hello\r\n".to_vec());
    same_session(redis.port(), sl.port(), &steps);
    // An argument longer than the debugger takes.
    let mut steps = start.to_vec();
    steps.push(cmd(&["eval", &"1".repeat(1025)]));
    same_session(redis.port(), sl.port(), &steps);
    // Abort, EVALSHA refused, a bad key count inside a session.
    let steps =
        [cmd(&["SCRIPT", "DEBUG", "YES"]), cmd(&["EVAL", "return 1", "0"]), cmd(&["abort"])];
    same_session(redis.port(), sl.port(), &steps);
    let steps = [
        cmd(&["SCRIPT", "DEBUG", "YES"]),
        cmd(&["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]),
        cmd(&["EVAL", "return 1", "x"]),
    ];
    same_session(redis.port(), sl.port(), &steps);
    let steps = [cmd(&["SCRIPT", "DEBUG", "MAYBE"]), cmd(&["SCRIPT", "DEBUG", "NO"])];
    same_session(redis.port(), sl.port(), &steps);
}

/// A session's writes: kept with SYNC, rolled back with YES.
#[test]
fn debugger_yes_rolls_back_and_sync_keeps_writes() {
    let Some(redis) = RedisServer::start() else { return };
    let sl = sluice();
    let body = "redis.call('set','kept','new')\n\
                redis.call('rpush','list','z')\n\
                redis.call('del','gone')\n\
                redis.call('expire','ttl',1000)\n\
                redis.call('set','fresh','1')\n\
                return redis.call('lrange','list',0,-1)";
    for mode in ["YES", "SYNC"] {
        for port in [redis.port(), sl.port()] {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            for c in [
                cmd(&["FLUSHALL"]),
                cmd(&["SET", "kept", "old"]),
                cmd(&["RPUSH", "list", "a", "b"]),
                cmd(&["SET", "gone", "here"]),
                cmd(&["SET", "ttl", "v"]),
            ] {
                exchange(&mut s, &c);
            }
        }
        same_session(
            redis.port(),
            sl.port(),
            &[cmd(&["SCRIPT", "DEBUG", mode]), cmd(&["EVAL", body, "0"]), cmd(&["c"])],
        );
        let after = [
            cmd(&["GET", "kept"]),
            cmd(&["LRANGE", "list", "0", "-1"]),
            cmd(&["GET", "gone"]),
            cmd(&["TTL", "ttl"]),
            cmd(&["EXISTS", "fresh"]),
        ];
        same_session(redis.port(), sl.port(), &after);
    }
}

/// Debian's redis-cli drives a session as a person would: step, print,
/// a breakpoint, continue to the end ("dataset changes rolled back").
#[test]
fn redis_cli_ldb_session_matches_redis() {
    let Some(redis) = RedisServer::start() else { return };
    if std::process::Command::new("redis-cli").arg("--version").output().is_err() {
        return;
    }
    let sl = sluice();
    let dir = testkit::scratch_dir("ldb");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("script.lua");
    std::fs::write(&file, SCRIPT).unwrap();
    let run = |port: u16, mode: &str| -> String {
        let mut child = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), mode, "--eval"])
            .arg(&file)
            .args(["k1", ",", "a1"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"s\ns\nprint\nb 8\nlist\nredis get foo\nc\nc\nc\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for mode in ["--ldb", "--ldb-sync-mode"] {
        let want = run(redis.port(), mode);
        assert!(want.contains("<endsession>") || want.contains("session ended"), "{want}");
        assert_eq!(run(sl.port(), mode), want, "{mode}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `YES` session's undoing goes through the door as a replay: the
/// session's ACL user may not run DUMP, PTTL, RESTORE or DEL, yet its
/// writes are rolled back as Redis's forked session's are (checked as
/// the user's own commands, the undoing would be refused and the writes
/// kept).
#[test]
fn debugger_yes_rolls_back_for_a_user_without_dump_or_restore() {
    let Some(redis) = RedisServer::start() else { return };
    let sl = sluice();
    let body = "redis.call('set','kept','new')\n\
                redis.call('set','fresh','1')\n\
                return redis.call('get','kept')";
    for port in [redis.port(), sl.port()] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        for c in [
            cmd(&["FLUSHALL"]),
            cmd(&["SET", "kept", "old"]),
            cmd(&[
                "ACL", "SETUSER", "dbg", "on", "nopass", "~*", "+@all", "-dump", "-restore",
                "-pttl", "-del",
            ]),
        ] {
            exchange(&mut s, &c);
        }
    }
    same_session(
        redis.port(),
        sl.port(),
        &[
            cmd(&["AUTH", "dbg", "x"]),
            cmd(&["DUMP", "kept"]),
            cmd(&["SCRIPT", "DEBUG", "YES"]),
            cmd(&["EVAL", body, "0"]),
            cmd(&["c"]),
        ],
    );
    let after = [cmd(&["GET", "kept"]), cmd(&["EXISTS", "fresh"])];
    same_session(redis.port(), sl.port(), &after);
}
