//! Helpers the tests share: the replication tests' (`replication.rs`: a
//! redis-server replica of Sluice; `replica.rs`: Sluice as a replica),
//! and the pipelines sent in one write to redis-server and Sluice
//! (`lean_path.rs`, `member_prefetch.rs`).

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resp::Frame;
use testkit::Client;

pub fn cmd<A: AsRef<[u8]>>(c: &mut Client, args: &[A]) -> Frame {
    let res = c.send(args).map_err(|e| ("send", e));
    match res.and_then(|()| c.read_frame().map_err(|e| ("reply to", e))) {
        Ok(f) => f,
        // Named by the server's port and the command: a test that talks
        // to two servers must say which one closed.
        Err((what, e)) => {
            let port = c.stream().peer_addr().map(|a| a.port()).unwrap_or(0);
            let name = args.first().map(|a| String::from_utf8_lossy(a.as_ref()).into_owned());
            panic!("{what} {} to port {port}: {e}", name.unwrap_or_default())
        }
    }
}

pub fn s(args: &str) -> Vec<String> {
    args.split(' ').map(str::to_string).collect()
}

/// A reply's text: a string's bytes, an error's, an integer's digits.
pub fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(Some(b)) | Frame::Simple(b) | Frame::Error(b) | Frame::Verbatim(_, b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// One field of an INFO section.
pub fn info(c: &mut Client, section: &str, field: &str) -> Option<String> {
    let t = text(&cmd(c, &["INFO", section]));
    t.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
}

pub fn info_keys(c: &mut Client, section: &str) -> Vec<String> {
    let t = text(&cmd(c, &["INFO", section]));
    t.lines()
        .filter(|l| !l.starts_with('#') && l.contains(':'))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect()
}

pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether every thread of `pid` is stopped (state `T` in
/// `/proc/<pid>/task/*/stat`). `kill -STOP` returns once the signal is
/// sent, not once every thread has stopped: until then a replica may
/// still read and acknowledge what its master sends next.
pub fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().all(|t| {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // The state follows the command name's closing parenthesis.
        stat.rsplit_once(") ").map(|(_, rest)| rest.as_bytes().first() == Some(&b'T')) == Some(true)
    })
}

/// Waits until the replica's link is up and it applied everything the
/// master has streamed.
pub fn wait_synced(master: &mut Client, replica: &mut Client) {
    wait_for("the replica to catch up", Duration::from_secs(30), || {
        let up = info(replica, "replication", "master_link_status").as_deref() == Some("up");
        let m = info(master, "replication", "master_repl_offset");
        let r = info(replica, "replication", "slave_repl_offset");
        up && m.is_some() && m == r
    });
}

/// Sends `cmds` at once and reads their replies.
pub fn pipelined(c: &mut Client, cmds: &[Vec<Vec<u8>>]) -> Vec<Frame> {
    for a in cmds {
        c.send(a).expect("send");
    }
    cmds.iter().map(|_| c.read_frame().expect("reply")).collect()
}

/// An array reply's elements in groups of `group`, sorted (HGETALL,
/// SMEMBERS: their order is the table's, not the data's).
pub fn sorted(f: Frame, group: usize) -> String {
    let Frame::Array(Some(items)) = f else { return format!("{f:?}") };
    let mut chunks: Vec<String> = items.chunks(group).map(|c| format!("{c:?}")).collect();
    chunks.sort();
    chunks.join(",")
}

/// `n` clients writing rounds of `round` (client number, round number)
/// until `stop`.
pub fn writers(
    port: u16,
    n: usize,
    stop: &Arc<AtomicBool>,
    round: fn(&mut Client, usize, usize),
) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                let mut i = 1000;
                while !stop.load(Ordering::Relaxed) {
                    round(&mut c, t, i);
                    i += 1;
                }
            })
        })
        .collect()
}

/// Three connections pipelining INCRs (64 a write) of a key each
/// (`{prefix}:{n}`) to `port` until it stops answering them with integers
/// (a failover made it a replica: `-MOVED`, `-READONLY`, a closed link).
/// Each returns its key and how many INCRs were acknowledged.
pub fn incrs_until_refused(port: u16, prefix: &str) -> Vec<std::thread::JoinHandle<(String, u64)>> {
    (0..3)
        .map(|t| {
            let key = format!("{prefix}:{t}");
            std::thread::spawn(move || {
                let mut c = Client::connect(port).expect("connect");
                c.set_timeout(Duration::from_secs(30));
                let mut acked = 0u64;
                'run: loop {
                    for _ in 0..64 {
                        if c.send(&[b"INCR", key.as_bytes()]).is_err() {
                            break 'run;
                        }
                    }
                    for _ in 0..64 {
                        match c.read_frame() {
                            Ok(Frame::Integer(_)) => acked += 1,
                            _ => break 'run,
                        }
                    }
                }
                (key, acked)
            })
        })
        .collect()
}

