//! The one differential runner: a script of [`Step`]s played on the oracle
//! redis-server and on Sluice, each step's answer recorded on both sides
//! and compared.
//!
//! Three inputs parse into the same steps: the text scenarios
//! ([`crate::scenario`], `tests/scenarios/*.txt`), the effects scenarios
//! (the same format, `tests/effects/*.txt`) and the multi-connection
//! transcripts ([`crate::transcript`]). What differs between them is an
//! [`Options`] value:
//!
//! - [`Order`]: the scenarios play each step on both servers before the
//!   next (`Lockstep`); a transcript plays the whole script on the oracle,
//!   then on Sluice (`OneThenOther`), so each server sees the script's own
//!   timing (blocking timeouts, `A? MS` windows);
//! - [`Conns`]: a scenario's connection is dropped after a failure or
//!   `QUIT` and reopened by the next line, as `redis-cli` does; a
//!   transcript's connections live until `A!`, know their client ids, and
//!   record a failure's own words;
//! - `effects`: besides the replies, compare the propagated stream, the
//!   keyspace events and `rdb_changes_since_last_save` after every step
//!   ([`crate::effects::Watch`]);
//! - the servers' flags and whether they share a scratch directory.
//!
//! `SCENARIO_SELF_CHECK=1` puts a second redis-server where Sluice would
//! be (not with `effects`, which needs Sluice's `DEBUG EFFECTS`), to prove
//! a script deterministic; `SCENARIO_DUMP=1` (or `TRANSCRIPT_DUMP=1`)
//! prints what the oracle answered. [`Servers`] and [`Pair`] are the same
//! two servers for the randomized tests, which compare with
//! [`crate::scenario::same`] themselves.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::scenario::{same, Check};
use crate::{escape, scratch_dir, Client, RedisServer, TestServer};

/// One step of a script, on one named connection.
#[derive(Clone, Debug)]
pub struct Step {
    /// The line in its file or script (for messages).
    pub line: usize,
    /// The line as written.
    pub text: String,
    /// The connection it runs on.
    pub conn: String,
    pub action: Action,
}

/// What a step does.
#[derive(Clone, Debug)]
pub enum Action {
    /// Send, read one reply, record it; compared under `check`.
    Call { req: Request, check: Check },
    /// Send and read the reply without recording it (a failure panics).
    Unrecorded(Request),
    /// Send without reading (the command blocks, or its reply is read
    /// later), then pause `pause_ms` so the server takes it first.
    Send { req: Request, pause_ms: u64 },
    /// Read one pending reply and record it.
    Read,
    /// Record whatever arrives within the milliseconds, and whether the
    /// server closed the connection.
    Quiet(u64),
    /// Record the `FIELD:` line of `INFO clients`.
    InfoClients(String),
    /// Close the connection, then pause 30 ms.
    Close,
    /// Pause.
    Sleep(u64),
    /// From here on, an integer reply equal to a connection's client id is
    /// recorded as `:@NAME` (the servers number clients differently).
    NameIds,
}

/// A request's bytes, or its words (`@B` standing for connection B's
/// client id, resolved on each server).
#[derive(Clone, Debug)]
pub enum Request {
    Bytes(Vec<u8>),
    Words(Vec<String>),
}

/// Which server runs a step first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Each step on the oracle, then on Sluice, then the next step; pauses
    /// are taken once, for both.
    Lockstep,
    /// The whole script on the oracle, then the whole script on Sluice.
    OneThenOther,
}

/// How connections behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conns {
    /// As `redis-cli`: a failure (recorded `<closed>`, `<timeout>`, …) or
    /// `QUIT` drops the connection, and the next step reopens it.
    Reconnecting,
    /// Open until [`Action::Close`]; each asks `CLIENT ID` when it opens; a
    /// failure is recorded in its own words and the connection is kept.
    Named,
}

