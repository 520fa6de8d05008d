//! The job queue over real TCP: blocking GETJOB with several connections
//! served by different threads (`--threads 2`), the effects record seen
//! through `DEBUG EFFECTS`, and jobs kept across a restart through an RDB
//! file that redis-server 7.0 still loads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, TestServer};

fn cmd(c: &mut Client, args: &[&str]) -> Frame {
    c.send(args).expect("send");
    c.read_frame().expect("reply")
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Simple(b) | Frame::Error(b) | Frame::Bulk(Some(b)) => {
            String::from_utf8_lossy(b).into_owned()
        }
        Frame::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn addjob(c: &mut Client, args: &[&str]) -> String {
    let mut argv = vec!["ADDJOB"];
    argv.extend_from_slice(args);
    let r = text(&cmd(c, &argv));
    assert!(r.starts_with("D-") && r.len() == 40, "{r}");
    r
}

/// The bodies in a GETJOB reply.
fn bodies(f: &Frame) -> Vec<String> {
    let Frame::Array(Some(jobs)) = f else { return vec![] };
    jobs.iter()
        .map(|j| match j {
            Frame::Array(Some(parts)) => text(&parts[2]),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn blocked_clients(c: &mut Client) -> usize {
    let info = text(&cmd(c, &["INFO", "clients"]));
    let line = info.lines().find(|l| l.starts_with("blocked_clients:")).expect("field");
    line["blocked_clients:".len()..].trim().parse().unwrap()
}

fn wait_blocked(c: &mut Client, n: usize) {
    let start = Instant::now();
    while blocked_clients(c) != n {
        assert!(start.elapsed() < Duration::from_secs(10), "never {n} blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waiters on a queue are served in the order they blocked, one job per
/// wake-up whatever their COUNT, across the server's threads.
#[test]
fn blocked_getjob_first_come_first_served_across_threads() {
    let s = TestServer::start();
    let mut admin = s.client();
    let mut a = s.client();
    let mut b = s.client();
    let mut c = s.client();
    a.send(&["GETJOB", "COUNT", "10", "FROM", "q"]).unwrap();
    wait_blocked(&mut admin, 1);
    b.send(&["GETJOB", "TIMEOUT", "0", "FROM", "other", "q"]).unwrap();
    wait_blocked(&mut admin, 2);
    c.send(&["GETJOB", "WITHCOUNTERS", "FROM", "q"]).unwrap();
    wait_blocked(&mut admin, 3);
    addjob(&mut admin, &["q", "one", "0"]);
    assert_eq!(bodies(&a.read_frame().unwrap()), ["one"]);
    let (quiet, _) = b.read_quiet(Duration::from_millis(100)).unwrap();
    assert!(quiet.is_empty(), "{quiet:?}");
    // Two jobs at once (a transaction): the next two waiters, one each.
    cmd(&mut admin, &["MULTI"]);
    cmd(&mut admin, &["ADDJOB", "q", "two", "0"]);
    cmd(&mut admin, &["ADDJOB", "q", "three", "0"]);
    cmd(&mut admin, &["EXEC"]);
    assert_eq!(bodies(&b.read_frame().unwrap()), ["two"]);
    let got = c.read_frame().unwrap();
    assert_eq!(bodies(&got), ["three"]);
    let Frame::Array(Some(jobs)) = &got else { unreachable!() };
    assert!(matches!(&jobs[0], Frame::Array(Some(p)) if p.len() == 7));
    wait_blocked(&mut admin, 0);
    assert_eq!(text(&cmd(&mut admin, &["QLEN", "q"])), "0");
}

/// Many consumers on both threads, as many jobs pushed in one pipeline:
/// each job goes to exactly one consumer.
#[test]
fn each_job_goes_to_one_waiter() {
    let s = TestServer::start();
    let mut admin = s.client();
    let mut consumers: Vec<Client> = (0..8).map(|_| s.client()).collect();
    for (i, c) in consumers.iter_mut().enumerate() {
        c.send(&["GETJOB", "FROM", "work"]).unwrap();
        wait_blocked(&mut admin, i + 1);
    }
    let mut p = s.client();
    for i in 0..8 {
        p.send(&["ADDJOB", "work", &format!("job{i}"), "0"]).unwrap();
    }
    for _ in 0..8 {
        assert!(text(&p.read_frame().unwrap()).starts_with("D-"));
    }
    let mut got: Vec<String> =
        consumers.iter_mut().flat_map(|c| bodies(&c.read_frame().unwrap())).collect();
    got.sort();
    let want: Vec<String> = (0..8).map(|i| format!("job{i}")).collect();
    assert_eq!(got, want);
}

/// TIMEOUT (ms) ends a wait with a null array; an output pause holds
/// waiters until it is lifted; NOHANG never waits.
#[test]
fn timeouts_pauses_and_nohang() {
    let s = TestServer::start();
    let mut admin = s.client();
    let mut a = s.client();
    let start = Instant::now();
    assert_eq!(cmd(&mut a, &["GETJOB", "TIMEOUT", "150", "FROM", "q"]), Frame::Array(None));
    assert!(start.elapsed() >= Duration::from_millis(140), "{:?}", start.elapsed());
    assert_eq!(cmd(&mut a, &["GETJOB", "NOHANG", "FROM", "q"]), Frame::Array(None));
    assert_eq!(text(&cmd(&mut admin, &["PAUSE", "q", "out"])), "out");
    a.send(&["GETJOB", "FROM", "q"]).unwrap();
    wait_blocked(&mut admin, 1);
    addjob(&mut admin, &["q", "held", "0"]);
    let (quiet, _) = a.read_quiet(Duration::from_millis(100)).unwrap();
    assert!(quiet.is_empty());
    let qstat = cmd(&mut admin, &["QSTAT", "q"]);
    let Frame::Array(Some(f)) = &qstat else { panic!("{qstat:?}") };
    assert_eq!((text(&f[8]), text(&f[9])), ("blocked".into(), "1".into()));
    assert_eq!(text(&cmd(&mut admin, &["PAUSE", "q", "none"])), "none");
    assert_eq!(bodies(&a.read_frame().unwrap()), ["held"]);
}

/// Every job change reaches the effects record as LOADJOB or DELJOB.
#[test]
fn job_changes_reach_the_effects_record() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(text(&cmd(&mut c, &["DEBUG", "EFFECTS", "START"])), "OK");
    let id = addjob(&mut c, &["q", "body", "0"]);
    cmd(&mut c, &["GETJOB", "FROM", "q"]);
    cmd(&mut c, &["NACK", &id]);
    cmd(&mut c, &["ACKJOB", &id]);
    cmd(&mut c, &["QLEN", "q"]);
    let took = cmd(&mut c, &["DEBUG", "EFFECTS", "TAKE"]);
    let Frame::Array(Some(parts)) = &took else { panic!("{took:?}") };
    let Frame::Array(Some(stream)) = &parts[0] else { panic!("{took:?}") };
    let names: Vec<String> = stream
        .iter()
        .map(|c| match c {
            Frame::Array(Some(a)) => text(&a[0]),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["SELECT", "LOADJOB", "LOADJOB", "LOADJOB", "DELJOB"], "{took:?}");
}

fn field(show: &Frame, name: &str) -> String {
    let Frame::Array(Some(f)) = show else { return "gone".into() };
    let i = f.iter().position(|x| text(x) == name).expect("field");
    text(&f[i + 1])
}

/// SAVE, stop, start again: queued jobs are queued, active ones active
/// with their counters and retry schedule, acknowledged ones gone; and
/// redis-server loads the same file (it skips the jobs' AUX fields).
#[test]
fn jobs_survive_a_restart_through_rdb() {
    let dir = scratch_dir("jobs-rdb");
    let args = ["--dbfilename", "jobs.rdb"];
    let s = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
    let mut c = s.client();
    cmd(&mut c, &["SET", "plain", "key"]);
    let queued = addjob(&mut c, &["q", "queued", "0"]);
    let active = addjob(&mut c, &["q2", "active", "0", "RETRY", "60"]);
    let acked = addjob(&mut c, &["q", "acked", "0"]);
    let delayed = addjob(&mut c, &["q3", "delayed", "0", "DELAY", "100"]);
    cmd(&mut c, &["GETJOB", "FROM", "q2"]);
    cmd(&mut c, &["NACK", &active]);
    cmd(&mut c, &["GETJOB", "FROM", "q2"]);
    cmd(&mut c, &["ACKJOB", &acked]);
    let before: Vec<(String, String, String)> = [&queued, &active, &delayed]
        .iter()
        .map(|id| {
            let sh = cmd(&mut c, &["SHOW", id]);
            (field(&sh, "state"), field(&sh, "nacks"), field(&sh, "body"))
        })
        .collect();
    let requeue_before: i64 =
        field(&cmd(&mut c, &["SHOW", &active]), "next-requeue-within").parse().unwrap();
    assert_eq!(text(&cmd(&mut c, &["SAVE"])), "OK");
    drop(c);
    drop(s);
    let s = TestServer::start_with(&TestServer::default_bin(), &args, Some(&dir));
    let mut c = s.client();
    c.wait_loaded();
    let after: Vec<(String, String, String)> = [&queued, &active, &delayed]
        .iter()
        .map(|id| {
            let sh = cmd(&mut c, &["SHOW", id]);
            (field(&sh, "state"), field(&sh, "nacks"), field(&sh, "body"))
        })
        .collect();
    assert_eq!(after, before);
    assert_eq!(before[0].0, "queued");
    assert_eq!(before[1], ("active".into(), "1".into(), "active".into()));
    assert_eq!(before[2].0, "active");
    let requeue_after: i64 =
        field(&cmd(&mut c, &["SHOW", &active]), "next-requeue-within").parse().unwrap();
    assert!(requeue_after <= requeue_before && requeue_after > requeue_before - 30_000);
    assert_eq!(field(&cmd(&mut c, &["SHOW", &acked]), "state"), "gone");
    assert_eq!(bodies(&cmd(&mut c, &["GETJOB", "NOHANG", "FROM", "q"])), ["queued"]);
    assert_eq!(text(&cmd(&mut c, &["DBSIZE"])), "1");
    drop(c);
    let Some(redis) = RedisServer::start_with(
        &["--dir", dir.to_str().unwrap(), "--dbfilename", "jobs.rdb"],
        Some(&dir),
    ) else {
        return;
    };
    let mut r = redis.client();
    r.wait_loaded();
    assert_eq!(text(&cmd(&mut r, &["GET", "plain"])), "key");
    assert_eq!(text(&cmd(&mut r, &["DBSIZE"])), "1");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One producer-consumer on a queue of its own: ADDJOB, then (every other
/// job) GETJOB of it and ACKJOB, one at a time, so each acknowledgement is known. Returns the
/// jobs whose ADDJOB was acknowledged, each with whether its ACKJOB was
/// acknowledged, and the id whose ACKJOB was in flight when the
/// connection died (it may be gone or not).
fn job_writer(port: u16, queue: &str, stop: &AtomicBool) -> (Vec<(String, bool)>, Option<String>) {
    let mut out = Vec::new();
    let Ok(mut c) = Client::connect(port) else { return (out, None) };
    c.set_timeout(Duration::from_secs(5));
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let body = format!("{queue}:{n}");
        if c.send(&["ADDJOB", queue, &body, "0", "RETRY", "3600"]).is_err() {
            break;
        }
        let Ok(Frame::Simple(jid)) = c.read_frame() else { break };
        let jid = String::from_utf8(jid).expect("job id");
        out.push((jid.clone(), false));
        if n % 2 == 1 {
            continue;
        }
        if c.send(&["GETJOB", "NOHANG", "FROM", queue]).is_err() {
            break;
        }
        let Ok(Frame::Array(Some(_))) = c.read_frame() else { break };
        if c.send(&["ACKJOB", &jid]).is_err() {
            return (out, Some(jid));
        }
        match c.read_frame() {
            Ok(Frame::Integer(1)) => out.last_mut().unwrap().1 = true,
            _ => return (out, Some(jid)),
        }
    }
    (out, None)
}

/// `appendfsync always` and SIGKILL: every ADDJOB acknowledged before the
/// kill is there after the restart (queued, or active when a GETJOB took
/// it), unless its ACKJOB was
/// acknowledged, in which case it is gone; an ACKJOB in flight may have
/// happened or not. The kills land at random moments, one of them after
/// a BGREWRITEAOF (the jobs then come back from the base's AUX fields).
#[test]
fn acknowledged_jobs_survive_sigkill_with_appendfsync_always() {
    const WRITERS: usize = 4;
    let dir = scratch_dir("jobs-aof-crash");
    let bin = TestServer::default_bin();
    let flags = ["--appendonly", "yes", "--appendfsync", "always", "--threads", "2"];
    let mut seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
            as u64
            | 1;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut live: Vec<String> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    for trial in 0..4 {
        let server = TestServer::start_with(&bin, &flags, Some(&dir));
        let port = server.port();
        let mut probe = server.client();
        probe.wait_loaded();
        for jid in &live {
            let state = field(&cmd(&mut probe, &["SHOW", jid]), "state");
            assert!(state == "queued" || state == "active", "trial {trial}: {jid} {state}");
        }
        for jid in &gone {
            assert_eq!(field(&cmd(&mut probe, &["SHOW", jid]), "state"), "gone", "trial {trial}");
        }
        if trial == 2 {
            assert!(text(&cmd(&mut probe, &["BGREWRITEAOF"])).contains("rewriting"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..WRITERS)
            .map(|id| {
                let stop = stop.clone();
                let queue = format!("crash{trial}:{id}");
                std::thread::spawn(move || job_writer(port, &queue, &stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150 + rnd() % 350));
        drop(probe);
        drop(server); // SIGKILL
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            let (jobs, in_flight) = h.join().unwrap();
            assert!(!jobs.is_empty(), "a writer added no job");
            for (jid, acked) in jobs {
                if in_flight.as_ref() == Some(&jid) {
                    continue;
                }
                if acked {
                    gone.push(jid);
                } else {
                    live.push(jid);
                }
            }
        }
    }
    let server = TestServer::start_with(&bin, &flags, Some(&dir));
    let mut probe = server.client();
    probe.wait_loaded();
    for jid in &live {
        let state = field(&cmd(&mut probe, &["SHOW", jid]), "state");
        assert!(state == "queued" || state == "active", "{jid} {state}");
    }
    for jid in &gone {
        assert_eq!(field(&cmd(&mut probe, &["SHOW", jid]), "state"), "gone");
    }
    eprintln!("{} present and {} acknowledged jobs checked after 4 kills", live.len(), gone.len());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
