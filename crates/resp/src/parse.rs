//! The request parser: RESP multibulk arrays and inline commands.
//!
//! Zero-copy for multibulk requests: arguments are recorded as byte ranges
//! of the caller's read buffer. Inline commands need unescaping, so their
//! arguments are copied into the [`ArgBuf`]'s scratch space (inline requests
//! are at most 64 KiB and rare on hot paths).
//!
//! The accepted grammar and every protocol error follow Redis 7.0's
//! `processMultibulkBuffer` / `processInlineBuffer`, including its quirks:
//! the two bytes after a bulk payload are skipped without being checked, a
//! count of zero or less is an empty request, and a NUL ends an inline line.

use memchr::memchr;

use crate::num::parse_i64;

/// Longest inline request, and longest count line, Redis accepts.
pub const INLINE_MAX: usize = 64 * 1024;

/// Limits applied while parsing, as Redis applies them.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: i64,
    /// Whether the connection still has to authenticate (Redis then caps
    /// the multibulk count at 10 and bulk lengths at 16384).
    pub unauthenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 * 1024 * 1024, unauthenticated: false }
    }
}

/// A protocol error; the connection is answered with
/// `-ERR Protocol error: <message>` and closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    TooBigInlineRequest,
    UnbalancedQuotes,
    TooBigMbulkCount,
    InvalidMultibulkLength,
    TooBigBulkCount,
    ExpectedDollar(u8),
    InvalidBulkLength,
    /// More than 10 arguments before the client authenticated.
    UnauthenticatedMultibulkLength,
    /// An argument above 16 KiB before the client authenticated.
    UnauthenticatedBulkLength,
}

impl ProtocolError {
    /// The error line's text without the leading `-` and trailing CRLF.
    pub fn reply_text(&self) -> Vec<u8> {
        let mut s = b"ERR Protocol error: ".to_vec();
        match self {
            ProtocolError::TooBigInlineRequest => s.extend_from_slice(b"too big inline request"),
            ProtocolError::UnbalancedQuotes => s.extend_from_slice(b"unbalanced quotes in request"),
            ProtocolError::TooBigMbulkCount => s.extend_from_slice(b"too big mbulk count string"),
            ProtocolError::InvalidMultibulkLength => {
                s.extend_from_slice(b"invalid multibulk length")
            }
            ProtocolError::TooBigBulkCount => s.extend_from_slice(b"too big bulk count string"),
            ProtocolError::ExpectedDollar(c) => {
                s.extend_from_slice(b"expected '$', got '");
                s.push(*c);
                s.push(b'\'');
            }
            ProtocolError::InvalidBulkLength => s.extend_from_slice(b"invalid bulk length"),
            ProtocolError::UnauthenticatedMultibulkLength => {
                s.extend_from_slice(b"unauthenticated multibulk length")
            }
            ProtocolError::UnauthenticatedBulkLength => {
                s.extend_from_slice(b"unauthenticated bulk length")
            }
        }
        s
    }
}

/// Result of one parse step.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A request with at least one argument is in the [`ArgBuf`];
    /// `consumed` bytes of input belong to it.
    Command { consumed: usize },
    /// Bytes that form no request (an empty line, `*0`); skip them.
    Empty { consumed: usize },
    /// More input is needed; do not try again before `need` bytes (counted
    /// from the start of the slice passed in) are buffered.
    Incomplete { need: usize },
    /// The input is not the Redis protocol.
    Error(ProtocolError),
}

/// The arguments of the last parsed request, as ranges (multibulk) or as
/// copies in scratch space (inline). Reused across requests.
#[derive(Default, Debug)]
pub struct ArgBuf {
    spans: Vec<(u32, u32)>,
    scratch: Vec<u8>,
    inline: bool,
    /// After [`Parsed::Incomplete`]: where the part not parsed yet begins
    /// (see [`unparsed_from`](Self::unparsed_from)).
    unparsed: usize,
}

impl ArgBuf {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Whether the request came in the inline form.
    pub fn is_inline(&self) -> bool {
        self.inline
    }

    /// After [`Parsed::Incomplete`], the offset (in the slice passed to
    /// [`parse`]) where what is not parsed yet begins: past the arguments
    /// and the bulk headers read so far. Redis moves those out of its query
    /// buffer as it reads them, so this is where its `qbuf` starts.
    pub fn unparsed_from(&self) -> usize {
        self.unparsed
    }

