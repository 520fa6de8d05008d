//! `nodes.conf` (`cluster-config-file`), as Redis 7.0 writes and reads it:
//! one `CLUSTER NODES` line per known node (handshakes left out), then
//! `vars currentEpoch <n> lastVoteEpoch <n>`. A file Redis wrote loads
//! here and the reverse, so a node can move between the two servers.

use super::{flag, Moving, Node, NodeId, State, SLOTS};

/// The file's text for `st`.
pub fn render(st: &State) -> String {
    let mut s = st.nodes_text(true);
    s.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}\n",
        st.current_epoch, st.last_vote_epoch
    ));
    s
}

/// Writes the file whole: a temporary file beside it, synced, then
/// renamed over it, so a crash leaves the old file or the new one.
pub fn write(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp-sluice");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Redis's words for a file it cannot use.
const CORRUPT: &str = "Unrecoverable error: corrupted cluster config file.";

fn node_id(s: &str) -> Result<NodeId, String> {
    let b = s.as_bytes();
    if b.len() != 40 || !b.iter().all(|c| c.is_ascii_hexdigit()) {
        return Err(CORRUPT.into());
    }
    let mut id = [0u8; 40];
    id.copy_from_slice(b);
    Ok(id)
}

/// Reads a file's text into a state. The error is Redis's line.
pub fn parse(bytes: &[u8]) -> Result<State, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| CORRUPT.to_string())?;
    let mut st: Option<State> = None;
    // Nodes in file order, their slot fields and flags (resolved once
    // every node is known: a slot field may name a later node).
    let mut lines: Vec<(Node, Vec<String>)> = Vec::new();
    let (mut current, mut vote) = (0u64, 0u64);
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        if f.is_empty() {
            continue;
        }
        if f[0] == "vars" {
            let mut i = 1;
            while i + 1 < f.len() {
                let v: u64 = f[i + 1].parse().map_err(|_| CORRUPT.to_string())?;
                match f[i] {
                    "currentEpoch" => current = v,
                    "lastVoteEpoch" => vote = v,
                    _ => return Err(CORRUPT.into()),
                }
                i += 2;
            }
            continue;
        }
        if f.len() < 8 {
            return Err(CORRUPT.into());
        }
        let mut n = Node::new(node_id(f[0])?, 0);
        let (addr, hostname) = f[1].split_once(',').unwrap_or((f[1], ""));
        n.hostname = hostname.to_string();
        let (hostport, cport) = addr.split_once('@').unwrap_or((addr, ""));
        let (ip, port) = hostport.rsplit_once(':').ok_or_else(|| CORRUPT.to_string())?;
        n.ip = ip.to_string();
        n.port = port.parse().map_err(|_| CORRUPT.to_string())?;
        n.cport = if cport.is_empty() {
            n.port.wrapping_add(10000)
        } else {
            cport.parse().map_err(|_| CORRUPT.to_string())?
        };
        for w in f[2].split(',') {
            n.flags |= match w {
                "myself" => flag::MYSELF,
                "master" => flag::MASTER,
                "slave" => flag::SLAVE,
                "fail?" => flag::PFAIL,
                "fail" => flag::FAIL,
                "handshake" => flag::HANDSHAKE,
                "noaddr" => flag::NOADDR,
                "nofailover" => flag::NOFAILOVER,
                "noflags" => 0,
                _ => return Err(CORRUPT.into()),
            };
        }
        if f[3] != "-" {
            n.master = Some(node_id(f[3])?);
        }
        // Redis keeps the times it read only when they are set; a link is
        // never up when the file is read.
        n.ping_sent = f[4].parse().map_err(|_| CORRUPT.to_string())?;
        n.pong_received = f[5].parse().map_err(|_| CORRUPT.to_string())?;
        n.config_epoch = f[6].parse().map_err(|_| CORRUPT.to_string())?;
        let slots = f[8..].iter().map(|s| s.to_string()).collect();
        if n.flags & flag::MYSELF != 0 {
            if st.is_some() {
                return Err(CORRUPT.into());
            }
            st = Some(State::fresh(n.id));
        }
        lines.push((n, slots));
    }
    let mut st = st.ok_or_else(|| CORRUPT.to_string())?;
    let mut order = Vec::with_capacity(lines.len());
    for (n, _) in &lines {
        let i = if n.flags & flag::MYSELF != 0 {
            let me = st.myself;
            let keep = st.nodes[me].numslots;
            st.nodes[me] = Node { numslots: keep, ..n.clone() };
            me
        } else {
            st.add(n.clone())
        };
        order.push(i);
    }
    for ((_, slots), &i) in lines.iter().zip(&order) {
        for s in slots {
            if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                let (slot, dir, other) = if let Some((a, b)) = inner.split_once("->-") {
                    (a, true, b)
                } else if let Some((a, b)) = inner.split_once("-<-") {
                    (a, false, b)
                } else {
                    return Err(CORRUPT.into());
                };
                let slot: u16 = slot.parse().map_err(|_| CORRUPT.to_string())?;
                let other = st.find(other.as_bytes()).ok_or_else(|| CORRUPT.to_string())?;
                if slot as usize >= SLOTS {
                    return Err(CORRUPT.into());
                }
                let m = if dir { Moving::To(other as u16) } else { Moving::From(other as u16) };
                st.moving.insert(slot, m);
                continue;
            }
            let (a, b) = s.split_once('-').unwrap_or((s, s));
            let a: u16 = a.parse().map_err(|_| CORRUPT.to_string())?;
            let b: u16 = b.parse().map_err(|_| CORRUPT.to_string())?;
            if a > b || b as usize >= SLOTS {
                return Err(CORRUPT.into());
            }
            for slot in a..=b {
                st.set_owner(slot, Some(i));
            }
        }
    }
    st.current_epoch = current;
    st.last_vote_epoch = vote;
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file redis-server 7.0.15 wrote (a 3-master cluster, one
    /// replica, a slot being migrated), read and written back unchanged.
    #[test]
    fn a_file_redis_wrote_round_trips() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let c = "c".repeat(40);
        let text = format!(
            "{b} 127.0.0.1:7002@17002 master - 0 1700000000000 2 connected 5461-10922\n\
             {a} 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 [5461-<-{b}]\n\
             {c} 127.0.0.1:7003@17003,host3 slave {a} 0 1700000000001 1 connected\n\
             vars currentEpoch 3 lastVoteEpoch 0\n"
        );
        let st = parse(text.as_bytes()).unwrap();
        assert_eq!(st.me().name(), a);
        assert_eq!(st.current_epoch, 3);
        assert_eq!(st.ranges_of(st.myself), vec![(0, 5460)]);
        assert_eq!(st.moving.get(&5461), Some(&Moving::From(1)));
        assert_eq!(st.nodes[2].hostname, "host3");
        // Rendered in the state's order (myself first, as loaded).
        let again = parse(render(&st).as_bytes()).unwrap();
        assert_eq!(render(&again), render(&st));
        assert!(render(&st).contains(&format!("{c} 127.0.0.1:7003@17003,host3 slave {a} ")));
    }

    #[test]
    fn a_file_without_myself_is_refused_as_redis_refuses_it() {
        let b = "b".repeat(40);
        let text = format!("{b} 127.0.0.1:7002@17002 master - 0 0 2 connected\n");
        assert_eq!(parse(text.as_bytes()).err().unwrap(), CORRUPT);
        assert_eq!(parse(b"garbage here\n").err().unwrap(), CORRUPT);
    }
}
