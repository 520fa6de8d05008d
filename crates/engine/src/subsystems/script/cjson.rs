//! `cjson`, as Redis bundles it (lua-cjson 2.1): `cjson.encode`,
//! `cjson.decode`, `cjson.null`, `cjson.new` and the settings functions
//! (`encode_max_depth`, `decode_max_depth`, `encode_number_precision`,
//! `encode_sparse_array`, `encode_invalid_numbers`,
//! `decode_invalid_numbers`, `encode_keep_buffer`), with its number format,
//! escapes (`/` as `\/`), sparse-array rule and error texts. Each module
//! (the global one, and each `cjson.new()`) has its own settings; the
//! global module's are the server's (every thread's Lua state shares them,
//! as Redis's one state has them) until SCRIPT FLUSH.
//! Written for Sluice from lua-cjson's documented behaviour.

use std::sync::Arc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};
use parking_lot::Mutex;

/// One module's settings (lua-cjson's `json_config_t`), defaults as
/// Redis's build has them.
#[derive(Clone, Copy)]
pub(crate) struct Config {
    encode_max_depth: i64,
    decode_max_depth: i64,
    precision: i64,
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    /// 0 off, 1 on, 2 "null".
    encode_invalid: u8,
    decode_invalid: bool,
    keep_buffer: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_invalid: 0,
            decode_invalid: true,
            keep_buffer: true,
        }
    }
}

type Flagged = mlua::Result<MultiValue>;

/// The prelude's `raising` protocol: 0 and the values, or 2 and a message
/// that gets the caller's position (cjson, cmsgpack and struct all answer
/// through it).
pub(super) fn flagged(lua: &Lua, r: Result<Vec<Value>, String>) -> Flagged {
    Ok(match r {
        Ok(mut v) => {
            v.insert(0, Value::Integer(0));
            MultiValue::from_vec(v)
        }
        Err(m) => {
            MultiValue::from_vec(vec![Value::Integer(2), Value::String(lua.create_string(m)?)])
        }
    })
}

fn too_many(args: &MultiValue, n: usize, func: &str) -> Result<(), String> {
    if args.len() > n {
        return Err(format!("bad argument #{} to '{func}' (found too many arguments)", n + 1));
    }
    Ok(())
}

/// lua-cjson's `json_integer_option`: argument `i` (0-based), when given,
/// must be an integer in `min..=max` (the range error names argument #1,
/// as lua-cjson's does).
fn integer_option(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    func: &str,
    setting: &mut i64,
    min: i64,
    max: i64,
) -> Result<(), String> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(()),
        Some(v) => {
            let n = match v {
                Value::Integer(_) | Value::Number(_) | Value::String(_) => {
                    lua.coerce_number(v.clone()).ok().flatten()
                }
                _ => None,
            };
            let Some(n) = n else {
                return Err(format!(
                    "bad argument #{} to '{func}' (number expected, got {})",
                    i + 1,
                    type_name(v)
                ));
            };
            // luaL_checkinteger truncates (lua_Integer is ptrdiff_t).
            let n = n as i64;
            if n < min || n > max {
                return Err(format!(
                    "bad argument #1 to '{func}' (expected integer between {min} and {max})"
                ));
            }
            *setting = n;
            Ok(())
        }
    }
}

/// lua-cjson's `json_enum_option`: a boolean, or one of `options` by
/// name; the setting's index. `bool_true` is the index `true` stands for.
fn enum_option(
    args: &MultiValue,
    i: usize,
    func: &str,
    options: &[&str],
    setting: &mut u8,
) -> Result<(), String> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(()),
        Some(Value::Boolean(b)) => {
            *setting = *b as u8;
            Ok(())
        }
        Some(v) => {
            let name = match v {
                Value::String(s) => Some(s.as_bytes().to_vec()),
                Value::Integer(n) => Some(n.to_string().into_bytes()),
                Value::Number(n) => Some(fmt_14g(*n).into_bytes()),
                _ => None,
            };
            let Some(name) = name else {
                return Err(format!(
                    "bad argument #{} to '{func}' (string expected, got {})",
                    i + 1,
                    type_name(v)
                ));
            };
            match options.iter().position(|o| o.as_bytes() == name.as_slice()) {
                Some(k) => {
                    *setting = k as u8;
                    Ok(())
                }
                None => Err(format!(
                    "bad argument #{} to '{func}' (invalid option '{}')",
                    i + 1,
                    String::from_utf8_lossy(&name)
                )),
            }
        }
    }
}