    /// Argument `i`; `buf` must be the slice that was passed to [`parse`].
    pub fn get<'a>(&'a self, buf: &'a [u8], i: usize) -> &'a [u8] {
        let (s, e) = self.spans[i];
        let src = if self.inline { &self.scratch[..] } else { buf };
        &src[s as usize..e as usize]
    }

    /// Puts the arguments in `dst`, as many as fit, in one pass over the
    /// spans (no bounds check per argument); returns how many.
    #[inline]
    pub fn fill_array<'a, const N: usize>(
        &'a self,
        buf: &'a [u8],
        dst: &mut [&'a [u8]; N],
    ) -> usize {
        let src = if self.inline { &self.scratch[..] } else { buf };
        let mut n = 0;
        for (d, &(s, e)) in dst.iter_mut().zip(self.spans.iter()) {
            *d = &src[s as usize..e as usize];
            n += 1;
        }
        n
    }

    /// Appends every argument to `dst`.
    pub fn fill<'a, E: Extend<&'a [u8]>>(&'a self, buf: &'a [u8], dst: &mut E) {
        let src = if self.inline { &self.scratch[..] } else { buf };
        dst.extend(self.spans.iter().map(|&(s, e)| &src[s as usize..e as usize]));
    }

    /// The span table at the size the short path keeps (see [`parse_short`]).
    #[cold]
    fn reset_spans(&mut self) {
        self.spans = Vec::with_capacity(SHORT_MAX);
    }

    fn clear(&mut self) {
        // A request with many arguments leaves a big span table behind;
        // Redis frees its argv array after every command, so one huge
        // request does not pin its size for the connection's lifetime.
        if self.spans.capacity() > KEEP_SPANS {
            self.spans = Vec::new();
        } else {
            self.spans.clear();
        }
        self.scratch.clear();
        self.inline = false;
    }

    /// Gives back the memory a past request needed beyond the usual
    /// (an idle connection's, on the server cron's request).
    pub fn release(&mut self) {
        if self.spans.capacity() > KEEP_SPANS {
            self.spans = Vec::new();
        }
        if self.scratch.capacity() > KEEP_SCRATCH {
            self.scratch = Vec::new();
        }
    }
}

/// The span table an [`ArgBuf`] keeps between requests (8 KiB); a bigger
/// one is freed when the next request is parsed.
const KEEP_SPANS: usize = 1024;
/// The inline scratch kept between requests.
const KEEP_SCRATCH: usize = 4096;

/// Parses one request from the start of `buf`.
///
/// Inlined into the caller for the short request ([`parse_short`]),
/// which writes its spans in place; anything else is read out of line.
#[inline(always)]
pub fn parse(buf: &[u8], limits: &Limits, out: &mut ArgBuf) -> Parsed {
    if buf.first() == Some(&b'*') {
        if let Some(consumed) = parse_short(buf, limits, out) {
            return Parsed::Command { consumed };
        }
    }
    parse_general(buf, limits, out)
}

#[inline(never)]
fn parse_general(buf: &[u8], limits: &Limits, out: &mut ArgBuf) -> Parsed {
    out.clear();
    match buf.first() {
        None => {
            out.unparsed = 0;
            Parsed::Incomplete { need: 1 }
        }
        Some(b'*') => parse_multibulk(buf, limits, out),
        Some(_) => parse_inline(buf, out),
    }
}

/// Arguments the short path reads at most, and the span capacity it
/// keeps so that it writes them without a test per argument.
const SHORT_MAX: usize = 9;

