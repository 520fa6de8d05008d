//! A base of commands (`aof-use-rdb-preamble no`), as Redis 7.0's
//! `rewriteAppendOnlyFileRio` writes it: per non-empty database a
//! `SELECT`, per key the commands that rebuild it — `SET`; `RPUSH`,
//! `SADD`, `ZADD`, `HMSET` of at most 64 items each; a stream's `XADD`s,
//! `XSETID` with its counters, `XGROUP CREATE … ENTRIESREAD`, an `XCLAIM`
//! per pending entry and `XGROUP CREATECONSUMER` for a consumer with none
//! — then `PEXPIREAT` when it has a time to live.

use store::Value;

use crate::aof::write_command;

/// Redis's `AOF_REWRITE_ITEMS_PER_CMD`.
pub const ITEMS_PER_CMD: usize = 64;

/// Appends a `SELECT` of `db`.
pub fn select(out: &mut Vec<u8>, db: usize) {
    write_command(out, &[b"SELECT", db.to_string().as_bytes()]);
}

fn double(v: f64) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let n = resp::fmt_double(v, &mut buf);
    buf[..n].to_vec()
}

/// Emits `head… items…` commands of at most [`ITEMS_PER_CMD`] items
/// (each item one or two arguments).
fn chunked(out: &mut Vec<u8>, head: &[&[u8]], items: impl Iterator<Item = Vec<Vec<u8>>>) {
    let mut args: Vec<Vec<u8>> = Vec::new();
    let mut n = 0;
    let flush = |out: &mut Vec<u8>, args: &mut Vec<Vec<u8>>| {
        let mut argv: Vec<&[u8]> = head.to_vec();
        argv.extend(args.iter().map(Vec::as_slice));
        write_command(out, &argv);
        args.clear();
    };
    for item in items {
        args.extend(item);
        n += 1;
        if n == ITEMS_PER_CMD {
            flush(out, &mut args);
            n = 0;
        }
    }
    if n > 0 {
        flush(out, &mut args);
    }
}

/// Appends the commands that rebuild `key` (and its expiry, unix ms or -1).
pub fn write_key(out: &mut Vec<u8>, key: &[u8], v: &Value, expire_at: i64) {
    match v {
        Value::Int(i) => write_command(out, &[b"SET", key, i.to_string().as_bytes()]),
        Value::Emb(s) => write_command(out, &[b"SET", key, s]),
        Value::Raw(s) => write_command(out, &[b"SET", key, s]),
        Value::Hll(h) => write_command(out, &[b"SET", key, &h.to_redis()]),
        Value::List(l) => chunked(out, &[b"RPUSH", key], l.iter_owned().map(|e| vec![e])),
        Value::Set(s) => {
            chunked(
                out,
                &[b"SADD", key],
                s.iter().map(|m| {
                    let mut buf = [0u8; 24];
                    vec![m.bytes(&mut buf).to_vec()]
                }),
            );
        }
        Value::ZSet(z) => {
            chunked(out, &[b"ZADD", key], z.iter().map(|(m, s)| vec![double(s), m.to_vec()]));
        }
        Value::Hash(h) => {
            chunked(out, &[b"HMSET", key], h.iter().map(|(f, x)| vec![f.to_vec(), x.to_vec()]));
        }
        Value::Stream(s) => write_stream(out, key, s),
    }
    if expire_at != -1 {
        write_command(out, &[b"PEXPIREAT", key, expire_at.to_string().as_bytes()]);
    }
}

fn write_stream(out: &mut Vec<u8>, key: &[u8], s: &store::types::stream::Stream) {
    if s.is_empty() {
        // Redis's XADD MAXLEN 0 trick: an empty stream.
        write_command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    } else {
        for node in s.nodes() {
            for raw in node.entries() {
                if raw.deleted {
                    continue;
                }
                let id = raw.entry.id.to_vec();
                let mut argv: Vec<&[u8]> = vec![b"XADD", key, &id];
                for (f, v) in raw.entry.pairs() {
                    argv.push(f);
                    argv.push(v);
                }
                write_command(out, &argv);
            }
        }
    }
    let added = s.entries_added.to_string();
    write_command(
        out,
        &[
            b"XSETID",
            key,
            &s.last_id.to_vec(),
            b"ENTRIESADDED",
            added.as_bytes(),
            b"MAXDELETEDID",
            &s.max_deleted.to_vec(),
        ],
    );
    for (name, g) in s.groups() {
        let read = g.entries_read.to_string();
        write_command(
            out,
            &[
                b"XGROUP",
                b"CREATE",
                key,
                name,
                &g.last_id.to_vec(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ],
        );
        for (cname, c) in &g.consumers {
            if c.pel.is_empty() {
                write_command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, cname]);
                continue;
            }
            for id in &c.pel {
                let Some(nack) = g.pel.get(id) else { continue };
                let time = nack.delivery_time.to_string();
                let count = nack.delivery_count.to_string();
                write_command(
                    out,
                    &[
                        b"XCLAIM",
                        key,
                        name,
                        cname,
                        b"0",
                        &id.to_vec(),
                        b"TIME",
                        time.as_bytes(),
                        b"RETRYCOUNT",
                        count.as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ],
                );
            }
        }
    }
}
