//! The job queue's commands through the in-process harness, with the
//! clock moved by the test (spec §5's single-node list, every error of
//! §2, reply shapes).

use std::time::Duration;

use crate::core::dispatch::{self, Caller, Lookup};
use crate::core::effects::{Effects, Recorder};
use crate::tests::Harness;

/// Runs the server's tick (active expiry, which drives the job timers).
pub(super) fn tick(h: &Harness) {
    let mut fx = Effects::default();
    h.shared.active_expire(&mut fx, 0, 1, Duration::from_millis(5));
}

pub(super) fn advance(h: &Harness, ms: i64) {
    h.shared.clock.advance(ms);
    tick(h);
}

/// The id in a `+D-...` reply.
pub(super) fn id_of(reply: &str) -> String {
    assert!(reply.starts_with("+D-") && reply.len() == 43, "{reply:?}");
    reply[1..41].to_string()
}

pub(super) fn add(h: &mut Harness, args: &[&str]) -> String {
    let mut argv = vec!["ADDJOB"];
    argv.extend_from_slice(args);
    id_of(&h.run(&argv))
}

/// A SHOW field's raw reply element (the line after its name).
pub(super) fn show_field(h: &mut Harness, id: &str, field: &str) -> String {
    let r = h.run(&["SHOW", id]);
    let lines: Vec<&str> = r.split("\r\n").collect();
    let i = lines.iter().position(|l| *l == field).unwrap_or_else(|| panic!("{field} in {r}"));
    lines[i + 1].to_string()
}

#[test]
fn addjob_ids_and_show() {
    let mut h = Harness::new();
    let id = add(&mut h, &["q", "body", "0"]);
    assert_eq!(&id[2..10], &h.shared.run_id[..8]);
    assert!(id.ends_with("-05a1"), "{id}");
    assert!(add(&mut h, &["q", "b", "0", "RETRY", "0"]).ends_with("-05a0"));
    assert!(add(&mut h, &["q", "b", "0", "TTL", "59", "RETRY", "1"]).ends_with("-0001"));
    assert!(add(&mut h, &["q", "b", "0", "TTL", "59", "RETRY", "0"]).ends_with("-0000"));
    let r = h.run(&["SHOW", &id]);
    assert!(r.starts_with("*30\r\n$2\r\nid\r\n$40\r\n"), "{r}");
    let names: Vec<&str> = r.split("\r\n").filter(|l| l.contains('-') || l.len() > 2).collect();
    for f in [
        "queue",
        "state",
        "repl",
        "ttl",
        "ctime",
        "delay",
        "retry",
        "nacks",
        "additional-deliveries",
        "nodes-delivered",
        "nodes-confirmed",
        "next-requeue-within",
        "next-awake-within",
        "body",
    ] {
        assert!(names.contains(&f), "{f} missing in {r}");
    }
    assert_eq!(show_field(&mut h, &id, "state"), "$6");
    assert!(r.contains("state\r\n$6\r\nqueued\r\n"));
    assert_eq!(show_field(&mut h, &id, "repl"), ":1");
    // Remaining whole seconds: 86400 until a millisecond has passed.
    let ttl = show_field(&mut h, &id, "ttl");
    assert!(ttl == ":86400" || ttl == ":86399", "{ttl}");
    assert!(r.contains("nodes-delivered\r\n*1\r\n$40\r\n"));
    assert!(r.contains("nodes-confirmed\r\n*0\r\n"));
    assert!(r.ends_with("body\r\n$4\r\nbody\r\n"));
    assert_eq!(h.run(&["SHOW", "D-00000000-AAAAAAAAAAAAAAAAAAAAAAAA-0000"]), "$-1\r\n");
    assert_eq!(h.run(&["SHOW", "nope"]), "-BADID Invalid Job ID format.\r\n");
    // Default RETRY: TTL/10, at most 300, at least 1.
    let j = add(&mut h, &["q", "b", "0", "TTL", "100"]);
    assert_eq!(show_field(&mut h, &j, "retry"), ":10");
    let j = add(&mut h, &["q", "b", "0", "TTL", "5"]);
    assert_eq!(show_field(&mut h, &j, "retry"), ":1");
    assert_eq!(show_field(&mut h, &id, "retry"), ":300");
}

