//! `CLUSTER` on a server without cluster mode, as Redis 7.0.15 answers
//! it with `cluster-enabled no`: every subcommand (HELP included) is
//! refused with "This instance has cluster support disabled", after the
//! dispatcher's usual checks (arity, unknown subcommand, the flags that
//! keep `CLUSTER RESET` out of scripts). The table lists them all so that
//! `COMMAND` (LIST, INFO, DOCS, COUNT) shows what Redis shows.

use resp::ReplyBuf;

use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

pub const COMMANDS: &[Command] = &[Command::redis("CLUSTER", container).subs(SUBS)];

/// Redis 7.0.15's subcommands, as its metadata declares them.
const SUBS: &[Command] = &[
    Command::redis("ADDSLOTS", disabled),
    Command::redis("ADDSLOTSRANGE", disabled),
    Command::redis("BUMPEPOCH", disabled),
    Command::redis("COUNT-FAILURE-REPORTS", disabled),
    Command::redis("COUNTKEYSINSLOT", disabled),
    Command::redis("DELSLOTS", disabled),
    Command::redis("DELSLOTSRANGE", disabled),
    Command::redis("FAILOVER", disabled),
    Command::redis("FLUSHSLOTS", disabled),
    Command::redis("FORGET", disabled),
    Command::redis("GETKEYSINSLOT", disabled),
    Command::redis("HELP", disabled),
    Command::redis("INFO", disabled),
    Command::redis("KEYSLOT", disabled),
    Command::redis("LINKS", disabled),
    Command::redis("MEET", disabled),
    Command::redis("MYID", disabled),
    Command::redis("NODES", disabled),
    Command::redis("REPLICAS", disabled),
    Command::redis("REPLICATE", disabled),
    Command::redis("RESET", disabled),
    Command::redis("SAVECONFIG", disabled),
    Command::redis("SET-CONFIG-EPOCH", disabled),
    Command::redis("SETSLOT", disabled),
    Command::redis("SHARDS", disabled),
    Command::redis("SLAVES", disabled),
    Command::redis("SLOTS", disabled),
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
