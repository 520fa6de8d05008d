//! COMMAND and its subcommands, and `docs/commands.md`, generated from the
//! command table and Redis 7.0's metadata ([`crate::core::meta`]), in Redis
//! 7.0's reply shapes.
//!
//! Only what the table implements is listed (`COMMAND`, `COUNT`, `INFO`,
//! `DOCS`, `LIST`, and a container's subcommands); each entry's content is
//! Redis's own metadata for it, or for a command Sluice adds (the job
//! queue), Sluice's in the same shape ([`crate::core::meta::sluice`]).

use resp::ReplyBuf;

use crate::commands;
use crate::core::ctx::{eq_ic, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::meta;
use crate::core::spec::{Command, CommandSpec, Flags};
use crate::core::table::Entry;

pub const COMMANDS: &[Command] = &[Command::redis("COMMAND", command_all).subs(&[
    Command::redis("COUNT", command_count),
    Command::redis("DOCS", command_docs),
    Command::redis("GETKEYS", command_getkeys),
    Command::redis("GETKEYSANDFLAGS", command_getkeysandflags),
    Command::redis("HELP", command_help),
    Command::redis("INFO", command_info),
    Command::redis("LIST", command_list),
])];

/// Every command, each followed by its subcommands, in table order.
pub fn table() -> &'static [Entry] {
    commands::table().entries()
}

/// The table's entry for a command line's command (`name` or
/// `container|sub`), ignoring case.
pub fn entry_by_name(name: &[u8]) -> Option<&'static Entry> {
    commands::table().entry_by_name(name)
}

/// The entry of a (top, spec) pair from the table.
pub fn entry_of(top: &CommandSpec, spec: &CommandSpec) -> Option<&'static Entry> {
    commands::table().entry_of(top, spec)
}

/// Top-level entries.
fn tops() -> impl Iterator<Item = &'static Entry> {
    table().iter().filter(|e| std::ptr::eq(e.top, e.spec))
}

fn command_all(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let n = tops().count();
    out.array(n);
    for e in tops() {
        meta::reply_info(out, e.meta, &e.sub_metas());
    }
    Ok(())
}

fn command_count(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.int(tops().count() as i64);
    Ok(())
}

fn command_info(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if args.is_empty() {
        return command_all(cx, args, out);
    }
    out.array(args.remaining());
    for name in args.rest() {
        match entry_by_name(name) {
            Some(e) => meta::reply_info(out, e.meta, &e.sub_metas()),
            None => out.null(),
        }
    }
    Ok(())
}

fn command_docs(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let found: Vec<&Entry> = if args.is_empty() {
        tops().collect()
    } else {
        args.rest().iter().filter_map(|n| entry_by_name(n)).collect()
    };
    out.map(found.len());
    for e in found {
        out.bulk(e.name().as_bytes());
        meta::reply_docs(out, e.meta, &e.sub_metas());
    }
    Ok(())
}

fn command_list(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let rest = args.rest();
    let filter: Option<(&[u8], &[u8])> = match rest {
        [] => None,
        [by, kind, arg] if eq_ic(by, "FILTERBY") => Some((kind, arg)),
        _ => return Err(CmdError::Syntax),
    };
    if let Some((kind, _)) = filter {
        if !["MODULE", "ACLCAT", "PATTERN"].iter().any(|k| eq_ic(kind, k)) {
            return Err(CmdError::Syntax);
        }
    }
    let names: Vec<&str> = table()
        .iter()
        .filter(|e| match filter {
            None => true,
            // No modules: nothing belongs to one.
            Some((kind, _)) if eq_ic(kind, "MODULE") => false,
            Some((kind, arg)) if eq_ic(kind, "ACLCAT") => e.meta.in_category(arg),
            Some((_, arg)) => crate::subsystems::glob::matches(arg, e.name().as_bytes(), true),
        })
        .map(|e| e.name())
        .collect();
    out.array(names.len());
    for n in names {
        out.bulk(n.as_bytes());
    }
    Ok(())
}

