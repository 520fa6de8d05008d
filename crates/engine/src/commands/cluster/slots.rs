//! Slot assignment (ADDSLOTS, ADDSLOTSRANGE, DELSLOTS, DELSLOTSRANGE,
//! FLUSHSLOTS), epochs (SET-CONFIG-EPOCH, BUMPEPOCH), RESET, and a slot's
//! keys (KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT), with Redis 7.0.15's
//! argument checks in its order.

use resp::ReplyBuf;

use super::cluster;
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::subsystems::cluster::{random_id, State, SLOTS};

/// Redis's `getSlotOrReply`.
fn slot_arg(a: &[u8]) -> Result<u16, CmdError> {
    match resp::parse_i64(a) {
        Some(s) if (0..SLOTS as i64).contains(&s) => Ok(s as u16),
        _ => Err(CmdError::err("Invalid or out of range slot")),
    }
}

/// Redis's `checkSlotAssignmentsOrReply` for `start..=end`, marking the
/// slots seen in `seen`.
fn check_range(st: &State, seen: &mut [bool], del: bool, start: u16, end: u16) -> CmdResult {
    for s in start..=end {
        let owned = st.owner(s).is_some();
        if del && !owned {
            return Err(CmdError::err(format!("Slot {s} is already unassigned")));
        } else if !del && owned {
            return Err(CmdError::err(format!("Slot {s} is already busy")));
        }
        if std::mem::replace(&mut seen[s as usize], true) {
            return Err(CmdError::err(format!("Slot {s} specified multiple times")));
        }
    }
    Ok(())
}

/// Redis's `clusterUpdateSlots`: the checked slots become this node's
/// (an import in progress ends) or nobody's.
fn apply(st: &mut State, seen: &[bool], del: bool) {
    let me = st.myself;
    for (s, _) in seen.iter().enumerate().filter(|(_, on)| **on) {
        let s = s as u16;
        if del {
            st.set_owner(s, None);
        } else {
            st.moving.remove(&s);
            st.set_owner(s, Some(me));
        }
    }
}

fn slots_list(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, del: bool) -> CmdResult {
    let c = cluster(cx)?;
    let argv = &args.argv()[2..];
    for a in argv {
        slot_arg(a)?;
    }
    let mut seen = vec![false; SLOTS];
    let mut st = c.state.write();
    for a in argv {
        let s = slot_arg(a)?;
        check_range(&st, &mut seen, del, s, s)?;
    }
    apply(&mut st, &seen, del);
    drop(st);
    super::changed(cx, c);
    out.ok();
    Ok(())
}

fn slots_ranges(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, del: bool) -> CmdResult {
    let c = cluster(cx)?;
    let argv = &args.argv()[2..];
    if argv.len() % 2 == 1 {
        let name = if del { "cluster|delslotsrange" } else { "cluster|addslotsrange" };
        return Err(CmdError::WrongArity(name.into()));
    }
    let mut seen = vec![false; SLOTS];
    let mut st = c.state.write();
    for pair in argv.chunks(2) {
        let start = slot_arg(pair[0])?;
        let end = slot_arg(pair[1])?;
        if start > end {
            return Err(CmdError::err(format!(
                "start slot number {start} is greater than end slot number {end}"
            )));
        }
        check_range(&st, &mut seen, del, start, end)?;
    }
    apply(&mut st, &seen, del);
    drop(st);
    super::changed(cx, c);
    out.ok();
    Ok(())
}

pub(super) fn addslots(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    slots_list(cx, args, out, false)
}

pub(super) fn delslots(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    slots_list(cx, args, out, true)
}

pub(super) fn addslotsrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    slots_ranges(cx, args, out, false)
}

pub(super) fn delslotsrange(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    slots_ranges(cx, args, out, true)
}

/// Whether this node's database holds any key (expired ones not yet
/// deleted count, as in Redis's `dictSize`).
fn has_keys(cx: &mut Ctx) -> bool {
    cx.keys.db_counts(0).keys > 0
}

pub(super) fn flushslots(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    if has_keys(cx) {
        return Err(CmdError::err("DB must be empty to perform CLUSTER FLUSHSLOTS."));
    }
    let mut st = c.state.write();
    let me = st.myself;
    for s in 0..SLOTS as u16 {
        if st.owner(s) == Some(me) {
            st.set_owner(s, None);
        }
    }
    drop(st);
    super::changed(cx, c);
    out.ok();
    Ok(())
}

