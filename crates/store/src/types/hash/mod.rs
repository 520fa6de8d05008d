//! The hash value type and its encodings.
//!
//! While small a hash is a `listpack`: fields and values packed back to
//! back in one buffer, in insertion order so HGETALL and friends reply in
//! the order Redis's listpack would. Each string is front-coded
//! ([`crate::types::front`]): a literal (a length byte and its bytes for
//! strings under 128 bytes, as in Redis) or coded against its column's
//! anchor (a field against the nearest literal field before it, a value
//! against the nearest literal value), so `field:1` after `field:0` takes
//! 2 bytes; a string is coded only when that is shorter, so pairs that
//! share nothing cost their bytes plus two, as before. The buffer is one
//! exact-size allocation and no count is kept (it is a walk of at most
//! `hash-max-listpack-entries` pairs, as every listpack operation is), so
//! a hash is 16 bytes and lives in its key's value without a box of its
//! own; appends reallocate as Redis's `lpInsert` does, in place while the
//! size class holds. Past the configured thresholds (counted on the
//! decoded strings) it becomes a `hashtable` ([`Pairs`], a table whose
//! node holds a field and its value together), as Redis converts, and
//! never goes back.

mod pairs;

use std::fmt;

use crate::types::front::{build, head, skip, Column, Head, Seek, Str, INT, SMALL};
use pairs::Pairs;
pub use pairs::PairsIter;

/// A hash value.
#[derive(Default)]
pub struct Hash {
    repr: Repr,
}

enum Repr {
    /// Pairs as `field value`, each a front-coded entry.
    Pack(Box<[u8]>),
    /// Boxed: its pointer sits beside the packed buffer's, so a hash is
    /// 16 bytes whichever its encoding.
    Table(Box<Pairs>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Pack(Box::default())
    }
}

/// Runs `f` on the packed buffer as a vector, then stores it back at its
/// exact length (jemalloc resizes in place within a size class).
fn edit<R>(buf: &mut Box<[u8]>, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut v = std::mem::take(buf).into_vec();
    let r = f(&mut v);
    *buf = v.into_boxed_slice();
    r
}

/// A place in a packed buffer: a pair's start and both columns' anchors.
#[derive(Clone, Copy, Default)]
struct Walk {
    pos: usize,
    f: Column,
    v: Column,
}

/// Walks a packed buffer pair by pair.
#[derive(Clone)]
pub struct PackIter<'a> {
    buf: &'a [u8],
    w: Walk,
}

impl<'a> PackIter<'a> {
    fn new(buf: &'a [u8]) -> Self {
        PackIter { buf, w: Walk::default() }
    }
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (Str<'a>, Str<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.w.pos >= self.buf.len() {
            return None;
        }
        let (f, p) = self.w.f.read(self.buf, self.w.pos);
        let (v, p) = self.w.v.read(self.buf, p);
        self.w.pos = p;
        Some((f, v))
    }
}

/// Pairs in a packed buffer, skipping over the strings.
fn pack_count(buf: &[u8]) -> usize {
    let mut p = 0;
    let mut n = 0;
    while p < buf.len() {
        p = skip(buf, p);
        n += 1;
    }
    n / 2
}

/// Hands each pair of a packed buffer to `f`, coded strings built on the
/// stack.
#[inline]
fn pack_for_each(buf: &[u8], mut f: impl FnMut(&[u8], &[u8])) {
    let mut w = Walk::default();
    let (mut fs, mut vs) = ([0u8; SMALL], [0u8; SMALL]);
    let (mut ft, mut vt) = (Vec::new(), Vec::new());
    while w.pos < buf.len() {
        let (x, p) = w.f.lend(buf, w.pos, &mut fs, &mut ft);
        let (y, p) = w.v.lend(buf, p, &mut vs, &mut vt);
        w.pos = p;
        f(x, y);
    }
}

/// A field found in a packed buffer.
struct Hit {
    /// The walk before its pair.
    before: Walk,
    /// Its value's entry: start and header.
    vstart: usize,
    vhead: Head,
    /// Its field's entry is a literal.
    flit: bool,
}

impl Hit {
    fn end(&self) -> usize {
        self.vhead.stop()
    }
}

