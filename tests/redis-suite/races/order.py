"""The interleaving of integration/shutdown's "waits for replica then
fails/aborted": two connections send SHUTDOWN (replies not awaited), then a
third sends INFO clients at once. Counts how often INFO runs before both
SHUTDOWNs did, and shows CLIENT LIST's view of the late one.
usage: order.py BIN PORT N [server args...]"""
import os, re, signal, socket, subprocess, sys, time
from common import binary, port, n, extra, d, p, conn, stop
def cmd(s, line):
    s.sendall(line.encode() + b"\r\n")
    return reply(s)
def reply(s):
    buf = b""
    while True:
        got = s.recv(65536)
        if not got:
            raise EOFError("connection closed")
        buf += got
        if buf.startswith((b"+", b"-", b":")) and buf.endswith(b"\r\n"):
            return buf.decode()
        m = re.match(rb"\$(\d+)\r\n", buf)
        if m and len(buf) >= m.end() + int(m.group(1)) + 2:
            return buf[m.end():m.end() + int(m.group(1))].decode()
ctl = conn()
# A real replica (redis-server), then frozen: the master waits for it.
rp = subprocess.Popen(["/usr/bin/redis-server", "--port", str(port + 100), "--save", "",
                       "--dir", d, "--replicaof", "127.0.0.1", str(port)],
                      stdout=open(f"{d}/replica.log", "w"), stderr=subprocess.STDOUT)
for _ in range(200):
    try:
        r = socket.create_connection(("127.0.0.1", port + 100))
        if "master_link_status:up" in cmd(r, "INFO replication"):
            break
        r.close()
    except OSError:
        pass
    time.sleep(0.05)
os.kill(rp.pid, signal.SIGSTOP)
time.sleep(0.5)
cmd(ctl, "INCR k")
early = 0
try:
    for i in range(n):
        rd = [conn(), conn()]
        for j, s in enumerate(rd):
            cmd(s, f"CLIENT SETNAME rd{j}")
        for s in rd:
            s.sendall(b"SHUTDOWN\r\n")
        info = cmd(ctl, "INFO clients")
        if "blocked_clients:2" not in info:
            early += 1
            if early <= 3:
                lst = cmd(ctl, "CLIENT LIST")
                lines = [l for l in lst.splitlines() if " name=rd" in l]
                print(re.search(r"blocked_clients:\d+", info).group(0), "| CLIENT LIST right after:")
                for l in lines:
                    print("   ", " ".join(f for f in l.split() if f.split("=")[0] in ("name", "qbuf", "cmd", "flags")))
        for _ in range(200):
            if "blocked_clients:2" in cmd(ctl, "INFO clients"):
                break
            time.sleep(0.005)
        cmd(ctl, "SHUTDOWN ABORT")
        for s in rd:
            reply(s); s.close()
finally:
    rp.kill(); rp.wait()
    stop()
print(f"{os.path.basename(binary)} {' '.join(extra)}: INFO ran before both SHUTDOWNs {early}/{n}")
