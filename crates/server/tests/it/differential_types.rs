//! Randomized differential test across types: proptest generates sequences
//! of string, bitmap, list, hash, set and generic commands over six keys, so keys
//! keep changing type and most commands meet WRONGTYPE, missing keys and
//! emptied keys. Each sequence is replayed on redis-server and on Sluice
//! and every reply must match byte for byte; replies in hash order
//! compare sorted (or as field/value pairs), random ones by shape.
//!
//! Nothing random changes state (no SPOP), so both sides stay in step.
//! Values are short and few, so hashes and sets stay in the encodings
//! whose order is deterministic or compared sorted either way.
//! `PROPTEST_CASES` overrides the number of cases.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use testkit::diff::Servers;
use testkit::escape;
use testkit::scenario::{same, Check};

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4", "{k}5"];
const VALUES: &[&str] = &["a", "b", "c", "1", "2", "-3", "10", "3.5", "", "x y"];
const FIELDS: &[&str] = &["f1", "f2", "f3", "1"];
const INDEXES: &[&str] = &["0", "1", "-1", "2", "-3", "5", "x"];

fn pick(v: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop::sample::select(v).prop_map(String::from)
}
fn key() -> impl Strategy<Value = String> + Clone {
    pick(KEYS)
}
fn val() -> impl Strategy<Value = String> + Clone {
    pick(VALUES)
}
fn field() -> impl Strategy<Value = String> + Clone {
    pick(FIELDS)
}
fn index() -> impl Strategy<Value = String> + Clone {
    pick(INDEXES)
}

/// One request and how its reply is compared.
#[derive(Clone, Debug)]
struct Op {
    args: Vec<String>,
    check: Check,
}

/// `name` followed by `rest`, compared exactly.
fn cmd(name: &str, rest: Vec<String>) -> Op {
    with(Check::Exact, name, rest)
}

fn with(check: Check, name: &str, rest: Vec<String>) -> Op {
    let mut args = vec![name.to_string()];
    args.extend(rest);
    Op { args, check }
}

fn vals(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<String>> + Clone {
    prop::collection::vec(val(), n)
}

fn keys(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<String>> + Clone {
    prop::collection::vec(key(), n)
}

fn string_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (key(), val()).prop_map(|(k, v)| cmd("SET", vec![k, v])),
        key().prop_map(|k| cmd("GET", vec![k])),
        (key(), val()).prop_map(|(k, v)| cmd("APPEND", vec![k, v])),
        key().prop_map(|k| cmd("INCR", vec![k])),
        key().prop_map(|k| cmd("STRLEN", vec![k])),
        key().prop_map(|k| cmd("GETDEL", vec![k])),
        keys(1..3).prop_map(|ks| cmd("MGET", ks)),
    ]
}

