//! Parameters that used to be accepted without effect, against
//! redis-server 7.0.15 doing the same: the Unix socket listener
//! (`unixsocket`, `unixsocketperm`), `port 0`, the crash report
//! (`crash-log-enabled`), `shutdown-on-sigterm`, SHUTDOWN ABORT of a
//! signal's pending shutdown, the unauthenticated protocol limits, and
//! the INFO fields operators read (`total_reads_processed`,
//! `mem_clients_normal`, `avg_ttl`, …) that used to print 0.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{cmd, info, text};
use testkit::{scratch_dir, RedisServer, ServerProc, TestServer, REDIS_SERVER};

fn have_redis() -> bool {
    Path::new(REDIS_SERVER).is_file()
}

fn sluice_bin() -> PathBuf {
    TestServer::default_bin()
}

/// Sends `req` on the Unix socket at `path` and reads until `want`
/// replies' worth of CRLF-terminated lines arrived (or 2 s passed).
fn unix_roundtrip(path: &Path, req: &[u8], lines: usize) -> String {
    let mut s = UnixStream::connect(path).expect("connect to the unix socket");
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let start = Instant::now();
    while got.windows(2).filter(|w| w == b"\r\n").count() < lines
        && start.elapsed() < Duration::from_secs(2)
    {
        let mut buf = [0u8; 4096];
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The `addr` and `laddr` fields of CLIENT INFO, with the socket's path
/// made neutral.
fn addr_fields(info: &str, path: &Path) -> String {
    let p = path.display().to_string();
    info.split(' ')
        .filter(|f| f.starts_with("addr=") || f.starts_with("laddr="))
        .map(|f| f.replace(&p, "PATH"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `bin` (Sluice or redis-server) in `dir`, on a TCP port and the Unix
/// socket at `sock`, with `extra` arguments.
fn spawn_on_unixsocket(bin: &Path, dir: &Path, sock: &Path, extra: &[&str]) -> ServerProc {
    let sock = sock.display().to_string();
    ServerProc::spawn_raw(
        bin,
        &|port| {
            let port = port.to_string();
            ["--port", &port, "--bind", "127.0.0.1", "--save", "", "--unixsocket", &sock]
                .iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect()
        },
        dir,
    )
}

#[test]
fn unixsocket_is_listened_on_as_redis_listens() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in [("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())] {
        let dir = scratch_dir(&format!("unixsock-{tag}"));
        let sock = dir.join("s.sock");
        // A stale file at the path is replaced, as Redis does.
        std::fs::write(&sock, b"stale").unwrap();
        let p = spawn_on_unixsocket(&bin, &dir, &sock, &["--unixsocketperm", "700"]);
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let meta = std::fs::metadata(&sock).unwrap();
        assert!(meta.file_type().is_socket(), "{tag}: no socket at the path");
        let mode = meta.permissions().mode() & 0o777;
        // Pipelined requests on the socket, and the client's addresses.
        let piped = unix_roundtrip(&sock, b"PING\r\nSET k v\r\nGET k\r\n", 4);
        let ci = unix_roundtrip(&sock, b"CLIENT INFO\r\n", 1);
        // The TCP port still serves.
        let mut c = p.client();
        let tcp = text(&cmd(&mut c, &["GET", "k"]));
        let cfg = text(&cmd(&mut c, &["CONFIG", "GET", "unixsocketperm"]));
        seen.push((mode, piped, addr_fields(&ci, &sock), tcp, cfg));
        drop(c);
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[1].0, 0o700);
    assert_eq!(seen[1].2, "addr=PATH:0 laddr=PATH:0");
}

/// Replies larger than a Unix socket takes at once, to a client that
/// reads only later, arrive whole and in order, and the connection serves
/// on afterwards, and the server idles while it waits for room; the same
/// as redis-server. (Sluice registers a Unix client for output readiness
/// only while its replies wait for room.)
#[test]
fn unixsocket_replies_wait_for_a_slow_reader() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in [("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())] {
        let dir = scratch_dir(&format!("unixslow-{tag}"));
        let sock = dir.join("s.sock");
        let p = spawn_on_unixsocket(&bin, &dir, &sock, &[]);
        let mut c = p.client();
        // 1 MB values: a few replies fill the socket's buffer many times.
        let big: String = (0..1 << 20).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        cmd(&mut c, &["SET", "big", &big]);
        let mut s = UnixStream::connect(&sock).expect("connect to the unix socket");
        let mut req = Vec::new();
        for i in 0..3 {
            req.extend_from_slice(b"GET big\r\n");
            req.extend_from_slice(format!("INCR n{i}\r\n").as_bytes());
        }
        s.write_all(&req).unwrap();
        // Nothing read for a while: the server's writes find no room,
        // and it waits for some without spinning.
        std::thread::sleep(Duration::from_millis(100));
        let cpu = crate::common::cpu_secs(p.pid());
        std::thread::sleep(Duration::from_millis(500));
        let idle = crate::common::cpu_secs(p.pid()) - cpu <= 0.2;
        let one = format!("${}\r\n{big}\r\n:1\r\n", big.len());
        let want = one.len() * 3;
        let mut got = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while got.len() < want {
            // Small reads, a pause between some: room comes a little at a time.
            let n = s.read(&mut buf[..4096]).expect("the replies keep coming");
            assert!(n > 0, "{tag}: closed after {} of {want} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
            if got.len() % (256 << 10) < 4096 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert_eq!(got.len(), want, "{tag}");
        let whole = got == one.repeat(3).into_bytes();
        // And after the backlog, a request is answered at once.
        s.write_all(b"PING\r\n").unwrap();
        let mut pong = [0u8; 7];
        s.read_exact(&mut pong).unwrap();
        seen.push((whole, idle, pong));
        drop(s);
        drop(c);
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[1], (true, true, *b"+PONG\r\n"));
}

#[test]
fn unixsocket_file_is_removed_at_shutdown() {
    let dir = scratch_dir("unixsock-exit");
    let sock = dir.join("x.sock");
    let sock_s = sock.display().to_string();
    let mut p = TestServer::start_with(&sluice_bin(), &["--unixsocket", &sock_s], Some(&dir));
    assert!(sock.exists());
    let _ = unix_roundtrip(&sock, b"SHUTDOWN NOSAVE\r\n", 1);
    let start = Instant::now();
    while p.is_running() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!sock.exists(), "the socket file outlived the server");
    assert!(p.log_text().contains("Removing the unix socket file."));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `bin` with `args` to its end (or kills it after 5 s); returns
/// whether it exited with status 1 and its output.
fn run_to_end(bin: &Path, args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(bin)
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn port_zero_without_other_listeners_exits_as_redis_does() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("port0");
    let mut seen = Vec::new();
    for bin in [PathBuf::from(REDIS_SERVER), sluice_bin()] {
        let (code, log) = run_to_end(&bin, &["--port", "0", "--save", ""], &dir);
        seen.push((code, log.contains("Configured to not listen anywhere, exiting.")));
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[1], (Some(1), true));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn port_zero_with_a_unixsocket_opens_no_tcp_port() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in [("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())] {
        let dir = scratch_dir(&format!("port0-unix-{tag}"));
        let sock = dir.join("p.sock");
        let mut child = std::process::Command::new(&bin)
            .args(["--port", "0", "--save", "", "--unixsocket", &sock.display().to_string()])
            .current_dir(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !sock.exists() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let port = unix_roundtrip(&sock, b"CONFIG GET port\r\n", 5);
        let tcp_port = unix_roundtrip(&sock, b"INFO server\r\n", 20)
            .lines()
            .find(|l| l.starts_with("tcp_port:"))
            .map(str::to_string);
        // No TCP socket of the process is listening.
        let listening = listening_tcp_ports(child.id());
        let _ = unix_roundtrip(&sock, b"SHUTDOWN NOSAVE\r\n", 1);
        let _ = child.wait();
        seen.push((port, tcp_port, listening));
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[1].1.as_deref(), Some("tcp_port:0"));
    assert!(seen[1].2.is_empty());
}

/// The TCP sockets in LISTEN state among `pid`'s descriptors.
fn listening_tcp_ports(pid: u32) -> Vec<String> {
    let mut inodes = Vec::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(t) = std::fs::read_link(fd.path()) {
                let t = t.display().to_string();
                if let Some(i) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                    inodes.push(i.to_string());
                }
            }
        }
    }
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // st 0A is LISTEN; field 9 is the inode.
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                out.push(f[1].to_string());
            }
        }
    }
    out
}

#[test]
fn debug_segfault_writes_a_crash_report_as_redis_does() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in [("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())] {
        let dir = scratch_dir(&format!("crash-{tag}"));
        let mut p = ServerProc::spawn_raw(
            &bin,
            &|port| {
                [
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--enable-debug-command",
                    "yes",
                    "--crash-memcheck-enabled",
                    "no",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect()
            },
            &dir,
        );
        let mut c = p.client();
        let _ = c.cmd(&["DEBUG", "SEGFAULT"]);
        let start = Instant::now();
        while p.is_running() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = p.log_text();
        seen.push((!p.is_running(), log.contains("crashed by signal: 11")));
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[1], (true, true));
}

/// Starts `bin` with save points and `extra`, writes a key, sends
/// SIGTERM; returns whether it exited and whether dump.rdb was written.
fn sigterm_story(bin: &Path, tag: &str, extra: &[&str]) -> (bool, bool) {
    let dir = scratch_dir(&format!("sigterm-{tag}"));
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let mut p = ServerProc::spawn_raw(
        bin,
        &|port| {
            let mut v: Vec<String> = ["--port", &port.to_string(), "--bind", "127.0.0.1"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            v.extend(["--save".to_string(), "3600 1".to_string()]);
            v.extend(extra.iter().cloned());
            v
        },
        &dir,
    );
    let mut c = p.client();
    let _ = c.cmd(&["SET", "k", "v"]);
    // SAFETY: kill(2) on the child's pid.
    unsafe { libc::kill(p.pid() as i32, libc::SIGTERM) };
    let start = Instant::now();
    while p.is_running() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = (!p.is_running(), dir.join("dump.rdb").exists());
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn shutdown_on_sigterm_nosave_skips_the_final_save() {
    if !have_redis() {
        return;
    }
    for extra in [&[][..], &["--shutdown-on-sigterm", "nosave"][..]] {
        let redis = sigterm_story(Path::new(REDIS_SERVER), "redis", extra);
        let sluice = sigterm_story(&sluice_bin(), "sluice", extra);
        assert_eq!(redis, sluice, "{extra:?}");
    }
}

#[test]
fn shutdown_abort_cancels_a_pending_sigterm() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for bin in [PathBuf::from(REDIS_SERVER), sluice_bin()] {
        let dir = scratch_dir("abort");
        let mut p = ServerProc::spawn_raw(
            &bin,
            &|port| {
                ["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]
                    .iter()
                    .chain(&["--enable-debug-command", "yes"])
                    .map(|s| s.to_string())
                    .collect()
            },
            &dir,
        );
        let mut c = p.client();
        let none = text(&cmd(&mut c, &["SHUTDOWN", "ABORT"]));
        let _ = cmd(&mut c, &["DEBUG", "PAUSE-CRON", "1"]);
        // SAFETY: kill(2) on the child's pid.
        unsafe { libc::kill(p.pid() as i32, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(100));
        let aborted = text(&cmd(&mut c, &["SHUTDOWN", "ABORT"]));
        let _ = cmd(&mut c, &["DEBUG", "PAUSE-CRON", "0"]);
        std::thread::sleep(Duration::from_millis(300));
        let alive = p.is_running() && text(&cmd(&mut c, &["PING"])) == "PONG";
        let logged = p.log_text().contains("Shutdown manually aborted");
        seen.push((none, aborted, alive, logged));
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[1].1, "OK");
}

#[test]
fn unauthenticated_protocol_limits_answer_redis_errors() {
    let Some(r) = RedisServer::start_with(&["--requirepass", "pw"], None) else { return };
    let s = TestServer::start_with(&sluice_bin(), &["--requirepass", "pw"], None);
    for req in [&b"*100\r\n"[..], b"*1\r\n$100000000\r\n"] {
        let mut got = Vec::new();
        for port in [r.port(), s.port()] {
            let mut c = testkit::Client::connect(port).unwrap();
            c.send_raw(req).unwrap();
            got.push(text(&c.read_frame().unwrap()));
        }
        assert_eq!(got[0], got[1]);
        assert!(got[1].contains("unauthenticated"), "{}", got[1]);
    }
}

/// The INFO fields prometheus-redis-exporter reads that Sluice used to
/// print as 0: after the same workload both servers report them nonzero.
#[test]
fn info_fields_operators_read_are_filled_as_redis_fills_them() {
    let Some(r) = RedisServer::start_with(&["--hz", "100"], None) else { return };
    let s = TestServer::start_with(&sluice_bin(), &["--hz", "100"], None);
    let mut seen = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = testkit::Client::connect(port).unwrap();
        for i in 0..200 {
            let k = format!("k{i}");
            let _ = cmd(&mut c, &["SET", &k, "value", "EX", "1000"]);
        }
        let _ = cmd(&mut c, &["SET", "big", &"x".repeat(20_000)]);
        // Active expiry's samples feed avg_ttl.
        std::thread::sleep(Duration::from_millis(500));
        let nonzero = |c: &mut testkit::Client, sec: &str, f: &str| {
            info(c, sec, f).and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v > 0.0)
        };
        let keyspace = info(&mut c, "keyspace", "db0").unwrap_or_default();
        let avg_ttl = keyspace
            .split(',')
            .find_map(|f| f.strip_prefix("avg_ttl="))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0);
        seen.push([
            nonzero(&mut c, "stats", "total_reads_processed"),
            nonzero(&mut c, "stats", "total_writes_processed"),
            nonzero(&mut c, "memory", "used_memory_overhead"),
            nonzero(&mut c, "memory", "mem_clients_normal"),
            nonzero(&mut c, "clients", "client_recent_max_input_buffer"),
            avg_ttl > 900_000 && avg_ttl <= 1_000_000,
        ]);
        // Counters reset with CONFIG RESETSTAT, as Redis's do.
        let _ = cmd(&mut c, &["CONFIG", "RESETSTAT"]);
        let reads = info(&mut c, "stats", "total_reads_processed");
        seen.push([reads.as_deref() == Some("1"), true, true, true, true, true]);
    }
    assert_eq!(seen[0], seen[2], "after the workload");
    assert_eq!(seen[1], seen[3], "after CONFIG RESETSTAT");
    assert!(seen[2].iter().all(|&b| b), "{:?}", seen[2]);
}

/// FLUSHALL/FLUSHDB ASYNC, and neither with `lazyfree-lazy-user-flush
/// yes`, free the keys in the background and count them in
/// `lazyfreed_objects`; SYNC frees them at once and counts nothing.
#[test]
fn lazyfree_lazy_user_flush_frees_in_the_background_as_redis_does() {
    let Some(r) = RedisServer::start() else { return };
    let s = TestServer::start();
    let mut seen = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = testkit::Client::connect(port).unwrap();
        let mut counts = Vec::new();
        let fill = |c: &mut testkit::Client| {
            for db in ["0", "1"] {
                let _ = cmd(c, &["SELECT", db]);
                for i in 0..50 {
                    let _ = cmd(c, &["SET", &format!("k{i}"), "v"]);
                }
            }
        };
        let mut run = |c: &mut testkit::Client, flush: &[&str]| {
            let _ = cmd(c, &["CONFIG", "RESETSTAT"]);
            fill(c);
            let reply = text(&cmd(c, flush));
            let start = Instant::now();
            while info(c, "memory", "lazyfree_pending_objects").as_deref() != Some("0") {
                assert!(start.elapsed() < Duration::from_secs(10), "lazy free never ended");
                std::thread::sleep(Duration::from_millis(10));
            }
            let freed =
                info(c, "memory", "lazyfreed_objects").or(info(c, "stats", "lazyfreed_objects"));
            let size = text(&cmd(c, &["DBSIZE"]));
            counts.push(format!("{} {reply} freed={freed:?} dbsize={size}", flush.join(" ")));
        };
        run(&mut c, &["FLUSHALL", "ASYNC"]);
        run(&mut c, &["FLUSHALL", "SYNC"]);
        run(&mut c, &["FLUSHALL"]);
        run(&mut c, &["FLUSHDB", "ASYNC"]);
        let _ = cmd(&mut c, &["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"]);
        run(&mut c, &["FLUSHALL"]);
        run(&mut c, &["FLUSHDB"]);
        run(&mut c, &["FLUSHDB", "SYNC"]);
        seen.push(counts);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(seen[1][0].contains("freed=Some(\"100\")"), "{:?}", seen[1]);
}
