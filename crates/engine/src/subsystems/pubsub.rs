//! The pub/sub registry: who listens to which channel, pattern or shard
//! channel, and delivery of a message to every listener.
//!
//! The registry sits behind its own locks (one per kind of subscription),
//! never taken on the GET/SET path: `PUBLISH`, the subscribe commands and
//! keyspace notifications take them. A message reaches a subscriber on
//! any thread through its [outbox](crate::core::outbox): it is encoded once per
//! protocol, queued, and the subscriber's connection is woken; it writes
//! the message in the same write as its own replies. One publisher's
//! messages reach each subscriber in publish order (a publisher publishes
//! one message at a time, and an outbox is a FIFO).
//!
//! A subscriber whose queued output passes the hard `client-output-buffer-limit
//! pubsub` limit is disconnected here, by the publisher, as Redis closes a
//! client when a reply would take it over the limit; its connection
//! enforces the soft limit over time. Messages to a client already
//! scheduled to close are dropped, so a dead subscriber costs nothing.
//!
//! Each session keeps its own subscriptions ([`Subs`]) in the order it made
//! them; the counts are mirrored into its [`ClientHandle`] for `CLIENT
//! LIST`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use resp::{Proto, ReplyBuf};

use crate::core::session::ClientHandle;

/// Which namespace a subscription lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `SUBSCRIBE` / `PUBLISH`.
    Channel,
    /// `PSUBSCRIBE`.
    Pattern,
    /// `SSUBSCRIBE` / `SPUBLISH`.
    Shard,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Channel, Kind::Pattern, Kind::Shard];

    fn index(self) -> usize {
        self as usize
    }

    /// The word of a subscribe confirmation.
    pub fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    /// The word of an unsubscribe confirmation.
    pub fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// One session's subscriptions, in the order they were made.
#[derive(Default, Debug)]
pub struct Subs {
    lists: [Vec<Box<[u8]>>; 3],
}

impl Subs {
    /// The subscriptions of one kind.
    pub fn of(&self, kind: Kind) -> &[Box<[u8]>] {
        &self.lists[kind.index()]
    }

    /// Channels plus patterns: the count Redis reports in (un)subscribe
    /// confirmations of channels and patterns.
    pub fn count(&self) -> usize {
        self.lists[0].len() + self.lists[1].len()
    }

    /// The count a confirmation of `kind` reports.
    pub fn count_for(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.lists[2].len(),
            _ => self.count(),
        }
    }

    /// Every subscription: while nonzero the client is in pub/sub mode.
    pub fn total(&self) -> usize {
        self.lists.iter().map(Vec::len).sum()
    }
}

/// Subscribers of one channel or pattern, in subscription order.
type Listeners = Vec<Arc<ClientHandle>>;

/// The server's registry (see the module doc).
#[derive(Default)]
pub struct Registry {
    channels: RwLock<HashMap<Box<[u8]>, Listeners>>,
    shard: RwLock<HashMap<Box<[u8]>, Listeners>>,
    /// Patterns in the order first subscribed (Redis keeps a dict, whose
    /// order is its hash's; tests do not depend on it).
    patterns: RwLock<Vec<(Box<[u8]>, Listeners)>>,
    /// Patterns subscribed, read without the lock by every publish.
    npatterns: AtomicUsize,
    /// `client-output-buffer-limit pubsub` hard limit (0: none).
    hard_limit: AtomicU64,
    /// Subscribers disconnected for the output limit by a publisher.
    pub obuf_disconnections: AtomicU64,
}

/// A message encoded for each protocol, built on first need.
struct Encoded<'a> {
    parts: &'a [&'a [u8]],
    resp2: Option<Vec<u8>>,
    resp3: Option<Vec<u8>>,
}

impl<'a> Encoded<'a> {
    fn new(parts: &'a [&'a [u8]]) -> Self {
        Encoded { parts, resp2: None, resp3: None }
    }

    fn get(&mut self, proto: Proto) -> &[u8] {
        let parts = self.parts;
        let slot = match proto {
            Proto::Resp2 => &mut self.resp2,
            Proto::Resp3 => &mut self.resp3,
        };
        slot.get_or_insert_with(|| {
            let mut b = ReplyBuf::new();
            b.proto = proto;
            write_push(&mut b, parts);
            b.to_vec()
        })
    }
}

/// A push of bulk strings (`>n` in RESP3, an array in RESP2).
fn write_push(out: &mut ReplyBuf, parts: &[&[u8]]) {
    out.push(parts.len());
    for p in parts {
        out.bulk(p);
    }
}

fn proto_of(h: &ClientHandle) -> Proto {
    if h.resp.load(Ordering::Relaxed) == 3 {
        Proto::Resp3
    } else {
        Proto::Resp2
    }
}

