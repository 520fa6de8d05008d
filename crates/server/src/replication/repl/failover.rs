//! FAILOVER, master side (Redis 7.0's failoverCommand and
//! updateFailoverStatus): writes are held while the target replica (or,
//! without `TO`, the first one) catches up with the whole stream; then
//! this server follows it with `PSYNC <replid> <offset> FAILOVER`, which
//! makes the target a master, and writes are released once it answers.
//! A timeout aborts, or with `FORCE` hands over anyway; a refused PSYNC
//! aborts and this server is a master again.

use std::sync::atomic::Ordering;
use std::time::Duration;

use engine::core::shared::unix_ms;
use engine::subsystems::log;
use engine::subsystems::repl::FailoverRequest;
use engine::Shared;

use super::{Master, Slot, ONLINE};

/// A coordinated failover (FAILOVER): writes are held until the target
/// acknowledged everything, then this server follows it with `PSYNC …
/// FAILOVER`, which makes the target a master.
pub(super) struct Failover {
    /// The replica's announced address and listening port (for FAILOVER
    /// without TO: the first one found caught up).
    pub(super) target: Option<(String, i64)>,
    /// Unix ms of the TIMEOUT (0: none).
    pub(super) end_ms: i64,
    pub(super) force: bool,
    /// Handing over (`failover-in-progress`): following the target.
    pub(super) in_progress: bool,
}

/// FAILOVER's progress (Redis's updateFailoverStatus) and its end.
impl Master {
    /// FAILOVER: Redis's checks in its order, then writes are held and a
    /// thread watches for the target to catch up.
    pub(super) fn start_failover(&self, req: FailoverRequest, replica: bool) -> Result<(), String> {
        let Some(sh) = self.shared.upgrade() else { return Err("server is stopping".into()) };
        let mut f = self.failover.lock();
        if f.is_some() {
            return Err("FAILOVER already in progress.".into());
        }
        if replica {
            return Err("FAILOVER is not valid when server is a replica.".into());
        }
        {
            let g = self.inner.lock();
            if g.replicas.is_empty() {
                return Err("FAILOVER requires connected replicas.".into());
            }
            if req.force && (req.timeout_ms == 0 || req.target.is_none()) {
                return Err(
                    "FAILOVER with force option requires both a timeout and target HOST and IP."
                        .into(),
                );
            }
            if let Some((host, port)) = &req.target {
                let Some(s) = g.replicas.iter().find(|s| s.r.is_at(host, *port)) else {
                    return Err("FAILOVER target HOST and PORT is not a replica.".into());
                };
                if s.r.state.load(Ordering::Relaxed) != ONLINE {
                    return Err("FAILOVER target replica is not online.".into());
                }
                log::notice(&format!("FAILOVER requested to {host}:{port}."));
            } else {
                log::notice("FAILOVER requested to any replica.");
            }
        }
        let end_ms = if req.timeout_ms > 0 { unix_ms().saturating_add(req.timeout_ms) } else { 0 };
        *f = Some(Failover { target: req.target, end_ms, force: req.force, in_progress: false });
        drop(f);
        engine::subsystems::repl::hold_writes_for_failover(&sh, true);
        // Redis checks before every event-loop sleep: a thread of its own
        // checks every few milliseconds until it hands over or gives up.
        let Some(me) = self.me.upgrade() else { return Ok(()) };
        let spawned = log::spawn("repl-failover", move || {
            // Writes that passed the pause check before the hold finish
            // first, so the offset the target must reach is the held one.
            if let Some(sh) = me.shared.upgrade() {
                sh.quiesce(engine::core::shared::QUIESCE_LIMIT);
            }
            while me.failover_tick() {
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        if let Err(e) = spawned {
            log::warning(&format!("Can't start the failover: {e}"));
        }
        Ok(())
    }

    /// One check of a failover waiting for its target; `false` once it
    /// handed over or ended.
    fn failover_tick(&self) -> bool {
        let Some(sh) = self.shared.upgrade() else { return false };
        let mut f = self.failover.lock();
        let Some(fo) = f.as_mut() else { return false };
        if fo.in_progress {
            return false;
        }
        if fo.end_ms > 0 && unix_ms() >= fo.end_ms {
            if fo.force {
                let (host, port) = fo.target.clone().unwrap_or_default();
                log::notice(&format!("FAILOVER to {host}:{port} time out exceeded, failing over."));
                fo.in_progress = true;
                drop(f);
                self.hand_over(&sh, &host, port);
                return false;
            }
            drop(f);
            self.abort_failover_with("Replica never caught up before timeout");
            return false;
        }
        let caught_up = {
            let g = self.inner.lock();
            let synced = |s: &&Slot| s.r.ack_offset.load(Ordering::Relaxed) == g.offset;
            match &fo.target {
                Some((host, port)) => {
                    g.replicas.iter().find(|s| s.r.is_at(host, *port)).filter(synced).is_some()
                }
                None => match g.replicas.iter().find(synced) {
                    Some(s) => {
                        fo.target = Some((s.r.ip.clone(), i64::from(s.r.port)));
                        true
                    }
                    None => false,
                },
            }
        };
        if !caught_up {
            return true;
        }
        let (host, port) = fo.target.clone().unwrap_or_default();
        fo.in_progress = true;
        drop(f);
        log::notice(&format!("Failover target {host}:{port} is synced, failing over."));
        self.hand_over(&sh, &host, port);
        false
    }

    /// Follows the target, asking it with `PSYNC … FAILOVER` to take over.
    fn hand_over(&self, sh: &Shared, host: &str, port: i64) {
        let port = u16::try_from(port).unwrap_or(0);
        crate::host::node(sh).follower.follow_for_failover(host, port);
    }

    /// The target answered the failover's PSYNC: the failover is done.
    pub fn failover_done(&self) {
        if self.failover.lock().take().is_some() {
            if let Some(sh) = self.shared.upgrade() {
                engine::subsystems::repl::hold_writes_for_failover(&sh, false);
            }
        }
    }

    /// Whether this server is handing over to its target (its link sends
    /// `PSYNC … FAILOVER`).
    pub fn failover_in_progress(&self) -> bool {
        self.failover.lock().as_ref().is_some_and(|f| f.in_progress)
    }

    /// Ends a failover (Redis's abortFailover): back to a master if it
    /// had started to follow the target, writes released. `false` when
    /// none was in progress.
    pub fn abort_failover_with(&self, why: &str) -> bool {
        let Some(fo) = self.failover.lock().take() else { return false };
        match &fo.target {
            Some((host, port)) => log::notice(&format!("FAILOVER to {host}:{port} aborted: {why}")),
            None => log::notice(&format!("FAILOVER to any replica aborted: {why}")),
        }
        let Some(sh) = self.shared.upgrade() else { return true };
        if fo.in_progress {
            if let Some(f) = &sh.host.follow {
                f.promote();
            }
        }
        engine::subsystems::repl::hold_writes_for_failover(&sh, false);
        true
    }
}
