//! The ACL log (`ACL LOG`): the latest refusals, newest first, with
//! similar entries within a minute grouped into one (Redis's
//! `addACLLogEntry`).

use std::collections::VecDeque;

use resp::ReplyBuf;

use super::Denied;

/// Where the refused command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

struct Entry {
    count: u64,
    reason: Denied,
    context: Context,
    object: Vec<u8>,
    username: Vec<u8>,
    ctime_ms: i64,
    cinfo: Vec<u8>,
}

/// Entries a new one is compared with before it is added.
const SCAN: usize = 10;
/// Entries further apart than this (ms) are not grouped.
const GROUPING_MS: i64 = 60_000;

#[derive(Default)]
pub struct Log {
    entries: VecDeque<Entry>,
}

impl Log {
    /// Adds a refusal, or counts it on a similar recent entry (moved to
    /// the front); keeps at most `max_len` entries.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        reason: Denied,
        context: Context,
        object: &[u8],
        username: &[u8],
        now_ms: i64,
        cinfo: Vec<u8>,
        max_len: usize,
    ) {
        let found = self.entries.iter().take(SCAN).position(|e| {
            e.reason == reason
                && e.context == context
                && (e.ctime_ms - now_ms).abs() <= GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = found {
            let mut e = self.entries.remove(i).expect("found");
            e.cinfo = cinfo;
            e.ctime_ms = now_ms;
            e.count += 1;
            self.entries.push_front(e);
            return;
        }
        self.entries.push_front(Entry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            ctime_ms: now_ms,
            cinfo,
        });
        self.entries.truncate(max_len);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the first `count` entries as `ACL LOG` does.
    pub fn reply(&self, count: usize, now_ms: i64, out: &mut ReplyBuf) {
        let n = count.min(self.entries.len());
        out.array(n);
        for e in self.entries.iter().take(n) {
            out.map(7);
            out.bulk(b"count");
            out.int(e.count as i64);
            out.bulk(b"reason");
            out.bulk(match e.reason {
                Denied::Cmd => b"command",
                Denied::Key => b"key",
                Denied::Channel => b"channel",
                Denied::Auth => b"auth",
            });
            out.bulk(b"context");
            out.bulk(match e.context {
                Context::Toplevel => &b"toplevel"[..],
                Context::Multi => b"multi",
                Context::Lua => b"lua",
            });
            out.bulk(b"object");
            out.bulk(&e.object);
            out.bulk(b"username");
            out.bulk(&e.username);
            out.bulk(b"age-seconds");
            out.double((now_ms - e.ctime_ms) as f64 / 1000.0);
            out.bulk(b"client-info");
            out.bulk(&e.cinfo);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_trims() {
        let mut l = Log::default();
        l.add(Denied::Auth, Context::Toplevel, b"AUTH", b"u", 0, vec![], 3);
        l.add(Denied::Auth, Context::Toplevel, b"HELLO", b"u", 1, vec![], 3);
        l.add(Denied::Auth, Context::Toplevel, b"AUTH", b"u", 2, vec![], 3);
        assert_eq!(l.len(), 2);
        assert_eq!(l.entries[0].count, 2);
        assert_eq!(l.entries[0].object, b"AUTH");
        // A minute and more later: a new entry.
        l.add(Denied::Auth, Context::Toplevel, b"AUTH", b"u", 70_000, vec![], 3);
        assert_eq!(l.len(), 3);
        l.add(Denied::Key, Context::Lua, b"k", b"u", 70_000, vec![], 3);
        assert_eq!(l.len(), 3);
        // A repeat is counted, not trimmed; a new entry trims.
        l.add(Denied::Key, Context::Lua, b"k", b"u", 70_000, vec![], 0);
        assert_eq!(l.len(), 3);
        l.add(Denied::Key, Context::Lua, b"k2", b"u", 70_000, vec![], 0);
        assert!(l.is_empty());
    }
}
