//! Access control lists as Redis 7.0 has them: users, their rules
//! (`ACL SETUSER`'s language), the permission check the dispatcher runs
//! for every caller, the `ACL LOG`, and loading/saving the ACL file.
//!
//! Data layout, for the hot path: a [`User`] is immutable and shared
//! (`Arc`); a change replaces it in the [`Registry`] and moves the shared
//! epoch, so each session picks the new version up on its next command
//! (the same epoch load that already guards its configuration copy). A
//! user whose one selector allows every command, key and channel is
//! `free`: the session folds that into the one flag that lets a command
//! skip `dispatch::check` altogether. Otherwise a selector is a command
//! bitmap indexed by the table's stable command index (the one
//! commandstats uses), followed by Redis 7.0's commands the table does not
//! implement (so `+@category` and the rules `ACL LIST` prints count the
//! same commands as Redis), then one "future commands" bit; key and
//! channel patterns are looked at only when the selector has any.
//!
//! Depends on the command table and its Redis metadata; knows nothing of
//! sockets or files except the ACL file (`load_file`, `save_file`).

pub mod gate;
pub mod log;
pub mod sha256;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};

use crate::core::meta::{self, k, Meta, CATEGORIES};
use crate::core::spec::{CommandSpec, Flags};

// ---- the command id space -------------------------------------------------

/// One command or subcommand an ACL rule can name.
pub struct CmdId {
    /// Lower-case full name (`get`, `config|get`).
    pub name: &'static str,
    pub meta: &'static Meta,
    /// Its container, for a subcommand.
    pub parent: Option<u32>,
    /// Its subcommands (Redis's and the table's).
    pub subs: Vec<u32>,
    /// A command of Redis 7.0 (false: Sluice's own, such as the job
    /// queue's), counted when the rules are described.
    pub redis: bool,
}

pub struct Ids {
    pub list: Vec<CmdId>,
    by_name: HashMap<&'static str, u32>,
    /// Top-level commands in iteration order.
    pub tops: Vec<u32>,
}

impl Ids {
    /// The bit that `+@all` sets for commands that do not exist yet.
    pub fn future_bit(&self) -> usize {
        self.list.len()
    }

    pub fn words(&self) -> usize {
        (self.list.len() + 1).div_ceil(64)
    }

    /// Redis's `ACLLookupCommand`: `name` or `container|sub`, any case.
    pub fn lookup(&self, name: &[u8]) -> Option<u32> {
        let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.by_name.get(lower.as_str()).copied()
    }
}

/// The ids: the table's entries first (their index is the commandstats
/// index), then Redis 7.0's commands and subcommands the table lacks.
pub fn ids() -> &'static Ids {
    static IDS: OnceLock<Ids> = OnceLock::new();
    IDS.get_or_init(|| {
        let mut list: Vec<CmdId> = Vec::new();
        let mut by_name = HashMap::new();
        let mut tops = Vec::new();
        let t = crate::core::table::installed().entries();
        let mut top_of = 0u32;
        for (i, e) in t.iter().enumerate() {
            let is_top = std::ptr::eq(e.top, e.spec);
            if is_top {
                top_of = i as u32;
                tops.push(i as u32);
            }
            let redis = meta::find(e.meta.name).is_some_and(|m| std::ptr::eq(m, e.meta));
            by_name.insert(e.meta.name, i as u32);
            list.push(CmdId {
                name: e.meta.name,
                meta: e.meta,
                parent: (!is_top).then_some(top_of),
                subs: vec![],
                redis,
            });
            if !is_top {
                list[top_of as usize].subs.push(i as u32);
            }
        }
        for m in meta::redis70::COMMANDS {
            let top = match by_name.get(m.name) {
                Some(&i) => i,
                None => {
                    let i = list.len() as u32;
                    list.push(CmdId {
                        name: m.name,
                        meta: m,
                        parent: None,
                        subs: vec![],
                        redis: true,
                    });
                    by_name.insert(m.name, i);
                    tops.push(i);
                    i
                }
            };
            for s in m.subcommands {
                if !by_name.contains_key(s.name) {
                    let i = list.len() as u32;
                    list.push(CmdId {
                        name: s.name,
                        meta: s,
                        parent: Some(top),
                        subs: vec![],
                        redis: true,
                    });
                    by_name.insert(s.name, i);
                    list[top as usize].subs.push(i);
                }
            }
        }
        Ids { list, by_name, tops }
    })
}

