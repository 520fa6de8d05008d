//! COMMAND and its subcommands, and `docs/commands.md`, all generated from
//! the command table, in Redis 7.0's reply shapes.
//!
//! What the table does not track is derived or left out, and that is where
//! replies can differ from Redis's:
//! - ACL categories come from the flags and the group, as Redis's implicit
//!   rules do; explicit extra categories of a Redis command (e.g.
//!   `@dangerous` on INFO) are not known.
//! - Key specs are derived from the (first, last, step) range: `RO access`
//!   for read-only commands, `RW update` for writes; Redis's finer flags
//!   (`OW`, `RM`, `insert`, `delete`, ...) are not tracked. Keys found by a
//!   function are reported with `unknown` search and find specs.
//! - Command tips, argument lists and history are not tracked: tips are
//!   empty, `COMMAND DOCS` has no `arguments`/`history` fields.

use resp::ReplyBuf;

use crate::commands;
use crate::ctx::{eq_ic, Args, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::spec::{CommandSpec, Flags, Group, KeyList, KeySpec};

const LS: Flags = Flags::LOADING.union(Flags::STALE);

pub const COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "COMMAND",
    -1,
    LS,
    KeySpec::None,
    Group::Server,
    "Get array of Redis command details",
    command_all,
)
.since("2.8.13")
.complexity("O(N) where N is the total number of Redis commands")
.subs(&[
    CommandSpec::new(
        "COUNT",
        2,
        LS,
        KeySpec::None,
        Group::Server,
        "Get total number of Redis commands",
        command_count,
    )
    .since("2.8.13")
    .complexity("O(1)"),
    CommandSpec::new(
        "DOCS",
        -2,
        LS,
        KeySpec::None,
        Group::Server,
        "Get array of specific Redis command documentation",
        command_docs,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the number of commands to look up"),
    CommandSpec::new(
        "GETKEYS",
        -4,
        LS,
        KeySpec::None,
        Group::Server,
        "Extract keys given a full Redis command",
        command_getkeys,
    )
    .since("2.8.13")
    .complexity("O(N) where N is the number of arguments to the command"),
    CommandSpec::new(
        "GETKEYSANDFLAGS",
        -4,
        LS,
        KeySpec::None,
        Group::Server,
        "Extract keys and access flags given a full Redis command",
        command_getkeysandflags,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the number of arguments to the command"),
    CommandSpec::new(
        "HELP",
        2,
        LS,
        KeySpec::None,
        Group::Server,
        "Show helpful text about the different subcommands",
        command_help,
    )
    .since("5.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "INFO",
        -2,
        LS,
        KeySpec::None,
        Group::Server,
        "Get array of specific Redis command details, or all when no argument is given.",
        command_info,
    )
    .since("2.8.13")
    .complexity("O(N) where N is the number of commands to look up"),
    CommandSpec::new(
        "LIST",
        -2,
        LS,
        KeySpec::None,
        Group::Server,
        "Get an array of Redis command names",
        command_list,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the total number of Redis commands"),
])];

/// ACL categories in the order Redis prints them.
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The category a group implies, as the commands' JSON files give it.
fn group_category(g: Group) -> Option<&'static str> {
    Some(match g {
        Group::Generic => "keyspace",
        Group::String => "string",
        Group::List => "list",
        Group::Set => "set",
        Group::SortedSet => "sortedset",
        Group::Hash => "hash",
        Group::Transactions => "transaction",
        Group::Connection => "connection",
        Group::Scripting => "scripting",
        Group::Hyperloglog => "hyperloglog",
        Group::Geo => "geo",
        Group::Stream => "stream",
        Group::Bitmap => "bitmap",
        // @pubsub comes from the PUBSUB flag (PUBSUB HELP has none).
        Group::Server | Group::Cluster | Group::Queue | Group::Pubsub => return None,
    })
}

/// ACL categories of a command: its group's, plus Redis's implicit ones
/// from the flags (`setImplicitACLCategories`).
pub fn acl_categories(spec: &CommandSpec) -> Vec<&'static str> {
    let f = spec.flags;
    let mut has = vec![];
    has.extend(group_category(spec.group));
    if f.has(Flags::WRITE) {
        has.push("write");
    }
    if f.has(Flags::READONLY) && spec.group != Group::Scripting {
        has.push("read");
    }
    if f.has(Flags::ADMIN) {
        has.extend(["admin", "dangerous"]);
    }
    if f.has(Flags::PUBSUB) {
        has.push("pubsub");
    }
    if f.has(Flags::FAST) {
        has.push("fast");
    } else {
        has.push("slow");
    }
    if f.has(Flags::BLOCKING) {
        has.push("blocking");
    }
    CATEGORIES.iter().copied().filter(|c| has.contains(c)).collect()
}

