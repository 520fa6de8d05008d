//! The Lua 5.1 state a thread runs scripts in, and the conversions between
//! Lua values and Redis replies, as Redis 7.0 makes them.
//!
//! Each event-loop thread keeps its own state (scripts cannot keep state
//! between runs: their globals are read-only), with the functions of the
//! scripts it has run, compiled on first use from the shared cache.
//! `redis.call` reaches the engine through [`Run`]: the one door
//! (`door::run`) as a `Caller::Script`, under the locks the script took
//! before it started, which a command outside them widens.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use mlua::{Function, Lua, LuaOptions, MultiValue, RegistryKey, StdLib, Table, Value};
use resp::{Frame, Proto, ReplyBuf};
use smallvec::SmallVec;
use store::Locks;

use crate::core::dispatch::{self, Caller, Scope};
use crate::core::error::CmdError;
use crate::core::session::Session;
use crate::core::shared::Shared;
use crate::core::spec::{CommandSpec, Flags};

use super::{Running, Script};
use std::sync::Arc;

const PRELUDE: &str = include_str!("prelude.lua");

/// Bytes one thread's Lua state may allocate.
const LUA_MEMORY_LIMIT: usize = 512 << 20;

/// What a script stopped by SCRIPT KILL fails with.
const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// Redis's version as scripts see it.
pub const VERSION: &str = "7.0.15";
const VERSION_NUM: i64 = 0x07000f;

/// One thread's Lua state.
pub struct Vm {
    lua: Lua,
    /// The cache's flush epoch the functions belong to.
    epoch: u64,
    /// Compiled scripts, held in the Lua registry: a `Function` handle
    /// kept on the Rust side takes one of mlua's ~8,000 auxiliary stack
    /// slots, so caching more scripts than that would abort the thread.
    funcs: HashMap<[u8; 40], RegistryKey, ahash::RandomState>,
    env: Table,
    /// The state's main thread, which runs are made on directly through
    /// the C API (see [`Vm::call`]).
    state: *mut mlua::ffi::lua_State,
    /// The error handler runs are called under (prelude.lua), in the
    /// registry.
    handler: RegistryKey,
    /// A registry slot a run's table result or error is handed to mlua's
    /// conversions through.
    result: RegistryKey,
    /// The environment of library code, and the prelude's loader.
    libenv: Table,
    loader: Function,
    /// Libraries loaded in this state: name → (version, functions).
    libs: HashMap<String, (u64, HashMap<String, RegistryKey>)>,
    /// `used_memory` as last added to the cache's total.
    reported: usize,
    /// The scripts' globals (prelude.lua), in the registry: KEYS and ARGV
    /// are set in them for each run.
    front: RegistryKey,
    /// The KEYS and ARGV tables (in the registry), refilled by each run
    /// (up to `KEPT_MAX` elements) instead of made anew, while the
    /// scripts leave them holding nothing but their elements; and how
    /// many those are.
    kept: RefCell<[RegistryKey; 2]>,
    kept_len: [std::cell::Cell<usize>; 2],
    /// Whether `front`'s KEYS (ARGV) is the kept table now: then a run
    /// does not set it again (one string interned and one table set less
    /// each).
    in_front: [std::cell::Cell<bool>; 2],
    /// Runs since the last collection step.
    runs: std::cell::Cell<u32>,
    /// Bytes in use when the last collection cycle ended, or `None` while
    /// a cycle is under way (then every period steps it further).
    gc_floor: std::cell::Cell<Option<usize>>,
}

/// Runs between two collection steps, and the step's size (Redis's
/// `LUA_GC_CYCLE_PERIOD`).
const GC_PERIOD: u32 = 50;

/// Growth since the last finished cycle below which a period's step is
/// skipped: on a heap this small the step is a whole cycle (every live
/// object marked again), which cost EVALSHA about 2,000 instructions per
/// run when taken every 50 runs whatever the garbage. The bound keeps an
/// idle state (about 62 KB live) under 100 KB, as Redis's test expects.
const GC_SLACK: usize = 24 << 10;

/// Most elements a kept KEYS or ARGV table is refilled with (a longer
/// list gets a table of its own, as do functions' keys and args).
const KEPT_MAX: usize = 16;

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's Lua state, created (or recreated after
/// `SCRIPT FLUSH`) as needed.
pub fn with_vm<R>(shared: &Shared, f: impl FnOnce(&mut Vm) -> R) -> R {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        let epoch = shared.scripts.epoch();
        if slot.as_ref().is_none_or(|vm| vm.epoch != epoch) {
            // The old state's bytes were taken off the total by the flush.
            drop(slot.take());
            *slot = Some(Vm::new(shared, epoch).expect("the prelude loads"));
        }
        let vm = slot.as_mut().expect("created above");
        let r = f(vm);
        // The server-wide total (`used_memory_lua`) is one atomic every
        // thread writes: moved when this state moved by a few KB, not on
        // every run.
        let now = vm.lua.used_memory();
        if now.abs_diff(vm.reported) >= 4096 {
            shared.scripts.lua_memory_moved(vm.epoch, vm.reported, now);
            vm.reported = now;
        }
        r
    })
}

/// Frees this thread's Lua state if SCRIPT FLUSH dropped it: event loops
/// call this on their tick, so a flush gives the memory back within a
/// tick on every thread, not when each thread next runs a script. Not
/// while the state is in use (a busy script's hook runs the loop).
pub fn release_flushed(shared: &Shared) {
    VM.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            if slot.as_ref().is_some_and(|vm| vm.epoch != shared.scripts.epoch()) {
                drop(slot.take());
            }
        }
    })
}

/// What a run calls: an EVAL script (KEYS and ARGV as globals) or a
/// library's function (keys and args as its arguments).
enum Callable {
    /// Registry ids of the compiled script, of the function's callback.
    Script(i32),
    Function(i32),
}

/// How a run ended.
pub enum Outcome {
    /// The reply (or the script's error) is written.
    Done,
    /// A command needed a stripe that could not be taken without risking
    /// a deadlock before the script wrote anything: run it again with
    /// this scope locked up front.
    Retry(Scope),
}

/// Why a script could not be compiled.
pub struct CompileError(pub String);

