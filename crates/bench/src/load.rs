//! The load generator: client connections spread over OS threads (one
//! current-thread tokio runtime each), each sending batches of `pipeline`
//! requests and timing every reply from its batch's write, as
//! redis-benchmark does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Config, Connection};

/// What one request looks like.
#[derive(Clone)]
pub enum Workload {
    /// Fixed request bytes; `rand` are offsets of 12-digit `__rand_int__`
    /// placeholders, rewritten per request when a keyspace is set.
    Fixed { bytes: Vec<u8>, rand: Vec<usize>, extra: Extra },
    /// GET or SET of `key:<rand>`, GET with probability `get_pct`/100.
    Mix { get_pct: u32, value: Vec<u8> },
}

pub(crate) const PLACEHOLDER: &[u8] = b"__rand_int__";

/// What a fixed request carries besides itself (the durability
/// scenario's modes, `crate::durable`).
#[derive(Clone, Default)]
pub struct Extra {
    /// Replies to each request beyond its first (a `WAIT` after it).
    pub more_replies: usize,
    /// Sent once after each batch's requests (`WAIT` once per batch),
    /// answered with one reply that is not counted as a request.
    pub tail: Vec<u8>,
    /// Sent once when a connection opens, its reply awaited (`DURABLE`).
    pub setup: Vec<u8>,
}

impl Workload {
    /// A request from its arguments, noting the placeholders.
    pub fn command(args: &[&[u8]]) -> Workload {
        let mut bytes = Vec::new();
        resp::write_command(&mut bytes, args);
        let rand = find_all(&bytes, PLACEHOLDER);
        Workload::Fixed { bytes, rand, extra: Extra::default() }
    }

    /// A request made of several commands sent together (`SET` then
    /// `WAIT`), noting the placeholders; each command beyond the first
    /// adds a reply per request.
    pub fn commands(cmds: &[&[&[u8]]]) -> Workload {
        let mut bytes = Vec::new();
        for c in cmds {
            resp::write_command(&mut bytes, c);
        }
        let rand = find_all(&bytes, PLACEHOLDER);
        let extra = Extra { more_replies: cmds.len().saturating_sub(1), ..Extra::default() };
        Workload::Fixed { bytes, rand, extra }
    }

    /// Already-encoded bytes (inline PING).
    pub fn raw(bytes: &[u8]) -> Workload {
        Workload::Fixed { bytes: bytes.to_vec(), rand: Vec::new(), extra: Extra::default() }
    }

    /// This workload with `extra` (a request made of several commands,
    /// a batch's tail, a connection's setup).
    pub fn with(self, extra: Extra) -> Workload {
        match self {
            Workload::Fixed { bytes, rand, .. } => Workload::Fixed { bytes, rand, extra },
            other => other,
        }
    }
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    (0..hay.len().saturating_sub(needle.len() - 1))
        .filter(|&i| &hay[i..i + needle.len()] == needle)
        .collect()
}

/// How to run one measurement.
#[derive(Clone)]
pub struct Plan {
    pub addr: SocketAddr,
    pub password: Option<String>,
    pub db: i64,
    pub clients: usize,
    pub requests: u64,
    pub pipeline: usize,
    pub threads: usize,
    /// `-r`: keys drawn from 0..keyspace.
    pub keyspace: Option<u64>,
    /// Stop early after this long (sweeps at high round-trip times).
    pub max_time: Option<Duration>,
}

/// What one measurement gave.
pub struct Outcome {
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// Per-request latencies in microseconds, sorted.
    pub lat_us: Vec<u32>,
}

impl Outcome {
    pub fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Percentile `p` (0..=100) in milliseconds.
    pub fn pct_ms(&self, p: f64) -> f64 {
        if self.lat_us.is_empty() {
            return 0.0;
        }
        let i = ((p / 100.0) * self.lat_us.len() as f64).ceil() as usize;
        self.lat_us[i.clamp(1, self.lat_us.len()) - 1] as f64 / 1000.0
    }

    pub fn avg_ms(&self) -> f64 {
        if self.lat_us.is_empty() {
            return 0.0;
        }
        self.lat_us.iter().map(|&v| v as f64).sum::<f64>() / self.lat_us.len() as f64 / 1000.0
    }

    pub fn min_ms(&self) -> f64 {
        self.lat_us.first().map_or(0.0, |&v| v as f64 / 1000.0)
    }

    pub fn max_ms(&self) -> f64 {
        self.lat_us.last().map_or(0.0, |&v| v as f64 / 1000.0)
    }
}

/// Shared progress, for the live bar.
#[derive(Default)]
pub struct Progress {
    pub done: AtomicU64,
}

