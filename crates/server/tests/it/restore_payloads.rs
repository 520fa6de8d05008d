//! RESTORE and FUNCTION RESTORE payloads read as redis-server 7.0.15 reads
//! them, found by sending mutated DUMP payloads to both (with
//! `sanitize-dump-payload yes`): a value is read from the whole payload,
//! so it may run on into the footer and what follows it is ignored; the
//! CRC64 is checked whatever `rdbchecksum` says; a length may be written
//! as a string-encoding marker; an LZF string may declare length 0; a
//! listpack zset's scores are whatever C's `strtod` makes of them; a
//! stream's metadata ids take an unknown length marker as `u64::MAX` and
//! its nodes' listpack headers may miscount. And a seeded fuzz of DUMP
//! payloads of every non-stream encoding, which must be accepted or
//! refused exactly where Redis accepts or refuses them, holding the same
//! data when accepted.
//!
//! What Sluice refuses although Redis accepts it (streams whose ids are
//! out of order or above the last id, whose length or per-node counts
//! disagree with their entries) is in docs/persistence.md.

use resp::Frame;
use testkit::abuse::{Rng, Source};
use testkit::{Client, RedisServer, TestServer};

fn cmd(c: &mut Client, args: &[&[u8]]) -> Frame {
    c.send(args).expect("send");
    c.read_frame().expect("reply")
}

fn line(c: &mut Client, l: &str) -> Frame {
    let args: Vec<&[u8]> = l.split(' ').map(str::as_bytes).collect();
    cmd(c, &args)
}

/// A DUMP payload: type byte, body, RDB version 10, a valid CRC64 (over
/// the body and version, whatever the body's value reads of them).
fn payload(ty: u8, body: &[u8]) -> Vec<u8> {
    seal([&[ty][..], body].concat())
}

fn seal(mut p: Vec<u8>) -> Vec<u8> {
    p.extend_from_slice(&[10, 0]);
    let crc = persist::crc64::crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

fn both(extra: &[&str]) -> Option<(RedisServer, TestServer)> {
    let redis = RedisServer::start_with(extra, None)?;
    let sluice = TestServer::start_with(&TestServer::default_bin(), extra, None);
    Some((redis, sluice))
}

/// RESTOREs `p` as `key` on both servers and returns Redis's reply after
/// checking Sluice's is the same.
fn restore_same(r: &mut Client, s: &mut Client, key: &str, p: &[u8], what: &str) -> Frame {
    let args: [&[u8]; 5] = [b"RESTORE", key.as_bytes(), b"0", p, b"REPLACE"];
    let want = cmd(r, &args);
    assert_eq!(cmd(s, &args), want, "{what}: RESTORE");
    want
}

/// Reads `key` back on both servers (its type, then its content in an
/// order-free form) and checks they agree.
fn same_content(r: &mut Client, s: &mut Client, key: &str, what: &str) {
    let ty = line(r, &format!("TYPE {key}"));
    assert_eq!(line(s, &format!("TYPE {key}")), ty, "{what}: TYPE");
    let Frame::Simple(t) = &ty else { panic!("{what}: {ty:?}") };
    let read: &[&str] = match &t[..] {
        b"string" => &["GET"],
        b"list" => &["LRANGE", "0", "-1"],
        b"set" => &["SMEMBERS"],
        b"zset" => &["ZRANGE", "0", "-1", "WITHSCORES"],
        b"hash" => &["HGETALL"],
        b"stream" => &["XRANGE", "-", "+"],
        _ => panic!("{what}: type {ty:?}"),
    };
    let mut args: Vec<&[u8]> = vec![read[0].as_bytes(), key.as_bytes()];
    args.extend(read[1..].iter().map(|a| a.as_bytes()));
    let (a, b) = (cmd(r, &args), cmd(s, &args));
    // A listpack zset whose stored order is not its scores' order is served
    // in stored order by Redis and sorted by Sluice; sets and hashes have
    // no order. Compare those as sets of (member, score) or field pairs.
    let unordered = |f: Frame| match (f, &t[..]) {
        (Frame::Array(Some(mut v)), b"set") => {
            v.sort_by_key(|x| format!("{x:?}"));
            v
        }
        (Frame::Array(Some(v)), b"zset" | b"hash") => {
            let mut pairs: Vec<Vec<Frame>> = v.chunks(2).map(|c| c.to_vec()).collect();
            pairs.sort_by_key(|x| format!("{x:?}"));
            pairs.concat()
        }
        (Frame::Array(Some(v)), _) => v,
        (other, _) => vec![other],
    };
    assert_eq!(unordered(b), unordered(a), "{what}: content");
}

#[test]
fn restore_reads_a_value_into_the_payload_footer_and_ignores_what_follows_it() {
    let Some((redis, sluice)) = both(&["--sanitize-dump-payload", "yes"]) else { return };
    let (mut r, mut s) = (redis.client(), sluice.client());
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // An 11-byte string with 5 bytes before the footer: the other six
        // are the RDB version and the start of the CRC.
        ("string running into the footer", payload(0, b"\x0bhello")),
        ("int16 whose second byte is the version", payload(0, b"\xc1\x30")),
        ("string followed by two stray bytes", payload(0, b"\x01axy")),
        ("set whose last member is read from the footer", payload(2, b"\x02\x01a\x04")),
        ("list of one element and trailing garbage", payload(1, b"\x01\x01a\xff\xff\xff")),
    ];
    for (what, p) in cases {
        let reply = restore_same(&mut r, &mut s, "k", &p, what);
        assert_eq!(reply, Frame::Simple(b"OK".to_vec()), "{what}");
        same_content(&mut r, &mut s, "k", what);
    }
    // A value that needs more than the whole payload holds is refused.
    let too_long = payload(0, b"\x20hello");
    let reply = restore_same(&mut r, &mut s, "k", &too_long, "string past the end");
    assert_eq!(reply, Frame::Error(b"ERR Bad data format".to_vec()));
}

