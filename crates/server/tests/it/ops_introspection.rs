//! SLOWLOG, LATENCY, MEMORY and DEBUG's gate against redis-server 7.0.15:
//! the same commands on both, replies compared once what differs between
//! two servers by nature (ids, timestamps, durations, client ports) is
//! masked. Memory sizes are compared with a tolerance.

use std::time::Duration;

use resp::Frame;
use testkit::{Client, RedisServer, TestServer};

fn both() -> Option<(RedisServer, TestServer)> {
    let r = RedisServer::start()?;
    Some((r, TestServer::start()))
}

fn frame(c: &mut Client, args: &[&str]) -> Frame {
    c.send(args).unwrap();
    c.read_frame().unwrap()
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Simple(b) | Frame::Error(b) | Frame::Bulk(Some(b)) | Frame::Verbatim(_, b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn items(f: Frame) -> Vec<Frame> {
    match f {
        Frame::Array(Some(v)) => v,
        other => panic!("not an array: {other:?}"),
    }
}

/// A slow log entry without its id, time, duration and client port.
fn masked_entry(f: Frame) -> (Vec<String>, String, String) {
    let v = items(f);
    assert_eq!(v.len(), 6, "{v:?}");
    assert!(matches!(v[0], Frame::Integer(i) if i >= 0));
    assert!(matches!(v[1], Frame::Integer(t) if t > 1_600_000_000));
    assert!(matches!(v[2], Frame::Integer(d) if d >= 0));
    let argv = items(v[3].clone()).iter().map(text).collect();
    let peer = text(&v[4]);
    let ip = peer.rsplit_once(':').map(|(ip, _)| ip.to_string()).unwrap_or_default();
    (argv, ip, text(&v[5]))
}

fn slowlog_story(port: u16) -> Vec<String> {
    let mut c = Client::connect(port).unwrap();
    let mut log = Vec::new();
    let say = |c: &mut Client, args: &[&str], log: &mut Vec<String>| {
        let f = frame(c, args);
        log.push(format!("{args:?} -> {}", text(&f)));
    };
    say(&mut c, &["SLOWLOG", "GET", "x"], &mut log);
    say(&mut c, &["SLOWLOG", "GET", "-2"], &mut log);
    say(&mut c, &["SLOWLOG", "GET", "1", "2"], &mut log);
    say(&mut c, &["SLOWLOG", "LEN", "x"], &mut log);
    say(&mut c, &["SLOWLOG", "NOPE"], &mut log);
    say(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"], &mut log);
    say(&mut c, &["SLOWLOG", "RESET"], &mut log);
    say(&mut c, &["CLIENT", "SETNAME", "worker-1"], &mut log);
    let long = "x".repeat(300);
    say(&mut c, &["SET", "big", &long], &mut log);
    let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let mut rpush = vec!["RPUSH", "l"];
    rpush.extend(many.iter().map(String::as_str));
    say(&mut c, &rpush, &mut log);
    say(&mut c, &["MULTI"], &mut log);
    say(&mut c, &["INCR", "n"], &mut log);
    say(&mut c, &["EXEC"], &mut log);
    say(&mut c, &["GET", "nokey"], &mut log);
    say(&mut c, &["AUTH", "nouser", "secret"], &mut log);
    say(&mut c, &["SLOWLOG", "LEN"], &mut log);
    let all = items(frame(&mut c, &["SLOWLOG", "GET", "-1"]));
    for e in all {
        log.push(format!("{:?}", masked_entry(e)));
    }
    let two = items(frame(&mut c, &["SLOWLOG", "GET", "2"]));
    log.push(format!("GET 2 -> {} entries", two.len()));
    // A shorter max length applies from the next entry on.
    say(&mut c, &["CONFIG", "SET", "slowlog-max-len", "3"], &mut log);
    say(&mut c, &["SLOWLOG", "LEN"], &mut log);
    say(&mut c, &["PING"], &mut log);
    say(&mut c, &["SLOWLOG", "LEN"], &mut log);
    // Off: nothing more is logged.
    say(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"], &mut log);
    say(&mut c, &["SLOWLOG", "RESET"], &mut log);
    say(&mut c, &["PING"], &mut log);
    say(&mut c, &["SLOWLOG", "LEN"], &mut log);
    log
}

#[test]
fn slowlog_matches_redis() {
    let Some((r, s)) = both() else { return };
    let (want, got) = (slowlog_story(r.port()), slowlog_story(s.port()));
    assert_eq!(got, want);
}

#[test]
fn help_texts_match_redis() {
    let Some((r, s)) = both() else { return };
    let (mut rc, mut sc) = (r.client(), s.client());
    for cmd in [
        &["SLOWLOG", "HELP"][..],
        &["LATENCY", "HELP"],
        &["MEMORY", "HELP"],
        &["OBJECT", "HELP"],
        &["MEMORY", "USAGE"],
        &["MEMORY", "USAGE", "k", "SAMPLES"],
        &["MEMORY", "USAGE", "nokey"],
        &["MEMORY", "NOPE"],
        &["LATENCY", "GRAPH", "command"],
        &["LATENCY", "HISTORY", "command"],
        &["LATENCY", "LATEST"],
        &["LATENCY", "RESET"],
        &["LATENCY", "DOCTOR"],
    ] {
        assert_eq!(frame(&mut sc, cmd), frame(&mut rc, cmd), "{cmd:?}");
    }
    for c in [&mut rc, &mut sc] {
        frame(c, &["SET", "k", "v"]);
    }
    for cmd in [
        &["MEMORY", "USAGE", "k", "SAMPLES"][..],
        &["MEMORY", "USAGE", "k", "SAMPLES", "x"],
        &["MEMORY", "USAGE", "k", "SAMPLES", "-1"],
        &["MEMORY", "USAGE", "k", "BAD", "1"],
        &["MEMORY", "USAGE", "k", "SAMPLES", "0"],
    ] {
        assert_eq!(frame(&mut sc, cmd), frame(&mut rc, cmd), "{cmd:?}");
    }
}

fn latency_story(port: u16) -> Vec<String> {
    let mut c = Client::connect(port).unwrap();
    let mut log = Vec::new();
    frame(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "20"]);
    // Below the threshold: nothing.
    frame(&mut c, &["DEBUG", "SLEEP", "0"]);
    log.push(text(&frame(&mut c, &["LATENCY", "LATEST"])));
    frame(&mut c, &["DEBUG", "SLEEP", "0.06"]);
    let latest = items(frame(&mut c, &["LATENCY", "LATEST"]));
    log.push(format!("{} events", latest.len()));
    let ev = items(latest[0].clone());
    log.push(text(&ev[0]));
    let (last, max) = match (&ev[2], &ev[3]) {
        (Frame::Integer(a), Frame::Integer(b)) => (*a, *b),
        other => panic!("{other:?}"),
    };
    log.push(format!("last>=60:{} max==last:{}", last >= 60, max == last));
    let hist = items(frame(&mut c, &["LATENCY", "HISTORY", "command"]));
    log.push(format!("history {}", hist.len()));
    let graph = text(&frame(&mut c, &["LATENCY", "GRAPH", "command"]));
    let lines: Vec<&str> = graph.lines().collect();
    log.push(format!("graph title {}", lines[0].starts_with("command - high ")));
    log.push(lines[1].to_string());
    log.push(format!("graph rows {}", lines.len()));
    let doctor = text(&frame(&mut c, &["LATENCY", "DOCTOR"]));
    log.push(doctor.lines().next().unwrap_or("").to_string());
    log.push(text(&frame(&mut c, &["LATENCY", "RESET", "nosuch"])));
    log.push(text(&frame(&mut c, &["LATENCY", "RESET", "COMMAND"])));
    log.push(text(&frame(&mut c, &["LATENCY", "RESET"])));
    log.push(text(&frame(&mut c, &["LATENCY", "LATEST"])));
    frame(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "0"]);
    log
}

#[test]
fn latency_monitor_matches_redis() {
    let Some((r, s)) = both() else { return };
    let (want, got) = (latency_story(r.port()), latency_story(s.port()));
    assert_eq!(got, want);
}

/// `LATENCY HISTOGRAM` as {command: (calls, [bucket µs])}: counts depend
/// on timing, the shape (names, calls, bucket values from hdr's log
/// iterator, cumulative) does not.
fn histogram(c: &mut Client, args: &[&str]) -> Vec<(String, i64, Vec<i64>)> {
    // RESP3 for the maps.
    frame(c, &["HELLO", "3"]);
    let f = frame(c, args);
    frame(c, &["HELLO", "2"]);
    let Frame::Map(m) = f else { panic!("{f:?}") };
    let mut out = Vec::new();
    for (k, v) in m {
        let Frame::Map(inner) = v else { panic!("{v:?}") };
        assert_eq!(text(&inner[0].0), "calls");
        let Frame::Integer(calls) = inner[0].1 else { panic!() };
        assert_eq!(text(&inner[1].0), "histogram_usec");
        let Frame::Map(points) = &inner[1].1 else { panic!() };
        let mut prev = 0;
        let mut buckets = Vec::new();
        for (b, n) in points {
            let (Frame::Integer(b), Frame::Integer(n)) = (b, n) else { panic!() };
            assert!(*n > prev && *n <= calls, "cumulative {points:?}");
            prev = *n;
            buckets.push(*b);
        }
        assert_eq!(prev, calls);
        out.push((text(&k), calls, buckets));
    }
    out.sort();
    out
}

#[test]
fn latency_histogram_has_redis_shape() {
    let Some((r, s)) = both() else { return };
    // Bucket labels Redis 7.0.15 prints, in µs: hdr_histogram's highest
    // value equivalent to 1,024 ns x 2^k at two significant digits,
    // 2^(10+k) + 2^(3+k) - 1 ns:
    // 1, 2, 4, 8, 16, 33, 66, 132, ... 16908, 33816, 67633 µs (a slow
    // command on a loaded machine lands in the high ones).
    let allowed: Vec<i64> =
        (0..21).map(|k| ((1i64 << (10 + k)) + (1i64 << (3 + k)) - 1) / 1000).collect();
    assert_eq!(
        allowed[..15],
        [1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16908]
    );
    let mut shapes = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = Client::connect(port).unwrap();
        frame(&mut c, &["CONFIG", "RESETSTAT"]);
        for i in 0..30 {
            frame(&mut c, &["SET", &format!("k{i}"), "v"]);
        }
        frame(&mut c, &["CONFIG", "GET", "hz"]);
        let all = histogram(&mut c, &["LATENCY", "HISTOGRAM"]);
        let named = histogram(&mut c, &["LATENCY", "HISTOGRAM", "set", "config", "nosuch"]);
        for (_, _, b) in all.iter().chain(&named) {
            assert!(b.iter().all(|x| allowed.contains(x)), "{b:?}");
        }
        let strip = |v: Vec<(String, i64, Vec<i64>)>| -> Vec<(String, i64)> {
            v.into_iter().map(|(n, c, _)| (n, c)).collect()
        };
        shapes.push((strip(all), strip(named)));
    }
    assert_eq!(shapes[1], shapes[0]);
    assert!(shapes[0].1.iter().any(|(n, c)| n == "set" && *c == 30), "{:?}", shapes[0]);
}

#[test]
fn memory_usage_is_close_to_redis() {
    let Some((r, s)) = both() else { return };
    let mut script: Vec<Vec<String>> = vec![
        vec!["SET".into(), "int".into(), "12345".into()],
        vec!["SET".into(), "emb".into(), "hello".into()],
        vec!["SET".into(), "raw".into(), "x".repeat(100)],
        vec!["SET".into(), "raw2".into(), "y".repeat(5000)],
        vec!["HSET".into(), "hpack".into(), "a".into(), "1".into(), "b".into(), "hello".into()],
        vec!["SADD".into(), "ints".into(), "1".into(), "2".into(), "300000".into()],
        vec!["ZADD".into(), "zpack".into(), "1".into(), "a".into(), "2.5".into(), "b".into()],
        vec!["RPUSH".into(), "short".into(), "a".into(), "b".into(), "c".into()],
        vec!["XADD".into(), "stream".into(), "1-1".into(), "f".into(), "v".into()],
    ];
    for i in 0..300 {
        script.push(vec!["HSET".into(), "htable".into(), format!("field:{i}"), format!("v{i}")]);
        script.push(vec!["SADD".into(), "stable".into(), format!("member:{i}")]);
        script.push(vec!["ZADD".into(), "zskip".into(), i.to_string(), format!("m:{i}")]);
        script.push(vec!["RPUSH".into(), "long".into(), format!("element:{i}")]);
        script.push(vec![
            "XADD".into(),
            "xlong".into(),
            "*".into(),
            "field".into(),
            "x".repeat(i % 50),
        ]);
    }
    let keys = [
        "int", "emb", "raw", "raw2", "hpack", "ints", "zpack", "short", "htable", "stable",
        "zskip", "long", "stream", "xlong",
    ];
    let mut sizes = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = Client::connect(port).unwrap();
        for cmd in &script {
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            frame(&mut c, &args);
        }
        let mut v = Vec::new();
        for k in keys {
            let enc = text(&frame(&mut c, &["OBJECT", "ENCODING", k]));
            let f = frame(&mut c, &["MEMORY", "USAGE", k, "SAMPLES", "0"]);
            let Frame::Integer(n) = f else { panic!("{k}: {f:?}") };
            v.push((k, enc, n));
        }
        sizes.push(v);
    }
    for ((k, renc, rn), (_, senc, sn)) in sizes[0].iter().zip(&sizes[1]) {
        assert_eq!(senc, renc, "{k}");
        // Exact where no hash table is rehashing or random; 12% otherwise
        // (Redis counts both tables while it rehashes incrementally).
        let tol = (*rn as f64 * 0.12) as i64;
        assert!((sn - rn).abs() <= tol, "{k} ({renc}): sluice {sn}, redis {rn}");
    }
}

