//! Hostile commands for the command layer: every command of Redis 7.0's
//! table, its arguments shaped by the table's argument tree (`COMMAND
//! DOCS`), with the numbers, strings and keys chosen to hurt — extreme
//! integers, non-finite doubles, empty and non-numeric values, huge
//! repetition, every key type in every key position — and then mutated
//! (an argument dropped, replaced, added) so that the order of argument
//! checks shows.
//!
//! One generator serves the in-process fuzz target (choices from the
//! fuzzer's bytes) and the CI abuse test against the real binaries
//! (choices from a seeded PRNG). Fixtures create one key of every type
//! under the names the generator uses.

use engine::core::meta::{a, redis70, Arg, ArgKind, Meta};

/// A stream of choices.
pub trait Source {
    /// A choice in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize;

    /// True about once in `n`.
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// A seeded PRNG (SplitMix64), for reproducible runs.
pub struct Rng(pub u64);

impl Source for Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % n as u64) as usize
    }
}

/// Choices read from a fuzzer's bytes (0 once they run out).
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }

    /// Whether every byte was used.
    pub fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }
}

impl Source for Bytes<'_> {
    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let mut v: usize = 0;
        let mut span: usize = 1;
        while span < n {
            let b = self.data.get(self.pos).copied().unwrap_or(0);
            self.pos += 1;
            v = (v << 8) | b as usize;
            span = span.saturating_mul(256);
        }
        v % n
    }
}

/// Numbers that hurt: the ends of every integer width Redis parses into,
/// values just past them, non-finite and denormal doubles, and the
/// strings that are almost numbers.
pub const NUMBERS: &[&str] = &[
    "-9223372036854775808",
    "9223372036854775807",
    "-9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "4611686018427387904",
    "-4611686018427387904",
    "4611686018427387903",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "536870911",
    "536870912",
    "4294967295999",
    "-1",
    "0",
    "1",
    "2",
    "3",
    "100",
    "-100",
    "100000",
    "-100000",
    "1.5",
    "-1.5",
    "0.0",
    "-0",
    "1e308",
    "-1e308",
    "1e309",
    "1e-320",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "-nan",
    "",
    " 1",
    "1 ",
    "0x10",
    "1e3",
    "+1",
    "01",
    "abc",
    "(1",
    "[a",
    "-",
    "+",
    "*",
    "$",
];

/// Key names the fixtures fill, one per type, and one that never exists.
pub const KEYS: &[&str] =
    &["str", "int", "list", "hash", "set", "iset", "zset", "geo", "stream", "hll", "nokey"];

