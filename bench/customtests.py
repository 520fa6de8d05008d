"""Benchmark tests redis-benchmark has no `-t` name for: a command line
with `__rand_int__` placeholders (redis-benchmark's, zero-padded to 12
digits) and the data it needs, loaded into each server the same way before
each run. Used by bench/compare (ops/s and CPU) and bench/instructions
(callgrind counts).
"""

import hashlib
import random
from collections import namedtuple

from benchlib import Conn, resp

TEST_SETS = {
    "types": "lpush,lpop,sadd,spop,hset,zadd,lrange_100",
    "scripting": "evalsha_get,evalsha_5w",
    "streams": "xadd,xrange_10,xreadgroup,xack",
    "bitmaps": "setbit,bitcount",
    "hll": "pfadd,pfcount,pfadd_dense,pfcount_dense",
    "geo": "geoadd,geosearch",
    "zset100k": "zadd_100k,zscore_100k,zrank_100k,zrangebyscore_100k",
    "hash1k": "hget_1k,hgetall_1k,hscan_1k",
    "small": "hget_small,hset_small,hgetall_small,zscore_small,zadd_small,zrange_small",
}
TEST_SETS["types13"] = ",".join(TEST_SETS[s] for s in ("streams", "bitmaps", "hll", "geo"))

GET_SCRIPT = "return redis.call('GET',KEYS[1])"
W5_SCRIPT = ("redis.call('SET',KEYS[1],ARGV[1]) redis.call('INCR',KEYS[2]) "
             "redis.call('LPUSH',KEYS[3],ARGV[1]) redis.call('HSET',KEYS[4],'f',ARGV[1]) "
             "redis.call('SADD',KEYS[5],ARGV[1]) return 1")


def sha(script):
    return hashlib.sha1(script.encode()).hexdigest()


def _scripts(n, size, keyspace):
    yield resp("SCRIPT", "LOAD", GET_SCRIPT)
    yield resp("SCRIPT", "LOAD", W5_SCRIPT)
    for i in range(keyspace):
        yield resp("SET", f"key:{i:012d}", "x" * size)


def _xrange(n, size, keyspace):
    yield resp("DEL", "xr")
    for i in range(1, 1001):
        yield resp("XADD", "xr", f"{i}-1", "field", "v" * size)


def _xreadgroup(n, size, keyspace):
    # One entry per request, ids <i>-1 so that XACK can name them.
    yield resp("DEL", "xg")
    for i in range(1, n + 1):
        yield resp("XADD", "xg", f"{i}-1", "field", "v" * size)
    yield resp("XGROUP", "CREATE", "xg", "g", "0")


def _bitcount(n, size, keyspace):
    rnd = random.Random(7)
    yield resp("SET", "bc", bytes(rnd.getrandbits(8) for _ in range(12_500)))


def _pfcount(n, size, keyspace):
    yield resp("DEL", "hc")
    for i in range(0, 10_000, 100):
        yield resp("PFADD", "hc", *[f"ele:{j}" for j in range(i, i + 100)])


def _pfdense(n, size, keyspace):
    # Two dense HLLs of 10,000 elements each (past hll-sparse-max-bytes).
    for key in ("hd", "hd2"):
        yield resp("DEL", key)
        for i in range(0, 10_000, 100):
            yield resp("PFADD", key, *[f"{key}:{j}" for j in range(i, i + 100)])


def _geosearch(n, size, keyspace):
    rnd = random.Random(7)
    yield resp("DEL", "gs")
    for i in range(0, 10_000, 100):
        members = []
        for j in range(i, i + 100):
            members += [f"{13 + rnd.random():.6f}", f"{38 + rnd.random():.6f}", f"m:{j}"]
        yield resp("GEOADD", "gs", *members)


def _getjob(n, size, keyspace):
    # One job per request, queued in creation order as ADDJOB makes them.
    for _ in range(n):
        yield resp("ADDJOB", "gq", "v" * size, "0")


def _zset100k(n, size, keyspace):
    # redis-benchmark's ZADD set in its steady state: every member it can
    # name (`element:` + 12 digits, as -r 100000 writes them) already in,
    # with a random score of the same range, so a ZADD moves a member.
    rnd = random.Random(7)
    yield resp("DEL", "zs")
    for i in range(0, 100_000, 500):
        args = []
        for j in range(i, i + 500):
            args += [str(rnd.randrange(100_000)), f"element:{j:012d}"]
        yield resp("ZADD", "zs", *args)


def _hash1k(n, size, keyspace):
    # A hash past the listpack thresholds (hashtable encoding): 1,000
    # fields as redis-benchmark's HSET writes them (-r 1000).
    yield resp("DEL", "bh")
    for i in range(0, 1000, 250):
        args = []
        for j in range(i, i + 250):
            args += [f"element:{j:012d}", "v" * size]
        yield resp("HSET", "bh", *args)


def _hash10(n, size, keyspace):
    # A listpack hash of the ten fields redis-benchmark names with -r 10.
    yield resp("DEL", "hs")
    args = []
    for j in range(10):
        args += [f"element:{j:012d}", "v" * size]
    yield resp("HSET", "hs", *args)


