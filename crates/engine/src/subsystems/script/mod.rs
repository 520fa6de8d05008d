//! Scripting: what runs `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and
//! `FCALL` as Redis 7.0 runs them (Lua 5.1, effects replication). The
//! commands are declared with the other families (`commands/scripting.rs`,
//! `commands/function.rs`); this subsystem holds the script cache, the
//! function registry, the Lua states and a run.
//!
//! The script cache (body by SHA1, with its shebang flags) is shared by
//! every thread; each thread compiles what it runs in its own Lua state
//! ([`vm`]). A script runs atomically: it holds its declared keys'
//! stripes from start to end (taken by the dispatcher from EVAL's key
//! spec), and any stripe a command inside needs is added as it goes —
//! in order, or, below one held, only if free at once. When that fails
//! before the script wrote anything, the script starts over holding its
//! whole database (or every database), and the cache remembers that for
//! its later runs; after a write it is the script's error. Commands run
//! through the one door (`door::run`) as `Caller::Script`,
//! so their effects join the EVAL's execution unit (propagated as the
//! commands executed, in MULTI/EXEC when several), blocking commands do
//! not block, and clients blocked on keys the script filled are served
//! once it ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use resp::ReplyBuf;
use smallvec::SmallVec;

use crate::core::ctx::{Args, Ctx};
use crate::core::dispatch::{self, Scope};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{CommandSpec, Flags};

pub mod busy;
pub mod cjson;
pub mod cmsgpack;
pub mod function;
pub mod ldb;
pub mod lstruct;
mod rollback;
pub mod vm;

/// A cached script (or a library function: its library's code and its
/// own flags).
pub struct Script {
    pub body: Box<[u8]>,
    /// Length of the shebang line (without its newline), 0 if none.
    pub shebang_len: usize,
    pub flags: ScriptFlags,
    /// The widest scope a run of it needed ([`Scope`] as a number).
    pub(crate) scope: AtomicU8,
}

impl Script {
    pub(crate) fn scope(&self) -> Scope {
        match self.scope.load(Ordering::Relaxed) {
            0 => Scope::Keys,
            1 => Scope::Db,
            _ => Scope::All,
        }
    }

    fn widen(&self, s: Scope) {
        let n = match s {
            Scope::Keys => 0,
            Scope::Db => 1,
            Scope::All => 2,
        };
        self.scope.fetch_max(n, Ordering::Relaxed);
    }
}

/// Flags of a script's `#!lua flags=...` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// The script has a shebang line (no compatibility mode).
    pub shebang: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot_keys: bool,
}

/// Redis's `rand48`, which `math.random` draws from: one sequence for the
/// server, from the C library's default seed.
pub struct Rand48(u64);

impl Rand48 {
    const A: u64 = 0x5_DEEC_E66D;
    const MASK: u64 = (1 << 48) - 1;

    pub fn new() -> Self {
        Rand48(0x1234_ABCD_330E)
    }

    pub fn seed(&mut self, s: i32) {
        self.0 = ((s as u32 as u64) << 16) | 0x330E;
    }

    fn next(&mut self) -> i64 {
        self.0 = (Self::A.wrapping_mul(self.0).wrapping_add(0xB)) & Self::MASK;
        (self.0 >> 17) as i64
    }

    /// A number in [0, 1), as Redis's `math.random()`.
    pub fn next_f64(&mut self) -> f64 {
        const MAX: i64 = i32::MAX as i64;
        (self.next() % MAX) as f64 / MAX as f64
    }
}

impl Default for Rand48 {
    fn default() -> Self {
        Self::new()
    }
}

/// A script running now, as `SCRIPT KILL` and the BUSY replies see it.
pub struct Running {
    pub started: Instant,
    /// `busy-reply-threshold` when it started (0: never busy).
    pub threshold_ms: u64,
    /// Past the threshold: other clients get BUSY.
    pub busy: AtomicBool,
    /// It ran a write command: it cannot be killed.
    pub wrote: AtomicBool,
    /// `SCRIPT KILL` asked it to stop.
    pub kill: AtomicBool,
    /// A function (`FCALL`), not an `EVAL` script: the BUSY text and the
    /// KILL command that applies differ.
    pub function: bool,
    /// For a function, what FUNCTION STATS reports of it while it is busy,
    /// already in the protocol: the `name` and `command` entries of its
    /// `running_script` map (the duration is added when asked).
    pub stats: Vec<u8>,
    /// The name Redis's "Slow script detected" line gives: an EVAL
    /// script's SHA1, a function's name (inline up to 40 bytes, so that
    /// an EVAL allocates nothing for it).
    pub name: SmallVec<[u8; 40]>,
    /// "Lua script killed by user with SCRIPT KILL." was logged.
    pub kill_logged: AtomicBool,
}

