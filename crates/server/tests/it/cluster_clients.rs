//! What a client sees of a cluster changing under it, against
//! redis-server 7.0.15: a client blocked on a key whose slot leaves the
//! node (or whose cluster goes down) is let go with `-MOVED` /
//! `-CLUSTERDOWN` (Redis's `clusterRedirectBlockedClientIfNeeded`); a
//! server that starts following a master lets every blocked client go
//! with `-UNBLOCKED` and closes its connection (`disconnectAllBlockedClients`);
//! a script's keys stay in one slot unless it is flagged
//! `allow-cross-slot-keys` (or has no shebang). The same sequences go to
//! both servers and the replies are compared once ids and ports are
//! masked.

use std::path::Path;
use std::time::Duration;

use crate::cluster::{bins, bus_node, have_redis, masked, one_node, raw};
use crate::common::wait_for;
use testkit::{Client, ServerProc};

fn info_field(c: &mut Client, section: &str, field: &str) -> String {
    let text = raw(c, &["INFO", section]);
    let prefix = format!("{field}:");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or("").trim().to_string()
}

fn wait_blocked(p: &ServerProc, n: usize) {
    let mut c = p.client();
    wait_for("the clients to block", Duration::from_secs(10), || {
        info_field(&mut c, "clients", "blocked_clients") == n.to_string()
    });
}

