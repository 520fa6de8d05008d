//! In-process tests of the generic key commands. Every expected reply was
//! taken from redis-server 7.0.15 (except where a test says it checks an
//! internal property, such as SCAN's coverage under concurrent changes).

use std::collections::HashSet;

use store::Value;

use super::space::parse_cursor;
use crate::tests::Harness;

fn other(h: &Harness) -> Harness {
    Harness { shared: h.shared.clone(), sess: h.shared.connect(String::new(), String::new(), -1) }
}

/// Stores a key whose TTL passed long ago but that no one deleted yet
/// (what active expiry has not reached).
fn put_expired(h: &Harness, db: usize, key: &str) {
    let store = &h.shared.store;
    let mut s = store.lock_stripe(db, store.stripe_of(key.as_bytes()) as usize);
    s.insert(key.as_bytes(), Value::from_arg(b"v"), 1, 0);
}

/// The elements of a flat RESP array of bulk strings, sorted.
fn sorted_bulks(reply: &str) -> Vec<String> {
    let mut lines = reply.split("\r\n");
    let head = lines.next().unwrap();
    assert!(head.starts_with('*'), "{reply:?}");
    // "$len", key, "$len", key, …, "" (after the final CRLF): keys sit
    // at the odd places.
    let mut v: Vec<String> = lines.skip(1).step_by(2).map(str::to_owned).collect();
    v.sort();
    v
}

/// Splits a SCAN reply into (cursor, keys).
fn scan_reply(reply: &str) -> (u64, Vec<String>) {
    let parts: Vec<&str> = reply.split("\r\n").collect();
    assert_eq!(parts[0], "*2", "{reply:?}");
    let cursor = parts[2].parse().unwrap();
    let n: usize = parts[3][1..].parse().unwrap();
    let keys = (0..n).map(|i| parts[5 + 2 * i].to_owned()).collect();
    (cursor, keys)
}

#[test]
fn del_unlink_exists() {
    let mut h = Harness::new();
    for k in ["b", "c", "s"] {
        h.run(&["SET", k, "1"]);
    }
    assert_eq!(h.run(&["DEL", "s", "s"]), ":1\r\n");
    assert_eq!(h.run(&["EXISTS", "b", "b", "c", "nokey"]), ":3\r\n");
    assert_eq!(h.run(&["UNLINK", "b", "c", "x"]), ":2\r\n");
    assert_eq!(h.run(&["EXISTS", "b"]), ":0\r\n");
    assert_eq!(h.run(&["DEL"]), "-ERR wrong number of arguments for 'del' command\r\n");
    put_expired(&h, 0, "gone");
    assert_eq!(h.run(&["EXISTS", "gone"]), ":0\r\n");
    assert_eq!(h.run(&["DEL", "gone"]), ":0\r\n");
}

#[test]
fn type_and_touch() {
    let mut h = Harness::new();
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["TYPE", "a"]), "+string\r\n");
    assert_eq!(h.run(&["TYPE", "nokey"]), "+none\r\n");
    assert_eq!(h.run(&["TYPE"]), "-ERR wrong number of arguments for 'type' command\r\n");
    assert_eq!(h.run(&["TOUCH", "a", "b", "nokey", "a"]), ":2\r\n");
    put_expired(&h, 0, "old");
    assert_eq!(h.run(&["TYPE", "old"]), "+none\r\n");
}

