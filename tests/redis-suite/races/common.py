"""What the race scripts share: their arguments (BIN PORT N [server
args...]), a server started on PORT in a scratch directory, connections
to it, and its end."""
import os, shutil, socket, subprocess, sys, tempfile, time

binary, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = sys.argv[4:]
d = tempfile.mkdtemp(prefix="race.")
p = subprocess.Popen([binary, "--port", str(port), "--save", "", "--dir", d, *extra],
                     stdout=open(f"{d}/log", "w"), stderr=subprocess.STDOUT)


def conn():
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port))
        except OSError:
            time.sleep(0.05)


def stop():
    p.kill(); p.wait()
    shutil.rmtree(d, ignore_errors=True)


def cmd(s, line):
    """Sends an inline command and returns what one read brings (the
    scripts' replies are short)."""
    s.sendall(line.encode() + b"\r\n")
    return s.recv(65536).decode()