/// A command's counts in INFO commandstats (its time left out).
fn cmdstat(c: &mut Client, name: &str) -> String {
    let text = raw(c, &["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{name}:");
    let line = text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or("").to_string();
    line.split(',').filter(|f| !f.starts_with("usec")).collect::<Vec<_>>().join(",")
}

fn errorstats(c: &mut Client) -> String {
    raw(c, &["INFO", "errorstats"])
}

fn state_ok(p: &ServerProc) -> bool {
    raw(&mut p.client(), &["CLUSTER", "INFO"]).contains("cluster_state:ok")
}

/// Two masters of `bin` met over the bus, A serving slots 0-8191 and B
/// the rest, both `ok`.
fn two_masters(tag: &str, bin: &Path) -> (ServerProc, ServerProc) {
    let a = bus_node(&format!("{tag}-a"), bin);
    let b = bus_node(&format!("{tag}-b"), bin);
    raw(&mut a.client(), &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    raw(&mut b.client(), &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    let cport = raw(&mut b.client(), &["CONFIG", "GET", "cluster-port"]);
    let cport = cport.lines().nth(4).expect("cluster-port's value").to_string();
    let met =
        raw(&mut a.client(), &["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string(), &cport]);
    assert_eq!(met, "+OK\r\n");
    wait_for("both nodes ok", Duration::from_secs(30), || {
        [&a, &b].iter().all(|p| {
            let info = raw(&mut p.client(), &["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:2")
        })
    });
    (a, b)
}

fn myid(p: &ServerProc) -> String {
    raw(&mut p.client(), &["CLUSTER", "MYID"]).lines().nth(1).unwrap().to_string()
}

/// A client blocked on node A (BLPOP, then XREAD BLOCK) while A gives the
/// key's slot to B: what the client reads, and A's stats after.
fn moved_while_blocked(tag: &str, bin: &Path) -> Vec<String> {
    let (a, b) = two_masters(tag, bin);
    let bid = myid(&b);
    let mask = |s: String| s.replace(&b.port().to_string(), "<B>");
    let mut out = Vec::new();
    let mut admin = a.client();
    // bar: slot 5061; the other keys' hash tags pick their slots.
    let (s5062, s6000) = (tag_for(5062), tag_for(6000));
    let xread = format!("{s5062}s");
    let (z1, z2) = (format!("{s6000}z"), format!("{s6000}y"));
    for (slot, key, cmd) in [
        ("5061", "bar", vec!["BLPOP", "bar", "0"]),
        ("5062", xread.as_str(), vec!["XREAD", "BLOCK", "0", "STREAMS", &xread, "$"]),
        ("6000", z1.as_str(), vec!["BZPOPMIN", &z1, &z2, "0"]),
    ] {
        let mut c = a.client();
        c.send(&cmd).unwrap();
        wait_blocked(&a, 1);
        out.push(raw(&mut admin, &["CLUSTER", "SETSLOT", slot, "NODE", &bid]));
        c.set_timeout(Duration::from_secs(10));
        out.push(mask(String::from_utf8_lossy(&c.read_reply().unwrap()).into_owned()));
        // Still a client: its next command is routed as any.
        out.push(mask(raw(&mut c, &["EXISTS", key])));
        out.push(raw(&mut c, &["PING"]));
        out.push(info_field(&mut admin, "clients", "blocked_clients"));
    }
    out.push(cmdstat(&mut admin, "blpop"));
    out.push(cmdstat(&mut admin, "xread"));
    out.push(cmdstat(&mut admin, "bzpopmin"));
    out.push(errorstats(&mut admin));
    out
}

/// A `{tag}` whose keys hash to `slot`.
fn tag_for(slot: u16) -> String {
    (0u32..)
        .map(|i| format!("t{i}"))
        .find(|t| store::slot::key_slot(t.as_bytes()) == slot)
        .map(|t| format!("{{{t}}}"))
        .unwrap()
}

#[test]
fn a_client_blocked_on_a_slot_given_away_gets_moved_as_from_redis() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in bins() {
        seen.push(moved_while_blocked(&format!("blk-moved-{tag}"), &bin));
    }
    assert!(seen[0][1].starts_with("-MOVED 5061 127.0.0.1:<B>"), "{:?}", seen[0]);
    for (i, (r, s)) in seen[0].iter().zip(&seen[1]).enumerate() {
        assert_eq!(s, r, "step {i} differs");
    }
}

/// A one-node cluster's blocked client when its key's slot is deleted:
/// the cluster goes down (full coverage), or the slot is unserved.
fn down_while_blocked(tag: &str, bin: &Path) -> Vec<String> {
    let (p, _id, _dir) = one_node(tag, bin);
    let mut admin = p.client();
    raw(&mut admin, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    wait_for("cluster_state:ok", Duration::from_secs(30), || state_ok(&p));
    let mut out = Vec::new();
    for full in ["yes", "no"] {
        raw(&mut admin, &["CONFIG", "SET", "cluster-require-full-coverage", full]);
        let mut c = p.client();
        c.send(&["BRPOP", "bar", "0"]).unwrap();
        wait_blocked(&p, 1);
        out.push(raw(&mut admin, &["CLUSTER", "DELSLOTS", "5061"]));
        c.set_timeout(Duration::from_secs(10));
        out.push(String::from_utf8_lossy(&c.read_reply().unwrap()).into_owned());
        out.push(info_field(&mut admin, "clients", "blocked_clients"));
        raw(&mut admin, &["CLUSTER", "ADDSLOTS", "5061"]);
        wait_for("cluster_state:ok again", Duration::from_secs(30), || state_ok(&p));
    }
    out.push(errorstats(&mut admin));
    out
}

#[test]
fn a_client_blocked_when_its_slot_goes_gets_clusterdown_as_from_redis() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in bins() {
        seen.push(down_while_blocked(&format!("blk-down-{tag}"), &bin));
    }
    assert_eq!(seen[0][1], "-CLUSTERDOWN The cluster is down\r\n");
    assert_eq!(seen[1], seen[0]);
}

/// Clients blocked on a list, a stream and WAIT when the server is made
/// a replica: each reads `-UNBLOCKED` and the connection closes.
fn replicaof_while_blocked(tag: &str, bin: &Path) -> Vec<String> {
    let dir = testkit::scratch_dir(&format!("blk-replicaof-{tag}"));
    let p = crate::cluster::spawn(bin, &dir, &[]);
    let mut admin = p.client();
    let cmds: [&[&str]; 3] =
        [&["BLPOP", "l", "0"], &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"], &["WAIT", "1", "0"]];
    let mut clients = Vec::new();
    for (i, cmd) in cmds.iter().enumerate() {
        let mut c = p.client();
        c.send(cmd).unwrap();
        wait_blocked(&p, i + 1);
        clients.push(c);
    }
    // Nobody listens there: the link never comes up.
    let nobody = testkit::free_port().to_string();
    let mut out = vec![raw(&mut admin, &["REPLICAOF", "127.0.0.1", &nobody])];
    for c in &mut clients {
        let got = c.read_to_close(Duration::from_secs(10)).expect("closed after the error");
        out.push(String::from_utf8_lossy(&got).into_owned());
    }
    out.push(info_field(&mut admin, "clients", "blocked_clients"));
    out.push(raw(&mut admin, &["REPLICAOF", "NO", "ONE"]));
    out.push(errorstats(&mut admin));
    for name in ["blpop", "xread", "wait"] {
        out.push(cmdstat(&mut admin, name));
    }
    out
}

#[test]
fn replicaof_lets_blocked_clients_go_with_unblocked_as_redis_does() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in bins() {
        seen.push(replicaof_while_blocked(tag, &bin));
    }
    assert!(seen[0][1].starts_with("-UNBLOCKED force unblock"), "{:?}", seen[0]);
    assert_eq!(seen[1], seen[0]);
}

/// Scripts and functions on a one-node cluster serving every slot: the
/// shebang's flags decide whether their keys may span slots.
fn scripts(tag: &str, bin: &Path) -> Vec<String> {
    let (p, id, _dir) = one_node(tag, bin);
    let port = p.port();
    let mut c = p.client();
    raw(&mut c, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    wait_for("cluster_state:ok", Duration::from_secs(30), || state_ok(&p));
    let lib = "#!lua name=crossslot
        local function both(keys, args)
            redis.call('set', 'foo', 'bar')
            redis.call('set', 'bar', 'foo')
            return 'OK'
        end
        redis.register_function('both', both)
        redis.register_function{function_name='both_ok', callback=both,
            flags={'allow-cross-slot-keys'}}
        redis.register_function{function_name='nocluster', callback=both,
            flags={'no-cluster'}}";
    let two = "redis.call('set','foo','bar'); redis.call('set','bar','foo'); return 'OK'";
    let mut out = Vec::new();
    for a in [
        &["EVAL", &format!("#!lua\n{two}"), "0"][..],
        &["EVAL", two, "0"],
        &["EVAL", &format!("#!lua flags=allow-cross-slot-keys\n{two}"), "0"],
        &["EVAL", "#!lua\nredis.call('set','foo','bar'); return 'OK'", "1", "bar"],
        &["EVAL", "#!lua\nreturn redis.pcall('set','foo','bar')", "1", "bar"],
        &["EVAL", "#!lua\nredis.call('get','foo'); return redis.pcall('get','bar')", "0"],
        &["EVAL", "#!lua\nredis.call('get','foo'); return redis.call('get','{foo}x')", "0"],
        &["EVAL", "#!lua\nreturn redis.call('get',KEYS[1])", "1", "{a}1"],
        &["EVAL", "#!lua\nredis.call('get',KEYS[1]); return redis.call('get','{a}2')", "1", "{a}1"],
        &["EVAL", "#!lua\nreturn redis.call('mget','a','b')", "0"],
        &["EVAL", "return redis.call('mget','a','b')", "0"],
        &["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.pcall('set','foo','bar')", "0"],
        &["EVAL", "return 1", "2", "a", "b"],
        &["FUNCTION", "LOAD", lib],
        &["FCALL", "both", "0"],
        &["FCALL", "both_ok", "0"],
        &["FCALL", "both", "1", "foo"],
        &["FCALL", "nocluster", "0"],
        &["MULTI"],
        &["EVAL", "#!lua\nreturn redis.call('get','foo')", "0"],
        &["EVAL", "#!lua\nreturn redis.call('get','bar')", "0"],
        &["EXEC"],
        &["MULTI"],
        &["GET", "bar"],
        &["EVAL", "#!lua\nreturn redis.call('get','foo')", "0"],
        &["EXEC"],
    ] {
        out.push(masked(&raw(&mut c, a), &id, port));
    }
    out.push(errorstats(&mut c));
    out
}

#[test]
fn a_script_keeps_to_one_slot_unless_flagged_as_redis_does() {
    if !have_redis() {
        return;
    }
    let mut seen = Vec::new();
    for (tag, bin) in bins() {
        seen.push(scripts(&format!("scripts-{tag}"), &bin));
    }
    assert!(seen[0][0].contains("do not hash to the same slot"), "{:?}", seen[0]);
    for (i, (r, s)) in seen[0].iter().zip(&seen[1]).enumerate() {
        assert_eq!(s, r, "reply {i} differs");
    }
}