/// The category bit of a name (`read`), Redis's `ACLGetCommandCategoryFlagByName`.
pub fn category(name: &[u8]) -> Option<u32> {
    CATEGORIES.iter().position(|c| c.as_bytes().eq_ignore_ascii_case(name)).map(|i| 1 << i)
}

// ---- selectors and users --------------------------------------------------

/// Key pattern permissions.
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;
pub const ALL: u8 = READ | WRITE;

/// Why a rule was refused (Redis's errno values in `ACLSetUser`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    NoEnt,
    Inval,
    Exist,
    IsDir,
    NoDev,
    BadMsg,
    Already,
    Child,
}

impl RuleError {
    /// `ACLSetUserStringError`.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::NoEnt => "Unknown command or category name in ACL",
            RuleError::Inval => "Syntax error",
            RuleError::Exist => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::IsDir => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list of \
                 channels"
            }
            RuleError::NoDev => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadMsg => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::Already => {
                "Duplicate user found. A user can only be defined once in config files"
            }
            RuleError::Child => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// One set of permissions: the root one (the rules outside parentheses)
/// or a selector `(…)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    pub allkeys: bool,
    pub allchannels: bool,
    pub allcommands: bool,
    bits: Vec<u64>,
    /// Allowed first arguments of otherwise denied commands (`+select|0`).
    firstargs: Vec<(u32, Vec<Vec<u8>>)>,
    pub patterns: Vec<(Vec<u8>, u8)>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(allchannels: bool) -> Selector {
        Selector {
            allkeys: false,
            allchannels,
            allcommands: false,
            bits: vec![0; ids().words()],
            firstargs: Vec::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
        }
    }

    #[inline]
    pub fn bit(&self, id: usize) -> bool {
        self.bits.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// `ACLChangeSelectorPerm`: a container's subcommands follow it.
    fn change_perm(&mut self, id: u32, allow: bool) {
        self.set_bit(id as usize, allow);
        self.firstargs.retain(|(i, _)| *i != id);
        for &s in &ids().list[id as usize].subs {
            self.set_bit(s as usize, allow);
        }
    }

    fn set_category(&mut self, cflag: u32, allow: bool) {
        let ids = ids();
        for &t in &ids.tops {
            let c = &ids.list[t as usize];
            if c.meta.acl & cflag != 0 {
                self.change_perm(t, allow);
            }
            for &s in &c.subs {
                if ids.list[s as usize].meta.acl & cflag != 0 {
                    self.change_perm(s, allow);
                }
            }
        }
    }

    /// (allowed, denied) among Redis's commands of a category.
    fn count_category(&self, cflag: u32) -> (u32, u32) {
        let (mut on, mut off) = (0, 0);
        for (i, c) in ids().list.iter().enumerate() {
            if c.redis && c.meta.acl & cflag != 0 {
                if self.bit(i) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// Redis's `ACLSetSelector`: one rule about commands, keys or channels.
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.patterns.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.bits.iter_mut().for_each(|w| *w = u64::MAX);
            self.allcommands = true;
            self.firstargs.clear();
        } else if is("nocommands") || is("-@all") {
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.allcommands = false;
            self.firstargs.clear();
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::Exist);
            }
            let mut flags = 0;
            let mut off = 1;
            if op[0] == b'%' {
                while off < op.len() {
                    let c = op[off].to_ascii_uppercase();
                    if c == b'R' && flags & READ == 0 {
                        flags |= READ;
                    } else if c == b'W' && flags & WRITE == 0 {
                        flags |= WRITE;
                    } else if c == b'~' {
                        off += 1;
                        break;
                    } else {
                        return Err(RuleError::Inval);
                    }
                    off += 1;
                }
                if flags == 0 {
                    return Err(RuleError::Inval);
                }
            } else {
                flags = ALL;
            }
            let pat = &op[off.min(op.len())..];
            if has_spaces(pat) {
                return Err(RuleError::Inval);
            }
            match self.patterns.iter_mut().find(|(p, _)| p == pat) {
                Some((_, f)) => *f |= flags,
                None => self.patterns.push((pat.to_vec(), flags)),
            }
            self.allkeys = false;
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::IsDir);
            }
            let pat = &op[1..];
            if has_spaces(pat) {
                return Err(RuleError::Inval);
            }
            if !self.channels.iter().any(|c| c == pat) {
                self.channels.push(pat.to_vec());
            }
            self.allchannels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let ids = ids();
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let id = ids.lookup(name).ok_or(RuleError::NoEnt)?;
                    self.change_perm(id, true);
                }
                Some(bar) => {
                    let id = ids.lookup(&name[..bar]).ok_or(RuleError::NoEnt)?;
                    if ids.list[id as usize].parent.is_some() {
                        return Err(RuleError::Child);
                    }
                    let sub = &name[bar + 1..];
                    if sub.is_empty() {
                        return Err(RuleError::Inval);
                    }
                    if !ids.list[id as usize].subs.is_empty() {
                        let sid = ids.lookup(name).ok_or(RuleError::NoEnt)?;
                        self.change_perm(sid, true);
                    } else {
                        crate::subsystems::log::warning(&format!(
                            "Deprecation warning: Allowing a first arg of an otherwise blocked \
                             command is a misuse of ACL and may get disabled in the future \
                             (offender: +{})",
                            String::from_utf8_lossy(name)
                        ));
                        match self.firstargs.iter_mut().find(|(i, _)| *i == id) {
                            Some((_, list)) => {
                                if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                                    list.push(sub.to_vec());
                                }
                            }
                            None => self.firstargs.push((id, vec![sub.to_vec()])),
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = ids().lookup(&op[1..]).ok_or(RuleError::NoEnt)?;
            self.change_perm(id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let cflag = category(&op[2..]).ok_or(RuleError::NoEnt)?;
            self.set_category(cflag, op[0] == b'+');
        } else {
            return Err(RuleError::Inval);
        }
        Ok(())
    }

    /// Whether this selector grants everything (no check needed).
    fn grants_all(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// Redis's `ACLDescribeSelectorCommandRules`: `+@all`/`-@all`, the
    /// categories that fit best, then single commands. Redis emits the
    /// single commands in its command dictionary's hash order (random per
    /// process); Sluice emits them in table order.
    pub fn describe_commands(&self) -> String {
        let ids = ids();
        let future = self.bit(ids.future_bit());
        let mut fake = Selector::new(false);
        let mut rules = String::new();
        if future {
            rules.push_str("+@all ");
            fake.apply(b"+@all").ok();
        } else {
            rules.push_str("-@all ");
            fake.apply(b"-@all").ok();
        }
        let additive = !future;
        let mut temp = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (u32::MAX, 0);
            for (j, _) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            fake.set_category(1 << j, additive);
            temp.set_category(1 << j, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(CATEGORIES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        for &t in &ids.tops {
            self.describe_single(&mut fake, t, &mut rules);
            for &s in &ids.list[t as usize].subs {
                self.describe_single(&mut fake, s, &mut rules);
            }
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, fake: &mut Selector, id: u32, rules: &mut String) {
        let user = self.bit(id as usize);
        if user != fake.bit(id as usize) {
            rules.push(if user { '+' } else { '-' });
            rules.push_str(ids().list[id as usize].name);
            rules.push(' ');
            fake.change_perm(id, user);
        }
        if !user {
            if let Some((_, args)) = self.firstargs.iter().find(|(i, _)| *i == id) {
                for a in args {
                    rules.push('+');
                    rules.push_str(ids().list[id as usize].name);
                    rules.push('|');
                    rules.push_str(&String::from_utf8_lossy(a));
                    rules.push(' ');
                }
            }
        }
    }

    /// The key patterns as `ACL GETUSER` shows them.
    pub fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let v: Vec<String> = self.patterns.iter().map(|(p, f)| pattern_string(p, *f)).collect();
        v.join(" ")
    }

    pub fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let v: Vec<String> =
            self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))).collect();
        v.join(" ")
    }

    /// `ACLDescribeSelector`: keys, channels, commands.
    fn describe(&self) -> String {
        let mut s = String::new();
        if self.allkeys {
            s.push_str("~* ");
        } else {
            for (p, f) in &self.patterns {
                s.push_str(&pattern_string(p, *f));
                s.push(' ');
            }
        }
        if self.allchannels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for c in &self.channels {
                s.push('&');
                s.push_str(&String::from_utf8_lossy(c));
                s.push(' ');
            }
        }
        s.push_str(&self.describe_commands());
        s
    }

    /// Redis's `ACLSelectorCheckKey`.
    fn check_key(&self, key: &[u8], spec_flags: u16) -> bool {
        if self.allkeys {
            return true;
        }
        let mut want = 0;
        if spec_flags & k::ACCESS != 0 {
            want |= READ;
        }
        if spec_flags & (k::INSERT | k::DELETE | k::UPDATE) != 0 {
            want |= WRITE;
        }
        self.patterns
            .iter()
            .any(|(p, f)| f & want == want && crate::subsystems::glob::matches(p, key, false))
    }

    /// Redis's `ACLSelectorCheckCmd`.
    fn check_cmd(&self, c: &Check, keys: &mut KeyCache) -> Result<(), (Denied, usize)> {
        if !self.allcommands && !c.no_auth && !self.bit(c.id) {
            let idx = if c.sub { 2 } else { 1 };
            let ok = c.argv.len() >= 2
                && self.firstargs.iter().any(|(i, list)| {
                    *i as usize == c.id
                        && c.argv
                            .get(idx)
                            .is_some_and(|a| list.iter().any(|x| x.eq_ignore_ascii_case(a)))
                });
            if !ok {
                return Err((Denied::Cmd, 0));
            }
        }
        if !self.allkeys && c.meta.has_keys() {
            for kr in keys.get(c) {
                if !self.check_key(c.argv[kr.pos], kr.flags) {
                    return Err((Denied::Key, kr.pos));
                }
            }
        }
        if !self.allchannels {
            if let Some((from, literal)) = c.channels {
                let to = if c.flags.has(Flags::CHANNEL_ARG1) { 2 } else { c.argv.len() };
                for (j, ch) in c.argv.iter().enumerate().take(to).skip(from) {
                    if !channel_allowed(&self.channels, ch, literal) {
                        return Err((Denied::Channel, j));
                    }
                }
            }
        }
        Ok(())
    }
}