/// The shape of nearly every pipelined request, read in one pass with a
/// few tests an argument: a count of one to nine, each argument a `$`
/// and a length of one or two digits (no leading zero but `$0`), and the
/// whole request in `buf`. `None` for anything else (longer counts or
/// lengths, a request cut short, anything malformed), which
/// [`parse_multibulk`] then reads from the start: where this answers, it
/// answers as that does (the same bytes skipped unchecked after each
/// `\r`; the unauthenticated limits cannot bite below ten arguments of
/// at most 99 bytes). The spans are written in place and their count set
/// once, at the end; `out` is left as [`ArgBuf::clear`] leaves it but for
/// the inline scratch, which only an inline request reads (and whose
/// parse clears it first).
#[inline(always)]
fn parse_short(buf: &[u8], limits: &Limits, out: &mut ArgBuf) -> Option<usize> {
    // Spans are u32; so is every offset below once this holds.
    if buf.len() > u32::MAX as usize {
        return None;
    }
    let cap = out.spans.capacity();
    if !(SHORT_MAX..=KEEP_SPANS).contains(&cap) {
        out.reset_spans();
    }
    out.spans.clear();
    out.inline = false;
    let h = buf.get(1..3)?;
    let count = h[0].wrapping_sub(b'1');
    if count > 8 || h[1] != b'\r' {
        return None;
    }
    let spans = out.spans.as_mut_ptr();
    let mut pos = 4;
    for i in 0..=usize::from(count) {
        // `$`, the digits, `\r` and its byte: always within the argument
        // when the whole request is here.
        let h = buf.get(pos..pos + 5)?;
        let a = h[1].wrapping_sub(b'0');
        if h[0] != b'$' || a > 9 {
            return None;
        }
        let (len, start) = if h[2] == b'\r' {
            (usize::from(a), pos + 4)
        } else {
            let b = h[2].wrapping_sub(b'0');
            if a == 0 || b > 9 || h[3] != b'\r' {
                return None;
            }
            (usize::from(a * 10 + b), pos + 5)
        };
        if len as i64 > limits.max_bulk_len {
            return None;
        }
        let end = start + len;
        if buf.len() < end + 2 {
            return None;
        }
        // SAFETY: `i` < `count` + 1 <= SHORT_MAX <= the capacity (made
        // so above), so the write is within the vector's allocation; the
        // length is set only once every span below it is written.
        unsafe { spans.add(i).write((start as u32, end as u32)) };
        pos = end + 2;
    }
    // SAFETY: the loop wrote spans 0..=count (it returns on any failure
    // before this), all within the capacity; `(u32, u32)` needs no drop.
    unsafe { out.spans.set_len(usize::from(count) + 1) };
    Some(pos)
}

/// Finds the end of a `<prefix><number>\r\n` line. Returns the index of
/// the `\r`, `Err(true)` when the line is too long, `Err(false)` when more
/// input is needed.
fn line_end(buf: &[u8], from: usize) -> Result<usize, bool> {
    match memchr(b'\r', &buf[from..]) {
        None => Err(buf.len() - from > INLINE_MAX),
        // Redis also requires the byte after '\r' to be present.
        Some(i) if from + i + 1 >= buf.len() => Err(false),
        Some(i) => Ok(from + i),
    }
}

/// The common shape of a count line, read without a search: `from` is
/// the first byte after the `*` or `$`, followed by one to nine digits
/// (no leading zero unless the number is `0`), a `\r` and one more byte.
/// Returns the number and the index of the `\r`; `None` for anything
/// else (longer numbers, signs, incomplete input, errors), which the
/// general path then reads exactly as before. Equivalent to it where it
/// answers: the `\r` after the digits is the line's first one.
#[inline]
fn short_number(buf: &[u8], from: usize) -> Option<(i64, usize)> {
    // One or two digits, the count of nearly every request and the length
    // of most arguments (`*3`, `$3`, `$16`): read without the loop, with
    // the loop's rules (the byte after the `\r` present; no leading zero).
    if let Some(w) = buf.get(from..from + 3) {
        let a = w[0].wrapping_sub(b'0');
        if a <= 9 && w[1] == b'\r' {
            return Some((i64::from(a), from + 1));
        }
        let b = w[1].wrapping_sub(b'0');
        if a.wrapping_sub(1) < 9 && b <= 9 && w[2] == b'\r' && buf.len() > from + 3 {
            return Some((i64::from(a * 10 + b), from + 2));
        }
    }
    let d = buf.get(from..)?;
    let first = d.first()?.wrapping_sub(b'0');
    if first > 9 {
        return None;
    }
    if first == 0 {
        // Only `0` itself may start with a zero.
        return (d.len() > 2 && d[1] == b'\r').then_some((0, from + 1));
    }
    let mut v = u64::from(first);
    // At most nine digits: the value then fits every limit's type.
    let n = d.len().min(10);
    let mut i = 1;
    while i < n {
        let x = d[i].wrapping_sub(b'0');
        if x > 9 {
            return (d[i] == b'\r' && i + 1 < d.len()).then_some((v as i64, from + i));
        }
        v = v * 10 + u64::from(x);
        i += 1;
    }
    None
}

