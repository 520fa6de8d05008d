//! Streams in RDB form: Redis 7.0's `RDB_TYPE_STREAM_LISTPACKS_2` written
//! byte for byte (one listpack per node keyed by its 16-byte big-endian
//! master id, the stream's metadata, then the consumer groups with their
//! pending entries and consumers), and types 15 (Redis 5–6) and 21 (7.2)
//! read as well. Everything read is validated deeply enough that the
//! store's invariants hold (ids ascending, counts agreeing, every pending
//! entry owned by exactly one consumer): corrupt input is an error, never
//! a value the store cannot walk.

use std::collections::BTreeSet;

use store::types::stream::{Group, Nack, NodeBuilder, Stream, StreamId, ENTRIES_READ_INVALID};
use store::value::parse_canonical_i64;

use crate::packed::{self, Elem, ListpackWriter};
use crate::value::{write_len, write_string, Error, Reader};

/// `RDB_TYPE_STREAM_LISTPACKS` (Redis 5–6).
pub const STREAM_LISTPACKS: u8 = 15;
/// `RDB_TYPE_STREAM_LISTPACKS_2` (Redis 7.0): what Sluice writes.
pub const STREAM_LISTPACKS_2: u8 = 19;
/// `RDB_TYPE_STREAM_LISTPACKS_3` (Redis 7.2: consumers' active time).
pub const STREAM_LISTPACKS_3: u8 = 21;

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

fn raw_id(id: StreamId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.ms.to_be_bytes());
    b[8..].copy_from_slice(&id.seq.to_be_bytes());
    b
}

fn id_of_raw(b: &[u8]) -> StreamId {
    StreamId::new(
        u64::from_be_bytes(b[..8].try_into().expect("8")),
        u64::from_be_bytes(b[8..16].try_into().expect("8")),
    )
}

/// The node's listpack as `streamAppendItem` builds it: the master entry
/// (count, deleted, field count, fields, 0), then per entry flags, ms and
/// seq deltas, [field count, fields interleaved], values, lp-count.
fn node_listpack(n: &store::types::stream::NodeView<'_>) -> Vec<u8> {
    let mut w = ListpackWriter::new();
    let master = n.master();
    let fields = n.master_fields();
    w.push_int(n.live() as i64);
    w.push_int(n.deleted() as i64);
    w.push_int(fields.len() as i64);
    for f in &fields {
        w.push(f);
    }
    w.push_int(0);
    for e in n.entries() {
        let mut flags = 0;
        if e.deleted {
            flags |= FLAG_DELETED;
        }
        if e.same_fields {
            flags |= FLAG_SAMEFIELDS;
        }
        w.push_int(flags);
        w.push_int(e.entry.id.ms.wrapping_sub(master.ms) as i64);
        w.push_int(e.entry.id.seq.wrapping_sub(master.seq) as i64);
        let k = e.entry.len();
        if !e.same_fields {
            w.push_int(k as i64);
        }
        for (f, v) in e.entry.pairs() {
            if !e.same_fields {
                w.push(f);
            }
            w.push(v);
        }
        let lp_count = if e.same_fields { k + 3 } else { 2 * k + 4 };
        w.push_int(lp_count as i64);
    }
    w.finish()
}

fn write_ms(out: &mut Vec<u8>, t: i64) {
    out.extend_from_slice(&t.to_le_bytes());
}

/// Appends a stream in `RDB_TYPE_STREAM_LISTPACKS_2` form (without the
/// type byte).
pub fn write_stream(out: &mut Vec<u8>, s: &Stream, compress: bool) {
    write_len(out, s.node_count() as u64);
    for n in s.nodes() {
        write_string(out, &raw_id(n.master()), compress);
        write_string(out, &node_listpack(&n), compress);
    }
    write_len(out, s.len());
    for id in [s.last_id, s.first_id, s.max_deleted] {
        write_len(out, id.ms);
        write_len(out, id.seq);
    }
    write_len(out, s.entries_added);
    let groups: Vec<_> = s.groups().collect();
    write_len(out, groups.len() as u64);
    for (name, g) in groups {
        write_string(out, name, compress);
        write_len(out, g.last_id.ms);
        write_len(out, g.last_id.seq);
        write_len(out, g.entries_read as u64);
        write_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&raw_id(*id));
            write_ms(out, nack.delivery_time);
            write_len(out, nack.delivery_count);
        }
        write_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            write_string(out, cname, compress);
            write_ms(out, c.seen_time);
            write_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&raw_id(*id));
            }
        }
    }
}

