//! `cjson`, as Redis bundles it (lua-cjson 2.1 with its default settings):
//! `cjson.encode`, `cjson.decode` and `cjson.null`, with its number
//! format (`%.14g`), escapes (`/` as `\/`), sparse-array rule and error
//! texts. Written for Sluice from lua-cjson's documented behaviour.

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

const MAX_DEPTH: usize = 1000;
const SPARSE_RATIO: usize = 2;
const SPARSE_SAFE: usize = 10;

/// The `cjson` functions, each returning the prelude's `raising` flag
/// first (2: an error message that gets the caller's position).
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let flagged = |lua: &Lua, r: Result<Value, String>| -> mlua::Result<MultiValue> {
        Ok(match r {
            Ok(v) => MultiValue::from_vec(vec![Value::Integer(0), v]),
            Err(m) => {
                MultiValue::from_vec(vec![Value::Integer(2), Value::String(lua.create_string(m)?)])
            }
        })
    };
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
            let r = encode(&args[0], &mut out, 0).and_then(|()| {
                lua.create_string(&out).map(Value::String).map_err(|e| e.to_string())
            });
            flagged(lua, r)
        })?,
    )?;
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
            let r = Decoder { lua, s: &text, pos: 0, depth: 0, err_at: 0 }.document();
            flagged(lua, r)
        })?,
    )?;
    t.raw_set("null", Value::LightUserData(LightUserData(std::ptr::null_mut())))?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

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

/// `%.14g`, as lua-cjson prints numbers.
pub fn fmt_14g(n: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is 64 bytes and snprintf writes at most that.
    let len = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.14g".as_ptr(), n) };
    String::from_utf8_lossy(&buf[..(len.max(0) as usize).min(63)]).into_owned()
}

fn number(n: f64, out: &mut Vec<u8>) -> Result<(), String> {
    if n.is_nan() || n.is_infinite() {
        return Err("Cannot serialise number: must not be NaN or Inf".into());
    }
    out.extend_from_slice(fmt_14g(n).as_bytes());
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

fn encode(v: &Value, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => number(*i as f64, out)?,
        Value::Number(n) => number(*n, out)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > MAX_DEPTH {
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
            if array && max > SPARSE_SAFE && max > items * SPARSE_RATIO {
                return Err("Cannot serialise table: excessively sparse array".into());
            }
            if array && max > 0 {
                out.push(b'[');
                for i in 1..=max {
                    if i > 1 {
                        out.push(b',');
                    }
                    let v: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                    encode(&v, out, depth)?;
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
                            number(as_number(k).unwrap_or_default(), out)?;
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
                    encode(&v, out, depth)?;
                }
                out.push(b'}');
            }
        }
        other => return Err(format!("Cannot serialise {}: type not supported", type_name(other))),
    }
    Ok(())
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
    depth: usize,
    /// Where a string's error was found (0-based).
    err_at: usize,
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
                let start = self.pos;
                while self.pos < self.s.len()
                    && matches!(self.s[self.pos], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                match text.parse::<f64>() {
                    Ok(n) => (Tok::Num(n), at),
                    Err(_) => (Tok::Error("invalid number"), at),
                }
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
                (Tok::Error("invalid token"), at)
            }
        }
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
        if self.depth > MAX_DEPTH {
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
