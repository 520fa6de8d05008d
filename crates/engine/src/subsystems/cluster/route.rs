//! Which node serves a command (Redis's `getNodeByQuery`) and the error a
//! client gets when it is not this one (`clusterRedirectClient`):
//! `-MOVED`, `-ASK`, `-CROSSSLOT`, `-TRYAGAIN`, `-CLUSTERDOWN`.
//!
//! The dispatcher asks for a client's command (and for EXEC, for every
//! queued command at once) after the ACL, before the OOM check, as Redis's
//! `processCommand`; a script's commands are asked one by one.

use crate::core::error::CmdError;
use crate::core::meta::{self, k, Meta};
use crate::core::spec::Flags;

use super::{Moving, State};

/// Why a command is not served here, as Redis's `CLUSTER_REDIR_*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    CrossSlot,
    /// Several keys of a slot on the move, not all of them here.
    Unstable,
    Down,
    DownReadOnly,
    Unbound,
    Moved {
        slot: u16,
        addr: String,
    },
    Ask {
        slot: u16,
        addr: String,
    },
}

impl Redirect {
    /// Redis's error line (without the leading `-`).
    pub fn into_error(self) -> CmdError {
        CmdError::Cluster(match self {
            Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Redirect::Unstable => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Redirect::Down => "CLUSTERDOWN The cluster is down".into(),
            Redirect::DownReadOnly => {
                "CLUSTERDOWN The cluster is down and only accepts read commands".into()
            }
            Redirect::Unbound => "CLUSTERDOWN Hash slot not served".into(),
            Redirect::Moved { slot, addr } => format!("MOVED {slot} {addr}").into(),
            Redirect::Ask { slot, addr } => format!("ASK {slot} {addr}").into(),
        })
    }
}

/// What routing needs to know of the client and the configuration.
pub struct Query {
    /// The client sent ASKING (or the command is flagged `asking`).
    pub asking: bool,
    /// The client sent READONLY.
    pub readonly: bool,
    /// The command (or a queued one, for EXEC) writes.
    pub writes: bool,
    /// The command is MIGRATE (served here while its slot moves).
    pub migrate: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
}

/// The argument positions routing looks at in a command line: its keys
/// as Redis's `getKeysFromCommand` finds them, or the shard channels of a
/// command whose only key specs are channels (SPUBLISH, SSUBSCRIBE).
/// True in the second element when they are shard channels.
pub fn positions(m: &Meta, argv: &[&[u8]], out: &mut Vec<usize>) -> bool {
    if !m.key_specs.is_empty() && m.key_specs.iter().all(|s| s.flags & k::NOT_KEY != 0) {
        if m.first > 0 {
            let argc = argv.len() as i32;
            let last = if m.last < 0 { argc + m.last } else { m.last.min(argc - 1) };
            let mut i = m.first;
            while i <= last {
                out.push(i as usize);
                i += m.step.max(1);
            }
        }
        return true;
    }
    if let Some(keys) = meta::get_keys(m, argv) {
        out.extend(keys.iter().map(|k| k.pos));
    }
    false
}

