//! TLS with rustls (ring provider): the server context built from the
//! `tls-*` parameters with the checks and log lines of Redis's
//! `tlsConfigure`, the current context (replaced by CONFIG SET tls-*;
//! connections keep the one they were accepted with), and [`TlsStream`],
//! the TLS [`Transport`] a connection runs over.
//!
//! What rustls cannot honour: TLSv1 and TLSv1.1 (dropped from
//! `tls-protocols` with a warning), OpenSSL cipher strings in
//! `tls-ciphers` beyond lists of exact TLS 1.2 suite names (keywords such
//! as `DEFAULT` or `HIGH` keep every suite rustls has), encrypted private
//! keys (`tls-key-file-pass`), `tls-dh-params-file` (rustls has no
//! finite-field DHE), `tls-session-cache-timeout`.

use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;
use std::task::{Context, Poll};

use engine::subsystems::config::Config;
use engine::subsystems::log;
use rustls::crypto::ring as provider;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{
    InconsistentKeys, RootCertStore, ServerConfig, ServerConnection, SupportedCipherSuite,
};
use tokio::net::TcpStream;

use crate::transport::Transport;

fn param(c: &Config, name: &str) -> String {
    String::from_utf8_lossy(&c.get_by_name(name).unwrap_or_default()).into_owned()
}

fn opt(c: &Config, name: &str) -> Option<String> {
    Some(param(c, name)).filter(|s| !s.is_empty())
}

/// `tls-port`.
pub fn port(c: &Config) -> u16 {
    param(c, "tls-port").parse().unwrap_or(0)
}

/// Whether Redis would configure TLS for this configuration (a TLS
/// port, TLS replication or TLS cluster bus).
pub fn wanted(c: &Config) -> bool {
    port(c) != 0 || param(c, "tls-replication") == "yes" || param(c, "tls-cluster") == "yes"
}

/// OpenSSL's text for why a file could not be read, as Redis logs it.
fn io_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => {
            "error:80000002:system library::No such file or directory".into()
        }
        io::ErrorKind::PermissionDenied => {
            "error:8000000D:system library::Permission denied".into()
        }
        _ => format!("error:80000000:system library::{e}"),
    }
}

fn pem_reason(e: &pem::Error) -> String {
    match e {
        pem::Error::Io(e) => io_reason(e),
        pem::Error::NoItemsFound => "error:0480006C:PEM routines::no start line".into(),
        other => format!("error:0480006C:PEM routines::{other:?}"),
    }
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_reason(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_reason(&e))?;
    if certs.is_empty() {
        return Err(pem_reason(&pem::Error::NoItemsFound));
    }
    Ok(certs)
}

/// `tls-ca-cert-file` and every certificate file of `tls-ca-cert-dir`.
fn load_roots(file: Option<&str>, dir: Option<&str>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if let Some(f) = file {
        for c in load_certs(f)? {
            roots.add(c).map_err(|e| format!("error:05800088:x509 certificate routines::{e}"))?;
        }
    }
    if let Some(d) = dir {
        let entries = std::fs::read_dir(d).map_err(|e| io_reason(&e))?;
        for e in entries.flatten() {
            // OpenSSL looks certificates up by hashed name; every
            // readable PEM file of the directory is as good here.
            if let Ok(certs) = load_certs(&e.path().to_string_lossy()) {
                roots.add_parsable_certificates(certs);
            }
        }
    }
    Ok(roots)
}

