"""After `kill -STOP` of a replica returns, does the replica still
acknowledge a write its master makes next? (Redis's integration/failover
freezes a replica that way and expects its offset to stay behind.)
The server under test is the replica of a redis-server master on PORT+1;
each round stops it, INCRs on the master and asks `WAIT 1 100`: 1 means
the stopped replica acknowledged.  usage: sigstop_link.py BIN PORT N [args...]"""
import os, shutil, signal, socket, subprocess, sys, tempfile, time
from common import binary, port, n, extra, d, p, conn, stop

mport = port + 1
md = tempfile.mkdtemp(prefix="race-master.")
master = subprocess.Popen(["redis-server", "--port", str(mport), "--save", "", "--dir", md],
                          stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def cmd(s, line):
    s.sendall(line.encode() + b"\r\n")
    buf = b""
    while not buf.endswith(b"\r\n"):
        buf += s.recv(1000)
    return buf


acked = 0
try:
    r = conn()
    for _ in range(100):
        try:
            m = socket.create_connection(("127.0.0.1", mport))
            break
        except OSError:
            time.sleep(0.05)
    cmd(r, f"REPLICAOF 127.0.0.1 {mport}")
    while cmd(m, "WAIT 1 1000") != b":1\r\n":
        pass
    for i in range(n):
        os.kill(p.pid, signal.SIGSTOP)
        cmd(m, "INCR x")
        if cmd(m, "WAIT 1 100") == b":1\r\n":
            acked += 1
        os.kill(p.pid, signal.SIGCONT)
        while cmd(m, "WAIT 1 1000") != b":1\r\n":
            pass
finally:
    stop()
    master.kill(); master.wait()
    shutil.rmtree(md, ignore_errors=True)
print(f"{os.path.basename(binary)} {' '.join(extra)}: a stopped replica acknowledged {acked}/{n}")
