//! TLS, against reality: a CA, a server and a client certificate made by
//! the `openssl` CLI for each test; `redis-cli --tls` (hiredis over
//! OpenSSL) talks to Sluice's TLS port and to redis-server's with the
//! same certificates, and what it prints must be the same. Start-up
//! failures log redis-server's lines; CONFIG SET tls-* answers as it does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use testkit::{free_port, scratch_dir, RedisServer, ServerProc, TestServer, REDIS_SERVER};

fn sluice_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sluice-server"))
}

/// Whether the tools are here: redis-server (the oracle), redis-cli and
/// openssl. Missing ones fail the test under CI, else skip it.
fn have_tools() -> bool {
    let ok = Path::new(REDIS_SERVER).is_file()
        && Command::new("redis-cli").arg("--version").output().is_ok()
        && Command::new("openssl").arg("version").output().is_ok();
    if !ok {
        assert!(!testkit::oracle_required(), "redis-server, redis-cli and openssl are needed");
        eprintln!("SKIPPED: redis-server, redis-cli or openssl missing");
    }
    ok
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("bash").arg("-ec").arg(script).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
}

/// ca.crt, server.crt/key (for 127.0.0.1 and localhost), client.crt/key,
/// and other-ca.crt (a CA that signed nothing here), as Redis's
/// utils/gen-test-certs.sh makes them.
fn make_certs(dir: &Path) {
    sh(
        dir,
        r#"
        openssl genrsa -out ca.key 2048 2>/dev/null
        openssl req -x509 -new -nodes -sha256 -key ca.key -days 30 \
            -subj '/O=Sluice Test/CN=Certificate Authority' -out ca.crt
        openssl genrsa -out other-ca.key 2048 2>/dev/null
        openssl req -x509 -new -nodes -sha256 -key other-ca.key -days 30 \
            -subj '/O=Other/CN=Other Authority' -out other-ca.crt
        for who in server client; do
            openssl genrsa -out $who.key 2048 2>/dev/null
            if [ $who = server ]; then
                ext='subjectAltName=IP:127.0.0.1,DNS:localhost'
            else
                ext='extendedKeyUsage=clientAuth'
            fi
            openssl req -new -sha256 -subj "/O=Sluice Test/CN=$who" -key $who.key \
                | openssl x509 -req -sha256 -CA ca.crt -CAkey ca.key -CAcreateserial \
                    -days 30 -extfile <(printf 'keyUsage=digitalSignature,keyEncipherment\n%s\n' "$ext") \
                    -out $who.crt 2>/dev/null
        done
        "#,
    );
}