/// The script cache every thread shares, and the scripts running.
#[derive(Default)]
pub struct Cache {
    map: RwLock<HashMap<[u8; 40], Arc<Script>, ahash::RandomState>>,
    /// Bumped by `SCRIPT FLUSH`: threads drop their Lua states.
    epoch: AtomicU64,
    pub rng: Arc<Mutex<Rand48>>,
    /// The global `cjson` module's settings: one set for the server, as
    /// Redis has one Lua state, back to the defaults at SCRIPT FLUSH.
    pub(crate) cjson: Arc<Mutex<cjson::Config>>,
    /// `DEBUG SET-DISABLE-DENY-SCRIPTS 1`: scripts may call `noscript`
    /// commands.
    pub deny_disabled: AtomicBool,
    running: Mutex<Vec<Arc<Running>>>,
    /// Running scripts past their threshold.
    busy: AtomicUsize,
    /// Bytes used by every thread's Lua state, as last reported.
    lua_memory: AtomicUsize,
    /// Libraries of functions (FUNCTION LOAD).
    pub(crate) functions: RwLock<function::Libraries>,
}

impl Cache {
    /// Whether a script has run past `busy-reply-threshold`: clients get
    /// BUSY for commands without `allow-busy`.
    #[inline]
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }

    /// FUNCTION STATS's `running_script`: the busy function's map, or
    /// null (Redis can only be asked while a script is busy).
    pub fn reply_running_function(&self, out: &mut ReplyBuf) {
        let running = self.running.lock();
        match running.iter().find(|r| r.function && r.busy.load(Ordering::Relaxed)) {
            Some(r) => {
                out.map(3);
                out.raw(&r.stats);
                out.bulk(b"duration_ms");
                out.int(r.started.elapsed().as_millis() as i64);
            }
            None => out.null(),
        }
    }

    /// The BUSY error for a client's command while a script is busy:
    /// Redis's text names the KILL command of the busy script's kind.
    #[cold]
    pub fn busy_error(&self) -> CmdError {
        let running = self.running.lock();
        match running.iter().find(|r| r.busy.load(Ordering::Relaxed)) {
            Some(r) if r.function => CmdError::BusyFunction,
            _ => CmdError::Busy,
        }
    }

    pub(crate) fn start(&self, threshold_ms: u64, sha: &[u8; 40]) -> Arc<Running> {
        self.start_with(threshold_ms, false, Vec::new(), sha)
    }

    /// [`start`](Self::start) with a function's FUNCTION STATS entries.
    pub(crate) fn start_with(
        &self,
        threshold_ms: u64,
        function: bool,
        stats: Vec<u8>,
        name: &[u8],
    ) -> Arc<Running> {
        let r = Arc::new(Running {
            started: Instant::now(),
            threshold_ms,
            busy: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            function,
            stats,
            name: SmallVec::from_slice(name),
            kill_logged: AtomicBool::new(false),
        });
        // Listed in `running` only once busy (see `poll`): whoever reads
        // the list (SCRIPT/FUNCTION KILL, BUSY texts, FUNCTION STATS)
        // looks for busy scripts only, and a run under the threshold
        // takes no shared lock.
        r
    }

    /// Called by a running script's hook: marks it busy once past its
    /// threshold (and tells the connections to check). True when killed.
    pub(crate) fn poll(&self, shared: &crate::Shared, r: &Running) -> bool {
        if r.threshold_ms > 0 && !r.busy.load(Ordering::Relaxed) {
            let elapsed = r.started.elapsed().as_millis() as u64;
            if elapsed < r.threshold_ms {
                return r.kill.load(Ordering::Relaxed);
            }
            // SAFETY: `r` is the `Running` of an `Arc` its run holds
            // until `finish` (the hook is given `Arc::as_ptr`): one more
            // strong reference, for the list.
            let listed = unsafe {
                Arc::increment_strong_count(r as *const Running);
                Arc::from_raw(r as *const Running)
            };
            self.running.lock().push(listed);
            r.busy.store(true, Ordering::Relaxed);
            self.busy.fetch_add(1, Ordering::AcqRel);
            shared.state_changed();
            // Redis's scriptInterrupt logs this once, when the script
            // first turns out to be past the threshold. Logged after the
            // script is published as busy: the other threads answer
            // their clients meanwhile, and a log write held up by a busy
            // disk must not leave them answering as if no script ran
            // (with one thread, Redis answers nobody until it returns).
            crate::subsystems::log::warning(&format!(
                "Slow script detected: still in execution after {elapsed} milliseconds. You can \
                 try killing the script using the {} command. Script name is: {}.",
                if r.function { "FUNCTION KILL" } else { "SCRIPT KILL" },
                String::from_utf8_lossy(&r.name)
            ));
        }
        r.kill.load(Ordering::Relaxed)
    }

    pub(crate) fn finish(&self, shared: &crate::Shared, r: &Arc<Running>) {
        if r.busy.load(Ordering::Relaxed) {
            self.running.lock().retain(|x| !Arc::ptr_eq(x, r));
            self.busy.fetch_sub(1, Ordering::AcqRel);
            shared.state_changed();
            busy::ended(shared);
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub fn get(&self, sha: &[u8; 40]) -> Option<Arc<Script>> {
        self.map.read().get(sha).cloned()
    }

    /// Bytes of the threads' Lua states (`used_memory_lua`).
    pub fn lua_memory(&self) -> usize {
        self.lua_memory.load(Ordering::Relaxed)
    }

    /// A thread's Lua state (of flush epoch `epoch`) went from `before` to
    /// `after` bytes. The states SCRIPT FLUSH dropped count no more: the
    /// flush zeroes the total, and a dropped state, which its thread frees
    /// when it next runs a script, reports nothing after it.
    pub(crate) fn lua_memory_moved(&self, epoch: u64, before: usize, after: usize) {
        if epoch != self.epoch() {
            return;
        }
        if after >= before {
            self.lua_memory.fetch_add(after - before, Ordering::Relaxed);
        } else {
            // Never below zero, should a flush come between the two loads.
            let _ = self.lua_memory.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                Some(m.saturating_sub(before - after))
            });
        }
    }

    /// Number of cached scripts (`number_of_cached_scripts`).
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the cached bodies (`used_memory_scripts_eval`, roughly).
    pub fn body_bytes(&self) -> usize {
        self.map.read().values().map(|s| s.body.len() + 40 + 64).sum()
    }

    pub(crate) fn flush(&self) {
        // A new table, not `clear`: a million cached scripts leave a
        // table of that capacity behind.
        *self.map.write() = HashMap::default();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.lua_memory.store(0, Ordering::Relaxed);
        *self.cjson.lock() = cjson::Config::default();
    }
}

