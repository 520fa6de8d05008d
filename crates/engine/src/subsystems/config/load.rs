//! Loading the configuration: redis.conf-syntax files (quoting and
//! `include` as in Redis) and `redis-server`-style command-line flags,
//! with Redis's fatal error messages.

use std::fmt;
use std::path::Path;

use super::pflags::*;
use super::special::{os_error_text, words};
use super::{lookup, Config, Named, Ty, Val, REDIS_VERSION};
use crate::core::table::Table;

// ---------------------------------------------------------------------------
// Loading: files and command-line flags.

/// Why the configuration could not be loaded. `Display` is exactly what
/// redis-server prints before exiting with status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The file (or an `include`d one) cannot be opened.
    Open { path: String, reason: String },
    /// A bad line: its number (1-based, in the text it belongs to), the
    /// trimmed line, and Redis's reason.
    Line { line_no: usize, line: String, msg: String },
    /// A check after the last line (the log file cannot be opened, ...).
    Final { msg: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Open { path, reason } => {
                write!(f, "Fatal error, can't open config file '{path}': {reason}")
            }
            ConfigError::Line { line_no, line, msg } => write!(
                f,
                "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***\n\
                 Reading the configuration file, at line {line_no}\n>>> '{line}'\n{msg}\n"
            ),
            ConfigError::Final { msg } => {
                write!(f, "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***\n{msg}\n")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

pub use resp::split_args;

/// Redis's `sdscatrepr`: a quoted, escaped rendering of bytes.
pub fn repr(s: &[u8]) -> String {
    let mut out = String::from("\"");
    for &c in s {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
    out
}

/// State carried across the texts of one load (file, includes, flags).
struct LoadState {
    /// The command table `rename-command` lines apply to.
    table: &'static Table,
    /// The first `save` of a load replaces the defaults; later ones add.
    save_loaded: bool,
    depth: usize,
}

impl LoadState {
    fn new(table: &'static Table) -> LoadState {
        LoadState { table, save_loaded: false, depth: 0 }
    }
}

fn read_file(path: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path)
        .map_err(|e| ConfigError::Open { path: path.to_string(), reason: os_error_text(&e) })
}

/// Files an `include` names: a path, or a glob in its last component
/// (no match is no error, as with Redis's `glob`).
fn include_paths(pattern: &str) -> Result<Vec<String>, ConfigError> {
    if !pattern.contains(['*', '?', '[']) {
        return Ok(vec![pattern.to_string()]);
    }
    let p = Path::new(pattern);
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(file_pat) = p.file_name() else { return Ok(Vec::new()) };
    let file_pat = file_pat.to_string_lossy().into_owned();
    let mut found = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && !file_pat.starts_with('.') {
                continue;
            }
            if crate::subsystems::glob::matches(file_pat.as_bytes(), name.as_bytes(), false) {
                found.push(if p.parent().is_some_and(|d| !d.as_os_str().is_empty()) {
                    dir.join(&name).to_string_lossy().into_owned()
                } else {
                    name
                });
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Applies a configuration text (Redis's `loadServerConfigFromString`).
fn load_text(cfg: &mut Config, text: &[u8], st: &mut LoadState) -> Result<(), ConfigError> {
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = trim(raw);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let fail = |msg: &str| ConfigError::Line {
            line_no: i + 1,
            line: String::from_utf8_lossy(line).into_owned(),
            msg: msg.to_string(),
        };
        let Some(mut argv) = split_args(line) else {
            return Err(fail("Unbalanced quotes in configuration line"));
        };
        if argv.is_empty() {
            continue;
        }
        argv[0].make_ascii_lowercase();
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        if let Some(n) = lookup(args[0]) {
            if n.param.flags & MULTI_ARG == 0 && args.len() != 2 {
                return Err(fail("wrong number of arguments"));
            }
            // A multi-word parameter given as one non-empty word is split
            // like a line (`--save "60 1"`, `bind "a b"`), as Redis 7.0.15.
            let split;
            let words: &[&[u8]] =
                if n.param.flags & MULTI_ARG != 0 && args.len() == 2 && !args[1].is_empty() {
                    split = split_args(args[1]).unwrap_or_default();
                    &split.iter().map(|a| a.as_slice()).collect::<Vec<_>>()
                } else {
                    &args[1..]
                };
            let v = n.param.ty.parse(words).map_err(|e| fail(&e))?;
            let v = match v {
                // `save ""` empties the list wherever it comes (Redis's
                // special case); any other `save` after the first adds.
                Val::Save(more) if st.save_loaded && !more.is_empty() => {
                    let mut all = cfg.save.clone();
                    all.extend(more);
                    Val::Save(all)
                }
                other => other,
            };
            if matches!(v, Val::Save(_)) {
                st.save_loaded = true;
            }
            cfg.store(n.param, v);
            continue;
        }
        let name = args[0];
        let argc = args.len();
        // Deprecated directives Redis still swallows.
        if (name == b"list-max-ziplist-entries"
            || name == b"list-max-ziplist-value"
            || name == b"lua-replicate-commands")
            && argc == 2
        {
            continue;
        }
        match name {
            b"include" if argc == 2 => {
                if st.depth > 32 {
                    return Err(fail("Too many nested includes"));
                }
                let pattern = String::from_utf8_lossy(args[1]).into_owned();
                for path in include_paths(&pattern)? {
                    let text = read_file(&path)?;
                    st.depth += 1;
                    let r = load_text(cfg, &text, st);
                    st.depth -= 1;
                    r?;
                }
            }
            b"rename-command" if argc == 3 => {
                // Checked against the renames of the lines before, as Redis
                // applies each line to its table as it reads it.
                let w = words(&args[1..]);
                cfg.rename_commands.push((w[0].clone(), w[1].clone()));
                if let Err(e) = crate::core::table::check_renames(st.table, &cfg.rename_commands) {
                    cfg.rename_commands.pop();
                    return Err(fail(e));
                }
            }
            b"user" if argc >= 2 => cfg.users.push(words(&args[1..])),
            // Redis loads modules (and checks module parameters) after
            // "Server initialized"; the server refuses them there.
            b"loadmodule" if argc >= 2 => cfg.load_modules.push(words(&args[1..2]).remove(0)),
            _ if name.contains(&b'.') => {
                if argc < 2 {
                    return Err(fail("Module config specified without value"));
                }
                cfg.module_configs.push(words(&args[..1]).remove(0));
            }
            b"sentinel" => {
                if argc != 1 {
                    return Err(fail("sentinel directive while not in sentinel mode"));
                }
            }
            _ => return Err(fail("Bad directive or wrong number of arguments")),
        }
    }
    Ok(())
}

fn trim(mut s: &[u8]) -> &[u8] {
    let t = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    while s.first().is_some_and(t) {
        s = &s[1..];
    }
    while s.last().is_some_and(t) {
        s = &s[..s.len() - 1];
    }
    s
}

fn absolute(path: &str) -> String {
    let p = Path::new(path);
    if p.is_absolute() {
        return path.to_string();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(p).to_string_lossy().into_owned(),
        Err(_) => path.to_string(),
    }
}

/// The checks Redis makes once every line is read.
fn final_checks(cfg: &Config) -> Result<(), ConfigError> {
    if !cfg.logfile.is_empty() {
        // Redis has already changed to `dir` when it checks the log file.
        let path = Path::new(&cfg.dir).join(&cfg.logfile);
        if let Err(e) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            return Err(ConfigError::Final {
                msg: format!("Can't open the log file: {}", os_error_text(&e)),
            });
        }
    }
    let cluster = cfg.inert.get("cluster-enabled").is_some_and(|v| v == b"yes");
    if cluster && cfg.replicaof.is_some() {
        return Err(ConfigError::Final {
            msg: "replicaof directive not allowed in cluster mode".into(),
        });
    }
    Ok(())
}

/// Loads a redis.conf-syntax file over the defaults; `rename-command`
/// lines are checked against `table`.
pub fn load_file(path: &str, table: &'static Table) -> Result<Config, ConfigError> {
    let text = read_file(path)?;
    let mut cfg = Config { config_file: absolute(path), ..Config::default() };
    load_text(&mut cfg, &text, &mut LoadState::new(table))?;
    final_checks(&cfg)?;
    Ok(cfg)
}

/// Loads the configuration from the process arguments (without the
/// program name), exactly as `redis-server [file|-] [--name value ...]`:
/// an optional file (or `-` for stdin), then the flags, which are turned
/// into one more text appended after the file's (so error line numbers
/// count on from the file's lines, plus one). `rename-command` lines are
/// checked against `table`.
pub fn from_args(args: &[String], table: &'static Table) -> Result<Config, ConfigError> {
    let mut cfg = Config::default();
    let mut text: Vec<u8> = Vec::new();
    let mut j = 0;
    if let Some(first) = args.first() {
        if !first.starts_with('-') {
            cfg.config_file = absolute(first);
            text = read_file(first)?;
            j = 1;
        }
    }
    let mut options = String::new();
    let mut handled_last = true;
    let mut from_stdin = false;
    while j < args.len() {
        let a = &args[j];
        let last = j == args.len() - 1;
        if a == "-" && (j == 0 || last) {
            from_stdin = true;
        } else if handled_last && a.starts_with("--") {
            if !options.is_empty() {
                options.push('\n');
            }
            options.push_str(&a[2..]);
            options.push(' ');
            let words = split_args(a.as_bytes()).map_or(0, |w| w.len());
            if words == 1 {
                // A name alone: its value is the next argument(s).
                handled_last = false;
                let next_is_flag = !last && args[j + 1].starts_with("--");
                if a.eq_ignore_ascii_case("--save") && (last || next_is_flag) {
                    // `--save` with no value means `save ""`.
                    options.push_str("\"\"");
                    handled_last = !last;
                } else if a.eq_ignore_ascii_case("--sentinel") && next_is_flag {
                    handled_last = true;
                }
            } else {
                handled_last = true;
            }
        } else {
            options.push_str(&repr(a.as_bytes()));
            options.push(' ');
            handled_last = true;
        }
        j += 1;
    }
    if from_stdin {
        use std::io::Read;
        crate::subsystems::log::warning("Reading config from stdin");
        let mut buf = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut buf);
        text.extend_from_slice(&buf);
    }
    text.push(b'\n');
    text.extend_from_slice(options.as_bytes());
    load_text(&mut cfg, &text, &mut LoadState::new(table))?;
    final_checks(&cfg)?;
    Ok(cfg)
}

/// `rewriteConfigFormatMemory`: gb/mb/kb when the value divides evenly.
fn format_memory(v: u64) -> String {
    let (gb, mb, kb) = (1u64 << 30, 1u64 << 20, 1u64 << 10);
    if v != 0 && v & (gb - 1) == 0 {
        format!("{}gb", v / gb)
    } else if v != 0 && v & (mb - 1) == 0 {
        format!("{}mb", v / mb)
    } else if v != 0 && v & (kb - 1) == 0 {
        format!("{}kb", v / kb)
    } else {
        v.to_string()
    }
}

/// The lines a parameter is written as, each with whether it must be
/// written even if the file does not mention it (it differs from the
/// default).
fn rewrite_lines(cfg: &Config, def: &Config, n: Named) -> Vec<(String, bool)> {
    let name = n.param.name;
    match name {
        "save" => {
            // Always written (Redis's rewriteConfigSaveOption forces it):
            // without a line the built-in points would come back.
            let _ = def;
            let force = true;
            if cfg.save.is_empty() {
                return vec![("save \"\"".to_string(), force)];
            }
            return cfg.save.iter().map(|(s, c)| (format!("save {s} {c}"), force)).collect();
        }
        "client-output-buffer-limit" => {
            let classes = [
                ("normal", cfg.obuf_normal, def.obuf_normal),
                ("slave", cfg.obuf_replica, def.obuf_replica),
                ("pubsub", cfg.obuf_pubsub, def.obuf_pubsub),
            ];
            return classes
                .iter()
                .map(|(c, l, d)| {
                    let line = format!(
                        "{name} {c} {} {} {}",
                        format_memory(l.hard),
                        format_memory(l.soft),
                        l.soft_seconds
                    );
                    (line, l != d)
                })
                .collect();
        }
        "replicaof" => {
            return match &cfg.replicaof {
                Some((h, p)) => vec![(format!("replicaof {h} {p}"), true)],
                None => Vec::new(),
            };
        }
        _ => {}
    }
    let v = cfg.get(n);
    let force = v != def.get(n);
    let text = match n.param.ty {
        // Lists of words (and `activedefrag`) are written as words.
        Ty::Special(_) if n.param.flags & MULTI_ARG != 0 || name == "activedefrag" => {
            if v.is_empty() {
                "\"\"".to_string()
            } else {
                String::from_utf8_lossy(&v).into_owned()
            }
        }
        Ty::Str(_) | Ty::Special(_) => repr(&v),
        Ty::Int { mem: true, pct, .. } if !(pct && v.ends_with(b"%")) => {
            let x: u64 = String::from_utf8_lossy(&v).parse().unwrap_or(0);
            format_memory(x)
        }
        _ => String::from_utf8_lossy(&v).into_owned(),
    };
    vec![(format!("{name} {text}"), force)]
}

/// CONFIG REWRITE: Redis's algorithm. Lines of the old file that set a
/// known parameter are replaced in place with the current value (extra
/// lines for it are dropped); parameters that differ from their default
/// and are not in the file are appended after a
/// "# Generated by CONFIG REWRITE" line; left-over lines of a parameter
/// become blank; comments and `include`-like directives stay, other
/// unknown lines are commented out with `# ???`. Old lines under an alias
/// or `slave` name count as the parameter's. The file is replaced
/// atomically.
/// `users` are the `user …` lines to write (Redis's
/// rewriteConfigUserOption: the current ACL users, or none when an
/// `aclfile` holds them, which drops the file's `user` lines).
pub fn rewrite(cfg: &Config, path: &str, users: &[String]) -> Result<(), String> {
    rewrite_with(cfg, path, users, false)
}

/// [`rewrite`], writing every parameter even at its default when
/// `force_all` (DEBUG CONFIG-REWRITE-FORCE-ALL).
pub fn rewrite_with(
    cfg: &Config,
    path: &str,
    users: &[String],
    force_all: bool,
) -> Result<(), String> {
    const SIGNATURE: &str = "# Generated by CONFIG REWRITE";
    let old = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(os_error_text(&e)),
    };
    let mut lines: Vec<Option<String>> = Vec::new(); // None: never used
    let mut by_option: std::collections::HashMap<&'static str, std::collections::VecDeque<usize>> =
        Default::default();
    let mut needs_signature = true;
    let text = String::from_utf8_lossy(&old);
    // Redis splits the whole file on newlines: a file ending in one has
    // an empty last line, which stays (before any appended lines).
    for raw in text.split('\n').filter(|_| !old.is_empty()) {
        let line = String::from_utf8_lossy(trim(raw.as_bytes())).into_owned();
        if line.is_empty() || line.starts_with('#') {
            if line == SIGNATURE {
                needs_signature = false;
            }
            lines.push(Some(line));
            continue;
        }
        let argv = split_args(line.as_bytes());
        let name = argv.as_ref().and_then(|a| a.first()).map(|a| {
            let lower = String::from_utf8_lossy(a).to_ascii_lowercase();
            lower.replace("slave", "replica")
        });
        let known = name.as_deref().and_then(|n| lookup(n.as_bytes()));
        if name.as_deref() == Some("user") {
            by_option.entry("user").or_default().push_back(lines.len());
            lines.push(Some(line));
            continue;
        }
        match (argv, known) {
            (Some(_), Some(n)) => {
                by_option.entry(n.param.name).or_default().push_back(lines.len());
                lines.push(Some(line));
            }
            (Some(a), None) if a.first().is_some_and(|w| !w.is_empty() && is_directive(w)) => {
                lines.push(Some(line))
            }
            _ => lines.push(Some(format!("# ??? {line}"))),
        }
    }
    let def = Config::default();
    for param in super::PARAMS.iter() {
        let n = Named { param, alias: false };
        for (line, force) in rewrite_lines(cfg, &def, n) {
            if let Some(at) = by_option.get_mut(param.name).and_then(|q| q.pop_front()) {
                lines[at] = Some(line);
            } else if force || force_all {
                if needs_signature {
                    lines.push(Some(SIGNATURE.to_string()));
                    needs_signature = false;
                }
                lines.push(Some(line));
            }
        }
    }
    for line in users {
        if let Some(at) = by_option.get_mut("user").and_then(|q| q.pop_front()) {
            lines[at] = Some(line.clone());
        } else {
            if needs_signature {
                lines.push(Some(SIGNATURE.to_string()));
                needs_signature = false;
            }
            lines.push(Some(line.clone()));
        }
    }
    // Lines of parameters that are now written fewer times are blanked.
    for q in by_option.values() {
        for &at in q {
            lines[at] = Some(String::new());
        }
    }
    // Every run of empty lines becomes one, as Redis writes the file.
    let mut out = String::new();
    let mut was_empty = false;
    for l in lines.into_iter().flatten() {
        if l.is_empty() && std::mem::replace(&mut was_empty, true) {
            continue;
        }
        was_empty = was_empty && l.is_empty();
        out.push_str(&l);
        out.push('\n');
    }
    let tmp = format!("{path}.tmp-{}", std::process::id());
    std::fs::write(&tmp, out).map_err(|e| os_error_text(&e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        os_error_text(&e)
    })
}

/// Directives that are not parameters but that a file may hold.
fn is_directive(w: &[u8]) -> bool {
    let w = w.to_ascii_lowercase();
    matches!(w.as_slice(), b"include" | b"rename-command" | b"user" | b"loadmodule" | b"sentinel")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subsystems::config::ObufLimit;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn split_args_like_sdssplitargs() {
        let w = |s: &str| {
            split_args(s.as_bytes()).map(|v| {
                v.into_iter().map(|x| String::from_utf8_lossy(&x).into_owned()).collect::<Vec<_>>()
            })
        };
        assert_eq!(w("save 900 1"), Some(args(&["save", "900", "1"])));
        assert_eq!(w("  a \"b c\" 'd e'  "), Some(args(&["a", "b c", "d e"])));
        assert_eq!(w(r#"x "\x41\n""#), Some(args(&["x", "A\n"])));
        assert_eq!(w(r"x 'it\'s'"), Some(args(&["x", "it's"])));
        assert_eq!(w("x \"unterminated"), None);
        assert_eq!(w("x \"a\"b"), None);
        assert_eq!(w("save \"\""), Some(args(&["save", ""])));
    }

    fn bad_line(text: &str) -> ConfigError {
        let mut c = Config::default();
        load_text(&mut c, text.as_bytes(), &mut LoadState::new(crate::commands::table()))
            .unwrap_err()
    }

    // Texts from `redis-server /tmp/bad.conf` (7.0.15).
    #[test]
    fn fatal_messages() {
        assert_eq!(
            bad_line("port 7001\nfoo bar\n").to_string(),
            "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, \
             at line 2\n>>> 'foo bar'\nBad directive or wrong number of arguments\n"
        );
        let e = bad_line("port 7001\nmaxmemory abc\n");
        assert!(e.to_string().ends_with(">>> 'maxmemory abc'\nargument must be a memory value\n"));
        let e = bad_line("port 7001\nport\n");
        assert!(e.to_string().ends_with(">>> 'port'\nwrong number of arguments\n"));
        let e = bad_line("appendonly maybe\n");
        assert!(e.to_string().ends_with("argument must be 'yes' or 'no'\n"));
        let e = bad_line("maxmemory-policy foo\n");
        assert!(e.to_string().ends_with(
            "argument(s) must be one of the following: volatile-lru, volatile-lfu, \
             volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\n"
        ));
    }

    #[test]
    fn flags_follow_the_file() {
        // `redis-server --port 7001 --foo bar` reports line 3 as 'foo "bar"'.
        let e = from_args(&args(&["--port", "7001", "--foo", "bar"]), crate::commands::table())
            .unwrap_err();
        assert_eq!(
            e,
            ConfigError::Line {
                line_no: 3,
                line: "foo \"bar\"".into(),
                msg: "Bad directive or wrong number of arguments".into()
            }
        );
        let e =
            from_args(&args(&["--port", "7001", "--maxmemory", "1x"]), crate::commands::table())
                .unwrap_err();
        assert!(e.to_string().contains(">>> 'maxmemory \"1x\"'"));
        let c = from_args(
            &args(&["--port", "7001", "--save", "", "--appendonly", "yes"]),
            crate::commands::table(),
        )
        .unwrap();
        assert_eq!((c.port, c.save.is_empty(), c.appendonly), (7001, true, true));
        let c = from_args(&args(&["--save", "--port", "1"]), crate::commands::table()).unwrap();
        assert!(c.save.is_empty());
        assert_eq!(c.port, 1);
        let c = from_args(
            &args(&["--save", "60", "1", "--maxmemory", "1gb"]),
            crate::commands::table(),
        )
        .unwrap();
        assert_eq!(c.save, vec![(60, 1)]);
        assert_eq!(c.maxmemory, 1 << 30);
        let c =
            from_args(&args(&["--bind", "127.0.0.1", "::1"]), crate::commands::table()).unwrap();
        assert_eq!(c.bind, vec!["127.0.0.1".to_string(), "::1".to_string()]);
        let c = from_args(&args(&["--port 7002"]), crate::commands::table()).unwrap();
        assert_eq!(c.port, 7002);
    }

    #[test]
    fn file_with_include_and_save_lines() {
        let dir = std::env::temp_dir().join(format!("sluice-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let inc = dir.join("inc.conf");
        std::fs::write(&inc, "maxmemory 100mb\nhash-max-ziplist-entries 7\n").unwrap();
        let main = dir.join("main.conf");
        std::fs::write(
            &main,
            format!(
                "# comment\n  port 7100  \nsave 900 1\nsave 300 10\ninclude {}\n\
                 list-max-ziplist-entries 5\nrequirepass \"p w\"\nclient-output-buffer-limit pubsub 1mb 2mb 3\n",
                inc.display()
            ),
        )
        .unwrap();
        let c = load_file(main.to_str().unwrap(), crate::commands::table()).unwrap();
        assert_eq!(c.port, 7100);
        assert_eq!(c.save, vec![(900, 1), (300, 10)]);
        assert_eq!(c.maxmemory, 100 << 20);
        assert_eq!(c.hash_max_listpack_entries, 7);
        assert_eq!(c.requirepass.as_deref(), Some(&b"p w"[..]));
        assert_eq!(c.obuf_pubsub, ObufLimit { hard: 1 << 20, soft: 2 << 20, soft_seconds: 3 });
        assert_eq!(c.config_file, main.to_str().unwrap());
        let missing = load_file("/nonexistent/x.conf", crate::commands::table()).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "Fatal error, can't open config file '/nonexistent/x.conf': No such file or directory"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rewrite_like_redis() {
        // Redis 7.0.15 turned this file, after CONFIG SET maxmemory 200mb
        // timeout 5 client-output-buffer-limit "pubsub 1mb 2mb 3", into the
        // expected text below (its extra pidfile/user/latency lines aside).
        let dir = std::env::temp_dir().join(format!("sluice-rw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rw.conf");
        std::fs::write(
            &path,
            "port 7651\nsave 900 1\nmaxmemory 100mb\n# hello\nhash-max-ziplist-entries 10\n\
             slave-read-only yes\nmaxmemory 5mb\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let mut c = load_file(p, crate::commands::table()).unwrap();
        c.maxmemory = 200 << 20;
        c.timeout = 5;
        c.obuf_pubsub = ObufLimit { hard: 1 << 20, soft: 2 << 20, soft_seconds: 3 };
        rewrite(&c, p, &[]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "port 7651\nsave 900 1\nmaxmemory 200mb\n# hello\nhash-max-listpack-entries 10\n\
             replica-read-only yes\n\n# Generated by CONFIG REWRITE\n\
             timeout 5\nclient-output-buffer-limit pubsub 1mb 2mb 3\n"
        );
        assert_eq!(load_file(p, crate::commands::table()).unwrap().maxmemory, 200 << 20);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
