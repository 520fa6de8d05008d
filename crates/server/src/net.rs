//! Listeners and event-loop threads.
//!
//! `threads` OS threads each run a single-threaded tokio runtime. The
//! first thread also accepts; each accepted socket is handed to a thread
//! round-robin and stays there for its whole life (run to completion on
//! the connection's thread). Every thread runs its share of active expiry.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use engine::shared::unix_ms;
use engine::Shared;
use tokio::sync::mpsc;

use crate::conn;
use engine::log;

/// Binds every configured address. An address prefixed with `-` is
/// optional: failing to bind it is not an error (as in Redis).
pub fn bind_all(shared: &Shared) -> Result<Vec<StdListener>, String> {
    let (addrs, port, backlog) = {
        let c = shared.config.read();
        (c.bind.clone(), c.port, c.tcp_backlog)
    };
    bind_addrs(&addrs, port, backlog)
}

/// Binds `addrs` on `port` (see [`bind_all`]).
fn bind_addrs(addrs: &[String], port: u16, backlog: u32) -> Result<Vec<StdListener>, String> {
    let mut out = Vec::new();
    for a in addrs {
        let (optional, host) = match a.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, a.as_str()),
        };
        let host = if host == "*" { "0.0.0.0" } else { host };
        let ip: std::net::IpAddr = match host.parse() {
            Ok(ip) => ip,
            Err(_) if optional => continue,
            Err(_) => return Err(format!("Invalid bind address '{host}'")),
        };
        // With port 0 every address must share the port the first got.
        let p = match out.first() {
            Some(l) if port == 0 => StdListener::local_addr(l).map(|a| a.port()).unwrap_or(0),
            _ => port,
        };
        match listen(SocketAddr::new(ip, p), backlog) {
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
                return Err(format!("Failed listening on port {port} (TCP), aborting."));
            }
        }
    }
    if out.is_empty() {
        return Err(format!("Failed listening on port {port} (TCP), aborting."));
    }
    Ok(out)
}

fn listen(addr: SocketAddr, backlog: u32) -> std::io::Result<StdListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
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
                && !engine::blocking::is_blocked(h)
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
pub fn run(shared: Arc<Shared>, listeners: Vec<StdListener>, threads: usize) {
    // CONFIG SET port: the new listeners are bound by the command's
    // thread (so a failure is its reply) and handed to thread 0, whose
    // accept loops then replace the old ones (Redis's changeListenPort).
    let (ltx, lrx) = mpsc::unbounded_channel::<Vec<StdListener>>();
    let _ = ltx.send(listeners);
    let hook_tx = ltx.clone();
    let _ = shared.rebind.set(Box::new(move |addrs: &[String], port: u16, backlog: u32| {
        let ls = bind_addrs(addrs, port, backlog)
            .map_err(|_| "Unable to listen on this port. Check server logs.".to_string())?;
        hook_tx
            .send(ls)
            .map_err(|_| "Unable to listen on this port. Check server logs.".to_string())
    }));
    let listeners = lrx;
    let threads = threads.max(1);
    shared.threads.store(threads as u32, Ordering::Relaxed);
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..threads).map(|_| mpsc::unbounded_channel::<std::net::TcpStream>()).unzip();
    let mut listeners = Some(listeners);
    let mut senders = Some(senders);
    let joins: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let shared = shared.clone();
            let ls = listeners.take();
            let tx = senders.take();
            std::thread::Builder::new()
                .name(format!("sluice-loop-{i}"))
                .spawn(move || event_loop(i, threads, shared, rx, ls, tx))
                .expect("spawn event loop thread")
        })
        .collect();
    for j in joins {
        let _ = j.join();
    }
}

fn event_loop(
    idx: usize,
    threads: usize,
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<std::net::TcpStream>,
    listeners: Option<mpsc::UnboundedReceiver<Vec<StdListener>>>,
    senders: Option<Vec<mpsc::UnboundedSender<std::net::TcpStream>>>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build event loop runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        // Accept loops (thread 0 only): one per listener of the current
        // set; a new set (CONFIG SET port) ends the old loops, which
        // closes their sockets.
        if let (Some(mut sets), Some(senders)) = (listeners, senders) {
            let senders = Arc::new(senders);
            let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let sh = shared.clone();
            tokio::task::spawn_local(async move {
                let shared = sh;
                let (gen_tx, _) = tokio::sync::watch::channel(0u64);
                while let Some(ls) = sets.recv().await {
                    gen_tx.send_modify(|g| *g += 1);
                    for l in ls {
                        let l = tokio::net::TcpListener::from_std(l).expect("register listener");
                        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
                        shared.port.store(u32::from(port), Ordering::Relaxed);
                        let (senders, next, shared) =
                            (senders.clone(), next.clone(), shared.clone());
                        let mut gen = gen_tx.subscribe();
                        tokio::task::spawn_local(async move {
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
                                        let n =
                                            next.fetch_add(1, Ordering::Relaxed) % senders.len();
                                        let _ = senders[n].send(s);
                                    }
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
                    crate::poll_signals(&sh);
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
            let mut fx = engine::effects::Effects::default();
            loop {
                let hz = sh.config.read().hz.clamp(1, 500);
                let period = Duration::from_millis(1000 / u64::from(hz));
                tokio::time::sleep(period).await;
                sh.active_expire(&mut fx, idx, threads, period / 4);
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
        let accept = async {
            while let Some(s) = rx.recv().await {
                let Ok(s) = tokio::net::TcpStream::from_std(s) else { continue };
                let shared = shared.clone();
                tokio::task::spawn_local(async move { conn::serve(shared, s).await });
            }
        };
        tokio::select! {
            _ = stop => {}
            _ = accept => {}
        }
    });
}
