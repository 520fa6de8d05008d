//! Client-side caching (`CLIENT TRACKING`): which clients may hold which
//! keys in a local cache, and the invalidation messages they get when a
//! key changes.
//!
//! - Default mode: after a read-only command of a tracking client, its
//!   keys are remembered in one table shared by every database, as Redis
//!   does (key → clients). A modified key (from the effects record's
//!   modified keys, so expiry and eviction count too) is looked up, its
//!   clients are sent `invalidate [key]`, and the key is forgotten until
//!   read again. `OPTIN`/`OPTOUT` with `CLIENT CACHING` decide per command
//!   whether reads are remembered.
//! - `BCAST`: nothing is remembered; every modified key under one of the
//!   client's prefixes is sent, as one array per prefix of the keys a
//!   connection's batch of requests modified (sorted, without repeats),
//!   at the batch's end: Redis gathers them per event-loop turn, which
//!   for one client's pipeline is the same thing. A unit outside a batch
//!   (active expiry, a served blocked client) sends its own at its end.
//! - `NOLOOP` skips keys the client modified itself. `REDIRECT id` sends
//!   the messages to another client: a RESP3 one gets the push, a RESP2
//!   one in pub/sub mode gets a `__redis__:invalidate` message.
//! - FLUSHDB/FLUSHALL send a null ("everything") to every tracking client.
//!
//! The tracker is a consumer of the effects record ([`crate::core::effects`]),
//! installed by the first `CLIENT TRACKING ON` and kept from then on (so
//! that, as in Redis, keys read before tracking was turned off and on are
//! still invalidated). Messages go through each client's outbox, so a
//! client that modifies a key it tracks gets the invalidation after the
//! command's reply, as Redis 7.0 delays it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use resp::{Proto, ReplyBuf};

use crate::core::effects::{Consumer, Unit, Want};
use crate::core::error::CmdError;
use crate::core::outbox::Kind;
use crate::core::session::{ClientHandle, Session};
use crate::core::spec::{CommandSpec, KeySpec};

/// A client's tracking state (on its handle: invalidations read it from
/// other threads).
#[derive(Default, Debug)]
pub struct State {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// The redirection target went away.
    pub broken_redirect: bool,
    /// Client id messages are redirected to (0: none).
    pub redirect: u64,
    redirect_to: Option<Weak<ClientHandle>>,
    /// BCAST prefixes, sorted.
    pub prefixes: Vec<Box<[u8]>>,
}

/// What `CLIENT TRACKING ON` asked for.
#[derive(Default, Debug)]
pub struct Options<'a> {
    pub redirect: Option<(u64, Weak<ClientHandle>)>,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<&'a [u8]>,
}

/// The session's copy of what decides whether its reads are remembered.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mode {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    /// BCAST prefixes registered (what the client's memory counts).
    pub prefixes: usize,
}

#[derive(Default)]
struct Inner {
    /// Key → clients that may cache it (by id; a client that went away is
    /// dropped lazily, as Redis does).
    table: HashMap<Box<[u8]>, Vec<(u64, Weak<ClientHandle>)>>,
    /// Entries of `table`, summed (INFO `tracking_total_items`).
    items: usize,
    /// BCAST prefix → its clients.
    prefixes: BTreeMap<Box<[u8]>, Vec<Arc<ClientHandle>>>,
    /// Every client with tracking on.
    clients: Vec<Arc<ClientHandle>>,
    /// Keys modified under a BCAST prefix and not yet sent: prefix → key
    /// → the client that modified it first (Redis's per-prefix key set,
    /// sent once per event-loop turn: here at the end of the batch that
    /// modified them, [`Tracker::broadcast`]).
    pending: BTreeMap<Box<[u8]>, BTreeMap<Box<[u8]>, u64>>,
}

/// The server's tracking tables (see the module doc).
#[derive(Default)]
pub struct Tracker {
    inner: Mutex<Inner>,
    /// Clients with tracking on (INFO `tracking_clients`).
    pub nclients: AtomicUsize,
    installed: AtomicBool,
    /// `tracking-table-max-keys` (0: no limit).
    pub max_keys: AtomicUsize,
    /// `Inner::pending` has keys (one load for a connection's batch end).
    pending: AtomicBool,
}

fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl Tracker {
    /// Whether the tracker must be installed as a consumer (the first
    /// time any client turns tracking on).
    pub fn needs_install(&self) -> bool {
        !self.installed.swap(true, Ordering::AcqRel)
    }

    /// `CLIENT TRACKING ON` with `opts`, after Redis's checks, in Redis's
    /// order.
    pub fn enable(&self, sess: &mut Session, opts: Options) -> Result<(), CmdError> {
        let h = sess.handle.clone();
        let mut st = h.tracking.lock();
        if !opts.bcast && !opts.prefixes.is_empty() {
            return Err(CmdError::err("PREFIX option requires BCAST mode to be enabled"));
        }
        if st.on && st.bcast != opts.bcast {
            return Err(CmdError::err(
                "You can't switch BCAST mode on/off before disabling tracking for this client, \
                 and then re-enabling it with a different mode.",
            ));
        }
        if opts.bcast && (opts.optin || opts.optout) {
            return Err(CmdError::err("OPTIN and OPTOUT are not compatible with BCAST"));
        }
        if opts.optin && opts.optout {
            return Err(CmdError::err("You can't specify both OPTIN mode and OPTOUT mode"));
        }
        if (opts.optin && st.optout) || (opts.optout && st.optin) {
            return Err(CmdError::err(
                "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
                 and then re-enabling it with a different mode.",
            ));
        }
        if opts.bcast {
            for (i, p) in opts.prefixes.iter().enumerate() {
                if let Some(old) = st.prefixes.iter().find(|old| overlap(old, p)) {
                    let mut m = b"ERR Prefix '".to_vec();
                    m.extend_from_slice(p);
                    m.extend_from_slice(b"' overlaps with an existing prefix '");
                    m.extend_from_slice(old);
                    m.extend_from_slice(b"'. Prefixes for a single client must not overlap.");
                    return Err(CmdError::Bytes(m));
                }
                if let Some(q) = opts.prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                    let mut m = b"ERR Prefix '".to_vec();
                    m.extend_from_slice(p);
                    m.extend_from_slice(b"' overlaps with another provided prefix '");
                    m.extend_from_slice(q);
                    m.extend_from_slice(b"'. Prefixes for a single client must not overlap.");
                    return Err(CmdError::Bytes(m));
                }
            }
        }
        let mut inner = self.inner.lock();
        if !st.on {
            self.nclients.fetch_add(1, Ordering::Relaxed);
            inner.clients.push(h.clone());
        }
        st.on = true;
        st.broken_redirect = false;
        st.optin = opts.optin;
        st.optout = opts.optout;
        st.noloop = opts.noloop;
        (st.redirect, st.redirect_to) = match opts.redirect {
            Some((id, w)) => (id, Some(w)),
            None => (0, None),
        };
        if opts.bcast {
            st.bcast = true;
            let mut add: Vec<&[u8]> = opts.prefixes;
            if add.is_empty() {
                add.push(b"");
            }
            for p in add {
                let l = inner.prefixes.entry(p.into()).or_default();
                if !l.iter().any(|x| x.id == h.id) {
                    l.push(h.clone());
                    if let Err(i) = st.prefixes.binary_search_by(|x| (**x).cmp(p)) {
                        st.prefixes.insert(i, p.into());
                    }
                }
            }
        }
        sess.tracking = Some(Mode {
            bcast: st.bcast,
            optin: st.optin,
            optout: st.optout,
            prefixes: st.prefixes.len(),
        });
        Ok(())
    }

    /// `CLIENT TRACKING OFF`, RESET, disconnect. Remembered keys are
    /// forgotten lazily (as Redis does).
    pub fn disable(&self, sess: &mut Session) {
        sess.tracking = None;
        sess.caching = false;
        let h = &sess.handle;
        let mut st = h.tracking.lock();
        if !st.on {
            return;
        }
        let mut inner = self.inner.lock();
        for p in std::mem::take(&mut st.prefixes) {
            if let Some(l) = inner.prefixes.get_mut(&p) {
                l.retain(|x| x.id != h.id);
                if l.is_empty() {
                    inner.prefixes.remove(&p);
                }
            }
        }
        inner.clients.retain(|x| x.id != h.id);
        self.nclients.fetch_sub(1, Ordering::Relaxed);
        *st = State::default();
    }

    /// Remembers the keys of a read-only command a tracking client ran
    /// (Redis's `trackingRememberKeys`).
    pub fn remember(&self, sess: &mut Session, spec: &CommandSpec, argv: &[&[u8]], db: usize) {
        let Some(mode) = sess.tracking else { return };
        if mode.bcast || (mode.optin && !sess.caching) || (mode.optout && sess.caching) {
            return;
        }
        let mut keys = crate::core::spec::KeyList::new();
        match spec.keys {
            KeySpec::Range { first, last, step } if first > 0 => {
                let argc = argv.len() as i32;
                let last = if last < 0 { argc + last } else { last.min(argc - 1) };
                let mut i = first;
                while i <= last && i < argc {
                    keys.push((db, argv[i as usize]));
                    i += step.max(1);
                }
            }
            KeySpec::Custom { find, .. } | KeySpec::CustomOrDb { find, .. } => {
                find(argv, db, &mut keys)
            }
            _ => {}
        }
        self.remember_keys(sess, keys.iter().map(|(_, k)| *k));
    }

    /// Remembers `keys` for a tracking client in default mode: a read-only
    /// command's keys, or the keys a script declared when it calls one
    /// (Redis remembers the script caller's command).
    pub fn remember_keys<'k>(
        &self,
        sess: &mut Session,
        keys: impl ExactSizeIterator<Item = &'k [u8]>,
    ) {
        let Some(mode) = sess.tracking else { return };
        if mode.bcast || (mode.optin && !sess.caching) || (mode.optout && sess.caching) {
            return;
        }
        if keys.len() == 0 {
            return;
        }
        let h = &sess.handle;
        let mut inner = self.inner.lock();
        for k in keys {
            let l = inner.table.entry(k.into()).or_default();
            let tracked = l.iter().any(|(id, _)| *id == h.id);
            if !tracked {
                l.push((h.id, Arc::downgrade(h)));
                inner.items += 1;
            }
            // Within a transaction or script, after the unit wrote `k`.
            sess.fx.reread(k, tracked);
        }
        self.limit(inner);
    }

    /// Keeps the table within `tracking-table-max-keys` (after a read adds
    /// keys, and when the limit is lowered, as Redis's cron does).
    pub fn enforce_limit(&self) {
        self.limit(self.inner.lock());
    }

    fn limit(&self, mut inner: parking_lot::MutexGuard<'_, Inner>) {
        let max = self.max_keys.load(Ordering::Relaxed);
        if max > 0 && inner.table.len() > max {
            // Over `tracking-table-max-keys`: forget keys (the table's
            // order is as good as Redis's random walk) and tell their
            // clients, as if the keys had changed.
            let n = inner.table.len() - max;
            let evict: Vec<Box<[u8]>> = inner.table.keys().take(n).cloned().collect();
            let mut sends = Vec::new();
            for k in evict {
                if let Some(l) = inner.table.remove(&k) {
                    inner.items -= l.len();
                    sends.push((k, l));
                }
            }
            drop(inner);
            for (k, l) in sends {
                for t in l.iter().filter_map(|(_, w)| w.upgrade()) {
                    invalidate_key(&t, &k, 0);
                }
            }
        }
    }

    /// INFO's `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes`.
    pub fn totals(&self) -> (usize, usize, usize) {
        let i = self.inner.lock();
        (i.table.len(), i.items, i.prefixes.len())
    }
}

