"""stream-cgroups' "Blocking XREADGROUP: key type changed with SET": XREADGROUP
BLOCK 0 on one connection (reply not awaited), SET of the key at once on
another. Counts how often the SET ran first (the XREADGROUP then answers
WRONGTYPE instead of being unblocked with "no longer exists").
usage: xorder.py BIN PORT N [server args...]"""
import os, socket, sys, time
from common import binary, port, n, extra, d, p, conn, stop, cmd
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
    stop()
print(f"{os.path.basename(binary)} {' '.join(extra)}: SET ran before the XREADGROUP sent first {first}/{n}")
