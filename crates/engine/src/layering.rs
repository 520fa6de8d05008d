//! The layering rule, checked on the sources: the core (`src/core/`) and
//! the subsystems (`src/subsystems/`) never import a command family
//! (`src/commands/`). Families may use everything below them; the core
//! may use the subsystems, whose state `Shared` holds, and a subsystem
//! the core. The families' table reaches the core only as a value handed
//! to it (`Shared::with_host`, `core::table::install`).
//!
//! A file is read up to its `#[cfg(test)] mod …`: unit tests sit at the
//! bottom of their module and may build the real table
//! (`crate::commands::table()`).

use std::path::{Path, PathBuf};

/// The source folders whose files must not reach a family.
const LOWER_LAYERS: &[&str] = &["core", "subsystems"];

/// Top-level entries of `src/` besides the three layer folders.
const ROOT_FILES: &[&str] = &["lib.rs", "layering.rs", "tests.rs"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read a source folder") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code before its tests, without comment lines (prose may
/// name a family), and with all whitespace removed (so `crate ::
/// commands` or a `use` spread over lines reads as one path).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        // The tests module, not any `#[cfg(test)]` item (a test-only
        // function in the middle of a file is code like any other).
        if t.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let line = match line.find("//") {
            // A trailing comment, unless the `//` is inside a string.
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        code.extend(line.chars().filter(|c| !c.is_whitespace()));
    }
    code
}

/// How the code of a module `depth` path segments below the crate root
/// reaches a family, if it does.
fn violation(code: &str, depth: usize) -> Option<String> {
    if let Some(i) = code.find("crate::commands") {
        return Some(excerpt(code, i));
    }
    // `use crate::{commands, …}` or `crate::{commands::x, …}`.
    let mut from = 0;
    while let Some(i) = code[from..].find("crate::{") {
        let start = from + i;
        let group = &code[start..];
        let end = group.find(';').unwrap_or(group.len());
        let names = &group[..end];
        if names.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == "commands") {
            return Some(excerpt(code, start));
        }
        from = start + 8;
    }
    // `super::` repeated up to the crate root escapes the layer folder.
    let escape = "super::".repeat(depth);
    if let Some(i) = code.find(&escape) {
        return Some(excerpt(code, i));
    }
    None
}

fn excerpt(code: &str, at: usize) -> String {
    code[at..].chars().take(60).collect()
}

#[test]
fn the_core_and_the_subsystems_import_no_family() {
    let root = src();
    let mut bad = Vec::new();
    let mut checked = 0;
    for layer in LOWER_LAYERS {
        let mut files = Vec::new();
        rust_files(&root.join(layer), &mut files);
        assert!(!files.is_empty(), "src/{layer} has no sources");
        for f in files {
            let rel = f.strip_prefix(&root).expect("under src");
            // core/dispatch.rs is crate::core::dispatch (2 segments);
            // core/meta/mod.rs is crate::core::meta (2 as well).
            let mut depth = rel.components().count();
            if rel.file_name().is_some_and(|n| n == "mod.rs") {
                depth -= 1;
            }
            let text = std::fs::read_to_string(&f).expect("read a source file");
            checked += 1;
            if let Some(how) = violation(&code_of(&text), depth) {
                bad.push(format!("src/{}: `{how}`", rel.display()));
            }
        }
    }
    assert!(checked > 20, "only {checked} files checked");
    assert!(
        bad.is_empty(),
        "the core and the subsystems must not import a command family \
         (docs/architecture.md, *Inside the engine*): move what they need \
         out of src/commands/ into the core or a subsystem, or hand it to \
         them as a value (the table is given to Shared::with_host).\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_source_sits_in_a_layer() {
    let root = src();
    let mut stray = Vec::new();
    for e in std::fs::read_dir(&root).expect("read src") {
        let p = e.expect("a directory entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let layer = p.is_dir() && ["core", "subsystems", "commands"].contains(&name.as_str());
        if !layer && !ROOT_FILES.contains(&name.as_str()) {
            stray.push(name);
        }
    }
    assert!(
        stray.is_empty(),
        "src/ holds only lib.rs and the layer folders core/, subsystems/ and \
         commands/ (docs/architecture.md, *Inside the engine*); put these in \
         one: {stray:?}"
    );
}

#[test]
fn the_check_catches_what_it_must() {
    // A check that cannot fail proves nothing: each way of reaching a
    // family is caught, and the core's own paths are not.
    let caught = |src: &str, depth| violation(&code_of(src), depth).is_some();
    assert!(caught("use crate::commands::slowlog;", 2));
    assert!(caught("use crate::{\n    commands,\n    core::ctx::Ctx,\n};", 2));
    assert!(caught("use crate::{core::ctx::Ctx, commands::tx::abort};", 2));
    assert!(caught("fn f() { crate :: commands :: find(b\"GET\"); }", 2));
    assert!(caught("use super::super::commands;", 2));
    assert!(caught("use super::super::super::commands;", 3));
    assert!(!caught("use super::super::meta::Meta;", 3));
    assert!(!caught("use crate::core::ctx::Ctx;\nuse crate::subsystems::acl;", 2));
    assert!(!caught("//! The `crate::commands` family.\nuse crate::core::spec;", 2));
    assert!(!caught("use crate::core::spec;\n#[cfg(test)]\nmod t { use crate::commands; }", 2));
    assert!(caught("#[cfg(test)]\nfn f() {}\nuse crate::commands::tx;", 2));
}