#[test]
fn addjob_errors_in_the_spec_order() {
    let mut h = Harness::new();
    let e = |h: &mut Harness, a: &[&str]| {
        let mut argv = vec!["ADDJOB", "q", "b"];
        argv.extend_from_slice(a);
        h.run(&argv)
    };
    assert_eq!(
        h.run(&["ADDJOB", "q", "b"]),
        "-ERR wrong number of arguments for 'addjob' command\r\n"
    );
    assert_eq!(
        e(&mut h, &["0", "REPLICATE", "0"]),
        "-ERR REPLICATE must be between 1 and 65535\r\n"
    );
    assert_eq!(
        e(&mut h, &["0", "REPLICATE", "65536"]),
        "-ERR REPLICATE must be between 1 and 65535\r\n"
    );
    assert_eq!(
        e(&mut h, &["0", "REPLICATE", "x"]),
        "-ERR REPLICATE must be between 1 and 65535\r\n"
    );
    assert_eq!(e(&mut h, &["0", "TTL", "0"]), "-ERR TTL must be a number > 0\r\n");
    assert_eq!(
        e(&mut h, &["0", "TTL", "99999999999999999999"]),
        "-ERR TTL must be a number > 0\r\n"
    );
    assert_eq!(
        e(&mut h, &["0", "RETRY", "-1"]),
        "-ERR RETRY time must be a non negative number\r\n"
    );
    assert_eq!(
        e(&mut h, &["0", "DELAY", "-1"]),
        "-ERR DELAY time must be a non negative number\r\n"
    );
    assert_eq!(e(&mut h, &["0", "MAXLEN", "0"]), "-ERR MAXLEN must be a positive number\r\n");
    assert_eq!(e(&mut h, &["0", "TTL"]), "-ERR syntax error\r\n");
    assert_eq!(e(&mut h, &["0", "FOO"]), "-ERR syntax error\r\n");
    // Options are parsed before the timeout.
    assert_eq!(e(&mut h, &["x", "FOO"]), "-ERR syntax error\r\n");
    assert_eq!(e(&mut h, &["x"]), "-ERR timeout is not an integer or out of range\r\n");
    assert_eq!(e(&mut h, &["-1"]), "-ERR timeout is negative\r\n");
    assert_eq!(
        e(&mut h, &["0", "REPLICATE", "2", "RETRY", "0"]),
        "-ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)\r\n"
    );
    assert_eq!(
        e(&mut h, &["0", "DELAY", "10", "TTL", "10"]),
        "-ERR The specified DELAY is greater than TTL. Job refused since would never be delivered\r\n"
    );
    assert_eq!(
        e(&mut h, &["0", "REPLICATE", "2"]),
        "-NOREPL Not enough reachable nodes for the requested replication level\r\n"
    );
    // ASYNC is accepted (and changes nothing on one node), in any case.
    assert!(e(&mut h, &["0", "async", "replicate", "1"]).starts_with("+D-"));
    assert!(e(&mut h, &["0", "MAXLEN", "2"]).starts_with("+D-"));
    assert_eq!(
        e(&mut h, &["0", "MAXLEN", "2"]),
        "-MAXLEN Queue is already longer than the specified MAXLEN count\r\n"
    );
    assert_eq!(h.run(&["PAUSE", "q", "in"]), "+in\r\n");
    assert_eq!(e(&mut h, &["0"]), "-PAUSED Queue paused in input, try later\r\n");
    assert_eq!(h.run(&["QLEN", "q"]), ":2\r\n");
}

