//! A blocking client for tests: raw bytes or commands out, one reply's
//! exact bytes back, with timeouts so a hung server fails a test instead
//! of hanging it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use resp::{parse_frame, Frame};

/// How long a read may wait for the next bytes by default.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One connection to a server under test.
pub struct Client {
    stream: TcpStream,
    /// Bytes read; those before `pos` were already returned.
    buf: Vec<u8>,
    pos: usize,
    timeout: Duration,
}

impl Client {
    /// Connects to `127.0.0.1:port`.
    pub fn connect(port: u16) -> io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(Duration::from_secs(60)))?;
        Ok(Client { stream, buf: Vec::new(), pos: 0, timeout: READ_TIMEOUT })
    }

    /// Changes how long reads wait before failing with `TimedOut`.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
        let _ = self.stream.set_read_timeout(Some(t));
    }

    /// The underlying socket (for split writes, shutdowns, clones).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Writes bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Writes one command as a RESP array of bulk strings.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<()> {
        let mut v = Vec::new();
        resp::write_command(&mut v, args);
        self.send_raw(&v)
    }

    /// Sends a command and returns its reply's bytes.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Vec<u8>> {
        self.send(args)?;
        self.read_reply()
    }

    /// Like [`Client::cmd`] with the arguments split on spaces (tests only).
    pub fn cmd_str(&mut self, line: &str) -> Vec<u8> {
        let args: Vec<&str> = line.split_whitespace().collect();
        self.cmd(&args).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    /// Waits until the server has its data set loaded (`loading:0` in INFO
    /// persistence); panics after 30 s.
    pub fn wait_loaded(&mut self) {
        let start = std::time::Instant::now();
        loop {
            let info = self.cmd(&["INFO", "persistence"]).expect("INFO persistence");
            if info.windows(13).any(|w| w == b"\r\nloading:0\r\n") {
                return;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "still loading");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Reads exactly one reply and returns its bytes.
    pub fn read_reply(&mut self) -> io::Result<Vec<u8>> {
        loop {
            match parse_frame(&self.buf[self.pos..]) {
                Ok(Some((_, used))) => {
                    let reply = self.buf[self.pos..self.pos + used].to_vec();
                    self.pos += used;
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("connection closed; {} unparsed bytes", self.buf.len() - self.pos),
                ));
            }
        }
    }

    /// Reads exactly one reply, parsed.
    pub fn read_frame(&mut self) -> io::Result<Frame> {
        let b = self.read_reply()?;
        Ok(parse_frame(&b).ok().flatten().expect("a whole frame").0)
    }

    /// Reads until the unread input ends with `suffix` (a sentinel reply);
    /// returns it all, sentinel included.
    pub fn read_until_suffix(&mut self, suffix: &[u8], limit: Duration) -> io::Result<Vec<u8>> {
        let deadline = Instant::now() + limit;
        while !self.buf[self.pos..].ends_with(suffix) {
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "sentinel reply not seen"));
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before sentinel"));
            }
        }
        Ok(self.take())
    }

    /// Reads until the server closes the connection (or `limit` passes:
    /// `TimedOut`); returns everything read.
    pub fn read_to_close(&mut self, limit: Duration) -> io::Result<Vec<u8>> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "server did not close"));
            }
            self.stream.set_read_timeout(Some(left))?;
            let r = self.fill();
            self.stream.set_read_timeout(Some(self.timeout))?;
            match r {
                Ok(0) => return Ok(self.take()),
                Ok(_) => {}
                // A reset after the server closed is a close too.
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(self.take()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads whatever arrives within `wait` after the last byte.
    pub fn read_quiet(&mut self, wait: Duration) -> io::Result<(Vec<u8>, bool)> {
        self.stream.set_read_timeout(Some(wait))?;
        let mut closed = false;
        loop {
            match self.fill() {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(_) => {}
                Err(e)
                    if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
                {
                    break
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    closed = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        self.stream.set_read_timeout(Some(self.timeout))?;
        Ok((self.take(), closed))
    }

    /// Half-closes the connection (the client's EOF, as `nc -N` sends it).
    pub fn shutdown_write(&self) -> io::Result<()> {
        self.stream.shutdown(Shutdown::Write)
    }

    /// Everything unread, leaving the buffer empty.
    fn take(&mut self) -> Vec<u8> {
        let rest = self.buf.split_off(self.pos);
        self.buf.clear();
        self.pos = 0;
        rest
    }

    fn fill(&mut self) -> io::Result<usize> {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let mut chunk = [0u8; 64 * 1024];
        let n = match self.stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"))
            }
            Err(e) => return Err(e),
        };
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }
}

/// Bytes as a readable one-line string (`\r\n` and non-printables escaped).
pub fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s
}
