//! One client connection: read, parse every complete request, execute,
//! answer the batch in one (vectored) write — on the thread that accepted
//! the socket, run to completion.
//!
//! Memory stays bounded for deep pipelines: when more than
//! [`OUT_HIGH_WATER`] reply bytes are waiting for the socket, the
//! connection stops executing its input (it keeps reading it, up to
//! `client-query-buffer-limit`, so a client that is itself blocked in a
//! write cannot deadlock) and resumes as the socket drains. Each turn
//! executes at most [`TURN_BUDGET`] bytes of replies before yielding, so one
//! heavy pipeliner cannot starve the other connections of its thread.
//!
//! While it waits for I/O a connection (plain TCP or TLS) is *parked*: a script of
//! its thread that runs past `busy-reply-threshold` may then serve it
//! from the script's hook (`serve_while_busy`, see `crate::busy`).

use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::network::durable::{self, Held};
use crate::signal::Signal;
use engine::core::dispatch;
use engine::core::session::Durable;
use engine::core::shared::unix_ms;
use engine::subsystems::config::ObufLimit;
use engine::{Session, Shared};
use resp::{ArgBuf, Limits, Parsed, ReplyBuf};
use smallvec::SmallVec;

use crate::transport::Transport;

use engine::subsystems::log;

/// Stop executing input while this many reply bytes are unwritten.
pub const OUT_HIGH_WATER: usize = 1 << 20;
/// Reply bytes one connection may produce per loop turn before yielding.
const TURN_BUDGET: usize = 256 * 1024;
/// Read at least this much per read call.
const READ_CHUNK: usize = 16 * 1024;
/// A bulk argument at least this long gets exactly the room it still
/// needs (Redis's `PROTO_MBULK_BIG_ARG`, past which it sizes the query
/// buffer to the argument).
const BIG_ARG: usize = 32 * 1024;
/// Unexecuted input past which reading stops until it is executed.
const READ_AHEAD: usize = 64 * 1024;

/// Requests parsed ahead of execution: a whole redis-benchmark batch of
/// 64 is one window, so that the prefetch stages below run ahead through
/// all of it rather than starting cold again half-way.
const WINDOW: usize = 64;
/// How far ahead of execution a request's bucket, its chain's first and
/// second nodes, and a long key's bytes are prefetched: each stage reads
/// what the one before it brought into cache, two requests earlier.
/// Wider gaps measured no better (12-18 requests ahead for the bucket),
/// nor did a stage before these for the stripe's own lines (its lock
/// word, hints and table head: 1,024 stripes a database, in cache).
const BUCKET_AHEAD: usize = 8;
const NODE_AHEAD: usize = 6;
const NEXT_AHEAD: usize = 4;
/// Only for keys a slot does not hold inline.
const KEY_AHEAD: usize = 2;
/// For a run of requests to one key (a pipelined SADD, HSET, SISMEMBER,
/// HGET, ZADD, ZSCORE… to one big set, hash or sorted set) one of whose
/// arguments names a member of the key's set or sorted set or a field of
/// its hash ([`member_arg`]), held in a hash table (a sorted set's member
/// index): the member's bucket in that table, then its chain's first node
/// ([`store::Store::with_member_value`]). A pipelined SADD to a set of
/// 100,000 members spent half its CPU in the set's insert, waiting for
/// those two lines. Only for a key the request before also named: that
/// key's lines are in cache, so the stage's lookup of it does not wait
/// (for a new key it would, before the key stages above have fetched
/// its lines), and a run of requests to a small hash or set (a listpack,
/// an intset) pays for one lookup, not one each.
const MEMBER_AHEAD: usize = 12;
const MNODE_AHEAD: usize = 6;
/// The chain's second node, when the first is another member's.
const MNEXT_AHEAD: usize = 3;
/// [`Pending::member`]: no member stage for this request.
const NO_MEMBER: u64 = 0;
/// [`Pending::member`]: a member stage is due and has not run.
const MEMBER_DUE: u64 = 1;
/// [`Pending::member`]: stage one ran and found no table (the key holds
/// something else, or the stripe was busy); the requests after it to the
/// same key skip theirs.
const NO_TABLE: u64 = 2;

/// Which argument of a command named `name` with `argc` arguments likely
/// names a member of its key's set or sorted set or a field of its hash
/// (0: none): the third for every `H…` command and SADD, SREM,
/// SISMEMBER, SMISMEMBER; the last for a `Z…` command (ZADD's single
/// member after its flags and score, ZINCRBY's, ZSCORE's, ZRANK's,
/// ZREM's). A few others start alike; for those the stage prefetches a
/// line for nothing.
#[inline]
fn member_arg(name: &[u8], argc: usize) -> u8 {
    let at = match name.first().map(|b| b | 0x20) {
        Some(b'h') => 2,
        Some(b's') if name.len() >= 4 && matches!(name[1] | 0x20, b'a' | b'r' | b'i' | b'm') => 2,
        Some(b'z') => argc.saturating_sub(1),
        _ => 0,
    };
    if at >= 2 && at < argc && at < 256 {
        at as u8
    } else {
        0
    }
}

/// One parsed, not yet executed request of the window.
#[derive(Default)]
struct Pending {
    args: ArgBuf,
    start: usize,
    len: usize,
    /// A cell, so that the window's later requests get theirs while the
    /// argument array borrows the window's spans.
    token: std::cell::Cell<Option<store::Prefetch>>,
    /// The member stages' state: [`NO_MEMBER`], [`MEMBER_DUE`],
    /// [`NO_TABLE`], or the member's hash in the key's table once stage
    /// one found one.
    member: std::cell::Cell<u64>,
    /// Which argument is the member ([`member_arg`]), when stages are due.
    member_at: std::cell::Cell<u8>,
}

thread_local! {
    /// The request window of every connection this thread runs: a batch
    /// runs start to end without a wait, so one window serves them all,
    /// and it stays in cache from one connection's batch to the next.
    /// Each connection had its own (32 requests' parse tables, some 3 KB
    /// and 32 small allocations): with a thousand connections taking
    /// turns, a batch of 16 GETs missed the last level on ~40 of its
    /// lines (callgrind's cache simulation, `bench/instructions
    /// --cache-sim`).
    static WINDOW_CELL: std::cell::Cell<Option<Window>> = const { std::cell::Cell::new(None) };
}

/// A window: a fixed array, so that its requests are indexed without
/// bounds checks.
type Window = Box<[Pending; WINDOW]>;

/// Takes the thread's window for a batch. A batch that ran inside
/// another's (none does: a busy script's pass parses with a table of its
/// own) would find it taken and get a fresh one.
#[inline]
fn take_window() -> Window {
    WINDOW_CELL.with(|c| c.take()).unwrap_or_else(new_window)
}

#[cold]
fn new_window() -> Window {
    Box::new(std::array::from_fn(|_| Pending::default()))
}

/// Gives the window back for the thread's next batch.
#[inline]
fn put_window(w: Window) {
    WINDOW_CELL.with(|c| c.set(Some(w)));
}

/// Frees what a past request's parse tables needed beyond the usual (on
/// the server cron's request, as a connection's query buffer is shrunk;
/// a big span table is also freed when its place parses a next request).
fn release_window() {
    if let Some(mut w) = WINDOW_CELL.with(|c| c.take()) {
        for p in w.iter_mut() {
            p.args.release();
        }
        put_window(w);
    }
}

/// Per-connection limits, refreshed when the configuration changes.
struct ConnLimits {
    epoch: u64,
    parse: Limits,
    query_limit: usize,
    obuf: ObufLimit,
    /// The pub/sub class's limit, for a client while it is subscribed.
    obuf_pubsub: ObufLimit,
    /// `maxmemory-clients` in bytes (0: off; `evict::client_limit`).
    clients_limit: u64,
}

impl ConnLimits {
    fn load(shared: &Shared, authenticated: bool) -> Self {
        let c = shared.config.read();
        ConnLimits {
            epoch: shared.config_epoch.load(Ordering::Acquire),
            parse: Limits { max_bulk_len: c.proto_max_bulk_len, unauthenticated: !authenticated },
            query_limit: c.client_query_buffer_limit,
            obuf: c.obuf_normal,
            obuf_pubsub: c.obuf_pubsub,
            clients_limit: engine::subsystems::evict::client_limit(&c),
        }
    }
}