#[test]
fn restore_checks_the_crc_whatever_rdbchecksum_says() {
    let Some((redis, sluice)) = both(&["--rdbchecksum", "no"]) else { return };
    let (mut r, mut s) = (redis.client(), sluice.client());
    let mut p = payload(0, b"\x05hello");
    let n = p.len();
    p[n - 8..].copy_from_slice(&[1; 8]);
    let reply = restore_same(&mut r, &mut s, "k", &p, "bad CRC, rdbchecksum no");
    assert_eq!(reply, Frame::Error(b"ERR DUMP payload version or checksum are wrong".to_vec()));
    // A CRC of zeros is no exception either.
    p[n - 8..].copy_from_slice(&[0; 8]);
    assert_eq!(restore_same(&mut r, &mut s, "k", &p, "zero CRC"), reply);
}

#[test]
fn function_restore_skips_the_crc_check_when_debug_says_so() {
    let Some((redis, sluice)) = both(&[]) else { return };
    let (mut r, mut s) = (redis.client(), sluice.client());
    let code: &[u8] = b"#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    let mut dump = Frame::Null;
    for c in [&mut r, &mut s] {
        assert_eq!(cmd(c, &[b"FUNCTION", b"LOAD", code]), Frame::Bulk(Some(b"lib".to_vec())));
        dump = cmd(c, &[b"FUNCTION", b"DUMP"]);
        line(c, "FUNCTION FLUSH");
    }
    let Frame::Bulk(Some(mut p)) = dump else { panic!("{dump:?}") };
    let n = p.len();
    p[n - 8..].copy_from_slice(b"garbage!");
    for c in [&mut r, &mut s] {
        let refused = cmd(c, &[b"FUNCTION", b"RESTORE", &p]);
        assert_eq!(
            refused,
            Frame::Error(b"ERR DUMP payload version or checksum are wrong".to_vec())
        );
        assert_eq!(line(c, "DEBUG SET-SKIP-CHECKSUM-VALIDATION 1"), Frame::Simple(b"OK".to_vec()));
        assert_eq!(cmd(c, &[b"FUNCTION", b"RESTORE", &p]), Frame::Simple(b"OK".to_vec()));
        assert_eq!(line(c, "FCALL f 0"), Frame::Integer(1));
    }
}

/// A listpack of short strings (each under 64 bytes).
fn listpack(items: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for it in items {
        assert!(it.len() < 64);
        body.push(0x80 | it.len() as u8);
        body.extend_from_slice(it);
        body.push(1 + it.len() as u8);
    }
    let mut lp = ((7 + body.len()) as u32).to_le_bytes().to_vec();
    lp.extend_from_slice(&(items.len() as u16).to_le_bytes());
    lp.extend_from_slice(&body);
    lp.push(0xFF);
    lp
}

