//! Listeners and event-loop threads.
//!
//! `threads` OS threads each run a single-threaded tokio runtime. The
//! first thread also accepts; each accepted socket is handed to a thread
//! round-robin and stays there for its whole life (run to completion on
//! the connection's thread). Every thread runs its share of active expiry.
//! TLS listeners (`tls-port`) sit beside the plain ones; a TLS socket's
//! handshake runs on the thread that then serves it. A thread inside a
//! busy script keeps serving from the script's hook (`crate::busy`), and
//! new sockets go to threads that are not busy while there is one.

use std::cell::RefCell;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use engine::core::shared::unix_ms;
use engine::Shared;
use tokio::sync::mpsc;

use crate::conn;
use engine::subsystems::log;

/// Which protocol a listener speaks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Tcp,
    Tls,
    /// The Unix socket (`unixsocket`).
    Unix,
}

/// A set of listeners of one kind; a new set replaces the old one.
pub type ListenerSet = (Kind, Vec<StdListener>);

/// Binds every configured address, for `port` and for `tls-port`. An
/// address prefixed with `-` is optional: failing to bind it is not an
/// error (as in Redis). As in Redis, port 0 means no listener of that
/// kind (`port 0` with a TLS port listens on TLS only, with `unixsocket`
/// on the Unix socket only).
pub fn bind_all(shared: &Shared) -> Result<Vec<ListenerSet>, String> {
    let (addrs, port, backlog, tls_port) = {
        let c = shared.config.read();
        (c.bind.clone(), c.port, c.tcp_backlog, crate::tls::port(&c))
    };
    let mark = shared.config.read().get_by_name("socket-mark-id").unwrap_or_default();
    let mark = String::from_utf8_lossy(&mark).parse().unwrap_or(0);
    crate::host::node(shared).socket_mark.store(mark, Ordering::Relaxed);
    let mut sets = Vec::new();
    if port != 0 {
        sets.push((Kind::Tcp, bind_addrs(shared, &addrs, port, backlog, Kind::Tcp)?));
    }
    if tls_port != 0 {
        sets.push((Kind::Tls, bind_addrs(shared, &addrs, tls_port, backlog, Kind::Tls)?));
    }
    Ok(sets)
}

/// Binds `addrs` on `port` (see [`bind_all`]); port 0 binds nothing (a
/// CONFIG SET to 0 closes the listeners of its kind, as in Redis).
pub fn bind_addrs(
    shared: &Shared,
    addrs: &[String],
    port: u16,
    backlog: u32,
    kind: Kind,
) -> Result<Vec<StdListener>, String> {
    let proto = if kind == Kind::Tls { "TLS" } else { "TCP" };
    let mut out = Vec::new();
    if port == 0 {
        return Ok(out);
    }
    for a in addrs {
        let (optional, host) = match a.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, a.as_str()),
        };
        // Redis's anetTcpServer: `*` is IPv4's any address, `::*` IPv6's.
        let host = match host {
            "*" => "0.0.0.0",
            "::*" => "::",
            h => h,
        };
        let p = port;
        let ips = match resolve(host) {
            Ok(ips) => ips,
            Err(_) if optional => continue,
            Err(why) => {
                log::warning(&format!(
                    "Warning: Could not create server TCP listening socket {host}:{p}: {why}"
                ));
                return Err(format!("Failed listening on port {port} ({proto}), aborting."));
            }
        };
        let mark = crate::host::node(shared).socket_mark.load(Ordering::Relaxed);
        // As anetTcpServer: the first of the name's addresses that binds.
        let mut bound = Err(std::io::Error::from(std::io::ErrorKind::AddrNotAvailable));
        for ip in ips {
            bound = listen(SocketAddr::new(ip, p), backlog, mark);
            if bound.is_ok() {
                break;
            }
        }
        match bound {
            Ok(l) => out.push(l),
            Err(e) if optional => {
                log::verbose(&format!("Could not bind optional address {host}: {e}"));
            }
            Err(e) => {
                let why = e.to_string();
                let why = why.split(" (os error").next().unwrap_or_default();
                log::warning(&format!(
                    "Warning: Could not create server TCP listening socket {host}:{p}: bind: {why}"
                ));
                return Err(format!("Failed listening on port {port} ({proto}), aborting."));
            }
        }
    }
    if out.is_empty() && !addrs.is_empty() {
        return Err(format!("Failed listening on port {port} ({proto}), aborting."));
    }
    Ok(out)
}