/// Redis's reply to a client refused by protected mode (one line).
const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Protected mode, as Redis 7.0's clientAcceptHandler: with
/// `protected-mode yes` and a default user flagged `nopass` (no
/// `requirepass`, and no password given by `ACL SETUSER default` or an
/// ACL file), only loopback peers are served, whatever `bind` says.
fn refused_by_protected_mode(shared: &Shared, local: bool) -> bool {
    !local && shared.config.read().protected_mode && shared.acl.default_user().nopass()
}

/// Writes a last line to a client about to be dropped (best effort).
async fn say_and_close<S: Transport>(stream: &mut S, msg: &[u8]) {
    // A fresh socket's write readiness is not known yet: without the
    // wait, the write says WouldBlock and the client gets no reason.
    if std::future::poll_fn(|cx| stream.poll_write_ready(cx)).await.is_ok() {
        let _ = stream.try_write_vectored(&[IoSlice::new(msg)]);
        while stream.pending_out() {
            if std::future::poll_fn(|cx| stream.poll_write_ready(cx)).await.is_err()
                || stream.flush_pending().is_err()
            {
                break;
            }
        }
    }
}

/// Serves one connection until it closes.
pub async fn serve<S: Transport>(shared: Arc<Shared>, mut stream: S) {
    if refused_by_protected_mode(&shared, stream.is_local()) {
        say_and_close(&mut stream, DENIED).await;
        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return;
    }
    match Conn::open(shared, stream) {
        Ok(conn) => run_conn(conn).await,
        Err(full) => refuse_full(full).await,
    }
}

/// Starts serving a socket on this thread: the connection is opened at
/// once and parked until its task first runs, so a script of this thread
/// that turns busy before then (it may start in the very loop turn that
/// accepted the socket, ahead of the new task) serves it from its busy
/// passes (`crate::busy`) like the thread's other connections. A socket
/// accepted by a busy pass comes here too.
pub fn start<S: Transport + 'static>(shared: Arc<Shared>, stream: S) {
    if refused_by_protected_mode(&shared, stream.is_local()) {
        crate::net::spawn_here(serve(shared, stream));
        return;
    }
    match Conn::open(shared, stream) {
        Ok(mut conn) => {
            let ptr: *mut Conn<S> = &mut *conn;
            if let Some(slot) = &conn.slot {
                // SAFETY: the box does not move and is not touched until
                // its task first runs, which unparks it first (`Conn::run`).
                unsafe { slot.park(ptr.cast()) }.keep();
            }
            crate::net::spawn_here(run_conn(conn));
        }
        Err(full) => {
            crate::net::spawn_here(refuse_full(full));
        }
    }
}

/// A connection over `maxclients`: its socket, its session, the server.
type Refused<S> = Box<(S, Session, Arc<Shared>)>;

/// Over `maxclients`: Redis's line, then the socket closes.
async fn refuse_full<S: Transport>(refused: Refused<S>) {
    let (mut stream, mut sess, shared) = *refused;
    say_and_close(&mut stream, b"-ERR max number of clients reached\r\n").await;
    shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
    *sess.handle.waker.lock() = None;
    shared.disconnect(&mut sess);
}

/// Runs an open connection until it closes.
async fn run_conn<S: Transport>(mut conn: Box<Conn<S>>) {
    let notify = conn.notify.clone();
    let ended = conn.run(&notify).await;
    if conn.shared.shutdown.load(Ordering::Acquire) {
        // SHUTDOWN closes its client's connection: nobody may connect
        // once it sees that.
        crate::busy::stop_listening(&conn.shared);
    }
    // Out of the busy pass's reach from here.
    conn.slot = None;
    conn.uncount_memory();
    let shared = conn.shared.clone();
    if ended.is_ok() && conn.sess.replica.as_ref().is_some_and(|h| h.sync.is_some()) {
        let input = conn.rbuf[conn.rpos..].to_vec();
        let Conn { sess, stream, .. } = *conn;
        match stream.into_tcp() {
            Ok(tcp) => become_replica(shared, tcp, sess, input),
            Err(_) => {
                log::warning(
                    "Replication over TLS is not supported by Sluice yet: replica dropped",
                );
                let mut sess = sess;
                *sess.handle.waker.lock() = None;
                shared.disconnect(&mut sess);
            }
        }
        return;
    }
    if log::enabled(log::Level::Verbose) {
        let h = &conn.sess.handle;
        let why = ended.err().map(|e| format!(" ({e})")).unwrap_or_default();
        log::verbose(&format!(
            "Client closed connection id={} addr={} laddr={} fd={}{why}",
            h.id, h.addr, h.laddr, h.fd
        ));
    }
    // The buffers go before the registry entry: until it is gone, a
    // closing client's memory is left out of `used_memory` by key
    // eviction (`evict::perform`), so a client closed by
    // `maxmemory-clients` must not leave it still holding them.
    conn.rbuf = Vec::new();
    conn.out = ReplyBuf::default();
    conn.sess.handle.tot_mem.store(0, Ordering::Relaxed);
    let Conn { mut sess, .. } = *conn;
    *sess.handle.waker.lock() = None;
    shared.disconnect(&mut sess);
}

/// How a busy pass serves a parked connection (`crate::busy`).
///
/// # Safety
/// `conn` is a parked `Conn<S>` (see `busy::Slot::park`).
unsafe fn serve_parked<S: Transport>(conn: *mut ()) {
    // SAFETY: the caller's promise: parked, so valid and not in use.
    let conn = unsafe { &mut *conn.cast::<Conn<S>>() };
    conn.serve_while_busy();
}

/// SYNC or PSYNC ran: the connection, its replies written, becomes a
/// replica — its socket, session and unread input go to the server's
/// replication (`crate::repl`), which runs it from now on.
fn become_replica(
    shared: Arc<Shared>,
    stream: tokio::net::TcpStream,
    mut sess: Session,
    input: Vec<u8>,
) {
    let hs = sess.replica.take().map(|h| *h).unwrap_or_default();
    *sess.handle.waker.lock() = None;
    match stream.into_std() {
        Ok(sock) => crate::repl::take_over(shared, sock, sess, hs, input),
        Err(_) => shared.disconnect(&mut sess),
    }
}

struct Conn<S> {
    shared: Arc<Shared>,
    /// The server's durability position, which replies to writes wait on
    /// (group commit).
    durable: Arc<crate::durability::Position>,
    /// The replication stream, pushed to the replicas' sockets before the
    /// replies to the writes it carries.
    master: Arc<crate::repl::Master>,
    stream: S,
    /// Wakes the connection's task (kept here for the busy pass).
    notify: Arc<Signal>,
    /// Its place for the busy pass (`crate::busy`).
    slot: Option<crate::busy::Slot>,
    sess: Session,
    rbuf: Vec<u8>,
    /// Start of unparsed input in `rbuf`.
    rpos: usize,
    /// Don't parse again before `rbuf.len() >= need`.
    need: usize,
    /// Where the unparsed part of an incomplete request begins in `rbuf`
    /// (see `resp::ArgBuf::unparsed_from`); stale once below `rpos`.
    unparsed: usize,
    /// The most input `rbuf` held at once since the server's cron last
    /// looked (what a shrunk buffer keeps room for).
    qbuf_peak: usize,
    out: ReplyBuf,
    eof: bool,
    limits: ConnLimits,
    /// When the output buffer went over the soft limit (unix ms).
    soft_since: Option<i64>,
    /// The command last published to `handle.last_cmd`.
    published_cmd: &'static engine::core::spec::CommandSpec,
    /// A reply another thread produced (a served blocked command) was
    /// queued: it waits for the AOF like a write of its own.
    served_reply: bool,
    /// The next request asked to run after the other event-loop threads
    /// took in their input (`dispatch::Outcome::AfterInput`) ...
    wait_others: bool,
    /// ... and they did: it runs now.
    others_taken: bool,
    /// What this connection's `tot-mem` added to `Shared::clients_mem`
    /// (only while `maxmemory-clients` is set).
    mem_counted: usize,
    /// In `DURABLE` mode: the batch's replies to writes, held until the
    /// writes are acknowledged (`crate::network::durable`).
    held: Held,
    /// A DURABLE batch's held replies that timed out, with their error,
    /// rewritten with the replies held for replicas once those are known.
    refused: Option<(Held, String)>,
    /// The last batch ran more than one request (its replies wait for the
    /// end of the turn, `turn`).
    pipelined: bool,
}