#[test]
fn getjob_shapes_and_order() {
    let mut h = Harness::new();
    let mut ids = vec![];
    for i in 0..100 {
        ids.push(add(&mut h, &["q", &i.to_string(), "0", "RETRY", "0"]));
    }
    for (i, id) in ids.iter().enumerate() {
        let want =
            format!("*1\r\n*3\r\n$1\r\nq\r\n$40\r\n{id}\r\n${}\r\n{i}\r\n", i.to_string().len());
        assert_eq!(h.run(&["GETJOB", "FROM", "q"]), want);
    }
    assert_eq!(h.run(&["GETJOB", "NOHANG", "FROM", "q"]), "*-1\r\n");
    assert_eq!(h.run(&["QLEN", "q"]), ":0\r\n");
    // One job from each queue per pass: a, b, a.
    for q in ["a", "a", "b"] {
        add(&mut h, &[q, q, "0"]);
    }
    let r = h.run(&["GETJOB", "COUNT", "3", "FROM", "a", "b"]);
    assert!(r.starts_with("*3\r\n*3\r\n$1\r\na\r\n"), "{r}");
    let order: Vec<&str> = r.split("\r\n").filter(|l| l.len() == 1).collect();
    assert_eq!(order, ["a", "a", "b", "b", "a", "a"]);
    let id = add(&mut h, &["c", "x", "0"]);
    assert_eq!(
        h.run(&["GETJOB", "WITHCOUNTERS", "FROM", "c"]),
        format!(
            "*1\r\n*7\r\n$1\r\nc\r\n$40\r\n{id}\r\n$1\r\nx\r\n$5\r\nnacks\r\n:0\r\n\
             $21\r\nadditional-deliveries\r\n:0\r\n"
        )
    );
    for (args, err) in [
        (vec!["GETJOB"], "-ERR wrong number of arguments for 'getjob' command"),
        (vec!["GETJOB", "FROM"], "-ERR syntax error"),
        (vec!["GETJOB", "NOHANG"], "-ERR syntax error"),
        (vec!["GETJOB", "BOGUS", "FROM", "q"], "-ERR syntax error"),
        (
            vec!["GETJOB", "COUNT", "0", "FROM", "q"],
            "-ERR COUNT must be a number greater than zero",
        ),
        (
            vec!["GETJOB", "COUNT", "x", "FROM", "q"],
            "-ERR COUNT must be a number greater than zero",
        ),
        (
            vec!["GETJOB", "TIMEOUT", "x", "FROM", "q"],
            "-ERR timeout is not an integer or out of range",
        ),
        (vec!["GETJOB", "TIMEOUT", "-5", "FROM", "q"], "-ERR timeout is negative"),
    ] {
        assert_eq!(h.run(&args), format!("{err}\r\n"), "{args:?}");
    }
}

#[test]
fn acks_and_deletions() {
    let mut h = Harness::new();
    let a = add(&mut h, &["q", "a", "0"]);
    let b = add(&mut h, &["q", "b", "0"]);
    let c = add(&mut h, &["q", "c", "0"]);
    for cmd in ["ACKJOB", "FASTACK", "DELJOB", "NACK", "ENQUEUE", "DEQUEUE"] {
        assert_eq!(h.run(&[cmd]), ":0\r\n", "{cmd}");
        // All ids are checked before anything is done.
        assert_eq!(h.run(&[cmd, &a, "bad"]), "-BADID Invalid Job ID format.\r\n");
    }
    assert_eq!(h.run(&["QLEN", "q"]), ":3\r\n");
    assert_eq!(h.run(&["ACKJOB", &a, &a]), ":1\r\n");
    assert_eq!(h.run(&["SHOW", &a]), "$-1\r\n");
    assert_eq!(h.run(&["FASTACK", &a, &b]), ":1\r\n");
    assert_eq!(h.run(&["DELJOB", &c, "D-00000000-AAAAAAAAAAAAAAAAAAAAAAAA-05a1"]), ":1\r\n");
    assert_eq!(h.run(&["QLEN", "q"]), ":0\r\n");
    assert_eq!(h.run(&["INFO", "jobs"]), "$27\r\n# Jobs\r\nregistered_jobs:0\r\n\r\n");
}

#[test]
fn nack_enqueue_dequeue_and_counters() {
    let mut h = Harness::new();
    let a = add(&mut h, &["q", "a", "0", "RETRY", "10"]);
    // Only active jobs are queued by NACK/ENQUEUE.
    assert_eq!(h.run(&["NACK", &a]), ":0\r\n");
    assert_eq!(h.run(&["DEQUEUE", &a]), ":1\r\n");
    assert_eq!(h.run(&["DEQUEUE", &a]), ":0\r\n");
    assert!(h.run(&["SHOW", &a]).contains("active"));
    assert_eq!(h.run(&["ENQUEUE", &a]), ":1\r\n");
    assert_eq!(show_field(&mut h, &a, "additional-deliveries"), ":1");
    h.run(&["GETJOB", "FROM", "q"]);
    assert_eq!(h.run(&["NACK", &a]), ":1\r\n");
    assert_eq!(show_field(&mut h, &a, "nacks"), ":1");
    let r = h.run(&["GETJOB", "WITHCOUNTERS", "FROM", "q"]);
    assert!(r.ends_with("nacks\r\n:1\r\n$21\r\nadditional-deliveries\r\n:1\r\n"), "{r}");
    // At-most-once: queued once, never again.
    let m = add(&mut h, &["q", "m", "0", "RETRY", "0"]);
    assert_eq!(show_field(&mut h, &m, "next-requeue-within"), "$-1");
    h.run(&["GETJOB", "FROM", "q"]);
    assert_eq!(h.run(&["NACK", &m]), ":0\r\n");
    assert_eq!(h.run(&["ENQUEUE", &m]), ":0\r\n");
    assert!(h.run(&["SHOW", &m]).contains("active"));
}

