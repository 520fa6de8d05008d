"""Sentinel over Sluice: three Debian `redis-sentinel` 7.0.15 processes
watch a master and two replicas, an application writes through redis-py's
`Sentinel.master_for` with `min-replicas-to-write 1`, and the master is
SIGKILLed.

The same scenario runs first with redis-server 7.0.15 as the three nodes
(the oracle: what Sentinel and Redis do) and then with sluice-server, and
both are held to the same checks: the failover completes, the replica
that was not promoted resyncs partially (PSYNC2: the promoted replica
keeps the old replication id as its second one), no acknowledged write is
lost, the restarted old master rejoins as a replica (a full resync, for
both: it restarts with no data file and so with a new replication id), and
Sluice's failover takes no longer than Redis's did in the same run, give
or take one of Sentinel's one-second INFO periods.

The group is in sentinel_setup.py (bench/sentinel measures it too).
`scripts/test` installs redis-sentinel; outside CI a missing binary skips.
"""

import os
import random
import threading
import time

import pytest
import redis

import sentinel_setup as ss
from test_redis_py import _binary

# Both kinds start their replicas' first full sync at once (the default
# 5 s diskless delay would only make the test slower, for both alike).
NODE_CONF = "repl-diskless-sync-delay 0\n"
# Sentinel polls each replica's INFO once a second during a failover: its
# view of an event can lag by that much on either side.
SENTINEL_PERIOD = 1.0

TIMELINES = {}


def _require(path):
    if os.access(path, os.X_OK):
        return
    if os.environ.get("CI") == "true" or os.environ.get("SLUICE_REQUIRE_REDIS"):
        pytest.fail(f"{path} not found (scripts/test installs redis-sentinel and redis-server)")
    pytest.skip(f"{path} not found: apt-get install redis-sentinel")


@pytest.mark.parametrize("kind", ["redis", "sluice"])
def test_sentinel_failover_resyncs_partially_and_loses_no_acknowledged_write(kind):
    _require(ss.SENTINEL_BIN)
    _require(ss.REDIS_BIN)
    binary = ss.REDIS_BIN if kind == "redis" else _binary()
    group = ss.Group(binary, node_conf=NODE_CONF)
    ok = False
    out = None
    try:
        group.start()
        old_id = ss.info(group.master.port)["master_replid"]
        out = group.failover(restart_old_master=True)
        new = group.master
        tl = out["timeline"]

        # The failover completed: Sentinel switched to a promoted replica
        # and the writer got through it.
        assert new.port != group.nodes[0].port
        assert tl["+switch-master"] is not None

        # The promoted replica kept the old history as its second id, and
        # the other replica continued from it: one partial resync, no full.
        repl = out["new_master_repl"]
        assert repl["master_replid2"] == old_id
        assert out["new_master_sync_partial_ok"] == 1, out
        assert out["new_master_sync_full"] == 0, out

        # The old master, restarted without a data file, came back as a
        # replica of the new master through a full resync.
        assert out["old_master_sync"] == "full", out

        # Every write the application saw acknowledged is on the new
        # master and, once they caught up, on both of its replicas: the
        # old master's replies went out after its stream reached the
        # replicas' sockets (pinned for Sluice by
        # test_acknowledged_write_reaches_replica_before_sigkill).
        acked = out["acked"]
        assert len(acked) > 200
        c = new.client()
        try:
            # Redis's WAIT waits for the client's own last write: this one
            # comes after every write of the writer, which has stopped.
            c.set("barrier", 1)
            assert c.wait(2, 10000) == 2
        finally:
            c.close()
        for n in group.nodes:
            assert group.missing(n, acked) == [], f"{n.name} lost acknowledged writes"

        TIMELINES[kind] = tl
        if kind == "sluice" and "redis" in TIMELINES:
            theirs = TIMELINES["redis"]
            for step in ("write_through_sentinel", "replicas_in_sync"):
                assert tl[step] <= theirs[step] + SENTINEL_PERIOD, (step, tl, theirs)
        ok = True
    finally:
        if not ok:
            print(group.logs()[-30000:])
            if out:
                print({k: v for k, v in out.items() if k not in ("acked", "acked_at", "errors")})
        group.stop()


def _pair(binary, workdir, conf):
    """A master and one replica of it, started and in sync."""
    master = ss.Node(binary, ss.free_port(), workdir, "master", conf)
    replica = ss.Node(binary, ss.free_port(), workdir, "replica", conf)
    with open(replica.conf, "a") as f:
        f.write(f"replicaof 127.0.0.1 {master.port}\n")
    master.start()
    replica.start()
    c = master.client(decode_responses=True)
    try:
        # The stream flows once the replica acknowledged (after a diskless
        # load, from its first ACK): wait until it acknowledged a write.
        ss.wait_for("the replica's link", lambda: (ss.try_info(replica.port) or {})
                    .get("master_link_status") == "up", 30)
        c.set("probe", 1)
        ss.wait_for("the replica to sync", lambda: ss.replica_online(c), 30)
    finally:
        c.close()
    return master, replica


@pytest.mark.parametrize("kind", ["redis", "sluice"])
def test_acknowledged_write_reaches_replica_before_sigkill(kind, tmp_path):
    """A reply to a write goes out only after the stream carrying it is on
    the replica's socket: a client writes one key at a time, the master is
    SIGKILLed at a random moment, and its last acknowledged write is on
    the replica. Sluice used to answer first and let a sender thread write
    the stream after a wake-up (lost in 3 of 12 such rounds on a loaded
    2-core machine; Redis in none). One writer: with several, Redis too
    can write one client's reply before the replica's output in the same
    event-loop pass."""
    _require(ss.REDIS_BIN)
    binary = ss.REDIS_BIN if kind == "redis" else _binary()
    for round_ in range(8):
        master, replica = _pair(binary, str(tmp_path / f"r{round_}"), NODE_CONF)
        try:
            last = [0]
            stop = threading.Event()

            def write(i):
                c = master.client()
                n = 0
                while not stop.is_set():
                    n += 1
                    try:
                        c.set(f"w:{i}:{n}", n)
                    except (redis.ConnectionError, redis.TimeoutError):
                        return
                    last[i] = n

            threads = [threading.Thread(target=write, args=(0,))]
            for t in threads:
                t.start()
            ss.wait_for("writes", lambda: last[0] > 50, 20)
            time.sleep(random.uniform(0, 0.3))
            master.kill()
            stop.set()
            for t in threads:
                t.join(10)
            r = replica.client(decode_responses=True)
            try:
                ss.wait_for("the replica to see the master gone",
                            lambda: r.info("replication")["master_link_status"] != "up", 20)
                missing = [(i, n) for i, n in enumerate(last) if r.get(f"w:{i}:{n}") != str(n)]
            finally:
                r.close()
            assert missing == [], f"round {round_}: acknowledged, not on the replica: {missing}"
        finally:
            master.stop()
            replica.stop()
