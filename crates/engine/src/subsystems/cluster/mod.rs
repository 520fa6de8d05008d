//! Redis Cluster's state on one node (`cluster-enabled yes`): the nodes
//! it knows, who serves each of the 16,384 slots, the epochs, the
//! cluster's health, and the views the `CLUSTER` commands print (INFO,
//! NODES, SLOTS, SHARDS). Redis 7.0.15's behaviour and words.
//!
//! What lives here and what does not: the state and its rules are the
//! engine's (the commands and the router read and change them); the
//! cluster bus (sockets, the binary gossip, failure detection's timers) is
//! the server's, and changes this state through the same methods. The
//! file `nodes.conf` is [`conf`]; routing a command to its slot's node
//! (Redis's `getNodeByQuery`) is [`route`].
//!
//! A slot is a lock stripe: in cluster mode the store has one database of
//! 16,384 stripes (`Shared::with_host`), so the keys of slot `s` are
//! exactly stripe `s`'s, and counting or listing them costs what the slot
//! holds.
//!
//! Must not depend on a command family (`src/layering.rs`).

pub mod conf;
pub mod failure;
pub mod gate;
pub mod route;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

pub use store::slot::SLOTS;

/// Redis's `CLUSTER_WRITABLE_DELAY`: a master that starts as failed waits
/// this long (ms) before it may declare the cluster ok.
const WRITABLE_DELAY_MS: i64 = 2000;
/// Redis's `CLUSTER_MIN_REJOIN_DELAY` / `CLUSTER_MAX_REJOIN_DELAY` (ms).
const MIN_REJOIN_DELAY_MS: i64 = 500;
const MAX_REJOIN_DELAY_MS: i64 = 5000;

/// Node flags, Redis's `CLUSTER_NODE_*` bits (as the bus carries them).
pub mod flag {
    pub const MASTER: u16 = 1;
    pub const SLAVE: u16 = 2;
    pub const PFAIL: u16 = 4;
    pub const FAIL: u16 = 8;
    pub const MYSELF: u16 = 16;
    pub const HANDSHAKE: u16 = 32;
    pub const NOADDR: u16 = 64;
    pub const MEET: u16 = 128;
    pub const MIGRATE_TO: u16 = 256;
    pub const NOFAILOVER: u16 = 512;
}

/// A node id: 40 lowercase hexadecimal characters.
pub type NodeId = [u8; 40];

/// The slot table's mark for "no node".
const NOBODY: u16 = u16::MAX;

/// One node as this node sees it.
#[derive(Clone, Debug)]
pub struct Node {
    pub id: NodeId,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub hostname: String,
    pub flags: u16,
    /// The master's id, for a replica.
    pub master: Option<NodeId>,
    /// Unix ms of the last PING sent and not yet answered (0: none).
    pub ping_sent: i64,
    /// Unix ms of the last PONG received.
    pub pong_received: i64,
    pub config_epoch: u64,
    /// Whether the bus link to it is up (myself: always).
    pub connected: bool,
    /// Slots it serves (kept with the slot table).
    pub numslots: u32,
    /// Its replication offset as last reported.
    pub repl_offset: i64,
    /// The bus's outbound link to it (0: none), the bus's own number.
    pub link: u64,
    /// When it was created (Unix ms): a handshake times out from here.
    pub ctime: i64,
    /// When it was flagged FAIL (Unix ms).
    pub fail_time: i64,
    /// Masters that reported it failing or possibly failing, with when
    /// (Redis's failure reports, valid twice the node timeout).
    pub fail_reports: Vec<(NodeId, i64)>,
    /// For a master: when this node last voted for one of its replicas.
    pub voted_time: i64,
    /// When any message from it last arrived (Unix ms).
    pub data_received: i64,
    /// The bus's inbound link from it (0: none), and when each of the
    /// two links was made (CLUSTER LINKS).
    pub inbound: u64,
    pub link_ctime: i64,
    pub inbound_ctime: i64,
}

