#!/usr/bin/env python3
"""Random differential runs: the same random command stream goes to
redis-server and to sluice-server, and every reply must match byte for
byte.

The commands cover strings, bits, lists, hashes, sets, sorted sets,
streams, keys, HyperLogLogs, geo, scripts and transactions over five keys
(two in one hash slot), with arguments drawn from small pools of edge
values (bounds of int64, infinities, NaN, empty strings, bad numbers,
options in odd combinations). A generator seeded alike makes the same
stream each time, so a seed that finds a difference reproduces it.

What Redis itself answers in no fixed order is compared as a multiset: a
hashtable set's members come out in the order of a hash seeded at random
per process (every set of strings in Redis 7.0), and so do a hashtable hash's fields
(one with a value over 64 bytes): the replies that list them (SMEMBERS,
SINTER, SUNION, SDIFF, KEYS, HKEYS, HVALS, HGETALL, a whole-set
SRANDMEMBER, SPOP, HRANDFIELD or ZRANDMEMBER, a whole-collection SCAN,
SSCAN, HSCAN or ZSCAN, a SORT of a set's load order, and a script that
runs one of those) are compared as multisets; a transaction's replies are
each compared as their command's, and a hashtable set's or hash's DUMP
by its size. OBJECT REFCOUNT is left out: Redis's counts show its own
sharing (a value a queued command's arguments still hold counts 2 inside
EXEC; a COPY of a small integer is not shared). Nothing here depends on
the clock: TTLs are long or invalid, blocking commands time out at once
on both.

One difference this cannot rule out is Redis's own chance: a lex range
(ZRANGEBYLEX, ZLEXCOUNT, ZREMRANGEBYLEX) over a skiplist sorted set whose
scores differ walks the skiplist's levels, which Redis draws at random,
so what it finds then changes from one process to the next (seed 335,
RESP2, type checks on: ZREMRANGEBYLEX removed 7 members in Redis and 0
in Sluice, which checks the range's ends first as Redis's lex reads do;
by hand, a skiplist of six members over mixed scores answered
`ZREMRANGEBYLEX key (c [n` with 0 where a walk from its first member
would remove 4). Redis defines lex ranges over equal scores only.

As a program, for longer runs than the test's:

    tests/python/random_diff.py --redis-port 6379 --sluice-port 6380 \
        --seeds 1-200 --steps 5000 [--resp 3] [--check-types]

prints each difference with its seed and step, and with --minimize the
shortest command sequence it found that still shows it.
"""

