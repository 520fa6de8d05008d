//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB's introspection.
//!
//! The registry and delivery are [`crate::subsystems::pubsub`]. What a RESP2 client in
//! pub/sub mode may run is the table's `PUBSUB_CONTEXT` flag (checked by
//! the dispatcher); subscribe and unsubscribe confirmations are pushes,
//! which CLIENT REPLY does not suppress (`Session::pushed`).

use resp::ReplyBuf;

use crate::core::ctx::help_reply;
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, Flags};
use crate::subsystems::pubsub::Kind;

const PUBSUB_SUBS: &[Command] = &[
    Command::redis("CHANNELS", pubsub_channels),
    Command::redis("HELP", pubsub_help),
    Command::redis("NUMPAT", pubsub_numpat),
    Command::redis("NUMSUB", pubsub_numsub),
    Command::redis("SHARDCHANNELS", pubsub_shardchannels),
    Command::redis("SHARDNUMSUB", pubsub_shardnumsub),
];

pub const COMMANDS: &[Command] = &[
    Command::redis("SUBSCRIBE", subscribe).flags(Flags::CHANNEL_ARGS.union(Flags::PUBSUB_CONTEXT)),
    Command::redis("UNSUBSCRIBE", unsubscribe).flags(Flags::PUBSUB_CONTEXT),
    Command::redis("PSUBSCRIBE", psubscribe)
        .flags(Flags::CHANNEL_PATTERNS.union(Flags::PUBSUB_CONTEXT)),
    Command::redis("PUNSUBSCRIBE", punsubscribe).flags(Flags::PUBSUB_CONTEXT),
    // Shard channels are keys to Redis Cluster (their slot picks the
    // node); Redis declares them as key specs flagged not_key.
    Command::redis("SSUBSCRIBE", ssubscribe)
        .flags(Flags::CHANNEL_ARGS.union(Flags::PUBSUB_CONTEXT)),
    Command::redis("SUNSUBSCRIBE", sunsubscribe).flags(Flags::PUBSUB_CONTEXT),
    Command::redis("PUBLISH", publish).flags(Flags::MAY_REPLICATE.union(Flags::CHANNEL_ARG1)),
    Command::redis("SPUBLISH", spublish).flags(Flags::MAY_REPLICATE.union(Flags::CHANNEL_ARG1)),
    Command::redis("PUBSUB", container).subs(PUBSUB_SUBS),
];

/// Everything written so far is pushes (see `Session::pushed`).
fn pushed(cx: &mut Ctx, out: &ReplyBuf) {
    if cx.caller.is_request() {
        cx.sess.mark_pushed(out);
    }
}

fn subscribe_with(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, kind: Kind) -> CmdResult {
    // Redis refuses subscriptions to clients that expect one reply per
    // command (CLIENT_DENY_BLOCKING), except SUBSCRIBE and PSUBSCRIBE
    // inside EXEC, kept for backward compatibility.
    let deny = cx.caller.denies_blocking() && (kind == Kind::Shard || !cx.caller.in_exec());
    if deny {
        let name = match kind {
            Kind::Channel => "SUBSCRIBE",
            Kind::Pattern => "PSUBSCRIBE",
            Kind::Shard => "SSUBSCRIBE",
        };
        return Err(CmdError::err(format!("{name} isn't allowed for a DENY BLOCKING client")));
    }
    let registry = &cx.shared.pubsub;
    for name in args.rest() {
        registry.subscribe(&mut cx.sess.subs, &cx.sess.handle, kind, name, out);
    }
    cx.sess.update_modal();
    pushed(cx, out);
    Ok(())
}

fn unsubscribe_with(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, kind: Kind) -> CmdResult {
    let registry = &cx.shared.pubsub;
    let names = args.rest();
    if names.is_empty() {
        registry.unsubscribe_all(&mut cx.sess.subs, &cx.sess.handle, kind, Some(out));
    } else {
        for name in names {
            registry.unsubscribe(&mut cx.sess.subs, &cx.sess.handle, kind, name, Some(out));
        }
    }
    cx.sess.update_modal();
    pushed(cx, out);
    Ok(())
}

fn subscribe(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    subscribe_with(cx, args, out, Kind::Channel)
}

fn psubscribe(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    subscribe_with(cx, args, out, Kind::Pattern)
}

fn ssubscribe(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    subscribe_with(cx, args, out, Kind::Shard)
}

fn unsubscribe(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    unsubscribe_with(cx, args, out, Kind::Channel)
}

