//! The Lua debugger (LDB): `SCRIPT DEBUG YES|SYNC|NO` and the debugging
//! session an `EVAL` of such a client runs, as Redis 7.0's eval.c does it
//! (the debugger's commands, replies and error texts are Redis's).
//!
//! A session talks to its client directly on the client's socket, from
//! inside the running script (the line hook), as Redis's does: the
//! engine owns no sockets, so the server's host opens (`Host::debugger`)
//! a blocking [`Channel`] over a client's connection. The `EVAL`'s own
//! reply goes out the ordinary way after `<endsession>`, and the
//! connection closes after it (the session's end, for redis-cli). As in
//! Redis, replies the client pipelined before the `EVAL` are not ordered
//! with the debugger's output (`SCRIPT DEBUG` itself refuses to run in a
//! pipeline).
//!
//! Both modes run the script on the client's thread while it holds every
//! database's stripes (so nothing restarts it half-way, and no other
//! client sees it half done). `SYNC` keeps what the script wrote, as
//! Redis's does. `YES` — a forked child in Redis, whose writes vanish
//! with it — undoes the script's writes when the session ends (see
//! [`Undo`]) and propagates nothing of them; unlike Redis's fork it does
//! hold the stripes meanwhile, so clients touching keys wait for it.

use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::sync::Arc;
use std::time::Instant;

use mlua::ffi;

use crate::core::session::ClientHandle;

/// A blocking byte channel to the debugging client.
pub trait Channel {
    /// Writes all of `b` (false: the client is gone or timed out).
    fn write_all(&mut self, b: &[u8]) -> bool;
    /// Reads what is there, waiting for at least one byte; 0 when the
    /// client closed (or is gone).
    fn read(&mut self, buf: &mut [u8]) -> usize;
}

/// A client's `SCRIPT DEBUG` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `YES`: the script's writes are undone when the session ends.
    Yes,
    /// `SYNC`: the writes stay.
    Sync,
}

/// Redis's `LDB_BREAKPOINTS_MAX`.
const BREAKPOINTS_MAX: usize = 64;
/// Redis's `LDB_MAX_LEN_DEFAULT`.
const MAXLEN_DEFAULT: usize = 256;
/// Redis's `LDB_MAX_VALUES_DEPTH` (`LUA_MINSTACK/2`).
const MAX_VALUES_DEPTH: u32 = 10;
/// The most a client may send without completing a command.
const MAX_CBUF: usize = 1 << 20;

/// One session's state (Redis's `struct ldbState`).
struct Ldb {
    chan: Box<dyn Channel>,
    logs: Vec<Vec<u8>>,
    bp: Vec<i32>,
    step: bool,
    luabp: bool,
    src: Vec<Vec<u8>>,
    currentline: i32,
    cbuf: Vec<u8>,
    maxlen: usize,
    maxlen_hint_sent: bool,
    /// When the script started, or last stopped (the timeout's start).
    started: Instant,
    /// `busy-reply-threshold`, or 5000 when it is 0.
    limit_ms: u64,
}

thread_local! {
    static ACTIVE: RefCell<Option<Ldb>> = const { RefCell::new(None) };
    /// A session is active and stepping (Redis's `ldbIsEnabled`): what
    /// `redis.call` checks before logging, without borrowing the state.
    static STEPPING: Cell<bool> = const { Cell::new(false) };
    /// A session is active on this thread.
    static LIVE: Cell<bool> = const { Cell::new(false) };
}

fn with<R>(f: impl FnOnce(&mut Ldb) -> R) -> Option<R> {
    ACTIVE.with(|a| {
        let mut a = a.try_borrow_mut().ok()?;
        let r = a.as_mut().map(f);
        if let Some(s) = a.as_ref() {
            STEPPING.with(|c| c.set(s.step));
        }
        r
    })
}

/// Whether a debugging session runs on this thread (the run installs the
/// debugger's hook instead of the count hook).
#[inline]
pub(crate) fn live() -> bool {
    LIVE.with(|l| l.get())
}

/// Whether `redis.call` and errors are logged now.
#[inline]
pub(crate) fn stepping() -> bool {
    STEPPING.with(|s| s.get())
}

impl Ldb {
    fn log(&mut self, entry: Vec<u8>) {
        self.logs.push(entry);
    }

    /// Redis's `ldbLogWithMaxLen`.
    fn log_max(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen > 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.log(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log(
                b"<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.".to_vec(),
            );
        }
    }