impl Node {
    pub fn new(id: NodeId, flags: u16) -> Node {
        Node {
            id,
            ip: String::new(),
            port: 0,
            cport: 0,
            hostname: String::new(),
            flags,
            master: None,
            ping_sent: 0,
            pong_received: 0,
            config_epoch: 0,
            connected: false,
            numslots: 0,
            repl_offset: 0,
            link: 0,
            ctime: crate::core::shared::unix_ms(),
            fail_time: 0,
            fail_reports: Vec::new(),
            voted_time: 0,
            data_received: 0,
            inbound: 0,
            link_ctime: 0,
            inbound_ctime: 0,
        }
    }

    pub fn is_master(&self) -> bool {
        self.flags & flag::MASTER != 0
    }

    pub fn is_failed(&self) -> bool {
        self.flags & flag::FAIL != 0
    }

    /// Its id as text.
    pub fn name(&self) -> &str {
        std::str::from_utf8(&self.id).unwrap_or("")
    }

    /// Redis's flags word in NODES (`myself,master`, `slave`, `fail?`, …).
    pub fn flags_text(&self) -> String {
        let names = [
            (flag::MYSELF, "myself"),
            (flag::MASTER, "master"),
            (flag::SLAVE, "slave"),
            (flag::PFAIL, "fail?"),
            (flag::FAIL, "fail"),
            (flag::HANDSHAKE, "handshake"),
            (flag::NOADDR, "noaddr"),
            (flag::NOFAILOVER, "nofailover"),
        ];
        let words: Vec<&str> =
            names.iter().filter(|(b, _)| self.flags & b != 0).map(|(_, n)| *n).collect();
        if words.is_empty() {
            "noflags".into()
        } else {
            words.join(",")
        }
    }
}

/// A slot on the move (`CLUSTER SETSLOT … MIGRATING/IMPORTING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moving {
    /// Being sent to that node (index in `State::nodes`).
    To(u16),
    /// Being received from that node.
    From(u16),
}

/// Everything the cluster state holds, behind [`Cluster::state`].
pub struct State {
    /// The known nodes; `nodes[myself]` is this node.
    pub nodes: Vec<Node>,
    pub myself: usize,
    /// Who serves each slot (an index in `nodes`, or [`NOBODY`]).
    slots: Box<[u16]>,
    /// Slots being migrated or imported, by slot.
    pub moving: std::collections::BTreeMap<u16, Moving>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    /// The cluster's health as last computed (`cluster_state:ok`).
    pub ok: bool,
    /// Masters serving at least one slot (`cluster_size`).
    pub size: u32,
    /// When the state was first computed, and when this node last saw
    /// itself in a minority (Redis's statics in `clusterUpdateState`).
    first_update_ms: i64,
    among_minority_ms: i64,
    /// Messages sent and received over the bus, by type.
    pub sent: [u64; 11],
    pub received: [u64; 11],
    /// A replica's election and a manual failover under way.
    pub election: failure::Election,
    pub manual: failure::Manual,
}

/// The names of the bus's message types, for INFO's per-type counters.
pub const MESSAGE_TYPES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

impl State {
    /// A fresh state holding only this node, as a master with no slots.
    pub fn fresh(id: NodeId) -> State {
        let me = Node::new(id, flag::MYSELF | flag::MASTER);
        State {
            nodes: vec![me],
            myself: 0,
            slots: vec![NOBODY; SLOTS].into_boxed_slice(),
            moving: Default::default(),
            current_epoch: 0,
            last_vote_epoch: 0,
            ok: false,
            size: 1,
            first_update_ms: 0,
            among_minority_ms: 0,
            sent: [0; 11],
            received: [0; 11],
            election: Default::default(),
            manual: Default::default(),
        }
    }

    pub fn me(&self) -> &Node {
        &self.nodes[self.myself]
    }

    pub fn me_mut(&mut self) -> &mut Node {
        &mut self.nodes[self.myself]
    }

