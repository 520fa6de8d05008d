//! The bus's cron (Redis's `clusterCron`, every 100 ms): handshakes that
//! took too long are dropped, links are opened to nodes without one,
//! nodes are pinged, links that stopped answering are refreshed, silent
//! nodes are marked possibly failing; a replica follows its master, runs
//! its manual failover and its election, and on winning becomes a master
//! (replication promoted, everyone told by PONG).

use std::sync::Arc;

use engine::subsystems::cluster::failure::{ReplicaView, Settings, Step};
use engine::subsystems::cluster::{flag, NodeId, State};
use engine::Shared;

use super::{act, broadcast, conf, connect, counter, my_offset, wire, Links, Out};

/// How old the replica's data is (ms), as Redis measures it for the
/// election: since the master last sent something while the link is up,
/// else since it went down.
fn data_age(sh: &Shared, now: i64) -> i64 {
    match sh.host.follow.as_ref().and_then(|f| f.view()) {
        Some(v) if v.state == "connected" => v.last_io.unwrap_or(0) * 1000,
        Some(v) if v.down_since > 0 => now - v.down_since * 1000,
        _ => 0,
    }
}

fn settings(sh: &Shared, node_timeout: i64) -> Settings {
    let c = sh.config.read();
    let num = |n: &str, d: i64| {
        String::from_utf8_lossy(&c.get_by_name(n).unwrap_or_default()).parse().unwrap_or(d)
    };
    Settings {
        node_timeout,
        validity_factor: num("cluster-replica-validity-factor", 10),
        ping_period_ms: num("repl-ping-replica-period", 10) * 1000,
        no_failover: c.get_by_name("cluster-replica-no-failover").is_some_and(|v| v == b"yes"),
    }
}

/// PONG to the nodes `pick` selects (Redis's `clusterBroadcastPong`).
fn pong_to(
    st: &mut State,
    offset: i64,
    now: i64,
    out: &mut Out,
    pick: impl Fn(&State, usize) -> bool,
) {
    let me = st.myself;
    let targets: Vec<usize> = (0..st.nodes.len())
        .filter(|&i| i != me && st.nodes[i].link != 0 && st.nodes[i].flags & flag::HANDSHAKE == 0)
        .filter(|&i| pick(st, i))
        .collect();
    for i in targets {
        st.sent[counter(wire::PONG)] += 1;
        out.sends
            .push((st.nodes[i].link, wire::ping(st, wire::PONG, offset, now as u64 ^ i as u64)));
    }
}

/// One pass of the cron.
pub fn cron(sh: &Arc<Shared>, links: &Arc<Links>) {
    let Some(c) = sh.cluster.get() else { return };
    let now = engine::core::shared::unix_ms();
    let cf = conf(sh);
    let timeout = cf.node_timeout;
    let offset = my_offset(sh);
    let handshake_timeout = timeout.max(1000);
    let mut to_connect: Vec<(NodeId, String, u16, bool)> = Vec::new();
    let mut out = Out::default();
    {
        let mut st = c.state.write();
        let stale: Vec<usize> = (0..st.nodes.len())
            .filter(|&i| {
                st.nodes[i].flags & flag::HANDSHAKE != 0
                    && now - st.nodes[i].ctime > handshake_timeout
            })
            .collect();
        for &i in stale.iter().rev() {
            let l = st.nodes[i].link;
            st.remove(i);
            out.sends.push((l, Vec::new()));
        }
        let me = st.myself;
        for (i, n) in st.nodes.iter_mut().enumerate() {
            if i == me || n.flags & flag::NOADDR != 0 || n.ip.is_empty() {
                continue;
            }
            if n.link != 0 && !links.is_open(n.link) {
                n.link = 0;
                n.connected = false;
            }
            if n.inbound != 0 && !links.is_open(n.inbound) {
                n.inbound = 0;
            }
            if n.link == 0 {
                to_connect.push((n.id, n.ip.clone(), n.cport, n.flags & flag::MEET != 0));
            }
        }
    }
    for (id, ip, cport, meet) in to_connect {
        connect(sh, links, id, &ip, cport, meet);
    }
    let mut follow_master = None;
    let promoted;
    {
        let mut st = c.state.write();
        let me = st.myself;
        // Pings: a node with no ping pending whose last PONG is older than
        // half the node timeout (and a second at most, as Redis's random
        // ping each second does on a small cluster); the replica asking
        // for a manual failover, continuously.
        let every = (timeout / 2).min(1000);
        let mf_replica = st.manual.replica.filter(|_| st.me().is_master() && st.manual.end != 0);
        for i in 0..st.nodes.len() {
            let n = &st.nodes[i];
            if i == me || n.link == 0 || n.flags & flag::HANDSHAKE != 0 {
                continue;
            }
            let due = n.ping_sent == 0 && now - n.pong_received > every;
            if due || mf_replica == Some(n.id) {
                if st.nodes[i].ping_sent == 0 {
                    st.nodes[i].ping_sent = now;
                }
                st.sent[counter(wire::PING)] += 1;
                let msg = wire::ping(&st, wire::PING, offset, now as u64 ^ i as u64);
                out.sends.push((st.nodes[i].link, msg));
            }
        }
        // A link with a ping pending and no data for half the node
        // timeout, older than the node timeout, is dropped and made anew
        // (Redis's link refresh); the ping's time is kept.
        for i in 0..st.nodes.len() {
            let n = &mut st.nodes[i];
            if i == me || n.link == 0 || n.ping_sent == 0 {
                continue;
            }
            if now - n.link_ctime > timeout
                && now - n.ping_sent > timeout / 2
                && now - n.data_received > timeout / 2
            {
                out.sends.push((n.link, Vec::new()));
                n.link = 0;
                n.connected = false;
            }
        }
        out.changed |= st.detect_timeouts(now, timeout);
        // A replica follows its master (after a restart, or once the
        // master's address is known).
        if !st.me().is_master() {
            if let Some(m) = st.me().master.and_then(|id| st.find(&id)) {
                let following = sh.host.follow.as_ref().and_then(|f| f.view());
                let (ip, port) = (&st.nodes[m].ip, st.nodes[m].port);
                let right = following.as_ref().is_some_and(|v| v.host == *ip && v.port == port);
                if !right && !ip.is_empty() && port != 0 {
                    follow_master = Some((ip.clone(), port));
                }
            }
        }
        let was_master = st.me().is_master();
        if st.manual_timed_out(now) && was_master {
            out.hold_writes = Some(false);
        }
        promoted = replica_turn(sh, &mut st, offset, now, timeout, &mut out);
    }
    if promoted {
        after_promotion(sh);
    } else if let Some(m) = follow_master {
        out.follow = Some(m);
    }
    act(sh, links, out);
}

