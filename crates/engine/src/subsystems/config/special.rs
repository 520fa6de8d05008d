//! Parsers and printers of the parameters that are not a plain bool,
//! integer, enum or string: `save`, `bind`, `client-output-buffer-limit`,
//! `dir`, `notify-keyspace-events`, `replicaof`, `oom-score-adj-values`,
//! `shutdown-on-sig*`, `latency-tracking-info-percentiles`, with Redis
//! 7.0.15's error texts.

use std::path::{Path, PathBuf};

use super::{c_strtoll, notify, parse_memory, Config, ObufLimit, Val};

pub(super) fn check_hostname(s: &str) -> Result<(), &'static str> {
    if s.len() >= 256 {
        return Err("Hostnames must be less than 256 characters");
    }
    if !s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
        return Err("Hostnames may only contain alphanumeric characters, hyphens or dots");
    }
    Ok(())
}

/// Redis's `validateProcTitleTemplate`: the template expands (`{{` is a
/// brace, `{name}` a known variable) to something besides spaces, with
/// an empty title, server mode and socket.
pub(super) fn check_proc_title(t: &str) -> Result<(), &'static str> {
    const BAD: &str = "template format is invalid or contains unknown variables";
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if after.is_empty() {
            return Err(BAD);
        }
        if let Some(r) = after.strip_prefix('{') {
            out.push('{');
            rest = r;
            continue;
        }
        let end = after.find('}').ok_or(BAD)?;
        match &after[..end] {
            "title" | "server-mode" | "unixsocket" => {}
            "listen-addr" | "port" | "tls-port" | "config-file" => out.push('x'),
            _ => return Err(BAD),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if out.trim_matches(' ').is_empty() {
        return Err(BAD);
    }
    Ok(())
}

/// `proc-title-template` expanded as Redis's expandProcTitleTemplate
/// does (the template passed [`check_proc_title`]): `{title}` is the
/// name the process was started as, `{listen-addr}` the first bind
/// address (`*` without one) and the port (the TLS port without a plain
/// one); the result is trimmed of spaces.
pub fn expand_proc_title(cfg: &super::Config, title: &str) -> String {
    let mut out = String::new();
    let t = cfg.get_by_name("proc-title-template").unwrap_or_default();
    let t = String::from_utf8_lossy(&t);
    let mut rest: &str = &t;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('{') {
            out.push('{');
            rest = r;
            continue;
        }
        let Some(end) = after.find('}') else { break };
        let port = |p: i64| p.to_string();
        match &after[..end] {
            "title" => out.push_str(title),
            "listen-addr" => {
                let addr = cfg.bind.first().map_or("*", |b| b.trim_start_matches('-'));
                let p = if cfg.port != 0 { i64::from(cfg.port) } else { tls_port(cfg) };
                out.push_str(&format!("{addr}:{p}"));
            }
            "server-mode" => {}
            "port" => out.push_str(&port(i64::from(cfg.port))),
            "tls-port" => out.push_str(&port(tls_port(cfg))),
            "unixsocket" => out.push_str(&cfg.unixsocket),
            "config-file" => out.push_str(&cfg.config_file),
            _ => {}
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out.trim_matches(' ').to_string()
}

fn tls_port(cfg: &super::Config) -> i64 {
    cfg.get_by_name("tls-port").and_then(|v| String::from_utf8_lossy(&v).parse().ok()).unwrap_or(0)
}

/// `oom-score-adj`: `relative` is another name for `yes`, and Redis
/// reports it as `yes`.
pub(super) fn parse_oom_mode(args: &[&[u8]]) -> Result<Val, String> {
    match super::Ty::Enum(&["no", "yes", "relative", "absolute"]).parse(args)? {
        Val::Enum("relative") => Ok(Val::Enum("yes")),
        v => Ok(v),
    }
}

pub(super) fn parse_activedefrag(args: &[&[u8]]) -> Result<Val, String> {
    match super::Ty::Bool.parse(args)? {
        Val::Bool(true) => Err("Active defragmentation cannot be enabled: it requires a Redis \
             server compiled with a modified Jemalloc like the one shipped by default with the \
             Redis source distribution"
            .into()),
        _ => Ok(Val::Str(b"no".to_vec())),
    }
}

/// `oom-score-adj-values`: three integers in -2000..=2000 (`strtoll`, so
/// an empty word is 0), kept as Redis prints them.
pub(super) fn parse_oom_values(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    let mut v = [0i64; 3];
    for (slot, a) in v.iter_mut().zip(args) {
        match c_strtoll(a, 10) {
            Some(x) if (-2000..=2000).contains(&x) => *slot = x,
            _ => {
                return Err(
                    "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into(),
                )
            }
        }
    }
    if v[1] < v[0] || v[2] < v[1] {
        crate::subsystems::log::warning(
            "The oom-score-adj-values configuration may not work for non-privileged processes! \
             Please consult the documentation.",
        );
    }
    Ok(Val::Str(format!("{} {} {}", v[0], v[1], v[2]).into_bytes()))
}

/// `shutdown-on-sigint` / `shutdown-on-sigterm`: a set of flags, printed
/// in Redis's order (`default` alone means none).
pub(super) fn parse_shutdown_flags(args: &[&[u8]]) -> Result<Val, String> {
    const NAMES: [&str; 5] = ["default", "save", "nosave", "now", "force"];
    if args.is_empty() {
        return Err(
            "argument(s) must be one of the following: default, save, nosave, now, force".into()
        );
    }
    let mut bits = 0u32;
    for a in args {
        match NAMES.iter().position(|n| a.eq_ignore_ascii_case(n.as_bytes())) {
            Some(0) => {}
            Some(i) => bits |= 1 << (i - 1),
            None => {
                return Err("argument(s) must be one of the following: default, save, nosave, \
                     now, force"
                    .into())
            }
        }
    }
    if bits & 3 == 3 {
        return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
    }
    if bits == 0 {
        return Ok(Val::Str(b"default".to_vec()));
    }
    let names: Vec<&str> =
        (1..5).filter(|i| bits & (1 << (i - 1)) != 0).map(|i| NAMES[i]).collect();
    Ok(Val::Str(names.join(" ").into_bytes()))
}

/// Redis's `string2d`: `strtod` over the whole word, no leading space, no
/// NaN, no overflow.
fn string2d(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() || s.contains(&0) {
        return None;
    }
    let c = std::ffi::CString::new(s).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // errno is read right after on the same thread.
    let (v, consumed, erange) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(c.as_ptr(), &mut end);
        (v, end.offset_from(c.as_ptr()) as usize, *libc::__errno_location() == libc::ERANGE)
    };
    if consumed != s.len() || v.is_nan() || (erange && (v.is_infinite() || v == 0.0)) {
        return None;
    }
    Some(v)
}

