//! `--cluster seed`: the load generator against a Redis Cluster. The slot
//! map comes from the client crate's `ClusterClient`; each benchmark
//! client holds one connection per loaded master and, per batch, writes
//! every master its own pipeline of the given depth (keys drawn only from
//! that master's slots), then reads each master's replies. A reply's
//! latency runs from the batch's first write until the client has read it
//! (the masters are read in turn), so one slow master shows in the tail
//! as it would for an application's split pipeline. A run loads every
//! master, or one alone (`only`: a shard's own figures).
//!
//! Keys: a test's `__rand_int__` placeholders all take one number per
//! request (so `MSET`'s ten keys are one key, one slot), drawn from
//! `0..keyspace` (`-r`, 100,000 when not given) among the numbers whose
//! key hashes to the master's slots. A test whose key is fixed (`LPUSH
//! mylist`) loads only that key's master; a keyless one (`PING`) every
//! master.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use client::slot::{command_slot, key_slot};
use client::{ClusterClient, Config, Connection, SlotMap};

use crate::load::{put_digits, Outcome, Plan, Rng, Workload, PLACEHOLDER};

/// Keys drawn from this many numbers when `-r` is not given.
pub const DEFAULT_KEYSPACE: u64 = 100_000;

/// Reads the slot map through `seed` (`host:port`).
pub fn discover(seed: &str, password: Option<&str>) -> Result<SlotMap, String> {
    let (h, p) = seed.rsplit_once(':').ok_or("--cluster is host:port")?;
    let mut cfg = Config::new(h, p.parse().map_err(|_| format!("bad port in {seed}"))?);
    cfg.password = password.map(str::to_string);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let c = ClusterClient::connect(&cfg).await.map_err(|e| format!("{seed}: {e}"))?;
        Ok(c.slot_map().clone())
    })
}

/// Which masters a test loads, and with which keys.
enum Target {
    /// Every request's key is `prefix <12 digits> suffix`; per master,
    /// the numbers whose key it serves.
    Keyed { per_node: Vec<Vec<u64>> },
    /// One fixed key: its master only.
    One(usize),
    /// No key: every master.
    All,
}

impl Target {
    fn new(map: &SlotMap, work: &Workload, keyspace: u64) -> Target {
        let n = map.nodes().len();
        let template: Option<(Vec<u8>, Vec<u8>)> = match work {
            Workload::Mix { .. } => Some((b"key:".to_vec(), Vec::new())),
            Workload::Fixed { bytes, rand, .. } => rand.first().map(|&o| {
                // The placeholder's argument: from its line's start to its end.
                let start = bytes[..o].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                let end =
                    o + bytes[o..].iter().position(|&b| b == b'\r').unwrap_or(bytes.len() - o);
                (bytes[start..o].to_vec(), bytes[o + PLACEHOLDER.len()..end].to_vec())
            }),
        };
        if let Some((prefix, suffix)) = template {
            let mut per_node = vec![Vec::new(); n];
            let mut key = prefix.clone();
            for i in 0..keyspace.max(1) {
                key.truncate(prefix.len());
                key.extend_from_slice(&[b'0'; 12]);
                let at = prefix.len();
                put_digits(&mut key[at..at + 12], i);
                key.extend_from_slice(&suffix);
                if let Some(node) = map.node_index(key_slot(&key)) {
                    per_node[node].push(i);
                }
            }
            return Target::Keyed { per_node };
        }
        let Workload::Fixed { bytes, .. } = work else { return Target::All };
        let args: Option<Vec<Vec<u8>>> = match resp::parse_frame(bytes) {
            Ok(Some((resp::Frame::Array(Some(items)), _))) => items
                .into_iter()
                .map(|f| match f {
                    resp::Frame::Bulk(Some(b)) => Some(b),
                    _ => None,
                })
                .collect(),
            _ => None,
        };
        match args.as_deref().and_then(command_slot).and_then(|s| map.node_index(s)) {
            Some(node) => Target::One(node),
            None => Target::All,
        }
    }

