//! The stream value type: entries packed per node, consumer groups.
//!
//! As in Redis, a stream is an ordered map from a node's first ("master")
//! id to a node holding up to `stream-node-max-entries` entries in one
//! buffer: the master entry's field names once, then each entry as a flags
//! byte, its id as deltas from the master id, and its values (its field
//! names too when they differ from the master's). Deleted entries stay in
//! their node, flagged, until the whole node goes.
//!
//! Node boundaries decide what approximate trimming (`MAXLEN ~`) removes,
//! so a node fills exactly as Redis's listpack does: besides its own bytes
//! it keeps the size Redis's listpack encoding would have
//! ([`lp_int_size`], [`lp_str_size`]), and a new node starts when Redis
//! would start one (`stream-node-max-bytes`, `stream-node-max-entries`).

use std::collections::{BTreeMap, BTreeSet};

use crate::types::list::{read_varint, size_class, write_varint};
use crate::value::parse_canonical_i64;

/// A stream entry id, `<ms>-<seq>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next id (Redis's `streamIncrID`); `None` past the last one.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous id (Redis's `streamDecrID`); `None` before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// Formats `<ms>-<seq>` into `buf`, returning its length.
    pub fn fmt(self, buf: &mut [u8; 48]) -> usize {
        let mut n = fmt_u64(self.ms, buf, 0);
        buf[n] = b'-';
        n += 1;
        fmt_u64(self.seq, buf, n)
    }

    /// `<ms>-<seq>` as bytes.
    pub fn to_vec(self) -> Vec<u8> {
        let mut b = [0u8; 48];
        let n = self.fmt(&mut b);
        b[..n].to_vec()
    }
}

fn fmt_u64(mut v: u64, buf: &mut [u8; 48], at: usize) -> usize {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = tmp.len() - i;
    buf[at..at + len].copy_from_slice(&tmp[i..]);
    at + len
}

// ---- Redis's listpack sizes -------------------------------------------------

/// Bytes of a listpack element's back-length for an element of `l` bytes.
fn lp_backlen(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Bytes Redis's listpack spends on the integer `v` (encoding + backlen).
pub fn lp_int_size(v: i64) -> usize {
    let l = if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if (-32768..=32767).contains(&v) {
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    };
    l + lp_backlen(l)
}

/// Bytes Redis's listpack spends on the string `s` (stored as an integer
/// when it is one).
pub fn lp_str_size(s: &[u8]) -> usize {
    if let Some(v) = parse_canonical_i64(s) {
        return lp_int_size(v);
    }
    let n = s.len();
    let l = if n < 64 {
        1 + n
    } else if n < 4096 {
        2 + n
    } else {
        5 + n
    };
    l + lp_backlen(l)
}

/// Redis never lets a node's listpack grow past this.
pub const LISTPACK_MAX_SIZE: usize = 1 << 30;

const DELETED: u8 = 1;
const SAMEFIELDS: u8 = 2;

// ---- nodes ----------------------------------------------------------------

/// One node: entries that share a master id and master field names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    /// Live entries.
    live: u64,
    /// Entries flagged deleted.
    deleted: u64,
    /// Listpack bytes Redis would use, but for the live/deleted counters
    /// (whose sizes change as they count).
    lp_rest: usize,
    nfields: usize,
    /// The master field names, each as varint length + bytes.
    fields: Vec<u8>,
    /// The entries: flags, ms delta, seq delta, [nfields, fields…] values.
    data: Vec<u8>,
}

impl Node {
    fn lp_bytes(&self) -> usize {
        7 + lp_int_size(self.live as i64) + lp_int_size(self.deleted as i64) + self.lp_rest
    }

    fn new(fields: &[&[u8]]) -> Node {
        let mut n = Node { nfields: fields.len(), ..Node::default() };
        n.lp_rest = lp_int_size(fields.len() as i64) + lp_int_size(0);
        for f in fields {
            write_varint(&mut n.fields, f.len());
            n.fields.extend_from_slice(f);
            n.lp_rest += lp_str_size(f);
        }
        n
    }

    fn same_fields(&self, fields: &[&[u8]]) -> bool {
        if fields.len() != self.nfields {
            return false;
        }
        let mut pos = 0;
        for f in fields {
            let (len, at) = read_varint(&self.fields, pos);
            if &self.fields[at..at + len] != *f {
                return false;
            }
            pos = at + len;
        }
        true
    }