/// What an enum setting reads back as: a boolean for off/on, else its name.
fn enum_value(lua: &Lua, options: &[&str], setting: u8) -> mlua::Result<Value> {
    Ok(match setting {
        0 | 1 => Value::Boolean(setting == 1),
        k => Value::String(lua.create_string(options[k as usize])?),
    })
}

const BOOL: &[&str] = &["off", "on"];
const INVALID: &[&str] = &["off", "on", "null"];

/// A `cjson` module with the settings `cfg`: its functions return the
/// prelude's `raising` flag first (the prelude wraps them), `new` makes
/// another module, with settings of its own.
pub(crate) fn library(lua: &Lua, cfg: Arc<Mutex<Config>>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return flagged(
                    lua,
                    Err("bad argument #1 to 'encode' (expected 1 argument)".into()),
                );
            }
            let mut out = Vec::new();
            let cfg = *c.lock();
            let r = encode(&args[0], &mut out, 0, &cfg).and_then(|()| {
                lua.create_string(&out).map(|s| vec![Value::String(s)]).map_err(|e| e.to_string())
            });
            flagged(lua, r)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return flagged(
                    lua,
                    Err("bad argument #1 to 'decode' (expected 1 argument)".into()),
                );
            }
            let text = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                v @ (Value::Integer(_) | Value::Number(_)) => {
                    lua.coerce_string(v.clone())?.map(|s| s.as_bytes().to_vec()).unwrap_or_default()
                }
                other => {
                    let msg = format!(
                        "bad argument #1 to 'decode' (string expected, got {})",
                        type_name(other)
                    );
                    return flagged(lua, Err(msg));
                }
            };
            let cfg = *c.lock();
            let r = Decoder {
                lua,
                s: &text,
                pos: 0,
                depth: 0,
                err_at: 0,
                max_depth: cfg.decode_max_depth,
                invalid_numbers: cfg.decode_invalid,
            }
            .document();
            flagged(lua, r.map(|v| vec![v]))
        })?,
    )?;
    // The integer settings: (name, field, min, max).
    type Field = fn(&mut Config) -> &mut i64;
    let ints: [(&'static str, Field, i64); 3] = [
        ("encode_max_depth", |c| &mut c.encode_max_depth, i32::MAX as i64),
        ("decode_max_depth", |c| &mut c.decode_max_depth, i32::MAX as i64),
        ("encode_number_precision", |c| &mut c.precision, 14),
    ];
    for (name, field, max) in ints {
        let c = cfg.clone();
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let mut cfg = c.lock();
                let r = too_many(&args, 1, name)
                    .and_then(|()| integer_option(lua, &args, 0, name, field(&mut cfg), 1, max));
                flagged(lua, r.map(|()| vec![Value::Integer(*field(&mut cfg))]))
            })?,
        )?;
    }
    // The enum settings: (name, options, read, write).
    type Get = fn(&Config) -> u8;
    type Set = fn(&mut Config, u8);
    let enums: [(&'static str, &'static [&'static str], Get, Set); 3] = [
        ("encode_invalid_numbers", INVALID, |c| c.encode_invalid, |c, v| c.encode_invalid = v),
        (
            "decode_invalid_numbers",
            BOOL,
            |c| c.decode_invalid as u8,
            |c, v| c.decode_invalid = v == 1,
        ),
        ("encode_keep_buffer", BOOL, |c| c.keep_buffer as u8, |c, v| c.keep_buffer = v == 1),
    ];
    for (name, options, get, set) in enums {
        let c = cfg.clone();
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let mut cfg = c.lock();
                let mut v = get(&cfg);
                let r = too_many(&args, 1, name)
                    .and_then(|()| enum_option(&args, 0, name, options, &mut v));
                set(&mut cfg, v);
                match r {
                    Ok(()) => flagged(lua, Ok(vec![enum_value(lua, options, v)?])),
                    Err(m) => flagged(lua, Err(m)),
                }
            })?,
        )?;
    }
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "encode_sparse_array";
            let mut cfg = c.lock();
            let mut convert = cfg.sparse_convert as u8;
            let r = too_many(&args, 3, name)
                .and_then(|()| enum_option(&args, 0, name, BOOL, &mut convert))
                .and_then(|()| {
                    integer_option(lua, &args, 1, name, &mut cfg.sparse_ratio, 0, i32::MAX as i64)
                })
                .and_then(|()| {
                    integer_option(lua, &args, 2, name, &mut cfg.sparse_safe, 0, i32::MAX as i64)
                });
            cfg.sparse_convert = convert == 1;
            let values = vec![
                Value::Boolean(cfg.sparse_convert),
                Value::Integer(cfg.sparse_ratio),
                Value::Integer(cfg.sparse_safe),
            ];
            flagged(lua, r.map(|()| values))
        })?,
    )?;
    t.raw_set(
        "new",
        lua.create_function(|lua, ()| library(lua, Arc::new(Mutex::new(Config::default()))))?,
    )?;
    t.raw_set("null", Value::LightUserData(LightUserData(std::ptr::null_mut())))?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// The names of a module's functions that the prelude wraps.