    fn loads(&self, node: usize) -> bool {
        match self {
            Target::Keyed { per_node } => !per_node[node].is_empty(),
            Target::One(n) => *n == node,
            Target::All => true,
        }
    }
}

/// Runs `plan` (its `addr` unused) against the masters at `addrs` (in
/// the map's order, or the proxies in front of them), all of them or
/// `only` one; `None` when the test loads none of them (a fixed key
/// served by another master).
pub fn run(
    plan: &Plan,
    addrs: &[SocketAddr],
    map: &SlotMap,
    work: &Workload,
    only: Option<usize>,
) -> Result<Option<Outcome>, String> {
    let target = Arc::new(Target::new(map, work, plan.keyspace.unwrap_or(DEFAULT_KEYSPACE)));
    let nodes: Vec<usize> =
        (0..addrs.len()).filter(|&n| target.loads(n) && only.is_none_or(|o| o == n)).collect();
    if nodes.is_empty() {
        return Ok(None);
    }
    let claimed = Arc::new(AtomicU64::new(0));
    let threads = plan.threads.clamp(1, plan.clients.max(1));
    let start = Instant::now();
    let deadline = plan.max_time.map(|d| start + d);
    let mut handles = Vec::new();
    for t in 0..threads {
        let n_clients = plan.clients / threads + usize::from(t < plan.clients % threads);
        let (plan, work, claimed, target) =
            (plan.clone(), work.clone(), claimed.clone(), target.clone());
        let conns: Vec<(usize, SocketAddr)> = nodes.iter().map(|&n| (n, addrs[n])).collect();
        handles.push(std::thread::spawn(move || -> Result<Vec<(Vec<u32>, u64)>, String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async move {
                let mut tasks = Vec::new();
                for c in 0..n_clients {
                    let seed = (t * 7919 + c * 104729 + 1) as u64;
                    let (plan, work, claimed, target, conns) = (
                        plan.clone(),
                        work.clone(),
                        claimed.clone(),
                        target.clone(),
                        conns.clone(),
                    );
                    tasks.push(tokio::spawn(async move {
                        client_loop(&plan, &conns, &work, &target, &claimed, deadline, seed).await
                    }));
                }
                let mut per: Vec<(Vec<u32>, u64)> = vec![(Vec::new(), 0); conns.len()];
                for h in tasks {
                    for (i, (l, e)) in h.await.map_err(|e| e.to_string())??.into_iter().enumerate()
                    {
                        per[i].0.extend(l);
                        per[i].1 += e;
                    }
                }
                Ok(per)
            })
        }));
    }
    let mut total =
        Outcome { requests: 0, errors: 0, elapsed: Default::default(), lat_us: Vec::new() };
    for h in handles {
        for (l, e) in h.join().map_err(|_| "load thread panicked")?? {
            total.lat_us.extend(l);
            total.errors += e;
        }
    }
    total.elapsed = start.elapsed();
    total.lat_us.sort_unstable();
    total.requests = total.lat_us.len() as u64;
    Ok(Some(total))
}