import argparse
import random
import socket
import sys


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """A raw RESP connection that returns each reply's bytes as sent."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _fill(self):
        d = self.sock.recv(1 << 16)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def _line(self, pos):
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _end(self, pos):
        i = self._line(pos)
        t = self.buf[pos:pos + 1]
        if t in b"+-:_#,(":
            return i + 2
        n = int(self.buf[pos + 1:i])
        if t in b"$=!":
            if n < 0:
                return i + 2
            end = i + 2 + n + 2
            while len(self.buf) < end:
                self._fill()
            return end
        if t in b"*~>%|":
            p = i + 2
            for _ in range(max(n, 0) * (2 if t in b"%|" else 1)):
                p = self._end(p)
            return p
        raise ValueError("not RESP: %r" % self.buf[pos:pos + 40])

    def cmd(self, args):
        self.sock.sendall(encode(args))
        end = self._end(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply


def items(reply):
    """The top-level elements of an aggregate reply, as bytes."""
    c = Conn.__new__(Conn)
    c.buf = reply

    def no_more():
        raise EOFError("truncated reply")
    c._fill = no_more
    i = c._line(0)
    n = int(reply[1:i]) * (2 if reply[:1] in b"%|" else 1)
    pos, out = i + 2, []
    for _ in range(max(n, 0)):
        e = c._end(pos)
        out.append(reply[pos:e])
        pos = e
    return reply[:i + 2], out


R = random.Random()

KEYS = ["k0", "k1", "k2", "{t}a", "{t}b"]
def key(): return R.choice(KEYS)
INTS = ["0", "1", "-1", "2", "3", "10", "-5", "100", "9223372036854775807", "-9223372036854775808",
        "9223372036854775808", "4294967296", "abc", "", "1.5", " 1", "0x10", "+1", "007", "-0"]
FLOATS = ["0", "1", "-1", "1.5", "-2.25", "inf", "-inf", "+inf", "nan", "1e308", "1e309", "abc", "", "3e-5", "0.1", "10", "-0", "5.0"]
STRS = ["a", "b", "c", "hello", "", "x y", "1", "2", "10", "-3", "é", "a" * 70, "\x00\x01", "foo", "bar"]
def i(): return R.choice(INTS)
def ttl(): return R.choice(["100000", "0", "-1", "abc", "9223372036854775807", "", "1.5", "9223372036854775", "-9223372036854775808"])
def smallint(): return str(R.choice([-3, -2, -1, 0, 1, 2, 3, 5, 10, 100, -100]))
def f(): return R.choice(FLOATS)
def s(): return R.choice(STRS)
def many(g, lo=1, hi=4): return [g() for _ in range(R.randint(lo, hi))]
def opt(*choices): return list(R.choice(choices))
def score_range():
    return R.choice(["-inf", "+inf", "0", "1", "(1", "(0", "2", "5", "-1", "abc", "(", "1.5", "(inf"])
def lex(): return R.choice(["-", "+", "[a", "(a", "[b", "(c", "[", "a", "[hello"])
def sid(): return R.choice(["0-1", "1-0", "1-1", "2-0", "5-5", "0-0", "1", "-", "+", "$", "abc", "18446744073709551615-18446744073709551615", "3-*"])

CMDS = [
 # strings
 lambda: ["SET", key(), s()] + opt([], ["NX"], ["XX"], ["GET"], ["KEEPTTL"], ["EX", "1000"], ["PX", ttl()], ["EX", ttl()], ["NX", "GET"], ["XX", "KEEPTTL"], ["EX", "100", "KEEPTTL"]),
 lambda: ["GET", key()], lambda: ["GETDEL", key()], lambda: ["GETEX", key()] + opt([], ["PERSIST"], ["EX", ttl()], ["PX", "100000"]),
 lambda: ["APPEND", key(), s()], lambda: ["STRLEN", key()], lambda: ["INCR", key()], lambda: ["DECR", key()],
 lambda: ["INCRBY", key(), i()], lambda: ["DECRBY", key(), i()], lambda: ["INCRBYFLOAT", key(), f()],
 lambda: ["SETRANGE", key(), R.choice(["0", "1", "5", "-1", "abc", "100"]), s()], lambda: ["GETRANGE", key(), smallint(), smallint()],
 lambda: ["MSET"] + sum([[key(), s()] for _ in range(R.randint(1, 3))], []), lambda: ["MGET"] + many(key),
 lambda: ["MSETNX"] + sum([[key(), s()] for _ in range(R.randint(1, 3))], []), lambda: ["SETNX", key(), s()],
 lambda: ["GETSET", key(), s()], lambda: ["SETEX", key(), ttl(), s()], lambda: ["PSETEX", key(), ttl(), s()],
 lambda: ["LCS", key(), key()] + opt([], ["LEN"], ["IDX"], ["IDX", "MINMATCHLEN", smallint()], ["IDX", "WITHMATCHLEN"]),
 # bits
 lambda: ["SETBIT", key(), R.choice(["0", "1", "7", "100", "-1", "abc"]), R.choice(["0", "1", "2"])], lambda: ["GETBIT", key(), smallint()],
 lambda: ["BITCOUNT", key()] + opt([], [smallint(), smallint()], [smallint(), smallint(), R.choice(["BIT", "BYTE", "bad"])]),
 lambda: ["BITPOS", key(), R.choice(["0", "1", "2"])] + opt([], [smallint()], [smallint(), smallint()], [smallint(), smallint(), R.choice(["BIT", "BYTE"])]),
 lambda: ["BITOP", R.choice(["AND", "OR", "XOR", "NOT", "bad"]), key()] + many(key, 1, 2),
 lambda: ["BITFIELD", key()] + R.choice([["GET", R.choice(["u8", "i8", "u63", "i64", "u64", "i5"]), smallint()], ["SET", "i8", "0", i()], ["INCRBY", "u4", "#1", smallint()], ["OVERFLOW", R.choice(["SAT", "FAIL", "WRAP", "x"]), "INCRBY", "i4", "0", smallint()]]),
 # lists
 lambda: [R.choice(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), key()] + many(s),
 lambda: [R.choice(["LPOP", "RPOP"]), key()] + opt([], [smallint()]),
 lambda: ["LRANGE", key(), smallint(), smallint()], lambda: ["LLEN", key()], lambda: ["LINDEX", key(), smallint()],
 lambda: ["LSET", key(), smallint(), s()], lambda: ["LREM", key(), smallint(), s()], lambda: ["LTRIM", key(), smallint(), smallint()],
 lambda: ["LINSERT", key(), R.choice(["BEFORE", "AFTER", "x"]), s(), s()],
 lambda: ["LPOS", key(), s()] + opt([], ["RANK", smallint()], ["COUNT", smallint()], ["MAXLEN", smallint()], ["RANK", smallint(), "COUNT", "0"]),
 lambda: ["LMOVE", key(), key(), R.choice(["LEFT", "RIGHT"]), R.choice(["LEFT", "RIGHT", "UP"])], lambda: ["RPOPLPUSH", key(), key()],
 lambda: ["LMPOP", R.choice(["1", "2", "0"]), key(), key(), R.choice(["LEFT", "RIGHT"])] + opt([], ["COUNT", smallint()]),
 # hashes
 lambda: ["HSET", key()] + sum([[s(), s()] for _ in range(R.randint(1, 3))], []), lambda: ["HSETNX", key(), s(), s()],
 lambda: ["HGET", key(), s()], lambda: ["HMGET", key()] + many(s), lambda: ["HDEL", key()] + many(s),
 lambda: ["HLEN", key()], lambda: ["HSTRLEN", key(), s()], lambda: ["HEXISTS", key(), s()],
 lambda: ["HINCRBY", key(), s(), i()], lambda: ["HINCRBYFLOAT", key(), s(), f()],
 lambda: ["HGETALL", key()], lambda: ["HKEYS", key()], lambda: ["HVALS", key()],
 # sets
 lambda: ["SADD", key()] + many(lambda: R.choice([s(), smallint()])), lambda: ["SREM", key()] + many(s),
 lambda: ["SCARD", key()], lambda: ["SISMEMBER", key(), s()], lambda: ["SMISMEMBER", key()] + many(s),
 lambda: ["SMEMBERS", key()], lambda: [R.choice(["SINTER", "SUNION", "SDIFF"]), key()] + many(key, 0, 2),
 lambda: [R.choice(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), key(), key()] + many(key, 0, 2),
 lambda: ["SINTERCARD", R.choice(["1", "2", "0", "-1"]), key(), key()] + opt([], ["LIMIT", smallint()]),
 lambda: ["SMOVE", key(), key(), s()],
 # zsets
 lambda: ["ZADD", key()] + opt([], ["NX"], ["XX"], ["GT"], ["LT"], ["CH"], ["INCR"], ["GT", "CH"], ["NX", "XX"]) + sum([[f(), s()] for _ in range(R.randint(1, 3))], []),
 lambda: ["ZINCRBY", key(), f(), s()], lambda: ["ZSCORE", key(), s()], lambda: ["ZMSCORE", key()] + many(s),
 lambda: ["ZRANK", key(), s()], lambda: ["ZREVRANK", key(), s()], lambda: ["ZCARD", key()], lambda: ["ZREM", key()] + many(s),
 lambda: ["ZRANGE", key(), smallint(), smallint()] + opt([], ["WITHSCORES"], ["REV"], ["REV", "WITHSCORES"]),
 lambda: ["ZRANGE", key(), score_range(), score_range(), "BYSCORE"] + opt([], ["WITHSCORES"], ["REV"], ["LIMIT", smallint(), smallint()]),
 lambda: ["ZRANGE", key(), lex(), lex(), "BYLEX"] + opt([], ["REV"], ["LIMIT", smallint(), smallint()]),
 lambda: ["ZRANGEBYSCORE", key(), score_range(), score_range()] + opt([], ["WITHSCORES"], ["LIMIT", smallint(), smallint()]),
 lambda: ["ZREVRANGEBYSCORE", key(), score_range(), score_range()] + opt([], ["WITHSCORES"], ["LIMIT", smallint(), smallint()]),
 lambda: ["ZRANGEBYLEX", key(), lex(), lex()] + opt([], ["LIMIT", smallint(), smallint()]),
 lambda: ["ZCOUNT", key(), score_range(), score_range()], lambda: ["ZLEXCOUNT", key(), lex(), lex()],
 lambda: ["ZREMRANGEBYSCORE", key(), score_range(), score_range()], lambda: ["ZREMRANGEBYRANK", key(), smallint(), smallint()],
 lambda: ["ZREMRANGEBYLEX", key(), lex(), lex()],
 lambda: [R.choice(["ZPOPMIN", "ZPOPMAX"]), key()] + opt([], [smallint()]),
 lambda: [R.choice(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), key(), R.choice(["1", "2", "0"]), key(), key()] + opt([], ["WEIGHTS", f(), f()], ["AGGREGATE", R.choice(["SUM", "MIN", "MAX", "X"])]),
 lambda: [R.choice(["ZUNION", "ZINTER", "ZDIFF"]), R.choice(["1", "2"]), key(), key()] + opt([], ["WITHSCORES"], ["AGGREGATE", "MAX", "WITHSCORES"]),
 lambda: ["ZRANGESTORE", key(), key(), smallint(), smallint()],
 lambda: ["ZMPOP", R.choice(["1", "2"]), key(), key(), R.choice(["MIN", "MAX"])] + opt([], ["COUNT", smallint()]),
 # streams
 lambda: ["XADD", key()] + opt([], ["NOMKSTREAM"], ["MAXLEN", smallint()], ["MINID", sid()]) + [sid(), s(), s()],
 lambda: ["XLEN", key()], lambda: ["XRANGE", key(), sid(), sid()] + opt([], ["COUNT", smallint()]),
 lambda: ["XREVRANGE", key(), sid(), sid()] + opt([], ["COUNT", smallint()]),
 lambda: ["XDEL", key()] + many(sid), lambda: ["XTRIM", key(), R.choice(["MAXLEN", "MINID"]), smallint()],
 lambda: ["XGROUP", "CREATE", key(), R.choice(["g1", "g2"]), R.choice(["0", "$", "1-1"])] + opt([], ["MKSTREAM"]),
 lambda: ["XREADGROUP", "GROUP", R.choice(["g1", "g2"]), "c1", "COUNT", "2", "STREAMS", key(), R.choice([">", "0"])],
 lambda: ["XACK", key(), R.choice(["g1", "g2"])] + many(sid), lambda: ["XPENDING", key(), R.choice(["g1", "g2"])],
 lambda: ["XREAD", "COUNT", "2", "STREAMS", key(), sid()], lambda: ["XSETID", key(), sid()],
 # keys
 lambda: ["DEL"] + many(key), lambda: ["EXISTS"] + many(key), lambda: ["TYPE", key()], lambda: ["RENAME", key(), key()],
 lambda: ["RENAMENX", key(), key()], lambda: ["COPY", key(), key()] + opt([], ["REPLACE"]),
 lambda: ["EXPIRE", key(), R.choice(["100000", "0", "-1", "abc", "9223372036854775807"])] + opt([], ["NX"], ["XX"], ["GT"], ["LT"]),
 lambda: ["PERSIST", key()], lambda: ["TTL", key()], lambda: ["EXPIRETIME", key()],
 lambda: ["OBJECT", "ENCODING", key()], lambda: ["SORT", key()] + opt([], ["ALPHA"], ["DESC"], ["LIMIT", smallint(), smallint()], ["ALPHA", "DESC"]),
 lambda: ["TOUCH"] + many(key),
 # hll
 lambda: ["PFADD", key()] + many(s, 0, 3), lambda: ["PFCOUNT"] + many(key, 1, 2), lambda: ["PFMERGE", key()] + many(key, 0, 2),
 # geo
 lambda: ["GEOADD", key()] + sum([[R.choice(["13.36", "-200", "0", "180", "abc"]), R.choice(["38.1", "85.06", "-85.1", "0"]), s()] for _ in range(R.randint(1, 2))], []),
 lambda: ["GEODIST", key(), s(), s()] + opt([], ["km"], ["mi"], ["x"]), lambda: ["GEOPOS", key()] + many(s),
 lambda: ["GEOHASH", key()] + many(s),
 lambda: ["GEOSEARCH", key(), "FROMLONLAT", "13", "38", "BYRADIUS", R.choice(["100", "1000", "-1"]), "km"] + opt([], ["ASC"], ["DESC", "COUNT", "2"], ["WITHDIST", "ASC"]),
]


SCRIPTS = ["return redis.call('get', KEYS[1])", "return {1, 2, {3, 'x'}, false, true}", "return redis.status_reply('FINE')",
  "return redis.error_reply('MYERR bad')", "return 3.99", "return redis.call('incr', KEYS[1])",
  "return redis.pcall('incr', KEYS[1])", "return redis.call('lrange', KEYS[1], 0, -1)", "return {err='x'}",
  "return redis.call('hgetall', KEYS[1])", "return cjson.encode({1, 2, 'a'})", "return redis.call('zrange', KEYS[1], 0, -1, 'withscores')",
  "return redis.call('type', KEYS[1])", "return redis.call('set', KEYS[1], ARGV[1])", "return tonumber(ARGV[1])",
  "redis.setresp(3); return redis.call('hgetall', KEYS[1])", "redis.setresp(3); return redis.call('zscore', KEYS[1], 'a')",
  "return redis.call('smembers', KEYS[1])", "return redis.sha1hex(ARGV[1])", "return {double=3.5}", "return {map={a=1}}",
  "return redis.call('nosuch')", "return redis.call('get')", "local t = {} for i = 1, 5 do t[i] = i * 1.5 end return t"]
BULK = [
 lambda: ["RPUSH", key()] + [str(x) for x in range(R.choice([5, 130, 200]))],
 lambda: ["HSET", key()] + sum([["f%d" % x, str(x)] for x in range(R.choice([5, 129, 200]))], []),
 lambda: ["ZADD", key()] + sum([[str(x * 0.5), "m%d" % x] for x in range(R.choice([5, 129, 200]))], []),
 lambda: ["SADD", key()] + [str(x) for x in range(R.choice([5, 513, 600]))],
 lambda: ["SADD", key()] + ["s%d" % x for x in range(R.choice([5, 129]))],
]
MORE = [
 lambda: ["EVAL", R.choice(SCRIPTS), "1", key(), s()],
 lambda: ["EVAL_RO", R.choice(SCRIPTS), "1", key(), s()],
 lambda: ["MULTI"], lambda: ["EXEC"], lambda: ["DISCARD"], lambda: ["WATCH", key()], lambda: ["UNWATCH"],
 lambda: ["OBJECT", "ENCODING", key()], lambda: ["OBJECT", "ENCODING", key()],
 lambda: ["XINFO", "STREAM", key()], lambda: ["XINFO", "GROUPS", key()],
 lambda: ["XCLAIM", key(), "g1", "c2", "0", sid()], lambda: ["XAUTOCLAIM", key(), "g1", "c2", "0", "0-0", "COUNT", "2"],
 lambda: ["XGROUP", R.choice(["SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER"]), key(), "g1"] + opt([], ["c1"], ["$"]),
 lambda: ["BITFIELD_RO", key(), "GET", "u8", smallint()],
 lambda: [R.choice(["BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX"]), key(), key(), "0.01"],
 lambda: ["BLMOVE", key(), key(), "LEFT", "RIGHT", "0.01"], lambda: ["BLMPOP", "0.01", "1", key(), "LEFT"],
 lambda: [R.choice(["HRANDFIELD", "SRANDMEMBER", "ZRANDMEMBER"]), key(), R.choice(["0", "-0", "abc", "1.5", "-9223372036854775808", "9223372036854775807"])],
 lambda: [R.choice(["GET", "LLEN", "HSET", "ZADD", "SET", "XADD", "EXPIRE", "SORT", "LPOS", "OBJECT", "XGROUP", "BITFIELD"])],
 lambda: ["SETRANGE", key(), R.choice(["536870912", "536870911999", "-5"]), "x"],
 lambda: ["APPEND", key(), R.choice(INTS)], lambda: ["INCRBYFLOAT", key(), R.choice(["1e308", "-1e308", "5e-324", "1.7976931348623157e308"])],
 lambda: ["SELECT", R.choice(["0", "1", "16", "-1"])], lambda: ["MOVE", key(), R.choice(["0", "1", "16"])], lambda: ["SWAPDB", "0", R.choice(["1", "0", "x"])],
 lambda: ["DBSIZE"], lambda: ["EXISTS", key()],
 # Whole-collection scans and draws: COUNT past every collection's size,
 # so each answers everything in one call (compared as multisets).
 lambda: ["SCAN", "0", "COUNT", "1000"] + opt([], ["MATCH", R.choice(["k*", "{t}*", "*a", "x"])], ["TYPE", R.choice(["string", "list", "set", "zset", "hash", "stream", "nosuch"])]),
 lambda: [R.choice(["SSCAN", "HSCAN", "ZSCAN"]), key(), "0", "COUNT", "1000"] + opt([], ["MATCH", R.choice(["*", "a*", "1*", "f1*"])]),
 lambda: [R.choice(["SRANDMEMBER", "SPOP"]), key(), "1000"],
 lambda: ["HRANDFIELD", key(), "1000"] + opt([], ["WITHVALUES"]), lambda: ["ZRANDMEMBER", key(), "1000"] + opt([], ["WITHSCORES"]),
 # More of the families' commands.
 lambda: ["EXPIREAT", key(), R.choice(["1", "4102444800", "-5", "abc"])] + opt([], ["NX"], ["GT"]),
 lambda: ["PEXPIREAT", key(), R.choice(["1", "4102444800000"])], lambda: ["PEXPIRE", key(), R.choice(["100000000", "0", "-1"])],
 lambda: ["UNLINK"] + many(key), lambda: ["SUBSTR", key(), smallint(), smallint()],
 lambda: ["OBJECT", R.choice(["FREQ", "NOSUCH"]), key()],
 lambda: ["ZREVRANGE", key(), smallint(), smallint()] + opt([], ["WITHSCORES"]), lambda: ["ZREVRANGEBYLEX", key(), lex(), lex()] + opt([], ["LIMIT", smallint(), smallint()]),
 lambda: ["XTRIM", key(), R.choice(["MAXLEN", "MINID"]), "~", smallint()] + opt([], ["LIMIT", smallint()]),
 lambda: ["XINFO", "STREAM", key(), "FULL"] + opt([], ["COUNT", smallint()]),
 lambda: ["GEORADIUS", key(), "13", "38", R.choice(["100", "1000", "-1"]), "km"] + opt([], ["ASC"], ["WITHCOORD", "COUNT", "2"], ["STORE", key()], ["STOREDIST", key()]),
 lambda: ["GEORADIUSBYMEMBER", key(), s(), "1000", "km"] + opt([], ["DESC"], ["WITHDIST", "WITHHASH"]),
 lambda: ["GEOSEARCH", key(), "FROMMEMBER", s(), "BYBOX", R.choice(["100", "4000", "0"]), "500", "km"] + opt([], ["ASC"], ["COUNT", "1", "ANY"]),
 lambda: ["GEOSEARCHSTORE", key(), key(), "FROMLONLAT", "13", "38", "BYRADIUS", "2000", "km"] + opt([], ["STOREDIST"], ["ASC", "COUNT", "1"]),
 # Every encoding's serialized bytes, as DUMP writes them.
 lambda: ["DUMP", key()], lambda: ["DUMP", key()],
 lambda: ["SORT", key(), "BY", R.choice(["k*", "nosort", "{t}*", "k*->f1"])] + opt([], ["GET", "#"], ["GET", "k*", "GET", "#"], ["ALPHA"], ["LIMIT", "0", "2"], ["STORE", key()]),
 lambda: ["SORT", key(), "GET", R.choice(["k*", "#", "k*->f1", "*"])] + opt([], ["ALPHA"], ["STORE", key()]),
]

def gen():
    r = R.random()
    return R.choice(BULK)() if r < 0.02 else R.choice(MORE)() if r < 0.25 else R.choice(CMDS)()


# Replies Redis gives in its seeded hash order.
UNORDERED = {"SMEMBERS", "SINTER", "SUNION", "SDIFF", "KEYS", "HKEYS", "HVALS", "HGETALL"}


def unordered(args):
    name = args[0].upper()
    if name in UNORDERED:
        return True
    if name in ("SRANDMEMBER", "HRANDFIELD", "ZRANDMEMBER", "SPOP") and len(args) > 2:
        return True
    if name == "SORT" and "STORE" not in (a.upper() for a in args[2:]):
        opts = [a.upper() for a in args[2:]]
        if "NOSORT" in opts or ("BY" in opts and "ALPHA" in opts):
            # The members in load order (BY nosort), or ALPHA's ties of
            # missing weights, which keep it: a set's or a sorted set's
            # load order is its seeded dict order.
            return True
    if name in ("EVAL", "EVAL_RO") and ("smembers" in args[1] or "hgetall" in args[1]):
        return True
    return False


def _c_string(elem):
    """A bulk element's bytes up to the first NUL: what SORT ALPHA's
    strcoll compares."""
    if elem[:1] != b"$" or elem.startswith(b"$-1"):
        return elem
    body = elem[elem.index(b"\r\n") + 2:-2]
    return body.split(b"\0", 1)[0]


def sort_ties(reply):
    """SORT ALPHA's reply with each run of elements that compare equal as
    C strings put in one order: `""` and `"\x00\x01"` tie, and Redis's
    unstable sort leaves tied members in an order that starts from a set's
    seeded order. Everything else keeps its place."""
    head, elems = items(reply)
    out, i = [], 0
    while i < len(elems):
        j = i + 1
        while j < len(elems) and _c_string(elems[j]) == _c_string(elems[i]):
            j += 1
        out.extend(sorted(elems[i:j]))
        i = j
    return head + b"".join(out)


def normal(args, reply, queued):
    """The reply as compared: sorted where Redis's own order is seeded."""
    name = args[0].upper()
    if name == "EXEC" and reply[:1] == b"*" and not reply.startswith(b"*-1"):
        head, elems = items(reply)
        if len(elems) == len(queued):
            # Each queued command's reply as that command's is compared.
            return head + b"".join(normal(q, e, []) for q, e in zip(queued, elems))
        if any(unordered(q) for q in queued):
            # Nested: compare the reply's lines as a multiset.
            return b"\n".join(sorted(reply.split(b"\r\n")))
    if name == "SORT" and reply[:1] == b"*":
        opts = [a.upper() for a in args[2:]]
        if "NOSORT" in opts and "LIMIT" in opts and "STORE" not in opts:
            # Which members a LIMIT of a set's load order picks is seeded.
            return items(reply)[0]
    if name in ("SCAN", "SSCAN", "HSCAN", "ZSCAN") and reply[:1] == b"*":
        # The cursor, and the elements as a multiset.
        head, (cursor, elems) = items(reply)
        if name in ("HSCAN", "ZSCAN"):
            pairs = items(elems)[1]
            body = sorted(pairs[i] + pairs[i + 1] for i in range(0, len(pairs), 2))
        else:
            body = sorted(items(elems)[1])
        return head + cursor + b"".join(body)
    if name in ("HRANDFIELD", "ZRANDMEMBER") and len(args) > 3 and reply[:1] == b"*":
        # WITHVALUES / WITHSCORES: pairs, flat in RESP2, nested in RESP3.
        head, elems = items(reply)
        if elems and elems[0][:1] == b"*":
            return head + b"".join(sorted(elems))
        return head + b"".join(sorted(elems[i] + elems[i + 1] for i in range(0, len(elems) - 1, 2)))
    if unordered(args) and reply[:1] in b"*~%":
        head, elems = items(reply)
        return head + b"".join(sorted(elems))
    if name == "SORT" and reply[:1] == b"*":
        opts = [a.upper() for a in args[2:]]
        if "ALPHA" in opts:
            return sort_ties(reply)
    if name == "DUMP" and reply[:1] == b"$" and reply[reply.index(b"\r\n") + 2:][:1] in (b"\x02", b"\x04", b"\x0f", b"\x13", b"\x15"):
        # A hashtable set or hash is serialized in its seeded order, and a
        # stream with its consumers' and deliveries' times in ms: only the
        # payload's size can be compared.
        return reply[:reply.index(b"\r\n")]
    return reply


