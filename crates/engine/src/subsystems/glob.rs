//! Glob-style pattern matching with exactly the semantics of Redis 7.0's
//! `stringmatchlen` (KEYS, SCAN MATCH, and any command that takes a
//! pattern, with or without `nocase`).
//!
//! Quirks kept on purpose, because clients see them:
//! - `*` never matches an empty string on its own (`KEYS *` special-cases
//!   that; the callers here do too); consecutive stars collapse.
//! - `[...]` classes: `^` negates, `a-z` ranges (reversed bounds are
//!   swapped, bytes compare as C's signed `char`), `\x` escapes `x`, an
//!   unterminated class ends at the end of the pattern, and `[]` matches
//!   nothing.
//! - `\` escapes the next byte; a trailing `\` is a literal backslash.
//! - Recursion (one level per `*`) stops at 1000 levels and then reports
//!   "no match", as Redis does since its CVE-2024-31228 fix, and a failed
//!   `*` tells its callers not to try longer matches, which keeps the cost
//!   polynomial (`a*a*a*…b` against `aaaa…`).
//!
//! Case folding is ASCII only (Redis runs with the C `LC_CTYPE`).

/// Whether `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    Matcher { p: pattern, nocase }.run(0, s, &mut skip_longer, 0)
}

struct Matcher<'a> {
    p: &'a [u8],
    nocase: bool,
}

/// Deepest `*` nesting Redis follows before giving up.
const MAX_NESTING: u32 = 1000;

#[inline]
fn lower(c: i32) -> i32 {
    if (i32::from(b'A')..=i32::from(b'Z')).contains(&c) {
        c + 32
    } else {
        c
    }
}

/// A byte as C's (signed) `char` widened to `int`.
#[inline]
fn signed(c: u8) -> i32 {
    i32::from(c as i8)
}

