//! The command layer under hostile arguments: the fuzzer's bytes choose
//! commands from the table (Redis 7.0's, through `testkit::abuse`, and
//! Sluice's own job commands) and arguments chosen to hurt — extreme
//! integers, non-finite doubles, empty and non-numeric values, huge
//! repetition, every key type in every key position — and the engine's
//! dispatcher runs them in process against a data set holding one key of
//! every type.
//!
//! A command answers or fails with an error, never a panic, a hang or an
//! unbounded allocation: a counting allocator ([`Counting`], which the
//! binary installs) aborts the run when one
//! command's live allocations grow past [`BOUND`] (the reply buffer has
//! a 4 MiB limit as a client with `client-output-buffer-limit normal
//! 4mb` would: what is built past it is dropped, so a reply that grows
//! with a request number stays inside the bound too).
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use engine::{execute, Config, Shared};
use resp::ReplyBuf;
use testkit::abuse::{self, Bytes, Source};

/// What one command may hold on top of what it started with.
const BOUND: usize = 64 << 20;
/// The reply buffer's limit, as a client's output buffer limit (small:
/// a reply that grows with a request number runs until it is reached).
const REPLY_LIMIT: usize = 4 << 20;
/// `proto-max-bulk-len`: strings SETRANGE, SETBIT, BITFIELD and APPEND
/// may grow to (Redis's minimum; the default 512 MiB is a legitimate
/// allocation past the bound).
const MAX_BULK: i64 = 1 << 20;

/// Live bytes, and the mark a command started at (while `ARMED`).
static LIVE: AtomicUsize = AtomicUsize::new(0);
static BASE: AtomicUsize = AtomicUsize::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);

/// The allocator the target must run under (the binary installs it as
/// its global allocator): counts live bytes, and aborts when one command
/// holds more than [`BOUND`] on top of what it started with.
pub struct Counting;

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        if ARMED.load(Ordering::Relaxed) && now > BASE.load(Ordering::Relaxed) + BOUND {
            ARMED.store(false, Ordering::Relaxed);
            // A command allocated past the bound: fail the run here, with
            // the stack that did it.
            eprintln!("one command holds more than {} MiB (asked {} B)", BOUND >> 20, l.size());
            std::process::abort();
        }
        // SAFETY: the caller's layout, passed on unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` came from `System` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            let grow = new - l.size();
            let now = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
            if ARMED.load(Ordering::Relaxed) && now > BASE.load(Ordering::Relaxed) + BOUND {
                ARMED.store(false, Ordering::Relaxed);
                eprintln!("one command holds more than {} MiB (grew to {new} B)", BOUND >> 20);
                std::process::abort();
            }
        } else {
            LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        // SAFETY: `p` came from `System` with layout `l`.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Commands kept out: they stop the process, write files, open network
/// connections, pause every client, wait for replicas, or block (the
/// in-process dispatcher has no connection to wait on).
fn skip(name: &str) -> bool {
    matches!(
        name,
        "shutdown"
            | "debug"
            | "monitor"
            | "sync"
            | "psync"
            | "replconf"
            | "replicaof"
            | "slaveof"
            | "failover"
            | "migrate"
            | "save"
            | "bgsave"
            | "bgrewriteaof"
            | "pfselftest"
            | "wait"
            | "client|kill"
            | "client|pause"
            | "config|set"
            | "config|rewrite"
            | "acl|load"
            | "acl|save"
            | "script|debug"
            | "module|load"
            | "module|loadex"
            | "module|unload"
    ) || name.starts_with("blpop")
        || name.starts_with("brpop")
        || name.starts_with("blm")
        || name.starts_with("bzpop")
        || name == "bzmpop"
        || name == "brpoplpush"
}

/// Sluice's own commands (the job queue), with no argument tree: hostile
/// values in every position.
const OWN: &[&str] = &[
    "ADDJOB", "GETJOB", "ACKJOB", "FASTACK", "DELJOB", "NACK", "ENQUEUE", "DEQUEUE", "WORKING",
    "SHOW", "QLEN", "QPEEK", "QSTAT", "QSCAN", "JSCAN", "PAUSE",
];

fn table() -> &'static [&'static engine::core::meta::Meta] {
    static T: OnceLock<Vec<&'static engine::core::meta::Meta>> = OnceLock::new();
    T.get_or_init(|| abuse::commands(&skip))
}

fn shared() -> &'static Arc<Shared> {
    static S: OnceLock<Arc<Shared>> = OnceLock::new();
    S.get_or_init(|| {
        Shared::new(
            Config { proto_max_bulk_len: MAX_BULK, ..Config::default() },
            engine::commands::table(),
        )
    })
}

fn exec(shared: &Shared, sess: &mut engine::Session, argv: &[Vec<u8>]) {
    let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    let mut out = ReplyBuf::new();
    out.set_limit(REPLY_LIMIT);
    BASE.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    ARMED.store(true, Ordering::Relaxed);
    execute(shared, sess, &argv, &mut out);
    ARMED.store(false, Ordering::Relaxed);
}

/// One input.
pub fn run(data: &[u8]) {
    let shared = shared();
    let mut sess = shared.connect("127.0.0.1:1".into(), "127.0.0.1:6379".into(), -1);
    // The generator's key names are the only keys commands make in
    // database 0: deleting them is a cheap reset. FLUSHALL (every
    // stripe of every database) now and then clears what went elsewhere.
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let mut reset: Vec<Vec<&str>> = Vec::new();
    if RUNS.fetch_add(1, Ordering::Relaxed).is_multiple_of(256) {
        reset.push(vec!["FLUSHALL"]);
    }
    let mut del = vec!["DEL"];
    del.extend_from_slice(abuse::KEYS);
    reset.push(del);
    for f in reset.into_iter().chain(abuse::fixtures()) {
        let f: Vec<Vec<u8>> = f.iter().map(|a| a.as_bytes().to_vec()).collect();
        exec(shared, &mut sess, &f);
    }
    let mut src = Bytes::new(data);
    let table = table();
    for _ in 0..4 {
        if src.exhausted() {
            break;
        }
        let argv = if src.one_in(16) {
            // A job command: hostile values in every position.
            let mut v = vec![OWN[src.below(OWN.len())].as_bytes().to_vec()];
            for _ in 0..src.below(8) {
                v.push(abuse::NUMBERS[src.below(abuse::NUMBERS.len())].as_bytes().to_vec());
            }
            v
        } else {
            let cmd = table[src.below(table.len())];
            abuse::command(&mut src, cmd)
        };
        if sess.in_multi() && src.one_in(2) {
            exec(shared, &mut sess, &[b"EXEC".to_vec()]);
        }
        exec(shared, &mut sess, &argv);
        if sess.blocked.is_some() {
            break;
        }
    }
    shared.disconnect(&mut sess);
}