/// A bind address's IPs: a literal address, or a host name resolved as
/// Redis's anetTcpServer resolves it (IPv6 addresses for a name with a
/// colon, IPv4 ones otherwise). The error is the resolver's message.
fn resolve(host: &str) -> Result<Vec<std::net::IpAddr>, String> {
    if let Ok(ip) = host.parse() {
        return Ok(vec![ip]);
    }
    use std::net::ToSocketAddrs;
    let v6 = host.contains(':');
    let ips: Vec<_> = (host, 0)
        .to_socket_addrs()
        .map_err(|_| "Name or service not known".to_string())?
        .map(|a| a.ip())
        .filter(|ip| ip.is_ipv6() == v6)
        .collect();
    if ips.is_empty() {
        return Err("Name or service not known".into());
    }
    Ok(ips)
}

/// A listening socket; `mark` is `socket-mark-id` (0: none).
fn listen(addr: SocketAddr, backlog: u32, mark: u32) -> std::io::Result<StdListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if mark != 0 {
        // Redis's anetSetSockMarkId: the listening socket's SO_MARK, which
        // its accepted sockets inherit (needs CAP_NET_ADMIN).
        // SAFETY: setsockopt with a pointer to a live u32 and its size.
        let r = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_MARK,
                (&mark as *const u32).cast(),
                std::mem::size_of::<u32>() as libc::socklen_t,
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            log::warning(&format!("Failed to set socket mark id {mark}: {e}"));
        }
    }
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(backlog as i32)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// `timeout`: closes clients idle for longer than that many seconds (0
/// disables it), as Redis's client cron does. Clients in MULTI are idle
/// like any other; clients blocked in BLPOP and friends are exempt.
fn close_idle_clients(shared: &Shared) {
    let timeout = shared.config.read().timeout;
    if timeout == 0 {
        return;
    }
    let now = unix_ms();
    let limit = (timeout as i64).saturating_mul(1000);
    let idle: Vec<_> = shared
        .clients
        .lock()
        .values()
        .filter(|h| {
            // As Redis's clientsCronHandleTimeout: blocked, subscribed
            // and MONITOR clients wait for others to talk, not idle.
            now - h.last_interaction_ms.load(Ordering::Relaxed) > limit
                && !engine::core::blocking::is_blocked(h)
                && !h.subscribed()
                && !h.monitor.load(Ordering::Relaxed)
        })
        .cloned()
        .collect();
    for h in idle {
        log::verbose("Closing idle client");
        h.kill();
    }
}

/// Runs the event loops until shutdown. Blocks the calling thread.
pub fn run(
    shared: Arc<Shared>,
    listeners: Vec<ListenerSet>,
    unix: Option<std::os::unix::net::UnixListener>,
    threads: usize,
) {
    // CONFIG SET port: the new listeners are bound by the command's
    // thread (so a failure is its reply) and handed to thread 0, whose
    // accept loops then replace the old ones (Redis's changeListenPort).
    let (ltx, lrx) = mpsc::unbounded_channel::<ListenerSet>();
    for set in listeners {
        let _ = ltx.send(set);
    }
    let _ = crate::host::node(&shared).listener_tx.set(ltx);
    let listeners = lrx;
    let threads = threads.max(1);
    shared.threads.store(threads as u32, Ordering::Relaxed);
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..threads).map(|_| mpsc::unbounded_channel::<crate::busy::Incoming>()).unzip();
    // Which loops are inside a busy script (new sockets go elsewhere).
    let busy: Arc<[AtomicBool]> = (0..threads).map(|_| AtomicBool::new(false)).collect();
    let mut listeners = Some(listeners);
    let mut unix = unix;
    let mut senders = Some(senders);
    let joins: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let shared = shared.clone();
            let accept = listeners.take().zip(senders.take()).map(|(sets, senders)| Accept {
                sets,
                unix: unix.take(),
                senders,
            });
            let busy = busy.clone();
            log::spawn(&format!("sluice-loop-{i}"), move || {
                event_loop(i, threads, shared, rx, accept, busy)
            })
            .expect("spawn event loop thread")
        })
        .collect();
    for j in joins {
        let _ = j.join();
    }
}

