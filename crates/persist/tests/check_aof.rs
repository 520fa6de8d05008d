//! `sluice-check-aof` against `redis-check-aof` (7.0.15) on the same
//! files: valid, torn, corrupt, with an unfinished MULTI, with `#TS:`
//! annotations cut by `--truncate-to-timestamp`; the same report, the
//! same exit status, and `--fix` leaves the same bytes.

use std::path::Path;
use std::process::{Command, Stdio};

use persist::aof::write_command;

const REDIS_CHECK_AOF: &str = "/usr/bin/redis-check-aof";

fn run(bin: &str, args: &[&str], stdin: &str) -> (i32, String) {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    use std::io::Write;
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn stream() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"#TS:1700000000\r\n");
    write_command(&mut b, &[b"SELECT", b"0"]);
    write_command(&mut b, &[b"SET", b"a", b"1"]);
    write_command(&mut b, &[b"MULTI"]);
    write_command(&mut b, &[b"SET", b"b", b"2"]);
    write_command(&mut b, &[b"INCR", b"c"]);
    write_command(&mut b, &[b"EXEC"]);
    b.extend_from_slice(b"#TS:1700000100\r\n");
    write_command(&mut b, &[b"SET", b"d", b"\r\n binary \x00"]);
    b
}

fn compare(tag: &str, bytes: &[u8], args: &[&str], answer: &str) {
    let dir = std::env::temp_dir().join(format!("sluice-check-aof-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ours, theirs) = (dir.join("ours.aof"), dir.join("theirs.aof"));
    std::fs::write(&ours, bytes).unwrap();
    std::fs::write(&theirs, bytes).unwrap();
    let with = |p: &Path| {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.push(p.display().to_string());
        v
    };
    let a = with(&ours);
    let b = with(&theirs);
    let (oc, oo) = run(
        env!("CARGO_BIN_EXE_sluice-check-aof"),
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        answer,
    );
    let (tc, to) = run(REDIS_CHECK_AOF, &b.iter().map(String::as_str).collect::<Vec<_>>(), answer);
    let to = to.replace(&theirs.display().to_string(), &ours.display().to_string());
    assert_eq!(oo, to, "{tag}: report");
    assert_eq!(oc, tc, "{tag}: exit status");
    assert_eq!(std::fs::read(&ours).unwrap(), std::fs::read(&theirs).unwrap(), "{tag}: file after");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reports_and_fixes_match_redis_check_aof() {
    if !Path::new(REDIS_CHECK_AOF).is_file() {
        eprintln!("SKIPPED: {REDIS_CHECK_AOF} not found");
        return;
    }
    let good = stream();
    compare("valid", &good, &[], "");
    for cut in [good.len() - 1, good.len() - 5, good.len() - 20, 60, 17] {
        compare(&format!("torn-{cut}"), &good[..cut], &[], "");
        compare(&format!("fix-{cut}"), &good[..cut], &["--fix"], "y\n");
        compare(&format!("nofix-{cut}"), &good[..cut], &["--fix"], "n\n");
    }
    let exec = good.windows(4).position(|w| w == b"EXEC").unwrap() - 8;
    compare("open-multi", &good[..exec], &["--fix"], "y\n");
    let mut garbage = good.clone();
    garbage.splice(40..40, b"garbage\r\n".iter().copied());
    compare("garbage", &garbage, &["--fix"], "y\n");
    let mut badlen = good.clone();
    let p = badlen.windows(2).position(|w| w == b"$1").unwrap();
    badlen[p + 1] = b'3';
    compare("badlen", &badlen, &[], "");
    compare("ts-cut", &good, &["--truncate-to-timestamp", "1700000050"], "");
    compare("ts-nothing", &good, &["--truncate-to-timestamp", "1600000000"], "");
    compare("ts-none", &good, &["--truncate-to-timestamp", "1800000000"], "");
}