fn pattern_string(p: &[u8], f: u8) -> String {
    let head = match f {
        READ => "%R~",
        WRITE => "%W~",
        _ => "~",
    };
    format!("{head}{}", String::from_utf8_lossy(p))
}

fn channel_allowed(list: &[Vec<u8>], ch: &[u8], literal: bool) -> bool {
    list.iter()
        .any(|p| if literal { p == ch } else { crate::subsystems::glob::matches(p, ch, false) })
}

/// `ACLStringHasSpaces`: C's isspace, or NUL.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0))
}

/// User flags, in the order Redis describes them.
pub const ENABLED: u8 = 1;
pub const DISABLED: u8 = 2;
pub const NOPASS: u8 = 4;
pub const SKIP_SANITIZE: u8 = 8;
pub const SANITIZE: u8 = 16;
const FLAG_NAMES: [(u8, &str); 5] = [
    (ENABLED, "on"),
    (DISABLED, "off"),
    (NOPASS, "nopass"),
    (SKIP_SANITIZE, "skip-sanitize-payload"),
    (SANITIZE, "sanitize-payload"),
];

/// One ACL user: a snapshot, replaced as a whole when it changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: Vec<u8>,
    pub flags: u8,
    /// SHA-256 hex of each password.
    pub passwords: Vec<String>,
    /// The root selector first, then the `(…)` ones.
    pub selectors: Vec<Selector>,
}