/// What differs between the runs of a script.
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    pub order: Order,
    pub conns: Conns,
    /// Compare the effects (propagation, events, dirty counts) too.
    pub effects: bool,
    /// Flags for both servers.
    pub flags: &'a [&'a str],
    /// Flags for the oracle only.
    pub oracle_flags: &'a [&'a str],
    /// Run both servers in one fresh scratch directory with this tag
    /// (else each in its own).
    pub scratch: Option<&'a str>,
    /// How long a read waits.
    pub timeout: Duration,
}

impl Options<'_> {
    /// The text scenarios' options.
    pub const SCENARIO: Options<'static> = Options {
        order: Order::Lockstep,
        conns: Conns::Reconnecting,
        effects: false,
        flags: &[],
        oracle_flags: &[],
        scratch: Some("pair"),
        timeout: Duration::from_secs(3),
    };

    /// The effects scenarios': diskless full syncs start at once on the
    /// oracle (its replica stream is read after `SYNC`).
    pub const EFFECTS: Options<'static> = Options {
        effects: true,
        oracle_flags: &["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"],
        scratch: Some("effects"),
        ..Options::SCENARIO
    };

    /// The multi-connection transcripts'.
    pub const TRANSCRIPT: Options<'static> = Options {
        order: Order::OneThenOther,
        conns: Conns::Named,
        effects: false,
        flags: &[],
        oracle_flags: &[],
        scratch: None,
        timeout: Duration::from_secs(3),
    };
}

/// A step whose answers differ.
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub scenario: String,
    pub line: usize,
    pub text: String,
    pub redis: Vec<u8>,
    pub sluice: Vec<u8>,
}

impl Mismatch {
    /// The command name (upper case) of the line, for grouping.
    pub fn command(&self) -> String {
        let mut words = self.text.split_whitespace().peekable();
        if matches!(words.peek(), Some(&"@any") | Some(&"@sorted") | Some(&"@pairs")) {
            words.next();
        }
        let first = words.next().unwrap_or("").to_ascii_uppercase();
        match first.as_str() {
            "CLIENT" | "CONFIG" | "OBJECT" => {
                format!("{first} {}", words.next().unwrap_or("").to_ascii_uppercase())
            }
            _ => first,
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}:{}: {}", self.scenario, self.line, self.text)?;
        writeln!(f, "  redis:  {}", clip(&self.redis))?;
        write!(f, "  sluice: {}", clip(&self.sluice))
    }
}

/// A reply for a message: escaped, long ones cut short.
fn clip(b: &[u8]) -> String {
    const MAX: usize = 300;
    if b.len() <= MAX {
        escape(b)
    } else {
        format!("{}... ({} bytes)", escape(&b[..MAX]), b.len())
    }
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Steps whose answers differ.
    pub mismatches: Vec<Mismatch>,
    /// Differences in the effects (see [`crate::effects::Watch`]).
    pub problems: Vec<String>,
    /// How many answers were compared.
    pub compared: usize,
}

impl Outcome {
    /// Panics with every difference, if there is one.
    pub fn assert_same(&self, name: &str) {
        if self.mismatches.is_empty() && self.problems.is_empty() {
            return;
        }
        let mut report: Vec<String> = self.mismatches.iter().map(|m| m.to_string()).collect();
        report.extend(self.problems.iter().cloned());
        panic!(
            "{name}: {} of {} answers differ from redis-server{}:\n{}",
            self.mismatches.len(),
            self.compared,
            if self.problems.is_empty() {
                String::new()
            } else {
                format!(", and {} effects", self.problems.len())
            },
            report.join("\n")
        );
    }
}

/// One server's side of a run: its named connections.
struct Side {
    port: u16,
    conns: Conns,
    timeout: Duration,
    open: HashMap<String, (Client, u64)>,
    /// Every `Named` connection's id, closed ones included.
    ids: Vec<(String, u64)>,
    name_ids: bool,
}

impl Side {
    fn new(port: u16, conns: Conns, timeout: Duration) -> Side {
        Side { port, conns, timeout, open: HashMap::new(), ids: Vec::new(), name_ids: false }
    }

