"""The job queue through real clients: pydisque (the Disque client from
PyPI) driving add/get/ack/nack flows unchanged, and the mruby article's
flow through a generic Redis client (redis-py's execute_command).

The server binary comes from $SLUICE_SERVER, else target/debug (see
test_redis_py.py); the module starts its own server with two threads.
"""

import time

import pytest
import redis
from pydisque.client import Client

from test_redis_py import server  # noqa: F401  (the fixture)


@pytest.fixture
def disque(server):  # noqa: F811
    c = Client([f"127.0.0.1:{server}"])
    c.connect()
    yield c
    c.get_connection().close()


@pytest.fixture
def r(server):  # noqa: F811
    client = redis.Redis(host="127.0.0.1", port=server, socket_timeout=10)
    yield client
    client.close()


def test_pydisque_add_get_ack(disque):
    job_id = disque.add_job("py:jobs", "payload-1", timeout=100)
    assert job_id.startswith(b"D-") and len(job_id) == 40
    assert disque.qlen("py:jobs") == 1
    jobs = disque.get_job(["py:jobs"], timeout=100)
    # pydisque names the fields (id, queue, body); Disque sends them as
    # [queue, id, body], and so does Sluice.
    assert jobs == [(b"py:jobs", job_id, b"payload-1")]
    show = disque.show(job_id, return_dict=True)
    assert show[b"state"] == b"active" and show[b"body"] == b"payload-1"
    disque.ack_job(job_id)
    assert disque.show(job_id) is None
    assert disque.qlen("py:jobs") == 0
    assert disque.get_job(["py:jobs"], nohang=True) == []


def test_pydisque_nack_counters_and_working(disque):
    job_id = disque.add_job("py:nack", "again", retry=30)
    disque.get_job(["py:nack"])
    assert disque.working(job_id) == 30
    disque.nack_job(job_id)
    got = disque.get_job(["py:nack"], withcounters=True)
    assert got == [(b"py:nack", job_id, b"again", 1, 0)]
    disque.fast_ack(job_id)
    assert disque.show(job_id) is None


def test_pydisque_queue_inspection(disque):
    ids = [disque.add_job("py:insp", f"j{i}", ttl=60, retry=5) for i in range(3)]
    assert [j[1] for j in disque.qpeek("py:insp", 2)] == ids[:2]
    assert [j[1] for j in disque.qpeek("py:insp", -1)] == ids[2:]
    stat = disque.qstat("py:insp", return_dict=True)
    assert stat[b"len"] == 3 and stat[b"pause"] == b"none"
    assert disque.pause("py:insp", kw_in=True) == b"in"
    with pytest.raises(redis.ResponseError, match="PAUSED"):
        disque.add_job("py:insp", "refused")
    assert disque.pause("py:insp", kw_none=True) == b"none"
    assert disque.dequeue(*ids) == 3
    assert disque.enqueue(ids[0]) == 1
    cursor, found = disque.jscan(busyloop=True, queue="py:insp", state=["active"])
    assert cursor == b"0" and sorted(found) == sorted(ids[1:])
    cursor, queues = disque.qscan(busyloop=True, minlen=1)
    assert b"py:insp" in queues
    assert disque.del_job(*ids) == 3


def test_pydisque_blocking_get_is_served_by_a_producer(disque, server):  # noqa: F811
    producer = Client([f"127.0.0.1:{server}"])
    producer.connect()
    import threading

    got = []
    t = threading.Thread(target=lambda: got.extend(disque.get_job(["py:block"], timeout=5000)))
    t.start()
    time.sleep(0.2)
    job_id = producer.add_job("py:block", "late")
    t.join(10)
    assert got == [(b"py:block", job_id, b"late")]
    producer.ack_job(job_id)


def test_mruby_article_flow_through_a_generic_client(r):
    """ADDJOB twice, GETJOB twice in order, QLEN 0, DELJOB."""
    a = r.execute_command("ADDJOB", "mruby:q", "first", 0)
    b = r.execute_command("ADDJOB", "mruby:q", "second", 0)
    assert a != b
    assert r.execute_command("GETJOB", "FROM", "mruby:q") == [[b"mruby:q", a, b"first"]]
    assert r.execute_command("GETJOB", "FROM", "mruby:q") == [[b"mruby:q", b, b"second"]]
    assert r.execute_command("QLEN", "mruby:q") == 0
    assert r.execute_command("DELJOB", a, b) == 2
    assert r.execute_command("SHOW", a) is None
    # The job queue is beside the keyspace, not in it.
    assert r.dbsize() == 0 or not r.exists("mruby:q")


def test_extensions_through_the_clients(disque, r, server):  # noqa: F811
    """Sluice's extensions (docs/jobs.md) through pydisque's and redis-py's
    generic calls: UNIQUE, NACK with BACKOFF, DEADLETTER, WAITJOB, QSET."""
    a = r.execute_command("ADDJOB", "ext:q", "once", 0, "UNIQUE", "ext-key")
    assert r.execute_command("ADDJOB", "ext:q", "again", 0, "UNIQUE", "ext-key") == a
    assert disque.qlen("ext:q") == 1
    show = disque.show(a, return_dict=True)
    assert show[b"unique"] == b"ext-key" and show[b"body"] == b"once"

    b = r.execute_command("ADDJOB", "ext:b", "x", 0, "BACKOFF", 300, 1000)
    assert disque.get_job(["ext:b"]) == [(b"ext:b", b, b"x")]
    disque.nack_job(b)
    assert disque.qlen("ext:b") == 0
    assert disque.get_job(["ext:b"], timeout=3000) == [(b"ext:b", b, b"x")]

    d = r.execute_command("ADDJOB", "ext:d", "y", 0, "DEADLETTER", "ext:dead", 1)
    disque.get_job(["ext:d"])
    disque.nack_job(d)
    assert disque.qlen("ext:d") == 0 and disque.qlen("ext:dead") == 1

    import threading

    waiter = redis.Redis(host="127.0.0.1", port=server, socket_timeout=10)
    done = []
    t = threading.Thread(target=lambda: done.append(waiter.execute_command("WAITJOB", a)))
    t.start()
    time.sleep(0.2)
    assert done == []
    disque.ack_job(a)
    t.join(10)
    assert done == [1]
    assert r.execute_command("WAITJOB", a) == 1
    assert r.execute_command("WAITJOB", d, "TIMEOUT", 50) is None
    waiter.close()

    assert r.execute_command("QSET", "ext:r", "RATE", 3) == b"OK"
    stat = r.execute_command("QSTAT", "ext:r")
    assert dict(zip(stat[::2], stat[1::2]))[b"rate"] == 3
