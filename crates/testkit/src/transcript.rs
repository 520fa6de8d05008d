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

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::{escape, Client, RedisServer, TestServer};

struct Conns {
    port: u16,
    open: HashMap<char, (Client, u64)>,
    /// Every connection's id, closed ones included.
    ids: Vec<(char, u64)>,
}

impl Conns {
    fn get(&mut self, name: char) -> &mut Client {
        if !self.open.contains_key(&name) {
            let mut c = Client::connect(self.port).expect("connect");
            c.set_timeout(Duration::from_secs(3));
            let id = c.cmd(&["CLIENT", "ID"]).expect("client id");
            let id = std::str::from_utf8(&id[1..id.len() - 2]).unwrap().parse().unwrap();
            self.ids.retain(|(n, _)| *n != name);
            self.ids.push((name, id));
            self.open.insert(name, (c, id));
        }
        &mut self.open.get_mut(&name).expect("just opened").0
    }

    fn id(&mut self, name: char) -> u64 {
        self.get(name);
        self.open[&name].1
    }
}

fn words(conns: &mut Conns, text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| match w.strip_prefix('@') {
            Some(n) if n.len() == 1 => conns.id(n.chars().next().unwrap()).to_string(),
            _ => w.to_string(),
        })
        .collect()
}

/// Runs `script` against the server on `port`; returns the transcript.
pub fn run(port: u16, script: &str) -> Vec<String> {
    let mut conns = Conns { port, open: HashMap::new(), ids: Vec::new() };
    let mut log = Vec::new();
    let mut ids = false;
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if line == "@ids" {
            ids = true;
            continue;
        }
        if let Some(ms) = line.strip_prefix('~') {
            std::thread::sleep(Duration::from_millis(ms.trim().parse().unwrap()));
            continue;
        }
        let mut chars = line.chars();
        let name = chars.next().unwrap();
        let op = chars.next().unwrap();
        let rest = chars.as_str().trim();
        let got = match op {
            ':' => {
                let args = words(&mut conns, rest);
                match conns.get(name).cmd(&args) {
                    Ok(r) => escape(&r),
                    Err(e) => format!("error: {e}"),
                }
            }
            '_' => {
                let args = words(&mut conns, rest);
                conns.get(name).cmd(&args).expect("command");
                continue;
            }
            '>' => {
                let args = words(&mut conns, rest);
                conns.get(name).send(&args).expect("send");
                // Let the server take the command before the next step.
                std::thread::sleep(Duration::from_millis(30));
                continue;
            }
            '<' => match conns.get(name).read_reply() {
                Ok(r) => escape(&r),
                Err(e) => format!("error: {:?}", e.kind()),
            },
            '?' => {
                let (got, closed) = conns
                    .get(name)
                    .read_quiet(Duration::from_millis(rest.parse().unwrap()))
                    .unwrap();
                format!("{} closed={closed}", escape(&got))
            }
            '%' => {
                let info = conns.get(name).cmd(&["INFO", "clients"]).unwrap();
                let info = String::from_utf8_lossy(&info).into_owned();
                info.lines()
                    .find(|l| l.starts_with(&format!("{rest}:")))
                    .unwrap_or("missing")
                    .to_string()
            }
            '!' => {
                conns.open.remove(&name);
                std::thread::sleep(Duration::from_millis(30));
                continue;
            }
            _ => panic!("bad script line {line}"),
        };
        // Client ids differ between servers: under `@ids`, an integer
        // reply equal to a connection's id is recorded as `:@NAME`.
        let mut got = got;
        for (n, id) in conns.ids.iter().filter(|_| ids) {
            got = got.replace(&format!(":{id}\\r\\n"), &format!(":@{n}\\r\\n"));
        }
        log.push(format!("{line} => {got}"));
    }
    log
}

/// Runs `script` on a fresh redis-server and on a fresh Sluice (`bin`,
/// two threads, so consecutive connections are served by different
/// threads) and asserts the transcripts are identical. Skipped without
/// the oracle. `TRANSCRIPT_DUMP=1` prints redis-server's transcript.
pub fn check(bin: &Path, script: &str) {
    check_with(bin, &[], script)
}

/// [`check`] with extra server arguments for both servers.
pub fn check_with(bin: &Path, extra: &[&str], script: &str) {
    let Some(redis) = RedisServer::start_with(extra, None) else { return };
    let sluice = TestServer::start_with(bin, extra, None);
    let want = run(redis.port(), script);
    let got = run(sluice.port(), script);
    if std::env::var_os("TRANSCRIPT_DUMP").or_else(|| std::env::var_os("BLOCKING_DUMP")).is_some() {
        eprintln!("{}", want.join("\n"));
    }
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w, "\nredis:  {w}\nsluice: {g}");
    }
    assert_eq!(want.len(), got.len());
}
