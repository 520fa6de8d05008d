//! `struct`, as Redis bundles it (Roberto Ierusalimschy's struct library
//! for Lua 5.1): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, i])`,
//! `struct.size(fmt)` with the formats `> < ![n] x b B h H l L T i[n]
//! I[n] c[n] s f d` and spaces, the alignment rules of an x86-64 build
//! (long and size_t of 8 bytes, doubles aligned to 8 at most) and the
//! library's error texts. Written for Sluice from that behaviour.

use mlua::{Lua, MultiValue, Table, Value};

const MAXINTSIZE: usize = 32;
/// The largest alignment `!` asks for by default (a double's, on x86-64).
const MAXALIGN: usize = 8;
/// Results `unpack` may return at once (Lua's C stack limit).
const MAX_RESULTS: usize = 7990;

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Header {
    fn new() -> Header {
        Header { endian: Endian::Little, align: 1 }
    }
}

/// The `struct` functions, each returning the prelude's `raising` flag
/// first (2: an error message that gets the caller's position).
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let flagged = super::cjson::flagged;
    t.raw_set(
        "pack",
        lua.create_function(move |lua, args: MultiValue| {
            let r = pack(lua, &args).and_then(|out| {
                lua.create_string(&out).map(|s| vec![Value::String(s)]).map_err(|e| e.to_string())
            });
            flagged(lua, r)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(move |lua, args: MultiValue| {
            let r = unpack(lua, &args);
            flagged(lua, r)
        })?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(move |lua, args: MultiValue| {
            let r = size(lua, &args).map(|n| vec![Value::Integer(n as i64)]);
            flagged(lua, r)
        })?,
    )?;
    Ok(t)
}

fn arg_error(n: usize, func: &str, msg: &str) -> String {
    format!("bad argument #{n} to '{func}' ({msg})")
}

fn type_name(v: Option<&Value>) -> &'static str {
    v.map_or("no value", super::cjson::type_name)
}

/// `pack`'s arguments: the library pushes a nil after them before it
/// reads them, so the first missing one is "nil", not "no value".
fn pack_arg(args: &MultiValue, n: usize) -> Option<Value> {
    match args.get(n - 1) {
        None if n == args.len() + 1 => Some(Value::Nil),
        v => v.cloned(),
    }
}

/// `luaL_checklstring` of argument `n` (1-based).
fn check_string(lua: &Lua, v: Option<&Value>, n: usize, func: &str) -> Result<Vec<u8>, String> {
    match v {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => Ok(lua
            .coerce_string(v.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default()),
        v => Err(arg_error(n, func, &format!("string expected, got {}", type_name(v)))),
    }
}

/// `luaL_checknumber` of argument `n` (1-based).
fn check_number(lua: &Lua, v: Option<&Value>, n: usize, func: &str) -> Result<f64, String> {
    match v {
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(Value::Number(x)) => Ok(*x),
        Some(Value::String(_)) => match lua.coerce_number(v.cloned().unwrap_or(Value::Nil)) {
            Ok(Some(x)) => Ok(x),
            _ => Err(arg_error(n, func, "number expected, got string")),
        },
        v => Err(arg_error(n, func, &format!("number expected, got {}", type_name(v)))),
    }
}

/// A decimal count at the cursor, or `default`.
fn getnum(fmt: &[u8], i: &mut usize, default: usize) -> Result<usize, String> {
    if *i >= fmt.len() || !fmt[*i].is_ascii_digit() {
        return Ok(default);
    }
    let mut a: i64 = 0;
    while *i < fmt.len() && fmt[*i].is_ascii_digit() {
        let d = (fmt[*i] - b'0') as i64;
        if a > i32::MAX as i64 / 10 || a * 10 > i32::MAX as i64 - d {
            return Err("integral size overflow".into());
        }
        a = a * 10 + d;
        *i += 1;
    }
    Ok(a as usize)
}

fn optsize(opt: u8, fmt: &[u8], i: &mut usize) -> Result<usize, String> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => getnum(fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = getnum(fmt, i, 4)?;
            if sz > MAXINTSIZE {
                return Err(format!("integral size {sz} is larger than limit of {MAXINTSIZE}"));
            }
            sz
        }
        _ => 0,
    })
}

/// Bytes of padding before an element of `size` at `len`.
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

fn controloptions(
    opt: u8,
    fmt: &[u8],
    i: &mut usize,
    h: &mut Header,
    func: &str,
) -> Result<(), String> {
    match opt {
        b' ' => {}
        b'>' => h.endian = Endian::Big,
        b'<' => h.endian = Endian::Little,
        b'!' => {
            let a = getnum(fmt, i, MAXALIGN)?;
            if !(a > 0 && a & (a - 1) == 0) {
                return Err(format!("alignment {a} is not a power of 2"));
            }
            h.align = a;
        }
        _ => {
            return Err(arg_error(1, func, &format!("invalid format option '{}'", opt as char)));
        }
    }
    Ok(())
}

