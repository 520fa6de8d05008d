//! Failovers of a 3-master/3-replica cluster under a write load, Sluice
//! against redis-server 7.0.15 with the same code: writer threads count
//! the writes each node acknowledged while a replica takes over its
//! master, first by `CLUSTER FAILOVER` (the manual failover: the master
//! pauses its clients until the replica has its whole stream), then by
//! SIGKILL of the new master (its replica, the old master, is elected
//! after the node timeout). After each, every key must hold the last
//! value a writer saw acknowledged (or a later one whose reply the
//! failover cut off): an acknowledged write missing is lost.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::{bus_node_with, cli, have_redis, raw, REDIS_CLI};
use crate::common::{incrs_missing, incrs_until_refused, wait_for};
use resp::Frame;
use testkit::{Client, ServerProc, TestServer, REDIS_SERVER};

const WRITERS: usize = 4;
const KEYS_PER_WRITER: usize = 48;

/// A cluster node of `bin`, its bus on a free port of its own, a node
/// timeout of one second (how soon a killed master is failed).
fn node(tag: &str, bin: &Path) -> ServerProc {
    let extra = [
        "--cluster-node-timeout",
        "1000",
        "--appendonly",
        "no",
        // The replicas' first full syncs start at once.
        "--repl-diskless-sync-delay",
        "0",
    ];
    bus_node_with(&format!("fo-load-{tag}"), bin, &extra)
}

/// A node's `CLUSTER NODES` line for itself, or "" when it does not answer.
fn my_line(port: u16) -> String {
    let Ok(mut c) = Client::connect(port) else { return String::new() };
    c.set_timeout(Duration::from_secs(2));
    match c.cmd(&["CLUSTER", "NODES"]) {
        Ok(r) => {
            let text = String::from_utf8_lossy(&r).into_owned();
            text.lines().find(|l| l.contains("myself")).unwrap_or("").to_string()
        }
        Err(_) => String::new(),
    }
}

/// A cluster client as an application's library is: it follows `-MOVED`
/// and `-ASK`, retries `-TRYAGAIN` and `-CLUSTERDOWN`, and when a node
/// stops answering it drops the connection and starts again from
/// another node. A write whose connection broke before its reply is not
/// acknowledged (it may or may not have been applied).
struct Writer {
    ports: Vec<u16>,
    conns: HashMap<u16, Client>,
    /// The node each slot was last found on (`-MOVED`).
    slots: HashMap<u16, u16>,
    start: usize,
    redirected: u64,
    broken: u64,
}

impl Writer {
    fn new(ports: &[u16], start: usize) -> Writer {
        let (conns, slots) = (HashMap::new(), HashMap::new());
        let start = start % ports.len();
        Writer { ports: ports.to_vec(), conns, slots, start, redirected: 0, broken: 0 }
    }

    /// Sends `args` (whose key is `args[1]`) where its slot was last seen.
    fn call(&mut self, args: &[&[u8]]) -> Option<Frame> {
        let slot = store::slot::key_slot(args[1]);
        let mut port = self.slots.get(&slot).copied().unwrap_or(self.ports[self.start]);
        let mut asking = false;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let reply = self.send(port, asking, args);
            asking = false;
            let Some(reply) = reply else {
                self.broken += 1;
                self.conns.remove(&port);
                self.slots.retain(|_, p| *p != port);
                // Whatever the write did is unknown: not acknowledged.
                self.start = (self.start + 1) % self.ports.len();
                return None;
            };
            let Frame::Error(e) = &reply else { return Some(reply) };
            let e = String::from_utf8_lossy(e).into_owned();
            let target = || e.rsplit(':').next().unwrap().parse::<u16>().unwrap();
            self.redirected += 1;
            if e.starts_with("MOVED ") {
                port = target();
                self.slots.insert(slot, port);
            } else if e.starts_with("ASK ") {
                port = target();
                asking = true;
            } else if e.starts_with("TRYAGAIN") || e.starts_with("CLUSTERDOWN") {
                std::thread::sleep(Duration::from_millis(5));
            } else {
                return Some(reply);
            }
        }
        None
    }

    fn send(&mut self, port: u16, asking: bool, args: &[&[u8]]) -> Option<Frame> {
        let c = match self.conns.entry(port) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let Ok(mut c) = Client::connect(port) else {
                    std::thread::sleep(Duration::from_millis(10));
                    return None;
                };
                c.set_timeout(Duration::from_secs(10));
                e.insert(c)
            }
        };
        if asking {
            c.send(&[b"ASKING"]).ok()?;
            c.read_frame().ok()?;
        }
        c.send(args).ok()?;
        c.read_frame().ok()
    }
}

