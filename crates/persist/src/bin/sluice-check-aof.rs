//! `sluice-check-aof [--fix|--truncate-to-timestamp TS] FILE`: checks an
//! append-only file as `redis-check-aof` does — a manifest (every file it
//! names, in order, truncation allowed only in the last), or a single
//! old-style AOF (with or without an RDB preamble) — and with `--fix`
//! cuts a torn or corrupt tail after asking. Exits 0 when valid (or
//! fixed), 1 otherwise.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use persist::aof::{self, Manifest};
use persist::file;
use persist::Limits;

const USAGE: &str =
    "Usage: sluice-check-aof [--fix|--truncate-to-timestamp $timestamp] <file.manifest|file.aof>";

/// How one file's check ended (`redis-check-aof`'s AOF_CHECK_*).
enum Verdict {
    Ok,
    Empty,
    Truncated,
    TimestampTruncated,
}

struct Tool {
    fix: bool,
    to_timestamp: i64,
    /// The line count carries over from file to file, as in Redis's tool.
    line: u64,
}

fn fail(msg: &str) -> ! {
    println!("{msg}");
    std::process::exit(1);
}

impl Tool {
    /// Redis's `checkSingleAof`.
    fn check_single(&mut self, name: &str, path: &Path, last: bool, preamble: bool) -> Verdict {
        let bytes = std::fs::read(path).unwrap_or_else(|e| {
            fail(&format!("Cannot open file {}: {e}, aborting...", path.display()))
        });
        if bytes.is_empty() {
            return Verdict::Empty;
        }
        let mut start = 0;
        if preamble {
            println!("[offset 0] Checking RDB file {name}");
            let res =
                file::load(&bytes, &Limits::default(), usize::MAX, i64::MIN, true, |_| Ok(()));
            match res {
                Ok(l) => {
                    println!("[offset {}] \\o/ RDB looks OK! \\o/", l.consumed);
                    println!("[info] {} keys read", l.keys_loaded);
                    println!("RDB preamble is OK, proceeding with AOF tail...");
                    start = l.consumed;
                }
                Err(e) => {
                    println!("--- RDB ERROR DETECTED ---");
                    println!("[offset {}] {}", e.offset, e.reason);
                    fail("RDB preamble of AOF file is not sane, aborting.");
                }
            }
        }
        let c =
            aof::check(&path.display().to_string(), &bytes, start, self.line, self.to_timestamp);
        self.line = c.line;
        if c.bad_timestamp {
            fail("Invalid timestamp annotation");
        }
        if let Some(at) = c.cut_at_timestamp {
            let ts = self.to_timestamp;
            if c.nothing_before_timestamp {
                fail(&format!(
                    "AOF {} has nothing before timestamp {ts}, aborting...",
                    path.display()
                ));
            }
            if !last {
                println!(
                    "Failed to truncate AOF {} to timestamp {ts} to offset {at} because it is not the last file.",
                    path.display()
                );
                fail("If you insist, please delete all files after this file according to the manifest file and delete the corresponding records in manifest file manually. Then re-run redis-check-aof.");
            }
            truncate(path, at).unwrap_or_else(|_| {
                fail(&format!("Failed to truncate AOF {} to timestamp {ts}", path.display()))
            });
            return Verdict::TimestampTruncated;
        }
        if c.format_error {
            println!("AOF {name} format error");
        }
        if let Some(e) = &c.error {
            println!("{e}");
        }
        let size = bytes.len();
        let diff = size - c.ok_up_to;
        if diff == 0 && self.to_timestamp != 0 {
            println!("Truncate nothing in AOF {name} to timestamp {}", self.to_timestamp);
            return Verdict::Ok;
        }
        println!(
            "AOF analyzed: filename={name}, size={size}, ok_up_to={}, ok_up_to_line={}, diff={diff}",
            c.ok_up_to, c.line
        );
        if diff == 0 {
            return Verdict::Ok;
        }
        if !self.fix {
            fail(&format!("AOF {name} is not valid. Use the --fix option to try fixing it."));
        }
        if !last {
            fail(&format!("Failed to truncate AOF {name} because it is not the last file"));
        }
        println!(
            "This will shrink the AOF {name} from {size} bytes, with {diff} bytes, to {} bytes",
            c.ok_up_to
        );
        print!("Continue? [y/N]: ");
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !answer.to_ascii_lowercase().starts_with('y') {
            fail("Aborting...");
        }
        truncate(path, c.ok_up_to)
            .unwrap_or_else(|_| fail(&format!("Failed to truncate AOF {name}")));
        Verdict::Truncated
    }

    fn print(&self, v: Verdict, name: &str, kind: &str) {
        match v {
            Verdict::Ok => println!("{kind} {name} is valid"),
            Verdict::Empty => println!("{kind} {name} is empty"),
            Verdict::TimestampTruncated => {
                println!("Successfully truncated AOF {name} to timestamp {}", self.to_timestamp)
            }
            Verdict::Truncated => println!("Successfully truncated AOF {name}"),
        }
    }
}

fn truncate(path: &Path, len: usize) -> std::io::Result<()> {
    std::fs::OpenOptions::new().write(true).open(path)?.set_len(len as u64)
}

fn is_rdb(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.len() >= 8 && aof::is_rdb(&b))
}

fn is_manifest(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else { fail(&format!("Cannot open file {}", path.display())) };
    b.split(|&c| c == b'\n').any(|l| l.first() != Some(&b'#') && l.starts_with(b"file"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (fix, ts, path) = match args.as_slice() {
        [p] => (false, 0, p.clone()),
        [f, p] if f == "--fix" => (true, 0, p.clone()),
        [t, ts, p] if t == "--truncate-to-timestamp" => {
            let Ok(ts) = ts.parse::<i64>() else { fail("Invalid timestamp, aborting...") };
            (false, ts, p.clone())
        }
        _ => fail(USAGE),
    };
    let path = PathBuf::from(path);
    let mut tool = Tool { fix, to_timestamp: ts, line: 1 };
    if is_manifest(&path) {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        println!("Start checking Multi Part AOF");
        let text = std::fs::read(&path).unwrap_or_default();
        let m = Manifest::parse(&text).unwrap_or_else(|e| {
            println!("\n*** FATAL AOF MANIFEST FILE ERROR ***\n");
            if let Some((n, l)) = e.line {
                println!("Reading the manifest file, at line {n}\n");
                println!(">>> '{l}'\n");
            }
            fail(&format!("{}\n", e.reason))
        });
        let total = m.load_order().count();
        let mut n = 0;
        if let Some(b) = &m.base {
            n += 1;
            let p = dir.join(&b.name);
            let rdb = is_rdb(&p);
            println!("Start to check BASE AOF ({} format).", if rdb { "RDB" } else { "RESP" });
            let v = tool.check_single(&b.name, &p, n == total, rdb);
            tool.print(v, &b.name, "BASE AOF");
        }
        if !m.incr.is_empty() {
            println!("Start to check INCR files.");
            for i in &m.incr {
                n += 1;
                let v = tool.check_single(&i.name, &dir.join(&i.name), n == total, false);
                tool.print(v, &i.name, "INCR AOF");
            }
        }
        println!("All AOF files and manifest are valid");
    } else {
        println!("Start checking Old-Style AOF");
        let rdb = is_rdb(&path);
        let name = path.display().to_string();
        let v = tool.check_single(&name, &path, true, rdb);
        tool.print(v, &name, "AOF");
    }
    ExitCode::SUCCESS
}