impl Registry {
    /// The subscribers authenticated as `user` with a subscription that
    /// `allowed(name, is_pattern)` refuses (who an ACL SETUSER that
    /// narrowed the user's channels disconnects).
    pub fn violators(
        &self,
        user: &[u8],
        allowed: impl Fn(&[u8], bool) -> bool,
    ) -> Vec<Arc<ClientHandle>> {
        let mut out: Vec<Arc<ClientHandle>> = Vec::new();
        let mut take = |name: &[u8], pattern: bool, listeners: &Listeners| {
            for h in listeners {
                if *h.user.lock() == user
                    && !allowed(name, pattern)
                    && !out.iter().any(|o| o.id == h.id)
                {
                    out.push(h.clone());
                }
            }
        };
        for (c, l) in self.channels.read().iter() {
            take(c, false, l);
        }
        for (c, l) in self.shard.read().iter() {
            take(c, false, l);
        }
        for (p, l) in self.patterns.read().iter() {
            take(p, true, l);
        }
        out
    }

    /// Sets the hard output limit for subscribers (CONFIG SET).
    pub fn set_hard_limit(&self, bytes: u64) {
        self.hard_limit.store(bytes, Ordering::Relaxed);
    }

    fn table(&self, kind: Kind) -> &RwLock<HashMap<Box<[u8]>, Listeners>> {
        match kind {
            Kind::Shard => &self.shard,
            _ => &self.channels,
        }
    }

    /// Adds `h` to the listeners of `name` (the session checked it was not
    /// subscribed yet).
    fn add(&self, kind: Kind, name: &[u8], h: &Arc<ClientHandle>) {
        if kind == Kind::Pattern {
            let mut p = self.patterns.write();
            match p.iter_mut().find(|(n, _)| &**n == name) {
                Some((_, l)) => l.push(h.clone()),
                None => {
                    p.push((name.into(), vec![h.clone()]));
                    self.npatterns.store(p.len(), Ordering::Release);
                }
            }
            return;
        }
        self.table(kind).write().entry(name.into()).or_default().push(h.clone());
    }

    /// Removes `h` from the listeners of `name`; a name nobody listens to
    /// any more is forgotten.
    fn remove(&self, kind: Kind, name: &[u8], id: u64) {
        if kind == Kind::Pattern {
            let mut p = self.patterns.write();
            if let Some(i) = p.iter().position(|(n, _)| &**n == name) {
                p[i].1.retain(|x| x.id != id);
                if p[i].1.is_empty() {
                    p.remove(i);
                    self.npatterns.store(p.len(), Ordering::Release);
                }
            }
            return;
        }
        let mut t = self.table(kind).write();
        if let Some(l) = t.get_mut(name) {
            l.retain(|x| x.id != id);
            if l.is_empty() {
                t.remove(name);
            }
        }
    }

    /// Subscribes the session to `name`, writing the confirmation.
    pub fn subscribe(
        &self,
        subs: &mut Subs,
        h: &Arc<ClientHandle>,
        kind: Kind,
        name: &[u8],
        out: &mut ReplyBuf,
    ) {
        let list = &mut subs.lists[kind.index()];
        if !list.iter().any(|n| &**n == name) {
            list.push(name.into());
            self.add(kind, name, h);
            mirror(subs, h);
        }
        out.push(3);
        out.bulk(kind.subscribe_word());
        out.bulk(name);
        out.int(subs.count_for(kind) as i64);
    }

    /// Unsubscribes the session from `name` (confirmed even if it was not
    /// subscribed).
    pub fn unsubscribe(
        &self,
        subs: &mut Subs,
        h: &ClientHandle,
        kind: Kind,
        name: &[u8],
        out: Option<&mut ReplyBuf>,
    ) {
        let list = &mut subs.lists[kind.index()];
        if let Some(i) = list.iter().position(|n| &**n == name) {
            list.remove(i);
            self.remove(kind, name, h.id);
            mirror(subs, h);
        }
        if let Some(out) = out {
            out.push(3);
            out.bulk(kind.unsubscribe_word());
            out.bulk(name);
            out.int(subs.count_for(kind) as i64);
        }
    }

    /// Unsubscribes the session from everything of `kind`, confirming each
    /// (or, when there was nothing, once with a null name) if `out` is
    /// given.
    pub fn unsubscribe_all(
        &self,
        subs: &mut Subs,
        h: &ClientHandle,
        kind: Kind,
        mut out: Option<&mut ReplyBuf>,
    ) {
        let names = std::mem::take(&mut subs.lists[kind.index()]);
        if names.is_empty() {
            if let Some(out) = out {
                out.push(3);
                out.bulk(kind.unsubscribe_word());
                out.null();
                out.int(subs.count_for(kind) as i64);
            }
            return;
        }
        // Put them back, then remove one by one, so that each confirmation
        // carries the count left after it.
        subs.lists[kind.index()] = names.clone();
        for n in &names {
            self.unsubscribe(subs, h, kind, n, out.as_deref_mut());
        }
    }

