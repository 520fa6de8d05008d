//! The server's side of cluster mode: turning it on at start-up (the
//! engine's state, `nodes.conf`), the cluster's own thread, which runs
//! its cron every 100 ms (the health, saving `nodes.conf` after a change,
//! the bus's links, pings, failure detection and elections) off the event
//! loops, since saving syncs a file, and the engine's [`Bus`] seam (what
//! `CLUSTER FAILOVER`, `PUBLISH`/`SPUBLISH` and `DEBUG CLUSTERLINK` ask of
//! the bus).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use engine::subsystems::cluster::{self, flag, Bus, NodeId};
use engine::subsystems::log;
use engine::Shared;

use super::bus::{self, wire, Links};

/// The engine's handle on the bus.
struct Handle {
    shared: Weak<Shared>,
    links: Arc<Links>,
}

impl Bus for Handle {
    fn manual_failover(&self, force: bool, takeover: bool) {
        if let Some(sh) = self.shared.upgrade() {
            bus::manual_failover(&sh, &self.links, force, takeover);
        }
    }

    fn publish(&self, shard: bool, channel: &[u8], message: &[u8]) {
        let Some(sh) = self.shared.upgrade() else { return };
        let Some(c) = sh.cluster.get() else { return };
        let offset = bus::my_offset(&sh);
        let mut targets = Vec::new();
        let msg = {
            let mut st = c.state.write();
            let me = st.me();
            // A shard: its master and the master's replicas.
            let master = if me.is_master() { Some(me.id) } else { me.master };
            for (i, n) in st.nodes.iter().enumerate() {
                if i == st.myself || n.link == 0 || n.flags & flag::HANDSHAKE != 0 {
                    continue;
                }
                if !shard || Some(n.id) == master || (n.master == master && master.is_some()) {
                    targets.push(n.link);
                }
            }
            let typ = if shard { wire::PUBLISHSHARD } else { wire::PUBLISH };
            st.sent[typ as usize] += targets.len() as u64;
            wire::publish(&st, typ, offset, channel, message)
        };
        for l in targets {
            self.links.send(l, &msg);
        }
    }

    fn kill_links(&self, node: &NodeId, to: bool, from: bool) {
        let Some(sh) = self.shared.upgrade() else { return };
        let Some(c) = sh.cluster.get() else { return };
        let mut st = c.state.write();
        let Some(i) = st.find(node) else { return };
        let n = &mut st.nodes[i];
        if to && n.link != 0 {
            self.links.close(n.link);
            n.link = 0;
            n.connected = false;
        }
        if from && n.inbound != 0 {
            self.links.close(n.inbound);
            n.inbound = 0;
        }
    }
}

/// Turns cluster mode on when configured (the error is Redis's exit
/// line), and starts the cluster thread.
pub fn start(shared: &Arc<Shared>, port: u16) -> Result<(), String> {
    cluster::enable(shared, port)?;
    let Some(c) = shared.cluster.get() else { return Ok(()) };
    let links = Arc::new(Links::default());
    let (binds, cport) = {
        let cfg = shared.config.read();
        (cfg.bind.clone(), c.state.read().me().cport)
    };
    // The bus listens where clients do (Redis binds both to `bind`).
    for b in binds.iter().map(|b| b.trim_start_matches('-')) {
        let ip = if b == "*" { "0.0.0.0" } else { b };
        let Ok(ip) = ip.parse::<std::net::IpAddr>() else { continue };
        bus::listen(shared, &links, std::net::SocketAddr::new(ip, cport))
            .map_err(|e| format!("Could not bind the cluster bus port {cport} on {ip}: {e}"))?;
    }
    let handle = Handle { shared: Arc::downgrade(shared), links: links.clone() };
    let _ = c.bus.set(Arc::new(handle));
    let weak = Arc::downgrade(shared);
    log::spawn("cluster", move || {
        let period = Duration::from_millis(100);
        let mut next = std::time::Instant::now() + period;
        loop {
            let failover_due = links.sleep_until(next);
            let Some(sh) = weak.upgrade() else { return };
            if sh.shutdown.load(Ordering::Acquire) {
                // Redis saves the cluster state on its way out.
                if let Some(c) = sh.cluster.get() {
                    c.save_if_changed();
                }
                return;
            }
            if std::time::Instant::now() < next {
                // Woken between turns (a vote, a paused master's offset).
                if failover_due {
                    bus::handle_failover(&sh, &links);
                }
                continue;
            }
            next = std::time::Instant::now() + period;
            bus::cron(&sh, &links);
            cluster::cron(&sh);
        }
    })
    .map_err(|e| format!("Can't start the cluster thread: {e}"))?;
    Ok(())
}
