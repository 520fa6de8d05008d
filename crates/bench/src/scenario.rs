//! The articles' experiments, replayed with the client library:
//!
//! - `ping10k`: N PINGs (10,000 unless `-n`) one by one, as one pipeline,
//!   and auto-pipelined from N tasks, at each `--rtt`.
//! - `records`: for N in 1, 10, 100, 1000: SET N keys (3 rounds), then
//!   `KEYS *` and GET each (3 rounds), one at a time, pipelined, over
//!   parallel connections (`-c`, at most N) and auto-pipelined; the average
//!   ms per round.
//! - `mix`: a GET/SET mix (`--ratio`, default 80:20) over the sweep axes.
//! - `jobs`: the job queue against Redis's reliable-queue pattern (see
//!   [`crate::jobs`]).
//! - `durable`: replicated SETs plain, with WAIT, and in DURABLE mode
//!   (see [`crate::durable`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use client::{AutoClient, Config, Connection, Pipeline};

use crate::sweep::{targets, via};
use crate::Opts;

pub fn run(o: &Opts, name: &str) -> Result<(), String> {
    match name {
        "ping10k" => each_target(o, ping10k),
        "records" => each_target(o, records),
        "mix" => {
            let mut o = o.clone();
            o.tests = Some(vec!["mix".into()]);
            if o.keyspace.is_none() {
                o.keyspace = Some(10_000);
            }
            crate::sweep::run(&o)
        }
        "jobs" => crate::jobs::run(o),
        "durable" => crate::durable::run(o),
        _ => Err(format!("unknown scenario {name:?} (ping10k, records, mix, jobs, durable)")),
    }
}

type Body = fn(&Opts, SocketAddr, &str, Duration) -> Result<(), String>;

fn each_target(o: &Opts, body: Body) -> Result<(), String> {
    let rtts = o.rtts.clone().unwrap_or(vec![Duration::ZERO]);
    for (name, addr) in targets(o)? {
        for &rtt in &rtts {
            let a = via(addr, rtt)?;
            body(o, a, &name, rtt)?;
        }
    }
    Ok(())
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

fn es(e: client::Error) -> String {
    e.to_string()
}

fn ping10k(o: &Opts, a: SocketAddr, server: &str, rtt: Duration) -> Result<(), String> {
    let n = if o.requests == 100_000 { 10_000 } else { o.requests } as usize;
    let c = cfg(o, a);
    rt()?.block_on(async {
        let mut conn = Connection::connect(&c).await.map_err(es)?;
        let t = Instant::now();
        for _ in 0..n {
            conn.ping().await.map_err(es)?;
        }
        let one = t.elapsed();
        let mut p = Pipeline::new();
        for _ in 0..n {
            p.cmd(&["PING"]);
        }
        let t = Instant::now();
        conn.exec(&p).await.map_err(es)?;
        let piped = t.elapsed();
        let auto = AutoClient::connect(&c).await.map_err(es)?;
        let t = Instant::now();
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let a = auto.clone();
                tokio::spawn(async move { a.ping().await })
            })
            .collect();
        for h in tasks {
            h.await.map_err(|e| e.to_string())?.map_err(es)?;
        }
        let autod = t.elapsed();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "ping10k {server} rtt={:.3}ms n={n}: one-by-one {:.1} ms ({:.0} rps) | pipelined {:.1} ms ({:.0} rps, {:.1}x) | auto-pipelined {:.1} ms ({:.1}x)",
            ms(rtt),
            ms(one),
            n as f64 / one.as_secs_f64(),
            ms(piped),
            n as f64 / piped.as_secs_f64(),
            one.as_secs_f64() / piped.as_secs_f64(),
            ms(autod),
            one.as_secs_f64() / autod.as_secs_f64()
        );
        Ok(())
    })
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    OneByOne,
    Pipelined,
    Parallel,
    Auto,
}

