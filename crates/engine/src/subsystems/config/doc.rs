//! `docs/config.md`, generated from the parameter table: every parameter
//! with its alias, kind, default, whether CONFIG SET may change it, and
//! whether Sluice acts on it (or why not). A test keeps the file in step.

use super::pflags::*;
use super::{Config, Named, Slot, Ty, PARAMS};

fn kind(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "yes/no".into(),
        Ty::Int { min, max, mem, pct, octal } => {
            let what = match (mem, pct, octal) {
                (_, true, _) => "memory or percent",
                (true, _, _) => "memory",
                (_, _, true) => "octal",
                _ => "integer",
            };
            let big = |v: &i128| match *v {
                v if v == i64::MAX as i128 => "LLONG_MAX".to_string(),
                v if v == u64::MAX as i128 => "ULLONG_MAX".to_string(),
                v if v == i32::MAX as i128 => "INT_MAX".to_string(),
                v if v == i32::MIN as i128 => "INT_MIN".to_string(),
                v if v == u32::MAX as i128 => "UINT_MAX".to_string(),
                v if *octal => format!("{v:o}"),
                v => v.to_string(),
            };
            format!("{what} {}..{}", big(min), big(max))
        }
        Ty::Enum(values) => values.join(" \\| "),
        Ty::Str(_) => "string".into(),
        Ty::Special(_) => "special".into(),
    }
}

/// The markdown text of `docs/config.md`.
pub fn markdown() -> String {
    let def = Config::default();
    let mut out = String::from(
        "# Configuration parameters\n\n\
         Generated from the parameter table (`crates/engine/src/subsystems/config/params.rs`); a test \
         fails when it is stale. Regenerate with `SLUICE_BLESS=1 cargo test -p engine`.\n\n\
         Every parameter of redis-server 7.0.15 is accepted with Redis's name, alias, type, \
         bounds, default and error texts, in a config file, as a `--name value` flag and \
         through `CONFIG GET/SET/REWRITE`. **In effect** says whether Sluice acts on it: a \
         parameter marked *no* (Sluice has no such mechanism) or *not yet* (a later issue builds \
         it), with the reason, is stored and reported exactly as Redis does, \
         and setting it to a value other than its default (at start-up or by CONFIG SET) logs \
         a warning that Sluice does not act on it, with the same reason \
         (`crates/engine/src/subsystems/config/effect.rs` holds the list; a test checks it against the \
         code). *hidden* parameters are left out of `CONFIG GET` patterns, as in Redis.\n\n\
         Besides parameters, a config file may hold `user <name> <rules>…` lines (ACL users, \
         applied at start-up; not together with `aclfile`, as Redis refuses: see \
         [acl.md](acl.md)), `include`, and `rename-command`, applied as Redis applies it: \
         clients, scripts, MULTI, the AOF and a master's stream call the command by its new \
         name (an empty one removes it); COMMAND and ACL keep the original names.\n\n\
         | parameter | alias | kind | default | CONFIG SET | in effect |\n\
         |---|---|---|---|---|---|\n",
    );
    for param in PARAMS.iter() {
        let n = Named { param, alias: false };
        let default = match param.slot {
            Slot::Inert(d) => d.to_string(),
            Slot::Field(..) => String::from_utf8_lossy(&def.get(n)).into_owned(),
        };
        let default = match (param.name, default.is_empty()) {
            ("dir", _) => "(working directory)".to_string(),
            (_, true) => "(empty)".to_string(),
            (_, false) => format!("`{}`", default.replace('|', "\\|")),
        };
        let set = if param.flags & IMMUTABLE != 0 {
            "no (immutable)"
        } else if param.flags & PROTECTED != 0 {
            "protected"
        } else {
            "yes"
        };
        let name = if param.flags & HIDDEN != 0 {
            format!("`{}` (hidden)", param.name)
        } else {
            format!("`{}`", param.name)
        };
        out.push_str(&format!(
            "| {name} | {} | {} | {default} | {set} | {} |\n",
            param.alias.map(|a| format!("`{a}`")).unwrap_or_default(),
            kind(&param.ty),
            match super::effect::not_in_effect(param.name) {
                None => "yes".to_string(),
                Some(why) => match why.strip_prefix("not yet in effect: ") {
                    Some(rest) => format!("not yet: {rest}"),
                    None => format!("no: {why}"),
                },
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    /// docs/config.md must match the table.
    #[test]
    fn config_md_is_fresh() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md");
        let want = super::markdown();
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/config.md is stale: regenerate it with `SLUICE_BLESS=1 cargo test -p engine`"
        );
    }
}
