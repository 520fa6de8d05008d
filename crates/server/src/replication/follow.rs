//! Replication, replica side: Sluice following a master (`REPLICAOF host
//! port`, `replicaof` in the configuration, `--replicaof`), as a Redis 7.0
//! replica does.
//!
//! One thread per link, off the event loops: it connects, handshakes
//! (`PING`, `AUTH` with `masterauth`/`masteruser`, `REPLCONF
//! listening-port`, `REPLCONF capa eof capa psync2`, `PSYNC`), reads a
//! full resynchronisation's RDB payload (`$<len>` or the diskless
//! `$EOF:<mark>` form) into a temporary file in `dir`, as Redis does,
//! flushes the data set and loads the file with the RDB loader as it reads
//! it (with `repl-diskless-load`, the payload is parsed as it arrives
//! instead, at the pace its keys load, and the parsed keys are stored once
//! it is whole), then applies the stream as the master client: each
//! command through `dispatch::replay`, as the AOF loader does, so stripes,
//! locks, blocked clients and the effects record (a replica's own AOF)
//! behave as for any write. Nothing is answered to the master but
//! `REPLCONF GETACK` (with `REPLCONF ACK <offset>`); an ACK also goes out
//! as soon as a read of the stream is applied (a master holding a
//! `DURABLE` client's replies waits for it), and every second. While the
//! AOF is on, the ACK carries Redis 7.2's `FACK <offset>`: the stream
//! offset whose writes the AOF fsynced (WAITAOF). `+CONTINUE` after a reconnect keeps the data and the
//! offset. A dropped link is retried with a backoff (100 ms doubling to
//! one second, Redis retries each second).
//!
//! While following, the store is a replica's ([`store::Store::set_replica`]):
//! no key is deleted for its deadline (clients read such keys as missing,
//! the stream still sees them), active expiry and the job queue's timers
//! do not run, and with `replica-read-only yes` clients' writes get
//! `-READONLY`. The master's `DEL`s, `DELJOB`s and `LOADJOB`s bring the
//! changes.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use engine::core::dispatch;
use engine::core::shared::unix_ms;
use engine::subsystems::log;
use engine::subsystems::repl::{Follow, FollowView};
use engine::{Session, Shared};
use parking_lot::Mutex;
use resp::{ArgBuf, Limits, Parsed, ReplyBuf};

use crate::persistence;
use crate::repl;

/// The replica side, handed to the engine as `Host::follow`.
pub struct Follower {
    /// Itself, for the link thread it starts from `&self`.
    me: Weak<Follower>,
    shared: Weak<Shared>,
    st: Mutex<State>,
    /// Held while the stream (or a payload) is applied: a promotion or a
    /// new master waits for the command in progress, and none runs after.
    apply: Mutex<()>,
    /// Stream offsets: bytes read, and applied (outside a transaction).
    read_off: AtomicI64,
    applied_off: AtomicI64,
    /// Unix seconds of the master's last byte.
    last_io: AtomicI64,
}

struct State {
    target: Option<(String, u16)>,
    /// Bumped by every REPLICAOF: a link thread of another generation
    /// stops.
    gen: u64,
    state: &'static str,
    /// The link is up (Redis's `server.master` exists).
    linked: bool,
    down_since: i64,
    /// (total or -1, read, unix seconds of the last read) during a
    /// payload.
    transfer: Option<(i64, i64, i64)>,
    /// The socket of the current link, to cut it from REPLICAOF.
    sock: Option<TcpStream>,
    /// The data set is a known point of the stream (`master_replid`,
    /// `applied_off`): a partial resynchronisation can be asked.
    has_position: bool,
    /// The master client's session, kept across a partial
    /// resynchronisation (its selected database).
    session: Option<Session>,
    /// This server is handing over to the master it follows (its
    /// FAILOVER): the PSYNC says `FAILOVER`.
    failover: bool,
}

/// The replica side of a server being built.
pub fn new(shared: &Weak<Shared>) -> Arc<Follower> {
    Arc::new_cyclic(|me| Follower {
        me: me.clone(),
        shared: shared.clone(),
        st: Mutex::new(State {
            target: None,
            gen: 0,
            state: "connect",
            linked: false,
            down_since: 0,
            transfer: None,
            sock: None,
            has_position: false,
            session: None,
            failover: false,
        }),
        apply: Mutex::new(()),
        read_off: AtomicI64::new(1),
        applied_off: AtomicI64::new(1),
        last_io: AtomicI64::new(0),
    })
}

impl Follower {
    /// `replicaof` from the configuration: follows once the data set on
    /// disk is loaded, with no position of its own (`PSYNC ? -1`).
    pub fn start_from_config(self: &Arc<Self>, host: &str, port: u16) {
        self.start(host, port, false, false);
    }

    /// A restart from an RDB file that recorded the master's id and
    /// offset (set on the master side) and the stream's database: the
    /// link asks for a partial resync from there (Redis's cached master
    /// from the RDB's save info).
    pub fn restore_position(&self, sh: &Shared, db: usize, offset: i64) {
        self.read_off.store(offset, Ordering::Relaxed);
        self.applied_off.store(offset, Ordering::Relaxed);
        let mut sess = Session::detached(u64::MAX);
        if db < sh.store.databases() {
            select_quietly(&mut sess, db);
        }
        let mut st = self.st.lock();
        st.has_position = true;
        st.session = Some(sess);
    }

    /// FAILOVER hands over: this master follows its target, and asks it
    /// with `PSYNC <replid> <offset> FAILOVER` to become the master.
    pub fn follow_for_failover(self: &Arc<Self>, host: &str, port: u16) {
        self.start(host, port, true, true);
    }