/// What the writers did: per key, the values acknowledged.
#[derive(Default)]
struct Load {
    acked: HashMap<String, Vec<u64>>,
    redirected: u64,
    broken: u64,
}

/// Writer threads SETting their keys (spread over every slot range) to
/// increasing values until `stop`.
fn start_writers(ports: &[u16], stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<Load>> {
    (0..WRITERS)
        .map(|t| {
            let stop = stop.clone();
            let ports = ports.to_vec();
            std::thread::spawn(move || {
                let keys: Vec<String> = (0..KEYS_PER_WRITER).map(|i| format!("w{t}:{i}")).collect();
                let mut w = Writer::new(&ports, t);
                let mut load = Load::default();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for k in &keys {
                        n += 1;
                        let v = n.to_string();
                        if w.call(&[b"SET", k.as_bytes(), v.as_bytes()])
                            == Some(Frame::Simple(b"OK".to_vec()))
                        {
                            load.acked.entry(k.clone()).or_default().push(n);
                        }
                    }
                }
                load.redirected = w.redirected;
                load.broken = w.broken;
                load
            })
        })
        .collect()
}

/// Figures of one failover under load.
#[derive(Debug)]
struct Run {
    /// Until the replica called itself master, ms.
    took_ms: u128,
    acked: usize,
    lost: usize,
    redirected: u64,
    broken: u64,
}

/// Stops the writers and reads every key back through the cluster: an
/// acknowledged value above the one read is a lost write.
fn finish(
    stop: &Arc<AtomicBool>,
    writers: Vec<std::thread::JoinHandle<Load>>,
    ports: &[u16],
    took_ms: u128,
) -> Run {
    stop.store(true, Ordering::Relaxed);
    let mut run = Run { took_ms, acked: 0, lost: 0, redirected: 0, broken: 0 };
    let mut reader = Writer::new(ports, 0);
    for w in writers {
        let load = w.join().unwrap();
        run.redirected += load.redirected;
        run.broken += load.broken;
        for (k, vals) in load.acked {
            run.acked += vals.len();
            let got = loop {
                if let Some(f) = reader.call(&[b"GET", k.as_bytes()]) {
                    break f;
                }
            };
            let read = match got {
                Frame::Bulk(Some(b)) => String::from_utf8(b).unwrap().parse::<u64>().unwrap(),
                _ => 0,
            };
            run.lost += vals.iter().filter(|&&v| v > read).count();
        }
    }
    run
}

/// Waits until every node in `ports` answers `cluster_state:ok`.
fn all_ok(ports: &[u16]) {
    wait_for("cluster_state:ok everywhere", Duration::from_secs(30), || {
        ports.iter().all(|&p| {
            Client::connect(p)
                .and_then(|mut c| c.cmd(&["CLUSTER", "INFO"]))
                .is_ok_and(|r| String::from_utf8_lossy(&r).contains("cluster_state:ok"))
        })
    });
}

