//! `cmsgpack`, as Redis bundles it (lua-cmsgpack 0.4.0): `pack(...)`,
//! `unpack(s)`, `unpack_one(s [, offset])`, `unpack_limit(s, limit [,
//! offset])`, with its encodings (integers in the smallest form, floats
//! as float32 when exact, tables as arrays when their keys are 1..n, nesting
//! cut to nil at depth 16), its decoding of MessagePack's older raw types
//! and its error texts. Job systems built on Redis (BullMQ among them) pass
//! their arguments through it. Written for Sluice from that behaviour.

use mlua::{Lua, MultiValue, Table, Value};

const MAX_NESTING: usize = 16;
/// 2^63: integers from -2^63 up to (not including) this are packed as such.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;
/// Lua's C stack limit (LUAI_MAXCSTACK): values decoded at once, and depth.
const MAX_STACK: usize = 8000;
const TOO_MANY: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";

/// The `cmsgpack` functions, each returning the prelude's `raising` flag
/// first (2: an error message that gets the caller's position).
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let flagged = super::cjson::flagged;
    t.raw_set(
        "pack",
        lua.create_function(move |lua, args: MultiValue| {
            if args.is_empty() {
                return flagged(
                    lua,
                    Err("bad argument #0 to 'pack' (MessagePack pack needs input.)".into()),
                );
            }
            let mut out = Vec::new();
            for a in args.iter() {
                encode(a, &mut out, 0)?;
            }
            flagged(lua, Ok(vec![Value::String(lua.create_string(&out)?)]))
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(move |lua, args: MultiValue| {
            let r = input(lua, &args, "unpack").and_then(|s| unpack(lua, &s, 0, 0));
            flagged(lua, r)
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(move |lua, args: MultiValue| {
            let r = input(lua, &args, "unpack_one").and_then(|s| {
                let offset = opt_integer(lua, &args, 1, "unpack_one")?;
                unpack(lua, &s, 1, offset)
            });
            flagged(lua, r)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(move |lua, args: MultiValue| {
            let r = input(lua, &args, "unpack_limit").and_then(|s| {
                let limit = match args.get(1) {
                    None | Some(Value::Nil) => {
                        return Err(arg_error(2, "unpack_limit", "number expected, got no value"))
                    }
                    Some(_) => opt_integer(lua, &args, 1, "unpack_limit")?,
                };
                let offset = opt_integer(lua, &args, 2, "unpack_limit")?;
                unpack(lua, &s, limit, offset)
            });
            flagged(lua, r)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

fn arg_error(n: usize, func: &str, msg: &str) -> String {
    format!("bad argument #{n} to '{func}' ({msg})")
}

/// The first argument as bytes (`luaL_checklstring`: numbers convert).
fn input(lua: &Lua, args: &MultiValue, func: &str) -> Result<Vec<u8>, String> {
    match args.front() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => Ok(lua
            .coerce_string(v.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default()),
        None => Err(arg_error(1, func, "string expected, got no value")),
        Some(v) => {
            Err(arg_error(1, func, &format!("string expected, got {}", super::cjson::type_name(v))))
        }
    }
}

/// `luaL_optinteger` of argument `i` (0-based): 0 when absent.
fn opt_integer(lua: &Lua, args: &MultiValue, i: usize, func: &str) -> Result<i64, String> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(0),
        Some(v) => match lua.coerce_number(v.clone()) {
            Ok(Some(n)) => Ok(n as i64),
            _ => Err(arg_error(
                i + 1,
                func,
                &format!("number expected, got {}", super::cjson::type_name(v)),
            )),
        },
    }
}

// ---- encoding ---------------------------------------------------------

fn encode(v: &Value, out: &mut Vec<u8>, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => number(*i as f64, out),
        Value::Number(n) => number(*n, out),
        Value::Table(t) if level < MAX_NESTING => table(t, out, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn bytes(s: &[u8], out: &mut Vec<u8>) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// Integers (what a C cast to int64 keeps exactly) in the smallest form,
/// other numbers as float32 when that is exact, else float64.
fn number(n: f64, out: &mut Vec<u8>) {
    // -2^63 <= n < 2^63: what the cast keeps exactly.
    if n.is_finite() && n.trunc() == n && (-TWO_63..TWO_63).contains(&n) {
        int(n as i64, out);
    } else if (n as f32) as f64 == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// An array when its keys are exactly 1..n (numbers that are C ints),
/// else a map in `next` order.
fn table(t: &Table, out: &mut Vec<u8>, level: usize) -> mlua::Result<()> {
    let mut count: i64 = 0;
    let mut max: i64 = 0;
    let mut array = true;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => {
                array = false;
                break;
            }
        };
        if n <= 0.0 || n.trunc() != n || n > i32::MAX as f64 {
            array = false;
            break;
        }
        max = max.max(n as i64);
        count += 1;
    }
    if array && max == count {
        let len = t.raw_len();
        header(len, 0x90, 0xdc, 0xdd, out);
        for i in 1..=len {
            let v: Value = t.get(i)?;
            encode(&v, out, level + 1)?;
        }
    } else {
        // Counted first, then encoded pair by pair: each value held on the
        // Rust side takes one of mlua's ~8,000 auxiliary stack slots, so a
        // big map's pairs cannot all be held at once.
        let mut n = 0usize;
        for pair in t.clone().pairs::<Value, Value>() {
            pair?;
            n += 1;
        }
        header(n, 0x80, 0xde, 0xdf, out);
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(&k, out, level + 1)?;
            encode(&v, out, level + 1)?;
        }
    }
    Ok(())
}

fn header(n: usize, fix: u8, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

// ---- decoding ---------------------------------------------------------

enum DecodeError {
    Eof,
    BadFormat,
    Other(String),
}

struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.s.len() - self.pos < n {
            Err(DecodeError::Eof)
        } else {
            Ok(())
        }
    }

    fn be(&self, at: usize, n: usize) -> u64 {
        self.s[at..at + n].iter().fold(0u64, |acc, &b| acc << 8 | b as u64)
    }
}

/// `mp_unpack_full`: `limit` and `offset` both 0 decode everything and
/// return just the values; otherwise the next offset (-1 at the end)
/// comes first.
fn unpack(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> Result<Vec<Value>, String> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32,
            s.len() as i32
        ));
    }
    if offset as u64 > s.len() as u64 {
        return Err(format!(
            "Start offset {} greater than input length {}.",
            offset as i32,
            s.len() as i32
        ));
    }
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut c = Cursor { s, pos: offset as usize };
    let mut values = Vec::new();
    while c.pos < s.len() && (values.len() as i64) < limit {
        if values.len() >= MAX_STACK {
            return Err(TOO_MANY.into());
        }
        match decode(lua, &mut c, 0) {
            Ok(v) => values.push(v),
            Err(DecodeError::Eof) => return Err("Missing bytes in input.".into()),
            Err(DecodeError::BadFormat) => return Err("Bad data format in input.".into()),
            Err(DecodeError::Other(m)) => return Err(m),
        }
    }
    if !decode_all {
        let next = if c.pos == s.len() { -1 } else { c.pos as i64 };
        values.insert(0, Value::Integer(next));
    }
    Ok(values)
}

fn decode(lua: &Lua, c: &mut Cursor<'_>, depth: usize) -> Result<Value, DecodeError> {
    if depth >= MAX_STACK {
        return Err(DecodeError::Other(TOO_MANY.into()));
    }
    c.need(1)?;
    let p = c.pos;
    let b = c.s[p];
    let num = |n: f64| Ok(Value::Number(n));
    let fixed = |c: &mut Cursor<'_>, n: usize| -> Result<u64, DecodeError> {
        c.need(1 + n)?;
        let v = c.be(c.pos + 1, n);
        c.pos += 1 + n;
        Ok(v)
    };
    match b {
        0xcc => num(fixed(c, 1)? as f64),
        0xd0 => num(fixed(c, 1)? as u8 as i8 as f64),
        0xcd => num(fixed(c, 2)? as f64),
        0xd1 => num(fixed(c, 2)? as u16 as i16 as f64),
        0xce => num(fixed(c, 4)? as f64),
        0xd2 => num(fixed(c, 4)? as u32 as i32 as f64),
        // lua_pushunsigned into a signed lua_Integer: wraps past 2^63.
        0xcf => num(fixed(c, 8)? as i64 as f64),
        0xd3 => num(fixed(c, 8)? as i64 as f64),
        0xc0 => {
            c.pos += 1;
            Ok(Value::Nil)
        }
        0xc3 | 0xc2 => {
            c.pos += 1;
            Ok(Value::Boolean(b == 0xc3))
        }
        0xca => num(f32::from_bits(fixed(c, 4)? as u32) as f64),
        0xcb => num(f64::from_bits(fixed(c, 8)?)),
        0xd9..=0xdb => {
            let n = [1, 2, 4][(b - 0xd9) as usize];
            let len = fixed(c, n)? as usize;
            c.need(len)?;
            let v = lua.create_string(&c.s[c.pos..c.pos + len]).map_err(lua_err)?;
            c.pos += len;
            Ok(Value::String(v))
        }
        0xdc | 0xdd => {
            let len = fixed(c, if b == 0xdc { 2 } else { 4 })? as usize;
            array(lua, c, len, depth)
        }
        0xde | 0xdf => {
            let len = fixed(c, if b == 0xde { 2 } else { 4 })? as usize;
            map(lua, c, len, depth)
        }
        _ if b & 0x80 == 0 => {
            c.pos += 1;
            num(b as f64)
        }
        _ if b & 0xe0 == 0xe0 => {
            c.pos += 1;
            num(b as i8 as f64)
        }
        _ if b & 0xe0 == 0xa0 => {
            let len = (b & 0x1f) as usize;
            c.need(1 + len)?;
            let v = lua.create_string(&c.s[p + 1..p + 1 + len]).map_err(lua_err)?;
            c.pos += 1 + len;
            Ok(Value::String(v))
        }
        _ if b & 0xf0 == 0x90 => {
            c.pos += 1;
            array(lua, c, (b & 0xf) as usize, depth)
        }
        _ if b & 0xf0 == 0x80 => {
            c.pos += 1;
            map(lua, c, (b & 0xf) as usize, depth)
        }
        _ => Err(DecodeError::BadFormat),
    }
}

fn lua_err(e: mlua::Error) -> DecodeError {
    DecodeError::Other(e.to_string())
}

fn array(lua: &Lua, c: &mut Cursor<'_>, len: usize, depth: usize) -> Result<Value, DecodeError> {
    let t = lua.create_table().map_err(lua_err)?;
    for i in 1..=len {
        let v = decode(lua, c, depth + 1)?;
        t.raw_set(i, v).map_err(lua_err)?;
    }
    Ok(Value::Table(t))
}

fn map(lua: &Lua, c: &mut Cursor<'_>, len: usize, depth: usize) -> Result<Value, DecodeError> {
    let t = lua.create_table().map_err(lua_err)?;
    for _ in 0..len {
        let k = decode(lua, c, depth + 1)?;
        let v = decode(lua, c, depth + 1)?;
        match k {
            Value::Nil => return Err(DecodeError::Other("table index is nil".into())),
            Value::Number(n) if n.is_nan() => {
                return Err(DecodeError::Other("table index is NaN".into()))
            }
            k => t.raw_set(k, v).map_err(lua_err)?,
        }
    }
    Ok(Value::Table(t))
}