    /// The connection `name`, opened if needed.
    fn conn(&mut self, name: &str) -> io::Result<&mut Client> {
        if !self.open.contains_key(name) {
            let mut c = Client::connect(self.port)?;
            c.set_timeout(self.timeout);
            let mut id = 0;
            if self.conns == Conns::Named {
                let r = c.cmd(&["CLIENT", "ID"]).expect("client id");
                id = std::str::from_utf8(&r[1..r.len() - 2]).unwrap().parse().unwrap();
                self.ids.retain(|(n, _)| n != name);
                self.ids.push((name.to_string(), id));
            }
            self.open.insert(name.to_string(), (c, id));
        }
        Ok(&mut self.open.get_mut(name).expect("just opened").0)
    }

    fn named(&mut self, name: &str) -> &mut Client {
        self.conn(name).expect("connect")
    }

    fn bytes(&mut self, req: &Request) -> Vec<u8> {
        match req {
            Request::Bytes(b) => b.clone(),
            Request::Words(w) => {
                let args: Vec<String> = w
                    .iter()
                    .map(|w| match w.strip_prefix('@') {
                        Some(n) if n.chars().count() == 1 => {
                            self.named(n);
                            self.open[n].1.to_string()
                        }
                        _ => w.clone(),
                    })
                    .collect();
                let mut out = Vec::new();
                resp::write_command(&mut out, &args);
                out
            }
        }
    }

    /// Runs one step; what it recorded, if anything.
    fn act(&mut self, step: &Step) -> Option<Vec<u8>> {
        let conn = step.conn.as_str();
        let got = match &step.action {
            Action::Sleep(_) => return None,
            Action::NameIds => {
                self.name_ids = true;
                return None;
            }
            Action::Close => {
                self.open.remove(conn);
                return None;
            }
            Action::Unrecorded(req) => {
                let b = self.bytes(req);
                let c = self.named(conn);
                c.send_raw(&b).and_then(|()| c.read_reply()).expect("command");
                return None;
            }
            Action::Send { req, .. } => {
                let b = self.bytes(req);
                match self.conns {
                    // A scenario reads the failure, if any, at its `@await`.
                    Conns::Reconnecting => {
                        if let Ok(c) = self.conn(conn) {
                            let _ = c.send_raw(&b);
                        }
                    }
                    Conns::Named => self.named(conn).send_raw(&b).expect("send"),
                }
                return None;
            }
            Action::Call { req, .. } => {
                let b = self.bytes(req);
                let r = self.conn(conn).and_then(|c| c.send_raw(&b).and_then(|()| c.read_reply()));
                let quit = r.is_ok() && is_quit(&b);
                self.answer(conn, r, quit, true)
            }
            Action::Read => {
                let r = self.conn(conn).and_then(|c| c.read_reply());
                self.answer(conn, r, false, false)
            }
            Action::Quiet(ms) => {
                let (got, closed) =
                    self.named(conn).read_quiet(Duration::from_millis(*ms)).expect("read");
                [got, format!(" closed={closed}").into_bytes()].concat()
            }
            Action::InfoClients(field) => {
                let info = self.named(conn).cmd(&["INFO", "clients"]).expect("INFO clients");
                let info = String::from_utf8_lossy(&info).into_owned();
                let want = format!("{field}:");
                info.lines().find(|l| l.starts_with(&want)).unwrap_or("missing").as_bytes().to_vec()
            }
        };
        Some(self.name_ids(got))
    }

    /// A reply, or a failure as this side's connections record it.
    fn answer(&mut self, conn: &str, r: io::Result<Vec<u8>>, quit: bool, call: bool) -> Vec<u8> {
        match (self.conns, r) {
            (Conns::Reconnecting, Ok(b)) => {
                if quit {
                    self.open.remove(conn);
                }
                b
            }
            (Conns::Reconnecting, Err(e)) => {
                self.open.remove(conn);
                use io::ErrorKind as K;
                let why = match e.kind() {
                    K::UnexpectedEof | K::ConnectionReset | K::BrokenPipe => "closed".to_string(),
                    K::TimedOut | K::WouldBlock => "timeout".to_string(),
                    _ => e.to_string(),
                };
                format!("<{why}>").into_bytes()
            }
            (Conns::Named, Ok(b)) => b,
            (Conns::Named, Err(e)) if call => format!("error: {e}").into_bytes(),
            (Conns::Named, Err(e)) => format!("error: {:?}", e.kind()).into_bytes(),
        }
    }

