//! The effects record against Redis: every `tests/effects/*.txt` is played
//! on a fresh redis-server and a fresh Sluice; replies, the propagated
//! stream (redis-server's replica stream against `DEBUG EFFECTS TAKE`),
//! keyspace events and `rdb_changes_since_last_save` must agree (see
//! `testkit::effects`).

use std::path::{Path, PathBuf};

use testkit::diff::{self, Options};
use testkit::scenario;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/effects")
}

fn check(file: &str) {
    let path = dir().join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let sc = scenario::parse(&format!("tests/effects/{file}"), &text).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice-server"));
    diff::check(bin, &sc.name, &sc.steps, &Options::EFFECTS);
}

macro_rules! files {
    ($($name:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $name() {
                check($file);
            }
        )*
        const LISTED: &[&str] = &[$($file),*];
    };
}

files! {
    strings => "strings.txt",
    keys => "keys.txt",
    transactions => "transactions.txt",
    blocking => "blocking.txt",
    lists => "lists.txt",
    zsets => "zsets.txt",
    hashes => "hashes.txt",
    sets => "sets.txt",
    sort => "sort.txt",
    publish => "publish.txt",
    bitmaps => "bitmaps.txt",
    hyperloglog => "hyperloglog.txt",
    geo => "geo.txt",
    restore => "restore.txt",
    scripting => "scripting.txt",
    streams => "streams.txt",
    eviction => "eviction.txt",
    store => "store.txt",
}

#[test]
fn every_file_is_listed() {
    let mut missing = Vec::new();
    for e in std::fs::read_dir(dir()).expect("tests/effects") {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".txt") && !LISTED.contains(&name.as_str()) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "add these to the files! list: {missing:?}");
}