/// The TLS flags both servers get.
fn tls_flags(dir: &Path, tls_port: u16, extra: &[&str]) -> Vec<String> {
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let mut v = vec![
        "--tls-port".to_string(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        p("server.crt"),
        "--tls-key-file".into(),
        p("server.key"),
        "--tls-ca-cert-file".into(),
        p("ca.crt"),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// A server of each kind with a plain port and a TLS port.
struct Pair {
    dir: PathBuf,
    redis: (RedisServer, u16),
    sluice: (TestServer, u16),
}

fn pair(tag: &str, extra: &[&str]) -> Pair {
    let dir = scratch_dir(tag);
    make_certs(&dir);
    pair_in(dir, extra)
}

/// [`pair`] in a directory that already has the certificates.
fn pair_in(dir: PathBuf, extra: &[&str]) -> Pair {
    let rp = free_port();
    let rf = tls_flags(&dir, rp, extra);
    let rf: Vec<&str> = rf.iter().map(|s| s.as_str()).collect();
    let redis = RedisServer::start_with(&rf, Some(&dir)).unwrap();
    let sp = free_port();
    let sf = tls_flags(&dir, sp, extra);
    let sf: Vec<&str> = sf.iter().map(|s| s.as_str()).collect();
    let sluice = TestServer::start_with(&sluice_bin(), &sf, Some(&dir));
    Pair { dir, redis: (redis, rp), sluice: (sluice, sp) }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `redis-cli -p port --tls --cacert ca.crt <tls_args> args…`, input on stdin.
fn cli(dir: &Path, port: u16, tls_args: &[&str], args: &[&str], input: &[u8]) -> Output {
    let mut c = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--tls", "--cacert", "ca.crt"])
        .args(tls_args)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = c.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout {}\nstderr {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The same redis-cli run against both TLS ports prints the same.
fn same(p: &Pair, tls_args: &[&str], args: &[&str], input: &[u8]) -> String {
    let r = text(&cli(&p.dir, p.redis.1, tls_args, args, input));
    let s = text(&cli(&p.dir, p.sluice.1, tls_args, args, input));
    assert_eq!(r, s, "redis-cli {tls_args:?} {args:?}: redis, then sluice");
    s
}

const CLIENT_CERT: &[&str] = &["--cert", "client.crt", "--key", "client.key"];

#[test]
fn redis_cli_over_tls_gets_the_replies_redis_gives() {
    if !have_tools() {
        return;
    }
    let p = pair("tls-cli", &[]);
    assert!(same(&p, CLIENT_CERT, &["PING"], b"").contains("PONG"));
    same(&p, CLIENT_CERT, &["SET", "k", "v"], b"");
    assert!(same(&p, CLIENT_CERT, &["GET", "k"], b"").contains("stdout v\n"));
    same(&p, CLIENT_CERT, &["INCR", "k"], b"");
    same(&p, CLIENT_CERT, &["RPUSH", "l", "a", "b", "c"], b"");
    same(&p, CLIENT_CERT, &["LRANGE", "l", "0", "-1"], b"");
    // A pipeline through --pipe (one write of many commands).
    let mut input = Vec::new();
    for i in 0..1000 {
        input.extend_from_slice(format!("SET key:{i} value:{i}\r\nGET key:{i}\r\n").as_bytes());
    }
    input.extend_from_slice(b"PING\r\nINCR key:1\r\n");
    let out = same(&p, CLIENT_CERT, &["--pipe"], &input);
    assert!(out.contains("errors: 1, replies: 2002"), "{out}");
    // CLIENT LIST has nothing about TLS in 7.0; INFO's tcp_port is the
    // plain port while there is one.
    for (port, tls) in [(p.redis.0.port(), p.redis.1), (p.sluice.0.port(), p.sluice.1)] {
        let o = cli(&p.dir, tls, CLIENT_CERT, &["INFO", "server"], b"");
        let info = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(info.contains(&format!("tcp_port:{port}\r\n")), "{info}");
    }
    // The plain port still speaks plain RESP.
    let mut c = p.sluice.0.client();
    assert_eq!(c.cmd(&["GET", "k"]).unwrap(), b"$1\r\nv\r\n");
}

#[test]
fn a_deep_pipeline_over_tls_is_answered_in_full() {
    if !have_tools() {
        return;
    }
    let p = pair("tls-deep", &["--tls-auth-clients", "no"]);
    let mut input = Vec::with_capacity(4 << 20);
    for i in 0..100_000 {
        input.extend_from_slice(format!("SET key:{i} {i}\r\n").as_bytes());
    }
    let out = same(&p, &[], &["--pipe"], &input);
    assert!(out.contains("errors: 0, replies: 100000"), "{out}");
    let out = same(&p, &[], &["DBSIZE"], b"");
    assert!(out.contains("100000"), "{out}");
    // Replies much larger than the requests: 100,000 GETs in one write.
    let mut input = Vec::new();
    for i in 0..100_000 {
        input.extend_from_slice(format!("GET key:{i}\r\n").as_bytes());
    }
    let out = same(&p, &[], &["--pipe"], &input);
    assert!(out.contains("errors: 0, replies: 100000"), "{out}");
}

/// Both servers end the TLS connection without an answer. How redis-cli
/// words it varies from run to run with redis-server itself ("Server
/// closed the connection" or "Connection reset by peer": whether the
/// server closed with the client's first command unread), so only the
/// outcome is compared.
fn refused_by_both(p: &Pair, tls_args: &[&str]) {
    for port in [p.redis.1, p.sluice.1] {
        let o = cli(&p.dir, port, tls_args, &["PING"], b"");
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(o.stdout.is_empty() && o.stderr.starts_with(b"Error: "), "{out}");
    }
}

#[test]
fn client_certificates_are_required_as_redis_requires_them() {
    if !have_tools() {
        return;
    }
    // tls-auth-clients yes (the default): no certificate, no service.
    let p = pair("tls-auth", &[]);
    refused_by_both(&p, &[]);
    assert!(same(&p, CLIENT_CERT, &["PING"], b"").contains("PONG"));
    drop(p);
    // optional: served without one, and with one.
    let p = pair("tls-optional", &["--tls-auth-clients", "optional"]);
    assert!(same(&p, &[], &["PING"], b"").contains("PONG"));
    assert!(same(&p, CLIENT_CERT, &["PING"], b"").contains("PONG"));
    drop(p);
    // The CA from a directory (hashed names, as OpenSSL looks them up).
    let dir = scratch_dir("tls-cadir");
    make_certs(&dir);
    sh(&dir, "mkdir -p cadir && cp ca.crt cadir/ && openssl rehash cadir");
    let cadir = dir.join("cadir").to_string_lossy().into_owned();
    let flags = ["--tls-ca-cert-file", "", "--tls-ca-cert-dir", cadir.as_str()];
    let p = pair_in(dir, &flags);
    assert!(same(&p, CLIENT_CERT, &["PING"], b"").contains("PONG"));
    refused_by_both(&p, &[]);
    drop(p);
    // A certificate signed by another CA is refused by both.
    let p = pair("tls-otherca", &["--tls-ca-cert-file", "other-ca.crt"]);
    // (The server's certificate is still checked by the client with ca.crt.)
    refused_by_both(&p, CLIENT_CERT);
}

/// The lines a server logged, without the pid, role and time stamp.
fn log_lines(log: &str) -> Vec<String> {
    log.lines().filter_map(|l| l.split_once(" # ").map(|(_, m)| m.to_string())).collect()
}

/// Starts `bin` with `args` in `dir` and waits for it to exit.
fn run_to_exit(bin: &Path, args: &[String], dir: &Path) -> (Option<i32>, String) {
    let mut c = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let out = c.wait_with_output().unwrap();
            let log = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            return (st.code(), log);
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = c.kill();
            panic!("{} {args:?} did not exit", bin.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tls_start_up_failures_log_what_redis_logs() {
    if !have_tools() {
        return;
    }
    let dir = scratch_dir("tls-fatal");
    make_certs(&dir);
    let (cert, key, ca) = (
        ["--tls-cert-file", "server.crt"],
        ["--tls-key-file", "server.key"],
        ["--tls-ca-cert-file", "ca.crt"],
    );
    let cases: Vec<Vec<&str>> = vec![
        [&["--tls-cert-file", "missing.crt"][..], &key, &ca].concat(),
        [&cert[..], &["--tls-key-file", "missing.key"], &ca].concat(),
        [&key[..], &ca].concat(),
        [&cert[..], &ca].concat(),
        [&cert[..], &key].concat(),
        [&cert[..], &key, &["--tls-ca-cert-file", "missing-ca.crt"]].concat(),
        [&cert[..], &key, &ca, &["--tls-protocols", "TLSv9"]].concat(),
        [&cert[..], &key, &ca, &["--tls-ciphers", "BOGUS"]].concat(),
        [&cert[..], &key, &ca, &["--tls-ciphersuites", "BOGUS"]].concat(),
        [&["--tls-cert-file", "ca.key"][..], &key, &ca].concat(),
        [&cert[..], &["--tls-key-file", "client.key"], &ca].concat(),
    ];
    for case in &cases {
        let mut args: Vec<String> =
            ["--port", "0", "--save", "", "--tls-port"].iter().map(|s| s.to_string()).collect();
        args.push(free_port().to_string());
        args.extend(case.iter().map(|s| s.to_string()));
        let (rc, rlog) = run_to_exit(Path::new(REDIS_SERVER), &args, &dir);
        let (sc, slog) = run_to_exit(&sluice_bin(), &args, &dir);
        assert_eq!(rc, Some(1), "{case:?}: redis {rlog}");
        assert_eq!(sc, rc, "{case:?}: sluice {slog}");
        let want: Vec<_> = log_lines(&rlog).into_iter().rev().take(2).collect();
        let got: Vec<_> = log_lines(&slog).into_iter().rev().take(2).collect();
        assert_eq!(got, want, "{case:?}\nredis:\n{rlog}\nsluice:\n{slog}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn port_zero_with_a_tls_port_listens_on_tls_only() {
    if !have_tools() {
        return;
    }
    let dir = scratch_dir("tls-only");
    make_certs(&dir);
    let mut outs = Vec::new();
    for bin in [PathBuf::from(REDIS_SERVER), sluice_bin()] {
        let d = dir.clone();
        let args = move |port: u16| {
            let mut v: Vec<String> = ["--port", "0", "--save", "", "--bind", "127.0.0.1"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            v.extend(tls_flags(&d, port, &["--tls-auth-clients", "no"]));
            v
        };
        let p = ServerProc::spawn_raw(&bin, &args, &dir);
        let o = cli(&dir, p.port(), &[], &["INFO", "server"], b"");
        let info = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(info.contains(&format!("tcp_port:{}\r\n", p.port())), "{info}");
        let o = cli(&dir, p.port(), &[], &["CONFIG", "GET", "port"], b"");
        outs.push(text(&o));
    }
    assert_eq!(outs[0], outs[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_set_tls_answers_as_redis() {
    if !have_tools() {
        return;
    }
    let dir = scratch_dir("tls-config-set");
    make_certs(&dir);
    let d = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let redis = RedisServer::start_with(&[], Some(&dir)).unwrap();
    let sluice = TestServer::start_with(&sluice_bin(), &[], Some(&dir));
    let (rt, st) = (free_port(), free_port());
    let (rts, sts) = (rt.to_string(), st.to_string());
    let steps = |tls_port: &str| -> Vec<Vec<String>> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        vec![
            // Nothing to build a context from.
            v(&["CONFIG", "SET", "tls-port", tls_port]),
            // TLS is off: files are only stored.
            v(&["CONFIG", "SET", "tls-cert-file", "missing.crt"]),
            v(&[
                "CONFIG",
                "SET",
                "tls-cert-file",
                &d("server.crt"),
                "tls-key-file",
                &d("server.key"),
            ]),
            v(&["CONFIG", "SET", "tls-ca-cert-file", &d("ca.crt")]),
            v(&["CONFIG", "SET", "tls-port", tls_port]),
            // TLS is on: a bad value is refused and the old one kept.
            v(&["CONFIG", "SET", "tls-cert-file", "missing.crt"]),
            v(&["CONFIG", "SET", "tls-protocols", "bogus"]),
            v(&["CONFIG", "SET", "tls-ciphersuites", "BOGUS"]),
            v(&["CONFIG", "SET", "tls-port", tls_port, "tls-key-file", "missing.key"]),
            v(&["CONFIG", "GET", "tls-cert-file"]),
            v(&["CONFIG", "GET", "tls-key-file"]),
            v(&["CONFIG", "SET", "tls-auth-clients", "no"]),
            v(&["CONFIG", "SET", "tls-protocols", "TLSv1.2"]),
            v(&["CONFIG", "GET", "tls-port"]),
        ]
    };
    let mut got = Vec::new();
    for (srv, tls_port) in [(&*redis, rts.as_str()), (&*sluice, sts.as_str())] {
        let mut c = srv.client();
        let mut replies = Vec::new();
        for step in steps(tls_port) {
            let args: Vec<&str> = step.iter().map(|s| s.as_str()).collect();
            let r = String::from_utf8_lossy(&c.cmd(&args).unwrap()).into_owned();
            replies.push(
                r.replace(tls_port, "<tls-port>")
                    .replace(&dir.to_string_lossy().into_owned(), "<dir>"),
            );
        }
        // The new port speaks TLS 1.2, without a client certificate.
        let port: u16 = tls_port.parse().unwrap();
        let o = cli(&dir, port, &[], &["PING"], b"");
        replies.push(text(&o));
        let o = cli(&dir, port, &["--tls-ciphers", "ECDHE-RSA-AES256-GCM-SHA384"], &["PING"], b"");
        replies.push(text(&o));
        // Closing the TLS port.
        replies.push(
            String::from_utf8_lossy(&c.cmd(&["CONFIG", "SET", "tls-port", "0"]).unwrap())
                .into_owned(),
        );
        std::thread::sleep(Duration::from_millis(100));
        replies.push(format!(
            "connect after close: {}",
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        ));
        got.push(replies);
    }
    assert_eq!(got[0], got[1], "redis, then sluice");
    assert!(got[1].iter().any(|r| r.contains("PONG")), "{:?}", got[1]);
    let log = sluice.log_text();
    assert!(
        log.contains(
            "Failed applying new configuration. Possibly related to new tls-cert-file setting."
        ),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `openssl s_client -brief` negotiates with a TLS port: the
/// protocol and the suite, or that the handshake failed.
fn negotiated(dir: &Path, port: u16, client_args: &[&str]) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-brief", "-CAfile", "ca.crt", "-cert", "client.crt"])
        .args(["-key", "client.key", "-connect", &format!("127.0.0.1:{port}")])
        .args(client_args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let picked: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("Protocol version:") || l.starts_with("Ciphersuite:"))
        .collect();
    if out.status.success() && picked.len() == 2 {
        picked.join(", ")
    } else {
        "handshake failed".to_string()
    }
}

#[test]
fn protocols_and_cipher_suites_are_chosen_as_redis_chooses_them() {
    if !have_tools() {
        return;
    }
    let servers: &[(&[&str], &[&[&str]])] = &[
        (
            &[
                "--tls-protocols",
                "TLSv1.2",
                "--tls-ciphers",
                "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305",
                "--tls-prefer-server-ciphers",
                "yes",
            ],
            &[
                &[],
                &["-cipher", "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256"],
                &["-cipher", "ECDHE-RSA-AES256-GCM-SHA384"],
                &["-tls1_3"],
            ],
        ),
        (
            &["--tls-protocols", "TLSv1.2", "--tls-ciphers", "ECDHE-RSA-CHACHA20-POLY1305"],
            &[&[], &["-cipher", "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305"]],
        ),
        (
            &["--tls-protocols", "TLSv1.3", "--tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"],
            &[&[], &["-tls1_2"], &["-ciphersuites", "TLS_AES_128_GCM_SHA256"]],
        ),
        (&["--tls-session-caching", "no"], &[&[], &["-tls1_2"]]),
    ];
    for (flags, clients) in servers {
        let p = pair("tls-suites", flags);
        for c in *clients {
            let r = negotiated(&p.dir, p.redis.1, c);
            let s = negotiated(&p.dir, p.sluice.1, c);
            assert_eq!(s, r, "server {flags:?}, client {c:?}: sluice, redis");
            if c.is_empty() {
                assert!(s.starts_with("Protocol version: TLSv1."), "{flags:?}: {s}");
            }
        }
    }
}

/// A TLS client of our own (rustls, with the test's client certificate),
/// reading whole replies: what a busy script's thread answers over TLS.
struct TlsClient {
    s: rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
    buf: Vec<u8>,
}

impl TlsClient {
    fn connect(dir: &Path, port: u16) -> TlsClient {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(dir.join("ca.crt")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let certs: Vec<_> = CertificateDer::pem_file_iter(dir.join("client.crt"))
            .unwrap()
            .map(|c| c.unwrap())
            .collect();
        let key = PrivateKeyDer::from_pem_file(dir.join("client.key")).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .unwrap();
        let conn = rustls::ClientConnection::new(
            std::sync::Arc::new(cfg),
            "localhost".try_into().unwrap(),
        )
        .unwrap();
        let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        TlsClient { s: rustls::StreamOwned::new(conn, tcp), buf: Vec::new() }
    }

    fn send(&mut self, cmds: &[&[&str]]) {
        let mut out = Vec::new();
        for c in cmds {
            testkit::encode(c, &mut out);
        }
        self.s.write_all(&out).unwrap();
        self.s.flush().unwrap();
    }

    fn reply(&mut self) -> Vec<u8> {
        use std::io::Read;
        loop {
            if let Ok(Some((_, used))) = resp::parse_frame(&self.buf) {
                return self.buf.drain(..used).collect();
            }
            let mut b = [0u8; 4096];
            let n = self.s.read(&mut b).expect("a reply within 10 s");
            assert!(n > 0, "closed");
            self.buf.extend_from_slice(&b[..n]);
        }
    }

    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        self.send(&[args]);
        self.reply()
    }
}

/// A script past `busy-reply-threshold`: TLS clients are answered BUSY
/// like plain ones, on the script's own thread too (`--threads 1`, and
/// `--threads 2` with clients on both), pipelined input in order; a TLS
/// connection made while the script runs (its handshake done by the
/// busy thread) too, and ones connected before the script whose
/// handshakes are made while it runs; SCRIPT KILL over TLS stops it.
fn busy_over_tls(dir: &Path, plain: u16, tls: u16) -> Vec<Vec<u8>> {
    let mut t = Vec::new();
    let mut tc: Vec<TlsClient> = (0..3).map(|_| TlsClient::connect(dir, tls)).collect();
    for c in tc.iter_mut() {
        t.push(c.cmd(&["PING"]));
    }
    // Connected before the script, their handshakes made while it runs
    // (two: with two threads, one shares the script's).
    let mut pre: Vec<TlsClient> = (0..2).map(|_| TlsClient::connect(dir, tls)).collect();
    let mut runner = testkit::Client::connect(plain).unwrap();
    runner.set_timeout(Duration::from_secs(10));
    runner.send(&["EVAL", "while true do end", "0"]).unwrap();
    let mut probe = testkit::Client::connect(plain).unwrap();
    probe.set_timeout(Duration::from_secs(10));
    let busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    let start = Instant::now();
    while probe.cmd(&["GET", "x"]).unwrap() != busy {
        assert!(start.elapsed() < Duration::from_secs(10), "never BUSY");
    }
    for c in tc.iter_mut() {
        t.push(c.cmd(&["GET", "x"]));
        c.send(&[&["GET", "x"], &["MULTI"], &["PING"], &["DISCARD"]]);
        for _ in 0..4 {
            t.push(c.reply());
        }
    }
    for c in pre.iter_mut() {
        t.push(c.cmd(&["GET", "x"]));
    }
    let mut late = TlsClient::connect(dir, tls);
    t.push(late.cmd(&["GET", "x"]));
    t.push(late.cmd(&["SCRIPT", "KILL"]));
    t.push(runner.read_reply().unwrap());
    for c in tc.iter_mut().chain(pre.iter_mut()) {
        t.push(c.cmd(&["PING"]));
    }
    t.push(late.cmd(&["PING"]));
    t
}

#[test]
fn tls_clients_get_busy_from_every_thread() {
    if !have_tools() {
        return;
    }
    let dir = scratch_dir("tls-busy");
    make_certs(&dir);
    let rp = free_port();
    let mut rf = tls_flags(&dir, rp, &["--busy-reply-threshold", "100"]);
    let rf: Vec<&str> = rf.iter_mut().map(|s| s.as_str()).collect();
    let redis = RedisServer::start_with(&rf, Some(&dir)).unwrap();
    let expected = busy_over_tls(&dir, redis.port(), rp);
    let show = |t: &[Vec<u8>]| t.iter().map(|r| testkit::escape(r)).collect::<Vec<_>>().join("\n");
    for threads in ["1", "2"] {
        let sp = free_port();
        let mut sf = tls_flags(&dir, sp, &["--busy-reply-threshold", "100", "--threads", threads]);
        let sf: Vec<&str> = sf.iter_mut().map(|s| s.as_str()).collect();
        let sluice = TestServer::start_with(&sluice_bin(), &sf, Some(&dir));
        let got = busy_over_tls(&dir, sluice.port(), sp);
        assert_eq!(
            show(&got),
            show(&expected),
            "--threads {threads}: Sluice (left) vs Redis (right)"
        );
    }
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}