/// Flag names as COMMAND INFO prints them (`movablekeys` added for keys
/// found by a function, as Redis derives it).
pub fn flag_names(spec: &CommandSpec) -> Vec<&'static str> {
    let mut f = spec.flags;
    if matches!(spec.keys, KeySpec::Custom { .. } | KeySpec::CustomOrDb { .. }) {
        f = f.union(Flags::MOVABLEKEYS);
    }
    Flags::NAMES.iter().filter(|(fl, _)| f.has(*fl)).map(|(_, n)| *n).collect()
}

/// Lower-case full name: `get`, `config|get`.
fn full_name(parent: Option<&CommandSpec>, spec: &CommandSpec) -> String {
    match parent {
        Some(p) => format!("{}|{}", p.name.to_ascii_lowercase(), spec.name.to_ascii_lowercase()),
        None => spec.name.to_ascii_lowercase(),
    }
}

/// `addReplySetLen`: a set in RESP3, an array in RESP2.
fn set_len(out: &mut ReplyBuf, n: usize) {
    out.set(n);
}

fn key_spec_flags(spec: &CommandSpec) -> &'static [&'static str] {
    if spec.flags.has(Flags::PUBSUB) {
        // Shard channels: keys only for cluster routing.
        &["not_key"]
    } else if spec.flags.has(Flags::WRITE) {
        &["RW", "update"]
    } else {
        &["RO", "access"]
    }
}

fn reply_key_specs(out: &mut ReplyBuf, spec: &CommandSpec) {
    let range = match spec.keys {
        KeySpec::Range { first, last, step } if first > 0 => Some((first, last, step)),
        KeySpec::Custom { .. } | KeySpec::CustomOrDb { .. } => None,
        _ => {
            set_len(out, 0);
            return;
        }
    };
    set_len(out, 1);
    out.map(3);
    out.bulk(b"flags");
    let flags = key_spec_flags(spec);
    set_len(out, flags.len());
    for f in flags {
        out.simple(f.as_bytes());
    }
    match range {
        Some((first, last, step)) => {
            out.bulk(b"begin_search");
            out.map(2);
            out.bulk(b"type");
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.int(first as i64);
            out.bulk(b"find_keys");
            out.map(2);
            out.bulk(b"type");
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.int(if last < 0 { last as i64 } else { (last - first) as i64 });
            out.bulk(b"keystep");
            out.int(step as i64);
            out.bulk(b"limit");
            out.int(0);
        }
        None => {
            for part in [&b"begin_search"[..], b"find_keys"] {
                out.bulk(part);
                out.map(2);
                out.bulk(b"type");
                out.bulk(b"unknown");
                out.bulk(b"spec");
                out.map(0);
            }
        }
    }
}

/// One COMMAND INFO entry (10 fields), subcommands nested.
fn reply_info(out: &mut ReplyBuf, parent: Option<&CommandSpec>, spec: &CommandSpec) {
    out.array(10);
    out.bulk(full_name(parent, spec).as_bytes());
    out.int(spec.arity.0 as i64);
    let flags = flag_names(spec);
    set_len(out, flags.len());
    for f in flags {
        out.simple(f.as_bytes());
    }
    let (first, last, step) = spec.keys.legacy();
    out.int(first as i64);
    out.int(last as i64);
    out.int(step as i64);
    let cats = acl_categories(spec);
    set_len(out, cats.len());
    for c in cats {
        out.simple(format!("@{c}").as_bytes());
    }
    set_len(out, 0); // tips
    reply_key_specs(out, spec);
    if spec.subcommands.is_empty() {
        set_len(out, 0);
    } else {
        out.array(spec.subcommands.len());
        for s in spec.subcommands {
            reply_info(out, Some(spec), s);
        }
    }
}

