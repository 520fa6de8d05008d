//! Serving a thread's connections while a script on it is busy.
//!
//! A script runs to completion on its connection's thread, inside that
//! thread's event loop: while it runs, the loop does not turn. Once the
//! script passes `busy-reply-threshold`, its count hook calls
//! [`during`] (through `engine::subsystems::script::busy`), which does here, without
//! waiting, what the loop would do — as Redis's `processEventsWhileBlocked`
//! does from its Lua hook:
//!
//! - connections of this thread that are idle in their loop (waiting for
//!   input: "parked", see [`Parked`]) and have input are read and their
//!   complete requests executed through the ordinary dispatcher, whose
//!   `check` answers BUSY to every command without `allow-busy`, so
//!   SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE, MULTI… work and nothing
//!   served waits for the script's stripes (conn.rs `serve_while_busy`);
//! - new connections are accepted: handed to a thread that is not busy,
//!   or, when none is, opened here and served like the others;
//! - after SHUTDOWN NOSAVE the process exits from here (the busy thread
//!   would otherwise keep the server up until the script ends).
//!
//! The connection running the script is never parked while it runs, so
//! it is never re-entered. TLS connections are served the same way
//! (their transport reads and decrypts, encrypts and writes, straight on
//! the socket), and the thread's TLS handshakes not done yet (each in a
//! task of its own, [`start_tls`]) are stepped at each pass. At most one pass per
//! millisecond, so a script that runs for long pays one `poll(2)` per
//! millisecond at most, and a script under the threshold pays nothing.

use std::cell::RefCell;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::Shared;
use tokio::sync::mpsc;

use crate::net::Kind;

/// A socket on its way to an event-loop thread, with what it speaks.
pub type Incoming = (std::os::fd::OwnedFd, Kind);

/// A connection as the busy pass sees it: its socket, how to serve it,
/// and where it is while parked (null otherwise). Shared by the
/// connection and its thread's registry: parking is one store.
struct Cell {
    conn: std::cell::Cell<*mut ()>,
    fd: RawFd,
    serve: unsafe fn(*mut ()),
}

/// This thread's loop, as the busy pass sees it.
#[derive(Default)]
struct Loop {
    /// Connection slots (see [`Slot`]).
    slots: Vec<Option<Rc<Cell>>>,
    free: Vec<u32>,
    /// Listeners this thread accepts on (thread 0), with their kind.
    listeners: Vec<(RawFd, Kind)>,
    /// TLS handshakes of this thread not done yet, each run by a task of
    /// its own ([`start_tls`]) and stepped by busy passes meanwhile.
    handshakes: Vec<Handshake>,
    /// Sockets other threads handed to this one.
    incoming: Option<Rc<RefCell<mpsc::UnboundedReceiver<Incoming>>>>,
    /// Every loop's senders, for handing a socket on (thread 0).
    handoff: Option<Arc<Vec<mpsc::UnboundedSender<Incoming>>>>,
    /// Which loops are serving from a busy script (shared by all).
    busy: Option<Arc<[AtomicBool]>>,
    idx: usize,
    shared: Option<Arc<Shared>>,
    last_pass: Option<Instant>,
}

thread_local! {
    static LOOP: RefCell<Loop> = RefCell::new(Loop::default());
}

/// A TLS connection in its handshake: its task's while the task runs,
/// a busy pass's to step between the task's polls; taken (`None`) by
/// whichever finishes it.
type Handshake = Rc<RefCell<Option<crate::tls::TlsStream>>>;

/// The engine's hooks (`Host::busy`).
pub const HOOKS: engine::subsystems::script::busy::Hooks =
    engine::subsystems::script::busy::Hooks { during, ended };

/// Sets this event-loop thread up (its index, every loop's busy flags,
/// its incoming sockets) and installs the engine's hooks.
pub fn install(
    shared: Arc<Shared>,
    idx: usize,
    busy: Arc<[AtomicBool]>,
    incoming: Rc<RefCell<mpsc::UnboundedReceiver<Incoming>>>,
) {
    LOOP.with(|l| {
        let mut l = l.borrow_mut();
        l.shared = Some(shared);
        l.idx = idx;
        l.busy = Some(busy);
        l.incoming = Some(incoming);
    });
}

