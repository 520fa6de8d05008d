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
}