#[test]
fn retry_requeues_an_unacknowledged_job() {
    let mut h = Harness::new();
    let a = add(&mut h, &["q", "a", "0", "RETRY", "5"]);
    let z = add(&mut h, &["q", "z", "0", "RETRY", "0"]);
    assert!(h.run(&["GETJOB", "COUNT", "2", "FROM", "q"]).starts_with("*2"));
    // Margins (the clock also moves by itself) around 5 s ± 250 ms.
    advance(&h, 2500);
    assert_eq!(h.run(&["QLEN", "q"]), ":0\r\n");
    advance(&h, 2800);
    assert_eq!(h.run(&["QLEN", "q"]), ":1\r\n");
    let r = h.run(&["GETJOB", "WITHCOUNTERS", "FROM", "q"]);
    assert!(r.contains(&a) && r.ends_with("additional-deliveries\r\n:1\r\n"), "{r}");
    // A queued job is not queued twice: its timer moves on.
    advance(&h, 6000);
    h.run(&["DEQUEUE", &a]);
    assert!(h.run(&["SHOW", &z]).contains("active"));
    // WORKING postpones the retry; past half the TTL it is refused.
    let w = add(&mut h, &["q", "w", "0", "RETRY", "5", "TTL", "20"]);
    h.run(&["GETJOB", "FROM", "q"]);
    h.run(&["GETJOB", "NOHANG", "FROM", "q"]);
    for _ in 0..4 {
        advance(&h, 2000);
        assert_eq!(h.run(&["WORKING", &w]), ":5\r\n");
        assert!(h.run(&["SHOW", &w]).contains("active"));
    }
    advance(&h, 2001);
    assert_eq!(
        h.run(&["WORKING", &w]),
        "-TOOLATE Half of job TTL already elapsed, you are no longer allowed to postpone the \
         next delivery.\r\n"
    );
    assert_eq!(h.run(&["WORKING", "x"]), "-BADID Invalid Job ID format.\r\n");
    assert_eq!(
        h.run(&["WORKING", "D-00000000-AAAAAAAAAAAAAAAAAAAAAAAA-05a1"]),
        "-NOJOB Job not known in the context of this node.\r\n"
    );
    assert_eq!(h.run(&["WORKING", &z]), ":0\r\n");
}

#[test]
fn ttl_delay_and_mass_expiry() {
    let mut h = Harness::new();
    let a = add(&mut h, &["q", "a", "0", "TTL", "5"]);
    let d = add(&mut h, &["q", "d", "0", "DELAY", "2", "TTL", "100"]);
    assert!(h.run(&["SHOW", &d]).contains("active"));
    assert_eq!(h.run(&["QLEN", "q"]), ":1\r\n");
    advance(&h, 2000);
    assert!(h.run(&["SHOW", &d]).contains("queued"));
    assert_eq!(show_field(&mut h, &d, "additional-deliveries"), ":0");
    // The clock is the system's plus the test's moves: margins allow for
    // the real time a loaded machine takes between the steps.
    advance(&h, 2000);
    assert!(h.run(&["SHOW", &a]).starts_with("*30"));
    advance(&h, 1000);
    assert_eq!(h.run(&["SHOW", &a]), "$-1\r\n");
    for i in 0..1000 {
        add(&mut h, &["m", &i.to_string(), "0", "TTL", "5"]);
    }
    assert!(h.run(&["INFO", "jobs"]).contains("registered_jobs:1001\r\n"));
    advance(&h, 5000);
    assert!(h.run(&["INFO", "jobs"]).contains("registered_jobs:1\r\n"));
    assert_eq!(h.run(&["QLEN", "m"]), ":0\r\n");
}

