//! The Unix socket listener (`unixsocket`, `unixsocketperm`), as Redis
//! opens it: any file already at the path is removed first, the socket
//! gets the configured permissions, and it is removed again at exit. A
//! client on it is served by the same connection loop as a TCP one
//! (this file's [`Transport`] for tokio's `UnixStream`); CLIENT LIST
//! shows its `addr` and `laddr` as `<path>:0`, as Redis does.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::task::{Context, Poll};

use tokio::net::{TcpStream, UnixStream};

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
fn shown_addr(s: &UnixStream) -> String {
    let path = s.local_addr().ok().and_then(|a| a.as_pathname().map(|p| p.display().to_string()));
    format!("{}:0", path.unwrap_or_default())
}

impl Transport for UnixStream {
    const READ_CHECKS_READINESS: bool = true;

    fn fd(&self) -> RawFd {
        self.as_raw_fd()
    }

    fn is_local(&self) -> bool {
        true
    }

    fn addrs(&self) -> (String, String) {
        // The listening socket's path (the accepted socket's own address
        // is that path too).
        let a = shown_addr(self);
        (a.clone(), a)
    }

    fn tune(&self, _keepalive_secs: u64) {}

    #[inline]
    fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        UnixStream::try_read_buf(self, buf)
    }

    #[inline]
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        UnixStream::try_write_vectored(self, bufs)
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
        let _ = self.try_io(tokio::io::Interest::READABLE, || {
            Err::<(), _>(io::ErrorKind::WouldBlock.into())
        });
    }

    #[inline]
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        UnixStream::poll_read_ready(self, cx)
    }

    #[inline]
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        UnixStream::poll_write_ready(self, cx)
    }

    fn read_direct(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        use std::io::Read;
        let len = buf.len();
        buf.resize(buf.capacity(), 0);
        let r = (&*direct(self)).read(&mut buf[len..]);
        buf.truncate(len + *r.as_ref().unwrap_or(&0));
        r
    }

    fn write_direct(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        use std::io::Write;
        (&*direct(self)).write_vectored(bufs)
    }

    fn flush_direct(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// A replica reaches its master over TCP only (as Redis's do).
    fn into_tcp(self) -> Result<TcpStream, Self> {
        Err(self)
    }
}

/// The socket under `s` as a std socket, for the busy pass's direct
/// calls; never closed through it.
fn direct(s: &UnixStream) -> std::mem::ManuallyDrop<std::os::unix::net::UnixStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: the fd is `s`'s, open while it is; ManuallyDrop keeps this
    // second owner from closing it.
    std::mem::ManuallyDrop::new(unsafe {
        std::os::unix::net::UnixStream::from_raw_fd(s.as_raw_fd())
    })
}
