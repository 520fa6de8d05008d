//! Generic key commands (Redis 7.0's `generic` group plus the keyspace
//! commands of `server`): DEL, UNLINK, EXISTS, TYPE, TOUCH, the TTL family
//! (`expire`), RENAME, RENAMENX, COPY, MOVE, OBJECT, and the commands over
//! whole databases (`space`: KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB,
//! FLUSHALL, SWAPDB).

use resp::ReplyBuf;
use store::Entry;

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Flags, KeyList, Lock};

mod expire;
pub(crate) mod space;
#[cfg(test)]
mod tests;

pub const COMMANDS: &[Command] = &[
    Command::redis("DEL", del),
    Command::redis("UNLINK", unlink),
    Command::redis("EXISTS", exists),
    Command::redis("TYPE", type_),
    Command::redis("TOUCH", touch),
    Command::redis("EXPIRE", expire::expire),
    Command::redis("PEXPIRE", expire::pexpire),
    Command::redis("EXPIREAT", expire::expireat),
    Command::redis("PEXPIREAT", expire::pexpireat),
    Command::redis("TTL", expire::ttl),
    Command::redis("PTTL", expire::pttl),
    Command::redis("EXPIRETIME", expire::expiretime),
    Command::redis("PEXPIRETIME", expire::pexpiretime),
    Command::redis("PERSIST", expire::persist),
    Command::redis("RENAME", rename),
    Command::redis("RENAMENX", renamenx),
    Command::redis("COPY", copy).lock(Lock::Custom { find: copy_keys }),
    Command::redis("MOVE", move_).lock(Lock::Custom { find: move_keys }),
    Command::redis("KEYS", space::keys).lock(Lock::WholeDb),
    Command::redis("SCAN", space::scan).flags(Flags::TOUCHES_ARBITRARY_KEYS).lock(Lock::DbWalk),
    Command::redis("RANDOMKEY", space::randomkey)
        .flags(Flags::TOUCHES_ARBITRARY_KEYS)
        .lock(Lock::DbWalk),
    Command::redis("OBJECT", object).subs(OBJECT_SUBS),
    // No lock: counted from the stripes' published sizes.
    Command::redis("DBSIZE", space::dbsize),
    Command::redis("FLUSHDB", space::flushdb).lock(Lock::WholeDb),
    Command::redis("FLUSHALL", space::flushall)
        .lock(Lock::AllDbs)
        .before_lock(space::flushall_before_lock),
    Command::redis("SWAPDB", space::swapdb).lock(Lock::AllDbs),
];

const OBJECT_SUBS: &[Command] = &[
    Command::redis("ENCODING", obj_encoding),
    Command::redis("FREQ", obj_freq),
    Command::redis("HELP", obj_help),
    Command::redis("IDLETIME", obj_idletime),
    Command::redis("REFCOUNT", obj_refcount),
];

/// A live key read without updating its access time, but counted as a
/// keyspace hit or miss (Redis's `lookupKeyReadWithFlags(LOOKUP_NOTOUCH)`,
/// used by EXISTS, TYPE, TTL, OBJECT, SCAN's TYPE filter).
pub(super) fn read_notouch<'c>(cx: &'c mut Ctx, key: &[u8]) -> Option<&'c mut Entry> {
    let db = cx.db;
    match cx.keys.get(db, key) {
        Some(e) => {
            cx.sess.stats.hits += 1;
            Some(e)
        }
        None => {
            cx.sess.stats.misses += 1;
            None
        }
    }
}

/// DEL: frees the values in place, or as UNLINK with
/// `lazyfree-lazy-user-del yes`.
fn del(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let lazy = cx.sess.conf(cx.shared).get_by_name("lazyfree-lazy-user-del");
    del_with(cx, args, out, lazy.is_some_and(|v| v == b"yes"))
}

/// UNLINK: a costly value is freed by the background thread
/// (`crate::subsystems::lazyfree`).
fn unlink(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    del_with(cx, args, out, true)
}

fn del_with(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, lazy: bool) -> CmdResult {
    let mut n = 0;
    while let Some(k) = args.next() {
        if let Some(rec) = cx.delete_for_del(k) {
            cx.shared.lazyfree.free(rec.value, lazy);
            cx.changed(k, Class::GENERIC, "del", 1);
            n += 1;
        }
    }
    out.int(n);
    Ok(())
}

