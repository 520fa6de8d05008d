//! In-process command tests: `run(&["SET","k","v"])` → reply bytes.

use std::sync::Arc;

use resp::ReplyBuf;

use crate::{execute, Config, Session, Shared};

pub(crate) struct Harness {
    pub shared: Arc<Shared>,
    pub sess: Session,
}

impl Harness {
    pub fn new() -> Self {
        Harness::with_host(|_| crate::core::host::Host::none())
    }

    /// A harness whose server plugs `host` in.
    pub fn with_host(
        host: impl FnOnce(&std::sync::Weak<Shared>) -> crate::core::host::Host,
    ) -> Self {
        // The in-process tests use DEBUG as the TCP tests' servers do.
        let config = Config { enable_debug_command: "yes".into(), ..Config::default() };
        let shared = Shared::with_host(config, crate::commands::table(), host);
        let sess = shared.connect("127.0.0.1:1".into(), "127.0.0.1:6379".into(), -1);
        Harness { shared, sess }
    }

    pub fn run(&mut self, argv: &[&str]) -> String {
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let mut out = ReplyBuf::new();
        // The server keeps one ReplyBuf per connection, so its protocol
        // persists; here a fresh buffer takes it from the client handle.
        if self.sess.handle.resp.load(std::sync::atomic::Ordering::Relaxed) == 3 {
            out.proto = resp::Proto::Resp3;
        }
        execute(&self.shared, &mut self.sess, &argv, &mut out);
        String::from_utf8_lossy(&out.to_vec()).into_owned()
    }

    /// Runs a command into a buffer limited to `limit` bytes (a client's
    /// output buffer limit); returns whether it went over and the
    /// buffer's allocated bytes.
    pub fn run_limited(&mut self, argv: &[&str], limit: usize) -> (bool, usize) {
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let mut out = ReplyBuf::new();
        out.set_limit(limit);
        execute(&self.shared, &mut self.sess, &argv, &mut out);
        (out.is_over(), out.allocated())
    }
}

