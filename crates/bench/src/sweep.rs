//! Sweeps: every test × round-trip time × client count × pipeline depth,
//! against one server or two (`--compare`), or one cluster or two
//! (`--cluster`: a row per shard and one for all), printed as a table and
//! written as CSV, JSON and SVG charts.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use crate::load::{Outcome, Plan};
use crate::proxy::Proxy;
use crate::{measure, resolve, tests_for, Opts, Test};

/// One measured point.
#[derive(Clone, Debug)]
pub struct Point {
    pub server: String,
    pub test: String,
    pub rtt_ms: f64,
    pub clients: usize,
    pub pipeline: usize,
    pub requests: u64,
    pub rps: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

/// The servers of the plan: the target and, with `--compare`, a second.
pub fn targets(o: &Opts) -> Result<Vec<(String, SocketAddr)>, String> {
    let mut v = vec![(format!("{}:{}", o.host, o.port), resolve(&o.host, o.port)?)];
    if let Some(c) = &o.compare {
        let (h, p) = c.rsplit_once(':').ok_or("--compare is host:port")?;
        let p: u16 = p.parse().map_err(|_| format!("bad port in {c}"))?;
        v.push((c.clone(), resolve(h, p)?));
    }
    Ok(v)
}

/// The address to connect to for `rtt`: the server itself, or a delaying
/// proxy in front of it.
pub fn via(addr: SocketAddr, rtt: Duration) -> Result<SocketAddr, String> {
    if rtt.is_zero() {
        return Ok(addr);
    }
    Proxy::start(addr, rtt).map(|p| p.addr).map_err(|e| format!("proxy: {e}"))
}

pub fn run(o: &Opts) -> Result<(), String> {
    let mut o = o.clone();
    if o.tests.is_none() {
        o.tests = Some(vec!["ping_mbulk".into()]);
    }
    let rtts = o.rtts.clone().unwrap_or(vec![Duration::ZERO]);
    let pipes = o.pipelines.clone().unwrap_or(vec![o.pipeline]);
    let clients = o.client_list.clone().unwrap_or(vec![o.clients]);
    let tests = tests_for(&o);
    let points = match &o.cluster {
        Some(seed) => cluster_points(&o, seed, &rtts, &pipes, &clients, &tests)?,
        None => server_points(&o, &rtts, &pipes, &clients, &tests)?,
    };
    print!("{}", table(&points));
    if let Some(dir) = &o.out {
        write_outputs(dir, &points)?;
    }
    Ok(())
}

/// The single-server sweep: every target × rtt × test × clients × depth.
fn server_points(
    o: &Opts,
    rtts: &[Duration],
    pipes: &[usize],
    clients: &[usize],
    tests: &[Test],
) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    for (name, addr) in targets(o)? {
        for &rtt in rtts {
            let a = via(addr, rtt)?;
            for t in tests {
                for &c in clients {
                    for &p in pipes {
                        let plan = Plan {
                            addr: a,
                            password: o.password.clone(),
                            db: o.db,
                            clients: c,
                            requests: o.requests,
                            pipeline: p,
                            threads: o.threads,
                            keyspace: o.keyspace,
                            max_time: Some(o.max_time),
                        };
                        let label = format!("{} rtt={:?} c={c} P={p}", t.title, rtt);
                        let r = measure(&label, &plan, &t.work)?;
                        points.push(point(&name, &t.title, rtt, c, p, &r));
                    }
                }
            }
        }
    }
    Ok(points)
}

/// The cluster sweep: per cluster seed (`--cluster`, then `--compare`),
/// rtt × test × clients × depth, each measured on every shard alone
/// (labelled by its position in slot order, so two clusters' rows pair
/// up) and on all shards at once.
fn cluster_points(
    o: &Opts,
    seed: &str,
    rtts: &[Duration],
    pipes: &[usize],
    clients: &[usize],
    tests: &[Test],
) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    let seeds = std::iter::once(seed.to_string()).chain(o.compare.clone());
    for seed in seeds {
        let map = crate::cluster::discover(&seed, o.password.as_deref())?;
        let masters: Vec<SocketAddr> = map
            .nodes()
            .iter()
            .map(|n| {
                let (h, p) = n.rsplit_once(':').ok_or("bad node address")?;
                resolve(h, p.parse().map_err(|_| format!("bad node address {n}"))?)
            })
            .collect::<Result<_, String>>()?;
        let name = format!("cluster {seed}");
        let shards = masters.len();
        eprintln!("{name}: {shards} masters: {}", map.nodes().join(" "));
        for &rtt in rtts {
            let addrs = masters.iter().map(|&a| via(a, rtt)).collect::<Result<Vec<_>, _>>()?;
            for t in tests {
                for &c in clients {
                    for &p in pipes {
                        let plan = Plan {
                            addr: addrs[0],
                            password: o.password.clone(),
                            db: 0,
                            clients: c,
                            requests: o.requests,
                            pipeline: p,
                            threads: o.threads,
                            keyspace: o.keyspace,
                            max_time: Some(o.max_time),
                        };
                        // Each shard alone, then all of them at once.
                        for only in (0..shards).map(Some).chain([None]) {
                            let run = crate::cluster::run(&plan, &addrs, &map, &t.work, only)?;
                            let Some(r) = run else { continue };
                            let test = match only {
                                Some(i) => format!("{} [shard {}/{shards}]", t.title, i + 1),
                                None => format!("{} [{shards} shards]", t.title),
                            };
                            if r.errors > 0 {
                                eprintln!("{name} {test} P={p}: {} error replies", r.errors);
                            }
                            points.push(point(&name, &test, rtt, c, p, &r));
                        }
                    }
                }
            }
        }
    }
    Ok(points)
}

