//! The cluster bus, Redis 7.0's binary protocol on `cluster-port`: the
//! message header (2,256 bytes: "RCmb", length, version 1, ports, type,
//! gossip count, epochs, offset, sender, its slot bitmap, its master, its
//! address, flags, state), the gossip entries (104 bytes each), and what
//! a node does with PING, PONG and MEET (Redis's `clusterProcessPacket`:
//! handshakes, learning nodes from gossip, slot ownership by config
//! epoch, roles). FAIL, UPDATE, PUBLISH and failover messages are read
//! and counted, not acted on yet.
//!
//! Threads: one accepts on the bus port and one reads each inbound link;
//! the cron (`cluster.rs`) opens one outbound link per known node, with
//! a reader for its replies. Every change goes through the engine's
//! `Cluster` state under its lock.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use engine::subsystems::cluster::{flag, Moving, Node, NodeId, State, SLOTS};
use engine::subsystems::log;
use engine::Shared;
use parking_lot::Mutex;

pub const HEADER: usize = 2256;
const GOSSIP: usize = 104;
/// The longest message read (a header, every gossip entry a 64k-node
/// cluster could send, extensions): anything longer closes the link.
const MAX_MSG: usize = 8 << 20;

pub const PING: u16 = 0;
pub const PONG: u16 = 1;
pub const MEET: u16 = 2;

/// One gossip entry (`clusterMsgDataGossip`).
#[derive(Clone, Debug)]
pub struct Gossip {
    pub id: NodeId,
    pub pong_received: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
}