/// `tls-protocols`: `None` for Redis's "invalid" (already logged).
fn protocols(s: &str) -> Option<Vec<&'static rustls::SupportedProtocolVersion>> {
    let (mut v12, mut v13) = (s.trim().is_empty(), s.trim().is_empty());
    for tok in s.split(' ').filter(|t| !t.is_empty()) {
        match tok.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => log::warning(&format!(
                "{tok} in tls-protocols is not supported by Sluice's TLS library (rustls); ignored."
            )),
            "tlsv1.2" => v12 = true,
            "tlsv1.3" => v13 = true,
            _ => {
                log::warning(
                    "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', \
                     'TLSv1.2' and 'TLSv1.3'.",
                );
                return None;
            }
        }
    }
    let mut out = Vec::new();
    if v13 {
        out.push(&rustls::version::TLS13);
    }
    if v12 {
        out.push(&rustls::version::TLS12);
    }
    if out.is_empty() {
        log::warning("No TLS protocol version left in tls-protocols that Sluice supports.");
        return None;
    }
    Some(out)
}

/// OpenSSL's name of a suite (TLS 1.3 names are the IANA ones).
fn openssl_name(s: SupportedCipherSuite) -> String {
    // rustls's Debug names: TLS13_AES_128_GCM_SHA256 (OpenSSL:
    // TLS_AES_128_GCM_SHA256), TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    // (OpenSSL: ECDHE-RSA-AES128-GCM-SHA256; ChaCha20 without its hash).
    let iana = format!("{:?}", s.suite());
    if let Some(rest) = iana.strip_prefix("TLS13_") {
        return format!("TLS_{rest}");
    }
    let body = iana.trim_start_matches("TLS_").replace("_WITH_", "_");
    let name = body.replace("AES_128", "AES128").replace("AES_256", "AES256").replace('_', "-");
    match name.strip_suffix("-SHA256") {
        Some(n) if n.ends_with("CHACHA20-POLY1305") => n.to_string(),
        _ => name,
    }
}

