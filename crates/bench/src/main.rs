//! `sluice-bench`: a redis-benchmark-compatible load generator that can
//! also emulate a network round-trip time, sweep pipeline depth × RTT ×
//! clients, replay the pipelining articles' scenarios and draw charts.
//!
//! Without sweep options it behaves like `redis-benchmark` 7.0 (same flags
//! where they overlap, same `-q` and `--csv` lines and test names).

mod chart;
mod cluster;
mod durable;
mod jobs;
mod load;
mod proxy;
mod scenario;
mod sweep;

use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use load::{Outcome, Plan, Progress, Workload};

const USAGE: &str = "\
Usage: sluice-bench [-h host] [-p port] [-a password] [--dbnum n] [-c clients] [-n requests]
                    [-d size] [-r keyspacelen] [-P numreq] [-t tests] [-q] [--csv] [--threads n]
  redis-benchmark compatible options; tests: ping_inline ping_mbulk set get incr lpush rpush
  lpop rpop sadd hset spop zadd zpopmin lrange lrange_100 lrange_300 lrange_500 lrange_600
  mset, plus mix (GET/SET, --ratio GET:SET, default 80:20).
Round trips and sweeps:
  --rtt 0,0.2ms,1ms,25ms    emulate a round-trip time with an in-process delaying proxy
  --pipeline 1,10,100,1000  pipeline depths to sweep (with --rtt and --clients)
  --clients 1,10,50         client counts to sweep
  --max-time 5s             stop each sweep point after this long (default 5s)
  --scenario ping10k|records|mix|jobs|durable   replay the articles' experiments; jobs:
                            ADDJOB/GETJOB+ACKJOB vs LPUSH/BLMOVE+LREM; durable: pipelined
                            SET plain, WAIT after each, WAIT per batch and DURABLE mode, with
                            1 and 2 of --replicas (--rtt: the master-replica round trip)
  --replicas h:p,h:p        replicas the durable scenario attaches to the master
  --replica-counts 1,2      durable: how many of --replicas to attach (default 1..all)
  --modes plain,durable     durable: run only these modes
  --fsync                   durable: the ways to know a write is fsynced (plain, always,
                            waitaof-batch, durable-fsync); the master's AOF must be on
  --compare host:port       run the same plan against a second server, add ratios
  --cluster host:port       sweep a Redis Cluster through this seed: one connection per master
                            per client, each master its own pipeline of -P/--pipeline requests
                            with keys from its slots (-r, default 100000 keys); rows for each
                            shard alone and for all at once; --compare: a second cluster's seed
  --out DIR                 write results.csv, results.json and SVG charts there
";