/// A decoded message: the header's fields and, for PING/PONG/MEET, the
/// gossip entries.
#[derive(Clone, Debug)]
pub struct Msg {
    pub typ: u16,
    pub port: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub offset: u64,
    pub sender: NodeId,
    pub myslots: Vec<u8>,
    pub slaveof: Option<NodeId>,
    pub myip: String,
    pub cport: u16,
    pub flags: u16,
    pub gossip: Vec<Gossip>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A NUL-padded C string field.
fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn name(b: &[u8]) -> NodeId {
    let mut id = [0u8; 40];
    id.copy_from_slice(&b[..40]);
    id
}

/// Decodes a whole message (`buf.len()` is its `totlen`); `None` when it
/// is not one Redis would accept.
pub fn decode(buf: &[u8]) -> Option<Msg> {
    if buf.len() < HEADER || &buf[..4] != b"RCmb" || be16(buf, 8) != 1 {
        return None;
    }
    let typ = be16(buf, 12);
    let count = be16(buf, 14) as usize;
    let mut gossip = Vec::new();
    if matches!(typ, PING | PONG | MEET) {
        if buf.len() < HEADER + count * GOSSIP {
            return None;
        }
        for i in 0..count {
            let g = &buf[HEADER + i * GOSSIP..HEADER + (i + 1) * GOSSIP];
            gossip.push(Gossip {
                id: name(g),
                pong_received: be32(g, 44),
                ip: cstr(&g[48..94]),
                port: be16(g, 94),
                cport: be16(g, 96),
                flags: be16(g, 98),
            });
        }
    }
    let slaveof = &buf[2128..2168];
    Some(Msg {
        typ,
        port: be16(buf, 10),
        current_epoch: be64(buf, 16),
        config_epoch: be64(buf, 24),
        offset: be64(buf, 32),
        sender: name(&buf[40..80]),
        myslots: buf[80..2128].to_vec(),
        slaveof: (slaveof.iter().any(|&c| c != 0)).then(|| name(slaveof)),
        myip: cstr(&buf[2168..2214]),
        cport: be16(buf, 2248),
        flags: be16(buf, 2250),
        gossip,
    })
}

/// A PING, PONG or MEET from this node (Redis's `clusterBuildMessageHdr`
/// and `clusterSendPing`): the header, then gossip about up to a tenth of
/// the known nodes (at least 3), skipping itself, handshakes, nodes
/// without an address and slot-less nodes it has no link to.
pub fn encode(st: &State, typ: u16, offset: i64, seed: u64) -> Vec<u8> {
    let me = st.me();
    let master = me.master.and_then(|m| st.find(&m)).filter(|_| !me.is_master());
    let mut candidates: Vec<usize> = (0..st.nodes.len())
        .filter(|&i| {
            let n = &st.nodes[i];
            i != st.myself
                && n.flags & (flag::HANDSHAKE | flag::NOADDR) == 0
                && !(n.link == 0 && n.numslots == 0)
        })
        .collect();
    let fresh = st.nodes.len().saturating_sub(2);
    let wanted = (st.nodes.len() / 10).max(3).min(fresh).min(candidates.len());
    // A cheap shuffle: which entries go is Redis's random choice too.
    let mut x = seed | 1;
    for i in (1..candidates.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        candidates.swap(i, (x % (i as u64 + 1)) as usize);
    }
    candidates.truncate(wanted);
    let mut b = vec![0u8; HEADER + candidates.len() * GOSSIP];
    b[..4].copy_from_slice(b"RCmb");
    let total = b.len() as u32;
    b[4..8].copy_from_slice(&total.to_be_bytes());
    b[8..10].copy_from_slice(&1u16.to_be_bytes());
    b[10..12].copy_from_slice(&me.port.to_be_bytes());
    b[12..14].copy_from_slice(&typ.to_be_bytes());
    b[14..16].copy_from_slice(&(candidates.len() as u16).to_be_bytes());
    b[16..24].copy_from_slice(&st.current_epoch.to_be_bytes());
    b[24..32].copy_from_slice(&st.my_epoch().to_be_bytes());
    b[32..40].copy_from_slice(&(offset as u64).to_be_bytes());
    b[40..80].copy_from_slice(&me.id);
    let slots_of = master.unwrap_or(st.myself);
    b[80..2128].copy_from_slice(&st.bitmap_of(slots_of));
    if let Some(m) = master {
        b[2128..2168].copy_from_slice(&st.nodes[m].id);
    }
    // myip stays zeroed (the receiver takes the address of the link)
    // unless an address is announced.
    b[2248..2250].copy_from_slice(&me.cport.to_be_bytes());
    b[2250..2252].copy_from_slice(&me.flags.to_be_bytes());
    b[2252] = if st.ok { 0 } else { 1 };
    for (k, &i) in candidates.iter().enumerate() {
        let n = &st.nodes[i];
        let g = &mut b[HEADER + k * GOSSIP..HEADER + (k + 1) * GOSSIP];
        g[..40].copy_from_slice(&n.id);
        g[40..44].copy_from_slice(&((n.ping_sent / 1000) as u32).to_be_bytes());
        g[44..48].copy_from_slice(&((n.pong_received / 1000) as u32).to_be_bytes());
        let ip = n.ip.as_bytes();
        g[48..48 + ip.len().min(45)].copy_from_slice(&ip[..ip.len().min(45)]);
        g[94..96].copy_from_slice(&n.port.to_be_bytes());
        g[96..98].copy_from_slice(&n.cport.to_be_bytes());
        g[98..100].copy_from_slice(&n.flags.to_be_bytes());
        g[100..102].copy_from_slice(&0u16.to_be_bytes());
    }
    b
}

/// The outbound links, by the bus's link number: the writing half.
#[derive(Default)]
pub struct Links {
    next: AtomicU64,
    out: Mutex<std::collections::HashMap<u64, TcpStream>>,
}

impl Links {
    fn add(&self, s: TcpStream) -> u64 {
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

/// What processing a message asks the link to do.
enum After {
    Nothing,
    Reply(Vec<u8>),
    Close,
}

/// Redis's `clusterProcessPacket` for PING, PONG and MEET. `link` is the
/// outbound link the message came on (a reply), or 0 for an inbound one;
/// `local_ip`/`peer_ip` are the link's two ends.
fn process(sh: &Shared, link: u64, local_ip: &str, peer_ip: &str, m: &Msg) -> After {
    let Some(c) = sh.cluster.get() else { return After::Close };
    let now = engine::core::shared::unix_ms();
    let offset = sh.host.replication.as_ref().map_or(0, |r| r.offset());
    let mut st = c.state.write();
    st.received[counter(m.typ)] += 1;
    let mut changed = false;
    let mut sender = st.find(&m.sender).filter(|&i| st.nodes[i].flags & flag::HANDSHAKE == 0);
    if let Some(s) = sender {
        st.current_epoch = st.current_epoch.max(m.current_epoch);
        if st.nodes[s].config_epoch < m.config_epoch {
            st.nodes[s].config_epoch = m.config_epoch;
            changed = true;
        }
        st.nodes[s].repl_offset = m.offset as i64;
    }
    let mut after = After::Nothing;
    if matches!(m.typ, PING | MEET) {
        if (m.typ == MEET || st.me().ip.is_empty()) && st.me().ip != local_ip {
            st.me_mut().ip = local_ip.to_string();
            log::warning(&format!("IP address for this node updated to {local_ip}"));
            changed = true;
        }
        if sender.is_none() && m.typ == MEET {
            let mut n =
                Node::new(engine::subsystems::cluster::random_id(now as u64), flag::HANDSHAKE);
            n.ip = if m.myip.is_empty() { peer_ip.to_string() } else { m.myip.clone() };
            n.port = m.port;
            n.cport = m.cport;
            st.nodes.push(n);
            gossip(&mut st, None, m, now);
            changed = true;
        }
    }
    // The link's node, for a reply on an outbound link.
    let linked = (link != 0).then(|| st.nodes.iter().position(|n| n.link == link)).flatten();
    if let Some(l) = linked {
        if st.nodes[l].flags & flag::HANDSHAKE != 0 {
            if sender.is_some() {
                // Known already under its real name: drop the handshake.
                st.remove(l);
                drop(st);
                c.changed();
                return After::Close;
            }
            let n = &mut st.nodes[l];
            n.id = m.sender;
            n.flags &= !flag::HANDSHAKE;
            n.flags |= m.flags & (flag::MASTER | flag::SLAVE);
            sender = Some(l);
            changed = true;
        } else if st.nodes[l].id != m.sender {
            let n = &mut st.nodes[l];
            n.flags |= flag::NOADDR;
            n.ip.clear();
            n.port = 0;
            n.cport = 0;
            n.link = 0;
            drop(st);
            c.changed();
            return After::Close;
        }
        if m.typ == PONG {
            let n = &mut st.nodes[l];
            n.pong_received = now;
            n.ping_sent = 0;
            n.connected = true;
            n.flags &= !flag::PFAIL;
        }
    }
    if let Some(s) = sender {
        let n = &mut st.nodes[s];
        n.flags = (n.flags & !flag::NOFAILOVER) | (m.flags & flag::NOFAILOVER);
        // Redis's nodeUpdateAddressIfNeeded, on a PING: the address the
        // node announces now.
        if m.typ == PING {
            let ip = if m.myip.is_empty() { peer_ip } else { &m.myip };
            if n.ip != ip || n.port != m.port || n.cport != m.cport {
                n.ip = ip.to_string();
                n.port = m.port;
                n.cport = m.cport;
                changed = true;
            }
        }
        match m.slaveof {
            None => {
                if !n.is_master() {
                    n.flags = (n.flags & !flag::SLAVE) | flag::MASTER;
                    n.master = None;
                    changed = true;
                }
            }
            Some(master) => {
                if n.is_master() {
                    n.flags = (n.flags & !(flag::MASTER | flag::MIGRATE_TO)) | flag::SLAVE;
                    changed = true;
                    for slot in 0..SLOTS as u16 {
                        if st.owner(slot) == Some(s) {
                            st.set_owner(slot, None);
                        }
                    }
                }
                let n = &mut st.nodes[s];
                if n.master != Some(master) {
                    n.master = Some(master);
                    changed = true;
                }
            }
        }
        if st.nodes[s].is_master() && st.bitmap_of(s) != m.myslots {
            changed |= update_slots(&mut st, s, m.config_epoch, &m.myslots);
        }
        gossip(&mut st, Some(s), m, now);
    }
    if matches!(m.typ, PING | MEET) {
        st.sent[counter(PONG)] += 1;
        after = After::Reply(encode(&st, PONG, offset, now as u64));
    }
    drop(st);
    if changed {
        c.changed();
    }
    after
}

/// Redis's `clusterUpdateSlotsConfigWith`: slots the sender claims move
/// to it when unassigned or held by a node of a smaller config epoch
/// (never a slot this node is importing).
fn update_slots(st: &mut State, sender: usize, epoch: u64, slots: &[u8]) -> bool {
    let mut changed = false;
    for s in 0..SLOTS {
        if slots[s / 8] & (1 << (s % 8)) == 0 {
            continue;
        }
        let slot = s as u16;
        let owner = st.owner(slot);
        let importing = matches!(st.moving.get(&slot), Some(Moving::From(_)));
        if owner == Some(sender) || importing {
            continue;
        }
        if owner.is_none_or(|o| st.nodes[o].config_epoch < epoch) {
            st.set_owner(slot, Some(sender));
            changed = true;
        }
    }
    changed
}

/// Redis's `clusterProcessGossipSection` without failure reports: a
/// known node's pong time, an unknown one added as gossiped (when the
/// sender is a known node).
fn gossip(st: &mut State, sender: Option<usize>, m: &Msg, now: i64) {
    for g in &m.gossip {
        match st.find(&g.id) {
            Some(i) => {
                let n = &mut st.nodes[i];
                let pong = i64::from(g.pong_received) * 1000;
                if g.flags & (flag::FAIL | flag::PFAIL) == 0
                    && n.ping_sent == 0
                    && pong <= now + 500
                    && pong > n.pong_received
                {
                    n.pong_received = pong;
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

/// Reads a link's messages until it ends, answering on the same socket
/// (inbound links) or noting replies (outbound, `link` non-zero).
fn serve(sh: Weak<Shared>, links: Arc<Links>, mut s: TcpStream, link: u64) {
    let local = s.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let peer = s.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    while let Some(buf) = read_msg(&mut s) {
        let Some(sh) = sh.upgrade() else { break };
        if sh.shutdown.load(Ordering::Acquire) {
            break;
        }
        let Some(m) = decode(&buf) else { break };
        let after = if matches!(m.typ, PING | PONG | MEET) {
            process(&sh, link, &local, &peer, &m)
        } else {
            if let Some(c) = sh.cluster.get() {
                c.state.write().received[counter(m.typ)] += 1;
            }
            After::Nothing
        };
        match after {
            After::Nothing => {}
            After::Reply(r) => {
                if s.write_all(&r).is_err() {
                    break;
                }
            }
            After::Close => break,
        }
    }
    let _ = s.shutdown(Shutdown::Both);
    if link != 0 {
        links.close(link);
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
            let (w, links) = (weak.clone(), links.clone());
            let _ = log::spawn("cluster-link", move || serve(w, links, s, 0));
        }
    })?;
    Ok(())
}

/// One pass of the bus's cron (every 100 ms): handshakes that took too
/// long are dropped, links are opened to nodes without one (greeting a
/// node being met with MEET, any other with PING), and each linked node
/// is pinged once its last PONG is a second old.
pub fn cron(sh: &Arc<Shared>, links: &Arc<Links>, node_timeout: i64) {
    let Some(c) = sh.cluster.get() else { return };
    let now = engine::core::shared::unix_ms();
    let offset = sh.host.replication.as_ref().map_or(0, |r| r.offset());
    let handshake_timeout = node_timeout.max(1000);
    let mut to_connect = Vec::new();
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
            links.close(l);
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
            if n.link == 0 {
                to_connect.push((n.id, n.ip.clone(), n.cport, n.flags & flag::MEET != 0));
            }
        }
    }
    for (id, ip, cport, meet) in to_connect {
        let Ok(addr) = format!("{ip}:{cport}").parse::<SocketAddr>() else { continue };
        let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { continue };
        let _ = s.set_nodelay(true);
        let Ok(reader) = s.try_clone() else { continue };
        let link = links.add(s);
        let msg = {
            let mut st = c.state.write();
            let Some(i) = st.find(&id) else {
                links.close(link);
                continue;
            };
            let n = &mut st.nodes[i];
            n.link = link;
            n.flags &= !flag::MEET;
            if n.ping_sent == 0 {
                n.ping_sent = now;
            }
            let typ = if meet { MEET } else { PING };
            st.sent[counter(typ)] += 1;
            encode(&st, typ, offset, now as u64 ^ link)
        };
        links.send(link, &msg);
        let (w, l2) = (Arc::downgrade(sh), links.clone());
        let _ = log::spawn("cluster-link", move || serve(w, l2, reader, link));
    }
    // Pings: a node whose last PONG is over a second old and has no ping
    // pending (Redis pings a random one each second and any past half
    // the node timeout; on a small cluster this is close to both).
    let mut pings = Vec::new();
    {
        let mut st = c.state.write();
        let me = st.myself;
        for i in 0..st.nodes.len() {
            let n = &st.nodes[i];
            if i == me || n.link == 0 || n.ping_sent != 0 || now - n.pong_received < 1000 {
                continue;
            }
            st.nodes[i].ping_sent = now;
            st.sent[counter(PING)] += 1;
            pings.push((st.nodes[i].link, encode(&st, PING, offset, now as u64 ^ i as u64)));
        }
        // A link whose ping has waited past the node timeout (and two
        // seconds) is dropped, to be opened again (Redis's link refresh,
        // which also waits for the link to be that old).
        for i in 0..st.nodes.len() {
            let n = &mut st.nodes[i];
            let late = now - n.ping_sent > node_timeout.max(2000);
            if i != me && n.link != 0 && n.ping_sent != 0 && late {
                links.close(n.link);
                n.link = 0;
                n.connected = false;
            }
        }
    }
    for (link, msg) in pings {
        links.send(link, &msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_round_trips_through_the_wire_format() {
        let mut st = State::fresh([b'a'; 40]);
        st.me_mut().port = 7000;
        st.me_mut().cport = 17000;
        st.current_epoch = 5;
        st.me_mut().config_epoch = 3;
        for s in 0..100 {
            st.set_owner(s, Some(0));
        }
        for c in [b'b', b'c', b'd'] {
            let mut n = Node::new([c; 40], flag::MASTER);
            n.ip = "127.0.0.1".into();
            n.port = 7001;
            n.cport = 17001;
            n.link = 1;
            st.nodes.push(n);
        }
        let b = encode(&st, PING, 42, 7);
        assert_eq!(b.len(), HEADER + 3 * GOSSIP);
        let m = decode(&b).unwrap();
        assert_eq!(
            (m.typ, m.port, m.cport, m.current_epoch, m.config_epoch),
            (PING, 7000, 17000, 5, 3)
        );
        assert_eq!(m.offset, 42);
        assert_eq!(m.sender, [b'a'; 40]);
        assert_eq!(m.myslots, st.bitmap_of(0));
        assert_eq!(m.flags, flag::MYSELF | flag::MASTER);
        assert_eq!(m.gossip.len(), 3);
        assert!(m.gossip.iter().all(|g| g.ip == "127.0.0.1" && g.port == 7001));
        // Redis's header is 2,256 bytes: the flags sit at 2250.
        assert_eq!(u16::from_be_bytes([b[2250], b[2251]]), flag::MYSELF | flag::MASTER);
    }
}
