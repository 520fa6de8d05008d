//! The ACL check of `dispatch::check`, for each caller, and the ACL log
//! entries and INFO counters a refusal leaves.

use crate::core::dispatch::Caller;
use crate::core::error::CmdError;
use crate::core::session::Session;
use crate::core::shared::Shared;
use crate::core::spec::CommandSpec;

use super::log::Context;
use super::{ids, Check, Denied};

/// Checks `argv` against the session's user; on refusal logs it and
/// returns the caller's error text. The caller has already seen that the
/// user is not `free`.
#[cold]
pub fn check(
    shared: &Shared,
    sess: &mut Session,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    caller: Caller,
) -> Result<(), CmdError> {
    let id = crate::core::cmdstats::index_of(spec);
    let c = Check::new(spec, id, argv);
    let Err((d, pos)) = sess.user.check(&c) else { return Ok(()) };
    let name = ids().list[id].name;
    let context = match caller {
        Caller::Client if sess.multi.is_some() => Context::Multi,
        Caller::Exec => Context::Multi,
        Caller::Script { .. } => Context::Lua,
        _ => Context::Toplevel,
    };
    let object: &[u8] = match d {
        Denied::Cmd => name.as_bytes(),
        _ => argv[pos],
    };
    let user = sess.user.name.clone();
    log(shared, sess, d, context, object, &user);
    Err(match caller {
        Caller::Exec => CmdError::Msg(super::denied_text_exec(d).into()),
        Caller::Script { .. } => CmdError::err(super::denied_text_script(d)),
        _ => CmdError::Msg(super::denied_text(d, name).into()),
    })
}

/// Adds an ACL log entry (and counts it in INFO), with the client's
/// `CLIENT LIST` line as its client info.
pub fn log(
    shared: &Shared,
    sess: &mut Session,
    d: Denied,
    context: Context,
    object: &[u8],
    username: &[u8],
) {
    shared.acl.count_denied(d);
    let max = sess.conf(shared).acllog_max_len as usize;
    let cinfo = crate::subsystems::client_list::info_line(shared, sess);
    let now = crate::core::shared::unix_ms();
    shared.acl.log.lock().add(d, context, object, username, now, cinfo, max);
}
