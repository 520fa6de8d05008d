//! The append-only file as Redis 7.0 lays it out: the manifest
//! (`appendonly.aof.manifest`, one line per file: `file NAME seq N type
//! b|h|i`), the names of base and incremental files, and a reader of the
//! command stream (RESP arrays of bulk strings, `#` annotation lines such
//! as `#TS:` timestamps) that tells a torn tail from a corrupt middle the
//! way `loadSingleAppendOnlyFile` does.
//!
//! Pure over bytes: the server owns the files, the loader and the writer.

use std::fmt::Write as _;

/// Redis's `AOF_ANNOTATION_LINE_MAX_LEN`: the longest line `fgets` reads.
pub const LINE_MAX: usize = 1024;

/// What a manifest line names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Base,
    History,
    Incr,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Base => 'b',
            Kind::History => 'h',
            Kind::Incr => 'i',
        }
    }
}

/// One file of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub name: String,
    pub seq: i64,
    pub kind: Kind,
}

/// The manifest: at most one base, then history, then incremental files
/// (in the order they are loaded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<Info>,
    pub history: Vec<Info>,
    pub incr: Vec<Info>,
    pub base_seq: i64,
    pub incr_seq: i64,
}

/// Why a manifest was refused: Redis's words, and the offending line
/// (number from 1, trimmed text) when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    pub line: Option<(usize, String)>,
    pub reason: &'static str,
}

/// `appendonly.aof.manifest` for `appendfilename`.
pub fn manifest_name(appendfilename: &str) -> String {
    format!("{appendfilename}.manifest")
}

/// `temp-appendonly.aof.manifest`: written, then renamed over the manifest.
pub fn temp_manifest_name(appendfilename: &str) -> String {
    format!("temp-{appendfilename}.manifest")
}

impl Manifest {
    /// Parses a manifest as `aofLoadManifestFromFile` does.
    pub fn parse(text: &[u8]) -> Result<Manifest, ManifestError> {
        let mut m = Manifest::default();
        let mut max_seq = 0;
        let mut linenum = 0;
        let mut rest = text;
        if rest.is_empty() {
            return Err(ManifestError { line: None, reason: "Found an empty AOF manifest" });
        }
        while !rest.is_empty() {
            // fgets of MANIFEST_MAX_LINE (1024) + 1 bytes.
            let take = rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |i| i + 1);
            let take = take.min(LINE_MAX + 1);
            let raw = &rest[..take];
            rest = &rest[take..];
            linenum += 1;
            if raw[0] == b'#' {
                continue;
            }
            let line = String::from_utf8_lossy(raw.trim_ascii()).into_owned();
            let err = |reason| ManifestError { line: Some((linenum, line.clone())), reason };
            if !raw.contains(&b'\n') {
                return Err(err("The AOF manifest file contains too long line"));
            }
            if line.is_empty() {
                return Err(err("Invalid AOF manifest file format"));
            }
            let argv = split_args(raw.trim_ascii())
                .ok_or_else(|| err("Invalid AOF manifest file format"))?;
            if argv.len() < 6 || argv.len() % 2 == 1 {
                return Err(err("Invalid AOF manifest file format"));
            }
            let (mut name, mut seq, mut kind) = (None, 0i64, 0u8);
            for kv in argv.chunks(2) {
                let key = kv[0].to_ascii_lowercase();
                match key.as_slice() {
                    b"file" => {
                        let n = String::from_utf8_lossy(&kv[1]).into_owned();
                        if n.contains('/') {
                            return Err(err("File can't be a path, just a filename"));
                        }
                        name = Some(n);
                    }
                    b"seq" => seq = atoll(&kv[1]),
                    b"type" => kind = kv[1].first().copied().unwrap_or(0),
                    _ => {}
                }
            }
            let name = match name {
                Some(n) if seq != 0 && kind != 0 => n,
                _ => return Err(err("Invalid AOF manifest file format")),
            };
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err(err("Found duplicate base file information"));
                    }
                    m.base = Some(Info { name, seq, kind: Kind::Base });
                    m.base_seq = seq;
                }
                b'h' => m.history.push(Info { name, seq, kind: Kind::History }),
                b'i' => {
                    if seq <= max_seq {
                        return Err(err("Found a non-monotonic sequence number"));
                    }
                    m.incr.push(Info { name, seq, kind: Kind::Incr });
                    m.incr_seq = seq;
                    max_seq = seq;
                }
                _ => return Err(err("Unknown AOF file type")),
            }
        }
        if linenum == 0 {
            return Err(ManifestError { line: None, reason: "Found an empty AOF manifest" });
        }
        Ok(m)
    }

    /// The manifest's text, as `getAofManifestAsString` writes it.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for i in self.base.iter().chain(&self.history).chain(&self.incr) {
            let _ = writeln!(s, "file {} seq {} type {}", repr(&i.name), i.seq, i.kind.letter());
        }
        s
    }

    /// Adds a new incremental file (`appendonly.aof.N.incr.aof`) and
    /// returns its name.
    pub fn new_incr(&mut self, appendfilename: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{appendfilename}.{}.incr.aof", self.incr_seq);
        self.incr.push(Info { name: name.clone(), seq: self.incr_seq, kind: Kind::Incr });
        name
    }

    /// The next base file's name (`.rdb` with the RDB preamble, else
    /// `.aof`), marking the current base as history.
    pub fn new_base(&mut self, appendfilename: &str, rdb: bool) -> String {
        if let Some(mut b) = self.base.take() {
            b.kind = Kind::History;
            self.history.insert(0, b);
        }
        self.base_seq += 1;
        let ext = if rdb { "rdb" } else { "aof" };
        let name = format!("{appendfilename}.{}.base.{ext}", self.base_seq);
        self.base = Some(Info { name: name.clone(), seq: self.base_seq, kind: Kind::Base });
        name
    }

    /// After a rewrite: every incremental file but the last (the one
    /// opened when the rewrite started) becomes history.
    pub fn mark_rewritten_incr_as_history(&mut self) {
        let keep = self.incr.pop();
        self.incr_to_history();
        self.incr.extend(keep);
    }

    /// Each incremental file to the head of the history, in order (so the
    /// newest comes first, as Redis's `listAddNodeHead` leaves them).
    fn incr_to_history(&mut self) {
        for mut i in std::mem::take(&mut self.incr) {
            i.kind = Kind::History;
            self.history.insert(0, i);
        }
    }

    /// After a rewrite with the AOF off (or being turned on): every
    /// incremental file becomes history.
    pub fn mark_all_incr_as_history(&mut self) {
        self.incr_to_history();
    }

    /// The files to load, in order (base first).
    pub fn load_order(&self) -> impl Iterator<Item = &Info> {
        self.base.iter().chain(&self.incr)
    }
}

