//! `--scenario jobs`: the job queue against what one would build on Redis.
//!
//! On a server with the job queue (Sluice), a producer phase sends
//! `ADDJOB bench:jobs <body> 0` and a consumer phase `GETJOB TIMEOUT 1000
//! FROM bench:jobs` then `ACKJOB <id>` per job; on one without (Redis),
//! the reliable-queue pattern: `LPUSH bench:q <body>`, then `BLMOVE
//! bench:q bench:processing RIGHT LEFT 1` and `LREM bench:processing 1
//! <body>` on completion. Each of `-c` connections sends its share of the
//! `-n` jobs in pipelines of `P` (`--pipeline 1,16`), over `--threads`
//! threads. Bodies are `-d` bytes (100 unless given), unique per job.
//! Also prints `used_memory` per queued job. `--compare host:port` runs
//! the same against a second server; bench/jobs runs both pinned.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use client::{Config, Connection, Pipeline};
use resp::Frame;

use crate::sweep::targets;
use crate::Opts;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// ADDJOB / GETJOB / ACKJOB.
    Jobs,
    /// LPUSH / BLMOVE / LREM.
    Lists,
}

fn es(e: client::Error) -> String {
    e.to_string()
}

fn cfg(o: &Opts, a: SocketAddr) -> Config {
    let mut c = Config::new(&a.ip().to_string(), a.port());
    c.password = o.password.clone();
    c.db = o.db;
    c
}

fn rt() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())
}

fn body(i: usize, size: usize) -> String {
    format!("{i:0>size$}")
}

pub fn run(o: &Opts) -> Result<(), String> {
    let pipes = o.pipelines.clone().unwrap_or(vec![1, 16]);
    let size = if o.data_size == 3 { 100 } else { o.data_size };
    let n = o.requests as usize;
    println!("jobs: {n} jobs of {size} bytes, {} clients, {} threads", o.clients, o.threads);
    println!("| server | pattern | P | add jobs/s | get+ack jobs/s | used_memory per queued job |");
    println!("|---|---|---|---|---|---|");
    for (name, addr) in targets(o)? {
        let c = cfg(o, addr);
        let kind = rt()?.block_on(async {
            let mut conn = Connection::connect(&c).await.map_err(es)?;
            let r = conn.cmd(&["QLEN", "bench:jobs"]).await;
            if matches!(r, Ok(Frame::Integer(_))) {
                Ok::<_, String>(Kind::Jobs)
            } else {
                conn.cmd(&["DEL", "bench:q", "bench:processing"]).await.map_err(es)?;
                Ok(Kind::Lists)
            }
        })?;
        let pattern = match kind {
            Kind::Jobs => "ADDJOB; GETJOB+ACKJOB",
            Kind::Lists => "LPUSH; BLMOVE+LREM",
        };
        for &p in &pipes {
            let before = used_memory(&c)?;
            let t = Instant::now();
            phase(o, &c, kind, true, n, p.max(1), size)?;
            let add = n as f64 / t.elapsed().as_secs_f64();
            let per_job = (used_memory(&c)? as f64 - before as f64) / n.max(1) as f64;
            let t = Instant::now();
            phase(o, &c, kind, false, n, p.max(1), size)?;
            let take = n as f64 / t.elapsed().as_secs_f64();
            println!("| {name} | {pattern} | {p} | {add:.0} | {take:.0} | {per_job:.0} B |");
        }
    }
    Ok(())
}

fn used_memory(c: &Config) -> Result<u64, String> {
    rt()?.block_on(async {
        let mut conn = Connection::connect(c).await.map_err(es)?;
        let info = conn.info(Some("memory")).await.map_err(es)?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| "no used_memory in INFO".to_string())
    })
}

/// Runs one phase (produce or consume) of `n` jobs over `o.clients`
/// connections spread on `o.threads` threads.
fn phase(
    o: &Opts,
    c: &Config,
    kind: Kind,
    produce: bool,
    n: usize,
    p: usize,
    size: usize,
) -> Result<(), String> {
    let clients = o.clients.max(1);
    let threads = o.threads.clamp(1, clients);
    let c = Arc::new(c.clone());
    let mut hs = Vec::new();
    for t in 0..threads {
        let c = c.clone();
        // Connection k gets jobs k, k + clients, ...
        let mine: Vec<usize> = (t..clients).step_by(threads).collect();
        hs.push(std::thread::spawn(move || -> Result<(), String> {
            rt()?.block_on(async {
                let mut tasks = Vec::new();
                for k in mine {
                    let c = c.clone();
                    let jobs: Vec<usize> = (k..n).step_by(clients).collect();
                    tasks.push(tokio::spawn(async move {
                        let mut conn = Connection::connect(&c).await.map_err(es)?;
                        for chunk in jobs.chunks(p) {
                            if produce {
                                produce_batch(&mut conn, kind, chunk, size).await?;
                            } else {
                                consume_batch(&mut conn, kind, chunk.len()).await?;
                            }
                        }
                        Ok::<_, String>(())
                    }));
                }
                for t in tasks {
                    t.await.map_err(|e| e.to_string())??;
                }
                Ok(())
            })
        }));
    }
    for h in hs {
        h.join().map_err(|_| "bench thread panicked".to_string())??;
    }
    Ok(())
}

async fn produce_batch(
    conn: &mut Connection,
    kind: Kind,
    chunk: &[usize],
    size: usize,
) -> Result<(), String> {
    let mut pl = Pipeline::new();
    for &i in chunk {
        let b = body(i, size);
        match kind {
            Kind::Jobs => pl.cmd(&["ADDJOB", "bench:jobs", &b, "0"]),
            Kind::Lists => pl.cmd(&["LPUSH", "bench:q", &b]),
        };
    }
    for r in conn.exec(&pl).await.map_err(es)? {
        r?;
    }
    Ok(())
}

async fn consume_batch(conn: &mut Connection, kind: Kind, n: usize) -> Result<(), String> {
    let mut pl = Pipeline::new();
    for _ in 0..n {
        match kind {
            Kind::Jobs => pl.cmd(&["GETJOB", "TIMEOUT", "1000", "FROM", "bench:jobs"]),
            Kind::Lists => pl.cmd(&["BLMOVE", "bench:q", "bench:processing", "RIGHT", "LEFT", "1"]),
        };
    }
    let got = conn.exec(&pl).await.map_err(es)?;
    let mut done = Pipeline::new();
    for r in got {
        match (kind, r?) {
            (Kind::Jobs, Frame::Array(Some(jobs))) => {
                for j in jobs {
                    if let Frame::Array(Some(parts)) = j {
                        if let Frame::Bulk(Some(id)) = &parts[1] {
                            done.cmd(&[&b"ACKJOB"[..], id]);
                        }
                    }
                }
            }
            (Kind::Lists, Frame::Bulk(Some(b))) => {
                done.cmd(&[&b"LREM"[..], b"bench:processing", b"1", &b]);
            }
            (_, other) => return Err(format!("nothing to consume: {other:?}")),
        }
    }
    for r in conn.exec(&done).await.map_err(es)? {
        r?;
    }
    Ok(())
}