/// Runs `plan` with `work`; errors only when no connection could be made.
pub fn run(plan: &Plan, work: &Workload, progress: &Arc<Progress>) -> Result<Outcome, String> {
    let claimed = Arc::new(AtomicU64::new(0));
    let threads = plan.threads.clamp(1, plan.clients.max(1));
    let start = Instant::now();
    let deadline = plan.max_time.map(|d| start + d);
    let mut handles = Vec::new();
    for t in 0..threads {
        let n_clients = plan.clients / threads + usize::from(t < plan.clients % threads);
        let (plan, work, claimed, progress) =
            (plan.clone(), work.clone(), claimed.clone(), progress.clone());
        handles.push(std::thread::spawn(move || -> Result<(Vec<u32>, u64), String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async move {
                let mut tasks = Vec::new();
                for c in 0..n_clients {
                    let seed = (t * 7919 + c * 104729 + 1) as u64;
                    let (plan, work, claimed, progress) =
                        (plan.clone(), work.clone(), claimed.clone(), progress.clone());
                    tasks.push(tokio::spawn(async move {
                        client_loop(&plan, &work, &claimed, &progress, deadline, seed).await
                    }));
                }
                let mut lat = Vec::new();
                let mut errors = 0;
                for h in tasks {
                    let (l, e) = h.await.map_err(|e| e.to_string())??;
                    lat.extend(l);
                    errors += e;
                }
                Ok((lat, errors))
            })
        }));
    }
    let mut lat_us = Vec::new();
    let mut errors = 0;
    for h in handles {
        let (l, e) = h.join().map_err(|_| "load thread panicked".to_string())??;
        lat_us.extend(l);
        errors += e;
    }
    let elapsed = start.elapsed();
    lat_us.sort_unstable();
    Ok(Outcome { requests: lat_us.len() as u64, errors, elapsed, lat_us })
}

pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        // xorshift64*: cheap and good enough to spread keys.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

pub(crate) fn put_digits(dst: &mut [u8], mut v: u64) {
    for d in dst.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

async fn client_loop(
    plan: &Plan,
    work: &Workload,
    claimed: &AtomicU64,
    progress: &Progress,
    deadline: Option<Instant>,
    seed: u64,
) -> Result<(Vec<u32>, u64), String> {
    let mut cfg = Config::new(&plan.addr.ip().to_string(), plan.addr.port());
    cfg.password = plan.password.clone();
    cfg.db = plan.db;
    let mut conn = Connection::connect(&cfg).await.map_err(|e| format!("connect: {e}"))?;
    let none = Extra::default();
    let extra = match work {
        Workload::Fixed { extra, .. } => extra,
        Workload::Mix { .. } => &none,
    };
    if !extra.setup.is_empty() {
        conn.send_raw(&extra.setup).await.map_err(|e| e.to_string())?;
        if conn.skip_replies(1).await.map_err(|e| e.to_string())? > 0 {
            return Err("the connection's setup command failed".into());
        }
    }
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let p = plan.pipeline.max(1);
    // The batch: the request repeated `p` times (Fixed), rebuilt per batch
    // only where random keys or the mix require it.
    let (mut batch, per, rand) = match work {
        Workload::Fixed { bytes, rand, .. } => {
            let mut b = Vec::with_capacity(bytes.len() * p);
            let mut offs = Vec::new();
            for i in 0..p {
                offs.extend(rand.iter().map(|o| o + i * bytes.len()));
                b.extend_from_slice(bytes);
            }
            (b, bytes.len(), offs)
        }
        Workload::Mix { .. } => (Vec::new(), 0, Vec::new()),
    };
    let mut with_tail = Vec::new();
    let mut lat = Vec::new();
    let mut errors = 0;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let first = claimed.fetch_add(p as u64, Ordering::Relaxed);
        if first >= plan.requests {
            break;
        }
        let k = (plan.requests - first).min(p as u64) as usize;
        let bytes: &[u8] = match work {
            Workload::Fixed { .. } => {
                if let Some(space) = plan.keyspace {
                    for &o in &rand {
                        put_digits(&mut batch[o..o + 12], rng.next() % space.max(1));
                    }
                }
                if extra.tail.is_empty() {
                    &batch[..per * k]
                } else {
                    // The tail goes after this batch's requests.
                    with_tail.clear();
                    with_tail.extend_from_slice(&batch[..per * k]);
                    with_tail.extend_from_slice(&extra.tail);
                    &with_tail
                }
            }
            Workload::Mix { get_pct, value } => {
                batch.clear();
                let space = plan.keyspace.unwrap_or(1);
                for _ in 0..k {
                    let mut key = *b"key:000000000000";
                    put_digits(&mut key[4..], rng.next() % space.max(1));
                    if (rng.next() % 100) < *get_pct as u64 {
                        resp::write_command(&mut batch, &[b"GET".as_slice(), &key]);
                    } else {
                        resp::write_command(&mut batch, &[b"SET".as_slice(), &key, value]);
                    }
                }
                &batch
            }
        };
        let t0 = Instant::now();
        conn.send_raw(bytes).await.map_err(|e| e.to_string())?;
        let each = 1 + extra.more_replies;
        for _ in 0..k {
            errors += conn.skip_replies(each).await.map_err(|e| e.to_string())? as u64;
            lat.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
        }
        if !extra.tail.is_empty() {
            errors += conn.skip_replies(1).await.map_err(|e| e.to_string())? as u64;
            // The requests' latency includes the wait the tail adds.
            let end = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
            let n = lat.len();
            for l in &mut lat[n - k..] {
                *l = end;
            }
        }
        progress.done.fetch_add(k as u64, Ordering::Relaxed);
    }
    Ok((lat, errors))
}
