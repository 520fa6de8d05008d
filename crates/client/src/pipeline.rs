//! Explicit pipelines: commands queued in one buffer, sent in one write.

use resp::Frame;

/// One command's outcome inside a pipeline: its reply, or the server's
/// error text for that command alone.
pub type Reply = std::result::Result<Frame, String>;

/// Commands queued to be sent together by [`crate::Connection::exec`].
#[derive(Debug, Default, Clone)]
pub struct Pipeline {
    pub(crate) buf: Vec<u8>,
    pub(crate) n: usize,
}

impl Pipeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues one command.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> &mut Self {
        resp::write_command(&mut self.buf, args);
        self.n += 1;
        self
    }

    /// Number of queued commands.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The encoded requests, as they will be written.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Forgets the queued commands, keeping the buffer.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.n = 0;
    }
}
