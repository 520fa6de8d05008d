//! `CLUSTER` and the client commands of Redis Cluster (`READONLY`,
//! `READWRITE`, `ASKING`). With `cluster-enabled no` every one of them is
//! refused with "This instance has cluster support disabled" after the
//! dispatcher's usual checks (arity, unknown subcommand, the flags that
//! keep `CLUSTER RESET` out of scripts), as Redis 7.0.15 standalone
//! answers; the table lists every subcommand so that `COMMAND` shows what
//! Redis shows. In cluster mode the handlers read and change the state in
//! `subsystems::cluster`: `slots.rs` assigns slots and reads a slot's
//! keys, `views.rs` prints the state.

mod slots;
mod views;

use resp::ReplyBuf;

use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Lock};
use crate::subsystems::cluster::Cluster;

pub const COMMANDS: &[Command] = &[
    Command::redis("CLUSTER", container).subs(SUBS),
    Command::redis("READONLY", readonly),
    Command::redis("READWRITE", readwrite),
    Command::redis("ASKING", asking),
];

/// Redis 7.0.15's subcommands, as its metadata declares them.
const SUBS: &[Command] = &[
    Command::redis("ADDSLOTS", slots::addslots),
    Command::redis("ADDSLOTSRANGE", slots::addslotsrange),
    Command::redis("BUMPEPOCH", slots::bumpepoch),
    Command::redis("COUNT-FAILURE-REPORTS", views::count_failure_reports),
    // A slot is a stripe in cluster mode: the handler locks that one.
    Command::redis("COUNTKEYSINSLOT", slots::countkeysinslot).lock(Lock::DbWalk),
    Command::redis("DELSLOTS", slots::delslots),
    Command::redis("DELSLOTSRANGE", slots::delslotsrange),
    Command::redis("FAILOVER", failover),
    Command::redis("FLUSHSLOTS", slots::flushslots),
    Command::redis("FORGET", views::forget),
    Command::redis("GETKEYSINSLOT", slots::getkeysinslot).lock(Lock::DbWalk),
    Command::redis("HELP", help),
    Command::redis("INFO", views::info),
    Command::redis("KEYSLOT", slots::keyslot),
    Command::redis("LINKS", views::links),
    Command::redis("MEET", meet),
    Command::redis("MYID", views::myid),
    Command::redis("NODES", views::nodes),
    Command::redis("REPLICAS", views::replicas),
    Command::redis("REPLICATE", replicate),
    Command::redis("RESET", slots::reset),
    Command::redis("SAVECONFIG", views::saveconfig),
    Command::redis("SET-CONFIG-EPOCH", slots::set_config_epoch),
    // NODE counts the slot's keys: its one stripe.
    Command::redis("SETSLOT", slots::setslot).lock(Lock::DbWalk),
    Command::redis("SHARDS", views::shards),
    Command::redis("SLAVES", views::replicas),
    Command::redis("SLOTS", views::slots),
];

/// Only reached if the dispatcher lets a bare container through.
fn container(_: &mut Ctx, args: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    Err(CmdError::UnknownSubcommand {
        sub: argv.get(1).map_or_else(Vec::new, |s| s.to_vec()),
        cmd: argv[0].to_ascii_uppercase(),
    })
}

/// A command changed the cluster state: `nodes.conf` is saved by the
/// next cron, and the cluster's health is computed now (Redis's
/// beforeSleep does it before the next command).
pub(super) fn changed(cx: &mut Ctx, c: &Cluster) {
    c.changed();
    crate::subsystems::cluster::update_state(c, cx.sess.conf(cx.shared));
}

fn disabled() -> CmdError {
    CmdError::err("This instance has cluster support disabled")
}

