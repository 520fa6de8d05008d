//! A script past `busy-reply-threshold` on every thread, its own
//! included: with `--threads 1` and `--threads 2`, every other client —
//! those served by the script's own thread, and new ones accepted while it
//! runs — gets Redis's BUSY text, pipelined input keeps its order, MULTI
//! queues BUSY, SCRIPT KILL / FUNCTION KILL stop a script that has not
//! written, UNKILLABLE one that has, and SHUTDOWN NOSAVE ends the server
//! from inside an endless script. Each scenario runs against the real
//! redis-server 7.0 too, and the reply bytes must be the same.

use std::path::Path;
use std::time::{Duration, Instant};

use testkit::{escape, Client, RedisServer, TestServer};

const LIB: &str = "#!lua name=busylib\n\
     redis.register_function('spin', function() while true do end end)\n\
     redis.register_function('wspin', function() redis.call('set', 'w', '1') while true do end end)";

const BUSY_EVAL: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";

fn sluice(threads: &str) -> TestServer {
    TestServer::start_with(
        Path::new(env!("CARGO_BIN_EXE_sluice-server")),
        &["--threads", threads, "--busy-reply-threshold", "100"],
        None,
    )
}

fn redis() -> Option<RedisServer> {
    RedisServer::start_with(&["--busy-reply-threshold", "100"], None)
}

/// Which script the runner starts.
#[derive(Clone, Copy)]
enum Kind {
    Eval,
    Function,
}

impl Kind {
    fn spin(self) -> Vec<&'static str> {
        match self {
            Kind::Eval => vec!["EVAL", "while true do end", "0"],
            Kind::Function => vec!["FCALL", "spin", "0"],
        }
    }

    fn spin_after_write(self) -> Vec<&'static str> {
        match self {
            Kind::Eval => vec!["EVAL", "redis.call('set', 'w', '1') while true do end", "0"],
            Kind::Function => vec!["FCALL", "wspin", "0"],
        }
    }

    fn busy(self) -> &'static [u8] {
        match self {
            Kind::Eval => BUSY_EVAL,
            Kind::Function => BUSY_FUNCTION,
        }
    }

    fn kill(self) -> [&'static str; 2] {
        match self {
            Kind::Eval => ["SCRIPT", "KILL"],
            Kind::Function => ["FUNCTION", "KILL"],
        }
    }

    /// The KILL command of the other kind (answered BUSY).
    fn wrong_kill(self) -> [&'static str; 2] {
        match self {
            Kind::Eval => ["FUNCTION", "KILL"],
            Kind::Function => ["SCRIPT", "KILL"],
        }
    }
}

fn connect(port: u16) -> Client {
    let mut c = Client::connect(port).unwrap();
    c.set_timeout(Duration::from_secs(10));
    c
}

/// Clients connected before the script: with two threads, consecutive
/// connections alternate, so some share the script's thread.
const OTHERS: usize = 4;

/// Starts the endless script on a fresh connection and waits (through
/// the first BUSY reply) until it is past the threshold. Returns the
/// transcript so far, the runner and the other clients.
fn start_busy(port: u16, runner_cmd: &[&str], kind: Kind) -> (Vec<Vec<u8>>, Client, Vec<Client>) {
    let mut t = Vec::new();
    let mut c = connect(port);
    t.push(c.cmd(&["FUNCTION", "LOAD", "REPLACE", LIB]).unwrap());
    let mut others: Vec<Client> = (0..OTHERS).map(|_| connect(port)).collect();
    let mut runner = connect(port);
    others.push(c);
    runner.send(runner_cmd).unwrap();
    // Until the script has started, a GET is answered; once it has, the
    // GET waits until it is past the threshold and is answered BUSY.
    let start = Instant::now();
    while others[0].cmd(&["GET", "x"]).unwrap() != kind.busy() {
        assert!(start.elapsed() < Duration::from_secs(10), "never BUSY");
    }
    // Then every client is answered BUSY: on the script's thread too.
    for o in others.iter_mut() {
        let r = o.cmd(&["GET", "x"]).unwrap();
        assert_eq!(r, kind.busy(), "{}", escape(&r));
        t.push(r);
    }
    (t, runner, others)
}