impl Vm {
    fn new(shared: &Shared, epoch: u64) -> mlua::Result<Vm> {
        // SAFETY: the debug library is needed only by the prelude (the
        // error handler keeps `debug.getinfo`), which removes it from the
        // globals before any script runs.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        let p = lua.create_table()?;
        p.set("version", VERSION)?;
        p.set("version_num", VERSION_NUM)?;
        p.set(
            "sha1hex",
            lua.create_function(|lua, s: Value| {
                let bytes: Vec<u8> = match &s {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(_) | Value::Number(_) => {
                        lua.coerce_string(s.clone())?.map_or(Vec::new(), |s| s.as_bytes().to_vec())
                    }
                    _ => Vec::new(),
                };
                lua.create_string(super::sha1_hex(&bytes))
            })?,
        )?;
        p.set(
            "log",
            lua.create_function(|_, (level, msg): (i64, mlua::String)| {
                super::log(level, &msg.as_bytes());
                Ok(())
            })?,
        )?;
        let rng = shared.scripts.rng.clone();
        p.set("rand", lua.create_function(move |_, ()| Ok(rng.lock().next_f64()))?)?;
        let rng = shared.scripts.rng.clone();
        p.set(
            "srand",
            lua.create_function(move |_, seed: f64| {
                rng.lock().seed(seed as i32);
                Ok(())
            })?,
        )?;
        p.set("bit", bit_library(&lua)?)?;
        p.set("cjson", super::cjson::library(&lua, shared.scripts.cjson.clone())?)?;
        p.set("cjson_functions", super::cjson::FUNCTIONS)?;
        // SAFETY: `wrap_raising` follows the Lua C API's rules (see it).
        p.set("wrap", unsafe { lua.create_c_function(wrap_raising)? })?;
        p.set("cmsgpack", super::cmsgpack::library(&lua)?)?;
        p.set("struct", super::lstruct::library(&lua)?)?;
        // A script that allocates without bound fails ("not enough
        // memory") instead of taking the server with it.
        lua.set_memory_limit(LUA_MEMORY_LIMIT)?;
        // The count hook stays installed (every 100,000 instructions it
        // costs nothing measurable); it acts only while a run set HOOKED.
        // SAFETY: installs a hook function on the state scripts run on.
        unsafe {
            lua.exec_raw::<()>((), |l| {
                mlua::ffi::lua_sethook(l, Some(count_hook), mlua::ffi::LUA_MASKCOUNT, 100_000);
            })?;
        }
        // The per-run primitives: created once, they reach the running
        // script's state through `CURRENT` (outside a run they raise, as
        // Redis's do when called at library load time).
        let outside = |what: &str| {
            mlua::Error::runtime(format!("{what} can only be called inside a script invocation"))
        };
        // SAFETY: `call_raising` follows the Lua C API's rules (see it).
        p.set("call", unsafe { lua.create_c_function(call_raising)? })?;
        // SAFETY: as above.
        p.set("pcall", unsafe { lua.create_c_function(call_protected)? })?;
        p.set(
            "setresp",
            lua.create_function(move |_, v: i64| {
                with_current(|r| r.resp3 = v == 3).ok_or_else(|| outside("redis.setresp"))
            })?,
        )?;
        p.set(
            "set_repl",
            lua.create_function(move |_, v: i64| {
                with_current(|r| r.repl = v as u8).ok_or_else(|| outside("redis.set_repl"))
            })?,
        )?;
        // `redis.acl_check_cmd`, in the prelude's `raising` protocol: 0
        // and the answer, or 1 and the error table to raise.
        p.set(
            "acl_check_cmd",
            lua.create_function(|lua, args: MultiValue| {
                let fail = |text: &str| -> mlua::Result<MultiValue> {
                    let t = lua.create_table()?;
                    t.raw_set("err", text)?;
                    Ok(MultiValue::from_vec(vec![Value::Integer(1), Value::Table(t)]))
                };
                if args.is_empty() {
                    return fail(
                        "ERR Please specify at least one argument for this redis lib call",
                    );
                }
                let mut owned: Vec<Vec<u8>> = Vec::with_capacity(args.len());
                for v in args.iter() {
                    match v {
                        Value::String(s) => owned.push(s.as_bytes().to_vec()),
                        Value::Integer(_) | Value::Number(_) => {
                            let n = lua.coerce_number(v.clone())?.unwrap_or(0.0);
                            let mut b = [0u8; 64];
                            let len = resp::fmt_double(n, &mut b);
                            owned.push(b[..len].to_vec());
                        }
                        _ => {
                            return fail(
                                "ERR Lua redis lib command arguments must be strings or integers",
                            )
                        }
                    }
                }
                let argv: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
                match with_current(|r| r.acl_check(&argv)) {
                    None => fail(
                        "ERR redis.acl_check_cmd can only be called inside a script invocation",
                    ),
                    Some(None) => fail("ERR Invalid command passed to redis.acl_check_cmd()"),
                    Some(Some(ok)) => {
                        Ok(MultiValue::from_vec(vec![Value::Integer(0), Value::Boolean(ok)]))
                    }
                }
            })?,
        )?;
        p.set(
            "killed",
            lua.create_function(|_, ()| {
                Ok(load_timed_out()
                    || with_current(|r| r.running.kill.load(std::sync::atomic::Ordering::Relaxed))
                        .unwrap_or(false))
            })?,
        )?;
        // SAFETY: the debugger's functions follow the Lua C API's rules.
        unsafe {
            p.set("ldb_debug", lua.create_c_function(super::ldb::redis_debug)?)?;
            p.set("ldb_breakpoint", lua.create_c_function(super::ldb::redis_breakpoint)?)?;
            p.set("ldb_error", lua.create_c_function(super::ldb::lua_log_error)?)?;
        }
        // SAFETY: `set_readonly` follows the Lua C API's rules (see it).
        p.set("readonly", unsafe { lua.create_c_function(set_readonly)? })?;
        let (env, handler, raising, libenv, loader, freeze): (
            Table,
            Function,
            Table,
            Table,
            Function,
            Function,
        ) = {
            let chunk = lua.load(PRELUDE).set_name("=sluice").into_function()?;
            // The prelude's frames are skipped when an error's position is
            // found, so its line numbers and names are never read: they go,
            // which leaves each collection cycle less to mark.
            // SAFETY: `exec_raw` put the chunk (a Lua function) on the stack.
            unsafe { lua.exec_raw::<()>(&chunk, |l| lua_stripdebug(l, -1))? };
            chunk.call(p)?
        };
        for entry in raising.sequence_values::<Table>() {
            let entry = entry?;
            let target: Table = entry.raw_get(1)?;
            let name: String = entry.raw_get(2)?;
            let body: Function = entry.raw_get(3)?;
            // SAFETY: pushes one C closure over the function exec_raw put
            // on the stack; `trampoline` follows the Lua C API's rules.
            let f: Function =
                unsafe { lua.exec_raw(body, |l| mlua::ffi::lua_pushcclosure(l, trampoline, 1))? };
            target.raw_set(name, f)?;
        }
        // From here on the globals and the libraries are read-only.
        freeze.call::<()>(())?;
        let kept = [
            lua.create_registry_value(lua.create_table()?)?,
            lua.create_registry_value(lua.create_table()?)?,
        ];
        let handler = lua.create_registry_value(handler)?;
        let front = lua.create_registry_value(env.clone())?;
        let result = lua.create_registry_value(true)?;
        let mut state = std::ptr::null_mut();
        // SAFETY: only reads the state pointer mlua runs the closure on
        // (the main state: no Rust callback is running).
        unsafe { lua.exec_raw::<()>((), |l| state = l)? };
        Ok(Vm {
            lua,
            epoch,
            funcs: HashMap::default(),
            env,
            state,
            handler,
            result,
            libenv,
            loader,
            libs: HashMap::new(),
            reported: 0,
            front,
            kept: RefCell::new(kept),
            kept_len: Default::default(),
            in_front: Default::default(),
            runs: Default::default(),
            gc_floor: Default::default(),
        })
    }

