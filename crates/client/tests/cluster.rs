//! `ClusterClient` against a 3-master cluster of redis-server 7.0.15 and
//! one of sluice-server, both made by `redis-cli --cluster create`; the
//! same test body for both: keys on every master through one pipeline
//! with the replies in order, then a slot migrated between the client's
//! pipelines (MIGRATING/IMPORTING and MIGRATE: the `-ASK` path; `SETSLOT
//! NODE`: the `-MOVED` path) with no error reaching the caller and no key
//! lost; a multi-key command meeting the half-moved slot (`-TRYAGAIN`)
//! retried until the slot has moved.

use std::path::Path;
use std::time::{Duration, Instant};

use client::slot::key_slot;
use client::{ClusterClient, Config, Frame, Pipeline};
use testkit::cluster::{create, have_cli, myid, node, raw};
use testkit::{oracle_required, Client, ServerProc, TestServer, REDIS_SERVER};

fn tools() -> bool {
    let ok = Path::new(REDIS_SERVER).is_file() && have_cli();
    if !ok {
        assert!(!oracle_required(), "redis-server and redis-cli are needed");
        eprintln!("SKIPPED: redis-server or redis-cli missing");
    }
    ok
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(Some(s.as_bytes().to_vec()))
}

fn dbsize(p: &ServerProc) -> usize {
    raw(&mut p.client(), &["DBSIZE"]).trim_start_matches(':').trim().parse().unwrap()
}

/// Every reply of `got` is `Ok`, and equal to `want` where given.
fn assert_replies(got: &[client::Reply], want: &[Option<Frame>], when: &str) {
    assert_eq!(got.len(), want.len(), "{when}: reply count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        match (g, w) {
            (Err(e), _) => panic!("{when}: command {i} failed: {e}"),
            (Ok(g), Some(w)) => assert_eq!(g, w, "{when}: reply {i}"),
            (Ok(_), None) => {}
        }
    }
}

/// Queues `GET` of every key and returns the expected replies.
fn gets(p: &mut Pipeline, kv: &[(String, String)]) -> Vec<Option<Frame>> {
    kv.iter()
        .map(|(k, v)| {
            p.cmd(&["GET", k]);
            Some(bulk(v))
        })
        .collect()
}