/// A script that has not written: BUSY everywhere, order kept, MULTI
/// queues the BUSY error, new connections served, the wrong KILL and
/// SHUTDOWN answered BUSY, then KILL stops it.
fn killable(port: u16, kind: Kind) -> Vec<Vec<u8>> {
    let (mut t, mut runner, mut others) = start_busy(port, &kind.spin(), kind);
    // Pipelined after a BUSY reply: answered in order, MULTI allowed.
    let mut batch = Vec::new();
    for cmd in [&["GET", "x"][..], &["MULTI"], &["SET", "x", "1"], &["PING"], &["EXEC"]] {
        testkit::encode(cmd, &mut batch);
    }
    others[0].send_raw(&batch).unwrap();
    for _ in 0..5 {
        t.push(others[0].read_reply().unwrap());
    }
    t.push(others[1].cmd(&kind.wrong_kill()).unwrap());
    t.push(others[2].cmd(&["SHUTDOWN"]).unwrap());
    // BUSY during an EVAL; during a function, its running_script: name,
    // command and duration (the duration compared as an integer only).
    let stats = others[3].cmd(&["FUNCTION", "STATS"]).unwrap();
    t.push(match kind {
        Kind::Eval => stats,
        Kind::Function => mask_duration(&stats),
    });
    // A connection accepted while the script runs.
    let mut late = connect(port);
    t.push(late.cmd(&["GET", "x"]).unwrap());
    t.push(late.cmd(&kind.kill()).unwrap());
    let r = runner.read_reply().unwrap();
    assert!(r.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."), "{}", escape(&r));
    t.push(r);
    for o in others.iter_mut() {
        t.push(o.cmd(&["PING"]).unwrap());
    }
    t.push(late.cmd(&kind.kill()).unwrap());
    t.push(runner.cmd(&["GET", "x"]).unwrap());
    t
}

/// FUNCTION STATS's reply with the digits of `duration_ms` replaced, so
/// that two servers' replies compare by everything else.
fn mask_duration(reply: &[u8]) -> Vec<u8> {
    let key = b"$11\r\nduration_ms\r\n:";
    let at = reply
        .windows(key.len())
        .position(|w| w == key)
        .unwrap_or_else(|| panic!("no duration_ms in {}", escape(reply)))
        + key.len();
    let digits = reply[at..].iter().take_while(|c| c.is_ascii_digit()).count();
    assert!(digits > 0, "{}", escape(reply));
    [&reply[..at], b"<ms>", &reply[at + digits..]].concat()
}

/// A script that wrote: UNKILLABLE; SHUTDOWN NOSAVE ends the server
/// (connections close) although the script never ends.
fn unkillable<F: FnMut() -> bool>(port: u16, kind: Kind, mut running: F) -> Vec<Vec<u8>> {
    let (mut t, mut runner, mut others) = start_busy(port, &kind.spin_after_write(), kind);
    t.push(others[0].cmd(&kind.kill()).unwrap());
    t.push(others[1].cmd(&kind.wrong_kill()).unwrap());
    let mut late = connect(port);
    t.push(late.cmd(&["SHUTDOWN", "NOSAVE"]).map(|_| b"replied".to_vec()).unwrap_or_default());
    t.push(runner.read_to_close(Duration::from_secs(10)).unwrap());
    t.push(others[2].read_to_close(Duration::from_secs(10)).unwrap());
    let start = Instant::now();
    while running() {
        assert!(start.elapsed() < Duration::from_secs(10), "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    t
}

fn show(t: &[Vec<u8>]) -> String {
    t.iter().map(|r| escape(r)).collect::<Vec<_>>().join("\n")
}

/// Runs `transcript` against redis-server and against Sluice with one
/// and two threads; the replies must be the same.
fn same_as_redis(transcript: impl Fn(u16) -> Vec<Vec<u8>>) {
    let expected = redis().map(|r| transcript(r.port()));
    for threads in ["1", "2"] {
        let s = sluice(threads);
        let got = transcript(s.port());
        if let Some(e) = &expected {
            assert_eq!(show(&got), show(e), "--threads {threads}: Sluice (left) vs Redis (right)");
        }
    }
}

fn check_killable(kind: Kind) {
    same_as_redis(|port| killable(port, kind));
}

fn check_unkillable(kind: Kind) {
    let expected = redis().map(|mut r| {
        let port = r.port();
        unkillable(port, kind, || r.is_running())
    });
    for threads in ["1", "2"] {
        let mut s = sluice(threads);
        let port = s.port();
        let got = unkillable(port, kind, || s.is_running());
        if let Some(e) = &expected {
            assert_eq!(show(&got), show(e), "--threads {threads}: Sluice (left) vs Redis (right)");
        }
    }
}

#[test]
fn an_endless_eval_is_busy_on_every_thread_and_killed() {
    check_killable(Kind::Eval);
}

#[test]
fn an_endless_function_is_busy_on_every_thread_and_killed() {
    check_killable(Kind::Function);
}

#[test]
fn an_endless_eval_that_wrote_is_unkillable_and_shutdown_nosave_ends_the_server() {
    check_unkillable(Kind::Eval);
}

#[test]
fn an_endless_function_that_wrote_is_unkillable_and_shutdown_nosave_ends_the_server() {
    check_unkillable(Kind::Function);
}

/// Clients in other states on the busy thread carry on: one blocked in
/// BLPOP is served after the script, a subscriber is answered BUSY
/// (RESP2 pub/sub context allows PING) and gets its messages after, a
/// client watching a key is answered, and its WATCH still holds.
fn waiting_clients(port: u16) -> Vec<Vec<u8>> {
    let mut t = Vec::new();
    let mut c = connect(port);
    let mut blocker = connect(port);
    blocker.send(&["BLPOP", "list", "0"]).unwrap();
    let mut sub = connect(port);
    t.push(sub.cmd(&["SUBSCRIBE", "ch"]).unwrap());
    let mut watcher = connect(port);
    t.push(watcher.cmd(&["WATCH", "w"]).unwrap());
    let mut runner = connect(port);
    runner.send(&Kind::Eval.spin()).unwrap();
    let start = Instant::now();
    while c.cmd(&["GET", "x"]).unwrap() != BUSY_EVAL {
        assert!(start.elapsed() < Duration::from_secs(10), "never BUSY");
    }
    t.push(sub.cmd(&["PING"]).unwrap());
    t.push(sub.cmd(&["GET", "x"]).unwrap());
    t.push(watcher.cmd(&["GET", "x"]).unwrap());
    t.push(connect(port).cmd(&["SCRIPT", "KILL"]).unwrap());
    t.push(runner.read_reply().unwrap());
    t.push(c.cmd(&["LPUSH", "list", "a"]).unwrap());
    t.push(blocker.read_reply().unwrap());
    t.push(c.cmd(&["PUBLISH", "ch", "m"]).unwrap());
    t.push(sub.read_reply().unwrap());
    t.push(c.cmd(&["SET", "w", "1"]).unwrap());
    t.push(watcher.cmd(&["MULTI"]).unwrap());
    t.push(watcher.cmd(&["GET", "w"]).unwrap());
    t.push(watcher.cmd(&["EXEC"]).unwrap());
    t
}

#[test]
fn blocked_subscribed_and_watching_clients_carry_on() {
    same_as_redis(waiting_clients);
}

/// Clients that WATCH a key the busy script holds (it declared it) are
/// answered while it runs, on its own thread too: MULTI and DISCARD,
/// UNWATCH, WATCH of another key, and SCRIPT KILL from one of them stops
/// the script. Afterwards the WATCH kept through the script still
/// aborts its EXEC on a write, the ones dropped meanwhile do not.
fn watching_clients(port: u16) -> Vec<Vec<u8>> {
    let mut t = Vec::new();
    let mut c = connect(port);
    // Enough of them that, with two threads, some share the script's.
    let mut watchers: Vec<Client> = (0..4).map(|_| connect(port)).collect();
    for w in watchers.iter_mut() {
        t.push(w.cmd(&["WATCH", "w"]).unwrap());
    }
    let mut runner = connect(port);
    runner.send(&["EVAL", "while true do end", "1", "w"]).unwrap();
    let start = Instant::now();
    while c.cmd(&["GET", "x"]).unwrap() != BUSY_EVAL {
        assert!(start.elapsed() < Duration::from_secs(10), "never BUSY");
    }
    let (keep, drop) = watchers.split_at_mut(2);
    for w in keep.iter_mut() {
        t.push(w.cmd(&["GET", "w"]).unwrap());
        t.push(w.cmd(&["MULTI"]).unwrap());
        t.push(w.cmd(&["GET", "w"]).unwrap());
    }
    for w in drop.iter_mut() {
        t.push(w.cmd(&["MULTI"]).unwrap());
        t.push(w.cmd(&["DISCARD"]).unwrap());
        t.push(w.cmd(&["UNWATCH"]).unwrap());
        t.push(w.cmd(&["WATCH", "x"]).unwrap());
        t.push(w.cmd(&["RESET"]).unwrap());
        t.push(w.cmd(&["WATCH", "x"]).unwrap());
    }
    t.push(drop[1].cmd(&["SCRIPT", "KILL"]).unwrap());
    t.push(runner.read_reply().unwrap());
    t.push(c.cmd(&["SET", "w", "1"]).unwrap());
    // The first two: their transaction was flagged by the BUSY reply
    // (EXECABORT), then a fresh one with the WATCH kept: nil.
    for w in keep.iter_mut() {
        t.push(w.cmd(&["EXEC"]).unwrap());
        t.push(w.cmd(&["WATCH", "w"]).unwrap());
        t.push(c.cmd(&["SET", "w", "2"]).unwrap());
        t.push(w.cmd(&["MULTI"]).unwrap());
        t.push(w.cmd(&["EXEC"]).unwrap());
    }
    for w in drop.iter_mut() {
        t.push(w.cmd(&["MULTI"]).unwrap());
        t.push(w.cmd(&["GET", "w"]).unwrap());
        t.push(w.cmd(&["EXEC"]).unwrap());
    }
    t
}

#[test]
fn watching_clients_are_answered_while_a_script_that_holds_their_key_is_busy() {
    same_as_redis(watching_clients);
}

/// The lines of a server's log about a busy script, without their
/// prefix (pid, role, time) and with the milliseconds masked.
fn busy_log_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("Slow script detected") || l.contains("killed by user"))
        .map(|l| {
            let l = l.split_once(" # ").map_or(l, |(_, m)| m);
            let digits = |c: char| c.is_ascii_digit();
            match l.split_once("after ") {
                Some((a, b)) => format!("{a}after <ms>{}", b.trim_start_matches(digits)),
                None => l.to_string(),
            }
        })
        .collect()
}

/// Redis's warnings when a script turns busy ("Slow script detected…",
/// naming the KILL command and the script: its SHA1 or the function's
/// name) and when it is killed.
#[test]
fn a_busy_script_logs_what_redis_logs() {
    let run = |port: u16| {
        for kind in [Kind::Eval, Kind::Function] {
            let (_, mut runner, mut others) = start_busy(port, &kind.spin(), kind);
            assert_eq!(others[0].cmd(&kind.kill()).unwrap(), b"+OK\r\n");
            runner.read_reply().unwrap();
        }
    };
    let expected = redis().map(|r| {
        run(r.port());
        busy_log_lines(&r.log_text())
    });
    for threads in ["1", "2"] {
        let s = sluice(threads);
        run(s.port());
        let got = busy_log_lines(&s.log_text());
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[0].starts_with("Slow script detected: still in execution after <ms> "));
        if let Some(e) = &expected {
            assert_eq!(got, *e, "--threads {threads}: Sluice (left) vs Redis (right)");
        }
    }
}

