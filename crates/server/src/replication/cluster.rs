//! The server's side of cluster mode: turning it on at start-up (the
//! engine's state, `nodes.conf`) and the cluster's own thread, which
//! runs its cron every 100 ms (the health, saving `nodes.conf` after a
//! change) off the event loops, since saving syncs a file. The cluster
//! bus (MEET/PING/PONG and gossip on `cluster-port`) will run here too.

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
    })
    .map_err(|e| format!("Can't start the cluster thread: {e}"))?;
    Ok(())
}
