//! `--scenario durable`: what it costs to know a write is on replicas.
//!
//! Against a master (`-h`/`-p`) and up to two replicas (`--replicas
//! host:port,host:port`, servers already running), for each replica round
//! trip (`--rtt`: here the delay between the master and its replicas, made
//! by the same user-space proxy `--rtt` puts in front of clients: each
//! replica follows the proxy, which forwards to the master), each number
//! of replicas (1, then 2), each pipeline depth (`--pipeline`, default
//! 1,16,64) and four ways of writing `SET key:<rand> <value>`:
//!
//! - (a) `plain`: the replies as they come;
//! - (b) `wait-each`: `WAIT <replicas> 0` after every SET;
//! - (c) `wait-batch`: one `WAIT <replicas> 0` after each pipelined batch;
//! - (d) `durable`: the connection first sends `DURABLE <replicas>
//!   <timeout>` and the batch's replies come once the replicas have it.
//!
//! With `--fsync` (the master's AOF on, `appendfsync everysec`) the
//! modes are the ways to know a write is on disk as well:
//!
//! - (a) `plain`: the replies as they come (before any fsync);
//! - (e) `always`: plain replies under `appendfsync always` (set on the
//!   master for the point: its group commit fsyncs before it answers);
//! - (f) `waitaof-batch`: one `WAITAOF 1 <replicas> 0` after each batch
//!   (Redis 7.2's: the local AOF *and* the replicas' AOFs fsynced);
//! - (g) `durable-fsync`: `DURABLE <replicas> <timeout> FSYNC` (on the
//!   replicas, applied; fsynced by the master's AOF).
//!
//! `--clients 1,4,50` runs each point with each number of connections
//! (the default is `-c`): with many clients one replica acknowledgement
//! releases many connections' `WAIT`s, so (b) amortizes the replica
//! round trip across clients; with one it pays it per SET.
//! `--modes` and `--replica-counts` pick a subset (profiling).
//!
//! It prints throughput (SETs per second) and the p50/p99 latency of a
//! SET (from its batch's write to its reply, or to its batch's WAIT reply
//! in (c)), and each mode's throughput against (a) and (d) against (b).
//! Replicas not in use are detached (`REPLICAOF NO ONE`); between
//! configurations the master waits until its replicas acknowledged.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use client::{Config, Connection};
use resp::Frame;

use crate::load::{Extra, Outcome, Plan, Workload};
use crate::sweep::via;
use crate::{measure, resolve, Opts};

/// The four modes, in the table's order, with their letters.
const MODES: [(char, &str); 4] =
    [('a', "plain"), ('b', "wait-each"), ('c', "wait-batch"), ('d', "durable")];

/// The modes of `--fsync` (the master's AOF on).
const FSYNC_MODES: [(char, &str); 4] =
    [('a', "plain"), ('e', "always"), ('f', "waitaof-batch"), ('g', "durable-fsync")];

/// How long a durable batch may wait (long enough never to time out on a
/// healthy loopback replica; a timeout would show as errors).
const DURABLE_TIMEOUT_MS: u64 = 5_000;

fn cfg(o: &Opts, a: SocketAddr) -> Config {
    let mut c = Config::new(&a.ip().to_string(), a.port());
    c.password = o.password.clone();
    c
}

fn rt() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())
}

fn cmd(c: &Config, args: &[&str]) -> Result<Frame, String> {
    rt()?.block_on(async {
        let mut conn = Connection::connect(c).await.map_err(|e| e.to_string())?;
        conn.cmd(args).await.map_err(|e| e.to_string())
    })
}