/// Walks a node's decoded listpack.
struct Items<'a, 'b> {
    items: &'b [Elem<'a>],
    pos: usize,
}

impl<'a> Items<'a, '_> {
    fn next(&mut self) -> Option<&Elem<'a>> {
        let e = self.items.get(self.pos)?;
        self.pos += 1;
        Some(e)
    }

    fn int(&mut self) -> Option<i64> {
        match self.next()? {
            Elem::Int(i) => Some(*i),
            Elem::Str(s) => parse_canonical_i64(s),
        }
    }

    fn count(&mut self) -> Option<usize> {
        usize::try_from(self.int()?).ok()
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        Some(self.next()?.to_vec())
    }
}

/// Decodes one node, checking its layout, counts and that its ids ascend
/// from above `prev`. Returns the builder and its last id.
fn read_node(
    master: StreamId,
    lp: &[u8],
    prev: Option<StreamId>,
) -> Option<(NodeBuilder, StreamId)> {
    let items = packed::listpack_entries_uncounted(lp)?;
    let mut it = Items { items: &items, pos: 0 };
    let live = it.count()?;
    let deleted = it.count()?;
    let nfields = it.count()?;
    if nfields > items.len() {
        return None;
    }
    let mut master_fields = Vec::with_capacity(nfields);
    for _ in 0..nfields {
        master_fields.push(it.bytes()?);
    }
    if it.int()? != 0 {
        return None;
    }
    let mf: Vec<&[u8]> = master_fields.iter().map(|f| &f[..]).collect();
    let mut b = NodeBuilder::new(master, &mf);
    let (mut seen_live, mut seen_deleted) = (0usize, 0usize);
    let mut last = prev;
    while it.pos < items.len() {
        // Other bits are ignored, as Redis's iterator and sanitizer ignore
        // them (a DUMP writes the two that mean something).
        let flags = it.int()?;
        let id = StreamId::new(
            master.ms.wrapping_add(it.int()? as u64),
            master.seq.wrapping_add(it.int()? as u64),
        );
        if id < master || last.is_some_and(|l| id <= l) {
            return None;
        }
        last = Some(id);
        let same = flags & FLAG_SAMEFIELDS != 0;
        let k = if same { nfields } else { it.count()? };
        if k > items.len() {
            return None;
        }
        let mut fields = Vec::new();
        let mut values = Vec::with_capacity(k);
        for _ in 0..k {
            if !same {
                fields.push(it.bytes()?);
            }
            values.push(it.bytes()?);
        }
        let want = if same { k + 3 } else { 2 * k + 4 };
        if it.count()? != want {
            return None;
        }
        let deleted_flag = flags & FLAG_DELETED != 0;
        if deleted_flag {
            seen_deleted += 1;
        } else {
            seen_live += 1;
        }
        let f: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
        let v: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
        b.push(id, deleted_flag, same, &f, &v);
    }
    if seen_live != live || seen_deleted != deleted || seen_live + seen_deleted == 0 {
        return None;
    }
    Some((b, last?))
}

/// An id of the stream's or a group's metadata: Redis checks these only
/// for a short read, so an unknown length marker is `u64::MAX`.
fn id(r: &mut Reader<'_>) -> Result<StreamId, Error> {
    Ok(StreamId::new(r.len_unchecked()?, r.len_unchecked()?))
}

