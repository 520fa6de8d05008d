//! The job queue across a master and its replicas (`docs/jobs.md`,
//! "Jobs across nodes"): `ADDJOB … REPLICATE n` answers once the job is
//! on `n` nodes (the master and `n-1` replicas, read there at once after
//! the reply), Disque's `-NOREPL` errors when it cannot (too few
//! replicas, the ADDJOB timeout, the job's TTL), `ASYNC` at once; with
//! the DURABLE mode in the same pipeline; and every change of state
//! (ACKJOB, FASTACK, NACK, DELJOB, WORKING, DEQUEUE, ENQUEUE) on the
//! replicas through the stream.

use std::process::Command;
use std::time::{Duration, Instant};

use resp::Frame;
use testkit::{Client, TestServer};

use crate::common::{all_threads_stopped, cmd, text, wait_for, wait_synced};

const NOT_ENOUGH: &str = "NOREPL Not enough reachable nodes for the requested replication level";
const TIMEOUT: &str = "NOREPL Timeout reached before replicating to the requested number of nodes";
const EXPIRED: &str =
    "NOREPL job removed (expired?) before the requested replication level was achieved";

fn replica_of(master: &TestServer) -> TestServer {
    let port = master.port().to_string();
    TestServer::start_with(&TestServer::default_bin(), &["--replicaof", "127.0.0.1", &port], None)
}

fn online_replicas(m: &mut Client, n: usize) {
    wait_for("the replicas to be online", Duration::from_secs(30), || {
        text(&cmd(m, &["INFO", "replication"])).matches("state=online").count() == n
    });
}

fn signal(s: &TestServer, sig: &str) {
    let pid = s.pid().to_string();
    assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
    if sig == "-STOP" {
        // `kill` returns once the signal is sent, not once every thread
        // has stopped: until then the replica may still read and
        // acknowledge what the master sends next.
        wait_for("every thread of the replica to stop", Duration::from_secs(10), || {
            all_threads_stopped(s.pid())
        });
    }
}

/// SHOW's state, or "gone".
fn state(c: &mut Client, id: &str) -> String {
    let Frame::Array(Some(items)) = cmd(c, &["SHOW", id]) else { return "gone".into() };
    let i = items.iter().position(|x| text(x) == "state").expect("state");
    text(&items[i + 1])
}

/// SHOW without what moves with time, and the re-queue time (ms from
/// now, -1 for none), which moves with it.
fn show(c: &mut Client, id: &str) -> (String, i64) {
    let Frame::Array(Some(items)) = cmd(c, &["SHOW", id]) else { return ("gone".into(), -1) };
    let mut out = Vec::new();
    let mut requeue = -1;
    for pair in items.chunks(2) {
        let name = text(&pair[0]);
        if name == "next-requeue-within" {
            requeue = text(&pair[1]).parse().unwrap_or(-1);
        } else if !["ttl", "next-awake-within", "nodes-delivered"].contains(&name.as_str()) {
            out.push(format!("{name}={}", text(&pair[1])));
        }
    }
    (out.join(" "), requeue)
}

fn addjob(c: &mut Client, args: &[&str]) -> Frame {
    let mut argv = vec!["ADDJOB"];
    argv.extend_from_slice(args);
    cmd(c, &argv)
}

fn id_of(f: &Frame) -> String {
    match f {
        Frame::Simple(id) if id.starts_with(b"D-") => String::from_utf8(id.clone()).unwrap(),
        other => panic!("not a job id: {other:?}"),
    }
}

fn err(f: &Frame) -> String {
    match f {
        Frame::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => panic!("not an error: {other:?}"),
    }
}