/// SHA1 of `data` in lower-case hex.
pub fn sha1_hex(data: &[u8]) -> [u8; 40] {
    let digest = sha1_smol::Sha1::from(data).digest().bytes();
    let mut out = [0u8; 40];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = b"0123456789abcdef"[(b >> 4) as usize];
        out[2 * i + 1] = b"0123456789abcdef"[(b & 15) as usize];
    }
    out
}

/// `redis.log(level, msg)`: a line in the server log at Redis's level
/// (LOG_DEBUG 0 … LOG_WARNING 3), as Redis's `serverLogRaw` writes it.
pub(crate) fn log(level: i64, msg: &[u8]) {
    use crate::subsystems::log::Level;
    let level = match level {
        0 => Level::Debug,
        1 => Level::Verbose,
        2 => Level::Notice,
        _ => Level::Warning,
    };
    crate::subsystems::log::log(level, &String::from_utf8_lossy(msg));
}

/// The flags a script runner's call has (Redis's `getCommandFlags`): a
/// script that declares flags (a shebang line; every function) has the
/// table's WRITE, DENYOOM, STALE and MAY_REPLICATE replaced by what they
/// say (`scriptFlagsToCmdFlags`); any other call keeps the table's. What
/// CLIENT PAUSE WRITE and a transaction's flags go by.
pub fn call_flags(shared: &crate::Shared, spec: &CommandSpec, argv: &[&[u8]]) -> Flags {
    let base = spec.flags;
    if !base.has(Flags::RUNS_SCRIPT) || argv.len() < 2 {
        return base;
    }
    // This module's own commands, told apart by their table names.
    let declared = match spec.name {
        "FCALL" | "FCALL_RO" => function::flags_of(shared, argv[1]),
        "EVAL" | "EVAL_RO" => parse_shebang(argv[1]).ok().map(|(f, _)| f),
        _ => {
            let mut sha = [0u8; 40];
            if argv[1].len() == 40 {
                for (d, s) in sha.iter_mut().zip(argv[1]) {
                    *d = s.to_ascii_lowercase();
                }
            }
            shared.scripts.get(&sha).map(|s| s.flags)
        }
    };
    match declared {
        Some(f) if f.shebang => {
            let mut flags = Flags(
                base.0
                    & !(Flags::STALE.0
                        | Flags::DENYOOM.0
                        | Flags::WRITE.0
                        | Flags::MAY_REPLICATE.0),
            );
            if !f.allow_oom && !f.no_writes {
                flags = flags.union(Flags::DENYOOM);
            }
            if !f.no_writes {
                flags = flags.union(Flags::WRITE);
            }
            if f.allow_stale {
                flags = flags.union(Flags::STALE);
            }
            flags
        }
        _ => base,
    }
}

