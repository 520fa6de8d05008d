//! What `CLUSTER` prints of the state: MYID, INFO, NODES, SLOTS, SHARDS,
//! REPLICAS, LINKS, COUNT-FAILURE-REPORTS; and FORGET, SAVECONFIG.
//! Shapes and words of Redis 7.0.15.

use resp::ReplyBuf;

use super::cluster;
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::subsystems::cluster::{Node, State, SLOTS};

pub(super) fn myid(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    out.bulk(&c.myid());
    Ok(())
}

pub(super) fn info(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let text = c.state.read().info();
    out.verbatim(text.as_bytes());
    Ok(())
}

pub(super) fn nodes(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let text = c.state.read().nodes_text(false);
    out.verbatim(text.as_bytes());
    Ok(())
}

/// `cluster-preferred-endpoint-type`: 0 ip, 1 hostname, 2 unknown-endpoint.
fn endpoint_type(cx: &mut Ctx) -> u8 {
    match cx.sess.conf(cx.shared).get_by_name("cluster-preferred-endpoint-type").as_deref() {
        Some(b"hostname") => 1,
        Some(b"unknown-endpoint") => 2,
        _ => 0,
    }
}

/// Redis's `clusterNodePreferredEndpoint`.
fn endpoint(n: &Node, kind: u8) -> &str {
    match kind {
        0 => &n.ip,
        1 if !n.hostname.is_empty() => &n.hostname,
        _ => "?",
    }
}

/// This node's replication offset, for SHARDS and a replica's
/// availability in SLOTS.
fn my_offset(cx: &Ctx) -> i64 {
    cx.shared.host.replication.as_ref().map_or(0, |r| r.offset())
}

/// Redis's `addNodeToNodeReply`.
fn node_reply(out: &mut ReplyBuf, n: &Node, kind: u8) {
    out.array(4);
    out.bulk(endpoint(n, kind).as_bytes());
    out.int(i64::from(n.port));
    out.bulk(&n.id);
    let ip = kind != 0;
    let host = kind != 1 && !n.hostname.is_empty();
    out.map(usize::from(ip) + usize::from(host));
    if ip {
        out.bulk(b"ip");
        out.bulk(n.ip.as_bytes());
    }
    if host {
        out.bulk(b"hostname");
        out.bulk(n.hostname.as_bytes());
    }
}

/// Whether a replica is listed (Redis's `isReplicaAvailable`): not
/// failed, and it has replicated something.
fn available(st: &State, i: usize, mine: i64) -> bool {
    let n = &st.nodes[i];
    let offset = if i == st.myself { mine } else { n.repl_offset };
    !n.is_failed() && offset != 0
}

pub(super) fn slots(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let kind = endpoint_type(cx);
    let mine = my_offset(cx);
    let st = c.state.read();
    // Runs of consecutive slots served by one node.
    let mut runs: Vec<(u16, u16, usize)> = Vec::new();
    for s in 0..SLOTS as u16 {
        let Some(n) = st.owner(s) else { continue };
        match runs.last_mut() {
            Some((_, end, m)) if *m == n && *end + 1 == s => *end = s,
            _ => runs.push((s, s, n)),
        }
    }
    out.array(runs.len());
    for (start, end, m) in runs {
        let replicas: Vec<usize> =
            st.replicas_of(m).into_iter().filter(|&r| available(&st, r, mine)).collect();
        out.array(3 + replicas.len());
        out.int(i64::from(start));
        out.int(i64::from(end));
        node_reply(out, &st.nodes[m], kind);
        for r in replicas {
            node_reply(out, &st.nodes[r], kind);
        }
    }
    Ok(())
}

/// Redis's `addNodeDetailsToShardReply`.
fn shard_node(out: &mut ReplyBuf, st: &State, i: usize, kind: u8, mine: i64) {
    let n = &st.nodes[i];
    let offset = if i == st.myself { mine } else { n.repl_offset };
    let host = !n.hostname.is_empty();
    out.map(6 + usize::from(n.port != 0) + usize::from(host));
    out.bulk(b"id");
    out.bulk(&n.id);
    if n.port != 0 {
        out.bulk(b"port");
        out.int(i64::from(n.port));
    }
    out.bulk(b"ip");
    out.bulk(n.ip.as_bytes());
    out.bulk(b"endpoint");
    out.bulk(endpoint(n, kind).as_bytes());
    if host {
        out.bulk(b"hostname");
        out.bulk(n.hostname.as_bytes());
    }
    out.bulk(b"role");
    out.bulk(if n.is_master() { b"master" as &[u8] } else { b"replica" });
    out.bulk(b"replication-offset");
    out.int(offset);
    out.bulk(b"health");
    out.bulk(if n.is_failed() {
        b"fail" as &[u8]
    } else if !n.is_master() && offset == 0 {
        b"loading"
    } else {
        b"online"
    });
}