    fn start(self: &Arc<Self>, host: &str, port: u16, from_master: bool, failover: bool) -> bool {
        let Some(sh) = self.shared.upgrade() else { return false };
        let _apply = self.hold_apply();
        let mut st = self.st.lock();
        if st.target.as_ref().is_some_and(|(h, p)| h.eq_ignore_ascii_case(host) && *p == port) {
            return false;
        }
        let was_master = st.target.is_none();
        st.gen += 1;
        if let Some(s) = st.sock.take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        st.target = Some((host.to_string(), port));
        st.failover = failover;
        st.state = "connect";
        st.linked = false;
        st.transfer = None;
        if was_master {
            sh.host.log.set_role(b'S');
            sh.store.set_replica(true);
            engine::subsystems::config::set_oom_role(&sh.oom, &sh.config.read(), true);
            sh.state_changed();
            if let Some(m) = repl::master(&sh) {
                m.become_replica();
                if from_master {
                    // As Redis's replicationCacheMasterUsingMyself.
                    log::notice(
                        "Before turning into a replica, using my own master parameters to \
                         synthesize a cached master: I may be able to synchronize with the new \
                         master with just a partial transfer.",
                    );
                    let (_, off) = m.position();
                    self.read_off.store(off, Ordering::Relaxed);
                    self.applied_off.store(off, Ordering::Relaxed);
                    st.has_position = true;
                    st.session = None;
                }
            }
        }
        // A replica that changes masters keeps its own replicas, as Redis
        // 7.0's replicationSetMaster does: they go when the history
        // changes (a full sync's payload is about to load, or a partial
        // one gives a new replication id), not before.
        let gen = st.gen;
        drop(st);
        // Redis's replicationSetMaster: clients blocked here (on keys, on
        // WAIT) are told the instance changed and let go.
        engine::core::blocking::refuse_all_for_replica(&sh);
        log::notice(&format!("Connecting to MASTER {host}:{port}"));
        let me = self.clone();
        // On the main thread if it is free: what `kill -STOP` stops first.
        let spawned = crate::main_thread::spawn("repl-follow", move || me.run(gen));
        if let Err(e) = spawned {
            log::warning(&format!("Can't start the replication link: {e}"));
        }
        true
    }

    /// Waits for the stream command in progress before REPLICAOF changes
    /// the link. Bounded: a client in EXEC holds stripes that command may
    /// wait for (`MULTI … REPLICAOF NO ONE … EXEC`); after the bound the
    /// generation check between commands still stops the link.
    fn hold_apply(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.apply.try_lock_for(Duration::from_secs(2))
    }

    fn current(&self, gen: u64) -> bool {
        self.st.lock().gen == gen
    }

