//! The cluster bus's messages, Redis 7.0's binary format: the header
//! (2,256 bytes: "RCmb", length, version 1, ports, type, gossip count,
//! epochs, offset, sender, its slot bitmap, its master, its address,
//! flags, state, message flags) and each type's body: gossip entries (104
//! bytes each) for PING, PONG and MEET, a node name for FAIL, a config for
//! UPDATE, a channel and a message for PUBLISH and PUBLISHSHARD; the
//! failover messages are a header alone.

use engine::subsystems::cluster::{flag, NodeId, State};

pub const HEADER: usize = 2256;
pub const GOSSIP: usize = 104;

pub const PING: u16 = 0;
pub const PONG: u16 = 1;
pub const MEET: u16 = 2;
pub const FAIL: u16 = 3;
pub const PUBLISH: u16 = 4;
pub const AUTH_REQUEST: u16 = 5;
pub const AUTH_ACK: u16 = 6;
pub const UPDATE: u16 = 7;
pub const MFSTART: u16 = 8;
pub const PUBLISHSHARD: u16 = 10;

/// `mflags[0]` bits: the master paused for a manual failover; a vote is
/// asked for although the master is up.
pub const FLAG0_PAUSED: u8 = 1;
pub const FLAG0_FORCEACK: u8 = 2;

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

/// A message's body, by type.
#[derive(Clone, Debug)]
pub enum Body {
    Gossip(Vec<Gossip>),
    Fail(NodeId),
    Update { config_epoch: u64, id: NodeId, slots: Vec<u8> },
    Publish { channel: Vec<u8>, message: Vec<u8> },
    Empty,
}

/// A decoded message: the header's fields and the body.
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
    pub mflags: u8,
    pub body: Body,
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

/// Decodes a whole message (`buf.len()` is its `totlen`); `None` when its
/// length is not the one Redis's `clusterIsValidPacket` expects.
pub fn decode(buf: &[u8]) -> Option<Msg> {
    if buf.len() < HEADER || &buf[..4] != b"RCmb" || be16(buf, 8) != 1 {
        return None;
    }
    let typ = be16(buf, 12);
    let count = be16(buf, 14) as usize;
    let data = &buf[HEADER..];
    let body = match typ {
        PING | PONG | MEET => {
            // Extensions (a hostname) may follow the gossip.
            if data.len() < count * GOSSIP {
                return None;
            }
            let gossip = (0..count)
                .map(|i| {
                    let g = &data[i * GOSSIP..(i + 1) * GOSSIP];
                    Gossip {
                        id: name(g),
                        pong_received: be32(g, 44),
                        ip: cstr(&g[48..94]),
                        port: be16(g, 94),
                        cport: be16(g, 96),
                        flags: be16(g, 98),
                    }
                })
                .collect();
            Body::Gossip(gossip)
        }
        FAIL => {
            if data.len() != 40 {
                return None;
            }
            Body::Fail(name(data))
        }
        UPDATE => {
            if data.len() != 8 + 40 + 2048 {
                return None;
            }
            Body::Update {
                config_epoch: be64(data, 0),
                id: name(&data[8..]),
                slots: data[48..].to_vec(),
            }
        }
        PUBLISH | PUBLISHSHARD => {
            if data.len() < 8 {
                return None;
            }
            let (c, m) = (be32(data, 0) as usize, be32(data, 4) as usize);
            if data.len() != 8 + c + m {
                return None;
            }
            Body::Publish { channel: data[8..8 + c].to_vec(), message: data[8 + c..].to_vec() }
        }
        _ => Body::Empty,
    };
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
        mflags: buf[2253],
        body,
    })
}

