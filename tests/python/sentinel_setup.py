"""A Sentinel-managed group for tests and bench/sentinel: one master, two
replicas (Sluice or redis-server, started alike from configuration files)
and three Debian `redis-sentinel` processes, a writer going through
redis-py's `Sentinel.master_for`, and the SIGKILL failover with its
timeline.

Not a test module (pytest collects `test_*.py` only): test_sentinel.py
asserts on what `failover()` returns, bench/sentinel prints it for both
kinds of server. Everything waits on conditions with deadlines; the only
sleeps are polling intervals and the writer's pacing.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import redis
from redis.sentinel import Sentinel

SERVICE = "mymaster"
SENTINEL_BIN = "/usr/bin/redis-sentinel"
REDIS_BIN = "/usr/bin/redis-server"

# Short Sentinel timings, the same for both kinds of server: the master is
# subjectively down after two seconds without a valid PING reply. Not one
# second: after +switch-master a sentinel counts the new master's silence
# from the switch, but opens its link to it only a second after its last
# attempt to reach the dead one (sentinelReconnectInstance waits
# SENTINEL_PING_PERIOD between attempts), so with 1000 a switch that came
# just after such an attempt found the new master down in the very tick
# that connected to it, and the stale votes about the old master made that
# an immediate second failover (seen in 4 runs of 56 on Sluice: the
# sentinel's connection accepted at the millisecond of its +sdown).
# Redis's own Sentinel tests use 2000 too.
DOWN_AFTER_MS = 2000
FAILOVER_TIMEOUT_MS = 10000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_allocator(base=None):
    """Returns a function giving the next port: from `base` upward when
    given (a helper's own range), else whatever the kernel hands out."""
    if base is None:
        return free_port
    counter = iter(range(base, base + 1000))
    return lambda: next(counter)


def info(port, section="replication", timeout=2.0):
    c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=timeout,
                    socket_connect_timeout=timeout, decode_responses=True)
    try:
        return c.info(section)
    finally:
        c.close()


def try_info(port, section="replication"):
    try:
        return info(port, section)
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
        return None