    /// The link thread: sessions with the master until REPLICAOF changes.
    fn run(self: Arc<Self>, gen: u64) {
        let Some(sh) = self.shared.upgrade() else { return };
        // Start-up: the data set on disk loads first.
        while sh.is_loading() && self.current(gen) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut backoff = Duration::from_millis(100);
        // Redis reconnects from its once-a-second replicationCron: after
        // the first quick retries, so does the link, on a 1 s tick of its
        // own (a failed sync waits half a second on average, not a whole).
        let cron = Instant::now();
        while self.current(gen) {
            log::notice("MASTER <-> REPLICA sync started");
            let res = self.session(&sh, gen);
            let mut st = self.st.lock();
            if st.gen != gen {
                return;
            }
            st.sock = None;
            // A sync that failed while its payload was coming is tried
            // again at once, as Redis's readSyncBulkPayload does
            // (cancelReplicationHandshake with reconnect): the master
            // serves the next attempt without waiting for a retry tick.
            let in_transfer = st.transfer.take().is_some() && res.is_err();
            let target = st.target.clone();
            st.state = "connect";
            if st.linked {
                st.linked = false;
                st.down_since = unix_ms() / 1000;
                backoff = Duration::from_millis(100);
                log::warning("Connection with master lost.");
                log::notice("Caching the disconnected master state.");
            }
            drop(st);
            if let Err(e) = res {
                log::warning(&e);
            }
            if let (true, Some((host, port))) = (in_transfer, target) {
                log::notice(&format!("Reconnecting to MASTER {host}:{port} after failure"));
                continue;
            }
            let wait = if backoff < Duration::from_secs(1) {
                backoff
            } else {
                let into = cron.elapsed().as_millis() as u64 % 1000;
                Duration::from_millis(1000 - into)
            };
            let until = Instant::now() + wait;
            while Instant::now() < until && self.current(gen) {
                std::thread::sleep(Duration::from_millis(20));
            }
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    /// One connection to the master, until it drops (`Err`: why) or
    /// REPLICAOF changes (`Ok`).
    fn session(&self, sh: &Arc<Shared>, gen: u64) -> Result<(), String> {
        let Some((host, port)) = self.st.lock().target.clone() else { return Ok(()) };
        let timeout = repl::conf_num(sh, "repl-timeout").max(1);
        {
            let mut st = self.st.lock();
            st.state = "connecting";
        }
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("Unable to connect to MASTER: can't resolve {host}"))?;
        let source = sh.config.read().get_by_name("bind-source-addr").unwrap_or_default();
        let sock = connect_from(&source, addr, Duration::from_secs(timeout as u64))
            .map_err(|e| format!("Error condition on socket for SYNC: {e}"))?;
        let _ = sock.set_nodelay(true);
        let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
        let _ = sock.set_write_timeout(Some(Duration::from_secs(timeout as u64)));
        {
            let mut st = self.st.lock();
            if st.gen != gen {
                return Ok(());
            }
            st.sock = sock.try_clone().ok();
            st.state = "handshake";
        }
        let mut link = Link { sock, buf: Vec::new(), timeout, gen };
        self.last_io.store(unix_ms() / 1000, Ordering::Relaxed);

        // The handshake, as Redis 7.0's syncWithMaster.
        link.send(&[b"PING"])?;
        let r = link.line(self)?;
        if r.starts_with(b"-")
            && !r.starts_with(b"-NOAUTH")
            && !r.starts_with(b"-NOPERM")
            && !r.starts_with(b"-ERR operation not permitted")
        {
            return Err(format!("Error reply to PING from master: '{}'", lossy(&r)));
        }
        log::notice("Master replied to PING, replication can continue...");
        let (auth, user) = {
            let c = sh.config.read();
            (c.masterauth.clone(), c.masteruser.clone())
        };
        if let Some(pass) = auth {
            if user.is_empty() {
                link.send(&[b"AUTH", &pass])?;
            } else {
                link.send(&[b"AUTH", user.as_bytes(), &pass])?;
            }
            let r = link.line(self)?;
            if r.starts_with(b"-") {
                return Err(format!("Unable to AUTH to MASTER: {}", lossy(&r)));
            }
        }
        // What the master shows in its INFO: `replica-announce-port` and
        // `replica-announce-ip` when set, as Redis's replica sends them.
        let (announce_port, announce_ip) = {
            let c = sh.config.read();
            let port = c.get_by_name("replica-announce-port").unwrap_or_default();
            (port, c.get_by_name("replica-announce-ip").unwrap_or_default())
        };
        let port_s = match announce_port.as_slice() {
            b"0" | b"" => sh.port.load(Ordering::Relaxed).to_string(),
            p => String::from_utf8_lossy(p).into_owned(),
        };
        link.send(&[b"REPLCONF", b"listening-port", port_s.as_bytes()])?;
        let r = link.line(self)?;
        if r.starts_with(b"-") {
            log::notice(&format!(
                "(Non critical) Master does not understand REPLCONF listening-port: {}",
                lossy(&r)
            ));
        }
        if !announce_ip.is_empty() {
            link.send(&[b"REPLCONF", b"ip-address", &announce_ip])?;
            let r = link.line(self)?;
            if r.starts_with(b"-") {
                log::notice(&format!(
                    "(Non critical) Master does not understand REPLCONF ip-address: {}",
                    lossy(&r)
                ));
            }
        }
        link.send(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
        let r = link.line(self)?;
        if r.starts_with(b"-") {
            log::notice(&format!(
                "(Non critical) Master does not understand REPLCONF capa: {}",
                lossy(&r)
            ));
        }
        let (replid, want) = {
            let st = self.st.lock();
            match (st.has_position, repl::master(sh)) {
                (true, Some(m)) => (m.position().0, self.applied_off.load(Ordering::Relaxed) + 1),
                _ => ("?".to_string(), -1),
            }
        };
        if want > 0 {
            log::notice(&format!("Trying a partial resynchronization (request {replid}:{want})."));
        } else {
            log::notice("Partial resynchronization not possible (no cached master)");
        }
        let failover = self.st.lock().failover;
        let want_s = want.to_string();
        if failover {
            link.send(&[b"PSYNC", replid.as_bytes(), want_s.as_bytes(), b"FAILOVER"])?;
        } else {
            link.send(&[b"PSYNC", replid.as_bytes(), want_s.as_bytes()])?;
        }
        // A master preparing a full sync (its diskless delay) keeps the
        // link alive with empty lines before it answers.
        let r = loop {
            let l = link.line(self)?;
            if !l.is_empty() {
                break l;
            }
        };
        if failover {
            self.st.lock().failover = false;
            let accepted = r.starts_with(b"+FULLRESYNC") || r.starts_with(b"+CONTINUE");
            if let Some(m) = repl::master(sh) {
                if accepted {
                    m.failover_done();
                } else {
                    // Back to a master (this link ends with it).
                    m.abort_failover_with("Failover target rejected psync request");
                    return Err(format!("Failover target rejected psync: {}", lossy(&r)));
                }
            }
        }
        if let Some(rest) = r.strip_prefix(b"+FULLRESYNC") {
            let rest = lossy(rest);
            let mut it = rest.split_ascii_whitespace();
            let (Some(id), Some(off)) = (it.next(), it.next().and_then(|o| o.parse::<i64>().ok()))
            else {
                return Err(format!("Master replied with wrong +FULLRESYNC syntax: {rest}"));
            };
            if id.len() != 40 {
                return Err(format!("Master replied with wrong +FULLRESYNC syntax: {rest}"));
            }
            log::notice(&format!("Full resync from master: {id}:{off}"));
            self.full_sync(sh, &mut link, id, off)?;
        } else if let Some(rest) = r.strip_prefix(b"+CONTINUE") {
            let rest = lossy(rest);
            let new = rest.trim();
            log::notice("Successful partial resynchronization with master.");
            if let Some(m) = repl::master(sh) {
                if new.len() == 40 && m.position().0 != new {
                    m.shift_id(Some(new));
                    log::notice(&format!("Master replication ID changed to {new}"));
                    // Sub-replicas learn the new id by reconnecting.
                    m.disconnect_replicas();
                }
                // A restarted replica may have no backlog yet.
                m.start_relay(sh);
            }
            log::notice("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
        } else if r.starts_with(b"-NOMASTERLINK") || r.starts_with(b"-LOADING") {
            return Err(format!(
                "Master is currently unable to PSYNC but should be in the future: {}",
                lossy(&r)
            ));
        } else {
            return Err(format!("Unexpected reply to PSYNC from master: {}", lossy(&r)));
        }
        {
            let mut st = self.st.lock();
            if st.gen != gen {
                return Ok(());
            }
            st.state = "connected";
            st.linked = true;
            st.down_since = 0;
            st.transfer = None;
        }
        // The first ACK puts us online (a diskless master starts the
        // stream on it).
        link.ack(self.applied_off.load(Ordering::Relaxed), None)?;
        self.stream(sh, &mut link)
    }

    /// A full resynchronisation: the payload, then flush and load.
    fn full_sync(
        &self,
        sh: &Arc<Shared>,
        link: &mut Link,
        replid: &str,
        offset: i64,
    ) -> Result<(), String> {
        let now = unix_ms() / 1000;
        {
            let mut st = self.st.lock();
            st.state = "sync";
            st.transfer = Some((-1, 0, now));
        }
        // Newlines are the master's keep-alives while it prepares.
        let head = loop {
            let l = link.line(self)?;
            if !l.is_empty() {
                break l;
            }
        };
        if head.starts_with(b"-") {
            return Err(format!("MASTER aborted replication with an error: {}", lossy(&head)));
        }
        let Some(spec) = head.strip_prefix(b"$") else {
            return Err(format!(
                "Bad protocol from MASTER, the first byte is not '$' (we received '{}'), are you \
                 sure the host and port are right?",
                lossy(&head)
            ));
        };
        let load = Diskless::decide(sh, replid);
        let to = if load.is_some() { "to parser" } else { "to disk" };
        let mark = spec.strip_prefix(b"EOF:");
        let len = match mark {
            Some(mark) if mark.len() != 40 => {
                return Err(format!("Bad EOF mark from MASTER: '{}'", lossy(mark)));
            }
            Some(_) => {
                log::notice(&format!(
                    "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {to}"
                ));
                None
            }
            None => {
                let len = std::str::from_utf8(spec)
                    .ok()
                    .and_then(|s| s.parse::<usize>().ok())
                    .ok_or_else(|| format!("Bad payload length from MASTER: '{}'", lossy(spec)))?;
                log::notice(&format!(
                    "MASTER <-> REPLICA sync: receiving {len} bytes from master {to}"
                ));
                if let Some(t) = self.st.lock().transfer.as_mut() {
                    t.0 = len as i64;
                }
                Some(len)
            }
        };
        // With repl-diskless-load the load starts with the transfer, as
        // Redis's: the server is loading (or, loading asynchronously,
        // serves the old data) until the payload is in, and a payload cut
        // short fails the load and leaves the old data in place.
        let loading = load.map(|d| d.start(sh));
        let payload = if load.is_some() {
            match link.parse_payload(self, sh, mark, len) {
                Ok((l, keys)) => Payload::Parsed(l, keys),
                Err(fail) => {
                    let got = self.st.lock().transfer.map_or(0, |t| t.1);
                    let e = match fail {
                        PayloadFail::Io(e) => {
                            log::warning(&format!(
                                "Internal error in RDB reading offset {got}: the payload from \
                                 the MASTER ended early ({e})"
                            ));
                            e
                        }
                        PayloadFail::Damaged(e) => {
                            log::warning(&format!(
                                "Internal error in RDB reading offset {} -> {}",
                                e.offset, e.reason
                            ));
                            format!("the payload from the MASTER is damaged: {e}")
                        }
                    };
                    log::warning(
                        "Failed trying to load the MASTER synchronization DB from socket, check \
                         server logs.",
                    );
                    if load.is_some_and(|d| d.swapdb) {
                        log::notice("MASTER <-> REPLICA sync: Discarding the half-loaded data");
                    }
                    return Err(e);
                }
            }
        } else {
            // As Redis: to a temporary file in `dir`, loaded from there
            // once it is whole (memory for the data set only), then gone.
            let path = sh.config.read().path(persistence::sync_temp_name());
            let file = std::fs::File::create(&path).map_err(|e| {
                format!("Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}")
            })?;
            let temp = TempFile(path);
            let mut w = std::io::BufWriter::with_capacity(1 << 16, file);
            link.payload_to(self, mark, len, &mut w)?;
            w.flush().map_err(|e| format!("Write error writing to the DB file: {e}"))?;
            Payload::File(temp)
        };
        let _apply = self.apply.lock();
        if !self.current(link.gen) {
            return Err("REPLICAOF changed during the transfer".into());
        }
        log::notice("Discarding previously cached master state.");
        if let Some(m) = repl::master(sh) {
            m.attach_to_new_master(sh);
        }
        log::notice("MASTER <-> REPLICA sync: Flushing old data");
        sh.set_loading(true);
        if let Some(g) = loading {
            g.into_load();
        }
        persistence::flush_all(sh);
        if load.is_none() {
            log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
        }
        // Expired keys are kept: the master deletes them (its DELs come).
        let loaded = match payload {
            Payload::File(t) => match std::fs::File::open(&t.0) {
                Ok(mut f) => {
                    if let Ok(md) = f.metadata() {
                        sh.set_load_size(md.len());
                    }
                    persistence::load_reader(sh, &mut f, false, 0, sh.clock.now_ms())
                }
                Err(e) => {
                    log::warning(&format!("Can't open the payload's temp file: {e}"));
                    Err(persist::Error { offset: 0, reason: "the payload's file is gone" }.into())
                }
            },
            Payload::Parsed(l, keys) => persistence::load_staged(sh, l, keys, sh.clock.now_ms()),
        };
        sh.set_loading(false);
        let loaded = match loaded {
            Ok(l) => {
                log::notice(&format!(
                    "Done loading RDB, keys loaded: {}, keys expired: {}.",
                    l.keys_loaded, l.keys_expired
                ));
                l
            }
            Err(e) => {
                log::warning(&format!(
                    "Failed trying to load the MASTER synchronization DB from socket: {e}"
                ));
                persistence::flush_all(sh);
                self.st.lock().has_position = false;
                return Err("MASTER <-> REPLICA sync: the payload did not load".into());
            }
        };
        if let Some(m) = repl::master(sh) {
            m.set_position(replid, offset);
            m.start_relay(sh);
        }
        self.read_off.store(offset, Ordering::Relaxed);
        self.applied_off.store(offset, Ordering::Relaxed);
        // The stream goes on in the database the payload says it had
        // selected (`repl-stream-db`: a chained master relays its own
        // master's stream, which selects nothing anew after a sync).
        let stream_db = loaded
            .aux
            .iter()
            .find(|(k, _)| k == b"repl-stream-db")
            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<usize>().ok())
            .filter(|&db| db < sh.store.databases());
        let mut sess = Session::detached(u64::MAX);
        if let Some(db) = stream_db {
            select_quietly(&mut sess, db);
        }
        let mut st = self.st.lock();
        st.has_position = true;
        st.session = Some(sess);
        drop(st);
        log::notice("MASTER <-> REPLICA sync: Finished with success");
        // As Redis's restartAOFAfterSYNC: the AOF is rebuilt from the new
        // data set (the stream then appends to it as usual).
        if sh.config.read().appendonly {
            if let Some(aof) = &sh.host.aof {
                if let Err(e) = aof.rewrite(false) {
                    log::warning(&format!("Can't rewrite the AOF after the sync: {e}"));
                }
            }
        }
        Ok(())
    }

    /// Applies the stream until the link drops or REPLICAOF changes.
    fn stream(&self, sh: &Arc<Shared>, link: &mut Link) -> Result<(), String> {
        let limits = Limits { max_bulk_len: 512 << 20, unauthenticated: false };
        let mut args = ArgBuf::default();
        let mut out = ReplyBuf::new();
        let mut sess = self.st.lock().session.take().unwrap_or_else(|| Session::detached(u64::MAX));
        let master = repl::master(sh);
        // Stream bytes parsed so far (what `applied_off` becomes once no
        // transaction is open).
        let mut parsed = self.applied_off.load(Ordering::Relaxed);
        // Stream bytes that came with the payload or the reply line.
        self.read_off.store(parsed + link.buf.len() as i64, Ordering::Relaxed);
        let mut last_ack = Instant::now();
        let mut acks = Acks::new(crate::host::node(sh).durable.clone(), parsed);
        let mut chunk = vec![0u8; 64 * 1024];
        let res = loop {
            if !link.buf.is_empty() {
                let _apply = self.apply.lock();
                if !self.current(link.gen) {
                    break Ok(());
                }
                let mut pos = 0;
                let mut failed = None;
                let mut ahead = Ahead::default();
                loop {
                    ahead.step(&sh.store, sess.db, &link.buf, pos, &limits);
                    match resp::parse(&link.buf[pos..], &limits, &mut args) {
                        Parsed::Command { consumed } => {
                            let input = &link.buf[pos..];
                            let argv: Vec<&[u8]> =
                                (0..args.len()).map(|i| args.get(input, i)).collect();
                            if dispatch::replay_paused(sh, &mut sess, &argv) {
                                // Left in the buffer, with all after it,
                                // until the pause ends (the socket's read
                                // timeout brings the loop back here); not
                                // relayed before it is applied.
                                break;
                            }
                            // Relayed to our backlog and sub-replicas as
                            // it came (see `repl::stage`).
                            repl::stage(&input[..consumed]);
                            // What a GETACK ending the read is answered
                            // with: the offset before it, as Redis.
                            acks.before_getack = None;
                            if argv[0].eq_ignore_ascii_case(b"REPLCONF") {
                                if argv.len() >= 2 && argv[1].eq_ignore_ascii_case(b"GETACK") {
                                    // Answered once this read is applied.
                                    acks.asked = true;
                                    acks.before_getack = Some(parsed);
                                }
                            } else {
                                let r = dispatch::replay(sh, &mut sess, &argv, &mut out);
                                let err_reply =
                                    out.contiguous().filter(|b| b.first() == Some(&b'-'));
                                if r.is_err() || err_reply.is_some() {
                                    let reply = if r.is_err() {
                                        "unknown command".to_string()
                                    } else {
                                        lossy(err_reply.unwrap_or_default()).trim_end().to_string()
                                    };
                                    log::warning(&format!(
                                        "== CRITICAL == This replica is sending an error to its \
                                         master: '{reply}' after processing the command '{}'",
                                        lossy(argv[0])
                                    ));
                                    propagation_error(sh, true, "replica", "master", argv[0]);
                                }
                                out.clear();
                            }
                            pos += consumed;
                            parsed += consumed as i64;
                            if !sess.in_multi() {
                                self.applied_off.store(parsed, Ordering::Relaxed);
                                if let Some(m) = &master {
                                    m.proxy_staged(sess.db);
                                }
                            }
                        }
                        Parsed::Empty { consumed } => {
                            repl::stage(&link.buf[pos..pos + consumed]);
                            pos += consumed;
                            parsed += consumed as i64;
                            if !sess.in_multi() {
                                self.applied_off.store(parsed, Ordering::Relaxed);
                                if let Some(m) = &master {
                                    m.proxy_staged(sess.db);
                                }
                            }
                        }
                        Parsed::Incomplete { .. } => break,
                        Parsed::Error(e) => {
                            failed = Some(format!("Protocol error from MASTER: {e:?}"));
                            break;
                        }
                    }
                }
                link.buf.drain(..pos);
                // The master's commands count on the replica as a
                // client's do (commandstats, changes since the last save),
                // once per batch as a connection flushes them.
                sh.flush_stats(&mut sess);
                if let Some(e) = failed {
                    break Err(e);
                }
            }
            // Each read applied is acknowledged at once (a master holding
            // a durable client's replies waits for it), and every second;
            // and when the AOF fsynced more (FACK, for WAITAOF).
            // A read that ends with a GETACK is acknowledged up to the
            // offset before it (Redis's answer); otherwise with all of it.
            let applied = self.applied_off.load(Ordering::Relaxed);
            let answer = acks.before_getack.take().map_or(applied, |b| b.min(applied));
            let due = last_ack.elapsed() >= Duration::from_secs(1);
            if let Some(fack) = acks.due(applied, due) {
                last_ack = Instant::now();
                // The periodic ACK says all that was applied, as Redis's.
                let off = if due { applied } else { answer };
                if let Err(e) = link.ack(off, fack) {
                    break Err(e);
                }
            }
            if unix_ms() / 1000 - self.last_io.load(Ordering::Relaxed) > link.timeout {
                break Err("MASTER timeout: no data nor PING received...".into());
            }
            match link.sock.read(&mut chunk) {
                Ok(0) => break Err("Connection with master lost (closed by the master).".into()),
                Ok(n) => {
                    link.buf.extend_from_slice(&chunk[..n]);
                    self.read_off.fetch_add(n as i64, Ordering::Relaxed);
                    self.last_io.store(unix_ms() / 1000, Ordering::Relaxed);
                }
                Err(e) if is_timeout(&e) => {
                    if !self.current(link.gen) {
                        break Ok(());
                    }
                }
                Err(e) => break Err(format!("Error reading from MASTER: {e}")),
            }
        };
        // A transaction the master did not finish is dropped; it comes
        // again after a partial resynchronisation (the offset excludes it).
        if sess.in_multi() {
            let _ = dispatch::replay(sh, &mut sess, &[b"DISCARD"], &mut out);
        }
        repl::unstage();
        self.read_off.store(self.applied_off.load(Ordering::Relaxed), Ordering::Relaxed);
        self.st.lock().session = Some(sess);
        res
    }
}

impl Follow for Follower {
    fn follow(&self, host: &str, port: u16) -> bool {
        // The link thread needs an Arc of us.
        match self.me.upgrade() {
            Some(f) => f.start(host, port, true, false),
            None => false,
        }
    }

    fn settle(&self) {
        use std::os::fd::AsRawFd;
        let sock = self.st.lock().sock.as_ref().and_then(|s| s.try_clone().ok());
        let Some(sock) = sock else { return };
        let deadline = Instant::now() + Duration::from_millis(100);
        let (mut last, mut quiet) = (-1, 0);
        while Instant::now() < deadline {
            let mut unread: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int through the pointer.
            let ok = unsafe { libc::ioctl(sock.as_raw_fd(), libc::FIONREAD, &mut unread) } == 0;
            if !ok {
                return;
            }
            let read = self.read_off.load(Ordering::Relaxed);
            if unread == 0 {
                // Read and applied; or read and standing still (a
                // command the master has not finished sending).
                if read == self.applied_off.load(Ordering::Relaxed) || (read == last && quiet >= 5)
                {
                    return;
                }
                quiet = if read == last { quiet + 1 } else { 0 };
            } else {
                quiet = 0;
            }
            last = read;
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn promote(&self) -> bool {
        let Some(sh) = self.shared.upgrade() else { return false };
        let _apply = self.hold_apply();
        let mut st = self.st.lock();
        if st.target.is_none() {
            return false;
        }
        st.gen += 1;
        st.target = None;
        if let Some(s) = st.sock.take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let was_linked = std::mem::replace(&mut st.linked, false);
        st.state = "connect";
        st.transfer = None;
        st.session = None;
        drop(st);
        if was_linked {
            log::warning("Connection with master lost.");
        }
        // The stream feeds our own writes from now on, before a client can
        // make one (Redis's replicationUnsetMaster: the old id and offset
        // stay as the secondary id, so replicas partially resync).
        if let Some(m) = repl::master(&sh) {
            m.set_offset(self.applied_off.load(Ordering::Relaxed));
            m.shift_id(None);
            m.promote();
        }
        sh.store.set_replica(false);
        engine::subsystems::config::set_oom_role(&sh.oom, &sh.config.read(), false);
        sh.state_changed();
        sh.host.log.set_role(b'M');
        true
    }

    fn link_addr(&self) -> Option<String> {
        let st = self.st.lock();
        let peer = st.sock.as_ref().filter(|_| st.linked)?.peer_addr().ok()?;
        Some(peer.to_string())
    }

    fn kill_link(&self) -> bool {
        let st = self.st.lock();
        match (&st.sock, st.linked) {
            (Some(s), true) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
                true
            }
            _ => false,
        }
    }

    fn view(&self) -> Option<FollowView> {
        let st = self.st.lock();
        let (host, port) = st.target.clone()?;
        let now = unix_ms() / 1000;
        let (read, applied) = if st.has_position {
            (self.read_off.load(Ordering::Relaxed), self.applied_off.load(Ordering::Relaxed))
        } else {
            (1, 1)
        };
        Some(FollowView {
            host,
            port,
            state: st.state,
            last_io: st.linked.then(|| now - self.last_io.load(Ordering::Relaxed)),
            transfer: st.transfer.map(|(total, read, at)| (total, read, now - at)),
            down_since: st.down_since,
            read_offset: read,
            applied_offset: applied,
        })
    }
}

/// The socket to the master and what was read but not yet used.
struct Link {
    sock: TcpStream,
    buf: Vec<u8>,
    timeout: i64,
    gen: u64,
}

impl Link {
    fn send(&mut self, argv: &[&[u8]]) -> Result<(), String> {
        let mut b = Vec::new();
        resp::write_command(&mut b, argv);
        self.sock.write_all(&b).map_err(|e| format!("Error writing to MASTER: {e}"))
    }

    /// `REPLCONF ACK <offset>`, with Redis 7.2's `FACK <aofoff>` (what
    /// the AOF fsynced) while the AOF is on.
    fn ack(&mut self, offset: i64, fack: Option<i64>) -> Result<(), String> {
        let off = offset.to_string();
        match fack {
            None => self.send(&[b"REPLCONF", b"ACK", off.as_bytes()]),
            Some(f) => {
                let f = f.to_string();
                self.send(&[b"REPLCONF", b"ACK", off.as_bytes(), b"FACK", f.as_bytes()])
            }
        }
    }

    /// Reads more bytes (waiting at most the read timeout); `Err` when the
    /// link is gone, REPLICAOF changed, or the master is silent for
    /// `repl-timeout`.
    fn fill(&mut self, f: &Follower) -> Result<usize, String> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if !f.current(self.gen) {
                return Err("REPLICAOF changed".into());
            }
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err("Connection with master lost (closed by the master).".into()),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    f.last_io.store(unix_ms() / 1000, Ordering::Relaxed);
                    return Ok(n);
                }
                Err(e) if is_timeout(&e) => {
                    if unix_ms() / 1000 - f.last_io.load(Ordering::Relaxed) > self.timeout {
                        return Err("Timeout connecting to the MASTER...".into());
                    }
                }
                Err(e) => return Err(format!("Error reading from MASTER: {e}")),
            }
        }
    }

    /// One reply line, without its line end (`\n` alone is a keep-alive:
    /// an empty line).
    fn line(&mut self, f: &Follower) -> Result<Vec<u8>, String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let mut l: Vec<u8> = self.buf.drain(..=i).collect();
                l.pop();
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                return Ok(l);
            }
            if self.buf.len() > 64 * 1024 {
                return Err("Reply line from MASTER too long".into());
            }
            self.fill(f)?;
        }
    }

    /// The payload (`$<len>` bytes, or the bytes up to the 40-byte
    /// `mark` of the diskless form) written to `out` as it arrives; what
    /// follows it stays in the buffer (the stream's first bytes).
    fn payload_to(
        &mut self,
        f: &Follower,
        mark: Option<&[u8]>,
        len: Option<usize>,
        out: &mut dyn Write,
    ) -> Result<(), String> {
        let write = |out: &mut dyn Write, b: &[u8]| {
            out.write_all(b).map_err(|e| format!("Write error writing to the DB file: {e}"))
        };
        let mut done = 0usize;
        match (mark, len) {
            (Some(mark), _) => {
                let mut from = 0;
                loop {
                    if let Some(i) = find(&self.buf[from..], mark).map(|i| from + i) {
                        write(out, &self.buf[..i])?;
                        self.buf.drain(..i + mark.len());
                        return Ok(());
                    }
                    // All but what may be the start of the mark goes out.
                    let keep = mark.len() - 1;
                    if self.buf.len() > keep + (1 << 16) {
                        let k = self.buf.len() - keep;
                        write(out, &self.buf[..k])?;
                        self.buf.drain(..k);
                        done += k;
                    }
                    from = self.buf.len().saturating_sub(keep);
                    self.fill(f)?;
                    self.progress(f, done + self.buf.len());
                }
            }
            (None, Some(len)) => loop {
                let k = self.buf.len().min(len - done);
                write(out, &self.buf[..k])?;
                self.buf.drain(..k);
                done += k;
                self.progress(f, done);
                if done == len {
                    return Ok(());
                }
                self.fill(f)?;
            },
            (None, None) => unreachable!("a payload is marked or sized"),
        }
    }

    /// A diskless load's payload (`$<len>` or `$EOF:<mark>`), parsed as
    /// it arrives and read only as fast as its keys are parsed
    /// (`key-load-delay` included), as Redis's loader reads the socket;
    /// the keys are staged, and stored by the caller once the payload is
    /// whole (a transfer cut short leaves the old data). The bytes held
    /// are the record being parsed and one read, never the payload.
    fn parse_payload(
        &mut self,
        f: &Follower,
        sh: &Shared,
        mark: Option<&[u8]>,
        len: Option<usize>,
    ) -> Result<(persist::file::Loaded, Vec<persistence::StagedKey>), PayloadFail> {
        let (mut loader, delay) = persistence::new_loader(sh, 0);
        let mut keys = Vec::new();
        let mut sink = |k: persist::file::LoadedKey<'_>| {
            persistence::debug_delay(delay);
            keys.push(persistence::StagedKey::of(k));
            Ok(())
        };
        let damaged = |e: persist::Error| PayloadFail::Damaged(e);
        // Payload bytes fed and dropped; a record cut by the end of what
        // came is parsed again once this many bytes wait (twice as many
        // each time: a big record costs its size a few times over, not
        // once per read).
        let mut fed = 0usize;
        let mut want = 1usize;
        // Where the search for the mark resumes.
        let mut searched = 0usize;
        // INFO's account of the load: the payload's size when the master
        // gave it (Redis's repl_transfer_size; 0 for an EOF-marked one),
        // the writer's `used-mem` once the head has come, the bytes parsed.
        sh.set_load_size(len.unwrap_or(0) as u64);
        let mut head_seen = false;
        while !loader.done() {
            let avail = len.map_or(self.buf.len(), |n| self.buf.len().min(n - fed));
            let last = len.is_some_and(|n| fed + avail == n);
            if avail >= want || last {
                if !head_seen {
                    head_seen = true;
                    if let Some(m) = persist::file::leading_used_mem(&self.buf[..avail]) {
                        sh.set_load_used_mem(m);
                    }
                }
                let n = loader.feed(&self.buf[..avail], last, &mut sink).map_err(damaged)?;
                self.buf.drain(..n);
                sh.load_progressed(n);
                fed += n;
                searched = searched.saturating_sub(n);
                want = 2 * (avail - n) + 1;
                if loader.done() {
                    break;
                }
            }
            if let Some(mark) = mark {
                // The master's end of the payload: what comes before it
                // is the whole image (cut, it is the whole file's error).
                if let Some(i) = find(&self.buf[searched..], mark).map(|i| searched + i) {
                    let n = loader.feed(&self.buf[..i], true, &mut sink).map_err(damaged)?;
                    self.buf.drain(..n);
                    sh.load_progressed(n);
                    fed += n;
                    break;
                }
                searched = self.buf.len().saturating_sub(mark.len() - 1);
            }
            self.fill(f).map_err(PayloadFail::Io)?;
            self.progress(f, fed + self.buf.len());
        }
        match (mark, len) {
            (Some(mark), _) => {
                while self.buf.len() < mark.len() {
                    self.fill(f).map_err(PayloadFail::Io)?;
                }
                if !self.buf.starts_with(mark) {
                    return Err(PayloadFail::Io("Replication stream EOF marker is broken".into()));
                }
                self.buf.drain(..mark.len());
            }
            (None, Some(n)) => {
                // Bytes after the image's checksum, up to the length given.
                while fed < n {
                    if self.buf.is_empty() {
                        self.fill(f).map_err(PayloadFail::Io)?;
                    }
                    let k = self.buf.len().min(n - fed);
                    self.buf.drain(..k);
                    fed += k;
                }
            }
            (None, None) => unreachable!("a payload is marked or sized"),
        }
        self.progress(f, fed);
        Ok((loader.finish(), keys))
    }

    fn progress(&self, f: &Follower, read: usize) {
        if let Some(t) = f.st.lock().transfer.as_mut() {
            t.1 = read as i64;
            t.2 = unix_ms() / 1000;
        }
    }
}

