//! `MEMORY USAGE | STATS | DOCTOR | MALLOC-STATS | PURGE | HELP`.
//!
//! USAGE answers what Redis 7.0's `objectComputeSize` would for the same
//! data: Sluice's own encodings differ in detail (varint-packed hashes,
//! slab tables), so the size is computed from the value's contents and the
//! encoding Redis would have chosen (listpack, intset, quicklist,
//! hashtable, skiplist), with jemalloc's size classes and Redis's struct
//! sizes, sampling nested values as Redis does. STATS and DOCTOR read the
//! allocator's figures through the server's probe; MALLOC-STATS and PURGE
//! go to the allocator hooks the server installs.

use resp::ReplyBuf;
use store::types::stream::lp_str_size;
use store::Value;

use crate::commands::server::reply_help;
use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

pub const COMMANDS: &[Command] = &[Command::redis("MEMORY", crate::commands::server::container)
    .subs(&[
        Command::redis("DOCTOR", doctor),
        Command::redis("HELP", help),
        Command::redis("MALLOC-STATS", malloc_stats),
        Command::redis("PURGE", purge),
        // No lock: key counts from the stripes' published sizes.
        Command::redis("STATS", stats),
        Command::redis("USAGE", usage),
    ])];

/// Redis's default `MEMORY USAGE` sample count.
const DEFAULT_SAMPLES: usize = 5;

