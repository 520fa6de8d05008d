//! Sluice as a drop-in for redis-server 7.0.15, process side: the start-up
//! lines and banner that process managers wait for, signals and exit
//! status, daemonizing with a pid file, systemd's readiness
//! notification, `loglevel`/`logfile`, and the `--version`/`--help`
//! answers, each checked against redis-server doing the same.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use testkit::{free_port, scratch_dir, Client, RedisServer, TestServer, REDIS_SERVER};

fn sluice_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sluice-server"))
}

fn have_redis() -> bool {
    if Path::new(REDIS_SERVER).is_file() {
        return true;
    }
    assert!(!testkit::oracle_required(), "{REDIS_SERVER} is missing and CI is set");
    eprintln!("SKIPPED: {REDIS_SERVER} not found");
    false
}

/// Both binaries, oracle first.
fn both() -> Vec<(&'static str, PathBuf)> {
    vec![("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())]
}

/// The message of a log line (`pid:R dd Mon yyyy hh:mm:ss.mmm L msg`).
fn message(line: &str) -> Option<&str> {
    let (pid, rest) = line.split_once(':')?;
    pid.parse::<u32>().ok()?;
    let mut parts = rest.splitn(7, ' ');
    let role = parts.next()?;
    if role.len() != 1 {
        return None;
    }
    parts.nth(5)
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A server started by hand (environment, signals and exit status under
/// the test's control), logging to `log`.
struct Proc {
    child: Child,
    log: PathBuf,
    port: u16,
}

impl Proc {
    fn start(bin: &Path, args: &[&str], env: &[(&str, &str)], dir: &Path) -> Proc {
        let port = free_port();
        let log = dir.join(format!("{}-{port}.log", bin.file_name().unwrap().to_string_lossy()));
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let p = Proc { child, log, port };
        assert!(
            wait_until(Duration::from_secs(10), || Client::connect(port).is_ok()),
            "{} did not start: {}",
            bin.display(),
            p.text()
        );
        p
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn messages(&self) -> Vec<String> {
        self.text().lines().filter_map(message).map(str::to_string).collect()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to a child this test started.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    fn wait(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no exit: {}", self.text());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The start-up lines scripts wait for, in the order they come.
fn key_lines(msgs: &[String], port: u16) -> Vec<String> {
    let keys = [
        "is starting oO0OoO0OoO0Oo".to_string(),
        "Configuration loaded".to_string(),
        format!("Running mode=standalone, port={port}."),
        "Server initialized".to_string(),
        "Ready to accept connections".to_string(),
    ];
    msgs.iter().filter(|m| keys.iter().any(|k| m.ends_with(k.as_str()))).cloned().collect()
}

#[test]
fn start_up_lines_and_shutdown_on_signals_as_redis() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("signals");
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let mut seen = Vec::new();
        for (tag, bin) in both() {
            let mut p = Proc::start(&bin, &[], &[], &dir);
            assert!(wait_until(Duration::from_secs(5), || p
                .messages()
                .iter()
                .any(|m| m == "Ready to accept connections")));
            let start: Vec<String> = key_lines(&p.messages(), p.port)
                .into_iter()
                .map(|m| m.replace("Redis is starting", "is starting"))
                .map(|m| m.replace("Sluice is starting", "is starting"))
                .map(|m| m.replace(&format!("port={}.", p.port), "port=N."))
                .collect();
            p.signal(sig);
            let status = p.wait();
            let text = p.text();
            assert!(
                text.contains(":signal-handler (")
                    && text.contains(&format!("Received {name} scheduling shutdown...")),
                "{tag}: {text}"
            );
            let msgs = p.messages();
            assert!(msgs.iter().any(|m| m == "User requested shutdown..."), "{tag}: {text}");
            assert!(msgs.last().is_some_and(|m| m.ends_with("is now ready to exit, bye bye...")));
            seen.push((start, status.code()));
        }
        assert_eq!(seen[0], seen[1], "{name}: start-up lines and exit status");
        assert_eq!(seen[1].1, Some(0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn banner_shows_port_and_pid_like_redis() {
    let Some(redis) = RedisServer::start_with(&["--always-show-logo", "yes"], None) else {
        return;
    };
    let sluice = TestServer::start_with(&sluice_bin(), &["--always-show-logo", "yes"], None);
    // The port accepts a moment before the last start-up lines are written.
    for p in [&*redis, &*sluice] {
        assert!(wait_until(Duration::from_secs(5), || p
            .log_text()
            .contains("Ready to accept connections")));
    }
    for (tag, text, port, pid) in [
        ("redis", redis.log_text(), redis.port(), redis.pid()),
        ("sluice", sluice.log_text(), sluice.port(), sluice.pid()),
    ] {
        // The logo's text column: "Port: N" and "PID: N" on lines of their own.
        let line_with = |needle: &str| text.lines().any(|l| l.trim_end().ends_with(needle));
        assert!(line_with(&format!("Port: {port}")), "{tag}: {text}");
        assert!(line_with(&format!("PID: {pid}")), "{tag}: {text}");
        assert!(text.contains("Running in standalone mode"), "{tag}: {text}");
        assert!(!text.contains("Running mode=standalone"), "{tag}: {text}");
    }
    // Not a terminal and no always-show-logo: Redis's one line instead.
    let plain = TestServer::start_bin(&sluice_bin());
    assert!(wait_until(Duration::from_secs(5), || plain
        .log_text()
        .contains("Ready to accept connections")));
    let expected = format!("Running mode=standalone, port={}.", plain.port());
    assert!(plain.log_text().lines().filter_map(message).any(|m| m == expected));
    assert!(!plain.log_text().contains("has no effect"), "{}", plain.log_text());
}

#[test]
fn daemonize_writes_the_pid_file_like_redis() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("daemon");
    for (tag, bin) in both() {
        let port = free_port();
        let pidfile = dir.join(format!("{tag}.pid"));
        let log = dir.join(format!("{tag}.log"));
        let t0 = Instant::now();
        let status = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--daemonize", "yes", "--pidfile", pidfile.to_str().unwrap()])
            .args(["--logfile", log.to_str().unwrap()])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{tag}: the parent exits 0");
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(wait_until(Duration::from_secs(10), || Client::connect(port).is_ok()), "{tag}");
        // Both servers write the pid file just after they start listening.
        let written =
            || std::fs::read_to_string(&pidfile).is_ok_and(|t| t.trim().parse::<i32>().is_ok());
        assert!(wait_until(Duration::from_secs(10), written), "{tag}: no pid file");
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert_eq!(Client::connect(port).unwrap().cmd(&["PING"]).unwrap(), b"+PONG\r\n");
        // SAFETY: signalling the daemon this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        // SAFETY: signal 0 only checks that the process exists.
        let gone = || unsafe { libc::kill(pid, 0) } != 0;
        assert!(wait_until(Duration::from_secs(10), gone), "{tag} still running");
        assert!(!pidfile.exists(), "{tag} removes its pid file");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("Removing the pid file."), "{tag}: {text}");
        assert!(text.contains("ready to exit, bye bye..."), "{tag}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn systemd_readiness_notification_like_redis() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("notify");
    let mut got = Vec::new();
    for (tag, bin) in both() {
        let sock_path = dir.join(format!("{tag}.sock"));
        let sock = UnixDatagram::bind(&sock_path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let env = [("NOTIFY_SOCKET", sock_path.to_str().unwrap())];
        let p = Proc::start(&bin, &["--supervised", "systemd"], &env, &dir);
        let mut msgs = Vec::new();
        let mut buf = [0u8; 512];
        while !msgs.iter().any(|m: &String| m.contains("READY=1")) {
            let n = sock.recv(&mut buf).unwrap_or_else(|e| panic!("{tag}: {e}: {}", p.text()));
            // The status text names the product.
            msgs.push(String::from_utf8_lossy(&buf[..n]).replace("Sluice", "Redis"));
        }
        got.push(msgs);
    }
    assert_eq!(got[0], got[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn loglevel_and_logfile_like_redis() {
    let dir = scratch_dir("loglevel");
    let file = dir.join("server.log");
    let p = Proc::start(
        &sluice_bin(),
        &["--loglevel", "warning", "--logfile", file.to_str().unwrap()],
        &[],
        &dir,
    );
    assert!(p.text().is_empty(), "nothing on stdout with a logfile: {}", p.text());
    // The port accepts a moment before the last start-up lines are written.
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    assert!(wait_until(Duration::from_secs(5), || read().contains("# Server initialized")));
    let text = read();
    assert!(!text.contains(" * "), "no notice lines at loglevel warning: {text}");
    let mut c = Client::connect(p.port).unwrap();
    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "verbose"]).unwrap(), b"+OK\r\n");
    drop(Client::connect(p.port).unwrap());
    let closed =
        || std::fs::read_to_string(&file).unwrap().contains(" - Client closed connection id=");
    assert!(wait_until(Duration::from_secs(5), closed), "verbose lines after CONFIG SET");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parameters_without_effect_are_named_at_start_up() {
    let dir = scratch_dir("noeffect");
    let p = Proc::start(
        &sluice_bin(),
        &["--activerehashing", "no", "--list-compress-depth", "1", "--maxmemory", "1mb"],
        &[],
        &dir,
    );
    let text = p.text();
    // Each with its reason (config/effect.rs).
    assert!(
        text.contains("'activerehashing' is set to 'no' but Sluice does not act on it: Sluice's"),
        "{text}"
    );
    assert!(
        text.contains(
            "'list-compress-depth' is set to '1' but Sluice does not act on it: not yet in \
             effect: Sluice does not LZF-compress list chunks"
        ),
        "{text}"
    );
    assert!(!text.contains("'maxmemory' is set"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn output(bin: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin).args(args).stdin(Stdio::null()).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn version_and_help_answer_like_redis() {
    if !have_redis() {
        return;
    }
    for (tag, bin) in both() {
        for flag in ["-v", "--version"] {
            let (code, out, err) = output(&bin, &[flag]);
            assert_eq!(code, Some(0), "{tag} {flag}");
            assert!(out.contains(" server v=7.0.15 ") && out.contains(" bits=64 "), "{out}");
            assert!(err.is_empty());
        }
        for flag in ["-h", "--help"] {
            let (code, out, err) = output(&bin, &[flag]);
            assert_eq!(code, Some(1), "{tag} {flag}");
            assert!(out.is_empty() && err.starts_with("Usage: ./"), "{tag}: {err}");
            assert!(err.contains(" -v or --version\n"), "{tag}: {err}");
        }
        // Only the first argument is a command-line switch.
        let (code, _, err) = output(&bin, &["--port", "1", "-v"]);
        assert_eq!(code, Some(1), "{tag}");
        assert!(err.contains(">>> '\"-v\"'") || err.contains(">>> 'port \"1\" \"-v\"'"), "{err}");
    }
    // --test-memory without a size: Redis's own answer; with a size Redis
    // runs its tester, Sluice says it has none.
    let (r, s) = (
        output(Path::new(REDIS_SERVER), &["--test-memory"]),
        output(&sluice_bin(), &["--test-memory"]),
    );
    assert_eq!((r.0, r.2.replace("redis-server", "x")), (s.0, s.2.replace("sluice-server", "x")));
    let (code, _, err) = output(&sluice_bin(), &["--test-memory", "16"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no memory tester"), "{err}");
}

#[test]
fn config_from_stdin_like_redis() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("stdin");
    for (tag, bin) in both() {
        let port = free_port();
        let mut child = Command::new(&bin)
            .args(["-", "--port", &port.to_string(), "--bind", "127.0.0.1"])
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"maxmemory 3mb\nsave \"\"\n").unwrap();
        assert!(wait_until(Duration::from_secs(10), || Client::connect(port).is_ok()), "{tag}");
        let mut c = Client::connect(port).unwrap();
        let r = c.cmd(&["CONFIG", "GET", "maxmemory"]).unwrap();
        assert_eq!(r, b"*2\r\n$9\r\nmaxmemory\r\n$7\r\n3145728\r\n", "{tag}");
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bind` takes host names, resolved as redis-server resolves them
/// (`bind localhost` listens on 127.0.0.1), and a name that does not
/// resolve stops start-up with Redis's lines. Before, Sluice took only
/// literal addresses and refused `localhost`.
#[test]
fn bind_resolves_host_names_like_redis() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("bindname");
    let mut failed = Vec::new();
    // Nothing binds it: the same port for both, so the lines compare.
    let unbound = free_port().to_string();
    for (tag, bin) in both() {
        let port = free_port();
        let mut child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "localhost", "--save", ""])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_until(Duration::from_secs(10), || Client::connect(port).is_ok()), "{tag}");
        let mut c = Client::connect(port).unwrap();
        assert_eq!(c.cmd(&["PING"]).unwrap(), b"+PONG\r\n", "{tag}");
        let _ = child.kill();
        let _ = child.wait();
        let (code, out, _) =
            output(&bin, &["--port", &unbound, "--bind", "nosuch.invalid", "--save", ""]);
        let lines: Vec<String> = out
            .lines()
            .filter_map(message)
            .filter(|m| m.contains("listening"))
            .map(str::to_string)
            .collect();
        failed.push((code, lines));
    }
    assert_eq!(failed[0], failed[1]);
    assert_eq!(failed[0].0, Some(1), "{:?}", failed[0]);
    assert!(failed[0].1.iter().any(|l| l.contains("Name or service not known")), "{:?}", failed[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The process title (`set-proc-title yes`, the default): at start-up
/// `{title} {listen-addr} {server-mode}`, and after CONFIG SET
/// proc-title-template the new template's expansion, where
/// /proc/PID/cmdline (and `ps`) read it; a bad template refused with
/// Redis's error. Checked against redis-server started the same way
/// (each title from the process's own name, port and files). Before,
/// Sluice accepted the template and kept its command line.
#[test]
fn process_title_follows_the_template_as_redis() {
    if !have_redis() {
        return;
    }
    let cmdline = |pid: u32| {
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        String::from_utf8_lossy(&raw).trim_end_matches('\0').to_string()
    };
    let mut got = Vec::new();
    for (name, bin) in both() {
        let dir = scratch_dir(&format!("proctitle-{name}"));
        let sock = dir.join("s.sock");
        std::fs::write(
            dir.join("t.conf"),
            format!("bind 127.0.0.1\nsave \"\"\nunixsocket {}\n", sock.display()),
        )
        .unwrap();
        let args = |port: u16| vec!["t.conf".to_string(), "--port".into(), port.to_string()];
        let srv = testkit::ServerProc::spawn_raw(&bin, &args, &dir);
        let (pid, port) = (srv.pid(), srv.port());
        let exec = bin.display().to_string();
        let conf = dir.canonicalize().unwrap().join("t.conf").display().to_string();
        // The listener accepts before the title is set (Redis listens in
        // initServer and sets the title after it): wait for the title.
        let title = format!("{exec} 127.0.0.1:{port}");
        wait_until(Duration::from_secs(10), || cmdline(pid) == title);
        assert_eq!(cmdline(pid), title, "{name} at start-up");
        let mut c = Client::connect(port).unwrap();
        let template = "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file}";
        let set = c.cmd(&["CONFIG", "SET", "proc-title-template", template]).unwrap();
        let want = format!("TEST {exec} 127.0.0.1:{port} {port} 0 {} {conf}", sock.display());
        assert_eq!(cmdline(pid), want, "{name}");
        let bad = c.cmd(&["CONFIG", "SET", "proc-title-template", "{invalid-var}"]).unwrap();
        assert_eq!(cmdline(pid), want, "{name}: a refused template changes nothing");
        got.push((set, bad));
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(got[0], got[1]);
}

/// Bug: Sluice logged "Ready to accept connections" as soon as its event
/// loops ran, while the data set still loaded on a thread of its own;
/// Redis logs it once the load is done, after "DB loaded from disk" (and
/// never when the load fails). Redis's integration/aof "Short read:
/// Server should have logged an error" reads the log's last line for the
/// load's error and now and then found the readiness line there instead.
#[test]
fn ready_is_logged_once_the_data_set_is_loaded_as_redis_logs_it() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("ready-after-load");
    // An RDB file of 200 keys, written by redis-server.
    {
        let r = Proc::start(Path::new(REDIS_SERVER), &[], &[], &dir);
        let mut c = Client::connect(r.port).unwrap();
        for i in 0..200 {
            assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]).unwrap(), b"+OK\r\n");
        }
        assert_eq!(c.cmd(&["SAVE"]).unwrap(), b"+OK\r\n");
    }
    for (tag, bin) in both() {
        // 2 ms a key: the load takes about 0.4 s.
        let p = Proc::start(&bin, &["--key-load-delay", "2000"], &[], &dir);
        assert!(
            wait_until(Duration::from_secs(10), || p
                .messages()
                .iter()
                .any(|m| m == "Ready to accept connections")),
            "{tag}: {}",
            p.text()
        );
        let msgs = p.messages();
        let at = |prefix: &str| msgs.iter().position(|m| m.starts_with(prefix));
        let loaded = at("DB loaded from disk");
        let ready = at("Ready to accept connections");
        assert!(loaded.is_some() && loaded < ready, "{tag}: {}", p.text());
        let mut c = Client::connect(p.port).unwrap();
        assert_eq!(c.cmd(&["DBSIZE"]).unwrap(), b":200\r\n", "{tag}");
    }
}

/// The `name:value` lines of an INFO reply, in order.
fn info_fields(reply: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(reply)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim_end().to_string()))
        .collect()
}

/// INFO persistence, polled while a server loads its data set at
/// start-up: the snapshots taken while `loading` read 1.
fn loading_snapshots(p: &Proc) -> Vec<Vec<(String, String)>> {
    let mut c = Client::connect(p.port).unwrap();
    let mut seen = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let f = info_fields(&c.cmd(&["INFO", "persistence"]).unwrap());
        if f.iter().any(|(k, v)| k == "loading" && v == "0") {
            break;
        }
        seen.push(f);
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

fn field(f: &[(String, String)], name: &str) -> String {
    f.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_default()
}

/// What a server's INFO said of its load, checked for itself: Redis
/// 7.0's arithmetic (`loading_loaded_perc` from the bytes loaded and the
/// size), bytes that only grow and stay within the size, progress seen
/// between the start and the end, a start time of this run.
fn check_load_snapshots(tag: &str, snaps: &[Vec<(String, String)>], size: u64, t0: i64) {
    assert!(snaps.len() >= 3, "{tag}: {} snapshots while loading", snaps.len());
    let mut last = 0u64;
    let mut midway = false;
    for s in snaps {
        let total: u64 = field(s, "loading_total_bytes").parse().unwrap();
        let loaded: u64 = field(s, "loading_loaded_bytes").parse().unwrap();
        let started: i64 = field(s, "loading_start_time").parse().unwrap();
        assert_eq!(total, size, "{tag}");
        assert!(loaded >= last && loaded <= total, "{tag}: {loaded} after {last} of {total}");
        assert!(started >= t0 - 1 && started <= t0 + 30, "{tag}: start {started}, test {t0}");
        let perc = format!("{:.2}", loaded as f64 / total as f64 * 100.0);
        assert_eq!(field(s, "loading_loaded_perc"), perc, "{tag}: {loaded} of {total}");
        field(s, "loading_eta_seconds").parse::<i64>().unwrap();
        midway |= loaded > 0 && loaded < total;
        last = loaded;
    }
    let seen: Vec<String> = snaps.iter().map(|s| field(s, "loading_loaded_bytes")).collect();
    assert!(midway, "{tag}: no snapshot between the start and the end of {size}: {seen:?}");
}

/// Bug: Sluice's INFO had none of the `loading_*` lines Redis 7.0 shows
/// while a data set loads (start time, size, the writer's `used-mem`,
/// bytes loaded, percentage, ETA), and an AOF's load told no progress at
/// all. Both servers load the same RDB file, then the same AOF (a base
/// RDB and an incr file of commands), slowly (`key-load-delay`), and are
/// polled: the persistence section's lines are Redis's, in its order, the
/// size and `used-mem` are the same in both, and each one's figures hold
/// together as Redis computes them.
#[test]
fn info_tells_a_loads_progress_as_redis() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("load-progress");
    // Values of 1,000 bytes: files of a few MB, which Sluice's loaders
    // read and count 1 MB (an RDB image) or 64 KB (an AOF's commands) at
    // a time.
    // (Random hex: a run of one byte would be compressed in the files.)
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut value = move || -> String {
        (0..125)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                format!("{:08x}", seed as u32)
            })
            .collect()
    };
    // The files, written by redis-server: an RDB file of 4,000 keys; an
    // AOF whose base holds 3,000 keys and whose incr file 3,000 SETs.
    {
        let r = Proc::start(Path::new(REDIS_SERVER), &["--appendonly", "yes"], &[], &dir);
        let mut c = Client::connect(r.port).unwrap();
        for i in 0..3000 {
            assert_eq!(c.cmd(&["SET", &format!("base:{i}"), &value()]).unwrap(), b"+OK\r\n");
        }
        c.cmd(&["BGREWRITEAOF"]).unwrap();
        assert!(wait_until(Duration::from_secs(20), || {
            let f = info_fields(&c.cmd(&["INFO", "persistence"]).unwrap());
            field(&f, "aof_rewrite_in_progress") == "0" && field(&f, "aof_rewrite_scheduled") == "0"
        }));
        for i in 0..3000 {
            assert_eq!(c.cmd(&["SET", &format!("incr:{i}"), &value()]).unwrap(), b"+OK\r\n");
        }
        for i in 0..1000 {
            assert_eq!(c.cmd(&["SET", &format!("rdb:{i}"), &value()]).unwrap(), b"+OK\r\n");
        }
        assert_eq!(c.cmd(&["SAVE"]).unwrap(), b"+OK\r\n");
    }
    let rdb_size = std::fs::metadata(dir.join("dump.rdb")).unwrap().len();
    let aof_size: u64 = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().ends_with(".manifest"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    // Redis answers a client every `loading-process-events-interval-bytes`
    // of an RDB load (and every 1,024 commands of an AOF's).
    let slow = ["--key-load-delay", "300", "--loading-process-events-interval-bytes", "1024"];
    for (what, extra, size) in
        [("rdb", vec![], rdb_size), ("aof", vec!["--appendonly", "yes"], aof_size)]
    {
        let mut names: Vec<Vec<String>> = Vec::new();
        let mut used_mem = Vec::new();
        for (tag, bin) in both() {
            // Each server loads its own copy (a server opens a new incr
            // file when its AOF has loaded).
            let own = scratch_dir(&format!("load-progress-{what}-{tag}"));
            std::fs::copy(dir.join("dump.rdb"), own.join("dump.rdb")).unwrap();
            std::fs::create_dir_all(own.join("appendonlydir")).unwrap();
            for e in std::fs::read_dir(dir.join("appendonlydir")).unwrap() {
                let p = e.unwrap().path();
                std::fs::copy(&p, own.join("appendonlydir").join(p.file_name().unwrap())).unwrap();
            }
            let t0 = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            let mut args = slow.to_vec();
            args.extend(&extra);
            let p = Proc::start(&bin, &args, &[], &own);
            let snaps = loading_snapshots(&p);
            let tag = format!("{tag} {what}");
            check_load_snapshots(&tag, &snaps, size, t0);
            // The last snapshot: Sluice's first may come before its loader
            // has read the file's head (Redis reads it before it answers).
            let last = snaps.last().unwrap();
            names.push(last.iter().map(|(k, _)| k.clone()).collect());
            used_mem.push(field(last, "loading_rdb_used_mem"));
        }
        assert_eq!(names[0], names[1], "{what}: INFO persistence's lines while loading");
        assert_eq!(used_mem[0], used_mem[1], "{what}: loading_rdb_used_mem");
        assert_ne!(used_mem[1], "0", "{what}: the file's used-mem");
    }
}