/// Sends `invalidate [key]` for a remembered key to `target` unless it
/// no longer tracks in default mode, or modified the key itself under
/// NOLOOP.
fn invalidate_key(target: &ClientHandle, key: &[u8], writer: u64) {
    {
        let st = target.tracking.lock();
        if !st.on || st.bcast || (st.noloop && target.id == writer) {
            return;
        }
    }
    let mut payload = ReplyBuf::new();
    payload.array(1);
    payload.bulk(key);
    send(target, &payload.to_vec(), writer);
}

/// Where a message for tracking client `c`, sent to `to` (`c` or its
/// redirection), goes among the replies of `writer`, the client whose
/// running command caused it (0: none, or a broadcast, which Redis sends
/// once per event-loop turn). As Redis 7.0: a message for the writer
/// itself waits until after the command's reply
/// (`tracking_pending_keys`); one for another client that redirects to
/// the writer is written at once, so before that reply; anything else
/// goes to another connection.
fn kind_for(c: &ClientHandle, to: &ClientHandle, writer: u64) -> Kind {
    if writer == 0 || to.id != writer {
        Kind::Push
    } else if c.id == writer {
        Kind::After
    } else {
        Kind::Early
    }
}

/// What the unit's client's reads of keys the unit had modified
/// ([`Unit::rereads`]) mean for it, per key: whether it is sent the
/// invalidation (it tracked the key before the unit's first read of it
/// after a write, or read it before a later write) and whether it still
/// tracks the key after the unit (its last read came after the last
/// write). Empty, and nothing counted, when there are none.
struct Rereads<'a>(HashMap<&'a [u8], (bool, bool)>);