/// Where `field` is in a packed buffer, or the walk at the end.
#[inline]
fn pack_find(buf: &[u8], field: &[u8]) -> Result<Hit, Walk> {
    let mut w = Walk::default();
    let mut seek = Seek::new(field);
    while w.pos < buf.len() {
        let f0 = w.f;
        let fh = w.f.step(buf, w.pos);
        let vstart = fh.stop();
        if seek.is(&w.f, buf, &fh) {
            // The value's column is as it was before the pair.
            let before = Walk { pos: w.pos, f: f0, v: w.v };
            return Ok(Hit { before, vstart, vhead: head(buf, vstart), flit: !fh.coded });
        }
        w.pos = w.v.pass(buf, vstart);
    }
    Err(w)
}

/// Whether the pair at `p` (if any) has its field (`value` false) or its
/// value coded, that is, depends on an anchor before it.
fn next_coded(buf: &[u8], p: usize, value: bool) -> bool {
    if p >= buf.len() {
        return false;
    }
    let p = if value { head(buf, p).stop() } else { p };
    buf[p] >= INT
}

/// What [`rewrite`] does to the pair it starts at.
enum Change<'v> {
    Remove,
    Value(&'v [u8]),
}

/// Applies `change` to the pair at `from` and codes the pairs after it
/// afresh, up to the next pair of two literals (which, with everything
/// after it, needs nothing before it), against the anchors before
/// `from`, which stay where they are. One pass, one allocation.
fn rewrite(buf: &mut Box<[u8]>, from: Walk, change: Change<'_>) {
    let old: &[u8] = buf;
    let mut out = Vec::with_capacity(old.len() + 2 * SMALL);
    // The writing columns read anchors before `from` in the copy of the
    // head, and new ones where they write them.
    out.extend_from_slice(&old[..from.pos]);
    let (mut rf, mut rv, mut wf, mut wv) = (from.f, from.v, from.f, from.v);
    let (mut fs, mut vs) = ([0u8; SMALL], [0u8; SMALL]);
    let (mut ft, mut vt) = (Vec::new(), Vec::new());
    let mut p = from.pos;
    while p < old.len() {
        let first = p == from.pos;
        if !first && old[p] < INT && !next_coded(old, p, true) {
            break;
        }
        let (f, q) = rf.lend(old, p, &mut fs, &mut ft);
        let (v, q) = rv.lend(old, q, &mut vs, &mut vt);
        p = q;
        match change {
            Change::Remove if first => {}
            Change::Value(nv) if first => {
                wf.push(&mut out, f);
                wv.push(&mut out, nv);
            }
            _ => {
                wf.push(&mut out, f);
                wv.push(&mut out, v);
            }
        }
    }
    out.extend_from_slice(&old[p..]);
    *buf = out.into_boxed_slice();
}

/// Iterator over (field, value) pairs in encoding order.
pub enum Iter<'a> {
    Pack(PackIter<'a>),
    Table(PairsIter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (Str<'a>, Str<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(it) => it.next(),
            Iter::Table(it) => it.next().map(|(f, v)| (Str::Ref(f), Str::Ref(v))),
        }
    }
}

