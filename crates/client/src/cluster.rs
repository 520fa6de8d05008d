//! A Redis Cluster client: the slot map read from `CLUSTER SLOTS`, one
//! [`Connection`] (and so one pipeline) per master, and the redirections
//! a cluster answers with followed as Redis's clients follow them.
//!
//! A [`Pipeline`] given to [`ClusterClient::exec`] is split by node (each
//! command routed by its key's slot), each node gets its part in one
//! write, and the replies come back in the caller's order. `-MOVED`
//! updates the slot, refreshes the map and retries the command at the
//! new node; `-ASK` sends `ASKING` and the command to the named node once,
//! leaving the map alone; `-TRYAGAIN` is retried after a short wait;
//! anything else (`-CROSSSLOT`, `-CLUSTERDOWN`, …) is the command's reply.
//!
//! Transactions are not split: `MULTI`/`EXEC` are keyless and go to the
//! first master, so a transaction belongs on a [`Connection`] to its
//! keys' master. Nothing here is on the single-node [`Connection`]'s
//! path: it only uses the connection's public calls.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Duration;

use resp::Frame;

use crate::conn::{Config, Connection};
use crate::error::{Error, Result};
use crate::pipeline::{Pipeline, Reply};
use crate::slot::{command_slot, SLOTS};

/// Rounds of redirections one command may take before its last
/// redirection error is returned as its reply.
const MAX_ROUNDS: usize = 16;
/// Wait before retrying a command answered `-TRYAGAIN`, times the round's
/// number: about 1.4 s over all rounds, long enough for a slot's last
/// keys to move.
const TRYAGAIN_WAIT: Duration = Duration::from_millis(10);

const NO_NODE: u16 = u16::MAX;

/// Which master serves each slot, from `CLUSTER SLOTS`.
#[derive(Clone, Debug)]
pub struct SlotMap {
    /// Per slot, an index into `nodes` (`NO_NODE`: unserved).
    slots: Vec<u16>,
    /// Masters as `host:port`, in the order of their lowest slot.
    nodes: Vec<String>,
}

impl SlotMap {
    /// Reads a `CLUSTER SLOTS` reply; `asked` is the `host:port` it came
    /// from, whose host stands in for a node announced without an address.
    pub fn from_cluster_slots(reply: &Frame, asked: &str) -> Result<SlotMap> {
        let bad = |what: &str| Error::Protocol(format!("CLUSTER SLOTS: {what}"));
        let asked_host = asked.rsplit_once(':').map_or(asked, |(h, _)| h);
        let Frame::Array(Some(ranges)) = reply else { return Err(bad("not an array")) };
        let mut owned: Vec<(u16, u16, String)> = Vec::new();
        for r in ranges {
            let Frame::Array(Some(r)) = r else { return Err(bad("a range is not an array")) };
            let (Some(Frame::Integer(lo)), Some(Frame::Integer(hi)), Some(Frame::Array(Some(m)))) =
                (r.first(), r.get(1), r.get(2))
            else {
                return Err(bad("a range is not [start, end, master, ...]"));
            };
            let host = match m.first() {
                Some(Frame::Bulk(Some(h))) if !h.is_empty() && h.as_slice() != b"?" => {
                    String::from_utf8_lossy(h).into_owned()
                }
                _ => asked_host.to_string(),
            };
            let Some(Frame::Integer(port)) = m.get(1) else { return Err(bad("no port")) };
            if !(0..i64::from(SLOTS)).contains(lo) || !(*lo..i64::from(SLOTS)).contains(hi) {
                return Err(bad("slot out of range"));
            }
            owned.push((*lo as u16, *hi as u16, format!("{host}:{port}")));
        }
        owned.sort();
        let mut map = SlotMap { slots: vec![NO_NODE; SLOTS as usize], nodes: Vec::new() };
        for (lo, hi, addr) in owned {
            let i = map.index_of(&addr);
            map.slots[lo as usize..=hi as usize].fill(i);
        }
        Ok(map)
    }

    fn index_of(&mut self, addr: &str) -> u16 {
        match self.nodes.iter().position(|n| n == addr) {
            Some(i) => i as u16,
            None => {
                self.nodes.push(addr.to_string());
                (self.nodes.len() - 1) as u16
            }
        }
    }

    /// The master serving `slot`, as `host:port`.
    pub fn node(&self, slot: u16) -> Option<&str> {
        self.node_index(slot).map(|i| self.nodes[i].as_str())
    }