pub const FUNCTIONS: &[&str] = &[
    "encode",
    "decode",
    "encode_max_depth",
    "decode_max_depth",
    "encode_number_precision",
    "encode_invalid_numbers",
    "decode_invalid_numbers",
    "encode_keep_buffer",
    "encode_sparse_array",
];

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `%.14g`, as lua-cjson prints numbers by default.
pub fn fmt_14g(n: f64) -> String {
    fmt_g(n, 14)
}

/// `%.<precision>g` (precision 1 to 14).
pub(crate) fn fmt_g(n: f64, precision: i64) -> String {
    let mut buf = [0u8; 64];
    let p = precision.clamp(1, 14) as std::os::raw::c_int;
    // SAFETY: the buffer is 64 bytes and snprintf writes at most that.
    let len = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.*g".as_ptr(), p, n) };
    String::from_utf8_lossy(&buf[..(len.max(0) as usize).min(63)]).into_owned()
}

/// lua-cjson's `json_append_number`, with its invalid-numbers setting.
fn number(n: f64, out: &mut Vec<u8>, cfg: &Config) -> Result<(), String> {
    if n.is_nan() || n.is_infinite() {
        match cfg.encode_invalid {
            0 => return Err("Cannot serialise number: must not be NaN or Inf".into()),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            1 => {}
            _ => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
        }
    }
    out.extend_from_slice(fmt_g(n, cfg.precision).as_bytes());
    Ok(())
}

fn string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

fn encode(v: &Value, out: &mut Vec<u8>, depth: i64, cfg: &Config) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => number(*i as f64, out, cfg)?,
        Value::Number(n) => number(*n, out, cfg)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            // An array when every key is a positive integer.
            let mut max = 0usize;
            let mut items = 0usize;
            let mut array = true;
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, _) = pair.map_err(|e| e.to_string())?;
                match as_number(&k) {
                    Some(n) if n >= 1.0 && n.floor() == n => {
                        max = max.max(n as usize);
                        items += 1;
                    }
                    _ => {
                        array = false;
                        break;
                    }
                }
            }
            // Excessively sparse: an error, or an object when converting.
            if array
                && cfg.sparse_ratio > 0
                && max as i64 > cfg.sparse_safe
                && max as u128 > items as u128 * cfg.sparse_ratio as u128
            {
                if !cfg.sparse_convert {
                    return Err("Cannot serialise table: excessively sparse array".into());
                }
                array = false;
            }
            if array && max > 0 {
                out.push(b'[');
                for i in 1..=max {
                    if i > 1 {
                        out.push(b',');
                    }
                    let v: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                    encode(&v, out, depth, cfg)?;
                }
                out.push(b']');
            } else {
                out.push(b'{');
                let mut first = true;
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair.map_err(|e| e.to_string())?;
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => string(&s.as_bytes(), out),
                        k if as_number(k).is_some() => {
                            out.push(b'"');
                            number(as_number(k).unwrap_or_default(), out, cfg)?;
                            out.push(b'"');
                        }
                        other => {
                            return Err(format!(
                                "Cannot serialise {}: table key must be a number or string",
                                type_name(other)
                            ))
                        }
                    }
                    out.push(b':');
                    encode(&v, out, depth, cfg)?;
                }
                out.push(b'}');
            }
        }
        other => return Err(format!("Cannot serialise {}: type not supported", type_name(other))),
    }
    Ok(())
}