fn map_keys(f: Frame) -> Vec<String> {
    match f {
        Frame::Array(Some(v)) => v.chunks(2).map(|p| text(&p[0])).collect(),
        Frame::Map(m) => m.into_iter().map(|(k, _)| text(&k)).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn memory_stats_and_doctor_match_redis_fields() {
    let Some((r, s)) = both() else { return };
    let mut fields = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = Client::connect(port).unwrap();
        frame(&mut c, &["SET", "a", "1"]);
        frame(&mut c, &["SELECT", "2"]);
        frame(&mut c, &["SET", "b", "1"]);
        let keys = map_keys(frame(&mut c, &["MEMORY", "STATS"]));
        let doctor = text(&frame(&mut c, &["MEMORY", "DOCTOR"]));
        let purge = text(&frame(&mut c, &["MEMORY", "PURGE"]));
        let malloc = text(&frame(&mut c, &["MEMORY", "MALLOC-STATS"]));
        fields.push((keys, doctor.starts_with("Hi Sam"), purge, malloc.contains("jemalloc")));
    }
    assert_eq!(fields[1], fields[0]);
}

/// DEBUG refused unless `enable-debug-command` allows it, before
/// authentication, in MULTI too (the transaction is then aborted).
fn debug_gate_story(port: u16) -> Vec<String> {
    let mut c = Client::connect(port).unwrap();
    let mut log = Vec::new();
    for cmd in [
        &["DEBUG", "SLEEP", "0"][..],
        &["DEBUG"],
        &["DEBUG", "HELP"],
        &["AUTH", "pw"],
        &["MULTI"],
        &["DEBUG", "SLEEP", "0"],
        &["EXEC"],
        &["CONFIG", "SET", "enable-debug-command", "yes"],
        &["CONFIG", "GET", "enable-debug-command"],
    ] {
        log.push(text(&frame(&mut c, cmd)));
    }
    log
}

#[test]
fn debug_is_gated_as_redis_gates_it() {
    let extra = ["--enable-debug-command", "no", "--requirepass", "pw"];
    let Some(r) = RedisServer::start_with(&extra, None) else { return };
    let s = TestServer::start_with(&TestServer::default_bin(), &extra, None);
    assert_eq!(debug_gate_story(s.port()), debug_gate_story(r.port()));
    // `local`: a loopback client may.
    let extra = ["--enable-debug-command", "local"];
    let Some(r) = RedisServer::start_with(&extra, None) else { return };
    let s = TestServer::start_with(&TestServer::default_bin(), &extra, None);
    for p in [r.port(), s.port()] {
        let mut c = Client::connect(p).unwrap();
        assert_eq!(text(&frame(&mut c, &["DEBUG", "SLEEP", "0"])), "OK");
    }
}

#[test]
fn slow_commands_reach_the_slowlog_by_their_duration() {
    // Default threshold (10 ms): a 30 ms command is logged, quick ones
    // are not.
    let s = TestServer::start();
    let mut c = s.client();
    frame(&mut c, &["SLOWLOG", "RESET"]);
    for _ in 0..50 {
        frame(&mut c, &["PING"]);
    }
    frame(&mut c, &["DEBUG", "SLEEP", "0.03"]);
    std::thread::sleep(Duration::from_millis(5));
    let all = items(frame(&mut c, &["SLOWLOG", "GET"]));
    assert_eq!(all.len(), 1, "{all:?}");
    let v = items(all[0].clone());
    assert!(matches!(v[2], Frame::Integer(d) if d >= 30_000), "{v:?}");
    assert_eq!(masked_entry(all[0].clone()).0, vec!["DEBUG", "SLEEP", "0.03"]);
}

/// INFO's sections and their field names, in order, with the per-command,
/// per-error and per-database lines reduced to their prefix.
fn info_fields(c: &mut Client) -> Vec<(String, Vec<String>)> {
    let all = text(&frame(c, &["INFO", "everything"]));
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in all.split("\r\n") {
        if let Some(h) = line.strip_prefix("# ") {
            out.push((h.to_string(), Vec::new()));
        } else if let Some((name, _)) = line.split_once(':') {
            let name = ["cmdstat_", "errorstat_", "latency_percentiles_usec_", "db"]
                .iter()
                .find(|p| name.starts_with(*p))
                .map_or(name.to_string(), |p| format!("{p}*"));
            let fields = &mut out.last_mut().expect("a field before any section").1;
            if !fields.contains(&name) {
                fields.push(name);
            }
        }
    }
    out
}

/// Sluice's own INFO fields, which Redis 7.0 does not print (the ACL
/// counters are Redis 7.2's, see docs/acl.md).
const SLUICE_ONLY: &[&str] = &[
    "sluice_version",
    "sluice_threads",
    "acl_access_denied_auth",
    "acl_access_denied_cmd",
    "acl_access_denied_key",
    "acl_access_denied_channel",
];

#[test]
fn info_prints_every_section_and_field_redis_prints() {
    let Some((r, s)) = both() else { return };
    let mut per = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = Client::connect(port).unwrap();
        // Something in every optional section: a key, a command, an error.
        frame(&mut c, &["SET", "k", "v"]);
        frame(&mut c, &["NOSUCHCOMMAND"]);
        per.push(info_fields(&mut c));
    }
    let sluice: Vec<(String, Vec<String>)> = per[1]
        .iter()
        .map(|(s, f)| {
            (s.clone(), f.iter().filter(|n| !SLUICE_ONLY.contains(&n.as_str())).cloned().collect())
        })
        .collect();
    let names = |v: &[(String, Vec<String>)]| v.iter().map(|s| s.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&sluice), names(&per[0]));
    for ((sec, want), (_, got)) in per[0].iter().zip(&sluice) {
        assert_eq!(got, want, "INFO {sec}");
    }
}

