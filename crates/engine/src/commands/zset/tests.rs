//! In-process tests of the sorted-set commands. Expected replies were
//! taken from redis-server 7.0.15.

use crate::tests::Harness;

fn run(h: &mut Harness, line: &str) -> String {
    h.run(&line.split(' ').collect::<Vec<_>>())
}

/// (command, reply) pairs recorded from the oracle; replies do not depend
/// on the encoding.
const SCRIPT: &[(&str, &str)] = &[
    ("ZADD z 1 a 2 b 3 c", ":3\r\n"),
    ("ZADD z XX CH GT 5 a 0 b 9 nosuch", ":1\r\n"),
    ("ZINCRBY z 2.5 b", "$3\r\n4.5\r\n"),
    (
        "ZRANGE z 0 -1 WITHSCORES",
        "*6\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$3\r\n4.5\r\n$1\r\na\r\n$1\r\n5\r\n",
    ),
    ("ZRANGE z (1 +inf BYSCORE REV LIMIT 0 1", "*0\r\n"),
    ("ZRANGE z +inf (1 BYSCORE REV LIMIT 1 1", "*1\r\n$1\r\nb\r\n"),
    ("ZRANGEBYLEX z - (c", "*0\r\n"),
    ("ZRANK z a", ":2\r\n"),
    ("ZREVRANK z a", ":0\r\n"),
    ("ZCOUNT z (3 +inf", ":2\r\n"),
    ("ZPOPMIN z 2", "*4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$3\r\n4.5\r\n"),
    ("ZMPOP 2 none z MAX COUNT 3", "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n5\r\n"),
    ("EXISTS z", ":0\r\n"),
    ("ZADD z NX XX 1 a", "-ERR XX and NX options at the same time are not compatible\r\n"),
    (
        "ZRANGE z 0 -1 BYLEX WITHSCORES",
        "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n",
    ),
    ("ZRANGE z a b BYSCORE", "-ERR min or max is not a float\r\n"),
    ("ZADD u 1 x 2 y", ":2\r\n"),
    ("SADD s y w", ":2\r\n"),
    (
        "ZUNION 2 u s WEIGHTS 2 1 AGGREGATE MAX WITHSCORES",
        "*6\r\n$1\r\nw\r\n$1\r\n1\r\n$1\r\nx\r\n$1\r\n2\r\n$1\r\ny\r\n$1\r\n4\r\n",
    ),
    ("ZINTERSTORE d 2 u s", ":1\r\n"),
    ("ZRANGE d 0 -1 WITHSCORES", "*2\r\n$1\r\ny\r\n$1\r\n3\r\n"),
    ("ZDIFF 2 u s", "*1\r\n$1\r\nx\r\n"),
    ("ZINTERCARD 2 u s LIMIT 5", ":1\r\n"),
    ("ZADD i inf a", ":1\r\n"),
    ("ZINCRBY i -inf a", "-ERR resulting score is not a number (NaN)\r\n"),
    ("ZSCAN u 0 MATCH x", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n"),
    ("ZADD l 0 a 0 b 0 c 0 d", ":4\r\n"),
    ("ZREMRANGEBYLEX l (a [c", ":2\r\n"),
    ("ZRANGE l 0 -1", "*2\r\n$1\r\na\r\n$1\r\nd\r\n"),
    ("ZREMRANGEBYRANK l -1 -1", ":1\r\n"),
    ("ZRANGESTORE l2 l 0 0", ":1\r\n"),
    ("ZRANGE l2 0 -1 WITHSCORES", "*2\r\n$1\r\na\r\n$1\r\n0\r\n"),
];

fn replay(h: &mut Harness) {
    for (cmd, want) in SCRIPT {
        assert_eq!(run(h, cmd), *want, "{cmd}");
    }
}

#[test]
fn commands_answer_as_redis_on_listpacks() {
    let mut h = Harness::new();
    replay(&mut h);
}

#[test]
fn commands_answer_as_redis_on_skiplists() {
    let mut h = Harness::new();
    assert_eq!(run(&mut h, "CONFIG SET zset-max-listpack-entries 0"), "+OK\r\n");
    assert_eq!(run(&mut h, "ZADD k 1 a"), ":1\r\n");
    assert_eq!(run(&mut h, "OBJECT ENCODING k"), "$8\r\nskiplist\r\n");
    assert_eq!(run(&mut h, "DEL k"), ":1\r\n");
    replay(&mut h);
}

#[test]
fn encodings_convert_at_thresholds() {
    let mut h = Harness::new();
    let members: Vec<String> = (0..128).map(|i| format!("{i} m{i}")).collect();
    assert_eq!(run(&mut h, &format!("ZADD z {}", members.join(" "))), ":128\r\n");
    assert_eq!(run(&mut h, "OBJECT ENCODING z"), "$8\r\nlistpack\r\n");
    assert_eq!(run(&mut h, "ZADD z 200 m200"), ":1\r\n");
    assert_eq!(run(&mut h, "OBJECT ENCODING z"), "$8\r\nskiplist\r\n");
    assert_eq!(run(&mut h, "ZRANK z m100"), ":100\r\n");
    assert_eq!(run(&mut h, "ZREMRANGEBYRANK z 0 -3"), ":127\r\n");
    assert_eq!(run(&mut h, "OBJECT ENCODING z"), "$8\r\nskiplist\r\n");
    assert_eq!(run(&mut h, "ZUNIONSTORE d 1 z"), ":2\r\n");
    assert_eq!(run(&mut h, "OBJECT ENCODING d"), "$8\r\nlistpack\r\n");
    let long = "x".repeat(65);
    assert_eq!(run(&mut h, &format!("ZADD w 1 {long}")), ":1\r\n");
    assert_eq!(run(&mut h, "OBJECT ENCODING w"), "$8\r\nskiplist\r\n");
    assert_eq!(run(&mut h, "TYPE w"), "+zset\r\n");
}
