"""The job queue through a Sentinel failover: a producer adds jobs with
`ADDJOB … REPLICATE 2` (the reply comes once a replica holds the job)
and a consumer takes and acknowledges them, both through redis-py's
`Sentinel.master_for`, while the master is SIGKILLed. The promoted
replica owns the queues: the jobs that were queued there are delivered,
and the ones that were taken and not acknowledged when the master died
are delivered again after their RETRY. Checked: every job whose ADDJOB
was acknowledged is delivered at least once (none lost); a job may be
delivered twice (at-least-once), never a job nobody added.

The group is sentinel_setup.py's (three sentinels, a master and two
replicas, `min-replicas-to-write 1`). `SLUICE_JOBS_FAILOVER_PORT` sets
the first port of the group (default: free ports). `scripts/test`
installs redis-sentinel; outside CI a missing binary skips.
"""

import os
import threading
import time

import redis

import sentinel_setup as ss
from test_redis_py import _binary
from test_sentinel import NODE_CONF, _require

QUEUE = "failover-q"
RETRY = 1


class Producer(threading.Thread):
    """ADDJOB one job at a time through Sentinel; `acked` holds the ids
    whose ADDJOB answered one (an error means not acknowledged: the next
    job is a new one)."""

    def __init__(self, sentinel):
        super().__init__(daemon=True)
        self.master = sentinel.master_for(ss.SERVICE, socket_timeout=2,
                                          socket_connect_timeout=0.5, decode_responses=True)
        self.acked = {}
        self.errors = []
        self.halt = threading.Event()

    def run(self):
        n = 0
        while not self.halt.is_set():
            n += 1
            body = f"job:{n}"
            try:
                jid = self.master.execute_command("ADDJOB", QUEUE, body, 2000, "REPLICATE", 2,
                                                  "RETRY", RETRY)
                self.acked[jid] = body
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
                self.errors.append(str(e)[:80])
                time.sleep(0.01)
                continue
            time.sleep(0.002)

    def stop(self):
        self.halt.set()
        self.join(10)


class Consumer(threading.Thread):
    """GETJOB and ACKJOB through Sentinel; `seen` maps each delivered id
    to its body and how many times it came."""

    def __init__(self, sentinel):
        super().__init__(daemon=True)
        self.master = sentinel.master_for(ss.SERVICE, socket_timeout=2,
                                          socket_connect_timeout=0.5, decode_responses=True)
        self.seen = {}
        self.lock = threading.Lock()
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            try:
                got = self.master.execute_command("GETJOB", "TIMEOUT", 100, "COUNT", 20,
                                                  "FROM", QUEUE)
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                time.sleep(0.01)
                continue
            if not got:
                continue
            with self.lock:
                for _, jid, body in got:
                    prev = self.seen.get(jid, (body, 0))
                    self.seen[jid] = (body, prev[1] + 1)
            # The work: jobs are in flight (taken, not acknowledged) for a
            # while, so the kill finds some.
            time.sleep(0.05)
            try:
                self.master.execute_command("ACKJOB", *[j[1] for j in got])
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                # Not acknowledged: delivered again after RETRY.
                time.sleep(0.01)

    def delivered(self):
        with self.lock:
            return dict(self.seen)

    def stop(self):
        self.halt.set()
        self.join(10)


def test_failover_redelivers_every_acknowledged_job():
    _require(ss.SENTINEL_BIN)
    base = os.environ.get("SLUICE_JOBS_FAILOVER_PORT")
    group = ss.Group(_binary(), node_conf=NODE_CONF, base_port=int(base) if base else None)
    producer = consumer = None
    ok = False
    out = None
    try:
        group.start()
        producer = Producer(group.sentinel)
        consumer = Consumer(group.sentinel)
        producer.start()
        consumer.start()
        ss.wait_for("jobs flowing", lambda: len(consumer.delivered()) > 100, 30)
        out = group.failover(restart_old_master=False, writes_before=100)
        before = len(producer.acked)
        ss.wait_for("jobs added through the new master",
                    lambda: len(producer.acked) > before + 100, 30)
        producer.stop()
        acked = dict(producer.acked)

        def all_delivered():
            return not (set(acked) - set(consumer.delivered()))

        # Jobs taken on the old master and not acknowledged there come
        # back after RETRY: a few seconds is plenty.
        try:
            ss.wait_for("every acknowledged job delivered", all_delivered, 30, 0.1)
        except TimeoutError:
            pass
        consumer.stop()
        seen = consumer.delivered()
        lost = sorted(set(acked) - set(seen))
        assert lost == [], _lost_report(group, out, lost, acked, producer)
        for jid, (body, _) in seen.items():
            if jid in acked:
                assert acked[jid] == body, jid
        again = sum(1 for _, n in seen.values() if n > 1)
        unknown = set(seen) - set(acked)
        # A job whose ADDJOB failed after the master had it may be
        # delivered: its producer saw an error, so it is not counted.
        print(f"{len(acked)} acknowledged jobs, {len(seen)} delivered, {again} more than once, "
              f"{len(unknown)} from an ADDJOB not acknowledged, "
              f"{len(producer.errors)} producer errors; failover {out['timeline']}")
        ok = True
    finally:
        for t in (producer, consumer):
            if t is not None and t.is_alive():
                t.stop()
        if not ok:
            print(group.logs()[-30000:])
            # The whole group's files (logs, configurations) stay for a
            # failure's post-mortem.
            print(f"kept: {group.workdir}")
        group.stop(keep=not ok)


def _lost_report(group, out, lost, acked, producer):
    """The assertion's message for lost jobs: enough to tell why from
    the message alone (a job the new master never had, or one it holds
    and did not deliver), with the failover's course."""
    c = group.master.client(decode_responses=True)
    held = {}
    try:
        for jid in lost[:5]:
            try:
                show = c.execute_command("SHOW", jid)
                held[jid] = dict(zip(show[::2], show[1::2])) if show else None
            except redis.RedisError as e:
                held[jid] = f"SHOW failed: {e}"
    finally:
        c.close()
    order = sorted(acked, key=lambda j: int(acked[j].split(":")[1]))
    return (f"{len(lost)} of {len(acked)} acknowledged jobs never delivered: "
            f"{[(j, acked[j]) for j in lost[:5]]}; the last acknowledged: {acked[order[-1]]}; "
            f"on the new master ({out['new_master']}): {held}; its syncs since the kill: "
            f"full {out['new_master_sync_full']}, partial {out['new_master_sync_partial_ok']}; "
            f"failover {out['timeline']}; replicas before the kill: "
            f"{ {p: r.get('master_repl_offset') for p, r in out['replicas_before'].items()} }; "
            f"last producer errors {producer.errors[-5:]}")
