//! `DEBUG DIGEST` and `DEBUG DIGEST-VALUE`: Redis 7.0's SHA1-based
//! digests of the dataset and of single values (`debug.c`), byte for
//! byte, so a test can compare a whole dataset between Sluice and
//! redis-server (or before and after a reload) with one command.
//!
//! Order matters where Redis's does (list elements, stream entries, the
//! parts of an element) and not where it does not (keys, set members,
//! hash fields and sorted-set members are XORed in).

use sha1_smol::Sha1;
use store::{Entry, Value};

pub type Digest = [u8; 20];

/// `xorDigest`: XORs SHA1(`data`) into `d`.
fn xor(d: &mut Digest, data: &[u8]) {
    let h = Sha1::from(data).digest().bytes();
    for (a, b) in d.iter_mut().zip(h) {
        *a ^= b;
    }
}

/// `mixDigest`: XORs SHA1(`data`) in, then replaces `d` by SHA1(`d`).
fn mix(d: &mut Digest, data: &[u8]) {
    xor(d, data);
    *d = Sha1::from(&d[..]).digest().bytes();
}

/// `xorObjectDigest`: the digest of one value (type, contents, expiry)
/// mixed into `d`.
pub fn value_digest(d: &mut Digest, e: &Entry) {
    let v = &e.value;
    let ty: u32 = match v {
        Value::Int(_) | Value::Emb(_) | Value::Raw(_) | Value::Hll(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    };
    mix(d, &ty.to_be_bytes());
    let mut buf = [0u8; 24];
    match v {
        Value::Int(_) | Value::Emb(_) | Value::Raw(_) | Value::Hll(_) => {
            let mut sb = store::StrBuf::new();
            mix(d, v.as_bytes(&mut sb).unwrap_or_default());
        }
        Value::List(l) => {
            l.for_each(|x| mix(d, x));
        }
        Value::Set(s) => {
            for m in s.iter() {
                xor(d, m.bytes(&mut buf));
            }
        }
        Value::ZSet(z) => {
            for (m, s) in z.iter() {
                let mut el = [0u8; 20];
                mix(&mut el, &m);
                // `%.17g`, as Redis 7.0 prints the score here.
                let mut b = [0u8; 64];
                let n = resp::fmt_double(s, &mut b);
                mix(&mut el, &b[..n]);
                xor(d, &el);
            }
        }
        Value::Hash(h) => {
            for (f, x) in h.iter() {
                let mut el = [0u8; 20];
                mix(&mut el, &f);
                mix(&mut el, &x);
                xor(d, &el);
            }
        }
        Value::Stream(s) => {
            use store::types::StreamId;
            s.range(StreamId::MIN, StreamId::MAX, false, |en| {
                mix(d, format!("{}.{}", en.id.ms, en.id.seq).as_bytes());
                for (f, x) in en.pairs() {
                    mix(d, f);
                    mix(d, x);
                }
                true
            });
        }
    }
    if e.has_ttl() {
        xor(d, b"!!expire!!");
    }
}

/// One key's part of the dataset digest: its name mixed, then its value.
pub fn key_digest(key: &[u8], e: &Entry) -> Digest {
    let mut d = [0u8; 20];
    mix(&mut d, key);
    value_digest(&mut d, e);
    d
}

/// Adds a database's id to the dataset digest before its keys.
pub fn mix_db(d: &mut Digest, db: usize) {
    mix(d, &(db as u32).to_be_bytes());
}

/// Adds a key's digest to the dataset digest (`xorDigest`: its SHA1
/// XORed in).
pub fn add_key(d: &mut Digest, k: &Digest) {
    xor(d, k);
}

/// Lower-case hex, as Redis prints digests.
pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