/// Redis's `clusterBeforeSleep` with `CLUSTER_TODO_HANDLE_FAILOVER`: the
/// replica's turn of the cron run at once, when a vote arrived or the
/// paused master's offset did ([`Links::failover_soon`](super::Links)), so
/// that a manual failover or a won election does not wait for the cron's
/// next turn (up to 100 ms each, where Redis acts before its next sleep).
pub fn handle_failover(sh: &Arc<Shared>, links: &Arc<Links>) {
    let Some(c) = sh.cluster.get() else { return };
    let now = engine::core::shared::unix_ms();
    let timeout = conf(sh).node_timeout;
    let offset = my_offset(sh);
    let mut out = Out::default();
    let promoted = {
        let mut st = c.state.write();
        replica_turn(sh, &mut st, offset, now, timeout, &mut out)
    };
    if promoted {
        after_promotion(sh);
    }
    act(sh, links, out);
}

/// A replica's manual failover and election steps (Redis's
/// `clusterHandleManualFailover` and `clusterHandleSlaveFailover`), with
/// the state locked; on winning, the state is updated and every node gets
/// a PONG. True when this node was just promoted ([`after_promotion`] is
/// then the caller's, once the lock is released).
fn replica_turn(
    sh: &Shared,
    st: &mut State,
    offset: i64,
    now: i64,
    timeout: i64,
    out: &mut Out,
) -> bool {
    if st.me().is_master() {
        return false;
    }
    st.manual_step(offset);
    let view = ReplicaView { offset, data_age: data_age(sh, now) };
    let rand = now as u64 ^ (std::process::id() as u64).rotate_left(17);
    let mut promoted = false;
    // A manual failover's election is scheduled for now: it starts in the
    // same turn (Redis flags it for before its next sleep).
    for _ in 0..2 {
        match st.election_step(now, view, settings(sh, timeout), rand) {
            Step::Nothing => {}
            Step::PongReplicas => {
                let master = st.me().master;
                pong_to(st, offset, now, out, |st, i| st.nodes[i].master == master);
                if st.manual.end != 0 && st.election.auth_time <= now {
                    continue;
                }
            }
            Step::RequestVotes { force } => {
                let f = if force { wire::FLAG0_FORCEACK } else { 0 };
                let msg = wire::bare(st, wire::AUTH_REQUEST, offset, f);
                broadcast(st, wire::AUTH_REQUEST, &msg, out);
                out.changed = true;
            }
            Step::Promoted => {
                promoted = true;
                out.changed = true;
            }
        }
        break;
    }
    if promoted {
        let full = sh
            .config
            .read()
            .get_by_name("cluster-require-full-coverage")
            .is_some_and(|v| v == b"yes");
        st.update(now, full, timeout);
        pong_to(st, offset, now, out, |_, _| true);
    }
    promoted
}

/// What a replica that won its election does once the state's lock is
/// released: replication first, so that the PONGs find a master; then
/// `nodes.conf`.
fn after_promotion(sh: &Shared) {
    if let Some(f) = sh.host.follow.as_ref() {
        f.promote();
    }
    if let Some(cl) = sh.cluster.get() {
        let _ = cl.save();
    }
}

/// What `CLUSTER FAILOVER` does on a replica once accepted: `force`
/// starts the election at once, `takeover` takes the slots without one,
/// and the default asks the master to pause (MFSTART).
pub fn manual_failover(sh: &Arc<Shared>, links: &Arc<Links>, force: bool, takeover: bool) {
    let Some(c) = sh.cluster.get() else { return };
    let now = engine::core::shared::unix_ms();
    let offset = my_offset(sh);
    let mut out = Out::default();
    let mut promoted = false;
    {
        let mut st = c.state.write();
        st.manual = Default::default();
        st.manual.end = now + engine::subsystems::cluster::failure::MF_TIMEOUT;
        if takeover {
            engine::subsystems::log::warning("Taking over the master (user request).");
            st.bump_epoch();
            promoted = st.replace_my_master();
            pong_to(&mut st, offset, now, &mut out, |_, _| true);
        } else if force {
            engine::subsystems::log::warning("Forced failover user request accepted.");
            st.manual.can_start = true;
        } else {
            engine::subsystems::log::warning("Manual failover user request accepted.");
            if let Some(m) = st.me().master.and_then(|id| st.find(&id)) {
                st.sent[counter(wire::MFSTART)] += 1;
                let msg = wire::bare(&st, wire::MFSTART, offset, 0);
                out.sends.push((st.nodes[m].link, msg));
            }
        }
        out.changed = true;
    }
    if promoted {
        if let Some(f) = sh.host.follow.as_ref() {
            f.promote();
        }
    }
    act(sh, links, out);
}
