"""Random command streams against redis-server and sluice-server side by
side (random_diff.py): every reply must match redis-server's byte for byte,
in RESP2 and RESP3, and every key must keep the same type on both.

Fixed seeds, so a failure reproduces with
`tests/python/random_diff.py --seeds N --minimize` against the two servers.
$SLUICE_RANDOM_DIFF_SEEDS ("1-200") and $SLUICE_RANDOM_DIFF_STEPS widen the
run.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

import random_diff
from test_redis_py import _binary, _free_port

SEEDS = os.environ.get("SLUICE_RANDOM_DIFF_SEEDS", "1-12")
STEPS = int(os.environ.get("SLUICE_RANDOM_DIFF_STEPS", "4000"))


def _start(argv, port):
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.01)
    proc.kill()
    log.seek(0)
    pytest.fail(f"{argv[0]} did not start: {log.read().decode(errors='replace')}")


@pytest.fixture(scope="module")
def servers():
    redis = shutil.which("redis-server")
    if redis is None:
        pytest.fail("redis-server not found (scripts/test installs it)")
    rport, sport = _free_port(), _free_port()
    with tempfile.TemporaryDirectory() as d:
        r = _start([redis, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", d], rport)
        s = _start([_binary(), "--port", str(sport), "--bind", "127.0.0.1", "--save", "",
                    "--threads", "2", "--dir", d], sport)
        try:
            yield rport, sport
        finally:
            for p in (r, s):
                p.kill()
                p.wait()


@pytest.mark.parametrize("resp", ["2", "3"])
@pytest.mark.parametrize("seed", random_diff.seeds(SEEDS))
def test_random_stream_matches_redis(servers, seed, resp):
    rport, sport = servers
    found = random_diff.run_seed(rport, sport, seed + (1000 if resp == "3" else 0), STEPS, resp,
                                 check_types=(seed % 3 == 0))
    report = "\n".join(
        f"step {step} {args!r}\n  redis:  {ra[:300]!r}\n  sluice: {rb[:300]!r}"
        for step, args, ra, rb in found)
    assert not found, f"seed {seed} RESP{resp}:\n{report}"