    /// Drops every subscription of a session (RESET, disconnect), without
    /// confirmations.
    pub fn leave(&self, subs: &mut Subs, h: &ClientHandle) {
        if subs.total() == 0 {
            return;
        }
        for kind in Kind::ALL {
            self.unsubscribe_all(subs, h, kind, None);
        }
    }

    /// Publishes `msg` on `channel` (a shard channel if `shard`): to its
    /// subscribers, then (not for shard channels) to every matching
    /// pattern's. Returns the number of receivers. A receiver that is the
    /// publisher, `me`, gets the message written into its buffer at once,
    /// before the publisher's own reply (as Redis writes it).
    pub fn publish(
        &self,
        shard: bool,
        channel: &[u8],
        msg: &[u8],
        me: Option<(u64, &mut ReplyBuf)>,
    ) -> usize {
        self.publish_from(shard, channel, msg, me, 0)
    }

    /// [`publish`](Self::publish) on behalf of client `writer`'s running
    /// command (keyspace notifications): `writer`'s own copy is queued as
    /// [`Early`](crate::core::outbox::Kind::Early), to go before its reply.
    pub fn publish_from(
        &self,
        shard: bool,
        channel: &[u8],
        msg: &[u8],
        me: Option<(u64, &mut ReplyBuf)>,
        writer: u64,
    ) -> usize {
        let mut me = me;
        let mut receivers = 0;
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        let word: &[u8] = if shard { b"smessage" } else { b"message" };
        {
            let t = self.table(kind).read();
            if let Some(l) = t.get(channel) {
                let parts = [word, channel, msg];
                let mut enc = Encoded::new(&parts);
                for h in l {
                    receivers += 1;
                    self.send(h, &mut enc, &mut me, writer);
                }
            }
        }
        if shard || self.npatterns.load(Ordering::Acquire) == 0 {
            return receivers;
        }
        let p = self.patterns.read();
        for (pat, l) in p.iter() {
            if !crate::subsystems::glob::matches(pat, channel, false) {
                continue;
            }
            let parts = [&b"pmessage"[..], pat, channel, msg];
            let mut enc = Encoded::new(&parts);
            for h in l {
                receivers += 1;
                self.send(h, &mut enc, &mut me, writer);
            }
        }
        receivers
    }

    /// Queues one message for `h` and wakes it, or writes it to the
    /// publisher's own buffer when `h` is the publisher.
    fn send(
        &self,
        h: &ClientHandle,
        enc: &mut Encoded,
        me: &mut Option<(u64, &mut ReplyBuf)>,
        writer: u64,
    ) {
        if let Some((id, out)) = me {
            if *id == h.id {
                let bytes = enc.get(out.proto);
                out.raw(bytes);
                return;
            }
        }
        if h.killed.load(Ordering::Acquire) {
            return;
        }
        let kind = if writer != 0 && h.id == writer {
            crate::core::outbox::Kind::Early
        } else {
            crate::core::outbox::Kind::Push
        };
        let queued = h.outbox.push(kind, enc.get(proto_of(h)).to_vec());
        let hard = self.hard_limit.load(Ordering::Relaxed);
        if hard > 0 && (queued + h.omem.load(Ordering::Relaxed)) as u64 > hard {
            // Over the hard limit: the client is closed (its connection
            // sees `killed` at its next turn) and what it has queued is
            // never written.
            if !h.killed.swap(true, Ordering::AcqRel) {
                self.obuf_disconnections.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(w) = &*h.waker.lock() {
            w();
        }
    }

    /// `PUBSUB CHANNELS` / `SHARDCHANNELS`: active channels matching
    /// `pattern` (all without one).
    pub fn channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        self.table(kind)
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| crate::subsystems::glob::matches(p, c, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of one channel (`PUBSUB NUMSUB` / `SHARDNUMSUB`).
    pub fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        self.table(kind).read().get(channel).map_or(0, Vec::len)
    }

    /// Distinct patterns subscribed (`PUBSUB NUMPAT`, INFO `pubsub_patterns`).
    pub fn numpat(&self) -> usize {
        self.npatterns.load(Ordering::Acquire)
    }

    /// Distinct channels with subscribers (INFO `pubsub_channels`,
    /// `pubsubshard_channels`).
    pub fn nchannels(&self, shard: bool) -> usize {
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        self.table(kind).read().len()
    }

    /// Whether anyone listens to anything (a cheap test before building
    /// keyspace notifications).
    pub fn is_empty(&self) -> bool {
        self.npatterns.load(Ordering::Acquire) == 0 && self.channels.read().is_empty()
    }
}

/// Keyspace notifications: a consumer of the effects record that
/// publishes each event Redis would (`notify-keyspace-events`), on
/// `__keyspace@<db>__:<key>` (the event as message) and
/// `__keyevent@<db>__:<event>` (the key as message). Installed only while
/// the setting is not empty, so that with notifications off no write
/// records its events.
pub struct Notifier {
    registry: Arc<Registry>,
    /// The `notify-keyspace-events` bits ([`crate::subsystems::config::notify`]).
    flags: std::sync::atomic::AtomicU32,
}

impl Notifier {
    pub fn new(registry: Arc<Registry>, flags: u32) -> Self {
        Notifier { registry, flags: flags.into() }
    }

    pub fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }
}

impl crate::core::effects::Consumer for Notifier {
    fn wants(&self) -> crate::core::effects::Want {
        crate::core::effects::Want { events: true, ..Default::default() }
    }