def _zset10(n, size, keyspace):
    # A listpack sorted set of the ten members redis-benchmark names with -r 10.
    yield resp("DEL", "zsm")
    args = []
    for j in range(10):
        args += [str(j), f"element:{j:012d}"]
    yield resp("ZADD", "zsm", *args)


class Custom(namedtuple("Custom", "line load keyspace")):
    """`line`: the command; `load(n, size, keyspace)`: RESP commands run
    first, or None; `keyspace`: "n" when `-r` must be the request count,
    a number when it must be that number."""

    def setup(self, port, n, size, keyspace):
        if not self.load:
            return None
        c = Conn(port)
        try:
            return c.pipeline(self.load(n, size, keyspace))
        finally:
            c.close()


CUSTOM = {
    "evalsha_get": Custom(["EVALSHA", sha(GET_SCRIPT), "1", "key:__rand_int__"], _scripts, None),
    "evalsha_5w": Custom(["EVALSHA", sha(W5_SCRIPT), "5", "s:__rand_int__", "c:__rand_int__",
                          "l:__rand_int__", "h:__rand_int__", "t:__rand_int__", "__data__"], _scripts, None),
    # Jobs (docs/jobs.md): one queue, TTL and RETRY left to their defaults.
    "addjob": Custom(["ADDJOB", "aq", "__data__", "0"], None, None),
    "getjob": Custom(["GETJOB", "NOHANG", "FROM", "gq"], _getjob, None),
    "xadd": Custom(["XADD", "xa", "*", "field", "__data__"], None, None),
    "xrange_10": Custom(["XRANGE", "xr", "-", "+", "COUNT", "10"], _xrange, None),
    "xreadgroup": Custom(["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "xg", ">"],
                         _xreadgroup, None),
    # Right after xreadgroup: acknowledges the entries it delivered.
    "xack": Custom(["XACK", "xg", "g", "__rand_int__-1"], None, "n"),
    # redis-benchmark's numbers have leading zeros, which bit offsets may
    # not have: random keys, one offset.
    "setbit": Custom(["SETBIT", "bm:__rand_int__", "1000", "1"], None, None),
    "bitcount": Custom(["BITCOUNT", "bc"], _bitcount, None),
    "pfadd": Custom(["PFADD", "hll", "ele:__rand_int__"], None, None),
    "pfcount": Custom(["PFCOUNT", "hc"], _pfcount, None),
    # On values that are dense from the start: PFADD's register update,
    # and PFCOUNT of two keys (their registers merged, no cached count).
    "pfadd_dense": Custom(["PFADD", "hd", "ele:__rand_int__"], _pfdense, None),
    "pfcount_dense": Custom(["PFCOUNT", "hd", "hd2"], _pfdense, None),
    # "13.000000012345": redis-benchmark's numbers as coordinate decimals.
    "geoadd": Custom(["GEOADD", "geo", "13.__rand_int__", "38.__rand_int__", "m:__rand_int__"], None, None),
    # One sorted set of 100,000 members (redis-benchmark's ZADD at its
    # steady state), whatever the script's -r.
    "zadd_100k": Custom(["ZADD", "zs", "__rand_int__", "element:__rand_int__"], _zset100k, 100_000),
    "zscore_100k": Custom(["ZSCORE", "zs", "element:__rand_int__"], _zset100k, 100_000),
    "zrank_100k": Custom(["ZRANK", "zs", "element:__rand_int__"], _zset100k, 100_000),
    "zrangebyscore_100k": Custom(["ZRANGEBYSCORE", "zs", "__rand_int__", "+inf", "LIMIT", "0", "10"],
                                 _zset100k, 100_000),
    # The hashtable encoding's lookup and its two walks (slab order,
    # SCAN's bucket order) over 1,000 fields.
    "hget_1k": Custom(["HGET", "bh", "element:__rand_int__"], _hash1k, 1000),
    "hgetall_1k": Custom(["HGETALL", "bh"], _hash1k, None),
    "hscan_1k": Custom(["HSCAN", "bh", "0", "COUNT", "2000"], _hash1k, None),
    # Ten-element listpacks (the packed, front-coded encodings): lookups,
    # updates in place and the whole walk.
    "hget_small": Custom(["HGET", "hs", "element:__rand_int__"], _hash10, 10),
    "hset_small": Custom(["HSET", "hs", "element:__rand_int__", "__data__"], _hash10, 10),
    "hgetall_small": Custom(["HGETALL", "hs"], _hash10, None),
    "zscore_small": Custom(["ZSCORE", "zsm", "element:__rand_int__"], _zset10, 10),
    "zadd_small": Custom(["ZADD", "zsm", "__rand_int__", "element:__rand_int__"], _zset10, 10),
    "zrange_small": Custom(["ZRANGE", "zsm", "0", "-1", "WITHSCORES"], _zset10, None),
    "geosearch": Custom(["GEOSEARCH", "gs", "FROMLONLAT", "13.5", "38.5", "BYRADIUS", "5", "km", "ASC",
                         "COUNT", "10"], _geosearch, None),
}


def custom_args(custom, n, size, keyspace):
    """The `-r` value and the command words for redis-benchmark."""
    if custom.keyspace == "n":
        keyspace = n + 1
    elif isinstance(custom.keyspace, int):
        keyspace = custom.keyspace
    return keyspace, [a.replace("__data__", "v" * size) for a in custom.line]