impl Hash {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(buf) => pack_count(buf),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Pack(buf) => buf.is_empty(),
            Repr::Table(t) => t.len() == 0,
        }
    }

    /// A pipelined command's member stage (`Store::with_member_value`): in
    /// a hash table, `field`'s hash with its bucket prefetched; 0 for a
    /// listpack (one allocation, which the command reads from its start).
    #[inline]
    pub fn prefetch_field(&self, field: &[u8]) -> u64 {
        match &self.repr {
            Repr::Pack(_) => 0,
            Repr::Table(t) => t.prefetch_bucket_of(field),
        }
    }

    /// The stages after [`prefetch_field`](Self::prefetch_field): the
    /// first node of its chain, or (`second`) the next one.
    #[inline]
    pub fn prefetch_field_node(&self, h: u64, second: bool) {
        if let Repr::Table(t) = &self.repr {
            t.prefetch_chain(h, second);
        }
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Pack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Pack(_))
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Pack(buf) => buf.len(),
            Repr::Table(t) => t.heap_size(),
        }
    }

    /// The value of `field`.
    #[inline]
    pub fn get(&self, field: &[u8]) -> Option<Str<'_>> {
        match &self.repr {
            Repr::Pack(buf) => {
                pack_find(buf, field).ok().map(|h| Str::decode(buf, &h.vhead, h.before.v.anchor()))
            }
            Repr::Table(t) => t.get(field).map(Str::Ref),
        }
    }

    /// Hands the value of `field` to `f` (a coded one built on the stack).
    #[inline]
    pub fn get_with<R>(&self, field: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        match &self.repr {
            Repr::Pack(buf) => match pack_find(buf, field) {
                Ok(h) => {
                    let (mut small, mut tmp) = ([0u8; SMALL], Vec::new());
                    f(Some(build(buf, &h.vhead, h.before.v.anchor(), &mut small, &mut tmp)))
                }
                Err(_) => f(None),
            },
            Repr::Table(t) => f(t.get(field)),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        match &self.repr {
            Repr::Pack(buf) => pack_find(buf, field).is_ok(),
            Repr::Table(t) => t.get(field).is_some(),
        }
    }

    /// Sets `field` to `value`; true if the field is new. Converts to the
    /// hashtable when either string is longer than `max_value` or the
    /// listpack grows past `max_entries` (Redis 7.0's `hashTypeSet`).
    pub fn set(
        &mut self,
        field: &[u8],
        value: &[u8],
        max_entries: usize,
        max_value: usize,
    ) -> bool {
        if field.len() > max_value || value.len() > max_value {
            self.convert();
        }
        let added = match &mut self.repr {
            Repr::Pack(buf) => match pack_find(buf, field) {
                Ok(hit) => {
                    pack_update(buf, &hit, value);
                    false
                }
                Err(w) => {
                    // Both choices read the buffer as it is: a value is
                    // coded against values only.
                    let ef = w.f.choose(buf, field);
                    let ev = w.v.choose(buf, value);
                    edit(buf, |v| {
                        v.reserve_exact(ef.head_size() + ev.head_size());
                        ef.push_head(v);
                        ev.push_head(v);
                    });
                    true
                }
            },
            Repr::Table(t) => t.set(field, value),
        };
        // Redis checks the count after every listpack write (a lowered
        // `hash-max-listpack-entries` converts on an update too). A pair
        // takes at least two bytes, so only a buffer that could hold more
        // than the limit is walked.
        if let Repr::Pack(buf) = &self.repr {
            if buf.len() / 2 > max_entries && pack_count(buf) > max_entries {
                self.convert();
            }
        }
        added
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Pack(buf) => match pack_find(buf, field) {
                Ok(hit) => {
                    let (start, end) = (hit.before.pos, hit.end());
                    if (hit.flit && next_coded(buf, end, false))
                        || (!hit.vhead.coded && next_coded(buf, end, true))
                    {
                        // The pair holds an anchor that later pairs use.
                        rewrite(buf, hit.before, Change::Remove);
                    } else {
                        edit(buf, |v| {
                            v.drain(start..end);
                        });
                    }
                    true
                }
                Err(_) => false,
            },
            Repr::Table(t) => t.remove(field),
        }
    }

    /// Pairs in encoding order (insertion order for listpacks).
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Pack(buf) => Iter::Pack(PackIter::new(buf)),
            Repr::Table(t) => Iter::Table(t.iter()),
        }
    }

    /// Calls `f` with each pair in encoding order (no string is copied
    /// but coded ones, built on the stack).
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        match &self.repr {
            Repr::Pack(buf) => pack_for_each(buf, f),
            Repr::Table(t) => t.iter().for_each(|(x, y)| f(x, y)),
        }
    }

    /// One step of HSCAN: visits some pairs and returns the next cursor. A
    /// listpack is visited whole and answers cursor 0, as Redis does.
    #[inline]
    pub fn scan(&self, cursor: u64, visit: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Pack(buf) => {
                pack_for_each(buf, visit);
                0
            }
            Repr::Table(t) => t.scan(cursor, visit),
        }
    }

    /// A random pair (uniform for listpacks, bucket-biased for tables as
    /// in Redis).
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<(Str<'_>, Str<'_>)> {
        match &self.repr {
            Repr::Pack(buf) => {
                let n = pack_count(buf) as u64;
                if n == 0 {
                    return None;
                }
                PackIter::new(buf).nth((rand() % n) as usize)
            }
            Repr::Table(t) => t.random(rand).map(|(f, v)| (Str::Ref(f), Str::Ref(v))),
        }
    }

    fn convert(&mut self) {
        if let Repr::Pack(buf) = &self.repr {
            let mut t = Pairs::new();
            for (f, x) in PackIter::new(buf) {
                t.add_new(&f, &x);
            }
            self.repr = Repr::Table(Box::new(t));
        }
    }
}