fn is_integer_opt(opt: u8) -> bool {
    matches!(opt, b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I')
}

fn pack(lua: &Lua, args: &MultiValue) -> Result<Vec<u8>, String> {
    let fmt = check_string(lua, args.front(), 1, "pack")?;
    let mut h = Header::new();
    let mut arg = 2;
    let mut out = Vec::new();
    let mut total = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        let toalign = gettoalign(total, &h, opt, size);
        total = total.wrapping_add(toalign);
        out.resize(out.len() + toalign, 0);
        match opt {
            _ if is_integer_opt(opt) => {
                let n = check_number(lua, pack_arg(args, arg).as_ref(), arg, "pack")?;
                arg += 1;
                let mut value: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let mut buf = [0u8; MAXINTSIZE];
                for k in 0..size {
                    let at = if h.endian == Endian::Little { k } else { size - 1 - k };
                    buf[at] = value as u8;
                    value = value.checked_shr(8).unwrap_or(0);
                }
                out.extend_from_slice(&buf[..size]);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, pack_arg(args, arg).as_ref(), arg, "pack")? as f32;
                arg += 1;
                match h.endian {
                    Endian::Little => out.extend_from_slice(&f.to_le_bytes()),
                    Endian::Big => out.extend_from_slice(&f.to_be_bytes()),
                }
            }
            b'd' => {
                let d = check_number(lua, pack_arg(args, arg).as_ref(), arg, "pack")?;
                arg += 1;
                match h.endian {
                    Endian::Little => out.extend_from_slice(&d.to_le_bytes()),
                    Endian::Big => out.extend_from_slice(&d.to_be_bytes()),
                }
            }
            b'c' | b's' => {
                let s = check_string(lua, pack_arg(args, arg).as_ref(), arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // luaL_argcheck names the argument after this one (the
                    // library's count has moved on already).
                    return Err(arg_error(arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => controloptions(opt, &fmt, &mut i, &mut h, "pack")?,
        }
        total = total.wrapping_add(size);
    }
    Ok(out)
}

fn getinteger(buf: &[u8], endian: Endian, signed: bool) -> f64 {
    let size = buf.len();
    let mut l: u64 = 0;
    for k in 0..size {
        let b = if endian == Endian::Big { buf[k] } else { buf[size - 1 - k] };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    // The sign bit's shift, masked to 6 bits as x86-64 does.
    let mask = u64::MAX.wrapping_shl((size * 8).wrapping_sub(1) as u32);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &MultiValue) -> Result<Vec<Value>, String> {
    let fmt = check_string(lua, args.front(), 1, "unpack")?;
    let data = check_string(lua, args.get(1), 2, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => check_number(lua, args.get(2), 3, "unpack")? as i64,
    };
    if start < 1 {
        return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
    }
    let ld = data.len();
    let mut pos = (start - 1) as usize;
    let mut h = Header::new();
    let mut results: Vec<Value> = Vec::new();
    let too_short = || arg_error(2, "unpack", "data string too short");
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if pos.checked_add(size).is_none_or(|end| end > ld) {
            return Err(too_short());
        }
        if results.len() >= MAX_RESULTS {
            return Err("stack overflow (too many results)".into());
        }
        match opt {
            _ if is_integer_opt(opt) => {
                let v = getinteger(&data[pos..pos + size], h.endian, opt.is_ascii_lowercase());
                results.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes checked");
                let f = match h.endian {
                    Endian::Little => f32::from_le_bytes(b),
                    Endian::Big => f32::from_be_bytes(b),
                };
                results.push(Value::Number(f as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes checked");
                let d = match h.endian {
                    Endian::Little => f64::from_le_bytes(b),
                    Endian::Big => f64::from_be_bytes(b),
                };
                results.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    // The previous result (or, before any, the data
                    // string itself) must be a number: it is the length.
                    let prev = match results.last() {
                        Some(v) => v.clone(),
                        None => args.get(1).cloned().unwrap_or(Value::Nil),
                    };
                    let n = match lua.coerce_number(prev) {
                        Ok(Some(n)) => n,
                        _ => return Err("format 'c0' needs a previous size".into()),
                    };
                    if !results.is_empty() {
                        results.pop();
                    }
                    size = n as usize;
                    if pos.checked_add(size).is_none_or(|end| end > ld) {
                        return Err(too_short());
                    }
                }
                let s = lua.create_string(&data[pos..pos + size]).map_err(|e| e.to_string())?;
                results.push(Value::String(s));
            }
            b's' => {
                let Some(z) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err("unfinished string in data".into());
                };
                size = z + 1;
                let s = lua.create_string(&data[pos..pos + z]).map_err(|e| e.to_string())?;
                results.push(Value::String(s));
            }
            _ => controloptions(opt, &fmt, &mut i, &mut h, "unpack")?,
        }
        pos = pos.wrapping_add(size);
    }
    results.push(Value::Integer(pos.wrapping_add(1) as i64));
    Ok(results)
}

fn size(lua: &Lua, args: &MultiValue) -> Result<usize, String> {
    let fmt = check_string(lua, args.front(), 1, "size")?;
    let mut h = Header::new();
    let mut pos = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = optsize(opt, &fmt, &mut i)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if opt == b's' {
            return Err(arg_error(1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(opt, &fmt, &mut i, &mut h, "size")?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos)
}
