//! ACL users against redis-server 7.0.15 and Sluice, with several
//! connections (transcripts in `testkit::transcript`): a restricted user
//! on a second connection, EXEC, scripts, a blocked client whose user
//! changes, deleted users, the ACL log, ACL LIST/GETUSER after many rule
//! combinations, and ACL LOAD/SAVE with an ACL file.
//!
//! Where Redis's reply is not deterministic it is normalised on both
//! sides before comparing: the single-command rules of a description
//! (Redis prints them in its command dictionary's hash order, random per
//! process), and ACL LOG's `age-seconds` and `client-info`.

use std::path::Path;
use std::time::Duration;

use resp::Frame;
use testkit::{Client, RedisServer, TestServer};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice-server"))
}

fn check(script: &str) {
    testkit::transcript::check(bin(), script);
}

#[test]
fn restricted_user_commands_keys_channels() {
    check(
        "A: ACL SETUSER u on >p ~k* &ch* -@all +get +set +publish +subscribe +psubscribe +acl|whoami +multi +exec
         A: SET k1 v
         A: SET other v
         B: AUTH u wrong
         B: AUTH nosuch p
         B: AUTH u p
         B: ACL WHOAMI
         B: GET k1
         B: GET other
         B: DEL k1
         B: SET k2 v
         B: MSET k1 a k2 b
         B: PUBLISH ch1 m
         B: PUBLISH news m
         B: CONFIG GET maxmemory
         B: ACL LIST
         A: ACL DRYRUN u get k1
         A: ACL DRYRUN u get other
         A: ACL DRYRUN u del k1
         A: ACL DRYRUN u publish x m
         A: ACL DRYRUN u psubscribe ch*
         A: ACL DRYRUN u psubscribe ch1*
         A: ACL DRYRUN u get
         A: ACL DRYRUN nosuch get k
         B> SUBSCRIBE ch1 other
         B? 50
         C: AUTH u p
         C: PSUBSCRIBE ch*
         C: PSUBSCRIBE c*
         D: HELLO 3 AUTH u wrong
         D_ HELLO 2 AUTH u p
         D: ACL WHOAMI",
    );
}

#[test]
fn read_and_write_key_patterns() {
    check(
        "A: ACL SETUSER rw on nopass %R~r* %W~w* ~b* +@all
         A: MSET r1 1 w1 1 b1 1
         B: AUTH rw x
         B: GET r1
         B: SET r1 2
         B: GET w1
         B: SET w1 2
         B: EXISTS w1
         B: COPY r1 w2
         B: COPY w1 r2
         B: LMOVE r1 w1 LEFT LEFT
         B: INCR b1
         B: RENAME r1 r3
         B: SORT b1 STORE w9
         A: ACL SETUSER rw (~x* +get)
         B: GET x1
         B: SET x1 v",
    );
}

#[test]
fn selectors_and_first_args() {
    check(
        "A: ACL SETUSER s on nopass -@all +select|0 +config|get ~a* (~b* +set) (+get ~c*)
         B: AUTH s x
         B: SELECT 1
         B: SELECT 0
         B: CONFIG GET maxmemory
         B: CONFIG SET maxmemory 0
         B: SET a1 v
         B: SET b1 v
         B: GET b1
         B: GET c1
         B: SET c1 v
         A: ACL SETUSER s clearselectors
         B: SET b1 v",
    );
}

/// SORT's BY (with a `*`) and GET read keys no key spec names: Redis
/// allows them only to a user with a selector that may read every key (a
/// pattern matching the string "*"). Sluice used to allow them to anyone
/// allowed the sorted key. (MIGRATE's keys for the ACL check:
/// `tests/scenarios/acl_key_positions.txt`, where `""` is an empty
/// argument; a transcript splits on whitespace.)
#[test]
fn sort_by_and_get_need_access_to_every_key() {
    check(
        "A: SET v1 1
         A: LPUSH mylist 1
         A: ACL SETUSER s on nopass (+sort ~mylist)
         B: AUTH s x
         B: SORT mylist BY v*
         B: SORT mylist GET v*
         B: SORT mylist BY nosort
         B: SORT mylist
         A: ACL SETUSER s (+sort ~mylist ~v*)
         B: SORT mylist BY v*
         B: SORT mylist GET v*
         A: ACL SETUSER s (+sort ~mylist %W~*)
         B: SORT mylist BY v*
         B: SORT mylist LIMIT x y BY v*
         A: ACL SETUSER s (+sort ~mylist %R~*)
         B: SORT mylist BY v*
         B: SORT mylist GET v* GET #",
    );
}