impl User {
    /// `ACLCreateUser`: disabled, no passwords, no permissions.
    pub fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: name.to_vec(),
            flags: DISABLED,
            passwords: Vec::new(),
            selectors: vec![Selector::new(pubsub_all)],
        }
    }

    /// `ACLCreateDefaultUser`.
    pub fn default_user() -> User {
        let mut u = User::new(b"default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            u.apply(op.as_bytes(), false).expect("valid rule");
        }
        u
    }

    /// Whether a command, whatever its keys and channels, needs no check.
    pub fn free(&self) -> bool {
        self.selectors.iter().any(Selector::grants_all)
    }

    pub fn enabled(&self) -> bool {
        self.flags & DISABLED == 0
    }

    pub fn nopass(&self) -> bool {
        self.flags & NOPASS != 0
    }

    /// Redis's `ACLSetUser`: one rule. `pubsub_all` is
    /// `acl-pubsub-default allchannels` (new selectors start with it).
    pub fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("on") {
            self.flags = (self.flags | ENABLED) & !DISABLED;
        } else if is("off") {
            self.flags = (self.flags | DISABLED) & !ENABLED;
        } else if is("skip-sanitize-payload") {
            self.flags = (self.flags | SKIP_SANITIZE) & !SANITIZE;
        } else if is("sanitize-payload") {
            self.flags = (self.flags | SANITIZE) & !SKIP_SANITIZE;
        } else if is("nopass") {
            self.flags |= NOPASS;
            self.passwords.clear();
        } else if is("resetpass") {
            self.flags &= !NOPASS;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' { sha256::hex(&op[1..]) } else { check_hash(&op[1..])? };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.flags &= !NOPASS;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' { sha256::hex(&op[1..]) } else { check_hash(&op[1..])? };
            let at = self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoDev)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(pubsub_all);
            let inner = &op[1..op.len() - 1];
            let words = resp::split_args(inner).ok_or(RuleError::Inval)?;
            for w in words {
                s.apply(&w)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for r in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply(r.as_bytes(), pubsub_all)?;
            }
            if pubsub_all {
                self.apply(b"allchannels", pubsub_all)?;
            }
            for r in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply(r.as_bytes(), pubsub_all)?;
            }
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// `ACLDescribeUser`: the rules after `user <name> ` in `ACL LIST`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (f, n) in FLAG_NAMES {
            if self.flags & f != 0 {
                s.push_str(n);
                s.push(' ');
            }
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(p);
            s.push(' ');
        }
        for (i, sel) in self.selectors.iter().enumerate() {
            if i == 0 {
                s.push_str(&sel.describe());
            } else {
                s.push_str(" (");
                s.push_str(&sel.describe());
                s.push(')');
            }
        }
        s
    }

    /// Flag names, in Redis's order (`ACL GETUSER`).
    pub fn flag_names(&self) -> Vec<&'static str> {
        FLAG_NAMES.iter().filter(|(f, _)| self.flags & f != 0).map(|(_, n)| *n).collect()
    }

    /// Redis's `ACLCheckAllUserCommandPerm`: the first selector that
    /// allows it wins; otherwise the most relevant refusal (channel over
    /// key over command, then the later argument) and its argument index.
    pub fn check(&self, c: &Check) -> Result<(), (Denied, usize)> {
        let mut keys = KeyCache::default();
        let mut worst = (Denied::Cmd, 0);
        for s in &self.selectors {
            match s.check_cmd(c, &mut keys) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if e.0 > worst.0 || (e.0 == worst.0 && e.1 > worst.1) {
                        worst = e;
                    }
                }
            }
        }
        Err(worst)
    }

    /// Whether any selector allows `key` for a key spec with `spec_flags`
    /// (Redis's `ACLUserCheckKeyPerm`).
    pub fn key_allowed(&self, key: &[u8], spec_flags: u16) -> bool {
        self.selectors.iter().any(|s| s.check_key(key, spec_flags))
    }

    /// Whether a channel (or, `literal`, a pattern) is allowed by any
    /// selector (`ACLUserCheckChannelPerm`).
    pub fn channel_allowed(&self, ch: &[u8], literal: bool) -> bool {
        self.selectors.iter().any(|s| s.allchannels || channel_allowed(&s.channels, ch, literal))
    }

    /// Every channel pattern of every selector, or None with `allchannels`.
    fn all_channels(&self) -> Option<Vec<&Vec<u8>>> {
        if self.selectors.iter().any(|s| s.allchannels) {
            return None;
        }
        Some(self.selectors.iter().flat_map(|s| s.channels.iter()).collect())
    }
}