/// A full sync's payload: a file of its bytes (loaded once they are all
/// in), or what a diskless load parsed as they came.
enum Payload {
    File(TempFile),
    Parsed(persist::file::Loaded, Vec<persistence::StagedKey>),
}

/// A payload's temporary file, removed when dropped (loaded or not).
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Why a payload parsed as it arrived did not load.
enum PayloadFail {
    /// The transfer failed (the link, or REPLICAOF changed).
    Io(String),
    /// The bytes are damaged.
    Damaged(persist::Error),
}

/// A full sync loaded as the transfer arrives (`repl-diskless-load`
/// `swapdb`, or `on-empty-db` with no key), as Redis's `useDisklessLoad`.
#[derive(Clone, Copy)]
struct Diskless {
    swapdb: bool,
    /// The master's replication id is ours already: the old data is a
    /// point in time of the same data set, served while the new one
    /// arrives (Redis's async loading, swapdb only).
    asynchronous: bool,
}

impl Diskless {
    fn decide(sh: &Shared, replid: &str) -> Option<Diskless> {
        let mode = sh.config.read().get_by_name("repl-diskless-load").unwrap_or_default();
        let swapdb = mode == b"swapdb";
        let empty = || {
            let locks = store::Locks::new(&sh.store, sh.clock.now_ms());
            (0..sh.store.databases()).all(|db| locks.db_counts(db).keys == 0)
        };
        let on_empty = mode == b"on-empty-db" && empty();
        if !swapdb && !on_empty {
            return None;
        }
        let asynchronous = swapdb && repl::master(sh).is_some_and(|m| m.position().0 == replid);
        Some(Diskless { swapdb, asynchronous })
    }