    /// The node serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<usize> {
        let n = self.slots[slot as usize];
        (n != NOBODY).then_some(n as usize)
    }

    /// Whether `slot` is served by this node.
    pub fn is_mine(&self, slot: u16) -> bool {
        self.slots[slot as usize] as usize == self.myself
    }

    /// Assigns `slot` to node `n` (Redis's `clusterAddSlot`, or a move).
    pub fn set_owner(&mut self, slot: u16, n: Option<usize>) {
        if let Some(old) = self.owner(slot) {
            self.nodes[old].numslots -= 1;
        }
        self.slots[slot as usize] = match n {
            Some(n) => {
                self.nodes[n].numslots += 1;
                n as u16
            }
            None => NOBODY,
        };
    }

    /// Index of the node with id `id`.
    pub fn find(&self, id: &[u8]) -> Option<usize> {
        self.nodes.iter().position(|n| n.id[..] == *id)
    }

    /// Adds a node (or returns the known one with that id).
    pub fn add(&mut self, node: Node) -> usize {
        if let Some(i) = self.find(&node.id) {
            return i;
        }
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Forgets node `i` (never myself): its slots become unassigned, the
    /// indexes above it shift down.
    pub fn remove(&mut self, i: usize) {
        debug_assert_ne!(i, self.myself);
        for s in 0..SLOTS as u16 {
            if self.owner(s) == Some(i) {
                self.set_owner(s, None);
            }
        }
        let gone = self.nodes.remove(i).id;
        let shift = |x: u16| if x != NOBODY && x as usize > i { x - 1 } else { x };
        for s in self.slots.iter_mut() {
            *s = shift(*s);
        }
        self.moving.retain(|_, m| match m {
            Moving::To(n) | Moving::From(n) => *n as usize != i,
        });
        for m in self.moving.values_mut() {
            *m = match *m {
                Moving::To(n) => Moving::To(shift(n)),
                Moving::From(n) => Moving::From(shift(n)),
            };
        }
        if self.myself > i {
            self.myself -= 1;
        }
        for n in &mut self.nodes {
            if n.master == Some(gone) {
                n.master = None;
            }
            // Its reports about others go with it (Redis's clusterDelNode).
            n.fail_reports.retain(|(by, _)| *by != gone);
        }
    }

    /// The slot ranges node `n` serves, in order.
    pub fn ranges_of(&self, n: usize) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for s in 0..SLOTS as u16 {
            if self.slots[s as usize] as usize == n {
                match out.last_mut() {
                    Some((_, end)) if *end + 1 == s => *end = s,
                    _ => out.push((s, s)),
                }
            }
        }
        out
    }

    /// The epoch this node reports as its own (a replica reports its
    /// master's).
    pub fn my_epoch(&self) -> u64 {
        let me = self.me();
        match me.master.and_then(|m| self.find(&m)) {
            Some(m) if !me.is_master() => self.nodes[m].config_epoch,
            _ => me.config_epoch,
        }
    }

    /// Redis's `clusterUpdateState`, at `now` (Unix ms), with
    /// `cluster-require-full-coverage` and `cluster-node-timeout`. True
    /// when the state changed.
    pub fn update(&mut self, now: i64, full_coverage: bool, node_timeout: i64) -> bool {
        if self.first_update_ms == 0 {
            self.first_update_ms = now;
        }
        let master = self.me().is_master();
        if master && !self.ok && now - self.first_update_ms < WRITABLE_DELAY_MS {
            return false;
        }
        let mut ok = true;
        if full_coverage {
            ok = self.slots.iter().all(|&n| n != NOBODY && !self.nodes[n as usize].is_failed());
        }
        self.size = 0;
        let mut reachable = 0;
        for n in &self.nodes {
            if n.is_master() && n.numslots > 0 {
                self.size += 1;
                if n.flags & (flag::FAIL | flag::PFAIL) == 0 {
                    reachable += 1;
                }
            }
        }
        if reachable < self.size / 2 + 1 {
            ok = false;
            self.among_minority_ms = now;
        }
        if ok == self.ok {
            return false;
        }
        let rejoin = node_timeout.clamp(MIN_REJOIN_DELAY_MS, MAX_REJOIN_DELAY_MS);
        if ok && master && now - self.among_minority_ms < rejoin {
            return false;
        }
        self.ok = ok;
        crate::subsystems::log::warning(&format!(
            "Cluster state changed: {}",
            if ok { "ok" } else { "fail" }
        ));
        true
    }

    /// `CLUSTER INFO`'s text.
    pub fn info(&self) -> String {
        let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
        for &n in self.slots.iter() {
            if n == NOBODY {
                continue;
            }
            assigned += 1;
            let f = self.nodes[n as usize].flags;
            if f & flag::FAIL != 0 {
                fail += 1;
            } else if f & flag::PFAIL != 0 {
                pfail += 1;
            } else {
                ok += 1;
            }
        }
        let mut s = String::new();
        let _ = write!(
            s,
            "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\n\
             cluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\n\
             cluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\n\
             cluster_my_epoch:{}\r\n",
            if self.ok { "ok" } else { "fail" },
            self.nodes.len(),
            self.size,
            self.current_epoch,
            self.my_epoch(),
        );
        let mut total = 0;
        for (i, n) in self.sent.iter().enumerate() {
            if *n > 0 {
                let _ = write!(s, "cluster_stats_messages_{}_sent:{n}\r\n", MESSAGE_TYPES[i]);
                total += n;
            }
        }
        let _ = write!(s, "cluster_stats_messages_sent:{total}\r\n");
        let mut total = 0;
        for (i, n) in self.received.iter().enumerate() {
            if *n > 0 {
                let _ = write!(s, "cluster_stats_messages_{}_received:{n}\r\n", MESSAGE_TYPES[i]);
                total += n;
            }
        }
        let _ = write!(s, "cluster_stats_messages_received:{total}\r\n");
        s.push_str("total_cluster_links_buffer_limit_exceeded:0\r\n");
        s
    }

    /// One node's line of `CLUSTER NODES` and `nodes.conf` (Redis's
    /// `clusterGenNodeDescription`), without the newline.
    pub fn node_line(&self, i: usize) -> String {
        let n = &self.nodes[i];
        let mut s = String::with_capacity(128);
        let _ = write!(s, "{} {}:{}@{}", n.name(), n.ip, n.port, n.cport);
        if !n.hostname.is_empty() {
            let _ = write!(s, ",{}", n.hostname);
        }
        let master = n.master.map(|m| String::from_utf8_lossy(&m).into_owned());
        let _ = write!(
            s,
            " {} {} {} {} {} {}",
            n.flags_text(),
            master.as_deref().unwrap_or("-"),
            n.ping_sent,
            n.pong_received,
            n.config_epoch,
            if n.connected || i == self.myself { "connected" } else { "disconnected" },
        );
        for (a, b) in self.ranges_of(i) {
            if a == b {
                let _ = write!(s, " {a}");
            } else {
                let _ = write!(s, " {a}-{b}");
            }
        }
        if i == self.myself {
            for (slot, m) in &self.moving {
                match *m {
                    Moving::To(t) => {
                        let _ = write!(s, " [{slot}->-{}]", self.nodes[t as usize].name());
                    }
                    Moving::From(f) => {
                        let _ = write!(s, " [{slot}-<-{}]", self.nodes[f as usize].name());
                    }
                }
            }
        }
        s
    }

    /// `CLUSTER NODES`'s text: one line per node (handshakes left out
    /// when `skip_handshake`, as nodes.conf does).
    pub fn nodes_text(&self, skip_handshake: bool) -> String {
        let mut s = String::new();
        for i in 0..self.nodes.len() {
            if skip_handshake && self.nodes[i].flags & flag::HANDSHAKE != 0 {
                continue;
            }
            s.push_str(&self.node_line(i));
            s.push('\n');
        }
        s
    }

    /// Redis's `clusterStartHandshake` (CLUSTER MEET): a node in
    /// handshake with a random name, which the bus will greet with MEET.
    /// False when a handshake with that address is already under way.
    pub fn start_handshake(&mut self, ip: &str, port: u16, cport: u16, seed: u64) -> bool {
        let busy = self.nodes.iter().any(|n| {
            n.flags & flag::HANDSHAKE != 0
                && n.ip.eq_ignore_ascii_case(ip)
                && n.port == port
                && n.cport == cport
        });
        if busy {
            return false;
        }
        let mut n = Node::new(random_id(seed), flag::HANDSHAKE | flag::MEET);
        n.ip = ip.to_string();
        n.port = port;
        n.cport = cport;
        self.nodes.push(n);
        true
    }

    /// The slots node `n` serves, as the bus's bitmap.
    pub fn bitmap_of(&self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; SLOTS / 8];
        for (s, &o) in self.slots.iter().enumerate() {
            if o as usize == n {
                b[s / 8] |= 1 << (s % 8);
            }
        }
        b
    }

    /// Redis's `clusterSetMaster` on the state: this node becomes a
    /// replica of master `n` (a master's slots on the move are dropped, a
    /// manual failover under way is forgotten). Returns where replication
    /// must follow.
    pub fn become_replica_of(&mut self, n: usize) -> (String, u16) {
        let me = self.me_mut();
        if me.is_master() {
            me.flags = (me.flags & !(flag::MASTER | flag::MIGRATE_TO)) | flag::SLAVE;
            self.moving.clear();
        }
        let id = self.nodes[n].id;
        self.me_mut().master = Some(id);
        self.manual = Default::default();
        (self.nodes[n].ip.clone(), self.nodes[n].port)
    }

    /// The replicas of node `m`, in table order.
    pub fn replicas_of(&self, m: usize) -> Vec<usize> {
        let id = self.nodes[m].id;
        (0..self.nodes.len()).filter(|&i| self.nodes[i].master == Some(id)).collect()
    }
}