#[test]
fn exec_checks_queued_commands_again() {
    check(
        "A: ACL SETUSER u on >p ~k* +@all
         B: AUTH u p
         B: MULTI
         B: GET k1
         B: GET z1
         B: EXEC
         B: MULTI
         B: GET k1
         B: SET k2 v
         A: ACL SETUSER u resetkeys ~q*
         B: EXEC
         B: MULTI
         B: SET q1 v
         A: ACL SETUSER u -set
         B: EXEC
         A: ACL LOG RESET",
    );
}

#[test]
fn scripts_run_as_their_caller() {
    check(
        "A: ACL SETUSER u on >p ~k* &c -@all +eval +get +set +publish +evalsha
         B: AUTH u p
         B: EVAL \"return redis.call('get','k1')\" 0
         B: EVAL \"return redis.call('get','z1')\" 0
         B: EVAL \"return redis.call('del','k1')\" 0
         B: EVAL \"return redis.call('publish','d','m')\" 0
         B: EVAL \"return redis.pcall('get','z1')\" 0
         B: EVAL \"return redis.call('set',KEYS[1],'v')\" 1 k5",
    );
}

#[test]
fn blocked_client_served_after_its_user_changed() {
    // Redis 7.0 serves a blocked client without checking its user again.
    check(
        "A: ACL SETUSER u on >p ~k* +@all
         B: AUTH u p
         B> BLPOP k1 0
         B? 50
         A: ACL SETUSER u resetkeys ~z*
         A: LPUSH k1 x
         B<
         B: BLPOP k1 0.01
         C: AUTH u p
         C> BLPOP k2 0
         C? 50
         A: ACL DELUSER u
         C? 100
         A: LPUSH k2 y
         A: LLEN k2",
    );
}

#[test]
fn narrowed_channels_disconnect_only_the_subscribers_they_refuse() {
    check(
        "A: ACL SETUSER u on >p +@all ~* resetchannels &a* &b* &p*
         B: AUTH u p
         B> SUBSCRIBE a1
         B? 50
         C: AUTH u p
         C> SUBSCRIBE b1
         C? 50
         D: AUTH u p
         D> PSUBSCRIBE p*
         D? 50
         A: ACL SETUSER u &c*
         B? 50
         C? 50
         A: ACL SETUSER u resetchannels &a* &p1*
         B? 100
         C? 100
         D? 100
         A: PUBLISH a1 still-here
         B? 50",
    );
}

#[test]
fn deleted_user_disconnects_its_clients() {
    check(
        "A: ACL SETUSER u on >p +@all ~*
         B: AUTH u p
         C: AUTH u p
         C: ACL DELUSER u nosuch
         C? 100
         B? 100
         A: ACL DELUSER default
         A: ACL USERS
         A: CLIENT KILL USER nosuch",
    );
}

#[test]
fn requirepass_is_the_default_users_password() {
    // Connections open before requirepass is set (the transcript asks
    // each new one for its CLIENT ID).
    check(
        "A: PING
         B: PING
         C: PING
         D: PING
         E: PING
         A: CONFIG SET requirepass secret
         A: PING
         B: AUTH wrong
         B: AUTH secret
         B: PING
         C: AUTH default secret
         C: ACL GETUSER default
         A: ACL SETUSER default resetpass
         E: AUTH x
         E: RESET
         E: PING
         E: HELLO 2
         A: ACL SETUSER default nopass
         E: PING
         C: CONFIG SET requirepass \"\"
         D: AUTH x",
    );
}