def wait_for(what, cond, timeout, interval=0.02):
    """Polls `cond` until it returns something truthy; fails with `what`
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def replica_online(master_client):
    """Whether the master's first replica acknowledged everything so far
    (`master_client` decodes responses)."""
    i = master_client.info("replication")
    s0 = i.get("slave0")
    return bool(s0 and s0.get("state") == "online"
                and int(s0.get("offset", 0)) >= int(i["master_repl_offset"]) > 0)


class Node:
    """One data server (Sluice or redis-server) with its own directory,
    configuration file and log."""

    def __init__(self, binary, port, workdir, name, conf):
        self.binary = binary
        self.port = port
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(self.dir, "node.conf")
        self.log = os.path.join(self.dir, "node.log")
        with open(self.conf, "w") as f:
            f.write(f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {self.log}\n")
            f.write(conf)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([self.binary, self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        wait_for(f"{self.name} to accept connections", self._answers, 20, 0.01)

    def _answers(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.tail()}")
        try:
            c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
            try:
                c.ping()
            finally:
                c.close()
            return True
        except redis.BusyLoadingError:
            return False
        except (redis.ConnectionError, redis.TimeoutError):
            return False

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        self.kill()

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, **kw)

    def tail(self, n=30):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


class SentinelProc:
    def __init__(self, port, workdir, name, master_port, quorum):
        self.port = port
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(self.dir, "sentinel.conf")
        self.log = os.path.join(self.dir, "sentinel.log")
        with open(self.conf, "w") as f:
            f.write(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {self.log}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} {quorum}\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([SENTINEL_BIN, self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2,
                           decode_responses=True)

    def master_state(self):
        c = self.client()
        try:
            return c.sentinel_master(SERVICE)
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return None
        finally:
            c.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


class Events(threading.Thread):
    """Sentinel's event channels (`+sdown`, `+odown`, `+promoted-slave`,
    `+switch-master`, …) from every sentinel, with the time each arrived:
    the failover's timeline from Sentinel's side."""

    def __init__(self, sentinels):
        super().__init__(daemon=True)
        self.seen = []
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.subs = []
        for s in sentinels:
            c = redis.Redis(host="127.0.0.1", port=s.port, decode_responses=True)
            p = c.pubsub(ignore_subscribe_messages=True)
            p.psubscribe("*")
            self.subs.append((s.name, p))
        self.start()

    def run(self):
        while not self.halt.is_set():
            for who, p in self.subs:
                try:
                    msg = p.get_message(timeout=0.01)
                except (redis.ConnectionError, redis.TimeoutError):
                    continue
                if msg and msg["type"] == "pmessage":
                    with self.lock:
                        self.seen.append((time.monotonic(), who, msg["channel"], msg["data"]))

    def first(self, channel, since=0.0):
        with self.lock:
            for t, _, ch, _ in self.seen:
                if ch == channel and t >= since:
                    return t
        return None

    def stop(self):
        self.halt.set()
        self.join(5)
        for _, p in self.subs:
            p.close()


class Writer(threading.Thread):
    """Writes `w:<n>` = n through `Sentinel.master_for`, one at a time,
    retrying after errors as an application would; `acked` holds the
    numbers the master answered OK, with their times."""

    def __init__(self, sentinel, pace=0.002):
        super().__init__(daemon=True)
        self.master = sentinel.master_for(SERVICE, socket_timeout=0.5,
                                          socket_connect_timeout=0.5)
        self.pace = pace
        self.acked = []
        self.errors = []
        self.halt = threading.Event()

    def run(self):
        n = 0
        while not self.halt.is_set():
            n += 1
            try:
                self.master.set(f"w:{n}", n)
                self.acked.append((time.monotonic(), n))
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
                self.errors.append((time.monotonic(), type(e).__name__, str(e)[:80]))
                time.sleep(0.01)
                continue
            time.sleep(self.pace)

    def stop(self):
        self.halt.set()
        self.join(10)
        self.master.close()


class Group:
    """The master, its two replicas and three sentinels.

    `kind` is "sluice" (the binary `binary`) or "redis" (redis-server);
    `node_conf` is added to every data node's configuration file.
    """

    def __init__(self, binary, node_conf="", base_port=None, workdir=None):
        self.workdir = workdir or tempfile.mkdtemp(prefix="sluice-sentinel-")
        self._own_workdir = workdir is None
        next_port = port_allocator(base_port)
        conf = ("save \"\"\nappendonly no\nmin-replicas-to-write 1\n" + node_conf)
        self.nodes = [Node(binary, next_port(), self.workdir, f"node{i}", conf) for i in range(3)]
        self.master = self.nodes[0]
        for r in self.nodes[1:]:
            with open(r.conf, "a") as f:
                f.write(f"replicaof 127.0.0.1 {self.master.port}\n")
        # Sentinel fsyncs its configuration at every change of epoch or
        # master and runs its timer only after: on a disk busy with a
        # build, one fsync took a second, and the sentinel then found the
        # new master and the restarted old one down (no PONG within
        # down-after-milliseconds, the replies still unread) and failed
        # over a second time. Memory-backed, its writes cost nothing; the
        # nodes keep their files on disk.
        shm = "/dev/shm"
        self.sentinel_dir = (tempfile.mkdtemp(prefix="sluice-sentinel-", dir=shm)
                             if os.path.isdir(shm) and os.access(shm, os.W_OK) else self.workdir)
        self.sentinels = [SentinelProc(next_port(), self.sentinel_dir, f"sentinel{i}",
                                       self.master.port, 2) for i in range(3)]
        self.events = None

    def by_port(self, port):
        return next(n for n in self.nodes if n.port == int(port))

    def start(self):
        for n in self.nodes:
            n.start()
        wait_for("both replicas online", lambda: self._online(self.master.port, 2), 30)
        for s in self.sentinels:
            s.start()
        wait_for("every sentinel to know both replicas and the other sentinels",
                 self._sentinels_ready, 40, 0.1)
        self.events = Events(self.sentinels)
        self.sentinel = Sentinel([("127.0.0.1", s.port) for s in self.sentinels],
                                 socket_timeout=0.5, socket_connect_timeout=0.5)

    def _online(self, port, count):
        i = try_info(port)
        if not i:
            return False
        online = [v for k, v in i.items() if k.startswith("slave") and isinstance(v, dict)
                  and v.get("state") == "online"]
        return len(online) >= count

    def _sentinels_ready(self):
        for s in self.sentinels:
            m = s.master_state()
            if not m or m.get("num-slaves") != 2 or m.get("num-other-sentinels") != 2:
                return False
        return True

    def current_master(self):
        """The master's port as a sentinel reports it, once the sentinels
        agree."""
        ports = set()
        for s in self.sentinels:
            c = s.client()
            try:
                ports.add(int(c.sentinel_get_master_addr_by_name(SERVICE)[1]))
            except (redis.ConnectionError, redis.TimeoutError, TypeError):
                return None
            finally:
                c.close()
        return ports.pop() if len(ports) == 1 else None

    def replica_in_sync(self, node, master_port):
        """The replica follows `master_port` with its link up and no sync
        in progress."""
        i = try_info(node.port)
        return bool(i and i.get("role") == "slave" and int(i.get("master_port", 0)) == master_port
                    and i.get("master_link_status") == "up"
                    and not i.get("master_sync_in_progress"))

    def failover(self, restart_old_master=True, writes_before=200, save_before_kill=False,
                 timeout=60):
        """SIGKILLs the master while a writer goes through Sentinel, and
        returns what happened, with times in seconds from the kill.

        With `save_before_kill` the master takes a BGSAVE first (the
        writes go on after it), so that it restarts from its own RDB."""
        writer = Writer(self.sentinel)
        writer.start()
        try:
            out = self._failover(writer, restart_old_master, writes_before, save_before_kill,
                                 timeout)
        finally:
            writer.stop()
        t0 = out["killed_at"]
        out["acked"] = [n for _, n in writer.acked]
        # When each was acknowledged, in seconds from the kill (negative:
        # by the old master).
        out["acked_at"] = {n: t - t0 for t, n in writer.acked}
        out["errors"] = writer.errors
        return out

    def _failover(self, writer, restart_old_master, writes_before, save_before_kill, timeout):
        wait_for(f"{writes_before} acknowledged writes", lambda: len(writer.acked) >= writes_before,
                 30)
        old = self.master
        if save_before_kill:
            c = old.client()
            try:
                last = c.lastsave()
                c.bgsave()
                wait_for("the BGSAVE to finish", lambda: c.lastsave() != last
                         and not info(old.port, "persistence")["rdb_bgsave_in_progress"], 30)
            finally:
                c.close()
            n = len(writer.acked)
            wait_for("more writes after the save", lambda: len(writer.acked) >= n + 50, 30)
        survivors = [n for n in self.nodes if n is not old]
        before = {n.port: info(n.port, "stats") for n in survivors}
        repl_before = {n.port: info(n.port) for n in survivors}
        t0 = time.monotonic()
        old.kill()
        acked_before_kill = len(writer.acked)
        out = {"timeline": {}, "killed_at": t0}
        tl = out["timeline"]

        def promoted():
            for n in survivors:
                i = try_info(n.port)
                if i and i.get("role") == "master":
                    return n
            return None

        new = wait_for("a replica to be promoted", promoted, timeout)
        tl["promoted"] = time.monotonic() - t0
        others = [n for n in survivors if n is not new]

        def first_write_after_kill():
            for t, _ in list(writer.acked[acked_before_kill:]):
                if t > t0:
                    return t
            return None

        t_write = wait_for("a write accepted through Sentinel", first_write_after_kill, timeout)
        tl["write_through_sentinel"] = t_write - t0
        for n in others:
            wait_for(f"{n.name} in sync with the new master",
                     lambda n=n: self.replica_in_sync(n, new.port), timeout)
        tl["replicas_in_sync"] = time.monotonic() - t0
        wait_for("the sentinels to agree on the new master",
                 lambda: self.current_master() == new.port, timeout)
        # The subscriber thread may not have read the last event yet.
        wait_for("+switch-master from a sentinel",
                 lambda: self.events.first("+switch-master", t0), 10)
        for ch in ("+sdown", "+odown", "+promoted-slave", "+switch-master"):
            t = self.events.first(ch, t0)
            tl[ch] = None if t is None else t - t0
        after = info(new.port, "stats")
        out["new_master"] = new.name
        out["new_master_sync_full"] = after["sync_full"] - before[new.port]["sync_full"]
        out["new_master_sync_partial_ok"] = (after["sync_partial_ok"]
                                             - before[new.port]["sync_partial_ok"])
        out["new_master_repl"] = info(new.port)
        out["replicas_before"] = repl_before

        if restart_old_master:
            # The old master comes back from its configuration file (no
            # `replicaof`): Sentinel finds it a master and points it at the
            # new one.
            t1 = time.monotonic()
            old.start()
            wait_for("the old master to rejoin as a replica",
                     lambda: self.replica_in_sync(old, new.port), timeout)
            out["old_master_rejoined"] = time.monotonic() - t1
            after2 = info(new.port, "stats")
            out["old_master_sync"] = ("full" if after2["sync_full"] > after["sync_full"]
                                      else "partial" if after2["sync_partial_ok"]
                                      > after["sync_partial_ok"] else "none")
        self.master = new
        return out

    def missing(self, node, numbers):
        """The acknowledged numbers whose key `node` does not hold."""
        c = node.client()
        try:
            lost = []
            for i in range(0, len(numbers), 500):
                chunk = numbers[i:i + 500]
                vals = c.mget([f"w:{n}" for n in chunk])
                lost += [n for n, v in zip(chunk, vals) if v is None or int(v) != n]
            return lost
        finally:
            c.close()

    def logs(self):
        out = []
        for p in self.nodes + self.sentinels:
            try:
                with open(p.log, errors="replace") as f:
                    out.append(f"--- {p.name} ---\n{f.read()}")
            except OSError:
                pass
        return "\n".join(out)

    def stop(self, keep=False):
        if self.events:
            self.events.stop()
        for s in self.sentinels:
            s.stop()
        for n in self.nodes:
            n.stop()
        if self.sentinel_dir != self.workdir and not keep:
            shutil.rmtree(self.sentinel_dir, ignore_errors=True)
        if self._own_workdir and not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