/// Parsed command line.
#[derive(Clone)]
pub struct Opts {
    pub host: String,
    pub port: u16,
    pub password: Option<String>,
    pub db: i64,
    pub clients: usize,
    pub requests: u64,
    pub data_size: usize,
    pub keyspace: Option<u64>,
    pub pipeline: usize,
    pub tests: Option<Vec<String>>,
    pub quiet: bool,
    pub csv: bool,
    pub threads: usize,
    pub rtts: Option<Vec<Duration>>,
    pub pipelines: Option<Vec<usize>>,
    pub client_list: Option<Vec<usize>>,
    pub max_time: Duration,
    pub scenario: Option<String>,
    pub compare: Option<String>,
    /// `--cluster`: a seed of the cluster to sweep.
    pub cluster: Option<String>,
    pub out: Option<String>,
    pub get_pct: u32,
    /// `--replicas`: servers the durable scenario makes replicas.
    pub replicas: Vec<String>,
    /// `--replica-counts`: how many of them the durable scenario attaches.
    pub replica_counts: Option<Vec<usize>>,
    /// `--modes`: the durable scenario's modes to run.
    pub modes: Option<Vec<String>>,
    /// `--fsync`: the durable scenario's fsync modes.
    pub fsync: bool,
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    let (num, mult) = if let Some(v) = s.strip_suffix("us") {
        (v, 1e-6)
    } else if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else {
        (s, 1e-3) // a bare number is milliseconds
    };
    let v: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    if !(0.0..1e6).contains(&v) {
        return Err(format!("bad duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

fn list<T>(s: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',').filter(|x| !x.is_empty()).map(|x| f(x.trim())).collect()
}

fn num<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("bad number {s:?}"))
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut o = Opts {
        host: "127.0.0.1".into(),
        port: 6379,
        password: None,
        db: 0,
        clients: 50,
        requests: 100_000,
        data_size: 3,
        keyspace: None,
        pipeline: 1,
        tests: None,
        quiet: false,
        csv: false,
        threads: cores,
        rtts: None,
        pipelines: None,
        client_list: None,
        max_time: Duration::from_secs(5),
        scenario: None,
        compare: None,
        cluster: None,
        out: None,
        get_pct: 80,
        replicas: Vec::new(),
        replica_counts: None,
        modes: None,
        fsync: false,
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut val = || -> Result<String, String> {
            i += 1;
            args.get(i).cloned().ok_or_else(|| format!("{a} needs a value"))
        };
        match a {
            "-h" => o.host = val()?,
            "-p" => o.port = num(&val()?)?,
            "-a" => o.password = Some(val()?),
            "--dbnum" => o.db = num(&val()?)?,
            "-c" => o.clients = num(&val()?)?,
            "-n" => o.requests = num(&val()?)?,
            "-d" => o.data_size = num(&val()?)?,
            "-r" => o.keyspace = Some(num(&val()?)?),
            "-P" => o.pipeline = num(&val()?)?,
            "-t" => o.tests = Some(list(&val()?, |s| Ok(s.to_ascii_lowercase()))?),
            "-q" => o.quiet = true,
            "--csv" => o.csv = true,
            "--threads" => o.threads = num(&val()?)?,
            "--rtt" => o.rtts = Some(list(&val()?, parse_dur)?),
            "--pipeline" => o.pipelines = Some(list(&val()?, num)?),
            "--clients" => o.client_list = Some(list(&val()?, num)?),
            "--max-time" => o.max_time = parse_dur(&val()?)?,
            "--scenario" => o.scenario = Some(val()?),
            "--compare" => o.compare = Some(val()?),
            "--cluster" => o.cluster = Some(val()?),
            "--out" => o.out = Some(val()?),
            "--replicas" => o.replicas = list(&val()?, |s| Ok(s.to_string()))?,
            "--replica-counts" => o.replica_counts = Some(list(&val()?, num)?),
            "--modes" => o.modes = Some(list(&val()?, |s| Ok(s.to_string()))?),
            "--fsync" => o.fsync = true,
            "--ratio" => {
                let v = val()?;
                let (g, s) = v.split_once(':').ok_or("--ratio is GET:SET")?;
                let (g, s): (u32, u32) = (num(g)?, num(s)?);
                o.get_pct = (g * 100).checked_div(g + s).ok_or("--ratio is GET:SET")?;
            }
            "--help" => return Err(String::new()),
            _ => return Err(format!("Unrecognized option or bad number of args for: '{a}'")),
        }
        i += 1;
    }
    if o.clients == 0 || o.pipeline == 0 {
        return Err("-c and -P must be at least 1".into());
    }
    Ok(o)
}

/// One redis-benchmark test: its title and request.
pub struct Test {
    pub title: String,
    pub work: Workload,
}

/// The tests selected by `-t` (redis-benchmark 7.0's names and order).
pub fn tests_for(o: &Opts) -> Vec<Test> {
    let data = vec![b'x'; o.data_size];
    let sel = |name: &str| match &o.tests {
        None => name != "mix",
        Some(t) => t.iter().any(|x| x == name),
    };
    let mut v = Vec::new();
    let mut push = |title: &str, work: Workload| v.push(Test { title: title.to_string(), work });
    let r = b"key:__rand_int__".as_slice();
    let e = b"element:__rand_int__".as_slice();
    let d = data.as_slice();
    let ping = o.tests.as_ref().is_some_and(|t| t.iter().any(|x| x == "ping"));
    if sel("ping_inline") || ping {
        push("PING_INLINE", Workload::raw(b"PING\r\n"));
    }
    if sel("ping_mbulk") || ping {
        push("PING_MBULK", Workload::command(&[b"PING"]));
    }
    if sel("set") {
        push("SET", Workload::command(&[b"SET", r, d]));
    }
    if sel("get") {
        push("GET", Workload::command(&[b"GET", r]));
    }
    if sel("incr") {
        push("INCR", Workload::command(&[b"INCR", b"counter:__rand_int__"]));
    }
    if sel("lpush") {
        push("LPUSH", Workload::command(&[b"LPUSH", b"mylist", d]));
    }
    if sel("rpush") {
        push("RPUSH", Workload::command(&[b"RPUSH", b"mylist", d]));
    }
    if sel("lpop") {
        push("LPOP", Workload::command(&[b"LPOP", b"mylist"]));
    }
    if sel("rpop") {
        push("RPOP", Workload::command(&[b"RPOP", b"mylist"]));
    }
    if sel("sadd") {
        push("SADD", Workload::command(&[b"SADD", b"myset", e]));
    }
    if sel("hset") {
        push("HSET", Workload::command(&[b"HSET", b"myhash", e, d]));
    }
    if sel("spop") {
        push("SPOP", Workload::command(&[b"SPOP", b"myset"]));
    }
    if sel("zadd") {
        push("ZADD", Workload::command(&[b"ZADD", b"myzset", b"0", e]));
    }
    if sel("zpopmin") {
        push("ZPOPMIN", Workload::command(&[b"ZPOPMIN", b"myzset"]));
    }
    let lr = ["lrange", "lrange_100", "lrange_300", "lrange_500", "lrange_600"];
    if lr.iter().any(|t| sel(t)) {
        push("LPUSH (needed to benchmark LRANGE)", Workload::command(&[b"LPUSH", b"mylist", d]));
    }
    for (n, last) in [(100, "99"), (300, "299"), (500, "499"), (600, "599")] {
        if sel("lrange") || sel(&format!("lrange_{n}")) {
            let title = format!("LRANGE_{n} (first {n} elements)");
            push(&title, Workload::command(&[b"LRANGE", b"mylist", b"0", last.as_bytes()]));
        }
    }
    if sel("mset") {
        let mut args: Vec<&[u8]> = vec![b"MSET"];
        for _ in 0..10 {
            args.push(r);
            args.push(d);
        }
        push("MSET (10 keys)", Workload::command(&args));
    }
    if o.tests.as_ref().is_some_and(|t| t.iter().any(|x| x == "mix")) {
        let work = Workload::Mix { get_pct: o.get_pct, value: data.clone() };
        push(&format!("MIX ({}% GET)", o.get_pct), work);
    }
    v
}

pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port}: no address"))
}

