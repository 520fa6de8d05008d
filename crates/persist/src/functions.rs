//! Function libraries in RDB form: the records a file carries before its
//! databases (`RDB_OPCODE_FUNCTION2`, then the library's code as an RDB
//! string, as Redis 7.0's `rdbSaveFunctions` writes them) and the
//! `FUNCTION DUMP` payload (the same records, then the RDB version and a
//! CRC64, as a key's DUMP payload ends).
//!
//! Only bytes: compiling the code is the engine's business.

use crate::file::op;
use crate::value::{self, Error, Reader, RDB_VERSION};

/// Appends one library's record.
pub fn write_record(out: &mut Vec<u8>, code: &[u8], compress: bool) {
    out.push(op::FUNCTION2);
    value::write_string(out, code, compress);
}

/// Reads the body of a record whose opcode (`FUNCTION2`, or the pre-GA
/// `FUNCTION` of 7.0's release candidates) was just read: the library's
/// code. A pre-GA record (name, engine, description, code without its
/// metadata line) becomes the code Redis 7.0.15 builds from it,
/// `#!<engine> name=<name>\n<code>` (the description is dropped).
pub fn read_record(r: &mut Reader<'_>, opcode: u8) -> Result<Vec<u8>, Error> {
    if opcode == op::FUNCTION2 {
        let at = r.pos;
        return r
            .bytes()
            .map(|b| b.into_owned())
            .map_err(|_| Error { offset: at, reason: PAYLOAD });
    }
    let name = r.bytes()?.into_owned();
    let engine = r.bytes()?.into_owned();
    if r.len()? != 0 {
        r.bytes()?;
    }
    let body = r.bytes()?;
    let mut code = b"#!".to_vec();
    code.extend_from_slice(&engine);
    code.extend_from_slice(b" name=");
    code.extend_from_slice(&name);
    code.push(b'\n');
    code.extend_from_slice(&body);
    Ok(code)
}

/// Redis's reason when a library's string cannot be read.
pub const PAYLOAD: &str = "Failed loading library payload";

/// `FUNCTION DUMP`'s payload for these libraries' codes.
pub fn dump_payload<'a>(codes: impl IntoIterator<Item = &'a [u8]>, compress: bool) -> Vec<u8> {
    let mut p = Vec::new();
    for code in codes {
        write_record(&mut p, code, compress);
    }
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crate::crc64::crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// Why a `FUNCTION RESTORE` payload was refused: Redis's error text
/// (without `ERR `).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// `DUMP payload version or checksum are wrong`
    VersionOrChecksum,
    /// A record that is not a library: Redis's words for it.
    Record(&'static str),
}

/// Decodes a `FUNCTION RESTORE` payload into the libraries' codes
/// (`functionRestoreCommand`'s reading, before anything is compiled).
pub fn restore_payload(p: &[u8], check_crc: bool) -> Result<Vec<Vec<u8>>, RestoreError> {
    if p.len() < 10 {
        return Err(RestoreError::VersionOrChecksum);
    }
    let n = p.len();
    let ver = u16::from_le_bytes([p[n - 10], p[n - 9]]);
    if ver > RDB_VERSION {
        return Err(RestoreError::VersionOrChecksum);
    }
    if check_crc {
        let want = u64::from_le_bytes(p[n - 8..].try_into().expect("8"));
        if crate::crc64::crc64(0, &p[..n - 8]) != want {
            return Err(RestoreError::VersionOrChecksum);
        }
    }
    // As for a key's payload, records are read from the whole payload
    // (one may run on into the footer); a record starts only before it.
    let mut r = Reader::new(p);
    let mut codes = Vec::new();
    while r.pos < n - 10 {
        // Redis 7.0.15 reads pre-GA records here too (7.2 refuses them).
        let t = r.byte().map_err(|_| RestoreError::Record("can not read data type"))?;
        if t != op::FUNCTION2 && t != op::FUNCTION {
            return Err(RestoreError::Record("given type is not a function"));
        }
        let code = read_record(&mut r, t).map_err(|_| RestoreError::Record(PAYLOAD))?;
        codes.push(code);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_dump_matches_redis() {
        // redis-server 7.0.15: FUNCTION FLUSH, FUNCTION DUMP.
        let p = dump_payload([], true);
        assert_eq!(p, b"\n\0]\x9b\\@\x0f\x7f\xa2\xda");
        assert_eq!(restore_payload(&p, true).unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn records_round_trip_compressed_or_not() {
        let long = b"#!lua name=l\n".repeat(20);
        for compress in [false, true] {
            let p = dump_payload([&b"#!lua name=a\nx"[..], &long[..]], compress);
            let back = restore_payload(&p, true).unwrap();
            assert_eq!(back, vec![b"#!lua name=a\nx".to_vec(), long.clone()]);
        }
    }

    #[test]
    fn pre_ga_records_become_code_with_metadata() {
        let mut body = Vec::new();
        for s in [&b"x"[..], b"LUA"] {
            value::write_string(&mut body, s, false);
        }
        body.push(1);
        value::write_string(&mut body, b"desc", false);
        value::write_string(&mut body, b"return 1", false);
        let mut r = Reader::new(&body);
        assert_eq!(read_record(&mut r, op::FUNCTION).unwrap(), b"#!LUA name=x\nreturn 1");
        assert!(r.is_empty());
    }

    #[test]
    fn damaged_payloads_get_redis_errors_never_a_panic() {
        let good = dump_payload([&b"#!lua name=a\nreturn"[..]], false);
        let mut bad_crc = good.clone();
        bad_crc[3] ^= 1;
        assert_eq!(restore_payload(&bad_crc, true), Err(RestoreError::VersionOrChecksum));
        let seal = |body: &[u8]| {
            let mut p = body.to_vec();
            p.extend_from_slice(&RDB_VERSION.to_le_bytes());
            let crc = crate::crc64::crc64(0, &p);
            p.extend_from_slice(&crc.to_le_bytes());
            p
        };
        assert_eq!(
            restore_payload(&seal(b"\xf6\x01x\x03LUA\x00\x01y"), true),
            Ok(vec![b"#!LUA name=x\ny".to_vec()])
        );
        assert_eq!(
            restore_payload(&seal(b"\x00\x01x"), true),
            Err(RestoreError::Record("given type is not a function"))
        );
        assert_eq!(restore_payload(&seal(b"\xf5\x40"), true), Err(RestoreError::Record(PAYLOAD)));
        for cut in 0..good.len() {
            let _ = restore_payload(&good[..cut], false);
        }
    }
}