    /// Sends the logs as one array of status lines (CR and LF made
    /// spaces), and forgets them.
    fn send(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for l in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(l.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
            proto.extend_from_slice(b"\r\n");
        }
        // A failed write shows as a failed read next.
        let _ = self.chan.write_all(&proto);
    }

    fn source_line(&self, line: i32) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn is_breakpoint(&self, line: i32) -> bool {
        self.bp.contains(&line)
    }

    /// Redis's `ldbLogSourceLine`.
    fn log_source_line(&mut self, line: i32) {
        let prefix = match (self.currentline == line, self.is_breakpoint(line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut s = format!("{prefix}{line:<3} ").into_bytes();
        s.extend_from_slice(self.source_line(line));
        self.log(s);
    }

    /// Redis's `ldbList`: every line, or those within `context` of
    /// `around`.
    fn list(&mut self, around: i32, context: i32) {
        for j in 1..=self.src.len() as i32 {
            if around != 0 && (around as i64 - j as i64).abs() > context as i64 {
                continue;
            }
            self.log_source_line(j);
        }
    }

    /// Redis's `ldbBreak`.
    fn breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.bp.is_empty() {
                self.log(b"No breakpoints set. Use 'b <line>' to add one.".to_vec());
            } else {
                self.log(format!("{} breakpoints set:", self.bp.len()).into_bytes());
                for l in self.bp.clone() {
                    self.log_source_line(l);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = resp::parse_i64(arg) else {
                let mut m = b"Invalid argument:'".to_vec();
                m.extend_from_slice(arg);
                m.push(b'\'');
                self.log(m);
                continue;
            };
            if line == 0 {
                self.bp.clear();
                self.log(b"All breakpoints removed.".to_vec());
            } else if line > 0 {
                if self.bp.len() == BREAKPOINTS_MAX {
                    self.log(b"Too many breakpoints set.".to_vec());
                } else if line <= self.src.len() as i64 && !self.is_breakpoint(line as i32) {
                    self.bp.push(line as i32);
                    self.list(line as i32, 1);
                } else {
                    // Redis says this for a line already set too.
                    self.log(b"Wrong line number.".to_vec());
                }
            } else {
                let l = line.unsigned_abs();
                match self.bp.iter().position(|&b| b as u64 == l) {
                    Some(i) => {
                        self.bp.remove(i);
                        self.log(b"Breakpoint removed.".to_vec());
                    }
                    None => self.log(b"No breakpoint in the specified line.".to_vec()),
                }
            }
        }
    }

    /// Redis's `ldbMaxlen`.
    fn maxlen_cmd(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut v = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if v != 0 && v <= 60 {
                v = 60;
            }
            self.maxlen = v as usize;
        }
        if self.maxlen > 0 {
            self.log(
                format!("<value> replies are truncated at {} bytes.", self.maxlen).into_bytes(),
            );
        } else {
            self.log(b"<value> replies are unlimited.".to_vec());
        }
    }

    /// Redis's `ldbReplParseCommand`: a forgiving parser of one request
    /// in `cbuf`. `Ok(None)`: more input is needed.
    fn parse_command(&self) -> Result<Option<Vec<Vec<u8>>>, ()> {
        let b = &self.cbuf;
        if b.is_empty() {
            return Ok(None);
        }
        let find = |from: usize, pat: &[u8]| {
            b.get(from..)?.windows(pat.len()).position(|w| w == pat).map(|p| p + from)
        };
        let Some(star) = b.iter().position(|&c| c == b'*') else { return Err(()) };
        let Some(crlf) = find(star, b"\r\n") else { return Ok(None) };
        let argc = atoi(&b[star + 1..crlf]);
        if !(1..=1024).contains(&argc) {
            return Err(());
        }
        let mut p = crlf + 2;
        let mut argv = Vec::with_capacity(argc as usize);
        while argv.len() < argc as usize {
            // What C sees as the string's end (a NUL too).
            if p >= b.len() || b[p] == 0 {
                return Ok(None);
            }
            if b[p] != b'$' {
                return Err(());
            }
            let Some(crlf) = find(p, b"\r\n") else { return Ok(None) };
            let len = atoi(&b[p + 1..crlf]);
            if !(1..=1024).contains(&len) {
                return Err(());
            }
            let start = crlf + 2;
            let end = start + len as usize;
            if end + 2 > b.len() {
                return Ok(None);
            }
            argv.push(b[start..end].to_vec());
            if &b[end..end + 2] != b"\r\n" {
                return Err(());
            }
            p = end + 2;
        }
        Ok(Some(argv))
    }
}

/// C's `atoi`: leading blanks, a sign, digits; 0 when none.
fn atoi(b: &[u8]) -> i32 {
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut n: i64 = 0;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        n = (n * 10 + (d - b'0') as i64).min(1 << 40);
        i += 1;
    }
    let n = if neg { -n } else { n };
    n.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// A debugger command's name as C's `strcasecmp` sees it: up to a NUL.
fn is_cmd(arg: &[u8], names: &[&str]) -> bool {
    let arg = arg.split(|&c| c == 0).next().unwrap_or_default();
    names.iter().any(|n| arg.eq_ignore_ascii_case(n.as_bytes()))
}

/// Starts a session for `sess`'s EVAL of `body`: `Err` with the reply
/// when the client's connection cannot be talked to directly.
pub(crate) fn start(
    shared: &crate::Shared,
    handle: &Arc<ClientHandle>,
    mode: Mode,
    body: &[u8],
    limit_ms: u64,
) -> Result<(), crate::core::error::CmdError> {
    let chan = shared.host.debugger.and_then(|open| open(handle));
    let Some(chan) = chan else {
        return Err(crate::core::error::CmdError::err(
            "The Lua debugger needs a plain TCP or Unix socket connection",
        ));
    };
    match mode {
        Mode::Sync => {
            crate::subsystems::log::warning("Redis synchronous debugging eval session started")
        }
        Mode::Yes => crate::subsystems::log::warning(
            "Lua debugging session started (changes are rolled back)",
        ),
    }
    let mut end = body.len();
    while end > 0 && matches!(body[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    // sdssplitlen of an empty string has no lines.
    let src = if end == 0 {
        Vec::new()
    } else {
        body[..end].split(|&c| c == b'\n').map(|l| l.to_vec()).collect()
    };
    let ldb = Ldb {
        chan,
        logs: Vec::new(),
        bp: Vec::new(),
        step: true,
        luabp: false,
        src,
        currentline: 0,
        cbuf: Vec::new(),
        maxlen: MAXLEN_DEFAULT,
        maxlen_hint_sent: false,
        started: Instant::now(),
        limit_ms: if limit_ms > 0 { limit_ms } else { 5000 },
    };
    ACTIVE.with(|a| *a.borrow_mut() = Some(ldb));
    LIVE.with(|l| l.set(true));
    STEPPING.with(|s| s.set(true));
    Ok(())
}

/// Ends the session: the remaining logs and `<endsession>` go out.
pub(crate) fn end(mode: Mode) {
    let _ = with(|s| {
        s.log(b"<endsession>".to_vec());
        s.send();
    });
    ACTIVE.with(|a| *a.borrow_mut() = None);
    LIVE.with(|l| l.set(false));
    STEPPING.with(|s| s.set(false));
    match mode {
        Mode::Sync => {
            crate::subsystems::log::warning("Redis synchronous debugging eval session ended")
        }
        Mode::Yes => {
            crate::subsystems::log::warning("Lua debugging session ended (changes rolled back)")
        }
    }
}

/// `<redis> cmd args…` before a command runs (at most 10 arguments shown,
/// and Redis's count of the others).
pub(crate) fn log_command(argv: &[&[u8]]) {
    let _ = with(|s| {
        let mut l = b"<redis>".to_vec();
        for (j, a) in argv.iter().enumerate() {
            if j == 10 {
                l.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
                break;
            }
            l.push(b' ');
            l.extend_from_slice(a);
        }
        s.log(l);
    });
}

/// `<error> …`: an error a script is handed (Redis's luaPushErrorBuff).
pub(crate) fn log_error(text: &[u8]) {
    let _ = with(|s| {
        let mut l = b"<error> ".to_vec();
        l.extend_from_slice(text);
        s.log(l);
    });
}

/// `<reply> …`: a command's reply, readable.
pub(crate) fn log_reply(reply: &[u8]) {
    let _ = with(|s| {
        let mut l = b"<reply> ".to_vec();
        let mut p = 0;
        human(reply, &mut p, &mut l);
        s.log_max(l);
    });
}

/// Redis's `ldbRedisProtocolToHuman`: one reply at `*p`, appended to `o`.
fn human(r: &[u8], p: &mut usize, o: &mut Vec<u8>) {
    let line_end = |from: usize| -> usize {
        r[from..].iter().position(|&c| c == b'\r').map_or(r.len(), |e| e + from)
    };
    let Some(&t) = r.get(*p) else { return };
    let start = *p;
    let e = line_end(start);
    let head = &r[(start + 1).min(e)..e];
    let next = (e + 2).min(r.len());
    let count = || resp::parse_i64(head).unwrap_or(0);
    match t {
        b':' => {
            o.extend_from_slice(head);
            *p = next;
        }
        b'$' => {
            let n = count();
            if n < 0 {
                o.extend_from_slice(b"NULL");
                *p = next;
            } else {
                let end = (next + n as usize).min(r.len());
                crate::subsystems::monitor::repr(o, &r[next..end]);
                *p = (end + 2).min(r.len());
            }
        }
        b'+' | b'-' => {
            crate::subsystems::monitor::repr(o, &r[start..e]);
            *p = next;
        }
        b'*' | b'~' | b'%' => {
            let n = count();
            *p = next;
            if t == b'*' && n < 0 {
                o.extend_from_slice(b"NULL");
                return;
            }
            let (open, close): (&[u8], &[u8]) = match t {
                b'*' => (b"[", b"]"),
                b'~' => (b"~(", b")"),
                _ => (b"{", b"}"),
            };
            o.extend_from_slice(open);
            for j in 0..n.max(0) {
                if *p >= r.len() {
                    break;
                }
                human(r, p, o);
                if t == b'%' {
                    o.extend_from_slice(b" => ");
                    human(r, p, o);
                }
                if j != n - 1 {
                    o.push(b',');
                }
            }
            o.extend_from_slice(close);
        }
        b'_' => {
            o.extend_from_slice(b"(null)");
            *p = next;
        }
        b'#' => {
            o.extend_from_slice(if head.first() == Some(&b't') { b"#true" } else { b"#false" });
            *p = next;
        }
        b',' => {
            o.extend_from_slice(b"(double) ");
            o.extend_from_slice(head);
            *p = next;
        }
        _ => {
            // Types Redis's converter has no case for (big numbers,
            // verbatim strings, attributes) show as nothing; skipped whole.
            match resp::parse_frame(&r[start..]) {
                Ok(Some((_, used))) => *p = start + used,
                _ => *p = r.len(),
            }
        }
    }
}

/// `redis.debug(...)`: `<debug> line N: v1, v2…` while a session is
/// active (nothing otherwise).
///
/// # Safety
/// Called by Lua as a `lua_CFunction`.
pub(crate) unsafe extern "C-unwind" fn redis_debug(l: *mut ffi::lua_State) -> std::os::raw::c_int {
    if !live() {
        return 0;
    }
    let _u = super::vm::unlimited();
    // SAFETY: reads of the arguments on the running state; nothing raises
    // with the limit lifted.
    unsafe {
        let argc = ffi::lua_gettop(l);
        let line = with(|s| s.currentline).unwrap_or(0);
        let mut log = format!("<debug> line {line}: ").into_bytes();
        for i in 1..=argc {
            ffi::lua_pushvalue(l, i);
            cat_value(l, &mut log, 0);
            ffi::lua_pop(l, 1);
            if i != argc {
                log.extend_from_slice(b", ");
            }
        }
        let _ = with(|s| s.log(log));
    }
    0
}

/// `P.ldb_error(msg)`: the prelude's errors handed to a script, logged
/// as Redis's luaPushError logs them while stepping.
///
/// # Safety
/// Called by Lua as a `lua_CFunction`.
pub(crate) unsafe extern "C-unwind" fn lua_log_error(
    l: *mut ffi::lua_State,
) -> std::os::raw::c_int {
    if stepping() {
        // SAFETY: reads a string argument in place; nothing allocates.
        unsafe {
            if ffi::lua_type(l, 1) == ffi::LUA_TSTRING {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, 1, &mut len);
                log_error(std::slice::from_raw_parts(p as *const u8, len));
            }
        }
    }
    0
}

/// `redis.breakpoint()`: stops at the next line while a session is
/// active (true), false otherwise.
///
/// # Safety
/// Called by Lua as a `lua_CFunction`.
pub(crate) unsafe extern "C-unwind" fn redis_breakpoint(
    l: *mut ffi::lua_State,
) -> std::os::raw::c_int {
    let on = with(|s| s.luabp = true).is_some();
    // SAFETY: one push; the stack has room for a C function's result.
    unsafe { ffi::lua_pushboolean(l, on as i32) };
    1
}

/// Appends the value on top of the stack as Redis's
/// `ldbCatStackValueRec` shows it (the value stays).
///
/// # Safety
/// On a running state with the memory limit lifted.
unsafe fn cat_value(l: *mut ffi::lua_State, s: &mut Vec<u8>, level: u32) {
    if level == MAX_VALUES_DEPTH {
        s.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    // SAFETY (whole body): plain Lua C API calls, as the caller guarantees.
    unsafe {
        let t = ffi::lua_type(l, -1);
        match t {
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, -1, &mut len);
                crate::subsystems::monitor::repr(
                    s,
                    std::slice::from_raw_parts(p as *const u8, len),
                );
            }
            ffi::LUA_TBOOLEAN => {
                s.extend_from_slice(if ffi::lua_toboolean(l, -1) != 0 { b"true" } else { b"false" })
            }
            ffi::LUA_TNUMBER => {
                s.extend_from_slice(super::cjson::fmt_g(ffi::lua_tonumber(l, -1), 6).as_bytes())
            }
            ffi::LUA_TNIL => s.extend_from_slice(b"nil"),
            ffi::LUA_TTABLE => {
                if ffi::lua_checkstack(l, 4) == 0 {
                    return;
                }
                let mut expected = 1.0;
                let mut is_array = true;
                let (mut r1, mut r2) = (Vec::new(), Vec::new());
                ffi::lua_pushnil(l);
                while ffi::lua_next(l, -2) != 0 {
                    // Stack: table, key, value.
                    if is_array
                        && (ffi::lua_type(l, -2) != ffi::LUA_TNUMBER
                            || ffi::lua_tonumber(l, -2) != expected)
                    {
                        is_array = false;
                    }
                    cat_value(l, &mut r1, level + 1);
                    r1.extend_from_slice(b"; ");
                    r2.push(b'[');
                    ffi::lua_pushvalue(l, -2);
                    cat_value(l, &mut r2, level + 1);
                    ffi::lua_pop(l, 1);
                    r2.extend_from_slice(b"]=");
                    cat_value(l, &mut r2, level + 1);
                    r2.extend_from_slice(b"; ");
                    ffi::lua_pop(l, 1);
                    expected += 1.0;
                }
                r1.truncate(r1.len().saturating_sub(2));
                r2.truncate(r2.len().saturating_sub(2));
                s.push(b'{');
                s.extend_from_slice(if is_array { &r1 } else { &r2 });
                s.push(b'}');
            }
            _ => {
                let name = match t {
                    ffi::LUA_TFUNCTION => "function",
                    ffi::LUA_TUSERDATA => "userdata",
                    ffi::LUA_TTHREAD => "thread",
                    ffi::LUA_TLIGHTUSERDATA => "light-userdata",
                    _ => {
                        s.extend_from_slice(b"\"<unknown-lua-type>\"");
                        return;
                    }
                };
                let p = ffi::lua_topointer(l, -1);
                s.extend_from_slice(format!("\"{name}@{p:p}\"").as_bytes());
            }
        }
    }
}

/// Logs the value on top of the stack after `prefix` (trimmed to maxlen).
///
/// # Safety
/// As [`cat_value`].
unsafe fn log_value(l: *mut ffi::lua_State, prefix: &[u8]) {
    let mut s = prefix.to_vec();
    // SAFETY: as the caller guarantees.
    unsafe { cat_value(l, &mut s, 0) };
    let _ = with(|d| d.log_max(s));
}

fn short_src(ar: &ffi::lua_Debug) -> &[u8] {
    // SAFETY: `short_src` is a NUL-terminated buffer lua_getinfo filled.
    unsafe { CStr::from_ptr(ar.short_src.as_ptr()) }.to_bytes()
}

fn in_user_script(ar: &ffi::lua_Debug) -> bool {
    short_src(ar).windows(11).any(|w| w == b"user_script")
}

/// The debugger's line (and count) hook: stops where Redis's
/// `luaLdbLineHook` stops, and runs the debugger's REPL there.
///
/// # Safety
/// Installed with `lua_sethook` on the state a debugging session runs.
pub(crate) unsafe extern "C-unwind" fn line_hook(l: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    // SAFETY: `ar` is the hook's record; the work is in `hook_body`, whose
    // frames are gone (nothing with a destructor left) when this raises.
    let raise = unsafe { hook_body(l, &mut *ar) };
    if let Some(msg) = raise {
        let u = super::vm::unlimited();
        // SAFETY: a push with the limit lifted cannot raise.
        unsafe { ffi::lua_pushlstring(l, msg.as_ptr().cast(), msg.len()) };
        drop(msg);
        drop(u);
        // SAFETY: raising from a hook is allowed; nothing in this frame
        // needs dropping any more.
        unsafe { ffi::lua_error(l) };
    }
}

/// What the hook does; `Some` is the error to raise in the script.
///
/// # Safety
/// As [`line_hook`].
unsafe fn hook_body(l: *mut ffi::lua_State, ar: &mut ffi::lua_Debug) -> Option<Vec<u8>> {
    // SAFETY: debug API calls on the running state.
    unsafe {
        ffi::lua_getstack(l, 0, ar);
        ffi::lua_getinfo(l, c"Sl".as_ptr(), ar);
    }
    // Events outside the script are not interesting (Redis has no other
    // Lua code; here the prelude's functions do not move the line).
    if !in_user_script(ar) {
        return None;
    }
    let line = ar.currentline;
    let count_event = ar.event == ffi::LUA_HOOKCOUNT;
    let stop = with(|s| {
        s.currentline = line;
        let bp = s.is_breakpoint(line) || s.luabp;
        let mut timeout = false;
        if count_event && !s.step && !bp {
            if s.started.elapsed().as_millis() as u64 >= s.limit_ms {
                timeout = true;
                s.step = true;
            } else {
                return None;
            }
        }
        if !(s.step || bp) {
            return None;
        }
        let reason = if bp {
            if s.luabp {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        s.step = false;
        s.luabp = false;
        s.log(format!("* Stopped at {line}, stop reason = {reason}").into_bytes());
        s.log_source_line(line);
        s.send();
        Some(timeout)
    })
    .flatten()?;
    let timeout = stop;
    // SAFETY: as the caller guarantees.
    let r = unsafe { repl(l) };
    let _ = with(|s| s.started = Instant::now());
    match r {
        Repl::Continue => None,
        Repl::Closed if timeout => {
            Some(b"timeout during Lua debugging with client closing connection".to_vec())
        }
        Repl::Closed => None,
        Repl::Raise(m) => Some(m),
    }
}

enum Repl {
    Continue,
    Closed,
    Raise(Vec<u8>),
}

/// Reads and runs debugger commands until one resumes the script
/// (Redis's `ldbRepl`).
///
/// # Safety
/// From the hook, on the running state.
unsafe fn repl(l: *mut ffi::lua_State) -> Repl {
    loop {
        // The next complete command, reading as needed.
        let argv = loop {
            let got = with(|s| match s.parse_command() {
                Err(()) => Err(Repl::Raise(b"protocol error".to_vec())),
                Ok(Some(argv)) => Ok(Some(argv)),
                Ok(None) => {
                    let mut buf = [0u8; 1024];
                    let n = s.chan.read(&mut buf);
                    if n == 0 {
                        // The script goes on without stopping again.
                        s.step = false;
                        s.bp.clear();
                        return Err(Repl::Closed);
                    }
                    s.cbuf.extend_from_slice(&buf[..n]);
                    if s.cbuf.len() > MAX_CBUF {
                        s.cbuf = Vec::new();
                        return Err(Repl::Raise(b"max client buffer reached".to_vec()));
                    }
                    Ok(None)
                }
            });
            match got {
                None => return Repl::Closed,
                Some(Err(r)) => return r,
                Some(Ok(Some(argv))) => break argv,
                Some(Ok(None)) => {}
            }
        };
        let _ = with(|s| s.cbuf.clear());
        let a0 = &argv[0];
        if is_cmd(a0, &["h", "help"]) {
            let _ = with(|s| {
                for line in HELP {
                    s.log(line.as_bytes().to_vec());
                }
                s.send();
            });
        } else if is_cmd(a0, &["s", "step", "n", "next"]) {
            let _ = with(|s| s.step = true);
            return Repl::Continue;
        } else if is_cmd(a0, &["c", "continue"]) {
            return Repl::Continue;
        } else if is_cmd(a0, &["t", "trace"]) {
            // SAFETY: as the caller guarantees.
            unsafe { trace(l) };
            let _ = with(|s| s.send());
        } else if is_cmd(a0, &["m", "maxlen"]) {
            let _ = with(|s| {
                s.maxlen_cmd(&argv);
                s.send();
            });
        } else if is_cmd(a0, &["b", "break"]) {
            let _ = with(|s| {
                s.breakpoints(&argv);
                s.send();
            });
        } else if is_cmd(a0, &["e", "eval"]) {
            // SAFETY: as the caller guarantees.
            unsafe { eval(l, &argv) };
            let _ = with(|s| s.send());
        } else if is_cmd(a0, &["a", "abort"]) {
            return Repl::Raise(b"script aborted for user request".to_vec());
        } else if argv.len() > 1 && is_cmd(a0, &["r", "redis"]) {
            // SAFETY: as the caller guarantees.
            unsafe { redis(l, &argv) };
            let _ = with(|s| s.send());
        } else if is_cmd(a0, &["p", "print"]) {
            // SAFETY: as the caller guarantees.
            unsafe {
                if argv.len() == 2 {
                    print(l, &argv[1]);
                } else {
                    print_all(l);
                }
            }
            let _ = with(|s| s.send());
        } else if is_cmd(a0, &["l", "list"]) {
            let _ = with(|s| {
                let mut around = s.currentline;
                let mut ctx = 5;
                if argv.len() > 1 {
                    let n = atoi(&argv[1]);
                    if n > 0 {
                        around = n;
                    }
                }
                if argv.len() > 2 {
                    ctx = atoi(&argv[2]);
                }
                s.list(around, ctx);
                s.send();
            });
        } else if is_cmd(a0, &["w", "whole"]) {
            let _ = with(|s| {
                s.list(1, 1_000_000);
                s.send();
            });
        } else {
            let _ = with(|s| {
                s.log(
                    b"<error> Unknown Redis Lua debugger command or wrong number of arguments."
                        .to_vec(),
                );
                s.send();
            });
        }
    }
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

fn new_debug() -> ffi::lua_Debug {
    // SAFETY: lua_Debug is plain C data; all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Redis's `ldbTrace`.
///
/// # Safety
/// From the hook, on the running state.
unsafe fn trace(l: *mut ffi::lua_State) {
    let mut ar = new_debug();
    let mut level = 0;
    // SAFETY: debug API calls on the running state.
    while unsafe { ffi::lua_getstack(l, level, &mut ar) } != 0 {
        // SAFETY: as above.
        unsafe { ffi::lua_getinfo(l, c"Snl".as_ptr(), &mut ar) };
        if in_user_script(&ar) {
            let name = if ar.name.is_null() {
                "top level".to_string()
            } else {
                // SAFETY: a NUL-terminated name Lua gave.
                unsafe { CStr::from_ptr(ar.name) }.to_string_lossy().into_owned()
            };
            let line = ar.currentline;
            let _ = with(|s| {
                let first = if level == 0 { "In" } else { "From" };
                s.log(format!("{first} {name}:").into_bytes());
                s.log_source_line(line);
            });
        }
        level += 1;
    }
    if level == 0 {
        let _ = with(|s| s.log(b"<error> Can't retrieve Lua stack.".to_vec()));
    }
}

/// Redis's `ldbPrint`: the first local named `name` from the current
/// frame outwards, or the KEYS/ARGV globals.
///
/// # Safety
/// From the hook, on the running state.
unsafe fn print(l: *mut ffi::lua_State, name: &[u8]) {
    let _u = super::vm::unlimited();
    let name = name.split(|&c| c == 0).next().unwrap_or_default();
    let mut ar = new_debug();
    let mut level = 0;
    // SAFETY (whole body): debug API calls on the running state, the
    // limit lifted.
    unsafe {
        while ffi::lua_getstack(l, level, &mut ar) != 0 {
            level += 1;
            let mut i = 1;
            loop {
                let n = ffi::lua_getlocal(l, &ar, i);
                if n.is_null() {
                    break;
                }
                i += 1;
                if CStr::from_ptr(n).to_bytes() == name {
                    log_value(l, b"<value> ");
                    ffi::lua_pop(l, 1);
                    return;
                }
                ffi::lua_pop(l, 1);
            }
        }
        if name == b"ARGV" || name == b"KEYS" {
            let c = if name == b"ARGV" { c"ARGV" } else { c"KEYS" };
            ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, c.as_ptr());
            log_value(l, b"<value> ");
            ffi::lua_pop(l, 1);
        } else {
            let _ = with(|s| s.log(b"No such variable.".to_vec()));
        }
    }
}

/// Redis's `ldbPrintAll`: the current frame's locals.
///
/// # Safety
/// From the hook, on the running state.
unsafe fn print_all(l: *mut ffi::lua_State) {
    let _u = super::vm::unlimited();
    let mut ar = new_debug();
    let mut vars = 0;
    // SAFETY (whole body): debug API calls on the running state, the
    // limit lifted.
    unsafe {
        if ffi::lua_getstack(l, 0, &mut ar) != 0 {
            let mut i = 1;
            loop {
                let n = ffi::lua_getlocal(l, &ar, i);
                if n.is_null() {
                    break;
                }
                i += 1;
                let name = CStr::from_ptr(n).to_bytes();
                if !name.windows(12).any(|w| w == b"(*temporary)") {
                    let mut prefix = b"<value> ".to_vec();
                    prefix.extend_from_slice(name);
                    prefix.extend_from_slice(b" = ");
                    log_value(l, &prefix);
                    vars += 1;
                }
                ffi::lua_pop(l, 1);
            }
        }
    }
    if vars == 0 {
        let _ = with(|s| s.log(b"No local variables in the current context.".to_vec()));
    }
}

/// Redis's `ldbEval`: the arguments joined, run as an expression (or
/// else as a statement) in a frame of its own.
///
/// # Safety
/// From the hook, on the running state.
unsafe fn eval(l: *mut ffi::lua_State, argv: &[Vec<u8>]) {
    let u = super::vm::unlimited();
    let code = argv[1..].join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    // SAFETY (whole body): plain Lua C API calls; the code runs under
    // lua_pcall with the script's memory limit.
    unsafe {
        let load =
            |b: &[u8]| ffi::luaL_loadbuffer(l, b.as_ptr().cast(), b.len(), c"@ldb_eval".as_ptr());
        if load(&expr) != 0 {
            ffi::lua_pop(l, 1);
            if load(&code) != 0 {
                log_error_top(l);
                ffi::lua_pop(l, 1);
                return;
            }
        }
        if let Some(u) = &u {
            u.limit();
        }
        let status = ffi::lua_pcall(l, 0, 1, 0);
        if let Some(u) = &u {
            u.lift();
        }
        if status != 0 {
            log_error_top(l);
            ffi::lua_pop(l, 1);
            return;
        }
        log_value(l, b"<retval> ");
        ffi::lua_pop(l, 1);
    }
}

/// `<error> <the string on top>` (`(null)` for a non-string, as C's
/// printf of a NULL string).
///
/// # Safety
/// On the running state.
unsafe fn log_error_top(l: *mut ffi::lua_State) {
    let mut len = 0usize;
    // SAFETY: as the caller guarantees.
    let p = unsafe { ffi::lua_tolstring(l, -1, &mut len) };
    let mut m = b"<error> ".to_vec();
    if p.is_null() {
        m.extend_from_slice(b"(null)");
    } else {
        // SAFETY: a string of `len` bytes Lua holds on the stack.
        m.extend_from_slice(unsafe { std::slice::from_raw_parts(p as *const u8, len) });
    }
    let _ = with(|s| s.log(m));
}

/// Redis's `ldbRedis`: `redis.call` with the arguments, stepping on so
/// that the command and its reply are logged.
///
/// # Safety
/// From the hook, on the running state.
unsafe fn redis(l: *mut ffi::lua_State, argv: &[Vec<u8>]) {
    let u = super::vm::unlimited();
    // SAFETY (whole body): plain Lua C API calls; the call runs under
    // lua_pcall.
    unsafe {
        if ffi::lua_checkstack(l, argv.len() as i32 + 1) == 0 {
            // Redis logs the text as a reply, which its converter shows
            // as nothing.
            let _ = with(|s| s.log_max(b"<reply> ".to_vec()));
            return;
        }
        ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
        ffi::lua_getfield(l, -1, c"call".as_ptr());
        for a in &argv[1..] {
            ffi::lua_pushlstring(l, a.as_ptr().cast(), a.len());
        }
        let _ = with(|s| s.step = true);
        if let Some(u) = &u {
            u.limit();
        }
        ffi::lua_pcall(l, argv.len() as i32 - 1, 1, 0);
        if let Some(u) = &u {
            u.lift();
        }
        let _ = with(|s| s.step = false);
        ffi::lua_pop(l, 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_replies_read_like_redis() {
        let h = |r: &[u8]| {
            let mut o = Vec::new();
            human(r, &mut 0, &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(h(b"+OK\r\n"), "\"+OK\"");
        assert_eq!(h(b"-ERR x\r\n"), "\"-ERR x\"");
        assert_eq!(h(b":12\r\n"), "12");
        assert_eq!(h(b"$-1\r\n"), "NULL");
        assert_eq!(h(b"*2\r\n$1\r\na\r\n:1\r\n"), "[\"a\",1]");
        assert_eq!(h(b"%1\r\n$1\r\nk\r\n#t\r\n"), "{\"k\" => #true}");
        assert_eq!(h(b"~1\r\n,1.5\r\n"), "~((double) 1.5)");
        assert_eq!(h(b"_\r\n"), "(null)");
    }

    #[test]
    fn atoi_reads_like_c() {
        assert_eq!(atoi(b"12x"), 12);
        assert_eq!(atoi(b" -3"), -3);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b"99999999999"), i32::MAX);
    }
}