/// Runs a connection's task (or its TLS handshake's) on this thread's
/// runtime itself rather than on the loop's `LocalSet`. A `LocalSet`
/// task is one more scheduler inside the runtime's: each wake-up of a
/// connection queued it in the set, woke the set's own task, polled the
/// future given to `block_on` (and the join handle it waits on), then
/// ticked the set; at one request per round trip that was some 500
/// instructions a request (callgrind, `bench/instructions --tests get
/// --pipelines 1`, 2026-11-30). The runtime's scheduler runs the task
/// directly. Connection futures are not `Send` (raw pointers for the
/// busy pass, `Rc`s), which `tokio::spawn` asks for; [`Local`] vouches
/// for them, see its SAFETY note.
pub fn spawn_here<F: std::future::Future<Output = ()> + 'static>(f: F) {
    let rt = tokio::runtime::Handle::current();
    // What makes `Local` sound: one thread polls this runtime's tasks.
    assert!(
        rt.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
            && LOOP_INDEX.with(|i| i.get()) != usize::MAX,
        "a connection's task runs on its event loop's own thread"
    );
    rt.spawn(Local(f));
}

/// A future that stays on the thread that spawned it (see [`spawn_here`]).
struct Local<F>(F);

// SAFETY: a `Local` is only spawned by `spawn_here`, on an event-loop
// thread's current-thread runtime (asserted there). Such a runtime polls
// its tasks only inside `block_on`, which only that thread calls
// (`event_loop`; other threads hold its handle only to spawn tasks of
// their own, `others_took_input`), and drops the tasks left at its end
// when it is dropped, at the end of `event_loop`, on that thread; no
// join handle is kept, so no other thread can abort one. The future is
// therefore created, polled and dropped on one thread, as `spawn_local`
// would have it.
unsafe impl<F> Send for Local<F> {}

impl<F: std::future::Future<Output = ()>> std::future::Future for Local<F> {
    type Output = ();

    #[inline]
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        // SAFETY: structural pinning of the only field; `Local` has no
        // Drop of its own and never moves the field.
        unsafe { self.map_unchecked_mut(|l| &mut l.0) }.poll(cx)
    }
}

/// Starts serving an accepted socket on this thread.
pub fn spawn_conn(shared: Arc<Shared>, s: std::os::fd::OwnedFd, kind: Kind) {
    match kind {
        Kind::Tcp => {
            let Ok(s) = tokio::net::TcpStream::from_std(s.into()) else { return };
            conn::start(shared, s);
        }
        Kind::Unix => {
            let Ok(s) = crate::unix::UnixConn::new(s.into()) else { return };
            conn::start(shared, s);
        }
        Kind::Tls => {
            let Ok(s) = tokio::net::TcpStream::from_std(s.into()) else { return };
            let Some(cfg) = crate::host::node(&shared).tls.read().clone() else { return };
            if let Some(s) = crate::tls::TlsStream::new(s, cfg) {
                crate::busy::start_tls(shared, s);
            }
        }
    }
}

/// What thread 0 accepts on: the TCP and TLS listener sets (a new set
/// replaces its kind's), the Unix socket, and every loop's senders.
struct Accept {
    sets: mpsc::UnboundedReceiver<ListenerSet>,
    unix: Option<std::os::unix::net::UnixListener>,
    senders: Vec<mpsc::UnboundedSender<crate::busy::Incoming>>,
}