/// `atoll`: leading blanks, a sign, digits; 0 when there are none.
fn atoll(b: &[u8]) -> i64 {
    let s = std::str::from_utf8(b).unwrap_or("").trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits.bytes().position(|c| !c.is_ascii_digit()).unwrap_or(digits.len());
    let v = digits[..end].parse::<i64>().unwrap_or(0);
    if neg {
        -v
    } else {
        v
    }
}

/// Whether Redis's `sdsneedsrepr` would quote the name.
fn needs_repr(s: &str) -> bool {
    // An empty name is quoted too (unquoted it would vanish from the line).
    s.is_empty()
        || s.bytes().any(|c| {
            c.is_ascii_whitespace()
                || !(0x20..0x7f).contains(&c)
                || matches!(c, b'\\' | b'"' | b'\'')
        })
}

/// `sdscatrepr`: a double-quoted string with C escapes.
fn repr(s: &str) -> String {
    if !needs_repr(s) {
        return s.to_string();
    }
    let mut o = String::from("\"");
    for c in s.bytes() {
        match c {
            b'\\' => o.push_str("\\\\"),
            b'"' => o.push_str("\\\""),
            b'\n' => o.push_str("\\n"),
            b'\r' => o.push_str("\\r"),
            b'\t' => o.push_str("\\t"),
            7 => o.push_str("\\a"),
            8 => o.push_str("\\b"),
            c if (0x20..0x7f).contains(&c) => o.push(c as char),
            c => {
                let _ = write!(o, "\\x{c:02x}");
            }
        }
    }
    o.push('"');
    o
}