/// The test body, for a cluster of three masters of `bin`.
async fn follows_the_cluster(tag: &str, bin: &Path) {
    let nodes: Vec<ServerProc> = (0..3).map(|i| node(&format!("{tag}{i}"), bin, &[])).collect();
    create(&nodes);
    let mut cfg = Config::new("127.0.0.1", nodes[1].port());
    cfg.timeout = Some(Duration::from_secs(10));
    let mut c = ClusterClient::connect(&cfg).await.expect("connect to the cluster");
    let addr = |p: &ServerProc| format!("127.0.0.1:{}", p.port());
    let mut masters: Vec<String> = c.slot_map().nodes().to_vec();
    masters.sort();
    let mut want: Vec<String> = nodes.iter().map(addr).collect();
    want.sort();
    assert_eq!(masters, want, "the slot map names the three masters");

    // One pipeline over every master: SETs, a keyless PING, GETs, a
    // cross-slot MSET; replies in the pipeline's order.
    let kv: Vec<(String, String)> =
        (0..300).map(|i| (format!("key:{i}"), format!("value-{i}"))).collect();
    let mut p = Pipeline::new();
    let mut expect = Vec::new();
    for (k, v) in &kv {
        p.cmd(&["SET", k, v]);
        expect.push(Some(Frame::Simple(b"OK".to_vec())));
    }
    p.cmd(&["PING"]);
    expect.push(Some(Frame::Simple(b"PONG".to_vec())));
    expect.extend(gets(&mut p, &kv));
    for (i, (k, _)) in kv.iter().enumerate().take(30) {
        p.cmd(&["APPEND", k, "!"]);
        expect.push(Some(Frame::Integer(format!("value-{i}!").len() as i64)));
    }
    let got = c.exec(&p).await.expect("the pipeline");
    assert_replies(&got, &expect, "first pipeline");
    // Our slot rule is the servers': nothing was redirected.
    assert_eq!((c.stats().moved, c.stats().ask), (0, 0), "{:?}", c.stats());
    let mut p = Pipeline::new();
    p.cmd(&["MSET", "key:0", "a", "key:1", "b"]);
    let got = c.exec(&p).await.unwrap();
    assert!(matches!(&got[0], Err(e) if e.starts_with("CROSSSLOT")), "{got:?}");
    for n in &nodes {
        assert!(dbsize(n) > 30, "every master holds its share of the keys");
    }
    assert_eq!(nodes.iter().map(dbsize).sum::<usize>(), kv.len());
    let kv: Vec<(String, String)> = kv
        .into_iter()
        .enumerate()
        .map(|(i, (k, v))| if i < 30 { (k, format!("{v}!")) } else { (k, v) })
        .collect();

    // A slot on its way from A to B, its keys written before and during.
    let slot = key_slot(b"{moving}");
    let a_addr = c.slot_map().node(slot).expect("the slot is served").to_string();
    let a = nodes.iter().find(|n| addr(n) == a_addr).unwrap();
    let b = nodes.iter().find(|n| addr(n) != a_addr).unwrap();
    let (a_id, b_id) = (myid(a), myid(b));
    let mut moving: Vec<(String, String)> =
        (0..40).map(|i| (format!("{{moving}}:{i}"), format!("m{i}"))).collect();
    let mut p = Pipeline::new();
    for (k, v) in &moving {
        p.cmd(&["SET", k, v]);
    }
    assert_replies(&c.exec(&p).await.unwrap(), &vec![None; moving.len()], "the slot's keys");
    let slot_s = slot.to_string();
    assert_eq!(
        raw(&mut b.client(), &["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &a_id]),
        "+OK\r\n"
    );
    assert_eq!(
        raw(&mut a.client(), &["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &b_id]),
        "+OK\r\n"
    );
    let (a_port, b_port) = (a.port(), b.port());
    let to_b = |keys: &[String]| migrate(a_port, b_port, keys);
    let first_half: Vec<String> = moving[..20].iter().map(|(k, _)| k.clone()).collect();
    to_b(&first_half);

    // Mid-migration: half the keys are on B (-ASK), half still on A; new
    // keys go to B (-ASK); the rest of the cluster as before.
    let mut p = Pipeline::new();
    let mut expect = gets(&mut p, &moving);
    for i in 0..10 {
        let (k, v) = (format!("{{moving}}:new{i}"), format!("n{i}"));
        p.cmd(&["SET", &k, &v]);
        expect.push(Some(Frame::Simple(b"OK".to_vec())));
        moving.push((k, v));
    }
    expect.extend(gets(&mut p, &kv[..50]));
    let (asked, moved) = (c.stats().ask, c.stats().moved);
    assert_replies(&c.exec(&p).await.unwrap(), &expect, "while the slot migrates");
    assert!(c.stats().ask >= asked + 30, "followed -ASK: {:?}", c.stats());
    assert_eq!(c.stats().moved, moved, "-ASK leaves the map alone");
    assert_eq!(c.slot_map().node(slot), Some(a_addr.as_str()));

    // A multi-key command over keys on both sides gets -TRYAGAIN until
    // the slot has moved: a thread moves the rest of the slot and gives
    // it to B once A has answered one; the command then meets -MOVED.
    let mover = {
        let (slot_s, b_id) = (slot_s.clone(), b_id.clone());
        std::thread::spawn(move || {
            let mut ca = Client::connect(a_port).unwrap();
            let start = Instant::now();
            while !raw(&mut ca, &["INFO", "errorstats"]).contains("errorstat_TRYAGAIN") {
                assert!(start.elapsed() < Duration::from_secs(10), "no -TRYAGAIN seen");
                std::thread::sleep(Duration::from_millis(2));
            }
            loop {
                let left = raw(&mut ca, &["CLUSTER", "GETKEYSINSLOT", &slot_s, "100"]);
                let keys: Vec<String> =
                    left.lines().filter(|l| l.starts_with('{')).map(str::to_string).collect();
                if keys.is_empty() {
                    break;
                }
                migrate(a_port, b_port, &keys);
            }
            for port in [b_port, a_port] {
                let mut c = Client::connect(port).unwrap();
                assert_eq!(raw(&mut c, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &b_id]), "+OK\r\n");
            }
        })
    };
    let mut p = Pipeline::new();
    p.cmd(&["MGET", "{moving}:0", "{moving}:39"]);
    let both = Frame::Array(Some(vec![bulk("m0"), bulk("m39")]));
    let mut expect = vec![Some(both)];
    expect.extend(gets(&mut p, &kv[..50]));
    let tried = c.stats().tryagain;
    assert_replies(&c.exec(&p).await.unwrap(), &expect, "a multi-key command while the slot moves");
    mover.join().expect("the slot moved");
    assert!(c.stats().tryagain > tried, "retried -TRYAGAIN: {:?}", c.stats());
    assert!(c.stats().moved > moved, "followed -MOVED: {:?}", c.stats());

    // Every key of the slot from B, through the refreshed map.
    let mut p = Pipeline::new();
    let mut expect = gets(&mut p, &moving);
    p.cmd(&["INCR", "{moving}:counter"]);
    expect.push(Some(Frame::Integer(1)));
    expect.extend(gets(&mut p, &kv));
    assert_replies(&c.exec(&p).await.unwrap(), &expect, "after SETSLOT NODE");
    assert_eq!(c.slot_map().node(slot), Some(addr(b).as_str()), "the map was read again");

    // No key lost: every key once, the slot's on B.
    let total = kv.len() + moving.len() + 1;
    assert_eq!(nodes.iter().map(dbsize).sum::<usize>(), total);
    let count = raw(&mut b.client(), &["CLUSTER", "COUNTKEYSINSLOT", &slot_s]);
    assert_eq!(count, format!(":{}\r\n", moving.len() + 1));
    // A fresh client finds the key (through -MOVED when its seed has not
    // heard of the move yet: the bus spreads it).
    let mut fresh = ClusterClient::connect(&cfg).await.unwrap();
    assert_eq!(fresh.cmd(&["GET", "{moving}:new3"]).await.unwrap(), bulk("n3"));
}

/// `MIGRATE`s `keys` from the node on `from` to the one on `to`.
fn migrate(from: u16, to: u16, keys: &[String]) {
    let to = to.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &to, "", "0", "5000", "KEYS"];
    args.extend(keys.iter().map(|k| k.as_str()));
    assert_eq!(raw(&mut Client::connect(from).unwrap(), &args), "+OK\r\n");
}

#[tokio::test]
async fn follows_a_redis_cluster() {
    if tools() {
        follows_the_cluster("client-redis", Path::new(REDIS_SERVER)).await;
    }
}

#[tokio::test]
async fn follows_a_sluice_cluster() {
    if let (true, Some(bin)) = (tools(), TestServer::bin_or_skip()) {
        follows_the_cluster("client-sluice", &bin).await;
    }
}
