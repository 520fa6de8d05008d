//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB's introspection.
//!
//! The registry and delivery are [`crate::pubsub`]. What a RESP2 client in
//! pub/sub mode may run is the table's `PUBSUB_CONTEXT` flag (checked by
//! the dispatcher); subscribe and unsubscribe confirmations are pushes,
//! which CLIENT REPLY does not suppress (`Session::pushed`).

use resp::ReplyBuf;

use crate::commands::client::help_reply;
use crate::ctx::{Args, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::pubsub::Kind;
use crate::spec::{CommandSpec, Flags, Group, Handler, KeySpec};

const PS: Flags = Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE);
/// The (un)subscribe commands: no scripts, allowed in RESP2 pub/sub mode.
const SUBF: Flags = PS.union(Flags::NOSCRIPT).union(Flags::PUBSUB_CONTEXT);

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    since: &'static str,
    complexity: &'static str,
    summary: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, Group::Pubsub, summary, handler)
        .since(since)
        .complexity(complexity)
}

const PUBSUB_SUBS: &[CommandSpec] = &[
    cmd(
        "CHANNELS",
        -2,
        PS,
        KeySpec::None,
        "2.8.0",
        "O(N) where N is the number of active channels, and assuming constant time pattern \
         matching (relatively short channels and patterns)",
        "List active channels",
        pubsub_channels,
    ),
    cmd(
        "HELP",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::None,
        "6.2.0",
        "O(1)",
        "Show helpful text about the different subcommands",
        pubsub_help,
    ),
    cmd(
        "NUMPAT",
        2,
        PS,
        KeySpec::None,
        "2.8.0",
        "O(1)",
        "Get the count of unique patterns pattern subscriptions",
        pubsub_numpat,
    ),
    cmd(
        "NUMSUB",
        -2,
        PS,
        KeySpec::None,
        "2.8.0",
        "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
        "Get the count of subscribers for channels",
        pubsub_numsub,
    ),
    cmd(
        "SHARDCHANNELS",
        -2,
        PS,
        KeySpec::None,
        "7.0.0",
        "O(N) where N is the number of active shard channels, and assuming constant time \
         pattern matching (relatively short shard channels).",
        "List active shard channels",
        pubsub_shardchannels,
    ),
    cmd(
        "SHARDNUMSUB",
        -2,
        PS,
        KeySpec::None,
        "7.0.0",
        "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard \
         channels",
        "Get the count of subscribers for shard channels",
        pubsub_shardnumsub,
    ),
];

pub const COMMANDS: &[CommandSpec] = &[
    cmd(
        "SUBSCRIBE",
        -2,
        SUBF.union(Flags::CHANNEL_ARGS),
        KeySpec::None,
        "2.0.0",
        "O(N) where N is the number of channels to subscribe to.",
        "Listen for messages published to the given channels",
        subscribe,
    ),
    cmd(
        "UNSUBSCRIBE",
        -1,
        SUBF,
        KeySpec::None,
        "2.0.0",
        "O(N) where N is the number of clients already subscribed to a channel.",
        "Stop listening for messages posted to the given channels",
        unsubscribe,
    ),
    cmd(
        "PSUBSCRIBE",
        -2,
        SUBF.union(Flags::CHANNEL_PATTERNS),
        KeySpec::None,
        "2.0.0",
        "O(N) where N is the number of patterns the client is already subscribed to.",
        "Listen for messages published to channels matching the given patterns",
        psubscribe,
    ),
    cmd(
        "PUNSUBSCRIBE",
        -1,
        SUBF,
        KeySpec::None,
        "2.0.0",
        "O(N+M) where N is the number of patterns the client is already subscribed and M is \
         the number of total patterns subscribed in the system (by any client).",
        "Stop listening for messages posted to channels matching the given patterns",
        punsubscribe,
    ),
    // Shard channels are keys to Redis Cluster (their slot picks the
    // node); Redis declares them as key specs flagged not_key.
    cmd(
        "SSUBSCRIBE",
        -2,
        SUBF.union(Flags::CHANNEL_ARGS),
        KeySpec::range(1, -1, 1),
        "7.0.0",
        "O(N) where N is the number of shard channels to subscribe to.",
        "Listen for messages published to the given shard channels",
        ssubscribe,
    ),
    cmd(
        "SUNSUBSCRIBE",
        -1,
        SUBF,
        KeySpec::range(1, -1, 1),
        "7.0.0",
        "O(N) where N is the number of clients already subscribed to a shard channel.",
        "Stop listening for messages posted to the given shard channels",
        sunsubscribe,
    ),
    cmd(
        "PUBLISH",
        3,
        PS.union(Flags::FAST).union(Flags::CHANNEL_ARG1).union(Flags::MAY_REPLICATE),
        KeySpec::None,
        "2.0.0",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is \
         the total number of subscribed patterns (by any client).",
        "Post a message to a channel",
        publish,
    ),
    cmd(
        "SPUBLISH",
        3,
        PS.union(Flags::FAST).union(Flags::CHANNEL_ARG1).union(Flags::MAY_REPLICATE),
        KeySpec::range(1, 1, 1),
        "7.0.0",
        "O(N) where N is the number of clients subscribed to the receiving shard channel.",
        "Post a message to a shard channel",
        spublish,
    ),
    CommandSpec::new(
        "PUBSUB",
        -2,
        Flags::NONE,
        KeySpec::None,
        Group::Pubsub,
        "A container for Pub/Sub commands",
        container,
    )
    .since("2.8.0")
    .complexity("Depends on subcommand.")
    .subs(PUBSUB_SUBS),
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
    // Replicas get it, so that their subscribers do (Redis 7.0 outside
    // cluster mode; the AOF does not hold it).
    cx.sess.fx.force_replicas_only();
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