/// `sdssplitargs`: blank-separated words, double quotes with C escapes,
/// single quotes with `\'`. `None` on unbalanced quotes.
fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            let c = line.get(i).copied();
            if inq {
                match c {
                    None => return None,
                    Some(b'\\')
                        if line.get(i + 1) == Some(&b'x')
                            && i + 3 < line.len()
                            && line[i + 2].is_ascii_hexdigit()
                            && line[i + 3].is_ascii_hexdigit() =>
                    {
                        let h = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                        cur.push(u8::from_str_radix(h, 16).ok()?);
                        i += 3;
                    }
                    Some(b'\\') if i + 1 < line.len() => {
                        i += 1;
                        cur.push(match line[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            o => o,
                        });
                    }
                    Some(b'"') => {
                        // The closing quote must be followed by a space.
                        if line.get(i + 1).is_some_and(|c| !c.is_ascii_whitespace()) {
                            return None;
                        }
                        inq = false;
                        i += 1;
                        break;
                    }
                    Some(c) => cur.push(c),
                }
            } else if insq {
                match c {
                    None => return None,
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        cur.push(b'\'');
                    }
                    Some(b'\'') => {
                        if line.get(i + 1).is_some_and(|c| !c.is_ascii_whitespace()) {
                            return None;
                        }
                        insq = false;
                        i += 1;
                        break;
                    }
                    Some(c) => cur.push(c),
                }
            } else {
                match c {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(c) => cur.push(c),
                }
            }
            i += 1;
        }
        let _ = (inq, insq);
        out.push(cur);
    }
}

/// What stopped a read of the command stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// The file ends inside a command: a torn tail (`aof-load-truncated`
    /// may cut it at the last complete command).
    Truncated,
    /// Bytes that are not the protocol (`Bad file format`), at `offset`
    /// (the start of the line that is wrong).
    Format { offset: usize },
}

/// One item of the command stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A command's arguments; `end` is the offset just after it.
    Command { argv: Vec<&'a [u8]>, end: usize },
    /// An annotation line (`#TS:1700000000`), without `#` and line end.
    Annotation { text: &'a [u8], end: usize },
}

/// Reads commands from an AOF (or the tail after an RDB preamble) as
/// Redis's loader does: lines read up to [`LINE_MAX`] bytes, counts and
/// lengths read with `atoi`/`strtol`, each argument followed by two bytes
/// that are skipped.
///
/// A reader made with [`CommandReader::window`] reads a part of a file
/// whose rest is still to come: an item that runs past the window's end
/// (a line without its newline included) is `Truncated`, to be read
/// again from its start once more of the file is in.
pub struct CommandReader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// More of the file follows `buf`.
    more: bool,
}

impl<'a> CommandReader<'a> {
    /// A reader of a whole file (or its tail after an RDB preamble).
    pub fn new(buf: &'a [u8], start: usize) -> Self {
        CommandReader { buf, pos: start, more: false }
    }

    /// A reader of `buf`, the part of a file read so far; `more`: the
    /// file goes on past it.
    pub fn window(buf: &'a [u8], more: bool) -> Self {
        CommandReader { buf, pos: 0, more }
    }

    /// Current offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// `fgets(buf, LINE_MAX, fp)`: up to and including a newline, at most
    /// `LINE_MAX - 1` bytes. `None` at end of file (or of the window);
    /// `Truncated` when a window ends inside the line.
    fn line(&mut self) -> Result<Option<&'a [u8]>, StreamError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let rest = &self.buf[self.pos..];
        let max = LINE_MAX - 1;
        let n = match rest.iter().take(max).position(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if self.more && rest.len() < max => return Err(StreamError::Truncated),
            None => rest.len().min(max),
        };
        self.pos += n;
        Ok(Some(&rest[..n]))
    }

    /// The next item, `Ok(None)` at a clean end of file (of the window:
    /// [`CommandReader::window`]). In a window with more to come,
    /// `Truncated` means the item runs past the window.
    pub fn next_item(&mut self) -> Result<Option<Item<'a>>, StreamError> {
        let start = self.pos;
        let Some(line) = self.line()? else { return Ok(None) };
        if line[0] == b'#' {
            let text = line[1..].trim_ascii_end();
            return Ok(Some(Item::Annotation { text, end: self.pos }));
        }
        if line[0] != b'*' {
            return Err(StreamError::Format { offset: start });
        }
        if line.len() == 1 {
            // "*" then end of file: fgets stopped at EOF.
            return Err(StreamError::Truncated);
        }
        let argc = atoll(&line[1..]).clamp(i64::from(i32::MIN), i64::from(i32::MAX));
        if argc < 1 {
            return Err(StreamError::Format { offset: start });
        }
        let mut argv = Vec::with_capacity((argc as usize).min(1024));
        for _ in 0..argc {
            let at = self.pos;
            let Some(l) = self.line()? else { return Err(StreamError::Truncated) };
            if l[0] != b'$' {
                return Err(StreamError::Format { offset: at });
            }
            let len = atoll(&l[1..]);
            // A negative length reads as a huge unsigned one: never there.
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let rest = self.buf.len() - self.pos;
            if len > rest {
                return Err(StreamError::Truncated);
            }
            argv.push(&self.buf[self.pos..self.pos + len]);
            self.pos += len;
            if self.buf.len() - self.pos < 2 {
                self.pos = self.buf.len();
                return Err(StreamError::Truncated);
            }
            self.pos += 2;
        }
        Ok(Some(Item::Command { argv, end: self.pos }))
    }
}

