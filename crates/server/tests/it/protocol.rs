//! Wire-protocol behaviour, differentially against redis-server: inline
//! commands and their quoting, every protocol error (and that the
//! connection closes after it), empty requests, deep pipelines in one
//! write, requests split at every byte boundary, and a client's EOF.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use testkit::{escape, Client, RedisServer, TestServer};

fn servers() -> Option<(RedisServer, TestServer)> {
    let redis = RedisServer::start()?;
    let sluice = TestServer::start_bin(Path::new(env!("CARGO_BIN_EXE_sluice-server")));
    Some((redis, sluice))
}

const SENTINEL_CMD: &[u8] = b"*2\r\n$4\r\nECHO\r\n$7\r\n__end__\r\n";
const SENTINEL_REPLY: &[u8] = b"$7\r\n__end__\r\n";

/// Writes `raw` plus a sentinel request (from another thread, so a deep
/// pipeline cannot deadlock on full socket buffers) and returns every
/// reply byte up to and including the sentinel's reply.
fn exchange(port: u16, raw: &[u8]) -> Vec<u8> {
    let mut c = Client::connect(port).unwrap();
    let mut w = c.stream().try_clone().unwrap();
    let mut input = raw.to_vec();
    input.extend_from_slice(SENTINEL_CMD);
    let writer = std::thread::spawn(move || w.write_all(&input));
    let out = c.read_until_suffix(SENTINEL_REPLY, Duration::from_secs(60)).unwrap();
    writer.join().unwrap().unwrap();
    out
}

/// Writes `raw` and returns everything read until the server closes.
fn exchange_to_close(port: u16, raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut c = Client::connect(port).unwrap();
    c.send_raw(raw).map_err(|e| format!("write: {e}"))?;
    c.read_to_close(Duration::from_secs(5)).map_err(|e| format!("not closed: {e}"))
}

fn assert_same(what: &str, redis: &[u8], sluice: &[u8]) {
    assert!(
        redis == sluice,
        "{what}\n  redis:  {}\n  sluice: {}",
        escape(&redis[..redis.len().min(2000)]),
        escape(&sluice[..sluice.len().min(2000)])
    );
}

#[test]
fn inline_commands_and_quoting() {
    let Some((redis, sluice)) = servers() else { return };
    let cases: &[&[u8]] = &[
        b"PING\r\n",
        b"PING\n",
        b"ping hello\r\n",
        b"  PING   \r\n",
        b"ECHO \"hello world\"\r\n",
        b"ECHO 'it\\'s'\r\n",
        b"ECHO \"\\x41\\x42\\n\\t\\\\\\\"\"\r\n",
        b"ECHO \"\"\r\n",
        b"ECHO a\tb\r\n",
        b"ECHO a\"b c\"\r\n",
        b"SET k \"a b\"\r\nGET k\r\n",
        b"SET k v\nGET k\nDEL k\nEXISTS k\n",
        b"ECHO \"\\xzz\"\r\n",
        b"NOSUCH 'a' \"b\"\r\n",
        b"GET\r\n",
        b"ECHO x\r\n*1\r\n$4\r\nPING\r\nECHO y\r\n",
    ];
    for raw in cases {
        let a = exchange(redis.port(), raw);
        let b = exchange(sluice.port(), raw);
        assert_same(&format!("inline {}", escape(raw)), &a, &b);
    }
}

#[test]
fn empty_requests_are_skipped() {
    let Some((redis, sluice)) = servers() else { return };
    let cases: &[&[u8]] = &[
        b"\r\n",
        b"\n",
        b"   \r\n",
        b"\r\n\r\n\r\nPING\r\n",
        b"*0\r\n",
        b"*-1\r\n",
        b"*-5\r\nPING\r\n",
        b"*0\r\n*1\r\n$4\r\nPING\r\n",
    ];
    for raw in cases {
        let a = exchange(redis.port(), raw);
        let b = exchange(sluice.port(), raw);
        assert_same(&format!("empty request {}", escape(raw)), &a, &b);
    }
}