#[test]
fn expire_options() {
    let mut h = Harness::new();
    h.run(&["SET", "a", "1"]);
    let nx_xx = "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n";
    assert_eq!(h.run(&["EXPIRE", "a", "10", "NX", "XX"]), nx_xx);
    assert_eq!(h.run(&["EXPIRE", "a", "10", "NX", "GT"]), nx_xx);
    assert_eq!(h.run(&["EXPIRE", "a", "10", "gt", "lt", "nx"]), nx_xx);
    assert_eq!(h.run(&["EXPIRE", "a", "abc", "NX", "XX"]), nx_xx);
    assert_eq!(
        h.run(&["EXPIRE", "a", "10", "GT", "LT"]),
        "-ERR GT and LT options at the same time are not compatible\r\n"
    );
    assert_eq!(h.run(&["EXPIRE", "a", "10", "foo"]), "-ERR Unsupported option foo\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "abc", "foo"]), "-ERR Unsupported option foo\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "10", "fo\0o"]), "-ERR Unsupported option fo\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "10", "fo\r\no"]), "-ERR Unsupported option fo  o\r\n");
    assert_eq!(h.run(&["EXPIRE", "nokey", "10", "foo"]), "-ERR Unsupported option foo\r\n");
    let not_int = "-ERR value is not an integer or out of range\r\n";
    assert_eq!(h.run(&["EXPIRE", "nokey", "abc"]), not_int);
    assert_eq!(h.run(&["EXPIRE", "a", "1.5"]), not_int);
    assert_eq!(h.run(&["PEXPIRE", "a", "+5"]), not_int);
    assert_eq!(h.run(&["EXPIRE", "a"]), "-ERR wrong number of arguments for 'expire' command\r\n");
    assert_eq!(h.run(&["EXPIRE", "nokey", "10"]), ":0\r\n");

    assert_eq!(h.run(&["EXPIRE", "a", "10", "XX", "GT"]), ":0\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "10", "nx"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":10\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "20", "nx"]), ":0\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "20", "gt"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":20\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "5", "gt"]), ":0\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "5", "lt"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":5\r\n");
    // No TTL is an infinite one: LT always beats it, GT never does.
    assert_eq!(h.run(&["PERSIST", "a"]), ":1\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "5", "lt"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":5\r\n");
    assert_eq!(h.run(&["PERSIST", "a"]), ":1\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "5", "gt"]), ":0\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "0", "gt"]), ":0\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "100", "XX"]), ":0\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "100", "LT", "XX"]), ":0\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "200", "XX", "gt"]), ":0\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":-1\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "10", "NX", "NX"]), ":1\r\n");
    // A past time deletes the key and answers 1.
    assert_eq!(h.run(&["EXPIRE", "a", "-5", "lt"]), ":1\r\n");
    assert_eq!(h.run(&["EXISTS", "a"]), ":0\r\n");
}

#[test]
fn expire_overflow_and_past_times() {
    let mut h = Harness::new();
    h.run(&["SET", "a", "1"]);
    for (cmd, t) in [
        ("EXPIRE", "9223372036854775807"),
        ("EXPIRE", "9223372036854775"),
        ("EXPIRE", "9223372036854774"),
        ("PEXPIRE", "9223372036854775807"),
        ("EXPIREAT", "9223372036854775807"),
        ("EXPIRE", "-9223372036854776"),
        ("EXPIRE", "-9223372036854775808"),
    ] {
        assert_eq!(
            h.run(&[cmd, "a", t]),
            format!("-ERR invalid expire time in '{}' command\r\n", cmd.to_lowercase()),
            "{cmd} {t}"
        );
    }
    assert_eq!(h.run(&["PEXPIREAT", "a", "9223372036854775807"]), ":1\r\n");
    assert_eq!(h.run(&["PEXPIRETIME", "a"]), ":9223372036854775807\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "-9223372036854775"]), ":1\r\n");
    assert_eq!(h.run(&["EXISTS", "a"]), ":0\r\n");
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["PEXPIREAT", "a", "0"]), ":1\r\n");
    assert_eq!(h.run(&["EXISTS", "a"]), ":0\r\n");
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["EXPIREAT", "a", "-5", "LT"]), ":1\r\n");
    assert_eq!(h.run(&["EXISTS", "a"]), ":0\r\n");
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["EXPIRE", "a", "0"]), ":1\r\n");
    assert_eq!(h.run(&["EXISTS", "a"]), ":0\r\n");
}

