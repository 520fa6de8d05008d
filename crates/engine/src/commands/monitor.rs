//! MONITOR: a client joins the MONITOR feed (`subsystems::monitor`),
//! which then shows it every command the server runs.

use std::sync::atomic::Ordering;

use resp::ReplyBuf;

use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;

pub const COMMANDS: &[Command] = &[Command::redis("MONITOR", monitor)];

fn monitor(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    if cx.caller.denies_blocking() {
        return Err(CmdError::err("MONITOR isn't allowed for DENY BLOCKING client"));
    }
    if cx.sess.monitor {
        // Already monitoring: Redis answers nothing at all.
        return Ok(());
    }
    cx.sess.monitor = true;
    cx.sess.update_modal();
    cx.sess.handle.monitor.store(true, Ordering::Relaxed);
    let mut m = cx.shared.monitors.write();
    m.push(cx.sess.handle.clone());
    cx.shared.nmonitors.store(m.len(), Ordering::Release);
    out.ok();
    Ok(())
}
