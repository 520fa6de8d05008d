//! The Lua debugger's channel to its client (`engine::subsystems::script::ldb`): the
//! client's socket itself, read and written with blocking waits from
//! inside the debugged script, as Redis's debugger does (`connBlock`).
//!
//! The connection's task is inside the EVAL meanwhile and the session
//! ends the connection, so nothing else reads or writes the socket while
//! the channel is open; tokio's (stale) readiness is never consulted.

use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use engine::core::session::ClientHandle;
use engine::subsystems::script::ldb::Channel;

/// Redis's `connSendTimeout(ldb.conn, 5000)`.
const SEND_TIMEOUT_MS: i32 = 5000;
/// How often a wait for input looks whether the client was killed.
const READ_TICK_MS: i32 = 100;

struct Socket {
    fd: RawFd,
    handle: Arc<ClientHandle>,
}

/// Opens the debugger's channel on a client's socket (`Host::debugger`).
pub fn open(handle: &Arc<ClientHandle>) -> Option<Box<dyn Channel>> {
    if handle.fd < 0 || !handle.raw_bytes.load(Ordering::Relaxed) {
        return None;
    }
    Some(Box::new(Socket { fd: handle.fd, handle: handle.clone() }))
}

/// Waits up to `ms` for `events` on `fd`: true when ready (or in error,
/// which the next call reports).
fn wait(fd: RawFd, events: libc::c_short, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one pollfd, owned by this frame.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n > 0
}

impl Channel for Socket {
    fn write_all(&mut self, mut b: &[u8]) -> bool {
        while !b.is_empty() {
            // SAFETY: writes from a live slice to the client's socket.
            let n = unsafe { libc::write(self.fd, b.as_ptr().cast(), b.len()) };
            if n > 0 {
                self.handle.net_out.fetch_add(n as u64, Ordering::Relaxed);
                b = &b[n as usize..];
                continue;
            }
            let e = std::io::Error::last_os_error().kind();
            if n < 0 && e == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n < 0
                && e == std::io::ErrorKind::WouldBlock
                && wait(self.fd, libc::POLLOUT, SEND_TIMEOUT_MS)
            {
                continue;
            }
            return false;
        }
        true
    }

    fn read(&mut self, buf: &mut [u8]) -> usize {
        loop {
            if self.handle.killed.load(Ordering::Acquire) {
                return 0;
            }
            // SAFETY: reads into a live buffer from the client's socket.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                self.handle.net_in.fetch_add(n as u64, Ordering::Relaxed);
                return n as usize;
            }
            if n == 0 {
                return 0;
            }
            match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::WouldBlock => {
                    wait(self.fd, libc::POLLIN, READ_TICK_MS);
                }
                _ => return 0,
            }
        }
    }
}