    /// Compiles a script body (from after its shebang line, which is
    /// kept as an empty line so that line numbers hold).
    pub fn compile(&mut self, sha: &[u8; 40], script: &Script) -> Result<(), CompileError> {
        if self.funcs.contains_key(sha) {
            return Ok(());
        }
        let body = &script.body[script.shebang_len..];
        let f = self
            .lua
            .load(body)
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| CompileError(lua_error_text(&e)))?;
        let key =
            self.lua.create_registry_value(f).map_err(|e| CompileError(lua_error_text(&e)))?;
        self.funcs.insert(*sha, key);
        Ok(())
    }

    /// Compiles and runs a library's code (after its shebang line): the
    /// functions it registers, or Redis's error text. With `install`
    /// (name and version), this state keeps the functions to run them.
    pub fn load_library(
        &mut self,
        code: &[u8],
        shebang_len: usize,
        install: Option<(&str, u64)>,
    ) -> Result<Vec<super::function::FunctionInfo>, String> {
        let f = self
            .lua
            .load(&code[shebang_len..])
            .set_name("@user_function")
            .set_environment(self.libenv.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", lua_error_text(&e)))?;
        // Library code that runs too long is stopped by the count hook
        // (Redis's luaEngineLoadHook).
        LOAD_DEADLINE.with(|d| d.set(Some(Instant::now() + LOAD_TIMEOUT)));
        let r = self.loader.call(f);
        LOAD_DEADLINE.with(|d| d.set(None));
        let (ok, v): (bool, Value) = r.map_err(|e| format!("ERR {}", lua_error_text(&e)))?;
        if !ok {
            let msg = match v {
                Value::String(s) => s.to_string_lossy(),
                _ => "ERR unknown error".into(),
            };
            return Err(format!("ERR Error registering functions: {msg}"));
        }
        let Value::Table(list) = v else { return Err("ERR No functions registered".into()) };
        let mut infos = Vec::new();
        let mut funcs = HashMap::new();
        for entry in list.sequence_values::<Table>() {
            let entry = entry.map_err(|e| lua_error_text(&e))?;
            let get = |k: &str| entry.raw_get::<Value>(k).unwrap_or(Value::Nil);
            let name = match get("name") {
                Value::String(s) => s.to_string_lossy(),
                _ => continue,
            };
            let description = match get("description") {
                Value::String(s) => Some(s.as_bytes().to_vec()),
                _ => None,
            };
            let mut flags = super::ScriptFlags { shebang: true, ..Default::default() };
            if let Value::Table(fl) = get("flags") {
                for f in fl.sequence_values::<String>().flatten() {
                    super::set_flag(&mut flags, f.as_bytes());
                }
            }
            if let Value::Function(cb) = get("callback") {
                if install.is_some() {
                    let key = self.lua.create_registry_value(cb).map_err(|e| lua_error_text(&e))?;
                    funcs.insert(name.clone(), key);
                }
            }
            infos.push(super::function::FunctionInfo { name, description, flags });
        }
        if infos.is_empty() {
            return Err("ERR No functions registered".into());
        }
        if let Some((lib, version)) = install {
            self.libs.insert(lib.to_string(), (version, funcs));
        }
        Ok(infos)
    }

    /// The callback of function `name` of library `lib` (version
    /// `version`), loading the library's code here first if needed.
    pub fn function(
        &mut self,
        lib: &str,
        version: u64,
        code: &[u8],
        shebang_len: usize,
        name: &str,
    ) -> Option<i32> {
        if self.libs.get(lib).is_none_or(|(v, _)| *v != version) {
            self.libs.remove(lib);
            self.load_library(code, shebang_len, Some((lib, version))).ok()?;
        }
        let key = self.libs.get(lib)?.1.get(name)?;
        Some(key.id())
    }

    /// Runs a compiled script and writes its reply (or error) to `out`.
    pub fn run(
        &mut self,
        sha: &[u8; 40],
        keys: &[&[u8]],
        args: &[&[u8]],
        run: &mut Run<'_, '_>,
        out: &mut ReplyBuf,
    ) -> Outcome {
        let Some(f) = self.funcs.get(sha).map(|k| k.id()) else {
            out.error(b"NOSCRIPT No matching script. Please use EVAL.");
            return Outcome::Done;
        };
        self.call(Callable::Script(f), sha, keys, args, run, out)
    }

    /// Runs function `name` (its callback, registry id `f`, from
    /// [`function`](Self::function)) with its keys and args.
    pub fn run_function(
        &mut self,
        f: i32,
        name: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        run: &mut Run<'_, '_>,
        out: &mut ReplyBuf,
    ) -> Outcome {
        self.call(Callable::Function(f), name.as_bytes(), keys, args, run, out)
    }

    /// One run, made on the state directly through the C API: the
    /// handler, `front`, the kept KEYS and ARGV tables and the callable
    /// pushed from the registry, KEYS and ARGV set (or a function's two
    /// tables pushed), the callable `lua_pcall`ed under the handler, and
    /// a scalar result written as the reply right there; a table result,
    /// or the error, goes through mlua's values (by a registry slot).
    /// Nothing here is a protected call of mlua's: those push two new C
    /// closures each (garbage for the collector on every run) and cost,
    /// with mlua's stack guards and handle pushes, more than the rest of
    /// a short script. The pushes before `lua_pcall` cannot raise: the
    /// memory limit is lifted meanwhile (see [`Unlimited`]).
    fn call(
        &self,
        what: Callable,
        name: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        run: &mut Run<'_, '_>,
        out: &mut ReplyBuf,
    ) -> Outcome {
        use mlua::ffi;
        /// What the run left: the reply written, a value to convert or
        /// report, or a restart.
        enum Left {
            Written,
            Result,
            Error,
            Retry(Scope),
        }
        let lua = &self.lua;
        let running = run.running.clone();
        let hooked = running.threshold_ms > 0;
        if hooked {
            HOOKED.with(|h| h.set(Some((run.shared as *const Shared, Arc::as_ptr(&running)))));
        }
        let (f, script) = match what {
            Callable::Script(f) => (f, true),
            Callable::Function(f) => (f, false),
        };
        let cell = RefCell::new(run);
        let mut left = Left::Written;
        let (mut used, mut stale) = ([false; 2], [false; 2]);
        let l = self.state;
        {
            let _current = Current::enter(&cell, lua);
            let unlimited = Unlimited::new(lua);
            // SAFETY: plain Lua C API calls on the main state, which no
            // Rust callback is running on (runs start from the dispatcher),
            // its stack given back as it was found. Stack, above `base`: 1
            // the handler, 2 `front`, 3 and 4 the kept KEYS and ARGV
            // tables, 5 the callable. No call raises outside `lua_pcall`:
            // with the memory limit lifted an allocation cannot fail, and
            // `lua_rawset`/`lua_rawseti` on plain tables call no
            // metamethods. The borrow of the run is taken after the script
            // ran; a string's bytes are read in place.
            unsafe {
                let base = ffi::lua_gettop(l);
                ffi::lua_checkstack(l, 8);
                let reg = ffi::LUA_REGISTRYINDEX;
                let kept = self.kept.borrow();
                for id in [self.handler.id(), self.front.id(), kept[0].id(), kept[1].id(), f] {
                    ffi::lua_rawgeti(l, reg, id as ffi::lua_Integer);
                }
                drop(kept);
                let nargs = if script {
                    for (i, items, name) in [(0, keys, c"KEYS"), (1, args, c"ARGV")] {
                        if items.len() <= KEPT_MAX {
                            // Until the table is found clean again,
                            // whatever was written may be in it.
                            let old = self.kept_len[i].replace(KEPT_MAX);
                            refill(l, base + 3 + i as i32, items, old);
                            used[i] = true;
                            // The globals are read-only to scripts:
                            // only runs set KEYS and ARGV in them.
                            if !self.in_front[i].replace(true) {
                                ffi::lua_pushlstring(l, name.as_ptr(), 4);
                                ffi::lua_pushvalue(l, base + 3 + i as i32);
                                set_global(l, base + 2);
                            }
                        } else {
                            ffi::lua_pushlstring(l, name.as_ptr(), 4);
                            push_array(l, items);
                            set_global(l, base + 2);
                            self.in_front[i].set(false);
                        }
                    }
                    0
                } else {
                    push_array(l, keys);
                    push_array(l, args);
                    2
                };
                // A debugging session (SCRIPT DEBUG) stops the script
                // from its line hook; the count hook comes back after.
                let debugging = super::ldb::live();
                if debugging {
                    ffi::lua_sethook(
                        l,
                        Some(super::ldb::line_hook),
                        ffi::LUA_MASKLINE | ffi::LUA_MASKCOUNT,
                        100_000,
                    );
                }
                unlimited.limit();
                let status = ffi::lua_pcall(l, nargs, 1, base + 1);
                unlimited.lift();
                if debugging {
                    ffi::lua_sethook(l, Some(count_hook), ffi::LUA_MASKCOUNT, 100_000);
                }
                // Stack: the handler, `front`, the kept tables, the
                // result or the error.
                for i in 0..2 {
                    if used[i] {
                        let n = if i == 0 { keys.len() } else { args.len() };
                        if exactly_array(l, base + 3 + i as i32, n) {
                            self.kept_len[i].set(n);
                        } else {
                            stale[i] = true;
                        }
                    }
                }
                let top = base + 5;
                let r = cell.borrow();
                if let Some(scope) = r.retry {
                    left = Left::Retry(scope);
                } else if status != 0 {
                    left = Left::Error;
                } else {
                    match ffi::lua_type(l, top) {
                        ffi::LUA_TSTRING => {
                            let mut len = 0usize;
                            let p = ffi::lua_tolstring(l, top, &mut len);
                            out.bulk(std::slice::from_raw_parts(p as *const u8, len));
                        }
                        ffi::LUA_TNUMBER => out.int(lua_number_to_i64(ffi::lua_tonumber(l, top))),
                        ffi::LUA_TBOOLEAN => {
                            let b = ffi::lua_toboolean(l, top) != 0;
                            if r.resp3 {
                                out.boolean(b);
                            } else if b {
                                out.int(1);
                            } else {
                                out.null();
                            }
                        }
                        ffi::LUA_TTABLE => left = Left::Result,
                        _ => out.null(),
                    }
                }
                drop(r);
                if matches!(left, Left::Result | Left::Error) {
                    // Handed to mlua's conversions below.
                    ffi::lua_pushvalue(l, top);
                    ffi::lua_rawseti(l, reg, self.result.id() as ffi::lua_Integer);
                }
                ffi::lua_settop(l, base);
            }
        }
        // A kept table the script changed beyond its elements (other keys,
        // a metatable) is not seen by a later run: a new one is kept.
        for (i, stale) in stale.into_iter().enumerate() {
            if stale {
                if let Ok(t) = lua.create_table().and_then(|t| lua.create_registry_value(t)) {
                    self.kept.borrow_mut()[i] = t;
                    self.kept_len[i].set(0);
                    self.in_front[i].set(false);
                }
            }
        }
        let outcome = match left {
            Left::Written => Outcome::Done,
            Left::Retry(scope) => Outcome::Retry(scope),
            Left::Result | Left::Error => {
                let _unlimited = Unlimited::new(lua);
                let v = lua.registry_value::<Value>(&self.result).unwrap_or(Value::Nil);
                // An error in the reply: in the error stats unless counted
                // when its command was refused or failed, and the script's
                // command failed either way (Redis's afterErrorReply).
                let mut note = |text: &[u8], counted: bool| {
                    let mut r = cell.borrow_mut();
                    if !counted {
                        r.shared.cmdstats.error(text);
                    }
                    r.sess.error_replied = true;
                };
                if matches!(left, Left::Result) {
                    let resp3 = cell.borrow().resp3;
                    reply_from_lua(v, resp3, out, &mut note);
                } else {
                    let killed = running.kill.load(std::sync::atomic::Ordering::Relaxed);
                    script_error(&v, name, killed, out, &mut note);
                }
                // The slot does not keep the value alive.
                // SAFETY: a push and a raw set on the main state, stack
                // balanced; the limit is lifted, so neither raises.
                unsafe {
                    mlua::ffi::lua_pushboolean(l, 1);
                    mlua::ffi::lua_rawseti(
                        l,
                        mlua::ffi::LUA_REGISTRYINDEX,
                        self.result.id() as mlua::ffi::lua_Integer,
                    );
                }
                Outcome::Done
            }
        };
        if hooked {
            HOOKED.with(|h| h.set(None));
        }
        // A collection step every `GC_PERIOD` runs, as Redis's
        // evalGenericCommand makes one: the garbage of short scripts is
        // collected a little at a time instead of piling up until Lua's
        // own collector doubles the heap (which keeps `used_memory_lua`
        // near the live size). Unlike Redis, a period whose runs left
        // less than `GC_SLACK` behind since the last finished cycle takes
        // no step.
        let runs = self.runs.get() + 1;
        if runs >= GC_PERIOD {
            self.runs.set(0);
            let used = lua.used_memory();
            let due = match self.gc_floor.get() {
                Some(floor) if used < floor + GC_SLACK => {
                    // Lua's own collector may have finished a cycle since.
                    self.gc_floor.set(Some(floor.min(used)));
                    false
                }
                _ => true,
            };
            if due {
                // The step may resize the string table: with the limit
                // lifted that cannot fail (and raise outside a protected
                // call).
                let _unlimited = Unlimited::new(lua);
                // SAFETY: a collection step on the main state, outside
                // any run; the finalisers it may call are mlua's, which
                // do not raise.
                let ended = unsafe {
                    mlua::ffi::lua_gc(self.state, mlua::ffi::LUA_GCSTEP, GC_PERIOD as i32)
                };
                self.gc_floor.set((ended == 1).then(|| lua.used_memory()));
            }
        } else {
            self.runs.set(runs);
        }
        outcome
    }

    /// Bytes the Lua state uses (`used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }
}