/// Points `replicas` at `upstream` (the master, or a proxy in front of
/// it), detaches `spare`, and waits until the master counts the replicas
/// online and acknowledging.
fn attach(
    o: &Opts,
    master: SocketAddr,
    upstream: SocketAddr,
    replicas: &[SocketAddr],
    spare: &[SocketAddr],
) -> Result<(), String> {
    for &r in spare {
        cmd(&cfg(o, r), &["REPLICAOF", "NO", "ONE"])?;
    }
    let (h, p) = (upstream.ip().to_string(), upstream.port().to_string());
    for &r in replicas {
        cmd(&cfg(o, r), &["REPLICAOF", "NO", "ONE"])?;
        cmd(&cfg(o, r), &["REPLICAOF", &h, &p])?;
    }
    let n = replicas.len().to_string();
    let m = cfg(o, master);
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let info = match cmd(&m, &["INFO", "replication"])? {
            Frame::Bulk(Some(b)) | Frame::Verbatim(_, b) => {
                String::from_utf8_lossy(&b).into_owned()
            }
            other => return Err(format!("INFO replication: {other:?}")),
        };
        let online = info.matches("state=online").count();
        if online == replicas.len() {
            // Every replica has applied the stream so far.
            if let Frame::Integer(k) = cmd(&m, &["WAIT", &n, "2000"])? {
                if k as usize >= replicas.len() {
                    return Ok(());
                }
            }
        }
        if Instant::now() > end {
            return Err(format!("replicas not online after 60s ({online} of {n})"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The workload of `mode` with `n` replicas.
fn workload(mode: &str, n: usize, value: &[u8]) -> Workload {
    let set: &[&[u8]] = &[b"SET", b"key:__rand_int__", value];
    let ns = n.to_string();
    let wait: &[&[u8]] = &[b"WAIT", ns.as_bytes(), b"0"];
    let encoded = |args: &[&[u8]]| {
        let mut b = Vec::new();
        resp::write_command(&mut b, args);
        b
    };
    let t = DURABLE_TIMEOUT_MS.to_string();
    match mode {
        "wait-each" => Workload::commands(&[set, wait]),
        "wait-batch" => {
            Workload::command(set).with(Extra { tail: encoded(wait), ..Extra::default() })
        }
        "waitaof-batch" => {
            let tail = encoded(&[b"WAITAOF", b"1", ns.as_bytes(), b"0"]);
            Workload::command(set).with(Extra { tail, ..Extra::default() })
        }
        "durable" => {
            let setup = encoded(&[b"DURABLE", ns.as_bytes(), t.as_bytes()]);
            Workload::command(set).with(Extra { setup, ..Extra::default() })
        }
        "durable-fsync" => {
            let setup = encoded(&[b"DURABLE", ns.as_bytes(), t.as_bytes(), b"FSYNC"]);
            Workload::command(set).with(Extra { setup, ..Extra::default() })
        }
        _ => Workload::command(set),
    }
}

/// One row of the table.
struct Row {
    rtt: Duration,
    replicas: usize,
    clients: usize,
    pipeline: usize,
    letter: char,
    mode: &'static str,
    r: Outcome,
}

/// Sets the master's `appendfsync` (the `always` mode's points).
fn appendfsync(o: &Opts, master: SocketAddr, policy: &str) -> Result<(), String> {
    match cmd(&cfg(o, master), &["CONFIG", "SET", "appendfsync", policy])? {
        Frame::Simple(_) => Ok(()),
        other => Err(format!("CONFIG SET appendfsync {policy}: {other:?}")),
    }
}

pub fn run(o: &Opts) -> Result<(), String> {
    let master = resolve(&o.host, o.port)?;
    let replicas: Vec<SocketAddr> = o
        .replicas
        .iter()
        .map(|a| {
            let (h, p) = a.rsplit_once(':').ok_or("--replicas is host:port,…")?;
            resolve(h, p.parse().map_err(|_| format!("bad port in {a}"))?)
        })
        .collect::<Result<_, String>>()?;
    if replicas.is_empty() {
        return Err("--scenario durable needs --replicas host:port[,host:port]".into());
    }
    let rtts = o.rtts.clone().unwrap_or(vec![Duration::ZERO]);
    let pipes = o.pipelines.clone().unwrap_or(vec![1, 16, 64]);
    let clients = o.client_list.clone().unwrap_or(vec![o.clients]);
    let counts = o.replica_counts.clone().unwrap_or_else(|| (1..=replicas.len()).collect());
    if let Some(&n) = counts.iter().find(|&&n| n == 0 || n > replicas.len()) {
        return Err(format!(
            "--replica-counts {n}: between 1 and the {} --replicas",
            replicas.len()
        ));
    }
    let all = if o.fsync { FSYNC_MODES } else { MODES };
    let modes: Vec<(char, &'static str)> = all
        .into_iter()
        .filter(|(_, m)| o.modes.as_ref().is_none_or(|want| want.iter().any(|w| w == m)))
        .collect();
    let value = vec![b'x'; o.data_size];
    let keyspace = o.keyspace.or(Some(100_000));
    println!(
        "durable: SET of {} bytes over {} keys, {:?} clients, {} threads, {} requests or {:?} a point{}",
        o.data_size,
        keyspace.unwrap_or(1),
        clients,
        o.threads,
        o.requests,
        o.max_time,
        if o.fsync { ", master AOF on (appendfsync everysec)" } else { "" }
    );
    let mut rows = Vec::new();
    for &rtt in &rtts {
        // The replicas' way to the master, with the emulated delay.
        let upstream = via(master, rtt)?;
        for &n in &counts {
            attach(o, master, upstream, &replicas[..n], &replicas[n..])?;
            for &c in &clients {
                for &p in &pipes {
                    for &(letter, mode) in &modes {
                        let plan = Plan {
                            addr: master,
                            password: o.password.clone(),
                            db: o.db,
                            clients: c,
                            requests: o.requests,
                            pipeline: p,
                            threads: o.threads,
                            keyspace,
                            max_time: Some(o.max_time),
                        };
                        let label = format!("{mode} replicas={n} rtt={rtt:?} c={c} P={p}");
                        if mode == "always" {
                            appendfsync(o, master, "always")?;
                        }
                        let r = measure(&label, &plan, &workload(mode, n, &value));
                        if mode == "always" {
                            appendfsync(o, master, "everysec")?;
                        }
                        let r = r?;
                        eprintln!(
                            "{label:<50} {:>12.0} SET/s  p50={:.3} p99={:.3} ms  errors={}",
                            r.rps(),
                            r.pct_ms(50.0),
                            r.pct_ms(99.0),
                            r.errors
                        );
                        rows.push(Row {
                            rtt,
                            replicas: n,
                            clients: c,
                            pipeline: p,
                            letter,
                            mode,
                            r,
                        });
                    }
                }
            }
        }
    }
    for &r in &replicas {
        cmd(&cfg(o, r), &["REPLICAOF", "NO", "ONE"])?;
    }
    print!("{}", table(&rows));
    Ok(())
}

/// The Markdown table: one line per point, with each mode's throughput
/// against (a) and, for (d), against (b).
fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut s = String::from(
        "| replica RTT | replicas | clients | P | mode | SET/s | p50 ms | p99 ms | vs (a) | (d) vs (b) | errors |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let find = |row: &Row, mode: &str| {
        rows.iter().find(|x| {
            x.rtt == row.rtt
                && x.replicas == row.replicas
                && x.clients == row.clients
                && x.pipeline == row.pipeline
                && x.mode == mode
        })
    };
    for row in rows {
        let rps = row.r.rps();
        let vs_a = find(row, "plain").map_or(String::new(), |a| format!("{:.2}x", rps / a.r.rps()));
        let vs_b = match (row.mode, find(row, "wait-each")) {
            ("durable", Some(b)) => format!("{:.1}x", rps / b.r.rps()),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "| {:.1} ms | {} | {} | {} | ({}) {} | {:.0} | {:.3} | {:.3} | {} | {} | {} |",
            row.rtt.as_secs_f64() * 1000.0,
            row.replicas,
            row.clients,
            row.pipeline,
            row.letter,
            row.mode,
            rps,
            row.r.pct_ms(50.0),
            row.r.pct_ms(99.0),
            vs_a,
            vs_b,
            row.r.errors
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_send_what_they_say() {
        let bytes = |w: &Workload| match w {
            Workload::Fixed { bytes, extra, .. } => (bytes.clone(), extra.clone()),
            _ => unreachable!(),
        };
        let (b, e) = bytes(&workload("wait-each", 2, b"v"));
        let s = String::from_utf8(b).unwrap();
        assert!(
            s.starts_with("*3\r\n$3\r\nSET\r\n")
                && s.ends_with("*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$1\r\n0\r\n")
        );
        assert_eq!(e.more_replies, 1);
        let (_, e) = bytes(&workload("wait-batch", 1, b"v"));
        assert_eq!(e.tail, b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n");
        let (_, e) = bytes(&workload("durable", 2, b"v"));
        assert_eq!(e.setup, b"*3\r\n$7\r\nDURABLE\r\n$1\r\n2\r\n$4\r\n5000\r\n");
        let (_, e) = bytes(&workload("durable-fsync", 1, b"v"));
        assert_eq!(e.setup, b"*4\r\n$7\r\nDURABLE\r\n$1\r\n1\r\n$4\r\n5000\r\n$5\r\nFSYNC\r\n");
        let (_, e) = bytes(&workload("waitaof-batch", 2, b"v"));
        assert_eq!(e.tail, b"*4\r\n$7\r\nWAITAOF\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n0\r\n");
        let (_, e) = bytes(&workload("always", 2, b"v"));
        assert!(e.setup.is_empty() && e.tail.is_empty() && e.more_replies == 0);
        let (_, e) = bytes(&workload("plain", 2, b"v"));
        assert!(e.setup.is_empty() && e.tail.is_empty() && e.more_replies == 0);
    }
}
