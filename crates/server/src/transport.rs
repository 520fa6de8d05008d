//! What a connection needs from its byte stream, so that one connection
//! loop (`conn.rs`) serves plain TCP and TLS alike. The loop is generic
//! over [`Transport`] and monomorphised per stream type: on plain TCP
//! every method is tokio's own call (the TLS-only hooks are constants),
//! so TLS costs a plain connection nothing per command.

use std::io::{self, IoSlice};
use std::task::{Context, Poll};

use tokio::net::TcpStream;

/// A readiness-based, non-blocking byte stream over one TCP socket.
pub trait Transport {
    /// Whether the socket's bytes are the protocol itself (plain TCP), so
    /// that a busy script's thread may serve the connection by reading
    /// and writing its socket directly (`crate::busy`).
    const RAW: bool;
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
    /// The plain socket, for a connection that becomes a replica
    /// (replication streams from threads of its own over a blocking
    /// socket); `Err` gives the stream back when it cannot be handed on.
    fn into_tcp(self) -> Result<TcpStream, Self>
    where
        Self: Sized;
}

impl Transport for TcpStream {
    const RAW: bool = true;

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

    fn into_tcp(self) -> Result<TcpStream, Self> {
        Ok(self)
    }
}