/// Sets the value of the pair `hit` found.
#[inline]
fn pack_update(buf: &mut Box<[u8]>, hit: &Hit, value: &[u8]) {
    let (vstart, end) = (hit.vstart, hit.end());
    let vh = &hit.vhead;
    let deps = next_coded(buf, end, true);
    if !vh.coded && vh.len == value.len() && (!deps || buf[vh.data..end] == *value) {
        // A literal nothing is coded against, or that keeps its bytes: in
        // place.
        buf[vh.data..end].copy_from_slice(value);
        return;
    }
    let e = hit.before.v.choose(buf, value);
    if deps && (!vh.coded || e.is_lit()) {
        // Values after it are coded against this literal, or would take
        // the new literal for their anchor: code them afresh.
        rewrite(buf, hit.before, Change::Value(value));
        return;
    }
    let size = e.head_size();
    if size == end - vstart {
        e.put_head(buf, vstart);
        return;
    }
    let mut enc = Vec::with_capacity(size);
    e.push_head(&mut enc);
    edit(buf, |v| {
        v.splice(vstart..end, enc);
    });
}

impl Clone for Hash {
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Pack(buf) => Hash { repr: Repr::Pack(buf.clone()) },
            Repr::Table(t) => {
                let mut c = Pairs::new();
                for (f, x) in t.iter() {
                    c.add_new(f, x);
                }
                Hash { repr: Repr::Table(Box::new(c)) }
            }
        }
    }
}