/// SRANDMEMBER, ZRANDMEMBER and HRANDFIELD with a huge negative count (a
/// reply of 4.6e18 elements) grew until the machine ran out; the output
/// limit now cuts the reply as it is built and the loop stops there.
#[test]
fn random_members_with_huge_negative_counts_stop_at_the_output_limit() {
    let mut h = Harness::new();
    h.run(&["SADD", "s", "a", "b"]);
    h.run(&["ZADD", "z", "1", "a"]);
    h.run(&["HSET", "h", "a", "1"]);
    let start = std::time::Instant::now();
    for argv in [
        &["SRANDMEMBER", "s", "-4611686018427387904"][..],
        &["ZRANDMEMBER", "z", "-4611686018427387904"],
        &["ZRANDMEMBER", "z", "-4611686018427387903", "WITHSCORES"],
        &["HRANDFIELD", "h", "-9223372036854775807"],
        &["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"],
    ] {
        let (over, allocated) = h.run_limited(argv, 1 << 20);
        assert!(over, "{argv:?} did not reach the limit");
        assert!(allocated < 2 << 20, "{argv:?} kept {allocated} bytes");
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    // Under the limit nothing changes.
    assert!(!h.run_limited(&["SRANDMEMBER", "s", "-1000"], 1 << 20).0);
}

#[test]
fn set_get_del() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(h.run(&["get", "k"]), "$1\r\nv\r\n");
    assert_eq!(h.run(&["SET", "k", "w", "NX"]), "$-1\r\n");
    assert_eq!(h.run(&["SET", "k", "w", "XX", "GET"]), "$1\r\nv\r\n");
    assert_eq!(h.run(&["DEL", "k", "k2"]), ":1\r\n");
    assert_eq!(h.run(&["GET", "k"]), "$-1\r\n");
    assert_eq!(
        h.run(&["SET", "k", "v", "EX", "0"]),
        "-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(h.run(&["SET", "k", "v", "EX", "1", "PX", "1"]), "-ERR syntax error\r\n");
}

#[test]
fn multi_exec_watch() {
    let mut h = Harness::new();
    let mut other = Harness {
        shared: h.shared.clone(),
        sess: h.shared.connect(String::new(), String::new(), -1),
    };
    assert_eq!(h.run(&["WATCH", "a"]), "+OK\r\n");
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "a", "1"]), "+QUEUED\r\n");
    assert_eq!(other.run(&["SET", "a", "2"]), "+OK\r\n");
    assert_eq!(h.run(&["EXEC"]), "*-1\r\n");
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "a", "3"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["GET", "a"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["EXEC"]), "*2\r\n+OK\r\n$1\r\n3\r\n");
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["NOPE"]), "-ERR unknown command 'NOPE', with args beginning with: \r\n");
    assert_eq!(
        h.run(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
}

/// What a recording consumer of the effects record sees for a few writes:
/// the stream a replica would read, the events, the dirty count. (The
/// differential tests compare whole scenarios with redis-server's.)
#[test]
fn effects_record_reaches_a_consumer() {
    use crate::core::effects::{Class, Recorder};
    let mut h = Harness::new();
    let rec = Recorder::new();
    h.shared.add_consumer(rec.clone());
    h.run(&["SET", "k", "v", "EX", "100"]);
    h.run(&["GET", "k"]);
    h.run(&["SET", "j", "v", "PX", "10"]);
    h.shared.clock.advance(20);
    assert_eq!(h.run(&["GET", "j"]), "$-1\r\n");
    let r = rec.take();
    let stream: Vec<Vec<String>> = r
        .stream
        .iter()
        .map(|c| c.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect())
        .collect();
    assert_eq!(stream.len(), 4, "{stream:?}");
    assert_eq!(stream[0], ["SELECT", "0"]);
    assert_eq!(stream[1][..4], ["SET", "k", "v", "PXAT"]);
    let at: i64 = stream[1][4].parse().unwrap();
    assert!((at - h.shared.clock.now_ms() - 100_000).abs() < 5_000);
    assert_eq!(stream[2][..4], ["SET", "j", "v", "PXAT"]);
    assert_eq!(stream[3], ["DEL", "j"]);
    assert_eq!(r.dirty, 2);
    let names: Vec<&str> = r.events.iter().map(|e| e.1).collect();
    assert_eq!(names, ["new", "set", "expire", "new", "set", "expire", "expired", "keymiss"]);
    assert_eq!(r.events[6].0, Class::EXPIRED);
}

/// The table's flags are applied for each kind of caller (`docs/architecture.md`, *The seams*):
/// scripts get Redis's refusals for noscript commands and writes in
/// read-only scripts; every caller gets LOADING while a dataset loads.
#[test]
fn policy_by_caller() {
    use crate::core::dispatch::{check, lookup, Caller, Lookup};
    let mut h = Harness::new();
    let spec = |argv: &[&[u8]]| match lookup(&h.shared, argv) {
        Lookup::Found(s) => s,
        Lookup::Rejected(e) => panic!("{e:?}"),
    };
    let set: &[&[u8]] = &[b"SET", b"k", b"v"];
    let blpop: &[&[u8]] = &[b"BLPOP", b"k", b"0"];
    let get: &[&[u8]] = &[b"GET", b"k"];
    let text = |r: Result<(), crate::core::error::CmdError>| {
        String::from_utf8(r.unwrap_err().text().into_owned()).unwrap()
    };
    let ro = Caller::Script {
        read_only: true,
        allow_oom: false,
        dirty: false,
        obeys: false,
        cross_slot: true,
    };
    assert_eq!(
        text(check(&h.shared, &mut h.sess, spec(set), set, ro)),
        "ERR Write commands are not allowed from read-only scripts."
    );
    assert!(check(&h.shared, &mut h.sess, spec(get), get, ro).is_ok());
    assert_eq!(
        text(check(
            &h.shared,
            &mut h.sess,
            spec(blpop),
            blpop,
            Caller::Script {
                read_only: false,
                allow_oom: false,
                dirty: false,
                obeys: false,
                cross_slot: true
            }
        )),
        "ERR This Redis command is not allowed from script"
    );
    // EXEC's, replay's and served callers were checked when queued, read
    // or first issued.
    for c in [Caller::Exec, Caller::Replay, Caller::Served] {
        assert!(check(&h.shared, &mut h.sess, spec(blpop), blpop, c).is_ok());
    }
    h.shared.set_loading(true);
    assert_eq!(h.run(&["GET", "k"]), "-LOADING Redis is loading the dataset in memory\r\n");
    assert!(h.run(&["INFO", "server"]).starts_with('$'));
    h.shared.set_loading(false);
    assert_eq!(h.run(&["GET", "k"]), "$-1\r\n");
}

/// A caller that already holds stripes (EXEC, a script) asking for one
/// below them that another thread holds gets an error to handle, not a
/// panic or a deadlock.
#[test]
fn lock_order_is_refused_not_a_panic() {
    use crate::core::dispatch::{lock_keys, lookup, Lookup};
    let h = Harness::new();
    let store = &h.shared.store;
    // Two keys in different stripes, `lo` in the lower one.
    let (mut lo, mut hi) = (b"a".to_vec(), b"b".to_vec());
    if store.stripe_of(&lo) == store.stripe_of(&hi) {
        hi = b"c".to_vec();
    }
    if store.stripe_of(&lo) > store.stripe_of(&hi) {
        std::mem::swap(&mut lo, &mut hi);
    }
    let mut held = store::Locks::new(store, 0);
    let mut ids = [store.global_id(0, store.stripe_of(&hi))];
    held.acquire(&mut ids).unwrap();
    let other = store.lock_stripe(0, store.stripe_of(&lo) as usize);
    let argv: Vec<&[u8]> = vec![b"GET", &lo];
    let Lookup::Found(spec) = lookup(&h.shared, &argv) else { unreachable!() };
    assert_eq!(
        lock_keys(&h.shared, 0, spec, &argv, &mut held),
        Err(crate::core::error::CmdError::LockOrder)
    );
    drop(other);
    assert_eq!(lock_keys(&h.shared, 0, spec, &argv, &mut held), Ok(()));
}

/// Regression: a transaction read back from the AOF or a master ran its
/// queue as a client's EXEC, so a replayed `XTRIM … LIMIT` (the exact
/// trim the master wrote out) missed the replay's exemption from the
/// `~`-only LIMIT rule and failed inside MULTI/EXEC.
#[test]
fn replayed_transaction_runs_its_queue_as_replay() {
    let mut h = Harness::new();
    for i in 1..=5 {
        let id = format!("{i}-0");
        assert_eq!(h.run(&["XADD", "s", &id, "f", "v"]), format!("${}\r\n{id}\r\n", id.len()));
    }
    let trim: &[&[u8]] = &[b"XTRIM", b"s", b"MAXLEN", b"2", b"LIMIT", b"100"];
    // A client may not send it.
    assert_eq!(
        h.run(&["XTRIM", "s", "MAXLEN", "2", "LIMIT", "100"]),
        "-ERR syntax error, LIMIT cannot be used without the special ~ option\r\n"
    );
    for argv in [&[&b"MULTI"[..]][..], trim, &[b"EXEC"]] {
        let mut out = ReplyBuf::new();
        crate::core::dispatch::replay(&h.shared, &mut h.sess, argv, &mut out).unwrap();
    }
    assert_eq!(h.run(&["XLEN", "s"]), ":2\r\n");
}

/// Regression: a script replayed from a master's stream on a read-only
/// replica had its writes refused (READONLY): the script's check asked
/// whether the thread was loading an AOF, not whether its caller must be
/// obeyed (Redis's `mustObeyClient` of the script's caller).
#[test]
fn replayed_script_writes_on_a_read_only_replica() {
    let mut h = Harness::new();
    h.shared.store.set_replica(true);
    let eval: &[&[u8]] = &[b"EVAL", b"return redis.call('SET', KEYS[1], 'v')", b"1", b"k"];
    // A client's script may not write here.
    let mut out = ReplyBuf::new();
    crate::execute(&h.shared, &mut h.sess, eval, &mut out);
    let refused = String::from_utf8(out.to_vec()).unwrap();
    assert!(
        refused.starts_with("-READONLY You can't write against a read only replica."),
        "{refused}"
    );
    assert_eq!(h.run(&["EXISTS", "k"]), ":0\r\n");
    // The master's is applied.
    let mut out = ReplyBuf::new();
    crate::core::dispatch::replay(&h.shared, &mut h.sess, eval, &mut out).unwrap();
    assert_eq!(h.run(&["GET", "k"]), "$1\r\nv\r\n");
}
