//! Auto-pipelining: many tasks, one socket, one write per event-loop turn.
//!
//! Callers hand encoded requests to a writer task through a channel. The
//! writer wakes on the first request, yields once so that every task made
//! ready in the same turn can enqueue too, then drains the channel into one
//! buffer and writes it with one call. The reply slots go, in the same
//! order, to a reader task that parses replies and completes them in turn.
//! That gives the throughput of a pipeline to code written one request at a
//! time, without a connection or thread per caller.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resp::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use crate::conn::{int, limit, opt_bytes, Config, Connection};
use crate::error::{Error, Result};

type Slot = oneshot::Sender<Result<Frame>>;

struct Req {
    bytes: Vec<u8>,
    reply: Slot,
}

/// Counters of the shared connection: how many commands went out in how
/// many writes (their ratio is the achieved pipeline depth).
#[derive(Debug, Default)]
pub struct AutoStats {
    pub commands: AtomicU64,
    pub writes: AtomicU64,
}

/// A cloneable handle to one auto-pipelined connection. Must be created
/// inside a tokio runtime; its tasks end when every handle is dropped.
#[derive(Clone)]
pub struct AutoClient {
    tx: mpsc::UnboundedSender<Req>,
    stats: Arc<AutoStats>,
    timeout: Option<Duration>,
}

impl AutoClient {
    /// Connects (with the same handshake as [`Connection::connect`]) and
    /// starts the writer and reader tasks.
    pub async fn connect(cfg: &Config) -> Result<AutoClient> {
        let conn = Connection::connect(cfg).await?;
        let (stream, rest) = conn.into_parts();
        let (rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        let (slots_tx, slots_rx) = mpsc::unbounded_channel();
        let stats = Arc::new(AutoStats::default());
        tokio::spawn(writer(wr, rx, slots_tx, stats.clone()));
        tokio::spawn(reader(rd, rest, slots_rx));
        Ok(AutoClient { tx, stats, timeout: cfg.timeout })
    }

    /// Sends one command (coalesced with whatever other tasks send in the
    /// same turn) and waits for its reply; an error reply is
    /// `Err(Error::Server)`.
    pub async fn cmd<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Frame> {
        let mut bytes = Vec::with_capacity(64);
        resp::write_command(&mut bytes, args);
        let (reply, rx) = oneshot::channel();
        self.tx.send(Req { bytes, reply }).map_err(|_| Error::Closed)?;
        let f = limit(self.timeout, async { rx.await.map_err(|_| Error::Closed)? }).await?;
        match f {
            Frame::Error(e) => Err(Error::Server(String::from_utf8_lossy(&e).into_owned())),
            f => Ok(f),
        }
    }

    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        opt_bytes(self.cmd(&[b"GET".as_slice(), key.as_ref()]).await?)
    }

    pub async fn set(&self, key: impl AsRef<[u8]>, val: impl AsRef<[u8]>) -> Result<()> {
        self.cmd(&[b"SET".as_slice(), key.as_ref(), val.as_ref()]).await.map(drop)
    }

    pub async fn incr(&self, key: impl AsRef<[u8]>) -> Result<i64> {
        int(self.cmd(&[b"INCR".as_slice(), key.as_ref()]).await?)
    }

    pub async fn ping(&self) -> Result<()> {
        self.cmd(&["PING"]).await.map(drop)
    }

    /// Counters since connect.
    pub fn stats(&self) -> &AutoStats {
        &self.stats
    }
}

async fn writer(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Req>,
    slots: mpsc::UnboundedSender<Vec<Slot>>,
    stats: Arc<AutoStats>,
) {
    let mut buf = Vec::with_capacity(16 * 1024);
    while let Some(first) = rx.recv().await {
        // Let the other tasks woken in this turn enqueue before we write.
        tokio::task::yield_now().await;
        buf.clear();
        let mut batch = Vec::with_capacity(8);
        buf.extend_from_slice(&first.bytes);
        batch.push(first.reply);
        while let Ok(r) = rx.try_recv() {
            buf.extend_from_slice(&r.bytes);
            batch.push(r.reply);
        }
        stats.commands.fetch_add(batch.len() as u64, Ordering::Relaxed);
        stats.writes.fetch_add(1, Ordering::Relaxed);
        // Slots first: the reader must know who waits before replies come.
        if let Err(mpsc::error::SendError(batch)) = slots.send(batch) {
            fail(batch);
            break;
        }
        if wr.write_all(&buf).await.is_err() {
            // The reader sees the socket fail too and fails the slots.
            break;
        }
    }
    // Fail whatever is still queued.
    rx.close();
    while let Ok(r) = rx.try_recv() {
        let _ = r.reply.send(Err(Error::Closed));
    }
}

fn fail(batch: Vec<Slot>) {
    for s in batch {
        let _ = s.send(Err(Error::Closed));
    }
}

async fn reader(
    mut rd: OwnedReadHalf,
    mut buf: Vec<u8>,
    mut slots: mpsc::UnboundedReceiver<Vec<Slot>>,
) {
    let mut waiting: VecDeque<Slot> = VecDeque::new();
    let mut pos = 0;
    'outer: loop {
        // Deliver every complete reply in the buffer.
        loop {
            match resp::parse_frame(&buf[pos..]) {
                Ok(Some((f, used))) => {
                    pos += used;
                    if matches!(f, Frame::Push(_)) {
                        continue; // out-of-band RESP3 message: no request waits for it
                    }
                    if waiting.is_empty() {
                        match slots.recv().await {
                            Some(b) => waiting.extend(b),
                            None => break 'outer,
                        }
                    }
                    if let Some(s) = waiting.pop_front() {
                        let _ = s.send(Ok(f));
                    }
                }
                Ok(None) => break,
                Err(_) => break 'outer,
            }
        }
        buf.drain(..pos);
        pos = 0;
        let len = buf.len();
        buf.resize(len + 16 * 1024, 0);
        match rd.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.truncate(len + n),
        }
    }
    fail(waiting.drain(..).collect());
    slots.close();
    while let Ok(b) = slots.try_recv() {
        fail(b);
    }
}
