//! The member stages of a pipelined batch (`conn.rs`, `MEMBER_AHEAD`):
//! for a run of requests to one key one of whose arguments names a member
//! of its set or sorted set or a field of its hash, the batch looks the
//! key up ahead of execution and prefetches the member's place in the
//! table. What it
//! looks at may change before the request runs: the key deleted,
//! replaced by another type, converted from a listpack or an intset to a
//! table (or back, by a new key), expired. These pipelines do all of
//! that inside one window, in one write; every reply must be
//! redis-server's, byte for byte.

use std::path::Path;
use std::time::Duration;

use testkit::diff::Servers;

use crate::common::{assert_same, both};

/// [`both`] for commands built at run time.
fn both_built(pair: &mut testkit::diff::Pair, cmds: &[Vec<String>]) -> (Vec<u8>, Vec<u8>) {
    let strs: Vec<Vec<&str>> =
        cmds.iter().map(|c| c.iter().map(String::as_str).collect()).collect();
    let refs: Vec<&[&str]> = strs.iter().map(Vec::as_slice).collect();
    both(pair, &refs)
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

#[test]
fn pipelined_member_commands_reply_as_redis_while_their_key_changes() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let mut pair = servers.connect();
    // Big enough to be tables: 300 string members, 300 fields.
    let mut fill = vec![cmd(&["FLUSHALL"])];
    for i in 0..300 {
        fill.push(cmd(&["SADD", "s", &format!("m:{i}")]));
        fill.push(cmd(&["HSET", "h", &format!("f:{i}"), &format!("v:{i}")]));
    }
    for i in 0..300 {
        fill.push(cmd(&["ZADD", "z", &i.to_string(), &format!("m:{i}")]));
    }
    fill.push(cmd(&["OBJECT", "ENCODING", "s"]));
    fill.push(cmd(&["OBJECT", "ENCODING", "h"]));
    fill.push(cmd(&["OBJECT", "ENCODING", "z"]));
    assert_same("filling", both_built(&mut pair, &fill));

    // Runs of member commands to one key, longer than a window, the key
    // changing under the stages: deleted, replaced by another type,
    // re-created small, grown into a table, given a TTL that passes.
    let mut p = Vec::new();
    for round in 0..3 {
        for i in 0..40 {
            let m = format!("m:{}", (i * 7 + round) % 350);
            p.push(cmd(&["SISMEMBER", "s", &m]));
            p.push(cmd(&["SADD", "s", &m, "extra"]));
            if i % 9 == 0 {
                p.push(cmd(&["SREM", "s", &m]));
            }
            let f = format!("f:{}", (i * 5 + round) % 350);
            p.push(cmd(&["HGET", "h", &f]));
            p.push(cmd(&["HSET", "h", &f, "new"]));
            p.push(cmd(&["HEXISTS", "h", &f]));
            if i % 11 == 0 {
                p.push(cmd(&["HDEL", "h", &f]));
            }
        }
        p.push(cmd(&["DEL", "s"]));
        for i in 0..20 {
            // A hash where the set was: SADD is WRONGTYPE from here on.
            p.push(cmd(&["HSET", "s", &format!("f:{i}"), "x"]));
            p.push(cmd(&["SADD", "s", &format!("m:{i}")]));
            p.push(cmd(&["SISMEMBER", "s", &format!("m:{i}")]));
        }
        p.push(cmd(&["DEL", "s"]));
        // An intset, then strings that turn it into a table mid-run.
        for i in 0..140 {
            let m = if i < 70 { i.to_string() } else { format!("m:{i}") };
            p.push(cmd(&["SADD", "s", &m]));
            p.push(cmd(&["SISMEMBER", "s", &m]));
        }
        p.push(cmd(&["OBJECT", "ENCODING", "s"]));
        // A small hash (listpack) grown past 128 fields within the run.
        p.push(cmd(&["DEL", "small"]));
        for i in 0..150 {
            p.push(cmd(&["HSET", "small", &format!("k{i}"), "v"]));
            p.push(cmd(&["HGET", "small", &format!("k{}", i / 2)]));
        }
        p.push(cmd(&["OBJECT", "ENCODING", "small"]));
        // A string where the hash was.
        p.push(cmd(&["SET", "h", "now a string"]));
        for i in 0..10 {
            p.push(cmd(&["HGET", "h", &format!("f:{i}")]));
            p.push(cmd(&["HSET", "h", &format!("f:{i}"), "v"]));
        }
        p.push(cmd(&["DEL", "h"]));
        for i in 0..200 {
            p.push(cmd(&["HSET", "h", &format!("f:{i}"), &format!("v:{round}")]));
        }
        // A sorted set: the member is the last argument, after ZADD's
        // flags and score; deleted and re-created small, grown big again.
        for i in 0..60 {
            let m = format!("m:{}", (i * 13 + round) % 330);
            p.push(cmd(&["ZSCORE", "z", &m]));
            p.push(cmd(&["ZADD", "z", &format!("{}", i * 3 + round), &m]));
            p.push(cmd(&["ZADD", "z", "XX", "CH", "GT", &format!("{}", i * 5), &m]));
            p.push(cmd(&["ZINCRBY", "z", "2.5", &m]));
            p.push(cmd(&["ZRANK", "z", &m]));
            if i % 7 == 0 {
                p.push(cmd(&["ZREM", "z", &m]));
            }
        }
        p.push(cmd(&["DEL", "z"]));
        for i in 0..160 {
            p.push(cmd(&["ZADD", "z", &i.to_string(), &format!("m:{i}")]));
            p.push(cmd(&["ZSCORE", "z", &format!("m:{}", i / 2)]));
        }
        p.push(cmd(&["OBJECT", "ENCODING", "z"]));
        p.push(cmd(&["ZRANGE", "z", "0", "4", "WITHSCORES"]));
        // Other commands of the same names' shape on the same key.
        p.push(cmd(&["SRANDMEMBER", "s", "0"]));
        p.push(cmd(&["SMOVE", "s", "t", "m:100"]));
        p.push(cmd(&["HSTRLEN", "h", "f:1"]));
        p.push(cmd(&["HINCRBY", "h", "n", "5"]));
        p.push(cmd(&["HMGET", "h", "f:1", "f:2", "nope"]));
        p.push(cmd(&["SMISMEMBER", "s", "1", "2", "m:139", "nope"]));
        p.push(cmd(&["SCARD", "s"]));
        p.push(cmd(&["HLEN", "h"]));
    }
    assert_same("member runs while the key changes", both_built(&mut pair, &p));

    // A TTL that passes between the stages and the run: the key reads as
    // gone in both.
    let mut q = vec![cmd(&["PEXPIRE", "h", "30"])];
    for i in 0..30 {
        q.push(cmd(&["HGET", "h", &format!("f:{i}")]));
    }
    assert_same("before expiry", both_built(&mut pair, &q));
    std::thread::sleep(Duration::from_millis(60));
    let mut q = Vec::new();
    for i in 0..70 {
        q.push(cmd(&["HGET", "h", &format!("f:{i}")]));
        q.push(cmd(&["HSET", "h", &format!("f:{i}"), "again"]));
    }
    q.push(cmd(&["HLEN", "h"]));
    assert_same("after expiry", both_built(&mut pair, &q));
}
