//! Protected mode, against reality: a client in a network namespace,
//! joined to the host by a veth pair, reaches each server from a
//! non-loopback address, and receives exactly what redis-server sends it
//! under the same configuration (raw bytes).
//!
//! Needs root (CAP_NET_ADMIN) for `ip netns`; without it the test says
//! SKIPPED, except as root under CI / scripts/test where it must run.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use testkit::{RedisServer, TestServer};

fn sluice_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sluice-server"))
}

/// A network namespace with a veth pair to the host: the host side has
/// `host_ip`, the namespace side the next address.
struct Netns {
    name: String,
    veth: String,
    host_ip: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Netns {
    /// `None` (after saying why) when namespaces cannot be made here.
    fn create() -> Option<Netns> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = (std::process::id() * 7 + N.fetch_add(1, Ordering::Relaxed)) % 250;
        let ns = Netns {
            name: format!("sluice-pm-{}-{n}", std::process::id()),
            veth: format!("slpm{n}h"),
            host_ip: format!("10.214.{n}.1"),
        };
        let peer = format!("slpm{n}n");
        let (host_cidr, ns_cidr) = (format!("10.214.{n}.1/24"), format!("10.214.{n}.2/24"));
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &ns.name],
            vec!["link", "add", &ns.veth, "type", "veth", "peer", "name", &peer],
            vec!["link", "set", &peer, "netns", &ns.name],
            vec!["addr", "add", &host_cidr, "dev", &ns.veth],
            vec!["link", "set", &ns.veth, "up"],
            vec!["netns", "exec", &ns.name, "ip", "addr", "add", &ns_cidr, "dev", &peer],
            vec!["netns", "exec", &ns.name, "ip", "link", "set", &peer, "up"],
            vec!["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"],
        ];
        for s in steps {
            if let Err(e) = ip(&s) {
                // SAFETY: geteuid has no preconditions.
                let root = unsafe { libc::geteuid() } == 0;
                if root && testkit::oracle_required() {
                    panic!("cannot make a network namespace as root: {e}");
                }
                eprintln!("SKIPPED: protected mode needs CAP_NET_ADMIN for ip netns ({e})");
                return None;
            }
        }
        Some(ns)
    }

    /// What a client in the namespace receives after sending `input` to
    /// `port` on the host's address and closing its side. The client is
    /// a thread of this process moved into the namespace (`setns` moves
    /// only the calling thread).
    fn exchange(&self, port: u16, input: &[u8]) -> Vec<u8> {
        let path = format!("/var/run/netns/{}", self.name);
        let addr: std::net::SocketAddr = format!("{}:{port}", self.host_ip).parse().unwrap();
        let input = input.to_vec();
        std::thread::spawn(move || {
            use std::io::Read;
            use std::os::fd::AsRawFd;
            let f = std::fs::File::open(&path).expect("open the namespace");
            // SAFETY: a valid namespace fd; affects this thread only.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .expect("connect from the namespace");
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            if !input.is_empty() {
                s.write_all(&input).unwrap();
            }
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            got
        })
        .join()
        .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.veth]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

fn have_tools() -> bool {
    let ok = std::path::Path::new(testkit::REDIS_SERVER).is_file();
    if !ok {
        assert!(!testkit::oracle_required(), "redis-server is needed");
        eprintln!("SKIPPED: redis-server missing");
    }
    ok
}

/// What the namespace's client gets from each server started with
/// `flags` (after `--bind * -::*`, Redis's default, unless `flags` give
/// `--bind`; the test servers otherwise bind loopback), after `setup`
/// ran on a loopback connection: (redis, sluice), and INFO's
/// rejected_connections of each afterwards.
fn both(ns: &Netns, flags: &[&str], setup: &[&[&str]], input: &[u8]) -> [(Vec<u8>, String); 2] {
    let mut all = vec!["--bind", "*", "-::*"];
    if flags.contains(&"--bind") {
        all.clear();
    }
    all.extend_from_slice(flags);
    let redis = RedisServer::start_with(&all, None).unwrap();
    let sluice = TestServer::start_with(&sluice_bin(), &all, None);
    let mut out = Vec::new();
    for port in [redis.port(), sluice.port()] {
        let mut c = testkit::Client::connect(port).unwrap();
        if flags.contains(&"--requirepass") {
            c.cmd(&["AUTH", "secret"]).unwrap();
        }
        for cmd in setup {
            assert_eq!(c.cmd(cmd).unwrap(), b"+OK\r\n", "{cmd:?}");
        }
        let got = ns.exchange(port, input);
        let info = String::from_utf8_lossy(&c.cmd(&["INFO", "stats"]).unwrap()).into_owned();
        let rejected = info
            .lines()
            .find(|l| l.starts_with("rejected_connections:"))
            .unwrap_or_default()
            .to_string();
        out.push((got, rejected));
    }
    [out.remove(0), out.remove(0)]
}

