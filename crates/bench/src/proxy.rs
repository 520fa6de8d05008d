//! Round-trip emulation in user space: a TCP proxy that delays each
//! direction by half the round-trip time.
//!
//! Each direction has a reader thread that timestamps every chunk it reads
//! and queues it, and a writer thread that sleeps until a chunk is due and
//! then writes it together with every other chunk already due. The reader
//! never waits for the writer, so the delay adds latency but no throughput
//! limit, and one queue per direction keeps the byte order. OS threads
//! rather than tokio timers: tokio's timer wheel has millisecond
//! granularity, too coarse for a 0.2 ms round trip.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running proxy; it listens until the process exits.
pub struct Proxy {
    pub addr: SocketAddr,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection
    /// to `upstream`, adding `rtt / 2` in each direction.
    pub fn start(upstream: SocketAddr, rtt: Duration) -> std::io::Result<Proxy> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        let half = rtt / 2;
        thread::Builder::new().name("rtt-accept".into()).spawn(move || {
            for down in l.incoming().flatten() {
                let Ok(up) = TcpStream::connect(upstream) else { continue };
                let _ = pair(down, up, half);
            }
        })?;
        Ok(Proxy { addr })
    }
}

fn pair(down: TcpStream, up: TcpStream, half: Duration) -> std::io::Result<()> {
    down.set_nodelay(true)?;
    up.set_nodelay(true)?;
    direction(down.try_clone()?, up.try_clone()?, half)?;
    direction(up, down, half)
}

fn direction(mut from: TcpStream, mut to: TcpStream, delay: Duration) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::Builder::new().name("rtt-read".into()).spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `tx` tells the writer to finish and half-close.
    })?;
    thread::Builder::new().name("rtt-write".into()).spawn(move || {
        let mut out = Vec::with_capacity(64 * 1024);
        while let Ok((due, data)) = rx.recv() {
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            out.clear();
            out.extend_from_slice(&data);
            // Everything else already due goes in the same write.
            let now = Instant::now();
            let mut next = None;
            while let Ok((d, b)) = rx.try_recv() {
                if d <= now {
                    out.extend_from_slice(&b);
                } else {
                    next = Some((d, b));
                    break;
                }
            }
            if to.write_all(&out).is_err() {
                break;
            }
            if let Some((d, b)) = next {
                let now = Instant::now();
                if d > now {
                    thread::sleep(d - now);
                }
                if to.write_all(&b).is_err() {
                    break;
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on a free port.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        thread::spawn(move || {
            for s in l.incoming().flatten() {
                thread::spawn(move || {
                    let mut r = s.try_clone().unwrap();
                    let mut w = s;
                    let _ = std::io::copy(&mut r, &mut w);
                });
            }
        });
        a
    }

    fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Duration {
        let t = Instant::now();
        s.write_all(msg).unwrap();
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, msg);
        t.elapsed()
    }

    #[test]
    fn adds_the_round_trip_and_no_throughput_limit() {
        let rtt = Duration::from_millis(20);
        let p = Proxy::start(echo(), rtt).unwrap();
        let mut s = TcpStream::connect(p.addr).unwrap();
        s.set_nodelay(true).unwrap();
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let d = round_trip(&mut s, b"ping\r\n");
            assert!(d >= rtt, "round trip {d:?} shorter than {rtt:?}");
            best = best.min(d);
        }
        assert!(best < rtt + Duration::from_millis(15), "best round trip {best:?}");

        // 4 MiB in 1000 small writes, echoed back in order: the delay is
        // paid about once, not per write, and the bytes keep their order.
        let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
        let t = Instant::now();
        let mut r = s.try_clone().unwrap();
        let expect = data.clone();
        let h = thread::spawn(move || {
            let mut got = vec![0u8; expect.len()];
            r.read_exact(&mut got).unwrap();
            assert!(got == expect, "bytes reordered or corrupted");
        });
        for c in data.chunks(data.len() / 1000) {
            s.write_all(c).unwrap();
        }
        h.join().unwrap();
        let d = t.elapsed();
        assert!(d < Duration::from_millis(1500), "4 MiB through the proxy took {d:?}");
    }

    #[test]
    fn sub_millisecond_round_trip() {
        let rtt = Duration::from_micros(400);
        let p = Proxy::start(echo(), rtt).unwrap();
        let mut s = TcpStream::connect(p.addr).unwrap();
        s.set_nodelay(true).unwrap();
        let mut best = Duration::MAX;
        for _ in 0..20 {
            let d = round_trip(&mut s, b"x");
            assert!(d >= rtt, "round trip {d:?} shorter than {rtt:?}");
            best = best.min(d);
        }
        // Sleep overshoot on a loaded machine; a millisecond-granular
        // timer would give at least 2 ms here.
        assert!(best < Duration::from_micros(1900), "best round trip {best:?}");
    }
}