    /// Entries in order, deleted ones included.
    fn iter(&self, master: StreamId) -> NodeIter<'_> {
        NodeIter { node: self, master, pos: 0 }
    }

    /// Offsets of every entry, for walking backwards.
    fn offsets(&self, master: StreamId) -> Vec<usize> {
        let mut v = Vec::with_capacity((self.live + self.deleted) as usize);
        let mut it = self.iter(master);
        loop {
            let at = it.pos;
            if it.next().is_none() {
                break;
            }
            v.push(at);
        }
        v
    }

    fn entry_at(&self, master: StreamId, at: usize) -> Raw<'_> {
        let mut it = NodeIter { node: self, master, pos: at };
        it.next().expect("an entry at a known offset")
    }

    fn heap_size(&self) -> usize {
        self.fields.capacity() + self.data.capacity()
    }

    /// Gives back what the entry buffer's doubling left unused beyond its
    /// size class, once no entry will be appended to the node (a newer
    /// node took the appends, or a loader finished it): a full node of 100
    /// entries of 16 bytes then holds 1,792 bytes instead of 2,048. One
    /// copy per node, where growing to each size class in turn would copy
    /// the buffer about three times as often while it fills.
    fn seal(&mut self) {
        if self.data.capacity() > size_class(self.data.len()) {
            self.data.shrink_to_fit();
        }
    }

    /// Appends one entry of `n` values: flags, id deltas, then (with
    /// `fields`, entries whose names differ from the master's) the count
    /// and each name before its value, else the values alone; counts the
    /// listpack bytes Redis would add.
    fn write_entry<'v>(
        &mut self,
        flags: u8,
        dms: u64,
        dseq: u64,
        fields: Option<&[&[u8]]>,
        n: usize,
        values: impl Iterator<Item = &'v [u8]>,
    ) {
        let d = &mut self.data;
        d.push(flags);
        write_varint(d, dms as usize);
        write_varint(d, dseq as usize);
        let mut lp =
            lp_int_size(i64::from(flags)) + lp_int_size(dms as i64) + lp_int_size(dseq as i64);
        if fields.is_some() {
            write_varint(d, n);
            lp += lp_int_size(n as i64);
        }
        for (i, v) in values.enumerate() {
            if let Some(f) = fields {
                write_varint(d, f[i].len());
                d.extend_from_slice(f[i]);
                lp += lp_str_size(f[i]);
            }
            write_varint(d, v.len());
            d.extend_from_slice(v);
            lp += lp_str_size(v);
        }
        let lp_count = if fields.is_none() { n + 3 } else { 2 * n + 4 };
        lp += lp_int_size(lp_count as i64);
        self.lp_rest += lp;
    }
}

/// One entry as stored, with where it is.
#[derive(Clone, Copy)]
struct Raw<'a> {
    at: usize,
    flags: u8,
    entry: Entry<'a>,
}

struct NodeIter<'a> {
    node: &'a Node,
    master: StreamId,
    pos: usize,
}

impl<'a> Iterator for NodeIter<'a> {
    type Item = Raw<'a>;
    fn next(&mut self) -> Option<Raw<'a>> {
        let d = &self.node.data;
        if self.pos >= d.len() {
            return None;
        }
        let at = self.pos;
        let flags = d[at];
        let (dms, p) = read_varint(d, at + 1);
        let (dseq, p) = read_varint(d, p);
        let id = StreamId::new(
            self.master.ms.wrapping_add(dms as u64),
            self.master.seq.wrapping_add(dseq as u64),
        );
        let (nfields, mut p) =
            if flags & SAMEFIELDS != 0 { (self.node.nfields, p) } else { read_varint(d, p) };
        let start = p;
        let strings = if flags & SAMEFIELDS != 0 { nfields } else { nfields * 2 };
        for _ in 0..strings {
            let (len, q) = read_varint(d, p);
            p = q + len;
        }
        self.pos = p;
        let same = flags & SAMEFIELDS != 0;
        Some(Raw {
            at,
            flags,
            entry: Entry {
                id,
                nfields,
                master: if same { Some(&self.node.fields) } else { None },
                body: &d[start..p],
            },
        })
    }
}

/// A live entry: its id and field/value pairs.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    pub id: StreamId,
    nfields: usize,
    /// The master field names when the entry uses them.
    master: Option<&'a [u8]>,
    body: &'a [u8],
}

