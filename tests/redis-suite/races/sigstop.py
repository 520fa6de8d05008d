"""After `kill -STOP` returns, does the server still answer a PING?
(Redis's tests freeze a replica that way.)  usage: sigstop.py BIN PORT N [args...]"""
import os, select, signal, sys
from common import binary, port, n, extra, d, p, conn, stop
c = conn()
answered = 0
try:
    for i in range(n):
        os.kill(p.pid, signal.SIGSTOP)
        c.sendall(b"PING\r\n")
        r, _, _ = select.select([c], [], [], 0.02)
        if r:
            answered += 1
        os.kill(p.pid, signal.SIGCONT)
        buf = b""
        while not buf.endswith(b"+PONG\r\n"):
            buf += c.recv(100)
finally:
    stop()
print(f"{os.path.basename(binary)} {' '.join(extra)}: answered a PING after SIGSTOP {answered}/{n}")
