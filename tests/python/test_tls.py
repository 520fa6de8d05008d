"""redis-py over TLS against a real sluice-server: certificates made by the
openssl CLI (a CA, a server and a client certificate), the server with a
TLS port that requires client certificates (tls-auth-clients yes, Redis's
default), and redis-py's ordinary calls and pipelines through Python's
ssl module (OpenSSL).
"""

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from test_redis_py import _binary, _free_port

CERTS = r"""
openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -nodes -sha256 -key ca.key -days 30 \
    -subj '/O=Sluice Test/CN=Certificate Authority' -out ca.crt
for who in server client; do
    openssl genrsa -out $who.key 2048 2>/dev/null
    if [ $who = server ]; then ext='subjectAltName=IP:127.0.0.1,DNS:localhost'
    else ext='extendedKeyUsage=clientAuth'; fi
    openssl req -new -sha256 -subj "/O=Sluice Test/CN=$who" -key $who.key \
        | openssl x509 -req -sha256 -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
            -extfile <(printf 'keyUsage=digitalSignature,keyEncipherment\n%s\n' "$ext") \
            -out $who.crt 2>/dev/null
done
"""


@pytest.fixture(scope="module")
def tls_server():
    if shutil.which("openssl") is None:
        pytest.fail("openssl CLI not found (scripts/test installs it)")
    d = Path(tempfile.mkdtemp(prefix="sluice-py-tls-"))
    subprocess.run(["bash", "-ec", CERTS], cwd=d, check=True)
    port, tls_port = _free_port(), _free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [_binary(), "--port", str(port), "--bind", "127.0.0.1", "--threads", "2",
         "--save", "", "--tls-port", str(tls_port),
         "--tls-cert-file", str(d / "server.crt"), "--tls-key-file", str(d / "server.key"),
         "--tls-ca-cert-file", str(d / "ca.crt")],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.01)
    if proc.poll() is not None:
        log.seek(0)
        pytest.fail("sluice-server did not start: " + log.read().decode(errors="replace"))
    try:
        yield tls_port, d
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def r(tls_server):
    port, d = tls_server
    client = redis.Redis(host="127.0.0.1", port=port, ssl=True,
                         ssl_ca_certs=str(d / "ca.crt"),
                         ssl_certfile=str(d / "client.crt"), ssl_keyfile=str(d / "client.key"),
                         socket_timeout=20)
    yield client
    client.close()


def test_tls_set_get(r):
    assert r.ping() is True
    assert r.set("tls:a", "hello") is True
    assert r.get("tls:a") == b"hello"
    assert r.incr("tls:n") == 1
    r.delete("tls:h")
    assert r.hset("tls:h", mapping={"f1": "v1", "f2": "v2"}) == 2
    assert r.hgetall("tls:h") == {b"f1": b"v1", b"f2": b"v2"}


def test_tls_big_values_both_ways(r):
    big = b"x" * (3 * 1024 * 1024 + 7)  # many TLS records each way
    assert r.set("tls:big", big) is True
    assert r.get("tls:big") == big
    assert r.strlen("tls:big") == len(big)


def test_tls_deep_pipeline(r):
    n = 100_000
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"tls:p:{i}", i)
    assert all(x is True for x in p.execute())
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.get(f"tls:p:{i}")
    got = p.execute()
    assert len(got) == n and got[0] == b"0" and got[-1] == str(n - 1).encode()


def test_tls_transaction(r):
    with r.pipeline() as p:
        p.set("tls:t", "1").incr("tls:t").get("tls:t")
        assert p.execute() == [True, 2, b"2"]


def test_tls_without_a_client_certificate_is_refused(tls_server):
    port, d = tls_server
    c = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(d / "ca.crt"),
                    socket_timeout=5)
    with pytest.raises(redis.exceptions.ConnectionError):
        c.ping()
    c.close()


def test_tls_server_certificate_is_checked_by_the_client(tls_server):
    port, d = tls_server
    # The client trusts only the server's own certificate as a CA: the
    # chain does not verify, and the client refuses the server.
    c = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(d / "client.crt"),
                    ssl_certfile=str(d / "client.crt"), ssl_keyfile=str(d / "client.key"),
                    socket_timeout=5)
    with pytest.raises(redis.exceptions.ConnectionError):
        c.ping()
    c.close()