/// The DEBUG subcommands tools and test suites use give Redis's replies:
/// the dataset and value digests byte for byte after the same writes.
#[test]
fn debug_subcommands_match_redis() {
    let Some((r, s)) = both() else { return };
    let mut writes: Vec<Vec<String>> = Vec::new();
    let w = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    writes.push(w(&["SET", "int", "12345"]));
    writes.push(w(&["SET", "str", "hello"]));
    writes.push(w(&["SET", "ttl", "v", "EX", "100"]));
    writes.push(w(&["HSET", "h", "a", "1", "b", "two"]));
    writes.push(w(&["SADD", "si", "1", "2", "3"]));
    writes.push(w(&["SADD", "ss", "a", "b", "c"]));
    writes.push(w(&["ZADD", "z", "1", "a", "2.5", "b", "0.1", "c"]));
    writes.push(w(&["RPUSH", "l", "x", "y", "z"]));
    writes.push(w(&["XADD", "st", "1-1", "f", "v", "g", "w"]));
    writes.push(w(&["XADD", "st", "2-1", "f", "v2"]));
    for i in 0..200 {
        writes.push(w(&["ZADD", "zbig", &i.to_string(), &format!("m{i}")]));
        writes.push(w(&["HSET", "hbig", &format!("f{i}"), &"v".repeat(i % 70)]));
    }
    writes.push(w(&["SELECT", "5"]));
    writes.push(w(&["SET", "other", "db"]));
    writes.push(w(&["SELECT", "0"]));
    let script: &[&[&str]] = &[
        &["DEBUG", "DIGEST"],
        &["DEBUG", "DIGEST-VALUE", "int", "str", "ttl", "h", "si", "ss", "z", "l", "st", "nokey"],
        &["DEBUG", "DIGEST-VALUE", "zbig", "hbig"],
        &["DEBUG", "PROTOCOL", "string"],
        &["DEBUG", "PROTOCOL", "integer"],
        &["DEBUG", "PROTOCOL", "double"],
        &["DEBUG", "PROTOCOL", "bignum"],
        &["DEBUG", "PROTOCOL", "null"],
        &["DEBUG", "PROTOCOL", "array"],
        &["DEBUG", "PROTOCOL", "set"],
        &["DEBUG", "PROTOCOL", "map"],
        &["DEBUG", "PROTOCOL", "attrib"],
        &["DEBUG", "PROTOCOL", "push"],
        &["DEBUG", "PROTOCOL", "true"],
        &["DEBUG", "PROTOCOL", "verbatim"],
        &["DEBUG", "PROTOCOL", "nope"],
        &["DEBUG", "ERROR", "-CUSTOM went wrong"],
        &["DEBUG", "ERROR", "plain"],
        &["DEBUG", "LOG", "hello"],
        &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100"],
        &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"],
        &["DEBUG", "POPULATE", "10", "pk", "12"],
        &["DEBUG", "POPULATE", "-1"],
        &["MGET", "pk:0", "pk:9", "pk:10"],
        &["DEBUG", "POPULATE", "3"],
        &["DBSIZE"],
        &["DEBUG", "DIGEST"],
        &["DEBUG", "NOSUCH"],
        &["DEBUG", "HELP"],
    ];
    let mut got = Vec::new();
    for port in [r.port(), s.port()] {
        let mut c = Client::connect(port).unwrap();
        for cmd in &writes {
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            frame(&mut c, &args);
        }
        let mut replies = Vec::new();
        for proto in ["2", "3"] {
            frame(&mut c, &["HELLO", proto]);
            for cmd in script {
                // Everything up to a PING's reply: replies of several
                // frames (attributes, pushes) whole.
                c.send(cmd).unwrap();
                c.send(&["PING"]).unwrap();
                let all = c.read_until_suffix(b"+PONG\r\n", Duration::from_secs(10)).unwrap();
                replies.push(all);
            }
        }
        got.push(replies);
    }
    for (i, (a, b)) in got[0].iter().zip(&got[1]).enumerate() {
        let cmd = script[i % script.len()];
        assert_eq!(String::from_utf8_lossy(b), String::from_utf8_lossy(a), "reply {i} ({cmd:?})");
    }
    assert_eq!(got[0].len(), got[1].len());
    // Redis's own fuzz run takes seconds; its reply is this status.
    let mut c = s.client();
    assert_eq!(
        text(&frame(&mut c, &["DEBUG", "STRINGMATCH-TEST"])),
        "Apparently Redis did not crash: test passed"
    );
}

