"""stream-cgroups' "Blocking XREADGROUP: key type changed with SET": XREADGROUP
BLOCK 0 on one connection (reply not awaited), SET of the key at once on
another. Counts how often the SET ran first (the XREADGROUP then answers
WRONGTYPE instead of being unblocked with "no longer exists").
usage: xorder.py BIN PORT N [server args...]"""
import os, shutil, socket, subprocess, sys, tempfile, time
binary, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = sys.argv[4:]
d = tempfile.mkdtemp(prefix="race.")
os.makedirs(d, exist_ok=True)
p = subprocess.Popen([binary, "--port", str(port), "--save", "", "--dir", d, *extra],
                     stdout=open(f"{d}/log", "w"), stderr=subprocess.STDOUT)
def conn():
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port))
        except OSError:
            time.sleep(0.05)
def cmd(s, line):
    s.sendall(line.encode() + b"\r\n")
    return s.recv(65536).decode()
ctl = conn()
first = 0
try:
    for i in range(n):
        cmd(ctl, "DEL s"); cmd(ctl, "XADD s 666 f v"); cmd(ctl, "XGROUP CREATE s g $")
        rd = conn(); cmd(rd, "PING")
        rd.sendall(b"XREADGROUP GROUP g Alice BLOCK 0 STREAMS s >\r\n")
        cmd(ctl, "SET s v")
        r = rd.recv(65536).decode()
        if r.startswith("-WRONGTYPE"):
            first += 1
        rd.close()
finally:
    p.kill(); p.wait()
    shutil.rmtree(d, ignore_errors=True)
print(f"{os.path.basename(binary)} {' '.join(extra)}: SET ran before the XREADGROUP sent first {first}/{n}")