#[test]
fn protected_mode_refuses_non_loopback_clients_as_redis_does() {
    if !have_tools() {
        return;
    }
    let Some(ns) = Netns::create() else { return };
    let host = ns.host_ip.clone();
    let explicit = format!("{host} 127.0.0.1");
    // (flags, setup on loopback, what the outside client then gets)
    let cases: Vec<(Vec<&str>, Vec<&[&str]>, &str)> = vec![
        // Redis's defaults: protected, no password, whatever bind says.
        (vec![], vec![], "-DENIED Redis is running in protected mode"),
        (vec!["--bind", "0.0.0.0"], vec![], "-DENIED"),
        (vec!["--bind", &explicit], vec![], "-DENIED"),
        (vec!["--protected-mode", "no"], vec![], "+PONG"),
        (vec!["--requirepass", "secret"], vec![], "-NOAUTH"),
        // Switched off at run time from the loopback interface.
        (vec![], vec![&["CONFIG", "SET", "protected-mode", "no"]], "+PONG"),
        // Switched on again, or a password removed.
        (
            vec!["--protected-mode", "no"],
            vec![&["CONFIG", "SET", "protected-mode", "yes"]],
            "-DENIED",
        ),
        (vec!["--requirepass", "secret"], vec![&["CONFIG", "SET", "requirepass", ""]], "-DENIED"),
        // A password given through the ACL lifts it as requirepass does
        // (Redis tests the default user's nopass flag, not requirepass),
        // and `nopass` again restores it.
        (vec![], vec![&["ACL", "SETUSER", "default", ">secret"]], "-NOAUTH"),
        (
            vec!["--requirepass", "secret"],
            vec![&["ACL", "SETUSER", "default", "nopass"]],
            "-DENIED",
        ),
        // A disabled default user with no password is still protected.
        (vec![], vec![&["ACL", "SETUSER", "default", "off"]], "-DENIED"),
    ];
    for (flags, setup, want) in cases {
        // A refused client sends nothing: the refusal comes at once, and
        // a server closing on an unread PING would reset the connection
        // (and the client could lose the reply, with Redis too).
        let input: &[u8] = if want.starts_with("-DENIED") { b"" } else { b"PING\r\n" };
        let [(r, r_rejected), (s, s_rejected)] = both(&ns, &flags, &setup, input);
        assert!(
            r.starts_with(want.as_bytes()),
            "{flags:?}: redis sent {:?}",
            String::from_utf8_lossy(&r)
        );
        assert_eq!(
            String::from_utf8_lossy(&s),
            String::from_utf8_lossy(&r),
            "{flags:?} {setup:?}: sluice, redis"
        );
        assert_eq!(s_rejected, r_rejected, "{flags:?}: INFO stats");
    }
    // Over TLS the refusal comes after the handshake, the same line.
    if Command::new("openssl").arg("version").output().is_err() {
        assert!(!testkit::oracle_required(), "openssl is needed");
        eprintln!("SKIPPED: the TLS case needs the openssl CLI");
        return;
    }
    let dir = testkit::scratch_dir("pm-tls");
    let script = "openssl genrsa -out ca.key 2048 2>/dev/null
        openssl req -x509 -new -nodes -sha256 -key ca.key -days 30 -subj '/CN=Test CA' -out ca.crt
        openssl genrsa -out server.key 2048 2>/dev/null
        openssl req -new -sha256 -subj '/CN=server' -key server.key \
            | openssl x509 -req -sha256 -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
                -out server.crt 2>/dev/null";
    let ok = Command::new("bash").args(["-ec", script]).current_dir(&dir).status().unwrap();
    assert!(ok.success());
    let mut got = Vec::new();
    for redis in [true, false] {
        let tls_port = testkit::free_port();
        let d = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let (tp, cert, key) = (tls_port.to_string(), d("server.crt"), d("server.key"));
        let flags = [
            "--bind",
            "*",
            "-::*",
            "--tls-port",
            &tp,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-auth-clients",
            "no",
        ];
        let _server: Box<dyn std::any::Any> = if redis {
            Box::new(RedisServer::start_with(&flags, None).unwrap())
        } else {
            Box::new(TestServer::start_with(&sluice_bin(), &flags, None))
        };
        // s_client sends nothing (-ign_eof: it reads until the server
        // closes); -quiet: only what the server sent, on stdout.
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.name, "timeout", "10", "openssl", "s_client"])
            .args(["-quiet", "-ign_eof", "-CAfile", "ca.crt", "-connect"])
            .arg(format!("{}:{tls_port}", ns.host_ip))
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        got.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    assert!(got[0].starts_with("-DENIED Redis is running in protected mode"), "{}", got[0]);
    assert_eq!(got[1], got[0], "over TLS: sluice, redis");
    let _ = std::fs::remove_dir_all(&dir);
}
