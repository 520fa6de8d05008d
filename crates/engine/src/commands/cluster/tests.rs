//! The CLUSTER family through the in-process harness: standalone
//! refusals, and a cluster-mode node with no bus (replies checked
//! against redis-server 7.0.15 started with `cluster-enabled yes`).

use std::sync::Arc;

use crate::subsystems::config::{lookup, Config};
use crate::tests::Harness;
use crate::Shared;

// Replies below are redis-server 7.0.15's (cluster-enabled no).
#[test]
fn cluster_subcommands_answer_cluster_support_disabled() {
    let mut h = Harness::new();
    let disabled = "-ERR This instance has cluster support disabled\r\n";
    for cmd in [&["CLUSTER", "HELP"][..], &["CLUSTER", "RESET", "HARD"], &["cluster", "info"]] {
        assert_eq!(h.run(cmd), disabled);
    }
    assert_eq!(h.run(&["CLUSTER", "KEYSLOT", "foo"]), disabled);
    for cmd in ["READONLY", "READWRITE", "ASKING"] {
        assert_eq!(h.run(&[cmd]), disabled);
    }
    assert_eq!(h.run(&["ASKING", "x"]), "-ERR wrong number of arguments for 'asking' command\r\n");
    assert_eq!(h.run(&["CLUSTER", "foo"]), "-ERR unknown subcommand 'foo'. Try CLUSTER HELP.\r\n");
    assert_eq!(
        h.run(&["CLUSTER", "INFO", "x"]),
        "-ERR wrong number of arguments for 'cluster|info' command\r\n"
    );
    assert_eq!(h.run(&["CLUSTER"]), "-ERR wrong number of arguments for 'cluster' command\r\n");
}

#[test]
fn cluster_reset_is_refused_inside_a_script() {
    let mut h = Harness::new();
    assert_eq!(
        h.run(&["EVAL", "return redis.call('cluster','reset','hard')", "0"]),
        "-ERR This Redis command is not allowed from script script: \
         cc1ece19697daeb65ef8cb9c07a31814e0e3b28a, on @user_script:1.\r\n"
    );
}

/// A node with `cluster-enabled yes`, its `nodes.conf` in a scratch
/// directory, listening (as far as the state knows) on port 7000.
fn node(tag: &str) -> (Harness, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sluice-cluster-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = Config { enable_debug_command: "yes".into(), ..Config::default() };
    config.dir = dir.display().to_string();
    config.set(lookup(b"cluster-enabled").unwrap(), &[b"yes"]).unwrap();
    let shared: Arc<Shared> = Shared::new(config, crate::commands::table());
    crate::subsystems::cluster::enable(&shared, 7000).unwrap();
    let sess = shared.connect("127.0.0.1:1".into(), "127.0.0.1:7000".into(), -1);
    (Harness { shared, sess }, dir)
}

/// Lets the state be computed as the cron would, past Redis's delays.
fn settle(h: &Harness) {
    let c = h.shared.cluster.get().unwrap();
    // The state was first computed when the slots were added (a command
    // that changes them computes it at once): past the writable and
    // rejoin delays from then.
    let now = crate::core::shared::unix_ms();
    c.state.write().update(now + 10_000, true, 15_000);
}