thread_local! {
    /// The run the per-run primitives (`redis.call`, `redis.setresp`,
    /// `redis.set_repl`, the kill check) act on: a `RefCell<&mut Run>` that
    /// lives on `Vm::call`'s stack, set by `Current` only while it runs.
    static CURRENT: std::cell::Cell<*const ()> = const { std::cell::Cell::new(std::ptr::null()) };
    /// The state that run runs on (for `Unlimited` in `call_primitive`).
    static CURRENT_LUA: std::cell::Cell<*const Lua> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// Lifts the Lua memory limit while Rust code works on the state: with a
/// limit set, mlua makes every string, table and field operation a
/// protected call of its own (an allocation may fail), which cost more
/// than the rest of a short script. Without the limit an allocation
/// cannot fail, so the unprotected paths are sound; the limit holds again
/// before any script code runs.
pub(super) struct Unlimited<'a>(&'a Lua);

/// The limit lifted on the state of the run in progress (`None` outside
/// a run): for the debugger's hook, which works on the state mid-run.
pub(super) fn unlimited() -> Option<Unlimited<'static>> {
    let lua = CURRENT_LUA.with(|c| c.get());
    // SAFETY: set by `Current` for as long as the run lasts, and the hook
    // (the only caller) runs within the run.
    (!lua.is_null()).then(|| Unlimited::new(unsafe { &*lua }))
}

impl<'a> Unlimited<'a> {
    fn new(lua: &'a Lua) -> Unlimited<'a> {
        let _ = lua.set_memory_limit(0);
        Unlimited(lua)
    }

    /// The limit holds again (while a script runs).
    pub(super) fn limit(&self) {
        let _ = self.0.set_memory_limit(LUA_MEMORY_LIMIT);
    }

    /// Lifted again.
    pub(super) fn lift(&self) {
        let _ = self.0.set_memory_limit(0);
    }
}

impl Drop for Unlimited<'_> {
    fn drop(&mut self) {
        let _ = self.0.set_memory_limit(LUA_MEMORY_LIMIT);
    }
}

/// Sets `CURRENT` (and `CURRENT_LUA`) for a run and restores what was
/// there when dropped.
struct Current(*const (), *const Lua);

impl Current {
    fn enter(cell: &RefCell<&mut Run<'_, '_>>, lua: &Lua) -> Current {
        Current(
            CURRENT.with(|c| c.replace(cell as *const _ as *const ())),
            CURRENT_LUA.with(|c| c.replace(lua as *const Lua)),
        )
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
        CURRENT_LUA.with(|c| c.set(self.1));
    }
}

/// Runs `f` on the current run; `None` outside a run, or when the run is
/// already borrowed (a primitive reached again from inside itself, e.g.
/// through a finaliser run by the collector).
fn with_current<R>(f: impl FnOnce(&mut Run<'_, '_>) -> R) -> Option<R> {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        return None;
    }
    // SAFETY: `Current` sets the pointer to a `RefCell<&mut Run>` borrowed
    // for the whole time it is set, on this thread only; `f` cannot keep
    // the reference (its lifetimes end with the call).
    let cell = unsafe { &*(p as *const RefCell<&mut Run<'_, '_>>) };
    let mut r = cell.try_borrow_mut().ok()?;
    Some(f(&mut r))
}

// The patched Lua's read-only tables and debug stripping
// (vendor/lua-src/PATCHES.md).
extern "C-unwind" {
    fn lua_stripdebug(l: *mut mlua::ffi::lua_State, idx: std::os::raw::c_int);
    fn lua_enablereadonlytable(
        l: *mut mlua::ffi::lua_State,
        idx: std::os::raw::c_int,
        on: std::os::raw::c_int,
    );
}

/// `P.readonly(t, on)`: marks a table read-only or writable again (the
/// prelude's; scripts never see it).
unsafe extern "C-unwind" fn set_readonly(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    // SAFETY: plain Lua C API calls on the running state; luaL_checktype
    // raises (unwinding past this frame, which owns nothing) on a
    // non-table.
    unsafe {
        mlua::ffi::luaL_checktype(l, 1, mlua::ffi::LUA_TTABLE);
        let on = mlua::ffi::lua_toboolean(l, 2);
        lua_enablereadonlytable(l, 1, on);
    }
    0
}

/// Sets a key in the (read-only) globals table at `idx` to a value: the
/// key and the value on top of the stack (stack: -2).
///
/// # Safety
/// The table at `idx` is a table; the limit is lifted (nothing raises).
unsafe fn set_global(l: *mut mlua::ffi::lua_State, idx: i32) {
    // SAFETY: as the caller guarantees; protection is restored at once.
    unsafe {
        lua_enablereadonlytable(l, idx, 0);
        mlua::ffi::lua_rawset(l, idx);
        lua_enablereadonlytable(l, idx, 1);
    }
}

/// Pushes a table holding `items` as a Lua array (stack: +1).
///
/// # Safety
/// Inside a protected call on `l`, with room for two more stack slots.
unsafe fn push_array(l: *mut mlua::ffi::lua_State, items: &[&[u8]]) {
    // SAFETY: plain Lua C API calls, as the caller guarantees.
    unsafe {
        mlua::ffi::lua_createtable(l, items.len().min(i32::MAX as usize) as i32, 0);
        for (i, a) in items.iter().enumerate() {
            mlua::ffi::lua_pushlstring(l, a.as_ptr() as *const _, a.len());
            mlua::ffi::lua_rawseti(l, -2, i as mlua::ffi::lua_Integer + 1);
        }
    }
}

/// Sets a kept table's elements to `items`, clearing those up to `old`.
///
/// # Safety
/// Inside a protected call on `l`, the table at `idx`, room for two slots.
unsafe fn refill(l: *mut mlua::ffi::lua_State, idx: i32, items: &[&[u8]], old: usize) {
    // SAFETY: plain Lua C API calls, as the caller guarantees.
    unsafe {
        for (i, a) in items.iter().enumerate() {
            mlua::ffi::lua_pushlstring(l, a.as_ptr() as *const _, a.len());
            mlua::ffi::lua_rawseti(l, idx, i as mlua::ffi::lua_Integer + 1);
        }
        for i in items.len()..old {
            mlua::ffi::lua_pushnil(l);
            mlua::ffi::lua_rawseti(l, idx, i as mlua::ffi::lua_Integer + 1);
        }
    }
}

/// Whether the table at `idx` holds exactly the keys 1..=n and has no
/// metatable (what a run may leave in a kept table for the next to
/// refill).
///
/// # Safety
/// On a state with room for three slots; nothing here allocates.
unsafe fn exactly_array(l: *mut mlua::ffi::lua_State, idx: i32, n: usize) -> bool {
    use mlua::ffi;
    // SAFETY: plain Lua C API calls; `lua_next` is given only keys it
    // returned, so it does not raise.
    unsafe {
        if ffi::lua_getmetatable(l, idx) != 0 {
            ffi::lua_pop(l, 1);
            return false;
        }
        let mut count = 0;
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, idx) != 0 {
            ffi::lua_pop(l, 1);
            let k = if ffi::lua_type(l, -1) == ffi::LUA_TNUMBER {
                ffi::lua_tonumber(l, -1)
            } else {
                0.0
            };
            count += 1;
            if !(k >= 1.0 && k <= n as f64 && k.fract() == 0.0) || count > n {
                ffi::lua_pop(l, 1);
                return false;
            }
        }
        count == n
    }
}

/// How long library code may run at FUNCTION LOAD (Redis's
/// `LOAD_TIMEOUT_MS`).
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