    /// The master serving `slot`, as an index into [`SlotMap::nodes`].
    pub fn node_index(&self, slot: u16) -> Option<usize> {
        match self.slots.get(slot as usize) {
            Some(&i) if i != NO_NODE => Some(i as usize),
            _ => None,
        }
    }

    /// The masters, as `host:port`, in the order of their lowest slot.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Records that `slot` is served by `addr` (what `-MOVED` says).
    fn set(&mut self, slot: u16, addr: &str) {
        let i = self.index_of(addr);
        if let Some(s) = self.slots.get_mut(slot as usize) {
            *s = i;
        }
    }
}

/// How often the client was redirected, for tests and load generators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// `-MOVED` replies followed.
    pub moved: u64,
    /// `-ASK` replies followed.
    pub ask: u64,
    /// `-TRYAGAIN` replies retried.
    pub tryagain: u64,
    /// Slot maps read (the first one included).
    pub refreshes: u64,
}

/// A client of a whole cluster: one connection per node it talks to.
pub struct ClusterClient {
    /// Credentials, protocol and timeouts for every node (host and port
    /// are replaced by each node's).
    cfg: Config,
    seeds: Vec<String>,
    map: SlotMap,
    conns: HashMap<String, Connection>,
    stats: ClusterStats,
}

/// Where one round sends a command: its node and whether `ASKING` goes
/// first.
struct Route {
    addr: String,
    asking: bool,
}

/// A redirection reply, parsed.
enum Redirect {
    Moved(u16, String),
    Ask(String),
    TryAgain,
}

fn redirect(text: &str, from: &str) -> Option<Redirect> {
    if text.starts_with("TRYAGAIN") {
        return Some(Redirect::TryAgain);
    }
    let mut w = text.split(' ');
    let kind = w.next()?;
    let slot: u16 = w.next()?.parse().ok()?;
    let to = w.next()?;
    // A node whose address is unknown to the sender is announced as
    // `:port`: it is on the sender's host.
    let to = match to.strip_prefix(':') {
        Some(port) => format!("{}:{port}", from.rsplit_once(':').map_or(from, |(h, _)| h)),
        None => to.to_string(),
    };
    match kind {
        "MOVED" => Some(Redirect::Moved(slot, to)),
        "ASK" => Some(Redirect::Ask(to)),
        _ => None,
    }
}

impl ClusterClient {
    /// Connects to the seed `cfg.host:cfg.port` and reads the slot map.
    pub async fn connect(cfg: &Config) -> Result<ClusterClient> {
        Self::connect_seeds(cfg, &[format!("{}:{}", cfg.host, cfg.port)]).await
    }

    /// Reads the slot map from the first of `seeds` (`host:port`) that
    /// answers; `cfg` gives every connection's settings.
    pub async fn connect_seeds(cfg: &Config, seeds: &[String]) -> Result<ClusterClient> {
        let mut c = ClusterClient {
            cfg: cfg.clone(),
            seeds: seeds.to_vec(),
            map: SlotMap { slots: vec![NO_NODE; SLOTS as usize], nodes: Vec::new() },
            conns: HashMap::new(),
            stats: ClusterStats::default(),
        };
        c.refresh().await?;
        Ok(c)
    }

    /// The current slot map.
    pub fn slot_map(&self) -> &SlotMap {
        &self.map
    }

    pub fn stats(&self) -> ClusterStats {
        self.stats
    }