/// How many of `writers`' acknowledged INCRs `c`'s server does not have.
pub fn incrs_missing(
    c: &mut Client,
    writers: Vec<std::thread::JoinHandle<(String, u64)>>,
) -> (u64, u64) {
    let (mut acked, mut lost) = (0, 0);
    for w in writers {
        let (key, n) = w.join().unwrap();
        let have = match cmd(c, &["GET", &key]) {
            Frame::Bulk(Some(b)) => String::from_utf8_lossy(&b).parse::<u64>().unwrap_or(0),
            _ => 0,
        };
        acked += n;
        lost += n.saturating_sub(have);
    }
    (acked, lost)
}

/// Reads a disk-based payload (`$len` and the bytes, after PSYNC's
/// `+FULLRESYNC …` line) from a replica's socket.
pub fn read_payload(sock: &mut std::net::TcpStream) {
    use std::io::Read;
    let line = |sock: &mut std::net::TcpStream| {
        let mut l = Vec::new();
        let mut b = [0u8; 1];
        while !l.ends_with(b"\r\n") {
            sock.read_exact(&mut b).unwrap();
            // Keep-alive newlines before the payload.
            if l.is_empty() && b[0] == b'\n' {
                continue;
            }
            l.push(b[0]);
        }
        String::from_utf8_lossy(&l[..l.len() - 2]).into_owned()
    };
    let mut head = line(sock);
    if head.starts_with("+FULLRESYNC") {
        head = line(sock);
    }
    let len: usize = head.strip_prefix('$').unwrap().parse().unwrap();
    let mut left = len;
    let mut buf = vec![0u8; 64 * 1024];
    while left > 0 {
        let n = sock.read(&mut buf[..left.min(64 * 1024)]).unwrap();
        assert!(n > 0);
        left -= n;
    }
}

/// Waits (up to `limit`) until the server at `c` (process `pid`) holds
/// `keys` keys, then checks that loading them never took more than 48 MB
/// above what the loaded data set takes (a file or payload held whole
/// besides it would), and prints both figures.
pub fn assert_loaded_at_data_set_cost(
    name: &str,
    pid: u32,
    c: &mut Client,
    keys: i64,
    limit: Duration,
) {
    let deadline = Instant::now() + limit;
    while cmd(c, &["DBSIZE"]) != Frame::Integer(keys) {
        assert!(Instant::now() < deadline, "{name}: the data set did not load");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (peak, now) = rss_peak_and_now(pid);
    eprintln!("{name}: peak RSS {} MB, after the load {} MB", peak >> 10, now >> 10);
    assert!(peak < now + 48 * 1024, "{name}: peak RSS {peak} kB, {now} kB after the load");
}

/// Peak and current RSS of a process, in KiB (`VmHWM`, `VmRSS`).
pub fn rss_peak_and_now(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("a VmHWM and a VmRSS line")
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// CPU seconds a process used (utime + stime).
pub fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// The command that ends a pipeline of [`pipeline`]: its reply is the last
/// one read.
pub const PIPELINE_END: &str = "pipeline-end";

/// `cmds`, then an `ECHO` of [`PIPELINE_END`], as one buffer.
pub fn pipeline(cmds: &[&[&str]]) -> Vec<u8> {
    let mut buf = Vec::new();
    for c in cmds {
        testkit::encode(c, &mut buf);
    }
    testkit::encode(&["ECHO", PIPELINE_END], &mut buf);
    buf
}

/// Sends `cmds` in one write to redis-server, then to Sluice; their
/// replies, each up to the end marker's.
pub fn both(pair: &mut testkit::diff::Pair, cmds: &[&[&str]]) -> (Vec<u8>, Vec<u8>) {
    let buf = pipeline(cmds);
    let end = format!("${}\r\n{PIPELINE_END}\r\n", PIPELINE_END.len());
    let limit = Duration::from_secs(10);
    pair.redis.send_raw(&buf).unwrap();
    let r = pair.redis.read_until_suffix(end.as_bytes(), limit).unwrap();
    pair.sluice.send_raw(&buf).unwrap();
    let s = pair.sluice.read_until_suffix(end.as_bytes(), limit).unwrap();
    (r, s)
}

/// Asserts two servers' replies to one pipeline are the same bytes; when
/// not, shows where they part, with some context (the replies run long).
pub fn assert_same(what: &str, (r, s): (Vec<u8>, Vec<u8>)) {
    if r != s {
        let at = r.iter().zip(&s).take_while(|(a, b)| a == b).count();
        let from = at.saturating_sub(200);
        panic!(
            "{what}: Sluice's replies differ from redis-server's at byte {at}:\n sluice: {}\n  redis: {}",
            testkit::escape(&s[from..s.len().min(at + 200)]),
            testkit::escape(&r[from..r.len().min(at + 200)]),
        );
    }
}
