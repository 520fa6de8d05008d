//! Slots moving between Sluice and redis-server 7.0.15 nodes with
//! `redis-cli --cluster`: a Sluice node joins a running redis-server
//! cluster (`--cluster add-node`) and takes slots with their keys
//! (`--cluster reshard`, MIGRATE from Redis into Sluice), then gives some
//! back (MIGRATE from Sluice into Redis); and the same with a redis-server
//! node joining a Sluice cluster. The keys cover every type in its small
//! and large encodings, TTLs and binary values; after each move every key
//! reads through the cluster (following `-MOVED`, and with `redis-cli -c`)
//! exactly as from a standalone redis-server given the same writes, type,
//! encoding, value and TTL alike.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::cluster::{bus_node_with, cli, create, have_redis, raw, spawn, REDIS_CLI};
use crate::common::wait_for;
use resp::Frame;
use testkit::{escape, scratch_dir, Client, ServerProc, TestServer, REDIS_SERVER};

/// A cluster node of `bin` with its bus on a free port of its own. The
/// node timeout is 2 s (Redis's default 15 s would make a new master wait
/// 5 s, its rejoin delay, before its state turns `ok`).
fn node(tag: &str, bin: &Path) -> ServerProc {
    bus_node_with(&format!("reshard-{tag}"), bin, &["--cluster-node-timeout", "2000"])
}

fn myid(p: &ServerProc) -> String {
    raw(&mut p.client(), &["CLUSTER", "MYID"]).lines().nth(1).unwrap().to_string()
}

fn dbsize(p: &ServerProc) -> usize {
    raw(&mut p.client(), &["DBSIZE"]).trim_start_matches(':').trim().parse().unwrap()
}

/// The writes whose keys the reshards move: `n` keys of each kind, in `n`
/// slots (the keys `kind:{i}` share a slot, so a reshard MIGRATEs them
/// together, ten keys per MIGRATE as redis-cli sends them). Lists, hashes, sets and sorted sets come small
/// (listpack, intset) and large (quicklist of several nodes, hashtable,
/// skiplist); strings as integers, short, 40 KB and binary; a stream with
/// a consumer group and a pending entry; a HyperLogLog; keys with a TTL.
fn writes(n: usize) -> Vec<Vec<Vec<u8>>> {
    let words = |line: String| line.split(' ').map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for i in 0..n {
        for line in [
            format!("SET int:{{{i}}} {}", i * 1000 + 7),
            format!("SET str:{{{i}}} value-{i}"),
            format!("SET big:{{{i}}} {}", "y".repeat(40_000 + i)),
            format!("SET ttl:{{{i}}} v{i} PX 100000000"),
            format!("RPUSH list:{{{i}}} a b c {i}"),
            format!("HSET hash:{{{i}}} f1 v1 f2 {i}"),
            format!("SADD intset:{{{i}}} 3 1 2 {i}"),
            format!("SADD set:{{{i}}} x y z{i}"),
            format!("ZADD zset:{{{i}}} 1 a 2.5 b -{i} c"),
            format!("PFADD hll:{{{i}}} a b c {i}"),
            format!("XADD stream:{{{i}}} 1-{} f {i}", i + 1),
            format!("XADD stream:{{{i}}} 2-0 g v"),
            format!("XGROUP CREATE stream:{{{i}}} grp 0"),
            format!("XREADGROUP GROUP grp alice COUNT 1 STREAMS stream:{{{i}}} >"),
            format!("EXPIRE stream:{{{i}}} 100000"),
        ] {
            out.push(words(line));
        }
        let mut list = words(format!("RPUSH biglist:{{{i}}}"));
        list.extend((0..600).map(|j| format!("e{j}-{}", "x".repeat(j % 90)).into_bytes()));
        let mut hash = words(format!("HSET bighash:{{{i}}}"));
        hash.extend((0..150).flat_map(|j| {
            [format!("f{j}").into_bytes(), format!("{}{j}", "v".repeat(j % 70)).into_bytes()]
        }));
        let mut zset = words(format!("ZADD bigzset:{{{i}}}"));
        zset.extend((0..150).flat_map(|j| {
            [(j as f64 * 0.25).to_string().into_bytes(), format!("m{j}").into_bytes()]
        }));
        let mut set = words(format!("SADD bigset:{{{i}}}"));
        set.extend((0..600).map(|j| format!("s{j}").into_bytes()));
        let binary =
            vec![b"SET".to_vec(), format!("bin:{{{i}}}").into_bytes(), b"\x00\xff\r\n".to_vec()];
        out.extend([list, hash, zset, set, binary]);
    }
    out
}