/// What the server's cluster bus does for the commands (installed once
/// the bus runs).
pub trait Bus: Send + Sync {
    /// `CLUSTER FAILOVER` accepted on a replica: `force` elects at once,
    /// `takeover` takes the slots with no election, else the master is
    /// asked to pause first.
    fn manual_failover(&self, force: bool, takeover: bool);
    /// `PUBLISH` (to every node) or `SPUBLISH` (to the nodes of this
    /// node's shard) over the bus.
    fn publish(&self, shard: bool, channel: &[u8], message: &[u8]);
    /// `DEBUG CLUSTERLINK KILL`: closes the outbound (`to`) and inbound
    /// (`from`) links of the node with that id, now.
    fn kill_links(&self, node: &NodeId, to: bool, from: bool);
}

/// A node's cluster state, shared by every connection (`Shared::cluster`)
/// and the bus.
pub struct Cluster {
    pub state: RwLock<State>,
    /// The bus, once it runs.
    pub bus: std::sync::OnceLock<std::sync::Arc<dyn Bus>>,
    /// Where `nodes.conf` is (`cluster-config-file` in `dir`).
    pub conf_path: PathBuf,
    /// Bumped on each change that must reach `nodes.conf`; the bus's cron
    /// saves when it moved ([`Cluster::save_if_changed`]).
    changes: AtomicU64,
    saved: AtomicU64,
}

