//! maxmemory and eviction against redis-server 7.0.15: the same writes on
//! both servers, then what each kept is checked against what the policy
//! promises (volatile policies spare keys without a TTL, LRU/LFU keep a
//! hot set, volatile-ttl evicts the nearest expiry first), used memory
//! stays at the limit, and the hit ratio of a Zipf workload with
//! maxmemory at half the data set is at least Redis's (minus a margin).
//! Which keys go is random on both sides, so only such properties are
//! compared; the exact propagation of an eviction is in
//! `tests/effects/eviction.txt`.

use std::path::Path;

use testkit::{Client, RedisServer, TestServer};

fn servers() -> Option<(RedisServer, TestServer)> {
    let redis = RedisServer::start()?;
    let sluice = TestServer::start_bin(Path::new(env!("CARGO_BIN_EXE_sluice-server")));
    Some((redis, sluice))
}

fn info_field(c: &mut Client, field: &str) -> i64 {
    let r = c.cmd(&["INFO", "everything"]).unwrap();
    let text = String::from_utf8_lossy(&r);
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .trim()
        .parse()
        .unwrap()
}

fn ok(c: &mut Client, args: &[&str]) {
    let r = c.cmd(args).unwrap();
    assert_eq!(r, b"+OK\r\n", "{args:?}: {}", String::from_utf8_lossy(&r));
}

/// Sends the commands in one write and returns their replies.
fn pipeline(c: &mut Client, cmds: &[Vec<String>]) -> Vec<Vec<u8>> {
    let mut req = Vec::new();
    for a in cmds {
        testkit::encode(a, &mut req);
    }
    c.send_raw(&req).unwrap();
    cmds.iter().map(|_| c.read_reply().unwrap()).collect()
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// Used memory with no limit and no keys: the base a limit is set above.
fn reset(c: &mut Client, policy: &str) -> i64 {
    ok(c, &["CONFIG", "SET", "maxmemory", "0"]);
    ok(c, &["FLUSHALL"]);
    ok(c, &["CONFIG", "SET", "maxmemory-policy", policy]);
    ok(c, &["CONFIG", "RESETSTAT"]);
    info_field(c, "used_memory")
}

const PERSISTENT: usize = 50;
const HOT: usize = 20;
const OLD: usize = 150;
const NEW: usize = 200;
/// Values of 10 KB: few keys per megabyte, so what a server spends per
/// key beside the value (Sluice's 1,024 lock stripes per database keep
/// their tables' capacity) stays small next to the budget.
const VALUE: usize = 10_000;
const BUDGET: i64 = 3_000_000;

fn set_batch(c: &mut Client, prefix: &str, n: usize, ttl: impl Fn(usize) -> Option<usize>) {
    let val = "x".repeat(VALUE);
    // 10 writes (100 KB) at a time: the query buffer counts as used memory.
    for chunk in (0..n).collect::<Vec<_>>().chunks(10) {
        let batch: Vec<Vec<String>> = chunk
            .iter()
            .map(|&i| {
                let key = format!("{prefix}:{i}");
                match ttl(i) {
                    Some(t) => cmd(&["SET", &key, &val, "EX", &t.to_string()]),
                    None => cmd(&["SET", &key, &val]),
                }
            })
            .collect();
        for r in pipeline(c, &batch) {
            assert!(!r.starts_with(b"-"), "{}", String::from_utf8_lossy(&r));
        }
    }
}

/// Reads the hot keys `times` times, 10 replies (100 KB) at a time: the
/// replies waiting in the output buffer count as used memory.
fn get_hot(c: &mut Client, times: usize) {
    for i in 0..HOT * times / 10 {
        let batch: Vec<Vec<String>> =
            (0..10).map(|j| cmd(&["GET", &format!("h:{}", (i * 10 + j) % HOT)])).collect();
        pipeline(c, &batch);
    }
}

/// How many of `prefix:0..n` exist.
fn alive(c: &mut Client, prefix: &str, n: usize) -> usize {
    let batch: Vec<Vec<String>> =
        (0..n).map(|i| cmd(&["EXISTS", &format!("{prefix}:{i}")])).collect();
    pipeline(c, &batch).iter().filter(|r| *r == b":1\r\n").count()
}

/// Phase one, under a 3 MB budget: 50 keys without a TTL, 20 hot keys
/// (read 20 times each, the longest TTL) and 150 old keys; 10 KB each.
fn first_phase(port: u16, policy: &str) -> i64 {
    let mut c = Client::connect(port).unwrap();
    let base = reset(&mut c, policy);
    // Ten samples per round (Redis's own tests' choice): the properties
    // below then hold on both servers run after run, not just mostly.
    ok(&mut c, &["CONFIG", "SET", "maxmemory-samples", "10"]);
    let max = base + BUDGET;
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &max.to_string()]);
    set_batch(&mut c, "p", PERSISTENT, |_| None);
    set_batch(&mut c, "h", HOT, |_| Some(90_000));
    set_batch(&mut c, "o", OLD, |i| Some(50_000 - i));
    get_hot(&mut c, 20);
    max
}

