//! The dispatcher: every policy between "a request was parsed" and "a
//! handler runs" lives here, in Redis's order: QUIT, lookup, arity, auth,
//! MULTI queueing, key locking, the call, error replies, reply modes, stats.

use resp::ReplyBuf;
use smallvec::SmallVec;
use store::Locks;

use crate::commands;
use crate::ctx::{Args, Ctx};
use crate::error::CmdError;
use crate::session::{ReplyMode, Session};
use crate::shared::{unix_ms, Shared};
use crate::spec::{CommandSpec, KeySpec};

/// Result of looking a request up in the table.
pub enum Lookup {
    Found(&'static CommandSpec),
    /// Not a command: the full error text is ready.
    Rejected(CmdError),
}

/// Finds the command (or subcommand) for `argv` and checks its arity.
pub fn lookup(argv: &[&[u8]]) -> Lookup {
    match lookup_full(argv) {
        Ok((_, spec)) => Lookup::Found(spec),
        Err(e) => Lookup::Rejected(e),
    }
}

/// Like [`lookup`], also returning the top-level command of a subcommand.
pub fn lookup_full(
    argv: &[&[u8]],
) -> Result<(&'static CommandSpec, &'static CommandSpec), CmdError> {
    let Some(top) = commands::find(argv[0]) else {
        return Err(unknown_command(argv));
    };
    let spec = if !top.subcommands.is_empty() && argv.len() >= 2 {
        match top.subcommands.iter().find(|s| argv[1].eq_ignore_ascii_case(s.name.as_bytes())) {
            Some(s) => s,
            None => {
                return Err(CmdError::UnknownSubcommand {
                    sub: argv[1].to_vec(),
                    cmd: argv[0].to_ascii_uppercase(),
                })
            }
        }
    } else {
        top
    };
    if !spec.arity.accepts(argv.len()) {
        return Err(CmdError::WrongArity(full_name(top, spec)));
    }
    Ok((top, spec))
}

/// Lower-case full name (`get`, `config|get`), as Redis's error texts use.
pub fn full_name(top: &CommandSpec, spec: &CommandSpec) -> String {
    if std::ptr::eq(top, spec) {
        top.name.to_ascii_lowercase()
    } else {
        format!("{}|{}", top.name.to_ascii_lowercase(), spec.name.to_ascii_lowercase())
    }
}

fn unknown_command(argv: &[&[u8]]) -> CmdError {
    // Redis formats with %s, which stops at a NUL byte.
    let cstr = |b: &[u8]| -> Vec<u8> { b.iter().copied().take_while(|&c| c != 0).collect() };
    let mut args: Vec<u8> = Vec::new();
    for a in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let a = cstr(a);
        args.push(b'\'');
        args.extend_from_slice(&a[..a.len().min(room)]);
        args.extend_from_slice(b"' ");
    }
    let name = cstr(argv[0]);
    let mut v = b"ERR unknown command '".to_vec();
    v.extend_from_slice(&name[..name.len().min(128)]);
    v.extend_from_slice(b"', with args beginning with: ");
    v.extend_from_slice(&args);
    CmdError::Bytes(v)
}

/// Executes one request and appends its reply to `out`.
pub fn execute(shared: &Shared, sess: &mut Session, argv: &[&[u8]], out: &mut ReplyBuf) {
    execute_hinted(shared, sess, argv, out, Hint::default());
}

/// What the connection already computed for a request: the batch's clock
/// and where `argv[1]` lives (from its prefetch), so that the dispatcher
/// and the handler need not recompute them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hint {
    /// Unix ms for the command's clock; 0 to read the clock here.
    pub now: i64,
    /// Stripe and hash of `argv[1]` in the selected database.
    pub key: Option<store::Prefetch>,
}

/// [`execute`] with what the caller already knows.
pub fn execute_hinted(
    shared: &Shared,
    sess: &mut Session,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    hint: Hint,
) {
    debug_assert!(!argv.is_empty());
    // Redis answers QUIT before anything else, whatever its arguments.
    if argv[0].eq_ignore_ascii_case(b"QUIT") {
        if sess.reply_mode == ReplyMode::On {
            out.ok();
        }
        sess.close_after_reply = true;
        return;
    }
    let mark = out.mark();
    let spec = match lookup_full(argv) {
        Ok((top, spec)) => {
            sess.last_cmd = Some((top, spec));
            spec
        }
        Err(e) => {
            reject(shared, sess, argv, &e, out);
            return;
        }
    };
    if !sess.authenticated && !spec.flags.has(crate::spec::Flags::NO_AUTH) {
        reject(shared, sess, argv, &CmdError::NoAuth, out);
        return;
    }
    if let Some(m) = &mut sess.multi {
        if !commands::tx::runs_inside_multi(spec) {
            m.queued.push(argv.iter().map(|a| a.to_vec()).collect());
            sess.handle
                .multi_len
                .store(m.queued.len() as i64, std::sync::atomic::Ordering::Relaxed);
            out.simple(b"QUEUED");
            apply_reply_mode(sess, out, mark);
            return;
        }
    }
    let now = if hint.now != 0 { hint.now } else { unix_ms() };
    let mut keys = Locks::new(&shared.store, now);
    match hint.key {
        Some(t)
            if argv.len() > 1
                && matches!(spec.keys, KeySpec::Range { first: 1, .. })
                && t.id() as usize / shared.store.stripes() == sess.db =>
        {
            keys.remember(argv[1], t);
            lock_keys_hinted(shared, sess.db, spec, argv, &mut keys, t.id());
        }
        _ => lock_keys(shared, sess.db, spec, argv, &mut keys),
    }
    call(shared, sess, &mut keys, spec, argv, out);
    keys.take_ready(&mut sess.ready);
    drop(keys);
    if !sess.ready.is_empty() {
        // Clients blocked on keys this command filled are served now,
        // before this connection's next command (Redis's
        // handleClientsBlockedOnKeys after call()).
        let mut ready = std::mem::take(&mut sess.ready);
        crate::blocking::serve_ready(shared, &mut ready);
        sess.ready = ready;
    }
    if sess.blocked.is_none() {
        apply_reply_mode(sess, out, mark);
    }
}