#[test]
fn protocol_errors_reply_then_close() {
    let Some((redis, sluice)) = servers() else { return };
    // Exactly one byte over the limit, so that the server has read all of
    // the input when it closes (unread input would turn the FIN into a RST).
    let too_big_inline = vec![b'a'; resp::INLINE_MAX + 1];
    let mut too_big_count = b"*".to_vec();
    too_big_count.resize(resp::INLINE_MAX + 1, b'1');
    let mut too_big_bulk_count = b"*1\r\n$".to_vec();
    too_big_bulk_count.resize(resp::INLINE_MAX + 5, b'1');
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("invalid multibulk length (text)", b"*abc\r\n".to_vec()),
        ("invalid multibulk length (too many)", b"*2147483648\r\n".to_vec()),
        ("invalid multibulk length (sign)", b"*+1\r\n".to_vec()),
        ("invalid bulk length (text)", b"*1\r\n$abc\r\n".to_vec()),
        ("invalid bulk length (negative)", b"*1\r\n$-1\r\n".to_vec()),
        ("invalid bulk length (over proto-max-bulk-len)", b"*1\r\n$536870913\r\n".to_vec()),
        ("expected '$' (simple string)", b"*1\r\n+PING\r\n".to_vec()),
        ("expected '$' (inline inside multibulk)", b"*2\r\n$4\r\nECHO\r\nhello\r\n".to_vec()),
        ("unbalanced quotes (double)", b"ECHO \"abc\r\n".to_vec()),
        ("unbalanced quotes (single)", b"ECHO 'abc\r\n".to_vec()),
        ("unbalanced quotes (text after quote)", b"ECHO \"a\"b\r\n".to_vec()),
        ("too big inline request", too_big_inline),
        ("too big mbulk count string", too_big_count),
        ("too big bulk count string", too_big_bulk_count),
        ("error after a good command", b"PING\r\n*abc\r\n".to_vec()),
        ("nothing after the error runs", b"*x\r\nPING\r\n".to_vec()),
        ("QUIT closes after its reply", b"PING\r\nQUIT\r\nPING\r\n".to_vec()),
    ];
    for (what, raw) in &cases {
        let a = exchange_to_close(redis.port(), raw);
        let b = exchange_to_close(sluice.port(), raw);
        match (&a, &b) {
            (Ok(a), Ok(b)) => {
                let proto_err = a.windows(19).any(|w| w == b"-ERR Protocol error");
                assert!(proto_err || what.starts_with("QUIT"), "{what}: {}", escape(a));
                assert_same(what, a, b)
            }
            _ => panic!("{what}: redis {a:?}, sluice {b:?}"),
        }
    }
}

/// The same command sequence (a mix of write, read, inline and multibulk
/// requests) of 1 to 100,000 commands, in one write.
#[test]
fn pipelines_of_every_depth_in_one_write() {
    let Some((redis, sluice)) = servers() else { return };
    for n in [1usize, 2, 3, 10, 100, 1_000, 10_000, 100_000] {
        let mut raw = Vec::new();
        for i in 0..n {
            let k = format!("k{}", i % 7);
            match i % 6 {
                0 => testkit::encode(&["SET", &k, &i.to_string()], &mut raw),
                1 => testkit::encode(&["GET", &k], &mut raw),
                2 => raw.extend_from_slice(format!("ECHO \"item {i}\"\r\n").as_bytes()),
                3 => testkit::encode(&["EXISTS", &k, "k1", "nokey"], &mut raw),
                4 => raw.extend_from_slice(b"PING\r\n"),
                _ => testkit::encode(&["DEL", &k], &mut raw),
            }
        }
        let a = exchange(redis.port(), &raw);
        let b = exchange(sluice.port(), &raw);
        assert_same(&format!("pipeline of {n}"), &a, &b);
    }
}