fn rdb_string(b: &[u8]) -> Vec<u8> {
    assert!(b.len() < 64);
    [&[b.len() as u8][..], b].concat()
}

#[test]
fn restore_reads_markers_lengths_and_scores_as_redis_does() {
    let Some((redis, sluice)) = both(&["--sanitize-dump-payload", "yes"]) else { return };
    let (mut r, mut s) = (redis.client(), sluice.client());
    // Scores as strtod reads them: a numeric prefix, nothing (0), hex, and
    // an overflow (inf); in ascending order, as a listpack zset keeps them.
    let zset = listpack(&[b"a", b"junk", b"b", b"2.5xyz", b"c", b"0x10", b"d", b"1e400"]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("listpack zset with scores strtod reads in part", payload(17, &rdb_string(&zset))),
        // 0xC2 where a length is due: rdbLoadLen without `isencoded`
        // gives its low six bits, 2.
        ("set count written as a string-encoding marker", payload(2, b"\xc2\x01a\x01b")),
        // clen 2, len 0: Redis's lzf_decompress has no room and answers
        // 0, the length it wanted.
        ("LZF string of declared length 0", payload(0, b"\xc3\x02\x00\x01\x02")),
    ];
    for (what, p) in cases {
        let reply = restore_same(&mut r, &mut s, "k", &p, what);
        assert_eq!(reply, Frame::Simple(b"OK".to_vec()), "{what}");
        same_content(&mut r, &mut s, "k", what);
        if what.starts_with("listpack zset") {
            assert_eq!(line(&mut s, "ZSCORE k d"), Frame::Bulk(Some(b"inf".to_vec())));
            assert_eq!(line(&mut s, "ZSCORE k c"), Frame::Bulk(Some(b"16".to_vec())));
        }
    }
}

/// A one-entry stream (`1-1 k v`) in type-19 form, with the node
/// listpack's header count and the metadata's bytes given by the caller.
fn stream_payload(header_count: u16, meta: &[u8]) -> Vec<u8> {
    let mut key = vec![16];
    key.extend_from_slice(&1u64.to_be_bytes());
    key.extend_from_slice(&1u64.to_be_bytes());
    // count 1, deleted 0, 1 master field "k", terminator 0; the entry:
    // flags SAMEFIELDS (2), ms delta 0, seq delta 0, value "v", lp-count 4.
    let ints = |v: u8| [v, 1];
    let mut body = Vec::new();
    for v in [1, 0, 1] {
        body.extend_from_slice(&ints(v));
    }
    body.extend_from_slice(b"\x81k\x02");
    for v in [0, 2, 0, 0] {
        body.extend_from_slice(&ints(v));
    }
    body.extend_from_slice(b"\x81v\x02");
    body.extend_from_slice(&ints(4));
    let mut lp = ((7 + body.len()) as u32).to_le_bytes().to_vec();
    lp.extend_from_slice(&header_count.to_le_bytes());
    lp.extend_from_slice(&body);
    lp.push(0xFF);
    let mut p = vec![19, 1];
    p.extend_from_slice(&key);
    p.push(lp.len() as u8);
    p.extend_from_slice(&lp);
    p.extend_from_slice(meta);
    seal(p)
}

#[test]
fn restore_reads_stream_metadata_as_redis_does() {
    let Some((redis, sluice)) = both(&["--sanitize-dump-payload", "yes"]) else { return };
    let (mut r, mut s) = (redis.client(), sluice.client());
    // length 1, last id 1-1, first id 1-1, max deleted 0-0, entries added
    // 1, no groups.
    let meta = [1, 1, 1, 1, 1, 0, 0, 1, 0];
    let mut unknown_marker = meta;
    unknown_marker[7] = 0x8a; // entries added: RDB_LENERR
    let cases = [
        ("well-formed", stream_payload(10, &meta)),
        ("node listpack header miscounting its entries", stream_payload(7, &meta)),
        ("node listpack header of 65535 (unknown)", stream_payload(65535, &meta)),
        (
            "entries-added written with an unknown length marker",
            stream_payload(10, &unknown_marker),
        ),
    ];
    for (what, p) in cases {
        let reply = restore_same(&mut r, &mut s, "st", &p, what);
        assert_eq!(reply, Frame::Simple(b"OK".to_vec()), "{what}");
        same_content(&mut r, &mut s, "st", what);
        assert_eq!(line(&mut s, "XLEN st"), line(&mut r, "XLEN st"), "{what}");
    }
}