#[test]
fn pause_states() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["PAUSE", "q", "state"]), "+none\r\n");
    assert_eq!(h.run(&["QSTAT", "q"]), "*-1\r\n");
    assert_eq!(h.run(&["PAUSE", "q", "none"]), "+none\r\n");
    assert_eq!(h.run(&["QSTAT", "q"]), "*-1\r\n", "none creates no queue");
    assert_eq!(h.run(&["PAUSE", "q", "in"]), "+in\r\n");
    assert_eq!(h.run(&["PAUSE", "q", "out"]), "+out\r\n", "replaced, not added");
    assert_eq!(h.run(&["PAUSE", "q", "in", "out", "bcast"]), "+all\r\n");
    assert_eq!(h.run(&["PAUSE", "q", "STATE"]), "+all\r\n");
    assert_eq!(h.run(&["PAUSE", "q", "all", "none", "in"]), "+in\r\n");
    assert_eq!(h.run(&["PAUSE", "q", "nope"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["PAUSE", "q"]), "-ERR wrong number of arguments for 'pause' command\r\n");
    // Paused in output: GETJOB sees nothing.
    h.run(&["PAUSE", "q", "none"]);
    let a = add(&mut h, &["q", "a", "0"]);
    h.run(&["PAUSE", "q", "out"]);
    assert_eq!(h.run(&["GETJOB", "NOHANG", "FROM", "q"]), "*-1\r\n");
    // Paused in input: NACK and ENQUEUE still queue.
    h.run(&["PAUSE", "q", "in"]);
    assert!(h.run(&["GETJOB", "NOHANG", "FROM", "q"]).contains(&a));
    assert_eq!(h.run(&["NACK", &a]), ":1\r\n");
}

#[test]
fn qpeek_qstat_qscan_jscan() {
    let mut h = Harness::new();
    let a = add(&mut h, &["q", "a", "0"]);
    let b = add(&mut h, &["q", "b", "0"]);
    assert_eq!(h.run(&["QPEEK", "nope", "3"]), "*0\r\n");
    assert_eq!(h.run(&["QPEEK", "q", "0"]), "*0\r\n");
    assert_eq!(h.run(&["QPEEK", "q", "x"]), "-ERR value is not an integer or out of range\r\n");
    let fw = h.run(&["QPEEK", "q", "5"]);
    assert!(fw.starts_with("*2\r\n*3\r\n$1\r\nq\r\n") && fw.find(&a) < fw.find(&b), "{fw}");
    let bw = h.run(&["QPEEK", "q", "-1"]);
    assert!(bw.starts_with("*1\r\n") && bw.contains(&b), "{bw}");
    assert!(h.run(&["QPEEK", "q", "-9223372036854775808"]).starts_with("*2\r\n"));
    h.run(&["GETJOB", "FROM", "q"]);
    let st = h.run(&["QSTAT", "q"]);
    assert!(
        st.starts_with("*20\r\n$4\r\nname\r\n$1\r\nq\r\n$3\r\nlen\r\n:1\r\n$3\r\nage\r\n:0\r\n"),
        "{st}"
    );
    assert!(
        st.contains("blocked\r\n:0\r\n$11\r\nimport-from\r\n*0\r\n$11\r\nimport-rate\r\n:0\r\n")
    );
    assert!(
        st.ends_with("jobs-in\r\n:2\r\n$8\r\njobs-out\r\n:1\r\n$5\r\npause\r\n$4\r\nnone\r\n"),
        "{st}"
    );
    for i in 0..16 {
        add(&mut h, &[&format!("x{i}"), "1", "0"]);
        add(&mut h, &[&format!("x{i}"), "2", "0"]);
        if i < 8 {
            add(&mut h, &[&format!("x{i}"), "3", "0"]);
        }
    }
    let count = |h: &mut Harness, args: &[&str]| {
        let r = h.run(args);
        assert!(r.starts_with("*2\r\n$1\r\n0\r\n"), "{r}");
        r.split("\r\n").nth(3).unwrap().trim_start_matches('*').parse::<usize>().unwrap()
    };
    assert_eq!(count(&mut h, &["QSCAN", "BUSYLOOP"]), 17);
    assert_eq!(count(&mut h, &["QSCAN", "BUSYLOOP", "MINLEN", "2"]), 16);
    assert_eq!(count(&mut h, &["QSCAN", "BUSYLOOP", "MINLEN", "3"]), 8);
    assert_eq!(count(&mut h, &["QSCAN", "MINLEN", "2", "MAXLEN", "3", "BUSYLOOP"]), 16);
    assert_eq!(count(&mut h, &["QSCAN", "BUSYLOOP", "IMPORTRATE", "1"]), 0);
    assert_eq!(h.run(&["QSCAN", "abc"]), "-ERR invalid cursor or option name\r\n");
    assert_eq!(h.run(&["QSCAN", "0", "0"]), "-ERR syntax error\r\n");
    assert_eq!(h.run(&["QSCAN", "COUNT", "x"]), "-ERR value is not an integer or out of range\r\n");
    assert_eq!(count(&mut h, &["JSCAN", "BUSYLOOP"]), 42);
    assert_eq!(count(&mut h, &["JSCAN", "0", "BUSYLOOP", "QUEUE", "q"]), 2);
    assert_eq!(count(&mut h, &["JSCAN", "BUSYLOOP", "STATE", "active"]), 1);
    assert_eq!(count(&mut h, &["JSCAN", "BUSYLOOP", "STATE", "ACTIVE", "STATE", "queued"]), 42);
    let r = h.run(&["JSCAN", "BUSYLOOP", "STATE", "active"]);
    assert!(r.ends_with(&format!("*1\r\n+{a}\r\n")), "{r}");
    let r = h.run(&["JSCAN", "BUSYLOOP", "QUEUE", "q", "STATE", "active", "REPLY", "all"]);
    assert!(
        r.starts_with("*2\r\n$1\r\n0\r\n*1\r\n*30\r\n$2\r\nid\r\n")
            && r.ends_with("body\r\n$1\r\na\r\n"),
        "{r}"
    );
    assert_eq!(h.run(&["JSCAN", "STATE", "nope"]), "-ERR Invalid job state name\r\n");
    assert_eq!(h.run(&["JSCAN", "REPLY", "nope"]), "-ERR Invalid REPLY type, try ID or ALL\r\n");
    // Cursor loops see every job.
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let r = h.run(&["JSCAN", &cursor, "COUNT", "5"]);
        let lines: Vec<&str> = r.split("\r\n").collect();
        cursor = lines[2].to_string();
        seen.extend(lines.iter().filter(|l| l.starts_with("+D-")).map(|l| l.to_string()));
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 42);
}