thread_local! {
    /// This event-loop thread's index (`usize::MAX` off the loops).
    static LOOP_INDEX: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Lets every other event-loop thread take in what its sockets already
/// hold, and run it, before a command that reports every client's state
/// (`Flags::AFTER_INPUT`) runs on this one: Redis's one thread serves
/// sockets in the order their input arrived, so its INFO or CLIENT LIST
/// counts a command another client sent just before (a SHUTDOWN or BLPOP
/// that blocks, a big argument on its way); here that client's thread
/// may not have woken yet. Each other loop runs a task that yields twice
/// (its runtime polls its sockets and runs the connections they woke
/// ahead of it) and then answers. At most 50 ms: a loop held by a busy
/// script answers late, and the command does not wait for it.
pub async fn others_took_input(shared: &Shared) {
    let me = LOOP_INDEX.with(|i| i.get());
    let others: Vec<tokio::runtime::Handle> = crate::host::node(shared)
        .loops
        .lock()
        .iter()
        .filter(|(i, _)| *i != me)
        .map(|(_, h)| h.clone())
        .collect();
    if others.is_empty() {
        return;
    }
    let acks: Vec<_> = others
        .iter()
        .map(|h| {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            h.spawn(async move {
                tokio::task::yield_now().await;
                tokio::task::yield_now().await;
                let _ = tx.send(());
            });
            rx
        })
        .collect();
    let all = async {
        for rx in acks {
            let _ = rx.await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(50), all).await;
}

fn event_loop(
    idx: usize,
    threads: usize,
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<crate::busy::Incoming>,
    accept: Option<Accept>,
    busy: Arc<[AtomicBool]>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build event loop runtime");
    LOOP_INDEX.with(|i| i.set(idx));
    crate::host::node(&shared).loops.lock().push((idx, rt.handle().clone()));
    let local = tokio::task::LocalSet::new();
    // Shared with the busy pass, which takes sockets from it too.
    let rx = Rc::new(RefCell::new(rx));
    crate::busy::install(shared.clone(), idx, busy.clone(), rx.clone());
    local.block_on(&rt, async move {
        // The end of each turn, where the connections write (`turn`).
        spawn_here(crate::network::turn::flusher());
        // Accept loops (thread 0 only): one per listener of the current
        // set of each kind; a new set (CONFIG SET port, tls-port) ends
        // the old loops of its kind, which closes their sockets.
        if let Some(Accept { mut sets, unix, senders }) = accept {
            let senders = Arc::new(senders);
            crate::busy::set_handoff(senders.clone());
            let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            if let Some(ul) = unix {
                let (senders, next, shared, busy) =
                    (senders.clone(), next.clone(), shared.clone(), busy.clone());
                tokio::task::spawn_local(async move {
                    let Ok(l) = tokio::net::UnixListener::from_std(ul) else { return };
                    let _listening =
                        crate::busy::Listening::new(&shared, l.as_raw_fd(), Kind::Unix);
                    loop {
                        match l.accept().await {
                            Ok((s, _)) => {
                                if shared.shutdown.load(Ordering::Relaxed) {
                                    break;
                                }
                                let Ok(s) = s.into_std() else { continue };
                                let n = crate::busy::pick(&busy, &next).unwrap_or_else(|| {
                                    next.fetch_add(1, Ordering::Relaxed) % senders.len()
                                });
                                let _ = senders[n].send((s.into(), Kind::Unix));
                            }
                            Err(_) if shared.shutdown.load(Ordering::Relaxed) => break,
                            Err(e) => {
                                log::warning(&format!("Accepting client connection: {e}"));
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                        }
                    }
                });
            }
            let sh = shared.clone();
            tokio::task::spawn_local(async move {
                let shared = sh;
                let gens =
                    [tokio::sync::watch::channel(0u64).0, tokio::sync::watch::channel(0u64).0];
                while let Some((kind, ls)) = sets.recv().await {
                    let gen_tx = &gens[kind as usize];
                    gen_tx.send_modify(|g| *g += 1);
                    for l in ls {
                        let l = tokio::net::TcpListener::from_std(l).expect("register listener");
                        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
                        // INFO's tcp_port: the TLS port when there is no
                        // plain one, as Redis reports it.
                        if kind == Kind::Tcp || shared.config.read().port == 0 {
                            shared.port.store(u32::from(port), Ordering::Relaxed);
                        }
                        let (senders, next, shared, busy) =
                            (senders.clone(), next.clone(), shared.clone(), busy.clone());
                        let mut gen = gen_tx.subscribe();
                        tokio::task::spawn_local(async move {
                            // A busy script of this thread accepts on it too.
                            let _listening =
                                crate::busy::Listening::new(&shared, l.as_raw_fd(), kind);
                            loop {
                                let got = tokio::select! {
                                    got = l.accept() => got,
                                    _ = gen.changed() => break,
                                };
                                match got {
                                    Ok((s, _)) => {
                                        if shared.shutdown.load(Ordering::Relaxed) {
                                            break;
                                        }
                                        let Ok(s) = s.into_std() else { continue };
                                        let s = std::os::fd::OwnedFd::from(s);
                                        // In turn, skipping loops inside a
                                        // busy script while another is free.
                                        let n =
                                            crate::busy::pick(&busy, &next).unwrap_or_else(|| {
                                                next.fetch_add(1, Ordering::Relaxed) % senders.len()
                                            });
                                        let _ = senders[n].send((s, kind));
                                    }
                                    Err(_) if shared.shutdown.load(Ordering::Relaxed) => break,
                                    Err(e) => {
                                        log::warning(&format!("Accepting client connection: {e}"));
                                        tokio::time::sleep(Duration::from_millis(10)).await;
                                    }
                                }
                            }
                        });
                    }
                }
            });
            // Signals and the clock live on thread 0 too.
            let sh = shared.clone();
            tokio::task::spawn_local(async move {
                let mut iv = tokio::time::interval(Duration::from_millis(100));
                let mut ticks = 0u64;
                loop {
                    iv.tick().await;
                    if sh.cron_paused.load(Ordering::Relaxed) {
                        crate::landing::take(&sh);
                        continue;
                    }
                    crate::landing::poll(&sh);
                    sh.tick();
                    ticks += 1;
                    if ticks.is_multiple_of(10) {
                        close_idle_clients(&sh);
                    }
                }
            });
        }
        // Active expiry over this thread's share of the stripes.
        let sh = shared.clone();
        tokio::task::spawn_local(async move {
            let mut fx = engine::core::effects::Effects::default();
            sh.note_loop_cpu(true);
            loop {
                let (hz, effort) = {
                    let c = sh.config.read();
                    (c.hz.clamp(1, 500), c.active_expire_effort.clamp(1, 10))
                };
                let period = Duration::from_millis(1000 / u64::from(hz));
                tokio::time::sleep(period).await;
                sh.note_loop_cpu(true);
                engine::subsystems::script::vm::release_flushed(&sh);
                // Redis's slow cycle may take 25% of the period, 2% more
                // per step of `active-expire-effort`.
                sh.store.active_expire_effort.store(effort, Ordering::Relaxed);
                sh.active_expire(&mut fx, idx, threads, period * (23 + 2 * effort) / 100);
            }
        });
        // Shutdown watcher.
        let sh = shared.clone();
        let stop = async move {
            loop {
                if sh.shutdown.load(Ordering::Relaxed) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let accept = async move {
            // The receiver is borrowed only inside each poll: a busy pass
            // (which runs inside another task's poll) may take from it.
            while let Some((s, kind)) =
                std::future::poll_fn(|cx| rx.borrow_mut().poll_recv(cx)).await
            {
                spawn_conn(shared.clone(), s, kind);
            }
        };
        // A task of its own, and `block_on` waits only for its end: the
        // future given to `block_on` is polled again each time any task of
        // the set is woken (tokio's `RunUntil`), which with the select
        // here re-polled the shutdown timer and the channel on every wait
        // of every connection (~300 instructions a request at P=1).
        let main = tokio::task::spawn_local(async move {
            tokio::select! {
                _ = stop => {}
                _ = accept => {}
            }
        });
        if let Err(e) = main.await {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    });
    crate::busy::release_channels();
}
