"""Shared pieces of the bench/ scripts: starting the two servers the same
way, a minimal RESP connection, INFO, process CPU and memory readings, the
release build and the printed tables.

Every script runs Sluice and redis-server side by side with the same
arguments (`--save "" --appendonly no` plus the script's own), one thread
for Sluice, pinned with taskset when a CPU is given, so that the figures
are ratios of one run on one machine.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port():
    """A free TCP port: any the kernel gives, or one of `BENCH_PORTS`
    ("19000-19999") when set, for machines where each user has a range."""
    span = os.environ.get("BENCH_PORTS")
    if span:
        lo, hi = (int(x) for x in span.split("-"))
        start = lo + (os.getpid() * 7919 + int(time.time() * 1000)) % (hi - lo + 1)
        for i in range(hi - lo + 1):
            port = lo + (start - lo + i) % (hi - lo + 1)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
        raise RuntimeError(f"no free port in {span}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


def wait_loaded(port, timeout=60.0):
    """Waits until the server answers PING with something other than
    LOADING (a server under valgrind may still be loading its data set
    when its port opens)."""
    deadline = time.time() + timeout
    while True:
        c = Conn(port, timeout=5.0)
        try:
            c.call("PING")
            return
        except RuntimeError as e:
            if not str(e).startswith("LOADING") or time.time() > deadline:
                raise
        except OSError:
            # A server under valgrind on a loaded machine can take longer
            # than the socket timeout to answer its first command.
            if time.time() > deadline:
                raise
        finally:
            c.close()
        time.sleep(0.1)


def need(*tools):
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (apt-get install redis-server redis-tools util-linux)")


def sluice_binary(args):
    """The sluice-server to run: `--sluice-bin`, else a fresh release build
    (skipped with `--no-build`)."""
    if not args.no_build and not args.sluice_bin:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "server", "--bin", "sluice-server"],
                       cwd=ROOT, check=True)
    return args.sluice_bin or os.path.join(TARGET, "release", "sluice-server")


def add_build_args(ap):
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--sluice-bin", default="", help="sluice-server binary to run (implies --no-build)")
    ap.add_argument("--markdown", action="store_true")


def server_cmd(kind, binary, port, extra=()):
    """The command line of one server: `kind` is "sluice" or "redis"."""
    base = ["--port", str(port), "--save", "", "--appendonly", "no"] + list(extra)
    if kind == "redis":
        return ["redis-server"] + base
    return [binary, "--threads", "1"] + base


def start(cmd, port, cpu=None, cwd=None, timeout=10.0):
    """Starts a server and waits for its port. Without `cwd` it runs in an
    empty directory of its own (removed by `stop`): a server loads the
    `dump.rdb` or AOF of the directory it starts in, so one left in the
    caller's directory would be loaded first (and answered `-LOADING`)."""
    scratch = None
    if cwd is None:
        scratch = cwd = tempfile.mkdtemp(prefix="sluice-bench-")
        if os.sep in cmd[0]:
            # A binary given relative to the caller's directory.
            cmd = [os.path.abspath(cmd[0])] + list(cmd[1:])
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    proc.scratch = scratch
    try:
        wait_port(port, proc, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    return proc


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if getattr(proc, "scratch", None):
        shutil.rmtree(proc.scratch, ignore_errors=True)


def load(port, tests, n, pipeline, args):
    """One quiet redis-benchmark run against `port` (`-t tests`), pinned to
    `args.client_cpu`, with `args`' clients, keyspace and value size; fails
    when redis-benchmark does."""
    subprocess.run(
        ["taskset", "-c", str(args.client_cpu), "redis-benchmark", "-p", str(port), "-t", tests,
         "-n", str(n), "-P", str(pipeline), "-c", str(args.clients), "-r", str(args.keyspace),
         "-d", str(args.size), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def cpu_seconds(pid):
    user, system = cpu_split(pid)
    return user + system


def cpu_split(pid):
    """(user, system) CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[11], [12] are utime, stime (14th and 15th of the full line).
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def rss_of(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def pss_of(pid):
    """Proportional set size: pages shared with a fork child count half in
    each, so the sum over a process and its children is the memory they
    really take."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """A blocking RESP2 connection reading the reply shapes the scripts
    need (simple, error, integer, bulk, arrays of those)."""

    def __init__(self, port, timeout=None):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(timeout)
        self.buf = b""
        # Read position in buf: replies are parsed in place, not by
        # re-slicing the rest of the buffer after every line (which made
        # the client's cost grow with the size of the server's writes).
        self.pos = 0

    def close(self):
        self.sock.close()

    def _more(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise RuntimeError("connection closed")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                break
            self._more()
        line = self.buf[self.pos:end]
        self.pos = end + 2
        return line

    def _bulk(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._more()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._bulk(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        if kind == b":":
            return int(rest)
        if kind == b"-":
            return RuntimeError(rest.decode())
        return rest

    def call(self, *args):
        self.sock.sendall(resp(*args))
        r = self.reply()
        if isinstance(r, Exception):
            raise r
        return r

    def pipeline(self, cmds, window=512):
        """Sends RESP-encoded commands `window` at a time; returns the first
        error reply, if any."""
        error = None
        batch = []

        def flush():
            nonlocal error
            self.sock.sendall(b"".join(batch))
            for _ in batch:
                r = self.reply()
                if isinstance(r, Exception) and error is None:
                    error = r
            batch.clear()

        for c in cmds:
            batch.append(c)
            if len(batch) == window:
                flush()
        if batch:
            flush()
        return error


def info(port, section=""):
    c = Conn(port)
    try:
        text = (c.call("INFO", section) if section else c.call("INFO")).decode()
    finally:
        c.close()
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def table(head, rows, markdown):
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
