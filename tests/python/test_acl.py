"""ACL users through redis-py's own ACL helpers (acl_setuser, acl_getuser,
acl_whoami, acl_log, auth, a client opened with username/password): the
calls an application makes, unchanged, against Sluice.

The server binary comes from $SLUICE_SERVER, else target/debug (see
test_redis_py.py); the module starts its own server with two threads.
"""

import pytest
import redis

from test_redis_py import server  # noqa: F401  (the fixture)


@pytest.fixture
def r(server):  # noqa: F811
    client = redis.Redis(host="127.0.0.1", port=server, socket_timeout=10)
    yield client
    client.acl_deluser("py-app")
    client.close()


def test_acl_user_lifecycle(r, server):  # noqa: F811
    assert r.acl_setuser(
        "py-app",
        enabled=True,
        passwords=["+s3cret"],
        keys=["app:*"],
        channels=["news"],
        commands=["-@all", "+get", "+set", "+publish", "+acl|whoami"],
    )
    u = r.acl_getuser("py-app")
    assert "on" in u["flags"]
    assert u["keys"] == ["~app:*"]
    assert u["channels"] == ["&news"]
    # redis-py drops the leading -@all when it parses the rules.
    assert set(u["commands"]) == {"+get", "+set", "+publish", "+acl|whoami"}
    assert b"py-app" in r.acl_users() or "py-app" in [
        x.decode() if isinstance(x, bytes) else x for x in r.acl_users()
    ]

    app = redis.Redis(host="127.0.0.1", port=server, username="py-app", password="s3cret")
    assert app.acl_whoami() == b"py-app" or app.acl_whoami() == "py-app"
    assert app.set("app:1", "v")
    assert app.get("app:1") == b"v"
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.get("other")
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.delete("app:1")
    assert app.publish("news", "m") == 0
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.publish("sports", "m")
    app.close()

    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=server, username="py-app", password="bad").ping()

    log = r.acl_log()
    reasons = {(e["reason"], e["object"]) for e in log}
    assert ("key", "other") in reasons
    assert ("command", "del") in reasons
    assert ("channel", "sports") in reasons
    assert ("auth", "AUTH") in reasons or ("auth", "HELLO") in reasons
    assert r.acl_log_reset()
    assert r.acl_log() == []