/// Parses the shebang line (`#!lua flags=no-writes,allow-oom`) with
/// Redis's error texts; returns the flags and the line's length.
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), CmdError> {
    let mut flags = ScriptFlags::default();
    if !body.starts_with(b"#!") {
        return Ok((flags, 0));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err(CmdError::err("Invalid script shebang"));
    };
    let parts = resp::split_args(&body[..end])
        .filter(|p| !p.is_empty())
        .ok_or_else(|| CmdError::err("Invalid engine in script shebang"))?;
    if parts[0] != b"#!lua" {
        let mut v = b"ERR Unexpected engine in script shebang: ".to_vec();
        v.extend_from_slice(&parts[0]);
        return Err(CmdError::Bytes(v));
    }
    flags.shebang = true;
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix(b"flags=") else {
            let mut v = b"ERR Unknown lua shebang option: ".to_vec();
            v.extend_from_slice(p);
            return Err(CmdError::Bytes(v));
        };
        if list.is_empty() {
            continue;
        }
        for f in list.split(|&c| c == b',') {
            if !set_flag(&mut flags, f) {
                let mut v = b"ERR Unexpected flag in script shebang: ".to_vec();
                v.extend_from_slice(f);
                return Err(CmdError::Bytes(v));
            }
        }
    }
    Ok((flags, end))
}

/// Sets the flag named `f`; false if there is no such flag.
pub(crate) fn set_flag(flags: &mut ScriptFlags, f: &[u8]) -> bool {
    match f {
        b"no-writes" => flags.no_writes = true,
        b"allow-oom" => flags.allow_oom = true,
        b"allow-stale" => flags.allow_stale = true,
        b"no-cluster" => flags.no_cluster = true,
        b"allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
        _ => return false,
    }
    true
}

impl ScriptFlags {
    /// Names of the flags set, in Redis's order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (on, name) in [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot_keys, "allow-cross-slot-keys"),
        ] {
            if on {
                v.push(name);
            }
        }
        v
    }
}