fn records(o: &Opts, a: SocketAddr, server: &str, rtt: Duration) -> Result<(), String> {
    let c = cfg(o, a);
    println!("records {server} rtt={:.3}ms (average ms per round of 3)", rtt.as_secs_f64() * 1e3);
    println!("{:>6} {:>12} {:>10} {:>10}", "N", "mode", "write_ms", "read_ms");
    rt()?.block_on(async {
        let mut admin = Connection::connect(&c).await.map_err(es)?;
        for n in [1usize, 10, 100, 1000] {
            for mode in [Mode::OneByOne, Mode::Pipelined, Mode::Parallel, Mode::Auto] {
                admin.flushdb().await.map_err(es)?;
                let (mut w, mut r) = (Duration::ZERO, Duration::ZERO);
                for round in 0..3 {
                    let t = Instant::now();
                    write_round(&c, mode, n, round, o.clients).await?;
                    w += t.elapsed();
                    let t = Instant::now();
                    read_round(&c, mode, n, o.clients).await?;
                    r += t.elapsed();
                }
                println!(
                    "{n:>6} {:>12} {:>10.2} {:>10.2}",
                    format!("{mode:?}"),
                    w.as_secs_f64() * 1e3 / 3.0,
                    r.as_secs_f64() * 1e3 / 3.0
                );
            }
        }
        Ok(())
    })
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("record:{i}")).collect()
}

/// SET each of `n` keys; connections are opened before the clock matters
/// only for the parallel mode, as an application's pool would be.
async fn write_round(
    c: &Config,
    mode: Mode,
    n: usize,
    round: usize,
    conns: usize,
) -> Result<(), String> {
    let ks = keys(n);
    let val = format!("value-{round}");
    match mode {
        Mode::OneByOne => {
            let mut conn = Connection::connect(c).await.map_err(es)?;
            for k in &ks {
                conn.set(k, &val).await.map_err(es)?;
            }
        }
        Mode::Pipelined => {
            let mut conn = Connection::connect(c).await.map_err(es)?;
            let mut p = Pipeline::new();
            for k in &ks {
                p.cmd(&["SET", k, &val]);
            }
            conn.exec(&p).await.map_err(es)?;
        }
        Mode::Parallel => {
            let parts = split(ks, conns);
            let mut hs = Vec::new();
            for part in parts {
                let (c, val) = (c.clone(), val.clone());
                hs.push(tokio::spawn(async move {
                    let mut conn = Connection::connect(&c).await?;
                    for k in &part {
                        conn.set(k, &val).await?;
                    }
                    Ok::<_, client::Error>(())
                }));
            }
            for h in hs {
                h.await.map_err(|e| e.to_string())?.map_err(es)?;
            }
        }
        Mode::Auto => {
            let auto = AutoClient::connect(c).await.map_err(es)?;
            let hs: Vec<_> = ks
                .into_iter()
                .map(|k| {
                    let (a, v) = (auto.clone(), val.clone());
                    tokio::spawn(async move { a.set(k, v).await })
                })
                .collect();
            for h in hs {
                h.await.map_err(|e| e.to_string())?.map_err(es)?;
            }
        }
    }
    Ok(())
}

/// `KEYS *`, then GET each key found.
async fn read_round(c: &Config, mode: Mode, n: usize, conns: usize) -> Result<(), String> {
    let mut conn = Connection::connect(c).await.map_err(es)?;
    let ks = conn.keys("record:*").await.map_err(es)?;
    if ks.len() != n {
        return Err(format!("KEYS found {} of {n} records", ks.len()));
    }
    match mode {
        Mode::OneByOne => {
            for k in &ks {
                conn.get(k).await.map_err(es)?;
            }
        }
        Mode::Pipelined => {
            let mut p = Pipeline::new();
            for k in &ks {
                p.cmd(&[b"GET".as_slice(), k]);
            }
            conn.exec(&p).await.map_err(es)?;
        }
        Mode::Parallel => {
            let mut hs = Vec::new();
            for part in split(ks, conns) {
                let c = c.clone();
                hs.push(tokio::spawn(async move {
                    let mut conn = Connection::connect(&c).await?;
                    for k in &part {
                        conn.get(k).await?;
                    }
                    Ok::<_, client::Error>(())
                }));
            }
            for h in hs {
                h.await.map_err(|e| e.to_string())?.map_err(es)?;
            }
        }
        Mode::Auto => {
            let auto = AutoClient::connect(c).await.map_err(es)?;
            let hs: Vec<_> = ks
                .into_iter()
                .map(|k| {
                    let a = auto.clone();
                    tokio::spawn(async move { a.get(k).await })
                })
                .collect();
            for h in hs {
                h.await.map_err(|e| e.to_string())?.map_err(es)?;
            }
        }
    }
    Ok(())
}

fn split<T>(v: Vec<T>, parts: usize) -> Vec<Vec<T>> {
    let parts = parts.clamp(1, v.len().max(1));
    let mut out: Vec<Vec<T>> = (0..parts).map(|_| Vec::new()).collect();
    for (i, x) in v.into_iter().enumerate() {
        out[i % parts].push(x);
    }
    out
}