impl PartialEq for Hash {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(&f).as_deref() == Some(&*v))
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in self.iter() {
            m.entry(&String::from_utf8_lossy(&k), &String::from_utf8_lossy(&v));
        }
        m.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{Hash, Repr};
    use crate::types::list::varint_len;

    use crate::types::test_rng::Rng;

    /// A string of one of the shapes the coding meets: shared prefixes,
    /// integers close together, random bytes, long and empty strings.
    fn string(r: &mut Rng, shape: u64) -> Vec<u8> {
        let i = r.below(40);
        match shape {
            0 => format!("field:{i}").into_bytes(),
            1 => format!("{}", 1000 + i).into_bytes(),
            2 => (0..r.below(12)).map(|_| r.below(256) as u8).collect(),
            3 => {
                let mut v = vec![b'p'; 130 + r.below(3) as usize];
                v.extend_from_slice(format!("{i}").as_bytes());
                v
            }
            4 => Vec::new(),
            _ => format!("user:{}:name:{}", i % 3, r.below(1000)).into_bytes(),
        }
    }

    /// The packed hash against a plain model (insertion order, updates in
    /// place, deletes), with strings of every shape, middle edits, and
    /// conversion to the table compared with the model.
    #[test]
    fn packed_agrees_with_a_model() {
        for seed in 1..60u64 {
            let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut h = Hash::new();
            let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let (fshape, vshape) = (r.below(6), r.below(6));
            let max_entries = if seed % 5 == 0 { 12 } else { 1000 };
            for step in 0..400 {
                let mixed = r.below(8) == 0;
                let shape = if mixed { r.below(6) } else { fshape };
                let f = string(&mut r, shape);
                match r.below(10) {
                    0..=5 => {
                        let shape = if r.below(4) == 0 { r.below(6) } else { vshape };
                        let v = string(&mut r, shape);
                        let new = h.set(&f, &v, max_entries, 1000);
                        match model.iter_mut().find(|(k, _)| *k == f) {
                            Some(p) => {
                                assert!(!new);
                                p.1 = v;
                            }
                            None => {
                                assert!(new);
                                model.push((f.clone(), v));
                            }
                        }
                    }
                    6..=8 => {
                        let had = model.iter().position(|(k, _)| *k == f);
                        assert_eq!(h.remove(&f), had.is_some());
                        if let Some(i) = had {
                            model.remove(i);
                        }
                    }
                    _ => {
                        let want = model.iter().find(|(k, _)| *k == f).map(|p| p.1.clone());
                        assert_eq!(h.get(&f).map(|v| v.to_vec()), want);
                        assert_eq!(h.contains(&f), want.is_some());
                    }
                }
                assert_eq!(h.len(), model.len(), "seed {seed} step {step}");
                let mut got: Vec<(Vec<u8>, Vec<u8>)> =
                    h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                if let Repr::Pack(buf) = &h.repr {
                    assert_eq!(got, model, "seed {seed} step {step}");
                    // Never more than the plain `len field len value`.
                    let plain: usize = model
                        .iter()
                        .map(|(f, v)| varint_len(f.len()) + f.len() + varint_len(v.len()) + v.len())
                        .sum();
                    assert!(buf.len() <= plain, "{} > {plain}", buf.len());
                } else {
                    let mut want = model.clone();
                    got.sort();
                    want.sort();
                    assert_eq!(got, want);
                }
                for (f, v) in &model {
                    assert_eq!(h.get(f).as_deref(), Some(&v[..]));
                }
            }
            if model.len() <= max_entries {
                assert_eq!(h.encoding(), "listpack");
            }
            let c = h.clone();
            assert_eq!(c, h);
        }
    }

    /// Ten `field:<i>` -> `value:<i>` pairs take 64 bytes (two groups of
    /// a literal pair and coded ones), where the plain layout took 160;
    /// random strings take exactly what they did.
    #[test]
    fn packed_sizes() {
        let mut h = Hash::new();
        for i in 0..10 {
            h.set(format!("field:{i}").as_bytes(), format!("value:{i}").as_bytes(), 128, 64);
        }
        assert_eq!(h.heap_size(), 64);
        let mut h = Hash::new();
        let mut r = Rng(7);
        let mut plain = 0;
        for _ in 0..10 {
            let f: Vec<u8> = (0..10).map(|_| b'a' + r.below(26) as u8).collect();
            let v: Vec<u8> = (0..10).map(|_| b'a' + r.below(26) as u8).collect();
            plain += 22;
            h.set(&f, &v, 128, 64);
        }
        assert_eq!(h.heap_size(), plain);
    }

    #[test]
    fn keeps_order_then_converts() {
        let mut h = Hash::new();
        assert!(h.set(b"b", b"1", 3, 64));
        assert!(h.set(b"a", b"2", 3, 64));
        assert!(!h.set(b"b", b"3", 3, 64));
        let v: Vec<_> = h.iter().collect();
        assert_eq!(
            v,
            vec![
                (b"b".as_slice().into(), b"3".as_slice().into()),
                (b"a".as_slice().into(), b"2".as_slice().into())
            ]
        );
        assert_eq!(h.encoding(), "listpack");
        h.set(b"c", b"", 3, 64);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"d", b"", 3, 64);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"b").as_deref(), Some(&b"3"[..]));
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert_eq!(h.len(), 3);
        assert_eq!(h.clone(), h);
    }

    /// Values change length in place (1- and 2-byte varints), fields are
    /// found past long neighbours, and removal keeps the rest in order.
    #[test]
    fn packed_pairs_resize_in_place() {
        let mut h = Hash::new();
        let long = vec![b'x'; 300];
        assert!(h.set(b"a", b"1", 128, 1000));
        assert!(h.set(&long, b"2", 128, 1000));
        assert!(h.set(b"c", &long, 128, 1000));
        assert!(!h.set(b"a", &long, 128, 1000));
        assert!(!h.set(&long, b"", 128, 1000));
        assert!(!h.set(b"a", b"short", 128, 1000));
        assert_eq!(h.get(b"a").as_deref(), Some(&b"short"[..]));
        assert_eq!(h.get(&long).as_deref(), Some(&b""[..]));
        assert_eq!(h.get(b"c").as_deref(), Some(&long[..]));
        assert!(h.get(b"d").is_none());
        assert!(h.remove(&long));
        let fields: Vec<Vec<u8>> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(fields, vec![b"a".to_vec(), b"c".to_vec()]);
        assert_eq!(h.len(), 2);
        assert_eq!(h.encoding(), "listpack");
        let mut n = 0u64;
        assert!(h
            .random(|| {
                n += 1;
                n
            })
            .is_some());
        assert!(h.remove(b"a") && h.remove(b"c"));
        assert!(h.is_empty() && h.get(b"a").is_none() && h.iter().next().is_none());
    }
}