#[test]
fn ttl_family() {
    let mut h = Harness::new();
    for c in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        assert_eq!(h.run(&[c, "nokey"]), ":-2\r\n");
    }
    h.run(&["SET", "a", "1"]);
    for c in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        assert_eq!(h.run(&[c, "a"]), ":-1\r\n");
    }
    // Seconds are rounded to the nearest, absolute ones too.
    assert_eq!(h.run(&["PEXPIREAT", "a", "99999999999600"]), ":1\r\n");
    assert_eq!(h.run(&["EXPIRETIME", "a"]), ":100000000000\r\n");
    assert_eq!(h.run(&["PEXPIRETIME", "a"]), ":99999999999600\r\n");
    assert_eq!(h.run(&["PEXPIREAT", "a", "99999999999499"]), ":1\r\n");
    assert_eq!(h.run(&["EXPIRETIME", "a"]), ":99999999999\r\n");
    assert_eq!(h.run(&["PEXPIRE", "a", "1499"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":1\r\n");
    assert_eq!(h.run(&["EXPIRE", "a", "100"]), ":1\r\n");
    let pttl: i64 = h.run(&["PTTL", "a"])[1..].trim_end().parse().unwrap();
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    put_expired(&h, 0, "old");
    assert_eq!(h.run(&["TTL", "old"]), ":-2\r\n");
    assert_eq!(h.run(&["PTTL"]), "-ERR wrong number of arguments for 'pttl' command\r\n");
}

#[test]
fn persist() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["PERSIST", "nokey"]), ":0\r\n");
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["PERSIST", "a"]), ":0\r\n");
    h.run(&["EXPIRE", "a", "10"]);
    assert_eq!(h.run(&["PERSIST", "a"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":-1\r\n");
}

#[test]
fn rename_and_renamenx() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RENAME", "a", "b"]), "-ERR no such key\r\n");
    assert_eq!(h.run(&["RENAME", "a", "a"]), "-ERR no such key\r\n");
    assert_eq!(h.run(&["RENAMENX", "a", "a"]), "-ERR no such key\r\n");
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["RENAME", "a", "a"]), "+OK\r\n");
    assert_eq!(h.run(&["RENAMENX", "a", "a"]), ":0\r\n");
    h.run(&["SET", "b", "2"]);
    assert_eq!(h.run(&["RENAMENX", "a", "b"]), ":0\r\n");
    assert_eq!(h.run(&["RENAME", "a", "b"]), "+OK\r\n");
    assert_eq!(h.run(&["GET", "b"]), "$1\r\n1\r\n");
    assert_eq!(h.run(&["EXISTS", "a"]), ":0\r\n");
    h.run(&["SET", "a", "1", "EX", "100"]);
    assert_eq!(h.run(&["RENAME", "a", "c"]), "+OK\r\n");
    assert_eq!(h.run(&["TTL", "c"]), ":100\r\n");
    assert_eq!(h.run(&["RENAMENX", "c", "d"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "d"]), ":100\r\n");
    // The value object moves as it is (a shared integer stays shared).
    h.run(&["SET", "n", "5"]);
    assert_eq!(h.run(&["RENAME", "n", "m"]), "+OK\r\n");
    assert_eq!(h.run(&["OBJECT", "REFCOUNT", "m"]), ":2147483647\r\n");
    assert_eq!(h.run(&["RENAME", "a"]), "-ERR wrong number of arguments for 'rename' command\r\n");
    put_expired(&h, 0, "old");
    assert_eq!(h.run(&["RENAME", "old", "new"]), "-ERR no such key\r\n");
}

#[test]
fn move_between_dbs() {
    let mut h = Harness::new();
    h.run(&["SET", "d", "1", "EX", "100"]);
    assert_eq!(h.run(&["MOVE", "d", "1"]), ":1\r\n");
    let same = "-ERR source and destination objects are the same\r\n";
    assert_eq!(h.run(&["MOVE", "d", "0"]), same);
    assert_eq!(h.run(&["MOVE", "nokey", "0"]), same);
    let range = "-ERR DB index is out of range\r\n";
    assert_eq!(h.run(&["MOVE", "d", "16"]), range);
    assert_eq!(h.run(&["MOVE", "d", "-1"]), range);
    assert_eq!(h.run(&["MOVE", "a", "-2147483648"]), range);
    let not_int = "-ERR value is not an integer or out of range\r\n";
    assert_eq!(h.run(&["MOVE", "d", "abc"]), not_int);
    assert_eq!(h.run(&["MOVE", "d", "1.0"]), not_int);
    assert_eq!(h.run(&["MOVE", "a", "99999999999999999999"]), not_int);
    let int_range = "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n";
    assert_eq!(h.run(&["MOVE", "d", "99999999999"]), int_range);
    assert_eq!(h.run(&["MOVE", "a", "2147483648"]), int_range);
    assert_eq!(h.run(&["MOVE", "a", "-2147483649"]), int_range);
    assert_eq!(h.run(&["MOVE", "nokey", "1"]), ":0\r\n");
    assert_eq!(h.run(&["SELECT", "1"]), "+OK\r\n");
    assert_eq!(h.run(&["TTL", "d"]), ":100\r\n");
    h.run(&["SET", "x", "1"]);
    h.run(&["SELECT", "0"]);
    h.run(&["SET", "x", "2"]);
    assert_eq!(h.run(&["MOVE", "x", "1"]), ":0\r\n");
    assert_eq!(h.run(&["GET", "x"]), "$1\r\n2\r\n");
    // An expired key in the destination does not block the move.
    h.run(&["SET", "y", "1"]);
    put_expired(&h, 1, "y");
    assert_eq!(h.run(&["MOVE", "y", "1"]), ":1\r\n");
}

