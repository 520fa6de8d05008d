//! Splitting a line into arguments the way `redis-cli` and Redis's inline
//! parser do (`sdssplitargs`): blanks separate words, `"..."` takes the
//! escapes `\n \r \t \b \a \\ \" \xHH`, `'...'` takes only `\'`, and a
//! closing quote must be followed by a blank or the end of the line.

/// Splits `line`; `None` for unbalanced quotes.
pub fn split(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut p = 0;
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(out);
        }
        let (mut inq, mut insq) = (false, false);
        let mut cur = Vec::new();
        loop {
            let c = at(p);
            if inq {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && at(p + 2).is_ascii_hexdigit()
                    && at(p + 3).is_ascii_hexdigit()
                {
                    cur.push(hex(at(p + 2)) * 16 + hex(at(p + 3)));
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        o => o,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    o => cur.push(o),
                }
            }
            p += 1;
        }
        out.push(cur);
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    fn s(line: &str) -> Option<Vec<String>> {
        split(line.as_bytes())
            .map(|v| v.into_iter().map(|a| String::from_utf8_lossy(&a).into_owned()).collect())
    }

    #[test]
    fn splits_like_sdssplitargs() {
        assert_eq!(s("  SET  k v "), Some(vec!["SET".into(), "k".into(), "v".into()]));
        assert_eq!(s(r#"ECHO "a b\x41\n""#), Some(vec!["ECHO".into(), "a bA\n".into()]));
        assert_eq!(s(r"ECHO 'it\'s'"), Some(vec!["ECHO".into(), "it's".into()]));
        assert_eq!(s(r#"ECHO "x"y"#), None);
        assert_eq!(s(r#"ECHO "x"#), None);
        assert_eq!(s(r#"ECHO a"b c""#), Some(vec!["ECHO".into(), "ab c".into()]));
        assert_eq!(s(r#"ECHO """#), Some(vec!["ECHO".into(), "".into()]));
        assert_eq!(s(""), Some(vec![]));
    }
}