impl<S: Transport> Conn<S> {
    /// Registers a new client on an accepted socket; over `maxclients`
    /// gives the socket and session back for the refusal.
    fn open(shared: Arc<Shared>, stream: S) -> Result<Box<Self>, Refused<S>> {
        stream.tune(shared.config.read().tcp_keepalive);
        let (peer, local) = stream.addrs();
        let fd = stream.fd();
        let sess = shared.connect(peer, local, fd);
        sess.handle.raw_bytes.store(stream.raw_bytes(), Ordering::Relaxed);
        if log::enabled(log::Level::Verbose) {
            log::verbose(&format!("Accepted {}", sess.handle.addr));
        }
        let notify = Arc::new(Signal::new());
        {
            let n = notify.clone();
            *sess.handle.waker.lock() = Some(Box::new(move || n.raise()));
        }
        let maxclients = shared.config.read().maxclients;
        if shared.connected_clients() > maxclients {
            return Err(Box::new((stream, sess, shared)));
        }
        let limits = ConnLimits::load(&shared, sess.authenticated);
        let node = crate::host::node(&shared);
        let (durable, master) = (node.durable.clone(), node.master.clone());
        let mut conn = Box::new(Conn {
            durable,
            master,
            shared,
            stream,
            notify,
            slot: Some(crate::busy::Slot::new(fd, serve_parked::<S>)),
            sess,
            rbuf: Vec::with_capacity(READ_CHUNK),
            rpos: 0,
            need: 0,
            unparsed: 0,
            qbuf_peak: 0,
            out: ReplyBuf::new(),
            eof: false,
            limits,
            soft_since: None,
            published_cmd: engine::commands::find(b"PING").expect("PING is in the table"),
            served_reply: false,
            wait_others: false,
            others_taken: false,
            mem_counted: 0,
            held: Held::default(),
            refused: None,
            pipelined: false,
        });
        conn.publish_memory();
        Ok(conn)
    }
}

/// Why a connection ended.
type Closed = &'static str;

/// How a batch of requests ended (`Conn::execute_batch`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// The input ran out, or the output backed up: wait for the socket.
    More,
    /// This turn's budget is spent: let the thread's other connections run.
    Yield,
    /// CLIENT PAUSE holds the next request: wait ([`pause_wait`]), then
    /// try it again.
    Paused,
}

/// The wait of a request CLIENT PAUSE holds, before it is tried again.
async fn pause_wait() {
    tokio::time::sleep(Duration::from_millis(10)).await;
}

impl<S: Transport> Conn<S> {
    async fn run(&mut self, notify: &Signal) -> Result<(), Closed> {
        if let Some(slot) = &self.slot {
            // Parked since it was opened (`start`).
            slot.unpark();
        }
        loop {
            if self.sess.handle.killed.load(Ordering::Acquire) {
                return Err("killed");
            }
            if self.sess.blocked.is_some() {
                self.wait_blocked(notify).await?;
                if self.sess.blocked.is_some() {
                    continue;
                }
            }
            if self.sess.handle.outbox.pending() > 0 {
                self.drain_outbox();
            }
            if self.sess.handle.qbuf_resize.load(Ordering::Relaxed) {
                self.resize_query_buffer();
            }
            if self.wait_others {
                // A request waits for the other loops to take in the input
                // their sockets hold (`Flags::AFTER_INPUT`); boxed, as the
                // durable path below, so that this loop's future keeps its
                // size.
                Box::pin(crate::net::others_took_input(&self.shared)).await;
                self.wait_others = false;
                self.others_taken = true;
            }
            // The one test a connection not in DURABLE mode pays for it;
            // the durable path is boxed so that this loop's future stays
            // its own size.
            let budget_left = match self.sess.durable {
                None => {
                    let turn = self.execute_batch::<false>();
                    if turn == Turn::Paused {
                        Box::pin(pause_wait()).await;
                    }
                    turn == Turn::More
                }
                Some(mode) => Box::pin(self.execute_durable(mode, notify)).await,
            };
            // Checked before writing: the limit is on replies the batch
            // queued, as Redis checks it when replies are added.
            if self.over_output_limit() {
                self.shared.stats.client_obuf_limit_disconnections.fetch_add(1, Ordering::Relaxed);
                log::warning(
                    "Client scheduled to be closed ASAP for overcoming of output buffer limits.",
                );
                return Err("output buffer limit");
            }
            if self.sess.fx.holding() || self.served_reply {
                self.hold_for_aof(notify).await;
            }
            if self.pipelined && !self.out.is_empty() {
                // A pipeline's replies are written with the other
                // connections' replies of this turn, once they have run
                // (`turn`); a lone request's at once (its client waits
                // for nothing else: the extra polls cost a P=1 GET some
                // 590 instructions, for no measured gain on cheap
                // commands). Parked meanwhile, as in `wait_io`: if a
                // script of this thread turns busy before the turn ends,
                // its busy pass writes these replies and answers what
                // follows, as Redis writes pending replies while a script
                // runs.
                let me: *mut Self = self;
                // SAFETY: as in `wait_io`: until the guard drops, this
                // task is suspended in the wait below, which holds no
                // reference into the connection (`end_of_turn` holds a
                // flag), and the connection's code resumes only after it.
                let _parked = self.slot.as_ref().map(|s| unsafe { s.park(me.cast()) });
                crate::network::turn::end_of_turn().await;
            }
            self.flush()?;
            // After the write: what stays unwritten is what the client
            // costs (input read ahead, a big argument on its way, replies
            // and pushes the socket did not take).
            self.publish_memory();
            if self.sess.blocked.is_some() {
                continue;
            }
            if self.sess.close_after_reply || self.eof {
                // Deliver what is pending, then close.
                if self.out.is_empty()
                    && !self.stream.pending_out()
                    && (self.sess.close_after_reply || !self.has_complete_input())
                {
                    return Ok(());
                }
            }
            if !budget_left {
                // Fair share: let the other connections of this thread run.
                tokio::task::yield_now().await;
                continue;
            }
            if self.has_complete_input()
                && self.out.len() < self.high_water()
                && !self.sess.close_after_reply
            {
                // The socket drained below the high-water mark and input is
                // waiting: nothing else would wake us for it.
                continue;
            }
            // Over the soft output limit: woken when its seconds are up,
            // so that a client that stopped reading (and is sent nothing
            // more) is closed then, as Redis's clientsCron closes it.
            let soft_wait = self.soft_since.map(|since| {
                let end = (since / 1000 + self.obuf_class().soft_seconds as i64 + 1) * 1000;
                Duration::from_millis((end - unix_ms()).clamp(10, 60_000) as u64)
            });
            self.wait_io(notify, soft_wait).await?;
        }
    }

