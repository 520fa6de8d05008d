//! The server's side of cluster mode: turning it on at start-up (the
//! engine's state, `nodes.conf`) and the cluster's own thread, which
//! runs its cron every 100 ms (the health, saving `nodes.conf` after a
//! change) off the event loops, since saving syncs a file, and the
//! cluster bus's (`bus.rs`: links, handshakes, pings).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use engine::subsystems::cluster;
use engine::subsystems::log;
use engine::Shared;

/// Turns cluster mode on when configured (the error is Redis's exit
/// line), and starts the cluster thread.
pub fn start(shared: &Arc<Shared>, port: u16) -> Result<(), String> {
    cluster::enable(shared, port)?;
    if shared.cluster.get().is_none() {
        return Ok(());
    }
    let links = Arc::new(super::bus::Links::default());
    let (binds, cport) = {
        let c = shared.config.read();
        let me = shared.cluster.get().map_or(0, |c| c.state.read().me().cport);
        (c.bind.clone(), me)
    };
    // The bus listens where clients do (Redis binds both to `bind`).
    for b in binds.iter().map(|b| b.trim_start_matches('-')) {
        let ip = if b == "*" { "0.0.0.0" } else { b };
        let Ok(ip) = ip.parse::<std::net::IpAddr>() else { continue };
        super::bus::listen(shared, &links, std::net::SocketAddr::new(ip, cport))
            .map_err(|e| format!("Could not bind the cluster bus port {cport} on {ip}: {e}"))?;
    }
    let weak = Arc::downgrade(shared);
    log::spawn("cluster", move || loop {
        std::thread::sleep(Duration::from_millis(100));
        let Some(sh) = weak.upgrade() else { return };
        if sh.shutdown.load(Ordering::Acquire) {
            // Redis saves the cluster state on its way out.
            if let Some(c) = sh.cluster.get() {
                c.save_if_changed();
            }
            return;
        }
        cluster::cron(&sh);
        let timeout = {
            let c = sh.config.read();
            String::from_utf8_lossy(&c.get_by_name("cluster-node-timeout").unwrap_or_default())
                .parse()
                .unwrap_or(15000)
        };
        super::bus::cron(&sh, &links, timeout);
    })
    .map_err(|e| format!("Can't start the cluster thread: {e}"))?;
    Ok(())
}
