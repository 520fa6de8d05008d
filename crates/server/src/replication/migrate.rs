//! MIGRATE's network side ([`engine::subsystems::migrate::Migrator`]): one
//! cached connection per `host:port`, as Redis's `migrateGetSocket` —
//! at most 64, each closed after 10 s unused (Redis's
//! `MIGRATE_SOCKET_CACHE_ITEMS` and `_TTL`), each remembering the database
//! it last selected so that SELECT is sent only when it changes.
//!
//! Blocking I/O on the calling thread, every connect, write and read
//! bounded by MIGRATE's timeout. A connection in use is taken out of the
//! cache, so two threads never share one (a second MIGRATE to the same
//! target meanwhile opens its own).

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use engine::subsystems::migrate::{Failure, Migrator, Transfer, Transferred};
use parking_lot::Mutex;

const CACHE_ITEMS: usize = 64;
const CACHE_TTL: Duration = Duration::from_secs(10);

struct Cached {
    conn: BufReader<TcpStream>,
    /// The database selected on it, or -1 (unknown: SELECT first).
    last_db: i64,
    last_use: Instant,
}

/// The connection cache.
#[derive(Default)]
pub struct Net {
    cache: Mutex<HashMap<Vec<u8>, Cached>>,
}

/// MIGRATE's network side of a server being built.
pub fn new() -> Arc<Net> {
    Arc::new(Net::default())
}

/// The thread that closes idle cached connections (Redis's
/// `migrateCloseTimedoutSockets`, once a second).
pub fn start_cron(net: &Arc<Net>) {
    let weak: Weak<Net> = Arc::downgrade(net);
    let _ = engine::subsystems::log::spawn("migrate-cache", move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let Some(net) = weak.upgrade() else { return };
        net.cache.lock().retain(|_, c| c.last_use.elapsed() <= CACHE_TTL);
    });
}

/// `atoi`: leading digits, else 0 (Redis reads the port so).
fn atoi(b: &[u8]) -> u16 {
    let s = std::str::from_utf8(b).unwrap_or("").trim_start();
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<u32>().ok().and_then(|p| u16::try_from(p).ok()).unwrap_or(0)
}

