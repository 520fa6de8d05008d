//! `sluice-check-rdb FILE`: what an RDB file holds and, when it is
//! damaged, where and why (as `redis-check-rdb` reports it). Exits 0 when
//! the file loads, 1 when it does not.

use std::collections::BTreeMap;
use std::process::ExitCode;

use persist::file;
use persist::Limits;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path] = args.as_slice() else {
        eprintln!("Usage: sluice-check-rdb <rdb-file-name>");
        return ExitCode::from(1);
    };
    println!("[offset 0] Checking RDB file {path}");
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            println!("--- RDB ERROR DETECTED ---");
            println!("[offset 0] Cannot open the file: {e}");
            return ExitCode::from(1);
        }
    };
    let mut per_db: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    let mut per_type: BTreeMap<&'static str, u64> = BTreeMap::new();
    // Every database index is accepted here; the server checks its own
    // `databases`. Expired keys are counted, not skipped.
    let res = file::load(&bytes, &Limits::default(), usize::MAX, i64::MIN, true, |k| {
        let e = per_db.entry(k.db).or_default();
        e.0 += 1;
        if k.expire_at >= 0 {
            e.1 += 1;
        }
        *per_type.entry(k.value.kind().name()).or_default() += 1;
        Ok(())
    });
    match res {
        Ok(l) => {
            println!("[offset 9] RDB version {}", l.version);
            for (k, v) in &l.aux {
                println!(
                    "[info] AUX FIELD {} = '{}'",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                );
            }
            for (db, (keys, expires)) in &per_db {
                println!("[info] DB {db}: {keys} keys, {expires} with an expiry");
            }
            for (t, n) in &per_type {
                println!("[info] {n} {t} keys");
            }
            if l.empty_keys > 0 {
                println!("[info] {} empty keys skipped", l.empty_keys);
            }
            println!("[offset {}] \\o/ RDB looks OK! \\o/", bytes.len());
            println!("[info] {} keys read", l.keys_loaded);
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("--- RDB ERROR DETECTED ---");
            println!("[offset {}] {}", e.offset, e.reason);
            ExitCode::from(1)
        }
    }
}
