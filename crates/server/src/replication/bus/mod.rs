//! The cluster bus on `cluster-port`: Redis 7.0's binary protocol
//! (`wire`), and what a node does with each message (Redis's
//! `clusterProcessPacket`): handshakes, learning nodes from gossip, slot
//! ownership by config epoch, roles, failure reports, FAIL, UPDATE,
//! votes, manual failovers and PUBLISH. The rules over the state are the
//! engine's (`subsystems::cluster`, `failure.rs`); this module moves the
//! messages and acts on replication (`failover.rs`: the cron's failure
//! detection and the replica's election).
//!
//! Threads: one accepts on the bus port and one reads each inbound link;
//! the cron (`cluster.rs`) opens one outbound link per known node, with a
//! reader for its replies. Every change goes through the engine's
//! `Cluster` state under its lock; replication is acted on after the lock
//! is released.

mod failover;
pub mod wire;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use engine::subsystems::cluster::{flag, Moving, Node, NodeId, State, SLOTS};
use engine::subsystems::log;
use engine::Shared;
use parking_lot::{Condvar, Mutex};

pub use failover::{cron, handle_failover, manual_failover};
use wire::{Body, Msg, HEADER};

/// The longest message read (a header, every gossip entry a 64k-node
/// cluster could send, extensions, a published message up to 8 MB):
/// anything longer closes the link.
const MAX_MSG: usize = 8 << 20;
/// A link whose peer does not take a message within this long is closed
/// (a stopped peer must not stall the sender).
const WRITE_TIMEOUT: Duration = Duration::from_millis(1000);

/// The bus's links (outbound and inbound) by the bus's link number: the
/// writing half, for sends and for closing.
#[derive(Default)]
pub struct Links {
    next: AtomicU64,
    out: Mutex<std::collections::HashMap<u64, TcpStream>>,
    /// Redis's `CLUSTER_TODO_HANDLE_FAILOVER`: the replica's failover
    /// step is due before the cron's next turn.
    failover_due: Mutex<bool>,
    wake: Condvar,
}

impl Links {
    fn add(&self, s: TcpStream) -> u64 {
        let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.out.lock().insert(id, s);
        id
    }

    /// Sends on link `id`; a failed write closes it.
    pub fn send(&self, id: u64, msg: &[u8]) -> bool {
        let mut out = self.out.lock();
        let Some(s) = out.get_mut(&id) else { return false };
        if s.write_all(msg).is_err() {
            if let Some(s) = out.remove(&id) {
                let _ = s.shutdown(Shutdown::Both);
            }
            return false;
        }
        true
    }