/// What one server kept.
#[derive(Debug)]
struct Kept {
    persistent: usize,
    hot: usize,
    old: usize,
    new: usize,
    evicted: i64,
    over_by: i64,
}

/// Phase two, at least a second later: the hot keys are read again, then
/// 200 new keys (the nearest TTLs) are written, 10 at a time, 2 MB in
/// all; memory is read after every 50 (and the PING that evicts for the
/// last write).
fn second_phase(port: u16, max: i64) -> Kept {
    let mut c = Client::connect(port).unwrap();
    get_hot(&mut c, 1);
    let mut over_by = 0;
    for b in 0..NEW / 50 {
        set_batch(&mut c, &format!("n{b}"), 50, |i| Some(40_000 - b * 50 - i));
        c.cmd(&["PING"]).unwrap();
        over_by = over_by.max(info_field(&mut c, "used_memory") - max);
    }
    let new = (0..NEW / 50).map(|b| alive(&mut c, &format!("n{b}"), 50)).sum();
    ok(&mut c, &["CONFIG", "SET", "maxmemory-samples", "5"]);
    let kept = Kept {
        persistent: alive(&mut c, "p", PERSISTENT),
        hot: alive(&mut c, "h", HOT),
        old: alive(&mut c, "o", OLD),
        new,
        evicted: info_field(&mut c, "evicted_keys"),
        over_by,
    };
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    kept
}

#[test]
fn each_policy_keeps_what_redis_keeps() {
    let Some((redis, sluice)) = servers() else { return };
    let both = [("redis", redis.port()), ("sluice", sluice.port())];
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let max: Vec<i64> = both.iter().map(|(_, port)| first_phase(*port, policy)).collect();
        if policy.ends_with("lru") {
            // The LRU clock counts seconds, on both servers.
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        for ((name, port), max) in both.iter().zip(max) {
            let k = second_phase(*port, max);
            let what = format!("{name} {policy}: {k:?}");
            eprintln!("{what}");
            assert!(k.evicted > 50, "{what}");
            // Used memory is brought back under the limit before the next
            // command (one pipelined batch may go above it).
            assert!(k.over_by < 2 * VALUE as i64, "{what}");
            let (old, new) = (k.old as f64 / OLD as f64, k.new as f64 / NEW as f64);
            if policy.starts_with("volatile") {
                assert_eq!(k.persistent, PERSISTENT, "{what}");
            }
            if policy.ends_with("lru") || policy.ends_with("lfu") || policy == "volatile-ttl" {
                // The sampling is approximate on both servers (late in the
                // run few old keys are left to sample); the random
                // policies keep about two thirds.
                assert!(k.hot >= HOT * 4 / 5, "{what}");
            }
            if policy.ends_with("lru") {
                // The old keys were idle longest.
                assert!(old < new, "{what}");
            }
            if policy == "volatile-ttl" {
                // The new keys expire first.
                assert!(new < old, "{what}");
            }
        }
    }
}

/// A Zipf(1) sampler over `n` ranks with a fixed xorshift seed: the same
/// sequence for both servers.
struct Zipf {
    cdf: Vec<f64>,
    x: u64,
}

impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for r in 1..=n {
            sum += 1.0 / r as f64;
            cdf.push(sum);
        }
        for v in &mut cdf {
            *v /= sum;
        }
        Zipf { cdf, x: 0x2545_F491_4F6C_DD1D }
    }

    fn next(&mut self) -> usize {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        let u = (self.x >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// GET of a Zipf-chosen key, SET on a miss (a cache), in batches of 100;
/// returns the hit ratio of the measured part.
fn hit_ratio(port: u16, policy: &str, keys: usize, warm: usize, ops: usize) -> f64 {
    let mut c = Client::connect(port).unwrap();
    let val = "v".repeat(2000);
    // The data set's size on this server: every key loaded, no limit.
    let base = reset(&mut c, policy);
    for chunk in (0..keys).collect::<Vec<_>>().chunks(50) {
        let batch: Vec<Vec<String>> =
            chunk.iter().map(|i| cmd(&["SET", &format!("key:{i}"), &val])).collect();
        pipeline(&mut c, &batch);
    }
    let data = info_field(&mut c, "used_memory") - base;
    let base = reset(&mut c, policy);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &(base + data / 2).to_string()]);
    let mut z = Zipf::new(keys);
    let (mut hits, mut total) = (0, 0);
    let mut done = 0;
    while done < warm + ops {
        let ks: Vec<String> = (0..100).map(|_| format!("key:{}", z.next())).collect();
        let gets: Vec<Vec<String>> = ks.iter().map(|k| cmd(&["GET", k])).collect();
        let replies = pipeline(&mut c, &gets);
        let mut sets = Vec::new();
        for (k, r) in ks.iter().zip(&replies) {
            let hit = !r.starts_with(b"$-1");
            if done >= warm {
                total += 1;
                hits += usize::from(hit);
            }
            if !hit {
                sets.push(cmd(&["SET", k, &val]));
            }
            done += 1;
        }
        for r in pipeline(&mut c, &sets) {
            assert_eq!(r, b"+OK\r\n");
        }
    }
    let dbsize = c.cmd(&["DBSIZE"]).unwrap();
    eprintln!(
        "{policy} on {port}: {} of {keys} keys kept, data {data}, evicted {}",
        String::from_utf8_lossy(&dbsize).trim(),
        info_field(&mut c, "evicted_keys")
    );
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    hits as f64 / total as f64
}

#[test]
fn zipf_hit_ratio_at_half_the_data_set_is_redis_s() {
    let Some((redis, sluice)) = servers() else { return };
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let r = hit_ratio(redis.port(), policy, 3000, 10_000, 20_000);
        let s = hit_ratio(sluice.port(), policy, 3000, 10_000, 20_000);
        eprintln!("{policy}: hit ratio redis {r:.3} sluice {s:.3}");
        assert!(s >= r - 0.03, "{policy}: sluice {s:.3} below redis {r:.3}");
    }
}