/// lua-cjson's `json_is_invalid_number`: what strtod reads but JSON does
/// not allow (a leading `+`, hex, leading zeros, `Inf`, `NaN`).
fn invalid_number(s: &[u8]) -> bool {
    let mut p = s;
    if p.first() == Some(&b'+') {
        return true;
    }
    if p.first() == Some(&b'-') {
        p = &p[1..];
    }
    match p.first() {
        Some(b'0') => matches!(p.get(1), Some(b'x' | b'X' | b'0'..=b'9')),
        Some(c) if *c <= b'9' => false,
        None => false,
        _ => {
            let word = |w: &[u8]| p.len() >= 3 && p[..3].eq_ignore_ascii_case(w);
            word(b"inf") || word(b"nan")
        }
    }
}

#[derive(Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

struct Decoder<'l, 's> {
    lua: &'l Lua,
    s: &'s [u8],
    pos: usize,
    depth: i64,
    /// Where a string's error was found (0-based).
    err_at: usize,
    /// The module's `decode_max_depth` and `decode_invalid_numbers`.
    max_depth: i64,
    invalid_numbers: bool,
}

impl Decoder<'_, '_> {
    /// The next token and the 1-based character where it starts.
    fn next(&mut self) -> (Tok, usize) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let at = self.pos + 1;
        let Some(&c) = self.s.get(self.pos) else { return (Tok::End, at) };
        let single = |t: Tok, d: &mut Self| {
            d.pos += 1;
            (t, at)
        };
        match c {
            b'{' => single(Tok::ObjBegin, self),
            b'}' => single(Tok::ObjEnd, self),
            b'[' => single(Tok::ArrBegin, self),
            b']' => single(Tok::ArrEnd, self),
            b':' => single(Tok::Colon, self),
            b',' => single(Tok::Comma, self),
            b'"' => match self.string() {
                // String errors are reported where they were found.
                Tok::Error(m) => (Tok::Error(m), self.err_at + 1),
                t => (t, at),
            },
            b'-' | b'0'..=b'9' => {
                if !self.invalid_numbers && invalid_number(&self.s[self.pos..]) {
                    return (Tok::Error("invalid number"), at);
                }
                self.number(at)
            }
            _ => {
                for (word, tok) in [
                    (&b"true"[..], Tok::Bool(true)),
                    (b"false", Tok::Bool(false)),
                    (b"null", Tok::Null),
                ] {
                    if self.s[self.pos..].starts_with(word) {
                        self.pos += word.len();
                        return (tok, at);
                    }
                }
                // With decode_invalid_numbers, what only strtod reads
                // (`+1`, `Inf`, `NaN`) is a number.
                if self.invalid_numbers && invalid_number(&self.s[self.pos..]) {
                    return self.number(at);
                }
                (Tok::Error("invalid token"), at)
            }
        }
    }

    /// A number as lua-cjson reads one: C's `strtod` from here.
    fn number(&mut self, at: usize) -> (Tok, usize) {
        let rest = &self.s[self.pos..];
        // What strtod may read is within this run (digits, signs, the
        // point, exponents, hex, "infinity", "nan(...)"): copied alone so
        // that a long document is not copied per number.
        let len = rest
            .iter()
            .position(|&c| !(c.is_ascii_alphanumeric() || b"+-._()".contains(&c)))
            .unwrap_or(rest.len());
        let Ok(c) = std::ffi::CString::new(&rest[..len]) else {
            return (Tok::Error("invalid number"), at);
        };
        let mut end: *mut std::os::raw::c_char = std::ptr::null_mut();
        // SAFETY: `c` is NUL-terminated; strtod reads within it and sets
        // `end` inside it.
        let n = unsafe { libc::strtod(c.as_ptr(), &mut end) };
        // SAFETY: `end` points into `c` (at or after its start).
        let used = unsafe { end.offset_from(c.as_ptr()) } as usize;
        if used == 0 {
            return (Tok::Error("invalid number"), at);
        }
        self.pos += used;
        (Tok::Num(n), at)
    }

    fn string(&mut self) -> Tok {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                self.err_at = self.pos;
                return Tok::Error("unexpected end of string");
            };
            self.pos += 1;
            match c {
                b'"' => return Tok::Str(out),
                b'\\' => {
                    self.err_at = self.pos - 1;
                    let Some(&e) = self.s.get(self.pos) else {
                        return Tok::Error("invalid escape code");
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => match self.unicode() {
                            Some(ch) => {
                                let mut b = [0u8; 4];
                                out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                            }
                            None => return Tok::Error("invalid unicode escape code"),
                        },
                        _ => return Tok::Error("invalid escape code"),
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn unicode(&mut self) -> Option<char> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) {
            if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                return None;
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            return char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
        }
        char::from_u32(hi)
    }

    fn expected(what: &str, t: &Tok, at: usize) -> String {
        format!("Expected {what} but found {} at character {at}", t.name())
    }

    fn document(&mut self) -> Result<Value, String> {
        let (t, at) = self.next();
        let v = self.value(t, at)?;
        let (t, at) = self.next();
        if !matches!(t, Tok::End) {
            return Err(Self::expected("the end", &t, at));
        }
        Ok(v)
    }

    fn nest(&mut self, at: usize) -> Result<(), String> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(format!(
                "Found too many nested data structures ({}) at character {at}",
                self.depth
            ));
        }
        Ok(())
    }

    fn value(&mut self, t: Tok, at: usize) -> Result<Value, String> {
        let lua = self.lua;
        let e = |e: mlua::Error| e.to_string();
        Ok(match t {
            Tok::Str(s) => Value::String(lua.create_string(&s).map_err(e)?),
            Tok::Num(n) => Value::Number(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
            Tok::ObjBegin => {
                self.nest(at)?;
                let table = lua.create_table().map_err(e)?;
                let (mut t, mut at) = self.next();
                if !matches!(t, Tok::ObjEnd) {
                    loop {
                        let Tok::Str(key) = t else {
                            return Err(Self::expected("object key string", &t, at));
                        };
                        let (c, cat) = self.next();
                        if !matches!(c, Tok::Colon) {
                            return Err(Self::expected("colon", &c, cat));
                        }
                        let (vt, vat) = self.next();
                        let v = self.value(vt, vat)?;
                        table.raw_set(lua.create_string(&key).map_err(e)?, v).map_err(e)?;
                        let (n, nat) = self.next();
                        match n {
                            Tok::ObjEnd => break,
                            Tok::Comma => {}
                            other => {
                                return Err(Self::expected("comma or object end", &other, nat))
                            }
                        }
                        (t, at) = self.next();
                    }
                }
                self.depth -= 1;
                Value::Table(table)
            }
            Tok::ArrBegin => {
                self.nest(at)?;
                let table = lua.create_table().map_err(e)?;
                let (mut t, mut at) = self.next();
                if !matches!(t, Tok::ArrEnd) {
                    let mut i = 1;
                    loop {
                        let v = self.value(t, at)?;
                        table.raw_set(i, v).map_err(e)?;
                        i += 1;
                        let (n, nat) = self.next();
                        match n {
                            Tok::ArrEnd => break,
                            Tok::Comma => {}
                            other => return Err(Self::expected("comma or array end", &other, nat)),
                        }
                        (t, at) = self.next();
                    }
                }
                self.depth -= 1;
                Value::Table(table)
            }
            other => return Err(Self::expected("value", &other, at)),
        })
    }
}