/// Counts every argument that names a live key (repeats count again).
fn exists(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut n = 0;
    while let Some(k) = args.next() {
        if read_notouch(cx, k).is_some() {
            n += 1;
        }
    }
    out.int(n);
    Ok(())
}

fn type_(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let name = read_notouch(cx, key).map_or("none", |e| e.value.kind().name());
    out.simple(name.as_bytes());
    Ok(())
}

fn touch(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut n = 0;
    while let Some(k) = args.next() {
        if cx.lookup_read(k).is_some() {
            n += 1;
        }
    }
    out.int(n);
    Ok(())
}

fn rename(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    rename_with(cx, args, false, out)
}

fn renamenx(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    rename_with(cx, args, true, out)
}

/// Redis's `renameGenericCommand`: a missing source is an error even when
/// both names are the same; the same name is then a no-op. The value keeps
/// its TTL and its access time.
fn rename_with(cx: &mut Ctx, args: &mut Args, nx: bool, out: &mut ReplyBuf) -> CmdResult {
    let src = args.key()?;
    let dst = args.key()?;
    if cx.lookup(src).is_none() {
        return Err(CmdError::NoSuchKey);
    }
    if src != dst && !(nx && cx.exists(dst)) {
        let e = cx.delete(src).expect("source was just found");
        let db = cx.db;
        cx.keys.insert(db, dst, e.value, e.expire_at, e.lru);
        // Redis deletes an existing destination and adds the key anew.
        cx.created(dst);
        cx.changed(src, Class::GENERIC, "rename_from", 1);
        cx.changed(dst, Class::GENERIC, "rename_to", 0);
        if nx {
            out.int(1);
        } else {
            out.ok();
        }
    } else if nx {
        out.int(0);
    } else {
        out.ok();
    }
    Ok(())
}