pub(super) fn set_config_epoch(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let epoch = resp::parse_i64(args.argv()[2]).ok_or(CmdError::NotInteger)?;
    let mut st = c.state.write();
    if epoch < 0 {
        return Err(CmdError::err(format!("Invalid config epoch specified: {epoch}")));
    } else if st.nodes.len() > 1 {
        return Err(CmdError::err(
            "The user can assign a config epoch only when the node does not know any other node.",
        ));
    } else if st.me().config_epoch != 0 {
        return Err(CmdError::err("Node config epoch is already non-zero"));
    }
    let epoch = epoch as u64;
    st.me_mut().config_epoch = epoch;
    st.current_epoch = st.current_epoch.max(epoch);
    drop(st);
    crate::subsystems::log::warning(&format!(
        "configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH"
    ));
    super::changed(cx, c);
    out.ok();
    Ok(())
}

pub(super) fn bumpepoch(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let mut st = c.state.write();
    // Redis's clusterBumpConfigEpochWithoutConsensus.
    let max = st.nodes.iter().map(|n| n.config_epoch).max().unwrap_or(0).max(st.current_epoch);
    let mine = st.me().config_epoch;
    let bumped = mine == 0 || mine != max;
    if bumped {
        st.current_epoch += 1;
        let e = st.current_epoch;
        st.me_mut().config_epoch = e;
        crate::subsystems::log::warning(&format!("New configEpoch set to {e}"));
    }
    let line = format!("{} {}", if bumped { "BUMPED" } else { "STILL" }, st.me().config_epoch);
    drop(st);
    if bumped {
        super::changed(cx, c);
    }
    out.simple(line.as_bytes());
    Ok(())
}

pub(super) fn reset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let hard = match args.argv().get(2) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"hard") => true,
        Some(a) if a.eq_ignore_ascii_case(b"soft") => false,
        Some(_) => return Err(CmdError::Syntax),
    };
    let master = c.state.read().me().is_master();
    if master && has_keys(cx) {
        return Err(CmdError::err(
            "CLUSTER RESET can't be called with master nodes containing keys",
        ));
    }
    // Redis's clusterReset: every slot and every other node forgotten;
    // HARD also zeroes the epochs and takes a new id. (A replica turning
    // back into a master is the bus's work, not built yet.)
    let mut st = c.state.write();
    let mut me = st.me().clone();
    let seed = cx.shared.run_id.bytes().fold(me.config_epoch, |h, b| h.rotate_left(7) ^ b as u64);
    if hard {
        me.id = random_id(seed);
        me.config_epoch = 0;
    }
    me.numslots = 0;
    me.master = None;
    let (current, vote) = if hard { (0, 0) } else { (st.current_epoch, st.last_vote_epoch) };
    let was_ok = st.ok;
    *st = State::fresh(me.id);
    st.nodes[0] = me;
    st.current_epoch = current;
    st.last_vote_epoch = vote;
    st.ok = was_ok;
    drop(st);
    super::changed(cx, c);
    out.ok();
    Ok(())
}

pub(super) fn keyslot(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cluster(cx)?;
    out.int(i64::from(store::slot::key_slot(args.argv()[2])));
    Ok(())
}

pub(super) fn countkeysinslot(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cluster(cx)?;
    let slot = resp::parse_i64(args.argv()[2]).ok_or(CmdError::NotInteger)?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err(CmdError::err("Invalid slot"));
    }
    // One stripe is one slot in cluster mode.
    let id = cx.shared.store.global_id(0, slot as u32);
    out.int(cx.stripe_at(id).len() as i64);
    Ok(())
}

pub(super) fn getkeysinslot(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cluster(cx)?;
    let argv = args.argv();
    let slot = resp::parse_i64(argv[2]).ok_or(CmdError::NotInteger)?;
    let max = resp::parse_i64(argv[3]).ok_or(CmdError::NotInteger)?;
    if !(0..SLOTS as i64).contains(&slot) || max < 0 {
        return Err(CmdError::err("Invalid slot or number of keys"));
    }
    let id = cx.shared.store.global_id(0, slot as u32);
    let s = cx.stripe_at(id);
    let n = (s.len() as u64).min(max as u64) as usize;
    out.array(n);
    for (k, _) in s.iter().take(n) {
        out.bulk(k);
    }
    Ok(())
}