/// Commands that create [`KEYS`] (after a `FLUSHALL`).
pub fn fixtures() -> Vec<Vec<&'static str>> {
    vec![
        vec!["SET", "str", "hello"],
        vec!["SET", "int", "10"],
        vec!["RPUSH", "list", "a", "b", "c", "1", "2"],
        vec!["HSET", "hash", "a", "1", "b", "2", "c", "x"],
        vec!["SADD", "set", "a", "b", "c"],
        vec!["SADD", "iset", "1", "2", "3"],
        vec!["ZADD", "zset", "1", "a", "2", "b", "3", "c"],
        vec![
            "GEOADD",
            "geo",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
        vec!["XADD", "stream", "1-1", "f", "v"],
        vec!["XADD", "stream", "2-1", "f", "w"],
        vec!["XGROUP", "CREATE", "stream", "g", "0"],
        vec!["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "stream", ">"],
        vec!["PFADD", "hll", "a", "b", "c"],
    ]
}

/// Plain strings for values, members and names.
const STRINGS: &[&str] =
    &["a", "b", "c", "x", "Palermo", "g", "c1", "f", "v", "1-1", "$", ">", "*", "0-0", "default"];

/// A value for a string argument.
fn string(src: &mut dyn Source) -> String {
    match src.below(8) {
        0..=2 => STRINGS[src.below(STRINGS.len())].to_string(),
        3..=5 => NUMBERS[src.below(NUMBERS.len())].to_string(),
        6 => KEYS[src.below(KEYS.len())].to_string(),
        _ => "x".repeat(1 + src.below(300)),
    }
}

/// A value for a numeric argument: mostly hostile numbers.
fn number(src: &mut dyn Source) -> String {
    if src.one_in(10) {
        return string(src);
    }
    NUMBERS[src.below(NUMBERS.len())].to_string()
}

/// Argument names that are a blocking command's timeout.
fn is_timeout(cmd: &Meta, arg: &Arg) -> bool {
    let blocking = cmd.flags & engine::core::meta::f::BLOCKING != 0 || cmd.name == "wait";
    blocking && (arg.name == "timeout" || arg.token == Some("BLOCK"))
}

fn token(src: &mut dyn Source, t: &str, out: &mut Vec<Vec<u8>>) {
    // Tokens are case-insensitive: try another case now and then.
    let t = if src.one_in(4) { t.to_ascii_lowercase() } else { t.to_string() };
    out.push(t.into_bytes());
}

fn value(src: &mut dyn Source, cmd: &Meta, arg: &Arg, out: &mut Vec<Vec<u8>>) {
    if is_timeout(cmd, arg) {
        if let Some(t) = arg.token {
            token(src, t, out);
        }
        // Invalid timeouts (the checks) or a short valid one, so that
        // a valid one cannot block for long: milliseconds for WAIT and
        // BLOCK, seconds for the others.
        let millis = cmd.name == "wait" || arg.token == Some("BLOCK");
        let v = match src.below(3) {
            0 => (if millis { "10" } else { "0.01" }).to_string(),
            _ => {
                let bad = ["-1", "-0.5", "nan", "inf", "abc", "9223372036854775807", "1e308", ""];
                bad[src.below(bad.len())].to_string()
            }
        };
        out.push(v.into_bytes());
        return;
    }
    if let Some(t) = arg.token {
        token(src, t, out);
        if arg.kind == ArgKind::PureToken {
            return;
        }
    }
    match arg.kind {
        ArgKind::PureToken => {}
        ArgKind::Key => out.push(KEYS[src.below(KEYS.len())].as_bytes().to_vec()),
        ArgKind::Integer | ArgKind::Double | ArgKind::UnixTime => {
            out.push(number(src).into_bytes())
        }
        ArgKind::Pattern => {
            let p = ["*", "a*", "[", "\\", "*[a-", "h?sh", ""];
            let v = if src.one_in(2) { p[src.below(p.len())].to_string() } else { string(src) };
            out.push(v.into_bytes())
        }
        ArgKind::Str => out.push(string(src).into_bytes()),
        ArgKind::OneOf => {
            if !arg.args.is_empty() {
                let alt = &arg.args[src.below(arg.args.len())];
                one(src, cmd, alt, out);
            }
        }
        ArgKind::Block => {
            for part in arg.args {
                one(src, cmd, part, out);
            }
        }
    }
}

/// One argument of the tree, honouring optional and multiple.
fn one(src: &mut dyn Source, cmd: &Meta, arg: &Arg, out: &mut Vec<Vec<u8>>) {
    if arg.flags & a::OPTIONAL != 0 && src.one_in(2) {
        return;
    }
    let times = if arg.flags & a::MULTIPLE != 0 {
        match src.below(10) {
            0..=5 => 1,
            6..=8 => 2 + src.below(3),
            // Huge repetition, now and then.
            _ => 50 + src.below(500),
        }
    } else {
        1
    };
    for i in 0..times {
        if i > 0 && arg.flags & a::MULTIPLE_TOKEN == 0 && arg.token.is_some() {
            // The token once, then only values.
            let bare = Arg { token: None, ..*arg };
            value(src, cmd, &bare, out);
        } else {
            value(src, cmd, arg, out);
        }
    }
}

/// Every command (top-level or subcommand) of the table but those
/// `skip` names (by full name, `get`, `config|set`): the caller keeps out
/// what changes the connection's mode, touches the disk or the
/// configuration, or stops the server.
pub fn commands(skip: &dyn Fn(&str) -> bool) -> Vec<&'static Meta> {
    let mut v = Vec::new();
    for m in redis70::COMMANDS {
        if m.subcommands.is_empty() {
            if !skip(m.name) {
                v.push(m);
            }
        } else {
            for s in m.subcommands {
                if !skip(s.name) {
                    v.push(s);
                }
            }
            // The container alone (HELP, unknown subcommands).
            if !skip(m.name) {
                v.push(m);
            }
        }
    }
    v
}

/// One hostile command for `cmd`: its name (a subcommand's two words),
/// arguments from its tree, then a mutation now and then.
pub fn command(src: &mut dyn Source, cmd: &Meta) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    match cmd.name.split_once('|') {
        Some((top, sub)) => {
            out.push(top.as_bytes().to_vec());
            out.push(sub.as_bytes().to_vec());
        }
        None => out.push(cmd.name.as_bytes().to_vec()),
    }
    if cmd.args.is_empty() && !cmd.subcommands.is_empty() {
        // A container: an unknown subcommand or HELP.
        let v = if src.one_in(2) { "help".to_string() } else { string(src) };
        out.push(v.into_bytes());
    }
    for arg in cmd.args {
        one(src, cmd, arg, &mut out);
    }
    let fixed = out.len().min(if cmd.name.contains('|') { 2 } else { 1 });
    match src.below(12) {
        // Drop one argument (arity and order of checks).
        0 if out.len() > fixed => {
            let i = fixed + src.below(out.len() - fixed);
            out.remove(i);
        }
        // Replace one with a hostile value.
        1 if out.len() > fixed => {
            let i = fixed + src.below(out.len() - fixed);
            out[i] = number(src).into_bytes();
        }
        // One more at the end.
        2 => out.push(number(src).into_bytes()),
        // Cut the tail.
        3 if out.len() > fixed + 1 => {
            let n = fixed + src.below(out.len() - fixed);
            out.truncate(n);
        }
        _ => {}
    }
    out
}

/// Whether a command's replies may differ between two servers given the
/// same commands (random picks, times, ids, memory figures).
pub fn nondeterministic(cmd: &Meta) -> bool {
    cmd.tips.iter().any(|t| t.starts_with("nondeterministic_output"))
}

/// Shows a command for a report (printable bytes as they are).
pub fn show(argv: &[Vec<u8>]) -> String {
    argv.iter()
        .map(|a| {
            let s = crate::escape(a);
            if s.len() > 60 {
                format!("\"{}…({} bytes)\"", &s[..40], a.len())
            } else {
                format!("\"{s}\"")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