    /// Marks the load started (logged as Redis does); it ends when the
    /// guard drops.
    fn start(self, sh: &Arc<Shared>) -> LoadGuard {
        log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
        if self.asynchronous {
            sh.set_async_loading(true);
        } else {
            sh.set_loading(true);
        }
        LoadGuard { sh: sh.clone(), asynchronous: self.asynchronous }
    }
}

/// Ends a diskless load's state when dropped (a failed transfer).
struct LoadGuard {
    sh: Arc<Shared>,
    asynchronous: bool,
}

impl LoadGuard {
    /// The payload is in: the load proper takes over (it sets and clears
    /// `loading` itself).
    fn into_load(self) {
        if self.asynchronous {
            self.sh.set_async_loading(false);
        }
        std::mem::forget(self);
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        if self.asynchronous {
            self.sh.set_async_loading(false);
        } else {
            self.sh.set_loading(false);
        }
    }
}

/// The keys of the stream's commands a few places ahead of the one
/// applied, prefetched in stages as a connection's batch loop does
/// (bucket, the chain's first and second nodes, a long key's bytes): the
/// stream is one long pipeline, and a replica applying it one key at a
/// time paid each lookup's cache misses in turn (its hash table insert
/// was a third of its CPU under pipelined SETs).
#[derive(Default)]
struct Ahead {
    /// Where the next command to look at starts in the read.
    at: usize,
    args: ArgBuf,
    /// The tokens of the commands after the one applied, nearest first.
    ring: std::collections::VecDeque<Option<store::Prefetch>>,
}