/// One benchmark client: a connection per loaded master (`conns`: map
/// index and address), batches until the requests or the time run out.
/// Returns per master its latencies (µs) and error replies.
async fn client_loop(
    plan: &Plan,
    conns: &[(usize, SocketAddr)],
    work: &Workload,
    target: &Target,
    claimed: &AtomicU64,
    deadline: Option<Instant>,
    seed: u64,
) -> Result<Vec<(Vec<u32>, u64)>, String> {
    let mut links = Vec::with_capacity(conns.len());
    for (_, a) in conns {
        let mut cfg = Config::new(&a.ip().to_string(), a.port());
        cfg.password = plan.password.clone();
        links.push(Connection::connect(&cfg).await.map_err(|e| format!("connect {a}: {e}"))?);
    }
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let p = plan.pipeline.max(1);
    let mut batches: Vec<Vec<u8>> = vec![Vec::new(); conns.len()];
    let mut per: Vec<(Vec<u32>, u64)> = vec![(Vec::new(), 0); conns.len()];
    let share = (p * conns.len()) as u64;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let first = claimed.fetch_add(share, Ordering::Relaxed);
        if first >= plan.requests {
            break;
        }
        let k = (plan.requests - first).min(share).div_ceil(conns.len() as u64) as usize;
        for (b, &(node, _)) in batches.iter_mut().zip(conns) {
            b.clear();
            let keys = match target {
                Target::Keyed { per_node } => per_node[node].as_slice(),
                _ => &[],
            };
            for _ in 0..k {
                let num = if keys.is_empty() {
                    0
                } else {
                    keys[(rng.next() % keys.len() as u64) as usize]
                };
                match work {
                    Workload::Fixed { bytes, rand, .. } => {
                        let at = b.len();
                        b.extend_from_slice(bytes);
                        for &o in rand {
                            put_digits(&mut b[at + o..at + o + PLACEHOLDER.len()], num);
                        }
                    }
                    Workload::Mix { get_pct, value } => {
                        let mut key = *b"key:000000000000";
                        put_digits(&mut key[4..], num);
                        if (rng.next() % 100) < *get_pct as u64 {
                            resp::write_command(b, &[b"GET".as_slice(), &key]);
                        } else {
                            resp::write_command(b, &[b"SET".as_slice(), &key, value]);
                        }
                    }
                }
            }
        }
        let t0 = Instant::now();
        for (l, b) in links.iter_mut().zip(&batches) {
            l.send_raw(b).await.map_err(|e| e.to_string())?;
        }
        for (l, (lat, errors)) in links.iter_mut().zip(per.iter_mut()) {
            for _ in 0..k {
                *errors += l.skip_replies(1).await.map_err(|e| e.to_string())? as u64;
                lat.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
        }
    }
    Ok(per)
}

#[cfg(test)]
mod tests {
    use super::*;
    use resp::Frame;

    /// Three masters: 0-5460, 5461-10922, 10923-16383.
    fn map() -> SlotMap {
        let range = |lo: i64, hi: i64, port: i64| {
            let node = Frame::Array(Some(vec![
                Frame::Bulk(Some(b"127.0.0.1".to_vec())),
                Frame::Integer(port),
            ]));
            Frame::Array(Some(vec![Frame::Integer(lo), Frame::Integer(hi), node]))
        };
        let reply = Frame::Array(Some(vec![
            range(0, 5460, 1),
            range(5461, 10922, 2),
            range(10923, 16383, 3),
        ]));
        SlotMap::from_cluster_slots(&reply, "127.0.0.1:1").unwrap()
    }

    #[test]
    fn keys_are_drawn_from_each_masters_slots() {
        let map = map();
        let work = Workload::command(&[b"SET", b"{t}key:__rand_int__:x", b"v"]);
        let Target::Keyed { per_node } = Target::new(&map, &work, 3000) else { panic!("keyed") };
        assert_eq!(per_node.iter().map(Vec::len).sum::<usize>(), 3000);
        // With a hash tag every key is in the tag's slot: one master.
        assert_eq!(per_node.iter().filter(|v| !v.is_empty()).count(), 1);
        let work = Workload::command(&[b"GET", b"key:__rand_int__"]);
        let Target::Keyed { per_node } = Target::new(&map, &work, 3000) else { panic!("keyed") };
        for (node, nums) in per_node.iter().enumerate() {
            assert!(nums.len() > 800, "master {node} has {} keys", nums.len());
            for &n in nums {
                let key = format!("key:{n:012}");
                assert_eq!(map.node_index(key_slot(key.as_bytes())), Some(node), "{key}");
            }
        }
        let lpush = Workload::command(&[b"LPUSH", b"mylist", b"x"]);
        let owner = map.node_index(key_slot(b"mylist")).unwrap();
        assert!(matches!(Target::new(&map, &lpush, 10), Target::One(n) if n == owner));
        assert!(matches!(Target::new(&map, &Workload::raw(b"PING\r\n"), 10), Target::All));
        assert!(matches!(Target::new(&map, &Workload::command(&[b"PING"]), 10), Target::All));
    }
}