/// Picks suites of one protocol family from an OpenSSL-style list.
/// `None` when nothing usable was named.
fn pick(
    list: &str,
    all: &[SupportedCipherSuite],
    keywords: bool,
) -> Option<Vec<SupportedCipherSuite>> {
    let mut out = Vec::new();
    for tok in list.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        if tok.starts_with(['!', '-', '+', '@']) {
            continue;
        }
        if let Some(s) = all.iter().find(|s| openssl_name(**s).eq_ignore_ascii_case(tok)) {
            if !out.contains(s) {
                out.push(*s);
            }
        } else if keywords
            && matches!(
                tok.to_ascii_uppercase().as_str(),
                "DEFAULT" | "ALL" | "HIGH" | "ECDHE" | "EECDH" | "AESGCM" | "CHACHA20" | "AES"
            )
        {
            for s in all {
                if !out.contains(s) {
                    out.push(*s);
                }
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Builds the server context as Redis's `tlsConfigure` does, logging
/// Redis's line for the first problem.
pub fn configure(c: &Config) -> Result<Arc<ServerConfig>, ()> {
    let fail = |m: &str| {
        log::warning(m);
    };
    let Some(cert_file) = opt(c, "tls-cert-file") else {
        fail("No tls-cert-file configured!");
        return Err(());
    };
    let Some(key_file) = opt(c, "tls-key-file") else {
        fail("No tls-key-file configured!");
        return Err(());
    };
    let auth = param(c, "tls-auth-clients");
    let (ca_file, ca_dir) = (opt(c, "tls-ca-cert-file"), opt(c, "tls-ca-cert-dir"));
    let needs_ca =
        auth != "no" || param(c, "tls-cluster") == "yes" || param(c, "tls-replication") == "yes";
    if needs_ca && ca_file.is_none() && ca_dir.is_none() {
        fail(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, \
             tls-replication or tls-auth-clients are enabled!",
        );
        return Err(());
    }
    let versions = protocols(&param(c, "tls-protocols")).ok_or(())?;
    let certs = load_certs(&cert_file).map_err(|why| {
        fail(&format!("Failed to load certificate: {cert_file}: {why}"));
    })?;
    let key = PrivateKeyDer::from_pem_file(&key_file).map_err(|e| {
        fail(&format!("Failed to load private key: {key_file}: {}", pem_reason(&e)));
    })?;
    let roots = if ca_file.is_some() || ca_dir.is_some() {
        Some(load_roots(ca_file.as_deref(), ca_dir.as_deref()).map_err(|why| {
            fail(&format!("Failed to configure CA certificate(s) file/directory: {why}"));
        })?)
    } else {
        None
    };
    let base = provider::default_provider();
    let (all13, all12): (Vec<_>, Vec<_>) = base
        .cipher_suites
        .iter()
        .copied()
        .partition(|s| matches!(s, SupportedCipherSuite::Tls13(_)));
    let suites12 = match opt(c, "tls-ciphers") {
        None => all12,
        Some(list) => pick(&list, &all12, true).ok_or_else(|| {
            fail(&format!("Failed to configure ciphers: {list}"));
        })?,
    };
    let suites13 = match opt(c, "tls-ciphersuites") {
        None => all13,
        Some(list) => pick(&list, &all13, false).ok_or_else(|| {
            fail(&format!("Failed to configure ciphersuites: {list}"));
        })?,
    };
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites13.into_iter().chain(suites12).collect(),
        ..base
    });
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| fail(&format!("Failed to configure TLS protocols: {e}")))?;
    let builder = match (auth.as_str(), roots) {
        ("no", _) | (_, None) => builder.with_no_client_auth(),
        (mode, Some(roots)) => {
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let v = if mode == "optional" { v.allow_unauthenticated() } else { v };
            let v = v.build().map_err(|e| {
                fail(&format!("Failed to configure CA certificate(s) file/directory: {e}"));
            })?;
            builder.with_client_cert_verifier(v)
        }
    };
    let key = provider.key_provider.load_private_key(key).map_err(|e| {
        fail(&format!("Failed to load private key: {key_file}: {e}"));
    })?;
    let certified = CertifiedKey::new(certs, key);
    // Unknown, or a certificate webpki does not parse (an X.509 v1
    // certificate, as `openssl x509 -req` without extensions makes):
    // OpenSSL serves those, and so do we; the client judges it.
    if let Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) =
        certified.keys_match()
    {
        fail(&format!(
            "Failed to load private key: {key_file}: error:05800074:x509 certificate \
             routines::key values mismatch"
        ));
        return Err(());
    }
    let mut cfg = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    cfg.ignore_client_order = param(c, "tls-prefer-server-ciphers") == "yes";
    if param(c, "tls-session-caching") == "yes" {
        // OpenSSL's size 0 is "no limit".
        let size = param(c, "tls-session-cache-size").parse::<usize>().unwrap_or(20480);
        cfg.session_storage = ServerSessionMemoryCache::new(if size == 0 { 1 << 20 } else { size });
        if let Ok(t) = provider::Ticketer::new() {
            cfg.ticketer = t;
        }
    } else {
        cfg.session_storage = Arc::new(NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
    }
    Ok(Arc::new(cfg))
}

/// A TLS connection over a tokio socket, driven by readiness like the
/// plain one: rustls decrypts into its own buffer, which reads drain.
pub struct TlsStream {
    tcp: TcpStream,
    tls: ServerConnection,
    /// Decrypted bytes rustls holds for us.
    plain: usize,
    /// The peer closed (TCP end of input or close_notify).
    closed: bool,
    /// Served by a busy script's thread: socket calls bypass tokio's
    /// (stale) readiness (`Transport::read_direct`).
    direct: bool,
}

/// `io::Read`/`io::Write` over a tokio socket's non-blocking calls, or
/// (`direct`) over the socket itself.
struct Sock<'a>(&'a TcpStream, bool);

impl Read for Sock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.1 {
            return (&*crate::transport::direct(self.0)).read(buf);
        }
        self.0.try_read(buf)
    }
}