/// Redis's `clusterBuildMessageHdr`, with room for `body` more bytes: a
/// replica sends its master's slots and epoch; a master paused for a
/// manual failover says so.
pub fn header(st: &State, typ: u16, offset: i64, body: usize) -> Vec<u8> {
    let me = st.me();
    let master = me.master.and_then(|m| st.find(&m)).filter(|_| !me.is_master());
    let mut b = Vec::with_capacity(HEADER + body);
    b.resize(HEADER, 0);
    b[..4].copy_from_slice(b"RCmb");
    b[8..10].copy_from_slice(&1u16.to_be_bytes());
    b[10..12].copy_from_slice(&me.port.to_be_bytes());
    b[12..14].copy_from_slice(&typ.to_be_bytes());
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
    if me.is_master() && st.manual.end != 0 && st.manual.paused_offset >= 0 {
        // The offset the replica must reach: the held data set's, read
        // once in-flight writes settled (`bus::paused_ping`).
        b[32..40].copy_from_slice(&(st.manual.paused_offset as u64).to_be_bytes());
        b[2253] |= FLAG0_PAUSED;
    }
    b
}

/// Sets the total length once the body is written.
fn finish(mut b: Vec<u8>) -> Vec<u8> {
    let total = b.len() as u32;
    b[4..8].copy_from_slice(&total.to_be_bytes());
    b
}

/// A header-only message (FAILOVER_AUTH_REQUEST/ACK, MFSTART), with
/// `mflags`.
pub fn bare(st: &State, typ: u16, offset: i64, mflags: u8) -> Vec<u8> {
    let mut b = header(st, typ, offset, 0);
    b[2253] |= mflags;
    finish(b)
}

/// FAIL about `id` (Redis's `clusterSendFail`).
pub fn fail(st: &State, offset: i64, id: &NodeId) -> Vec<u8> {
    let mut b = header(st, FAIL, offset, 40);
    b.extend_from_slice(id);
    finish(b)
}

/// UPDATE with node `n`'s config (Redis's `clusterSendUpdate`).
pub fn update(st: &State, offset: i64, n: usize) -> Vec<u8> {
    let mut b = header(st, UPDATE, offset, 8 + 40 + 2048);
    b.extend_from_slice(&st.nodes[n].config_epoch.to_be_bytes());
    b.extend_from_slice(&st.nodes[n].id);
    b.extend_from_slice(&st.bitmap_of(n));
    finish(b)
}

/// PUBLISH or PUBLISHSHARD of `message` on `channel`.
pub fn publish(st: &State, typ: u16, offset: i64, channel: &[u8], message: &[u8]) -> Vec<u8> {
    let mut b = header(st, typ, offset, 8 + channel.len() + message.len());
    b.extend_from_slice(&(channel.len() as u32).to_be_bytes());
    b.extend_from_slice(&(message.len() as u32).to_be_bytes());
    b.extend_from_slice(channel);
    b.extend_from_slice(message);
    finish(b)
}

