//! A command as a server reads it: a RESP array of bulk strings.
//!
//! The one encoder for every command Sluice writes or sends: the AOF and
//! its rewrite, the replication stream, the replica's and MIGRATE's
//! requests to another server, and the client library's requests. The
//! AOF and the replication stream are compared byte for byte with
//! Redis's, so this is the only place their framing is decided.

use crate::IntBuf;

/// Appends `argv` to `out` as `*<argc>\r\n` and `$<len>\r\n<arg>\r\n` per
/// argument. Lengths are formatted on the stack (no allocation besides
/// `out`'s growth): it runs once per propagated command.
#[inline]
pub fn write_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    let mut n = IntBuf::new();
    out.extend_from_slice(n.line(b'*', argv.len() as i64));
    for a in argv {
        let a = a.as_ref();
        out.extend_from_slice(n.line(b'$', a.len() as i64));
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_binary_and_empty_arguments() {
        let mut out = Vec::new();
        write_command(&mut out, &[&b"SET"[..], b"", b"a\r\nb\x00"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$5\r\na\r\nb\x00\r\n");
        out.clear();
        write_command::<&[u8]>(&mut out, &[]);
        assert_eq!(out, b"*0\r\n");
    }

    #[test]
    fn lengths_past_one_digit() {
        let big = vec![b'x'; 12345];
        let argv: Vec<&[u8]> = vec![&big; 10];
        let mut out = Vec::new();
        write_command(&mut out, &argv);
        assert!(out.starts_with(b"*10\r\n$12345\r\nxxx"));
        assert_eq!(out.len(), 5 + 10 * (8 + 12345 + 2));
    }
}