pub(super) fn shards(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let kind = endpoint_type(cx);
    let mine = my_offset(cx);
    let st = c.state.read();
    let masters: Vec<usize> = (0..st.nodes.len()).filter(|&i| st.nodes[i].is_master()).collect();
    out.array(masters.len());
    for m in masters {
        out.map(2);
        out.bulk(b"slots");
        let ranges = st.ranges_of(m);
        out.array(ranges.len() * 2);
        for (a, b) in ranges {
            out.int(i64::from(a));
            out.int(i64::from(b));
        }
        out.bulk(b"nodes");
        let replicas = st.replicas_of(m);
        out.array(1 + replicas.len());
        shard_node(out, &st, m, kind, mine);
        for r in replicas {
            shard_node(out, &st, r, kind, mine);
        }
    }
    Ok(())
}

/// The node named by argument 2, or Redis's "Unknown node".
fn named(st: &State, arg: &[u8]) -> Result<usize, CmdError> {
    st.find(arg).ok_or_else(|| {
        let mut line = b"ERR Unknown node ".to_vec();
        line.extend_from_slice(arg);
        CmdError::Bytes(line)
    })
}

pub(super) fn replicas(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let st = c.state.read();
    let n = named(&st, args.argv()[2])?;
    if !st.nodes[n].is_master() {
        return Err(CmdError::err("The specified node is not a master"));
    }
    let rs = st.replicas_of(n);
    out.array(rs.len());
    for r in rs {
        out.bulk(st.node_line(r).as_bytes());
    }
    Ok(())
}

pub(super) fn count_failure_reports(
    cx: &mut Ctx,
    args: &mut Args,
    out: &mut ReplyBuf,
) -> CmdResult {
    let c = cluster(cx)?;
    let mut st = c.state.write();
    let n = named(&st, args.argv()[2])?;
    let timeout = crate::subsystems::cluster::node_timeout(cx.sess.conf(cx.shared));
    out.int(st.failure_reports(n, crate::core::shared::unix_ms(), timeout) as i64);
    Ok(())
}

/// One link of CLUSTER LINKS (Redis's `addReplyClusterLinkDescription`):
/// the bus writes each message whole, so nothing waits in a buffer.
fn link_reply(out: &mut ReplyBuf, n: &Node, inbound: bool) {
    out.map(6);
    out.bulk(b"direction");
    out.bulk(if inbound { b"from" as &[u8] } else { b"to" });
    out.bulk(b"node");
    out.bulk(&n.id);
    out.bulk(b"create-time");
    out.int(if inbound { n.inbound_ctime } else { n.link_ctime });
    out.bulk(b"events");
    out.bulk(b"r");
    out.bulk(b"send-buffer-allocated");
    out.int(0);
    out.bulk(b"send-buffer-used");
    out.int(0);
}

pub(super) fn links(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let st = c.state.read();
    let me = st.myself;
    let mut all: Vec<(usize, bool)> = Vec::new();
    for (i, n) in st.nodes.iter().enumerate() {
        if i == me {
            continue;
        }
        if n.link != 0 {
            all.push((i, false));
        }
        if n.inbound != 0 {
            all.push((i, true));
        }
    }
    out.array(all.len());
    for (i, inbound) in all {
        link_reply(out, &st.nodes[i], inbound);
    }
    Ok(())
}

pub(super) fn forget(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let mut st = c.state.write();
    let n = named(&st, args.argv()[2])?;
    if n == st.myself {
        return Err(CmdError::err("I tried hard but I can't forget myself..."));
    }
    let me = st.me();
    if !me.is_master() && me.master == Some(st.nodes[n].id) {
        return Err(CmdError::err("Can't forget my master!"));
    }
    st.remove(n);
    drop(st);
    super::changed(cx, c);
    out.ok();
    Ok(())
}

pub(super) fn saveconfig(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    match c.save() {
        Ok(()) => {
            out.ok();
            Ok(())
        }
        Err(e) => Err(CmdError::err(format!("error saving the cluster node config: {e}"))),
    }
}