#[test]
fn copy_options() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["COPY", "a", "b"]), ":0\r\n");
    let same = "-ERR source and destination objects are the same\r\n";
    assert_eq!(h.run(&["COPY", "a", "a"]), same);
    h.run(&["SET", "a", "1", "EX", "100"]);
    assert_eq!(h.run(&["COPY", "a", "a"]), same);
    assert_eq!(h.run(&["COPY", "a", "a", "DB", "0"]), same);
    assert_eq!(h.run(&["COPY", "a", "a", "DB", "1"]), ":1\r\n");
    assert_eq!(h.run(&["COPY", "a", "b"]), ":1\r\n");
    assert_eq!(h.run(&["COPY", "a", "b"]), ":0\r\n");
    assert_eq!(h.run(&["COPY", "a", "b", "REPLACE"]), ":1\r\n");
    assert_eq!(h.run(&["TTL", "b"]), ":100\r\n");
    assert_eq!(h.run(&["COPY", "a", "b", "DB"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["COPY", "a", "b", "DB", "16"]), "-ERR DB index is out of range\r\n");
    assert_eq!(
        h.run(&["COPY", "a", "b", "DB", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        h.run(&["COPY", "a", "b", "DB", "99999999999"]),
        "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n"
    );
    assert_eq!(h.run(&["COPY", "a", "b", "foo"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["COPY", "a", "b", "REPLACE", "REPLACE", "DB", "2", "DB", "3"]), ":1\r\n");
    assert_eq!(h.run(&["COPY", "a", "b", "DB", "1", "foo"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["COPY", "a", "b", "DB", "16", "foo"]), "-ERR DB index is out of range\r\n");
    assert_eq!(h.run(&["COPY", "a", "b", "foo", "DB", "16"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["COPY", "nokey", "b", "DB", "16"]), "-ERR DB index is out of range\r\n");
    assert_eq!(h.run(&["COPY", "nokey", "nokey", "DB", "1"]), ":0\r\n");
    assert_eq!(h.run(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(h.run(&["TTL", "b"]), ":100\r\n");
    assert_eq!(h.run(&["OBJECT", "ENCODING", "b"]), "$3\r\nint\r\n");
    assert_eq!(h.run(&["SELECT", "2"]), "+OK\r\n");
    assert_eq!(h.run(&["EXISTS", "b"]), ":0\r\n");
    h.run(&["SELECT", "0"]);
    let big = "12345678901234567890123456789012345678901234567890";
    h.run(&["SET", "big", big]);
    assert_eq!(h.run(&["COPY", "big", "big2"]), ":1\r\n");
    assert_eq!(h.run(&["OBJECT", "ENCODING", "big2"]), "$3\r\nraw\r\n");
    assert_eq!(h.run(&["GET", "big2"]), format!("$50\r\n{big}\r\n"));
    assert_eq!(h.run(&["COPY", "a"]), "-ERR wrong number of arguments for 'copy' command\r\n");
}

#[test]
fn object_subcommands() {
    let mut h = Harness::new();
    let help = h.run(&["OBJECT", "HELP"]);
    assert!(help.starts_with(
        "*15\r\n+OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+ENCODING <key>\r\n"
    ));
    assert!(help.ends_with("+    <key>.\r\n+HELP\r\n+    Prints this help.\r\n"));
    assert_eq!(
        h.run(&["OBJECT", "help", "x"]),
        "-ERR wrong number of arguments for 'object|help' command\r\n"
    );
    assert_eq!(h.run(&["OBJECT", "foo"]), "-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n");
    assert_eq!(
        h.run(&["OBJECT", "foo", "bar"]),
        "-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n"
    );
    assert_eq!(
        h.run(&["OBJECT", "encoding"]),
        "-ERR wrong number of arguments for 'object|encoding' command\r\n"
    );
    assert_eq!(
        h.run(&["OBJECT", "encoding", "a", "b"]),
        "-ERR wrong number of arguments for 'object|encoding' command\r\n"
    );
    assert_eq!(h.run(&["OBJECT"]), "-ERR wrong number of arguments for 'object' command\r\n");
    h.run(&["SET", "n", "100"]);
    h.run(&["SET", "n2", "10000"]);
    h.run(&["SET", "neg", "-1"]);
    h.run(&["SET", "s", "hello"]);
    assert_eq!(h.run(&["OBJECT", "refcount", "n"]), ":2147483647\r\n");
    assert_eq!(h.run(&["OBJECT", "refcount", "n2"]), ":1\r\n");
    assert_eq!(h.run(&["OBJECT", "refcount", "neg"]), ":1\r\n");
    assert_eq!(h.run(&["OBJECT", "refcount", "s"]), ":1\r\n");
    assert_eq!(h.run(&["OBJECT", "encoding", "n"]), "$3\r\nint\r\n");
    assert_eq!(h.run(&["OBJECT", "encoding", "s"]), "$6\r\nembstr\r\n");
    assert_eq!(h.run(&["OBJECT", "encoding", "nokey"]), "$-1\r\n");
    assert_eq!(h.run(&["OBJECT", "refcount", "nokey"]), "$-1\r\n");
    assert_eq!(h.run(&["OBJECT", "idletime", "nokey"]), "$-1\r\n");
    assert_eq!(h.run(&["OBJECT", "freq", "nokey"]), "$-1\r\n");
    assert_eq!(
        h.run(&["OBJECT", "freq", "s"]),
        "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please \
         note that when switching between policies at runtime LRU and LFU data will take some \
         time to adjust.\r\n"
    );
    assert_eq!(h.run(&["OBJECT", "idletime", "s"]), ":0\r\n");
    h.shared.config.write().maxmemory_policy = "allkeys-lfu".into();
    h.shared.config_applied();
    assert_eq!(
        h.run(&["OBJECT", "idletime", "s"]),
        "-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that \
         when switching between policies at runtime LRU and LFU data will take some time to \
         adjust.\r\n"
    );
    assert_eq!(h.run(&["OBJECT", "freq", "nokey"]), "$-1\r\n");
    // A key made under LFU starts at Redis's LFU_INIT_VAL; the first
    // access always counts.
    h.run(&["SET", "f", "hello"]);
    assert_eq!(h.run(&["OBJECT", "freq", "f"]), ":5\r\n");
    h.run(&["GET", "f"]);
    assert_eq!(h.run(&["OBJECT", "freq", "f"]), ":6\r\n");
}

#[test]
fn keys_patterns() {
    let mut h = Harness::new();
    for k in ["", "\\", "a", "ab", "a]", "-", "]", "A", "b", "^", "[", "a\\", "aXb"] {
        h.run(&["SET", k, "1"]);
    }
    let keys = |h: &mut Harness, p: &str| sorted_bulks(&h.run(&["KEYS", p]));
    // `*` alone matches the empty key too; `**` does not.
    assert_eq!(keys(&mut h, "*").len(), 13);
    assert!(keys(&mut h, "*").contains(&String::new()));
    assert_eq!(keys(&mut h, "**").len(), 12);
    assert_eq!(keys(&mut h, ""), vec![""]);
    assert_eq!(keys(&mut h, "[a-]"), vec!["]", "^", "a"]);
    assert_eq!(keys(&mut h, "a*b"), vec!["aXb", "ab"]);
    assert_eq!(keys(&mut h, "[z-a]*"), vec!["a", "aXb", "a\\", "a]", "ab", "b"]);
    assert_eq!(keys(&mut h, "*\\"), vec!["\\", "a\\"]);
    assert_eq!(keys(&mut h, "a[^"), vec!["a\\", "a]", "ab"]);
    assert!(keys(&mut h, "nomatch*").is_empty());
    assert_eq!(h.run(&["KEYS", "nomatch*"]), "*0\r\n");
    // Expired keys are left out (and left in place: DBSIZE still counts them).
    put_expired(&h, 0, "az");
    assert_eq!(keys(&mut h, "a?"), vec!["a\\", "a]", "ab"]);
    assert_eq!(h.run(&["DBSIZE"]), ":14\r\n");
    assert_eq!(h.run(&["KEYS"]), "-ERR wrong number of arguments for 'keys' command\r\n");
    h.run(&["SELECT", "1"]);
    assert_eq!(h.run(&["KEYS", "*"]), "*0\r\n");
}

#[test]
fn scan_arguments() {
    let mut h = Harness::new();
    let empty = "*2\r\n$1\r\n0\r\n*0\r\n";
    assert_eq!(h.run(&["SCAN"]), "-ERR wrong number of arguments for 'scan' command\r\n");
    for bad in ["x", " 1", "1 ", "18446744073709551616", "0x1", "+", "-", "\t1"] {
        assert_eq!(h.run(&["SCAN", bad]), "-ERR invalid cursor\r\n", "{bad:?}");
    }
    for ok in ["", "+0", "-1", "18446744073709551615", "00", "0"] {
        assert_eq!(h.run(&["SCAN", ok]), empty, "{ok:?}");
    }
    let syntax = "-ERR syntax error\r\n";
    for args in [&["COUNT"][..], &["COUNT", "0"], &["COUNT", "-1"], &["MATCH"], &["TYPE"], &["foo"]]
    {
        let mut argv = vec!["SCAN", "0"];
        argv.extend_from_slice(args);
        assert_eq!(h.run(&argv), syntax, "{args:?}");
    }
    let not_int = "-ERR value is not an integer or out of range\r\n";
    assert_eq!(h.run(&["SCAN", "0", "COUNT", "x"]), not_int);
    assert_eq!(h.run(&["SCAN", "0", "COUNT", "99999999999999999999"]), not_int);
    assert_eq!(h.run(&["SCAN", "0", "COUNT", "9223372036854775807"]), empty);
    assert_eq!(h.run(&["SCAN", "0", "TYPE", "foo"]), empty);
}

#[test]
fn cursor_parsing_is_strtoul() {
    assert_eq!(parse_cursor(b"").unwrap(), 0);
    assert_eq!(parse_cursor(b"-1").unwrap(), u64::MAX);
    assert_eq!(parse_cursor(b"-18446744073709551615").unwrap(), 1);
    assert_eq!(parse_cursor(b"5\0junk").unwrap(), 5);
    assert_eq!(parse_cursor(b"007").unwrap(), 7);
    assert!(parse_cursor(b"-18446744073709551616").is_err());
    assert!(parse_cursor(b"--1").is_err());
    assert!(parse_cursor(b"1a").is_err());
}

#[test]
fn scan_match_type_and_expired() {
    let mut h = Harness::new();
    h.run(&["SET", "c", "1"]);
    h.run(&["SET", "b", "1"]);
    h.run(&["SET", "s", "abc"]);
    let all = |h: &mut Harness, extra: &[&str]| {
        let mut argv = vec!["SCAN", "0", "COUNT", "100000"];
        argv.extend_from_slice(extra);
        let (cursor, mut keys) = scan_reply(&h.run(&argv));
        assert_eq!(cursor, 0);
        keys.sort();
        keys
    };
    assert_eq!(all(&mut h, &[]), vec!["b", "c", "s"]);
    assert_eq!(all(&mut h, &["TYPE", "STRING"]), vec!["b", "c", "s"]);
    assert_eq!(all(&mut h, &["MATCH", "s", "TYPE", "string"]), vec!["s"]);
    assert_eq!(all(&mut h, &["MATCH", "[bc]"]), vec!["b", "c"]);
    assert!(all(&mut h, &["TYPE", "list"]).is_empty());
    // Expired keys are dropped and deleted...
    put_expired(&h, 0, "k1");
    assert_eq!(h.run(&["DBSIZE"]), ":4\r\n");
    assert_eq!(all(&mut h, &[]), vec!["b", "c", "s"]);
    assert_eq!(h.run(&["DBSIZE"]), ":3\r\n");
    put_expired(&h, 0, "k1");
    assert_eq!(all(&mut h, &["TYPE", "string"]), vec!["b", "c", "s"]);
    assert_eq!(h.run(&["DBSIZE"]), ":3\r\n");
    // ...except that the TYPE lookup deletes one first, so it reads as
    // "none" and survives the expiry filter (Redis 7.0 does this too).
    put_expired(&h, 0, "k1");
    assert_eq!(all(&mut h, &["TYPE", "none"]), vec!["k1"]);
    assert_eq!(h.run(&["DBSIZE"]), ":3\r\n");
}

/// Every key present for the whole iteration is returned at least once,
/// while other keys come and go between calls and tables resize.
#[test]
fn scan_returns_every_stable_key() {
    let mut h = Harness::new();
    for i in 0..2000 {
        h.run(&["SET", &format!("stay:{i}"), "1"]);
    }
    let mut seen = HashSet::new();
    let mut cursor = 0u64;
    let mut calls = 0;
    loop {
        let reply = h.run(&["SCAN", &cursor.to_string(), "COUNT", "50"]);
        let (next, keys) = scan_reply(&reply);
        seen.extend(keys);
        // Churn: add a burst, delete an older burst.
        for j in 0..40 {
            h.run(&["SET", &format!("tmp:{calls}:{j}"), "1"]);
        }
        if calls >= 3 {
            for j in 0..40 {
                h.run(&["DEL", &format!("tmp:{}:{j}", calls - 3)]);
            }
        }
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(calls < 100_000, "SCAN does not terminate");
    }
    for i in 0..2000 {
        assert!(seen.contains(&format!("stay:{i}")), "missed stay:{i}");
    }
}

/// COUNT is a hint: at least COUNT keys per call when that many remain and
/// the database is dense, and an empty database finishes in one call.
#[test]
fn scan_count_and_empty_stripes() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SCAN", "0"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    h.run(&["SET", "only", "1"]);
    let (c, keys) = scan_reply(&h.run(&["SCAN", "0"]));
    assert_eq!((c, keys), (0, vec!["only".to_owned()]));
    for i in 0..500 {
        h.run(&["SET", &format!("k{i}"), "1"]);
    }
    let (c, keys) = scan_reply(&h.run(&["SCAN", "0", "COUNT", "100"]));
    assert_ne!(c, 0);
    assert!(keys.len() >= 100, "{}", keys.len());
    // Cursors stay small: stripe in the low bits, table cursor above.
    assert!(c < 1 << 40);
}

#[test]
fn randomkey() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RANDOMKEY"]), "$-1\r\n");
    assert_eq!(
        h.run(&["RANDOMKEY", "x"]),
        "-ERR wrong number of arguments for 'randomkey' command\r\n"
    );
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["RANDOMKEY"]), "$1\r\na\r\n");
    h.run(&["SET", "b", "1"]);
    let mut got = HashSet::new();
    for _ in 0..200 {
        got.insert(h.run(&["RANDOMKEY"]));
    }
    assert_eq!(got.len(), 2);
    // Expired picks are deleted and never returned.
    h.run(&["DEL", "a", "b"]);
    for i in 0..50 {
        put_expired(&h, 0, &format!("x{i}"));
    }
    h.run(&["SET", "live", "1"]);
    assert_eq!(h.run(&["RANDOMKEY"]), "$4\r\nlive\r\n");
    h.run(&["DEL", "live"]);
    assert_eq!(h.run(&["RANDOMKEY"]), "$-1\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":0\r\n");
}

#[test]
fn dbsize_counts_unreaped_expired_keys() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["DBSIZE"]), ":0\r\n");
    h.run(&["SET", "k2", "v"]);
    put_expired(&h, 0, "k1");
    assert_eq!(h.run(&["DBSIZE"]), ":2\r\n");
    assert_eq!(h.run(&["KEYS", "*"]), "*1\r\n$2\r\nk2\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":2\r\n");
    assert_eq!(h.run(&["EXISTS", "k1"]), ":0\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":1\r\n");
    assert_eq!(h.run(&["DBSIZE", "x"]), "-ERR wrong number of arguments for 'dbsize' command\r\n");
}

#[test]
fn flush_arguments() {
    let mut h = Harness::new();
    h.run(&["SET", "a", "1"]);
    h.run(&["SELECT", "1"]);
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["FLUSHDB", "x"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["FLUSHDB", "a", "b"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["FLUSHDB", "async"]), "+OK\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":0\r\n");
    assert_eq!(h.run(&["FLUSHDB", "SYNC"]), "+OK\r\n");
    h.run(&["SELECT", "0"]);
    assert_eq!(h.run(&["DBSIZE"]), ":1\r\n");
    assert_eq!(h.run(&["FLUSHALL", "x"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["FLUSHALL", "a", "b"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["FLUSHALL", "ASYNC"]), "+OK\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":0\r\n");
    assert_eq!(h.run(&["FLUSHALL"]), "+OK\r\n");
}

#[test]
fn swapdb() {
    let mut h = Harness::new();
    let range = "-ERR DB index is out of range\r\n";
    assert_eq!(h.run(&["SWAPDB", "0", "16"]), range);
    assert_eq!(h.run(&["SWAPDB", "0", "-1"]), range);
    assert_eq!(h.run(&["SWAPDB", "-2147483648", "1"]), range);
    assert_eq!(h.run(&["SWAPDB", "x", "1"]), "-ERR invalid first DB index\r\n");
    assert_eq!(h.run(&["SWAPDB", "x", "y"]), "-ERR invalid first DB index\r\n");
    assert_eq!(h.run(&["SWAPDB", "1", "x"]), "-ERR invalid second DB index\r\n");
    assert_eq!(h.run(&["SWAPDB", "99999999999", "1"]), "-ERR invalid first DB index\r\n");
    assert_eq!(h.run(&["SWAPDB", "2147483648", "1"]), "-ERR invalid first DB index\r\n");
    assert_eq!(h.run(&["SWAPDB", "1", "99999999999"]), "-ERR invalid second DB index\r\n");
    assert_eq!(h.run(&["SWAPDB", "0", "0"]), "+OK\r\n");
    h.run(&["SET", "a", "1", "EX", "100"]);
    assert_eq!(h.run(&["SWAPDB", "0", "1"]), "+OK\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":0\r\n");
    h.run(&["SELECT", "1"]);
    assert_eq!(h.run(&["DBSIZE"]), ":1\r\n");
    assert_eq!(h.run(&["RANDOMKEY"]), "$1\r\na\r\n");
    assert_eq!(h.run(&["TTL", "a"]), ":100\r\n");
}

/// Which writes abort a WATCHing client's EXEC (each case from Redis).
#[test]
fn watch_interactions() {
    let cases: &[(&str, &[&[&str]], &str, &[&str], bool)] = &[
        ("flushdb existing", &[&["SET", "k", "1"]], "k", &["FLUSHDB"], true),
        ("flushdb missing", &[&["SET", "j", "1"]], "k", &["FLUSHDB"], false),
        (
            "flushall other db",
            &[&["SELECT", "1"], &["SET", "k", "1"], &["SELECT", "0"]],
            "k",
            &["FLUSHALL"],
            false,
        ),
        (
            "swapdb key in other",
            &[&["SELECT", "1"], &["SET", "k", "1"], &["SELECT", "0"]],
            "k",
            &["SWAPDB", "0", "1"],
            true,
        ),
        ("swapdb none", &[&["SET", "j", "1"]], "k", &["SWAPDB", "0", "1"], false),
        ("swapdb same", &[&["SET", "k", "1"]], "k", &["SWAPDB", "0", "0"], false),
        ("expire", &[&["SET", "k", "1"]], "k", &["EXPIRE", "k", "100"], true),
        (
            "expire nx fail",
            &[&["SET", "k", "1", "EX", "10"]],
            "k",
            &["EXPIRE", "k", "100", "NX"],
            false,
        ),
        ("persist none", &[&["SET", "k", "1"]], "k", &["PERSIST", "k"], false),
        ("rename dst", &[&["SET", "k", "1"]], "z", &["RENAME", "k", "z"], true),
        ("move", &[&["SET", "k", "1"]], "k", &["MOVE", "k", "1"], true),
        ("copy dst", &[&["SET", "k", "1"]], "z", &["COPY", "k", "z"], true),
        ("touch", &[&["SET", "k", "1"]], "k", &["TOUCH", "k"], false),
    ];
    for (title, setup, watched, action, aborts) in cases {
        let mut a = Harness::new();
        let mut b = other(&a);
        for c in *setup {
            a.run(c);
        }
        assert_eq!(a.run(&["WATCH", watched]), "+OK\r\n");
        b.run(action);
        a.run(&["MULTI"]);
        a.run(&["PING"]);
        let want = if *aborts { "*-1\r\n" } else { "*1\r\n+PONG\r\n" };
        assert_eq!(a.run(&["EXEC"]), want, "{title}");
    }
}

#[test]
fn cross_db_commands_in_multi() {
    let mut h = Harness::new();
    h.run(&["SET", "k", "v"]);
    h.run(&["MULTI"]);
    h.run(&["COPY", "k", "k", "DB", "5"]);
    h.run(&["MOVE", "k", "6"]);
    h.run(&["SWAPDB", "5", "7"]);
    h.run(&["SELECT", "7"]);
    h.run(&["KEYS", "*"]);
    assert_eq!(h.run(&["EXEC"]), "*5\r\n:1\r\n:1\r\n+OK\r\n+OK\r\n*1\r\n$1\r\nk\r\n");
}

/// Keyspace hits and misses per command, as redis-server 7.0.15's INFO
/// stats move them.
#[test]
fn keyspace_hit_and_miss_counting() {
    let mut h = Harness::new();
    h.run(&["SET", "a", "1"]);
    let cases: &[(&[&str], u64, u64)] = &[
        (&["EXISTS", "a", "nokey"], 1, 1),
        (&["TYPE", "a"], 1, 0),
        (&["TTL", "a"], 1, 0),
        (&["PTTL", "nokey"], 0, 1),
        (&["EXPIRETIME", "a"], 1, 0),
        (&["TOUCH", "a", "nokey"], 1, 1),
        (&["OBJECT", "ENCODING", "a"], 1, 0),
        (&["OBJECT", "FREQ", "nokey"], 0, 1),
        (&["SCAN", "0", "TYPE", "string"], 1, 0),
        (&["COPY", "a", "b"], 1, 0),
        (&["COPY", "nokey", "b"], 0, 1),
        (&["RENAME", "a", "c"], 0, 0),
        (&["MOVE", "c", "1"], 0, 0),
        (&["EXPIRE", "b", "100"], 0, 0),
        (&["PERSIST", "b"], 0, 0),
        (&["KEYS", "*"], 0, 0),
        (&["RANDOMKEY"], 0, 0),
        (&["DEL", "b"], 0, 0),
    ];
    for (argv, hits, misses) in cases {
        let before = h.sess.stats;
        h.run(argv);
        let after = h.sess.stats;
        assert_eq!(
            (after.hits - before.hits, after.misses - before.misses),
            (*hits, *misses),
            "{argv:?}"
        );
    }
}

/// DBSIZE and INFO only visit stripes that were ever written: keys that
/// arrive in never-written stripes by SWAPDB must still count.
#[test]
fn counts_follow_keys_moved_by_swapdb() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SELECT", "5"]), "+OK\r\n");
    for i in 0..50 {
        h.run(&["SET", &format!("k{i}"), "v"]);
    }
    h.run(&["EXPIRE", "k0", "100"]);
    assert_eq!(h.run(&["DBSIZE"]), ":50\r\n");
    assert_eq!(h.run(&["SWAPDB", "5", "9"]), "+OK\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":0\r\n");
    assert_eq!(h.run(&["SELECT", "9"]), "+OK\r\n");
    assert_eq!(h.run(&["DBSIZE"]), ":50\r\n");
    let info = h.run(&["INFO", "keyspace"]);
    assert!(info.contains("db9:keys=50,expires=1,"), "{info}");
    assert!(!info.contains("db5:"), "{info}");
    // Inside EXEC the stripes held are read exactly.
    h.run(&["MULTI"]);
    h.run(&["SET", "new", "v"]);
    h.run(&["DBSIZE"]);
    assert_eq!(h.run(&["EXEC"]), "*2\r\n+OK\r\n:51\r\n");
}