/// CLUSTER SETSLOT <slot> MIGRATING|IMPORTING <node> | STABLE | NODE <node>,
/// with Redis 7.0.15's checks in its order. A slot holds one of
/// migrating and importing at a time here (Redis keeps both).
pub(super) fn setslot(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    use crate::subsystems::cluster::Moving;
    let c = cluster(cx)?;
    let argv = args.argv();
    if !c.state.read().me().is_master() {
        return Err(CmdError::err("Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(argv[2])?;
    let action = argv[3].to_ascii_lowercase();
    let node_arg = argv.get(4).copied();
    // The slot's keys are counted before the state is locked (a stripe is
    // never locked under the state's lock).
    let id = cx.shared.store.global_id(0, slot as u32);
    let keys = cx.stripe_at(id).len();
    // Jobs do not move with their slot (MIGRATE moves keys only): a slot
    // that holds jobs is not migrated nor given away, rather than strand
    // them on a node that no longer serves their queue (docs/jobs.md).
    let jobs = {
        let jid = cx.shared.store.jobs_id();
        cx.stripe_at(jid);
        crate::subsystems::jobs::in_slot(&cx.shared.jobs.lock(), slot)
    };
    let migration = crate::subsystems::cluster::yes(
        &cx.shared.config.read(),
        "cluster-allow-replica-migration",
    );
    let mut follow = None;
    let mut st = c.state.write();
    let me = st.myself;
    // A node named by the action: known, and a master.
    let target = |st: &State, unknown: &str| -> Result<usize, CmdError> {
        let a = node_arg.unwrap_or_default();
        let Some(n) = st.find(a) else {
            let mut l = format!("ERR {unknown}").into_bytes();
            l.extend_from_slice(a);
            return Err(CmdError::Bytes(l));
        };
        if !st.nodes[n].is_master() {
            return Err(CmdError::err("Target node is not a master"));
        }
        Ok(n)
    };
    match (action.as_slice(), argv.len()) {
        (b"migrating", 5) => {
            if st.owner(slot) != Some(me) {
                return Err(CmdError::err(format!("I'm not the owner of hash slot {slot}")));
            }
            let n = target(&st, "I don't know about node ")?;
            if jobs != 0 {
                return Err(CmdError::err(format!(
                    "Can't migrate hashslot {slot} while I still hold jobs for this hash slot \
                     (jobs do not move with their slot: acknowledge or delete them first)."
                )));
            }
            st.moving.insert(slot, Moving::To(n as u16));
        }
        (b"importing", 5) => {
            if st.owner(slot) == Some(me) {
                return Err(CmdError::err(format!("I'm already the owner of hash slot {slot}")));
            }
            let n = target(&st, "I don't know about node ")?;
            st.moving.insert(slot, Moving::From(n as u16));
        }
        (b"stable", 4) => {
            st.moving.remove(&slot);
        }
        (b"node", 5) => {
            let n = target(&st, "Unknown node ")?;
            if st.owner(slot) == Some(me) && n != me && keys != 0 {
                return Err(CmdError::err(format!(
                    "Can't assign hashslot {slot} to a different node while I still hold keys \
                     for this hash slot."
                )));
            }
            if st.owner(slot) == Some(me) && n != me && jobs != 0 {
                return Err(CmdError::err(format!(
                    "Can't assign hashslot {slot} to a different node while I still hold jobs \
                     for this hash slot."
                )));
            }
            if keys == 0 && matches!(st.moving.get(&slot), Some(Moving::To(_))) {
                st.moving.remove(&slot);
            }
            let was_mine = st.owner(slot) == Some(me);
            st.set_owner(slot, Some(n));
            // A master that gave its last slot away follows the node that
            // took it (Redis 7.0's SETSLOT NODE, with
            // cluster-allow-replica-migration).
            if was_mine && n != me && st.me().numslots == 0 && migration {
                crate::subsystems::log::warning(&format!(
                    "Configuration change detected. Reconfiguring myself as a replica of {}",
                    st.nodes[n].name()
                ));
                follow = Some(st.become_replica_of(n));
            }
            if n == me && matches!(st.moving.get(&slot), Some(Moving::From(_))) {
                // A slot migrated by hand: a new epoch, so that the new
                // owner wins when the bus spreads it.
                let max = st.nodes.iter().map(|n| n.config_epoch).max().unwrap_or(0);
                let mine = st.me().config_epoch;
                if mine == 0 || mine != max.max(st.current_epoch) {
                    st.current_epoch += 1;
                    let e = st.current_epoch;
                    st.me_mut().config_epoch = e;
                    crate::subsystems::log::warning(&format!(
                        "configEpoch updated after importing slot {slot}"
                    ));
                }
                st.moving.remove(&slot);
            }
        }
        _ => {
            return Err(CmdError::err(
                "Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
            ))
        }
    }
    drop(st);
    super::changed(cx, c);
    if let (Some((ip, port)), Some(f)) = (follow, cx.shared.host.follow.as_ref()) {
        f.follow(&ip, port);
    }
    out.ok();
    Ok(())
}