impl<'a> Entry<'a> {
    /// Number of field/value pairs.
    pub fn len(&self) -> usize {
        self.nfields
    }

    pub fn is_empty(&self) -> bool {
        self.nfields == 0
    }

    /// The field/value pairs in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let master = self.master;
        let body = self.body;
        let mut mpos = 0;
        let mut pos = 0;
        (0..self.nfields).map(move |_| {
            let take = |buf: &'a [u8], p: &mut usize| {
                let (len, at) = read_varint(buf, *p);
                *p = at + len;
                &buf[at..at + len]
            };
            let f = match master {
                Some(m) => take(m, &mut mpos),
                None => take(body, &mut pos),
            };
            let v = take(body, &mut pos);
            (f, v)
        })
    }
}

// ---- raw node access (persistence) ----------------------------------------

/// One node as Redis lays it out, for serialisers (RDB, DUMP).
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    node: &'a Node,
    master: StreamId,
}

/// One entry of a node as stored, deleted ones included.
#[derive(Clone, Copy)]
pub struct RawEntry<'a> {
    /// Flagged deleted (a tombstone).
    pub deleted: bool,
    /// Uses the master field names (Redis's `SAMEFIELDS` flag).
    pub same_fields: bool,
    pub entry: Entry<'a>,
}

impl<'a> NodeView<'a> {
    /// The node's master id (its key in Redis's radix tree).
    pub fn master(&self) -> StreamId {
        self.master
    }

    /// Live entries.
    pub fn live(&self) -> u64 {
        self.node.live
    }

    /// Entries flagged deleted.
    pub fn deleted(&self) -> u64 {
        self.node.deleted
    }

    /// The master field names.
    pub fn master_fields(&self) -> Vec<&'a [u8]> {
        let f = &self.node.fields;
        let mut out = Vec::with_capacity(self.node.nfields);
        let mut pos = 0;
        for _ in 0..self.node.nfields {
            let (len, at) = read_varint(f, pos);
            out.push(&f[at..at + len]);
            pos = at + len;
        }
        out
    }

    /// Every entry in order, tombstones included.
    /// Bytes of the node's listpack in Redis's encoding.
    pub fn lp_bytes(&self) -> usize {
        self.node.lp_bytes()
    }

    pub fn entries(&self) -> impl Iterator<Item = RawEntry<'a>> + 'a {
        self.node.iter(self.master).map(|r| RawEntry {
            deleted: r.flags & DELETED != 0,
            same_fields: r.flags & SAMEFIELDS != 0,
            entry: r.entry,
        })
    }
}

/// Builds one node from a decoded listpack (a loader's side of
/// [`NodeView`]); the caller validated ids and counts.
pub struct NodeBuilder {
    master: StreamId,
    node: Node,
}

impl NodeBuilder {
    pub fn new(master: StreamId, fields: &[&[u8]]) -> NodeBuilder {
        NodeBuilder { master, node: Node::new(fields) }
    }

    /// Master field count.
    pub fn master_len(&self) -> usize {
        self.node.nfields
    }

    /// Appends an entry. With `same_fields`, `fields` is ignored and the
    /// entry takes the master names (`values.len()` must be theirs);
    /// otherwise `fields` and `values` pair up.
    pub fn push(
        &mut self,
        id: StreamId,
        deleted: bool,
        same_fields: bool,
        fields: &[&[u8]],
        values: &[&[u8]],
    ) {
        let mut flags = if same_fields { SAMEFIELDS } else { 0 };
        if deleted {
            flags |= DELETED;
        }
        let dms = id.ms.wrapping_sub(self.master.ms);
        let dseq = id.seq.wrapping_sub(self.master.seq);
        let node = &mut self.node;
        let fields = (!same_fields).then(|| &fields[..values.len()]);
        node.write_entry(flags, dms, dseq, fields, values.len(), values.iter().copied());
        if deleted {
            node.deleted += 1;
        } else {
            node.live += 1;
        }
    }
}

// ---- consumer groups ------------------------------------------------------

/// A pending (delivered, not acknowledged) entry of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct Nack {
    /// Unix ms of the last delivery.
    pub delivery_time: i64,
    pub delivery_count: u64,
    /// The consumer that owns it.
    pub consumer: Box<[u8]>,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Consumer {
    /// Unix ms it was last seen (read, claimed, created).
    pub seen_time: i64,
    /// Its pending entries.
    pub pel: BTreeSet<StreamId>,
}