/// The node's cluster state, or Redis's refusal on a standalone server.
pub(super) fn cluster<'a>(cx: &Ctx<'a, '_>) -> Result<&'a Cluster, CmdError> {
    cx.shared.cluster.get().ok_or_else(disabled)
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica, with Redis's checks in
/// its order; the bus runs what follows.
fn failover(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let argv = args.argv();
    let (force, takeover) = match argv.get(2) {
        None => (false, false),
        Some(a) if argv.len() == 3 && a.eq_ignore_ascii_case(b"force") => (true, false),
        Some(a) if argv.len() == 3 && a.eq_ignore_ascii_case(b"takeover") => (true, true),
        Some(_) => return Err(CmdError::Syntax),
    };
    {
        let st = c.state.read();
        let me = st.me();
        if me.is_master() {
            return Err(CmdError::err("You should send CLUSTER FAILOVER to a replica"));
        }
        let Some(m) = me.master.and_then(|id| st.find(&id)) else {
            return Err(CmdError::err("I'm a replica but my master is unknown to me"));
        };
        let master = &st.nodes[m];
        if !force && (master.is_failed() || master.link == 0) {
            return Err(CmdError::err(
                "Master is down or failed, please use CLUSTER FAILOVER FORCE",
            ));
        }
    }
    if let Some(bus) = c.bus.get() {
        bus.manual_failover(force, takeover);
    }
    out.ok();
    Ok(())
}

/// CLUSTER MEET: a handshake the bus starts (Redis's argument checks).
fn meet(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let argv = args.argv();
    let quoted = |pre: &str, a: &[u8]| {
        let mut l = format!("ERR {pre}").into_bytes();
        l.extend_from_slice(a);
        CmdError::Bytes(l)
    };
    let port = resp::parse_i64(argv[3])
        .ok_or_else(|| quoted("Invalid TCP base port specified: ", argv[3]))?;
    let cport = match argv.get(4) {
        Some(a) => {
            resp::parse_i64(a).ok_or_else(|| quoted("Invalid TCP bus port specified: ", a))?
        }
        None => port + 10000,
    };
    let ip = std::str::from_utf8(argv[2]).ok().and_then(|s| s.parse::<std::net::IpAddr>().ok());
    let ok_port = |p: i64| (1..=65535).contains(&p);
    let Some(ip) = ip.filter(|_| ok_port(port) && ok_port(cport)) else {
        let mut l = b"ERR Invalid node address specified: ".to_vec();
        l.extend_from_slice(argv[2]);
        l.push(b':');
        l.extend_from_slice(argv[3]);
        return Err(CmdError::Bytes(l));
    };
    let seed = cx.shared.clock.now_ms() as u64 ^ port as u64;
    c.state.write().start_handshake(&ip.to_string(), port as u16, cport as u16, seed);
    changed(cx, c);
    out.ok();
    Ok(())
}

/// CLUSTER REPLICATE: this node becomes a replica of a master (Redis's
/// clusterSetMaster): its slots go, replication follows the master.
fn replicate(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let c = cluster(cx)?;
    let arg = args.argv()[2];
    let has_keys = cx.keys.db_counts(0).keys > 0;
    let (ip, port) = {
        let mut st = c.state.write();
        let Some(n) = st.find(arg) else {
            let mut l = b"ERR Unknown node ".to_vec();
            l.extend_from_slice(arg);
            return Err(CmdError::Bytes(l));
        };
        if n == st.myself {
            return Err(CmdError::err("Can't replicate myself"));
        }
        if !st.nodes[n].is_master() {
            return Err(CmdError::err("I can only replicate a master, not a replica."));
        }
        if st.me().is_master() && (st.me().numslots != 0 || has_keys) {
            return Err(CmdError::err(
                "To set a master the node must be empty and without assigned slots.",
            ));
        }
        let me = st.myself;
        for s in 0..crate::subsystems::cluster::SLOTS as u16 {
            if st.owner(s) == Some(me) {
                st.set_owner(s, None);
            }
        }
        st.become_replica_of(n)
    };
    changed(cx, c);
    if let Some(f) = cx.shared.host.follow.as_ref() {
        f.follow(&ip, port);
    }
    out.ok();
    Ok(())
}

fn readonly(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cluster(cx)?;
    cx.sess.cluster_readonly = true;
    out.ok();
    Ok(())
}

fn readwrite(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cluster(cx)?;
    cx.sess.cluster_readonly = false;
    out.ok();
    Ok(())
}

fn asking(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cluster(cx)?;
    cx.sess.asking = true;
    out.ok();
    Ok(())
}

fn help(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    cluster(cx)?;
    crate::commands::server::reply_help(
        out,
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Assign slots to current node.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Assign slots which are between <start-slot> and <end-slot> to current node.",
            "BUMPEPOCH",
            "    Advance the cluster config epoch.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Return number of failure reports for <node-id>.",
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Delete slots information from current node.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Delete slots information which are between <start-slot> and <end-slot> from \
             current node.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Promote current replica node to being a master.",
            "FORGET <node-id>",
            "    Remove a node from the cluster.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "FLUSHSLOTS",
            "    Delete current node own slots information.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MEET <ip> <port> [<bus-port>]",
            "    Connect nodes into a working cluster.",
            "MYID",
            "    Return the node id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICATE <node-id>",
            "    Configure current node as replica to <node-id>.",
            "RESET [HARD|SOFT]",
            "    Reset current node (default: soft).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Set config epoch of current node.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Set slot state.",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SAVECONFIG",
            "    Force saving cluster configuration on disk.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "LINKS",
            "    Return information about all network links between this node and its peers.",
            "    Output format is an array where each array element is a map containing \
             attributes of a link",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests;
