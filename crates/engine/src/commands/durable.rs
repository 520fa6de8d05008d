//! DURABLE, Sluice's extension (`docs/durable.md`): a connection asks
//! that its replies to writes be released only once the writes are on
//! `numreplicas` replicas (and, with `FSYNC`, fsynced by the local AOF),
//! waiting at most `timeout` milliseconds; `DURABLE OFF` ends it.
//!
//! The handler only records the mode in the session (and in its handle,
//! for CLIENT LIST's `durable=` field). Holding the replies is the
//! connection's business (`crates/server/src/network/durable.rs`): it
//! runs a batch, sees which replies answered writes, asks the replicas
//! for an acknowledgement once, and writes the batch's replies when the
//! acknowledgements (or the timeout) come.
//!
//! It is a top-level command, not a `CLIENT` subcommand, so that
//! `COMMAND INFO CLIENT`, `COMMAND DOCS CLIENT` and `CLIENT HELP` stay
//! Redis 7.0's byte for byte.

use resp::ReplyBuf;

use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::session::Durable;
use crate::core::spec::Command;

pub const COMMANDS: &[Command] = &[Command::sluice("DURABLE", durable)];

/// The longest wait a connection may ask for (one day): a deadline is
/// computed from it, so it is bounded before it is used.
pub const MAX_TIMEOUT_MS: i64 = 86_400_000;

/// The most replicas a connection may wait for (WAIT's bound: Redis
/// waits for an `int`).
const MAX_REPLICAS: i64 = i32::MAX as i64;

fn durable(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let first = args.req()?;
    if eq_ic(first, "OFF") {
        if args.next().is_some() {
            return Err(CmdError::Syntax);
        }
        set(cx, None);
        out.ok();
        return Ok(());
    }
    let replicas = parse_i64(first)?;
    if !(0..=MAX_REPLICAS).contains(&replicas) {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    let timeout = parse_i64(args.req()?).map_err(|_| CmdError::TimeoutNotInteger)?;
    if !(1..=MAX_TIMEOUT_MS).contains(&timeout) {
        return Err(CmdError::err(format!(
            "DURABLE timeout must be between 1 and {MAX_TIMEOUT_MS} milliseconds"
        )));
    }
    let fsync = match args.next() {
        None => false,
        Some(a) if eq_ic(a, "FSYNC") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    if args.next().is_some() {
        return Err(CmdError::Syntax);
    }
    if fsync && !cx.shared.config.read().appendonly {
        return Err(CmdError::err("DURABLE FSYNC cannot be used when appendonly is disabled."));
    }
    set(cx, Some(Durable { replicas: replicas as u32, timeout_ms: timeout as u64, fsync }));
    out.ok();
    Ok(())
}

fn set(cx: &mut Ctx, mode: Option<Durable>) {
    cx.sess.durable = mode;
    *cx.sess.handle.durable.lock() = mode;
}

#[cfg(test)]
mod tests {
    use crate::core::session::Durable;
    use crate::tests::Harness;

    #[test]
    fn durable_sets_and_clears_the_mode() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["DURABLE", "2", "500"]), "+OK\r\n");
        let want = Durable { replicas: 2, timeout_ms: 500, fsync: false };
        assert_eq!(h.sess.durable, Some(want));
        let line = h.run(&["CLIENT", "INFO"]);
        assert!(line.trim_end().ends_with(" resp=2 durable=2,500"), "{line}");
        assert_eq!(h.run(&["DURABLE", "off"]), "+OK\r\n");
        assert_eq!(h.sess.durable, None);
        let line = h.run(&["CLIENT", "INFO"]);
        assert!(line.trim_end().ends_with(" resp=2"), "{line}");
    }

    #[test]
    fn durable_checks_its_arguments_before_setting_anything() {
        let mut h = Harness::new();
        let cases: &[(&[&str], &str)] = &[
            (&["DURABLE"], "-ERR wrong number of arguments for 'durable' command\r\n"),
            (&["DURABLE", "x", "1"], "-ERR value is not an integer or out of range\r\n"),
            (&["DURABLE", "-1", "1"], "-ERR value is out of range, must be positive\r\n"),
            (&["DURABLE", "1", "x"], "-ERR timeout is not an integer or out of range\r\n"),
            (
                &["DURABLE", "1", "0"],
                "-ERR DURABLE timeout must be between 1 and 86400000 milliseconds\r\n",
            ),
            (
                &["DURABLE", "1", "86400001"],
                "-ERR DURABLE timeout must be between 1 and 86400000 milliseconds\r\n",
            ),
            (&["DURABLE", "1", "10", "NOW"], "-ERR syntax error\r\n"),
            (&["DURABLE", "1", "10", "FSYNC", "x"], "-ERR syntax error\r\n"),
            (&["DURABLE", "OFF", "x"], "-ERR syntax error\r\n"),
            (
                &["DURABLE", "1", "10", "fsync"],
                "-ERR DURABLE FSYNC cannot be used when appendonly is disabled.\r\n",
            ),
        ];
        for (argv, want) in cases {
            assert_eq!(h.run(argv), *want, "{argv:?}");
            assert_eq!(h.sess.durable, None, "{argv:?}");
        }
    }

    #[test]
    fn reset_ends_the_durable_mode() {
        let mut h = Harness::new();
        h.run(&["DURABLE", "1", "100"]);
        assert_eq!(h.run(&["RESET"]), "+RESET\r\n");
        assert_eq!(h.sess.durable, None);
        assert!(h.sess.handle.durable.lock().is_none());
    }
}