/// `getIntFromObjectOrReply` for a database index, then Redis's
/// `selectDb` range check.
fn parse_db(cx: &Ctx, a: &[u8]) -> Result<usize, CmdError> {
    let v = parse_i64(a)?;
    if i32::try_from(v).is_err() {
        return Err(CmdError::err(
            "value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    // In cluster mode the store has one database, but Redis checks the
    // index against `databases` before it refuses any but 0.
    let dbs = match cx.shared.cluster.get() {
        Some(_) => cx.shared.config.read().databases,
        None => cx.shared.store.databases(),
    };
    if v < 0 || v as usize >= dbs {
        return Err(CmdError::DbIndexOutOfRange);
    }
    Ok(v as usize)
}

/// Lock finder of MOVE: the key in both databases. An unparsable index
/// adds nothing; the handler reports it before touching any key.
fn move_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    let Some(&key) = argv.get(1) else { return };
    keys.push((db, key));
    if let Some(d) = argv.get(2).and_then(|a| resp::parse_i64(a)) {
        if d >= 0 && d as usize != db {
            keys.push((d as usize, key));
        }
    }
}

fn move_(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if cx.shared.cluster.get().is_some() {
        return Err(CmdError::err("MOVE is not allowed in cluster mode"));
    }
    let key = args.key()?;
    let dst = parse_db(cx, args.req()?)?;
    if dst == cx.db {
        return Err(CmdError::SameObject);
    }
    if cx.lookup(key).is_none() || cx.keys.contains(dst, key) {
        out.int(0);
        return Ok(());
    }
    let e = cx.delete(key).expect("key was just found");
    cx.keys.insert(dst, key, e.value, e.expire_at, e.lru);
    cx.sess.fx.event(Class::NEW, "new", dst, key);
    cx.changed(key, Class::GENERIC, "move_from", 1);
    cx.changed_in(dst, key, Class::GENERIC, "move_to", 0);
    out.int(1);
    Ok(())
}

/// Options of COPY.
struct CopyOpts {
    db: usize,
    replace: bool,
}

fn parse_copy(cx: &Ctx, args: &mut Args) -> Result<CopyOpts, CmdError> {
    let mut o = CopyOpts { db: cx.db, replace: false };
    while let Some(a) = args.next() {
        if eq_ic(a, "REPLACE") {
            o.replace = true;
        } else if eq_ic(a, "DB") && args.remaining() >= 1 {
            o.db = parse_db(cx, args.req()?)?;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if cx.shared.cluster.get().is_some() && (cx.db != 0 || o.db != 0) {
        return Err(CmdError::err("Copying to another database is not allowed in cluster mode"));
    }
    Ok(o)
}

/// Lock finder of COPY: the source here, the destination in the last DB
/// named by the options (as the handler's parse will find it).
fn copy_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    let (Some(&src), Some(&dst)) = (argv.get(1), argv.get(2)) else { return };
    keys.push((db, src));
    let mut dst_db = db;
    let mut i = 3;
    while i < argv.len() {
        if argv[i].eq_ignore_ascii_case(b"DB") && i + 1 < argv.len() {
            match resp::parse_i64(argv[i + 1]) {
                Some(d) if d >= 0 => dst_db = d as usize,
                _ => break,
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    keys.push((dst_db, dst));
}

fn copy(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let src = args.key()?;
    let dst = args.key()?;
    let o = parse_copy(cx, args)?;
    if o.db == cx.db && src == dst {
        return Err(CmdError::SameObject);
    }
    let Some(e) = cx.lookup_read(src) else {
        out.int(0);
        return Ok(());
    };
    let (value, has_ttl) = (e.value.clone(), e.has_ttl());
    let expire_at = if has_ttl { cx.expire_of(src) } else { store::NO_EXPIRE };
    if cx.keys.contains(o.db, dst) && !o.replace {
        out.int(0);
        return Ok(());
    }
    cx.add_in(o.db, dst, value, expire_at);
    cx.changed_in(o.db, dst, Class::GENERIC, "copy_to", 1);
    out.int(1);
    Ok(())
}

/// Reached only through the table when a subcommand is unknown.
fn object(_: &mut Ctx, args: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    Err(CmdError::UnknownSubcommand {
        sub: argv.get(1).map_or_else(Vec::new, |s| s.to_vec()),
        cmd: argv[0].to_vec(),
    })
}

fn obj_encoding(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    match read_notouch(cx, args.key()?) {
        Some(e) => out.bulk(e.value.encoding().as_bytes()),
        None => out.null(),
    }
    Ok(())
}

/// Redis keeps one shared object per integer below 10000, with a refcount
/// of `INT_MAX`, unless an LRU/LFU maxmemory policy needs per-key access
/// times.
fn obj_refcount(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let shared_ints = {
        let c = cx.shared.config.read();
        c.maxmemory == 0
            || !(c.maxmemory_policy.contains("lru") || c.maxmemory_policy.contains("lfu"))
    };
    match read_notouch(cx, args.key()?) {
        Some(e) => {
            let shared = shared_ints
                && matches!(e.value, store::Value::Int(i) if (0..store::value::SHARED_INTEGERS).contains(&i));
            out.int(if shared { i64::from(i32::MAX) } else { 1 });
        }
        None => out.null(),
    }
    Ok(())
}

fn lfu_policy(cx: &Ctx) -> bool {
    cx.lru().bits & crate::subsystems::evict::LFU_BIT != 0
}

fn obj_idletime(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let clock = cx.shared.lru_clock();
    let lfu = lfu_policy(cx);
    let Some(e) = read_notouch(cx, args.key()?) else {
        out.null();
        return Ok(());
    };
    if lfu {
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    out.int(i64::from(crate::subsystems::evict::lru_idle(clock, e.lru)));
    Ok(())
}

fn obj_freq(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let stamp = cx.lru().bits;
    let decay = cx.sess.conf(cx.shared).lfu_decay_time.clamp(0, i64::from(u32::MAX)) as u32;
    let Some(e) = read_notouch(cx, args.key()?) else {
        out.null();
        return Ok(());
    };
    if stamp & crate::subsystems::evict::LFU_BIT == 0 {
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note \
             that when switching between policies at runtime LRU and LFU data will take some \
             time to adjust.",
        ));
    }
    let now_min = (stamp >> 8) & 0xffff;
    out.int(i64::from(crate::subsystems::evict::lfu_decayed(e.lru, now_min, decay)));
    Ok(())
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

fn obj_help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.array(OBJECT_HELP.len());
    for l in OBJECT_HELP {
        out.simple(l.as_bytes());
    }
    Ok(())
}
