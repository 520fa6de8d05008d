//! Redis Functions' registry and runs: the libraries and their functions,
//! what `FUNCTION LOAD | RESTORE | DELETE | FLUSH` change in it, and an
//! `FCALL`'s run. The commands themselves are declared with the other
//! families (`commands/function.rs`).
//!
//! A library is its code (with a `#!lua name=<lib>` line) and the functions
//! its code registers with `redis.register_function`. The registry is
//! shared; each thread's Lua state runs a library's code the first time it
//! calls one of its functions (the code can only register functions, so
//! running it again is harmless), and a version number tells it to reload
//! after `FUNCTION LOAD REPLACE`. A call runs like an EVAL script (same
//! locking, effects, BUSY and kill), its errors naming the function.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use resp::ReplyBuf;

use super::{vm, Script, ScriptFlags, Target};
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::Shared;

/// A registered function, as FUNCTION LIST shows it.
#[derive(Clone, Debug)]
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Vec<u8>>,
    pub flags: ScriptFlags,
}

/// One library.
pub struct Library {
    pub name: String,
    pub code: Box<[u8]>,
    pub version: u64,
    pub functions: Vec<FunctionInfo>,
    /// Per function (same order): what a run of it needs (its flags, the
    /// code, and the scope its runs learned).
    units: Vec<Arc<Script>>,
}

/// Every library, and which library each function name belongs to.
#[derive(Default)]
pub struct Libraries {
    libs: BTreeMap<String, Arc<Library>>,
    /// Function name, lower-cased (FCALL finds it whatever its case, and
    /// two libraries cannot register names that differ only in case) →
    /// library name.
    functions: BTreeMap<String, String>,
    next_version: u64,
}