    fn unit(&self, unit: &crate::core::effects::Unit<'_>) {
        use crate::subsystems::config::notify;
        let flags = self.flags.load(Ordering::Relaxed);
        if self.registry.is_empty() {
            return;
        }
        let writer = unit.client();
        let mut chan = Vec::new();
        for e in unit.events() {
            if flags & u32::from(e.class.0) == 0 {
                continue;
            }
            if flags & notify::KEYSPACE != 0 {
                chan.clear();
                chan.extend_from_slice(b"__keyspace@");
                chan.extend_from_slice(e.db.to_string().as_bytes());
                chan.extend_from_slice(b"__:");
                chan.extend_from_slice(e.key);
                self.registry.publish_from(false, &chan, e.name.as_bytes(), None, writer);
            }
            if flags & notify::KEYEVENT != 0 {
                chan.clear();
                chan.extend_from_slice(b"__keyevent@");
                chan.extend_from_slice(e.db.to_string().as_bytes());
                chan.extend_from_slice(b"__:");
                chan.extend_from_slice(e.name.as_bytes());
                self.registry.publish_from(false, &chan, e.key, None, writer);
            }
        }
    }
}

/// Mirrors a session's counts into its handle (CLIENT LIST, INFO).
fn mirror(subs: &Subs, h: &ClientHandle) {
    h.subs[0].store(subs.lists[0].len(), Ordering::Relaxed);
    h.subs[1].store(subs.lists[1].len(), Ordering::Relaxed);
    h.subs[2].store(subs.lists[2].len(), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(id: u64) -> Arc<ClientHandle> {
        Arc::new(ClientHandle::new(id, String::new(), String::new(), -1, 0))
    }

    fn drained(h: &ClientHandle) -> Vec<u8> {
        let mut v = Vec::new();
        h.outbox.drain(|_, m| v.extend_from_slice(m));
        v
    }

    #[test]
    fn delivers_to_channels_and_patterns_in_each_protocol() {
        let r = Registry::default();
        let (a, b) = (handle(1), handle(2));
        b.resp.store(3, Ordering::Relaxed);
        let (mut sa, mut sb) = (Subs::default(), Subs::default());
        let mut out = ReplyBuf::new();
        r.subscribe(&mut sa, &a, Kind::Channel, b"news", &mut out);
        r.subscribe(&mut sb, &b, Kind::Pattern, b"n*", &mut out);
        assert_eq!(r.publish(false, b"news", b"hi", None), 2);
        assert_eq!(drained(&a), b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
        assert_eq!(drained(&b), b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
        // Shard channels are their own namespace and ignore patterns.
        assert_eq!(r.publish(true, b"news", b"hi", None), 0);
        r.leave(&mut sa, &a);
        r.leave(&mut sb, &b);
        assert!(r.is_empty());
        assert_eq!(r.numpat(), 0);
    }

    #[test]
    fn a_subscriber_over_the_hard_limit_is_closed_once() {
        let r = Registry::default();
        r.set_hard_limit(100);
        let a = handle(1);
        let mut s = Subs::default();
        r.subscribe(&mut s, &a, Kind::Channel, b"c", &mut ReplyBuf::new());
        let big = [b'x'; 60];
        assert_eq!(r.publish(false, b"c", &big, None), 1);
        assert!(!a.killed.load(Ordering::Relaxed));
        assert_eq!(r.publish(false, b"c", &big, None), 1);
        assert!(a.killed.load(Ordering::Relaxed));
        // Further messages are dropped, not queued.
        let before = a.outbox.pending();
        r.publish(false, b"c", &big, None);
        assert_eq!(a.outbox.pending(), before);
        assert_eq!(r.obuf_disconnections.load(Ordering::Relaxed), 1);
    }
}