/// RESTORE with FREQ on one server, SAVE, and the other loads the file:
/// the counter survives both ways under an LFU policy (RDB's FREQ field).
#[test]
fn lfu_counters_travel_in_rdb_files_both_ways() {
    let dir = testkit::scratch_dir("evict-rdb");
    let lfu = ["--maxmemory-policy", "allkeys-lfu"];
    let freq = |c: &mut Client, key: &str| c.cmd(&["OBJECT", "FREQ", key]).unwrap();
    let make = |c: &mut Client, key: &str, f: &str| {
        ok(c, &["SET", "tmp", "hello"]);
        let dump = c.cmd(&["DUMP", "tmp"]).unwrap();
        // The bulk's payload, without its `$n\r\n` header and trailing CRLF.
        let start = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
        let payload = dump[start..dump.len() - 2].to_vec();
        assert_eq!(c.cmd(&["DEL", "tmp"]).unwrap(), b":1\r\n");
        let r =
            c.cmd(&[b"RESTORE".as_slice(), key.as_bytes(), b"0", &payload, b"FREQ", f.as_bytes()]);
        assert_eq!(r.unwrap(), b"+OK\r\n");
        ok(c, &["SAVE"]);
    };
    {
        let Some(redis) = RedisServer::start_with(&lfu, Some(&dir)) else { return };
        make(&mut redis.client(), "from_redis", "100");
    }
    {
        let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
        let sluice = TestServer::start_with(bin, &lfu, Some(&dir));
        let mut c = sluice.client();
        c.wait_loaded();
        assert_eq!(freq(&mut c, "from_redis"), b":100\r\n");
        make(&mut c, "from_sluice", "77");
    }
    let redis = RedisServer::start_with(&lfu, Some(&dir)).unwrap();
    let mut c = redis.client();
    c.wait_loaded();
    assert_eq!(freq(&mut c, "from_redis"), b":100\r\n");
    assert_eq!(freq(&mut c, "from_sluice"), b":77\r\n");
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `used_memory` after what a client does first (SELECT 9, a write,
/// FLUSHALL), with nothing stored.
fn empty_used(port: u16) -> i64 {
    let mut c = Client::connect(port).unwrap();
    ok(&mut c, &["SELECT", "9"]);
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["FLUSHALL"]);
    info_field(&mut c, "used_memory")
}

/// Bug: an empty Sluice reported 6.5 MB used where Redis reports 1 MB
/// (its 16 × 1,024 lock stripes were allocated at start-up, used or
/// not), so keys that fit under a `maxmemory` sized from Redis's figures
/// were evicted. A database's stripes now come with its first use.
#[test]
fn an_empty_server_uses_about_what_redis_does() {
    let Some((redis, sluice)) = servers() else { return };
    let (r, s) = (empty_used(redis.port()), empty_used(sluice.port()));
    assert!(s <= r + 512 * 1024, "empty: sluice {s} bytes used, redis {r}");
}

/// What Redis's own maxmemory unit starts from: 50 values of 100 KB fit
/// under `maxmemory 11mb` beside an empty server, none evicted.
#[test]
fn fifty_100kb_values_fit_under_11mb_as_in_redis() {
    let Some((redis, sluice)) = servers() else { return };
    for (name, port) in [("redis", redis.port()), ("sluice", sluice.port())] {
        let mut c = Client::connect(port).unwrap();
        ok(&mut c, &["SELECT", "9"]);
        ok(&mut c, &["CONFIG", "SET", "maxmemory", "11mb"]);
        ok(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        ok(&mut c, &["CONFIG", "RESETSTAT"]);
        for j in 0..50 {
            let r = c.cmd(&["SETRANGE", &j.to_string(), "100000", "x"]).unwrap();
            assert_eq!(r, b":100001\r\n", "{name}");
        }
        assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), b":50\r\n", "{name}");
        assert_eq!(info_field(&mut c, "evicted_keys"), 0, "{name}");
    }
}

/// Bug: a replica that stops reading makes the master's shared
/// replication buffer grow; Sluice counted that memory for eviction
/// (evicting keys, whose deletions the replica then also has to be
/// sent) and reported it nowhere. Redis reports what lies past
/// `repl-backlog-size` as `mem_clients_slaves` and leaves it out of
/// eviction (`mem_not_counted_for_evict`); both are checked on both
/// servers, with a limit 4 MB above what the rest uses.
#[test]
fn a_stalled_replica_s_buffer_is_reported_and_evicts_no_key() {
    use std::io::Write;
    let Some((redis, sluice)) = servers() else { return };
    for (name, port) in [("redis", redis.port()), ("sluice", sluice.port())] {
        let mut c = Client::connect(port).unwrap();
        for j in 0..100 {
            c.cmd(&["SETRANGE", &format!("key:{j}"), "100000", "asdf"]).unwrap();
        }
        ok(&mut c, &["CONFIG", "SET", "repl-diskless-sync", "no"]);
        ok(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "replica 0 0 0"]);
        // A replica that reads its payload, then stops reading (as the
        // unit's SIGSTOPped replica).
        let mut replica = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut req = Vec::new();
        testkit::encode(&["PSYNC", "?", "-1"], &mut req);
        replica.write_all(&req).unwrap();
        crate::common::read_payload(&mut replica);
        let start = std::time::Instant::now();
        while info_field(&mut c, "connected_slaves") != 1 {
            assert!(start.elapsed().as_secs() < 10, "{name}: the replica did not connect");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let used =
            info_field(&mut c, "used_memory") - info_field(&mut c, "mem_not_counted_for_evict");
        let limit = used + 4 * 1024 * 1024;
        ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        ok(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
        // About 13 MB of stream, which the replica's socket cannot take.
        let value = "A".repeat(100);
        for _ in 0..1000 {
            let batch: Vec<Vec<String>> =
                (0..100).map(|_| cmd(&["SETRANGE", "key:0", "0", &value])).collect();
            for r in pipeline(&mut c, &batch) {
                assert_eq!(r, b":100004\r\n", "{name}");
            }
        }
        let slaves = info_field(&mut c, "mem_clients_slaves");
        let not_counted = info_field(&mut c, "mem_not_counted_for_evict");
        assert!(slaves > 2 * 1024 * 1024, "{name}: mem_clients_slaves {slaves}");
        assert!(not_counted > 2 * 1024 * 1024, "{name}: mem_not_counted_for_evict {not_counted}");
        assert_eq!(info_field(&mut c, "evicted_keys"), 0, "{name}");
        assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), b":100\r\n", "{name}");
        // Bug: when the replica went, Sluice freed its part of the buffer
        // but went on reporting it (mem_total_replication_buffers and
        // mem_not_counted_for_evict stayed ~13 MB until the next write),
        // so the memory eviction counts fell by the buffer's size. As in
        // Redis (its maxmemory unit, "replica buffer don't induce
        // eviction"), what eviction counts does not move.
        let counted =
            info_field(&mut c, "used_memory") - info_field(&mut c, "mem_not_counted_for_evict");
        let killed = c.cmd(&["CLIENT", "KILL", "TYPE", "replica"]).unwrap();
        assert_eq!(killed, b":1\r\n", "{name}");
        // Gone when CLIENT KILL answers (Redis frees the client at once;
        // Sluice's replica threads ended after the reply, and the INFO
        // below raced them).
        assert_eq!(info_field(&mut c, "connected_slaves"), 0, "{name}");
        let after =
            info_field(&mut c, "used_memory") - info_field(&mut c, "mem_not_counted_for_evict");
        assert!(
            (after - counted).abs() < 512 * 1024,
            "{name}: counted for eviction {counted} before the kill, {after} after"
        );
        assert_eq!(info_field(&mut c, "mem_clients_slaves"), 0, "{name}");
        ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
        drop(replica);
    }
}

