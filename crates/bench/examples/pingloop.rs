//! What an event loop costs a request, apart from any command: a server
//! that answers every `PING` (inline or multibulk) with `+PONG`, three ways.
//!
//! - `tokio`: a `current_thread` runtime with a task per connection that
//!   waits for input readiness, reads, and writes its replies at once:
//!   the shape of Sluice's connection loop (`server::network::conn`).
//! - `epoll`: one thread, a level-triggered `epoll` set of the listener
//!   and the clients, a `recv` and a `send` per ready client: the shape
//!   of Redis's `ae` loop.
//! - `tokio-one`: tokio's reactor (its `epoll` and readiness slots), but
//!   one task for all the connections: a socket's readiness wakes a
//!   waker that queues the connection and wakes that task, which serves
//!   every queued connection in turn (no task, task state or run-queue
//!   entry per connection).
//!
//! Any other request (redis-benchmark's `CONFIG GET` at start) gets an
//! empty array. Run it pinned beside redis-server and load both with
//! redis-benchmark (`bench/loopcost` does, and reports CPU per request):
//!
//! ```sh
//! cargo run --release -p bench --example pingloop -- tokio 7001
//! ```

use std::io;
use std::net::TcpListener as StdListener;
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(7001);
    let listener = StdListener::bind(("127.0.0.1", port)).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    match mode.as_str() {
        "tokio" => run_tokio(listener),
        "epoll" => run_epoll(listener),
        "tokio-one" => run_tokio_one(listener),
        _ => {
            eprintln!("usage: pingloop tokio|epoll|tokio-one [PORT]");
            std::process::exit(2);
        }
    }
}

/// Replies for what `buf[..]` holds: `+PONG` per complete `PING`, an
/// empty array per complete other request; returns how many bytes were
/// used (the rest is an incomplete request).
fn answer(buf: &[u8], out: &mut Vec<u8>) -> usize {
    let mut used = 0;
    loop {
        let rest = &buf[used..];
        let Some(end) = request_end(rest) else { return used };
        if rest[..end].windows(4).any(|w| w.eq_ignore_ascii_case(b"PING")) {
            out.extend_from_slice(b"+PONG\r\n");
        } else {
            out.extend_from_slice(b"*0\r\n");
        }
        used += end;
    }
}

/// The length of the first complete request in `b` (inline: up to its
/// line's end; multibulk: its count of bulk strings), if it is complete.
fn request_end(b: &[u8]) -> Option<usize> {
    let line = |from: usize| b[from..].windows(2).position(|w| w == b"\r\n").map(|p| from + p);
    let first = line(0)?;
    if b.first() != Some(&b'*') {
        return Some(first + 2);
    }
    let n: usize = std::str::from_utf8(&b[1..first]).ok()?.parse().ok()?;
    let mut at = first + 2;
    for _ in 0..n {
        let len_end = line(at)?;
        let len: usize = std::str::from_utf8(&b[at + 1..len_end]).ok()?.parse().ok()?;
        at = len_end + 2 + len + 2;
        if at > b.len() {
            return None;
        }
    }
    Some(at)
}

/// Clears the socket's input readiness without a system call.
fn drained(stream: &tokio::net::TcpStream) {
    let _ = stream
        .try_io(tokio::io::Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
}

fn run_tokio(listener: StdListener) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut input = Vec::with_capacity(16 * 1024);
                let mut out = Vec::with_capacity(16 * 1024);
                loop {
                    // As Sluice's connection waits: the task's waker kept
                    // in the socket's own slot (`readable()` would link a
                    // waiter node under a lock each time).
                    if std::future::poll_fn(|cx| stream.poll_read_ready(cx)).await.is_err() {
                        return;
                    }
                    let room = input.capacity() - input.len();
                    match stream.try_read_buf(&mut input) {
                        Ok(0) => return,
                        // A short read drained the socket: forget the
                        // readiness, as Sluice does, or the next wait
                        // would first make a read that says EAGAIN.
                        Ok(n) if n < room => drained(&stream),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(_) => return,
                    }
                    let used = answer(&input, &mut out);
                    input.drain(..used);
                    let mut sent = 0;
                    while sent < out.len() {
                        match stream.try_write(&out[sent..]) {
                            Ok(n) => sent += n,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                if stream.writable().await.is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        }
                    }
                    out.clear();
                }
            });
        }
    });
}

/// The connections' side of `tokio-one`: which connections were woken,
/// and the one task's waker.
#[derive(Default)]
struct Woken {
    ids: std::sync::Mutex<Vec<usize>>,
    task: std::sync::Mutex<Option<std::task::Waker>>,
}

/// A connection's waker in `tokio-one`: queues its id, wakes the task.
struct ConnWake {
    id: usize,
    woken: std::sync::Arc<Woken>,
}