/// Delivers the reply of a blocking command whose wait ended (the
/// connection calls this), honouring CLIENT REPLY as if it had just run.
pub fn deliver_blocked(sess: &mut Session, out: &mut ReplyBuf, reply: &[u8]) {
    let mark = out.mark();
    out.raw(reply);
    apply_reply_mode(sess, out, mark);
}

fn reject(shared: &Shared, sess: &mut Session, argv: &[&[u8]], e: &CmdError, out: &mut ReplyBuf) {
    sess.stats.rejected_calls += 1;
    if let Some(m) = &mut sess.multi {
        m.dirty = true;
    }
    let mark = out.mark();
    if argv[0].eq_ignore_ascii_case(b"EXEC") {
        // Redis turns any rejection of EXEC into an abort of the
        // transaction (with or without MULTI) and drops the WATCHes.
        commands::tx::abort(shared, sess);
        let text = e.text();
        let why = text.strip_prefix(b"ERR ").unwrap_or(&text);
        let mut line = b"EXECABORT Transaction discarded because of: ".to_vec();
        line.extend_from_slice(why);
        out.error(&line);
    } else {
        e.write(out);
    }
    apply_reply_mode(sess, out, mark);
}

fn apply_reply_mode(sess: &mut Session, out: &mut ReplyBuf, mark: resp::Mark) {
    match sess.reply_mode {
        ReplyMode::On => {}
        ReplyMode::Off => out.truncate(mark),
        ReplyMode::Skip => {
            out.truncate(mark);
            sess.reply_mode = ReplyMode::On;
        }
        ReplyMode::SkipNext => {
            out.truncate(mark);
            sess.reply_mode = ReplyMode::Skip;
        }
    }
}

/// Collects the lock ids a command needs in database `db`.
pub fn key_ids(
    shared: &Shared,
    db: usize,
    spec: &CommandSpec,
    argv: &[&[u8]],
    ids: &mut SmallVec<[u32; 8]>,
) -> Scope {
    let store = &shared.store;
    match spec.keys {
        KeySpec::None => Scope::Keys,
        KeySpec::Range { first, last, step } => {
            let argc = argv.len() as i32;
            let last = if last < 0 { argc + last } else { last.min(argc - 1) };
            let mut i = first;
            while first > 0 && i <= last && i < argc {
                ids.push(store.global_id(db, store.stripe_of(argv[i as usize])));
                i += step.max(1);
            }
            Scope::Keys
        }
        KeySpec::CustomOrDb { whole_db, .. } if whole_db(argv) => Scope::Db,
        KeySpec::Custom { find, .. } | KeySpec::CustomOrDb { find, .. } => {
            let mut list = crate::spec::KeyList::new();
            find(argv, db, &mut list);
            for (d, k) in list {
                if d < store.databases() {
                    ids.push(store.global_id(d, store.stripe_of(k)));
                }
            }
            Scope::Keys
        }
        KeySpec::WholeDb => Scope::Db,
        KeySpec::AllDbs => Scope::All,
    }
}

/// How much of the keyspace a command (or transaction) locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Keys,
    Db,
    All,
}

/// Locks a range-keyed command's stripes when the first key's is known.
fn lock_keys_hinted(
    shared: &Shared,
    db: usize,
    spec: &CommandSpec,
    argv: &[&[u8]],
    keys: &mut Locks,
    first_id: u32,
) {
    let KeySpec::Range { last, step, .. } = spec.keys else { unreachable!("checked by caller") };
    let argc = argv.len() as i32;
    let last = if last < 0 { argc + last } else { last.min(argc - 1) };
    let mut ids: SmallVec<[u32; 8]> = SmallVec::new();
    ids.push(first_id);
    let store = &shared.store;
    let mut i = 1 + step.max(1);
    while i <= last && i < argc {
        ids.push(store.global_id(db, store.stripe_of(argv[i as usize])));
        i += step.max(1);
    }
    keys.acquire(&mut ids);
}

fn lock_keys(shared: &Shared, db: usize, spec: &CommandSpec, argv: &[&[u8]], keys: &mut Locks) {
    let mut ids = SmallVec::new();
    match key_ids(shared, db, spec, argv, &mut ids) {
        Scope::Keys => keys.acquire(&mut ids),
        Scope::Db => keys.acquire_db(db),
        Scope::All => {
            for d in 0..shared.store.databases() {
                keys.acquire_db(d);
            }
        }
    }
}

/// Runs a handler with its locks held: the reply, or on error the error
/// line in place of any partial reply.
pub fn call<'a>(
    shared: &'a Shared,
    sess: &mut Session,
    keys: &mut Locks<'a>,
    spec: &'static CommandSpec,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
) {
    // A subcommand's own name is argv[1]; its arguments start after it.
    let start = if argv[0].eq_ignore_ascii_case(spec.name.as_bytes()) { 1 } else { 2 };
    let mut args = Args::new(argv, start);
    let mark = out.mark();
    sess.stats.commands += 1;
    let db = sess.db;
    let mut cx = Ctx { shared, sess, keys, db, spec };
    if let Err(e) = (spec.handler)(&mut cx, &mut args, out) {
        out.truncate(mark);
        e.write(out);
        sess.stats.failed_calls += 1;
    }
}