fn check_hash(h: &[u8]) -> Result<String, RuleError> {
    if h.len() != 64 || !h.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return Err(RuleError::BadMsg);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Why a command was refused; ordered as Redis ranks them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Cmd = 1,
    Key = 2,
    Auth = 3,
    Channel = 4,
}

/// What the check needs to know of a command line.
pub struct Check<'a> {
    pub id: usize,
    pub meta: &'static Meta,
    pub flags: Flags,
    pub sub: bool,
    pub no_auth: bool,
    pub argv: &'a [&'a [u8]],
    /// First channel argument and whether the arguments are patterns
    /// compared literally (PSUBSCRIBE).
    pub channels: Option<(usize, bool)>,
}

impl<'a> Check<'a> {
    pub fn new(spec: &'static CommandSpec, id: usize, argv: &'a [&'a [u8]]) -> Check<'a> {
        let e = &ids().list[id];
        let f = spec.flags;
        let channels = if f.has(Flags::CHANNEL_ARG1) || f.has(Flags::CHANNEL_ARGS) {
            Some((1, false))
        } else if f.has(Flags::CHANNEL_PATTERNS) {
            Some((1, true))
        } else {
            None
        };
        Check {
            id,
            meta: e.meta,
            flags: f,
            sub: e.parent.is_some(),
            no_auth: f.has(Flags::NO_AUTH),
            argv,
            channels,
        }
    }
}

/// The keys of the command line, found once for all selectors.
#[derive(Default)]
struct KeyCache {
    keys: Option<Vec<meta::KeyRef>>,
}

impl KeyCache {
    fn get(&mut self, c: &Check) -> &[meta::KeyRef] {
        self.keys.get_or_insert_with(|| meta::get_keys(c.meta, c.argv).unwrap_or_default())
    }
}

/// The error texts of a refusal, by caller.
pub fn denied_text(d: Denied, cmd: &str) -> String {
    match d {
        Denied::Cmd => format!("NOPERM this user has no permissions to run the '{cmd}' command"),
        Denied::Key => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        _ => "NOPERM this user has no permissions to access one of the channels used as arguments"
            .into(),
    }
}

pub fn denied_text_exec(d: Denied) -> String {
    let why = match d {
        Denied::Cmd => "no permission to execute the command or subcommand",
        Denied::Key => "no permission to touch the specified keys",
        Denied::Channel => "no permission to access one of the channels used as arguments",
        Denied::Auth => "no permission",
    };
    format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the \
         EXEC call. This command is no longer allowed for the following reason: {why}"
    )
}

pub fn denied_text_script(d: Denied) -> &'static str {
    match d {
        Denied::Cmd => "The user executing the script can't run this command or subcommand",
        Denied::Key => {
            "The user executing the script can't access at least one of the keys mentioned in \
             the command arguments"
        }
        _ => "The user executing the script can't publish to the channel mentioned in the command",
    }
}