impl std::task::Wake for ConnWake {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        let mut ids = self.woken.ids.lock().expect("ids");
        ids.push(self.id);
        let first = ids.len() == 1;
        drop(ids);
        if first {
            if let Some(w) = self.woken.task.lock().expect("task").as_ref() {
                w.wake_by_ref();
            }
        }
    }
}

struct OneConn {
    stream: tokio::net::TcpStream,
    waker: std::task::Waker,
    input: Vec<u8>,
    out: Vec<u8>,
}

fn run_tokio_one(listener: StdListener) {
    use std::sync::Arc;
    use std::task::Poll;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        let woken = Arc::new(Woken::default());
        let mut conns: Vec<Option<OneConn>> = Vec::new();
        let mut batch: Vec<usize> = Vec::new();
        std::future::poll_fn(|cx| {
            *woken.task.lock().expect("task") = Some(cx.waker().clone());
            while let Poll::Ready(Ok((stream, _))) = listener.poll_accept(cx) {
                let _ = stream.set_nodelay(true);
                let id = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                    conns.push(None);
                    conns.len() - 1
                });
                let waker = Arc::new(ConnWake { id, woken: woken.clone() }).into();
                conns[id] = Some(OneConn {
                    stream,
                    waker,
                    input: Vec::with_capacity(16 * 1024),
                    out: Vec::with_capacity(16 * 1024),
                });
                batch.push(id);
            }
            loop {
                batch.append(&mut woken.ids.lock().expect("ids"));
                if batch.is_empty() {
                    return Poll::<()>::Pending;
                }
                for id in batch.drain(..) {
                    let Some(c) = conns[id].as_mut() else { continue };
                    let mut ccx = std::task::Context::from_waker(&c.waker);
                    let gone = loop {
                        match c.stream.poll_read_ready(&mut ccx) {
                            Poll::Pending => break false,
                            Poll::Ready(Err(_)) => break true,
                            Poll::Ready(Ok(())) => {}
                        }
                        let room = c.input.capacity() - c.input.len();
                        match c.stream.try_read_buf(&mut c.input) {
                            Ok(0) => break true,
                            Ok(n) if n < room => drained(&c.stream),
                            Ok(_) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                            Err(_) => break true,
                        }
                        let used = answer(&c.input, &mut c.out);
                        c.input.drain(..used);
                        // Replies to a loopback client always fit its socket here.
                        let _ = c.stream.try_write(&c.out);
                        c.out.clear();
                    };
                    if gone {
                        conns[id] = None;
                    }
                }
            }
        })
        .await;
    });
}

struct Client {
    fd: RawFd,
    input: Vec<u8>,
    out: Vec<u8>,
}

fn run_epoll(listener: StdListener) {
    // SAFETY: plain system calls on descriptors this function owns.
    unsafe {
        let ep = libc::epoll_create1(0);
        assert!(ep >= 0, "epoll_create1");
        let lfd = listener.into_raw_fd();
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: u64::MAX };
        libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, &mut ev);
        let mut clients: Vec<Option<Client>> = Vec::new();
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            let n = libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1);
            for e in events.iter().take(n.max(0) as usize) {
                let id = e.u64;
                if id == u64::MAX {
                    loop {
                        let fd = libc::accept4(
                            lfd,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            libc::SOCK_NONBLOCK,
                        );
                        if fd < 0 {
                            break;
                        }
                        let one: libc::c_int = 1;
                        libc::setsockopt(
                            fd,
                            libc::IPPROTO_TCP,
                            libc::TCP_NODELAY,
                            (&one as *const libc::c_int).cast(),
                            std::mem::size_of::<libc::c_int>() as u32,
                        );
                        let slot = clients.iter().position(Option::is_none).unwrap_or_else(|| {
                            clients.push(None);
                            clients.len() - 1
                        });
                        clients[slot] = Some(Client {
                            fd,
                            input: Vec::with_capacity(16 * 1024),
                            out: Vec::with_capacity(16 * 1024),
                        });
                        let mut ev =
                            libc::epoll_event { events: libc::EPOLLIN as u32, u64: slot as u64 };
                        libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev);
                    }
                    continue;
                }
                let Some(c) = clients[id as usize].as_mut() else { continue };
                let len = c.input.len();
                let spare = c.input.capacity() - len;
                let r = libc::recv(c.fd, c.input.as_mut_ptr().add(len).cast(), spare, 0);
                if r <= 0 {
                    if r == 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock {
                        libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, c.fd, std::ptr::null_mut());
                        drop(std::net::TcpStream::from_raw_fd(c.fd));
                        clients[id as usize] = None;
                    }
                    continue;
                }
                c.input.set_len(len + r as usize);
                let used = answer(&c.input, &mut c.out);
                c.input.drain(..used);
                // Replies to a loopback client always fit its socket here.
                libc::send(c.fd, c.out.as_ptr().cast(), c.out.len(), libc::MSG_NOSIGNAL);
                c.out.clear();
            }
        }
    }
}