/// Parses `#!lua name=<lib>`: the library name and the line's length.
fn parse_metadata(code: &[u8]) -> Result<(String, usize), CmdError> {
    if !code.starts_with(b"#!") {
        return Err(CmdError::err("Missing library metadata"));
    }
    // Redis needs the line's end (`Invalid library metadata` without it).
    let end = code
        .iter()
        .position(|&c| c == b'\n')
        .ok_or_else(|| CmdError::err("Invalid library metadata"))?;
    let parts = resp::split_args(&code[..end])
        .filter(|p| !p.is_empty())
        .ok_or_else(|| CmdError::err("Invalid library metadata"))?;
    let engine = &parts[0][2..];
    if !engine.eq_ignore_ascii_case(b"lua") {
        let mut v = b"ERR Engine '".to_vec();
        v.extend_from_slice(engine);
        v.extend_from_slice(b"' not found");
        return Err(CmdError::Bytes(v));
    }
    let mut name = None;
    for p in &parts[1..] {
        match p.strip_prefix(b"name=") {
            Some(_) if name.is_some() => {
                return Err(CmdError::err(
                    "Invalid metadata value, name argument was given multiple times",
                ))
            }
            Some(n) => name = Some(n.to_vec()),
            None => {
                let mut v = b"ERR Invalid metadata value given: ".to_vec();
                v.extend_from_slice(p);
                return Err(CmdError::Bytes(v));
            }
        }
    }
    let name = name.ok_or_else(|| CmdError::err("Library name was not given"))?;
    if name.is_empty() || !name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') {
        return Err(CmdError::err(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    Ok((String::from_utf8(name).expect("checked ASCII"), end))
}

/// A library checked and run once: its name and functions.
struct Compiled {
    name: String,
    code: Box<[u8]>,
    shebang_len: usize,
    functions: Vec<FunctionInfo>,
}

/// Checks a library's metadata and runs its code in this thread's Lua
/// state. `exists` says whether its name is taken (checked before the
/// code runs, as Redis does).
fn compile(
    shared: &Shared,
    code: &[u8],
    exists: impl Fn(&str) -> bool,
) -> Result<Compiled, CmdError> {
    let (name, shebang_len) = parse_metadata(code)?;
    if exists(&name) {
        return Err(CmdError::err(format!("Library '{name}' already exists")));
    }
    let functions = vm::with_vm(shared, |vm| vm.load_library(code, shebang_len, None))
        .map_err(|e| CmdError::Bytes(e.into_bytes()))?;
    Ok(Compiled { name, code: code.into(), shebang_len, functions })
}

/// Adds libraries to the registry, all or none: a library whose name is
/// taken replaces the old one only with `replace`; a function name taken
/// by another library is an error.
fn install(reg: &mut Libraries, libs: Vec<Compiled>, replace: bool) -> CmdResult {
    for lib in &libs {
        if !replace && reg.libs.contains_key(&lib.name) {
            // (Unquoted, as Redis 7.0 words it when restoring.)
            return Err(CmdError::err(format!("Library {} already exists", lib.name)));
        }
        for f in &lib.functions {
            let owner = reg.functions.get(&f.name.to_ascii_lowercase());
            let other_new = libs.iter().any(|l| {
                l.name != lib.name
                    && l.functions.iter().any(|g| g.name.eq_ignore_ascii_case(&f.name))
            });
            if owner.is_some_and(|o| *o != lib.name && !libs.iter().any(|l| l.name == *o))
                || other_new
            {
                return Err(CmdError::err(format!("Function {} already exists", f.name)));
            }
        }
    }
    for lib in libs {
        if let Some(old) = reg.libs.remove(&lib.name) {
            for f in &old.functions {
                reg.functions.remove(&f.name.to_ascii_lowercase());
            }
        }
        reg.next_version += 1;
        let units = lib
            .functions
            .iter()
            .map(|f| {
                Arc::new(Script {
                    body: lib.code.clone(),
                    shebang_len: lib.shebang_len,
                    flags: f.flags,
                    scope: AtomicU8::new(0),
                })
            })
            .collect();
        for f in &lib.functions {
            reg.functions.insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        let l = Library {
            name: lib.name.clone(),
            code: lib.code,
            version: reg.next_version,
            functions: lib.functions,
            units,
        };
        reg.libs.insert(lib.name, Arc::new(l));
    }
    Ok(())
}

/// FUNCTION LOAD: compiles `code` and adds its library (replacing one of
/// the same name with `replace`); its name.
pub(crate) fn load_library(
    shared: &Shared,
    code: &[u8],
    replace: bool,
) -> Result<String, CmdError> {
    let lib = compile(shared, code, |name| {
        !replace && shared.scripts.functions.read().libs.contains_key(name)
    })?;
    let name = lib.name.clone();
    install(&mut shared.scripts.functions.write(), vec![lib], replace)?;
    Ok(name)
}

/// What FUNCTION RESTORE does with the libraries already there.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Keep them; a name taken is an error.
    Append,
    /// A restored library replaces one of the same name.
    Replace,
    /// Delete them all first.
    Flush,
}

/// FUNCTION RESTORE: compiles every library of a payload, then installs
/// them all or none as `policy` says.
pub(crate) fn restore_libraries(shared: &Shared, codes: &[Vec<u8>], policy: Policy) -> CmdResult {
    let mut libs = Vec::new();
    for code in codes {
        let lib = compile(shared, code, |_| false)?;
        if libs.iter().any(|l: &Compiled| l.name == lib.name) {
            return Err(CmdError::err(format!("Library '{}' already exists", lib.name)));
        }
        libs.push(lib);
    }
    let mut reg = shared.scripts.functions.write();
    if policy == Policy::Flush {
        reg.libs.clear();
        reg.functions.clear();
    }
    install(&mut reg, libs, policy != Policy::Append)
}

/// FUNCTION DELETE: removes library `name` and its functions.
pub(crate) fn delete_library(shared: &Shared, name: &str) -> CmdResult {
    let mut reg = shared.scripts.functions.write();
    let Some(lib) = reg.libs.remove(name) else {
        return Err(CmdError::err("Library not found"));
    };
    for f in &lib.functions {
        reg.functions.remove(&f.name.to_ascii_lowercase());
    }
    Ok(())
}

/// The libraries, by name, as FUNCTION LIST shows them.
pub(crate) fn libraries(shared: &Shared) -> Vec<Arc<Library>> {
    shared.scripts.functions.read().libs.values().cloned().collect()
}

/// How many libraries and functions there are (FUNCTION STATS).
pub(crate) fn counts(shared: &Shared) -> (usize, usize) {
    let reg = shared.scripts.functions.read();
    (reg.libs.len(), reg.functions.len())
}

// ---- Snapshots and FUNCTION DUMP / RESTORE --------------------------------
// The encoding (RDB strings, LZF, version and CRC64) is the persistence
// codec's, reached through `Host::snapshots`.

/// The libraries' codes, as a snapshot saves them (`rdbSaveFunctions`).
/// Call it at the snapshot's instant: the writing subcommands hold every
/// stripe, so the registry cannot change then.
pub fn library_codes(shared: &Shared) -> Vec<Box<[u8]>> {
    shared.scripts.functions.read().libs.values().map(|l| l.code.clone()).collect()
}

/// Loads libraries read from an RDB file, one after the other as Redis's
/// `rdbFunctionLoad` does; `replace` lets a library replace one of the
/// same name (DEBUG RELOAD MERGE), else that is an error. The error is
/// Redis's text (`Library 'x' already exists`, `Error compiling function:
/// …`), without `ERR `.
pub fn load_libraries(shared: &Shared, codes: &[Vec<u8>], replace: bool) -> Result<(), String> {
    let text = |e: CmdError| {
        let t = e.text();
        String::from_utf8_lossy(t.strip_prefix(b"ERR ").unwrap_or(&t)).into_owned()
    };
    for code in codes {
        let lib = compile(shared, code, |name| {
            !replace && shared.scripts.functions.read().libs.contains_key(name)
        })
        .map_err(text)?;
        let mut reg = shared.scripts.functions.write();
        install(&mut reg, vec![lib], replace).map_err(text)?;
    }
    Ok(())
}

/// Empties the registry (DEBUG RELOAD, before loading: Redis's emptyData
/// drops the functions too).
pub fn clear_libraries(shared: &Shared) {
    let mut reg = shared.scripts.functions.write();
    reg.libs.clear();
    reg.functions.clear();
}

/// The flags of function `name`, when it exists (every function declares
/// its flags).
pub(crate) fn flags_of(shared: &crate::core::shared::Shared, name: &[u8]) -> Option<ScriptFlags> {
    let name = std::str::from_utf8(name).ok()?;
    let reg = shared.scripts.functions.read();
    let lib = reg.functions.get(name).and_then(|l| reg.libs.get(l))?;
    let i = lib.functions.iter().position(|f| f.name == name)?;
    let mut flags = lib.units[i].flags;
    flags.shebang = true;
    Some(flags)
}

/// FCALL and FCALL_RO (`ro`): finds the function, checks its flags and
/// runs it as an EVAL script runs.
pub(crate) fn fcall(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, ro: bool) -> CmdResult {
    let argv = args.argv();
    let name = String::from_utf8_lossy(argv[1]).into_owned();
    // Redis's order: the function, then numkeys.
    let (lib, unit, name) = {
        let reg = cx.shared.scripts.functions.read();
        // Function names are found whatever their case (Redis's functions
        // dict compares them so).
        let key = name.to_ascii_lowercase();
        let Some(lib) = reg.functions.get(&key).and_then(|l| reg.libs.get(l)).cloned() else {
            return Err(CmdError::err("Function not found"));
        };
        let i = lib
            .functions
            .iter()
            .position(|f| f.name.eq_ignore_ascii_case(&name))
            .expect("registered");
        let unit = lib.units[i].clone();
        // From here on the function goes by its registered name.
        let name = lib.functions[i].name.clone();
        (lib, unit, name)
    };
    let numkeys =
        resp::parse_i64(argv[2]).ok_or_else(|| CmdError::err("Bad number of keys provided"))?;
    if numkeys > (argv.len() - 3) as i64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    } else if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    super::check_flags(cx, unit.flags, ro)?;
    let keys = &argv[3..3 + numkeys as usize];
    let fargs = &argv[3 + numkeys as usize..];
    let shared = cx.shared;
    let scope = unit.scope();
    if scope > crate::core::dispatch::Scope::Keys {
        super::relock(cx, keys, scope)?;
    }
    let threshold = cx.sess.conf(shared).busy_reply_threshold.max(0) as u64;
    // What FUNCTION STATS shows of it if it gets busy (Redis's reply:
    // its name and the whole command as the client sent it).
    let mut stats = Vec::with_capacity(64 + argv.iter().map(|a| a.len() + 16).sum::<usize>());
    let mut n = resp::IntBuf::new();
    let mut bulk = |v: &mut Vec<u8>, b: &[u8]| {
        v.push(b'$');
        v.extend_from_slice(n.format(b.len() as i64));
        v.extend_from_slice(b"\r\n");
        v.extend_from_slice(b);
        v.extend_from_slice(b"\r\n");
    };
    bulk(&mut stats, b"name");
    bulk(&mut stats, name.as_bytes());
    bulk(&mut stats, b"command");
    stats.extend_from_slice(resp::IntBuf::new().line(b'*', argv.len() as i64));
    for a in argv {
        bulk(&mut stats, a);
    }
    let running = shared.scripts.start_with(threshold, true, stats, name.as_bytes());
    let target = Target::Function { lib: &lib.name, version: lib.version, name: &name };
    let r = super::run_loop(cx, out, &target, &unit, keys, fargs, ro, scope, &running);
    shared.scripts.finish(shared, &running);
    if running.busy.load(std::sync::atomic::Ordering::Relaxed) {
        crate::core::multi::unwatch_deferred(shared, cx.keys);
    }
    r
}