impl Ahead {
    const BUCKET: usize = 8;
    const NODE: usize = 6;
    const NEXT: usize = 4;
    const KEY: usize = 2;

    /// Before the command at `pos` is applied: drops its token, looks at
    /// one more command ahead, and moves each stage on. The database is
    /// the one selected now (a SELECT ahead only wastes a few prefetches).
    fn step(&mut self, store: &store::Store, db: usize, buf: &[u8], pos: usize, limits: &Limits) {
        if self.at > pos {
            self.ring.pop_front();
        } else {
            self.at = pos;
            self.ring.clear();
        }
        while self.ring.len() <= Self::BUCKET && self.at < buf.len() {
            let consumed = match resp::parse(&buf[self.at..], limits, &mut self.args) {
                Parsed::Command { consumed } => consumed,
                Parsed::Empty { consumed } => consumed,
                _ => break,
            };
            let input = &buf[self.at..];
            let token = if self.args.len() >= 2 {
                let prev = self.ring.iter().rev().find_map(|t| *t);
                store.prefetch_token(db, self.args.get(input, 1)).map(|t| t.after(prev))
            } else {
                None
            };
            self.ring.push_back(token);
            self.at += consumed;
        }
        // The ring starts with the command at `pos` itself.
        if let Some(Some(t)) = self.ring.get(Self::BUCKET) {
            store.prefetch_bucket(*t);
        }
        if let Some(Some(t)) = self.ring.get(Self::NODE) {
            store.prefetch_node(*t);
        }
        if let Some(Some(t)) = self.ring.get(Self::NEXT) {
            store.prefetch_next(*t);
        }
        if let Some(Some(t)) = self.ring.get(Self::KEY) {
            store.prefetch_key(*t);
        }
    }
}