/// A small pipeline written in two parts, split at every byte.
#[test]
fn requests_split_at_every_byte_boundary() {
    let Some((redis, sluice)) = servers() else { return };
    let mut raw = Vec::new();
    testkit::encode(&["SET", "k", "hello world"], &mut raw);
    raw.extend_from_slice(b"GET k\r\n");
    testkit::encode(&["ECHO", ""], &mut raw);
    raw.extend_from_slice(b"\r\nECHO \"a b\" 'c'\r\n");
    testkit::encode(&["EXISTS", "k", "missing"], &mut raw);
    raw.extend_from_slice(b"*0\r\nPING\n");
    raw.extend_from_slice(SENTINEL_CMD);
    let want = exchange(redis.port(), &raw[..raw.len() - SENTINEL_CMD.len()]);
    let mut c = sluice.client();
    for cut in 1..raw.len() {
        c.send_raw(&raw[..cut]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        c.send_raw(&raw[cut..]).unwrap();
        let got = c.read_until_suffix(SENTINEL_REPLY, Duration::from_secs(10)).unwrap();
        assert_same(&format!("split at byte {cut}"), &want, &got);
    }
}

/// `printf 'PING\r\nPING\r\nPING\r\n' | nc -N`: every reply, then the
/// server closes after the client's EOF.
#[test]
fn replies_then_close_after_client_eof() {
    let Some((redis, sluice)) = servers() else { return };
    for port in [redis.port(), sluice.port()] {
        let mut c = Client::connect(port).unwrap();
        c.send_raw(b"PING\r\nPING\r\nPING\r\n").unwrap();
        c.shutdown_write().unwrap();
        let got = c.read_to_close(Duration::from_secs(5)).unwrap();
        assert_same(&format!("EOF on port {port}"), b"+PONG\r\n+PONG\r\n+PONG\r\n", &got);
    }
    if !Path::new("/usr/bin/nc").exists() && !Path::new("/bin/nc").exists() {
        eprintln!("SKIPPED the nc half of this test: nc not installed");
        return;
    }
    for port in [redis.port(), sluice.port()] {
        let mut child = Command::new("timeout")
            .args(["10", "nc", "-N", "127.0.0.1", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run nc");
        child.stdin.take().unwrap().write_all(b"PING\r\nPING\r\nPING\r\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "nc on port {port} did not end by itself: {:?}", out.status);
        assert_same(&format!("nc -N on port {port}"), b"+PONG\r\n+PONG\r\n+PONG\r\n", &out.stdout);
    }
}

/// Eight connections on one event-loop thread (`--threads 1`), whose
/// batches share the thread's parse window: each sends its own stream
/// (pipelines deeper than the window, inline requests with quotes,
/// requests of more arguments than fit on the stack) cut into chunks of
/// varying size and written in turns, so that requests split across
/// reads alternate with other connections' batches. Each connection's
/// replies are compared with redis-server's to the same chunks.
#[test]
fn connections_of_one_thread_interleave_split_requests() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_with(
        Path::new(env!("CARGO_BIN_EXE_sluice-server")),
        &["--threads", "1"],
        None,
    );
    const CONNS: usize = 8;
    let streams: Vec<Vec<u8>> = (0..CONNS)
        .map(|c| {
            let mut raw = Vec::new();
            for i in 0..600 {
                let k = format!("c{c}:k{}", i % 5);
                match (i + c) % 7 {
                    0 => testkit::encode(&["SET", &k, &format!("v{c}.{i}")], &mut raw),
                    1 => testkit::encode(&["GET", &k], &mut raw),
                    2 => raw.extend_from_slice(format!("ECHO \"c{c} 'item' {i}\"\r\n").as_bytes()),
                    3 => {
                        let fields: Vec<String> = (0..6).map(|f| format!("f{f}x{i}")).collect();
                        let mut args = vec!["HSET".to_string(), format!("c{c}:h")];
                        for f in &fields {
                            args.push(f.clone());
                            args.push(format!("{i}"));
                        }
                        testkit::encode(&args, &mut raw);
                    }
                    4 => testkit::encode(&["HLEN", &format!("c{c}:h")], &mut raw),
                    5 => raw.extend_from_slice(format!("INCR c{c}:n\r\n").as_bytes()),
                    _ => testkit::encode(&["EXISTS", &k, &format!("c{c}:n"), "nokey"], &mut raw),
                }
            }
            raw.extend_from_slice(SENTINEL_CMD);
            raw
        })
        .collect();
    let run = |port: u16| -> Vec<Vec<u8>> {
        let mut clients: Vec<Client> = (0..CONNS).map(|_| Client::connect(port).unwrap()).collect();
        let mut sent = [0usize; CONNS];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        while sent.iter().zip(&streams).any(|(s, r)| *s < r.len()) {
            for c in 0..CONNS {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let end = (sent[c] + 1 + (x % 700) as usize).min(streams[c].len());
                if sent[c] < end {
                    clients[c].send_raw(&streams[c][sent[c]..end]).unwrap();
                    sent[c] = end;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        clients
            .iter_mut()
            .map(|c| c.read_until_suffix(SENTINEL_REPLY, Duration::from_secs(30)).unwrap())
            .collect()
    };
    let want = run(redis.port());
    let got = run(sluice.port());
    for c in 0..CONNS {
        assert_same(&format!("connection {c}"), &want[c], &got[c]);
    }
}