#[test]
fn jobs_are_not_keys() {
    let mut h = Harness::new();
    add(&mut h, &["q", "a", "0"]);
    assert_eq!(h.run(&["DBSIZE"]), ":0\r\n");
    assert_eq!(h.run(&["KEYS", "*"]), "*0\r\n");
    assert_eq!(h.run(&["SCAN", "0"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(h.run(&["EXISTS", "q"]), ":0\r\n");
    // FLUSHALL empties the databases, not the job queue (docs/jobs.md).
    assert_eq!(h.run(&["FLUSHALL"]), "+OK\r\n");
    assert_eq!(h.run(&["QLEN", "q"]), ":1\r\n");
    assert!(h.run(&["INFO", "queues"]).contains("registered_queues:1\r\n"));
}

#[test]
fn jobs_in_transactions_and_scripts() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "k", "v"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["ADDJOB", "q", "a", "0"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["GETJOB", "FROM", "q"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["GETJOB", "FROM", "q"]), "+QUEUED\r\n");
    let r = h.run(&["EXEC"]);
    assert!(r.starts_with("*4\r\n+OK\r\n+D-") && r.ends_with("$1\r\na\r\n*-1\r\n"), "{r}");
    let r = h.run(&["EVAL", "return redis.call('ADDJOB', ARGV[1], 'b', 0)", "1", "k", "q"]);
    assert!(r.starts_with("+D-"), "{r}");
    let r = h.run(&["EVAL", "local j = redis.call('GETJOB', 'FROM', 'q') return j[1][3]", "0"]);
    assert_eq!(r, "$1\r\nb\r\n");
    assert_eq!(h.run(&["EVAL", "return redis.call('GETJOB', 'FROM', 'q')", "0"]), "$-1\r\n");
    assert_eq!(
        h.run(&["LOADJOB", "x"]),
        "-ERR LOADJOB is a special command only processed from AOF\r\n"
    );
}

/// Runs recorded commands as an AOF replay would (the Replay caller).
pub(super) fn replay(h: &mut Harness, cmds: &[Vec<Vec<u8>>]) {
    for c in cmds {
        let argv: Vec<&[u8]> = c.iter().map(|a| &a[..]).collect();
        let Lookup::Found(spec) = dispatch::lookup(&h.shared, &argv) else { panic!("{argv:?}") };
        let mut keys = store::Locks::new(&h.shared.store, h.shared.clock.now_ms());
        dispatch::lock_keys(&h.shared, h.sess.db, spec, &argv, &mut keys).unwrap();
        let mut out = resp::ReplyBuf::new();
        dispatch::call(&h.shared, &mut h.sess, &mut keys, spec, &argv, &mut out, Caller::Replay);
        let r = out.to_vec();
        assert!(r[0] != b'-', "{:?}: {}", argv, String::from_utf8_lossy(&r));
    }
}

/// What SHOW says of every job, minus what moves with time.
fn state_of(h: &mut Harness) -> Vec<String> {
    let r = h.run(&["JSCAN", "BUSYLOOP", "REPLY", "ALL"]);
    let mut jobs: Vec<String> = r
        .split("*30\r\n")
        .skip(1)
        .map(|j| {
            let l: Vec<&str> = j.split("\r\n").collect();
            // Drop ttl's, next-requeue's and next-awake's values.
            let skip = |name: &str| l.iter().position(|x| *x == name).unwrap() + 1;
            // And the node id: the fresh server is another node.
            let drop = [
                skip("ttl"),
                skip("next-requeue-within"),
                skip("next-awake-within"),
                skip("nodes-delivered") + 2,
            ];
            let keep: Vec<&str> =
                l.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, x)| *x).collect();
            keep.join("|")
        })
        .collect();
    jobs.sort();
    jobs
}

