//! Randomized differential test of streams: proptest generates sequences
//! of stream commands (explicit and partial ids, exact and approximate
//! trims with small nodes, deletions, consumer groups, group reads,
//! acknowledgements, claims, XINFO) over three keys, replayed on
//! redis-server and on Sluice; every reply must match byte for byte.
//!
//! Ids are always given (`<ms>`, `<ms>-<seq>`, `<ms>-*`) so both sides
//! generate the same ones; nothing that reports idle or delivery times is
//! compared. Each case starts from FLUSHALL with a random
//! `stream-node-max-entries` and `stream-node-max-bytes`, so node
//! boundaries (and therefore `~` trims and XINFO's radix-tree counts) are
//! exercised, the byte limit with values Redis's listpack stores as
//! integers or as strings of different sizes.
//! `PROPTEST_CASES` overrides the number of cases.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use testkit::diff::Servers;
use testkit::escape;
use testkit::scenario::{same, Check};

const KEYS: &[&str] = &["s0", "s1", "{s}2"];

fn pick(v: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop::sample::select(v).prop_map(String::from)
}

fn key() -> impl Strategy<Value = String> + Clone {
    pick(KEYS)
}

fn ms() -> impl Strategy<Value = u64> + Clone {
    0u64..40
}

/// An id as XADD takes it.
fn add_id() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        (ms(), 0u64..4).prop_map(|(m, s)| format!("{m}-{s}")),
        ms().prop_map(|m| format!("{m}-*")),
        ms().prop_map(|m| m.to_string()),
    ]
}

/// An id or bound as ranges and groups take them.
fn any_id() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        (ms(), 0u64..4).prop_map(|(m, s)| format!("{m}-{s}")),
        ms().prop_map(|m| m.to_string()),
        (ms(), 0u64..4).prop_map(|(m, s)| format!("({m}-{s}")),
        pick(&["-", "+", "0", "(0-0", "$"]),
    ]
}

fn group() -> impl Strategy<Value = String> + Clone {
    pick(&["g1", "g2"])
}

fn consumer() -> impl Strategy<Value = String> + Clone {
    pick(&["c1", "c2", "c3"])
}

