"""integration/failover's "failover aborts if target rejects sync request":
a SET is sent on one connection (reply not awaited), then, on another, a
command that makes the server a replica (FAILOVER there; here REPLICAOF of
an address nothing listens on, which changes the role the same way). On
Redis's one thread the SET, which arrived first, runs first and answers
OK; counts how often it met the replica instead (READONLY).
usage: roleorder.py BIN PORT N [server args...]"""
import os
from common import binary, port, n, extra, d, p, conn, stop, cmd
ctl = conn()
late = 0
try:
    for i in range(n):
        w = conn(); cmd(w, "PING")
        w.sendall(b"SET foo bar\r\n")
        cmd(ctl, "REPLICAOF 127.0.0.1 1")
        if w.recv(65536).decode().startswith("-READONLY"):
            late += 1
        cmd(ctl, "REPLICAOF NO ONE")
        w.close()
finally:
    stop()
print(f"{os.path.basename(binary)} {' '.join(extra)}: SET sent first met the replica {late}/{n}")