/// The kinds of key [`writes`] makes, `kind:{i}` for each `i`.
const KINDS: [&str; 16] = [
    "int", "str", "big", "ttl", "list", "hash", "intset", "set", "zset", "hll", "stream",
    "biglist", "bighash", "bigzset", "bigset", "bin",
];

/// The keys [`writes`] makes.
fn keys(n: usize) -> Vec<String> {
    (0..n).flat_map(|i| KINDS.iter().map(move |k| format!("{k}:{{{i}}}"))).collect()
}

/// The keys `p` serves (the others' slots answer `-MOVED`).
fn held(p: &ServerProc, n: usize) -> Vec<String> {
    let mut c = p.client();
    keys(n).into_iter().filter(|k| raw(&mut c, &["EXISTS", k]) == ":1\r\n").collect()
}

/// Checks that every kind of key is among `moved`, so that each
/// encoding went through a MIGRATE.
fn every_kind(moved: &[String], what: &str) {
    for kind in KINDS {
        let prefix = format!("{kind}:");
        assert!(moved.iter().any(|k| k.starts_with(&prefix)), "no {kind} key {what}: {moved:?}");
    }
}

/// Clients of a cluster's nodes by port; a command goes to the first node
/// and follows `-MOVED` to the one serving its key.
struct Routed {
    clients: HashMap<u16, Client>,
    first: u16,
}

impl Routed {
    fn new(first: &ServerProc) -> Routed {
        Routed { clients: HashMap::new(), first: first.port() }
    }

    fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        let mut port = self.first;
        for _ in 0..5 {
            let c = self.clients.entry(port).or_insert_with(|| Client::connect(port).unwrap());
            c.send(args).expect("send");
            let reply = c.read_frame().expect("reply");
            match &reply {
                Frame::Error(e) if e.starts_with(b"MOVED ") => {
                    let e = String::from_utf8_lossy(e);
                    port = e.rsplit(':').next().unwrap().parse().unwrap();
                }
                _ => return reply,
            }
        }
        panic!("redirected more than 5 times");
    }
}

fn render(f: &Frame) -> String {
    match f {
        Frame::Array(Some(a)) => {
            format!("[{}]", a.iter().map(render).collect::<Vec<_>>().join(","))
        }
        Frame::Bulk(Some(b)) | Frame::Simple(b) => format!("\"{}\"", escape(b)),
        Frame::Error(e) => format!("-{}", escape(e)),
        other => format!("{other:?}"),
    }
}

/// An array reply's elements in `group`s, sorted (a hash's or set's
/// order is its table's).
fn sorted(f: &Frame, group: usize) -> String {
    let Frame::Array(Some(items)) = f else { return render(f) };
    let mut chunks: Vec<String> =
        items.chunks(group).map(|c| c.iter().map(render).collect::<Vec<_>>().join(",")).collect();
    chunks.sort();
    chunks.join(",")
}

/// What a reader sees of `key`: type, encoding, value, and whether its
/// TTL is set (a reshard carries the remaining time, which moves on). A
/// string's `raw` and `embstr` are one: Redis itself loads a short `raw`
/// string (a HyperLogLog's) as `embstr` when RESTORE brings it, so which
/// one a node reports depends on whether the key moved.
fn key_view(call: &mut dyn FnMut(&[&str]) -> Frame, key: &str) -> String {
    let ty = render(&call(&["TYPE", key]));
    let enc = render(&call(&["OBJECT", "ENCODING", key])).replace("embstr", "raw");
    let ttl = match call(&["PTTL", key]) {
        Frame::Integer(t) if t > 0 => "ttl".to_string(),
        other => render(&other),
    };
    let value = match ty.as_str() {
        "\"string\"" => render(&call(&["GET", key])),
        "\"list\"" => render(&call(&["LRANGE", key, "0", "-1"])),
        "\"hash\"" => sorted(&call(&["HGETALL", key]), 2),
        "\"set\"" => sorted(&call(&["SMEMBERS", key]), 1),
        "\"zset\"" => render(&call(&["ZRANGE", key, "0", "-1", "WITHSCORES"])),
        "\"stream\"" => [
            render(&call(&["XRANGE", key, "-", "+"])),
            render(&call(&["XINFO", "STREAM", key])),
            render(&call(&["XINFO", "GROUPS", key])),
            render(&call(&["XPENDING", key, "grp"])),
        ]
        .join(" "),
        other => panic!("{key}: type {other}"),
    };
    format!("{key} {ty} {enc} {ttl} {value}")
}