thread_local! {
    /// When the library code being loaded on this thread times out.
    static LOAD_DEADLINE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Whether library code being loaded ran past its time (then every count
/// hook raises, and Redis's pcall does not catch it).
fn load_timed_out() -> bool {
    LOAD_DEADLINE.with(|d| d.get()).is_some_and(|t| Instant::now() > t)
}

thread_local! {
    /// The run the count hook reports for: the server and its entry in the
    /// running scripts (set only while `Vm::call` runs a script that may
    /// become busy; the hook returns at once otherwise).
    static HOOKED: std::cell::Cell<Option<(*const Shared, *const Running)>> =
        const { std::cell::Cell::new(None) };
}

/// Called every 100,000 Lua instructions of a script: marks it busy past
/// `busy-reply-threshold` and from then on serves the thread's other
/// clients ([`super::busy`]), and stops it when SCRIPT KILL asked (raising
/// on every call from then on, so that pcall cannot keep it alive).
unsafe extern "C-unwind" fn count_hook(l: *mut mlua::ffi::lua_State, _: *mut mlua::ffi::lua_Debug) {
    if load_timed_out() {
        // SAFETY: raising an error from a hook is what the Lua C API
        // allows; nothing with a destructor lives in this frame. The
        // error is a table, as Redis's luaPushError makes it.
        unsafe {
            mlua::ffi::lua_createtable(l, 0, 1);
            mlua::ffi::lua_pushstring(l, c"ERR FUNCTION LOAD timeout".as_ptr());
            mlua::ffi::lua_setfield(l, -2, c"err".as_ptr());
            mlua::ffi::lua_error(l);
        }
    }
    let Some((shared, running)) = HOOKED.with(|h| h.get()) else { return };
    // SAFETY: HOOKED is set only while `Vm::run` holds both alive.
    let (shared, running) = unsafe { (&*shared, &*running) };
    let mut killed = shared.scripts.poll(shared, running);
    if !killed && running.busy.load(std::sync::atomic::Ordering::Relaxed) {
        // Past the threshold: this thread's other clients are served
        // (BUSY, SCRIPT KILL, SHUTDOWN NOSAVE…) at each hook, as Redis
        // processes events from its hook once a script timed out.
        super::busy::during(shared);
        killed = running.kill.load(std::sync::atomic::Ordering::Relaxed);
    }
    if killed {
        if !running.kill_logged.swap(true, std::sync::atomic::Ordering::Relaxed) {
            // Redis's luaMaskCountHook line (for functions too).
            crate::subsystems::log::warning("Lua script killed by user with SCRIPT KILL.");
        }
        // SAFETY: raising an error from a hook is what the Lua C API
        // allows; nothing with a destructor lives in this frame.
        unsafe {
            mlua::ffi::lua_pushstring(l, c"Script killed by user with SCRIPT KILL...".as_ptr());
            mlua::ffi::lua_error(l);
        }
    }
}

/// The C function around the prelude's functions that may raise (see
/// `raising` in prelude.lua): calls its upvalue, then returns what follows
/// a 0 flag, or raises the value after a 1 (as is) or a 2 (a message, with
/// the caller's position as `luaL_error` adds it). Being a C function, a
/// script's `return redis.call(...)` keeps its own frame, so the error
/// names the script's line as Redis's does.
unsafe extern "C-unwind" fn trampoline(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    // SAFETY (whole body): plain Lua C API calls on the running state;
    // nothing with a destructor lives across lua_call or lua_error, which
    // may unwind past this frame.
    unsafe {
        let n = ffi::lua_gettop(l);
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, n, ffi::LUA_MULTRET);
        let nres = ffi::lua_gettop(l);
        let flag = if nres >= 1 { ffi::lua_tointeger(l, 1) } else { 0 };
        if flag != 0 {
            ffi::lua_settop(l, 2);
            if flag == 2 {
                ffi::luaL_where(l, 1);
                ffi::lua_insert(l, 2);
                ffi::lua_concat(l, 2);
            }
            ffi::lua_error(l)
        }
        ffi::lua_remove(l, 1);
        nres - 1
    }
}

/// `P.wrap(f)`: `f` inside a [`trampoline`] (for what the prelude makes
/// after start-up, such as `cjson.new()`'s modules).
unsafe extern "C-unwind" fn wrap_raising(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    // SAFETY: plain Lua C API calls on the running state; luaL_checktype
    // raises (past this frame, which owns nothing) on a non-function.
    unsafe {
        mlua::ffi::luaL_checktype(l, 1, mlua::ffi::LUA_TFUNCTION);
        mlua::ffi::lua_settop(l, 1);
        mlua::ffi::lua_pushcclosure(l, trampoline, 1);
    }
    1
}

/// LuaBitOp's `bit` library (the one Redis bundles): 32-bit operations on
/// Lua numbers. Each function returns the `raising` flag first (see the
/// prelude): argument errors are raised with the caller's position.
fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    type Op = fn(&[i32]) -> Value;
    fn arg(lua: &Lua, name: &str, args: &MultiValue, i: usize) -> Result<i32, String> {
        let got = match args.get(i) {
            None => "no value",
            Some(v @ (Value::Integer(_) | Value::Number(_) | Value::String(_))) => {
                if let Ok(Some(n)) = lua.coerce_number(v.clone()) {
                    // LuaBitOp's conversion: the low 32 bits after adding
                    // 2^52 + 2^51 (rounds half to even, wraps).
                    return Ok((n + 6_755_399_441_055_744.0).to_bits() as u32 as i32);
                }
                "string"
            }
            Some(Value::Nil) => "nil",
            Some(Value::Boolean(_)) => "boolean",
            Some(Value::Table(_)) => "table",
            Some(Value::Function(_)) => "function",
            Some(Value::Thread(_)) => "thread",
            Some(_) => "userdata",
        };
        Err(format!("bad argument #{} to '{name}' (number expected, got {got})", i + 1))
    }
    let t = lua.create_table()?;
    let define = |name: &'static str, min: usize, variadic: bool, op: Op| -> mlua::Result<()> {
        let f = lua.create_function(move |lua, args: MultiValue| {
            let n = if variadic { args.len().max(min) } else { min };
            let mut xs = Vec::with_capacity(n);
            for i in 0..n {
                match arg(lua, name, &args, i) {
                    Ok(x) => xs.push(x),
                    Err(msg) => {
                        return Ok(MultiValue::from_vec(vec![
                            Value::Integer(2),
                            Value::String(lua.create_string(msg)?),
                        ]))
                    }
                }
            }
            let v = op(&xs);
            Ok(MultiValue::from_vec(vec![Value::Integer(0), v]))
        })?;
        t.raw_set(name, f)
    };
    define("tobit", 1, false, |x| Value::Number(x[0] as f64))?;
    define("bnot", 1, false, |x| Value::Number(!x[0] as f64))?;
    define("band", 1, true, |x| Value::Number(x.iter().fold(-1, |a, b| a & b) as f64))?;
    define("bor", 1, true, |x| Value::Number(x.iter().fold(0, |a, b| a | b) as f64))?;
    define("bxor", 1, true, |x| Value::Number(x.iter().fold(0, |a, b| a ^ b) as f64))?;
    define("lshift", 2, false, |x| Value::Number(((x[0] as u32) << (x[1] & 31)) as i32 as f64))?;
    define("rshift", 2, false, |x| Value::Number(((x[0] as u32) >> (x[1] & 31)) as i32 as f64))?;
    define("arshift", 2, false, |x| Value::Number((x[0] >> (x[1] & 31)) as f64))?;
    define("rol", 2, false, |x| {
        Value::Number((x[0] as u32).rotate_left((x[1] & 31) as u32) as i32 as f64)
    })?;
    define("ror", 2, false, |x| {
        Value::Number((x[0] as u32).rotate_right((x[1] & 31) as u32) as i32 as f64)
    })?;
    define("bswap", 1, false, |x| Value::Number((x[0] as u32).swap_bytes() as i32 as f64))?;
    // tohex's second argument is optional: checked when given.
    let tohex = lua.create_function(move |lua, args: MultiValue| {
        let mut xs = Vec::new();
        for i in 0..args.len().clamp(1, 2) {
            match arg(lua, "tohex", &args, i) {
                Ok(x) => xs.push(x),
                Err(msg) => {
                    return Ok(MultiValue::from_vec(vec![
                        Value::Integer(2),
                        Value::String(lua.create_string(msg)?),
                    ]))
                }
            }
        }
        let b = xs[0] as u32;
        let n = xs.get(1).copied().unwrap_or(8);
        let digits: &[u8] = if n < 0 { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
        let len = n.unsigned_abs().min(8) as usize;
        let mut buf = vec![0u8; len];
        let mut b = b;
        for c in buf.iter_mut().rev() {
            *c = digits[(b & 15) as usize];
            b >>= 4;
        }
        Ok(MultiValue::from_vec(vec![Value::Integer(0), Value::String(lua.create_string(&buf)?)]))
    })?;
    t.raw_set("tohex", tohex)?;
    Ok(t)
}

/// The text of a Lua error as Lua itself would print it.
fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

/// The reply for a script that raised an error: Redis's
/// `-<err> script: <name>, on <source>:<line>.`
fn script_error(
    v: &Value,
    sha: &[u8],
    killed: bool,
    out: &mut ReplyBuf,
    note: &mut dyn FnMut(&[u8], bool),
) {
    let mut line = Vec::new();
    let mut counted = false;
    match v {
        Value::Table(t) => {
            let msg = t.raw_get::<Option<mlua::String>>("err").ok().flatten();
            counted = ignores_stats(t) && !killed;
            match msg {
                _ if killed => {
                    line.extend_from_slice(b"ERR ");
                    line.extend_from_slice(KILLED.as_bytes());
                }
                Some(m) => line.extend_from_slice(&m.as_bytes()),
                None => line.extend_from_slice(b"ERR unknown error"),
            }
            let source = t.raw_get::<Option<mlua::String>>("source").ok().flatten();
            let at = t.raw_get::<Value>("line").ok();
            if let (Some(src), Some(at)) = (source, at) {
                let at = match at {
                    Value::Integer(i) => Some(i.to_string()),
                    Value::Number(n) => Some(format!("{n}")),
                    Value::String(s) => Some(s.to_string_lossy()),
                    _ => None,
                };
                if let Some(at) = at {
                    line.extend_from_slice(b" script: ");
                    line.extend_from_slice(sha);
                    line.extend_from_slice(b", on ");
                    line.extend_from_slice(&src.as_bytes());
                    line.push(b':');
                    line.extend_from_slice(at.as_bytes());
                    line.push(b'.');
                }
            }
        }
        Value::String(s) => {
            line.extend_from_slice(b"ERR Error running script ");
            line.extend_from_slice(sha);
            line.extend_from_slice(b", ");
            let b = s.as_bytes();
            line.extend_from_slice(&b[..b.len().min(100)]);
        }
        other => {
            line.extend_from_slice(b"ERR ");
            line.extend_from_slice(other.to_string().unwrap_or_default().as_bytes());
        }
    }
    note(&line, counted);
    out.error(&line);
}

