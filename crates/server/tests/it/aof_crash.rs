//! Durability under SIGKILL. Several connections write (SET of a fresh
//! key and INCR of a per-connection counter, one at a time, so each
//! acknowledgement is known); the server is killed at a random moment,
//! restarted on the same directory, and every acknowledged write must be
//! there: none lost, none applied twice (the counter is at least the
//! number of INCRs acknowledged and at most one more, the one in flight).
//!
//! `appendfsync always` must lose nothing; `everysec` too against a
//! process crash (replies wait for the `write(2)`; only an OS crash can
//! lose its last second, which a test cannot cause), and the test
//! reports the unsynced window it observed.
//!
//! Trials: `SLUICE_AOF_CRASH_TRIALS` (default 4 per policy, about 1 s
//! each in a debug build; the full run is 100:
//! `SLUICE_AOF_CRASH_TRIALS=100 cargo test -p server --test it aof_crash::`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resp::Frame;
use testkit::{scratch_dir, Client, TestServer};

const WRITERS: usize = 6;

fn trials() -> usize {
    std::env::var("SLUICE_AOF_CRASH_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(4)
}

/// A small deterministic generator (the seed is printed on failure).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn get(c: &mut Client, key: &str) -> Frame {
    c.send(&[b"GET".as_slice(), key.as_bytes()]).unwrap();
    c.read_frame().unwrap()
}

/// Runs the trials for one policy; returns the acknowledged writes seen.
fn crash_trials(policy: &str) -> u64 {
    let seed = std::env::var("SLUICE_AOF_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
                as u64
                | 1
        });
    let mut rng = Rng(seed);
    let dir = scratch_dir(&format!("aof-crash-{policy}"));
    let bin = TestServer::default_bin();
    let flags = ["--appendonly", "yes", "--appendfsync", policy];
    // What was acknowledged across all trials, per writer: keys w{id}:{n}
    // for n below the total, and the counter at least the total.
    let mut total = [0u64; WRITERS];
    let mut in_flight = [false; WRITERS];
    let mut acked_all = 0;
    for trial in 0..trials() {
        let server = TestServer::start_with(&bin, &flags, Some(&dir));
        let port = server.port();
        let mut probe = server.client();
        probe.wait_loaded();
        // Everything acknowledged before is still there after the restart.
        for id in 0..WRITERS {
            let ctr = match get(&mut probe, &format!("ctr{id}")) {
                Frame::Bulk(Some(b)) => String::from_utf8_lossy(&b).parse::<u64>().unwrap(),
                Frame::Bulk(None) => 0,
                other => panic!("{other:?}"),
            };
            let max = total[id] + u64::from(in_flight[id]);
            assert!(
                ctr >= total[id] && ctr <= max,
                "{policy} trial {trial} seed {seed}: writer {id} counter {ctr}, acknowledged {}",
                total[id]
            );
            // The next writer run continues from the counter as it is.
            total[id] = ctr;
            for n in (0..ctr).step_by(1.max(ctr as usize / 50)) {
                let key = format!("w{id}:{n}");
                assert!(
                    matches!(get(&mut probe, &key), Frame::Bulk(Some(_))),
                    "{policy} trial {trial} seed {seed}: acknowledged {key} lost"
                );
            }
        }
        // Writers resume where the counters are (their keys go on from there).
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..WRITERS)
            .map(|id| {
                let stop = stop.clone();
                let start = total[id];
                std::thread::spawn(move || writer_from(port, id, start, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100 + rng.next() % 400));
        drop(probe);
        drop(server); // SIGKILL
        stop.store(true, Ordering::Relaxed);
        for (id, h) in handles.into_iter().enumerate() {
            let (n, fl) = h.join().unwrap();
            acked_all += n;
            total[id] += n;
            in_flight[id] = fl;
        }
    }
    // The final check, after the last kill.
    let server = TestServer::start_with(&bin, &flags, Some(&dir));
    let mut probe = server.client();
    probe.wait_loaded();
    for id in 0..WRITERS {
        let ctr = match get(&mut probe, &format!("ctr{id}")) {
            Frame::Bulk(Some(b)) => String::from_utf8_lossy(&b).parse::<u64>().unwrap(),
            Frame::Bulk(None) => 0,
            other => panic!("{other:?}"),
        };
        assert!(
            ctr >= total[id] && ctr <= total[id] + u64::from(in_flight[id]),
            "{policy} seed {seed}: writer {id} counter {ctr}, acknowledged {}",
            total[id]
        );
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    acked_all
}

/// One writer: SET of a fresh key (numbered from `start`), then INCR of
/// its counter, one at a time. Returns how many pairs were acknowledged
/// and whether an INCR was in flight when the connection died.
fn writer_from(port: u16, id: usize, start: u64, stop: Arc<AtomicBool>) -> (u64, bool) {
    let Ok(mut c) = Client::connect(port) else { return (0, false) };
    c.set_timeout(Duration::from_secs(5));
    let mut acked = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("w{id}:{}", start + acked);
        if c.send(&[b"SET".as_slice(), key.as_bytes(), b"v"]).is_err() {
            return (acked, false);
        }
        match c.read_frame() {
            Ok(Frame::Simple(_)) => {}
            _ => return (acked, false),
        }
        let ctr = format!("ctr{id}");
        if c.send(&[b"INCR".as_slice(), ctr.as_bytes()]).is_err() {
            return (acked, true);
        }
        match c.read_frame() {
            Ok(Frame::Integer(_)) => acked += 1,
            _ => return (acked, true),
        }
    }
    (acked, false)
}

#[test]
fn always_loses_no_acknowledged_write_across_sigkills() {
    let n = crash_trials("always");
    assert!(n > 0, "the writers wrote nothing");
    eprintln!("appendfsync always: {n} acknowledged write pairs over {} kills, 0 lost", trials());
}

#[test]
fn everysec_loses_no_acknowledged_write_when_the_process_dies() {
    let n = crash_trials("everysec");
    assert!(n > 0, "the writers wrote nothing");
    eprintln!("appendfsync everysec: {n} acknowledged write pairs over {} kills, 0 lost", trials());
}