fn list_op() -> impl Strategy<Value = Op> {
    let push = prop::sample::select(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"][..]);
    let pop = prop::sample::select(&["LPOP", "RPOP"][..]);
    let end = prop::sample::select(&["LEFT", "RIGHT"][..]);
    prop_oneof![
        3 => (push, key(), vals(1..4)).prop_map(|(c, k, vs)| {
            let mut a = vec![k];
            a.extend(vs);
            cmd(c, a)
        }),
        1 => (pop.clone(), key()).prop_map(|(c, k)| cmd(c, vec![k])),
        1 => (pop, key(), pick(&["0", "1", "3", "-1"])).prop_map(|(c, k, n)| cmd(c, vec![k, n])),
        1 => key().prop_map(|k| cmd("LLEN", vec![k])),
        1 => (key(), index(), index()).prop_map(|(k, a, b)| cmd("LRANGE", vec![k, a, b])),
        1 => (key(), index()).prop_map(|(k, i)| cmd("LINDEX", vec![k, i])),
        1 => (key(), index(), val()).prop_map(|(k, i, v)| cmd("LSET", vec![k, i, v])),
        1 => (key(), pick(&["BEFORE", "AFTER", "MIDDLE"]), val(), val())
            .prop_map(|(k, w, p, v)| cmd("LINSERT", vec![k, w, p, v])),
        1 => (key(), pick(&["0", "1", "-1", "2"]), val())
            .prop_map(|(k, n, v)| cmd("LREM", vec![k, n, v])),
        1 => (key(), index(), index()).prop_map(|(k, a, b)| cmd("LTRIM", vec![k, a, b])),
        1 => (key(), val(), pick(&["", "RANK -1", "COUNT 0", "RANK 2 MAXLEN 3"])).prop_map(
            |(k, v, o)| {
                let mut a = vec![k, v];
                a.extend(o.split_whitespace().map(String::from));
                cmd("LPOS", a)
            }
        ),
        1 => (key(), key(), end.clone(), end)
            .prop_map(|(a, b, x, y)| cmd("LMOVE", vec![a, b, x.into(), y.into()])),
        1 => (key(), key()).prop_map(|(a, b)| cmd("RPOPLPUSH", vec![a, b])),
        1 => (keys(1..3), pick(&["LEFT", "RIGHT"]), pick(&["", "COUNT 2"])).prop_map(|(ks, e, c)| {
            let mut a = vec![ks.len().to_string()];
            a.extend(ks);
            a.push(e);
            a.extend(c.split_whitespace().map(String::from));
            cmd("LMPOP", a)
        }),
    ]
}

fn hash_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (key(), prop::collection::vec((field(), val()), 1..3)).prop_map(|(k, fv)| {
            let mut a = vec![k];
            for (f, v) in fv {
                a.push(f);
                a.push(v);
            }
            cmd("HSET", a)
        }),
        1 => (key(), field(), val()).prop_map(|(k, f, v)| cmd("HSETNX", vec![k, f, v])),
        1 => (key(), field()).prop_map(|(k, f)| cmd("HGET", vec![k, f])),
        1 => (key(), prop::collection::vec(field(), 1..3)).prop_map(|(k, fs)| {
            let mut a = vec![k];
            a.extend(fs);
            cmd("HMGET", a)
        }),
        1 => (key(), prop::collection::vec(field(), 1..3)).prop_map(|(k, fs)| {
            let mut a = vec![k];
            a.extend(fs);
            cmd("HDEL", a)
        }),
        1 => key().prop_map(|k| cmd("HLEN", vec![k])),
        1 => (key(), field()).prop_map(|(k, f)| cmd("HEXISTS", vec![k, f])),
        1 => (key(), field()).prop_map(|(k, f)| cmd("HSTRLEN", vec![k, f])),
        1 => (key(), field(), pick(&["1", "-2", "x"]))
            .prop_map(|(k, f, n)| cmd("HINCRBY", vec![k, f, n])),
        1 => (key(), field(), pick(&["0.5", "-2", "x"]))
            .prop_map(|(k, f, n)| cmd("HINCRBYFLOAT", vec![k, f, n])),
        1 => key().prop_map(|k| with(Check::Sorted, "HKEYS", vec![k])),
        1 => key().prop_map(|k| with(Check::Sorted, "HVALS", vec![k])),
        1 => key().prop_map(|k| with(Check::Pairs, "HGETALL", vec![k])),
        1 => key().prop_map(|k| with(Check::Shape, "HRANDFIELD", vec![k])),
    ]
}

fn set_op() -> impl Strategy<Value = Op> {
    let algebra = prop::sample::select(&["SINTER", "SUNION", "SDIFF"][..]);
    let store = prop::sample::select(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"][..]);
    prop_oneof![
        3 => (key(), vals(1..4)).prop_map(|(k, vs)| {
            let mut a = vec![k];
            a.extend(vs);
            cmd("SADD", a)
        }),
        1 => (key(), vals(1..3)).prop_map(|(k, vs)| {
            let mut a = vec![k];
            a.extend(vs);
            cmd("SREM", a)
        }),
        1 => key().prop_map(|k| with(Check::Sorted, "SMEMBERS", vec![k])),
        1 => (key(), val()).prop_map(|(k, v)| cmd("SISMEMBER", vec![k, v])),
        1 => (key(), vals(1..3)).prop_map(|(k, vs)| {
            let mut a = vec![k];
            a.extend(vs);
            cmd("SMISMEMBER", a)
        }),
        1 => key().prop_map(|k| cmd("SCARD", vec![k])),
        1 => (key(), key(), val()).prop_map(|(a, b, v)| cmd("SMOVE", vec![a, b, v])),
        1 => (algebra, keys(1..3)).prop_map(|(c, ks)| with(Check::Sorted, c, ks)),
        1 => (store, key(), keys(1..3)).prop_map(|(c, d, ks)| {
            let mut a = vec![d];
            a.extend(ks);
            cmd(c, a)
        }),
        1 => keys(1..3).prop_map(|ks| {
            let mut a = vec![ks.len().to_string()];
            a.extend(ks);
            cmd("SINTERCARD", a)
        }),
        1 => key().prop_map(|k| with(Check::Shape, "SRANDMEMBER", vec![k])),
    ]
}

fn generic_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        keys(1..3).prop_map(|ks| cmd("DEL", ks)),
        keys(1..3).prop_map(|ks| cmd("EXISTS", ks)),
        key().prop_map(|k| cmd("TYPE", vec![k])),
        key().prop_map(|k| cmd("OBJECT", vec!["ENCODING".into(), k])),
        (key(), key()).prop_map(|(a, b)| cmd("RENAME", vec![a, b])),
        (key(), key()).prop_map(|(a, b)| cmd("COPY", vec![a, b, "REPLACE".into()])),
        // SORT's replies are deterministic except a set's BY nosort order.
        (key(), pick(&["ALPHA", "ALPHA DESC LIMIT 1 2", "", "DESC", "ALPHA STORE k4"])).prop_map(
            |(k, o)| {
                let mut a = vec![k];
                a.extend(o.split_whitespace().map(String::from));
                cmd("SORT", a)
            }
        ),
        key().prop_map(|k| with(Check::Sorted, "SORT", vec![k, "BY".into(), "nosort".into()])),
        Just(with(Check::Sorted, "KEYS", vec!["*".into()])),
    ]
}

