//! What a connection needs from its byte stream, so that one connection
//! loop (`conn.rs`) serves plain TCP, TLS and Unix sockets alike. The loop is generic
//! over [`Transport`] and monomorphised per stream type: on plain TCP
//! every method is tokio's own call (the TLS-only hooks are constants),
//! so TLS costs a plain connection nothing per command. Both are served
//! by a busy script's thread too (`crate::busy`), through the `_direct`
//! calls.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::TcpStream;

/// A readiness-based, non-blocking byte stream over one socket.
pub trait Transport {
    /// Whether [`try_read_buf`](Transport::try_read_buf) itself looks at
    /// the socket's readiness first (tokio's `try_io`: no syscall, a
    /// `WouldBlock`, when the reactor saw no input), so that a woken
    /// connection may read at once instead of polling the readiness
    /// again (`conn.rs` `wait_io`).
    const READ_CHECKS_READINESS: bool = false;
    /// The socket's descriptor (CLIENT LIST's `fd`, the busy pass's poll).
    fn fd(&self) -> RawFd;
    /// Whether the peer is on this host (protected mode lets it in): a
    /// loopback address, or any Unix socket client.
    fn is_local(&self) -> bool;
    /// Whether the protocol's bytes go over the socket as they are (no
    /// TLS): the Lua debugger may then talk on the descriptor directly.
    fn raw_bytes(&self) -> bool {
        true
    }
    /// The peer's and the local address as CLIENT LIST shows them
    /// (`addr`, `laddr`).
    fn addrs(&self) -> (String, String);
    /// Sets a new client's socket options (TCP_NODELAY and keepalive on
    /// TCP; nothing on a Unix socket).
    fn tune(&self, keepalive_secs: u64);
    /// Reads what is available into `buf`'s spare capacity; `Ok(0)` at
    /// end of input, `WouldBlock` when nothing is available.
    fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
    /// Writes (or takes in charge) a prefix of `bufs`.
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Whether the transport still holds bytes of its own for the socket
    /// (encrypted records not yet written).
    fn pending_out(&self) -> bool;
    /// Writes what [`pending_out`](Transport::pending_out) holds, as far
    /// as the socket takes it (`WouldBlock` is not an error).
    fn flush_pending(&mut self) -> io::Result<()>;
    /// A short read drained the socket: forget its read readiness, so
    /// the next wait does not first make a read that says EAGAIN.
    fn drained(&self);
    /// Ready when a read may make progress; otherwise the task is woken
    /// when it may (only the last task that polled is).
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// Ready when the socket takes more bytes; otherwise as above.
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// [`try_read_buf`](Transport::try_read_buf) for a busy script's
    /// thread (`crate::busy`): its reactor does not turn meanwhile, so
    /// tokio's view of the socket's readiness is stale, not its state;
    /// these `_direct` calls go to the socket itself, without waiting.
    fn read_direct(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
    /// [`try_write_vectored`](Transport::try_write_vectored), as
    /// [`read_direct`](Transport::read_direct).
    fn write_direct(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// [`flush_pending`](Transport::flush_pending), as
    /// [`read_direct`](Transport::read_direct).
    fn flush_direct(&mut self) -> io::Result<()>;
    /// The plain socket, for a connection that becomes a replica
    /// (replication streams from threads of its own over a blocking
    /// socket); `Err` gives the stream back when it cannot be handed on.
    fn into_tcp(self) -> Result<TcpStream, Self>
    where
        Self: Sized;
}

/// Whether a TCP peer is on a loopback address.
pub fn tcp_is_local(tcp: &TcpStream) -> bool {
    tcp.peer_addr().is_ok_and(|p| match p.ip() {
        std::net::IpAddr::V4(ip) => ip.octets()[0] == 127,
        std::net::IpAddr::V6(ip) => ip.is_loopback(),
    })
}

/// A TCP socket's `addr` and `laddr`.
pub fn tcp_addrs(tcp: &TcpStream) -> (String, String) {
    let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let local = tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
    (peer, local)
}

/// TCP_NODELAY, and Redis's anetKeepAlive: probes after `tcp-keepalive`
/// idle seconds, every third of that, three of them (0: none).
pub fn tcp_tune(tcp: &TcpStream, keepalive_secs: u64) {
    let _ = tcp.set_nodelay(true);
    if keepalive_secs > 0 {
        let secs = Duration::from_secs(keepalive_secs);
        let ka = socket2::TcpKeepalive::new()
            .with_time(secs)
            .with_interval((secs / 3).max(Duration::from_secs(1)))
            .with_retries(3);
        let _ = socket2::SockRef::from(tcp).set_tcp_keepalive(&ka);
    }
}

/// The socket under `tcp` as a std socket, for calls that bypass tokio's
/// readiness (`read_direct`, `write_direct`); never closed through it.
pub fn direct(tcp: &TcpStream) -> std::mem::ManuallyDrop<std::net::TcpStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: the fd is `tcp`'s, open while it is; ManuallyDrop keeps
    // this second owner from closing it.
    std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(tcp.as_raw_fd()) })
}

impl Transport for TcpStream {
    const READ_CHECKS_READINESS: bool = true;

    fn fd(&self) -> RawFd {
        self.as_raw_fd()
    }

    fn is_local(&self) -> bool {
        tcp_is_local(self)
    }

    fn addrs(&self) -> (String, String) {
        tcp_addrs(self)
    }

    fn tune(&self, keepalive_secs: u64) {
        tcp_tune(self, keepalive_secs)
    }

    /// `recv` by `syscall(2)` ([`crate::network::sys`]), under tokio's
    /// readiness as its own `try_read_buf`.
    #[inline]
    fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let fd = self.as_raw_fd();
        self.try_io(tokio::io::Interest::READABLE, || crate::network::sys::recv_into(fd, buf))
    }

    /// One slice (a batch's replies in one chunk, the usual case) goes by
    /// `send`, as Redis writes: `writev` costs the kernel its file layer
    /// and the copy of the vector (`perf`: about 1% of the server's kernel
    /// time at P=1).
    #[inline]
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match bufs {
            [one] => {
                let fd = self.as_raw_fd();
                self.try_io(tokio::io::Interest::WRITABLE, || crate::network::sys::send(fd, one))
            }
            _ => TcpStream::try_write_vectored(self, bufs),
        }
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
        TcpStream::poll_read_ready(self, cx)
    }

    #[inline]
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_write_ready(self, cx)
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

    fn into_tcp(self) -> Result<TcpStream, Self> {
        Ok(self)
    }
}