/// A cluster of `bin` made by `redis-cli --cluster create --cluster-replicas
/// 1`; under the writers' load, first `CLUSTER FAILOVER` on a replica, then
/// SIGKILL of that new master. Returns both runs' figures.
fn failovers_under_load(tag: &str, bin: &Path) -> (Run, Run) {
    let mut nodes: Vec<Option<ServerProc>> =
        (0..6).map(|i| Some(node(&format!("{tag}{i}"), bin))).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.as_ref().unwrap().port()).collect();
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut args = vec!["--cluster", "create"];
    args.extend(addrs.iter().map(|s| s.as_str()));
    args.extend(["--cluster-replicas", "1", "--cluster-yes"]);
    let (ok, text) = cli(&args);
    assert!(ok && text.contains("[OK] All 16384 slots covered."), "{text}");
    wait_for("the cluster agrees", Duration::from_secs(30), || {
        cli(&["--cluster", "check", &addrs[0]]).1.contains("[OK] All nodes agree")
    });
    all_ok(&ports);
    let id = |i: usize| my_line(ports[i]).split(' ').next().unwrap_or("").to_string();
    // A replica and its master.
    let r = (0..6).find(|&i| my_line(ports[i]).contains("myself,slave")).expect("a replica");
    let master_id = my_line(ports[r]).split(' ').nth(3).unwrap().to_string();
    let m = (0..6).find(|&i| id(i) == master_id).expect("its master");
    let live: Vec<u16> = ports.clone();
    let in_sync = |i: usize| {
        let info = raw(&mut Client::connect(ports[i]).unwrap(), &["INFO", "replication"]);
        info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0")
    };
    // A manual failover waits for the replica to have its master's
    // stream: not for its first sync.
    wait_for("the replica in sync", Duration::from_secs(30), || in_sync(r));

    // 1. CLUSTER FAILOVER on the replica, under load.
    let stop = Arc::new(AtomicBool::new(false));
    let writers = start_writers(&live, &stop);
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let mut rc = nodes[r].as_ref().unwrap().client();
    assert_eq!(raw(&mut rc, &["CLUSTER", "FAILOVER"]), "+OK\r\n");
    wait_for("the replica takes over", Duration::from_secs(30), || {
        my_line(ports[r]).contains("myself,master")
    });
    let took = t0.elapsed().as_millis();
    wait_for("the old master follows it", Duration::from_secs(30), || {
        my_line(ports[m]).contains("myself,slave")
    });
    all_ok(&live);
    std::thread::sleep(Duration::from_millis(300));
    let manual = finish(&stop, writers, &live, took);

    // 2. SIGKILL of the new master, under load: the old master, now its
    // replica, takes over once it is failed.
    wait_for("the old master in sync", Duration::from_secs(30), || in_sync(m));
    let stop = Arc::new(AtomicBool::new(false));
    let writers = start_writers(&live, &stop);
    std::thread::sleep(Duration::from_millis(500));
    let killed = nodes[r].take().unwrap();
    let t0 = Instant::now();
    unsafe { libc::kill(killed.pid() as i32, libc::SIGKILL) };
    wait_for("the old master takes over again", Duration::from_secs(30), || {
        my_line(ports[m]).contains("myself,master")
    });
    let took = t0.elapsed().as_millis();
    let rest: Vec<u16> = ports.iter().copied().filter(|&p| p != ports[r]).collect();
    all_ok(&rest);
    std::thread::sleep(Duration::from_millis(300));
    let kill = finish(&stop, writers, &rest, took);
    drop(killed);
    (manual, kill)
}

#[test]
fn failovers_under_writes_lose_no_acknowledged_write_redis_keeps() {
    if !have_redis() || !Path::new(REDIS_CLI).is_file() {
        return;
    }
    let mut runs = Vec::new();
    for (tag, bin) in [("r", REDIS_SERVER.into()), ("s", TestServer::default_bin())] {
        let (manual, kill) = failovers_under_load(tag, &bin);
        for (what, run) in [("CLUSTER FAILOVER", &manual), ("SIGKILL of the master", &kill)] {
            eprintln!(
                "{}: {what} under {WRITERS} writers: replica master after {} ms, {} writes \
                 acknowledged, {} lost, {} redirected, {} cut off",
                if tag == "r" { "redis" } else { "sluice" },
                run.took_ms,
                run.acked,
                run.lost,
                run.redirected,
                run.broken
            );
        }
        runs.push((manual, kill));
    }
    let (redis, sluice) = (&runs[0], &runs[1]);
    // A manual failover waits for the replica to have the master's whole
    // stream before it takes over: neither server loses a write.
    assert_eq!(redis.0.lost, 0, "redis, CLUSTER FAILOVER: {:?}", redis.0);
    assert_eq!(sluice.0.lost, 0, "sluice, CLUSTER FAILOVER: {:?}", sluice.0);
    // A killed master's replica has every write acknowledged before it
    // (the reply goes out after the stream is on the replica's socket).
    assert_eq!(sluice.1.lost, 0, "sluice, SIGKILL: {:?} (redis {:?})", sluice.1, redis.1);
    assert!(sluice.0.acked > 0 && sluice.1.acked > 0);
}