SORT_ERANGE = b"-ERR One or more scores can't be converted into double\r\n"


def redis_quirk(args, ra, rb):
    """A difference that is Redis's own accident, not a reply to match.

    SORT's numeric parse (sortCommandGeneric) tests `errno == ERANGE`
    after `strtod` without clearing errno first, so an ERANGE left by an
    earlier command's number (INCRBYFLOAT 1e309, a huge DECRBY) fails the
    SORT of well-formed numbers, for as long as nothing resets errno."""
    if args[0].upper() == "SORT" and ra == SORT_ERANGE and rb[:1] == b"*":
        return all(_is_float(e) for e in items(rb)[1])
    return False


def _is_float(reply):
    try:
        float(reply.split(b"\r\n")[1])
        return True
    except (IndexError, ValueError):
        return False


class Run:
    """One seeded stream against both servers."""

    def __init__(self, redis_port, sluice_port, resp="2"):
        self.a, self.b = Conn(redis_port), Conn(sluice_port)
        self.resp = resp
        self.reset()

    def close(self):
        self.a.close()
        self.b.close()

    def reset(self):
        for c in (self.a, self.b):
            c.cmd(["DISCARD"])
            c.cmd(["SELECT", "0"])
            c.cmd(["FLUSHALL"])
            c.cmd(["HELLO", self.resp])
        self.queued, self.in_multi = [], False

    def step(self, args):
        """Sends one command to both; returns the two replies if they differ."""
        ra, rb = self.a.cmd(args), self.b.cmd(args)
        name = args[0].upper()
        differ = normal(args, ra, self.queued) != normal(args, rb, self.queued)
        differ = differ and not redis_quirk(args, ra, rb)
        if name == "MULTI" and ra.startswith(b"+OK"):
            self.in_multi, self.queued = True, []
        elif name in ("EXEC", "DISCARD"):
            self.in_multi, self.queued = False, []
        elif self.in_multi and ra.startswith(b"+QUEUED"):
            self.queued.append(args)
        return (ra, rb) if differ else None

    def types_differ(self):
        ta = [self.a.cmd(["TYPE", k]) for k in KEYS]
        tb = [self.b.cmd(["TYPE", k]) for k in KEYS]
        return ta != tb