/// Forty keys, a save that writes one a 20 ms (`rdb-key-save-delay`),
/// and a script begun right after it that writes the first key and
/// spins, holding every key's stripe. Returns the script's runner, once
/// it is busy.
fn busy_over_a_slow_save(s: &TestServer, begin_save: &[&str], begun: &[u8]) -> Client {
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let mut c = connect(s.port());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(c.cmd(&["SET", k, &format!("v{i}")]).unwrap(), b"+OK\r\n");
    }
    assert_eq!(c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "20000"]).unwrap(), b"+OK\r\n");
    assert_eq!(c.cmd(begin_save).unwrap(), begun);
    let mut eval: Vec<String> =
        vec!["EVAL".into(), "redis.call('set', KEYS[1], 'new') while true do end".into()];
    eval.push(keys.len().to_string());
    eval.extend(keys.iter().cloned());
    let mut runner = connect(s.port());
    runner.send(&eval).unwrap();
    let start = Instant::now();
    while c.cmd(&["PING"]).unwrap() != BUSY_EVAL {
        assert!(start.elapsed() < Duration::from_secs(10), "never BUSY");
    }
    runner
}

/// A save begun before a script that then holds the stripes of every key
/// for ever ends while the script runs: each stripe the script took was
/// copied as it was when the script took it, so the save passes over
/// them rather than waiting for them. (Redis's save is a forked child,
/// which no script of the parent can hold up; the AOF's first rewrite
/// not ending made SHUTDOWN NOSAVE refuse — "Writing initial AOF, can't
/// exit" — for as long as the script ran.) The BGSAVE's file has the data
/// of its instant, the script's write not in it, loaded by redis-server;
/// after the first rewrite, SHUTDOWN NOSAVE ends the server.
#[test]
fn saves_begun_before_a_busy_script_end_while_it_holds_their_stripes() {
    let wait_log = |s: &TestServer, line: &str| {
        let start = Instant::now();
        while !s.log_text().contains(line) {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "no {line:?} while the script ran; log:\n{}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // BGSAVE.
    let s = sluice("2");
    let _runner = busy_over_a_slow_save(&s, &["BGSAVE"], b"+Background saving started\r\n");
    wait_log(&s, "Background saving terminated with success");
    let copy = testkit::scratch_dir("busy-save-rdb");
    std::fs::copy(s.dir().join("dump.rdb"), copy.join("dump.rdb")).unwrap();
    let check = |port: u16| {
        let mut c = connect(port);
        assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), b":40\r\n");
        assert_eq!(c.cmd(&["GET", "k0"]).unwrap(), b"$2\r\nv0\r\n");
        assert_eq!(c.cmd(&["GET", "k39"]).unwrap(), b"$3\r\nv39\r\n");
    };
    match RedisServer::start_with(&[], Some(&copy)) {
        Some(r) => check(r.port()),
        None => check(
            TestServer::start_with(
                Path::new(env!("CARGO_BIN_EXE_sluice-server")),
                &[],
                Some(&copy),
            )
            .port(),
        ),
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&copy);
    // The AOF's first rewrite, then SHUTDOWN NOSAVE.
    let mut s = sluice("2");
    let mut runner = busy_over_a_slow_save(&s, &["CONFIG", "SET", "appendonly", "yes"], b"+OK\r\n");
    wait_log(&s, "Background AOF rewrite finished successfully");
    let mut c = connect(s.port());
    assert_eq!(c.cmd(&["SHUTDOWN", "NOSAVE"]).map(|_| "replied").unwrap_or("closed"), "closed");
    runner.read_to_close(Duration::from_secs(10)).unwrap();
    let start = Instant::now();
    while s.is_running() {
        assert!(start.elapsed() < Duration::from_secs(10), "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `a`'s thread is `b`'s: a PING on `b` waits for a `DEBUG SLEEP` on `a`.
fn share_a_thread(a: &mut Client, b: &mut Client) -> bool {
    a.send(&["DEBUG", "SLEEP", "0.1"]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let start = Instant::now();
    assert_eq!(b.cmd(&["PING"]).unwrap(), b"+PONG\r\n");
    let waited = start.elapsed();
    assert_eq!(a.read_reply().unwrap(), b"+OK\r\n");
    waited >= Duration::from_millis(40)
}

/// A connection its thread takes in during the same loop turn in which a
/// script starts there (the thread asleep in `DEBUG SLEEP` while the
/// connection is accepted and handed to it and the script's EVAL
/// arrives): the busy script's passes serve it, as Redis answers a
/// client accepted in the iteration that runs the script. `skew`
/// connections first move which thread the others land on.
fn connected_as_the_script_starts(port: u16, skew: usize) -> Vec<Vec<u8>> {
    let mut t = Vec::new();
    let _skew: Vec<Client> = (0..skew).map(|_| connect(port)).collect();
    // With two threads consecutive connections alternate: the sleeper,
    // the runner and the probe (every second one) share a thread.
    let mut sleeper = connect(port);
    let _other = connect(port);
    let mut runner = connect(port);
    let _other2 = connect(port);
    assert!(share_a_thread(&mut sleeper, &mut runner), "sleeper and runner on one thread");
    sleeper.send(&["DEBUG", "SLEEP", "0.3"]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut probe = connect(port);
    probe.set_timeout(Duration::from_secs(5));
    probe.send(&["GET", "x"]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    runner.send(&Kind::Eval.spin()).unwrap();
    t.push(sleeper.read_reply().unwrap());
    t.push(probe.read_reply().unwrap_or_else(|e| format!("no reply: {e}").into_bytes()));
    t.push(connect(port).cmd(&["SCRIPT", "KILL"]).unwrap());
    t.push(runner.read_reply().unwrap());
    t.push(probe.cmd(&["PING"]).unwrap());
    t
}

#[test]
fn a_connection_taken_in_as_a_script_starts_is_served_while_it_is_busy() {
    let flags = ["--busy-reply-threshold", "100", "--enable-debug-command", "yes"];
    let expected = RedisServer::start_with(&flags, None)
        .map(|r| [0, 1].map(|skew| show(&connected_as_the_script_starts(r.port(), skew))));
    for threads in ["1", "2"] {
        let mut args = vec!["--threads", threads];
        args.extend(flags);
        let s = TestServer::start_with(Path::new(env!("CARGO_BIN_EXE_sluice-server")), &args, None);
        for skew in [0, 1] {
            let got = show(&connected_as_the_script_starts(s.port(), skew));
            if let Some(e) = &expected {
                assert_eq!(
                    got, e[skew],
                    "--threads {threads}, skew {skew}: Sluice (left) vs Redis (right)"
                );
            }
        }
    }
}
