//! One connection: handshake, single commands, pipelines and typed helpers.

use std::future::Future;
use std::time::Duration;

use resp::{Frame, Proto};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, Result};
use crate::pipeline::{Pipeline, Reply};
use crate::scan::reply_len;

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct Config {
    pub host: String,
    pub port: u16,
    /// ACL user for AUTH/HELLO (`None`: the default user).
    pub username: Option<String>,
    pub password: Option<String>,
    /// Database to SELECT after connecting (0: no SELECT).
    pub db: i64,
    /// Switch to RESP3 with `HELLO 3`.
    pub resp3: bool,
    pub connect_timeout: Option<Duration>,
    /// Limit for each command's round trip.
    pub timeout: Option<Duration>,
}

impl Config {
    pub fn new(host: &str, port: u16) -> Self {
        Config {
            host: host.to_string(),
            port,
            username: None,
            password: None,
            db: 0,
            resp3: false,
            connect_timeout: Some(Duration::from_secs(10)),
            timeout: None,
        }
    }
}

pub(crate) async fn limit<T>(d: Option<Duration>, f: impl Future<Output = Result<T>>) -> Result<T> {
    match d {
        None => f.await,
        Some(d) => tokio::time::timeout(d, f).await.map_err(|_| Error::Timeout)?,
    }
}

/// A connection to one server.
pub struct Connection {
    stream: TcpStream,
    rbuf: Vec<u8>,
    /// Bytes of `rbuf` already consumed.
    rpos: usize,
    wbuf: Vec<u8>,
    timeout: Option<Duration>,
    proto: Proto,
    broken: bool,
}

impl Connection {
    /// Connects and runs the handshake: `HELLO 3 [AUTH u p]` for RESP3,
    /// else `AUTH` when a password is set; then `SELECT` when `db != 0`.
    pub async fn connect(cfg: &Config) -> Result<Connection> {
        let addr = (cfg.host.as_str(), cfg.port);
        let stream =
            limit(cfg.connect_timeout, async { Ok(TcpStream::connect(addr).await?) }).await?;
        stream.set_nodelay(true)?;
        let mut c = Connection {
            stream,
            rbuf: Vec::with_capacity(16 * 1024),
            rpos: 0,
            wbuf: Vec::with_capacity(1024),
            timeout: cfg.timeout.or(cfg.connect_timeout),
            proto: Proto::Resp2,
            broken: false,
        };
        let user = cfg.username.as_deref().unwrap_or("default");
        if cfg.resp3 {
            let mut args = vec!["HELLO", "3"];
            if let Some(p) = cfg.password.as_deref() {
                args.extend(["AUTH", user, p]);
            }
            c.cmd(&args).await?;
            c.proto = Proto::Resp3;
        } else if let Some(p) = cfg.password.as_deref() {
            match cfg.username.as_deref() {
                Some(u) => c.cmd(&["AUTH", u, p]).await?,
                None => c.cmd(&["AUTH", p]).await?,
            };
        }
        if cfg.db != 0 {
            c.cmd(&["SELECT", &cfg.db.to_string()]).await?;
        }
        c.timeout = cfg.timeout;
        Ok(c)
    }

    /// The protocol negotiated at connect time.
    pub fn proto(&self) -> Proto {
        self.proto
    }

    /// Sends one command and returns its reply; an error reply is
    /// `Err(Error::Server)`.
    pub async fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Frame> {
        self.wbuf.clear();
        resp::write_command(&mut self.wbuf, args);
        let t = self.timeout;
        let f = limit(t, async {
            let w = std::mem::take(&mut self.wbuf);
            let r = self.write_all(&w).await;
            self.wbuf = w;
            r?;
            self.read_frame().await
        })
        .await;
        match self.fail_on_transport(f)? {
            Frame::Error(e) => Err(Error::Server(String::from_utf8_lossy(&e).into_owned())),
            f => Ok(f),
        }
    }