const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Finds a script by body, adding it to the cache (compiled in this
/// thread's state) if new.
pub(crate) fn load(cx: &mut Ctx, body: &[u8]) -> Result<([u8; 40], Arc<Script>), CmdError> {
    let sha = sha1_hex(body);
    let cache = &cx.shared.scripts;
    if let Some(s) = cache.get(&sha) {
        return Ok((sha, s));
    }
    let (flags, shebang_len) = parse_shebang(body)?;
    let script =
        Arc::new(Script { body: body.into(), shebang_len, flags, scope: AtomicU8::new(0) });
    vm::with_vm(cx.shared, |vm| vm.compile(&sha, &script)).map_err(|e| {
        let mut v = b"ERR Error compiling script (new function): ".to_vec();
        v.extend_from_slice(e.0.as_bytes());
        CmdError::Bytes(v)
    })?;
    let s = cache.map.write().entry(sha).or_insert(script).clone();
    Ok((sha, s))
}

/// EVAL, EVALSHA and their `_RO` forms (`by_sha`, `ro`): the script's
/// checks, its run (debugged in `SCRIPT DEBUG` mode) and what ends it.
// Inlined into the four handlers: a call layer less per run.
#[inline]
pub(crate) fn eval(
    cx: &mut Ctx,
    args: &mut Args,
    out: &mut ReplyBuf,
    by_sha: bool,
    ro: bool,
) -> CmdResult {
    let argv = args.argv();
    // Redis's evalShaCommand refuses a SHA of the wrong length before
    // anything else; a well-formed unknown one after numkeys.
    if by_sha && argv[1].len() != 40 {
        return Err(CmdError::Msg(NOSCRIPT.into()));
    }
    if let Some(mode) = cx.sess.ldb {
        if by_sha {
            return Err(CmdError::err("Please use EVAL instead of EVALSHA for debugging"));
        }
        return eval_debugged(cx, args, out, mode, ro);
    }
    eval_run(cx, args, out, by_sha, ro, false)
}

/// An EVAL of a client in `SCRIPT DEBUG` mode: a debugging session
/// ([`ldb`]) around the run; the connection closes after the reply.
fn eval_debugged(
    cx: &mut Ctx,
    args: &mut Args,
    out: &mut ReplyBuf,
    mode: ldb::Mode,
    ro: bool,
) -> CmdResult {
    let argv = args.argv();
    let limit = cx.sess.conf(cx.shared).busy_reply_threshold.max(0) as u64;
    ldb::start(cx.shared, &cx.sess.handle, mode, argv[1], limit)?;
    cx.sess.close_after_reply = true;
    if mode == ldb::Mode::Yes {
        rollback::begin();
    }
    let r = eval_run(cx, args, out, false, ro, true);
    // Under the locks the run took (every database's).
    rollback::finish(cx.shared, cx.sess, cx.keys);
    ldb::end(mode);
    r
}

/// EVAL's body; `debug` runs it holding every database from the start
/// (a debugged script never starts over).
fn eval_run(
    cx: &mut Ctx,
    args: &mut Args,
    out: &mut ReplyBuf,
    by_sha: bool,
    ro: bool,
    debug: bool,
) -> CmdResult {
    let argv = args.argv();
    let numkeys = crate::core::ctx::parse_i64(argv[2])?;
    if numkeys > (argv.len() - 3) as i64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    } else if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let (sha, script) = if by_sha {
        let given = argv[1];
        let mut sha = [0u8; 40];
        for (d, s) in sha.iter_mut().zip(given) {
            *d = s.to_ascii_lowercase();
        }
        match cx.shared.scripts.get(&sha) {
            Some(s) => (sha, s),
            None => return Err(CmdError::Msg(NOSCRIPT.into())),
        }
    } else {
        load(cx, argv[1])?
    };
    let flags = script.flags;
    check_flags(cx, flags, ro)?;
    let keys = &argv[3..3 + numkeys as usize];
    let sargs = &argv[3 + numkeys as usize..];
    let shared = cx.shared;
    let scope = if debug { Scope::All } else { script.scope() };
    if scope > Scope::Keys {
        relock(cx, keys, scope)?;
    }
    let threshold = cx.sess.conf(shared).busy_reply_threshold.max(0) as u64;
    let running = shared.scripts.start(threshold, &sha);
    let r = run_loop(cx, out, &Target::Eval(&sha), &script, keys, sargs, ro, scope, &running);
    shared.scripts.finish(shared, &running);
    if running.busy.load(Ordering::Relaxed) {
        // Clients that dropped their WATCHes while it ran, on keys of
        // stripes it held, are taken off those stripes now.
        crate::core::multi::unwatch_deferred(shared, cx.keys);
    }
    r
}

/// What a run executes.
pub(crate) enum Target<'t> {
    /// An EVAL script, by SHA1.
    Eval(&'t [u8; 40]),
    /// Function `name` of library `lib` at `version`.
    Function { lib: &'t str, version: u64, name: &'t str },
}