/// The entry and keys of a full command line (`COMMAND GETKEYS`), with
/// Redis's errors.
fn keys_of(argv: &[&[u8]]) -> Result<Vec<meta::KeyRef>, CmdError> {
    let top = commands::find(argv[0]);
    let spec = match top {
        Some(t) if !t.subcommands.is_empty() && argv.len() >= 2 => {
            t.subcommands.iter().find(|s| argv[1].eq_ignore_ascii_case(s.name.as_bytes()))
        }
        other => other,
    }
    .ok_or_else(|| CmdError::err("Invalid command specified"))?;
    let e = entry_of(top.unwrap_or(spec), spec)
        .ok_or_else(|| CmdError::err("Invalid command specified"))?;
    let m = e.meta;
    if !m.has_keys() {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !spec.arity.accepts(argv.len()) {
        return Err(CmdError::err("Invalid number of arguments specified for command"));
    }
    match meta::get_keys(m, argv) {
        Some(keys) => Ok(keys),
        None if spec.flags.has(Flags::NO_MANDATORY_KEYS) => Ok(vec![]),
        None => Err(CmdError::err("Invalid arguments specified for command")),
    }
}

fn command_getkeys(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.rest();
    let keys = keys_of(argv)?;
    out.array(keys.len());
    for k in keys {
        out.bulk(argv[k.pos]);
    }
    Ok(())
}

fn command_getkeysandflags(_: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.rest();
    let keys = keys_of(argv)?;
    out.array(keys.len());
    for k in keys {
        out.array(2);
        out.bulk(argv[k.pos]);
        meta::reply_key_flags(out, k.flags);
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
    let mut all: Vec<&Entry> = table().iter().collect();
    all.sort_by_key(|e| (e.meta.group.name(), e.name()));
    let mut s = String::from(
        "# Commands\n\n\
         Generated from the command table and Redis 7.0's metadata by\n\
         `engine::commands::markdown()`; do not edit.\n\
         Regenerate with `SLUICE_BLESS=1 cargo test -p engine`.\n",
    );
    let mut group = "";
    for e in all {
        let m = e.meta;
        if m.group.name() != group {
            group = m.group.name();
            s.push_str(&format!(
                "\n## {group}\n\n\
                 | Command | Arity | Flags | ACL categories | Since | Complexity | Summary |\n\
                 |---|---|---|---|---|---|---|\n"
            ));
        }
        let name = e.name().replace('|', " ").to_ascii_uppercase();
        let cats: Vec<String> = m.categories().map(|c| format!("@{c}")).collect();
        let flags: Vec<&str> = Flags::NAMES
            .iter()
            .filter(|(f, _)| Flags(u64::from(m.flags)).has(*f))
            .map(|(_, n)| *n)
            .collect();
        let esc = |t: &str| t.replace('|', "\\|");
        s.push_str(&format!(
            "| `{name}` | {} | {} | {} | {} | {} | {} |\n",
            m.arity,
            flags.join(", "),
            cats.join(" "),
            m.since,
            esc(m.complexity.unwrap_or("")),
            esc(m.summary),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::core::spec::{Flags, Group, KeySpec};
    use crate::tests::Harness;

    /// What a declaration still says beside the metadata agrees with it:
    /// every command Redis finds by a function of its arguments
    /// (`movablekeys`) is declared with a key finder, and the locks that
    /// take no key range (whole database) are only declared for commands
    /// whose metadata has none. The job queue's commands lock the job
    /// namespace whatever their key specs say: those (queue names, job
    /// ids) route them in a cluster and name them to the ACL.
    #[test]
    fn declarations_agree_with_metadata() {
        let mut bad = vec![];
        for e in super::table() {
            let (m, keys) = (e.meta, e.spec.keys);
            let movable = u64::from(m.flags) & Flags::MOVABLEKEYS.0 != 0;
            let custom = matches!(keys, KeySpec::Custom { .. } | KeySpec::CustomOrDb { .. });
            let jobs = matches!(keys, KeySpec::Jobs);
            if movable && !custom && !jobs {
                bad.push(format!("{}: movable keys locked as a fixed range", e.name()));
            }
            let rangeless = matches!(keys, KeySpec::WholeDb | KeySpec::DbWalk | KeySpec::AllDbs);
            if rangeless && (m.first, m.last, m.step) != (0, 0, 0) {
                bad.push(format!("{}: its metadata has a key range", e.name()));
            }
            if matches!(keys, KeySpec::Jobs) != (m.group == Group::Queue) {
                bad.push(format!("{}: only the job queue locks the job namespace", e.name()));
            }
        }
        assert!(bad.is_empty(), "{} differences:\n{}", bad.len(), bad.join("\n"));
    }

    /// A built spec takes Redis 7.0.15's facts: `COMMAND INFO get` says
    /// arity 2, readonly and fast, key range (1, 1, 1).
    #[test]
    fn built_specs_take_the_metadata() {
        let get = crate::commands::find(b"get").unwrap();
        assert_eq!(get.arity.0, 2);
        assert_eq!(get.flags, Flags::READONLY.union(Flags::FAST));
        assert!(matches!(get.keys, KeySpec::Range { first: 1, last: 1, step: 1 }));
        let quit = crate::commands::find(b"quit").unwrap();
        let own = Flags::NO_QUEUE.union(Flags::NO_PAUSE).union(Flags::PUBSUB_CONTEXT);
        assert_eq!(quit.flags, Flags(u64::from(quit.meta().flags)).union(own));
    }

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
        assert_eq!(h.run(&["COMMAND", "INFO", "nosuch"]), "*1\r\n$-1\r\n");
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
            "*2\r\n$3\r\nget\r\n*10\r\n$7\r\nsummary\r\n$22\r\nGet the value of a key\r\n\
             $5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n\
             $9\r\narguments\r\n*1\r\n*6\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n\
             $14\r\nkey_spec_index\r\n:0\r\n"
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