/// Whether an error table carries Redis's "already counted" marker.
fn ignores_stats(t: &Table) -> bool {
    let key = IGNORE_STATS.to_str().unwrap_or_default();
    matches!(t.raw_get::<Value>(key), Ok(v) if !matches!(v, Value::Nil | Value::Boolean(false)))
}

/// Lua 5.1's `LUAI_MAXCSTACK`.
const MAX_CSTACK: usize = 8000;
/// Lua stack slots in use when the conversion starts (error handler and
/// result).
const BASE_TOP: usize = 2;

/// Writes a script's return value as Redis's `luaReplyToRedisReply` does.
/// `resp3` is the script's `redis.setresp` choice (booleans follow it);
/// the client's protocol is `out.proto`. Iterative, with the Lua stack
/// slots Redis's recursion would use counted, so that nesting (even a
/// cyclic table) ends where Redis's does: with "reached lua stack limit"
/// where `lua_checkstack` would fail.
fn reply_from_lua(v: Value, resp3: bool, out: &mut ReplyBuf, note: &mut dyn FnMut(&[u8], bool)) {
    let mut work: Vec<(Value, usize)> = vec![(v, BASE_TOP)];
    while let Some((v, top)) = work.pop() {
        if top + 4 > MAX_CSTACK {
            note(b"ERR reached lua stack limit", false);
            out.error(b"ERR reached lua stack limit");
            continue;
        }
        match v {
            Value::String(s) => out.bulk(&s.as_bytes()),
            Value::Boolean(b) => {
                if resp3 {
                    out.boolean(b);
                } else if b {
                    out.int(1);
                } else {
                    out.null();
                }
            }
            Value::Integer(i) => out.int(i),
            Value::Number(n) => out.int(lua_number_to_i64(n)),
            Value::Table(t) => table_reply(&t, top, out, &mut work, note),
            _ => out.null(),
        }
    }
}

/// C's `(long long)` cast of a double on x86-64: out of range and NaN give
/// `LLONG_MIN`.
pub fn lua_number_to_i64(n: f64) -> i64 {
    if n.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// One table: a reply of its own (error, status, double, …) or a header
/// whose elements are pushed on `work` (in reverse, to come out in order).
fn table_reply(
    t: &Table,
    top: usize,
    out: &mut ReplyBuf,
    work: &mut Vec<(Value, usize)>,
    note: &mut dyn FnMut(&[u8], bool),
) {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    let clean = |b: &[u8]| -> Vec<u8> {
        b.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect()
    };
    if let Value::String(e) = field("err") {
        note(&e.as_bytes(), ignores_stats(t));
        out.error(&e.as_bytes());
        return;
    }
    if let Value::String(s) = field("ok") {
        // Redis copies it as a C string (up to a NUL).
        let b = s.as_bytes();
        out.simple(&clean(b.split(|&c| c == 0).next().unwrap_or(&[])));
        return;
    }
    match field("double") {
        Value::Integer(i) => return out.double(i as f64),
        Value::Number(n) => return out.double(n),
        _ => {}
    }
    if let Value::String(s) = field("big_number") {
        let b = clean(&s.as_bytes());
        match out.proto {
            Proto::Resp3 => {
                out.raw(b"(");
                out.raw(&b);
                out.raw(b"\r\n");
            }
            Proto::Resp2 => out.bulk(&b),
        }
        return;
    }
    if let Value::Table(v) = field("verbatim_string") {
        let format = v.raw_get::<Value>("format").unwrap_or(Value::Nil);
        let string = v.raw_get::<Value>("string").unwrap_or(Value::Nil);
        if let (Value::String(f), Value::String(s)) = (format, string) {
            let s = s.as_bytes();
            match out.proto {
                Proto::Resp3 => {
                    let mut fmt = f.as_bytes().to_vec();
                    fmt.resize(3, 0);
                    out.raw(format!("={}\r\n", s.len() + 4).as_bytes());
                    out.raw(&fmt);
                    out.raw(b":");
                    out.raw(&s);
                    out.raw(b"\r\n");
                }
                Proto::Resp2 => out.bulk(&s),
            }
            return;
        }
    }
    let start = work.len();
    if let Value::Table(m) = field("map") {
        // Stack: table, map, key, value, and the key's copy.
        let mut n = 0;
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            work.push((k, top + 4));
            work.push((v, top + 3));
            n += 1;
        }
        out.map(n);
        work[start..].reverse();
        return;
    }
    if let Value::Table(s) = field("set") {
        let mut n = 0;
        for (k, _) in s.pairs::<Value, Value>().flatten() {
            work.push((k, top + 3));
            n += 1;
        }
        out.set(n);
        work[start..].reverse();
        return;
    }
    // An array, up to its first nil.
    let mut i = 1;
    loop {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => work.push((v, top + 1)),
        }
        i += 1;
    }
    out.array(i - 1);
    work[start..].reverse();
}

/// `redis.call`, a C function: runs the command its arguments name and
/// returns the reply as a Lua value, or raises the error table. Being a C
/// function, a script's `return redis.call(...)` keeps the script's frame,
/// so the error names the script's line as Redis's does.
///
/// # Safety
/// Called by Lua as a `lua_CFunction`.
unsafe extern "C-unwind" fn call_raising(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    // SAFETY: as the caller guarantees.
    unsafe { call_primitive(l, true) }
}

/// `redis.pcall`: as `redis.call`, the error table returned, not raised.
///
/// # Safety
/// Called by Lua as a `lua_CFunction`.
unsafe extern "C-unwind" fn call_protected(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    // SAFETY: as the caller guarantees.
    unsafe { call_primitive(l, false) }
}

/// `redis.call`'s and `redis.pcall`'s body: runs the command its arguments
/// name and pushes the reply as a Lua value (raising an error reply when
/// `raise`). Arguments are read from the Lua stack in place and the reply
/// is pushed with the C API, without mlua's per-call conversions; the Lua
/// memory limit is lifted meanwhile, so no allocation here can raise (and
/// jump over Rust frames). The only raises are `lua_error` calls made with
/// nothing left in this frame that needs dropping.
///
/// # Safety
/// Called from a `lua_CFunction` on the running state.
#[inline(always)]
unsafe fn call_primitive(l: *mut mlua::ffi::lua_State, raise: bool) -> std::os::raw::c_int {
    use mlua::ffi;
    enum Piece {
        Str(*const u8, usize),
        Num(usize, usize),
    }
    let lua = CURRENT_LUA.with(|c| c.get());
    if lua.is_null() {
        // SAFETY: a Lua error raised from a C function, nothing with a
        // destructor in this frame yet.
        unsafe {
            ffi::lua_pushstring(
                l,
                c"redis.call/pcall can only be called inside a script invocation".as_ptr(),
            );
            ffi::lua_error(l)
        }
    }
    // SAFETY: set by `Current` for as long as the run (and this call) lasts.
    let unlimited = Unlimited::new(unsafe { &*lua });
    // SAFETY (this block): stack reads of the arguments, which stay on the
    // stack (so their bytes stay alive) until this function returns.
    let outcome = unsafe {
        let n = ffi::lua_gettop(l);
        let mut pieces: SmallVec<[Piece; 8]> = SmallVec::new();
        let mut nums: SmallVec<[u8; 64]> = SmallVec::new();
        let mut bad = false;
        for i in 1..=n {
            match ffi::lua_type(l, i) {
                ffi::LUA_TSTRING => {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(l, i, &mut len);
                    pieces.push(Piece::Str(p as *const u8, len));
                }
                ffi::LUA_TNUMBER => {
                    let at = nums.len();
                    let mut b = [0u8; 64];
                    let len = resp::fmt_double(ffi::lua_tonumber(l, i), &mut b);
                    nums.extend_from_slice(&b[..len]);
                    pieces.push(Piece::Num(at, nums.len()));
                }
                _ => {
                    bad = true;
                    break;
                }
            }
        }
        if bad {
            Some(Err((
                b"ERR Lua redis lib command arguments must be strings or integers".to_vec(),
                false,
            )))
        } else {
            let argv: SmallVec<[&[u8]; 8]> = pieces
                .iter()
                .map(|p| match *p {
                    Piece::Str(p, len) => std::slice::from_raw_parts(p, len),
                    Piece::Num(a, b) => &nums[a..b],
                })
                .collect();
            // One buffer per thread, kept between calls (taken, so that a
            // call reached from inside this one gets a fresh one).
            if super::ldb::stepping() && !argv.is_empty() {
                super::ldb::log_command(&argv);
            }
            let mut buf = SCRATCH.with(|s| s.take()).unwrap_or_default();
            buf.reset();
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                with_current(|r| r.command(&argv, &mut buf))
            }));
            match ran {
                // A reply past the buffer's cap (SRANDMEMBER with a huge
                // negative count) is cut: an error, not half a reply.
                Ok(Some(Ok(()))) if buf.is_over() => {
                    Some(Err((b"ERR reply exceeds the output buffer limit".to_vec(), false)))
                }
                Ok(Some(Ok(()))) => Some(Ok(buf)),
                Ok(Some(Err(line))) => Some(Err(line)),
                Ok(None) => None,
                Err(_) => {
                    Some(Err((b"ERR internal error while running the command".to_vec(), false)))
                }
            }
        }
    };
    let Some(outcome) = outcome else {
        // Not inside a run (or reached from inside itself): raise, with
        // nothing left in this frame that needs dropping.
        drop(unlimited);
        // SAFETY: a Lua error raised from a C function.
        unsafe {
            ffi::lua_pushstring(
                l,
                c"redis.call/pcall can only be called inside a script invocation".as_ptr(),
            );
            ffi::lua_error(l)
        }
    };
    // SAFETY (this block): pushes with the memory limit lifted and the
    // stack checked; nothing here raises.
    let is_err = unsafe {
        ffi::lua_settop(l, 0);
        match outcome {
            Err((line, counted)) => {
                if super::ldb::stepping() {
                    // Redis's texts without a code are logged bare.
                    match line.strip_prefix(b"ERR ") {
                        Some(t) => super::ldb::log_error(t),
                        None => super::ldb::log_error(&[b"-", &line[..]].concat()),
                    }
                }
                push_error_table(l, &line, counted);
                true
            }
            Ok(buf) => {
                let is_err = match buf.contiguous() {
                    Some(b) => push_reply(l, b),
                    None => push_reply(l, &buf.to_vec()),
                };
                if super::ldb::stepping() {
                    let bytes = buf.to_vec();
                    if is_err {
                        let end = bytes.iter().position(|&c| c == b'\r').unwrap_or(bytes.len());
                        super::ldb::log_error(&bytes[..end]);
                    }
                    super::ldb::log_reply(&bytes);
                }
                // Kept unless a call reached from inside this one put its
                // own back first (no empty buffer is built or dropped).
                SCRATCH.with(|s| {
                    s.borrow_mut().get_or_insert(buf);
                });
                is_err
            }
        }
    };
    drop(unlimited);
    if raise && is_err {
        // SAFETY: a Lua error raised from a C function, the error table on
        // top; nothing in this frame needs dropping any more.
        unsafe { ffi::lua_error(l) }
    }
    1
}