/// A PING, PONG or MEET (Redis's `clusterSendPing`): gossip about a
/// tenth of the known nodes (at least 3), skipping itself, handshakes,
/// nodes without an address and slot-less nodes it has no link to, then
/// every node it believes possibly failing, so that failure reports
/// spread in one round.
pub fn ping(st: &State, typ: u16, offset: i64, seed: u64) -> Vec<u8> {
    let mut candidates: Vec<usize> = (0..st.nodes.len())
        .filter(|&i| {
            let n = &st.nodes[i];
            i != st.myself
                && n.flags & (flag::HANDSHAKE | flag::NOADDR | flag::PFAIL) == 0
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
    candidates.extend((0..st.nodes.len()).filter(|&i| {
        let f = st.nodes[i].flags;
        i != st.myself && f & flag::PFAIL != 0 && f & (flag::HANDSHAKE | flag::NOADDR) == 0
    }));
    let mut b = header(st, typ, offset, candidates.len() * GOSSIP);
    b[14..16].copy_from_slice(&(candidates.len() as u16).to_be_bytes());
    for &i in &candidates {
        let n = &st.nodes[i];
        let mut g = [0u8; GOSSIP];
        g[..40].copy_from_slice(&n.id);
        g[40..44].copy_from_slice(&((n.ping_sent / 1000) as u32).to_be_bytes());
        g[44..48].copy_from_slice(&((n.pong_received / 1000) as u32).to_be_bytes());
        let ip = n.ip.as_bytes();
        g[48..48 + ip.len().min(45)].copy_from_slice(&ip[..ip.len().min(45)]);
        g[94..96].copy_from_slice(&n.port.to_be_bytes());
        g[96..98].copy_from_slice(&n.cport.to_be_bytes());
        g[98..100].copy_from_slice(&n.flags.to_be_bytes());
        b.extend_from_slice(&g);
    }
    finish(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::subsystems::cluster::Node;

    fn state() -> State {
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
        st
    }

    #[test]
    fn a_ping_round_trips_through_the_wire_format() {
        let st = state();
        let b = ping(&st, PING, 42, 7);
        // Four nodes: Redis gossips about at most the count less two.
        assert_eq!(b.len(), HEADER + 2 * GOSSIP);
        let m = decode(&b).unwrap();
        assert_eq!(
            (m.typ, m.port, m.cport, m.current_epoch, m.config_epoch),
            (PING, 7000, 17000, 5, 3)
        );
        assert_eq!(m.offset, 42);
        assert_eq!(m.sender, [b'a'; 40]);
        assert_eq!(m.myslots, st.bitmap_of(0));
        assert_eq!(m.flags, flag::MYSELF | flag::MASTER);
        let Body::Gossip(g) = m.body else { panic!("gossip") };
        assert_eq!(g.len(), 2);
        assert!(g.iter().all(|g| g.ip == "127.0.0.1" && g.port == 7001));
        // Redis's header is 2,256 bytes: the flags sit at 2250.
        assert_eq!(u16::from_be_bytes([b[2250], b[2251]]), flag::MYSELF | flag::MASTER);
    }

    #[test]
    fn a_pfail_node_is_always_gossiped() {
        let mut st = state();
        for c in b'e'..b'z' {
            let mut n = Node::new([c; 40], flag::MASTER);
            n.link = 1;
            st.nodes.push(n);
        }
        st.nodes[20].flags |= flag::PFAIL;
        for seed in 1..20 {
            let Body::Gossip(g) = decode(&ping(&st, PING, 0, seed)).unwrap().body else {
                panic!("gossip")
            };
            assert_eq!(g.iter().filter(|g| g.id == st.nodes[20].id).count(), 1);
        }
    }

    #[test]
    fn fail_update_publish_and_auth_messages_have_redis_lengths() {
        let st = state();
        let f = fail(&st, 0, &[b'b'; 40]);
        assert_eq!(f.len(), 2296);
        assert!(matches!(decode(&f).unwrap().body, Body::Fail(id) if id == [b'b'; 40]));
        let u = update(&st, 0, 0);
        assert_eq!(u.len(), HEADER + 8 + 40 + 2048);
        let Body::Update { config_epoch, id, slots } = decode(&u).unwrap().body else {
            panic!("update")
        };
        assert_eq!((config_epoch, id, slots), (3, [b'a'; 40], st.bitmap_of(0)));
        let p = publish(&st, PUBLISHSHARD, 0, b"ch", b"hello");
        assert_eq!(p.len(), HEADER + 8 + 2 + 5);
        let Body::Publish { channel, message } = decode(&p).unwrap().body else { panic!() };
        assert_eq!((&channel[..], &message[..]), (&b"ch"[..], &b"hello"[..]));
        let a = bare(&st, AUTH_REQUEST, 0, FLAG0_FORCEACK);
        assert_eq!(a.len(), HEADER);
        assert_eq!(decode(&a).unwrap().mflags, FLAG0_FORCEACK);
        // A FAIL one byte short is refused, as Redis refuses it.
        let mut short = f.clone();
        short.pop();
        let n = short.len() as u32;
        short[4..8].copy_from_slice(&n.to_be_bytes());
        assert!(decode(&short).is_none());
    }
}