    /// Sleeps until input arrives (while there is room for it), pending
    /// output can be written, the connection is woken (CLIENT KILL, a
    /// served wait, CLIENT UNPAUSE…) or `timeout` passes; reads what came.
    async fn wait_io(&mut self, notify: &Signal, timeout: Option<Duration>) -> Result<(), Closed> {
        let pending_out = !self.out.is_empty() || self.stream.pending_out();
        let can_read = !self.eof && self.rbuf.len() - self.rpos < self.limits.query_limit;
        // While it waits, a busy script of this thread may serve it.
        let me: *mut Self = self;
        // SAFETY: until the guard drops, this task is suspended in the
        // wait below, which holds no reference into the connection across
        // the suspension (the stream is reached through `stream` afresh at
        // each poll, which runs only when the task does, never during a
        // busy pass) and otherwise touches only `notify`;
        // `serve_while_busy` touches neither: its `_direct` calls use the
        // socket's fd and the TLS session state.
        let _parked = self.slot.as_ref().map(|s| unsafe { s.park(me.cast()) });
        // Polled by hand rather than with `tokio::select!` over tokio's
        // readiness futures: `poll_read_ready` keeps the task's waker in
        // the socket's own slot, where `readable()` linked and unlinked a
        // waiter node under a lock on every wait. In this order, with no
        // random start: what the later ones signal is also checked at
        // the top of the loop (kill flag, outbox), so none is starved.
        // The timer is built only for a timeout (a blocked client's).
        let mut sleep = std::pin::pin!(timeout.map(tokio::time::sleep));
        let stream: *const S = &self.stream;
        let mut waited = false;
        let woke = std::future::poll_fn(|cx| {
            if waited && can_read && S::READ_CHECKS_READINESS {
                // Woken (by the socket, mostly): read at once. The read
                // looks at the readiness itself and says WouldBlock,
                // without a syscall, when the wake-up was for something
                // else (the loop's top then sees the kill flag, the
                // outbox; a raise not taken here is taken by the next
                // wait, a timeout is rebuilt by it). Polling the
                // readiness again first cost some 90 instructions a
                // request at P=1.
                return Poll::Ready(Ok(true));
            }
            waited = true;
            // SAFETY: the connection outlives its own wait, and nothing
            // else touches the stream while this poll runs (see above).
            let stream = unsafe { &*stream };
            if can_read {
                if let Poll::Ready(r) = stream.poll_read_ready(cx) {
                    return Poll::Ready(r.map(|()| true).map_err(|_| "read error"));
                }
            }
            if pending_out {
                if let Poll::Ready(r) = stream.poll_write_ready(cx) {
                    return Poll::Ready(r.map(|()| false).map_err(|_| "write error"));
                }
            }
            if notify.poll(cx).is_ready() {
                return Poll::Ready(Ok(false));
            }
            match sleep.as_mut().as_pin_mut().map(|s| std::future::Future::poll(s, cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Ok(false)),
                _ => Poll::Pending,
            }
        })
        .await;
        if woke? {
            self.read()?;
        }
        Ok(())
    }

    /// One wait of a blocked client (BLPOP …): delivers the reply if the
    /// wait has ended, else sleeps until it may have (woken by a serving
    /// thread or CLIENT UNBLOCK, the timeout, or socket activity). Input
    /// keeps being read meanwhile; end of input closes the connection at
    /// once, as Redis frees a blocked client whose peer closed.
    async fn wait_blocked(&mut self, notify: &Signal) -> Result<(), Closed> {
        let now = self.shared.clock.now_ms();
        // Serving the wait may run its command (a write, for BLMOVE).
        self.sess.handle.begin_run();
        let resolved = engine::core::blocking::resolve(&self.shared, &mut self.sess, now);
        self.sess.handle.end_run();
        if let Some(reply) = resolved {
            if !reply.is_empty() {
                dispatch::deliver_blocked(&mut self.sess, &mut self.out, &reply);
            }
            // The ended call's counts (commandstats, errorstats) are
            // visible by the time its client reads the reply.
            self.shared.flush_stats(&mut self.sess);
            // A served wait's reply is in the outbox.
            self.drain_outbox();
            self.hold_for_aof(notify).await;
            self.sess.handle.last_interaction_ms.store(now, Ordering::Relaxed);
            return Ok(());
        }
        if self.sess.handle.outbox.pending() > 0 {
            // Pushes (a RESP3 client may be subscribed while it waits).
            self.drain_outbox();
        }
        self.flush()?;
        if self.eof {
            return Err("closed while blocked");
        }
        let deadline = self.sess.blocked.as_ref().and_then(|b| b.deadline);
        // Woken in the millisecond after the deadline (`blocking::resolve`).
        let timeout =
            deadline.map(|d| Duration::from_millis((d.saturating_add(1) - now).max(0) as u64));
        self.wait_io(notify, timeout).await
    }

    /// Group commit: replies to writes wait until the AOF acknowledged
    /// them (written, or fsynced under `appendfsync always`). A reply
    /// another thread's write produced (a served blocked command) waits
    /// for everything appended so far. The batch loop calls this only
    /// when there is something to wait for (a load and a test otherwise).
    /// Before that, the replication stream the replies' writes appended
    /// goes to the replicas' sockets ([`crate::repl::Master::push`]).
    /// Then the replies a command held until replicas have its write
    /// (ADDJOB's `REPLICATE n`, `durable::wait_for_copies`).
    #[cold]
    async fn hold_for_aof(&mut self, notify: &Signal) {
        let mut hold = self.sess.fx.take_hold();
        let served = std::mem::take(&mut self.served_reply);
        if self.sess.fx.take_push() || served {
            self.master.push();
        }
        if served {
            hold = hold.max(self.durable.last());
        }
        if hold > 0 {
            self.durable.wait(hold).await;
        }
        if self.sess.fx.holds_for_replicas() {
            let holds = self.sess.fx.take_replica_holds();
            let refused = self.refused.take();
            let wait = durable::wait_for_copies(
                &self.shared,
                &self.sess,
                &mut self.out,
                holds,
                refused,
                notify,
            );
            Box::pin(wait).await;
        }
    }

    /// Moves what other threads queued for this client (a served blocked
    /// command's reply, pushes) into the reply buffer, to go out in the
    /// same write as its own replies.
    fn drain_outbox(&mut self) {
        let handle = self.sess.handle.clone();
        handle.outbox.drain(|kind, msg| match kind {
            engine::core::outbox::Kind::Reply => {
                self.served_reply = true;
                dispatch::deliver_blocked(&mut self.sess, &mut self.out, msg)
            }
            engine::core::outbox::Kind::Push
            | engine::core::outbox::Kind::Early
            | engine::core::outbox::Kind::After => self.out.raw(msg),
        });
    }

    /// `client-output-buffer-limit` for the client's class (pubsub while
    /// it is subscribed, else normal), as Redis applies it: over the hard
    /// limit at once, or over the soft limit for `soft_seconds` without a
    /// break. (With backpressure a normal client's buffer only exceeds
    /// `OUT_HIGH_WATER` by one reply, so only limits below that can
    /// trigger; a subscriber's grows with what it is sent and does not
    /// read.)
    fn over_output_limit(&mut self) -> bool {
        let used = (self.out.len() + self.sess.handle.outbox.pending()) as u64;
        self.sess.handle.omem.store(self.out.len(), Ordering::Relaxed);
        let ObufLimit { hard, soft, soft_seconds } = self.obuf_class();
        // A reply that went past the hard limit (or the buffer's own cap)
        // while it was built is incomplete: the client goes.
        if self.out.is_over() || (hard > 0 && used > hard) {
            return true;
        }
        if soft > 0 && used > soft {
            let now = unix_ms();
            let since = *self.soft_since.get_or_insert(now);
            // Redis counts whole seconds of its clock and closes only once
            // more than `soft_seconds` of them have passed.
            return now / 1000 - since / 1000 > soft_seconds as i64;
        }
        self.soft_since = None;
        false
    }

    /// The output limit class of the client: pubsub while it is
    /// subscribed, else normal.
    fn obuf_class(&self) -> ObufLimit {
        if self.sess.subs.total() > 0 {
            self.limits.obuf_pubsub
        } else {
            self.limits.obuf
        }
    }

    /// Whether unexecuted complete requests may be buffered.
    fn has_complete_input(&self) -> bool {
        self.rbuf.len() > self.rpos && self.rbuf.len() >= self.need
    }