/// One COMMAND DOCS value: a map of summary, since, group, complexity and
/// subcommands.
fn reply_docs(out: &mut ReplyBuf, spec: &CommandSpec) {
    let n =
        3 + usize::from(!spec.complexity.is_empty()) + usize::from(!spec.subcommands.is_empty());
    out.map(n);
    out.bulk(b"summary");
    out.bulk(spec.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(spec.since.as_bytes());
    out.bulk(b"group");
    out.bulk(spec.group.name().as_bytes());
    if !spec.complexity.is_empty() {
        out.bulk(b"complexity");
        out.bulk(spec.complexity.as_bytes());
    }
    if !spec.subcommands.is_empty() {
        out.bulk(b"subcommands");
        out.map(spec.subcommands.len());
        for s in spec.subcommands {
            out.bulk(full_name(Some(spec), s).as_bytes());
            reply_docs(out, s);
        }
    }
}

/// Finds `name` or `container|sub`, ignoring case.
fn find_full(name: &[u8]) -> Option<(Option<&'static CommandSpec>, &'static CommandSpec)> {
    match name.iter().position(|&c| c == b'|') {
        None => commands::find(name).map(|s| (None, s)),
        Some(i) => {
            let top = commands::find(&name[..i])?;
            let sub = &name[i + 1..];
            let s = top.subcommands.iter().find(|s| sub.eq_ignore_ascii_case(s.name.as_bytes()))?;
            Some((Some(top), s))
        }
    }
}

fn command_all(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.array(commands::all().count());
    for spec in commands::all() {
        reply_info(out, None, spec);
    }
    Ok(())
}

fn command_count(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.int(commands::all().count() as i64);
    Ok(())
}

fn command_info(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if args.is_empty() {
        return command_all(cx, args, out);
    }
    out.array(args.remaining());
    for name in args.rest() {
        match find_full(name) {
            Some((parent, spec)) => reply_info(out, parent, spec),
            None => out.null_array(),
        }
    }
    Ok(())
}

fn command_docs(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if args.is_empty() {
        out.map(commands::all().count());
        for spec in commands::all() {
            out.bulk(full_name(None, spec).as_bytes());
            reply_docs(out, spec);
        }
        return Ok(());
    }
    let found: Vec<_> = args.rest().iter().filter_map(|n| find_full(n)).collect();
    out.map(found.len());
    for (parent, spec) in found {
        out.bulk(full_name(parent, spec).as_bytes());
        reply_docs(out, spec);
    }
    Ok(())
}

/// Every command and subcommand, with its container.
fn every() -> impl Iterator<Item = (Option<&'static CommandSpec>, &'static CommandSpec)> {
    commands::all().flat_map(|top| {
        std::iter::once((None, top)).chain(top.subcommands.iter().map(move |s| (Some(top), s)))
    })
}

fn command_list(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let rest = args.rest();
    let filter: Option<(&[u8], &[u8])> = match rest {
        [] => None,
        [by, kind, arg] if eq_ic(by, "FILTERBY") => Some((kind, arg)),
        _ => return Err(CmdError::Syntax),
    };
    let names: Vec<String> = every()
        .filter(|(parent, spec)| match filter {
            None => true,
            Some((kind, arg)) if eq_ic(kind, "MODULE") => {
                let _ = arg;
                false
            }
            Some((kind, arg)) if eq_ic(kind, "ACLCAT") => {
                acl_categories(spec).iter().any(|c| c.as_bytes().eq_ignore_ascii_case(arg))
            }
            Some((kind, arg)) if eq_ic(kind, "PATTERN") => {
                crate::glob::matches(arg, full_name(*parent, spec).as_bytes(), true)
            }
            Some(_) => false,
        })
        .map(|(parent, spec)| full_name(parent, spec))
        .collect();
    if let Some((kind, _)) = filter {
        if !["MODULE", "ACLCAT", "PATTERN"].iter().any(|k| eq_ic(kind, k)) {
            return Err(CmdError::Syntax);
        }
    }
    out.array(names.len());
    for n in names {
        out.bulk(n.as_bytes());
    }
    Ok(())
}

/// Keys of a full command line (`COMMAND GETKEYS`), with Redis's errors.
fn keys_of<'a>(argv: &'a [&'a [u8]]) -> Result<(&'static CommandSpec, KeyList<'a>), CmdError> {
    let top = commands::find(argv[0]);
    let spec = match top {
        Some(t) if !t.subcommands.is_empty() && argv.len() >= 2 => {
            t.subcommands.iter().find(|s| argv[1].eq_ignore_ascii_case(s.name.as_bytes()))
        }
        other => other,
    }
    .ok_or_else(|| CmdError::err("Invalid command specified"))?;
    let has_keys = match spec.keys {
        // Shard channels are declared as keys for cluster routing only
        // (not_key): Redis finds no keys in them.
        KeySpec::Range { .. } if spec.flags.has(Flags::PUBSUB) => false,
        KeySpec::Range { first, .. } => first > 0,
        KeySpec::Custom { .. } | KeySpec::CustomOrDb { .. } => true,
        _ => false,
    };
    if !has_keys {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !spec.arity.accepts(argv.len()) {
        return Err(CmdError::err("Invalid number of arguments specified for command"));
    }
    let mut keys = KeyList::new();
    match spec.keys {
        KeySpec::Range { first, last, step } => {
            let argc = argv.len() as i32;
            let last = if last < 0 { argc + last } else { last.min(argc - 1) };
            let mut i = first;
            while i <= last && i < argc {
                keys.push((0, argv[i as usize]));
                i += step.max(1);
            }
        }
        KeySpec::Custom { find, .. } | KeySpec::CustomOrDb { find, .. } => find(argv, 0, &mut keys),
        _ => {}
    }
    if keys.is_empty() && !spec.flags.has(Flags::NO_MANDATORY_KEYS) {
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    Ok((spec, keys))
}

fn command_getkeys(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (_, keys) = keys_of(args.rest())?;
    out.array(keys.len());
    for (_, k) in keys {
        out.bulk(k);
    }
    Ok(())
}

fn command_getkeysandflags(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (spec, keys) = keys_of(args.rest())?;
    let flags = key_spec_flags(spec);
    out.array(keys.len());
    for (_, k) in keys {
        out.array(2);
        out.bulk(k);
        set_len(out, flags.len());
        for f in flags {
            out.simple(f.as_bytes());
        }
    }
    Ok(())
}

fn command_help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    super::server::reply_help(
        out,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

/// `docs/commands.md`: every command and subcommand by group, from the
/// table.
pub fn markdown() -> String {
    let mut all: Vec<_> = every().collect();
    all.sort_by(|a, b| {
        (a.1.group.name(), full_name(a.0, a.1)).cmp(&(b.1.group.name(), full_name(b.0, b.1)))
    });
    let mut s = String::from(
        "# Commands\n\n\
         Generated from the command table by `engine::commands::markdown()`; do not edit.\n\
         Regenerate with `SLUICE_BLESS=1 cargo test -p engine`.\n",
    );
    let mut group = "";
    for (parent, spec) in all {
        if spec.group.name() != group {
            group = spec.group.name();
            s.push_str(&format!(
                "\n## {group}\n\n\
                 | Command | Arity | Flags | ACL categories | Since | Complexity | Summary |\n\
                 |---|---|---|---|---|---|---|\n"
            ));
        }
        let name = full_name(parent, spec).replace('|', " ").to_ascii_uppercase();
        let cats: Vec<String> = acl_categories(spec).iter().map(|c| format!("@{c}")).collect();
        let esc = |t: &str| t.replace('|', "\\|");
        s.push_str(&format!(
            "| `{name}` | {} | {} | {} | {} | {} | {} |\n",
            spec.arity.0,
            flag_names(spec).join(", "),
            cats.join(" "),
            spec.since,
            esc(spec.complexity),
            esc(spec.summary),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;

    // Replies below are redis-server 7.0.15's.
    #[test]
    fn info_entries() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["COMMAND", "INFO", "get"]),
            "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
             *3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n\
             +access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n\
             *2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n\
             $4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"
        );
        assert_eq!(h.run(&["COMMAND", "INFO", "nosuch"]), "*1\r\n*-1\r\n");
        assert_eq!(
            h.run(&["COMMAND", "INFO", "config|get"]),
            "*1\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n*4\r\n+admin\r\n+noscript\r\n+loading\r\n\
             +stale\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*0\r\n*0\r\n*0\r\n"
        );
        let config = h.run(&["COMMAND", "INFO", "config"]);
        assert!(config.starts_with(
            "*1\r\n*10\r\n$6\r\nconfig\r\n:-2\r\n*0\r\n:0\r\n:0\r\n:0\r\n*1\r\n+@slow\r\n*0\r\n*0\r\n*5\r\n"
        ));
    }

    #[test]
    fn docs_list_getkeys() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["COMMAND", "DOCS", "get"]),
            "*2\r\n$3\r\nget\r\n*8\r\n$7\r\nsummary\r\n$22\r\nGet the value of a key\r\n\
             $5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n"
        );
        assert_eq!(h.run(&["COMMAND", "DOCS", "nosuch"]), "*0\r\n");
        assert_eq!(
            h.run(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "c*g|g*"]),
            "*1\r\n$10\r\nconfig|get\r\n"
        );
        assert_eq!(h.run(&["COMMAND", "LIST", "FILTERBY", "MODULE", "foo"]), "*0\r\n");
        assert_eq!(h.run(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "foo"]), "*0\r\n");
        assert_eq!(h.run(&["COMMAND", "LIST", "FILTERBY", "foo", "x"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["COMMAND", "LIST", "FILTERBY"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["COMMAND", "LIST", "foo"]), "-ERR syntax error\r\n");
        assert_eq!(h.run(&["COMMAND", "GETKEYS", "set", "a", "b"]), "*1\r\n$1\r\na\r\n");
        assert_eq!(
            h.run(&["COMMAND", "GETKEYS", "ping"]),
            "-ERR wrong number of arguments for 'command|getkeys' command\r\n"
        );
        assert_eq!(
            h.run(&["COMMAND", "GETKEYS", "ping", "x"]),
            "-ERR The command has no key arguments\r\n"
        );
        assert_eq!(
            h.run(&["COMMAND", "GETKEYS", "foo", "a"]),
            "-ERR Invalid command specified\r\n"
        );
        assert_eq!(
            h.run(&["COMMAND", "GETKEYS", "get", "a", "b"]),
            "-ERR Invalid number of arguments specified for command\r\n"
        );
        assert_eq!(
            h.run(&["COMMAND", "FOO"]),
            "-ERR unknown subcommand 'FOO'. Try COMMAND HELP.\r\n"
        );
        let help = h.run(&["COMMAND", "HELP"]);
        assert!(help.starts_with(
            "*21\r\n+COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+(no subcommand)\r\n"
        ));
        let count = h.run(&["COMMAND", "COUNT"]);
        assert_eq!(count, format!(":{}\r\n", crate::commands::all().count()));
    }

    #[test]
    fn resp3_shapes() {
        let mut h = Harness::new();
        let mut out = resp::ReplyBuf::new();
        out.proto = resp::Proto::Resp3;
        let argv: Vec<&[u8]> = vec![b"COMMAND", b"INFO", b"get"];
        crate::execute(&h.shared, &mut h.sess, &argv, &mut out);
        // Redis 7.0.15 after HELLO 3 (flags, categories, tips, key specs
        // and empty subcommands are sets; spec parts are maps).
        assert_eq!(
            String::from_utf8(out.to_vec()).unwrap().replace("\r\n", " "),
            "*1 *10 $3 get :2 ~2 +readonly +fast :1 :1 :1 ~3 +@read +@string +@fast ~0 ~1 %3 \
             $5 flags ~2 +RO +access $12 begin_search %2 $4 type $5 index $4 spec %1 $5 index :1 \
             $9 find_keys %2 $4 type $5 range $4 spec %3 $7 lastkey :0 $7 keystep :1 $5 limit :0 ~0 "
        );
        let mut out = resp::ReplyBuf::new();
        out.proto = resp::Proto::Resp3;
        let argv: Vec<&[u8]> = vec![b"COMMAND", b"DOCS", b"nosuch"];
        crate::execute(&h.shared, &mut h.sess, &argv, &mut out);
        assert_eq!(out.to_vec(), b"%0\r\n");
    }

    /// docs/commands.md must match the table.
    #[test]
    fn commands_md_is_fresh() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/commands.md");
        let want = super::markdown();
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/commands.md is stale: regenerate it with `SLUICE_BLESS=1 cargo test -p engine`"
        );
    }
}