/// Lets go of this thread's channel ends (its incoming receiver, thread
/// 0's senders) once its event loop has returned, while the loop's task
/// set still exists: a receiver's waker is a task of that set, and the
/// last sender's drop wakes it, which must not happen from this thread's
/// thread-local destructors (tokio's context is gone by then).
pub fn release_channels() {
    let ends = LOOP.with(|l| {
        let mut l = l.borrow_mut();
        (l.handoff.take(), l.incoming.take())
    });
    drop(ends);
}

/// Thread 0: the senders to every loop, to hand new sockets on.
pub fn set_handoff(senders: Arc<Vec<mpsc::UnboundedSender<Incoming>>>) {
    LOOP.with(|l| l.borrow_mut().handoff = Some(senders));
}

/// A listener this thread accepts on, while it is open.
pub struct Listening(RawFd, std::sync::Weak<Shared>);

impl Listening {
    /// Lists `fd` in this thread's loop and, but for the Unix socket, in
    /// the server's open listeners (`Node::open_listeners`, for
    /// [`stop_listening`]).
    pub fn new(shared: &Arc<Shared>, fd: RawFd, kind: Kind) -> Self {
        LOOP.with(|l| l.borrow_mut().listeners.push((fd, kind)));
        // Not the Unix socket: shut down, it answers accept() with EAGAIN
        // while reporting itself ready for ever, and its accept loop spun
        // inside tokio, so its event loop never saw the shutdown and the
        // process never exited. Its file is removed at exit.
        if kind != Kind::Unix {
            crate::host::node(shared).open_listeners.lock().push(fd);
        }
        Listening(fd, Arc::downgrade(shared))
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = LOOP.try_with(|l| l.borrow_mut().listeners.retain(|&(f, _)| f != self.0));
        if let Some(sh) = self.1.upgrade() {
            crate::host::node(&sh).open_listeners.lock().retain(|&f| f != self.0);
        }
    }
}

/// The server is going away: new connections are refused from now on
/// (the listening sockets are shut down, which Linux turns into a
/// refusal), before any client sees its connection close — as Redis
/// closes its listeners before it exits. The descriptors themselves are
/// closed by their owners.
pub fn stop_listening(shared: &Shared) {
    for &fd in crate::host::node(shared).open_listeners.lock().iter() {
        // SAFETY: `fd` is a listening socket its `Listening` keeps open
        // while it is in the list (removed under the same lock on drop).
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }
}

/// A plain TCP connection's place in its thread's registry, for its
/// whole life (released on drop).
pub struct Slot {
    idx: u32,
    cell: Rc<Cell>,
}

impl Slot {
    /// Registers a connection on `fd`, served by `serve` when parked.
    pub fn new(fd: RawFd, serve: unsafe fn(*mut ())) -> Slot {
        let cell = Rc::new(Cell { conn: std::cell::Cell::new(std::ptr::null_mut()), fd, serve });
        let idx = LOOP.with(|l| {
            let mut l = l.borrow_mut();
            match l.free.pop() {
                Some(i) => {
                    l.slots[i as usize] = Some(cell.clone());
                    i
                }
                None => {
                    l.slots.push(Some(cell.clone()));
                    (l.slots.len() - 1) as u32
                }
            }
        });
        Slot { idx, cell }
    }

    /// Marks the connection parked at `conn`: until
    /// [`unpark`](Self::unpark) (or the guard [`Parked`] drops), a busy
    /// pass may serve it through `serve(conn)`.
    ///
    /// # Safety
    /// `conn` must stay valid, and the connection's own code must not
    /// touch what `serve` touches, until it is unparked: a connection
    /// parks only while its task is suspended waiting for I/O.
    #[inline]
    pub unsafe fn park(&self, conn: *mut ()) -> Parked {
        self.cell.conn.set(conn);
        Parked(Rc::as_ptr(&self.cell))
    }

    pub fn unpark(&self) {
        self.cell.conn.set(std::ptr::null_mut());
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let _ = LOOP.try_with(|l| {
            let mut l = l.borrow_mut();
            l.slots[self.idx as usize] = None;
            l.free.push(self.idx);
        });
    }
}

/// Parked while alive: unparks on drop, also when the wait is cancelled.
pub struct Parked(*const Cell);