    /// Reads what the socket has.
    fn read(&mut self) -> Result<(), Closed> {
        loop {
            // A big argument's room is made as its bytes come (a megabyte
            // at a time), not reserved whole from its announced length: a
            // client that announces a huge bulk and stalls costs little.
            // A big argument's last step is exactly what is left of it,
            // not a read chunk: its buffer then ends at the argument's end
            // whatever sizes the reads had, so clients that sent the same
            // bytes cost the same (`tot-mem`, by which `maxmemory-clients`
            // orders clients, as Redis sizes a big argument's buffer to
            // it). Only for the argument itself: a request of many small
            // arguments keeps reading a chunk at a time.
            let rest = self.need.saturating_sub(self.rbuf.len());
            let want = if rest > 0 && self.big_arg_pending() {
                rest.min(1 << 20)
            } else {
                rest.clamp(READ_CHUNK, 1 << 20)
            };
            if self.rbuf.capacity() - self.rbuf.len() < want {
                self.grow_input(want);
            }
            match self.stream.try_read_buf(&mut self.rbuf) {
                Ok(0) => {
                    owned_add(&self.sess.handle.reads, 1);
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    owned_add(&self.sess.handle.net_in, n as u64);
                    owned_add(&self.sess.handle.reads, 1);
                    if self.rbuf.len() - self.rpos > self.limits.query_limit {
                        self.shared
                            .stats
                            .client_qbuf_limit_disconnections
                            .fetch_add(1, Ordering::Relaxed);
                        log::warning("Closing client that reached max query buffer length");
                        return Err("query buffer limit");
                    }
                    // Enough unexecuted input is buffered: execute it
                    // before reading more (Redis reads 16 KB per event).
                    // A client flooding a pipeline then waits in the
                    // socket, not in memory that counts against maxmemory.
                    if self.rbuf.len() - self.rpos >= READ_AHEAD && self.rbuf.len() >= self.need {
                        return Ok(());
                    }
                    // Keep reading only while reads fill what we offered.
                    if self.rbuf.len() < self.rbuf.capacity() {
                        // A short read drained the socket: forget its
                        // readiness now, or the next wait would first make
                        // a read that only says EAGAIN (one syscall in
                        // three per pipelined batch). Data arriving later
                        // raises a fresh edge from epoll.
                        self.stream.drained();
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Err("read error"),
            }
        }
    }

    /// Whether the input stops inside a bulk argument of at least
    /// [`BIG_ARG`] bytes whose header is read (`need` is then its end and
    /// `unparsed` its first byte).
    fn big_arg_pending(&self) -> bool {
        self.unparsed >= self.rpos && self.need.saturating_sub(self.unparsed) >= BIG_ARG
    }

    /// Makes room for `want` more input bytes: doubling (amortised), but
    /// never past the request being read when its size is known, so that
    /// a big argument's buffer is its size, not up to twice it (it counts
    /// in `tot-mem` and `maxmemory-clients`). The client's memory is
    /// published when the buffer grew, so that a client that passes
    /// `maxmemory-clients` with the request it is sending is closed
    /// before that request runs, as Redis closes it.
    #[cold]
    fn grow_input(&mut self, want: usize) {
        let len = self.rbuf.len();
        let mut cap = (self.rbuf.capacity() * 2).max(len + want);
        if self.need > len + want {
            cap = cap.min(self.need);
        } else if self.need > len {
            cap = cap.min(len + want);
        }
        self.rbuf.reserve_exact(cap - len);
        self.publish_memory();
    }

    /// Writes as much pending output as the socket takes.
    fn flush(&mut self) -> Result<(), Closed> {
        while !self.out.is_empty() {
            // Sixteen chunks a call (256 KiB): more than a socket takes in
            // one write, and a small array to set up per flush; one slice
            // when the replies are in one chunk (no array to fill).
            let r = match self.out.single() {
                Some(one) => self.stream.try_write_vectored(&[IoSlice::new(one)]),
                None => {
                    let mut slices = [IoSlice::new(&[]); 16];
                    let n = self.out.io_slices(&mut slices);
                    self.stream.try_write_vectored(&slices[..n])
                }
            };
            match r {
                Ok(0) => return Err("write returned zero"),
                Ok(w) => {
                    self.out.consume(w);
                    owned_add(&self.sess.handle.net_out, w as u64);
                    owned_add(&self.sess.handle.writes, 1);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Err("write error"),
            }
        }
        if self.stream.pending_out() {
            self.stream.flush_pending().map_err(|_| "write error")?;
        }
        // What is still unwritten counts against the output limit that
        // publishers check (`engine::subsystems::pubsub`).
        self.sess.handle.omem.store(self.out.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Executes buffered requests until the input runs out, the output is
    /// backed up, or this turn's budget is spent (returns false then).
    ///
    /// Requests are parsed a window at a time; before each request runs,
    /// the keys of the requests a few places ahead are prefetched (their
    /// stripe, then bucket, then first table node), so that a pipelined batch
    /// overlaps its cache misses instead of paying them one by one. This
    /// is what pipelining buys on the server side beyond fewer syscalls.
    ///
    /// Not `async`: its locals (the window's lock holder, the argument
    /// vector, the prefetch cursors) are plain stack variables rather
    /// than fields of the connection's future. A request CLIENT PAUSE
    /// holds ends the batch with [`Turn::Paused`], and the caller waits.
    fn execute_batch<const DURABLE: bool>(&mut self) -> Turn {
        let epoch = self.shared.config_epoch.load(Ordering::Relaxed);
        if epoch != self.limits.epoch {
            self.limits = ConnLimits::load(&self.shared, self.sess.authenticated);
        }
        // The hard limit holds while replies are built (`ReplyBuf`).
        self.out.set_limit(self.obuf_class().hard as usize);
        let start_out = self.out.len();
        let mut budget_left = true;
        let mut paused = false;
        let mut executed = 0usize;
        // A failover's or shutdown's hold waits for this mark to end
        // (`Shared::quiesce`): the batch's writes are then all published.
        self.sess.handle.begin_run();
        // Commands of this batch run back to back: each one's stopwatch
        // starts where the previous one's stopped (one clock read each).
        self.sess.batch_lap = true;
        self.sess.lap = 0;
        // Its units leave tracking's broadcasts to its end (`after_batch`).
        self.sess.fx.batched = true;
        let mut last_now = 0;
        let mut window = take_window();
        'batch: while !self.sess.close_after_reply && self.has_complete_input() {
            if executed > 0 && self.limits.clients_limit != 0 {
                // Redis counts a client's memory after each command
                // (call()), so that what its replies grew closes clients
                // over `maxmemory-clients` before the next command can
                // evict keys for that memory: one request per window then.
                self.publish_memory();
                if self.sess.handle.killed.load(Ordering::Relaxed) {
                    break 'batch;
                }
            }
            // Parse a window. Until the client is authenticated the limits
            // change with AUTH, so parse one request at a time then; and
            // while `maxmemory-clients` is set (above).
            let max =
                if self.sess.authenticated && self.limits.clients_limit == 0 { WINDOW } else { 1 };
            let mut n = 0;
            let mut off = self.rpos;
            let mut stop = None;
            let shared: &Shared = &self.shared;
            let store = &shared.store;
            let db = self.sess.db;
            // The last key token parsed, to tell a repeat of its key.
            let mut prev = None;
            // Whether any request of the window has member stages due.
            let mut members = false;
            while n < max && off < self.rbuf.len() {
                let w = &mut window[n];
                match resp::parse(&self.rbuf[off..], &self.limits.parse, &mut w.args) {
                    Parsed::Command { consumed } | Parsed::Empty { consumed } => {
                        w.start = off;
                        w.len = consumed;
                        // Where its key lives, for the prefetch stages.
                        let t = if w.args.len() >= 2 {
                            store
                                .prefetch_token(db, w.args.get(&self.rbuf[off..], 1))
                                .map(|t| t.after(prev))
                        } else {
                            None
                        };
                        let at = if t.is_some_and(|t| t.repeats()) && w.args.len() >= 3 {
                            member_arg(w.args.get(&self.rbuf[off..], 0), w.args.len())
                        } else {
                            0
                        };
                        let member = at != 0;
                        if member {
                            w.member_at.set(at);
                        }
                        if t.is_some() {
                            prev = t;
                        }
                        w.token.set(t);
                        members |= member;
                        w.member.set(if member { MEMBER_DUE } else { NO_MEMBER });
                        off += consumed;
                        n += 1;
                    }
                    Parsed::Incomplete { need } => {
                        // Absolute position in `rbuf` (`need` counts from `off`).
                        stop = Some(Parsed::Incomplete { need: off + need });
                        self.unparsed = off + window[n].args.unparsed_from();
                        break;
                    }
                    Parsed::Error(e) => {
                        stop = Some(Parsed::Error(e));
                        break;
                    }
                }
            }
            // One clock reading per window: its requests run as one batch.
            let batch_now = self.shared.clock.now_ms();
            last_now = batch_now;
            // One lock holder for the window's requests, not one each:
            // every request releases what it took before the next. Its
            // block ends before `stop` is looked at: dropped in place
            // there (`drop(keys)` copied its 180 bytes out first).
            {
                let mut keys = store::Locks::new(store, batch_now);
                // Prime the pipeline of prefetches for the window's first
                // requests, which the stages below never reach: every
                // stage for them here, one after the other, so that the
                // first of each waits for the stage before and the rest
                // find theirs arrived meanwhile (their misses overlap,
                // where their execution would take them one by one). A
                // lone request gains nothing by it.
                for j in 0..n.min(BUCKET_AHEAD) {
                    if let Some(t) = window[j].token.get() {
                        store.prefetch_bucket(t);
                    }
                }
                if n > 1 {
                    for j in 0..n.min(NODE_AHEAD) {
                        if let Some(t) = window[j].token.get() {
                            store.prefetch_node(t);
                        }
                    }
                    for j in 0..n.min(NEXT_AHEAD) {
                        if let Some(t) = window[j].token.get() {
                            store.prefetch_next(t);
                        }
                    }
                    for j in 0..n.min(KEY_AHEAD) {
                        if let Some(t) = window[j].token.get() {
                            store.prefetch_key(t);
                        }
                    }
                    if members {
                        self.member_stages(&window[..], 0, n, true);
                    }
                }
                // The two reasons to stop before a request, as one bound
                // tested per request: the high-water mark, and this turn's
                // budget of reply bytes (which of them it was is told
                // apart only when one is reached).
                let high = self.high_water();
                let budget_end = start_out.saturating_add(TURN_BUDGET);
                let stop_at = high.min(budget_end);
                // Up to 8 arguments go to an array on the stack, filled in
                // one pass over the spans; more in a vector. Set up once
                // for the window: each request overwrites what it uses.
                let mut small: [&[u8]; 8] = [&[]; 8];
                // Decided once for the window: whether its plain
                // single-key commands may take the lean path. A request
                // that leaves it (any other command) ends it for the
                // rest of the window, since it may have changed what
                // was decided.
                let mut lean = dispatch::lean_gate(shared, &mut self.sess);
                for i in 0..n {
                    if self.out.len() >= stop_at || self.out.is_over() {
                        if self.out.len() < high && !self.out.is_over() {
                            budget_left = false;
                        }
                        break 'batch;
                    }
                    if i + BUCKET_AHEAD < n {
                        if let Some(t) = window[i + BUCKET_AHEAD].token.get() {
                            store.prefetch_bucket(t);
                        }
                    }
                    if i + NODE_AHEAD < n {
                        if let Some(t) = window[i + NODE_AHEAD].token.get() {
                            store.prefetch_node(t);
                        }
                    }
                    if i + NEXT_AHEAD < n {
                        if let Some(t) = window[i + NEXT_AHEAD].token.get() {
                            store.prefetch_next(t);
                        }
                    }
                    if i + KEY_AHEAD < n {
                        if let Some(t) = window[i + KEY_AHEAD].token.get() {
                            store.prefetch_key(t);
                        }
                    }
                    if members {
                        self.member_stages(&window[..], i, n, false);
                    }
                    let w = &window[i];
                    let input = &self.rbuf[w.start..];
                    if w.args.is_empty() {
                        self.rpos = w.start + w.len;
                        continue;
                    }
                    let was_auth = self.sess.authenticated;
                    let next = w.start + w.len;
                    let after_input = !std::mem::take(&mut self.others_taken);
                    let hint =
                        dispatch::Hint { now: batch_now, key: w.token.get(), after_input, lean };
                    let before = DURABLE.then(|| Held::before(&self.out, &self.sess));
                    // The argument vector lives in this block only: nothing of
                    // it is kept in the future across the waits below.
                    let outcome = {
                        let mut big: Vec<&[u8]> = Vec::new();
                        let argv: &[&[u8]] = if w.args.len() <= small.len() {
                            let n = w.args.fill_array(input, &mut small);
                            &small[..n]
                        } else {
                            w.args.fill(input, &mut big);
                            &big
                        };
                        dispatch::execute_with(
                            shared,
                            &mut self.sess,
                            &mut keys,
                            argv,
                            &mut self.out,
                            hint,
                        )
                    };
                    if let Some(b) = before {
                        self.held.note(&self.out, &self.sess, b);
                    }
                    lean &= outcome == dispatch::Outcome::Lean;
                    if outcome == dispatch::Outcome::Paused {
                        // CLIENT PAUSE: nothing ran; the caller waits
                        // (`pause_wait`), then this request is tried again.
                        paused = true;
                        break 'batch;
                    }
                    if outcome == dispatch::Outcome::AfterInput {
                        // INFO, CLIENT LIST: nothing ran; the next turn runs
                        // it once the other loops took in their input (the
                        // wait is not in this loop, whose locals would then
                        // live in the future: a cost to every command).
                        self.wait_others = true;
                        budget_left = false;
                        break 'batch;
                    }
                    self.rpos = next;
                    self.need = 0;
                    executed += 1;
                    // The invalidation of a key this client tracks and
                    // the command just modified follows the command's
                    // reply, before the next one's, as Redis 7.0 sends it
                    // (after CLIENT REPLY had its say on the reply).
                    if self.sess.handle.outbox.has_after() {
                        after_reply(&self.sess, &mut self.out);
                    }
                    if self.sess.authenticated != was_auth {
                        self.limits.parse.unauthenticated = !self.sess.authenticated;
                    }
                    if self.sess.blocked.is_some() {
                        // The rest of the input waits for the blocking command.
                        break 'batch;
                    }
                    if self.sess.close_after_reply || self.sess.db != db {
                        // Later prefetches assumed this database; re-window.
                        continue 'batch;
                    }
                }
            }
            match stop {
                None => {}
                Some(Parsed::Incomplete { need }) => {
                    self.need = need;
                    break;
                }
                Some(Parsed::Error(e)) => {
                    self.protocol_error(&e);
                    break;
                }
                Some(_) => unreachable!("only incomplete and error stop a window"),
            }
        }
        put_window(window);
        self.sess.handle.end_run();
        self.mark_closing();
        self.sess.batch_lap = false;
        self.sess.lap = 0;
        self.sess.fx.batched = false;
        self.compact();
        if executed > 0 {
            self.after_batch(self.shared.clock.system_ms(last_now));
        }
        self.pipelined = executed > 1;
        if paused {
            Turn::Paused
        } else if budget_left {
            Turn::More
        } else {
            Turn::Yield
        }
    }

    /// The member stages due before request `i` of the window's `n` runs
    /// (see [`MEMBER_AHEAD`]): stage one for request `i + MEMBER_AHEAD`,
    /// two for `i + MNODE_AHEAD`, three for `i + MNEXT_AHEAD`, or for the
    /// window's first requests (`prime`) all of them for every request in
    /// reach. Stage one runs in order of requests, so the previous
    /// request's has run: when it found no table, neither would this one
    /// (the same key). The stages of requests to one key (what they are
    /// for: a run of them) share one lock of its stripe and one lookup.
    /// Out of line: a window without member stages never calls it.
    #[inline(never)]
    fn member_stages(&self, window: &[Pending], i: usize, n: usize, prime: bool) {
        // (request, stage) pairs due now: at most three, or when priming
        // every one in reach, taken a few at a time.
        let mut due: [(usize, u8); 3] = [(0, 0); 3];
        let mut k = 0;
        let push = |j: usize, stage: u8, due: &mut [(usize, u8); 3], k: &mut usize| {
            let w = &window[j];
            let m = w.member.get();
            let wanted = if stage == 1 {
                if m != MEMBER_DUE {
                    return;
                }
                if j > 0 && window[j - 1].member.get() == NO_TABLE {
                    w.member.set(NO_TABLE);
                    return;
                }
                true
            } else {
                m > NO_TABLE
            };
            if wanted {
                due[*k] = (j, stage);
                *k += 1;
            }
        };
        if prime {
            // Stage after stage, three requests' at a time (one lock).
            for (reach, stage) in [(MEMBER_AHEAD, 1), (MNODE_AHEAD, 2), (MNEXT_AHEAD, 3)] {
                for j in 0..n.min(reach) {
                    push(j, stage, &mut due, &mut k);
                    if k == due.len() {
                        self.run_member_stages(window, &mut due, &mut k);
                    }
                }
                self.run_member_stages(window, &mut due, &mut k);
            }
            return;
        }
        for (ahead, stage) in [(MEMBER_AHEAD, 1), (MNODE_AHEAD, 2), (MNEXT_AHEAD, 3)] {
            if i + ahead < n {
                push(i + ahead, stage, &mut due, &mut k);
            }
        }
        self.run_member_stages(window, &mut due, &mut k);
    }

    /// Runs the member stages listed in `due[..k]`, one stripe lock and
    /// lookup for those of the first one's key and another for the rest
    /// (which are rare: requests to other keys in between), and empties
    /// the list.
    fn run_member_stages(&self, window: &[Pending], due: &mut [(usize, u8); 3], k: &mut usize) {
        let store = &self.shared.store;
        let mut left = &due[..*k];
        while let Some(&(j0, _)) = left.first() {
            let Some(t0) = window[j0].token.get() else { break };
            let key = window[j0].args.get(&self.rbuf[window[j0].start..], 1);
            let mut rest: [(usize, u8); 3] = [(0, 0); 3];
            let mut r = 0;
            store.with_member_value(t0, key, |v| {
                for &(j, stage) in left {
                    let w = &window[j];
                    if !w.token.get().is_some_and(|t| t.same_key(&t0)) {
                        rest[r] = (j, stage);
                        r += 1;
                        continue;
                    }
                    match (stage, v) {
                        (1, Some(v)) => {
                            let at = usize::from(w.member_at.get());
                            let member = w.args.get(&self.rbuf[w.start..], at);
                            let h = v.prefetch_member(member);
                            w.member.set(if h > NO_TABLE { h } else { NO_TABLE });
                        }
                        (1, None) => w.member.set(NO_TABLE),
                        (_, Some(v)) => v.prefetch_member_node(w.member.get(), stage == 3),
                        (_, None) => {}
                    }
                }
            });
            // The others, if any, on their own key (at most two, so this
            // ends): copied out, as `left` borrows `due`.
            if r == 0 || r == left.len() {
                break;
            }
            due[..r].copy_from_slice(&rest[..r]);
            left = &due[..r];
        }
        *k = 0;
    }

    /// A batch in `DURABLE` mode: run as any other, noting the replies to
    /// writes, then held until the writes are acknowledged (or the mode's
    /// timeout rewrote those replies as errors).
    async fn execute_durable(&mut self, mode: Durable, notify: &Signal) -> bool {
        let turn = self.execute_batch::<true>();
        if turn == Turn::Paused {
            pause_wait().await;
        }
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            let refused = durable::wait(&self.shared, &self.sess, mode, notify).await;
            if refused.is_none() && mode.replicas > 0 && !self.sess.fx.holds_for_replicas() {
                // Acknowledged by the replicas: nothing is left to push
                // before the replies (the wait pushed, and they have it).
                self.sess.fx.take_push();
            }
            if let Some(line) = refused {
                if self.sess.fx.holds_for_replicas() {
                    // Rewritten with the replies held for replicas, after
                    // their wait: both count places in the buffer as is.
                    self.refused = Some((held, line));
                } else {
                    durable::replace_held(&mut self.out, &held, line.as_bytes());
                }
            }
        }
        turn == Turn::More
    }

    /// A request that does not parse: Redis's error line, then the
    /// connection closes once it is written.
    #[cold]
    fn protocol_error(&mut self, e: &resp::ProtocolError) {
        // An error reply like any other (errorstats).
        self.shared.cmdstats.error(&e.reply_text());
        self.out.error(&e.reply_text());
        log::verbose(&format!(
            "Protocol error ({}) from client: id={} addr={}",
            String::from_utf8_lossy(&e.reply_text()[20..]),
            self.sess.handle.id,
            self.sess.handle.addr
        ));
        self.sess.close_after_reply = true;
        self.rpos = self.rbuf.len();
    }

    /// What a batch that executed something publishes: tracking's
    /// broadcasts, stats, CLIENT LIST's figures, the last command's name.
    /// `at` is the Unix time of the last interaction: for a batch, its
    /// last window's clock reading (no second read of the system clock).
    fn after_batch(&mut self, at: i64) {
        if self.shared.tracker.has_pending() {
            // BCAST keys the batch (or another thread) modified: sent once
            // per batch, as Redis sends them once per event-loop turn; a
            // push to this client goes out in the same write as the
            // batch's replies, after them.
            self.shared.tracker.broadcast();
            if self.sess.handle.outbox.pending() > 0 {
                self.drain_outbox();
            }
        }
        {
            self.shared.flush_stats(&mut self.sess);
            self.sess.handle.last_interaction_ms.store(at, Ordering::Relaxed);
            if let Some((top, spec)) = self.sess.last_cmd {
                if !std::ptr::eq(spec, self.published_cmd) {
                    self.published_cmd = spec;
                    *self.sess.handle.last_cmd.lock() = dispatch::full_name(top, spec);
                }
            }
        }
    }

    /// Served by a busy pass (`crate::busy`) while its task waits and a
    /// script of this thread runs past `busy-reply-threshold`: reads what
    /// the socket has, executes the complete requests in order (the
    /// dispatcher answers BUSY to those without `allow-busy`), writes the
    /// replies, then wakes its task so that its loop looks again once
    /// the thread is free. Reads and writes go to the socket directly
    /// (the transport's `_direct` calls, TLS included): the thread's
    /// reactor does not run meanwhile, so tokio's view of the socket's
    /// readiness is stale, not its state.
    fn serve_while_busy(&mut self) {
        if self.sess.blocked.is_some()
            || self.sess.close_after_reply
            || self.eof
            || self.served_reply
            || self.sess.fx.holding()
            || self.sess.durable.is_some()
            || self.sess.handle.killed.load(Ordering::Acquire)
        {
            return;
        }
        self.read_while_busy();
        if self.sess.handle.outbox.pending() > 0 {
            self.drain_outbox();
        }
        let executed = self.execute_while_busy();
        self.compact();
        if executed {
            self.after_batch(unix_ms());
        }
        // Replies waiting for the AOF go out from the task, after it.
        if !self.served_reply && !self.sess.fx.holding() {
            self.write_while_busy();
        }
        self.publish_memory();
        self.notify.raise();
    }

    fn read_while_busy(&mut self) {
        while self.rbuf.len() - self.rpos < READ_AHEAD.min(self.limits.query_limit) {
            self.rbuf.reserve(READ_CHUNK);
            let room = self.rbuf.capacity() - self.rbuf.len();
            match self.stream.read_direct(&mut self.rbuf) {
                Ok(0) => {
                    self.eof = true;
                    return;
                }
                Ok(n) => {
                    self.sess.handle.net_in.fetch_add(n as u64, Ordering::Relaxed);
                    if n < room {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // WouldBlock, or an error its task meets again and reports.
                Err(_) => return,
            }
        }
    }

    fn write_while_busy(&mut self) {
        while !self.out.is_empty() {
            let mut slices = [IoSlice::new(&[]); 64];
            let n = self.out.io_slices(&mut slices);
            match self.stream.write_direct(&slices[..n]) {
                Ok(0) => break,
                Ok(w) => {
                    self.out.consume(w);
                    self.sess.handle.net_out.fetch_add(w as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        // TLS records not yet written (the socket was full): the task
        // writes them once it runs again.
        let _ = self.stream.flush_direct();
        self.sess.handle.omem.store(self.out.len(), Ordering::Relaxed);
    }

    /// Executes complete requests one at a time, in order, through the
    /// dispatcher; none of them waits for the stripes the busy script
    /// holds (WATCH takes its stripes only if free at once, else BUSY;
    /// UNWATCH, DISCARD and RESET leave a WATCH on a held stripe to be
    /// taken off later: `engine::commands::tx`). True if any ran.
    fn execute_while_busy(&mut self) -> bool {
        let mut executed = false;
        // Its own argument table: this runs inside another connection's
        // batch (a busy script's), which holds the thread's window.
        let mut args = ArgBuf::new();
        self.sess.handle.begin_run();
        while !self.sess.close_after_reply
            && self.sess.blocked.is_none()
            && self.has_complete_input()
            && self.out.len() < self.high_water()
        {
            match resp::parse(&self.rbuf[self.rpos..], &self.limits.parse, &mut args) {
                Parsed::Command { consumed } => {
                    let input = &self.rbuf[self.rpos..];
                    let mut argv: SmallVec<[&[u8]; 8]> = SmallVec::new();
                    args.fill(input, &mut argv);
                    let was_auth = self.sess.authenticated;
                    let outcome =
                        dispatch::execute(&self.shared, &mut self.sess, &argv, &mut self.out);
                    if outcome == dispatch::Outcome::Paused {
                        break;
                    }
                    self.rpos += consumed;
                    self.need = 0;
                    executed = true;
                    if self.sess.authenticated != was_auth {
                        self.limits.parse.unauthenticated = !self.sess.authenticated;
                    }
                }
                Parsed::Empty { consumed } => self.rpos += consumed,
                Parsed::Incomplete { need } => {
                    self.need = self.rpos + need;
                    self.unparsed = self.rpos + args.unparsed_from();
                    break;
                }
                Parsed::Error(e) => {
                    self.protocol_error(&e);
                    break;
                }
            }
        }
        self.sess.handle.end_run();
        self.mark_closing();
        executed
    }

    /// Tells other threads the connection is closing once its replies
    /// are written (`ClientHandle::closing`), before they are.
    #[inline]
    fn mark_closing(&self) {
        if self.sess.close_after_reply {
            self.sess.handle.closing.store(true, Ordering::Release);
        }
    }

    /// CLIENT LIST's `qbuf`, `qbuf-free`, `omem` and `tot-mem` (Redis's
    /// getClientMemoryUsage: the connection's own state, its buffers, its
    /// queued transaction, subscriptions, watched keys and tracking
    /// prefixes), once per turn of the connection's loop. While
    /// `maxmemory-clients` is set, the change is added to the clients'
    /// running sum, and a client that grew it past the limit runs the
    /// exact check (`evict::evict_clients`) at once, as Redis evicts
    /// clients before the next command runs.
    fn publish_memory(&mut self) {
        let h = &self.sess.handle;
        h.qbuf.store(self.qbuf(), Ordering::Relaxed);
        h.qbuf_free.store(self.rbuf.capacity() - self.rbuf.len(), Ordering::Relaxed);
        h.omem.store(self.out.len(), Ordering::Relaxed);
        let own = std::mem::size_of::<Self>()
            + std::mem::size_of::<engine::core::session::ClientHandle>();
        let total = own
            + self.rbuf.capacity()
            + self.out.allocated()
            + h.multi_mem.load(Ordering::Relaxed)
            + self.sess.state_mem();
        h.tot_mem.store(total, Ordering::Relaxed);
        let limit = self.limits.clients_limit;
        if limit == 0 {
            self.uncount_memory();
            return;
        }
        if total == self.mem_counted {
            return;
        }
        let delta = total as i64 - self.mem_counted as i64;
        self.mem_counted = total;
        let sum = self.shared.clients_mem.fetch_add(delta, Ordering::Relaxed) + delta;
        if delta > 0 && sum >= limit as i64 {
            engine::subsystems::evict::evict_clients(&self.shared);
        }
    }

    /// Takes this connection's share out of the clients' running sum.
    fn uncount_memory(&mut self) {
        if self.mem_counted != 0 {
            self.shared.clients_mem.fetch_sub(self.mem_counted as i64, Ordering::Relaxed);
            self.mem_counted = 0;
        }
    }

    /// Unwritten reply bytes past which the connection stops executing
    /// its input. With `maxmemory-clients` set, that limit bounds what a
    /// client holds (it is closed past it, as in Redis), so replies may
    /// grow as Redis's do; without it, the high-water mark does.
    #[inline]
    fn high_water(&self) -> usize {
        if self.limits.clients_limit == 0 {
            OUT_HIGH_WATER
        } else {
            usize::MAX
        }
    }

    /// Resizes the query buffer when the server's cron asks (Redis 7.0's
    /// clientsCronResizeQueryBuffer): when it wastes more than 4 KiB, an
    /// empty one idle for over 2 s is freed, and one over 32 KiB more than
    /// twice its recent peak shrinks to that peak (never below what it
    /// holds or the bulk it is reading).
    #[cold]
    fn resize_query_buffer(&mut self) {
        let h = &self.sess.handle;
        h.qbuf_resize.store(false, Ordering::Relaxed);
        let cap = self.rbuf.capacity();
        if cap - self.rbuf.len() > 4096 {
            let idle = unix_ms() - h.last_interaction_ms.load(Ordering::Relaxed) > 2000;
            if idle && self.rbuf.len() == self.rpos {
                self.rbuf = Vec::new();
                self.rpos = 0;
                self.unparsed = 0;
                self.need = 0;
            } else if cap > engine::core::shared::QUERY_RESIZE_THRESHOLD && cap / 2 > self.qbuf_peak
            {
                self.compact();
                let keep = self.rbuf.len().max(self.qbuf_peak).max(self.need);
                self.rbuf.shrink_to(keep);
            }
        }
        release_window();
        self.qbuf_peak = self.rbuf.len();
        self.sess.handle.qbuf.store(self.qbuf(), Ordering::Relaxed);
        self.publish_memory();
    }

    /// CLIENT LIST's `qbuf`: the input not executed yet, less what of an
    /// incomplete request is parsed already (its arguments and bulk
    /// headers, which Redis moves out of its query buffer as it reads
    /// them: a big argument being received counts its bytes only).
    fn qbuf(&self) -> usize {
        let from = if self.unparsed > self.rpos && self.unparsed <= self.rbuf.len() {
            self.unparsed
        } else {
            self.rpos
        };
        self.rbuf.len() - from
    }

    /// Drops consumed input, once per batch. The buffer keeps its size:
    /// the server's cron shrinks it ([`Self::resize_query_buffer`]).
    fn compact(&mut self) {
        self.qbuf_peak = self.qbuf_peak.max(self.rbuf.len());
        if self.rpos == 0 {
            return;
        }
        if self.rpos == self.rbuf.len() {
            self.rbuf.clear();
        } else {
            self.rbuf.copy_within(self.rpos.., 0);
            self.rbuf.truncate(self.rbuf.len() - self.rpos);
        }
        self.need = self.need.saturating_sub(self.rpos);
        self.unparsed = self.unparsed.saturating_sub(self.rpos);
        self.rpos = 0;
    }
}

/// Adds to one of the client handle's traffic counters (`reads`,
/// `net_in`, `writes`, `net_out`): only the connection's own thread
/// writes them (its loop, its busy pass, a script's debugger; a
/// connection that turns replica hands its handle over and writes no
/// more), others only read them (INFO, CLIENT LIST), so a load and a
/// store do what a locked read-modify-write did, four of which a request
/// paid at P=1.
#[inline(always)]
fn owned_add(counter: &std::sync::atomic::AtomicU64, by: u64) {
    counter.store(counter.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

/// Moves the pushes the client's last command queued to follow its reply
/// ([`engine::core::outbox::Kind::After`]) into the reply buffer.
#[cold]
fn after_reply(sess: &Session, out: &mut ReplyBuf) {
    sess.handle.outbox.drain_after(|m| out.raw(m));
}