#[inline(never)]
fn parse_multibulk(buf: &[u8], limits: &Limits, out: &mut ArgBuf) -> Parsed {
    let (count, cr) = match short_number(buf, 1) {
        Some(n) => n,
        None => {
            let cr = match line_end(buf, 0) {
                Ok(i) => i,
                Err(true) => return Parsed::Error(ProtocolError::TooBigMbulkCount),
                Err(false) => {
                    out.unparsed = 0;
                    return Parsed::Incomplete { need: buf.len() + 1 };
                }
            };
            match parse_i64(&buf[1..cr]) {
                Some(n) if n <= i64::from(i32::MAX) => (n, cr),
                _ => return Parsed::Error(ProtocolError::InvalidMultibulkLength),
            }
        }
    };
    if count > 10 && limits.unauthenticated {
        return Parsed::Error(ProtocolError::UnauthenticatedMultibulkLength);
    }
    let mut pos = cr + 2;
    if count <= 0 {
        return Parsed::Empty { consumed: pos };
    }
    // Reserve modestly: a hostile count must not allocate up front.
    out.spans.reserve((count as usize).min(1024));
    for _ in 0..count {
        if pos >= buf.len() {
            out.unparsed = pos;
            return Parsed::Incomplete { need: pos + 1 };
        }
        let fast = if buf[pos] == b'$' { short_number(buf, pos + 1) } else { None };
        let (len, cr) = match fast {
            Some((n, cr)) if n <= limits.max_bulk_len => (n as usize, cr),
            _ => {
                let cr = match line_end(buf, pos) {
                    Ok(i) => i,
                    Err(true) => return Parsed::Error(ProtocolError::TooBigBulkCount),
                    Err(false) => {
                        out.unparsed = pos;
                        return Parsed::Incomplete { need: buf.len() + 1 };
                    }
                };
                if buf[pos] != b'$' {
                    return Parsed::Error(ProtocolError::ExpectedDollar(buf[pos]));
                }
                match parse_i64(&buf[pos + 1..cr]) {
                    Some(n) if n >= 0 && n <= limits.max_bulk_len => (n as usize, cr),
                    _ => return Parsed::Error(ProtocolError::InvalidBulkLength),
                }
            }
        };
        if len > 16384 && limits.unauthenticated {
            return Parsed::Error(ProtocolError::UnauthenticatedBulkLength);
        }
        let start = cr + 2;
        // Redis skips the two bytes after the payload without checking them.
        let end = start + len;
        if buf.len() < end + 2 {
            out.unparsed = start;
            return Parsed::Incomplete { need: end + 2 };
        }
        if end > u32::MAX as usize {
            // Read buffers never get this big (the query buffer limit is
            // 1 GiB), but stay correct if they do.
            return Parsed::Error(ProtocolError::InvalidBulkLength);
        }
        out.spans.push((start as u32, end as u32));
        pos = end + 2;
    }
    Parsed::Command { consumed: pos }
}

fn parse_inline(buf: &[u8], out: &mut ArgBuf) -> Parsed {
    let nl = match memchr(b'\n', buf) {
        Some(i) => i,
        None if buf.len() > INLINE_MAX => return Parsed::Error(ProtocolError::TooBigInlineRequest),
        None => {
            // An inline request is read as one line: nothing of it is parsed.
            out.unparsed = 0;
            return Parsed::Incomplete { need: buf.len() + 1 };
        }
    };
    let mut line = &buf[..nl];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    // Redis splits a C string: a NUL ends the line.
    if let Some(z) = memchr(0, line) {
        line = &line[..z];
    }
    out.inline = true;
    if split_into(line, out).is_err() {
        out.clear();
        return Parsed::Error(ProtocolError::UnbalancedQuotes);
    }
    if out.spans.is_empty() {
        Parsed::Empty { consumed: nl + 1 }
    } else {
        Parsed::Command { consumed: nl + 1 }
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits a line into arguments with Redis's `sdssplitargs` rules, as
/// inline requests, redis.conf lines and redis-cli input are split:
/// blanks separate words, `"..."` takes `\n \r \t \b \a \xHH \<c>`,
/// `'...'` takes `\'`, a closing quote must be followed by a blank or the
/// end, and a NUL ends the line. `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match memchr(0, line) {
        Some(z) => &line[..z],
        None => line,
    };
    let mut ab = ArgBuf { inline: true, ..ArgBuf::default() };
    split_into(line, &mut ab).ok()?;
    Some((0..ab.len()).map(|i| ab.get(&[], i).to_vec()).collect())
}