    pub fn close(&self, id: u64) {
        if let Some(s) = self.out.lock().remove(&id) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub fn is_open(&self, id: u64) -> bool {
        self.out.lock().contains_key(&id)
    }

    /// Asks the cluster thread for the replica's failover step now
    /// ([`handle_failover`]), not at the cron's next turn.
    pub fn failover_soon(&self) {
        *self.failover_due.lock() = true;
        self.wake.notify_one();
    }

    /// The cluster thread's sleep: until `deadline` (the cron's next
    /// turn), or until [`Links::failover_soon`]; true in the latter case.
    pub fn sleep_until(&self, deadline: std::time::Instant) -> bool {
        let mut due = self.failover_due.lock();
        while !*due {
            if self.wake.wait_until(&mut due, deadline).timed_out() {
                break;
            }
        }
        std::mem::take(&mut *due)
    }
}

/// Reads one message; `None` at the end of the link or on a message
/// Redis would refuse (the link is then closed).
fn read_msg(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = [0u8; 8];
    s.read_exact(&mut head).ok()?;
    if &head[..4] != b"RCmb" {
        return None;
    }
    let len = u32::from_be_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
    if !(HEADER..=MAX_MSG).contains(&len) {
        return None;
    }
    let mut buf = vec![0u8; len];
    buf[..8].copy_from_slice(&head);
    s.read_exact(&mut buf[8..]).ok()?;
    Some(buf)
}

/// The index of a message type in INFO's counters.
fn counter(typ: u16) -> usize {
    (typ as usize).min(10)
}

/// What processing a message asks for once the state's lock is released.
#[derive(Default)]
pub(crate) struct Out {
    /// A reply on the link the message came on.
    reply: Option<Vec<u8>>,
    /// Messages for other links.
    sends: Vec<(u64, Vec<u8>)>,
    /// Close the link the message came on.
    close: bool,
    /// This node now replicates that master (`ip`, `port`).
    follow: Option<(String, u16)>,
    /// Hold (or release) writes for a manual failover.
    hold_writes: Option<bool>,
    /// Deliver a published message to this node's subscribers.
    publish: Option<(bool, Vec<u8>, Vec<u8>)>,
    /// The state changed: save `nodes.conf`.
    changed: bool,
    /// A vote or the paused master's offset arrived: the replica's
    /// failover step runs now ([`Links::failover_soon`]).
    failover_soon: bool,
    /// A replica asked for a manual failover: once writes are held, the
    /// paused offset goes back to it ([`paused_ping`]).
    mf_paused: bool,
}

/// The configuration the bus reads, once per message or cron turn.
#[derive(Clone, Copy)]
pub(crate) struct Conf {
    pub node_timeout: i64,
    pub allow_replica_migration: bool,
}

pub(crate) fn conf(sh: &Shared) -> Conf {
    let c = sh.config.read();
    let text =
        |n: &str| String::from_utf8_lossy(&c.get_by_name(n).unwrap_or_default()).into_owned();
    Conf {
        node_timeout: text("cluster-node-timeout").parse().unwrap_or(15000),
        allow_replica_migration: text("cluster-allow-replica-migration") == "yes",
    }
}

/// This node's replication offset as the bus reports it: a replica's is
/// the master's stream it processed.
pub(crate) fn my_offset(sh: &Shared) -> i64 {
    let applied = sh.host.follow.as_ref().and_then(|f| f.view()).map(|v| v.applied_offset);
    match applied {
        Some(o) if o > 0 => o,
        _ => sh.host.replication.as_ref().map_or(0, |r| r.offset()),
    }
}

/// Redis's `clusterProcessPacket`. `link` is the link's number; `inbound`
/// when the peer opened it; `local_ip`/`peer_ip` are its two ends.
fn process(sh: &Shared, link: u64, inbound: bool, local_ip: &str, peer_ip: &str, m: &Msg) -> Out {
    let mut out = Out::default();
    let Some(c) = sh.cluster.get() else {
        out.close = true;
        return out;
    };
    let now = engine::core::shared::unix_ms();
    let cf = conf(sh);
    let offset = my_offset(sh);
    let mut st = c.state.write();
    st.received[counter(m.typ)] += 1;
    let mut sender = st.find(&m.sender).filter(|&i| st.nodes[i].flags & flag::HANDSHAKE == 0);
    if let Some(s) = sender {
        st.nodes[s].data_received = now;
        if inbound && st.nodes[s].inbound != link {
            // Redis's setClusterNodeToInboundClusterLink: the newest
            // inbound link from a node is its one.
            let old = std::mem::replace(&mut st.nodes[s].inbound, link);
            st.nodes[s].inbound_ctime = now;
            if old != 0 {
                out.sends.push((old, Vec::new()));
            }
        }
        st.current_epoch = st.current_epoch.max(m.current_epoch);
        if st.nodes[s].config_epoch < m.config_epoch {
            st.nodes[s].config_epoch = m.config_epoch;
            out.changed = true;
        }
        st.nodes[s].repl_offset = m.offset as i64;
        let me = st.me();
        if st.manual.end != 0
            && !me.is_master()
            && me.master == Some(m.sender)
            && m.mflags & wire::FLAG0_PAUSED != 0
            && st.manual.master_offset == -1
        {
            st.manual.master_offset = m.offset as i64;
            out.failover_soon = true;
            log::warning(&format!(
                "Received replication offset for paused master manual failover: {}",
                m.offset
            ));
        }
    }
    match &m.body {
        Body::Gossip(_) => gossip_message(
            &mut st,
            &mut sender,
            link,
            inbound,
            local_ip,
            peer_ip,
            m,
            now,
            cf,
            offset,
            &mut out,
        ),
        Body::Fail(about) => {
            if sender.is_some() {
                if let Some(f) = st.find(about) {
                    out.changed |= st.fail_received(f, &m.sender, now);
                }
            } else {
                log::notice(&format!(
                    "Ignoring FAIL message from unknown node {} about {}",
                    String::from_utf8_lossy(&m.sender),
                    String::from_utf8_lossy(about)
                ));
            }
        }
        Body::Update { config_epoch, id, slots } => {
            if let (Some(_), Some(n)) = (sender, st.find(id)) {
                if st.nodes[n].config_epoch < *config_epoch {
                    st.set_as_master(n);
                    st.nodes[n].config_epoch = *config_epoch;
                    update_slots(&mut st, n, *config_epoch, slots, cf, &mut out);
                    out.changed = true;
                }
            }
        }
        Body::Publish { channel, message } => {
            if sender.is_some() {
                out.publish = Some((m.typ == wire::PUBLISHSHARD, channel.clone(), message.clone()));
            }
        }
        Body::Empty => match (m.typ, sender) {
            (wire::AUTH_REQUEST, Some(s)) => {
                let force = m.mflags & wire::FLAG0_FORCEACK != 0;
                let (t, e, sl) = (m.current_epoch, m.config_epoch, &m.myslots);
                if st.grant_vote(s, t, e, sl, force, now, cf.node_timeout) {
                    out.changed = true;
                    let ack = wire::bare(&st, wire::AUTH_ACK, offset, 0);
                    st.sent[counter(wire::AUTH_ACK)] += 1;
                    out.sends.push((st.nodes[s].link, ack));
                }
            }
            (wire::AUTH_ACK, Some(s)) => {
                st.vote_received(s, m.current_epoch);
                out.failover_soon = true;
            }
            (wire::MFSTART, Some(s)) => {
                let me = st.me().id;
                if st.nodes[s].master == Some(me) && !st.nodes[s].is_master() {
                    st.manual = Default::default();
                    st.manual.end = now + engine::subsystems::cluster::failure::MF_TIMEOUT;
                    st.manual.replica = Some(m.sender);
                    out.hold_writes = Some(true);
                    out.mf_paused = true;
                    log::warning(&format!(
                        "Manual failover requested by replica {}.",
                        String::from_utf8_lossy(&m.sender)
                    ));
                }
            }
            _ => {}
        },
    }
    out
}

/// PING, PONG and MEET (the larger part of `clusterProcessPacket`).
#[allow(clippy::too_many_arguments)]
fn gossip_message(
    st: &mut State,
    sender: &mut Option<usize>,
    link: u64,
    inbound: bool,
    local_ip: &str,
    peer_ip: &str,
    m: &Msg,
    now: i64,
    cf: Conf,
    offset: i64,
    out: &mut Out,
) {
    let is_ping = matches!(m.typ, wire::PING | wire::MEET);
    if is_ping {
        if (m.typ == wire::MEET || st.me().ip.is_empty()) && st.me().ip != local_ip {
            st.me_mut().ip = local_ip.to_string();
            log::warning(&format!("IP address for this node updated to {local_ip}"));
            out.changed = true;
        }
        if sender.is_none() && m.typ == wire::MEET {
            let mut n =
                Node::new(engine::subsystems::cluster::random_id(now as u64), flag::HANDSHAKE);
            n.ip = if m.myip.is_empty() { peer_ip.to_string() } else { m.myip.clone() };
            n.port = m.port;
            n.cport = m.cport;
            st.nodes.push(n);
            gossip(st, None, m, now, cf.node_timeout, out);
            out.changed = true;
        }
    }
    // The link's node, for a message on an outbound link.
    let linked = (!inbound).then(|| st.nodes.iter().position(|n| n.link == link)).flatten();
    if let Some(l) = linked {
        if st.nodes[l].flags & flag::HANDSHAKE != 0 {
            if sender.is_some() {
                // Known already under its real name: drop the handshake.
                st.remove(l);
                out.changed = true;
                out.close = true;
                return;
            }
            let n = &mut st.nodes[l];
            n.id = m.sender;
            n.flags &= !flag::HANDSHAKE;
            n.flags |= m.flags & (flag::MASTER | flag::SLAVE);
            n.data_received = now;
            *sender = Some(l);
            out.changed = true;
        } else if st.nodes[l].id != m.sender {
            let n = &mut st.nodes[l];
            n.flags |= flag::NOADDR;
            n.ip.clear();
            n.port = 0;
            n.cport = 0;
            n.link = 0;
            out.changed = true;
            out.close = true;
            return;
        }
        if m.typ == wire::PONG {
            let n = &mut st.nodes[l];
            n.pong_received = now;
            n.ping_sent = 0;
            n.connected = true;
            if n.flags & flag::PFAIL != 0 {
                n.flags &= !flag::PFAIL;
                out.changed = true;
            } else if n.flags & flag::FAIL != 0 {
                out.changed |= st.clear_failure_if_needed(l, now, cf.node_timeout);
            }
        }
    }
    if let Some(s) = *sender {
        roles(st, s, m, peer_ip, cf, out);
        // Redis's dirty_slots: the slots the sender (or its master)
        // claims differ from what this node believes.
        let claimer = if st.nodes[s].is_master() {
            Some(s)
        } else {
            st.nodes[s].master.and_then(|id| st.find(&id))
        };
        let dirty = claimer.is_some_and(|c| st.bitmap_of(c) != m.myslots);
        if dirty && st.nodes[s].is_master() {
            update_slots(st, s, m.config_epoch, &m.myslots, cf, out);
        }
        if dirty {
            // The reverse case: the sender claims a slot a node with a
            // greater epoch holds; tell it (Redis's UPDATE).
            for slot in 0..SLOTS {
                if m.myslots[slot / 8] & (1 << (slot % 8)) == 0 {
                    continue;
                }
                let Some(o) = st.owner(slot as u16) else { continue };
                if o == s || st.nodes[o].config_epoch <= m.config_epoch {
                    continue;
                }
                log::verbose(&format!(
                    "Node {} has old slots configuration, sending an UPDATE message about {}",
                    st.nodes[s].name(),
                    st.nodes[o].name()
                ));
                st.sent[counter(wire::UPDATE)] += 1;
                out.sends.push((st.nodes[s].link, wire::update(st, offset, o)));
                break;
            }
        }
        if st.me().is_master() && st.nodes[s].is_master() && m.config_epoch == st.me().config_epoch
        {
            out.changed |= st.handle_epoch_collision(s);
        }
        gossip(st, Some(s), m, now, cf.node_timeout, out);
    }
    if is_ping {
        st.sent[counter(wire::PONG)] += 1;
        out.reply = Some(wire::ping(st, wire::PONG, offset, now as u64));
    }
}

/// The sender's address and role as it announces them (Redis's
/// `nodeUpdateAddressIfNeeded` and the role switch).
fn roles(st: &mut State, s: usize, m: &Msg, peer_ip: &str, _cf: Conf, out: &mut Out) {
    let n = &mut st.nodes[s];
    n.flags = (n.flags & !flag::NOFAILOVER) | (m.flags & flag::NOFAILOVER);
    if m.typ == wire::PING {
        let ip = if m.myip.is_empty() { peer_ip } else { &m.myip };
        if n.ip != ip || n.port != m.port || n.cport != m.cport {
            n.ip = ip.to_string();
            n.port = m.port;
            n.cport = m.cport;
            out.changed = true;
        }
    }
    match m.slaveof {
        None => {
            if !st.nodes[s].is_master() {
                st.set_as_master(s);
                out.changed = true;
            }
        }
        Some(master) => {
            if st.nodes[s].is_master() {
                let n = &mut st.nodes[s];
                n.flags = (n.flags & !(flag::MASTER | flag::MIGRATE_TO)) | flag::SLAVE;
                out.changed = true;
                for slot in 0..SLOTS as u16 {
                    if st.owner(slot) == Some(s) {
                        st.set_owner(slot, None);
                    }
                }
            }
            let n = &mut st.nodes[s];
            if n.master != Some(master) {
                n.master = Some(master);
                out.changed = true;
            }
        }
    }
}

/// Redis's `clusterSetMaster`: this node becomes a replica of node `n`.
pub(crate) fn set_my_master(st: &mut State, n: usize, out: &mut Out) {
    if st.manual.replica.is_some() {
        out.hold_writes = Some(false);
    }
    out.follow = Some(st.become_replica_of(n));
    out.changed = true;
}

/// Redis's `clusterUpdateSlotsConfigWith`: slots the sender claims move
/// to it when unassigned or held by a node of a smaller config epoch
/// (never a slot this node is importing); a master left with no slot
/// because they moved becomes the sender's replica, and so does a
/// replica whose master lost them all.
fn update_slots(st: &mut State, sender: usize, epoch: u64, slots: &[u8], cf: Conf, out: &mut Out) {
    if sender == st.myself {
        return;
    }
    let me = st.me();
    let cur = if me.is_master() { Some(st.myself) } else { me.master.and_then(|m| st.find(&m)) };
    let (mut claimed, mut ours) = (0, 0);
    let mut new_master = false;
    for s in 0..SLOTS {
        if slots[s / 8] & (1 << (s % 8)) == 0 {
            continue;
        }
        claimed += 1;
        let slot = s as u16;
        let owner = st.owner(slot);
        let importing = matches!(st.moving.get(&slot), Some(Moving::From(_)));
        if owner == Some(sender) || importing {
            continue;
        }
        if owner.is_none_or(|o| st.nodes[o].config_epoch < epoch) {
            if owner.is_some() && owner == cur {
                new_master = true;
                ours += 1;
            }
            st.set_owner(slot, Some(sender));
            out.changed = true;
        }
    }
    let Some(cur) = cur else { return };
    if new_master && st.nodes[cur].numslots == 0 && (cf.allow_replica_migration || claimed == ours)
    {
        log::warning(&format!(
            "Configuration change detected. Reconfiguring myself as a replica of {}",
            st.nodes[sender].name()
        ));
        set_my_master(st, sender, out);
    }
}

/// Redis's `clusterProcessGossipSection`: failure reports from a master
/// sender, a known node's pong time and address, an unknown node added
/// (when the sender is a known node).
fn gossip(st: &mut State, sender: Option<usize>, m: &Msg, now: i64, timeout: i64, out: &mut Out) {
    let Body::Gossip(entries) = &m.body else { return };
    let reporter = sender.filter(|&s| st.nodes[s].is_master()).map(|s| st.nodes[s].id);
    for g in entries {
        let down = g.flags & (flag::FAIL | flag::PFAIL) != 0;
        match st.find(&g.id) {
            Some(i) => {
                if let Some(by) = reporter.filter(|_| i != st.myself) {
                    if down {
                        if st.add_failure_report(i, by, now) {
                            log::verbose(&format!(
                                "Node {} reported node {} as not reachable.",
                                String::from_utf8_lossy(&by),
                                st.nodes[i].name()
                            ));
                        }
                        if st.mark_failing_if_needed(i, now, timeout) {
                            out.changed = true;
                            broadcast_fail(st, i, out);
                        }
                    } else if st.del_failure_report(i, by, now, timeout) {
                        log::verbose(&format!(
                            "Node {} reported node {} is back online.",
                            String::from_utf8_lossy(&by),
                            st.nodes[i].name()
                        ));
                    }
                }
                let reports = st.failure_reports(i, now, timeout);
                let n = &mut st.nodes[i];
                let pong = i64::from(g.pong_received) * 1000;
                if !down
                    && n.ping_sent == 0
                    && reports == 0
                    && pong <= now + 500
                    && pong > n.pong_received
                {
                    n.pong_received = pong;
                }
                // A node this one cannot reach, seen elsewhere at another
                // address: try that one.
                let moved =
                    !n.ip.eq_ignore_ascii_case(&g.ip) || n.port != g.port || n.cport != g.cport;
                if n.flags & (flag::FAIL | flag::PFAIL) != 0
                    && g.flags & flag::NOADDR == 0
                    && !down
                    && moved
                    && i != st.myself
                {
                    if n.link != 0 {
                        out.sends.push((n.link, Vec::new()));
                        n.link = 0;
                    }
                    n.ip = g.ip.clone();
                    n.port = g.port;
                    n.cport = g.cport;
                    n.flags &= !flag::NOADDR;
                }
            }
            None => {
                if sender.is_some() && g.flags & flag::NOADDR == 0 {
                    let mut n = Node::new(g.id, g.flags & !flag::MYSELF);
                    n.ip = g.ip.clone();
                    n.port = g.port;
                    n.cport = g.cport;
                    st.nodes.push(n);
                }
            }
        }
    }
}

/// Redis's `clusterSendFail`: FAIL about node `n` to every linked node.
pub(crate) fn broadcast_fail(st: &mut State, n: usize, out: &mut Out) {
    let id = st.nodes[n].id;
    let msg = wire::fail(st, 0, &id);
    broadcast(st, wire::FAIL, &msg, out);
}

/// Queues `msg` for every node with a link (Redis's
/// `clusterBroadcastMessage`).
pub(crate) fn broadcast(st: &mut State, typ: u16, msg: &[u8], out: &mut Out) {
    let me = st.myself;
    let links: Vec<u64> = (0..st.nodes.len())
        .filter(|&i| i != me && st.nodes[i].link != 0 && st.nodes[i].flags & flag::HANDSHAKE == 0)
        .map(|i| st.nodes[i].link)
        .collect();
    for l in links {
        st.sent[counter(typ)] += 1;
        out.sends.push((l, msg.to_vec()));
    }
}

/// Acts on what processing asked for, with no lock held: the sends (an
/// empty message closes that link), replication, the pause, delivery.
pub(crate) fn act(sh: &Shared, links: &Links, out: Out) {
    for (l, msg) in out.sends {
        if l == 0 {
            continue;
        }
        if msg.is_empty() {
            links.close(l);
        } else {
            links.send(l, &msg);
        }
    }
    if let Some(hold) = out.hold_writes {
        engine::subsystems::repl::hold_writes_for_failover(sh, hold);
    }
    if let Some((ip, port)) = out.follow {
        if let Some(f) = sh.host.follow.as_ref() {
            f.follow(&ip, port);
        }
    }
    if let Some((shard, channel, message)) = out.publish {
        sh.pubsub.publish(shard, &channel, &message, None);
    }
    if out.changed {
        if let Some(c) = sh.cluster.get() {
            c.changed();
        }
    }
    if out.failover_soon {
        links.failover_soon();
    }
}

/// The master's answer to MFSTART once its writes are held (Redis's
/// `clusterSendPing` right after `pauseClients`): the offset it carries is
/// read after [`Shared::quiesce`], so a write that passed the pause check
/// before the hold is in it. In Redis's single thread nothing is in
/// flight when it pauses; here a client's command may be, on another
/// thread, and a replica promoted at an offset short of it would leave
/// that acknowledged write behind.
fn paused_ping(sh: &Shared) -> Option<Vec<u8>> {
    sh.quiesce(engine::core::shared::QUIESCE_LIMIT);
    let offset = my_offset(sh);
    let c = sh.cluster.get()?;
    let mut st = c.state.write();
    if st.manual.end == 0 || !st.me().is_master() {
        return None;
    }
    st.manual.paused_offset = offset;
    st.sent[counter(wire::PING)] += 1;
    let now = engine::core::shared::unix_ms();
    Some(wire::ping(&st, wire::PING, offset, now as u64))
}

/// Reads a link's messages until it ends, answering on the same socket.
fn serve(sh: Weak<Shared>, links: Arc<Links>, mut s: TcpStream, link: u64, inbound: bool) {
    let local = s.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let peer = s.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    while let Some(buf) = read_msg(&mut s) {
        let Some(sh) = sh.upgrade() else { break };
        if sh.shutdown.load(Ordering::Acquire) {
            break;
        }
        let Some(m) = wire::decode(&buf) else { break };
        let mut out = process(&sh, link, inbound, &local, &peer, &m);
        let (mut reply, close, paused) = (out.reply.take(), out.close, out.mf_paused);
        act(&sh, &links, out);
        if paused {
            reply = paused_ping(&sh);
        }
        if let Some(r) = reply {
            if !links.send(link, &r) {
                break;
            }
        }
        if close {
            break;
        }
    }
    let _ = s.shutdown(Shutdown::Both);
    links.close(link);
    if let Some(sh) = sh.upgrade() {
        if let Some(c) = sh.cluster.get() {
            for n in c.state.write().nodes.iter_mut() {
                if n.inbound == link {
                    n.inbound = 0;
                }
            }
        }
    }
}

/// Listens on the bus port; each accepted link is served on a thread.
pub fn listen(sh: &Arc<Shared>, links: &Arc<Links>, addr: SocketAddr) -> std::io::Result<()> {
    let l = TcpListener::bind(addr)?;
    let weak = Arc::downgrade(sh);
    let links = links.clone();
    log::spawn("cluster-bus", move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let Some(sh) = weak.upgrade() else { return };
            if sh.shutdown.load(Ordering::Acquire) {
                return;
            }
            let _ = s.set_nodelay(true);
            let Ok(writer) = s.try_clone() else { continue };
            let link = links.add(writer);
            let (w, links) = (weak.clone(), links.clone());
            let _ = log::spawn("cluster-link", move || serve(w, links, s, link, true));
        }
    })?;
    Ok(())
}

