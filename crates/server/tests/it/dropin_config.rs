//! Sluice as a drop-in for redis-server 7.0.15, configuration side: the
//! same parameters and defaults (`CONFIG GET *`), the same CONFIG SET
//! answers for every parameter, the same FATAL CONFIG FILE ERROR texts
//! and exit status for bad files and flags, Debian's stock redis.conf
//! accepted, and CONFIG REWRITE output that both servers load back.
//!
//! Every expectation is redis-server's own answer to the same input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use resp::Frame;
use testkit::{scratch_dir, Client, RedisServer, ServerProc, TestServer, REDIS_SERVER};

fn sluice_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sluice-server"))
}

fn have_redis() -> bool {
    // RedisServer::start panics when required and missing; mirror that.
    if Path::new(REDIS_SERVER).is_file() {
        return true;
    }
    assert!(!testkit::oracle_required(), "{REDIS_SERVER} is missing and CI is set");
    eprintln!("SKIPPED: {REDIS_SERVER} not found");
    false
}

/// Parameters whose values legitimately differ between the two processes
/// of a test: the port each was given, the scratch directory each runs
/// in, and Sluice's own `threads` (not a Redis parameter).
const PER_PROCESS: &[&str] = &["port", "dir", "threads", "pidfile"];

fn config_all(port: u16) -> BTreeMap<String, String> {
    let mut c = Client::connect(port).unwrap();
    config_get(&mut c, "*")
}

fn config_get(c: &mut Client, pat: &str) -> BTreeMap<String, String> {
    c.send(&["CONFIG", "GET", pat]).unwrap();
    let Frame::Array(Some(items)) = c.read_frame().unwrap() else { panic!("CONFIG GET reply") };
    let text = |f: &Frame| match f {
        Frame::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("unexpected {other:?}"),
    };
    items.chunks(2).map(|kv| (text(&kv[0]), text(&kv[1]))).collect()
}

/// Waits up to 5 s for `f` (the port accepts a moment before the last
/// start-up lines are written).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn without(mut m: BTreeMap<String, String>, skip: &[&str]) -> BTreeMap<String, String> {
    for k in skip {
        m.remove(*k);
    }
    m
}

#[test]
fn config_get_all_lists_redis_names_and_defaults() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(&sluice_bin());
    let r = config_all(redis.port());
    let s = config_all(sluice.port());
    assert_eq!(r.len(), 192, "redis-server 7.0.15 lists 192 names");
    // Sluice's own `threads` is hidden, as Redis's testing aids are: the
    // pattern lists Redis's names only, an exact name still finds it.
    assert!(!s.contains_key("threads"), "Sluice's own parameter is hidden");
    let mut c = Client::connect(sluice.port()).unwrap();
    assert_eq!(config_get(&mut c, "threads").get("threads").map(String::as_str), Some("2"));
    assert_eq!(without(s, PER_PROCESS), without(r, PER_PROCESS));
}

#[test]
fn hidden_parameters_answer_by_exact_name_only() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(&sluice_bin());
    for port in [redis.port(), sluice.port()] {
        let mut c = Client::connect(port).unwrap();
        for name in ["use-exit-on-panic", "key-load-delay", "watchdog-period"] {
            assert_eq!(config_get(&mut c, name).len(), 1, "{name}");
        }
        assert!(config_get(&mut c, "use-*").is_empty());
    }
}

/// Values tried on every parameter: valid and invalid for each type.
const TRIES: &[&str] = &[
    "garbage",
    "-5",
    "0",
    "7",
    "99999999999999999999",
    "1gb",
    "100MB",
    "50%",
    "",
    "yes",
    "No",
    "0 200 800",
    "nosave now",
    "save nosave",
    "KEA",
    "normal 1mb 2mb 3",
    "pubsub 1x 2 3",
    "3600 1 300",
    "60 10",
    "1 2 3",
    "0777",
    "a_b",
    "{title}",
    "{{x} {port}",
    "{config-file}",
];

/// Parameters left out, and why: changing them on a live server rebinds
/// its sockets (`port`, `bind`) or locks the test's connection out
/// (`requirepass`).
const NOT_TRIED: &[&str] = &["port", "bind", "requirepass"];