fn ms(r: &mut Reader<'_>) -> Result<i64, Error> {
    Ok(i64::from_le_bytes(r.take(8)?.try_into().expect("8")))
}

/// Reads a stream of type `t` (15, 19 or 21).
pub fn read_stream(r: &mut Reader<'_>, t: u8) -> Result<Stream, Error> {
    let start = r.pos;
    let bad = |reason| Error { offset: start, reason };
    let mut s = Stream::new();
    let nodes = r.len()?;
    let mut last: Option<StreamId> = None;
    for _ in 0..nodes {
        let key = r.bytes()?;
        if key.len() != 16 {
            return Err(bad("Stream node key entry is not the size of a stream ID"));
        }
        let master = id_of_raw(&key);
        if last.is_some_and(|l| master <= l) {
            return Err(bad("stream nodes out of order"));
        }
        let lp = r.bytes()?;
        let (node, node_last) = read_node(master, &lp, last)
            .ok_or_else(|| bad("Stream listpack integrity check failed."))?;
        if !s.insert_node(node) {
            return Err(bad("Listpack re-added with existing key"));
        }
        last = Some(node_last);
    }
    let length = r.len()?;
    s.last_id = id(r)?;
    if t == STREAM_LISTPACKS {
        s.max_deleted = StreamId::MIN;
        s.entries_added = length;
        // streamGetEdgeID(first, skip tombstones): MAX when there is none.
        s.first_id = s.edge_id(false).unwrap_or(StreamId::MAX);
    } else {
        s.first_id = id(r)?;
        s.max_deleted = id(r)?;
        s.entries_added = r.len_unchecked()?;
    }
    if length != s.len() {
        return Err(bad("stream length disagrees with its entries"));
    }
    if last.is_some_and(|l| l > s.last_id) {
        return Err(bad("stream last id below its entries"));
    }
    let groups = r.len()?;
    for _ in 0..groups {
        let name = r.bytes()?;
        let last_id = id(r)?;
        let entries_read = if t == STREAM_LISTPACKS {
            s.estimate_distance(last_id).map_or(ENTRIES_READ_INVALID, |d| d as i64)
        } else {
            r.len_unchecked()? as i64
        };
        let mut g = Group { last_id, entries_read, ..Group::default() };
        let pel = r.len()?;
        for _ in 0..pel {
            let pid = id_of_raw(r.take(16)?);
            let delivery_time = ms(r)?;
            let delivery_count = r.len_unchecked()?;
            let nack = Nack { delivery_time, delivery_count, consumer: Box::default() };
            if g.pel.insert(pid, nack).is_some() {
                return Err(bad("Duplicated global PEL entry loading stream consumer group"));
            }
        }
        let mut owned = BTreeSet::new();
        let consumers = r.len()?;
        for _ in 0..consumers {
            let cname = r.bytes()?;
            let seen_time = ms(r)?;
            if t == STREAM_LISTPACKS_3 {
                ms(r)?; // active time: 7.2 only
            }
            if !g.ensure_consumer(&cname, seen_time) {
                return Err(bad("Duplicate stream consumer detected."));
            }
            let n = r.len()?;
            for _ in 0..n {
                let pid = id_of_raw(r.take(16)?);
                let nack = g
                    .pel
                    .get_mut(&pid)
                    .ok_or_else(|| bad("Consumer entry not found in group global PEL"))?;
                if !owned.insert(pid) {
                    return Err(bad(
                        "Duplicated consumer PEL entry  loading a stream consumer group",
                    ));
                }
                nack.consumer = cname.to_vec().into_boxed_slice();
                let c = g.consumers.get_mut(&cname[..]).expect("just created");
                c.pel.insert(pid);
            }
        }
        if owned.len() != g.pel.len() {
            return Err(bad("Stream CG PELs entry without consumer"));
        }
        let groups = s.groups.get_or_insert_with(Default::default);
        if groups.insert(name.to_vec().into_boxed_slice(), g).is_some() {
            return Err(bad("Duplicated consumer group name"));
        }
    }
    Ok(s)
}