/// When the link acknowledges, and what its AOF fsynced (the FACK).
struct Acks {
    durable: Arc<crate::durability::Position>,
    /// The master asked (`REPLCONF GETACK`) in the read just applied.
    asked: bool,
    /// The offset before that GETACK, when it was the read's last command.
    before_getack: Option<i64>,
    /// The offset last acknowledged, and the FACK last sent.
    sent: i64,
    fack_sent: i64,
    /// (the AOF's sequence number after a read was applied, the stream
    /// offset it reached), oldest first, until the AOF fsynced it.
    pending: std::collections::VecDeque<(u64, i64)>,
    /// The offset the AOF fsynced everything up to.
    fack: i64,
}

impl Acks {
    fn new(durable: Arc<crate::durability::Position>, applied: i64) -> Self {
        Acks {
            durable,
            asked: false,
            before_getack: None,
            sent: applied,
            fack_sent: -1,
            pending: Default::default(),
            // Nothing is claimed until a read is seen fsynced.
            fack: -1,
        }
    }

    /// Whether to acknowledge now (`Some(fack)`; `fack` is `None` while
    /// the AOF is off): the master asked, this read applied more, the
    /// AOF fsynced more, or `periodic`.
    fn due(&mut self, applied: i64, periodic: bool) -> Option<Option<i64>> {
        let fack = match self.durable.fsynced() {
            None => {
                self.pending.clear();
                self.fack = applied;
                None
            }
            Some(fsynced) => {
                let seq = self.durable.last();
                // Bounded: past 64 entries (an AOF that does not fsync)
                // the newest absorbs the next, which only reports later.
                let full = self.pending.len() >= 64;
                match self.pending.back_mut() {
                    Some(last) if last.0 == seq || full => *last = (seq, applied),
                    _ => self.pending.push_back((seq, applied)),
                }
                while let Some(&(s, off)) = self.pending.front() {
                    if s > fsynced {
                        break;
                    }
                    self.fack = self.fack.max(off);
                    self.pending.pop_front();
                }
                Some(self.fack)
            }
        };
        let more_fsynced = fack.is_some_and(|f| f > self.fack_sent);
        if !(std::mem::take(&mut self.asked) || applied > self.sent || more_fsynced || periodic) {
            return None;
        }
        self.sent = applied;
        self.fack_sent = fack.unwrap_or(-1);
        Some(fack)
    }
}