/// Splits an inline line (without NULs) into `out`'s scratch space.
fn split_into(line: &[u8], out: &mut ArgBuf) -> Result<(), ()> {
    let at = |i: usize| -> u8 { line.get(i).copied().unwrap_or(0) };
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(());
        }
        let start = out.scratch.len();
        let (mut inq, mut insq) = (false, false);
        loop {
            let c = at(p);
            if inq {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(at(p + 2)), hex_val(at(p + 3))) {
                        out.scratch.push(h * 16 + l);
                        p += 4;
                        continue;
                    }
                }
                if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    out.scratch.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    // A closing quote must be followed by a space or the end.
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(());
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(());
                } else {
                    out.scratch.push(c);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    out.scratch.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(());
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(());
                } else {
                    out.scratch.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        break;
                    }
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    _ => out.scratch.push(c),
                }
            }
            p += 1;
        }
        out.spans.push((start as u32, out.scratch.len() as u32));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_incomplete_request_says_where_its_unparsed_part_begins() {
        let cases: [(&[u8], usize); 6] = [
            (b"*2\r\n$3\r\nGET\r\n$100000\r\nabc", 22),
            (b"*2\r\n$3\r\nGET\r\n$10", 13),
            (b"*2\r\n$3\r\nGET\r\n", 13),
            (b"*2\r\n$3\r\nGE", 8),
            (b"*2", 0),
            (b"GET k", 0),
        ];
        for (input, want) in cases {
            let mut ab = ArgBuf::new();
            let r = parse(input, &Limits::default(), &mut ab);
            assert!(matches!(r, Parsed::Incomplete { .. }), "{input:?}: {r:?}");
            assert_eq!(ab.unparsed_from(), want, "{input:?}");
        }
    }

    use super::*;

    #[test]
    fn fill_array_gives_the_arguments_get_gives_as_many_as_fit() {
        let reqs: [&[u8]; 3] = [
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n",
            b"SET 'a b' c\r\n",
            b"*1\r\n$4\r\nPING\r\n",
        ];
        for input in reqs {
            let mut ab = ArgBuf::new();
            assert!(matches!(parse(input, &Limits::default(), &mut ab), Parsed::Command { .. }));
            let want: Vec<&[u8]> = (0..ab.len()).map(|i| ab.get(input, i)).collect();
            let mut arr: [&[u8]; 8] = [&[]; 8];
            let n = ab.fill_array(input, &mut arr);
            assert_eq!(&arr[..n], &want[..], "{input:?}");
            let mut two: [&[u8]; 2] = [&[]; 2];
            let n = ab.fill_array(input, &mut two);
            assert_eq!(&two[..n], &want[..want.len().min(2)], "{input:?}");
        }
    }

    /// A 100,000-argument request's span table (800 KB) is not kept for
    /// the connection's lifetime: the next parse, or a release, frees it.
    #[test]
    fn a_huge_requests_span_table_is_freed_after_it() {
        let mut big = format!("*{}\r\n", 100_000).into_bytes();
        for _ in 0..100_000 {
            big.extend_from_slice(b"$1\r\nx\r\n");
        }
        let mut ab = ArgBuf::new();
        assert!(matches!(parse(&big, &Limits::default(), &mut ab), Parsed::Command { .. }));
        assert!(ab.spans.capacity() >= 100_000);
        assert!(matches!(
            parse(b"*1\r\n$4\r\nPING\r\n", &Limits::default(), &mut ab),
            Parsed::Command { .. }
        ));
        assert!(ab.spans.capacity() <= KEEP_SPANS, "{}", ab.spans.capacity());
        assert!(matches!(parse(&big, &Limits::default(), &mut ab), Parsed::Command { .. }));
        ab.release();
        assert_eq!(ab.spans.capacity(), 0);
    }

    /// The short path writes its spans in place and leaves the inline
    /// scratch as it was: a request after an inline one, or after one the
    /// short path gave up on halfway, reads only its own arguments.
    #[test]
    fn a_short_request_after_an_inline_or_abandoned_one_reads_its_own() {
        let mut ab = ArgBuf::new();
        let l = Limits::default();
        assert!(matches!(parse(b"SET a b\r\n", &l, &mut ab), Parsed::Command { .. }));
        assert!(ab.is_inline());
        let get = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(parse(get, &l, &mut ab), Parsed::Command { consumed: get.len() });
        assert!(!ab.is_inline());
        assert_eq!((ab.len(), ab.get(get, 0), ab.get(get, 1)), (2, &b"GET"[..], &b"k"[..]));
        // Gives up at the third argument (a three-digit length).
        let long = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\n{}\r\n", "v".repeat(100));
        assert!(matches!(parse(long.as_bytes(), &l, &mut ab), Parsed::Command { .. }));
        assert_eq!(ab.len(), 3);
        assert_eq!(ab.get(long.as_bytes(), 2), "v".repeat(100).as_bytes());
        assert_eq!(
            parse(&get[..get.len() - 3], &l, &mut ab),
            Parsed::Incomplete { need: get.len() }
        );
        assert_eq!(parse(get, &l, &mut ab), Parsed::Command { consumed: get.len() });
        assert_eq!(ab.len(), 2);
    }

    fn args(input: &[u8]) -> (Parsed, Vec<Vec<u8>>) {
        let mut ab = ArgBuf::new();
        let r = parse(input, &Limits::default(), &mut ab);
        let v = (0..ab.len()).map(|i| ab.get(input, i).to_vec()).collect();
        (r, v)
    }

    /// The multibulk grammar read line by line with a search for each
    /// `\r` (the parser before its short-number path), as the reference
    /// the fast path must agree with.
    fn reference(buf: &[u8], limits: &Limits) -> (Parsed, Vec<(u32, u32)>) {
        let mut spans = Vec::new();
        let cr = match line_end(buf, 0) {
            Ok(i) => i,
            Err(true) => return (Parsed::Error(ProtocolError::TooBigMbulkCount), spans),
            Err(false) => return (Parsed::Incomplete { need: buf.len() + 1 }, spans),
        };
        let count = match parse_i64(&buf[1..cr]) {
            Some(n) if n <= i64::from(i32::MAX) => n,
            _ => return (Parsed::Error(ProtocolError::InvalidMultibulkLength), spans),
        };
        if count > 10 && limits.unauthenticated {
            return (Parsed::Error(ProtocolError::UnauthenticatedMultibulkLength), spans);
        }
        let mut pos = cr + 2;
        if count <= 0 {
            return (Parsed::Empty { consumed: pos }, spans);
        }
        for _ in 0..count {
            if pos >= buf.len() {
                return (Parsed::Incomplete { need: pos + 1 }, spans);
            }
            let cr = match line_end(buf, pos) {
                Ok(i) => i,
                Err(true) => return (Parsed::Error(ProtocolError::TooBigBulkCount), spans),
                Err(false) => return (Parsed::Incomplete { need: buf.len() + 1 }, spans),
            };
            if buf[pos] != b'$' {
                return (Parsed::Error(ProtocolError::ExpectedDollar(buf[pos])), spans);
            }
            let len = match parse_i64(&buf[pos + 1..cr]) {
                Some(n) if n >= 0 && n <= limits.max_bulk_len => n as usize,
                _ => return (Parsed::Error(ProtocolError::InvalidBulkLength), spans),
            };
            if len > 16384 && limits.unauthenticated {
                return (Parsed::Error(ProtocolError::UnauthenticatedBulkLength), spans);
            }
            let start = cr + 2;
            let end = start + len;
            if buf.len() < end + 2 {
                return (Parsed::Incomplete { need: end + 2 }, spans);
            }
            spans.push((start as u32, end as u32));
            pos = end + 2;
        }
        (Parsed::Command { consumed: pos }, spans)
    }

    #[test]
    fn short_numbers_agree_with_the_line_search() {
        // Requests built from the bytes that matter to the count lines
        // (digits, signs, CR/LF, `$`, a letter), mutated at random, every
        // prefix of each: the parser and the reference agree on the
        // outcome and on every argument.
        let alphabet = b"0123456789\r\n$*-+a";
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let seeds: [&[u8]; 6] = [
            b"*2\r\n$3\r\nGET\r\n$16\r\nkey:000000012345\r\n",
            b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$10\r\n0123456789\r\n",
            b"*1\r\n$999999999\r\nx\r\n",
            b"*12\r\n$1\r\na\r\n$01\r\nb\r\n",
            // Short arguments, then one the short path gives up on (its
            // spans so far must not stay behind).
            b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$100\r\n0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\r\n",
            b"*9\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n$99\r\n012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678\r\n",
        ];
        for limits in [Limits::default(), Limits { max_bulk_len: 5, unauthenticated: true }] {
            for round in 0..4000 {
                let mut req = seeds[round % seeds.len()].to_vec();
                for _ in 0..rnd(4) {
                    let at = rnd(req.len());
                    req[at] = alphabet[rnd(alphabet.len())];
                }
                for cut in 0..=req.len() {
                    let input = &req[..cut];
                    if input.first() != Some(&b'*') {
                        continue;
                    }
                    let mut ab = ArgBuf::new();
                    let got = parse(input, &limits, &mut ab);
                    let (want, spans) = reference(input, &limits);
                    assert_eq!(got, want, "input {:?}", String::from_utf8_lossy(input));
                    if matches!(got, Parsed::Command { .. }) {
                        assert_eq!(ab.spans, spans);
                    }
                }
            }
        }
    }

    #[test]
    fn multibulk() {
        let (r, v) = args(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nextra");
        assert_eq!(r, Parsed::Command { consumed: 20 });
        assert_eq!(v, vec![b"GET".to_vec(), b"k".to_vec()]);
    }

    #[test]
    fn multibulk_every_prefix_is_incomplete() {
        let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            let (r, _) = args(&full[..cut]);
            match r {
                Parsed::Incomplete { need } => assert!(need > cut, "cut {cut} need {need}"),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        assert_eq!(args(full).0, Parsed::Command { consumed: full.len() });
    }

    #[test]
    fn empty_requests() {
        assert_eq!(args(b"*0\r\n").0, Parsed::Empty { consumed: 4 });
        assert_eq!(args(b"*-1\r\n").0, Parsed::Empty { consumed: 5 });
        assert_eq!(args(b"\r\n").0, Parsed::Empty { consumed: 2 });
        assert_eq!(args(b"   \n").0, Parsed::Empty { consumed: 4 });
    }

    #[test]
    fn protocol_errors() {
        assert_eq!(args(b"*x\r\n").0, Parsed::Error(ProtocolError::InvalidMultibulkLength));
        assert_eq!(args(b"*1\r\n:1\r\n").0, Parsed::Error(ProtocolError::ExpectedDollar(b':')));
        assert_eq!(args(b"*1\r\n$-1\r\n").0, Parsed::Error(ProtocolError::InvalidBulkLength));
        assert_eq!(
            args(b"*1\r\n$536870913\r\n").0,
            Parsed::Error(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(args(b"GET \"k\n").0, Parsed::Error(ProtocolError::UnbalancedQuotes));
        assert_eq!(args(b"GET \"k\"x\n").0, Parsed::Error(ProtocolError::UnbalancedQuotes));
        let big = vec![b'a'; INLINE_MAX + 1];
        assert_eq!(args(&big).0, Parsed::Error(ProtocolError::TooBigInlineRequest));
        let mut big = b"*".to_vec();
        big.extend(vec![b'1'; INLINE_MAX + 1]);
        assert_eq!(args(&big).0, Parsed::Error(ProtocolError::TooBigMbulkCount));
    }

    #[test]
    fn inline_quoting() {
        let (r, v) = args(b"SET \"a b\\x41\\n\" 'it\\'s' c\"d e\"\r\n");
        assert_eq!(r, Parsed::Command { consumed: 32 });
        assert_eq!(
            v,
            vec![b"SET".to_vec(), b"a bA\n".to_vec(), b"it's".to_vec(), b"cd e".to_vec()]
        );
        let (_, v) = args(b"PING\n");
        assert_eq!(v, vec![b"PING".to_vec()]);
    }
}