/// `entries_read` when it is not known (Redis's `SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries read by the group, counted from the first ever added, or
    /// [`ENTRIES_READ_INVALID`].
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    /// Consumers by name (Redis keeps them in a radix tree: byte order).
    pub consumers: BTreeMap<Box<[u8]>, Consumer>,
}

impl Group {
    /// Creates the consumer if needed; whether it was created.
    pub fn ensure_consumer(&mut self, name: &[u8], now: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(name.into(), Consumer { seen_time: now, pel: BTreeSet::new() });
        true
    }

    /// Removes a consumer and its pending entries; how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }
}

// ---- the stream -----------------------------------------------------------

/// How a trim is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

/// A stream value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    length: u64,
    pub last_id: StreamId,
    /// The first live entry's id as Redis records it (0-0 when empty).
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    /// Consumer groups by name, created on demand.
    pub groups: Option<Box<BTreeMap<Box<[u8]>, Group>>>,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Live entries.
    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The nodes in id order, as Redis lays them out.
    pub fn nodes(&self) -> impl Iterator<Item = NodeView<'_>> {
        self.nodes.iter().map(|(&master, node)| NodeView { node, master })
    }

    /// Adds a node built by a loader; false if its master id is taken.
    /// The length counts the node's live entries; the loader sets the rest
    /// of the metadata (`last_id`, …) and checks the length it read.
    pub fn insert_node(&mut self, b: NodeBuilder) -> bool {
        if self.nodes.contains_key(&b.master) {
            return false;
        }
        self.length += b.node.live;
        let mut node = b.node;
        node.seal();
        self.nodes.insert(b.master, node);
        true
    }

    /// Nodes (Redis's radix-tree keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes of a radix tree holding the node keys (16-byte big-endian
    /// ids) in its compressed form, as Redis's rax builds it: the root,
    /// every branch point, every key's end, and one compressed node per
    /// unary run.
    pub fn rax_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self
            .nodes
            .keys()
            .map(|k| {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&k.ms.to_be_bytes());
                b[8..].copy_from_slice(&k.seq.to_be_bytes());
                b
            })
            .collect();
        if keys.is_empty() {
            return 1;
        }
        fn count(keys: &[[u8; 16]], d: usize) -> usize {
            if d == 16 {
                return 1;
            }
            let (first, last) = (&keys[0], &keys[keys.len() - 1]);
            let mut l = 0;
            while d + l < 16 && first[d + l] == last[d + l] {
                l += 1;
            }
            if l > 0 {
                return 1 + count(keys, d + l);
            }
            let mut n = 1;
            let mut i = 0;
            while i < keys.len() {
                let c = keys[i][d];
                let j = i + keys[i..].iter().take_while(|k| k[d] == c).count();
                n += count(&keys[i..j], d + 1);
                i = j;
            }
            n
        }
        count(&keys, 0)
    }

    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    pub fn heap_size(&self) -> usize {
        self.nodes.values().map(|n| n.heap_size() + 64).sum::<usize>()
    }

    /// Appends an entry with `id`, which the caller checked is above
    /// `last_id`. `pairs` alternates fields and values.
    pub fn append(&mut self, id: StreamId, pairs: &[&[u8]], max_bytes: usize, max_entries: u64) {
        let fields: Vec<&[u8]> = pairs.iter().step_by(2).copied().collect();
        let tot: usize = pairs.iter().map(|p| p.len()).sum();
        let max_bytes = if max_bytes == 0 || max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            max_bytes
        };
        let mut tail = self.nodes.last_key_value().map(|(k, n)| (*k, n));
        if let Some((_, n)) = tail {
            if n.lp_bytes() + tot >= max_bytes
                || (max_entries != 0 && n.live + n.deleted >= max_entries)
            {
                tail = None;
            }
        }
        let master = match tail {
            Some((k, _)) => k,
            None => {
                if let Some(mut full) = self.nodes.last_entry() {
                    full.get_mut().seal();
                }
                self.nodes.insert(id, Node::new(&fields));
                id
            }
        };
        let node = self.nodes.get_mut(&master).expect("tail node");
        let same = node.same_fields(&fields);
        let flags = if same { SAMEFIELDS } else { 0 };
        let dms = id.ms.wrapping_sub(master.ms);
        let dseq = id.seq.wrapping_sub(master.seq);
        let values = pairs.iter().skip(1).step_by(2).copied();
        node.write_entry(flags, dms, dseq, (!same).then_some(&fields[..]), fields.len(), values);
        node.live += 1;
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    /// Visits live entries with ids in `[start, end]`, ascending (or
    /// descending when `rev`), until `f` returns false.
    pub fn range<'s>(
        &'s self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(Entry<'s>) -> bool,
    ) {
        if start > end {
            return;
        }
        if !rev {
            // The node holding `start` begins at or before it.
            let first = self.nodes.range(..=start).next_back().map(|(k, _)| *k);
            let from = first.unwrap_or(start);
            for (&master, node) in self.nodes.range(from..) {
                for r in node.iter(master) {
                    if r.flags & DELETED != 0 || r.entry.id < start {
                        continue;
                    }
                    if r.entry.id > end || !f(r.entry) {
                        return;
                    }
                }
            }
        } else {
            for (&master, node) in self.nodes.range(..=end).rev() {
                for at in node.offsets(master).into_iter().rev() {
                    let r = node.entry_at(master, at);
                    if r.flags & DELETED != 0 || r.entry.id > end {
                        continue;
                    }
                    if r.entry.id < start || !f(r.entry) {
                        return;
                    }
                }
            }
        }
    }

    /// The live entry with `id`.
    pub fn get(&self, id: StreamId) -> Option<Entry<'_>> {
        let mut found = None;
        self.range(id, id, false, |e| {
            found = Some(e);
            false
        });
        found
    }

    /// The first (or last) live entry's id.
    pub fn edge_id(&self, last: bool) -> Option<StreamId> {
        let mut found = None;
        self.range(StreamId::MIN, StreamId::MAX, last, |e| {
            found = Some(e.id);
            false
        });
        found
    }

    /// The first id of the first node, tombstones included (Redis's
    /// `streamGetEdgeID(s, 1, 0, …)`); `MAX` when there are no nodes.
    pub fn first_raw_id(&self) -> StreamId {
        self.nodes
            .iter()
            .next()
            .and_then(|(&master, node)| node.iter(master).next())
            .map_or(StreamId::MAX, |r| r.entry.id)
    }

    /// Deletes the live entry `id`; whether it was there. A node left
    /// without live entries goes.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, _)) = self.nodes.range(..=id).next_back() else { return false };
        let node = self.nodes.get_mut(&master).expect("found");
        let mut at = None;
        for r in node.iter(master) {
            if r.entry.id == id {
                if r.flags & DELETED == 0 {
                    at = Some(r.at);
                }
                break;
            }
            if r.entry.id > id {
                break;
            }
        }
        let Some(at) = at else { return false };
        if node.live == 1 {
            self.nodes.remove(&master);
        } else {
            node.data[at] |= DELETED;
            node.live -= 1;
            node.deleted += 1;
        }
        self.length -= 1;
        true
    }

    /// Recomputes `first_id` from the entries (after deletions).
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.edge_id(false).unwrap_or(StreamId::MIN);
    }

    /// Redis's `streamTrim`: removes entries from the head, whole nodes
    /// only when `approx`, at most `limit` entries when non-zero. Returns
    /// how many were removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Trim::MaxLen(max) = how {
                if self.length <= max {
                    break;
                }
            }
            let Some((&master, node)) = self.nodes.first_key_value() else { break };
            let entries = node.live;
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => match node.iter(master).last() {
                    Some(r) => r.entry.id < min,
                    None => false,
                },
            };
            if remove {
                self.nodes.remove(&master);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let node = self.nodes.get_mut(&master).expect("first");
            let mut marks = Vec::new();
            let mut length = self.length;
            for r in node.iter(master) {
                let stop = match how {
                    Trim::MaxLen(max) => length <= max,
                    Trim::MinId(min) => r.entry.id >= min,
                };
                if stop {
                    break;
                }
                if r.flags & DELETED == 0 {
                    marks.push(r.at);
                    length -= 1;
                }
            }
            for &at in &marks {
                node.data[at] |= DELETED;
            }
            let n = marks.len() as u64;
            node.live -= n;
            node.deleted += n;
            self.length -= n;
            deleted += n;
            break;
        }
        if deleted > 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// A group by name.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.as_ref()?.get(name)
    }

    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.as_mut()?.get_mut(name)
    }

    /// Creates a group; false if it exists.
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        let groups = self.groups.get_or_insert_with(Default::default);
        if groups.contains_key(name) {
            return false;
        }
        groups.insert(name.into(), Group { last_id, entries_read, ..Group::default() });
        true
    }

    /// Groups in name order.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &Group)> {
        self.groups.iter().flat_map(|g| g.iter().map(|(k, v)| (&k[..], v)))
    }

    /// Whether `[start, end]` may hold a deleted entry (Redis's
    /// `streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted {
            return false;
        }
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// How many entries precede and include `id` counting from the first
    /// ever added, when it can be known (Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`).
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - self.length);
            }
            if id == self.first_id {
                return Some(self.entries_added - self.length + 1);
            }
        }
        None
    }

    /// A group's lag (Redis's `streamCGLag`), when it can be known.
    pub fn lag(&self, g: &Group) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added.wrapping_sub(g.entries_read as u64));
        }
        self.estimate_distance(g.last_id).map(|r| self.entries_added.wrapping_sub(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(s: &Stream, rev: bool) -> Vec<StreamId> {
        let mut v = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, rev, |e| {
            v.push(e.id);
            true
        });
        v
    }

    /// Regression (issue 27): a node's buffer grew by doubling and kept
    /// it, so a full node of 100 entries of 16 bytes held 2,048 bytes
    /// (23.1 bytes an entry in bench/memory's one-stream case against
    /// Redis's 26.2). A node no longer appended to is trimmed to its size
    /// class.
    #[test]
    fn full_nodes_keep_their_size_class_only() {
        let mut s = Stream::new();
        for i in 1..=1000u64 {
            let v = format!("value:{}", 100_000 + i);
            s.append(StreamId::new(i, 1), &[b"field", v.as_bytes()], 4096, 100);
        }
        assert_eq!(s.node_count(), 10);
        // All but the tail, which still takes appends.
        for n in s.nodes.values().take(9) {
            assert!(n.data.capacity() <= size_class(n.data.len()), "{}", n.data.capacity());
            assert_eq!(n.data.len(), 100 * 16);
        }
        let e = s.get(StreamId::new(500, 1)).unwrap();
        assert_eq!(e.pairs().collect::<Vec<_>>(), vec![(&b"field"[..], &b"value:100500"[..])]);
    }

    #[test]
    fn appends_reads_and_deletes() {
        let mut s = Stream::new();
        for i in 1..=250u64 {
            let v = i.to_string();
            let pairs: [&[u8]; 4] =
                [b"a", v.as_bytes(), if i % 3 == 0 { b"c" } else { b"b" }, b"x"];
            s.append(StreamId::new(i, 0), &pairs, 4096, 100);
        }
        assert_eq!(s.len(), 250);
        assert_eq!(s.node_count(), 3);
        let e = s.get(StreamId::new(3, 0)).unwrap();
        let p: Vec<_> = e.pairs().collect();
        assert_eq!(p, vec![(&b"a"[..], &b"3"[..]), (&b"c"[..], &b"x"[..])]);
        assert!(s.delete(StreamId::new(3, 0)));
        assert!(!s.delete(StreamId::new(3, 0)));
        let fwd = ids(&s, false);
        let mut rev = ids(&s, true);
        rev.reverse();
        assert_eq!(fwd, rev);
        assert_eq!(fwd.len(), 249);
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 99);
        assert_eq!(s.trim(Trim::MaxLen(120), false, 0), 30);
        assert_eq!(s.len(), 120);
        assert_eq!(s.first_id, StreamId::new(131, 0));
        assert_eq!(s.trim(Trim::MinId(StreamId::new(200, 0)), false, 0), 69);
        assert_eq!(ids(&s, false)[0], StreamId::new(200, 0));
    }

    #[test]
    fn listpack_sizes() {
        assert_eq!(lp_int_size(0), 2);
        assert_eq!(lp_int_size(127), 2);
        assert_eq!(lp_int_size(128), 3);
        assert_eq!(lp_int_size(-1), 3);
        assert_eq!(lp_str_size(b"abc"), 5);
        assert_eq!(lp_str_size(b"123"), 2);
        assert_eq!(lp_str_size(&[b'x'; 64]), 67);
        assert_eq!(lp_str_size(&[b'x'; 200]), 204);
    }
}