impl Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.1 {
            return (&*crate::transport::direct(self.0)).write(buf);
        }
        self.0.try_write(buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.1 {
            return (&*crate::transport::direct(self.0)).write_vectored(bufs);
        }
        self.0.try_write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a handshake waits for.
enum Wait {
    Read,
    Write,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl TlsStream {
    /// A connection whose handshake has not begun (`None`: rustls
    /// refused, logged as Redis logs a failed accept).
    pub fn new(tcp: TcpStream, cfg: Arc<ServerConfig>) -> Option<TlsStream> {
        match ServerConnection::new(cfg) {
            Ok(tls) => Some(TlsStream { tcp, tls, plain: 0, closed: false, direct: false }),
            Err(e) => {
                log::warning(&format!("Error creating a TLS connection: {e}"));
                None
            }
        }
    }

    /// Drives the handshake from a task: ready once it is done (or has
    /// failed; the caller logs the error as Redis logs a failed accept).
    pub fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let wait = match self.handshake_step() {
                Ok(None) => return Poll::Ready(Ok(())),
                Ok(Some(w)) => w,
                Err(e) => return Poll::Ready(Err(e)),
            };
            let ready = match wait {
                Wait::Write => self.tcp.poll_write_ready(cx),
                Wait::Read => self.tcp.poll_read_ready(cx),
            };
            match ready {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Goes as far into the handshake as the socket allows, through the
    /// socket itself (a busy script's pass, `crate::busy`, where tokio's
    /// readiness is stale): `Ok(true)` once it is done.
    pub fn handshake_direct(&mut self) -> io::Result<bool> {
        self.direct = true;
        let r = self.handshake_step();
        self.direct = false;
        r.map(|w| w.is_none())
    }

    /// One pass of the handshake without waiting: `None` when it is done,
    /// or what it waits for. Records that do not fit the socket once the
    /// handshake is done stay with rustls, and go out with the first
    /// reply.
    fn handshake_step(&mut self) -> io::Result<Option<Wait>> {
        loop {
            match self.write_tls() {
                Ok(()) => {}
                Err(e) if would_block(&e) && self.tls.is_handshaking() => {
                    return Ok(Some(Wait::Write))
                }
                Err(e) if would_block(&e) => return Ok(None),
                Err(e) => return Err(e),
            }
            if !self.tls.is_handshaking() {
                return Ok(None);
            }
            match self.read_tls() {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed during the TLS handshake",
                    ))
                }
                Ok(_) => {}
                Err(e) if would_block(&e) => return Ok(Some(Wait::Read)),
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes the records rustls has ready until the socket is full.
    fn write_tls(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            self.tls.write_tls(&mut Sock(&self.tcp, self.direct))?;
        }
        Ok(())
    }

    /// Reads records from the socket and decrypts them; `Ok(0)` at the
    /// socket's end of input.
    fn read_tls(&mut self) -> io::Result<usize> {
        let n = self.tls.read_tls(&mut Sock(&self.tcp, self.direct))?;
        if n == 0 {
            self.closed = true;
            return Ok(0);
        }
        match self.tls.process_new_packets() {
            Ok(st) => {
                self.plain = st.plaintext_bytes_to_read();
                if st.peer_has_closed() {
                    self.closed = true;
                }
            }
            Err(e) => {
                // The alert rustls queued goes out before the close.
                let _ = self.write_tls();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
        // Key updates and alerts answer at once.
        match self.write_tls() {
            Err(e) if !would_block(&e) => Err(e),
            _ => Ok(n),
        }
    }
}

impl Transport for TlsStream {
    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.tcp.as_raw_fd()
    }

    fn is_local(&self) -> bool {
        crate::transport::tcp_is_local(&self.tcp)
    }

    fn raw_bytes(&self) -> bool {
        false
    }

    fn addrs(&self) -> (String, String) {
        crate::transport::tcp_addrs(&self.tcp)
    }

    fn tune(&self, keepalive_secs: u64) {
        crate::transport::tcp_tune(&self.tcp, keepalive_secs)
    }

    fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        // As many records as the socket has and `buf` has room for: a
        // pipelined batch is read whole, as on plain TCP (rustls reads
        // the socket a few KB at a time).
        let mut total = 0;
        loop {
            if self.plain > 0 {
                let spare = buf.capacity() - buf.len();
                if spare == 0 && total > 0 {
                    return Ok(total);
                }
                let old = buf.len();
                buf.resize(old + spare.max(1).min(self.plain), 0);
                let got = self.tls.reader().read(&mut buf[old..]);
                let n = *got.as_ref().unwrap_or(&0);
                buf.truncate(old + n);
                match got {
                    Ok(0) => self.plain = 0,
                    Ok(n) => {
                        self.plain -= n;
                        total += n;
                        continue;
                    }
                    Err(e) if would_block(&e) => self.plain = 0,
                    Err(e) if total > 0 => {
                        // Reported by the next call.
                        let _ = e;
                        return Ok(total);
                    }
                    Err(e) => return Err(e),
                }
            }
            if self.closed {
                return Ok(total);
            }
            match self.read_tls() {
                Ok(0) => return Ok(total),
                Ok(_) => {}
                // What was read goes first; a hard error comes back on
                // the next call (the socket or rustls's state keeps it).
                Err(_) if total > 0 => return Ok(total),
                Err(e) => return Err(e),
            }
        }
    }

    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // Encrypt only once earlier records are out: rustls's buffer
        // stays small and the socket's readiness drives the writes.
        self.write_tls()?;
        let n = self.tls.writer().write_vectored(bufs)?;
        match self.write_tls() {
            Err(e) if !would_block(&e) => Err(e),
            _ => Ok(n),
        }
    }

    fn pending_out(&self) -> bool {
        self.tls.wants_write()
    }

    fn flush_pending(&mut self) -> io::Result<()> {
        match self.write_tls() {
            Err(e) if !would_block(&e) => Err(e),
            _ => Ok(()),
        }
    }

    fn drained(&self) {}

    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.plain > 0 || self.closed {
            return Poll::Ready(Ok(()));
        }
        self.tcp.poll_read_ready(cx)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tcp.poll_write_ready(cx)
    }

    fn read_direct(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.direct = true;
        let r = self.try_read_buf(buf);
        self.direct = false;
        r
    }

    fn write_direct(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.direct = true;
        let r = self.try_write_vectored(bufs);
        self.direct = false;
        r
    }

    fn flush_direct(&mut self) -> io::Result<()> {
        self.direct = true;
        let r = self.flush_pending();
        self.direct = false;
        r
    }

    fn into_tcp(self) -> Result<TcpStream, Self> {
        Err(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_names_of_rustls_suites() {
        let names: Vec<_> =
            provider::default_provider().cipher_suites.iter().map(|s| openssl_name(*s)).collect();
        for n in [
            "TLS_AES_256_GCM_SHA384",
            "TLS_AES_128_GCM_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256",
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "ECDHE-RSA-AES128-GCM-SHA256",
            "ECDHE-RSA-CHACHA20-POLY1305",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
        }
    }

    #[test]
    fn cipher_lists() {
        let p = provider::default_provider();
        let (t13, t12): (Vec<_>, Vec<_>) = p
            .cipher_suites
            .iter()
            .copied()
            .partition(|s| matches!(s, SupportedCipherSuite::Tls13(_)));
        assert_eq!(pick("BOGUS", &t12, true), None);
        assert_eq!(pick("DEFAULT", &t12, true).unwrap().len(), t12.len());
        let one = pick("ECDHE-RSA-AES256-GCM-SHA384:!aNULL", &t12, true).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(pick("TLS_AES_128_GCM_SHA256", &t13, false).unwrap().len(), 1);
        assert_eq!(pick("DEFAULT", &t13, false), None);
    }

    #[test]
    fn protocol_lists() {
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("tlsv1.2 TLSv1.3").unwrap().len(), 2);
        assert!(protocols("TLSv9").is_none());
        assert!(protocols("TLSv1").is_none());
    }
}