/// Pushes a command's reply (`bytes`, one RESP frame) as the Lua value a
/// script sees (stack: +1); true when it is an error table. The common
/// one-line replies are read in place; the others through
/// [`resp::parse_frame`].
///
/// # Safety
/// On a running state, with the memory limit lifted and room for 4 slots.
unsafe fn push_reply(l: *mut mlua::ffi::lua_State, bytes: &[u8]) -> bool {
    use mlua::ffi;
    // The frame's first line (without CRLF) and where its body starts, when
    // it ends where `bytes` ends.
    let line = || -> Option<(&[u8], usize)> {
        let nl = bytes.iter().position(|&c| c == b'\n')?;
        (nl >= 2 && bytes[nl - 1] == b'\r').then(|| (&bytes[1..nl - 1], nl + 1))
    };
    // SAFETY (whole body): plain Lua C API calls, as the caller guarantees.
    unsafe {
        match bytes.first() {
            Some(b'$') => {
                if let Some((head, body)) = line() {
                    if head == b"-1" && body == bytes.len() {
                        ffi::lua_pushboolean(l, 0);
                        return false;
                    }
                    if let Some(len) = resp::parse_i64(head) {
                        let len = len as usize;
                        if len as i64 >= 0 && body + len + 2 == bytes.len() {
                            ffi::lua_pushlstring(l, bytes[body..].as_ptr() as *const _, len);
                            return false;
                        }
                    }
                }
            }
            Some(b':') => {
                if let Some((head, body)) = line() {
                    if let (Some(i), true) = (resp::parse_i64(head), body == bytes.len()) {
                        ffi::lua_pushnumber(l, i as f64);
                        return false;
                    }
                }
            }
            Some(b'+') => {
                if let Some((head, body)) = line() {
                    if body == bytes.len() {
                        ffi::lua_createtable(l, 0, 1);
                        ffi::lua_pushlstring(l, head.as_ptr() as *const _, head.len());
                        ffi::lua_setfield(l, -2, c"ok".as_ptr());
                        return false;
                    }
                }
            }
            _ => {}
        }
        // Attributes are not shown to scripts (as in Redis): the reply is
        // what follows them.
        let mut at = 0;
        let mut parsed = resp::parse_frame(bytes);
        while let Ok(Some((Frame::Attribute(_), used))) = parsed {
            at += used;
            parsed = resp::parse_frame(&bytes[at..]);
        }
        match parsed {
            Ok(Some((frame, _))) => {
                let is_err = matches!(frame, Frame::Error(_));
                if !push_frame(l, frame) {
                    ffi::lua_settop(l, 0);
                    push_error_table(l, b"ERR reached lua stack limit", false);
                    return true;
                }
                is_err
            }
            _ => {
                push_error_table(l, b"ERR the command's reply could not be read", false);
                true
            }
        }
    }
}

/// Pushes a Redis reply as the Lua value `redis.call` returns (stack: +1);
/// false when the Lua stack cannot grow that deep.
///
/// # Safety
/// On a running state, with the memory limit lifted.
unsafe fn push_frame(l: *mut mlua::ffi::lua_State, f: Frame) -> bool {
    use mlua::ffi;
    // SAFETY (whole body): plain Lua C API calls, as the caller guarantees.
    unsafe {
        if ffi::lua_checkstack(l, 4) == 0 {
            return false;
        }
        let push_bytes = |b: &[u8]| ffi::lua_pushlstring(l, b.as_ptr() as *const _, b.len());
        // { name = <pushed value> }
        let wrap = |name: &std::ffi::CStr| {
            ffi::lua_createtable(l, 0, 1);
            ffi::lua_insert(l, -2);
            ffi::lua_setfield(l, -2, name.as_ptr());
        };
        match f {
            Frame::Integer(i) => ffi::lua_pushnumber(l, i as f64),
            Frame::Bulk(Some(b)) => {
                push_bytes(&b);
            }
            Frame::Bulk(None) | Frame::Array(None) => ffi::lua_pushboolean(l, 0),
            Frame::Simple(s) => {
                push_bytes(&s);
                wrap(c"ok");
            }
            // The command's error was counted when it was replied.
            Frame::Error(e) => push_error_table(l, &e, true),
            Frame::Array(Some(items)) | Frame::Push(items) => {
                ffi::lua_createtable(l, items.len().min(i32::MAX as usize) as i32, 0);
                for (i, x) in items.into_iter().enumerate() {
                    if !push_frame(l, x) {
                        return false;
                    }
                    ffi::lua_rawseti(l, -2, i as ffi::lua_Integer + 1);
                }
            }
            Frame::Map(pairs) => {
                // Not presized: Redis's table grows one key at a time,
                // and a table rehashed on the way orders colliding keys
                // apart from one sized at once; a script that returns it
                // (or walks it with `pairs`) sees Redis's order only from
                // a table grown the same way.
                ffi::lua_createtable(l, 0, 0);
                for (k, v) in pairs {
                    if !push_frame(l, k) || !push_frame(l, v) {
                        return false;
                    }
                    ffi::lua_rawset(l, -3);
                }
                wrap(c"map");
            }
            Frame::Set(items) => {
                // Grown as Redis grows it (see the map's above).
                ffi::lua_createtable(l, 0, 0);
                for x in items {
                    if !push_frame(l, x) {
                        return false;
                    }
                    ffi::lua_pushboolean(l, 1);
                    ffi::lua_rawset(l, -3);
                }
                wrap(c"set");
            }
            Frame::Null | Frame::Attribute(_) => ffi::lua_pushnil(l),
            Frame::Boolean(b) => ffi::lua_pushboolean(l, b as i32),
            Frame::Double(d) => {
                ffi::lua_pushnumber(l, d);
                wrap(c"double");
            }
            Frame::BigNumber(n) => {
                push_bytes(&n);
                wrap(c"big_number");
            }
            Frame::Verbatim(fmt, s) => {
                ffi::lua_createtable(l, 0, 2);
                push_bytes(&s);
                ffi::lua_setfield(l, -2, c"string".as_ptr());
                push_bytes(&fmt);
                ffi::lua_setfield(l, -2, c"format".as_ptr());
                wrap(c"verbatim_string");
            }
        }
        true
    }
}

/// Pushes the error table `{ err = "CODE message" }` a script sees for an
/// error reply `line` (with or without its `-`), as luaPushErrorBuff
/// shapes it: the code kept (ERR when none), CR/LF trimmed.
///
/// # Safety
/// On a running state, with the memory limit lifted and room for 3 slots.
unsafe fn push_error_table(l: *mut mlua::ffi::lua_State, line: &[u8], counted: bool) {
    let line = line.strip_prefix(b"-").unwrap_or(line);
    let (code, msg): (&[u8], &[u8]) = match line.iter().position(|&c| c == b' ') {
        Some(sp) => (&line[..sp], &line[sp + 1..]),
        None => (b"ERR", line),
    };
    let start = msg.iter().position(|&c| c != b'\r' && c != b'\n').unwrap_or(msg.len());
    let end = msg.iter().rposition(|&c| c != b'\r' && c != b'\n').map_or(start, |e| e + 1);
    let mut text = code.to_vec();
    text.push(b' ');
    text.extend_from_slice(&msg[start..end.max(start)]);
    // SAFETY: plain Lua C API calls, as the caller guarantees.
    unsafe {
        mlua::ffi::lua_createtable(l, 0, 2);
        mlua::ffi::lua_pushlstring(l, text.as_ptr() as *const _, text.len());
        mlua::ffi::lua_setfield(l, -2, c"err".as_ptr());
        if counted {
            // Redis's marker (scripts see it): the error is in the error
            // stats already, the script's reply must not count it again.
            mlua::ffi::lua_pushboolean(l, 1);
            mlua::ffi::lua_setfield(l, -2, IGNORE_STATS.as_ptr());
        }
    }
}

