//! A client socket's two calls per request, `recv` and `send`, made with
//! `syscall(2)` rather than through glibc's wrappers of the same names.
//!
//! glibc's `recv` and `send` are thread-cancellation points: in a process
//! with more than one thread (every server: the event loops, the
//! background workers) each call sets the thread's asynchronous
//! cancellation state before the system call and restores it after, two
//! locked compare-exchanges on the thread's descriptor a call. The one
//! after the call waits for the line the kernel's return left cold: at
//! P=1 (GET, fifty clients, `perf record -C 1`) it took 76 of the
//! server's 5,949 samples, more than `send`'s own user-space part.
//! `syscall(2)` is no cancellation point, and nothing in Sluice cancels
//! a thread.

use std::io;
use std::os::fd::RawFd;

/// One `recv` into `buf`'s spare capacity; the length grows by what
/// came. A full vector gets a little room first (a read into none would
/// say 0, end of input).
#[inline]
pub fn recv_into(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<usize> {
    if buf.len() == buf.capacity() {
        buf.reserve(64);
    }
    let spare = buf.spare_capacity_mut();
    // SAFETY: `recvfrom` writes at most `spare.len()` bytes into memory
    // this vector owns and reads no address (both null).
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd as libc::c_long,
            spare.as_mut_ptr(),
            spare.len(),
            0 as libc::c_long,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: the kernel initialised the `n` bytes it wrote.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// One `send` of `bytes` (every argument passed as a full register:
/// `syscall` is variadic), without SIGPIPE (a closed peer is an error,
/// as std's own `send` makes it).
#[inline]
pub fn send(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: `sendto` reads at most `bytes.len()` bytes of `bytes`, and
    // no address (null, length 0).
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd as libc::c_long,
            bytes.as_ptr(),
            bytes.len(),
            libc::MSG_NOSIGNAL as libc::c_long,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::c_long,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn send_and_recv_move_bytes_and_report_errors() {
        let (a, b) = UnixStream::pair().expect("pair");
        b.set_nonblocking(true).expect("nonblocking");
        assert_eq!(send(a.as_raw_fd(), b"hello").expect("send"), 5);
        let mut buf = Vec::new();
        assert_eq!(recv_into(b.as_raw_fd(), &mut buf).expect("recv"), 5);
        assert_eq!(buf, b"hello");
        // Nothing more: would block, nothing appended.
        let e = recv_into(b.as_raw_fd(), &mut buf).expect_err("empty");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(buf, b"hello");
        // The peer gone: end of input, then a send error (no SIGPIPE).
        drop(a);
        assert_eq!(recv_into(b.as_raw_fd(), &mut buf).expect("eof"), 0);
        let (c, d) = UnixStream::pair().expect("pair");
        drop(d);
        assert!(send(c.as_raw_fd(), b"x").is_err());
    }
}
