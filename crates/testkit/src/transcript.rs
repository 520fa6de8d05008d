//! Multi-connection transcripts: a script run step by step against a
//! server, every reply (and what arrived, or not, while a client waited)
//! recorded, so that the same script's transcripts from redis-server and
//! from Sluice can be compared. Script lines:
//!
//! - `A: CMD …` — send on connection A and read its reply now;
//! - `A_ CMD …` — the same, not recorded (replies that name client ids);
//! - `A> CMD …` — send without reading (the command blocks, or its
//!   replies are read later);
//! - `A<` — read one pending reply (up to 3 s);
//! - `A? MS` — record whatever A receives within MS ms (usually nothing);
//! - `A% FIELD` — record the `FIELD:` line of A's `INFO clients`;
//! - `A!` — close connection A;
//! - `~ MS` — sleep;
//!
//! `@B` in a command stands for connection B's client id. After a line
//! `@ids`, an integer reply equal to a connection's id is recorded as
//! `:@B` (the servers number their clients differently).

use std::path::Path;

use crate::diff::{self, Action, Options, Request, Step};

/// Parses a script into the runner's steps.
pub fn parse(script: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for (i, line) in script.lines().enumerate() {
        let line_no = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let step = |conn: char, action| Step {
            line: line_no,
            text: line.to_string(),
            conn: conn.to_string(),
            action,
        };
        if line == "@ids" {
            steps.push(step(' ', Action::NameIds));
            continue;
        }
        if let Some(ms) = line.strip_prefix('~') {
            steps.push(step(' ', Action::Sleep(ms.trim().parse().unwrap())));
            continue;
        }
        let mut chars = line.chars();
        let name = chars.next().unwrap();
        let op = chars.next().unwrap();
        let rest = chars.as_str().trim();
        let words = || Request::Words(rest.split_whitespace().map(str::to_string).collect());
        let action = match op {
            ':' => Action::Call { req: words(), check: crate::scenario::Check::Exact },
            '_' => Action::Unrecorded(words()),
            // Let the server take the command before the next step.
            '>' => Action::Send { req: words(), pause_ms: 30 },
            '<' => Action::Read,
            '?' => Action::Quiet(rest.parse().unwrap()),
            '%' => Action::InfoClients(rest.to_string()),
            '!' => Action::Close,
            _ => panic!("bad script line {line}"),
        };
        steps.push(step(name, action));
    }
    steps
}

/// Runs `script` on a fresh redis-server and on a fresh Sluice (`bin`,
/// two threads, so consecutive connections are served by different
/// threads), the whole script on one and then on the other, and asserts
/// the transcripts are identical. Skipped without the oracle.
/// `TRANSCRIPT_DUMP=1` prints redis-server's transcript.
pub fn check(bin: &Path, script: &str) {
    check_with(bin, &[], script)
}

/// [`check`] with extra server arguments for both servers.
pub fn check_with(bin: &Path, extra: &[&str], script: &str) {
    let opts = Options { flags: extra, ..Options::TRANSCRIPT };
    diff::check(bin, "transcript", &parse(script), &opts);
}