/// The field of an error table that says its error was counted.
const IGNORE_STATS: &std::ffi::CStr = c"ignore_error_stats_update";

/// One script run's view of the engine: what `redis.call` needs.
pub struct Run<'a, 'l> {
    pub shared: &'a Shared,
    pub sess: &'l mut Session,
    pub keys: &'l mut Locks<'a>,
    /// `EVAL_RO`/`FCALL_RO`, or the script's `no-writes` flag.
    pub read_only: bool,
    /// `redis.setresp(3)` was called.
    pub resp3: bool,
    /// `redis.set_repl` flags (3: everywhere).
    pub repl: u8,
    /// A write command ran: the script can no longer start over.
    pub wrote: bool,
    /// The scope the script runs with (what it locked before starting).
    pub scope: Scope,
    /// Set when the script must start over with a wider scope.
    pub retry: Option<Scope>,
    /// What SCRIPT KILL and BUSY replies see of this run.
    pub running: Arc<Running>,
    /// The script (which learns the scope its runs need).
    pub script: Arc<Script>,
    /// The caller's database when the script started.
    pub start_db: usize,
    /// The keys the script declared: what a tracking client remembers
    /// when the script calls a read-only command.
    pub declared: &'l [&'l [u8]],
    /// The script itself is applied as written (a replay): its writes
    /// are not refused by a read-only replica.
    pub obeys: bool,
}

impl Run<'_, '_> {
    /// `redis.acl_check_cmd`: whether the script's user may run `argv`
    /// (the command, its keys and channels), as Redis's
    /// ACLCheckAllUserCommandPerm answers; `None` when no such command
    /// (or subcommand) exists. Arity is not checked, as Redis's
    /// lookupCommand does not.
    fn acl_check(&self, argv: &[&[u8]]) -> Option<bool> {
        let top = self.shared.table.find(argv[0])?;
        let spec = if !top.subcommands.is_empty() && argv.len() >= 2 {
            top.subcommands.iter().find(|s| argv[1].eq_ignore_ascii_case(s.name.as_bytes()))?
        } else {
            top
        };
        let id = crate::core::cmdstats::index_of(spec);
        Some(self.sess.user.check(&crate::subsystems::acl::Check::new(spec, id, argv)).is_ok())
    }

    /// `redis.call`/`redis.pcall`: runs one command into `buf`; `Err` is
    /// the error line (without its `-`) a script sees instead of a reply.
    fn command(&mut self, argv: &[&[u8]], buf: &mut ReplyBuf) -> Result<(), (Vec<u8>, bool)> {
        // The script's own errors (not counted; the script's reply may be).
        let fail = |text: &[u8]| -> Result<(), (Vec<u8>, bool)> { Err((text.to_vec(), false)) };
        // The command was refused: an error reply of the command's, counted
        // in the error stats now (Redis's scriptCall), not again in the
        // script's reply.
        let shared = self.shared;
        let refuse = |text: &[u8]| -> Result<(), (Vec<u8>, bool)> {
            shared.cmdstats.error(text);
            Err((text.to_vec(), true))
        };
        if self.retry.is_some() {
            return fail(b"ERR script restarted");
        }
        if argv.is_empty() {
            return fail(b"ERR Please specify at least one argument for this redis lib call");
        }
        let spec = match crate::core::door::lookup(shared, argv) {
            Ok(s) => s,
            Err(nf) => {
                // A known command's rejected call counts (Redis's
                // scriptCall), under the script's own words.
                if let Some(spec) = nf.spec {
                    self.sess.stats.rejected_calls += 1;
                    dispatch::count_rejected(shared, self.sess, spec);
                }
                return match nf.error {
                    CmdError::WrongArity(_) => {
                        refuse(b"ERR Wrong number of args calling Redis command from script")
                    }
                    _ => refuse(b"ERR Unknown Redis command called from script"),
                };
            }
        };
        let caller = Caller::Script {
            read_only: self.read_only,
            allow_oom: self.script.flags.allow_oom,
            dirty: self.wrote,
            obeys: self.obeys,
            cross_slot: !self.script.flags.shebang || self.script.flags.allow_cross_slot_keys,
        };
        buf.proto = if self.resp3 { Proto::Resp3 } else { Proto::Resp2 };
        let ops = self.sess.fx.ops_len();
        let mut scope = ScriptScope {
            scope: self.scope,
            start_db: self.start_db,
            wrote: &mut self.wrote,
            retry: &mut self.retry,
            script: &self.script,
            running: &self.running,
        };
        let hold = crate::core::door::Hold::Widen(&mut scope);
        match crate::core::door::run_with(
            shared, self.sess, self.keys, spec, argv, buf, caller, hold,
        ) {
            // Counted at the door: not again in the script's reply.
            crate::core::door::Ran::Refused(e) => return Err((e.text().into_owned(), true)),
            crate::core::door::Ran::Stopped(text) => return fail(&text),
            crate::core::door::Ran::Done
            | crate::core::door::Ran::Waiting
            | crate::core::door::Ran::Queued => {}
        }
        if self.sess.tracking.is_some() && spec.flags.has(Flags::READONLY) {
            self.shared.tracker.remember_keys(self.sess, self.declared.iter().copied());
        }
        if self.repl == 0 || super::rollback::active() {
            // redis.set_repl(redis.REPL_NONE), or a session whose writes
            // are undone.
            self.sess.fx.drop_ops_from(ops);
        } else if self.repl != 3 {
            // REPL_AOF (1) or REPL_REPLICA (2).
            self.sess.fx.target_ops_from(ops, self.repl == 1);
        }
        Ok(())
    }
}

/// What a script run locked before it started, and how a command outside
/// it widens that (the door's [`crate::core::door::Widen`]).
struct ScriptScope<'r> {
    scope: Scope,
    start_db: usize,
    wrote: &'r mut bool,
    retry: &'r mut Option<Scope>,
    script: &'r Arc<Script>,
    running: &'r Arc<Running>,
}

impl crate::core::door::Widen for ScriptScope<'_> {
    /// A command outside what the script locked before it started (keys
    /// it did not declare, another database) widens what later runs take
    /// up front; this run starts over if it has not written yet, and
    /// otherwise adds the stripes if that can be done safely.
    // Inlined (the door calls it statically): the usual case is a few
    // compares on every `redis.call`.
    #[inline]
    fn cover(&mut self, keys: &Locks, db: usize, need: Scope, ids: &[u32]) -> Result<(), Vec<u8>> {
        // The usual case first: keys of the script's database whose
        // stripes it holds already (a held stripe is one it locked, so it
        // is covered whatever the scope).
        if need == Scope::Keys && db == self.start_db && ids.iter().all(|&id| keys.holds(id)) {
            return Ok(());
        }
        self.widen(keys, db, need, ids)
    }

    #[inline]
    fn locked<'a>(
        &mut self,
        shared: &'a Shared,
        sess: &mut Session,
        keys: &mut Locks<'a>,
        spec: &'static CommandSpec,
        argv: &[&[u8]],
    ) -> Result<(), Vec<u8>> {
        if spec.flags.has(Flags::WRITE) {
            self.on_write(shared, sess, keys, spec, argv)
        } else {
            Ok(())
        }
    }
}

impl ScriptScope<'_> {
    /// [`Widen::cover`] past the usual case: a command outside what the
    /// script holds.
    #[cold]
    #[inline(never)]
    fn widen(&mut self, keys: &Locks, db: usize, need: Scope, ids: &[u32]) -> Result<(), Vec<u8>> {
        // The job namespace's stripe is above every database's: taking it
        // is always in order, so it never widens what the script locks.
        let jobs_id = keys.store().jobs_id();
        let stripes = keys.store().stripes() as u32;
        let other_db = db != self.start_db
            || ids.iter().any(|&id| id != jobs_id && (id / stripes) as usize != db);
        let covered = match need {
            _ if self.scope == Scope::All => true,
            _ if other_db => false,
            Scope::Keys => {
                self.scope == Scope::Db || ids.iter().all(|&id| id == jobs_id || keys.holds(id))
            }
            Scope::Db => self.scope == Scope::Db,
            Scope::All => false,
        };
        if !covered {
            let wider = if other_db || need == Scope::All { Scope::All } else { Scope::Db };
            self.script.widen(wider);
            if !*self.wrote {
                *self.retry = Some(wider);
                return Err(b"ERR script restarted".to_vec());
            }
        }
        Ok(())
    }

    /// [`Widen::locked`] for a write command.
    fn on_write<'a>(
        &mut self,
        shared: &'a Shared,
        sess: &mut Session,
        keys: &mut Locks<'a>,
        spec: &'static CommandSpec,
        argv: &[&[u8]],
    ) -> Result<(), Vec<u8>> {
        if super::rollback::active() {
            // SCRIPT DEBUG YES: what it may write is saved to be put back.
            super::rollback::save(shared, sess, keys, spec, argv).map_err(<[u8]>::to_vec)?;
        }
        *self.wrote = true;
        self.running.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

thread_local! {
    /// The reply buffer `redis.call` runs commands into.
    static SCRATCH: RefCell<Option<ReplyBuf>> = const { RefCell::new(None) };
}
