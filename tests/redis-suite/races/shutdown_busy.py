"""scripting's "SHUTDOWN NOSAVE can kill a timedout script anyway": a busy
EVAL on one connection, SHUTDOWN NOSAVE on another, then a new connection
as soon as that one ends. Counts the rounds where the new connection was
accepted (and served) instead of refused. Starts a server per round.
usage: shutdown_busy.py BIN N   (port 19777; Sluice with --threads 2)"""
import socket, subprocess, sys, time
BIN = sys.argv[1]; N = int(sys.argv[2]); port = 19777
bad = 0
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=5); return s
def cmd(s, *a):
    s.sendall(("*%d\r\n" % len(a) + "".join("$%d\r\n%s\r\n" % (len(x), x) for x in a)).encode())
for i in range(N):
    args = [BIN, "--port", str(port), "--save", "", "--appendonly", "no"]
    if "redis" not in BIN: args += ["--threads", "2"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try: s = conn(); break
        except OSError: time.sleep(0.02)
    r = [conn() for _ in range(4)]
    rd = r[i % 4]; rr = r[(i + 1) % 4]
    cmd(rr, "CONFIG", "SET", "lua-time-limit", "10"); rr.recv(100)
    cmd(rd, "EVAL", "redis.call('set',KEYS[1],'y'); while true do end", "1", "x")
    time.sleep(0.2)
    cmd(rr, "PING"); rr.recv(200)
    cmd(rr, "SHUTDOWN", "NOSAVE")
    try:
        while rr.recv(100): pass
    except OSError: pass
    try:
        c = conn(); cmd(c, "SELECT", "9"); got = c.recv(200)
        bad += 1; print(i, "served:", got)
    except OSError as e:
        if "refused" not in str(e): bad += 1; print(i, "error", e)
    p.wait(5)
print("bad", bad, "of", N)