/// Every change to a job reaches the effects record in a form that,
/// replayed into an empty server, rebuilds every job in its state:
/// queued, active with its counters, acknowledged and expired ones gone.
#[test]
fn propagated_forms_rebuild_the_jobs() {
    let mut h = Harness::new();
    let rec = Recorder::new();
    h.shared.add_consumer(rec.clone());
    let a = add(&mut h, &["q", "a", "0", "RETRY", "1"]);
    let b = add(&mut h, &["q", "b", "0", "RETRY", "0"]);
    let c = add(&mut h, &["q", "c", "0", "DELAY", "5"]);
    let _d = add(&mut h, &["r", "d", "0", "TTL", "2"]);
    let e = add(&mut h, &["r", "e\r\nbinary\x00", "0"]);
    h.run(&["GETJOB", "COUNT", "2", "FROM", "q"]);
    h.run(&["NACK", &b]);
    h.run(&["ENQUEUE", &c]);
    h.run(&["DEQUEUE", &e]);
    h.run(&["WORKING", &e]);
    h.run(&["MULTI"]);
    h.run(&["ACKJOB", &c]);
    h.run(&["ADDJOB", "s", "f", "0"]);
    h.run(&["EXEC"]);
    advance(&h, 1300);
    advance(&h, 1000);
    assert!(h.run(&["SHOW", &a]).contains("queued"));
    let want = state_of(&mut h);
    assert_eq!(want.len(), 4, "{want:?}");
    let stream = rec.take().stream;
    let names: Vec<String> =
        stream.iter().map(|c| String::from_utf8_lossy(&c[0]).into_owned()).collect();
    assert!(
        names
            .iter()
            .all(|n| ["SELECT", "LOADJOB", "DELJOB", "MULTI", "EXEC"].contains(&n.as_str())),
        "{names:?}"
    );
    let mut fresh = Harness::new();
    fresh.shared.clock.advance(h.shared.clock.now_ms() - fresh.shared.clock.now_ms());
    replay(&mut fresh, &stream);
    assert_eq!(state_of(&mut fresh), want);
    assert_eq!(fresh.run(&["QLEN", "q"]), h.run(&["QLEN", "q"]));
}

#[test]
fn loadjob_rejects_bad_records() {
    let mut h = Harness::new();
    let cmds = [vec![b"LOADJOB".to_vec(), b"\x01garbage".to_vec()]];
    let argv: Vec<&[u8]> = cmds[0].iter().map(|a| &a[..]).collect();
    let Lookup::Found(spec) = dispatch::lookup(&h.shared, &argv) else { unreachable!() };
    let mut keys = store::Locks::new(&h.shared.store, h.shared.clock.now_ms());
    dispatch::lock_keys(&h.shared, 0, spec, &argv, &mut keys).unwrap();
    let mut out = resp::ReplyBuf::new();
    dispatch::call(&h.shared, &mut h.sess, &mut keys, spec, &argv, &mut out, Caller::Replay);
    assert_eq!(out.to_vec(), b"-ERR LOADJOB: malformed job record\r\n");
}