FLUSH_EVERY = 500


def stream(seed, steps):
    R.seed(seed)
    return [gen() for _ in range(steps)]


def run_seed(redis_port, sluice_port, seed, steps, resp="2", check_types=False, limit=5):
    """Runs one seed; returns the differences found, as (step, args, redis, sluice)."""
    run = Run(redis_port, sluice_port, resp)
    found = []
    try:
        for k, args in enumerate(stream(seed, steps)):
            d = run.step(args)
            if d:
                found.append((k, args, d[0], d[1]))
                if len(found) >= limit:
                    break
            if check_types and not run.in_multi and run.types_differ():
                found.append((k, args, b"(key types)", b"(key types differ after this)"))
                break
            if k % FLUSH_EVERY == FLUSH_EVERY - 1:
                run.reset()
    finally:
        run.close()
    return found


def minimize(redis_port, sluice_port, seed, step, resp="2"):
    """The shortest sub-sequence (of the stream since its last flush) whose
    last command still answers differently."""
    hist = stream(seed, step + 1)[(step // FLUSH_EVERY) * FLUSH_EVERY:]
    run = Run(redis_port, sluice_port, resp)

    def fails(h):
        run.reset()
        for args in h[:-1]:
            run.step(args)
        return run.step(h[-1]) is not None
    if not fails(hist):
        return None
    chunk = max(1, (len(hist) - 1) // 2)
    while True:
        i, removed = 0, False
        while i < len(hist) - 1:
            cand = hist[:i] + hist[i + chunk:]
            if i + chunk <= len(hist) - 1 and fails(cand):
                hist, removed = cand, True
            else:
                i += chunk
        if not removed:
            if chunk == 1:
                break
            chunk = max(1, chunk // 2)
    run.close()
    return hist


def queued_before(seed, step):
    """The commands queued in the transaction an EXEC at `step` runs."""
    queued = []
    for args in stream(seed, step)[(step // FLUSH_EVERY) * FLUSH_EVERY:]:
        name = args[0].upper()
        if name == "MULTI":
            queued = []
        elif name in ("EXEC", "DISCARD"):
            queued = []
        else:
            queued.append(args)
    return queued


def exec_difference(args, ra, rb, queued):
    """For an EXEC, the first queued command whose reply differs (a
    guess at the queue: commands refused at queueing time shift it)."""
    if args[0].upper() != "EXEC" or ra[:1] != b"*" or rb[:1] != b"*":
        return None
    try:
        xa, xb = items(ra)[1], items(rb)[1]
    except (EOFError, ValueError):
        return None
    queued = queued[-len(xa):] if len(queued) >= len(xa) else queued
    for q, x, y in zip(queued, xa, xb):
        if normal(q, x, []) != normal(q, y, []):
            return (q, x[:300], y[:300])
    return None


def seeds(spec):
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--sluice-port", type=int, required=True)
    p.add_argument("--seeds", default="1-20")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--resp", default="2", choices=["2", "3"])
    p.add_argument("--check-types", action="store_true", help="compare every key's TYPE after each command")
    p.add_argument("--minimize", action="store_true")
    o = p.parse_args()
    total = 0
    for seed in seeds(o.seeds):
        found = run_seed(o.redis_port, o.sluice_port, seed, o.steps, o.resp, o.check_types)
        for step, args, ra, rb in found:
            total += 1
            print("seed %d step %d (RESP%s): %r" % (seed, step, o.resp, args))
            print("  redis:  %r" % ra[:400])
            print("  sluice: %r" % rb[:400])
            inner = exec_difference(args, ra, rb, queued_before(seed, step))
            if inner:
                print("  in the transaction: %r\n    redis:  %r\n    sluice: %r" % inner)
            if o.minimize and not rb.startswith(b"(key"):
                for a in minimize(o.redis_port, o.sluice_port, seed, step, o.resp) or []:
                    print("    %r" % a)
    print("%d differences" % total)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