    /// Under [`Action::NameIds`], connections' ids in integer replies
    /// become their names.
    fn name_ids(&self, mut got: Vec<u8>) -> Vec<u8> {
        if !self.name_ids {
            return got;
        }
        for (n, id) in &self.ids {
            let from = format!(":{id}\r\n").into_bytes();
            let to = format!(":@{n}\r\n").into_bytes();
            got = replace(&got, &from, &to);
        }
        got
    }
}

fn replace(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// Whether `bytes` is a `QUIT` request (the server closes after replying).
pub(crate) fn is_quit(bytes: &[u8]) -> bool {
    let b = bytes.strip_prefix(b"*").unwrap_or(bytes);
    let name = b.split(|&c| c == b'\n').nth(2).unwrap_or(b"");
    name.strip_suffix(b"\r").unwrap_or(name).eq_ignore_ascii_case(b"QUIT")
}

/// The pause a step asks for after it ran (taken once in lockstep).
fn pause(step: &Step) -> u64 {
    match step.action {
        Action::Send { pause_ms, .. } => pause_ms,
        Action::Close => 30,
        Action::Sleep(ms) => ms,
        _ => 0,
    }
}

/// How a step's answers are compared.
fn check_of(step: &Step) -> Check {
    match step.action {
        Action::Call { check, .. } => check,
        _ => Check::Exact,
    }
}

fn dumping() -> bool {
    ["SCENARIO_DUMP", "TRANSCRIPT_DUMP", "BLOCKING_DUMP"]
        .iter()
        .any(|k| std::env::var_os(k).is_some())
}

/// Plays `steps` on the oracle on `redis_port` and Sluice on
/// `sluice_port` as `opts` says; `name` is used in messages.
pub fn run(
    name: &str,
    steps: &[Step],
    redis_port: u16,
    sluice_port: u16,
    opts: &Options,
) -> Outcome {
    let mut redis = Side::new(redis_port, opts.conns, opts.timeout);
    let mut sluice = Side::new(sluice_port, opts.conns, opts.timeout);
    let mut watch = opts.effects.then(|| crate::effects::Watch::start(redis_port, sluice_port));
    let mut out = Outcome::default();
    let compare = |out: &mut Outcome, step: &Step, a: Option<Vec<u8>>, b: Option<Vec<u8>>| {
        let (Some(a), Some(b)) = (a, b) else { return };
        if dumping() {
            eprintln!("{name}:{}: {}\n  => {}", step.line, step.text, escape(&a));
        }
        out.compared += 1;
        if !same(&a, &b, check_of(step)) {
            out.mismatches.push(Mismatch {
                scenario: name.to_string(),
                line: step.line,
                text: step.text.clone(),
                redis: a,
                sluice: b,
            });
        }
    };
    match opts.order {
        Order::Lockstep => {
            for step in steps {
                let (a, b) = (redis.act(step), sluice.act(step));
                let ms = pause(step);
                if ms > 0 {
                    std::thread::sleep(Duration::from_millis(ms));
                }
                compare(&mut out, step, a, b);
                if let Some(w) = watch.as_mut().filter(|_| !matches!(step.action, Action::Sleep(_)))
                {
                    if let Some(p) = w.after_step(name, step) {
                        out.problems.push(p);
                    }
                }
            }
        }
        Order::OneThenOther => {
            let play = |side: &mut Side| -> Vec<Option<Vec<u8>>> {
                steps
                    .iter()
                    .map(|step| {
                        let got = side.act(step);
                        let ms = pause(step);
                        if ms > 0 {
                            std::thread::sleep(Duration::from_millis(ms));
                        }
                        got
                    })
                    .collect()
            };
            let want = play(&mut redis);
            let got = play(&mut sluice);
            for ((step, a), b) in steps.iter().zip(want).zip(got) {
                compare(&mut out, step, a, b);
            }
        }
    }
    if let Some(w) = watch {
        out.problems.extend(w.finish(name));
    }
    out
}

/// Starts fresh servers as `opts` says, plays `steps` and panics on any
/// difference. Skipped (returns) when the oracle is missing and not
/// required.
pub fn check(bin: &Path, name: &str, steps: &[Step], opts: &Options) {
    let Some(servers) = Servers::start_with(bin, opts) else { return };
    let outcome = run(name, steps, servers.redis_port(), servers.sluice_port, opts);
    drop(servers);
    outcome.assert_same(name);
}

/// A running oracle and a running server under test.
pub struct Servers {
    redis: RedisServer,
    sluice_port: u16,
    _sluice: Box<dyn Any>,
    /// Last: fields drop in order, so the servers are gone before their
    /// directory is removed.
    _scratch: Scratch,
}

/// A scratch directory removed on drop.
struct Scratch(Option<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Servers {
    /// Starts redis-server and `sluice_bin` with the defaults (each in its
    /// own directory), for the randomized tests.
    pub fn start(sluice_bin: &Path) -> Option<Servers> {
        Self::start_with(sluice_bin, &Options { scratch: None, ..Options::SCENARIO })
    }

    /// Starts redis-server and `sluice_bin` as `opts` says; with
    /// `SCENARIO_SELF_CHECK=1` (and no effects) a second redis-server
    /// stands in for Sluice. `None` when the oracle is missing and not
    /// required (see [`crate::oracle_required`]).
    pub fn start_with(sluice_bin: &Path, opts: &Options) -> Option<Servers> {
        let scratch = Scratch(opts.scratch.map(scratch_dir));
        let dir = scratch.0.clone();
        let cwd = dir.as_deref();
        let oracle: Vec<&str> = opts.flags.iter().chain(opts.oracle_flags).copied().collect();
        let redis = RedisServer::start_with(&oracle, cwd)?;
        let (sluice_port, guard): (u16, Box<dyn Any>) =
            if std::env::var_os("SCENARIO_SELF_CHECK").is_some() && !opts.effects {
                let r = RedisServer::start_with(&oracle, cwd).expect("second oracle");
                (r.port(), Box::new(r))
            } else {
                let t = TestServer::start_with(sluice_bin, opts.flags, cwd);
                (t.port(), Box::new(t))
            };
        Some(Servers { redis, sluice_port, _sluice: guard, _scratch: scratch })
    }

    /// The oracle's port.
    pub fn redis_port(&self) -> u16 {
        self.redis.port()
    }

    /// The port of the server under test.
    pub fn sluice_port(&self) -> u16 {
        self.sluice_port
    }

    /// A fresh connection to each.
    pub fn connect(&self) -> Pair {
        Pair {
            redis: self.redis.client(),
            sluice: Client::connect(self.sluice_port).expect("connect to sluice"),
        }
    }
}

/// One connection to each server.
pub struct Pair {
    pub redis: Client,
    pub sluice: Client,
}

impl Pair {
    /// Sends `args` to both; their replies (redis's first).
    pub fn both(&mut self, args: &[String]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let a = self.redis.cmd(args).map_err(|e| format!("redis: {e}"))?;
        let b = self.sluice.cmd(args).map_err(|e| format!("sluice: {e}"))?;
        Ok((a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quit_requests_and_id_names() {
        assert!(is_quit(b"*1\r\n$4\r\nquit\r\n"));
        assert!(!is_quit(b"*1\r\n$4\r\nPING\r\n"));
        assert_eq!(replace(b":7\r\n:17\r\n", b":7\r\n", b":@A\r\n"), b":@A\r\n:17\r\n");
    }
}
