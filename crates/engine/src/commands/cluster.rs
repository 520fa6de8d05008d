//! `CLUSTER` on a server without cluster mode, as Redis 7.0.15 answers
//! it with `cluster-enabled no`: every subcommand (HELP included) is
//! refused with "This instance has cluster support disabled", after the
//! dispatcher's usual checks (arity, unknown subcommand, the flags that
//! keep `CLUSTER RESET` out of scripts). The table lists them all so that
//! `COMMAND` (LIST, INFO, DOCS, COUNT) shows what Redis shows.

use resp::ReplyBuf;

use crate::ctx::{Args, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::spec::{CommandSpec, Flags, Group, KeySpec};

pub const COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "CLUSTER",
    -2,
    Flags::NONE,
    KeySpec::None,
    Group::Cluster,
    "A container for cluster commands",
    container,
)
.since("3.0.0")
.complexity("Depends on subcommand.")
.subs(SUBS)];

/// Redis 7.0.15's subcommands, as its metadata declares them.
const SUBS: &[CommandSpec] = &[
    CommandSpec::new(
        "ADDSLOTS",
        -3,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Assign new hash slots to receiving node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(N) where N is the total number of hash slot arguments"),
    CommandSpec::new(
        "ADDSLOTSRANGE",
        -4,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Assign new hash slots to receiving node",
        disabled,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the total number of the slots between the start slot and end slot arguments."),
    CommandSpec::new(
        "BUMPEPOCH",
        2,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Advance the cluster config epoch",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "COUNT-FAILURE-REPORTS",
        3,
        Flags::ADMIN.union(Flags::STALE),
        KeySpec::None,
        Group::Cluster,
        "Return the number of failure reports active for a given node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(N) where N is the number of failure reports"),
    CommandSpec::new(
        "COUNTKEYSINSLOT",
        3,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Return the number of local keys in the specified hash slot",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "DELSLOTS",
        -3,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Set hash slots as unbound in receiving node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(N) where N is the total number of hash slot arguments"),
    CommandSpec::new(
        "DELSLOTSRANGE",
        -4,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Set hash slots as unbound in receiving node",
        disabled,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the total number of the slots between the start slot and end slot arguments."),
    CommandSpec::new(
        "FAILOVER",
        -2,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Forces a replica to perform a manual failover of its master.",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "FLUSHSLOTS",
        2,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Delete a node's own slots information",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "FORGET",
        3,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Remove a node from the nodes table",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "GETKEYSINSLOT",
        4,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Return local key names in the specified hash slot",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(log(N)) where N is the number of requested keys"),
    CommandSpec::new(
        "HELP",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::None,
        Group::Cluster,
        "Show helpful text about the different subcommands",
        disabled,
    )
    .since("5.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "INFO",
        2,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Provides info about Redis Cluster node state",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "KEYSLOT",
        3,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Returns the hash slot of the specified key",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(N) where N is the number of bytes in the key"),
    CommandSpec::new(
        "LINKS",
        2,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Returns a list of all TCP links to and from peer nodes in cluster",
        disabled,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the total number of Cluster nodes"),
    CommandSpec::new(
        "MEET",
        -4,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Force a node cluster to handshake with another node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "MYID",
        2,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Return the node id",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "NODES",
        2,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Get Cluster config for the node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(N) where N is the total number of Cluster nodes"),
    CommandSpec::new(
        "REPLICAS",
        3,
        Flags::ADMIN.union(Flags::STALE),
        KeySpec::None,
        Group::Cluster,
        "List replica nodes of the specified master node",
        disabled,
    )
    .since("5.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "REPLICATE",
        3,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Reconfigure a node as a replica of the specified master node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "RESET",
        -2,
        Flags::ADMIN.union(Flags::NOSCRIPT).union(Flags::STALE),
        KeySpec::None,
        Group::Cluster,
        "Reset a Redis Cluster node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect."),
    CommandSpec::new(
        "SAVECONFIG",
        2,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Forces the node to save cluster state on disk",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "SET-CONFIG-EPOCH",
        3,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Set the configuration epoch in a new node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "SETSLOT",
        -4,
        Flags::ADMIN.union(Flags::STALE).union(Flags::NO_ASYNC_LOADING),
        KeySpec::None,
        Group::Cluster,
        "Bind a hash slot to a specific node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "SHARDS",
        2,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Get array of cluster slots to node mappings",
        disabled,
    )
    .since("7.0.0")
    .complexity("O(N) where N is the total number of cluster nodes"),
    CommandSpec::new(
        "SLAVES",
        3,
        Flags::ADMIN.union(Flags::STALE),
        KeySpec::None,
        Group::Cluster,
        "List replica nodes of the specified master node",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(1)"),
    CommandSpec::new(
        "SLOTS",
        2,
        Flags::STALE,
        KeySpec::None,
        Group::Cluster,
        "Get array of Cluster slot to node mappings",
        disabled,
    )
    .since("3.0.0")
    .complexity("O(N) where N is the total number of Cluster nodes"),
];

/// Only reached if the dispatcher lets a bare container through.
fn container(_: &mut Ctx, args: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    Err(CmdError::UnknownSubcommand {
        sub: argv.get(1).map_or_else(Vec::new, |s| s.to_vec()),
        cmd: argv[0].to_ascii_uppercase(),
    })
}

fn disabled(_: &mut Ctx, _: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    Err(CmdError::err("This instance has cluster support disabled"))
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;

    // Replies below are redis-server 7.0.15's (cluster-enabled no).
    #[test]
    fn cluster_subcommands_answer_cluster_support_disabled() {
        let mut h = Harness::new();
        let disabled = "-ERR This instance has cluster support disabled\r\n";
        for cmd in [&["CLUSTER", "HELP"][..], &["CLUSTER", "RESET", "HARD"], &["cluster", "info"]] {
            assert_eq!(h.run(cmd), disabled);
        }
        assert_eq!(h.run(&["CLUSTER", "KEYSLOT", "foo"]), disabled);
        assert_eq!(
            h.run(&["CLUSTER", "foo"]),
            "-ERR unknown subcommand 'foo'. Try CLUSTER HELP.\r\n"
        );
        assert_eq!(
            h.run(&["CLUSTER", "INFO", "x"]),
            "-ERR wrong number of arguments for 'cluster|info' command\r\n"
        );
        assert_eq!(h.run(&["CLUSTER"]), "-ERR wrong number of arguments for 'cluster' command\r\n");
    }

    #[test]
    fn cluster_reset_is_refused_inside_a_script() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["EVAL", "return redis.call('cluster','reset','hard')", "0"]),
            "-ERR This Redis command is not allowed from script script: \
             cc1ece19697daeb65ef8cb9c07a31814e0e3b28a, on @user_script:1.\r\n"
        );
    }
}
