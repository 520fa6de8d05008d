//! Where the dispatcher meets the router: a client's command (Redis's
//! `processCommand` cluster step, EXEC routing its whole queue) and a
//! script's command (`scriptVerifyClusterState`), with ASKING's
//! one-command lifetime. Only reached in cluster mode: a standalone
//! session skips the checks altogether (`Session::needs_checks`).

use crate::core::error::CmdError;
use crate::core::meta::Meta;
use crate::core::session::Session;
use crate::core::spec::{CommandSpec, Flags};
use crate::Shared;

use super::route::{self, Query, Redirect};
use super::Cluster;
use store::Locks;

/// The router's view of the configuration and the client.
fn query(shared: &Shared, sess: &mut Session, asking: bool, writes: bool) -> Query {
    let readonly = sess.cluster_readonly;
    let cfg = sess.conf(shared);
    Query {
        asking,
        readonly,
        writes,
        migrate: false,
        allow_reads_when_down: super::yes(cfg, "cluster-allow-reads-when-down"),
        allow_pubsubshard_when_down: super::yes(cfg, "cluster-allow-pubsubshard-when-down"),
    }
}

/// Which of the keys of `cmds` are in this node's database, asked only
/// while some slot is on the move (Redis counts a migrating slot's
/// missing keys). Read before the cluster state is locked: a stripe is
/// never locked under the state's lock, so no lock order ties them.
fn present<'a>(
    shared: &Shared,
    cmds: impl Iterator<Item = (&'static Meta, &'a [&'a [u8]])>,
) -> Vec<Vec<u8>> {
    let now = shared.clock.now_ms();
    let mut found = Vec::new();
    let mut pos = Vec::new();
    for (m, argv) in cmds {
        pos.clear();
        route::positions(m, argv, &mut pos);
        for &p in &pos {
            let Some(&key) = argv.get(p) else { continue };
            let st = shared.store.stripe_of(key);
            let s = shared.store.lock_stripe(0, st as usize);
            if s.peek(key).is_some() && !s.is_expired(key, now) {
                found.push(key.to_vec());
            }
        }
    }
    found
}

/// A client's command: served here, or the redirection Redis answers.
pub fn client(
    shared: &Shared,
    c: &Cluster,
    sess: &mut Session,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
) -> Result<(), CmdError> {
    let flags = spec.flags;
    let asking = sess.asking || flags.has(Flags::ASKING);
    // Redis's resetClient: ASKING lasts one command, or one transaction
    // up to its EXEC (the ASKING command sets it again after this).
    let exec = flags.has(Flags::EXEC_TX);
    if sess.multi.is_none() {
        if !flags.has(Flags::NO_QUEUE) || exec {
            sess.asking = false;
        }
    } else if exec {
        sess.asking = false;
    }
    // Redis's resetClient clears the slot after each command; routing
    // sets it for the one about to run.
    sess.cluster_slot = None;
    sess.cluster_asked = asking;
    if !route::wants(flags, spec.meta()) {
        return Ok(());
    }
    let base = query(shared, sess, asking, flags.has(Flags::WRITE));
    // While a script is busy its thread serves other clients here, and
    // the script holds its stripes: no key is looked up then (the
    // command gets BUSY after this anyway).
    let moving = !c.state.read().moving.is_empty() && !shared.scripts.is_busy();
    if exec {
        // EXEC without MULTI is the handler's error; with MULTI, the
        // queue is routed as one request.
        let Some(m) = sess.multi.as_ref() else { return Ok(()) };
        let writes = m.flags.has(Flags::WRITE);
        let queued: Vec<(&'static Meta, Vec<&[u8]>)> = m
            .queued
            .iter()
            .filter_map(|q| {
                let argv: Vec<&[u8]> = q.iter().map(|a| a.as_slice()).collect();
                crate::core::door::lookup(shared, &argv).ok().map(|s| (s.meta(), argv))
            })
            .collect();
        let cmds = || queued.iter().map(|(m, a)| (*m, &a[..]));
        let here = if moving { present(shared, cmds()) } else { Vec::new() };
        let q = Query { writes, ..base };
        let st = c.state.read();
        sess.cluster_slot = route::route(&st, cmds(), &q, |k| here.iter().any(|h| h == k))
            .map_err(Redirect::into_error)?;
    } else {
        let one = || std::iter::once((spec.meta(), argv));
        let here = if moving { present(shared, one()) } else { Vec::new() };
        let q = Query { migrate: spec.meta().name == "migrate", ..base };
        let st = c.state.read();
        sess.cluster_slot = route::route(&st, one(), &q, |k| here.iter().any(|h| h == k))
            .map_err(Redirect::into_error)?;
    }
    Ok(())
}

/// A client's command routed by [`client`] is routed again once its
/// stripes are held, just before it runs. Redis routes and runs a command
/// in one step of its one thread; Sluice routes before it locks, and a
/// MIGRATE or a `CLUSTER SETSLOT` served by another thread in between may
/// have taken the key or the slot away: run here, the command would write
/// a key this node no longer serves, and the write would be lost once the
/// slot's move completes. (In cluster mode a stripe is a slot, so holding
/// the key's stripe also keeps GETKEYSINSLOT and MIGRATE out of the slot
/// until the command is done.) Nothing to do, and no key looked up, while
/// the slot is this node's and not on the move.
pub fn recheck(
    shared: &Shared,
    c: &Cluster,
    sess: &mut Session,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    keys: &Locks<'_>,
) -> Result<(), CmdError> {
    let migrate = spec.meta().name == "migrate";
    let writes = spec.flags.has(Flags::WRITE);
    route_held(shared, c, sess, std::iter::once((spec.meta(), argv)), writes, migrate, keys)
}

/// [`recheck`] for EXEC: its queue, routed by [`client`] as one request
/// before EXEC locked the stripes of every queued command, is routed again
/// once they are held, before the first queued command runs. Redis routes
/// EXEC's queue and runs it in one step: a slot that moved in between
/// (a MIGRATE took a key, a `CLUSTER SETSLOT` gave the slot away) gets the
/// redirection Redis would have answered then (`-MOVED`, `-ASK`,
/// `-TRYAGAIN`), and the transaction is discarded, as Redis's
/// processCommand discards it on a redirected EXEC. `writes`: some queued
/// command writes.
pub fn recheck_queue(
    shared: &Shared,
    c: &Cluster,
    sess: &mut Session,
    queued: &[Vec<&[u8]>],
    writes: bool,
    keys: &Locks<'_>,
) -> Result<(), CmdError> {
    // A command that is not found is EXEC's error in its place, as when
    // the queue was first routed.
    let cmds = queued.iter().filter_map(|argv| {
        crate::core::door::lookup(shared, argv).ok().map(|s| (s.meta(), &argv[..]))
    });
    route_held(shared, c, sess, cmds, writes, false, keys)
}

/// Routes `cmds` again with their stripes held, unless the slot they were
/// routed to is plainly this node's (served here, the cluster up, the slot
/// not on the move): then no key is looked up.
fn route_held<'a>(
    shared: &Shared,
    c: &Cluster,
    sess: &mut Session,
    cmds: impl Iterator<Item = (&'static Meta, &'a [&'a [u8]])>,
    writes: bool,
    migrate: bool,
    keys: &Locks<'_>,
) -> Result<(), CmdError> {
    let Some(slot) = sess.cluster_slot else { return Ok(()) };
    let st = c.state.read();
    if st.ok && st.owner(slot) == Some(st.myself) && !st.moving.contains_key(&slot) {
        return Ok(());
    }
    let base = query(shared, sess, sess.cluster_asked, writes);
    let q = Query { migrate, ..base };
    // A key whose stripe the command does not hold (none the router looks
    // at, in practice) counts as here, as it did when the command was routed.
    let here = |k: &[u8]| keys.peek_held(0, k).unwrap_or(true);
    route::route(&st, cmds, &q, here).map(|_| ()).map_err(Redirect::into_error)
}

/// The cluster's cron (Redis's `clientsCron` step): every client blocked
/// on keys whose slot this node no longer serves (the slot moved, the
/// node became a replica, the cluster went down) stops waiting with
/// `-MOVED`, or `-CLUSTERDOWN`. Costs one load while nobody waits.
pub fn redirect_blocked(shared: &Shared, c: &Cluster) {
    let waiters = crate::core::blocking::all_waiters(shared);
    if waiters.is_empty() {
        return;
    }
    // Decided under the state's lock, ended after it (ending one wakes a
    // connection; no lock is held across that).
    let ends: Vec<_> = {
        let st = c.state.read();
        waiters
            .into_iter()
            // Keyless waits (WAIT) are not in a slot; a job queue (GETJOB)
            // or a job id (WAITJOB) is, as a key.
            .filter(|w| !w.keys.is_empty())
            .filter_map(|w| {
                let writes = w.spec.flags.has(Flags::WRITE);
                route::blocked(&st, &w.keys[0], w.readonly, writes).map(|r| (w, r))
            })
            .collect()
    };
    for (w, r) in ends {
        let e = r.into_error();
        crate::core::blocking::refuse(&w, &String::from_utf8_lossy(&e.text()), false);
    }
}

/// A script's command: refused when its keys are not this node's, in
/// Redis's words for scripts (`scriptVerifyClusterState`), or, unless
/// `cross_slot`, when they are not in the slot of the script's other keys
/// (those it declared, else those of its first command with keys).
pub fn script(
    shared: &Shared,
    c: &Cluster,
    sess: &mut Session,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    cross_slot: bool,
) -> Result<(), CmdError> {
    if !route::wants(spec.flags, spec.meta()) {
        return Ok(());
    }
    let writes = spec.flags.has(Flags::WRITE);
    let q = query(shared, sess, sess.asking, writes);
    let st = c.state.read();
    // The script holds its stripes: a key's presence in a slot on the
    // move is not looked up here (it would lock a stripe under the state's
    // lock), so a script's key counts as present.
    match route::route(&st, std::iter::once((spec.meta(), argv)), &q, |_| true) {
        Ok(Some(slot)) if !cross_slot => match sess.cluster_slot {
            None => {
                sess.cluster_slot = Some(slot);
                Ok(())
            }
            Some(s) if s == slot => Ok(()),
            Some(_) => Err(CmdError::err(
                "Script attempted to access keys that do not hash to the same slot",
            )),
        },
        Ok(_) => Ok(()),
        Err(Redirect::DownReadOnly) => Err(CmdError::err(
            "Script attempted to execute a write command while the cluster is down and readonly",
        )),
        Err(Redirect::Down) => {
            Err(CmdError::err("Script attempted to execute a command while the cluster is down"))
        }
        Err(_) => {
            Err(CmdError::err("Script attempted to access a non local key in a cluster node"))
        }
    }
}
