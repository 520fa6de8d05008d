//! Sluice's extensions to the job queue (`docs/jobs.md`, "Extensions")
//! through the in-process harness, with the clock moved by the test:
//! NACK back-off, dead-letter queues, WAITJOB's immediate answers, unique
//! jobs, rate-limited queues, periodic jobs, their option errors, and
//! their propagated forms replayed into an empty server.

use super::tests::{add, advance, replay, show_field};
use crate::core::effects::Recorder;
use crate::tests::Harness;

fn qlen(h: &mut Harness, q: &str) -> String {
    h.run(&["QLEN", q])
}

/// The number of jobs in a GETJOB reply.
fn fetched(r: &str) -> usize {
    if r.starts_with("*-1") {
        return 0;
    }
    r[1..r.find("\r\n").unwrap()].parse().unwrap()
}

#[test]
fn extension_option_errors() {
    let mut h = Harness::new();
    let backoff = "-ERR BACKOFF must be two numbers of milliseconds, base > 0 and max >= base, \
                   at most a year\r\n";
    for args in [
        &["BACKOFF", "0", "10"][..],
        &["BACKOFF", "10", "5"],
        &["BACKOFF", "10"],
        &["BACKOFF", "x", "10"],
        &["BACKOFF", "1", "31536000001"],
    ] {
        let mut argv = vec!["ADDJOB", "q", "b", "0"];
        argv.extend_from_slice(args);
        assert_eq!(h.run(&argv), backoff, "{args:?}");
    }
    let dl = "-ERR DEADLETTER max deliveries must be between 1 and 65535\r\n";
    for n in ["0", "65536", "-1", "x"] {
        assert_eq!(h.run(&["ADDJOB", "q", "b", "0", "DEADLETTER", "d", n]), dl);
    }
    assert_eq!(h.run(&["ADDJOB", "q", "b", "0", "DEADLETTER", "d"]), dl);
    let every = "-ERR EVERY must be a number of seconds > 0, at most a year\r\n";
    for n in ["0", "-5", "31536001", "x"] {
        assert_eq!(h.run(&["ADDJOB", "q", "b", "0", "EVERY", n]), every);
    }
    // Disque's own checks keep their order before the extensions' effects.
    assert_eq!(
        h.run(&["ADDJOB", "q", "b", "0", "UNIQUE", "k", "REPLICATE", "2"]),
        "-NOREPL Not enough reachable nodes for the requested replication level\r\n"
    );
    assert_eq!(h.run(&["ADDJOB", "q", "b", "0", "UNIQUE"]), "-ERR syntax error\r\n");
    let rate = "-ERR RATE must be between 0 and 4294967295\r\n";
    for n in ["-1", "4294967296", "x"] {
        assert_eq!(h.run(&["QSET", "q", "RATE", n]), rate);
    }
    assert_eq!(h.run(&["QSET", "q", "SPEED", "1"]), "-ERR syntax error\r\n");
    assert_eq!(
        h.run(&["QSET", "q", "RATE"]),
        "-ERR wrong number of arguments for 'qset' command\r\n"
    );
    assert_eq!(h.run(&["WAITJOB", "nope"]), "-BADID Invalid Job ID format.\r\n");
    assert_eq!(qlen(&mut h, "q"), ":0\r\n");
}

#[test]
fn nack_with_backoff_waits_longer_each_time() {
    let mut h = Harness::new();
    let id = add(&mut h, &["q", "b", "0", "BACKOFF", "1000", "3000", "RETRY", "600"]);
    for (n, wait) in [(1, 1000), (2, 2000), (3, 3000), (4, 3000)] {
        assert_eq!(fetched(&h.run(&["GETJOB", "NOHANG", "FROM", "q"])), 1, "nack {n}");
        assert_eq!(h.run(&["NACK", &id]), ":1\r\n");
        assert_eq!(show_field(&mut h, &id, "nacks"), format!(":{n}"));
        assert_eq!(show_field(&mut h, &id, "state"), "$6");
        advance(&h, wait - 400);
        assert_eq!(qlen(&mut h, "q"), ":0\r\n", "nack {n} queued early");
        advance(&h, 500);
        assert_eq!(qlen(&mut h, "q"), ":1\r\n", "nack {n} not queued");
    }
    // The delayed queueing counts no additional delivery.
    assert_eq!(show_field(&mut h, &id, "additional-deliveries"), ":0");
    let r = h.run(&["SHOW", &id]);
    assert!(r.starts_with("*32\r\n") && r.ends_with("backoff\r\n*2\r\n:1000\r\n:3000\r\n"), "{r}");
    // Without BACKOFF, NACK still queues at once (Disque's).
    let plain = add(&mut h, &["p", "b", "0"]);
    h.run(&["GETJOB", "FROM", "p"]);
    assert_eq!(h.run(&["NACK", &plain]), ":1\r\n");
    assert_eq!(qlen(&mut h, "p"), ":1\r\n");
    assert!(h.run(&["SHOW", &plain]).starts_with("*30\r\n"));
}