#[test]
fn a_fresh_node_reports_itself_as_redis_does() {
    let (mut h, dir) = node("fresh");
    let id = h.run(&["CLUSTER", "MYID"]);
    let id = id.lines().nth(1).unwrap().to_string();
    assert_eq!(id.len(), 40);
    assert_eq!(h.run(&["CLUSTER", "NODES"]), {
        let line = format!("{id} :7000@17000 myself,master - 0 0 0 connected\n");
        format!("${}\r\n{line}\r\n", line.len())
    });
    let info = h.run(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_state:fail\r\ncluster_slots_assigned:0\r\n"), "{info}");
    assert!(info.contains("cluster_known_nodes:1\r\ncluster_size:1\r\n"), "{info}");
    assert!(h.run(&["INFO", "cluster"]).contains("cluster_enabled:1"));
    assert_eq!(h.run(&["READONLY"]), "+OK\r\n");
    assert_eq!(h.run(&["ASKING"]), "+OK\r\n");
    // Keys of unassigned slots.
    assert_eq!(h.run(&["GET", "foo"]), "-CLUSTERDOWN Hash slot not served\r\n");
    assert_eq!(h.run(&["SELECT", "1"]), "-ERR SELECT is not allowed in cluster mode\r\n");
    // Written as Redis writes it, and read back as the same node.
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
    assert!(conf.starts_with(&format!("{id} :7000@17000 myself,master - 0 0 0 connected\n")));
    assert!(conf.ends_with("vars currentEpoch 0 lastVoteEpoch 0\n"), "{conf}");
}

#[test]
fn slot_assignment_errors_in_redis_order() {
    let (mut h, _dir) = node("assign");
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTSRANGE", "0", "100", "200", "300"]), "+OK\r\n");
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTS", "5000"]), "+OK\r\n");
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTS", "1"]), "-ERR Slot 1 is already busy\r\n");
    assert_eq!(
        h.run(&["CLUSTER", "DELSLOTS", "1", "1"]),
        "-ERR Slot 1 specified multiple times\r\n"
    );
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTS", "16384"]), "-ERR Invalid or out of range slot\r\n");
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTS", "x"]), "-ERR Invalid or out of range slot\r\n");
    assert_eq!(
        h.run(&["CLUSTER", "ADDSLOTSRANGE", "5", "1"]),
        "-ERR start slot number 5 is greater than end slot number 1\r\n"
    );
    assert_eq!(
        h.run(&["CLUSTER", "ADDSLOTSRANGE", "1", "2", "3"]),
        "-ERR wrong number of arguments for 'cluster|addslotsrange' command\r\n"
    );
    assert_eq!(h.run(&["CLUSTER", "DELSLOTS", "6000"]), "-ERR Slot 6000 is already unassigned\r\n");
    let nodes = h.run(&["CLUSTER", "NODES"]);
    assert!(nodes.contains("connected 0-100 200-300 5000\n"), "{nodes}");
    let info = h.run(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_slots_assigned:203\r\ncluster_slots_ok:203\r\n"), "{info}");
    assert_eq!(
        h.run(&["CLUSTER", "SET-CONFIG-EPOCH", "-1"]),
        "-ERR Invalid config epoch specified: -1\r\n"
    );
    assert_eq!(h.run(&["CLUSTER", "SET-CONFIG-EPOCH", "5"]), "+OK\r\n");
    assert_eq!(
        h.run(&["CLUSTER", "SET-CONFIG-EPOCH", "7"]),
        "-ERR Node config epoch is already non-zero\r\n"
    );
    assert_eq!(h.run(&["CLUSTER", "BUMPEPOCH"]), "+STILL 5\r\n");
}

#[test]
fn keys_route_by_slot_once_the_cluster_is_ok() {
    let (mut h, _dir) = node("route");
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "+OK\r\n");
    // Covered, but the state is not computed yet: down.
    assert_eq!(h.run(&["SET", "foo", "bar"]), "-CLUSTERDOWN The cluster is down\r\n");
    // Cross-slot is found before the state is looked at.
    assert_eq!(
        h.run(&["MSET", "a", "1", "b", "2"]),
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
    settle(&h);
    assert_eq!(h.run(&["SET", "foo", "bar"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "{foo}x", "1"]), "+OK\r\n");
    assert_eq!(h.run(&["CLUSTER", "KEYSLOT", "foo"]), ":12182\r\n");
    assert_eq!(h.run(&["CLUSTER", "COUNTKEYSINSLOT", "12182"]), ":2\r\n");
    assert_eq!(h.run(&["CLUSTER", "COUNTKEYSINSLOT", "16384"]), "-ERR Invalid slot\r\n");
    assert_eq!(
        h.run(&["CLUSTER", "COUNTKEYSINSLOT", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(h.run(&["CLUSTER", "GETKEYSINSLOT", "12182", "1"]).matches('\n').count(), 3);
    assert_eq!(
        h.run(&["CLUSTER", "GETKEYSINSLOT", "12182", "-1"]),
        "-ERR Invalid slot or number of keys\r\n"
    );
    assert_eq!(
        h.run(&["CLUSTER", "FLUSHSLOTS"]),
        "-ERR DB must be empty to perform CLUSTER FLUSHSLOTS.\r\n"
    );
    assert_eq!(
        h.run(&["CLUSTER", "RESET"]),
        "-ERR CLUSTER RESET can't be called with master nodes containing keys\r\n"
    );
    // A slot served by nobody inside a transaction: the queued command
    // is refused, EXEC aborts.
    assert_eq!(h.run(&["CLUSTER", "DELSLOTS", "15495"]), "+OK\r\n");
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "a", "1"]), "-CLUSTERDOWN Hash slot not served\r\n");
    assert_eq!(
        h.run(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // A slot unassigned leaves the cluster down at once (full coverage),
    // for every key (redis-server answers so: it/cluster.rs).
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "foo", "1"]), "-CLUSTERDOWN The cluster is down\r\n");
    assert_eq!(
        h.run(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTS", "15495"]), "+OK\r\n");
    settle(&h);
    // The slot goes away between queueing and EXEC: EXEC's reply is the
    // redirection, and the transaction is gone.
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "foo", "1"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["CLUSTER", "DELSLOTS", "12182"]), "+QUEUED\r\n");
    h.shared.cluster.get().unwrap().state.write().set_owner(12182, None);
    assert_eq!(h.run(&["EXEC"]), "-CLUSTERDOWN Hash slot not served\r\n");
    assert_eq!(h.run(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
    // A script touching a key of a slot nobody serves.
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTS", "12182"]), "+OK\r\n");
    assert_eq!(h.run(&["CLUSTER", "DELSLOTS", "15495"]), "+OK\r\n");
    assert_eq!(
        h.run(&["EVAL", "return redis.call('get','a')", "0"]),
        "-ERR Script attempted to access a non local key in a cluster node script: \
         eaeaa27fd219f13108fd9dea9f5ef7513173e803, on @user_script:1.\r\n"
    );
}

/// A node serving every slot, holding `foo` (slot 12182), which knows a
/// second master at 10.0.0.2:7002 (named by 40 `b`s, returned).
fn serving_node_with_a_peer(tag: &str) -> (Harness, std::path::PathBuf, String) {
    use crate::subsystems::cluster::{flag, Node};
    let (mut h, dir) = node(tag);
    assert_eq!(h.run(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "+OK\r\n");
    settle(&h);
    let other = [b'b'; 40];
    h.shared.cluster.get().unwrap().state.write().add(Node {
        ip: "10.0.0.2".into(),
        port: 7002,
        ..Node::new(other, flag::MASTER)
    });
    assert_eq!(h.run(&["SET", "foo", "v1"]), "+OK\r\n");
    (h, dir, String::from_utf8(other.to_vec()).unwrap())
}

/// Routes `argv` for `w`'s client as a connection does, then has `h` do
/// what a MIGRATE of `foo` does on the source (slot 12182 marked
/// MIGRATING to `other`, the key deleted), then locks and runs the
/// command at the door. Returns what the door said and the reply.
fn routed_then_migrated(
    h: &mut Harness,
    w: &mut Harness,
    other: &str,
    argv: &[&[u8]],
) -> (crate::core::door::Ran, String) {
    use crate::core::dispatch::{self, Caller};
    use crate::core::door::{self, Hold};
    let shared = w.shared.clone();
    let spec = door::lookup(&shared, argv).ok().unwrap();
    assert!(dispatch::check(&shared, &mut w.sess, spec, argv, Caller::Client).is_ok());
    assert_eq!(h.run(&["CLUSTER", "SETSLOT", "12182", "MIGRATING", other]), "+OK\r\n");
    assert_eq!(h.run(&["DEL", "foo"]), ":1\r\n");
    let mut keys = store::Locks::new(&shared.store, crate::core::shared::unix_ms());
    let mut out = resp::ReplyBuf::new();
    let ran = door::run(
        &shared,
        &mut w.sess,
        &mut keys,
        spec,
        argv,
        &mut out,
        Caller::Client,
        Hold::Take(None),
    );
    keys.release();
    (ran, String::from_utf8_lossy(&out.to_vec()).into_owned())
}

/// A write routed as this node's, whose key a MIGRATE then sends away
/// (the slot marked MIGRATING, the key deleted) before the write takes the
/// key's stripe: Redis routes and runs in one step, so the write is asked
/// to go to the target (`-ASK`). Run here, it would create the key again
/// on the node giving the slot away, and the write would be lost when the
/// slot's move completes (the key then lives on the target, with the old
/// value). Sluice routes a client's command again once its stripes are
/// held (`gate::recheck`).
#[test]
fn a_write_routed_before_its_key_migrated_is_asked_to_the_target() {
    let (mut h, _dir, other) = serving_node_with_a_peer("recheck");
    // The writer's command is routed while foo's slot is this node's.
    let shared = h.shared.clone();
    let sess = shared.connect("127.0.0.1:2".into(), "127.0.0.1:7000".into(), -1);
    let mut w = Harness { shared, sess };
    let (ran, _) = routed_then_migrated(&mut h, &mut w, &other, &[b"SET", b"foo", b"v2"]);
    let crate::core::door::Ran::Refused(e) = ran else { panic!("the write ran on the source") };
    assert_eq!(&e.text()[..], b"ASK 12182 10.0.0.2:7002");
    assert_eq!(h.run(&["CLUSTER", "COUNTKEYSINSLOT", "12182"]), ":0\r\n");
}

/// EXEC's queue is routed as one request before EXEC locks the stripes of
/// its commands; a MIGRATE that takes a queued command's key in between
/// (the slot marked MIGRATING, the key deleted) would leave the queued
/// write to re-create the key on the node giving the slot away, lost once
/// the move completes. Redis routes EXEC and runs its queue in one step, so
/// it answers `-ASK` and discards the transaction; Sluice routes the queue
/// again once its stripes are held (`gate::recheck_queue`).
#[test]
fn an_exec_routed_before_its_key_migrated_is_asked_to_the_target() {
    let (mut h, _dir, other) = serving_node_with_a_peer("recheck-exec");
    // The writer queues its transaction while foo's slot is this node's,
    // and its EXEC is routed.
    let shared = h.shared.clone();
    let sess = shared.connect("127.0.0.1:2".into(), "127.0.0.1:7000".into(), -1);
    let mut w = Harness { shared, sess };
    assert_eq!(w.run(&["WATCH", "{foo}w"]), "+OK\r\n");
    assert_eq!(w.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(w.run(&["SET", "foo", "v2"]), "+QUEUED\r\n");
    assert_eq!(w.run(&["INCR", "{foo}n"]), "+QUEUED\r\n");
    let (ran, reply) = routed_then_migrated(&mut h, &mut w, &other, &[b"EXEC"]);
    assert_eq!(ran, crate::core::door::Ran::Done);
    assert_eq!(reply, "-ASK 12182 10.0.0.2:7002\r\n");
    assert_eq!(h.run(&["CLUSTER", "COUNTKEYSINSLOT", "12182"]), ":0\r\n");
    // The transaction and its WATCH are gone, as after Redis's redirected
    // EXEC.
    assert!(w.sess.multi.is_none() && w.sess.watched.is_empty());
    assert_eq!(w.run(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
}