    /// Sends all queued commands in one write and reads every reply, in
    /// order. A command's error reply is `Err(text)` in its slot; only a
    /// transport failure fails the whole call.
    pub async fn exec(&mut self, p: &Pipeline) -> Result<Vec<Reply>> {
        let t = self.timeout;
        let f = limit(t, async {
            self.write_all(&p.buf).await?;
            let mut out = Vec::with_capacity(p.n);
            for _ in 0..p.n {
                out.push(match self.read_frame().await? {
                    Frame::Error(e) => Err(String::from_utf8_lossy(&e).into_owned()),
                    f => Ok(f),
                });
            }
            Ok(out)
        })
        .await;
        self.fail_on_transport(f)
    }

    /// Writes already-encoded requests as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        let r = self.write_all(bytes).await;
        self.fail_on_transport(r)
    }

    /// Reads and discards `n` replies without building them; returns how
    /// many were error replies. For load generators.
    pub async fn skip_replies(&mut self, mut n: usize) -> Result<usize> {
        let mut errors = 0;
        while n > 0 {
            match reply_len(&self.rbuf[self.rpos..]) {
                Ok(Some((len, is_err))) => {
                    self.rpos += len;
                    errors += is_err as usize;
                    n -= 1;
                }
                Ok(None) => {
                    let r = self.fill().await;
                    self.fail_on_transport(r)?;
                }
                Err(e) => return self.fail_on_transport(Err(e)),
            }
        }
        Ok(errors)
    }

    /// Reads the next reply as it is (error replies included).
    pub async fn read_frame(&mut self) -> Result<Frame> {
        loop {
            match resp::parse_frame(&self.rbuf[self.rpos..]) {
                Ok(Some((f, used))) => {
                    self.rpos += used;
                    return Ok(f);
                }
                Ok(None) => self.fill().await?,
                Err(e) => {
                    self.broken = true;
                    return Err(e.into());
                }
            }
        }
    }

    async fn write_all(&mut self, b: &[u8]) -> Result<()> {
        if self.broken {
            return Err(Error::Closed);
        }
        self.stream.write_all(b).await?;
        Ok(())
    }

    async fn fill(&mut self) -> Result<()> {
        if self.broken {
            return Err(Error::Closed);
        }
        if self.rpos > 0 {
            // Keep the unread tail at the front so the buffer stays bounded.
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
        }
        let len = self.rbuf.len();
        if self.rbuf.capacity() - len < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        let cap = self.rbuf.capacity();
        self.rbuf.resize(cap, 0);
        let n = self.stream.read(&mut self.rbuf[len..]).await;
        match n {
            Ok(0) => {
                self.rbuf.truncate(len);
                self.broken = true;
                Err(Error::Closed)
            }
            Ok(n) => {
                self.rbuf.truncate(len + n);
                Ok(())
            }
            Err(e) => {
                self.rbuf.truncate(len);
                self.broken = true;
                Err(e.into())
            }
        }
    }

    /// A transport failure or timeout leaves replies in flight whose order
    /// we can no longer trust: the connection is unusable afterwards.
    fn fail_on_transport<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if !e.is_server() {
                self.broken = true;
            }
        }
        r
    }

    pub(crate) fn into_parts(self) -> (TcpStream, Vec<u8>) {
        let rest = self.rbuf[self.rpos..].to_vec();
        (self.stream, rest)
    }

    // Typed helpers for the common commands.

    pub async fn ping(&mut self) -> Result<()> {
        self.cmd(&["PING"]).await.map(drop)
    }

    pub async fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        opt_bytes(self.cmd(&[b"GET".as_slice(), key.as_ref()]).await?)
    }

    pub async fn set(&mut self, key: impl AsRef<[u8]>, val: impl AsRef<[u8]>) -> Result<()> {
        self.cmd(&[b"SET".as_slice(), key.as_ref(), val.as_ref()]).await.map(drop)
    }

    pub async fn del<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<i64> {
        let mut a: Vec<&[u8]> = vec![b"DEL"];
        a.extend(keys.iter().map(|k| k.as_ref()));
        int(self.cmd(&a).await?)
    }

    pub async fn exists<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<i64> {
        let mut a: Vec<&[u8]> = vec![b"EXISTS"];
        a.extend(keys.iter().map(|k| k.as_ref()));
        int(self.cmd(&a).await?)
    }

    pub async fn incr(&mut self, key: impl AsRef<[u8]>) -> Result<i64> {
        int(self.cmd(&[b"INCR".as_slice(), key.as_ref()]).await?)
    }

    pub async fn incr_by(&mut self, key: impl AsRef<[u8]>, by: i64) -> Result<i64> {
        let by = by.to_string();
        int(self.cmd(&[b"INCRBY".as_slice(), key.as_ref(), by.as_bytes()]).await?)
    }

    pub async fn expire(&mut self, key: impl AsRef<[u8]>, secs: i64) -> Result<bool> {
        let s = secs.to_string();
        Ok(int(self.cmd(&[b"EXPIRE".as_slice(), key.as_ref(), s.as_bytes()]).await?)? == 1)
    }

    pub async fn ttl(&mut self, key: impl AsRef<[u8]>) -> Result<i64> {
        int(self.cmd(&[b"TTL".as_slice(), key.as_ref()]).await?)
    }

    pub async fn mget<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut a: Vec<&[u8]> = vec![b"MGET"];
        a.extend(keys.iter().map(|k| k.as_ref()));
        items(self.cmd(&a).await?)?.into_iter().map(opt_bytes).collect()
    }

    pub async fn mset<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, kv: &[(K, V)]) -> Result<()> {
        let mut a: Vec<&[u8]> = vec![b"MSET"];
        for (k, v) in kv {
            a.push(k.as_ref());
            a.push(v.as_ref());
        }
        self.cmd(&a).await.map(drop)
    }

    pub async fn keys(&mut self, pattern: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        let f = self.cmd(&[b"KEYS".as_slice(), pattern.as_ref()]).await?;
        items(f)?
            .into_iter()
            .map(|f| opt_bytes(f)?.ok_or_else(|| Error::Protocol("nil key".into())))
            .collect()
    }

    pub async fn dbsize(&mut self) -> Result<i64> {
        int(self.cmd(&["DBSIZE"]).await?)
    }

    pub async fn flushdb(&mut self) -> Result<()> {
        self.cmd(&["FLUSHDB"]).await.map(drop)
    }

    pub async fn select(&mut self, db: i64) -> Result<()> {
        self.cmd(&["SELECT", &db.to_string()]).await.map(drop)
    }

    /// `INFO [section]` as text.
    pub async fn info(&mut self, section: Option<&str>) -> Result<String> {
        let f = match section {
            Some(s) => self.cmd(&["INFO", s]).await?,
            None => self.cmd(&["INFO"]).await?,
        };
        match opt_bytes(f)? {
            Some(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            None => Err(Error::Protocol("nil INFO".into())),
        }
    }
}

/// A string reply (bulk, simple or verbatim) or nil.
pub(crate) fn opt_bytes(f: Frame) -> Result<Option<Vec<u8>>> {
    match f {
        Frame::Bulk(b) => Ok(b),
        Frame::Simple(b) => Ok(Some(b)),
        Frame::Verbatim(_, b) => Ok(Some(b)),
        Frame::Null => Ok(None),
        Frame::Error(e) => Err(Error::Server(String::from_utf8_lossy(&e).into_owned())),
        other => Err(Error::Protocol(format!("expected a string reply, got {other:?}"))),
    }
}

pub(crate) fn int(f: Frame) -> Result<i64> {
    match f {
        Frame::Integer(i) => Ok(i),
        other => Err(Error::Protocol(format!("expected an integer reply, got {other:?}"))),
    }
}

fn items(f: Frame) -> Result<Vec<Frame>> {
    match f {
        Frame::Array(Some(v)) | Frame::Set(v) => Ok(v),
        Frame::Array(None) | Frame::Null => Ok(Vec::new()),
        other => Err(Error::Protocol(format!("expected an array reply, got {other:?}"))),
    }
}