fn point(server: &str, test: &str, rtt: Duration, c: usize, p: usize, r: &Outcome) -> Point {
    let pt = Point {
        server: server.to_string(),
        test: test.to_string(),
        rtt_ms: rtt.as_secs_f64() * 1000.0,
        clients: c,
        pipeline: p,
        requests: r.requests,
        rps: r.rps(),
        p50: r.pct_ms(50.0),
        p99: r.pct_ms(99.0),
        p999: r.pct_ms(99.9),
    };
    eprintln!(
        "{:<22} {:<16} rtt={:>7.3}ms c={:<4} P={:<5} {:>12.2} rps  p50={:.3} p99={:.3} p99.9={:.3} ms",
        pt.server, pt.test, pt.rtt_ms, c, p, pt.rps, pt.p50, pt.p99, pt.p999
    );
    pt
}

/// The same point measured on the compared server, if any.
fn twin<'a>(points: &'a [Point], p: &Point) -> Option<&'a Point> {
    points.iter().find(|q| {
        q.server != p.server
            && q.test == p.test
            && q.rtt_ms == p.rtt_ms
            && q.clients == p.clients
            && q.pipeline == p.pipeline
    })
}

/// CSV: one row per point of the first server, with ratio columns when a
/// second server was measured.
pub fn csv(points: &[Point]) -> String {
    let first = points.first().map(|p| p.server.clone()).unwrap_or_default();
    let cmp = points.iter().any(|p| p.server != first);
    let mut s = String::from("test,rtt_ms,clients,pipeline,requests,rps,p50_ms,p99_ms,p999_ms");
    if cmp {
        s.push_str(",rps_b,p50_ms_b,p99_ms_b,rps_ratio");
    }
    s.push('\n');
    for p in points.iter().filter(|p| p.server == first) {
        let _ = write!(
            s,
            "\"{}\",{},{},{},{},{:.2},{:.3},{:.3},{:.3}",
            p.test, p.rtt_ms, p.clients, p.pipeline, p.requests, p.rps, p.p50, p.p99, p.p999
        );
        if let Some(q) = twin(points, p).filter(|_| cmp) {
            let _ =
                write!(s, ",{:.2},{:.3},{:.3},{:.3}", q.rps, q.p50, q.p99, p.rps / q.rps.max(1e-9));
        }
        s.push('\n');
    }
    s
}

fn table(points: &[Point]) -> String {
    let first = points.first().map(|p| p.server.clone()).unwrap_or_default();
    let mut s = format!(
        "{:<34} {:>8} {:>6} {:>6} {:>13} {:>9} {:>9} {:>9}",
        "test", "rtt_ms", "clients", "P", "rps", "p50_ms", "p99_ms", "p99.9_ms"
    );
    let cmp = points.iter().any(|p| p.server != first);
    if cmp {
        s.push_str(&format!(" {:>13} {:>7}", "rps (cmp)", "ratio"));
    }
    s.push('\n');
    for p in points.iter().filter(|p| p.server == first) {
        let _ = write!(
            s,
            "{:<34} {:>8.3} {:>7} {:>6} {:>13.2} {:>9.3} {:>9.3} {:>9.3}",
            p.test, p.rtt_ms, p.clients, p.pipeline, p.rps, p.p50, p.p99, p.p999
        );
        if let Some(q) = twin(points, p).filter(|_| cmp) {
            let _ = write!(s, " {:>13.2} {:>7.2}", q.rps, p.rps / q.rps.max(1e-9));
        }
        s.push('\n');
    }
    s
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

pub fn json(points: &[Point]) -> String {
    let rows: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "  {{\"server\": {}, \"test\": {}, \"rtt_ms\": {}, \"clients\": {}, \"pipeline\": {}, \"requests\": {}, \"rps\": {:.2}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"p999_ms\": {:.3}}}",
                json_str(&p.server), json_str(&p.test), p.rtt_ms, p.clients, p.pipeline, p.requests, p.rps, p.p50, p.p99, p.p999
            )
        })
        .collect();
    format!("[\n{}\n]\n", rows.join(",\n"))
}

fn write_outputs(dir: &str, points: &[Point]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    let w = |name: &str, body: String| {
        std::fs::write(format!("{dir}/{name}"), body).map_err(|e| format!("{dir}/{name}: {e}"))
    };
    w("results.csv", csv(points))?;
    w("results.json", json(points))?;
    crate::chart::throughput(&format!("{dir}/throughput.svg"), points)?;
    crate::chart::latency(&format!("{dir}/latency.svg"), points)?;
    eprintln!("wrote {dir}/results.csv, results.json, throughput.svg, latency.svg");
    Ok(())
}