/// The master client's database, set as Redis's selectDb does for it
/// (not a SELECT command: nothing is counted).
fn select_quietly(sess: &mut Session, db: usize) {
    sess.db = db;
    sess.handle.db.store(db, Ordering::Relaxed);
}

/// Where `needle` first occurs in `hay` (memchr's vectorized search: a
/// diskless payload of 75 MB is searched for its end mark as it comes,
/// and a window-by-window comparison took about as long as the transfer).
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// A read or write on a socket with a timeout that found nothing to do
/// (yet): try again, as the replication loops do.
pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Connects to the master, from `bind-source-addr` when it is set (as
/// Redis's anetTcpNonBlockBestEffortBindConnect: an address that cannot
/// be bound is not used).
fn connect_from(
    source: &[u8],
    to: std::net::SocketAddr,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let from = std::str::from_utf8(source).ok().and_then(|s| s.parse::<std::net::IpAddr>().ok());
    let Some(ip) = from.filter(|ip| ip.is_ipv4() == to.is_ipv4()) else {
        return TcpStream::connect_timeout(&to, timeout);
    };
    let s = socket2::Socket::new(socket2::Domain::for_address(to), socket2::Type::STREAM, None)?;
    if s.bind(&std::net::SocketAddr::new(ip, 0).into()).is_err() {
        return TcpStream::connect_timeout(&to, timeout);
    }
    s.connect_timeout(&to.into(), timeout)?;
    Ok(s.into())
}

/// `propagation-error-behavior`, as Redis's afterErrorReply: a read-only
/// replica whose master's command failed panics with `panic` or
/// `panic-on-replicas`; the AOF loader (`replica` false) with `panic`.
pub fn propagation_error(sh: &Shared, replica: bool, from: &str, to: &str, cmd: &[u8]) {
    let (behavior, read_only, exit) = {
        let c = sh.config.read();
        let b = c.get_by_name("propagation-error-behavior").unwrap_or_default();
        (b, c.replica_read_only, c.get_by_name("use-exit-on-panic").is_some_and(|v| v == b"yes"))
    };
    let panic = match behavior.as_slice() {
        b"panic" => !replica || read_only,
        b"panic-on-replicas" => replica && read_only,
        _ => false,
    };
    if panic {
        engine::commands::debug::panic_now(
            &format!(
                "This {from} panicked sending an error to its {to} after processing the command \
                 '{}'",
                lossy(cmd)
            ),
            exit,
        );
    }
}
