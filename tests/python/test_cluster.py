"""redis-py's RedisCluster against a 3-master cluster made by
`redis-cli --cluster create`, the same test with redis-server 7.0.15 as
the nodes (the oracle) and with sluice-server.

The client writes and reads keys spread over every master, through
single commands, a (non-transactional) cluster pipeline and
`mget_nonatomic`; then `redis-cli --cluster reshard` moves 1,000 slots
from one master to another while a writer thread keeps writing through
the same client. The client's slot map is stale after that: it follows
the `-MOVED` (and, during the move, `-ASK`) redirections, every key reads
back its last acknowledged value, and the old owner answers `-MOVED` for a
key that moved.
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

import sentinel_setup as ss
from test_redis_py import _binary

REDIS_CLI = "/usr/bin/redis-cli"


def _require(path):
    if os.access(path, os.X_OK):
        return
    if os.environ.get("CI") == "true" or os.environ.get("SLUICE_REQUIRE_REDIS"):
        pytest.fail(f"{path} not found (scripts/test installs redis-server and redis-cli)")
    pytest.skip(f"{path} not found: apt-get install redis-server redis-tools")


def cli(*args, timeout=120):
    out = subprocess.run([REDIS_CLI, *args], capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


class Cluster:
    """Three masters of `binary`, each with its bus on a port of its own."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="sluice-cluster-")
        self.nodes = []
        for i in range(3):
            bus = ss.free_port()
            conf = (f"cluster-enabled yes\ncluster-port {bus}\ncluster-node-timeout 5000\n"
                    "cluster-config-file nodes.conf\nsave \"\"\nappendonly no\n")
            self.nodes.append(ss.Node(binary, ss.free_port(), self.dir, f"n{i}", conf))

    def start(self):
        for n in self.nodes:
            n.start()
        addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
        rc, text = cli("--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes")
        assert rc == 0 and "[OK] All 16384 slots covered." in text, text
        self.wait_ok()

    def wait_ok(self):
        def ok():
            for n in self.nodes:
                if b"cluster_state:ok" not in n.client().execute_command("CLUSTER", "INFO"):
                    return False
            rc, text = cli("--cluster", "check", f"127.0.0.1:{self.nodes[0].port}")
            return rc == 0 and "[OK] All nodes agree about slots configuration." in text
        ss.wait_for("the cluster to agree and be ok", ok, 60, 0.1)

    def myid(self, node):
        return node.client().execute_command("CLUSTER", "MYID").decode()

    def owner(self, key):
        """The node serving `key`'s slot, as that node says itself."""
        slot = self.nodes[0].client().cluster("KEYSLOT", key)
        for n in self.nodes:
            for start, end, master, *_ in n.client().execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return next(m for m in self.nodes if m.port == master[1])
        raise AssertionError(f"no node serves slot {slot}")

    def stop(self):
        for n in self.nodes:
            n.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Writer(threading.Thread):
    """Writes `w:<i>` = i through the cluster client until stopped;
    remembers the acknowledged writes."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client = client
        self.acked = {}
        self.errors = []
        self.halt = threading.Event()

    def run(self):
        i = 0
        while not self.halt.is_set():
            key = f"w:{i % 500}"
            try:
                self.client.set(key, i)
                self.acked[key] = str(i)
            except redis.RedisError as e:  # kept, and the test fails on it
                self.errors.append(repr(e))
            i += 1

    def stop(self):
        self.halt.set()
        self.join(30)


@pytest.mark.parametrize("kind", ["redis", "sluice"])
def test_redis_py_cluster_client_follows_moved_after_a_reshard(kind):
    _require(ss.REDIS_BIN)
    _require(REDIS_CLI)
    binary = ss.REDIS_BIN if kind == "redis" else _binary()
    cluster = Cluster(binary)
    try:
        cluster.start()
        first = cluster.nodes[0]
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", first.port)],
                          decode_responses=True, socket_timeout=10)
        keys = [f"key:{i}" for i in range(300)]

        # Single commands land on every master.
        for i, k in enumerate(keys):
            assert rc.set(k, i)
        assert all(rc.get(k) == str(i) for i, k in enumerate(keys))
        sizes = [n.client().dbsize() for n in cluster.nodes]
        assert all(s > 0 for s in sizes) and sum(sizes) == len(keys), sizes

        # A cluster pipeline: commands grouped per node, replies in order.
        pipe = rc.pipeline()
        for i, k in enumerate(keys):
            pipe.incr(k)
            pipe.get(k)
        replies = pipe.execute()
        assert replies[0::2] == [i + 1 for i in range(len(keys))]
        assert replies[1::2] == [str(i + 1) for i in range(len(keys))]
        assert rc.mget_nonatomic(keys) == [str(i + 1) for i in range(len(keys))]
        # Hash-tagged keys share a slot: one multi-key command.
        assert rc.mset({"{user1}:a": "1", "{user1}:b": "2"})
        assert rc.mget("{user1}:a", "{user1}:b") == ["1", "2"]

        # Reshard 1,000 slots from the owner of key:0 to another master,
        # while a writer keeps writing through the same client.
        src = cluster.owner("key:0")
        dst = next(n for n in cluster.nodes if n is not src)
        before = {k: cluster.owner(k).port for k in keys}
        writer = Writer(rc)
        writer.start()
        time.sleep(0.2)
        code, text = cli("--cluster", "reshard", f"127.0.0.1:{src.port}",
                         "--cluster-from", cluster.myid(src), "--cluster-to", cluster.myid(dst),
                         "--cluster-slots", "1000", "--cluster-yes", timeout=300)
        assert code == 0, text
        time.sleep(0.2)
        writer.stop()
        cluster.wait_ok()
        assert not writer.errors, writer.errors[:5]
        assert len(writer.acked) > 0

        after = {k: cluster.owner(k).port for k in keys}
        moved = [k for k in keys if before[k] != after[k]]
        assert moved, "the reshard moved some of the keys"
        assert all(after[k] == dst.port for k in moved)

        # The old owner redirects; the client's stale map follows MOVED.
        with pytest.raises(redis.exceptions.ResponseError, match=r"^MOVED \d+ 127\.0\.0\.1:"):
            src.client().get(moved[0])
        assert rc.mget_nonatomic(keys) == [str(i + 1) for i in range(len(keys))]
        pipe = rc.pipeline()
        for k in moved:
            pipe.get(k)
        assert pipe.execute() == [str(keys.index(k) + 1) for k in moved]
        # No acknowledged write was lost while the slots moved.
        for k, v in writer.acked.items():
            assert rc.get(k) == v, k
        rc.close()
    finally:
        cluster.stop()


def test_redis_py_cluster_client_routes_job_commands():
    """The job queue through redis-py's RedisCluster, unchanged: the
    client routes ADDJOB/QLEN by the queue's name, GETJOB by the queues
    after FROM (movable keys: it asks COMMAND GETKEYS), and ACKJOB, SHOW,
    FASTACK by the job id, which hashes to its queue's slot. Sluice only
    (redis-server has no job commands)."""
    _require(ss.REDIS_BIN)
    _require(REDIS_CLI)
    cluster = Cluster(_binary())
    try:
        cluster.start()
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", cluster.nodes[0].port)],
                          decode_responses=True, socket_timeout=10)
        queues = [f"jobs:{i}" for i in range(30)]
        ids = {q: rc.execute_command("ADDJOB", q, f"body of {q}", 0) for q in queues}
        owners = {q: cluster.owner(q) for q in queues}
        assert len({o.port for o in owners.values()}) == 3, "queues on every master"
        for q in queues:
            # The job is on its queue's master, and its id is in that slot.
            assert owners[q].client().execute_command("QLEN", q) == 1
            assert rc.keyslot(ids[q]) == rc.keyslot(q)
            assert rc.execute_command("QLEN", q) == 1
        for q in queues:
            [[queue, jid, body]] = rc.execute_command("GETJOB", "NOHANG", "FROM", q)
            assert (queue, jid, body) == (q, ids[q], f"body of {q}")
        for q in queues:
            assert ids[q] in rc.execute_command("SHOW", ids[q])
            assert rc.execute_command("ACKJOB", ids[q]) == 1
        assert all(rc.execute_command("QLEN", q) == 0 for q in queues)

        # A cluster pipeline: ADDJOBs grouped per master, then their ids.
        pipe = rc.pipeline()
        for q in queues:
            pipe.execute_command("ADDJOB", q, "p", 0)
        pids = pipe.execute()
        assert len(set(pids)) == len(queues)
        pipe = rc.pipeline()
        for jid in pids:
            pipe.execute_command("FASTACK", jid)
        assert pipe.execute() == [1] * len(pids)

        # Queues of one hash tag are one slot: one GETJOB takes from both;
        # queues of several slots are refused by the client itself.
        rc.execute_command("ADDJOB", "{t1}:a", "a", 0)
        rc.execute_command("ADDJOB", "{t1}:b", "b", 0)
        got = rc.execute_command("GETJOB", "NOHANG", "COUNT", "2", "FROM", "{t1}:a", "{t1}:b")
        assert sorted(j[2] for j in got) == ["a", "b"]
        with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
            rc.execute_command("GETJOB", "NOHANG", "FROM", "jobs:0", "jobs:1")
        # The node itself says so to a client that asks it directly.
        node = owners["jobs:0"].client()
        with pytest.raises(redis.exceptions.ResponseError, match="^CROSSSLOT"):
            node.execute_command("GETJOB", "NOHANG", "FROM", "jobs:0", "jobs:1")
        rc.close()
    finally:
        cluster.stop()
