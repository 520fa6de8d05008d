//! The job queue in a 3-master Sluice cluster (`redis-cli --cluster
//! create`): a queue lives in its name's slot, a job id hashes to its
//! queue's slot, so every job command is routed as a key command is
//! (`-MOVED` from the other masters, `-CROSSSLOT` for GETJOB over queues of
//! several slots, `redis-cli -c` following the redirections), and a slot
//! that holds jobs is not resharded away (jobs do not move with a slot):
//! `redis-cli --cluster reshard` stops at it, the jobs stay served, and
//! once they are acknowledged the reshard goes through.

use std::path::Path;
use std::time::Duration;

use crate::cluster::{bus_node, cli, create, have_redis, raw, REDIS_CLI};
use crate::common::wait_for;
use testkit::{ServerProc, TestServer};

/// Three Sluice masters made a cluster by `redis-cli --cluster create`.
fn three_masters(tag: &str) -> Vec<ServerProc> {
    let sluice = TestServer::default_bin();
    let nodes: Vec<ServerProc> = (0..3).map(|i| bus_node(&format!("{tag}{i}"), &sluice)).collect();
    create(&nodes);
    wait_agreed(&nodes);
    nodes
}

/// Every node says the cluster is ok and `redis-cli --cluster check`
/// finds them agreeing.
fn wait_agreed(nodes: &[ServerProc]) {
    let first = format!("127.0.0.1:{}", nodes[0].port());
    wait_for("the cluster to agree", Duration::from_secs(30), || {
        nodes
            .iter()
            .all(|n| raw(&mut n.client(), &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
            && cli(&["--cluster", "check", &first]).1.contains("[OK] All nodes agree")
    });
}

fn myid(n: &ServerProc) -> String {
    raw(&mut n.client(), &["CLUSTER", "MYID"]).lines().nth(1).unwrap_or("").to_string()
}

/// The node that serves `queue`'s slot: the one that does not redirect.
fn owner(nodes: &[ServerProc], queue: &str) -> usize {
    nodes
        .iter()
        .position(|n| !raw(&mut n.client(), &["QLEN", queue]).starts_with("-MOVED"))
        .expect("a node serves every slot")
}

/// A queue name in `slot`: `q:<n>` for the first `n` that hashes there.
fn slot_name(slot: u16) -> String {
    (0u32..)
        .map(|i| format!("q:{i}"))
        .find(|q| store::slot::key_slot(q.as_bytes()) == slot)
        .unwrap()
}

fn status(reply: &str) -> String {
    assert!(reply.starts_with('+'), "{reply}");
    reply[1..].trim_end().to_string()
}

#[test]
fn job_commands_are_routed_by_queue_and_by_job_id() {
    if !have_redis() || !Path::new(REDIS_CLI).is_file() {
        return;
    }
    let nodes = three_masters("jr");
    let queue = "orders";
    let slot = store::slot::key_slot(queue.as_bytes());
    let home = owner(&nodes, queue);
    let other = (home + 1) % 3;
    let moved = format!("-MOVED {slot} 127.0.0.1:{}\r\n", nodes[home].port());
    let mut away = nodes[other].client();
    let mut at = nodes[home].client();

    // Commands naming the queue: served by its slot's master only.
    for cmd in [
        &["ADDJOB", queue, "body", "0"][..],
        &["QLEN", queue],
        &["QPEEK", queue, "1"],
        &["QSTAT", queue],
        &["GETJOB", "NOHANG", "FROM", queue],
        &["PAUSE", queue, "none"],
        &["QSET", queue, "RATE", "0"],
    ] {
        assert_eq!(raw(&mut away, cmd), moved, "{cmd:?}");
    }
    assert_eq!(raw(&mut away, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), ":0\r\n");

    // A job id carries a hash tag of its queue's slot.
    let id = status(&raw(&mut at, &["ADDJOB", queue, "body", "0"]));
    assert_eq!(id.len(), 40, "{id}");
    assert!(id.starts_with("D-") && &id[22..23] == "{" && &id[26..27] == "}", "{id}");
    assert_eq!(raw(&mut away, &["CLUSTER", "KEYSLOT", &id]), format!(":{slot}\r\n"));
    assert_eq!(raw(&mut at, &["QLEN", queue]), ":1\r\n");
    // Commands naming a job: redirected by the id alone.
    for cmd in [
        &["SHOW", &id][..],
        &["WORKING", &id],
        &["NACK", &id],
        &["ENQUEUE", &id],
        &["DEQUEUE", &id],
        &["WAITJOB", &id, "TIMEOUT", "1"],
        &["ACKJOB", &id],
        &["FASTACK", &id],
        &["DELJOB", &id],
    ] {
        assert_eq!(raw(&mut away, cmd), moved, "{cmd:?}");
    }
    // Ids of two slots in one command are refused, as keys are.
    let q2 = slot_name((slot + 1) % 16384);
    let h2 = owner(&nodes, &q2);
    let id2 = status(&raw(&mut nodes[h2].client(), &["ADDJOB", &q2, "x", "0"]));
    let cross = "-CROSSSLOT Keys in request don't hash to the same slot\r\n";
    assert_eq!(raw(&mut at, &["ACKJOB", &id, &id2]), cross);
    assert_eq!(raw(&mut at, &["GETJOB", "NOHANG", "FROM", queue, &q2]), cross);
    assert_eq!(raw(&mut at, &["ADDJOB", queue, "x", "0", "DEADLETTER", &q2, "3"]), cross);
    assert_eq!(
        raw(&mut at, &["COMMAND", "GETKEYS", "GETJOB", "COUNT", "2", "FROM", "a", "b"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );

    // Hash tags: queues of one tag share a slot, so one GETJOB takes both.
    let (ta, tb) = ("{tenant7}:mail", "{tenant7}:sms");
    let mut t = nodes[owner(&nodes, ta)].client();
    status(&raw(&mut t, &["ADDJOB", ta, "m", "0"]));
    status(&raw(&mut t, &["ADDJOB", tb, "s", "0"]));
    let got = raw(&mut t, &["GETJOB", "NOHANG", "COUNT", "2", "FROM", ta, tb]);
    assert!(
        got.starts_with("*2\r\n") && got.contains("$1\r\nm\r\n") && got.contains("$1\r\ns\r\n")
    );

    // redis-cli -c follows the redirections for queue and id alike.
    let port = nodes[other].port().to_string();
    let (ok, text) = cli(&["-c", "-p", &port, "GETJOB", "NOHANG", "FROM", queue]);
    assert!(ok && text.contains(&id) && text.contains("body"), "{text}");
    let (ok, text) = cli(&["-c", "-p", &port, "ACKJOB", &id]);
    assert!(ok && text.trim() == "1", "{text}");
    assert_eq!(raw(&mut at, &["QLEN", queue]), ":0\r\n");
    assert_eq!(raw(&mut at, &["SHOW", &id]), "$-1\r\n");
}

#[test]
fn a_slot_holding_jobs_is_not_resharded_away() {
    if !have_redis() || !Path::new(REDIS_CLI).is_file() {
        return;
    }
    let nodes = three_masters("jm");
    // The source's lowest slot: the first one `reshard` takes from it.
    let (src, dst) = (0, 1);
    let slots = raw(&mut nodes[src].client(), &["CLUSTER", "NODES"]);
    let mine = slots.lines().find(|l| l.contains("myself")).unwrap();
    let first: u16 = mine.split(' ').nth(8).unwrap().split('-').next().unwrap().parse().unwrap();
    let queue = slot_name(first);
    let mut s = nodes[src].client();
    let id = status(&raw(&mut s, &["ADDJOB", &queue, "keep me", "0"]));
    let fetched = raw(&mut s, &["GETJOB", "NOHANG", "FROM", &queue]);
    assert!(fetched.contains("keep me"), "{fetched}");

    // Asked by hand: neither migrating nor giving the slot away.
    let (sid, did) = (myid(&nodes[src]), myid(&nodes[dst]));
    let f = first.to_string();
    let refused = raw(&mut s, &["CLUSTER", "SETSLOT", &f, "MIGRATING", &did]);
    assert!(refused
        .starts_with(&format!("-ERR Can't migrate hashslot {first} while I still hold jobs")));
    let refused = raw(&mut s, &["CLUSTER", "SETSLOT", &f, "NODE", &did]);
    assert_eq!(
        refused,
        format!(
            "-ERR Can't assign hashslot {first} to a different node while I still hold jobs for \
             this hash slot.\r\n"
        )
    );

    // redis-cli's reshard stops at that slot: nothing moved, the job (an
    // active one, fetched and not acknowledged) is still there.
    let addr = format!("127.0.0.1:{}", nodes[src].port());
    let reshard = |n: &str| {
        cli(&[
            "--cluster",
            "reshard",
            &addr,
            "--cluster-from",
            &sid,
            "--cluster-to",
            &did,
            "--cluster-slots",
            n,
            "--cluster-yes",
        ])
    };
    let (ok, text) = reshard("10");
    assert!(!ok && text.contains("still hold jobs"), "{text}");
    assert!(raw(&mut s, &["SHOW", &id]).contains("keep me"));
    assert!(!raw(&mut s, &["QLEN", &queue]).starts_with("-MOVED"));
    // The target was left importing the slot: closed by hand, as after
    // any reshard that stopped.
    assert_eq!(raw(&mut nodes[dst].client(), &["CLUSTER", "SETSLOT", &f, "STABLE"]), "+OK\r\n");

    // Acknowledged, the slot moves; a consumer blocked on the queue
    // meanwhile is sent after it, as a client blocked on a key is.
    assert_eq!(raw(&mut s, &["ACKJOB", &id]), ":1\r\n");
    // Without jobs the slot may migrate, and while it does a job command
    // is sent on with -ASK, as a command on a missing key is.
    let mut d = nodes[dst].client();
    assert_eq!(raw(&mut d, &["CLUSTER", "SETSLOT", &f, "IMPORTING", &sid]), "+OK\r\n");
    assert_eq!(raw(&mut s, &["CLUSTER", "SETSLOT", &f, "MIGRATING", &did]), "+OK\r\n");
    let ask = format!("-ASK {first} 127.0.0.1:{}\r\n", nodes[dst].port());
    assert_eq!(raw(&mut s, &["QLEN", &queue]), ask);
    assert_eq!(raw(&mut s, &["ACKJOB", &id]), ask);
    assert_eq!(raw(&mut d, &["ASKING"]), "+OK\r\n");
    assert_eq!(raw(&mut d, &["QLEN", &queue]), ":0\r\n");
    for n in [&mut s, &mut d] {
        assert_eq!(raw(n, &["CLUSTER", "SETSLOT", &f, "STABLE"]), "+OK\r\n");
    }
    let mut consumer = nodes[src].client();
    consumer.send(&["GETJOB", "TIMEOUT", "0", "FROM", &queue]).unwrap();
    wait_for("the consumer to block", Duration::from_secs(10), || {
        raw(&mut s, &["INFO", "clients"]).contains("blocked_clients:1")
    });
    let (ok, text) = reshard("10");
    assert!(ok, "{text}");
    wait_agreed(&nodes);
    let moved = format!("-MOVED {first} 127.0.0.1:{}\r\n", nodes[dst].port());
    assert_eq!(raw(&mut s, &["QLEN", &queue]), moved);
    consumer.set_timeout(Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&consumer.read_reply().unwrap()), moved);
    let id = status(&raw(&mut d, &["ADDJOB", &queue, "new home", "0"]));
    assert_eq!(raw(&mut d, &["CLUSTER", "KEYSLOT", &id]), format!(":{first}\r\n"));
}
