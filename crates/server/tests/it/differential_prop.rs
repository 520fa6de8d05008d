//! Randomized differential test: proptest generates sequences of string,
//! key, expiry and transaction commands over a small key pool; each is
//! replayed on redis-server and on Sluice and every reply must match byte
//! for byte (a few replies that depend on the clock compare by shape).
//!
//! Expiries are either long relative ones (TTL rounds the same on both
//! sides) or fixed absolute timestamps; GT/LT only meet absolute ones, so
//! no comparison depends on which millisecond a command ran in.
//! `PROPTEST_CASES` overrides the number of cases.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use testkit::diff::Servers;
use testkit::escape;
use testkit::scenario::{same, Check};

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "{k}4"];
const VALUES: &[&str] = &[
    "",
    "a",
    "hello",
    "12",
    "-3",
    "0",
    "1.5",
    "99999999999999999999",
    "x y",
    "9223372036854775807",
];
const FLOATS: &[&str] = &["1", "0.1", "-2.5", "1e3", "abc", "3.0e-2", "-0"];
const ABS_SECS: &[&str] = &["4102444800", "4102444900", "4200000000", "1"];
const REL_SECS: &[&str] = &["100000", "200000", "-1", "0", "abc"];

const SET_OPTS: &[&[&str]] = &[
    &[],
    &["NX"],
    &["XX"],
    &["GET"],
    &["KEEPTTL"],
    &["EX", "100000"],
    &["PX", "200000000"],
    &["EXAT", "4102444800"],
    &["PXAT", "4102444800123"],
    &["NX", "GET"],
    &["XX", "GET", "EX", "100000"],
    &["EX", "0"],
];
const GETEX_OPTS: &[&[&str]] =
    &[&[], &["PERSIST"], &["EX", "100000"], &["EXAT", "4102444800"], &["PXAT", "1"]];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(String::from)
}
fn val() -> impl Strategy<Value = String> {
    prop::sample::select(VALUES).prop_map(String::from)
}
fn pick(v: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(v).prop_map(String::from)
}

/// One request and how its reply is compared.
#[derive(Clone, Debug)]
struct Op {
    args: Vec<String>,
    check: Check,
}

fn op(args: Vec<String>) -> Op {
    Op { args, check: Check::Exact }
}

fn s(x: &str) -> String {
    x.to_string()
}