impl Parked {
    /// Stays parked after the guard (a connection opened by a busy pass,
    /// until its task first runs).
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Parked {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the cell is kept alive by the slot, which outlives the
        // wait that made this guard (both belong to the connection).
        unsafe { (*self.0).conn.set(std::ptr::null_mut()) };
    }
}

/// The engine's hook, from a busy script of this thread.
fn during(shared: &Shared) {
    // Only an event-loop thread has other clients to serve.
    if !LOOP.with(|l| l.borrow().shared.is_some()) {
        return;
    }
    if shared.shutdown.load(Ordering::Acquire) {
        crate::exit_now(shared);
    }
    let pass = LOOP.with(|l| {
        let mut l = l.borrow_mut();
        let now = Instant::now();
        if l.last_pass.is_some_and(|t| now.duration_since(t) < Duration::from_millis(1)) {
            return None;
        }
        l.last_pass = Some(now);
        if let Some(b) = &l.busy {
            b[l.idx].store(true, Ordering::Relaxed);
        }
        let parked: Vec<Rc<Cell>> =
            l.slots.iter().flatten().filter(|c| !c.conn.get().is_null()).cloned().collect();
        Some((l.shared.clone()?, l.listeners.clone(), parked))
    });
    let Some((shared, listeners, parked)) = pass else { return };
    accept(&shared, &listeners);
    handshakes(&shared);
    serve_parked(&parked);
    if shared.shutdown.load(Ordering::Acquire) {
        crate::exit_now(&shared);
    }
}

/// The engine's hook: the busy script ended. Handshakes not done yet go
/// on in their tasks.
fn ended(_: &Shared) {
    let _ = LOOP.try_with(|l| {
        let mut l = l.borrow_mut();
        l.last_pass = None;
        if let Some(b) = &l.busy {
            b[l.idx].store(false, Ordering::Relaxed);
        }
    });
}

/// Serves a new TLS socket on this thread: its handshake runs in a task,
/// then the connection in the same task. Until the handshake is done it
/// is also in this thread's list, so that a script of this thread that
/// turns busy before then — before the task first runs, or while it
/// waits for the client — steps it from its passes and serves the
/// connection once it is done, as Redis's `processEventsWhileBlocked`
/// goes on with a handshake.
pub fn start_tls(shared: Arc<Shared>, s: crate::tls::TlsStream) {
    let h: Handshake = Rc::new(RefCell::new(Some(s)));
    LOOP.with(|l| l.borrow_mut().handshakes.push(h.clone()));
    crate::net::spawn_here(async move {
        let listed = Listed(h);
        let done = std::future::poll_fn(|cx| {
            let mut slot = listed.0.borrow_mut();
            // Finished (or failed) by a busy pass.
            let Some(s) = slot.as_mut() else { return std::task::Poll::Ready(None) };
            match s.poll_handshake(cx) {
                std::task::Poll::Pending => std::task::Poll::Pending,
                std::task::Poll::Ready(Ok(())) => std::task::Poll::Ready(slot.take()),
                std::task::Poll::Ready(Err(e)) => {
                    engine::subsystems::log::warning(&format!(
                        "Error accepting a client connection: {e}"
                    ));
                    slot.take();
                    std::task::Poll::Ready(None)
                }
            }
        })
        .await;
        drop(listed);
        if let Some(s) = done {
            crate::conn::serve(shared, s).await
        }
    });
}

/// A handshake in this thread's list while alive.
struct Listed(Handshake);

impl Drop for Listed {
    fn drop(&mut self) {
        unlist(&self.0);
    }
}

fn unlist(h: &Handshake) {
    let _ = LOOP.try_with(|l| l.borrow_mut().handshakes.retain(|o| !Rc::ptr_eq(o, h)));
}

/// Which loop a new socket goes to: the next one in turn that is not
/// serving from a busy script, or `None` when every one is.
pub fn pick(busy: &[AtomicBool], next: &std::sync::atomic::AtomicUsize) -> Option<usize> {
    let n = busy.len();
    let start = next.fetch_add(1, Ordering::Relaxed);
    (0..n).map(|i| (start + i) % n).find(|&i| !busy[i].load(Ordering::Relaxed))
}