#[test]
fn too_many_deliveries_move_a_job_to_its_dead_letter_queue() {
    let mut h = Harness::new();
    let id = add(&mut h, &["q", "b", "0", "DEADLETTER", "dead", "3", "RETRY", "2"]);
    h.run(&["GETJOB", "FROM", "q"]);
    h.run(&["NACK", &id]);
    h.run(&["GETJOB", "FROM", "q"]);
    // Not acknowledged: the retry re-delivers it (the second re-queue).
    advance(&h, 2300);
    assert_eq!(qlen(&mut h, "q"), ":1\r\n");
    h.run(&["GETJOB", "FROM", "q"]);
    assert_eq!(h.run(&["NACK", &id]), ":1\r\n");
    assert_eq!(qlen(&mut h, "q"), ":0\r\n");
    assert_eq!(qlen(&mut h, "dead"), ":1\r\n");
    let r = h.run(&["GETJOB", "WITHCOUNTERS", "FROM", "dead"]);
    assert!(r.contains(&id) && r.contains("nacks\r\n:2\r\n$21\r\nadditional-deliveries\r\n:1"));
    let r = h.run(&["SHOW", &id]);
    assert!(r.contains("dead-letter\r\n*2\r\n$4\r\ndead\r\n:3\r\n"), "{r}");
    assert!(r.contains("dead-lettered-from\r\n$1\r\nq\r\n"), "{r}");
    // In the dead-letter queue it is an ordinary job.
    assert_eq!(h.run(&["NACK", &id]), ":1\r\n");
    assert_eq!(qlen(&mut h, "dead"), ":1\r\n");
}

#[test]
fn waitjob_answers_at_once_when_it_cannot_wait() {
    let mut h = Harness::new();
    let id = add(&mut h, &["q", "b", "0"]);
    assert_eq!(h.run(&["WAITJOB", "D-00000000-000000000000000000000000-0000"]), ":1\r\n");
    h.run(&["MULTI"]);
    h.run(&["WAITJOB", &id, "TIMEOUT", "100"]);
    h.run(&["ACKJOB", &id]);
    h.run(&["WAITJOB", &id]);
    assert_eq!(h.run(&["EXEC"]), "*3\r\n*-1\r\n:1\r\n:1\r\n");
    let id = add(&mut h, &["q", "b", "0"]);
    let r = h.run(&["EVAL", "return redis.call('WAITJOB', ARGV[1])", "0", &id]);
    assert_eq!(r, "$-1\r\n");
    assert_eq!(h.run(&["WAITJOB", &id, "TIMEOUT", "-1"]), "-ERR timeout is negative\r\n");
    assert_eq!(h.run(&["WAITJOB", &id, "FOREVER"]), "-ERR syntax error\r\n");
}

#[test]
fn unique_jobs_answer_the_first_id_while_it_exists() {
    let mut h = Harness::new();
    let rec = Recorder::new();
    h.shared.add_consumer(rec.clone());
    let a = add(&mut h, &["q", "one", "0", "UNIQUE", "order-7"]);
    rec.take();
    // Whatever else the second request says.
    assert_eq!(add(&mut h, &["other", "two", "0", "UNIQUE", "order-7", "DELAY", "5"]), a);
    assert!(rec.take().stream.is_empty(), "a duplicate changes nothing");
    assert_eq!(qlen(&mut h, "q"), ":1\r\n");
    assert_eq!(qlen(&mut h, "other"), ":0\r\n");
    assert!(h.run(&["SHOW", &a]).ends_with("unique\r\n$7\r\norder-7\r\n"));
    // Another key, or no key: new jobs.
    assert_ne!(add(&mut h, &["q", "one", "0", "UNIQUE", "order-8"]), a);
    assert_ne!(add(&mut h, &["q", "one", "0"]), a);
    // Once the job is gone, the key makes a new one.
    assert_eq!(h.run(&["ACKJOB", &a]), ":1\r\n");
    let b = add(&mut h, &["q", "one", "0", "UNIQUE", "order-7"]);
    assert_ne!(a, b);
}

#[test]
fn a_rate_limited_queue_delivers_at_most_n_a_second() {
    let mut h = Harness::new();
    for i in 0..5 {
        add(&mut h, &["q", &i.to_string(), "0"]);
    }
    assert_eq!(h.run(&["QSET", "q", "RATE", "2"]), "+OK\r\n");
    assert_eq!(fetched(&h.run(&["GETJOB", "NOHANG", "COUNT", "5", "FROM", "q"])), 2);
    assert_eq!(fetched(&h.run(&["GETJOB", "NOHANG", "FROM", "q"])), 0);
    let r = h.run(&["QSTAT", "q"]);
    assert!(r.starts_with("*22\r\n") && r.ends_with("rate\r\n:2\r\n"), "{r}");
    // The clock is the system's plus the test's offset: half a second
    // in, even a loaded machine's own milliseconds stay inside the
    // window (999 here failed once when 1 ms of real time passed).
    advance(&h, 500);
    assert_eq!(fetched(&h.run(&["GETJOB", "NOHANG", "FROM", "q"])), 0);
    advance(&h, 500);
    assert_eq!(fetched(&h.run(&["GETJOB", "NOHANG", "COUNT", "5", "FROM", "q"])), 2);
    assert_eq!(h.run(&["QSET", "q", "RATE", "0"]), "+OK\r\n");
    assert_eq!(fetched(&h.run(&["GETJOB", "NOHANG", "COUNT", "5", "FROM", "q"])), 1);
    assert!(h.run(&["QSTAT", "q"]).starts_with("*20\r\n"));
}