#[test]
fn memory_level_refuses_addjob() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["CONFIG", "SET", "maxmemory", "1000"]), "+OK\r\n");
    assert_eq!(
        h.run(&["ADDJOB", "q", "a", "0"]),
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    let used = h.shared.mem_stats().used_memory;
    // Between 75 % and 100 %: Disque's own refusal.
    h.run(&["CONFIG", "SET", "maxmemory", &(used + used / 5).to_string()]);
    assert_eq!(
        h.run(&["ADDJOB", "q", "a", "0"]),
        "-NOREPL Not enough reachable nodes for the requested replication level, since I'm \
         unable to hold a copy of the message for the following reason: I'm out of memory\r\n"
    );
}

/// Regression: `MULTI`, `LOADJOB …`, `EXEC` from a client reached
/// LOADJOB's handler (EXEC ran its queue as its own caller and forgot
/// that the queue came from a client). Queued, LOADJOB is refused with the
/// error it gets alone; the same transaction read back from the AOF (or a
/// master) still loads the job.
#[test]
fn loadjob_queued_by_a_client_is_refused_as_alone() {
    let mut h = Harness::new();
    let rec = Recorder::new();
    h.shared.add_consumer(rec.clone());
    let id = add(&mut h, &["q", "body", "0"]);
    let stream = rec.take().stream;
    let load: Vec<&[u8]> = stream
        .iter()
        .find(|c| c[0] == b"LOADJOB")
        .expect("ADDJOB propagates as LOADJOB")
        .iter()
        .map(|a| &a[..])
        .collect();
    let refused = "-ERR LOADJOB is a special command only processed from AOF\r\n";

    let mut fresh = Harness::new();
    assert_eq!(fresh.run(&["MULTI"]), "+OK\r\n");
    let mut out = resp::ReplyBuf::new();
    crate::execute(&fresh.shared, &mut fresh.sess, &load, &mut out);
    assert_eq!(out.to_vec(), b"+QUEUED\r\n");
    assert_eq!(fresh.run(&["EXEC"]), format!("*1\r\n{refused}"));
    assert_eq!(fresh.run(&["QLEN", "q"]), ":0\r\n");
    assert_eq!(fresh.run(&["SHOW", &id]), "$-1\r\n");

    // The replayed transaction is the AOF's own form: it loads.
    for argv in [&[&b"MULTI"[..]][..], &load, &[b"EXEC"]] {
        let mut out = resp::ReplyBuf::new();
        dispatch::replay(&fresh.shared, &mut fresh.sess, argv, &mut out).unwrap();
    }
    assert_eq!(fresh.run(&["QLEN", "q"]), ":1\r\n");
}

/// LOADJOB's refusal is its table flag (`REPLAY_ONLY`), checked at the
/// door every caller passes: a valid record is refused from a client
/// alone and from a script (never reaching the handler, so nothing
/// loads), and counted as a rejected call; a replay loads it.
#[test]
fn loadjob_is_refused_at_the_door_for_every_caller_but_a_replay() {
    let mut h = Harness::new();
    let rec = Recorder::new();
    h.shared.add_consumer(rec.clone());
    let id = add(&mut h, &["q", "body", "0"]);
    let load: Vec<Vec<u8>> = rec
        .take()
        .stream
        .into_iter()
        .find(|c| c[0] == b"LOADJOB")
        .expect("ADDJOB propagates as LOADJOB");
    let refused = "-ERR LOADJOB is a special command only processed from AOF\r\n";

    let mut fresh = Harness::new();
    let argv: Vec<&[u8]> = load.iter().map(|a| &a[..]).collect();
    let mut out = resp::ReplyBuf::new();
    crate::execute(&fresh.shared, &mut fresh.sess, &argv, &mut out);
    assert_eq!(String::from_utf8_lossy(&out.to_vec()), refused);
    // (A record the handler would call malformed: the door answers first.)
    let r = fresh.run(&["EVAL", "return redis.pcall('LOADJOB', 'x')", "0"]);
    assert!(r.contains("LOADJOB is a special command only processed from AOF"), "{r}");
    assert_eq!(fresh.run(&["SHOW", &id]), "$-1\r\n");
    let stats = fresh.run(&["INFO", "commandstats"]);
    let line = stats.lines().find(|l| l.starts_with("cmdstat_loadjob:")).expect(&stats);
    assert!(line.contains("calls=0,") && line.contains("rejected_calls=2,"), "{line}");

    replay(&mut fresh, std::slice::from_ref(&load));
    assert_eq!(fresh.run(&["QLEN", "q"]), ":1\r\n");
}