impl<'a> Rereads<'a> {
    fn of(unit: &Unit<'a>) -> Self {
        let mut map: HashMap<&'a [u8], (bool, bool)> = HashMap::new();
        if unit.rereads().next().is_none() {
            return Rereads(map);
        }
        let mut writes: HashMap<&'a [u8], u32> = HashMap::new();
        for (_, k) in unit.keys() {
            *writes.entry(k).or_default() += 1;
        }
        for (k, before, tracked_before) in unit.rereads() {
            let total = writes.get(k).copied().unwrap_or(0);
            let e = map.entry(k).or_insert((tracked_before, false));
            e.0 |= before < total;
            e.1 |= before == total;
        }
        Rereads(map)
    }

    fn get(&self, key: &[u8]) -> Option<&(bool, bool)> {
        self.0.get(key)
    }
}

/// Redis's `sendTrackingMessage`: the payload (an array of keys, or a
/// null) as an `invalidate` push to the client or its redirection.
fn send(c: &ClientHandle, payload: &[u8], writer: u64) {
    let redirect = {
        let mut st = c.tracking.lock();
        if st.redirect == 0 {
            None
        } else {
            match st.redirect_to.as_ref().and_then(Weak::upgrade) {
                Some(t)
                    if !t.killed.load(Ordering::Acquire) && !t.closing.load(Ordering::Acquire) =>
                {
                    Some(t)
                }
                _ => {
                    st.broken_redirect = true;
                    let id = st.redirect;
                    drop(st);
                    if c.resp.load(Ordering::Relaxed) == 3 {
                        let mut b = ReplyBuf::new();
                        b.proto = Proto::Resp3;
                        b.push(2);
                        b.bulk(b"tracking-redir-broken");
                        b.int(id as i64);
                        c.push_kind(kind_for(c, c, writer), b.to_vec());
                    }
                    return;
                }
            }
        }
    };
    let target: &ClientHandle = redirect.as_deref().unwrap_or(c);
    let mut b = ReplyBuf::new();
    if target.resp.load(Ordering::Relaxed) == 3 {
        b.proto = Proto::Resp3;
        b.push(2);
        b.bulk(b"invalidate");
    } else if redirect.is_some() && target.subscribed() {
        b.array(3);
        b.bulk(b"message");
        b.bulk(b"__redis__:invalidate");
    } else {
        // RESP2 without redirection cannot carry pushes.
        return;
    }
    b.raw(payload);
    target.push_kind(kind_for(c, target, writer), b.to_vec());
}

impl Consumer for Tracker {
    fn wants(&self) -> Want {
        Want { keys: true, ..Default::default() }
    }