fn usage(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let mut samples = DEFAULT_SAMPLES;
    while let Some(a) = args.next() {
        match args.peek() {
            Some(n) if eq_ic(a, "SAMPLES") => {
                args.next();
                let n = crate::core::ctx::parse_i64(n)?;
                if n < 0 {
                    return Err(CmdError::Syntax);
                }
                samples = if n == 0 { usize::MAX } else { n as usize };
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    let db = cx.db;
    let prealloc = cx.sess.conf(cx.shared).stream_node_max_bytes;
    let Some(e) = cx.keys.get(db, key) else {
        out.null();
        return Ok(());
    };
    let size = value_size(&e.value, samples, prealloc) + sds_alloc(key.len()) + DICT_ENTRY;
    out.int(size as i64);
    Ok(())
}

// Redis 7.0's struct sizes on 64-bit.
const ROBJ: usize = 16;
const DICT_ENTRY: usize = 24;
const DICT: usize = 56;
const QUICKLIST: usize = 40;
const QUICKLIST_NODE: usize = 40;
const ZSET: usize = 16;
const ZSKIPLIST: usize = 32;
const ZSKIPLIST_NODE: usize = 24;
const ZSKIPLIST_LEVEL: usize = 16;
const ZSKIPLIST_MAXLEVEL: usize = 32;
const STREAM: usize = 80;
const STREAM_CG: usize = 48;
const STREAM_NACK: usize = 24;
const STREAM_CONSUMER: usize = 48;

/// The size class jemalloc serves `n` bytes from (`zmalloc_size`).
pub fn je_size(n: usize) -> usize {
    match n {
        0..=8 => 8,
        9..=128 => n.div_ceil(16) * 16,
        _ => {
            let k = usize::BITS - 1 - (n - 1).leading_zeros();
            let step = 1usize << (k - 2);
            n.div_ceil(step) * step
        }
    }
}

/// `sdsZmallocSize` of an sds string of `len` bytes made by `sdsnewlen`.
fn sds_alloc(len: usize) -> usize {
    let hdr = match len {
        0..=31 => 1,
        32..=255 => 3,
        256..=65535 => 5,
        _ => 9,
    };
    je_size(hdr + len + 1)
}

/// A listpack's bytes: header, entries, end byte.
fn lp_bytes(entries: impl Iterator<Item = usize>) -> usize {
    6 + entries.sum::<usize>() + 1
}

/// Redis's dict table size for `n` entries (powers of two from 4).
fn dict_slots(n: usize) -> usize {
    n.next_power_of_two().max(4)
}

/// Averages the first `samples` element sizes and scales to `n`, as
/// `objectComputeSize` does (integer division of the sum first).
fn sampled(sizes: impl Iterator<Item = usize>, samples: usize, n: usize) -> usize {
    let (mut sum, mut k) = (0usize, 0usize);
    for s in sizes.take(samples) {
        sum += s;
        k += 1;
    }
    sum.checked_div(k).map_or(0, |avg| avg * n)
}

/// The score as a zset listpack stores it (`d2string`, then as an
/// integer when it reads as one).
fn lp_score_size(s: f64) -> usize {
    let mut buf = ryu_like(s);
    if buf.is_empty() {
        buf = b"0".to_vec();
    }
    lp_str_size(&buf)
}

fn ryu_like(s: f64) -> Vec<u8> {
    if s.is_finite() && s == s.trunc() && s.abs() < 1e17 {
        format!("{}", s as i64).into_bytes()
    } else {
        format!("{s}").into_bytes()
    }
}

/// `objectComputeSize` for a value, sampling `samples` nested elements;
/// `prealloc` is `stream-node-max-bytes` (a stream node's listpack is
/// allocated at up to 4 KiB from the start).
pub fn value_size(v: &Value, samples: usize, prealloc: usize) -> usize {
    match v {
        Value::Int(_) => ROBJ,
        // robj, sdshdr8 and the bytes in one allocation.
        Value::Emb(b) => je_size(ROBJ + 3 + b.len() + 1),
        Value::Raw(b) => ROBJ + sds_alloc(b.len()),
        // Redis's dense string, allocated at its exact length.
        Value::Hll(_) => ROBJ + sds_alloc(store::types::hll::REDIS_DENSE_LEN),
        Value::List(l) => {
            let mut node_sizes = Vec::new();
            let mut at = 0;
            for n in l.chunk_sizes().take(samples) {
                let mut sizes = Vec::with_capacity(n);
                l.range(at, n).for_each(|v| sizes.push(lp_str_size(v)));
                let lp = lp_bytes(sizes.into_iter());
                node_sizes.push(QUICKLIST_NODE + je_size(lp));
                at += n;
            }
            ROBJ + QUICKLIST + sampled(node_sizes.into_iter(), samples, l.chunk_count())
        }
        Value::Hash(h) => {
            if h.is_listpack() {
                ROBJ + je_size(lp_bytes(h.iter().map(|(f, x)| lp_str_size(&f) + lp_str_size(&x))))
            } else {
                let each =
                    h.iter().map(|(f, x)| DICT_ENTRY + sds_alloc(f.len()) + sds_alloc(x.len()));
                ROBJ + DICT + 8 * dict_slots(h.len()) + sampled(each, samples, h.len())
            }
        }
        Value::Set(s) => match s {
            store::types::Set::Ints(i) => ROBJ + je_size(8 + i.len() * i.width()),
            _ => {
                let mut buf = [0u8; 24];
                let each = s.iter().map(|m| DICT_ENTRY + sds_alloc(m.bytes(&mut buf).len()));
                ROBJ + DICT + 8 * dict_slots(s.len()) + sampled(each, samples, s.len())
            }
        },
        Value::ZSet(z) => {
            if z.encoding() == "listpack" {
                ROBJ + je_size(lp_bytes(z.iter().map(|(m, s)| lp_str_size(&m) + lp_score_size(s))))
            } else {
                // Nodes' levels are random (p = 1/4): their mean allocation.
                let node = (je_size(ZSKIPLIST_NODE + ZSKIPLIST_LEVEL) * 3
                    + je_size(ZSKIPLIST_NODE + 2 * ZSKIPLIST_LEVEL))
                    / 4;
                let header = je_size(ZSKIPLIST_NODE + ZSKIPLIST_MAXLEVEL * ZSKIPLIST_LEVEL);
                let each = z.iter().map(|(m, _)| sds_alloc(m.len()) + DICT_ENTRY + node);
                ROBJ + ZSET
                    + ZSKIPLIST
                    + DICT
                    + 8 * dict_slots(z.len())
                    + header
                    + sampled(each, samples, z.len())
            }
        }
        Value::Stream(s) => {
            // The stream struct, the radix tree (streamRadixTreeMemoryUsage:
            // an id per key, a header and 30 words per node), the nodes'
            // listpacks as allocated (sampled, the last one exactly).
            let nodes: Vec<usize> = s.nodes().map(|n| n.lp_bytes()).collect();
            let first = if prealloc == 0 || prealloc > 4096 { 4096 } else { prealloc };
            let alloc = |b: usize| je_size(b.max(first));
            let mut size = ROBJ + STREAM + nodes.len() * 16 + s.rax_nodes() * (4 + 8 * 30);
            if nodes.len() <= samples {
                size += nodes.iter().map(|&b| alloc(b)).sum::<usize>();
            } else {
                let avg = nodes.iter().take(samples).map(|&b| alloc(b)).sum::<usize>() / samples;
                size += avg * (nodes.len() - 1) + nodes.last().map_or(0, |&b| alloc(b));
            }
            for (_, g) in s.groups() {
                // streamCG, its PEL's tree and NACKs; consumers' structs.
                size += STREAM_CG + g.pel.len() * (16 + 4 + 240 + STREAM_NACK);
                size += g.consumers.len() * STREAM_CONSUMER;
            }
            size
        }
    }
}

/// The allocator's figures as `MEMORY STATS`, DOCTOR and INFO read
/// them. The overhead is Redis's sum: start-up memory, the replication
/// backlog, the clients' buffers, the AOF buffer, the script cache and
/// the key tables (modelled on Redis's dict sizes, as Sluice's tables
/// have no separate allocation per database to measure).
pub(crate) struct Overhead {
    pub total: u64,
    pub startup: u64,
    peak: u64,
    keys: u64,
    per_db: Vec<(usize, usize, usize)>,
    pub overhead: u64,
    pub clients: crate::core::shared::ClientsMemory,
    pub backlog: u64,
    /// The shared replication buffer: backlog and replicas' parts.
    pub repl: crate::subsystems::repl::BufferMemory,
    pub aof_buffer: u64,
    /// What eviction leaves out (`mem_not_counted_for_evict`).
    pub not_counted: u64,
    m: crate::core::shared::MemStats,
}

pub(crate) fn overhead(cx: &mut Ctx) -> Overhead {
    let sh = cx.shared;
    let m = sh.mem_stats();
    let total = m.used_memory;
    let peak = sh.mem_peak.load(std::sync::atomic::Ordering::Relaxed).max(total);
    let startup = sh.mem_startup.load(std::sync::atomic::Ordering::Relaxed).min(total);
    let mut per_db = Vec::new();
    let mut keys = 0u64;
    let mut clients = sh.clients_memory();
    let repl = crate::subsystems::repl::buffer_memory(sh);
    let backlog = repl.backlog;
    // As Redis 7.0 reports it: the replicas' part of the shared buffer
    // (their connections' own few buffers are left out, as in Redis).
    clients.replicas = repl.replicas;
    let aof_buffer = sh.host.aof.as_ref().map_or(0, |a| a.info().buffer_length);
    let not_counted = repl.not_counted + aof_buffer;
    let mut overhead = startup
        + sh.scripts.body_bytes() as u64
        + clients.normal
        + clients.replicas
        + backlog
        + aof_buffer;
    for db in 0..sh.store.databases() {
        let c = cx.keys.db_counts(db);
        if c.keys == 0 {
            continue;
        }
        keys += c.keys as u64;
        let main = c.keys * DICT_ENTRY + dict_slots(c.keys) * 8 + c.keys * ROBJ;
        let exp =
            if c.expires == 0 { 0 } else { c.expires * DICT_ENTRY + dict_slots(c.expires) * 8 };
        overhead += (main + exp) as u64;
        per_db.push((db, main, exp));
    }
    Overhead {
        total,
        startup,
        peak,
        keys,
        per_db,
        overhead,
        clients,
        backlog,
        repl,
        aof_buffer,
        not_counted,
        m,
    }
}

fn stats(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let o = overhead(cx);
    let lua = cx.shared.scripts.body_bytes() as i64;
    let dataset = o.total.saturating_sub(o.overhead);
    let net = o.total.saturating_sub(o.startup).max(1);
    let m = o.m;
    // Redis computes these ratios in single precision.
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { (a as f32 / b as f32) as f64 };
    out.map(27 + o.per_db.len());
    let int = |out: &mut ReplyBuf, k: &str, v: i64| {
        out.bulk(k.as_bytes());
        out.int(v);
    };
    int(out, "peak.allocated", o.peak as i64);
    int(out, "total.allocated", o.total as i64);
    int(out, "startup.allocated", o.startup as i64);
    int(out, "replication.backlog", o.backlog as i64);
    int(out, "clients.slaves", o.clients.replicas as i64);
    int(out, "clients.normal", o.clients.normal as i64);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", o.aof_buffer as i64);
    int(out, "lua.caches", lua);
    int(out, "functions.caches", 0);
    for (db, main, exp) in &o.per_db {
        out.bulk(format!("db.{db}").as_bytes());
        out.map(3);
        int(out, "overhead.hashtable.main", *main as i64);
        int(out, "overhead.hashtable.expires", *exp as i64);
        int(out, "overhead.hashtable.slot-to-keys", 0);
    }
    int(out, "overhead.total", o.overhead as i64);
    int(out, "keys.count", o.keys as i64);
    int(out, "keys.bytes-per-key", net.checked_div(o.keys).unwrap_or(0) as i64);
    int(out, "dataset.bytes", dataset as i64);
    let dbl = |out: &mut ReplyBuf, k: &str, v: f64| {
        out.bulk(k.as_bytes());
        out.double(v);
    };
    dbl(out, "dataset.percentage", (dataset as f32 * 100.0 / net as f32) as f64);
    dbl(out, "peak.percentage", (o.total as f32 * 100.0 / o.peak.max(1) as f32) as f64);
    let (al, ac, re, rss) =
        (m.allocator_allocated, m.allocator_active, m.allocator_resident, m.used_memory_rss);
    int(out, "allocator.allocated", al as i64);
    int(out, "allocator.active", ac as i64);
    int(out, "allocator.resident", re as i64);
    dbl(out, "allocator-fragmentation.ratio", ratio(ac, al));
    int(out, "allocator-fragmentation.bytes", ac as i64 - al as i64);
    dbl(out, "allocator-rss.ratio", ratio(re, ac));
    int(out, "allocator-rss.bytes", re as i64 - ac as i64);
    dbl(out, "rss-overhead.ratio", ratio(rss, re));
    int(out, "rss-overhead.bytes", rss as i64 - re as i64);
    dbl(out, "fragmentation", ratio(rss, o.total));
    int(out, "fragmentation.bytes", rss as i64 - o.total as i64);
    Ok(())
}

fn doctor(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let o = overhead(cx);
    let rss = o.m.used_memory_rss;
    let mut issues = Vec::new();
    let empty = o.total < 5 << 20;
    if !empty {
        if o.peak as f32 / o.total as f32 > 1.5 {
            issues.push(
                " * Peak memory: In the past this instance used more than 150% the memory that is \
                 currently using. The allocator is normally not able to release memory after a \
                 peak, so you can expect to see a big fragmentation ratio, however this is \
                 actually harmless and is only due to the memory peak, and if the Redis instance \
                 Resident Set Size (RSS) is currently bigger than expected, the memory will be \
                 used as soon as you fill the Redis instance with more data. If the memory peak \
                 was only occasional and you want to try to reclaim memory, please try the \
                 MEMORY PURGE command, otherwise the only other option is to shutdown and restart \
                 the instance.\n\n"
                    .to_string(),
            );
        }
        if rss as f32 / o.total as f32 > 1.4 && rss.saturating_sub(o.total) > 10 << 20 {
            issues.push(format!(
                " * High total RSS: This instance has a memory fragmentation and RSS overhead \
                 greater than 1.4 (this means that the Resident Set Size of the Redis process is \
                 much larger than the sum of the logical allocations Redis performed). This \
                 problem is usually due either to a large peak memory (check if there is a peak \
                 memory entry above in the report) or may result from a workload that causes the \
                 allocator to fragment memory a lot. If the problem is a large peak memory, then \
                 there is no issue. Otherwise, make sure you are using the Jemalloc allocator and \
                 not the default libc malloc. Note: The currently used allocator is \"{}\".\n\n",
                o.m.allocator
            ));
        }
        if cx.shared.scripts.len() > 1000 {
            issues.push(
                " * Many scripts: There seem to be many cached scripts in this instance (more than \
                 1000). This may be because scripts are generated and `EVAL`ed, instead of being \
                 parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless \
                 `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming \
                 most of your memory.\n\n"
                    .to_string(),
            );
        }
    }
    let text = if empty {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't \
         be used in these conditions. Please, leave for your mission on Earth and fill it with \
         some data. The new Sam and I will be back to our programming as soon as I finished \
         rebooting.\n"
            .to_string()
    } else if issues.is_empty() {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what \
         occurs on this base.\n"
            .to_string()
    } else {
        let mut s =
            "Sam, I detected a few issues in this Redis instance memory implants:\n\n".to_string();
        for i in issues {
            s.push_str(&i);
        }
        s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
        s
    };
    out.verbatim(text.as_bytes());
    Ok(())
}

fn malloc_stats(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    match cx.shared.host.memory.malloc.as_ref() {
        Some(h) => out.verbatim((h.stats)().as_bytes()),
        None => out.verbatim(b"Stats not supported for the current allocator"),
    }
    Ok(())
}

fn purge(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if let Some(h) = cx.shared.host.memory.malloc.as_ref() {
        (h.purge)();
    }
    out.ok();
    Ok(())
}

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    reply_help(
        out,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_size_classes() {
        let classes: Vec<usize> = [1, 8, 9, 17, 33, 120, 129, 161, 257, 513, 1025, 5000]
            .into_iter()
            .map(je_size)
            .collect();
        assert_eq!(classes, [8, 8, 16, 32, 48, 128, 160, 192, 320, 640, 1280, 5120]);
    }
}