fn connect(host: &[u8], port: &[u8], timeout: Duration) -> io::Result<TcpStream> {
    let host = std::str::from_utf8(host).map_err(|_| io::ErrorKind::InvalidInput)?;
    let port = atoi(port);
    let mut last = io::Error::from(io::ErrorKind::AddrNotAvailable);
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// One reply line without its CRLF (Redis's `connSyncReadLine`).
fn read_line(r: &mut BufReader<TcpStream>) -> Result<Vec<u8>, io::Error> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line)?;
    if n == 0 || line.last() != Some(&b'\n') {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// How one attempt ended.
enum Attempt {
    Done(Transferred),
    /// A failure Redis retries once on a new connection.
    Retry(Transferred),
}

impl Net {
    fn take(&self, name: &[u8]) -> Option<Cached> {
        let mut cache = self.cache.lock();
        let c = cache.remove(name)?;
        // An expired one is closed, as Redis's cron would have.
        (c.last_use.elapsed() <= CACHE_TTL).then_some(c)
    }

    fn put(&self, name: Vec<u8>, c: Cached) {
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_ITEMS && !cache.contains_key(&name) {
            // Redis drops one at random; any one will do.
            if let Some(k) = cache.keys().next().cloned() {
                cache.remove(&k);
            }
        }
        cache.insert(name, c);
    }

    fn attempt(&self, t: &Transfer<'_>, name: &[u8], may_retry: bool) -> Attempt {
        let timeout = Duration::from_millis(t.timeout_ms.max(1));
        let mut got = Transferred::default();
        let mut c = match self.take(name) {
            Some(c) => c,
            None => match connect(t.host, t.port, timeout) {
                Ok(s) => Cached { conn: BufReader::new(s), last_db: -1, last_use: Instant::now() },
                // Redis connects without blocking and waits until the
                // socket is writable, which a refused connection is: its
                // failure shows when it writes (and it retries once).
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    got.failure = Some(Failure::Write);
                    return if may_retry { Attempt::Retry(got) } else { Attempt::Done(got) };
                }
                Err(_) => {
                    got.failure = Some(Failure::Connect);
                    return Attempt::Done(got);
                }
            },
        };
        c.last_use = Instant::now();
        // This call's timeout, on a cached connection too.
        let sock = c.conn.get_ref();
        if sock.set_read_timeout(Some(timeout)).and(sock.set_write_timeout(Some(timeout))).is_err()
        {
            got.failure = Some(Failure::Write);
            return if may_retry { Attempt::Retry(got) } else { Attempt::Done(got) };
        }
        let mut cmd = Vec::new();
        if let Some((user, pass)) = t.auth {
            match user {
                Some(u) => resp::write_command(&mut cmd, &[b"AUTH", u, pass]),
                None => resp::write_command(&mut cmd, &[b"AUTH", pass]),
            }
        }
        let select = c.last_db != t.db;
        if select {
            resp::write_command(&mut cmd, &[b"SELECT", t.db.to_string().as_bytes()]);
        }
        for it in t.items {
            let ttl = it.ttl.to_string();
            let name: &[u8] = if t.asking { b"RESTORE-ASKING" } else { b"RESTORE" };
            let argv: [&[u8]; 5] = [name, it.key, ttl.as_bytes(), &it.payload, b"REPLACE"];
            resp::write_command(&mut cmd, &argv[..if t.replace { 5 } else { 4 }]);
        }
        // In 64 KiB pieces, each within the timeout, as Redis writes.
        let sock = c.conn.get_mut();
        let mut write_err = None;
        for chunk in cmd.chunks(64 * 1024) {
            if let Err(e) = sock.write_all(chunk) {
                write_err = Some(e);
                break;
            }
        }
        if let Some(e) = write_err {
            got.failure = Some(Failure::Write);
            return if may_retry && !timed_out(&e) {
                Attempt::Retry(got)
            } else {
                Attempt::Done(got)
            };
        }
        let early = |got: Transferred, e: io::Error| {
            let mut got = got;
            got.failure = Some(Failure::Read);
            if may_retry && !timed_out(&e) {
                Attempt::Retry(got)
            } else {
                Attempt::Done(got)
            }
        };
        if t.auth.is_some() {
            match read_line(&mut c.conn) {
                Ok(l) => got.auth = Some(l),
                Err(e) => return early(got, e),
            }
        }
        if select {
            match read_line(&mut c.conn) {
                Ok(l) => got.select = Some(l),
                Err(e) => return early(got, e),
            }
        }
        let mut socket_error = None;
        for _ in t.items {
            match read_line(&mut c.conn) {
                Ok(l) => got.restores.push(l),
                Err(e) => {
                    socket_error = Some(e);
                    break;
                }
            }
        }
        let target_error = [&got.auth, &got.select]
            .iter()
            .any(|l| l.as_ref().is_some_and(|l| l.first() == Some(&b'-')))
            || got.restores.iter().any(|l| l.first() == Some(&b'-'));
        if let Some(e) = socket_error {
            got.failure = Some(Failure::Read);
            // Retried only when nothing was processed (no reply read).
            let retry = !target_error && got.restores.is_empty() && may_retry && !timed_out(&e);
            return if retry { Attempt::Retry(got) } else { Attempt::Done(got) };
        }
        // On an error the database selected is no longer known.
        c.last_db = if target_error { -1 } else { t.db };
        self.put(name.to_vec(), c);
        Attempt::Done(got)
    }
}

impl Migrator for Net {
    fn cached_sockets(&self) -> usize {
        self.cache.lock().len()
    }

    fn transfer(&self, t: &Transfer<'_>) -> Transferred {
        let mut name = t.host.to_vec();
        name.push(b':');
        name.extend_from_slice(t.port);
        match self.attempt(t, &name, true) {
            Attempt::Done(got) => got,
            // The failed connection was dropped (not put back).
            Attempt::Retry(_) => match self.attempt(t, &name, false) {
                Attempt::Done(got) | Attempt::Retry(got) => got,
            },
        }
    }
}
