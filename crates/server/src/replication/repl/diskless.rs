//! A diskless full sync shared by the replicas that wait for it together,
//! as Redis's one RDB child writes to every waiting replica's socket: the
//! first replica to ask leads, waits out `repl-diskless-sync-delay` (cut
//! short once `repl-diskless-sync-max-replicas` wait), then takes every
//! replica that joined meanwhile and writes one snapshot to all their
//! sockets. A replica that arrives once that snapshot began waits for the
//! next one (snapshots are made one at a time), as in Redis.

use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::core::effects::StreamWriter;
use engine::subsystems::log;
use engine::subsystems::snapshot::Snapshots;
use engine::Shared;

use super::{conf_num, random_hex, Master, ReplSnapshot, Replica};

/// The replicas waiting for the next diskless snapshot.
#[derive(Default)]
pub(super) struct Batches {
    waiting: Vec<Member>,
    /// A replica leads the waiting ones (it waits out the delay).
    led: bool,
    /// Finished syncs' outcomes, by replica id, until each collects its own.
    done: Vec<(u64, Result<(), String>)>,
}

struct Member {
    r: Arc<Replica>,
    /// Asked with PSYNC: the payload follows `+FULLRESYNC` (not with SYNC).
    psync: bool,
}

/// Sends replica `r` a snapshot's payload, with any others waiting at the
/// same time; returns once its payload went out (or failed).
pub(super) fn sync(
    sh: &Shared,
    m: &Master,
    r: &Arc<Replica>,
    psync: bool,
    snaps: &Arc<dyn Snapshots>,
) -> Result<(), String> {
    let lead = {
        let mut b = m.diskless.lock();
        b.waiting.push(Member { r: r.clone(), psync });
        !std::mem::replace(&mut b.led, true)
    };
    if !lead {
        // The leader always reports for every replica it took.
        let mut b = m.diskless.lock();
        loop {
            if let Some(i) = b.done.iter().position(|(id, _)| *id == r.id) {
                return b.done.swap_remove(i).1;
            }
            m.diskless_done.wait_for(&mut b, Duration::from_millis(100));
        }
    }
    let until = Instant::now()
        + Duration::from_secs(conf_num(sh, "repl-diskless-sync-delay").max(0) as u64);
    let max = conf_num(sh, "repl-diskless-sync-max-replicas");
    while Instant::now() < until {
        let waiting = m.diskless.lock().waiting.len();
        if (max > 0 && waiting as i64 >= max) || r.handle.killed.load(Ordering::Acquire) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let members = {
        let mut b = m.diskless.lock();
        b.led = false;
        std::mem::take(&mut b.waiting)
    };
    let outcomes = send(sh, m, &members, snaps);
    let mine = {
        let mut b = m.diskless.lock();
        let mut mine = Err("not sent".to_string());
        for (mem, res) in members.iter().zip(outcomes) {
            if mem.r.id == r.id {
                mine = res;
            } else {
                b.done.push((mem.r.id, res));
            }
        }
        mine
    };
    m.diskless_done.notify_all();
    mine
}

/// One snapshot to every member's socket; each member's outcome.
fn send(
    sh: &Shared,
    m: &Master,
    members: &[Member],
    snaps: &Arc<dyn Snapshots>,
) -> Vec<Result<(), String>> {
    log::notice("Starting BGSAVE for SYNC with target: replicas sockets");
    // Redis names its child here; the snapshot is made by this process.
    log::notice(&format!("Background RDB transfer started by pid {}", std::process::id()));
    let place = AtomicI64::new(-1);
    let mut at_instant = || {
        let mut g = m.inner.lock();
        let off = g.offset;
        // A replica's database after loading is 0: the stream selects
        // again before its next command (Redis's slaveseldb = -1).
        g.writer = StreamWriter::default();
        for s in g.replicas.iter_mut() {
            if members.iter().any(|mem| mem.r.id == s.r.id) {
                s.sent = Some(off);
            }
        }
        place.store(off, Ordering::Relaxed);
    };
    // One background snapshot, where Redis forks (INFO's total_forks).
    sh.persist.background_jobs.fetch_add(1, Ordering::Relaxed);
    // The members stay `wait_bgsave` until the payload is out, as
    // Redis's replicas of a diskless child do (WAIT_BGSAVE_END).
    let snapshotting = ReplSnapshot::start(sh);
    let mark = random_hex();
    let mut fan = Fan {
        sh,
        m,
        members,
        failed: vec![None; members.len()],
        started: false,
        place: &place,
        mark: &mark,
    };
    let res = snaps.snapshot_to(&mut fan, &mut at_instant);
    drop(snapshotting);
    let res = res.and_then(|()| fan.start().map_err(|e| e.to_string()));
    if res.is_ok() {
        fan.each(mark.as_bytes());
        let up = fan.failed.iter().filter(|f| f.is_none()).count();
        log::notice(&format!(
            "Diskless rdb transfer, done reading from pipe, {up} replicas still up."
        ));
    } else if let Err(e) = &res {
        log::warning(&format!("Background RDB transfer terminated: {e}"));
    }
    // The stream that follows is written with `repl-timeout` again.
    let timeout = Duration::from_secs(conf_num(sh, "repl-timeout").max(1) as u64);
    for mem in members {
        let _ = mem.r.sock.set_write_timeout(Some(timeout));
    }
    let Fan { failed, .. } = fan;
    members
        .iter()
        .zip(failed)
        .map(|(mem, failed)| {
            let res = match (&res, failed) {
                (_, Some(e)) => Err(e),
                (Err(e), None) => Err(e.clone()),
                (Ok(()), None) => Ok(()),
            };
            if res.is_ok() {
                let started = mem.r.online();
                // The replica may read past the mark into its payload
                // file: the stream waits for its first ACK (Redis's
                // repl_start_cmd_stream_on_ack).
                log::notice(&format!(
                    "Streamed RDB transfer with replica {} succeeded (socket). Waiting for \
                     REPLCONF ACK from replica to enable streaming",
                    mem.r.name
                ));
                if started {
                    log::notice(&format!("Synchronization with replica {} succeeded", mem.r.name));
                    // Its sender waits for the stream to flow.
                    m.grown.notify_all();
                }
            }
            res
        })
        .collect()
}

/// The payload's writer: every member's socket, each preceded by its
/// preamble (`+FULLRESYNC <id> <offset>` for PSYNC, `$EOF:<mark>`); a
/// member whose socket fails is dropped and the others go on.
struct Fan<'a> {
    sh: &'a Shared,
    m: &'a Master,
    members: &'a [Member],
    failed: Vec<Option<String>>,
    started: bool,
    place: &'a AtomicI64,
    mark: &'a str,
}