/// Every key as a standalone redis-server holds it after [`writes`].
fn reference(n: usize) -> Vec<String> {
    let dir = scratch_dir("cluster-reshard-reference");
    let p = spawn(Path::new(REDIS_SERVER), &dir, &[]);
    let mut c = p.client();
    for w in writes(n) {
        let r = c.cmd(&w).unwrap();
        assert!(!r.starts_with(b"-"), "{w:?}: {}", String::from_utf8_lossy(&r));
    }
    let mut call = |a: &[&str]| {
        c.send(a).unwrap();
        c.read_frame().unwrap()
    };
    keys(n).iter().map(|k| key_view(&mut call, k)).collect()
}

/// Checks that the cluster holds every key once, as `want` says, readable
/// through any node; and that all nodes agree on the slots.
fn check_keys(nodes: &[ServerProc], n: usize, want: &[String], when: &str) {
    let total: usize = nodes.iter().map(dbsize).sum();
    assert_eq!(total, want.len(), "{when}: keys in the cluster");
    for (i, start) in nodes.iter().enumerate() {
        let mut routed = Routed::new(start);
        let mut call = |a: &[&str]| routed.call(a);
        // Each node reads a share of the keys, so every node's routing is used.
        for (j, k) in keys(n).iter().enumerate().filter(|(j, _)| j % nodes.len() == i) {
            assert_eq!(key_view(&mut call, k), want[j], "{when}: {k} read from {}", start.port());
        }
    }
    // redis-cli -c follows the redirections to the strings' values.
    for (i, start) in nodes.iter().enumerate() {
        let k = format!("str:{{{i}}}");
        let (ok, text) = cli(&["-c", "-p", &start.port().to_string(), "GET", &k]);
        assert!(ok && text.trim() == format!("value-{i}"), "{when}: redis-cli -c GET {k}: {text}");
    }
    let first = format!("127.0.0.1:{}", nodes[0].port());
    let (ok, text) = cli(&["--cluster", "check", &first]);
    assert!(
        ok && text.contains("[OK] All nodes agree about slots configuration.")
            && text.contains("[OK] All 16384 slots covered.")
            && !text.contains("[WARNING]"),
        "{when}: {text}"
    );
}

/// `redis-cli --cluster reshard` of `slots` slots from `from` (a node id
/// or `all`) to `to`, through `via`.
fn reshard(via: &ServerProc, from: &str, to: &str, slots: usize) {
    let via = format!("127.0.0.1:{}", via.port());
    let slots = slots.to_string();
    let (ok, text) = cli(&[
        "--cluster",
        "reshard",
        &via,
        "--cluster-from",
        from,
        "--cluster-to",
        to,
        "--cluster-slots",
        &slots,
        "--cluster-yes",
    ]);
    assert!(ok && !text.contains("ERR"), "reshard {from} -> {to}: {text}");
}