#[test]
fn config_set_answers_like_redis_for_every_parameter() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(&sluice_bin());
    let mut rc = Client::connect(redis.port()).unwrap();
    let mut sc = Client::connect(sluice.port()).unwrap();
    let mut names: Vec<String> = config_all(redis.port()).into_keys().collect();
    names.extend(["use-exit-on-panic", "rdb-key-save-delay", "watchdog-period"].map(String::from));
    let mut failures = Vec::new();
    for name in names.iter().filter(|n| !NOT_TRIED.contains(&n.as_str())) {
        let current = config_get(&mut rc, name).remove(name).unwrap_or_default();
        for value in std::iter::once(current.as_str()).chain(TRIES.iter().copied()) {
            let cmd = ["CONFIG", "SET", name.as_str(), value];
            let (r, s) = (rc.cmd(&cmd).unwrap(), sc.cmd(&cmd).unwrap());
            if r != s {
                failures.push(format!(
                    "CONFIG SET {name} {value:?}: redis {} sluice {}",
                    testkit::escape(&r),
                    testkit::escape(&s)
                ));
                continue;
            }
            let (rv, sv) = (config_get(&mut rc, name), config_get(&mut sc, name));
            if name != "dir" && rv != sv {
                failures.push(format!("after SET {name} {value:?}: redis {rv:?} sluice {sv:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn config_set_of_a_parameter_without_effect_is_logged() {
    let sluice = TestServer::start_bin(&sluice_bin());
    let mut c = sluice.client();
    assert_eq!(c.cmd(&["CONFIG", "SET", "list-compress-depth", "2"]).unwrap(), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1gb"]).unwrap(), b"+OK\r\n");
    let log = sluice.log_text();
    assert!(
        log.contains(
            "'list-compress-depth' is set to '2' but Sluice does not act on it: not yet in \
             effect: Sluice does not LZF-compress list chunks"
        ),
        "{log}"
    );
    assert!(!log.contains("'maxmemory' is set"), "maxmemory is in effect: {log}");
}

/// Runs a binary to completion (or kills it after 5 s) and returns
/// (status, stdout, stderr).
fn run(bin: &Path, args: &[&str], stdin: &[u8], cwd: &Path) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let _ = input.write_all(stdin);
    drop(input);
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// A log line without its `pid:R date time` prefix.
fn log_message(line: &str) -> String {
    match line.split_once(' ').and_then(|(_, rest)| rest.splitn(5, ' ').nth(4)) {
        Some(msg) if line.contains(":C ") || line.contains(":M ") => msg.to_string(),
        _ => line.to_string(),
    }
}

#[test]
fn fatal_config_errors_are_redis_texts_and_status() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("fatal");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let port = testkit::free_port().to_string();
    let inc = write("inc.conf", "maxmemory 10mb\nbogus-directive 1\n");
    let files: Vec<(String, &str)> = vec![
        ("unknown.conf".into(), "port 7000\n\n# c\nfoo bar\n"),
        ("bool.conf".into(), "appendonly maybe\n"),
        ("enum.conf".into(), "maxmemory-policy lru\n"),
        ("range.conf".into(), "databases 0\n"),
        ("int.conf".into(), "timeout 1.5\n"),
        ("mem.conf".into(), "maxmemory 1tb\n"),
        ("pct.conf".into(), "maxmemory-clients 101%\n"),
        ("octal.conf".into(), "unixsocketperm 999\n"),
        ("save.conf".into(), "save 60\n"),
        ("save0.conf".into(), "save 0 1\n"),
        ("obuf.conf".into(), "client-output-buffer-limit master 1 2 3\n"),
        ("obuf2.conf".into(), "client-output-buffer-limit normal 1 2\n"),
        ("oom.conf".into(), "oom-score-adj-values 0 200 3000\n"),
        ("oom2.conf".into(), "oom-score-adj-values 0 200\n"),
        ("notify.conf".into(), "notify-keyspace-events KEAq\n"),
        ("quotes.conf".into(), "requirepass \"abc\n"),
        ("argc.conf".into(), "port 1 2\n"),
        ("defrag.conf".into(), "activedefrag yes\n"),
        ("sigint.conf".into(), "shutdown-on-sigint save nosave\n"),
        ("pctl.conf".into(), "latency-tracking-info-percentiles 50 101\n"),
        ("host.conf".into(), "cluster-announce-hostname a_b\n"),
        ("module.conf".into(), "mymodule.opt 1 2\n"),
        ("sentinel.conf".into(), "sentinel monitor m 127.0.0.1 6379 2\n"),
        ("rename.conf".into(), "rename-command NOSUCHCMD x\n"),
        ("logfile.conf".into(), "logfile /nonexistent-dir/x.log\n"),
        ("dir.conf".into(), "dir /nonexistent-dir\n"),
        ("include.conf".into(), "port 7000\ninclude /nonexistent-dir/x.conf\n"),
        ("nested.conf".into(), format!("port 7000\ninclude {inc}\n").leak()),
        ("replicaof.conf".into(), "cluster-enabled yes\nreplicaof 127.0.0.1 6379\n"),
    ];
    let mut cases: Vec<(Vec<String>, Vec<u8>)> = Vec::new();
    for (name, text) in &files {
        let path = write(name, text);
        cases.push((vec![path, "--port".into(), port.clone()], Vec::new()));
    }
    // Flags, stdin and a missing file.
    let flag_cases: &[&[&str]] = &[
        &["--port", "7000", "--foo", "bar"],
        &["--maxmemory", "1x"],
        &["--save", "60"],
        &["-x"],
        &["--port", "1", "--version"],
        &["/nonexistent-dir/redis.conf"],
        &["--databases", "0", "--port", "1"],
        &["--bind", "127.0.0.1", "--oom-score-adj-values", "1", "2"],
        &["--shutdown-on-sigterm", "save nosave"],
    ];
    for f in flag_cases {
        cases.push((f.iter().map(|s| s.to_string()).collect(), Vec::new()));
    }
    cases.push((
        vec!["-".into(), "--port".into(), port.clone()],
        b"maxmemory 1mb\n\nnot-a-param yes\n".to_vec(),
    ));
    let mut failures = Vec::new();
    for (args, stdin) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run(Path::new(REDIS_SERVER), &args, stdin, &dir);
        let s = run(&sluice_bin(), &args, stdin, &dir);
        // The last log line is the reason (start-up lines before it say
        // "Redis" or "Sluice" and differ in Redis's host warnings).
        let last = |out: &str| out.lines().last().map(log_message);
        if r.0 != s.0 || r.2 != s.2 || last(&r.1) != last(&s.1) {
            failures.push(format!(
                "{args:?}:\n  redis  {:?} out {:?} err {:?}\n  sluice {:?} out {:?} err {:?}",
                r.0, r.1, r.2, s.0, s.1, s.2
            ));
        }
        assert_eq!(r.0, Some(1), "redis refuses {args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Starts `bin` on `args` (with `--port` added) in `cwd`.
fn start(bin: &Path, args: &[String], cwd: &Path) -> ServerProc {
    let args = args.to_vec();
    ServerProc::spawn_raw(
        bin,
        &move |port| {
            let mut v = args.clone();
            v.extend(["--port".to_string(), port.to_string()]);
            v
        },
        cwd,
    )
}

fn config_of_both(
    args: &[String],
    skip: &[&str],
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let dir = scratch_dir("flags");
    let r = start(Path::new(REDIS_SERVER), args, &dir);
    let s = start(&sluice_bin(), args, &dir);
    let out = (without(config_all(r.port()), skip), without(config_all(s.port()), skip));
    drop((r, s));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn command_line_flags_parse_like_redis() {
    if !have_redis() {
        return;
    }
    let cases: &[&[&str]] = &[
        &["--save", "", "--appendonly", "no"],
        &["--appendonly", "no", "--save"],
        &["--save", "--maxmemory", "1gb"],
        &["--save", "60", "1", "--save", "300 10"],
        &["--maxmemory 100mb", "--maxmemory-policy", "allkeys-lru"],
        &["--bind", "127.0.0.1", "-::1", "--protected-mode", "no"],
        &["--client-output-buffer-limit", "pubsub 1mb 2mb 3"],
        &["--client-output-buffer-limit", "normal", "1gb", "2mb", "0", "--hz", "1000"],
        &["--oom-score-adj-values", "0", "100", "200", "--oom-score-adj", "no"],
        &["--shutdown-on-sigint", "nosave", "now", "--shutdown-on-sigterm", "force"],
        &["--notify-keyspace-events", "KEA", "--hash-max-ziplist-entries", "7"],
        &["--latency-tracking-info-percentiles", "1.5 99.99999", "--slave-read-only", "no"],
        &["--maxmemory-clients", "10%", "--list-max-ziplist-size", "-3", "--lua-time-limit", "9"],
        &["--tls-port", "0", "--cluster-node-timeout", "9", "--unixsocketperm", "700"],
    ];
    let mut failures = Vec::new();
    for case in cases {
        let args: Vec<String> = case.iter().map(|s| s.to_string()).collect();
        let (r, s) = config_of_both(&args, &["port", "dir", "threads"]);
        if r != s {
            let diff: Vec<_> = r.iter().filter(|(k, v)| s.get(*k) != Some(v)).collect();
            failures.push(format!(
                "{case:?}: redis {diff:?} sluice {:?}",
                diff.iter().map(|(k, _)| s.get(*k)).collect::<Vec<_>>()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const DEBIAN_CONF: &str = "/etc/redis/redis.conf";

#[test]
fn debian_redis_conf_starts_and_serves() {
    if !have_redis() {
        return;
    }
    if std::fs::read(DEBIAN_CONF).is_err() {
        assert!(!testkit::oracle_required(), "{DEBIAN_CONF} must be readable in CI");
        eprintln!("SKIPPED: {DEBIAN_CONF} not readable");
        return;
    }
    let dir = scratch_dir("debian");
    let d = dir.to_string_lossy().into_owned();
    let args: Vec<String> = [
        DEBIAN_CONF,
        "--dir",
        &d,
        "--daemonize",
        "no",
        "--logfile",
        "",
        "--pidfile",
        &format!("{d}/server.pid"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let s = start(&sluice_bin(), &args, &dir);
    assert_eq!(s.client().cmd(&["PING"]).unwrap(), b"+PONG\r\n");
    let ready = || s.log_text().contains("Ready to accept connections");
    assert!(eventually(ready), "{}", s.log_text());
    drop(s);
    let (r, s) = config_of_both(&args, &["port", "dir", "threads"]);
    assert_eq!(s, r, "Debian's redis.conf gives the same configuration");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A config with non-default values of every kind, REWRITTEN by each
/// server after more CONFIG SETs, loads back in both servers with the
/// same configuration.
#[test]
fn config_rewrite_round_trips_in_both_servers() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("rewrite");
    let text = "# a comment that stays\n\
                maxmemory 100mb\n\
                maxmemory-policy allkeys-lfu\n\
                save 900 1\n\
                save 300 10\n\
                hash-max-ziplist-entries 64\n\
                slave-read-only no\n\
                notify-keyspace-events Ex\n\
                client-output-buffer-limit pubsub 64mb 16mb 90\n\
                oom-score-adj-values 0 100 300\n\
                shutdown-on-sigterm nosave\n\
                latency-tracking-info-percentiles 50 99.5\n\
                maxmemory-clients 5%\n\
                requirepass \"\"\n\
                unixsocketperm 700\n\
                cluster-node-timeout 5000\n\
                tls-session-cache-size 100\n\
                proc-title-template \"{title} {port}\"\n";
    let sets: &[(&str, &str)] = &[
        ("timeout", "30"),
        ("maxmemory", "2gb"),
        ("save", "3600 1"),
        ("notify-keyspace-events", "KA"),
        ("client-output-buffer-limit", "normal 1mb 1mb 0 replica 100mb 50mb 30"),
        ("hz", "20"),
        ("activerehashing", "no"),
        ("latency-tracking-info-percentiles", ""),
        ("shutdown-on-sigint", "now force"),
        ("repl-backlog-size", "3mb"),
        ("lfu-log-factor", "5"),
        ("tls-auth-clients", "optional"),
    ];
    let skip = ["port", "dir", "threads"];
    let mut rewritten = Vec::new();
    for (tag, bin) in [("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())] {
        let file = dir.join(format!("{tag}.conf"));
        std::fs::write(&file, text).unwrap();
        let p = start(&bin, &[file.to_string_lossy().into_owned()], &dir);
        let mut c = p.client();
        for (k, v) in sets {
            assert_eq!(c.cmd(&["CONFIG", "SET", k, v]).unwrap(), b"+OK\r\n", "{tag} {k}");
        }
        let before = without(config_all(p.port()), &skip);
        assert_eq!(c.cmd(&["CONFIG", "REWRITE"]).unwrap(), b"+OK\r\n", "{tag}");
        let out = std::fs::read_to_string(&file).unwrap();
        assert!(out.starts_with("# a comment that stays\n"), "{tag}: {out}");
        rewritten.push((tag, file, before));
    }
    assert_eq!(rewritten[0].2, rewritten[1].2, "the same SETs give the same configuration");
    // Each rewritten file, loaded by each server, gives back the
    // configuration its writer had.
    for (writer, file, before) in &rewritten {
        for (reader, bin) in [("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())] {
            let p = start(&bin, &[file.to_string_lossy().into_owned()], &dir);
            let after = without(config_all(p.port()), &skip);
            let diff: Vec<_> = before.iter().filter(|(k, v)| after.get(*k) != Some(v)).collect();
            assert!(diff.is_empty(), "{writer}'s rewrite read by {reader}: {diff:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every parameter of Redis 7.0.15 set to a value other than its default,
/// except: `port`, `bind`, `dir` (given as flags so the test can reach the
/// server), `daemonize` (the test watches the process), `aclfile` (it
/// would replace the password set here), `activedefrag` (no build of
/// Redis here accepts `yes`), `cluster-enabled` (not with `replicaof`),
/// `socket-mark-id` (needs CAP_NET_ADMIN) and `tls-port`/`tls-cluster`/
/// `tls-replication` (need real certificates).
const NON_DEFAULT: &str = r#"
acl-pubsub-default allchannels
acllog-max-len 10
active-defrag-cycle-max 50
active-defrag-cycle-min 5
active-defrag-ignore-bytes 200mb
active-defrag-max-scan-fields 500
active-defrag-threshold-lower 20
active-defrag-threshold-upper 90
active-expire-effort 3
activerehashing no
always-show-logo yes
aof-disable-auto-gc yes
aof-load-truncated no
aof-rewrite-incremental-fsync no
aof-timestamp-enabled yes
aof-use-rdb-preamble no
aof_rewrite_cpulist 0
appenddirname "aofdir-{tag}"
appendfilename "x-{tag}.aof"
appendfsync always
appendonly yes
auto-aof-rewrite-min-size 32mb
auto-aof-rewrite-percentage 50
bgsave_cpulist 0
bind-source-addr 127.0.0.1
bio_cpulist 0
busy-reply-threshold 1000
client-output-buffer-limit normal 1mb 2mb 3
client-output-buffer-limit replica 128mb 32mb 30
client-output-buffer-limit pubsub 16mb 4mb 10
client-query-buffer-limit 2gb
cluster-allow-pubsubshard-when-down no
cluster-allow-reads-when-down yes
cluster-allow-replica-migration no
cluster-announce-bus-port 17001
cluster-announce-hostname host1
cluster-announce-ip 10.0.0.1
cluster-announce-port 7001
cluster-announce-tls-port 7002
cluster-config-file nodes-{tag}.conf
cluster-link-sendbuf-limit 1mb
cluster-migration-barrier 2
cluster-node-timeout 1000
cluster-port 17000
cluster-preferred-endpoint-type hostname
cluster-replica-no-failover yes
cluster-replica-validity-factor 5
cluster-require-full-coverage no
crash-log-enabled no
crash-memcheck-enabled no
databases 32
dbfilename "d-{tag}.rdb"
disable-thp no
dynamic-hz no
enable-debug-command yes
enable-module-command yes
enable-protected-configs yes
hash-max-listpack-entries 100
hash-max-listpack-value 32
hll-sparse-max-bytes 2000
hz 50
ignore-warnings ARM64-COW-BUG
io-threads 2
io-threads-do-reads yes
jemalloc-bg-thread no
latency-monitor-threshold 100
latency-tracking no
latency-tracking-info-percentiles 50 90
lazyfree-lazy-eviction yes
lazyfree-lazy-expire yes
lazyfree-lazy-server-del yes
lazyfree-lazy-user-del yes
lazyfree-lazy-user-flush yes
lfu-decay-time 2
lfu-log-factor 5
list-compress-depth 1
list-max-listpack-size 16
logfile "{dir}/{tag}.log"
loglevel verbose
masterauth secret
masteruser someone
maxclients 100
maxmemory 1gb
maxmemory-clients 5%
maxmemory-eviction-tenacity 20
maxmemory-policy allkeys-lru
maxmemory-samples 7
min-replicas-max-lag 5
min-replicas-to-write 1
no-appendfsync-on-rewrite yes
notify-keyspace-events KEA
oom-score-adj relative
oom-score-adj-values 10 200 800
pidfile "{dir}/{tag}.pid"
proc-title-template "{title} {port}"
propagation-error-behavior panic
protected-mode no
proto-max-bulk-len 1gb
rdb-del-sync-files yes
rdb-save-incremental-fsync no
rdbchecksum no
rdbcompression no
repl-backlog-size 2mb
repl-backlog-ttl 60
repl-disable-tcp-nodelay yes
repl-diskless-load swapdb
repl-diskless-sync no
repl-diskless-sync-delay 1
repl-diskless-sync-max-replicas 2
repl-ping-replica-period 5
repl-timeout 30
replica-announce-ip 10.0.0.2
replica-announce-port 1234
replica-announced no
replica-ignore-disk-write-errors yes
replica-ignore-maxmemory no
replica-lazy-flush yes
replica-priority 50
replica-read-only no
replica-serve-stale-data no
replicaof 127.0.0.1 1
requirepass "pass word"
sanitize-dump-payload yes
save 100 5
server_cpulist 0
set-max-intset-entries 100
set-proc-title no
shutdown-on-sigint nosave now
shutdown-on-sigterm force
shutdown-timeout 3
slowlog-log-slower-than 100
slowlog-max-len 10
stop-writes-on-bgsave-error no
stream-node-max-bytes 2kb
stream-node-max-entries 50
supervised auto
syslog-enabled yes
syslog-facility local3
syslog-ident sluicetest
tcp-backlog 128
tcp-keepalive 60
timeout 100
tls-auth-clients optional
tls-ca-cert-dir /nonexistent-dir
tls-ca-cert-file ca.crt
tls-cert-file server.crt
tls-ciphers DEFAULT
tls-ciphersuites TLS_AES_128_GCM_SHA256
tls-client-cert-file client.crt
tls-client-key-file client.key
tls-client-key-file-pass p1
tls-dh-params-file dh.pem
tls-key-file server.key
tls-key-file-pass p2
tls-prefer-server-ciphers yes
tls-protocols "TLSv1.2 TLSv1.3"
tls-session-cache-size 100
tls-session-cache-timeout 60
tls-session-caching no
tracking-table-max-keys 10
unixsocket "{dir}/{tag}.sock"
unixsocketperm 700
zset-max-listpack-entries 64
zset-max-listpack-value 32
"#;

#[test]
fn a_config_with_every_parameter_changed_loads_like_redis() {
    if !have_redis() {
        return;
    }
    let dir = scratch_dir("nondefault");
    let d = dir.to_string_lossy().into_owned();
    let defaults = {
        // testkit turns DEBUG on; the default is off.
        let r = RedisServer::start_with(&["--enable-debug-command", "no"], None).unwrap();
        config_all(r.port())
    };
    let mut got = Vec::new();
    for (tag, bin) in [("redis", PathBuf::from(REDIS_SERVER)), ("sluice", sluice_bin())] {
        let file = dir.join(format!("{tag}.conf"));
        std::fs::write(&file, NON_DEFAULT.replace("{tag}", tag).replace("{dir}", &d)).unwrap();
        let args = [file.to_string_lossy().into_owned(), "--bind".into(), "127.0.0.1".into()];
        let p = start(&bin, &args, &dir);
        let mut c = p.client();
        assert_eq!(c.cmd(&["AUTH", "pass word"]).unwrap(), b"+OK\r\n", "{tag}");
        let mut all = config_get(&mut c, "*");
        // Per-server file names, made comparable.
        for v in all.values_mut() {
            *v = v.replace(&format!("/{tag}."), "/{tag}.").replace(&format!("-{tag}"), "-{tag}");
        }
        got.push((tag, without(all, &["port", "dir", "threads"]), p.log_text()));
        if tag == "sluice" {
            let read = || std::fs::read_to_string(dir.join("sluice.log")).unwrap_or_default();
            assert!(eventually(|| read().contains("Ready to accept connections")));
            let log = read();
            for name in [
                "list-compress-depth",
                "activerehashing",
                "tls-session-cache-timeout",
                "rdb-save-incremental-fsync",
            ] {
                assert!(log.contains(&format!("'{name}' is set to")), "{name}: {log}");
            }
        }
    }
    let diff: Vec<_> = got[0]
        .1
        .iter()
        .filter(|(k, v)| got[1].1.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: redis {v:?} sluice {:?}", got[1].1.get(k)))
        .collect();
    assert!(diff.is_empty(), "the same configuration in both:\n{}", diff.join("\n"));
    assert_eq!(got[0].1.len(), got[1].1.len());
    let unchanged: Vec<_> = got[0]
        .1
        .iter()
        .filter(|(k, v)| defaults.get(*k) == Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(
        unchanged,
        [
            "aclfile",
            "activedefrag",
            "bind",
            "cluster-enabled",
            "daemonize",
            "socket-mark-id",
            "tls-cluster",
            "tls-port",
            "tls-replication"
        ],
        "every other parameter differs from its default"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
