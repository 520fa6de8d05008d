//! What a connection needs from its byte stream, so that one connection
//! loop (`conn.rs`) serves plain TCP and TLS alike. The loop is generic
//! over [`Transport`] and monomorphised per stream type: on plain TCP
//! every method is tokio's own call (the TLS-only hooks are constants),
//! so TLS costs a plain connection nothing per command. Both are served
//! by a busy script's thread too (`crate::busy`), through the `_direct`
//! calls.

use std::io::{self, IoSlice};
use std::task::{Context, Poll};

use tokio::net::TcpStream;

/// A readiness-based, non-blocking byte stream over one TCP socket.
pub trait Transport {
    /// The socket underneath (options, addresses, fd).
    fn tcp(&self) -> &TcpStream;
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

/// The socket under `tcp` as a std socket, for calls that bypass tokio's
/// readiness (`read_direct`, `write_direct`); never closed through it.
pub fn direct(tcp: &TcpStream) -> std::mem::ManuallyDrop<std::net::TcpStream> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: the fd is `tcp`'s, open while it is; ManuallyDrop keeps
    // this second owner from closing it.
    std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(tcp.as_raw_fd()) })
}

impl Transport for TcpStream {
    #[inline]
    fn tcp(&self) -> &TcpStream {
        self
    }

    #[inline]
    fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        TcpStream::try_read_buf(self, buf)
    }

    #[inline]
    fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        TcpStream::try_write_vectored(self, bufs)
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