/// Commands whose replies are the same on both servers.
fn exact_op() -> impl Strategy<Value = Op> {
    let set_opt = prop::sample::select(SET_OPTS);
    let getex_opt = prop::sample::select(GETEX_OPTS);
    let flag = prop::sample::select(&["", "NX", "XX", "GT", "LT"][..]);
    prop_oneof![
        (key(), val(), set_opt).prop_map(|(k, v, o)| {
            let mut a = vec![s("SET"), k, v];
            a.extend(o.iter().map(|x| s(x)));
            op(a)
        }),
        key().prop_map(|k| op(vec![s("GET"), k])),
        (key(), val()).prop_map(|(k, v)| op(vec![s("SETNX"), k, v])),
        (key(), pick(REL_SECS), val()).prop_map(|(k, t, v)| op(vec![s("SETEX"), k, t, v])),
        (key(), val()).prop_map(|(k, v)| op(vec![s("GETSET"), k, v])),
        key().prop_map(|k| op(vec![s("GETDEL"), k])),
        (key(), getex_opt).prop_map(|(k, o)| {
            let mut a = vec![s("GETEX"), k];
            a.extend(o.iter().map(|x| s(x)));
            op(a)
        }),
        prop::collection::vec(key(), 1..4).prop_map(|ks| {
            let mut a = vec![s("MGET")];
            a.extend(ks);
            op(a)
        }),
        (prop::bool::ANY, prop::collection::vec((key(), val()), 1..3)).prop_map(|(nx, kv)| {
            let mut a = vec![s(if nx { "MSETNX" } else { "MSET" })];
            for (k, v) in kv {
                a.push(k);
                a.push(v);
            }
            op(a)
        }),
        (prop::sample::select(&["INCR", "DECR"][..]), key()).prop_map(|(c, k)| op(vec![s(c), k])),
        (prop::sample::select(&["INCRBY", "DECRBY"][..]), key(), -5i64..5)
            .prop_map(|(c, k, n)| op(vec![s(c), k, n.to_string()])),
        (key(), pick(FLOATS)).prop_map(|(k, f)| op(vec![s("INCRBYFLOAT"), k, f])),
        (key(), val()).prop_map(|(k, v)| op(vec![s("APPEND"), k, v])),
        key().prop_map(|k| op(vec![s("STRLEN"), k])),
        (key(), -6i64..6, -6i64..6).prop_map(|(k, a, b)| op(vec![
            s("GETRANGE"),
            k,
            a.to_string(),
            b.to_string()
        ])),
        (key(), 0u32..8, val()).prop_map(|(k, o, v)| op(vec![s("SETRANGE"), k, o.to_string(), v])),
        (key(), key()).prop_map(|(a, b)| op(vec![s("LCS"), a, b])),
        prop::collection::vec(key(), 1..3).prop_map(|ks| {
            let mut a = vec![s("DEL")];
            a.extend(ks);
            op(a)
        }),
        prop::collection::vec(key(), 1..3).prop_map(|ks| {
            let mut a = vec![s("EXISTS")];
            a.extend(ks);
            op(a)
        }),
        key().prop_map(|k| op(vec![s("UNLINK"), k])),
        key().prop_map(|k| op(vec![s("TYPE"), k])),
        key().prop_map(|k| op(vec![s("TOUCH"), k])),
        key().prop_map(|k| op(vec![s("OBJECT"), s("ENCODING"), k])),
        (key(), pick(REL_SECS), prop::sample::select(&["", "NX", "XX"][..])).prop_map(
            |(k, t, f)| {
                let mut a = vec![s("EXPIRE"), k, t];
                if !f.is_empty() {
                    a.push(s(f));
                }
                op(a)
            }
        ),
        (key(), pick(ABS_SECS), flag.clone()).prop_map(|(k, t, f)| {
            let mut a = vec![s("EXPIREAT"), k, t];
            if !f.is_empty() {
                a.push(s(f));
            }
            op(a)
        }),
        (key(), pick(ABS_SECS), flag).prop_map(|(k, t, f)| {
            let mut a = vec![s("PEXPIREAT"), k, format!("{t}000")];
            if !f.is_empty() {
                a.push(s(f));
            }
            op(a)
        }),
        key().prop_map(|k| op(vec![s("TTL"), k])),
        key().prop_map(|k| op(vec![s("PERSIST"), k])),
        (prop::sample::select(&["RENAME", "RENAMENX"][..]), key(), key())
            .prop_map(|(c, a, b)| op(vec![s(c), a, b])),
        (key(), key(), prop::bool::ANY).prop_map(|(a, b, r)| {
            let mut v = vec![s("COPY"), a, b];
            if r {
                v.push(s("REPLACE"));
            }
            op(v)
        }),
        key().prop_map(|k| op(vec![s("MOVE"), k, s("1")])),
        Just(op(vec![s("DBSIZE")])),
        Just(op(vec![s("SWAPDB"), s("0"), s("1")])),
    ]
}

/// Any step of a case: a command, a transaction, or a clock-dependent read.
fn step() -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![
        8 => exact_op().prop_map(|o| vec![o]),
        1 => prop::collection::vec(exact_op(), 0..5).prop_map(|ops| {
            let mut v = vec![op(vec![s("MULTI")])];
            v.extend(ops);
            v.push(op(vec![s("EXEC")]));
            v
        }),
        1 => (key(), prop::sample::select(&["PTTL", "EXPIRETIME", "PEXPIRETIME"][..]))
            .prop_map(|(k, c)| vec![Op { args: vec![s(c), k], check: Check::Shape }]),
        1 => Just(vec![Op { args: vec![s("KEYS"), s("*")], check: Check::Sorted }]),
    ]
}

#[test]
fn random_command_sequences_match_redis() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let connect = || servers.connect();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 500,
        failure_persistence: None,
        ..Config::default()
    });
    let pair = std::cell::RefCell::new(connect());
    let result = runner.run(&prop::collection::vec(step(), 1..25), |steps| {
        let mut p = pair.borrow_mut();
        // A fresh state per case; a failed case may have left a MULTI open.
        for reset in [&["DISCARD"][..], &["UNWATCH"][..], &["SELECT", "0"][..]] {
            let r: Vec<String> = reset.iter().map(|x| s(x)).collect();
            if p.both(&r).is_err() {
                *p = connect();
            }
        }
        let (a, b) = p.both(&[s("FLUSHALL")]).map_err(TestCaseError::fail)?;
        if a != b {
            return Err(TestCaseError::fail(format!("FLUSHALL: {}", escape(&b))));
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