/// `latency-tracking-info-percentiles`: doubles in [0, 100] (printed with
/// `%f` and trailing zeros trimmed); `""` is the empty list.
pub(super) fn parse_percentiles(args: &[&[u8]]) -> Result<Val, String> {
    let args = if args.len() == 1 && args[0].is_empty() { &[][..] } else { args };
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        let v = string2d(a).ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&v) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            );
        }
        out.push(v);
    }
    Ok(Val::Floats(out))
}

fn is_base_name(s: &str) -> bool {
    !s.contains('/')
}
pub(super) fn check_dbfilename(s: &str) -> Result<(), &'static str> {
    if is_base_name(s) {
        Ok(())
    } else {
        Err("dbfilename can't be a path, just a filename")
    }
}
pub(super) fn check_appendfilename(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        Err("appendfilename can't be empty")
    } else if !is_base_name(s) {
        Err("appendfilename can't be a path, just a filename")
    } else {
        Ok(())
    }
}
pub(super) fn check_appenddirname(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        Err("appenddirname can't be empty")
    } else if !is_base_name(s) {
        Err("appenddirname can't be a path, just a dirname")
    } else {
        Ok(())
    }
}

pub(super) fn words(args: &[&[u8]]) -> Vec<String> {
    args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

pub(super) fn parse_bind(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() > 16 {
        return Err("Too many bind addresses specified.".into());
    }
    if args.len() == 1 && args[0].is_empty() {
        return Ok(Val::Words(Vec::new()));
    }
    Ok(Val::Words(words(args)))
}

pub(super) fn parse_save(args: &[&[u8]]) -> Result<Val, String> {
    let args = if args.len() == 1 && args[0].is_empty() { &[][..] } else { args };
    if args.len() & 1 == 1 {
        return Err("Invalid save parameters".into());
    }
    let mut out = Vec::new();
    for pair in args.chunks(2) {
        let secs = c_strtoll(pair[0], 10).filter(|&v| v >= 1);
        let changes = c_strtoll(pair[1], 10).filter(|&v| v >= 0);
        match (secs, changes) {
            // Redis keeps `changes` in an int.
            (Some(s), Some(c)) => out.push((s, c as i32 as i64)),
            _ => return Err("Invalid save parameters".into()),
        }
    }
    Ok(Val::Save(out))
}

pub(super) fn get_save(c: &Config) -> Vec<u8> {
    let parts: Vec<String> = c.save.iter().map(|(s, n)| format!("{s} {n}")).collect();
    parts.join(" ").into_bytes()
}

pub(super) fn parse_obuf(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() & 3 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut out = Vec::new();
    for a in args.chunks(4) {
        let class = match a[0].to_ascii_lowercase().as_slice() {
            b"normal" => 0,
            b"slave" | b"replica" => 1,
            b"pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
        };
        let hard = parse_memory(a[1]);
        let soft = parse_memory(a[2]);
        let secs = c_strtoll(a[3], 10).map(|v| v as i32).filter(|&v| v >= 0);
        match (hard, soft, secs) {
            (Some(hard), Some(soft), Some(secs)) => {
                out.push((class, ObufLimit { hard, soft, soft_seconds: secs as u64 }))
            }
            _ => {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                )
            }
        }
    }
    Ok(Val::Obuf(out))
}

