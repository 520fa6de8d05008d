//! List command tests; expected replies come from redis-server 7.0.15.

use crate::tests::Harness;

#[test]
fn push_range_and_len() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(h.run(&["LPUSH", "l", "x", "y"]), ":5\r\n");
    assert_eq!(
        h.run(&["LRANGE", "l", "0", "-1"]),
        "*5\r\n$1\r\ny\r\n$1\r\nx\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(h.run(&["LRANGE", "l", "-2", "100"]), "*2\r\n$1\r\nb\r\n$1\r\nc\r\n");
    assert_eq!(h.run(&["LRANGE", "l", "3", "1"]), "*0\r\n");
    assert_eq!(h.run(&["LLEN", "l"]), ":5\r\n");
    assert_eq!(h.run(&["LPUSHX", "nokey", "a"]), ":0\r\n");
    assert_eq!(h.run(&["RPUSHX", "l", "z"]), ":6\r\n");
    assert_eq!(h.run(&["OBJECT", "ENCODING", "l"]), "$9\r\nquicklist\r\n");
    assert_eq!(h.run(&["LRANGE", "nokey", "0", "-1"]), "*0\r\n");
    assert_eq!(h.run(&["LLEN", "nokey"]), ":0\r\n");
}

#[test]
fn pops_with_counts() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RPUSH", "l", "a", "b", "c", "d"]), ":4\r\n");
    assert_eq!(h.run(&["LPOP", "l"]), "$1\r\na\r\n");
    assert_eq!(h.run(&["RPOP", "l", "2"]), "*2\r\n$1\r\nd\r\n$1\r\nc\r\n");
    assert_eq!(h.run(&["LPOP", "l", "0"]), "*0\r\n");
    assert_eq!(h.run(&["LPOP", "l", "x"]), "-ERR value is out of range, must be positive\r\n");
    assert_eq!(
        h.run(&["LPOP", "l", "1", "2"]),
        "-ERR wrong number of arguments for 'lpop' command\r\n"
    );
    assert_eq!(h.run(&["LPOP", "l", "5"]), "*1\r\n$1\r\nb\r\n");
    assert_eq!(h.run(&["EXISTS", "l"]), ":0\r\n");
    assert_eq!(h.run(&["LPOP", "l"]), "$-1\r\n");
    assert_eq!(h.run(&["LPOP", "l", "2"]), "*-1\r\n");
    h.run(&["HELLO", "3"]);
    assert_eq!(h.run(&["LPOP", "l", "2"]), "_\r\n");
    assert_eq!(h.run(&["LPOP", "l"]), "_\r\n");
}

#[test]
fn index_set_insert() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(h.run(&["LINDEX", "l", "-1"]), "$1\r\nc\r\n");
    assert_eq!(h.run(&["LINDEX", "l", "3"]), "$-1\r\n");
    assert_eq!(h.run(&["LINDEX", "nokey", "x"]), "$-1\r\n");
    assert_eq!(h.run(&["LSET", "nokey", "x", "v"]), "-ERR no such key\r\n");
    assert_eq!(h.run(&["LSET", "l", "5", "v"]), "-ERR index out of range\r\n");
    assert_eq!(h.run(&["LSET", "l", "x", "v"]), "-ERR value is not an integer or out of range\r\n");
    assert_eq!(h.run(&["LSET", "l", "1", "B"]), "+OK\r\n");
    assert_eq!(h.run(&["LINSERT", "l", "AFTER", "B", "x"]), ":4\r\n");
    assert_eq!(h.run(&["LINSERT", "l", "BEFORE", "q", "x"]), ":-1\r\n");
    assert_eq!(h.run(&["LINSERT", "l", "AROUND", "B", "x"]), "-ERR syntax error\r\n");
    assert_eq!(
        h.run(&["LRANGE", "l", "0", "-1"]),
        "*4\r\n$1\r\na\r\n$1\r\nB\r\n$1\r\nx\r\n$1\r\nc\r\n"
    );
}

#[test]
fn rem_and_trim() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RPUSH", "l", "a", "b", "a", "b", "a"]), ":5\r\n");
    assert_eq!(h.run(&["LREM", "l", "-2", "a"]), ":2\r\n");
    assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nb\r\n");
    assert_eq!(h.run(&["LREM", "l", "0", "b"]), ":2\r\n");
    assert_eq!(h.run(&["LTRIM", "l", "1", "0"]), "+OK\r\n");
    assert_eq!(h.run(&["EXISTS", "l"]), ":0\r\n");
    assert_eq!(h.run(&["LTRIM", "nokey", "0", "1"]), "+OK\r\n");
    assert_eq!(
        h.run(&["LTRIM", "nokey", "x", "1"]),
        "-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn lpos_options() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RPUSH", "l", "a", "b", "a", "b", "a"]), ":5\r\n");
    assert_eq!(h.run(&["LPOS", "l", "a", "RANK", "-2"]), ":2\r\n");
    assert_eq!(h.run(&["LPOS", "l", "a", "COUNT", "0", "RANK", "2"]), "*2\r\n:2\r\n:4\r\n");
    assert_eq!(h.run(&["LPOS", "l", "b", "COUNT", "1", "MAXLEN", "1"]), "*0\r\n");
    assert_eq!(h.run(&["LPOS", "l", "a", "RANK", "0"]), "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n");
    assert_eq!(h.run(&["LPOS", "l", "a", "COUNT", "-1"]), "-ERR COUNT can't be negative\r\n");
    assert_eq!(h.run(&["LPOS", "l", "a", "MAXLEN", "x"]), "-ERR MAXLEN can't be negative\r\n");
    assert_eq!(h.run(&["LPOS", "l", "a", "COUNT"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["LPOS", "nokey", "a", "COUNT", "1"]), "*0\r\n");
}

#[test]
fn moves_and_lmpop() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(h.run(&["LMOVE", "l", "m", "RIGHT", "LEFT"]), "$1\r\nc\r\n");
    assert_eq!(h.run(&["RPOPLPUSH", "l", "m"]), "$1\r\nb\r\n");
    assert_eq!(h.run(&["LMOVE", "l", "l", "LEFT", "RIGHT"]), "$1\r\na\r\n");
    assert_eq!(h.run(&["LRANGE", "m", "0", "-1"]), "*2\r\n$1\r\nb\r\n$1\r\nc\r\n");
    assert_eq!(h.run(&["LMOVE", "l", "m", "LEFT", "UP"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["SET", "s", "v"]), "+OK\r\n");
    assert_eq!(
        h.run(&["LMOVE", "l", "s", "LEFT", "LEFT"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        h.run(&["LMPOP", "2", "nokey", "m", "LEFT", "COUNT", "5"]),
        "*2\r\n$1\r\nm\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(h.run(&["LMPOP", "2", "nokey", "m", "LEFT"]), "*-1\r\n");
    assert_eq!(h.run(&["LMPOP", "0", "m", "LEFT"]), "-ERR numkeys should be greater than 0\r\n");
    assert_eq!(h.run(&["LMPOP", "2", "m", "LEFT"]), "-ERR syntax error\r\n");
    assert_eq!(
        h.run(&["LMPOP", "1", "m", "LEFT", "COUNT", "0"]),
        "-ERR count should be greater than 0\r\n"
    );
    assert_eq!(
        h.run(&["LMPOP", "1", "s", "LEFT"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        h.run(&["LPUSH", "s", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}