/// How [`read_stream`] stopped short of a clean end.
#[derive(Debug)]
pub enum StreamStop<E> {
    /// The stream's own error ([`StreamError`]; a format error's offset
    /// is the file's).
    Stream(StreamError),
    /// Reading the source failed.
    Read(std::io::Error),
    /// The caller's function stopped the read.
    Caller(E),
}

/// Reads the command stream from `src` (a file, its first `start` bytes
/// already read) as it comes, `chunk` bytes a read, and hands each item to
/// `each` with its `end` as the file's offset. Only the item being read is
/// held besides the current chunk: an item cut by the end of what was
/// read is read again with more behind it (twice as much when the window
/// held none of a whole item, so a big one costs a few passes of its
/// lines, not one per chunk). Reads as [`CommandReader::new`] reads the
/// whole file.
pub fn read_stream<E>(
    src: &mut dyn std::io::Read,
    start: usize,
    chunk: usize,
    mut each: impl FnMut(Item<'_>) -> Result<(), E>,
) -> Result<(), StreamStop<E>> {
    use std::io::Read as _;
    let chunk = chunk.max(1);
    let mut buf: Vec<u8> = Vec::new();
    // The file's offset of `buf[0]`.
    let mut base = start;
    let mut eof = false;
    let mut want = chunk;
    loop {
        while !eof && buf.len() < want {
            let n =
                (&mut *src).take(chunk as u64).read_to_end(&mut buf).map_err(StreamStop::Read)?;
            eof = n < chunk;
        }
        let mut r = CommandReader::window(&buf, !eof);
        // The bytes of the whole items this pass read.
        let mut done = 0;
        loop {
            match r.next_item() {
                Ok(None) if eof => return Ok(()),
                Ok(None) => break,
                Ok(Some(item)) => {
                    let item = match item {
                        Item::Command { argv, end } => {
                            done = end;
                            Item::Command { argv, end: base + end }
                        }
                        Item::Annotation { text, end } => {
                            done = end;
                            Item::Annotation { text, end: base + end }
                        }
                    };
                    each(item).map_err(StreamStop::Caller)?;
                }
                Err(StreamError::Truncated) if !eof => break,
                Err(StreamError::Format { offset }) => {
                    return Err(StreamStop::Stream(StreamError::Format { offset: base + offset }))
                }
                Err(e) => return Err(StreamStop::Stream(e)),
            }
        }
        buf.drain(..done);
        base += done;
        want = if done == 0 { 2 * buf.len() } else { buf.len() } + chunk;
    }
}

/// Whether a file starts with an RDB preamble (`REDIS`).
pub fn is_rdb(buf: &[u8]) -> bool {
    buf.len() >= 5 && &buf[..5] == b"REDIS"
}

/// Appends `argv` to `out` as the AOF holds a command: [`resp::write_command`]
/// typed for byte-string arguments, so that `&[b"SELECT", db]` needs no
/// annotation at the call.
#[inline]
pub fn write_command(out: &mut Vec<u8>, argv: &[&[u8]]) {
    resp::write_command(out, argv);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip() {
        let text = b"file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "appendonly.aof.2.base.rdb");
        assert_eq!(m.incr_seq, 2);
        assert_eq!(m.render().as_bytes(), text);
    }

    #[test]
    fn manifest_errors() {
        let e = Manifest::parse(b"").unwrap_err();
        assert_eq!(e.reason, "Found an empty AOF manifest");
        let e = Manifest::parse(b"file a seq 1 type i\nfile b seq 1 type i\n").unwrap_err();
        assert_eq!(e.reason, "Found a non-monotonic sequence number");
        assert_eq!(e.line, Some((2, "file b seq 1 type i".into())));
        let e = Manifest::parse(b"file a/b seq 1 type i\n").unwrap_err();
        assert_eq!(e.reason, "File can't be a path, just a filename");
        let e = Manifest::parse(b"file a seq 1 type x\n").unwrap_err();
        assert_eq!(e.reason, "Unknown AOF file type");
        let e = Manifest::parse(b"file a seq 1\n").unwrap_err();
        assert_eq!(e.reason, "Invalid AOF manifest file format");
    }

    #[test]
    fn quoted_names() {
        let mut m = Manifest::default();
        m.incr.push(Info { name: "my file.aof".into(), seq: 1, kind: Kind::Incr });
        let text = m.render();
        assert_eq!(text, "file \"my file.aof\" seq 1 type i\n");
        assert_eq!(Manifest::parse(text.as_bytes()).unwrap().incr[0].name, "my file.aof");
    }

    /// Random bytes and mutations of a valid stream: the reader and the
    /// checker end or refuse, never panic; manifests round-trip (the fuzz
    /// target `aof_load` does the same at length).
    #[test]
    fn random_inputs_never_panic() {
        let mut good = Vec::new();
        write_command(&mut good, &[b"SELECT", b"0"]);
        good.extend_from_slice(b"#TS:1700000000\r\n");
        write_command(&mut good, &[b"MULTI"]);
        write_command(&mut good, &[b"SET", b"k", b"v"]);
        write_command(&mut good, &[b"EXEC"]);
        let manifest = b"file appendonly.aof.1.base.rdb seq 1 type b\nfile \"x y\" seq 2 type i\n";
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..20_000 {
            let base: &[u8] = if i % 2 == 0 { &good } else { manifest };
            let mut b = base.to_vec();
            for _ in 0..1 + rnd() % 4 {
                let at = (rnd() as usize) % (b.len() + 1);
                match rnd() % 3 {
                    0 if at < b.len() => b[at] = rnd() as u8,
                    1 => b.insert(at, b"*$\r\n#-9"[(rnd() % 7) as usize]),
                    _ => b.truncate(at),
                }
            }
            // (Comments alone are an empty manifest, which renders to nothing.)
            if let Ok(m) = Manifest::parse(&b)
                .map(Some)
                .unwrap_or(None)
                .filter(|m| m.load_order().count() + m.history.len() > 0)
                .ok_or(())
            {
                assert_eq!(Manifest::parse(m.render().as_bytes()).ok(), Some(m), "{b:?}");
            }
            let mut r = CommandReader::new(&b, 0);
            while let Ok(Some(_)) = r.next_item() {}
            let c = check("t", &b, 0, 1, 1_700_000_000);
            assert!(c.ok_up_to <= b.len());
        }
    }

    /// The items of `b` and how its reading ended (`None`: cleanly), read
    /// whole, or (`step`) by [`read_stream`] in reads of `step` bytes.
    /// Items as `(text, end)`.
    fn read_all(b: &[u8], step: Option<usize>) -> (Vec<(String, usize)>, Option<StreamError>) {
        let mut items = Vec::new();
        let Some(step) = step else {
            let mut r = CommandReader::new(b, 0);
            loop {
                match r.next_item() {
                    Ok(Some(i)) => items.push(item_text(&i)),
                    Ok(None) => return (items, None),
                    Err(e) => return (items, Some(e)),
                }
            }
        };
        let res = read_stream(&mut &b[..], 0, step, |i| {
            items.push(item_text(&i));
            Ok::<(), ()>(())
        });
        match res {
            Ok(()) => (items, None),
            Err(StreamStop::Stream(e)) => (items, Some(e)),
            Err(e) => panic!("{e:?}"),
        }
    }

    fn item_text(i: &Item<'_>) -> (String, usize) {
        match i {
            Item::Command { argv, end } => (format!("{argv:?}"), *end),
            Item::Annotation { text, end } => (format!("#{text:?}"), *end),
        }
    }

    /// A file read through windows (the loader's megabyte reads) gives the
    /// items, offsets and ending the whole file gives, wherever the windows
    /// end: in a line, a count, an argument or its line end.
    #[test]
    fn windows_read_as_the_whole_file() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut clean = Vec::new();
        write_command(&mut clean, &[b"SELECT", b"0"]);
        clean.extend_from_slice(b"#TS:1700000000\r\n");
        write_command(&mut clean, &[b"SET", b"key", &[b'v'; 300]]);
        write_command(&mut clean, &[b"MULTI"]);
        write_command(&mut clean, &[b"RPUSH", b"l", b"a", b"", b"ccc"]);
        write_command(&mut clean, &[b"EXEC"]);
        let long = vec![b'#'; LINE_MAX + 40];
        for case in 0..400 {
            let mut b = clean.clone();
            if case % 50 == 1 {
                b.extend_from_slice(&long);
                b.extend_from_slice(b"\r\n");
                write_command(&mut b, &[b"PING"]);
            }
            for _ in 0..case % 4 {
                let at = (rnd() as usize) % (b.len() + 1);
                match rnd() % 3 {
                    0 if at < b.len() => b[at] = b"*$\r\n#-9x"[(rnd() % 8) as usize],
                    1 => b.insert(at, b"*$\r\n#-9"[(rnd() % 7) as usize]),
                    _ => b.truncate(at),
                }
            }
            let whole = read_all(&b, None);
            for step in [1, 2, 3, 5, 7, 16, 64, 333, LINE_MAX - 1, LINE_MAX, b.len().max(1)] {
                assert_eq!(read_all(&b, Some(step)), whole, "case {case}, step {step}: {b:?}");
            }
        }
    }

    #[test]
    fn reader_torn_and_corrupt() {
        let mut buf = Vec::new();
        write_command(&mut buf, &[b"SET", b"k", b"v"]);
        let whole = buf.len();
        buf.extend_from_slice(b"#TS:1\r\n");
        write_command(&mut buf, &[b"SET", b"k2", b"v2"]);
        let mut r = CommandReader::new(&buf, 0);
        assert!(matches!(r.next_item(), Ok(Some(Item::Command { end, .. })) if end == whole));
        assert!(matches!(r.next_item(), Ok(Some(Item::Annotation { text: b"TS:1", .. }))));
        assert!(matches!(r.next_item(), Ok(Some(Item::Command { .. }))));
        assert_eq!(r.next_item(), Ok(None));
        for cut in whole + 7 + 1..buf.len() {
            let mut r = CommandReader::new(&buf[..cut], whole + 7);
            assert_eq!(r.next_item(), Err(StreamError::Truncated), "cut at {cut}");
        }
        let mut bad = buf.clone();
        bad[whole + 7] = b'x';
        let mut r = CommandReader::new(&bad, whole + 7);
        assert_eq!(r.next_item(), Err(StreamError::Format { offset: whole + 7 }));
    }
}