pub(super) fn get_obuf(c: &Config) -> Vec<u8> {
    let one = |n: &str, l: &ObufLimit| format!("{n} {} {} {}", l.hard, l.soft, l.soft_seconds);
    format!(
        "{} {} {}",
        one("normal", &c.obuf_normal),
        one("slave", &c.obuf_replica),
        one("pubsub", &c.obuf_pubsub)
    )
    .into_bytes()
}

pub(super) fn parse_replicaof(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() != 2 {
        return Err("wrong number of arguments".into());
    }
    if args[0].eq_ignore_ascii_case(b"no") && args[1].eq_ignore_ascii_case(b"one") {
        return Ok(Val::Replica(None));
    }
    match c_strtoll(args[1], 10) {
        Some(port) if (0..=65535).contains(&port) && !args[1].is_empty() => {
            Ok(Val::Replica(Some((String::from_utf8_lossy(args[0]).into_owned(), port as u16))))
        }
        _ => Err("Invalid master port".into()),
    }
}

/// Text of an OS error, as `strerror` words it.
pub(crate) fn os_error_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            // SAFETY: strerror returns a pointer to a NUL-terminated static
            // (or thread-local) message string, copied out at once.
            let p = unsafe { libc::strerror(code) };
            if p.is_null() {
                e.to_string()
            } else {
                // SAFETY: non-null, NUL-terminated per strerror's contract.
                unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        }
        None => e.to_string(),
    }
}

/// `dir`: Redis `chdir`s at once; the engine only checks the directory is
/// usable and keeps its absolute path (the server changes directory).
pub(super) fn parse_dir(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() != 1 {
        return Err("wrong number of arguments".into());
    }
    let path = PathBuf::from(String::from_utf8_lossy(args[0]).into_owned());
    let meta = std::fs::metadata(&path).map_err(|e| os_error_text(&e))?;
    if !meta.is_dir() {
        return Err("Not a directory".into());
    }
    let abs = std::fs::canonicalize(&path).map_err(|e| os_error_text(&e))?;
    Ok(Val::Str(abs.to_string_lossy().into_owned().into_bytes()))
}

pub(super) fn get_dir(c: &Config) -> Vec<u8> {
    let p = Path::new(&c.dir);
    if p.is_absolute() {
        return c.dir.clone().into_bytes();
    }
    match std::env::current_dir() {
        Ok(cwd) => {
            let full = if c.dir == "." { cwd } else { cwd.join(p) };
            full.to_string_lossy().into_owned().into_bytes()
        }
        Err(_) => Vec::new(),
    }
}

pub(super) fn parse_notify(args: &[&[u8]]) -> Result<Val, String> {
    if args.len() != 1 {
        return Err("wrong number of arguments".into());
    }
    let mut flags = 0;
    for &ch in args[0] {
        flags |= match ch {
            b'A' => notify::ALL,
            b'g' => notify::GENERIC,
            b'$' => notify::STRING,
            b'l' => notify::LIST,
            b's' => notify::SET,
            b'h' => notify::HASH,
            b'z' => notify::ZSET,
            b'x' => notify::EXPIRED,
            b'e' => notify::EVICTED,
            b'K' => notify::KEYSPACE,
            b'E' => notify::KEYEVENT,
            b't' => notify::STREAM,
            b'm' => notify::KEY_MISS,
            b'd' => notify::MODULE,
            b'n' => notify::NEW,
            _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        };
    }
    Ok(Val::Flags(flags))
}