fn punsubscribe(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    unsubscribe_with(cx, args, out, Kind::Pattern)
}

fn sunsubscribe(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    unsubscribe_with(cx, args, out, Kind::Shard)
}

fn publish_with(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, shard: bool) -> CmdResult {
    let (channel, msg) = (args.req()?, args.req()?);
    let before = out.len();
    let n = cx.shared.pubsub.publish(shard, channel, msg, Some((cx.sess.handle.id, out)));
    if out.len() != before {
        // The publisher is a subscriber: its message went first.
        pushed(cx, out);
    }
    out.int(n as i64);
    match cx.shared.cluster.get() {
        // In cluster mode the bus carries it: PUBLISH to every node,
        // SPUBLISH to the nodes of this shard (Redis's
        // clusterPropagatePublish), and replication does not.
        Some(c) => {
            if let Some(bus) = c.bus.get() {
                bus.publish(shard, channel, msg);
            }
        }
        // Replicas get it, so that their subscribers do (Redis 7.0
        // outside cluster mode; the AOF does not hold it).
        None => cx.sess.fx.force_replicas_only(),
    }
    Ok(())
}

fn publish(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    publish_with(cx, args, out, false)
}

fn spublish(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    publish_with(cx, args, out, true)
}

/// Only reached if the dispatcher lets a bare container through.
fn container(_: &mut Ctx, args: &mut Args, _: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    Err(CmdError::UnknownSubcommand {
        sub: argv.get(1).map_or_else(Vec::new, |s| s.to_vec()),
        cmd: argv[0].to_ascii_uppercase(),
    })
}

fn channels_with(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, shard: bool) -> CmdResult {
    if args.remaining() > 1 {
        let argv = args.argv();
        return Err(CmdError::SubcommandSyntax { sub: argv[1].to_vec(), cmd: argv[0].to_vec() });
    }
    let list = cx.shared.pubsub.channels(shard, args.next());
    out.array(list.len());
    for c in &list {
        out.bulk(c);
    }
    Ok(())
}

fn pubsub_channels(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    channels_with(cx, args, out, false)
}

fn pubsub_shardchannels(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    channels_with(cx, args, out, true)
}

fn numsub_with(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf, shard: bool) -> CmdResult {
    let names = args.rest();
    // An array of pairs in RESP2 and RESP3 alike (addReplyArrayLen).
    out.array(names.len() * 2);
    for n in names {
        out.bulk(n);
        out.int(cx.shared.pubsub.numsub(shard, n) as i64);
    }
    Ok(())
}

fn pubsub_numsub(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    numsub_with(cx, args, out, false)
}

fn pubsub_shardnumsub(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    numsub_with(cx, args, out, true)
}

fn pubsub_numpat(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    out.int(cx.shared.pubsub.numpat() as i64);
    Ok(())
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

fn pubsub_help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    help_reply(HELP, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;

    #[test]
    fn subscribed_mode_in_resp2() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SUBSCRIBE", "a"]), "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(
            h.run(&["GET", "x"]),
            "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
             RESET are allowed in this context\r\n"
        );
        assert_eq!(h.run(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
        assert_eq!(h.run(&["UNSUBSCRIBE"]), "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n");
        assert_eq!(h.run(&["PING"]), "+PONG\r\n");
        assert_eq!(h.run(&["UNSUBSCRIBE"]), "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    }

    #[test]
    fn resp3_self_publish_and_reply_off() {
        let mut h = Harness::new();
        h.run(&["HELLO", "3"]);
        assert_eq!(h.run(&["SUBSCRIBE", "z"]), ">3\r\n$9\r\nsubscribe\r\n$1\r\nz\r\n:1\r\n");
        assert_eq!(
            h.run(&["PUBLISH", "z", "m"]),
            ">3\r\n$7\r\nmessage\r\n$1\r\nz\r\n$1\r\nm\r\n:1\r\n"
        );
        assert_eq!(h.run(&["CLIENT", "REPLY", "OFF"]), "");
        // Pushes go out whatever the reply mode; the reply does not.
        assert_eq!(h.run(&["PUBLISH", "z", "m"]), ">3\r\n$7\r\nmessage\r\n$1\r\nz\r\n$1\r\nm\r\n");
        assert_eq!(h.run(&["GET", "k"]), "");
        assert_eq!(h.run(&["RESET"]), "+RESET\r\n");
        assert_eq!(h.run(&["PUBSUB", "NUMSUB", "z"]), "*2\r\n$1\r\nz\r\n:0\r\n");
    }
}