// ---- the registry ---------------------------------------------------------

/// Every user, and what the dispatcher reads of them.
pub struct Registry {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    /// The default user has `nopass` and is on: clients need no AUTH.
    default_open: AtomicBool,
    pub log: Mutex<log::Log>,
    /// INFO's acl_access_denied_{auth,cmd,key,channel}.
    pub denied: [AtomicU64; 4],
}

impl Default for Registry {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::default_user()));
        Registry {
            users: RwLock::new(users),
            default_open: AtomicBool::new(true),
            log: Mutex::new(log::Log::default()),
            denied: Default::default(),
        }
    }
}

impl Registry {
    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get(b"default").expect("the default user always exists")
    }

    /// Whether a client needs no AUTH (Redis's `authRequired` is false).
    #[inline]
    pub fn default_open(&self) -> bool {
        self.default_open.load(Ordering::Relaxed)
    }

    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Stores a user (new or changed). The caller moves the epoch.
    pub fn put(&self, u: User) {
        if u.name == b"default" {
            self.default_open.store(u.nopass() && u.enabled(), Ordering::Relaxed);
        }
        self.users.write().insert(u.name.clone(), Arc::new(u));
    }

    pub fn remove(&self, name: &[u8]) -> bool {
        self.users.write().remove(name).is_some()
    }

    /// Replaces every user (ACL LOAD, start-up).
    pub fn replace_all(&self, users: BTreeMap<Vec<u8>, User>) {
        let map: BTreeMap<Vec<u8>, Arc<User>> =
            users.into_iter().map(|(n, u)| (n, Arc::new(u))).collect();
        let d = &map[&b"default"[..]];
        self.default_open.store(d.nopass() && d.enabled(), Ordering::Relaxed);
        *self.users.write() = map;
    }

    /// `ACLUpdateDefaultUserPassword` (requirepass).
    pub fn set_default_password(&self, pass: Option<&[u8]>) {
        let mut d = (*self.default_user()).clone();
        d.apply(b"resetpass", false).ok();
        match pass {
            Some(p) => {
                let mut op = vec![b'>'];
                op.extend_from_slice(p);
                d.apply(&op, false).ok();
            }
            None => {
                d.apply(b"nopass", false).ok();
            }
        }
        self.put(d);
    }

    pub fn count_denied(&self, d: Denied) {
        let i = match d {
            Denied::Auth => 0,
            Denied::Cmd => 1,
            Denied::Key => 2,
            Denied::Channel => 3,
        };
        self.denied[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a user's subscribed clients must go after a change of its
/// channel rules (Redis's `ACLKillPubsubClientsIfNeeded`): the new rules
/// are not a superset of the old ones. Returns the new patterns to check
/// each client's subscriptions against (None: nobody is affected).
pub fn narrowed_channels(new: &User, old: &User) -> Option<Vec<Vec<u8>>> {
    let upcoming = new.all_channels()?;
    let old_list = old.all_channels();
    let superset = match &old_list {
        Some(list) => list.iter().all(|c| upcoming.contains(c)),
        None => false,
    };
    if superset {
        return None;
    }
    Some(upcoming.into_iter().cloned().collect())
}

/// Whether a subscription survives a narrowing (`literal` for patterns).
pub fn subscription_allowed(upcoming: &[Vec<u8>], ch: &[u8], literal: bool) -> bool {
    channel_allowed(upcoming, ch, literal)
}

/// Redis's `ACLMergeSelectorArguments`: a selector may span several
/// arguments. `Err(i)` names the argument that opens an unclosed one.
pub fn merge_selectors(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if open.is_none() && op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        if let Some((_, sel)) = &mut open {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// Builds the users of an ACL file (Redis's `ACLLoadFromFile`): every
/// line `user <name> rules…`; `Err` is Redis's one-line list of problems.
pub fn parse_file(
    text: &[u8],
    filename: &str,
    pubsub_all: bool,
) -> Result<BTreeMap<Vec<u8>, User>, String> {
    let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
    let mut errors = String::new();
    for (i, line) in text.split(|&c| c == b'\n').enumerate() {
        let linenum = i + 1;
        let line = trim(line, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let argv: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
        if argv[0] != b"user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{filename}:{linenum} should start with user keyword followed by the username. "
            ));
            continue;
        }
        if has_spaces(argv[1]) {
            errors.push_str(&format!(
                "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(argv[1])
            ));
            continue;
        }
        if users.contains_key(argv[1]) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {linenum}. ",
                String::from_utf8_lossy(argv[1])
            ));
            continue;
        }
        let mut u = User::new(argv[1], pubsub_all);
        match merge_selectors(&argv[2..]) {
            Err(_) => errors.push_str(&format!(
                "{filename}:{linenum}: Unmatched parenthesis in selector definition."
            )),
            Ok(ops) => {
                for op in ops {
                    let op = trim(&op, b"\t\r\n");
                    if let Err(e) = u.apply(op, pubsub_all) {
                        errors.push_str(&format!("{filename}:{linenum}: {}. ", e.text()));
                    }
                }
            }
        }
        users.insert(argv[1].to_vec(), u);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        return Err(errors);
    }
    users.entry(b"default".to_vec()).or_insert_with(User::default_user);
    Ok(users)
}