#[test]
fn acl_command_errors() {
    check(
        "A: ACL SETUSER u2 (foo bar
         A: ACL SETUSER u2 on (foo
         A: ACL SETUSER \"u 2\"
         A: ACL SETUSER u2 bogus
         A: ACL SETUSER u2 +nosuch
         A: ACL SETUSER u2 +@nosuch
         A: ACL SETUSER u2 allkeys ~a
         A: ACL SETUSER u2 allchannels &a
         A: ACL SETUSER u2 <nopw
         A: ACL SETUSER u2 #abc
         A: ACL SETUSER u2 +config|get|x
         A: ACL SETUSER u2 +get|
         A: ACL SETUSER u2 %~x
         A: ACL SETUSER u2 %X~x
         A: ACL SETUSER u2 \"~a b\"
         A: ACL USERS
         A: ACL GETUSER nosuch
         A: ACL CAT nosuch
         A: ACL CAT
         A: ACL GENPASS 0
         A: ACL GENPASS 4097
         A: ACL GENPASS x
         A: ACL LOG x
         A: ACL LOG -1
         A: ACL LOAD
         A: ACL SAVE
         A: ACL DELUSER default
         A: ACL DELUSER x y
         A: ACL WHOAMI
         A: ACL foo
         A: ACL LIST x
         A: ACL HELP
         A: AUTH a b c
         A: AUTH x",
    );
}

// ---- descriptions (ACL LIST, GETUSER) ---------------------------------

/// Sorts each run of single-command rules (`+get`, `-config|set`, not
/// `+@cat`) inside a description: Redis emits them in hash order.
fn normalise(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let single = |w: &str| {
        let w = w.trim_start_matches('(').trim_end_matches(')');
        (w.starts_with('+') || w.starts_with('-')) && !w[1..].starts_with('@')
    };
    for w in text.split(' ') {
        if single(w) && !w.starts_with('(') {
            let closes = w.ends_with(')');
            run.push(w.trim_end_matches(')').to_string());
            if closes {
                run.sort();
                let last = run.len() - 1;
                run[last].push(')');
                out.append(&mut run);
            }
        } else {
            run.sort();
            out.append(&mut run);
            out.push(w.to_string());
        }
    }
    run.sort();
    out.append(&mut run);
    out.join(" ")
}

/// [`normalise`] line by line (raw replies, files).
fn normalise_lines(text: &str) -> String {
    text.split('\n').map(|l| normalise(l.trim_end_matches('\r'))).collect::<Vec<_>>().join("\n")
}

fn frame_text(f: &Frame, out: &mut String) {
    match f {
        Frame::Bulk(Some(b)) | Frame::Simple(b) => {
            out.push_str(&normalise(&String::from_utf8_lossy(b)));
            out.push('\n');
        }
        Frame::Array(Some(items)) | Frame::Set(items) => {
            out.push_str(&format!("[{}\n", items.len()));
            for i in items {
                frame_text(i, out);
            }
            out.push_str("]\n");
        }
        other => out.push_str(&format!("{other:?}\n")),
    }
}

fn described(c: &mut Client, cmds: &[&[&str]]) -> String {
    let mut out = String::new();
    for cmd in cmds {
        c.send(cmd).unwrap();
        let f = c.read_frame().unwrap();
        out.push_str(&format!("> {}\n", cmd.join(" ")));
        frame_text(&f, &mut out);
    }
    out
}

#[test]
fn descriptions_after_many_rule_combinations() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(bin());
    let cmds: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "a",
            "on",
            "nopass",
            "%R~r*",
            "%W~w*",
            "%RW~b*",
            "~a*",
            "&c*",
            "-@all",
            "+@read",
            "-debug",
            "+select|0",
            "+config|get",
            "(~s* +set)",
            "(+get ~g*)",
        ],
        &["ACL", "SETUSER", "b", "-@all", "+@hash", "+@string", "-hset"],
        &["ACL", "SETUSER", "c", "+@all", "-@dangerous", "-@admin"],
        &[
            "ACL",
            "SETUSER",
            "d",
            "~*",
            "allkeys",
            "resetkeys",
            "%R~a",
            "%W~a",
            "&x",
            "&x",
            ">a",
            ">a",
            "#aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "!aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ],
        &["ACL", "SETUSER", "e", "+acl", "-acl|setuser", "+client", "-client|kill"],
        &["ACL", "SETUSER", "f", "reset"],
        &["ACL", "SETUSER", "g", "(+get", "~x)", "(", "+set", ")"],
        &[
            "ACL",
            "SETUSER",
            "h",
            "+@all",
            "-@write",
            "+set",
            "-get",
            "allchannels",
            "skip-sanitize-payload",
        ],
        &[
            "ACL",
            "SETUSER",
            "i",
            "-@all",
            "+@pubsub",
            "+@connection",
            "-ping",
            "on",
            ">x",
            "<x",
            ">y",
        ],
        &["ACL", "SETUSER", "j", "+@all", "-@keyspace", "+del", "-config|set", "-client|kill"],
        &["ACL", "SETUSER", "k", "nocommands", "+@scripting", "-eval", "allcommands", "-flushall"],
        &["ACL", "SETUSER", "l", "+@dangerous", "-@admin", "+info"],
        &["ACL", "GETUSER", "a"],
        &["ACL", "GETUSER", "d"],
        &["ACL", "GETUSER", "g"],
        &["ACL", "GETUSER", "h"],
        &["ACL", "SETUSER", "g", "clearselectors"],
        &["ACL", "SETUSER", "c", "reset", "on", "+@all"],
        &["ACL", "LIST"],
        &["ACL", "USERS"],
    ];
    let want = described(&mut redis.client(), cmds);
    let got = described(&mut sluice.client(), cmds);
    assert_eq!(got, want);
}