#[test]
fn a_periodic_job_runs_every_period_until_deleted() {
    let mut h = Harness::new();
    let id = add(&mut h, &["q", "tick", "0", "EVERY", "10", "TTL", "5", "RETRY", "1"]);
    assert_eq!(fetched(&h.run(&["GETJOB", "FROM", "q"])), 1);
    advance(&h, 2000);
    assert_eq!(h.run(&["ACKJOB", &id]), ":1\r\n");
    assert_eq!(show_field(&mut h, &id, "state"), "$6");
    assert_eq!(qlen(&mut h, "q"), ":0\r\n");
    advance(&h, 7900);
    assert_eq!(qlen(&mut h, "q"), ":0\r\n");
    advance(&h, 200);
    assert_eq!(qlen(&mut h, "q"), ":1\r\n");
    // A run nobody acknowledges ends with its TTL; the job does not.
    advance(&h, 5100);
    assert_eq!(qlen(&mut h, "q"), ":0\r\n");
    assert!(h.run(&["SHOW", &id]).ends_with("every\r\n:10\r\n"));
    advance(&h, 5000);
    assert_eq!(qlen(&mut h, "q"), ":1\r\n");
    assert_eq!(h.run(&["DELJOB", &id]), ":1\r\n");
    assert_eq!(h.run(&["SHOW", &id]), "$-1\r\n");
    assert_eq!(qlen(&mut h, "q"), ":0\r\n");
}

/// Every job's SHOW (and the queues' QSTAT) minus what moves with time or
/// names the node.
fn all_jobs(h: &mut Harness) -> Vec<String> {
    let r = h.run(&["JSCAN", "BUSYLOOP", "REPLY", "ALL"]);
    let ids: Vec<String> = r
        .split("\r\n")
        .enumerate()
        .filter(|(_, l)| l.starts_with("D-") && l.len() == 40)
        .map(|(_, l)| l.to_string())
        .collect();
    let mut out = Vec::new();
    for id in ids {
        let r = h.run(&["SHOW", &id]);
        let l: Vec<&str> = r.split("\r\n").collect();
        let skip = |name: &str| l.iter().position(|x| *x == name).unwrap() + 1;
        let drop = [
            skip("ttl"),
            skip("next-requeue-within"),
            skip("next-awake-within"),
            skip("nodes-delivered") + 2,
        ];
        let keep: Vec<&str> =
            l.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, x)| *x).collect();
        out.push(keep.join("|"));
    }
    out.sort();
    out
}

/// The extensions' state reaches the effects record: replayed into an
/// empty server it rebuilds every job (back-off, dead-letter state,
/// unique key, schedule) and the rate limit.
#[test]
fn propagated_extensions_rebuild_the_jobs() {
    let mut h = Harness::new();
    let rec = Recorder::new();
    h.shared.add_consumer(rec.clone());
    let a = add(&mut h, &["q", "a", "0", "BACKOFF", "500", "9000", "UNIQUE", "ka"]);
    let b = add(&mut h, &["q", "b", "0", "DEADLETTER", "dead", "1"]);
    let c = add(&mut h, &["p", "c", "0", "EVERY", "60", "TTL", "30"]);
    add(&mut h, &["p", "d", "0", "UNIQUE", "kd"]);
    h.run(&["QSET", "r", "RATE", "7"]);
    h.run(&["GETJOB", "COUNT", "2", "FROM", "q"]);
    h.run(&["NACK", &a, &b]);
    h.run(&["GETJOB", "FROM", "p"]);
    h.run(&["ACKJOB", &c]);
    advance(&h, 600);
    let want = all_jobs(&mut h);
    assert_eq!(want.len(), 4, "{want:?}");
    assert_eq!(qlen(&mut h, "dead"), ":1\r\n");
    let stream = rec.take().stream;
    let mut fresh = Harness::new();
    fresh.shared.clock.advance(h.shared.clock.now_ms() - fresh.shared.clock.now_ms());
    replay(&mut fresh, &stream);
    assert_eq!(all_jobs(&mut fresh), want);
    for q in ["q", "p", "dead"] {
        assert_eq!(qlen(&mut fresh, q), qlen(&mut h, q), "{q}");
    }
    assert!(fresh.run(&["QSTAT", "r"]).ends_with("rate\r\n:7\r\n"));
    // The unique keys came along.
    assert_eq!(add(&mut fresh, &["q", "x", "0", "UNIQUE", "ka"]), a);
}