impl Matcher<'_> {
    /// The pattern byte at `i`; the end reads as the NUL terminator Redis's
    /// sds strings carry, which its loop relies on.
    #[inline]
    fn at(&self, i: usize) -> u8 {
        self.p.get(i).copied().unwrap_or(0)
    }

    #[inline]
    fn eq(&self, a: u8, b: u8) -> bool {
        if self.nocase {
            lower(signed(a)) == lower(signed(b))
        } else {
            a == b
        }
    }

    /// Matches the pattern from `pi` against all of `s`.
    fn run(&self, mut pi: usize, mut s: &[u8], skip_longer: &mut bool, nesting: u32) -> bool {
        if nesting > MAX_NESTING {
            return false;
        }
        let plen = self.p.len();
        while pi < plen && !s.is_empty() {
            match self.p[pi] {
                b'*' => {
                    while pi < plen && self.at(pi + 1) == b'*' {
                        pi += 1;
                    }
                    if plen - pi == 1 {
                        return true;
                    }
                    while !s.is_empty() {
                        if self.run(pi + 1, s, skip_longer, nesting + 1) {
                            return true;
                        }
                        if *skip_longer {
                            return false;
                        }
                        s = &s[1..];
                    }
                    // Nothing after this star matches anywhere in the rest
                    // of the string, so no earlier star can do better by
                    // swallowing more.
                    *skip_longer = true;
                    return false;
                }
                b'?' => s = &s[1..],
                b'[' => {
                    pi += 1;
                    let not = self.at(pi) == b'^';
                    if not {
                        pi += 1;
                    }
                    let c = s[0];
                    let mut hit = false;
                    loop {
                        let left = plen - pi;
                        let pc = self.at(pi);
                        if pc == b'\\' && left >= 2 {
                            pi += 1;
                            if self.at(pi) == c {
                                hit = true;
                            }
                        } else if pc == b']' {
                            break;
                        } else if left == 0 {
                            // Unterminated: step back so the shared advance
                            // below lands on the end.
                            pi -= 1;
                            break;
                        } else if left >= 3 && self.at(pi + 1) == b'-' {
                            let (mut lo, mut hi) = (signed(pc), signed(self.at(pi + 2)));
                            if lo > hi {
                                std::mem::swap(&mut lo, &mut hi);
                            }
                            let mut x = signed(c);
                            if self.nocase {
                                lo = lower(lo);
                                hi = lower(hi);
                                x = lower(x);
                            }
                            pi += 2;
                            if x >= lo && x <= hi {
                                hit = true;
                            }
                        } else if self.eq(pc, c) {
                            hit = true;
                        }
                        pi += 1;
                    }
                    if hit == not {
                        return false;
                    }
                    s = &s[1..];
                }
                b => {
                    let lit = if b == b'\\' && plen - pi >= 2 {
                        pi += 1;
                        self.p[pi]
                    } else {
                        b
                    };
                    if !self.eq(lit, s[0]) {
                        return false;
                    }
                    s = &s[1..];
                }
            }
            pi += 1;
            if s.is_empty() {
                while self.at(pi) == b'*' {
                    pi += 1;
                }
                break;
            }
        }
        pi >= plen && s.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    /// Keys and the patterns' results, from redis-server 7.0.15's KEYS
    /// (except `*`, which KEYS answers without matching).
    const KEYS: &[&[u8]] = &[
        b"", b"\\", b"a", b"ab", b"a]", b"-", b"]", b"A", b"b", b"^", b"[", b"a\\", b"aXb",
        b"\x80", b"\xff", b"\x00",
    ];

    fn keys(p: &[u8]) -> Vec<&'static [u8]> {
        let mut v: Vec<&[u8]> = KEYS.iter().copied().filter(|k| matches(p, k, false)).collect();
        v.sort();
        v
    }

    #[test]
    fn agrees_with_redis_keys() {
        let all_but_empty: Vec<&[u8]> = {
            let mut v: Vec<&[u8]> = KEYS.iter().copied().filter(|k| !k.is_empty()).collect();
            v.sort();
            v
        };
        let singles: Vec<&[u8]> = {
            let mut v: Vec<&[u8]> = KEYS.iter().copied().filter(|k| k.len() == 1).collect();
            v.sort();
            v
        };
        assert_eq!(keys(b"**"), all_but_empty);
        assert_eq!(keys(b"*"), all_but_empty);
        assert_eq!(keys(b"?"), singles);
        assert_eq!(keys(b"?*"), all_but_empty);
        assert_eq!(keys(b"*?"), all_but_empty);
        assert_eq!(keys(b"[^"), singles);
        assert_eq!(keys(b"[^]"), singles);
        assert_eq!(keys(b"[\\"), vec![&b"\\"[..]]);
        assert_eq!(keys(b"\\"), vec![&b"\\"[..]]);
        assert_eq!(keys(b"[a-]"), vec![&b"]"[..], b"^", b"a"]);
        assert_eq!(keys(b"[a-]*"), vec![&b"]"[..], b"^", b"a"]);
        let not_a: Vec<&[u8]> = singles.iter().copied().filter(|k| *k != b"a").collect();
        assert_eq!(keys(b"[^a]"), not_a);
        assert_eq!(keys(b"[a"), vec![&b"a"[..]]);
        assert!(keys(b"[").is_empty());
        assert!(keys(b"[]").is_empty());
        assert!(keys(b"[]]").is_empty());
        assert!(keys(b"[]a]").is_empty());
        assert!(keys(b"a[").is_empty());
        assert_eq!(keys(b"a[^"), vec![&b"a\\"[..], b"a]", b"ab"]);
        assert_eq!(keys(b"a\\"), vec![&b"a\\"[..]]);
        assert_eq!(keys(b"[z-a]*"), vec![&b"a"[..], b"aXb", b"a\\", b"a]", b"ab", b"b"]);
        assert_eq!(keys(b"*]"), vec![&b"]"[..], b"a]"]);
        assert_eq!(keys(b"[\\]]"), vec![&b"]"[..]]);
        assert_eq!(keys(b"*\\"), vec![&b"\\"[..], b"a\\"]);
        assert_eq!(keys(b""), vec![&b""[..]]);
        assert_eq!(
            keys(b"[a-\xff]"),
            vec![&b"\x00"[..], b"-", b"A", b"[", b"\\", b"]", b"^", b"a", b"\xff"]
        );
        assert_eq!(
            keys(b"[\x7f-\xff]"),
            vec![&b"\x00"[..], b"-", b"A", b"[", b"\\", b"]", b"^", b"a", b"b", b"\xff"]
        );
        assert_eq!(keys(b"[a-\\"), vec![&b"\\"[..], b"]", b"^", b"a"]);
        assert_eq!(keys(b"a*b"), vec![&b"aXb"[..], b"ab"]);
        assert_eq!(keys(b"[!a]"), vec![&b"a"[..]]);
        assert!(keys(b"\\*").is_empty());
        assert!(keys(b"\\?").is_empty());
        assert_eq!(keys(b"\x00"), vec![&b"\x00"[..]]);
        assert_eq!(keys(b"[\x00]"), vec![&b"\x00"[..]]);
    }

    #[test]
    fn nocase() {
        assert!(matches(b"HeLLo*", b"hello world", true));
        assert!(!matches(b"HeLLo*", b"hello world", false));
        assert!(matches(b"[A-C]x", b"bX", true));
        assert!(!matches(b"[A-C]x", b"bX", false));
        assert!(matches(b"[^a]", b"A", false));
        assert!(!matches(b"[^a]", b"A", true));
        assert!(matches(b"\\Q", b"q", true));
    }

    /// Redis gives up past 1000 nested stars (values from redis-server
    /// 7.0.15 against a key of 1100 `a`s).
    #[test]
    fn nesting_limit() {
        let key = vec![b'a'; 1100];
        for (n, star_a, a_star) in [(1000, true, true), (1001, false, true), (1002, false, false)] {
            assert_eq!(matches(&b"*a".repeat(n), &key, false), star_a, "*a x {n}");
            assert_eq!(matches(&b"a*".repeat(n), &key, false), a_star, "a* x {n}");
        }
    }

    #[test]
    fn no_exponential_blowup() {
        let key = vec![b'a'; 5000];
        let mut pat = b"a*".repeat(200);
        pat.push(b'b');
        let t = std::time::Instant::now();
        assert!(!matches(&pat, &key, false));
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    /// Arbitrary bytes never panic (a cheap deterministic fuzz).
    #[test]
    fn fuzz_never_panics() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet = b"*?[]^-\\ab\x00\xff";
        for _ in 0..200_000 {
            let pl = (next() % 12) as usize;
            let sl = (next() % 12) as usize;
            let p: Vec<u8> =
                (0..pl).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            let s: Vec<u8> =
                (0..sl).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            let _ = matches(&p, &s, next() % 2 == 0);
        }
    }
}