    /// Reads the slot map again, from the known masters first, then the
    /// seeds; the first node that answers `CLUSTER SLOTS` is believed.
    pub async fn refresh(&mut self) -> Result<()> {
        let mut last = Error::Closed;
        let mut tried: Vec<String> = self.map.nodes.clone();
        tried.extend(self.seeds.iter().filter(|s| !self.map.nodes.contains(s)).cloned());
        for addr in tried {
            let reply = match self.conn(&addr).await {
                Ok(c) => c.cmd(&["CLUSTER", "SLOTS"]).await,
                Err(e) => Err(e),
            };
            match reply.and_then(|f| SlotMap::from_cluster_slots(&f, &addr)) {
                Ok(map) => {
                    self.map = map;
                    self.stats.refreshes += 1;
                    // Connections to nodes that left the map are dropped.
                    let nodes = &self.map.nodes;
                    self.conns.retain(|a, _| nodes.contains(a));
                    return Ok(());
                }
                Err(e) => {
                    if !e.is_server() {
                        self.conns.remove(&addr);
                    }
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// The connection to `addr`, opened on first use.
    async fn conn(&mut self, addr: &str) -> Result<&mut Connection> {
        if !self.conns.contains_key(addr) {
            let (host, port) =
                addr.rsplit_once(':').ok_or_else(|| Error::Protocol(format!("address {addr}")))?;
            let mut cfg = self.cfg.clone();
            cfg.host = host.to_string();
            cfg.port = port.parse().map_err(|_| Error::Protocol(format!("address {addr}")))?;
            let c = Connection::connect(&cfg).await?;
            self.conns.insert(addr.to_string(), c);
        }
        Ok(self.conns.get_mut(addr).expect("inserted above"))
    }

    /// Sends one command to its key's node, following redirections; an
    /// error reply is `Err(Error::Server)`.
    pub async fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Frame> {
        let mut p = Pipeline::new();
        p.cmd(args);
        match self.exec(&p).await?.pop() {
            Some(Ok(f)) => Ok(f),
            Some(Err(e)) => Err(Error::Server(e)),
            None => Err(Error::Protocol("no reply".into())),
        }
    }

    /// Sends the pipeline's commands, each node its share in one write,
    /// and returns every reply in the pipeline's order (a command's error
    /// reply in its slot). Commands for one node keep their relative
    /// order, including when they are redirected together. A transport
    /// failure fails the call and drops every connection (replies in
    /// flight could no longer be matched to their commands).
    pub async fn exec(&mut self, p: &Pipeline) -> Result<Vec<Reply>> {
        let cmds = split(p)?;
        let mut out: Vec<Option<Reply>> = vec![None; cmds.len()];
        let mut ask: Vec<Option<String>> = vec![None; cmds.len()];
        let mut pending: Vec<usize> = (0..cmds.len()).collect();
        let mut moved: Vec<(u16, String)> = Vec::new();
        for round in 1..=MAX_ROUNDS as u32 {
            if pending.is_empty() {
                break;
            }
            let r = self.round(p, &cmds, &pending, &mut ask, &mut moved, &mut out).await;
            let (again, wait) = match r {
                Ok(x) => x,
                Err(e) => {
                    self.conns.clear();
                    return Err(e);
                }
            };
            pending = again;
            if !moved.is_empty() {
                // The map is read again, but a node the move has not
                // reached yet (it spreads over the bus) may still name the
                // old owner: what -MOVED said stands over what it says.
                let _ = self.refresh().await;
                for (slot, to) in moved.drain(..) {
                    self.map.set(slot, &to);
                }
            }
            if wait {
                tokio::time::sleep(TRYAGAIN_WAIT * round).await;
            }
        }
        Ok(out.into_iter().map(|r| r.expect("every command got a reply")).collect())
    }

    /// One round: the `pending` commands sent to their nodes, replies read.
    /// Returns the commands to send again and whether to wait before the
    /// next round; `moved` gets the slots -MOVED named.
    async fn round(
        &mut self,
        p: &Pipeline,
        cmds: &[(Range<usize>, Option<u16>)],
        pending: &[usize],
        ask: &mut [Option<String>],
        moved: &mut Vec<(u16, String)>,
        out: &mut [Option<Reply>],
    ) -> Result<(Vec<usize>, bool)> {
        // Group by node, keeping the pipeline's order within each node.
        let mut groups: Vec<(String, Vec<(usize, bool)>)> = Vec::new();
        for &i in pending {
            let route = match ask[i].take() {
                Some(addr) => Route { addr, asking: true },
                None => Route { addr: self.node_for(cmds[i].1)?, asking: false },
            };
            match groups.iter_mut().find(|(a, _)| *a == route.addr) {
                Some((_, v)) => v.push((i, route.asking)),
                None => groups.push((route.addr, vec![(i, route.asking)])),
            }
        }
        // Every node's share is written before any reply is read.
        let mut buf = Vec::new();
        for (addr, idxs) in &groups {
            buf.clear();
            for &(i, asking) in idxs {
                if asking {
                    buf.extend_from_slice(b"*1\r\n$6\r\nASKING\r\n");
                }
                buf.extend_from_slice(&p.buf[cmds[i].0.clone()]);
            }
            self.conn(addr).await?.send_raw(&buf).await?;
        }
        let (mut again, mut wait) = (Vec::new(), false);
        for (addr, idxs) in &groups {
            let c = self.conns.get_mut(addr).ok_or(Error::Closed)?;
            for &(i, asking) in idxs {
                if asking {
                    // ASKING's own +OK (or its error, which the command's
                    // reply will show anyway).
                    c.read_frame().await?;
                }
                let reply = match c.read_frame().await? {
                    Frame::Error(e) => Err(String::from_utf8_lossy(&e).into_owned()),
                    f => Ok(f),
                };
                if let Err(text) = &reply {
                    match redirect(text, addr) {
                        Some(Redirect::Moved(slot, to)) => {
                            self.stats.moved += 1;
                            self.map.set(slot, &to);
                            moved.push((slot, to));
                            again.push(i);
                        }
                        Some(Redirect::Ask(to)) => {
                            self.stats.ask += 1;
                            ask[i] = Some(to);
                            again.push(i);
                        }
                        Some(Redirect::TryAgain) => {
                            self.stats.tryagain += 1;
                            wait = true;
                            again.push(i);
                        }
                        None => {}
                    }
                }
                out[i] = Some(reply);
            }
        }
        // Retried in the pipeline's order.
        again.sort_unstable();
        Ok((again, wait))
    }

    /// The node for a command routed by `slot` (any node when keyless or
    /// unserved: it answers with the redirection or the error).
    fn node_for(&self, slot: Option<u16>) -> Result<String> {
        slot.and_then(|s| self.map.node(s))
            .or_else(|| self.map.nodes.first().map(|s| s.as_str()))
            .or_else(|| self.seeds.first().map(|s| s.as_str()))
            .map(str::to_string)
            .ok_or_else(|| Error::Protocol("no cluster node known".into()))
    }
}

/// Each queued command's bytes in the pipeline and its routing slot.
fn split(p: &Pipeline) -> Result<Vec<(Range<usize>, Option<u16>)>> {
    let mut v = Vec::with_capacity(p.n);
    let mut pos = 0;
    while pos < p.buf.len() {
        let (f, used) = resp::parse_frame(&p.buf[pos..])?
            .ok_or_else(|| Error::Protocol("incomplete command in pipeline".into()))?;
        let Frame::Array(Some(items)) = f else {
            return Err(Error::Protocol("a pipelined command is not an array".into()));
        };
        let args: Vec<&[u8]> = items
            .iter()
            .map(|a| match a {
                Frame::Bulk(Some(b)) => b.as_slice(),
                _ => b"",
            })
            .collect();
        v.push((pos..pos + used, command_slot(&args)));
        pos += used;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Some(s.as_bytes().to_vec()))
    }

    #[test]
    fn slot_map_from_cluster_slots() {
        let node = |host: &str, port: i64| {
            Frame::Array(Some(vec![bulk(host), Frame::Integer(port), bulk("id")]))
        };
        let range = |lo, hi, m| Frame::Array(Some(vec![Frame::Integer(lo), Frame::Integer(hi), m]));
        let reply = Frame::Array(Some(vec![
            range(5461, 10922, node("10.0.0.2", 7001)),
            range(0, 5460, node("", 7000)),
            range(10923, 16383, node("10.0.0.3", 7002)),
        ]));
        let m = SlotMap::from_cluster_slots(&reply, "10.0.0.1:7000").unwrap();
        assert_eq!(m.nodes(), ["10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.3:7002"]);
        assert_eq!(m.node(0), Some("10.0.0.1:7000"));
        assert_eq!(m.node(5461), Some("10.0.0.2:7001"));
        assert_eq!(m.node(16383), Some("10.0.0.3:7002"));
        assert_eq!(m.node(16384), None);
    }

    #[test]
    fn redirections_parse_as_redis_sends_them() {
        let from = "127.0.0.1:7000";
        assert!(matches!(redirect("MOVED 3999 127.0.0.1:6381", from),
            Some(Redirect::Moved(3999, a)) if a == "127.0.0.1:6381"));
        assert!(matches!(redirect("ASK 3999 :6381", from),
            Some(Redirect::Ask(a)) if a == "127.0.0.1:6381"));
        assert!(matches!(
            redirect("TRYAGAIN Multiple keys request during rehashing of slot", from),
            Some(Redirect::TryAgain)
        ));
        assert!(redirect("CROSSSLOT Keys in request don't hash to the same slot", from).is_none());
        assert!(redirect("CLUSTERDOWN The cluster is down", from).is_none());
    }
}