impl Cluster {
    /// This node's cluster state: loaded from `conf_path` when the file
    /// exists, else fresh with a new random id (and the file written).
    /// The error is the line Redis logs before it exits.
    pub fn open(conf_path: PathBuf, seed: u64) -> Result<Cluster, String> {
        let state = match std::fs::read(&conf_path) {
            Ok(bytes) if !bytes.is_empty() => conf::parse(&bytes)?,
            Ok(_) | Err(_) => {
                let id = random_id(seed);
                crate::subsystems::log::notice(&format!(
                    "No cluster configuration found, I'm {}",
                    String::from_utf8_lossy(&id)
                ));
                State::fresh(id)
            }
        };
        let c = Cluster {
            state: RwLock::new(state),
            bus: std::sync::OnceLock::new(),
            conf_path,
            changes: AtomicU64::new(1),
            saved: AtomicU64::new(0),
        };
        Ok(c)
    }

    /// Notes a change `nodes.conf` must get (saved by the next cron).
    pub fn changed(&self) {
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes `nodes.conf` now (CLUSTER SAVECONFIG and friends).
    pub fn save(&self) -> std::io::Result<()> {
        let seen = self.changes.load(Ordering::Relaxed);
        let text = conf::render(&self.state.read());
        conf::write(&self.conf_path, text.as_bytes())?;
        self.saved.fetch_max(seen, Ordering::Relaxed);
        Ok(())
    }

    /// Writes `nodes.conf` if something changed since the last save.
    pub fn save_if_changed(&self) {
        if self.changes.load(Ordering::Relaxed) != self.saved.load(Ordering::Relaxed) {
            if let Err(e) = self.save() {
                crate::subsystems::log::warning(&format!("Could not save the cluster config: {e}"));
            }
        }
    }

    /// This node's id.
    pub fn myid(&self) -> NodeId {
        self.state.read().me().id
    }
}

/// Whether the configuration asks for cluster mode (`cluster-enabled`).
pub fn configured(cfg: &crate::subsystems::config::Config) -> bool {
    cfg.get_by_name("cluster-enabled").is_some_and(|v| v == b"yes")
}

/// A configuration parameter's value as text.
fn param(cfg: &crate::subsystems::config::Config, name: &str) -> String {
    String::from_utf8_lossy(&cfg.get_by_name(name).unwrap_or_default()).into_owned()
}

/// `cluster-node-timeout` (ms).
pub fn node_timeout(cfg: &crate::subsystems::config::Config) -> i64 {
    param(cfg, "cluster-node-timeout").parse().unwrap_or(15000)
}

/// A yes/no parameter.
pub fn yes(cfg: &crate::subsystems::config::Config, name: &str) -> bool {
    cfg.get_by_name(name).is_some_and(|v| v == b"yes")
}

/// Turns cluster mode on for a server about to serve, once its port is
/// known: loads or creates `nodes.conf` and records this node's ports.
/// Nothing when `cluster-enabled` is no. The error is the line Redis
/// logs before it exits.
pub fn enable(shared: &crate::Shared, port: u16) -> Result<(), String> {
    let (path, cport) = {
        let cfg = shared.config.read();
        if !configured(&cfg) {
            return Ok(());
        }
        let cport: u16 = param(&cfg, "cluster-port").parse().unwrap_or(0);
        (cfg.path(param(&cfg, "cluster-config-file")), cport)
    };
    let seed = shared.run_id.bytes().fold(0u64, |h, b| h.rotate_left(5) ^ b as u64);
    let c = Cluster::open(path, seed)?;
    shared.port.store(u32::from(port), std::sync::atomic::Ordering::Relaxed);
    {
        let mut st = c.state.write();
        let me = st.me_mut();
        me.port = port;
        me.cport = if cport != 0 { cport } else { port.wrapping_add(10000) };
        me.connected = true;
    }
    if shared.cluster.set(c).is_err() {
        return Err("cluster mode enabled twice".into());
    }
    announce(shared);
    let c = shared.cluster.get().expect("just set");
    c.save().map_err(|e| format!("Can't save the cluster configuration: {e}"))?;
    shared.state_changed();
    Ok(())
}

/// Applies the `cluster-announce-*` parameters to this node (at start,
/// on CONFIG SET, as Redis's `clusterUpdateMyselfAnnouncedPorts`).
pub fn announce(shared: &crate::Shared) {
    let Some(c) = shared.cluster.get() else { return };
    let port = shared.port.load(std::sync::atomic::Ordering::Relaxed) as u16;
    let (p, cp, ip, host) = {
        let cfg = shared.config.read();
        let num = |n: &str| param(&cfg, n).parse::<u16>().unwrap_or(0);
        let or = |v: u16, d: u16| if v == 0 { d } else { v };
        let cport = or(num("cluster-port"), port.wrapping_add(10000));
        (
            or(num("cluster-announce-port"), port),
            or(num("cluster-announce-bus-port"), cport),
            param(&cfg, "cluster-announce-ip"),
            param(&cfg, "cluster-announce-hostname"),
        )
    };
    let mut st = c.state.write();
    let me = st.me_mut();
    let moved =
        me.port != p || me.cport != cp || (!ip.is_empty() && me.ip != ip) || me.hostname != host;
    if moved {
        me.port = p;
        me.cport = cp;
        if !ip.is_empty() {
            me.ip = ip;
        }
        me.hostname = host;
        drop(st);
        c.changed();
    }
}

/// The cluster's periodic work that is not the bus's: the health
/// (Redis's `clusterUpdateState` from its cron), blocked clients whose
/// slot is no longer served here (Redis's `clientsCron` step), and saving
/// `nodes.conf` after a change. Run every 100 ms.
pub fn cron(shared: &crate::Shared) {
    let Some(c) = shared.cluster.get() else { return };
    let (full, timeout) = {
        let cfg = shared.config.read();
        (yes(&cfg, "cluster-require-full-coverage"), node_timeout(&cfg))
    };
    c.state.write().update(crate::core::shared::unix_ms(), full, timeout);
    gate::redirect_blocked(shared, c);
    c.save_if_changed();
}

/// Redis's `clusterUpdateState` now, with the configuration's settings.
pub fn update_state(c: &Cluster, cfg: &crate::subsystems::config::Config) {
    let (full, timeout) = (yes(cfg, "cluster-require-full-coverage"), node_timeout(cfg));
    c.state.write().update(crate::core::shared::unix_ms(), full, timeout);
}

/// A random node id (40 hex characters), as Redis's `getRandomHexChars`.
pub fn random_id(seed: u64) -> NodeId {
    let mut x = seed
        ^ crate::core::shared::unix_us() as u64
        ^ (std::process::id() as u64).rotate_left(32)
        ^ 0x9e37_79b9_7f4a_7c15;
    let mut id = [b'0'; 40];
    for c in id.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *c = b"0123456789abcdef"[(x >> 32) as usize % 16];
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: u8) -> NodeId {
        [c; 40]
    }