fn trim() -> impl Strategy<Value = Vec<String>> + Clone {
    prop_oneof![
        (pick(&["", "=", "~"]), 0u64..12).prop_map(|(m, n)| words(&format!("MAXLEN {m} {n}"))),
        (pick(&["", "=", "~"]), ms()).prop_map(|(m, n)| words(&format!("MINID {m} {n}"))),
        (0u64..12, 1u64..6).prop_map(|(n, l)| words(&format!("MAXLEN ~ {n} LIMIT {l}"))),
    ]
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[derive(Clone, Debug)]
struct Op {
    args: Vec<String>,
}

fn cmd(parts: Vec<Vec<String>>) -> Op {
    Op { args: parts.into_iter().flatten().collect() }
}

fn s(x: &str) -> Vec<String> {
    words(x)
}

fn one(x: String) -> Vec<String> {
    vec![x]
}

fn op() -> impl Strategy<Value = Op> {
    let pairs = prop::collection::vec(
        pick(&[
            "a 1",
            "b 2",
            "a 3",
            "c x y z",
            "a 1 b 2",
            "a -70000",
            "a 123456789012",
            "b 4095 c -4097",
            "long xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ]),
        1..2,
    );
    prop_oneof![
        8 => (key(), prop::option::of(trim()), add_id(), pairs).prop_map(|(k, t, id, p)| {
            cmd(vec![s("XADD"), one(k), t.unwrap_or_default(), one(id), words(&p.join(" "))])
        }),
        2 => (key(), any_id(), any_id(), prop::option::of(0u64..4)).prop_map(|(k, a, b, c)| {
            let count = c.map(|c| format!("COUNT {c}")).unwrap_or_default();
            cmd(vec![s("XRANGE"), one(k), one(a), one(b), words(&count)])
        }),
        1 => (key(), any_id(), any_id(), prop::option::of(0u64..4)).prop_map(|(k, a, b, c)| {
            let count = c.map(|c| format!("COUNT {c}")).unwrap_or_default();
            cmd(vec![s("XREVRANGE"), one(k), one(a), one(b), words(&count)])
        }),
        1 => key().prop_map(|k| cmd(vec![s("XLEN"), one(k)])),
        2 => (key(), prop::collection::vec(any_id(), 1..3))
            .prop_map(|(k, ids)| cmd(vec![s("XDEL"), one(k), ids])),
        2 => (key(), trim()).prop_map(|(k, t)| cmd(vec![s("XTRIM"), one(k), t])),
        1 => (key(), any_id(), prop::option::of(0u64..30)).prop_map(|(k, id, n)| {
            let added = n.map(|n| format!("ENTRIESADDED {n}")).unwrap_or_default();
            cmd(vec![s("XSETID"), one(k), one(id), words(&added)])
        }),
        2 => (key(), group(), any_id(), pick(&["", "MKSTREAM", "ENTRIESREAD 2"]))
            .prop_map(|(k, g, id, o)| cmd(vec![s("XGROUP CREATE"), one(k), one(g), one(id), words(&o)])),
        1 => (key(), group(), any_id(), pick(&["", "ENTRIESREAD 1"]))
            .prop_map(|(k, g, id, o)| cmd(vec![s("XGROUP SETID"), one(k), one(g), one(id), words(&o)])),
        1 => (key(), group()).prop_map(|(k, g)| cmd(vec![s("XGROUP DESTROY"), one(k), one(g)])),
        1 => (key(), group(), consumer(), pick(&["CREATECONSUMER", "DELCONSUMER"]))
            .prop_map(|(k, g, c, sub)| cmd(vec![s("XGROUP"), one(sub), one(k), one(g), one(c)])),
        4 => (key(), group(), consumer(), pick(&["", "NOACK", "COUNT 1", "COUNT 2 NOACK"]), pick(&[">", ">", "0", "5-0"]))
            .prop_map(|(k, g, c, o, id)| {
                cmd(vec![s("XREADGROUP GROUP"), one(g), one(c), words(&o), s("STREAMS"), one(k), one(id)])
            }),
        1 => (key(), key(), pick(&["", "COUNT 1"]), any_id(), any_id()).prop_map(|(a, b, o, x, y)| {
            cmd(vec![s("XREAD"), words(&o), s("STREAMS"), one(a), one(b), one(x), one(y)])
        }),
        2 => (key(), group(), prop::collection::vec(any_id(), 1..3))
            .prop_map(|(k, g, ids)| cmd(vec![s("XACK"), one(k), one(g), ids])),
        2 => (key(), group()).prop_map(|(k, g)| cmd(vec![s("XPENDING"), one(k), one(g)])),
        1 => (key(), group(), consumer(), prop::collection::vec(any_id(), 1..3), pick(&["JUSTID", "", "FORCE JUSTID", "RETRYCOUNT 3"]))
            .prop_map(|(k, g, c, ids, o)| {
                cmd(vec![s("XCLAIM"), one(k), one(g), one(c), s("0"), ids, words(&o)])
            }),
        1 => (key(), group(), consumer(), any_id(), pick(&["", "COUNT 1", "COUNT 2 JUSTID", "JUSTID"]))
            .prop_map(|(k, g, c, id, o)| {
                cmd(vec![s("XAUTOCLAIM"), one(k), one(g), one(c), s("0"), one(id), words(&o)])
            }),
        2 => key().prop_map(|k| cmd(vec![s("XINFO GROUPS"), one(k)])),
        1 => key().prop_map(|k| cmd(vec![s("XINFO STREAM"), one(k)])),
        1 => (key(), key()).prop_map(|(a, b)| cmd(vec![s("COPY"), one(a), one(b), s("REPLACE")])),
        1 => key().prop_map(|k| cmd(vec![s("DEL"), one(k)])),
    ]
}

#[test]
fn random_stream_sequences_match_redis() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let connect = || servers.connect();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 500,
        failure_persistence: None,
        ..Config::default()
    });
    let pair = std::cell::RefCell::new(connect());
    let node_bytes = pick(&["0", "60", "150", "4096"]);
    let strategy = (2u64..7, node_bytes, prop::collection::vec(op(), 1..60));
    let result = runner.run(&strategy, |(node_entries, node_bytes, ops)| {
        let mut p = pair.borrow_mut();
        let config = |name: &str, v: String| -> Vec<String> {
            vec!["CONFIG".into(), "SET".into(), name.into(), v]
        };
        let setup = [
            s("FLUSHALL"),
            config("stream-node-max-entries", node_entries.to_string()),
            config("stream-node-max-bytes", node_bytes),
        ];
        for r in &setup {
            if p.both(r).is_err() {
                *p = connect();
            }
        }
        for (i, o) in ops.iter().enumerate() {
            let (a, b) = p.both(&o.args).map_err(TestCaseError::fail)?;
            if !same(&a, &b, Check::Exact) {
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