/// `notify-keyspace-events` flags as Redis prints them.
pub fn notify_to_string(flags: u32) -> String {
    use notify::*;
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, ch) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(ch);
            }
        }
    }
    for (bit, ch) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(ch);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: Result<Val, String>) -> String {
        match r {
            Ok(Val::Str(s)) => String::from_utf8(s).unwrap(),
            Ok(Val::Enum(e)) => e.to_string(),
            Ok(Val::Floats(f)) => f
                .iter()
                .map(|&p| crate::core::cmdstats::trim_double(p))
                .collect::<Vec<_>>()
                .join(" "),
            Ok(other) => panic!("{other:?}"),
            Err(e) => format!("ERR {e}"),
        }
    }

    fn words(s: &str) -> Vec<&[u8]> {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split(' ').map(str::as_bytes).collect()
        }
    }

    // Expected values: redis-server 7.0.15's CONFIG SET then CONFIG GET.
    #[test]
    fn shutdown_flags_as_redis_prints_them() {
        let f = |s: &str| text(parse_shutdown_flags(&words(s)));
        assert_eq!(f("nosave now"), "nosave now");
        assert_eq!(f("now nosave force"), "nosave now force");
        assert_eq!(f("default now"), "now");
        assert_eq!(f("DEFAULT"), "default");
        assert_eq!(
            f("save nosave"),
            "ERR shutdown options SAVE and NOSAVE can't be used simultaneously"
        );
        assert_eq!(
            f(""),
            "ERR argument(s) must be one of the following: default, save, nosave, now, force"
        );
    }

    #[test]
    fn percentiles_as_redis_prints_them() {
        let f = |s: &[&[u8]]| text(parse_percentiles(s));
        assert_eq!(f(&[b"0", b"100", b"50.5", b"99.99999"]), "0 100 50.5 99.99999");
        assert_eq!(f(&[b"1e1", b"0x10"]), "10 16");
        assert_eq!(f(&[b"-0"]), "-0");
        assert_eq!(f(&[b""]), "");
        assert_eq!(f(&[b"nan"]), "ERR Invalid latency-tracking-info-percentiles parameters");
        assert_eq!(f(&[b" 1"]), "ERR Invalid latency-tracking-info-percentiles parameters");
        assert_eq!(f(&[b"1e400"]), "ERR Invalid latency-tracking-info-percentiles parameters");
        assert_eq!(
            f(&[b"-5"]),
            "ERR latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
        );
    }

    #[test]
    fn oom_values_and_mode_as_redis() {
        let f = |s: &[&[u8]]| text(parse_oom_values(s));
        assert_eq!(f(&[b"1", b"2", b""]), "1 2 0");
        assert_eq!(f(&[b"3", b"2", b"1"]), "3 2 1");
        assert_eq!(f(&[b"1", b"2", b"+3"]), "1 2 3");
        let bad = "ERR Invalid oom-score-adj-values, elements must be between -2000 and 2000.";
        assert_eq!(f(&[b"-2001", b"0", b"0"]), bad);
        assert_eq!(f(&[b"1", b"2", b"x"]), bad);
        assert_eq!(f(&[b"1", b"2"]), "ERR wrong number of arguments");
        assert_eq!(text(parse_oom_mode(&[b"relative"])), "yes");
        assert_eq!(text(parse_oom_mode(&[b"Absolute"])), "absolute");
    }

    #[test]
    fn hostnames_and_title_templates_as_redis() {
        assert_eq!(check_hostname("A-b.c9"), Ok(()));
        assert_eq!(check_hostname(""), Ok(()));
        assert!(check_hostname("a_b").unwrap_err().starts_with("Hostnames may only"));
        assert!(check_hostname(&"a".repeat(300)).unwrap_err().starts_with("Hostnames must be"));
        assert_eq!(check_proc_title("x"), Ok(()));
        assert_eq!(check_proc_title("{title} {listen-addr} {server-mode}"), Ok(()));
        for good in ["{{x", "a}b", "{title} {port}", "{config-file}", "{tls-port}"] {
            assert_eq!(check_proc_title(good), Ok(()), "{good:?}");
        }
        for bad in ["", "{title", "{x}", "{title}", "{server-mode}", "  ", "{unixsocket}"] {
            assert!(check_proc_title(bad).is_err(), "{bad:?}");
        }
    }
}