impl Fan<'_> {
    fn start(&mut self) -> std::io::Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        let replid = self.m.inner.lock().replid.clone();
        let off = self.place.load(Ordering::Relaxed);
        for (i, mem) in self.members.iter().enumerate() {
            let mut head = Vec::new();
            if mem.psync {
                head.extend_from_slice(format!("+FULLRESYNC {replid} {off}\r\n").as_bytes());
            }
            head.extend_from_slice(format!("$EOF:{}\r\n", self.mark).as_bytes());
            // Short waits, so that a replica that stops reading is timed
            // out by the `repl-timeout` in force (`write_to`).
            let _ = mem.r.sock.set_write_timeout(Some(Duration::from_millis(100)));
            self.write_to(i, &head);
        }
        self.live()
    }

    /// Writes `b` to every member still connected.
    fn each(&mut self, b: &[u8]) {
        for i in 0..self.members.len() {
            self.write_to(i, b);
        }
    }

    /// Writes `b` to member `i` unless it is gone already. A member that
    /// takes no byte for `repl-timeout` is dropped, as Redis drops a
    /// diskless replica whose last partial write is that old; when the
    /// last one goes, the snapshot stops (`live`).
    fn write_to(&mut self, i: usize, b: &[u8]) {
        if self.failed[i].is_some() {
            return;
        }
        let r = &self.members[i].r;
        let mut off = 0;
        let mut last = Instant::now();
        let res = loop {
            if off == b.len() {
                break Ok(());
            }
            if r.handle.killed.load(Ordering::Acquire) {
                break Err("connection closed".to_string());
            }
            match (&r.sock).write(&b[off..]) {
                Ok(0) => break Err("connection closed".to_string()),
                Ok(n) => {
                    off += n;
                    last = Instant::now();
                }
                Err(e) if crate::replication::follow::is_timeout(&e) => {
                    let timeout = conf_num(self.sh, "repl-timeout").max(1) as u64;
                    if last.elapsed() > Duration::from_secs(timeout) {
                        log::warning(&format!(
                            "Disconnecting timedout replica (full sync): {}",
                            r.name
                        ));
                        r.kill();
                        break Err("timeout".to_string());
                    }
                }
                Err(e) => break Err(e.to_string()),
            }
        };
        if let Err(e) = res {
            self.failed[i] = Some(e);
            if self.failed.iter().all(Option::is_some) {
                log::warning("Diskless rdb transfer, last replica dropped, killing fork child.");
            }
        }
    }

    /// An error once no member is left: the snapshot stops.
    fn live(&self) -> std::io::Result<()> {
        if self.failed.iter().all(Option::is_some) {
            return Err(std::io::Error::other("every replica's connection failed"));
        }
        Ok(())
    }
}

impl Write for Fan<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.start()?;
        self.each(b);
        self.live()?;
        Ok(b.len())
    }

    /// The snapshot flushes once its instant is taken: the preambles go
    /// out then, as Redis answers `+FULLRESYNC` when its child starts, so
    /// replicas reach their `sync` state while a slow payload is made.
    fn flush(&mut self) -> std::io::Result<()> {
        self.start()
    }
}