pub(crate) fn run_loop(
    cx: &mut Ctx,
    out: &mut ReplyBuf,
    target: &Target,
    script: &Arc<Script>,
    keys: &[&[u8]],
    sargs: &[&[u8]],
    ro: bool,
    mut scope: Scope,
    running: &Arc<Running>,
) -> CmdResult {
    let shared = cx.shared;
    let db = cx.sess.db;
    let flags = script.flags;
    loop {
        let mark = out.mark();
        let mut run = vm::Run {
            shared,
            sess: &mut *cx.sess,
            keys: &mut *cx.keys,
            read_only: ro || flags.no_writes,
            resp3: false,
            repl: 3,
            wrote: false,
            scope,
            retry: None,
            running: running.clone(),
            script: script.clone(),
            start_db: db,
            declared: keys,
            obeys: cx.caller.must_obey(),
        };
        let outcome = vm::with_vm(shared, |vm| match *target {
            Target::Eval(sha) => {
                // Another thread may have loaded it: compile it here first.
                if let Err(e) = vm.compile(sha, script) {
                    out.error(
                        format!("ERR Error compiling script (new function): {}", e.0).as_bytes(),
                    );
                    return vm::Outcome::Done;
                }
                vm.run(sha, keys, sargs, &mut run, out)
            }
            Target::Function { lib, version, name } => {
                match vm.function(lib, version, &script.body, script.shebang_len, name) {
                    Some(id) => vm.run_function(id, name, keys, sargs, &mut run, out),
                    None => {
                        out.error(b"ERR Function not found");
                        vm::Outcome::Done
                    }
                }
            }
        });
        // A SELECT inside the script is the script's own.
        cx.sess.db = db;
        match outcome {
            vm::Outcome::Done => return Ok(()),
            vm::Outcome::Retry(wider) => {
                out.truncate(mark);
                scope = scope.max(wider);
                relock(cx, keys, scope)?;
            }
        }
    }
}

/// What a script's shebang flags (a function's flags) refuse before it
/// runs, in Redis's order (processCommand sees a script that may write as
/// a write command, then scriptPrepareForRun checks the rest): over
/// `maxmemory`, a script that may write without `allow-oom`; after a
/// failed BGSAVE (MISCONF), one that may write; without
/// enough good replicas (`min-replicas-to-write`), or on a read-only
/// replica, one that may write; on a stale replica, one without
/// `allow-stale`; in cluster mode, one flagged `no-cluster`; writing from
/// an `_RO` command. (Scripts without a
/// shebang line are only refused on a stale replica, and are otherwise
/// checked command by command; what a master or the AOF replays is not
/// checked.)
// Inlined up to the script's declared flags: a script without them (the
// usual EVAL) is checked with a few loads per run.
#[inline]
pub(crate) fn check_flags(cx: &mut Ctx, flags: ScriptFlags, ro: bool) -> CmdResult {
    if cx.caller.must_obey() {
        return Ok(());
    }
    if !flags.shebang {
        // EVAL's own flags let it run there, but a script without flags
        // is refused (Redis's scriptPrepareForRun, compatibility mode).
        return if running_stale(cx) { Err(CmdError::MasterDown) } else { Ok(()) };
    }
    check_declared(cx, flags, ro)
}

/// [`check_flags`] for a script with a shebang line (or a function).
#[inline(never)]
fn check_declared(cx: &mut Ctx, flags: ScriptFlags, ro: bool) -> CmdResult {
    if !flags.no_writes && !flags.allow_oom {
        let max = cx.sess.conf(cx.shared).maxmemory;
        if max > 0 && cx.shared.over_maxmemory(max) {
            return Err(CmdError::Oom);
        }
    }
    // Then, as for a write command, a failed BGSAVE or AOF write (MISCONF).
    if !flags.no_writes && !cx.shared.persist.disk_ok() {
        if let Some(e) = cx.shared.persist.disk_error(cx.sess.conf(cx.shared)) {
            return Err(e);
        }
    }
    if !flags.no_writes && cx.sess.min_replicas > 0 {
        let good = crate::subsystems::repl::good_replicas(cx.shared) as i64;
        if good < cx.sess.min_replicas {
            return Err(CmdError::NoReplicas);
        }
    }
    if !flags.no_writes && cx.shared.store.is_replica() && cx.sess.conf(cx.shared).replica_read_only
    {
        return Err(CmdError::ReadOnlyReplica);
    }
    // Without allow-stale the script is not a stale command (Redis's
    // processCommand sees the flags the script declared).
    if !flags.allow_stale && running_stale(cx) {
        return Err(CmdError::MasterDown);
    }
    // The rest is scriptPrepareForRun's, once processCommand let it run.
    if flags.no_cluster && cx.shared.cluster.get().is_some() {
        return Err(CmdError::err("Can not run script on cluster, 'no-cluster' flag is set."));
    }
    if ro && !flags.no_writes {
        return Err(CmdError::err("Can not execute a script with write flag using *_ro command."));
    }
    Ok(())
}

