//! What a `SCRIPT DEBUG YES` session writes is undone when it ends.
//!
//! Redis runs such a session in a forked child, whose writes vanish with
//! it. Sluice has no fork: the session runs in the server, and before a
//! write command of the script runs, each key it may write (its key
//! specification's keys, in their databases) is saved once, as `DUMP`
//! and `PTTL` see it. When the session ends every saved key is put back
//! (`RESTORE … REPLACE`, or `DEL` for one that did not exist), through
//! the one door under the locks the script holds, as a replay: they are
//! not the script's commands, so neither the session's ACL user nor the
//! server's state (a read-only replica, memory) refuses them, and they
//! are not fed to MONITOR. Nothing of the
//! session is propagated (AOF, replicas): neither the script's writes nor
//! their undoing. What is not undone, unlike a fork: the keyspace
//! notifications the writes sent, their `WATCH` invalidations, their
//! command statistics and dirty counts. A write whose keys cannot be
//! known beforehand (FLUSHDB, FLUSHALL, SWAPDB) is refused in such a
//! session; job-queue commands are not rolled back.

use std::cell::RefCell;
use std::collections::HashSet;

use resp::{Frame, ReplyBuf};
use store::Locks;

use crate::core::dispatch::Caller;
use crate::core::door::{self, Hold};
use crate::core::session::Session;
use crate::core::shared::Shared;
use crate::core::spec::{CommandSpec, KeyList, KeySpec};

/// The keys saved so far: (database, key) and what it held (payload and
/// milliseconds to live, -1 for none), `None` when it did not exist.
type Saved = Vec<(usize, Vec<u8>, Option<(Vec<u8>, i64)>)>;

#[derive(Default)]
struct Undo {
    saved: Saved,
    seen: HashSet<(usize, Vec<u8>)>,
}

thread_local! {
    static UNDO: RefCell<Option<Undo>> = const { RefCell::new(None) };
}

/// A `YES` session starts: its writes will be undone.
pub(crate) fn begin() {
    UNDO.with(|u| *u.borrow_mut() = Some(Undo::default()));
}

/// Whether the running script's writes are to be undone (and not
/// propagated).
#[inline]
pub(crate) fn active() -> bool {
    UNDO.with(|u| u.borrow().is_some())
}

/// Runs `argv` in database `db` (an internal call: its propagation is
/// dropped); the reply as a frame.
fn run<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    db: usize,
    argv: &[&[u8]],
) -> Option<Frame> {
    let spec = door::lookup(shared, argv).ok()?;
    let saved_db = std::mem::replace(&mut sess.db, db);
    let ops = sess.fx.ops_len();
    let mut buf = ReplyBuf::new();
    // The debugged run holds every database: the keys' stripes are held.
    door::run(shared, sess, keys, spec, argv, &mut buf, Caller::Replay, Hold::Held);
    sess.fx.drop_ops_from(ops);
    sess.db = saved_db;
    let bytes = buf.to_vec();
    resp::parse_frame(&bytes).ok().flatten().map(|(f, _)| f)
}

/// Before a write command of the script: saves the keys it may write.
/// `Err` is the error the script gets for a command that cannot be undone.
pub(crate) fn save<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &CommandSpec,
    argv: &[&[u8]],
) -> Result<(), &'static [u8]> {
    let db = sess.db;
    let mut list: KeyList = KeyList::new();
    match spec.keys {
        KeySpec::None | KeySpec::Jobs => {}
        KeySpec::Range { first, last, step } => {
            let argc = argv.len() as i32;
            let last = if last < 0 { argc + last } else { last.min(argc - 1) };
            let mut i = first;
            while first > 0 && i <= last && i < argc {
                list.push((db, argv[i as usize]));
                i += step.max(1);
            }
        }
        KeySpec::Custom { find, .. } | KeySpec::CustomOrDb { find, .. } => {
            find(argv, db, &mut list)
        }
        KeySpec::WholeDb | KeySpec::DbWalk | KeySpec::AllDbs => {
            return Err(b"ERR This command cannot be undone at the end of a SCRIPT DEBUG YES \
                        session: use SCRIPT DEBUG SYNC");
        }
    }
    for (d, k) in list {
        let fresh =
            UNDO.with(|u| u.borrow_mut().as_mut().is_some_and(|u| u.seen.insert((d, k.to_vec()))));
        if !fresh {
            continue;
        }
        let was = match run(shared, sess, keys, d, &[b"DUMP", k]) {
            Some(Frame::Bulk(Some(payload))) => {
                let ttl = match run(shared, sess, keys, d, &[b"PTTL", k]) {
                    Some(Frame::Integer(t)) if t > 0 => t,
                    _ => -1,
                };
                Some((payload.to_vec(), ttl))
            }
            _ => None,
        };
        UNDO.with(|u| {
            if let Some(u) = u.borrow_mut().as_mut() {
                u.saved.push((d, k.to_vec(), was));
            }
        });
    }
    Ok(())
}

/// The session ends: every saved key is put back as it was.
pub(crate) fn finish<'a>(shared: &'a Shared, sess: &mut Session, keys: &mut Locks<'a>) {
    let Some(undo) = UNDO.with(|u| u.borrow_mut().take()) else { return };
    for (db, key, was) in undo.saved.into_iter().rev() {
        match was {
            None => {
                run(shared, sess, keys, db, &[b"DEL", &key]);
            }
            Some((payload, ttl)) => {
                let ttl = if ttl > 0 { ttl.to_string() } else { "0".to_string() };
                run(
                    shared,
                    sess,
                    keys,
                    db,
                    &[b"RESTORE", &key, ttl.as_bytes(), &payload, b"REPLACE"],
                );
            }
        }
    }
}
