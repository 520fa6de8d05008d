//! Deep pipeline memory bound (Sluice only; runs in CI, well under 30 s).
//!
//! One client writes 1,000,000 `GET k` (k holds 1 KiB) in one stream and
//! reads nothing for a few seconds. The replies total about 1 GiB, so a
//! server that executed everything it read would have to hold them; Sluice
//! must instead stop executing while its unread output is large, keeping
//! its RSS growth under 120 MB, and then deliver every reply, in order.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use testkit::TestServer;

const N: usize = 1_000_000;
const VALUE_LEN: usize = 1024;
const MAX_GROWTH_KB: u64 = 120 * 1024;

#[test]
fn million_unread_gets_stay_within_memory_bound() {
    let mut server = TestServer::start_bin(Path::new(env!("CARGO_BIN_EXE_sluice-server")));
    let value: Vec<u8> = (0..VALUE_LEN).map(|i| b'a' + (i % 26) as u8).collect();
    let mut c = server.client();
    let mut set = Vec::new();
    testkit::encode(&[&b"SET"[..], b"k", &value], &mut set);
    c.send_raw(&set).unwrap();
    assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
    let base = server.rss_kb().expect("VmRSS of the server");

    let req = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    let mut input = Vec::with_capacity(req.len() * N);
    for _ in 0..N {
        input.extend_from_slice(req);
    }
    let mut w = c.stream().try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&input));

    // Don't read for a while: the server sees the whole stream unread.
    let mut peak = base;
    let quiet = Instant::now();
    while quiet.elapsed() < Duration::from_secs(3) {
        peak = peak.max(server.rss_kb().unwrap_or(0));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(server.is_running(), "server died with the pipeline unread");

    let mut unit = format!("${VALUE_LEN}\r\n").into_bytes();
    unit.extend_from_slice(&value);
    unit.extend_from_slice(b"\r\n");
    let total = unit.len() * N;
    let mut stream = c.stream().try_clone().unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0usize;
    let mut reads = 0u64;
    while got < total {
        let n = stream.read(&mut buf).unwrap_or_else(|e| {
            panic!("read replies: {e} after {got} of {total} bytes ({} replies)", got / unit.len())
        });
        assert!(n > 0, "server closed after {} of {N} replies", got / unit.len());
        for (i, &b) in buf[..n].iter().enumerate() {
            let pos = got + i;
            if pos >= total {
                panic!("more reply bytes than {N} replies");
            }
            if b != unit[pos % unit.len()] {
                panic!("reply {} differs at byte {}", pos / unit.len(), pos % unit.len());
            }
        }
        got += n;
        reads += 1;
        // Sample the RSS every 64 reads (a /proc read per read is too slow).
        if reads == 64 {
            reads = 0;
            peak = peak.max(server.rss_kb().unwrap_or(0));
        }
    }
    writer.join().unwrap().unwrap();
    peak = peak.max(server.rss_kb().unwrap_or(0));
    let growth = peak.saturating_sub(base);
    eprintln!("deep pipeline: base RSS {base} KiB, peak {peak} KiB, growth {growth} KiB");
    assert!(growth < MAX_GROWTH_KB, "RSS grew by {growth} KiB (limit {MAX_GROWTH_KB} KiB)");
    // The connection is still in sync afterwards.
    assert_eq!(c.cmd(&["PING"]).unwrap(), b"+PONG\r\n");
}