/// With two replicas: REPLICATE 3 answers once both hold the job (read
/// on each at once); 4 is refused; ASYNC answers at once; a stopped
/// replica makes REPLICATE 3 time out (2 still works), and a TTL shorter
/// than the timeout ends the wait with Disque's "removed" error.
#[test]
fn addjob_replicate_answers_once_the_replicas_hold_the_job() {
    let master = TestServer::start();
    let (r1, r2) = (replica_of(&master), replica_of(&master));
    let mut m = master.client();
    online_replicas(&mut m, 2);
    let (mut c1, mut c2) = (r1.client(), r2.client());
    for i in 0..20 {
        let id = id_of(&addjob(&mut m, &["q", &format!("j{i}"), "5000", "REPLICATE", "3"]));
        assert_eq!(state(&mut c1, &id), "queued", "round {i}");
        assert_eq!(state(&mut c2, &id), "queued", "round {i}");
    }
    assert_eq!(err(&addjob(&mut m, &["q", "x", "5000", "REPLICATE", "4"])), NOT_ENOUGH);
    assert_eq!(err(&addjob(&mut m, &["q", "x", "0", "REPLICATE", "4", "ASYNC"])), NOT_ENOUGH);
    // Disque's order: RETRY 0 with REPLICATE > 1 first.
    assert!(err(&addjob(&mut m, &["q", "x", "0", "REPLICATE", "4", "RETRY", "0"]))
        .starts_with("ERR With RETRY set to 0"));
    assert_eq!(cmd(&mut m, &["QLEN", "q"]), Frame::Integer(20));

    // A replica stopped: ASYNC and REPLICATE 2 answer, 3 times out.
    signal(&r2, "-STOP");
    let t = Instant::now();
    id_of(&addjob(&mut m, &["q", "async", "5000", "REPLICATE", "3", "ASYNC"]));
    assert!(t.elapsed() < Duration::from_millis(1000));
    let id = id_of(&addjob(&mut m, &["q", "two", "5000", "REPLICATE", "2"]));
    assert_eq!(state(&mut c1, &id), "queued");
    let t = Instant::now();
    assert_eq!(err(&addjob(&mut m, &["q", "three", "300", "REPLICATE", "3"])), TIMEOUT);
    assert!(t.elapsed() >= Duration::from_millis(300), "{:?}", t.elapsed());
    // The TTL comes before the timeout (0: none).
    let t = Instant::now();
    assert_eq!(err(&addjob(&mut m, &["q", "ttl", "0", "REPLICATE", "3", "TTL", "1"])), EXPIRED);
    assert!(t.elapsed() >= Duration::from_millis(500), "{:?}", t.elapsed());
    // In a transaction nothing waits (as ASYNC).
    assert_eq!(text(&cmd(&mut m, &["MULTI"])), "OK");
    addjob(&mut m, &["q", "multi", "300", "REPLICATE", "3"]);
    let Frame::Array(Some(replies)) = cmd(&mut m, &["EXEC"]) else { panic!() };
    id_of(&replies[0]);
    signal(&r2, "-CONT");
    // The timed-out job stays (Disque's clean-up is best effort too); the
    // one whose TTL passed goes once the master's timer deletes it.
    wait_for("the expired job to go", Duration::from_secs(10), || {
        cmd(&mut m, &["QLEN", "q"]) == Frame::Integer(24)
    });
    wait_synced(&mut m, &mut c2);
    assert_eq!(cmd(&mut c2, &["QLEN", "q"]), Frame::Integer(24));
}

