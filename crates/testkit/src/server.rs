//! Server processes under test: `sluice-server` and the oracle
//! `redis-server`, each on a free port of 127.0.0.1, in its own scratch
//! directory, killed on drop.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::Client;

/// The oracle: Debian's redis-server 7.0.15.
pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// Whether a missing oracle is a failure rather than a skip (`CI` or
/// `SLUICE_REQUIRE_REDIS` set to anything but empty, `0` or `false`).
pub fn oracle_required() -> bool {
    let on = |k: &str| {
        std::env::var(k).map(|v| !v.is_empty() && v != "0" && v != "false").unwrap_or(false)
    };
    on("CI") || on("SLUICE_REQUIRE_REDIS")
}

/// A port that was free a moment ago, handed out once per cycle in this
/// process: taken in turn from 10000-19999, below Linux's ephemeral range
/// (32768-60999), so that neither a client socket's automatic port nor
/// another test of this process takes it between now and the server's
/// bind; each process starts at its own place in the range. A cluster
/// node's bus (port + 10000) stays below the ephemeral range too. Ports
/// a bind finds taken (another process's) are skipped.
pub fn free_port() -> u16 {
    const LOW: usize = 10_000;
    const SPAN: usize = 10_000;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let start = (std::process::id() as usize).wrapping_mul(7919) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Whether process `pid` holds a socket listening on TCP `port`: the
/// listening entries for the port in `/proc/net/tcp{,6}`, matched by inode
/// against the process's descriptors. `None` when it cannot tell (no
/// `/proc`, or no listening entry for the port at all).
fn listens_on(pid: u32, port: u16) -> Option<bool> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 {
                continue;
            }
            let local = cols[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            // State 0A: LISTEN.
            if local == Some(port) && cols[3] == "0A" {
                inodes.push(format!("socket:[{}]", cols[9]));
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
    }))
}

/// A fresh directory under the system temp dir. The caller may remove it;
/// whatever is left is removed when the test process exits, so a test run
/// leaves no data files behind (CI machines share their disk).
pub fn scratch_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "sluice-testkit-{}-{}-{}",
        tag,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("create scratch dir");
    remove_at_exit(&d);
    d
}

/// Directories [`scratch_dir`] handed out, removed by an `atexit` hook.
static AT_EXIT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn remove_at_exit(d: &std::path::Path) {
    extern "C" fn remove_all() {
        let dirs = match AT_EXIT.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(_) => return,
        };
        for d in dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    static HOOK: std::sync::Once = std::sync::Once::new();
    // SAFETY: `remove_all` is a plain `extern "C" fn()` that neither
    // unwinds nor calls `exit`; registering it once is what atexit expects.
    HOOK.call_once(|| unsafe {
        libc::atexit(remove_all);
    });
    if let Ok(mut v) = AT_EXIT.lock() {
        v.push(d.to_path_buf());
    }
}

/// A running server process; killed (and its scratch directory removed)
/// on drop.
pub struct ServerProc {
    child: Child,
    port: u16,
    dir: PathBuf,
    own_dir: bool,
    log: PathBuf,
}