/// Three masters of `base` made a cluster by `redis-cli --cluster
/// create` and given the keys; a node of `newcomer` joins with `--cluster
/// add-node`, takes 2,048 slots from all three, then gives 1,024 back to
/// the first. The keys are checked after each step.
fn join_and_reshard(tag: &str, base: &Path, newcomer: &Path) {
    // Enough slots with keys that some are among those that move each way
    // (checked: every kind of key moves both ways).
    const N: usize = 40;
    const SLOTS_IN: usize = 2048;
    const SLOTS_BACK: usize = 1024;
    let want = reference(N);
    let mut nodes: Vec<ServerProc> = (0..3).map(|i| node(&format!("{tag}{i}"), base)).collect();
    create(&nodes);
    wait_for("cluster_state:ok", Duration::from_secs(30), || {
        nodes
            .iter()
            .all(|p| raw(&mut p.client(), &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    let mut routed = Routed::new(&nodes[0]);
    for w in writes(N) {
        let r = routed.call(&w);
        assert!(!matches!(r, Frame::Error(_)), "{w:?}: {r:?}");
    }
    drop(routed);
    check_keys(&nodes, N, &want, "before the join");

    let new = node(&format!("{tag}-new"), newcomer);
    let (ok, text) = cli(&[
        "--cluster",
        "add-node",
        &format!("127.0.0.1:{}", new.port()),
        &format!("127.0.0.1:{}", nodes[0].port()),
    ]);
    assert!(ok && text.contains("[OK] New node added correctly."), "{text}");
    nodes.push(new);
    // A new master turns `ok` after its rejoin delay (the node timeout):
    // until then it refuses the RESTORE-ASKINGs with -CLUSTERDOWN, as Redis does.
    wait_for("the new node known and ok everywhere", Duration::from_secs(30), || {
        nodes.iter().all(|p| {
            let info = raw(&mut p.client(), &["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:4")
        })
    });
    let new_id = myid(&nodes[3]);
    reshard(&nodes[0], "all", &new_id, SLOTS_IN);
    let taken = held(&nodes[3], N);
    every_kind(&taken, "moved onto the new node");
    check_keys(&nodes, N, &want, "after the new node took slots");

    let first_id = myid(&nodes[0]);
    reshard(&nodes[0], &new_id, &first_id, SLOTS_BACK);
    let kept = held(&nodes[3], N);
    assert!(!kept.is_empty(), "the new node kept some keys");
    let given: Vec<String> = taken.into_iter().filter(|k| !kept.contains(k)).collect();
    every_kind(&given, "moved off the new node");
    check_keys(&nodes, N, &want, "after the new node gave slots back");
}

#[test]
fn a_sluice_node_joins_a_redis_cluster_and_takes_slots_with_their_keys() {
    if !have_redis() || !Path::new(REDIS_CLI).is_file() {
        return;
    }
    join_and_reshard("r+s", Path::new(REDIS_SERVER), &TestServer::default_bin());
}

#[test]
fn a_redis_node_joins_a_sluice_cluster_and_takes_slots_with_their_keys() {
    if !have_redis() || !Path::new(REDIS_CLI).is_file() {
        return;
    }
    join_and_reshard("s+r", &TestServer::default_bin(), Path::new(REDIS_SERVER));
}

/// A client of a cluster that follows `-MOVED` and `-ASK` (with ASKING)
/// and retries `-TRYAGAIN` and `-CLUSTERDOWN`, as a cluster client
/// library does; one connection per node.
struct Follower {
    conns: HashMap<u16, Client>,
    first: u16,
    /// Replies other than the command's own, before it succeeded.
    retried: u64,
}

impl Follower {
    fn conn(&mut self, port: u16) -> &mut Client {
        self.conns.entry(port).or_insert_with(|| Client::connect(port).unwrap())
    }

    fn call(&mut self, args: &[&[u8]]) -> Frame {
        let mut port = self.first;
        let mut asking = false;
        for _ in 0..1000 {
            let c = self.conn(port);
            if asking {
                c.send(&[b"ASKING"]).unwrap();
                c.read_frame().unwrap();
            }
            c.send(args).unwrap();
            let reply = c.read_frame().unwrap();
            let Frame::Error(e) = &reply else { return reply };
            let e = String::from_utf8_lossy(e).into_owned();
            let target = || e.rsplit(':').next().unwrap().parse::<u16>().unwrap();
            self.retried += 1;
            asking = false;
            if e.starts_with("MOVED ") {
                port = target();
            } else if e.starts_with("ASK ") {
                port = target();
                asking = true;
            } else if e.starts_with("TRYAGAIN") || e.starts_with("CLUSTERDOWN") {
                std::thread::sleep(Duration::from_millis(5));
            } else {
                return reply;
            }
        }
        panic!("{args:?}: redirected 1000 times");
    }
}

/// `per_slot` keys in each of `slots` slots, all below `below`: hash tags
/// chosen by their slot.
fn keys_in_low_slots(prefix: &str, slots: usize, per_slot: usize, below: u16) -> Vec<String> {
    let tags = (0..).map(|t| format!("{prefix}{t}"));
    let tags = tags.filter(|t| store::slot::key_slot(t.as_bytes()) < below).take(slots);
    tags.flat_map(|t| (0..per_slot).map(move |j| format!("{{{t}}}:{j}"))).collect()
}

/// Figures of one reshard under a write load.
struct LoadRun {
    acked: u64,
    lost: Vec<String>,
    redirected: u64,
    secs: f64,
}

/// Three masters of `bin`; four writer threads each SET their 64 keys
/// (in 8 slots of the 1,024 that move) to increasing values, in a loop,
/// following redirections, while `redis-cli --cluster reshard` moves
/// 1,024 slots from the first master to the second. After, every key
/// must hold the last value a writer saw acknowledged.
fn reshard_under_writes(tag: &str, bin: &Path) -> LoadRun {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const WRITERS: usize = 4;
    let nodes: Vec<ServerProc> = (0..3).map(|i| node(&format!("{tag}{i}"), bin)).collect();
    create(&nodes);
    wait_for("cluster_state:ok", Duration::from_secs(30), || {
        nodes
            .iter()
            .all(|p| raw(&mut p.client(), &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    // redis-cli --cluster create gives the first master slots 0-5460;
    // the reshard takes its lowest 1,024.
    let stop = Arc::new(AtomicBool::new(false));
    let first = nodes[0].port();
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let stop = stop.clone();
            let keys = keys_in_low_slots(&format!("w{t}-"), 8, 8, 1024);
            std::thread::spawn(move || {
                let mut f = Follower { conns: HashMap::new(), first, retried: 0 };
                let mut last: HashMap<String, u64> = HashMap::new();
                let mut acked = 0u64;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for k in &keys {
                        n += 1;
                        let v = n.to_string();
                        let r = f.call(&[b"SET", k.as_bytes(), v.as_bytes()]);
                        assert_eq!(r, Frame::Simple(b"OK".to_vec()), "SET {k}");
                        last.insert(k.clone(), n);
                        acked += 1;
                    }
                }
                (last, acked, f.retried)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = std::time::Instant::now();
    let to = myid(&nodes[1]);
    let from = myid(&nodes[0]);
    reshard(&nodes[0], &from, &to, 1024);
    let secs = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let mut run = LoadRun { acked: 0, lost: Vec::new(), redirected: 0, secs };
    let mut check = Follower { conns: HashMap::new(), first, retried: 0 };
    for w in writers {
        let (last, acked, retried) = w.join().unwrap();
        run.acked += acked;
        run.redirected += retried;
        for (k, n) in last {
            let got = check.call(&[b"GET", k.as_bytes()]);
            if got != Frame::Bulk(Some(n.to_string().into_bytes())) {
                run.lost.push(format!("{k}: acknowledged {n}, read {}", render(&got)));
            }
        }
    }
    // No key is left behind on the node that gave its slots away.
    for slot in 0..1024 {
        let n = raw(&mut nodes[0].client(), &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
        if n != ":0\r\n" {
            run.lost.push(format!("slot {slot}: {} keys left on the source", n.trim()));
        }
    }
    run
}

#[test]
fn a_reshard_under_writes_loses_no_acknowledged_write() {
    if !have_redis() || !Path::new(REDIS_CLI).is_file() {
        return;
    }
    for (tag, bin) in [("load-r", REDIS_SERVER.into()), ("load-s", TestServer::default_bin())] {
        let run = reshard_under_writes(tag, &bin);
        eprintln!(
            "{tag}: reshard of 1024 slots under 4 writers: {:.1} s, {} writes acknowledged, {} \
             redirected, {} lost",
            run.secs,
            run.acked,
            run.redirected,
            run.lost.len()
        );
        assert!(run.lost.is_empty(), "{tag}: {:?}", run.lost);
    }
}