/// A pipeline mixing REPLICATE with reads and the DURABLE mode: replies
/// in order; with a replica stopped, each held reply gets its own error
/// (REPLICATE's NOREPL where it asked more than there was, DURABLE's
/// NOREPLICAS elsewhere) and the read is answered as is.
#[test]
fn replicate_in_a_pipeline_with_the_durable_mode() {
    let master = TestServer::start();
    let (r1, r2) = (replica_of(&master), replica_of(&master));
    let mut m = master.client();
    online_replicas(&mut m, 2);
    let mut c1 = r1.client();
    // One write, so that the server reads the pipeline as one batch.
    let send = |m: &mut Client, cmds: &[&[&str]]| -> Vec<Frame> {
        let mut bytes = Vec::new();
        for a in cmds {
            testkit::encode(a, &mut bytes);
        }
        m.send_raw(&bytes).unwrap();
        cmds.iter().map(|_| m.read_frame().unwrap()).collect()
    };
    let replies = send(
        &mut m,
        &[
            &["ADDJOB", "p", "a", "5000", "REPLICATE", "3"],
            &["GET", "k"],
            &["ADDJOB", "p", "b", "5000", "REPLICATE", "2"],
            &["QLEN", "p"],
        ],
    );
    let (a, b) = (id_of(&replies[0]), id_of(&replies[2]));
    assert_eq!(replies[1], Frame::Bulk(None));
    assert_eq!(replies[3], Frame::Integer(2));
    assert_eq!(state(&mut c1, &a), "queued");
    assert_eq!(state(&mut c1, &b), "queued");

    signal(&r2, "-STOP");
    assert_eq!(text(&cmd(&mut m, &["DURABLE", "2", "300"])), "OK");
    let replies = send(
        &mut m,
        &[
            &["SET", "k", "v"],
            &["ADDJOB", "p", "c", "400", "REPLICATE", "2"],
            &["ADDJOB", "p", "d", "400", "REPLICATE", "3"],
            &["GET", "k"],
        ],
    );
    signal(&r2, "-CONT");
    let durable = "NOREPLICAS Write applied locally, acknowledged by 1 of 2 replicas within 300 ms";
    assert_eq!(err(&replies[0]), durable);
    assert_eq!(err(&replies[1]), durable);
    assert_eq!(err(&replies[2]), TIMEOUT);
    assert_eq!(text(&replies[3]), "v");
}

/// Every change of a job's state reaches the replicas through the
/// stream: each replica shows what the master shows, after each command.
#[test]
fn job_state_changes_reach_the_replicas() {
    let master = TestServer::start();
    let (r1, r2) = (replica_of(&master), replica_of(&master));
    let mut m = master.client();
    online_replicas(&mut m, 2);
    let (mut c1, mut c2) = (r1.client(), r2.client());
    let ids: Vec<String> = (0..6)
        .map(|i| {
            let f =
                addjob(&mut m, &["s", &format!("b{i}"), "5000", "REPLICATE", "3", "RETRY", "60"]);
            id_of(&f)
        })
        .collect();
    let steps: Vec<Vec<&str>> = vec![
        vec!["GETJOB", "COUNT", "4", "FROM", "s"],
        vec!["WORKING", &ids[0]],
        vec!["NACK", &ids[1]],
        vec!["ACKJOB", &ids[2]],
        vec!["FASTACK", &ids[3]],
        vec!["DEQUEUE", &ids[4]],
        vec!["ENQUEUE", &ids[4]],
        vec!["DELJOB", &ids[5]],
    ];
    for step in &steps {
        if step[0] == "WORKING" {
            // So that the re-queue time WORKING sets is a second later.
            std::thread::sleep(Duration::from_millis(1100));
        }
        let before: Vec<(String, i64)> = ids.iter().map(|id| show(&mut m, id)).collect();
        cmd(&mut m, step);
        let after: Vec<(String, i64)> = ids.iter().map(|id| show(&mut m, id)).collect();
        let moved = |a: &(String, i64), b: &(String, i64)| a.0 != b.0 || (a.1 - b.1).abs() > 500;
        assert!(before.iter().zip(&after).any(|(a, b)| moved(a, b)), "{step:?} changed nothing");
        assert_eq!(cmd(&mut m, &["WAIT", "2", "5000"]), Frame::Integer(2));
        for r in [&mut c1, &mut c2] {
            let seen: Vec<(String, i64)> = ids.iter().map(|id| show(r, id)).collect();
            for (s, a) in seen.iter().zip(&after) {
                assert!(!moved(s, a), "after {step:?}: {s:?} on the replica, {a:?} on the master");
            }
        }
    }
    assert_eq!(state(&mut c1, &ids[0]), "active");
    assert_eq!(state(&mut c1, &ids[1]), "queued");
    assert_eq!(state(&mut c2, &ids[2]), "gone");
    assert_eq!(state(&mut c2, &ids[3]), "gone");
    assert_eq!(state(&mut c2, &ids[5]), "gone");
    assert_eq!(cmd(&mut c2, &["QLEN", "s"]), cmd(&mut m, &["QLEN", "s"]));
}