/// `instantaneous_ops_per_sec` and the kbps rates follow the load, as
/// Redis's 100 ms samples do (zero when idle, positive under load).
#[test]
fn instantaneous_rates_follow_the_load() {
    let s = TestServer::start();
    let mut c = s.client();
    let field = |c: &mut Client, name: &str| -> f64 {
        let info = text(&frame(c, &["INFO", "stats"]));
        let line = info.lines().find(|l| l.starts_with(name)).expect(name);
        line.split(':').nth(1).unwrap().trim().parse().unwrap()
    };
    std::thread::sleep(Duration::from_millis(1800));
    assert_eq!(field(&mut c, "instantaneous_ops_per_sec:"), 0.0);
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(800) {
        let mut batch = Vec::new();
        for _ in 0..50 {
            testkit::encode(&["SET", "k", "v"], &mut batch);
        }
        c.send_raw(&batch).unwrap();
        for _ in 0..50 {
            c.read_reply().unwrap();
        }
    }
    assert!(field(&mut c, "instantaneous_ops_per_sec:") > 0.0);
    assert!(field(&mut c, "instantaneous_input_kbps:") > 0.0);
    assert!(field(&mut c, "instantaneous_output_kbps:") > 0.0);
}

/// `total_net_input_bytes`/`total_net_output_bytes` count every byte read
/// and written, open and closed connections, from the last RESETSTAT.
#[test]
fn net_byte_totals_match_redis() {
    let Some((r, s)) = both() else { return };
    let mut seen = Vec::new();
    for port in [r.port(), s.port()] {
        let mut a = Client::connect(port).unwrap();
        frame(&mut a, &["SET", "before", "reset"]);
        frame(&mut a, &["CONFIG", "RESETSTAT"]);
        let mut b = Client::connect(port).unwrap();
        frame(&mut b, &["SET", "a", "b"]);
        frame(&mut b, &["GET", "a"]);
        drop(b);
        std::thread::sleep(Duration::from_millis(100));
        let info = text(&frame(&mut a, &["INFO", "stats"]));
        let totals: Vec<String> =
            info.lines().filter(|l| l.starts_with("total_net_")).map(str::to_string).collect();
        seen.push(totals);
    }
    assert_eq!(seen[1], seen[0]);
}