/// Redis's `getNodeByQuery` over `cmds` (one command, or EXEC's queue),
/// given `exists` to ask whether a key is here (only called while its
/// slot is on the move). `Ok(Some(slot))`: served here, its keys in
/// `slot`; `Ok(None)`: no key at all.
pub fn route<'a>(
    st: &State,
    cmds: impl Iterator<Item = (&'static Meta, &'a [&'a [u8]])>,
    q: &Query,
    mut exists: impl FnMut(&[u8]) -> bool,
) -> Result<Option<u16>, Redirect> {
    let mut first: Option<&[u8]> = None;
    let mut slot = 0u16;
    let mut owner = None;
    let (mut migrating, mut importing, mut multiple) = (false, false, false);
    let (mut missing, mut present) = (0, 0);
    let mut shard = false;
    let mut pos = Vec::new();
    for (m, argv) in cmds {
        pos.clear();
        shard |= positions(m, argv, &mut pos);
        for &p in &pos {
            let Some(&key) = argv.get(p) else { continue };
            let this = store::slot::key_slot(key);
            match first {
                None => {
                    first = Some(key);
                    slot = this;
                    let Some(n) = st.owner(slot) else { return Err(Redirect::Unbound) };
                    owner = Some(n);
                    match st.moving.get(&slot) {
                        Some(Moving::To(_)) if n == st.myself => migrating = true,
                        Some(Moving::From(_)) => importing = true,
                        _ => {}
                    }
                }
                Some(f) => {
                    if this != slot {
                        return Err(Redirect::CrossSlot);
                    }
                    if importing && !multiple && f != key {
                        multiple = true;
                    }
                }
            }
            if (migrating || importing) && !shard {
                if exists(key) {
                    present += 1;
                } else {
                    missing += 1;
                }
            }
        }
    }
    let Some(n) = owner else { return Ok(None) };
    if !st.ok {
        if shard {
            if !q.allow_pubsubshard_when_down {
                return Err(Redirect::Down);
            }
        } else if !q.allow_reads_when_down {
            return Err(Redirect::Down);
        } else if q.writes {
            return Err(Redirect::DownReadOnly);
        }
    }
    if (migrating || importing) && q.migrate {
        return Ok(Some(slot));
    }
    let addr = |i: usize| {
        let node = &st.nodes[i];
        format!("{}:{}", node.ip, node.port)
    };
    if migrating && missing > 0 {
        if present > 0 {
            return Err(Redirect::Unstable);
        }
        if let Some(Moving::To(t)) = st.moving.get(&slot) {
            return Err(Redirect::Ask { slot, addr: addr(*t as usize) });
        }
    }
    if importing && q.asking {
        if multiple && missing > 0 {
            return Err(Redirect::Unstable);
        }
        return Ok(Some(slot));
    }
    let me = st.me();
    if (q.readonly || shard)
        && !q.writes
        && !me.is_master()
        && me.master.is_some_and(|m| st.nodes[n].id == m)
    {
        return Ok(Some(slot));
    }
    if n != st.myself {
        return Err(Redirect::Moved { slot, addr: addr(n) });
    }
    Ok(Some(slot))
}

/// Redis's `clusterRedirectBlockedClientIfNeeded`: whether a client
/// blocked on `key` (all its keys share its slot) must stop waiting here,
/// and with which error. `readonly`: it sent READONLY; `writes`: its
/// command writes (a replica keeps a READONLY client's read while its
/// slot stays with its master). A slot being imported keeps its waiters.
pub fn blocked(st: &State, key: &[u8], readonly: bool, writes: bool) -> Option<Redirect> {
    if !st.ok {
        // Even when reads are allowed while down: the write that would
        // serve the client may never come.
        return Some(Redirect::Down);
    }
    let slot = store::slot::key_slot(key);
    let mut owner = st.owner(slot);
    let me = st.me();
    if readonly
        && !writes
        && !me.is_master()
        && owner.is_some_and(|n| me.master.is_some_and(|m| st.nodes[n].id == m))
    {
        owner = Some(st.myself);
    }
    if owner == Some(st.myself) || matches!(st.moving.get(&slot), Some(Moving::From(_))) {
        return None;
    }
    Some(match owner {
        None => Redirect::Unbound,
        Some(n) => {
            let node = &st.nodes[n];
            Redirect::Moved { slot, addr: format!("{}:{}", node.ip, node.port) }
        }
    })
}

/// The 3 base64 characters whose key slot is `slot`: the hash tag of a
/// job id made in cluster mode (`queue::JobId::with_slot_tag`), so the id
/// routes to its queue's slot. The first triple in base64 order that
/// hashes there; every slot has one (tested). The table (48 KiB) is built
/// on the first ADDJOB of a cluster node: 262,144 CRCs, a few ms.
pub fn job_tag(slot: u16) -> [u8; 3] {
    static TAGS: std::sync::OnceLock<Vec<[u8; 3]>> = std::sync::OnceLock::new();
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let tags = TAGS.get_or_init(|| {
        let mut t = vec![[0u8; 3]; store::slot::SLOTS];
        let mut found = vec![false; store::slot::SLOTS];
        for &a in B64 {
            for &b in B64 {
                for &c in B64 {
                    let s = store::slot::key_slot(&[a, b, c]) as usize;
                    if !found[s] {
                        found[s] = true;
                        t[s] = [a, b, c];
                    }
                }
            }
        }
        t
    });
    tags[usize::from(slot) % tags.len()]
}

/// Whether a command needs routing at all (Redis skips commands with no
/// key specs that are not EXEC).
#[inline]
pub fn wants(flags: Flags, m: &Meta) -> bool {
    flags.has(Flags::EXEC_TX) || flags.has(Flags::MOVABLEKEYS) || !m.key_specs.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subsystems::cluster::{flag, Node, State, SLOTS};

    fn meta(name: &str) -> &'static Meta {
        crate::core::meta::find(name).unwrap()
    }

    fn q() -> Query {
        Query {
            asking: false,
            readonly: false,
            writes: false,
            migrate: false,
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: true,
        }
    }

    fn two_nodes() -> State {
        let mut st = State::fresh([b'a'; 40]);
        let b = st.add(Node {
            ip: "10.0.0.2".into(),
            port: 7002,
            ..Node::new([b'b'; 40], flag::MASTER)
        });
        for s in 0..SLOTS as u16 {
            st.set_owner(s, Some(if s < 8192 { 0 } else { b }));
        }
        st.ok = true;
        st
    }

    #[test]
    fn moved_crossslot_and_down_in_redis_order() {
        let mut st = two_nodes();
        let get = |k: &'static str| -> Vec<&'static [u8]> { vec![b"GET", k.as_bytes()] };
        // foo: slot 12182, on b.
        let argv = get("foo");
        let r = route(&st, [(meta("GET"), &argv[..])].into_iter(), &q(), |_| false);
        assert_eq!(r, Err(Redirect::Moved { slot: 12182, addr: "10.0.0.2:7002".into() }));
        let argv: Vec<&[u8]> = vec![b"MSET", b"a", b"1", b"b", b"2"];
        let r = route(&st, [(meta("MSET"), &argv[..])].into_iter(), &q(), |_| false);
        assert_eq!(r, Err(Redirect::CrossSlot));
        // Cross-slot is found before the cluster's health is looked at.
        st.ok = false;
        let r = route(&st, [(meta("MSET"), &argv[..])].into_iter(), &q(), |_| false);
        assert_eq!(r, Err(Redirect::CrossSlot));
        let argv = get("a");
        let r = route(&st, [(meta("GET"), &argv[..])].into_iter(), &q(), |_| false);
        assert_eq!(r, Err(Redirect::Down));
        st.set_owner(15495, None);
        let argv = get("a");
        let r = route(&st, [(meta("GET"), &argv[..])].into_iter(), &q(), |_| false);
        assert_eq!(r, Err(Redirect::Unbound));
    }

    #[test]
    fn every_slot_has_a_job_id_tag_that_hashes_to_it() {
        for slot in 0..SLOTS as u16 {
            let tag = job_tag(slot);
            let mut id = *b"D-0123abcd-AAAAAAAAAAA{xyz}AAAAAAAA-05a1";
            id[23..26].copy_from_slice(&tag);
            assert_eq!(store::slot::key_slot(&id), slot, "{:?}", std::str::from_utf8(&id));
        }
    }

    #[test]
    fn a_blocked_client_is_redirected_as_redis_does() {
        let mut st = two_nodes();
        // a: slot 15495, on b; foo: 12182, on b; bar: 5061, here.
        assert_eq!(blocked(&st, b"bar", false, true), None);
        let moved = Some(Redirect::Moved { slot: 15495, addr: "10.0.0.2:7002".into() });
        assert_eq!(blocked(&st, b"a", false, true), moved);
        // A slot being imported keeps its waiters; one being migrated
        // away is still this node's until it is given away.
        st.moving.insert(15495, Moving::From(1));
        assert_eq!(blocked(&st, b"a", false, true), None);
        st.moving.clear();
        st.moving.insert(5061, Moving::To(1));
        assert_eq!(blocked(&st, b"bar", false, true), None);
        st.set_owner(15495, None);
        assert_eq!(blocked(&st, b"a", false, false), Some(Redirect::Unbound));
        st.ok = false;
        assert_eq!(blocked(&st, b"bar", false, true), Some(Redirect::Down));
        // A replica of b keeps a READONLY client's read of b's slot.
        let mut st = two_nodes();
        let b = st.nodes[1].id;
        st.me_mut().flags = flag::MYSELF | flag::SLAVE;
        st.me_mut().master = Some(b);
        assert_eq!(blocked(&st, b"foo", true, false), None);
        assert!(matches!(blocked(&st, b"foo", true, true), Some(Redirect::Moved { .. })));
        assert!(matches!(blocked(&st, b"foo", false, false), Some(Redirect::Moved { .. })));
    }
}