/// New connections: from this thread's listeners, and sockets handed to
/// this thread. Those a loop that is not busy can take go there; the
/// others are opened here.
fn accept(shared: &Arc<Shared>, listeners: &[(RawFd, Kind)]) {
    let (handoff, busy, incoming) = LOOP.with(|l| {
        let l = l.borrow();
        (l.handoff.clone(), l.busy.clone(), l.incoming.clone())
    });
    for &(fd, kind) in listeners {
        // A few per pass, as Redis's accept handler takes up to 1000 per
        // event; the next pass takes more.
        for _ in 0..64 {
            // SAFETY: accept4 on a listening socket's fd, no address wanted.
            let s = unsafe {
                libc::accept4(
                    fd,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if s < 0 {
                break;
            }
            // SAFETY: a socket accept4 just returned, owned from here.
            let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(s) };
            if shared.shutdown.load(Ordering::Relaxed) {
                continue;
            }
            let to = match (&handoff, &busy) {
                (Some(senders), Some(b)) => {
                    pick(b, &crate::host::node(shared).busy_next).map(|i| &senders[i])
                }
                _ => None,
            };
            match to {
                Some(tx) => {
                    let _ = tx.send((sock, kind));
                }
                None => open_here(shared, sock, kind),
            }
        }
    }
    if let Some(rx) = incoming {
        while let Ok((sock, kind)) = rx.borrow_mut().try_recv() {
            open_here(shared, sock, kind);
        }
    }
}

/// A new socket on this (busy) thread: a plain one is served from now
/// on; a TLS one once its handshake is done ([`handshakes`]). One to be
/// refused waits for the script like before (its task runs when the
/// loop turns again).
fn open_here(shared: &Arc<Shared>, sock: std::os::fd::OwnedFd, kind: Kind) {
    match kind {
        Kind::Tcp => {
            let Ok(s) = tokio::net::TcpStream::from_std(sock.into()) else { return };
            crate::conn::start(shared.clone(), s);
        }
        Kind::Unix => {
            let Ok(s) = crate::unix::UnixConn::new(sock.into()) else { return };
            crate::conn::start(shared.clone(), s);
        }
        Kind::Tls => {
            let Ok(tcp) = tokio::net::TcpStream::from_std(sock.into()) else { return };
            let Some(cfg) = crate::host::node(shared).tls.read().clone() else { return };
            if let Some(s) = crate::tls::TlsStream::new(tcp, cfg) {
                start_tls(shared.clone(), s);
                handshakes(shared);
            }
        }
    }
}

/// Steps this thread's TLS handshakes (their tasks wait meanwhile); a
/// finished one becomes a connection served like the others.
fn handshakes(shared: &Arc<Shared>) {
    let pending = LOOP.with(|l| l.borrow().handshakes.clone());
    for h in pending {
        // Not borrowed: its task is suspended (this thread runs the script).
        let Ok(mut slot) = h.try_borrow_mut() else { continue };
        let Some(s) = slot.as_mut() else { continue };
        match s.handshake_direct() {
            Ok(false) => continue,
            Ok(true) => {
                if let Some(s) = slot.take() {
                    crate::conn::start(shared.clone(), s);
                }
            }
            Err(e) => {
                engine::subsystems::log::warning(&format!(
                    "Error accepting a client connection: {e}"
                ));
                slot.take();
            }
        }
        drop(slot);
        unlist(&h);
    }
}

/// Serves the parked connections that have something to read.
fn serve_parked(parked: &[Rc<Cell>]) {
    if parked.is_empty() {
        return;
    }
    let mut fds: Vec<libc::pollfd> = parked
        .iter()
        .map(|c| libc::pollfd { fd: c.fd, events: libc::POLLIN, revents: 0 })
        .collect();
    // SAFETY: a valid array of pollfd of the given length; no waiting.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if n <= 0 {
        return;
    }
    for (c, p) in parked.iter().zip(&fds) {
        // Read again: serving one cannot unpark another, but it is cheap
        // to be sure.
        let conn = c.conn.get();
        if p.revents != 0 && !conn.is_null() {
            // SAFETY: parked (see `Slot::park`): its task is suspended and
            // nothing else on this thread runs it meanwhile.
            unsafe { (c.serve)(conn) };
        }
    }
}