// ---- ACL LOG ----------------------------------------------------------

/// ACL LOG without its run-dependent fields.
fn log_entries(c: &mut Client) -> String {
    c.send(&["ACL", "LOG"]).unwrap();
    let Frame::Array(Some(entries)) = c.read_frame().unwrap() else { panic!("not an array") };
    let mut out = String::new();
    for e in entries {
        let Frame::Array(Some(kv)) = e else { panic!("entry") };
        for pair in kv.chunks(2) {
            let key = match &pair[0] {
                Frame::Bulk(Some(k)) => String::from_utf8_lossy(k).into_owned(),
                k => format!("{k:?}"),
            };
            let val = match &pair[1] {
                Frame::Bulk(Some(b)) if key.contains("client-info") => {
                    // Only the fields Redis and Sluice fill alike.
                    let t = String::from_utf8_lossy(b).into_owned();
                    t.split(' ')
                        .filter(|f| {
                            f.starts_with("cmd=") || f.starts_with("user=") || f.starts_with("db=")
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                }
                _ if key.contains("age-seconds") => "age".into(),
                Frame::Bulk(Some(v)) => String::from_utf8_lossy(v).into_owned(),
                v => format!("{v:?}"),
            };
            out.push_str(&format!("{key}={val} "));
        }
        out.push('\n');
    }
    out
}

fn log_script(port: u16) -> String {
    let mut a = Client::connect(port).unwrap();
    let mut b = Client::connect(port).unwrap();
    a.set_timeout(Duration::from_secs(3));
    b.set_timeout(Duration::from_secs(3));
    for cmd in [
        "CONFIG SET acllog-max-len 5",
        "ACL SETUSER u on >p ~k* &ch -@all +get +eval +publish +multi +exec",
    ] {
        a.cmd_str(cmd);
    }
    for cmd in [
        "AUTH u bad",
        "AUTH u bad",
        "HELLO 2 AUTH nosuch x",
        "AUTH u p",
        "GET x",
        "GET x",
        "GET y",
        "DEL k",
        "PUBLISH zz m",
        "EVAL \"return redis.call('get','q')\" 0",
        "MULTI",
        "GET z",
        "DISCARD",
    ] {
        b.cmd_str(cmd);
    }
    let mut out = log_entries(&mut a);
    a.cmd_str("ACL LOG RESET");
    out.push_str(&log_entries(&mut a));
    out
}

#[test]
fn acl_log_entries_counting_grouping_and_length() {
    let Some(redis) = RedisServer::start() else { return };
    let sluice = TestServer::start_bin(bin());
    assert_eq!(log_script(sluice.port()), log_script(redis.port()));
}

// ---- ACL files ----------------------------------------------------------

fn file_script(port: u16, dir: &Path) -> String {
    let mut a = Client::connect(port).unwrap();
    a.set_timeout(Duration::from_secs(3));
    let mut b = Client::connect(port).unwrap();
    b.set_timeout(Duration::from_secs(3));
    let mut out = String::new();
    let mut step = |c: &mut Client, cmd: &str| {
        let r = c.cmd_str(cmd);
        out.push_str(&format!("> {cmd}\n{}\n", normalise_lines(&String::from_utf8_lossy(&r))));
    };
    step(&mut a, "ACL LIST");
    step(&mut a, "ACL SETUSER w on >pw ~w* +@all -@dangerous");
    step(&mut a, "ACL SETUSER v on nopass resetchannels &n* -@all +get (~s* +set)");
    step(&mut a, "ACL SAVE");
    let saved = std::fs::read_to_string(dir.join("users.acl")).unwrap();
    step(&mut b, "AUTH w pw");
    std::fs::write(
        dir.join("users.acl"),
        "user default on nopass ~* &* +@all\nuser z on >zz ~z* +get\n\n",
    )
    .unwrap();
    step(&mut a, "ACL LOAD");
    step(&mut a, "ACL LIST");
    step(&mut a, "CLIENT KILL USER w");
    std::fs::write(dir.join("users.acl"), "user z on bogus\nnot a user\nuser z on\n").unwrap();
    step(&mut a, "ACL LOAD");
    step(&mut a, "ACL USERS");
    std::fs::write(dir.join("users.acl"), "user default on >secret +@all ~*\n").unwrap();
    step(&mut a, "ACL LOAD");
    step(&mut a, "PING");
    let mut c = Client::connect(port).unwrap();
    step(&mut c, "PING");
    format!("{out}---\n{}", normalise_lines(&saved))
}

#[test]
fn acl_load_and_save_with_a_file() {
    let rdir = testkit::scratch_dir("acl-redis");
    let sdir = testkit::scratch_dir("acl-sluice");
    std::fs::write(rdir.join("users.acl"), "").unwrap();
    std::fs::write(sdir.join("users.acl"), "").unwrap();
    let Some(redis) = RedisServer::start_with(&["--aclfile", "users.acl"], Some(&rdir)) else {
        return;
    };
    let sluice = TestServer::start_with(bin(), &["--aclfile", "users.acl"], Some(&sdir));
    assert_eq!(file_script(sluice.port(), &sdir), file_script(redis.port(), &rdir));
}

#[test]
fn users_from_the_configuration_file() {
    let redis_bin = Path::new("/usr/bin/redis-server");
    if !redis_bin.is_file() {
        return;
    }
    let conf = "user default on nopass ~* &* +@all\nuser cfg on >c ~c* -@all +get +set\n";
    let run = |bin: &Path, tag: &str| {
        let dir = testkit::scratch_dir(tag);
        std::fs::write(dir.join("u.conf"), conf).unwrap();
        let path = dir.join("u.conf").to_str().unwrap().to_string();
        let args = move |port: u16| -> Vec<String> {
            [
                path.as_str(),
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let srv = testkit::ServerProc::spawn_raw(bin, &args, &dir);
        let mut c = Client::connect(srv.port()).unwrap();
        let mut out = String::new();
        for cmd in ["ACL LIST", "AUTH cfg c", "SET c1 v", "SET d1 v", "DEL c1", "ACL WHOAMI"] {
            out.push_str(&normalise_lines(&String::from_utf8_lossy(&c.cmd_str(cmd))));
        }
        out
    };
    assert_eq!(run(bin(), "aclconf-sluice"), run(redis_bin, "aclconf-redis"));
}

#[test]
fn config_rewrite_writes_the_users() {
    let redis_bin = Path::new("/usr/bin/redis-server");
    if !redis_bin.is_file() {
        return;
    }
    let conf = "user default on nopass ~* &* +@all\nuser old on >x ~* +@all\nport 0\n";
    let run = |bin: &Path, tag: &str| {
        let dir = testkit::scratch_dir(tag);
        std::fs::write(dir.join("u.conf"), conf).unwrap();
        let path = dir.join("u.conf").to_str().unwrap().to_string();
        let args = {
            let path = path.clone();
            move |port: u16| -> Vec<String> {
                [path.as_str(), "--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            }
        };
        let srv = testkit::ServerProc::spawn_raw(bin, &args, &dir);
        let mut c = Client::connect(srv.port()).unwrap();
        let mut out = String::new();
        for cmd in [
            "ACL SETUSER new on >y ~n* -@all +get +set",
            "ACL DELUSER old",
            "ACL SETUSER zed off (+get ~z*)",
            "CONFIG REWRITE",
        ] {
            out.push_str(&String::from_utf8_lossy(&c.cmd_str(cmd)));
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let users: Vec<&str> = text.lines().filter(|l| l.starts_with("user ")).collect();
        out.push_str(&normalise_lines(&users.join("\n")));
        out
    };
    assert_eq!(run(bin(), "aclrw-sluice"), run(redis_bin, "aclrw-redis"));
}