/// A replica whose link is down, with `replica-serve-stale-data no`.
#[inline]
fn running_stale(cx: &mut Ctx) -> bool {
    cx.shared.store.is_replica() && stale_replica(cx)
}

#[inline(never)]
fn stale_replica(cx: &mut Ctx) -> bool {
    !cx.sess.conf(cx.shared).replica_serve_stale_data
        && crate::subsystems::repl::master_down(cx.shared)
}

/// Drops the stripes held and takes the declared keys' plus `scope`, in
/// ascending order (nothing has run yet, or nothing was written).
pub(crate) fn relock(cx: &mut Ctx, keys: &[&[u8]], scope: Scope) -> CmdResult {
    let shared = cx.shared;
    let crate::core::session::Session { fx, ready, .. } = &mut *cx.sess;
    cx.keys.take_signals(ready, |db, k| fx.expired(db, k));
    cx.keys.release();
    let mut ids: SmallVec<[u32; 8]> = SmallVec::new();
    for k in keys {
        ids.push(shared.store.global_id(cx.sess.db, shared.store.stripe_of(k)));
    }
    dispatch::lock_scope(shared, cx.keys, cx.sess.db, scope, &mut ids)
}

/// `SCRIPT KILL` (`function` false) and `FUNCTION KILL`, as Redis's
/// scriptKill: NOTBUSY, then UNKILLABLE, then the BUSY text of the other
/// kind when the busy script is not of the command's kind.
pub(crate) fn kill_running(cx: &mut Ctx, function: bool, out: &mut ReplyBuf) -> CmdResult {
    let running = cx.shared.scripts.running.lock();
    let busy: Vec<&Arc<Running>> =
        running.iter().filter(|r| r.busy.load(Ordering::Relaxed)).collect();
    if busy.is_empty() {
        return Err(CmdError::Msg("NOTBUSY No scripts in execution right now.".into()));
    }
    if busy.iter().any(|r| r.wrote.load(Ordering::Relaxed)) {
        return Err(CmdError::Msg(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. \
             You can either wait the script termination or kill the server in a hard way using \
             the SHUTDOWN NOSAVE command."
                .into(),
        ));
    }
    let busy: Vec<&Arc<Running>> = busy.into_iter().filter(|r| r.function == function).collect();
    if busy.is_empty() {
        return Err(if function { CmdError::Busy } else { CmdError::BusyFunction });
    }
    for r in busy {
        r.kill.store(true, Ordering::Relaxed);
    }
    out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand48_matches_redis_first_draws() {
        // redis-server 7.0.15, fresh: math.random(1000000) three times.
        let mut r = Rand48::new();
        let draws: Vec<i64> =
            (0..3).map(|_| (r.next_f64() * 1_000_000.0).floor() as i64 + 1).collect();
        assert_eq!(draws, [396465, 840486, 353337]);
    }

    #[test]
    fn shebang_errors_are_redis_texts() {
        let t =
            |b: &[u8]| parse_shebang(b).map_err(|e| String::from_utf8(e.text().to_vec()).unwrap());
        assert_eq!(t(b"return 1").unwrap().1, 0);
        assert_eq!(t(b"#!lua\nreturn 1").unwrap().1, 5);
        assert_eq!(t(b"#!lua").unwrap_err(), "ERR Invalid script shebang");
        assert_eq!(
            t(b"#!luax\nreturn 1").unwrap_err(),
            "ERR Unexpected engine in script shebang: #!luax"
        );
        assert_eq!(
            t(b"#!lua flags=bad\n").unwrap_err(),
            "ERR Unexpected flag in script shebang: bad"
        );
        assert_eq!(t(b"#!lua name=x\n").unwrap_err(), "ERR Unknown lua shebang option: name=x");
        let (f, _) = t(b"#!lua flags=no-writes,allow-oom\n").unwrap();
        assert!(f.no_writes && f.allow_oom && !f.allow_stale);
    }

    #[test]
    fn number_casts_like_c() {
        assert_eq!(vm::lua_number_to_i64(3.99), 3);
        assert_eq!(vm::lua_number_to_i64(-3.99), -3);
        assert_eq!(vm::lua_number_to_i64(1e300), i64::MIN);
        assert_eq!(vm::lua_number_to_i64(f64::NAN), i64::MIN);
    }
}
