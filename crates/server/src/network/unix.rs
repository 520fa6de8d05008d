//! The Unix socket listener (`unixsocket`, `unixsocketperm`), as Redis
//! opens it: any file already at the path is removed first, the socket
//! gets the configured permissions, and it is removed again at exit. A
//! client on it is served by the same connection loop as a TCP one
//! (this file's [`UnixConn`]); CLIENT LIST
//! shows its `addr` and `laddr` as `<path>:0`, as Redis does.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream as StdUnixStream};
use std::task::{Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::transport::Transport;

/// Binds the configured Unix socket, or `Ok(None)` when none is.
/// The error is Redis's log line.
/// The server's node keeps the path, to remove the file at exit.
pub fn bind(
    node: &crate::host::Node,
    path: &str,
    perm: u32,
    backlog: u32,
) -> Result<Option<UnixListener>, String> {
    if path.is_empty() {
        return Ok(None);
    }
    // As Redis: whatever is at the path goes (a stale socket of an
    // earlier run would make bind fail).
    let _ = std::fs::remove_file(path);
    let fail = |e: io::Error| {
        let why = e.to_string();
        let why = why.split(" (os error").next().unwrap_or_default().to_string();
        format!("Failed opening Unix socket: bind: {why}")
    };
    let sock =
        socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).map_err(fail)?;
    let addr = socket2::SockAddr::unix(path).map_err(fail)?;
    sock.bind(&addr).map_err(fail)?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm));
    }
    sock.listen(backlog as i32).map_err(|e| {
        let why = e.to_string();
        format!(
            "Failed opening Unix socket: listen: {}",
            why.split(" (os error").next().unwrap_or("")
        )
    })?;
    sock.set_nonblocking(true).map_err(fail)?;
    let _ = node.unix_path.set(path.to_string());
    Ok(Some(sock.into()))
}

/// Removes the socket file at exit, with Redis's log line.
pub fn remove_at_exit(node: &crate::host::Node) {
    if let Some(p) = node.unix_path.get() {
        engine::subsystems::log::notice("Removing the unix socket file.");
        let _ = std::fs::remove_file(p);
    }
}

/// The path clients of the socket show as their addresses.
fn shown_addr(s: &StdUnixStream) -> String {
    let path = s.local_addr().ok().and_then(|a| a.as_pathname().map(|p| p.display().to_string()));
    format!("{}:0", path.unwrap_or_default())
}

/// A client of the Unix socket, registered with the event loop for input
/// only, as Redis registers a client (`AE_READABLE`; write interest only
/// while replies wait for room).
///
/// tokio's `UnixStream` registers for output readiness too, and a Unix
/// socket, unlike TCP, signals room to write every time its peer takes
/// in bytes (`unix_write_space` on each freed buffer): every reply the
/// client read put the socket back on the loop's ready list, and the next
/// `epoll_wait` polled it again for nothing (`perf`: 60% more
/// `unix_poll` than Redis at P=1). Here a write goes straight to the
/// socket, and only a write that finds no room registers the socket for
/// output readiness — a second descriptor of the same socket, so that
/// its own registration and number (CLIENT LIST's `fd`, the busy pass)
/// stay as they are — until a write takes everything it was given.
pub struct UnixConn {
    io: AsyncFd<StdUnixStream>,
    /// While replies wait for room: the socket, registered for output.
    room: Option<AsyncFd<OwnedFd>>,
}

impl UnixConn {
    /// Takes an accepted socket (non-blocking) into this thread's loop.
    pub fn new(s: StdUnixStream) -> io::Result<Self> {
        s.set_nonblocking(true)?;
        Ok(UnixConn { io: register(s, Interest::READABLE)?, room: None })
    }

    /// The socket's room to write, as the loop sees it: registered on
    /// first need; its readiness forgotten after a write found none, so
    /// that the next wait sleeps until the peer reads. An error when the
    /// socket cannot be registered: the wait would never learn of room,
    /// so the write fails and the connection ends.
    fn no_room(&mut self) -> io::Result<()> {
        match &self.room {
            Some(r) => {
                let _ = r
                    .try_io(Interest::WRITABLE, |_| Err::<(), _>(io::ErrorKind::WouldBlock.into()));
            }
            None => {
                let fd = self.io.get_ref().as_fd().try_clone_to_owned()?;
                self.room = Some(register(fd, Interest::WRITABLE)?);
            }
        }
        Ok(())
    }
}

impl Transport for UnixConn {
    const READ_CHECKS_READINESS: bool = true;

    fn fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }

    fn is_local(&self) -> bool {
        true
    }

    fn addrs(&self) -> (String, String) {
        // The listening socket's path (the accepted socket's own address
        // is that path too).
        let a = shown_addr(self.io.get_ref());
        (a.clone(), a)
    }

    fn tune(&self, _keepalive_secs: u64) {}

    #[inline]
    fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.io.try_io(Interest::READABLE, |s| read_into(s, buf))
    }

    #[inline]
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let r = write_to(self.io.get_ref(), bufs);
        match &r {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.no_room()?,
            Ok(n) if self.room.is_some() && *n == bufs.iter().map(|b| b.len()).sum::<usize>() => {
                // All it was given went: the replies have (most likely)
                // drained, and the peer's reads need not wake the loop.
                self.room = None;
            }
            _ => {}
        }
        r
    }

    #[inline(always)]
    fn pending_out(&self) -> bool {
        false
    }

    #[inline(always)]
    fn flush_pending(&mut self) -> io::Result<()> {
        Ok(())
    }

    #[inline]
    fn drained(&self) {
        let _ =
            self.io.try_io(Interest::READABLE, |_| Err::<(), _>(io::ErrorKind::WouldBlock.into()));
    }

    #[inline]
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_read_ready(cx).map(|r| r.map(drop))
    }

    /// Ready at once until a write has found no room (the write then
    /// says so itself); then when the peer has read.
    #[inline]
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.room {
            Some(r) => r.poll_write_ready(cx).map(|r| r.map(drop)),
            None => Poll::Ready(Ok(())),
        }
    }

    fn read_direct(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        read_into(self.io.get_ref(), buf)
    }

    fn write_direct(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        write_to(self.io.get_ref(), bufs)
    }

    fn flush_direct(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// A replica reaches its master over TCP only (as Redis's do).
    fn into_tcp(self) -> Result<TcpStream, Self> {
        Err(self)
    }
}

/// Registers an owned descriptor with this thread's loop.
fn register<T: AsRawFd>(owner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `owner` owns its descriptor (a socket or an `OwnedFd`): it
    // stays open, the same one, until the `AsyncFd` drops it.
    unsafe { AsyncFd::register_with_interest(owner, interest) }.map_err(|e| e.into_parts().1)
}

/// One `recv` into `buf`'s spare capacity (`recv`, not `read`: the
/// socket call skips the kernel's file layer; by `syscall(2)`, see
/// [`crate::network::sys`]).
#[inline]
fn read_into(s: &StdUnixStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    crate::network::sys::recv_into(s.as_raw_fd(), buf)
}

/// One `send` (one slice: neither the file layer nor a vector for the
/// kernel to copy in, as for TCP in `transport.rs`) or `writev`.
#[inline]
fn write_to(s: &StdUnixStream, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    use std::io::Write;
    match bufs {
        [one] => crate::network::sys::send(s.as_raw_fd(), one),
        _ => (&*s).write_vectored(bufs),
    }
}