/// What [`check`] found in one file's command stream (after any RDB
/// preamble), in `redis-check-aof`'s terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Offset up to which the file is valid (the start of the first
    /// command, or transaction, that is not).
    pub ok_up_to: usize,
    /// Line count (`redis-check-aof`'s, which counts the newlines it
    /// consumed, from `line_start`).
    pub line: u64,
    /// The error as the tool prints it (`0x  offset: reason`).
    pub error: Option<String>,
    /// A byte that starts neither a command nor an annotation.
    pub format_error: bool,
    /// `--truncate-to-timestamp`: the offset of the first annotation past
    /// the timestamp.
    pub cut_at_timestamp: Option<usize>,
    /// An annotation to cut at was found at offset 0.
    pub nothing_before_timestamp: bool,
    /// A `#TS:` annotation that is not a number.
    pub bad_timestamp: bool,
}

/// Checks a command stream strictly, as `redis-check-aof`'s
/// `checkSingleAof` does: every count and length line must end in CRLF,
/// every argument be followed by CRLF, `MULTI` closed by `EXEC`.
/// `to_timestamp` (non-zero) stops at the first `#TS:` annotation past it.
pub fn check(name: &str, buf: &[u8], start: usize, line_start: u64, to_timestamp: i64) -> Checked {
    let mut c = Checked { ok_up_to: start, line: line_start, ..Default::default() };
    let mut pos = start;
    let mut multi = 0i32;
    let mut epos = start;
    let err = |epos: usize, msg: String| Some(format!("0x{epos:16x}: {msg}"));
    // fgets of `n` bytes (at most n-1, up to and including a newline).
    let fgets = |pos: usize, n: usize| -> &[u8] {
        let rest = &buf[pos.min(buf.len())..];
        let max = n - 1;
        let k =
            rest.iter().take(max).position(|&b| b == b'\n').map_or(rest.len().min(max), |i| i + 1);
        &rest[..k]
    };
    'outer: loop {
        if multi == 0 {
            c.ok_up_to = pos;
        }
        if pos >= buf.len() {
            break;
        }
        match buf[pos] {
            b'#' => {
                epos = pos;
                let l = fgets(pos, LINE_MAX);
                pos += l.len();
                if to_timestamp != 0 && l.starts_with(b"#TS:") {
                    let body = &l[4..];
                    let digits =
                        body.iter().position(|b| !b.is_ascii_digit()).unwrap_or(body.len());
                    if digits == 0 || body.get(digits) != Some(&b'\r') {
                        c.bad_timestamp = true;
                        return c;
                    }
                    let ts: i64 = std::str::from_utf8(&body[..digits])
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(i64::MAX);
                    if ts > to_timestamp {
                        if epos == 0 {
                            c.nothing_before_timestamp = true;
                        }
                        c.cut_at_timestamp = Some(epos);
                        return c;
                    }
                }
            }
            b'*' => {
                // readLong('*') then the arguments.
                let read_long = |pos: &mut usize, prefix: u8, c: &mut Checked| -> Option<i64> {
                    let at = *pos;
                    if at >= buf.len() {
                        return None;
                    }
                    let l = fgets(at, 128);
                    *pos += l.len();
                    if l[0] != prefix {
                        c.error = err(
                            at,
                            format!(
                                "Expected prefix '{}', got: '{}'",
                                prefix as char, l[0] as char
                            ),
                        );
                        return None;
                    }
                    let body = &l[1..];
                    let sign = usize::from(matches!(body.first(), Some(b'-' | b'+')));
                    let digits = body[sign..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .unwrap_or(body.len() - sign);
                    let v = std::str::from_utf8(&body[..sign + digits])
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                        .unwrap_or(0);
                    let after = &l[1 + sign + digits..];
                    if !after.starts_with(b"\r\n") {
                        let b0 = after.first().copied().unwrap_or(0);
                        let b1 = after.get(1).copied().unwrap_or(0);
                        c.error = err(at, format!("Expected \\r\\n, got: {b0:02x}{b1:02x}"));
                        return None;
                    }
                    c.line += 1;
                    Some(v)
                };
                epos = pos;
                let Some(argc) = read_long(&mut pos, b'*', &mut c) else { break };
                for i in 0..argc.max(0) {
                    epos = pos;
                    let Some(len) = read_long(&mut pos, b'$', &mut c) else { break 'outer };
                    epos = pos;
                    if !(0..=i64::MAX - 2).contains(&len) {
                        c.error = err(epos, format!("Expected to read string of {len} bytes, which is not in the suitable range"));
                        break 'outer;
                    }
                    let want = len as u64 + 2;
                    let have = (buf.len() - pos) as u64;
                    if have < want {
                        c.error =
                            err(epos, format!("Expected to read {want} bytes, got {have} bytes"));
                        break 'outer;
                    }
                    let arg = &buf[pos..pos + len as usize];
                    let nl = &buf[pos + len as usize..pos + want as usize];
                    pos += want as usize;
                    if nl != b"\r\n" {
                        c.error =
                            err(epos, format!("Expected \\r\\n, got: {:02x}{:02x}", nl[0], nl[1]));
                        break 'outer;
                    }
                    c.line += 1;
                    if i == 0 {
                        if arg.eq_ignore_ascii_case(b"multi") {
                            multi += 1;
                            if multi > 1 {
                                c.error = err(epos, format!("Unexpected MULTI in AOF {name}"));
                                break 'outer;
                            }
                        } else if arg.eq_ignore_ascii_case(b"exec") {
                            multi -= 1;
                            if multi != 0 {
                                c.error = err(epos, format!("Unexpected EXEC in AOF {name}"));
                                break 'outer;
                            }
                        }
                    }
                }
            }
            _ => {
                c.format_error = true;
                break;
            }
        }
    }
    if pos >= buf.len() && multi != 0 && c.error.is_none() && !c.format_error {
        // Redis reports it at the last position it read from.
        c.error = err(epos, "Reached EOF before reading EXEC for MULTI".to_string());
    }
    c
}