fn bitmap_op() -> impl Strategy<Value = Op> {
    let bit = || pick(&["0", "1", "2", "7", "8", "15", "23", "40", "x"]);
    let range = || {
        pick(&[
            "",
            "0 -1",
            "1 2",
            "-2 -1",
            "0 0",
            "5 2",
            "3 40 BIT",
            "0 -1 BIT",
            "-9 -3 BIT",
            "1 1 BYTE",
            "0 x",
        ])
    };
    let field = pick(&["u1", "i1", "u4", "i5", "u8", "i8", "i16", "u63", "i64", "u64"]);
    let offset = pick(&["0", "3", "#1", "#2", "13", "-1"]);
    let sub = prop_oneof![
        (field.clone(), offset.clone()).prop_map(|(f, o)| format!("GET {f} {o}")),
        (field.clone(), offset.clone(), pick(&["0", "5", "-3", "255", "300", "-129"]))
            .prop_map(|(f, o, v)| format!("SET {f} {o} {v}")),
        (field, offset, pick(&["1", "-1", "100", "-1000"]))
            .prop_map(|(f, o, v)| format!("INCRBY {f} {o} {v}")),
        pick(&["OVERFLOW WRAP", "OVERFLOW SAT", "OVERFLOW FAIL"]),
    ];
    let split = |k: String, rest: String| {
        let mut a = vec![k];
        a.extend(rest.split_whitespace().map(String::from));
        a
    };
    prop_oneof![
        3 => (key(), bit(), pick(&["0", "1", "2"])).prop_map(|(k, b, v)| cmd("SETBIT", vec![k, b, v])),
        1 => (key(), bit()).prop_map(|(k, b)| cmd("GETBIT", vec![k, b])),
        2 => (key(), range()).prop_map(move |(k, r)| cmd("BITCOUNT", split(k, r))),
        2 => (key(), pick(&["0", "1"]), range())
            .prop_map(move |(k, b, r)| cmd("BITPOS", split(k, format!("{b} {r}")))),
        1 => (pick(&["AND", "OR", "XOR", "NOT"]), key(), keys(1..3)).prop_map(|(op, d, ks)| {
            let mut a = vec![op, d];
            a.extend(ks);
            cmd("BITOP", a)
        }),
        2 => (key(), prop::collection::vec(sub, 1..4))
            .prop_map(move |(k, subs)| cmd("BITFIELD", split(k, subs.join(" ")))),
    ]
}

fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => string_op(),
        3 => list_op(),
        3 => hash_op(),
        3 => set_op(),
        2 => generic_op(),
        2 => bitmap_op(),
    ]
}

/// A step of a case: one command or a transaction of a few.
fn step() -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![
        10 => any_op().prop_map(|o| vec![o]),
        // EXEC's reply is compared exactly, so only exact commands go in.
        1 => prop::collection::vec(
            any_op().prop_filter("exact replies in MULTI", |o| o.check == Check::Exact),
            0..4
        )
        .prop_map(|ops| {
            let mut v = vec![cmd("MULTI", vec![])];
            v.extend(ops);
            v.push(cmd("EXEC", vec![]));
            v
        }),
    ]
}

#[test]
fn random_multi_type_sequences_match_redis() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let connect = || servers.connect();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 500,
        failure_persistence: None,
        ..Config::default()
    });
    let pair = std::cell::RefCell::new(connect());
    let result = runner.run(&prop::collection::vec(step(), 1..40), |steps| {
        let mut p = pair.borrow_mut();
        // A fresh state per case; a failed case may have left a MULTI open.
        for reset in [&["DISCARD"][..], &["FLUSHALL"][..]] {
            let r: Vec<String> = reset.iter().map(|x| x.to_string()).collect();
            if p.both(&r).is_err() {
                *p = connect();
            }
        }
        for (i, o) in steps.iter().flatten().enumerate() {
            let (a, b) = p.both(&o.args).map_err(TestCaseError::fail)?;
            if !same(&a, &b, o.check) {
                return Err(TestCaseError::fail(format!(
                    "request #{i} {:?}\n  redis:  {}\n  sluice: {}",
                    o.args,
                    escape(&a),
                    escape(&b)
                )));
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