/// Opens an outbound link to a node and greets it (MEET or PING); the
/// link's number, or `None` when the node cannot be reached.
pub(crate) fn connect(
    sh: &Arc<Shared>,
    links: &Arc<Links>,
    id: NodeId,
    ip: &str,
    cport: u16,
    meet: bool,
) -> Option<u64> {
    let c = sh.cluster.get()?;
    let now = engine::core::shared::unix_ms();
    let addr = format!("{ip}:{cport}").parse::<SocketAddr>().ok();
    let s = addr.and_then(|a| TcpStream::connect_timeout(&a, Duration::from_millis(200)).ok());
    let Some(s) = s else {
        // Redis claims a ping sent when it cannot even connect, so that
        // failure detection runs for a node that is gone.
        let mut st = c.state.write();
        if let Some(i) = st.find(&id) {
            if st.nodes[i].ping_sent == 0 {
                st.nodes[i].ping_sent = now;
            }
        }
        return None;
    };
    let _ = s.set_nodelay(true);
    let reader = s.try_clone().ok()?;
    let link = links.add(s);
    let msg = {
        let mut st = c.state.write();
        let Some(i) = st.find(&id) else {
            links.close(link);
            return None;
        };
        let n = &mut st.nodes[i];
        n.link = link;
        n.link_ctime = now;
        n.flags &= !flag::MEET;
        if n.ping_sent == 0 {
            n.ping_sent = now;
        }
        let typ = if meet { wire::MEET } else { wire::PING };
        st.sent[counter(typ)] += 1;
        wire::ping(&st, typ, my_offset(sh), now as u64 ^ link)
    };
    links.send(link, &msg);
    let (w, l2) = (Arc::downgrade(sh), links.clone());
    let _ = log::spawn("cluster-link", move || serve(w, l2, reader, link, false));
    Some(link)
}