fn trim<'a>(mut s: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let Some((f, rest)) = s.split_first() {
        if !set.contains(f) {
            break;
        }
        s = rest;
    }
    while let Some((l, rest)) = s.split_last() {
        if !set.contains(l) {
            break;
        }
        s = rest;
    }
    s
}

/// The ACL file's text for the current users (`ACLSaveToFile`).
pub fn file_text(users: &[Arc<User>]) -> Vec<u8> {
    let mut out = Vec::new();
    for u in users {
        out.extend_from_slice(b"user ");
        out.extend_from_slice(&u.name);
        out.push(b' ');
        out.extend_from_slice(u.describe().as_bytes());
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user with no rules; the ACL's command ids come from the
    /// installed table, which building the families' table installs.
    fn new_user() -> User {
        crate::commands::table();
        User::new(b"u", false)
    }

    fn default_user() -> User {
        crate::commands::table();
        User::default_user()
    }

    fn user(rules: &[&str]) -> User {
        let mut u = new_user();
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u
    }

    // Expected texts are what redis-server 7.0.15 answers to ACL LIST for
    // the same rules (single-command rules sorted: Redis prints them in
    // hash order).
    #[test]
    fn describes_as_redis() {
        assert_eq!(default_user().describe(), "on nopass ~* &* +@all");
        assert_eq!(user(&["reset"]).describe(), "off sanitize-payload resetchannels -@all");
        assert_eq!(
            user(&["-@all", "+@hash", "+@string", "-hset"]).describe(),
            "off resetchannels -@all +@string +@hash -hset"
        );
        assert_eq!(
            user(&["+@all", "-@dangerous", "-@admin"]).describe(),
            "off resetchannels +@all -@dangerous"
        );
        assert_eq!(
            user(&["+acl", "-acl|setuser"]).describe(),
            "off resetchannels -@all +acl -acl|setuser"
        );
    }

    #[test]
    fn rule_errors() {
        let mut u = new_user();
        assert_eq!(u.apply(b"bogus", false), Err(RuleError::Inval));
        assert_eq!(u.apply(b"+nosuch", false), Err(RuleError::NoEnt));
        assert_eq!(u.apply(b"+config|get|x", false), Err(RuleError::Child));
        assert_eq!(u.apply(b"+get|", false), Err(RuleError::Inval));
        assert_eq!(u.apply(b"%~x", false), Err(RuleError::Inval));
        assert_eq!(u.apply(b"#abc", false), Err(RuleError::BadMsg));
        assert_eq!(u.apply(b"<x", false), Err(RuleError::NoDev));
        assert!(u.apply(b"%R", false).is_ok());
        assert_eq!(u.selectors[0].describe_keys(), "%R~");
    }

    #[test]
    fn merges_selectors() {
        let a: Vec<&[u8]> = vec![b"on", b"(+get", b"~x)", b"(", b"+set", b")"];
        assert_eq!(
            merge_selectors(&a).unwrap(),
            vec![b"on".to_vec(), b"(+get ~x)".to_vec(), b"( +set )".to_vec()]
        );
        let b: Vec<&[u8]> = vec![b"on", b"(foo"];
        assert_eq!(merge_selectors(&b), Err(1));
    }
}
