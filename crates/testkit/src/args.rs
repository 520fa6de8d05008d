//! Splitting a line into arguments the way `redis-cli` and Redis's inline
//! parser do (`sdssplitargs`): blanks separate words, `"..."` takes the
//! escapes `\n \r \t \b \a \\ \" \xHH`, `'...'` takes only `\'`, and a
//! closing quote must be followed by a blank or the end of the line.

/// Splits `line`; `None` for unbalanced quotes. (The same splitter Sluice
/// uses for inline requests: scenario lines are split once and sent to
/// both servers as RESP arrays, so it cannot favour either.)
pub fn split(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    resp::split_args(line)
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