/// Runs one measurement with a live progress line on a terminal.
pub fn measure(title: &str, plan: &Plan, work: &Workload) -> Result<Outcome, String> {
    let progress = Arc::new(Progress::default());
    let tty = std::io::stderr().is_terminal();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let bar = tty.then(|| {
        let (p, stop, title, total) =
            (progress.clone(), stop.clone(), title.to_string(), plan.requests);
        std::thread::spawn(move || {
            let t = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let d = p.done.load(Ordering::Relaxed);
                let rps = d as f64 / t.elapsed().as_secs_f64();
                let w = 30 * d.min(total) as usize / total.max(1) as usize;
                eprint!("\r{title}: [{:<30}] {d}/{total} rps={rps:.1}   ", "#".repeat(w));
            }
            eprint!("\r{:80}\r", "");
        })
    });
    let r = load::run(plan, work, &progress);
    stop.store(true, Ordering::Relaxed);
    if let Some(b) = bar {
        let _ = b.join();
    }
    r
}

fn classic(o: &Opts) -> Result<(), String> {
    let addr = resolve(&o.host, o.port)?;
    let plan = Plan {
        addr,
        password: o.password.clone(),
        db: o.db,
        clients: o.clients,
        requests: o.requests,
        pipeline: o.pipeline,
        threads: o.threads,
        keyspace: o.keyspace,
        max_time: None,
    };
    if o.csv {
        println!(
            "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\""
        );
    }
    for t in tests_for(o) {
        let r = measure(&t.title, &plan, &t.work)?;
        if o.csv {
            println!(
                "\"{}\",\"{:.2}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\"",
                t.title,
                r.rps(),
                r.avg_ms(),
                r.min_ms(),
                r.pct_ms(50.0),
                r.pct_ms(95.0),
                r.pct_ms(99.0),
                r.max_ms()
            );
        } else if o.quiet {
            println!(
                "{}: {:.2} requests per second, p50={:.3} msec",
                t.title,
                r.rps(),
                r.pct_ms(50.0)
            );
        } else {
            println!("====== {} ======", t.title);
            println!(
                "  {} requests completed in {:.2} seconds\n  {} parallel clients\n  {} bytes payload\n  keep alive: 1\n  multi-thread: {}\n",
                r.requests,
                r.elapsed.as_secs_f64(),
                o.clients,
                o.data_size,
                if o.threads > 1 { "yes" } else { "no" }
            );
            println!("Summary:\n  throughput summary: {:.2} requests per second", r.rps());
            println!("  latency summary (msec):");
            println!("          avg       min       p50       p95       p99       max");
            println!(
                "    {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}\n",
                r.avg_ms(),
                r.min_ms(),
                r.pct_ms(50.0),
                r.pct_ms(95.0),
                r.pct_ms(99.0),
                r.max_ms()
            );
        }
        if r.errors > 0 {
            eprintln!("{}: {} error replies", t.title, r.errors);
        }
    }
    if !o.csv {
        println!();
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}\n");
            }
            eprint!("{USAGE}");
            std::process::exit(1);
        }
    };
    let r = if let Some(s) = &o.scenario {
        scenario::run(&o, s)
    } else if o.rtts.is_some()
        || o.pipelines.is_some()
        || o.client_list.is_some()
        || o.out.is_some()
        || o.cluster.is_some()
    {
        sweep::run(&o)
    } else {
        classic(&o)
    };
    if let Err(e) = r {
        eprintln!("sluice-bench: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(a: &str) -> Opts {
        let v: Vec<String> = a.split_whitespace().map(String::from).collect();
        parse_args(&v).unwrap()
    }

    #[test]
    fn test_names_follow_redis_benchmark() {
        let titles: Vec<String> =
            tests_for(&opts("-t ping,set,lrange,mset")).into_iter().map(|t| t.title).collect();
        assert_eq!(
            titles,
            [
                "PING_INLINE",
                "PING_MBULK",
                "SET",
                "LPUSH (needed to benchmark LRANGE)",
                "LRANGE_100 (first 100 elements)",
                "LRANGE_300 (first 300 elements)",
                "LRANGE_500 (first 500 elements)",
                "LRANGE_600 (first 600 elements)",
                "MSET (10 keys)"
            ]
        );
        assert_eq!(tests_for(&opts("-q")).len(), 20);
        assert_eq!(parse_dur("0.2ms").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_dur("25").unwrap(), Duration::from_millis(25));
    }
}
