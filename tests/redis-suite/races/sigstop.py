"""After `kill -STOP` returns, does the server still answer a PING?
(Redis's tests freeze a replica that way.)  usage: sigstop.py BIN PORT N [args...]"""
import os, select, shutil, signal, socket, subprocess, sys, tempfile, time
binary, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = sys.argv[4:]
d = tempfile.mkdtemp(prefix="race.")
os.makedirs(d, exist_ok=True)
p = subprocess.Popen([binary, "--port", str(port), "--save", "", "--dir", d, *extra],
                     stdout=open(f"{d}/log", "w"), stderr=subprocess.STDOUT)
for _ in range(100):
    try:
        c = socket.create_connection(("127.0.0.1", port)); break
    except OSError:
        time.sleep(0.05)
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
    p.kill(); p.wait()
    shutil.rmtree(d, ignore_errors=True)
print(f"{os.path.basename(binary)} {' '.join(extra)}: answered a PING after SIGSTOP {answered}/{n}")