/// A master holding every slot and its replica; `rounds` manual failovers
/// back and forth, each under pipelined INCRs to the master of the moment.
/// Returns the INCRs acknowledged and, over every key, how many of them
/// the new master did not have.
fn failovers_back_and_forth(tag: &str, bin: &Path, rounds: usize) -> (u64, u64) {
    let nodes = [node(&format!("pp-{tag}a"), bin), node(&format!("pp-{tag}b"), bin)];
    let ports = [nodes[0].port(), nodes[1].port()];
    let mut a = nodes[0].client();
    assert_eq!(raw(&mut a, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "+OK\r\n");
    let cport_b = raw(&mut nodes[1].client(), &["CONFIG", "GET", "cluster-port"]);
    let cport_b = cport_b.lines().nth(4).unwrap().to_string();
    let port_b = ports[1].to_string();
    assert_eq!(raw(&mut a, &["CLUSTER", "MEET", "127.0.0.1", &port_b, &cport_b]), "+OK\r\n");
    let id_a = my_line(ports[0]).split(' ').next().unwrap().to_string();
    wait_for("the nodes know each other", Duration::from_secs(30), || {
        Client::connect(ports[1])
            .and_then(|mut c| c.cmd(&["CLUSTER", "NODES"]))
            .is_ok_and(|r| String::from_utf8_lossy(&r).contains(&id_a))
    });
    assert_eq!(raw(&mut nodes[1].client(), &["CLUSTER", "REPLICATE", &id_a]), "+OK\r\n");
    all_ok(&ports);
    let (mut acked, mut lost) = (0, 0);
    let mut master = 0;
    for round in 0..rounds {
        let replica = 1 - master;
        wait_for("the replica in sync", Duration::from_secs(30), || {
            let info = raw(&mut Client::connect(ports[replica]).unwrap(), &["INFO", "replication"]);
            info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0")
        });
        let writers = incrs_until_refused(ports[master], &format!("pp{round}"));
        std::thread::sleep(Duration::from_millis(200));
        let mut rc = Client::connect(ports[replica]).unwrap();
        eprintln!("{tag}: round {round}: failover to {}", ports[replica]);
        assert_eq!(raw(&mut rc, &["CLUSTER", "FAILOVER"]), "+OK\r\n");
        wait_for("the replica takes over", Duration::from_secs(30), || {
            my_line(ports[replica]).contains("myself,master")
        });
        let mut nm = Client::connect(ports[replica]).unwrap();
        let (a, l) = incrs_missing(&mut nm, writers);
        acked += a;
        lost += l;
        wait_for("the old master follows", Duration::from_secs(30), || {
            my_line(ports[master]).contains("myself,slave")
        });
        master = replica;
        // A master votes for a replica of its own again only after twice
        // the node timeout (Redis's voted_time rule, Sluice's too).
        std::thread::sleep(Duration::from_millis(2200));
    }
    (acked, lost)
}

/// Each manual failover hands over every write the master acknowledged
/// before it paused, with clients pipelining writes on several
/// connections (so on several of Sluice's threads) when it does: the
/// offset the master reports as paused is read once the writes that had
/// passed the pause check are in the stream (`Shared::quiesce`).
#[test]
fn manual_failovers_under_pipelined_writes_hand_over_every_write_as_redis_does() {
    if !have_redis() {
        return;
    }
    for (tag, bin) in [("r", PathBuf::from(REDIS_SERVER)), ("s", TestServer::default_bin())] {
        let (acked, lost) = failovers_back_and_forth(tag, &bin, 6);
        eprintln!("{tag}: 6 manual failovers under pipelined INCRs: {acked} acked, {lost} lost");
        assert!(acked > 0, "{tag}: nothing was written");
        assert_eq!(lost, 0, "{tag}: acknowledged INCRs missing on the new master");
    }
}