    fn unit(&self, unit: &Unit<'_>) {
        let writer = unit.client();
        let mut inner = self.inner.lock();
        if unit.flushed() {
            let clients = inner.clients.clone();
            inner.table.clear();
            inner.items = 0;
            drop(inner);
            for c in clients {
                let null: &[u8] =
                    if c.resp.load(Ordering::Relaxed) == 3 { b"_\r\n" } else { b"$-1\r\n" };
                send(&c, null, writer);
            }
            inner = self.inner.lock();
        }
        let rereads = Rereads::of(unit);
        let mut sends: Vec<(Box<[u8]>, Vec<(u64, Weak<ClientHandle>)>)> = Vec::new();
        // Keys the writer still tracks, put back once every write is seen.
        let mut kept = Vec::new();
        let mut broadcast = false;
        for (_, key) in unit.keys() {
            let Inner { prefixes, pending, .. } = &mut *inner;
            for p in prefixes.keys() {
                if key.starts_with(p) {
                    broadcast = true;
                    let keys = match pending.get_mut(p) {
                        Some(keys) => keys,
                        None => pending.entry(p.clone()).or_default(),
                    };
                    if !keys.contains_key(key) {
                        keys.insert(key.into(), writer);
                    }
                }
            }
            if let Some(mut l) = inner.table.remove(key) {
                inner.items -= l.len();
                if let Some(&(invalidate, keep)) = rereads.get(key) {
                    // The writer read the key after the unit wrote it.
                    let own = l.iter().find(|(id, _)| *id == writer).map(|(_, w)| w.clone());
                    if !invalidate {
                        l.retain(|(id, _)| *id != writer);
                    }
                    if let (true, Some(w)) = (keep, own) {
                        kept.push((Box::<[u8]>::from(key), w));
                    }
                }
                sends.push((key.into(), l));
            }
        }
        for (key, w) in kept {
            let l = inner.table.entry(key).or_default();
            if !l.iter().any(|(id, _)| *id == writer) {
                l.push((writer, w));
                inner.items += 1;
            }
        }
        drop(inner);
        if broadcast {
            self.pending.store(true, Ordering::Release);
        }
        for (key, targets) in sends {
            for t in targets.iter().filter_map(|(_, w)| w.upgrade()) {
                invalidate_key(&t, &key, writer);
            }
        }
        if broadcast && !unit.in_batch() {
            self.broadcast();
        }
    }
}

impl Tracker {
    /// Whether BCAST keys wait to be sent ([`Tracker::broadcast`]).
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Sends the BCAST keys gathered since the last call: to each client
    /// of a prefix, one array of that prefix's keys (sorted, each once),
    /// less, for a NOLOOP client, the keys it modified first itself.
    /// Redis does this once per event-loop turn (`beforeSleep`); a
    /// connection does it at the end of each batch of requests, and a
    /// unit outside a batch at its own end.
    pub fn broadcast(&self) {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return;
        }
        let (pending, listeners) = {
            let mut inner = self.inner.lock();
            let pending = std::mem::take(&mut inner.pending);
            let listeners: Vec<(Box<[u8]>, Vec<Arc<ClientHandle>>)> = pending
                .keys()
                .filter_map(|p| inner.prefixes.get(p).map(|l| (p.clone(), l.clone())))
                .collect();
            (pending, listeners)
        };
        for (p, clients) in listeners {
            let keys = &pending[&p];
            for c in clients {
                let noloop = c.tracking.lock().noloop;
                let mine: BTreeSet<&[u8]> = if noloop {
                    keys.iter().filter(|(_, w)| **w == c.id).map(|(k, _)| &**k).collect()
                } else {
                    BTreeSet::new()
                };
                let n = keys.len() - mine.len();
                if n == 0 {
                    continue;
                }
                let mut payload = ReplyBuf::new();
                payload.array(n);
                for k in keys.keys().filter(|k| !mine.contains(&***k)) {
                    payload.bulk(k);
                }
                // Not the reply of any running command: a push.
                send(&c, &payload.to_vec(), 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::tests::Harness;

    /// Over `tracking-table-max-keys`, keys are forgotten and their
    /// clients told, as if the keys had changed.
    #[test]
    fn table_stays_within_max_keys() {
        let mut h = Harness::new();
        h.run(&["HELLO", "3"]);
        assert_eq!(h.run(&["CONFIG", "SET", "tracking-table-max-keys", "2"]), "+OK\r\n");
        assert_eq!(h.run(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
        h.run(&["MGET", "a", "b"]);
        assert_eq!(h.shared.tracker.totals(), (2, 2, 0));
        assert_eq!(h.sess.handle.outbox.pending(), 0);
        h.run(&["GET", "c"]);
        assert_eq!(h.shared.tracker.totals().0, 2);
        let mut got = Vec::new();
        h.sess.handle.outbox.drain(|_, m| got.extend_from_slice(m));
        let got = String::from_utf8(got).unwrap();
        assert!(got.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\n"), "{got}");
        assert_eq!(h.shared.tracker.nclients.load(Ordering::Relaxed), 1);
        h.run(&["RESET"]);
        assert_eq!(h.shared.tracker.nclients.load(Ordering::Relaxed), 0);
    }
}