fn mutate(rng: &mut Rng, dump: &[u8]) -> Vec<u8> {
    let mut p = dump[..dump.len() - 10].to_vec();
    for _ in 0..[1, 1, 1, 2, 3, 5][rng.below(6)] {
        let op = rng.below(20);
        if p.is_empty() {
            p.push(rng.below(256) as u8);
        } else if op < 12 {
            let i = rng.below(p.len());
            let b = p[i];
            let choices = [rng.below(256) as u8, b ^ (1 << rng.below(8)), 0, 0xFF, 0x7F, 0x80];
            p[i] = choices[rng.below(choices.len())];
        } else if op < 15 {
            p.remove(rng.below(p.len()));
        } else if op < 18 {
            p.insert(rng.below(p.len() + 1), rng.below(256) as u8);
        } else {
            p.truncate(rng.below(p.len() + 1));
        }
    }
    seal(p)
}

#[test]
fn mutated_dump_payloads_are_accepted_or_refused_where_redis_accepts_or_refuses_them() {
    let Some((redis, sluice)) = both(&["--sanitize-dump-payload", "yes"]) else { return };
    let (mut r, mut s) = (redis.client(), sluice.client());
    // Every encoding but streams (whose ordering Sluice checks more
    // strictly than Redis does; see the module comment), made by the
    // oracle so the payloads are Redis's own.
    let big_list: Vec<String> = (0..600).map(|i| i.to_string().repeat(i % 13)).collect();
    let big_hash: Vec<String> = (0..600).flat_map(|i| [format!("f{i}"), format!("v{i}")]).collect();
    let big_zset: Vec<String> =
        (0..200).flat_map(|i| [format!("{}", f64::from(i) * 0.5), format!("m{i}")]).collect();
    let long = "x".repeat(100);
    let setup: Vec<Vec<&str>> = vec![
        vec!["SET", "str", "hello world"],
        vec!["SET", "int", "12345"],
        vec!["SET", "lzf", &long],
        vec!["RPUSH", "list", "a", "b", "1", "2", "300", "-7", &long[..70]],
        [vec!["RPUSH", "biglist"], big_list.iter().map(String::as_str).collect()].concat(),
        vec!["SADD", "intset", "1", "2", "3", "70000", "-5"],
        vec!["SADD", "set", "a", "b", "c", "1"],
        vec!["ZADD", "zlp", "1", "a", "2.5", "b", "-3", "c"],
        [vec!["ZADD", "zsk"], big_zset.iter().map(String::as_str).collect()].concat(),
        vec!["HSET", "hlp", "f1", "v1", "f2", "2", "f3", &long[..30]],
        [vec!["HSET", "hht"], big_hash.iter().map(String::as_str).collect()].concat(),
    ];
    let mut dumps = Vec::new();
    for args in &setup {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        cmd(&mut r, &args);
        let Frame::Bulk(Some(d)) = cmd(&mut r, &[b"DUMP", args[1]]) else { panic!() };
        dumps.push(d);
    }
    let mut rng = Rng(0x5eed_2023);
    let (mut accepted, mut refused) = (0, 0);
    for n in 0..600 {
        let which = rng.below(dumps.len());
        let p = mutate(&mut rng, &dumps[which]);
        if matches!(p[0], 15 | 19 | 21) {
            continue;
        }
        let what = format!("payload {n}: {}", hex(&p));
        match restore_same(&mut r, &mut s, "t", &p, &what) {
            Frame::Error(_) => refused += 1,
            _ => {
                accepted += 1;
                same_content(&mut r, &mut s, "t", &what);
            }
        }
    }
    assert_eq!(line(&mut s, "PING"), Frame::Simple(b"PONG".to_vec()));
    // Both kinds must have been exercised for the comparison to mean much.
    // (The seed gives 191 and 408.)
    assert!(accepted > 100 && refused > 300, "accepted {accepted}, refused {refused}");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