    #[test]
    fn ranges_and_node_lines_are_redis_shaped() {
        let mut st = State::fresh(id(b'a'));
        for s in (0..=100).chain(200..=300).chain([5000]) {
            st.set_owner(s, Some(0));
        }
        assert_eq!(st.ranges_of(0), vec![(0, 100), (200, 300), (5000, 5000)]);
        st.me_mut().port = 22002;
        st.me_mut().cport = 32002;
        assert_eq!(
            st.node_line(0),
            format!(
                "{} :22002@32002 myself,master - 0 0 0 connected 0-100 200-300 5000",
                "a".repeat(40)
            )
        );
        assert_eq!(st.me().numslots, 203);
    }

    #[test]
    fn forgetting_a_node_shifts_the_slot_table() {
        let mut st = State::fresh(id(b'a'));
        let b = st.add(Node::new(id(b'b'), flag::MASTER));
        let c = st.add(Node::new(id(b'c'), flag::MASTER));
        st.set_owner(1, Some(b));
        st.set_owner(2, Some(c));
        st.remove(b);
        assert_eq!(st.owner(1), None);
        assert_eq!(st.owner(2), Some(1));
        assert_eq!(st.nodes[1].numslots, 1);
    }

    #[test]
    fn state_waits_for_the_writable_and_rejoin_delays() {
        let mut st = State::fresh(id(b'a'));
        // Nothing assigned: fail, and a minority.
        assert!(!st.update(1_000, true, 15_000));
        assert!(!st.update(3_500, true, 15_000));
        assert_eq!(st.size, 0);
        for s in 0..SLOTS as u16 {
            st.set_owner(s, Some(0));
        }
        // Covered, but within the rejoin delay of the last minority.
        assert!(!st.update(4_000, true, 15_000));
        assert!(st.update(8_600, true, 15_000));
        assert!(st.ok && st.size == 1);
    }
}
