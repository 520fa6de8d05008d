//! Generic key commands: DEL, EXISTS, …

use resp::ReplyBuf;

use crate::ctx::{Args, Ctx};
use crate::error::CmdResult;
use crate::spec::{CommandSpec, Flags, Group, KeySpec};

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "DEL",
        -2,
        Flags::WRITE,
        KeySpec::range(1, -1, 1),
        Group::Generic,
        "Deletes one or more keys.",
        del,
    )
    .complexity("O(N) where N is the number of keys that will be removed."),
    CommandSpec::new(
        "EXISTS",
        -2,
        Flags::READONLY.union(Flags::FAST),
        KeySpec::range(1, -1, 1),
        Group::Generic,
        "Determines whether one or more keys exist.",
        exists,
    )
    .since("1.0.0")
    .complexity("O(N) where N is the number of keys to check."),
];

fn del(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut n = 0;
    while let Some(k) = args.next() {
        if cx.delete(k).is_some() {
            n += 1;
        }
    }
    out.int(n);
    Ok(())
}

fn exists(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut n = 0;
    while let Some(k) = args.next() {
        if cx.exists(k) {
            n += 1;
        }
    }
    out.int(n);
    Ok(())
}
