//! What operators read is true: Debian's `prometheus-redis-exporter`
//! scraping sluice-server finds the same series as scraping
//! redis-server 7.0.15 after the same workload, and every series that
//! is non-zero on Redis is non-zero on Sluice (save the few below,
//! each with its reason). The exporter reads INFO ALL, CONFIG GET,
//! SLOWLOG, LATENCY, CLIENT LIST and the keyspace: a field Sluice
//! printed as a constant 0 shows up here as a flat line on a dashboard.
//!
//! The exporter binary: `$SLUICE_EXPORTER`, else
//! `/usr/bin/prometheus-redis-exporter` (scripts/test unpacks Debian's
//! package without installing its service and sets the variable).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::cmd;
use testkit::{free_port, oracle_required, Client, RedisServer, TestServer};

/// Series that Redis reports non-zero and Sluice may report as 0, and why.
const MAY_BE_ZERO: &[(&str, &str)] = &[
    // Redis builds its Lua VM at start-up (32 KiB before any script);
    // Sluice builds it for the first script. After one EVAL both are
    // non-zero, which the workload below checks by running one.
    ("redis_memory_used_lua_bytes", "Lua VM built on first use"),
    // The last slow-log entry's duration in whole microseconds: the
    // exporter's own last command, which Sluice may run in under 1 µs.
    ("redis_last_slow_execution_duration_seconds", "a command under 1 µs"),
    // A command's total time, the sum of each call's whole microseconds
    // (as Redis adds them): the workload's one or two SELECTs may each
    // take Sluice under 1 µs on a quiet machine (Redis: about 1 µs).
    ("redis_commands_duration_seconds_total", "calls under 1 µs each"),
    ("redis_latency_percentiles_usec_sum", "calls under 1 µs each"),
];

fn exporter_bin() -> Option<PathBuf> {
    let p = std::env::var_os("SLUICE_EXPORTER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus-redis-exporter"));
    p.is_file().then_some(p)
}

struct Exporter(Child);

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP GET of /metrics; the body.
fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let (head, rest) = body.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| rest.to_string())
}

/// The `redis_*` series of a scrape: name with labels → value. Labels
/// that name the instance (versions, pids, ports, run ids) are dropped
/// so the two servers' series can be compared.
fn series(body: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter(|l| l.starts_with("redis_") && !l.starts_with("redis_instance_info"))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse::<f64>().ok()?))
        })
        .collect()
}

/// Runs the same workload on a server, then scrapes it through a fresh
/// exporter process.
fn workload_and_scrape(bin: &PathBuf, port: u16) -> BTreeMap<String, f64> {
    let mut c = Client::connect(port).expect("connect");
    // Enough round trips that each server's CPU counters (sampled per
    // scheduler tick) move.
    for i in 0..3000 {
        let k = format!("key:{i}");
        cmd(&mut c, &["SET", &k, "value"]);
        if i % 2 == 0 {
            cmd(&mut c, &["EXPIRE", &k, "1000"]);
        }
    }
    cmd(&mut c, &["RPUSH", "list", "a", "b", "c"]);
    cmd(&mut c, &["HSET", "hash", "f", "v"]);
    cmd(&mut c, &["SELECT", "1"]);
    cmd(&mut c, &["SET", "other-db", "v"]);
    cmd(&mut c, &["SELECT", "0"]);
    cmd(&mut c, &["EVAL", "return redis.call('GET', KEYS[1])", "1", "key:1"]);
    cmd(&mut c, &["GET", "missing"]);
    cmd(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    cmd(&mut c, &["GET", "key:2"]);
    cmd(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    cmd(&mut c, &["DEBUG", "SLEEP", "0.01"]);
    // Off again: on a loaded machine a background pass (expiry) can
    // cross 1 ms on either server, and its series would differ by chance.
    cmd(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "0"]);
    // A client with something in its output buffer and one subscriber.
    let mut sub = Client::connect(port).expect("connect");
    sub.send(&["SUBSCRIBE", "news"]).unwrap();
    sub.read_frame().unwrap();
    cmd(&mut c, &["PUBLISH", "news", "hello"]);

    let web = free_port();
    let child = Command::new(bin)
        .args(["-redis.addr", &format!("redis://127.0.0.1:{port}")])
        .args(["-web.listen-address", &format!("127.0.0.1:{web}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the exporter");
    let _exporter = Exporter(child);
    let start = Instant::now();
    loop {
        if let Some(body) = scrape(web) {
            let s = series(&body);
            if s.get("redis_up") == Some(&1.0) {
                return s;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the exporter never scraped {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn exporter_finds_redis_series_with_values() {
    let Some(exporter) = exporter_bin() else {
        if oracle_required() && std::env::var_os("SLUICE_EXPORTER").is_some() {
            panic!("SLUICE_EXPORTER is set but is not a file");
        }
        eprintln!("skipped: no prometheus-redis-exporter");
        return;
    };
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let sluice = TestServer::start();
    // Both up for over a second, so uptime_in_seconds is 1 or more on both.
    std::thread::sleep(Duration::from_millis(1200));
    let r = workload_and_scrape(&exporter, redis.port());
    let s = workload_and_scrape(&exporter, sluice.port());

    let names = |m: &BTreeMap<String, f64>| -> BTreeSet<String> { m.keys().cloned().collect() };
    let only_redis: Vec<_> = names(&r).difference(&names(&s)).cloned().collect();
    let only_sluice: Vec<_> = names(&s).difference(&names(&r)).cloned().collect();
    assert!(only_redis.is_empty(), "series only Redis has: {only_redis:#?}");
    assert!(only_sluice.is_empty(), "series only Sluice has: {only_sluice:#?}");

    let allowed: BTreeSet<&str> = MAY_BE_ZERO.iter().map(|(n, _)| *n).collect();
    let flat: Vec<_> = r
        .iter()
        .filter(|(k, v)| **v != 0.0 && s.get(*k) == Some(&0.0))
        .filter(|(k, _)| !allowed.contains(k.split('{').next().unwrap_or(k)))
        .map(|(k, v)| format!("{k} (Redis {v})"))
        .collect();
    assert!(flat.is_empty(), "non-zero on Redis, 0 on Sluice: {flat:#?}");
    // The time series allowed a zero above are not zero as a whole.
    for name in ["redis_commands_duration_seconds_total", "redis_latency_percentiles_usec_sum"] {
        let total: f64 = s.iter().filter(|(k, _)| k.starts_with(name)).map(|(_, v)| v).sum();
        assert!(total > 0.0, "{name} is 0 for every command on Sluice");
    }
    assert!(r.len() > 150, "the exporter found only {} series on Redis", r.len());
}