/// Bug: with `maxmemory-clients` set, replies piling up for clients that
/// do not read could make Sluice evict keys for memory the clients held.
/// Redis's processCommand closes clients over `maxmemory-clients`
/// (evictClients) before it evicts keys (performEvictions), so under
/// `maxmemory 11mb` with 5 MB of keys and a 3 MB client limit, twenty
/// clients that send `MGET` and never read get closed and no key goes
/// (Redis's own maxmemory unit, "client eviction: true"). Checked on
/// both servers.
#[test]
fn clients_over_maxmemory_clients_are_closed_before_keys_are_evicted() {
    use std::io::Write;
    let Some((redis, sluice)) = servers() else { return };
    for (name, port) in [("redis", redis.port()), ("sluice", sluice.port())] {
        let mut c = Client::connect(port).unwrap();
        ok(&mut c, &["CONFIG", "SET", "maxmemory", "11mb"]);
        ok(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        ok(&mut c, &["CONFIG", "SET", "maxmemory-clients", "3mb"]);
        ok(&mut c, &["CLIENT", "NO-EVICT", "on"]);
        ok(&mut c, &["CONFIG", "RESETSTAT"]);
        for j in 0..50 {
            c.cmd(&["SETRANGE", &j.to_string(), "100000", "x"]).unwrap();
        }
        assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), b":50\r\n", "{name}");
        let mut req = Vec::new();
        testkit::encode(&["MGET", "1"], &mut req);
        let mut readers: Vec<Option<std::net::TcpStream>> = (0..20)
            .map(|_| {
                let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_write_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
                Some(s)
            })
            .collect();
        let start = std::time::Instant::now();
        loop {
            for r in readers.iter_mut() {
                // A closed client's writes fail: it is left alone.
                if r.as_mut().is_some_and(|s| s.write_all(&req).is_err()) {
                    *r = None;
                }
            }
            let clients = info_field(&mut c, "evicted_clients");
            let keys = info_field(&mut c, "evicted_keys");
            if clients > 0 || keys > 0 || start.elapsed().as_secs() >= 20 {
                break;
            }
        }
        assert!(info_field(&mut c, "evicted_clients") > 0, "{name}: no client was evicted");
        assert_eq!(info_field(&mut c, "evicted_keys"), 0, "{name}");
        assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), b":50\r\n", "{name}");
        ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
        drop(readers);
    }
}