impl ServerProc {
    /// Spawns `bin` with `args(port)` in `cwd` (a fresh scratch directory
    /// when `None`), retrying on another port when the chosen one was taken
    /// meanwhile, and waits until it accepts connections.
    fn spawn(
        tag: &str,
        bin: &Path,
        args: &dyn Fn(u16) -> Vec<String>,
        cwd: Option<&Path>,
        env: &[(&str, &str)],
        as_limit: Option<u64>,
    ) -> ServerProc {
        let (dir, own_dir) = match cwd {
            Some(d) => (d.to_path_buf(), false),
            None => (scratch_dir(tag), true),
        };
        let mut last_err = String::new();
        for attempt in 0..5 {
            let port = free_port();
            let log = dir.join(format!("{tag}-{port}-{attempt}.log"));
            let out = std::fs::File::create(&log).expect("create server log");
            let err = out.try_clone().expect("clone log handle");
            let mut command = Command::new(bin);
            if let Some(bytes) = as_limit {
                use std::os::unix::process::CommandExt;
                // SAFETY: only an async-signal-safe syscall runs between
                // fork and exec.
                unsafe {
                    command.pre_exec(move || {
                        let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                        if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            let child = command
                .args(args(port))
                .envs(env.iter().copied())
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            let mut p = ServerProc { child, port, dir: dir.clone(), own_dir: false, log };
            match p.wait_ready(Duration::from_secs(20)) {
                Ok(()) => {
                    p.own_dir = own_dir;
                    return p;
                }
                Err(e) => last_err = e,
            }
        }
        panic!("{} did not start: {last_err}", bin.display());
    }

    /// Spawns `bin` with exactly `args(port)` (a config file may come
    /// first, as redis-server takes it) in `cwd`; the caller passes the
    /// port on to the process (for example `--port`), and it must listen
    /// on 127.0.0.1. Used by the tests of process behaviour.
    pub fn spawn_raw(bin: &Path, args: &dyn Fn(u16) -> Vec<String>, cwd: &Path) -> ServerProc {
        let tag = if bin.ends_with("redis-server") { "redis" } else { "sluice" };
        Self::spawn(tag, bin, args, Some(cwd), &[], None)
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("exited with {st}; log:\n{}", self.log_text()));
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                // Another test's server may have taken the port between
                // `free_port` and this one's bind (this one then exits on
                // its bind error, but the connection went to the other):
                // ready only when the listener is this process's.
                if listens_on(self.child.id(), self.port) == Some(false) {
                    return Err(format!("port {} is another process's", self.port));
                }
                return Ok(());
            }
            if start.elapsed() > limit {
                return Err(format!("not accepting after {limit:?}; log:\n{}", self.log_text()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The working directory of the process.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new connection.
    pub fn client(&self) -> Client {
        Client::connect(self.port).expect("connect to server under test")
    }

    /// What the process wrote to stdout and stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Resident set size in KiB (`VmRSS` of /proc/<pid>/status).
    pub fn rss_kb(&self) -> Option<u64> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.own_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// A `sluice-server` process.
pub struct TestServer(ServerProc);

impl TestServer {
    /// Where the binary is: `$SLUICE_SERVER`, else `sluice-server` in the
    /// cargo target directory this test executable was built into.
    pub fn default_bin() -> PathBuf {
        Self::find_bin().unwrap_or_else(|| {
            panic!("sluice-server not found: set SLUICE_SERVER or run `cargo build -p server`")
        })
    }

    /// [`TestServer::default_bin`] when it is there, `None` otherwise.
    pub fn find_bin() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("SLUICE_SERVER") {
            return Some(PathBuf::from(p));
        }
        let exe = std::env::current_exe().ok()?;
        // target/<profile>/deps/<test> → target/<profile>/sluice-server
        exe.ancestors().skip(1).take(3).map(|d| d.join("sluice-server")).find(|p| p.is_file())
    }

    /// For the tests of crates other than the server's: `cargo test -p
    /// client` does not build `sluice-server` (`cargo test --workspace`
    /// does), so its Sluice half is skipped then, with a message; under
    /// CI (`oracle_required`) a missing binary fails the test.
    pub fn bin_or_skip() -> Option<PathBuf> {
        let found = Self::find_bin();
        if found.is_none() {
            assert!(!oracle_required(), "sluice-server not built (cargo build -p server)");
            eprintln!("SKIPPED sluice: sluice-server not built (cargo build -p server)");
        }
        found
    }

    /// Starts the binary found by [`TestServer::default_bin`].
    pub fn start() -> TestServer {
        Self::start_bin(&Self::default_bin())
    }

    /// Starts `bin` with the test defaults.
    pub fn start_bin(bin: &Path) -> TestServer {
        Self::start_with(bin, &[], None)
    }

    /// Starts `bin` with `extra` flags after the defaults, in `cwd`.
    pub fn start_with(bin: &Path, extra: &[&str], cwd: Option<&Path>) -> TestServer {
        Self::start_with_env(bin, extra, cwd, &[])
    }

    /// [`start_with`](Self::start_with) with extra environment variables.
    pub fn start_with_env(
        bin: &Path,
        extra: &[&str],
        cwd: Option<&Path>,
        env: &[(&str, &str)],
    ) -> TestServer {
        Self::start_limited(bin, extra, cwd, env, None)
    }

    /// [`start_with_env`](Self::start_with_env) under an address-space
    /// limit (`RLIMIT_AS`, bytes) when `as_limit` is set: an allocation
    /// past it fails instead of growing the machine's memory.
    pub fn start_limited(
        bin: &Path,
        extra: &[&str],
        cwd: Option<&Path>,
        env: &[(&str, &str)],
        as_limit: Option<u64>,
    ) -> TestServer {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let args = move |port: u16| {
            let mut v: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--threads",
                "2",
                "--save",
                "",
                "--appendonly",
                "no",
                // Tests use DEBUG (Redis's own test suite does the same).
                "--enable-debug-command",
                "yes",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            v.extend(extra.iter().cloned());
            v
        };
        TestServer(ServerProc::spawn("sluice", bin, &args, cwd, env, as_limit))
    }
}

impl std::ops::Deref for TestServer {
    type Target = ServerProc;
    fn deref(&self) -> &ServerProc {
        &self.0
    }
}

impl std::ops::DerefMut for TestServer {
    fn deref_mut(&mut self) -> &mut ServerProc {
        &mut self.0
    }
}

/// The oracle, `redis-server` 7.0.
pub struct RedisServer(ServerProc);

impl RedisServer {
    /// Starts the oracle; `None` (after saying why on stderr) when the
    /// binary is missing and [`oracle_required`] is false. Panics when it
    /// is missing and required.
    pub fn start() -> Option<RedisServer> {
        Self::start_with(&[], None)
    }

    /// Starts the oracle with `extra` flags, in `cwd`.
    pub fn start_with(extra: &[&str], cwd: Option<&Path>) -> Option<RedisServer> {
        if !Path::new(REDIS_SERVER).is_file() {
            if oracle_required() {
                panic!("{REDIS_SERVER} is missing and CI is set: the differential tests need it");
            }
            eprintln!("SKIPPED: {REDIS_SERVER} not found (install redis-server; CI=true makes this a failure)");
            return None;
        }
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let args = move |port: u16| {
            let mut v: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--enable-debug-command",
                "yes",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            v.extend(extra.iter().cloned());
            v
        };
        Some(RedisServer(ServerProc::spawn(
            "redis",
            Path::new(REDIS_SERVER),
            &args,
            cwd,
            &[],
            None,
        )))
    }
}

impl std::ops::Deref for RedisServer {
    type Target = ServerProc;
    fn deref(&self) -> &ServerProc {
        &self.0
    }
}

impl std::ops::DerefMut for RedisServer {
    fn deref_mut(&mut self) -> &mut ServerProc {
        &mut self.0
    }
}
