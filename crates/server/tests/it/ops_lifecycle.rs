//! SHUTDOWN's variants against redis-server 7.0.15: the reply (or the
//! closed connection), the log lines from "User requested shutdown..."
//! to "bye bye", the save, the pid file, and the clients still connected
//! (a blocked one, an idle one) seeing their connections closed.

use std::path::Path;
use std::time::{Duration, Instant};

use testkit::{scratch_dir, RedisServer, ServerProc, TestServer};

fn have_redis() -> bool {
    RedisServer::start().is_some()
}

/// The log's messages (`pid:role date time level message` → `level
/// message`) from "User requested shutdown..." on, with the server's
/// name made neutral.
fn shutdown_lines(log: &str) -> Vec<String> {
    let msgs: Vec<String> = log
        .lines()
        .filter_map(|l| {
            // `123:M 25 Nov 2026 17:40:59.538 # text`
            let mut it = l.splitn(6, ' ');
            let (pid_role, _d, _m, _y, _t, rest) =
                (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
            pid_role.contains(':').then(|| rest.to_string())
        })
        .map(|m| m.replace("Redis is now", "X is now").replace("Sluice is now", "X is now"))
        .collect();
    let from = msgs.iter().position(|m| m.ends_with("User requested shutdown...")).unwrap_or(0);
    msgs[from..].to_vec()
}

fn wait_exit(p: &mut ServerProc) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if !p.is_running() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Starts `bin` in `dir` with save points (so a plain SHUTDOWN saves) and
/// a pid file; runs `args` as SHUTDOWN; returns what a client and the log
/// saw.
fn shutdown_story(bin: &Path, dir: &Path, args: &[&str], break_save: bool) -> Vec<String> {
    let pidfile = dir.join("server.pid");
    let pid_arg = pidfile.display().to_string();
    let mut p = ServerProc::spawn_raw(
        bin,
        &|port| {
            [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "3600 1",
                "--appendonly",
                "no",
                "--pidfile",
                &pid_arg,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        },
        dir,
    );
    let mut out = Vec::new();
    let mut c = p.client();
    c.cmd(&["SET", "k", "v"]).unwrap();
    // Another client waits in BLPOP, a third is idle.
    let mut blocked = p.client();
    blocked.send(&["BLPOP", "nolist", "0"]).unwrap();
    let mut idle = p.client();
    idle.cmd(&["PING"]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    out.push(format!("pidfile before: {}", pidfile.exists()));
    if break_save {
        // The dump's name is a directory: the save fails.
        std::fs::create_dir_all(dir.join("dump.rdb")).unwrap();
    }
    c.send(args).unwrap();
    let (reply, closed) = c.read_quiet(Duration::from_millis(1500)).unwrap();
    out.push(format!("{args:?} -> {:?} closed:{closed}", String::from_utf8_lossy(&reply)));
    if !closed {
        // Refused or aborted: the server still serves.
        out.push(String::from_utf8_lossy(&c.cmd(&["PING"]).unwrap()).into_owned());
        c.send(&["SHUTDOWN", "NOSAVE"]).unwrap();
    }
    out.push(format!("exited: {}", wait_exit(&mut p)));
    for (name, cl) in [("blocked", &mut blocked), ("idle", &mut idle)] {
        let (b, closed) = cl.read_quiet(Duration::from_millis(500)).unwrap();
        out.push(format!("{name}: {:?} closed:{closed}", String::from_utf8_lossy(&b)));
    }
    out.push(format!("pidfile after: {}", pidfile.exists()));
    out.push(format!("saved: {}", dir.join("dump.rdb").exists()));
    out.extend(shutdown_lines(&p.log_text()));
    out
}

#[test]
fn shutdown_variants_log_save_and_close_clients_like_redis() {
    if !have_redis() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    let sluice = TestServer::default_bin();
    for args in [
        &["SHUTDOWN"][..],
        &["SHUTDOWN", "NOSAVE"],
        &["SHUTDOWN", "SAVE", "NOW", "FORCE"],
        &["SHUTDOWN", "ABORT"],
    ] {
        let mut seen = Vec::new();
        for bin in [redis, sluice.as_path()] {
            let dir = scratch_dir("shutdown");
            seen.push(shutdown_story(bin, &dir, args, false));
            let _ = std::fs::remove_dir_all(&dir);
        }
        assert_eq!(seen[1], seen[0], "{args:?}");
    }
}

#[test]
fn shutdown_refuses_when_the_save_fails_unless_forced() {
    if !have_redis() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    let sluice = TestServer::default_bin();
    let mut seen = Vec::new();
    for bin in [redis, sluice.as_path()] {
        let dir = scratch_dir("shutdown-fail");
        let mut story = shutdown_story(bin, &dir, &["SHUTDOWN", "SAVE"], true);
        // The save's own error line (Redis names its temp file and the
        // rename; Sluice its write) differs in wording, not in place.
        story.retain(|l| !l.ends_with("Is a directory") && !l.contains("(os error 21)"));
        seen.push(story);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[1], seen[0]);
}

/// CONFIG REWRITE of a file with comments, blank-line runs and an
/// `include`: the same file on both servers. Redis appends new lines in
/// its config dict's (hash) order, so the appended block is compared as
/// a set; Redis also always appends `dir`, the default user and
/// `latency-tracking-info-percentiles` (Sluice has no ACL users yet and
/// writes only what differs from the default).
#[test]
fn config_rewrite_keeps_comments_order_and_includes_like_redis() {
    if !have_redis() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    let sluice = TestServer::default_bin();
    let mut files = Vec::new();
    for bin in [redis, sluice.as_path()] {
        let dir = scratch_dir("rewrite");
        let extra = dir.join("extra.conf");
        std::fs::write(&extra, "# included\nmaxmemory-samples 7\nhz 20\n").unwrap();
        let main = dir.join("main.conf");
        let inc = extra.display().to_string();
        let text = format!(
            "# main file\n\n\n# kept comment\ninclude {inc}\nhz 11\nloglevel notice\n\
             appendonly no\n# last comment\nmaxmemory 0\nslowlog-max-len 100\nslowlog-max-len 200\n"
        );
        std::fs::write(&main, text).unwrap();
        let main_arg = main.display().to_string();
        let p = ServerProc::spawn_raw(
            bin,
            &|port| {
                [&main_arg, "--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            },
            &dir,
        );
        let mut c = p.client();
        let got = |c: &mut testkit::Client, name: &str| {
            String::from_utf8_lossy(&c.cmd(&["CONFIG", "GET", name]).unwrap()).into_owned()
        };
        // The include is read where it stands: hz 11 after it wins.
        let before = (got(&mut c, "hz"), got(&mut c, "maxmemory-samples"));
        for set in [
            &["CONFIG", "SET", "loglevel", "verbose", "maxmemory-samples", "9"][..],
            &["CONFIG", "SET", "slowlog-max-len", "64", "notify-keyspace-events", "Ex"],
            &["CONFIG", "REWRITE"],
        ] {
            assert_eq!(c.cmd(set).unwrap(), b"+OK\r\n", "{set:?}");
        }
        let text = std::fs::read_to_string(&main).unwrap();
        let text = text.replace(&dir.display().to_string(), "DIR").replace(&inc, "INC");
        let (kept, appended) = match text.split_once("# Generated by CONFIG REWRITE\n") {
            Some((a, b)) => (a.to_string(), b.to_string()),
            None => (text.clone(), String::new()),
        };
        let mut appended: Vec<String> = appended
            .lines()
            .filter(|l| {
                !l.starts_with("dir ")
                    && !l.starts_with("user default")
                    && !l.starts_with("latency-tracking-info-percentiles")
                    && !l.starts_with("port ")
            })
            .map(str::to_string)
            .collect();
        appended.sort();
        files.push((before, kept, appended));
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(files[1], files[0]);
}

/// CONFIG SET port moves the listeners (Redis's changeListenPort): the
/// old port stops accepting, the new one serves, INFO says so; a port
/// that cannot be bound is refused and nothing changes.
#[test]
fn config_set_port_moves_the_listener_like_redis() {
    let Some(r) = RedisServer::start() else { return };
    let s = TestServer::start();
    let mut seen = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = testkit::Client::connect(port).unwrap();
        let new = testkit::free_port();
        let mut log = Vec::new();
        let ok = c.cmd(&["CONFIG", "SET", "port", &new.to_string()]).unwrap();
        log.push(String::from_utf8_lossy(&ok).into_owned());
        // The connection that asked stays; new ones go to the new port.
        log.push(String::from_utf8_lossy(&c.cmd(&["PING"]).unwrap()).into_owned());
        std::thread::sleep(Duration::from_millis(100));
        log.push(format!("old port accepts: {}", testkit::Client::connect(port).is_ok()));
        let mut n = testkit::Client::connect(new).expect("the new port");
        let info = String::from_utf8_lossy(&n.cmd(&["INFO", "server"]).unwrap()).into_owned();
        log.push(format!("tcp_port moved: {}", info.contains(&format!("tcp_port:{new}\r\n"))));
        // A port in use is refused, the current one kept.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = taken.local_addr().unwrap().port();
        let err = n.cmd(&["CONFIG", "SET", "port", &busy.to_string()]).unwrap();
        log.push(String::from_utf8_lossy(&err).into_owned());
        let got = n.cmd(&["CONFIG", "GET", "port"]).unwrap();
        log.push(String::from_utf8_lossy(&got).replace(&new.to_string(), "NEW"));
        seen.push(log);
    }
    assert_eq!(seen[1], seen[0]);
}

/// `rename-command` from the file: the old name is unknown to clients,
/// MULTI and scripts, the new one runs the command, an empty name
/// removes it, a pipeline repeating the old name after the new one is
/// still refused, and CONFIG REWRITE keeps the lines so that a restart
/// renames again.
#[test]
fn rename_command_renames_and_survives_rewrite_like_redis() {
    if !have_redis() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    let sluice = TestServer::default_bin();
    let mut seen = Vec::new();
    for bin in [redis, sluice.as_path()] {
        let dir = scratch_dir("rename");
        let main = dir.join("main.conf");
        std::fs::write(
            &main,
            "rename-command flushdb badger\nrename-command randomkey \"\"\n\
             rename-command badger otter\n",
        )
        .unwrap();
        let main_arg = main.display().to_string();
        let args = |port: u16| -> Vec<String> {
            [&main_arg, "--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        let mut log = Vec::new();
        for round in 0..2 {
            let p = ServerProc::spawn_raw(bin, &args, &dir);
            let mut c = p.client();
            let mut run = |c: &mut testkit::Client, a: &[&str]| {
                let r = String::from_utf8_lossy(&c.cmd(a).unwrap()).into_owned();
                log.push(format!("{round} {a:?} -> {r:?}"));
            };
            run(&mut c, &["SET", "k", "v"]);
            for a in [
                &["FLUSHDB"][..],
                &["badger"],
                &["RANDOMKEY"],
                &["DBSIZE"],
                &["OTTER"],
                &["DBSIZE"],
                &["flushdb"],
                &["MULTI"],
                &["flushdb"],
                &["otter"],
                &["EXEC"],
                &["EVAL", "return redis.pcall('flushdb')", "0"],
                &["EVAL", "return redis.pcall('otter')", "0"],
            ] {
                run(&mut c, a);
            }
            if round == 0 {
                run(&mut c, &["CONFIG", "REWRITE"]);
            }
        }
        let text = std::fs::read_to_string(&main).unwrap();
        log.push(
            text.lines().filter(|l| l.starts_with("rename-command")).collect::<Vec<_>>().join("|"),
        );
        seen.push(log);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(seen[1], seen[0]);
}
