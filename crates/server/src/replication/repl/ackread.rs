//! Reading a replica's `REPLCONF ACK`s (and `FACK`s): the replica's
//! `repl-ack` thread waits for them, and a `DURABLE` batch's connection
//! also takes what has arrived, from its own thread, before it sleeps.
//!
//! Why both: a durable batch's reply waited for three threads in turn
//! (the replica's link thread, this master's `repl-ack` thread, then the
//! connection's event loop woken by it). On a loaded machine each
//! hand-off waits for a CPU; the `repl-ack` thread's was the one on the
//! master's side. The event loop, running the next batches, now reads
//! the acknowledgements that came meanwhile itself and wakes the
//! batches they satisfy without that thread; the thread still reads
//! whatever the loop does not (an idle loop, a WAIT, `repl-timeout`).
//!
//! Both read under the replica's [`Replica::acks_in`] lock, without
//! waiting (`MSG_DONTWAIT`), into the one buffer of unparsed bytes, so
//! the requests are parsed in the order they came whoever reads them;
//! the thread waits for input with `peek`, outside the lock.

use std::mem::MaybeUninit;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use engine::core::shared::unix_ms;
use engine::subsystems::log;
use engine::Shared;
use resp::{ArgBuf, Limits, Parsed};

use super::{conf_num, refuse_command, Master, Replica};

/// A replica's input not parsed yet.
#[derive(Default)]
pub(super) struct AckInput {
    buf: Vec<u8>,
    args: ArgBuf,
}

impl AckInput {
    pub(super) fn new(buf: Vec<u8>) -> Self {
        AckInput { buf, args: ArgBuf::default() }
    }
}

/// Bytes read per `recv`.
const READ_CHUNK: usize = 4096;

/// The `repl-ack` thread: reads what the replica sends until it goes;
/// applies `repl-timeout`.
pub(super) fn read_acks(sh: &Shared, m: &Master, r: &Replica, sock: TcpStream) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(500)));
    let mut probe = [0u8; 1];
    loop {
        // What came with the handshake, then what the loop left.
        take(sh, m, r, &mut r.acks_in.lock());
        if r.handle.killed.load(Ordering::Acquire) {
            return;
        }
        let timeout = conf_num(sh, "repl-timeout").max(1);
        if r.streaming.load(Ordering::Relaxed)
            && unix_ms() / 1000 - r.ack_time.load(Ordering::Relaxed) > timeout
        {
            log::warning(&format!("Disconnecting timedout replica (streaming sync): {}", r.name));
            r.kill();
            return;
        }
        // Waits for input (or its end) without taking it: the read is
        // `take`'s, under the lock.
        match sock.peek(&mut probe) {
            Ok(_) => {}
            Err(e) if crate::replication::follow::is_timeout(&e) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                r.kill();
                return;
            }
        }
    }
}

impl Master {
    /// Takes the acknowledgements the online replicas sent that no
    /// thread has read yet, from the caller's thread (a `DURABLE` batch
    /// about to wait: it wakes the batches they satisfy without the
    /// `repl-ack` threads' hand-off). A replica whose input another
    /// thread is reading is skipped: that thread takes it.
    pub(crate) fn take_acks_now(&self) {
        let Some(sh) = self.shared.upgrade() else { return };
        let replicas: smallvec::SmallVec<[std::sync::Arc<Replica>; 4]> = self
            .inner
            .lock()
            .replicas
            .iter()
            .filter(|s| s.r.streaming.load(Ordering::Relaxed))
            .map(|s| s.r.clone())
            .collect();
        for r in replicas {
            if let Some(mut input) = r.acks_in.try_lock() {
                take(&sh, self, &r, &mut input);
            }
        }
    }
}

/// Reads what the replica's socket holds (not waiting for more) into
/// `input`, and handles every complete request in it: the highest
/// acknowledged offsets are recorded, then the waits they satisfy are
/// served once. Anything else, or the socket's end, cuts the replica.
fn take(sh: &Shared, m: &Master, r: &Replica, input: &mut AckInput) {
    let sock = socket2::SockRef::from(&r.sock);
    let mut chunk = [MaybeUninit::<u8>::uninit(); READ_CHUNK];
    loop {
        match sock.recv_with_flags(&mut chunk, libc::MSG_DONTWAIT) {
            Ok(0) => {
                r.kill();
                return;
            }
            Ok(n) => {
                // SAFETY: `recv` initialized the first `n` bytes.
                let got = unsafe { std::slice::from_raw_parts(chunk.as_ptr().cast::<u8>(), n) };
                input.buf.extend_from_slice(got);
                r.handle.net_in.fetch_add(n as u64, Ordering::Relaxed);
                r.handle.last_interaction_ms.store(unix_ms(), Ordering::Relaxed);
                if n < READ_CHUNK {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(_) => {
                r.kill();
                return;
            }
        }
    }
    let limits = Limits { max_bulk_len: 1 << 20, unauthenticated: false };
    let AckInput { buf, args } = input;
    let mut pos = 0;
    let mut acked = false;
    loop {
        match resp::parse(&buf[pos..], &limits, args) {
            Parsed::Command { consumed } => {
                let input = &buf[pos..];
                let n = args.len();
                let arg = |i: usize| args.get(input, i);
                if n >= 3
                    && arg(0).eq_ignore_ascii_case(b"REPLCONF")
                    && arg(1).eq_ignore_ascii_case(b"ACK")
                {
                    if let Some(off) =
                        std::str::from_utf8(arg(2)).ok().and_then(|s| s.parse::<i64>().ok())
                    {
                        r.ack_offset.fetch_max(off, Ordering::Relaxed);
                        // Redis 7.2's `FACK <aofoff>`: what its AOF fsynced.
                        if n >= 5 && arg(3).eq_ignore_ascii_case(b"FACK") {
                            if let Some(f) =
                                std::str::from_utf8(arg(4)).ok().and_then(|s| s.parse::<i64>().ok())
                            {
                                r.fack_offset.fetch_max(f, Ordering::Relaxed);
                            }
                        }
                        r.ack_time.store(unix_ms() / 1000, Ordering::Relaxed);
                        if r.acked() {
                            log::notice(&format!(
                                "Synchronization with replica {} succeeded",
                                r.name
                            ));
                            m.grown.notify_all();
                        }
                        acked = true;
                    }
                } else if n > 0 && !arg(0).eq_ignore_ascii_case(b"REPLCONF") {
                    let argv: Vec<&[u8]> = (0..n).map(arg).collect();
                    refuse_command(sh, r, &argv);
                    buf.clear();
                    return;
                }
                pos += consumed;
            }
            Parsed::Empty { consumed } => pos += consumed,
            Parsed::Incomplete { .. } => break,
            Parsed::Error(_) => {
                r.kill();
                buf.clear();
                return;
            }
        }
    }
    buf.drain(..pos);
    // Several acknowledgements read at once are served once, with the
    // highest (the offsets only grow).
    if acked {
        m.ack_progress(&m.inner.lock());
        m.serve_waits();
        m.acks.notify_waiters();
    }
}
