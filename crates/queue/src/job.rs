//! One job: its immutable parts (id, queue, body, parameters), its state
//! and scheduling metadata, and the binary record that carries a whole
//! job through the AOF (`LOADJOB`) and RDB files.

use std::borrow::Borrow;
use std::ops::Deref;
use std::sync::Arc;

use crate::body::Body;
use crate::ext::Ext;
use crate::id::{JobId, ID_LEN};

/// A queue's name, shared by the queue and its jobs: one thin pointer,
/// 8 bytes in each job where an `Arc<[u8]>` takes 16 (see `jobs.rs`,
/// `CHUNK`). Hashes, compares and derefs as its bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(clippy::redundant_allocation)]
pub struct QueueName(Arc<Box<[u8]>>);

impl QueueName {
    pub fn new(name: &[u8]) -> QueueName {
        QueueName(Arc::new(name.into()))
    }

    /// Whether both are the same shared name.
    pub fn ptr_eq(a: &QueueName, b: &QueueName) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl Deref for QueueName {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Borrow<[u8]> for QueueName {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl From<&[u8]> for QueueName {
    fn from(b: &[u8]) -> QueueName {
        QueueName::new(b)
    }
}

impl std::fmt::Debug for QueueName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// Where a job stands (spec §1.3). `WaitRepl` never occurs on one node
/// but is kept so records and `STATE` filters know the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    WaitRepl = 0,
    Active = 1,
    Queued = 2,
    Acked = 3,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::WaitRepl => "wait-repl",
            State::Active => "active",
            State::Queued => "queued",
            State::Acked => "acked",
        }
    }

    /// A state by its name, ignoring ASCII case.
    pub fn from_name(n: &[u8]) -> Option<State> {
        [State::WaitRepl, State::Active, State::Queued, State::Acked]
            .into_iter()
            .find(|s| n.eq_ignore_ascii_case(s.name().as_bytes()))
    }

    fn from_u8(b: u8) -> Option<State> {
        match b {
            0 => Some(State::WaitRepl),
            1 => Some(State::Active),
            2 => Some(State::Queued),
            3 => Some(State::Acked),
            _ => None,
        }
    }
}

/// Delivered to a consumer at least once by this node (an at-most-once
/// job is then never queued again).
pub const FLAG_DELIVERED: u8 = 1;
/// Queued at least once on this node: later queueings count as
/// additional deliveries (Disque's "broadcast QUEUED next time").
pub const FLAG_QUEUED_ONCE: u8 = 2;

/// A job and what the node knows of it: its id and the rest
/// ([`JobData`], whose fields it derefs to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub id: JobId,
    pub data: JobData,
}

/// A job's fields but its id: what a slot of the job slab holds, beside
/// the id in a packed form (`jobs.rs`; 56 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobData {
    pub queue: QueueName,
    /// One thin pointer (`body.rs`).
    pub body: Body,
    pub state: State,
    /// Requested replication factor (always 1 on one node).
    pub repl: u16,
    /// Creation stamp: ms × 1,000,000 plus a per-millisecond counter.
    pub ctime: u64,
    /// Absolute expiry, Unix ms.
    pub etime: i64,
    /// Seconds before the first queueing.
    pub delay: u32,
    /// Re-queue period, seconds; 0 is at-most-once.
    pub retry: u32,
    /// Unix ms of the next re-queue; 0 is never.
    pub qtime: i64,
    pub nacks: u16,
    pub deliveries: u16,
    pub flags: u8,
}

impl Deref for Job {
    type Target = JobData;
    #[inline]
    fn deref(&self) -> &JobData {
        &self.data
    }
}

impl std::ops::DerefMut for Job {
    #[inline]
    fn deref_mut(&mut self) -> &mut JobData {
        &mut self.data
    }
}

/// A job held by [`Jobs`](crate::Jobs): its id (rebuilt from the slot's
/// packed form, or the caller's) and its fields in the slot, which it
/// derefs to.
#[derive(Clone, Copy, Debug)]
pub struct JobRef<'a> {
    pub id: JobId,
    pub data: &'a JobData,
}

impl Deref for JobRef<'_> {
    type Target = JobData;
    #[inline]
    fn deref(&self) -> &JobData {
        self.data
    }
}

impl JobRef<'_> {
    /// An owned copy.
    pub fn to_job(&self) -> Job {
        Job { id: self.id, data: self.data.clone() }
    }

    /// The job's record ([`Job::encode_with`]).
    pub fn encode_with(&self, ext: Option<&Ext>, out: &mut Vec<u8>) {
        encode(&self.id, self.data, ext, out);
    }
}

/// Why a job record could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Truncated,
    BadVersion,
    BadId,
    BadState,
    /// A negative expiry or re-queue time.
    BadTime,
    TrailingBytes,
    /// A malformed extension section (version 2).
    BadExt,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecodeError::Truncated => "truncated job record",
            DecodeError::BadVersion => "unknown job record version",
            DecodeError::BadId => "invalid job id in record",
            DecodeError::BadState => "invalid job state in record",
            DecodeError::BadTime => "invalid job time in record",
            DecodeError::TrailingBytes => "trailing bytes after job record",
            DecodeError::BadExt => "invalid job extension in record",
        })
    }
}

const RECORD_VERSION: u8 = 1;
/// A record with an extension section after the body (`ext.rs`).
const RECORD_VERSION_EXT: u8 = 2;

impl JobData {
    /// Creation time in ms.
    pub fn ctime_ms(&self) -> i64 {
        (self.ctime / 1_000_000) as i64
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Bytes this job costs beyond its fixed structures (body and queue
    /// name are counted by the caller's estimate).
    pub fn heap_bytes(&self) -> usize {
        self.body.len()
    }
}

impl Job {
    /// This job as [`Jobs`](crate::Jobs) lends its jobs.
    pub fn view(&self) -> JobRef<'_> {
        JobRef { id: self.id, data: &self.data }
    }

    /// The record: version, id, state, flags, repl, ctime, etime, delay,
    /// retry, qtime, nacks, deliveries (little-endian), then the queue
    /// name and the body, each after a u32 length. Times are absolute
    /// Unix ms, so a record read back restores the job's schedule.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_with(None, out);
    }

    /// [`encode`](Self::encode) with the job's extensions: version 2 and
    /// the extension section after the body when there are any, else
    /// exactly the version 1 record.
    pub fn encode_with(&self, ext: Option<&Ext>, out: &mut Vec<u8>) {
        encode(&self.id, &self.data, ext, out);
    }

    /// Reads a version 1 record ([`encode`](Self::encode)); any malformed
    /// input is an error, never a panic.
    pub fn decode(b: &[u8]) -> Result<Job, DecodeError> {
        match Job::decode_with(b)? {
            (j, None) => Ok(j),
            (_, Some(_)) => Err(DecodeError::BadVersion),
        }
    }

    /// Reads a record of either version ([`encode_with`](Self::encode_with)):
    /// the job and its extensions, if any.
    pub fn decode_with(b: &[u8]) -> Result<(Job, Option<Ext>), DecodeError> {
        let mut r = Reader { b, pos: 0 };
        let version = r.take(1)?[0];
        if version != RECORD_VERSION && version != RECORD_VERSION_EXT {
            return Err(DecodeError::BadVersion);
        }
        let id = JobId::parse(r.take(ID_LEN)?).ok_or(DecodeError::BadId)?;
        let state = State::from_u8(r.take(1)?[0]).ok_or(DecodeError::BadState)?;
        let flags = r.take(1)?[0];
        let repl = u16::from_le_bytes(r.arr()?);
        let ctime = u64::from_le_bytes(r.arr()?);
        let etime = i64::from_le_bytes(r.arr()?);
        let delay = u32::from_le_bytes(r.arr()?);
        let retry = u32::from_le_bytes(r.arr()?);
        let qtime = i64::from_le_bytes(r.arr()?);
        let nacks = u16::from_le_bytes(r.arr()?);
        let deliveries = u16::from_le_bytes(r.arr()?);
        let qlen = u32::from_le_bytes(r.arr()?) as usize;
        let queue = QueueName::new(r.take(qlen)?);
        let blen = u32::from_le_bytes(r.arr()?) as usize;
        let body = Body::new(r.take(blen)?);
        let ext = if version == RECORD_VERSION_EXT {
            let e = Ext::decode(&b[r.pos..]).ok_or(DecodeError::BadExt)?;
            r.pos = b.len();
            Some(e)
        } else {
            None
        };
        if r.pos != b.len() {
            return Err(DecodeError::TrailingBytes);
        }
        if etime < 0 || qtime < 0 {
            return Err(DecodeError::BadTime);
        }
        let data = JobData {
            queue,
            body,
            state,
            repl,
            ctime,
            etime,
            delay,
            retry,
            qtime,
            nacks,
            deliveries,
            flags,
        };
        Ok((Job { id, data }, ext))
    }
}

/// [`Job::encode_with`] of an id and the rest of a job.
fn encode(id: &JobId, d: &JobData, ext: Option<&Ext>, out: &mut Vec<u8>) {
    let ext = ext.filter(|e| !e.is_empty());
    out.reserve(90 + d.queue.len() + d.body.len());
    out.push(if ext.is_some() { RECORD_VERSION_EXT } else { RECORD_VERSION });
    out.extend_from_slice(&id.0);
    out.push(d.state as u8);
    out.push(d.flags);
    out.extend_from_slice(&d.repl.to_le_bytes());
    out.extend_from_slice(&d.ctime.to_le_bytes());
    out.extend_from_slice(&d.etime.to_le_bytes());
    out.extend_from_slice(&d.delay.to_le_bytes());
    out.extend_from_slice(&d.retry.to_le_bytes());
    out.extend_from_slice(&d.qtime.to_le_bytes());
    out.extend_from_slice(&d.nacks.to_le_bytes());
    out.extend_from_slice(&d.deliveries.to_le_bytes());
    out.extend_from_slice(&(d.queue.len() as u32).to_le_bytes());
    out.extend_from_slice(&d.queue);
    out.extend_from_slice(&(d.body.len() as u32).to_le_bytes());
    out.extend_from_slice(&d.body);
    if let Some(e) = ext {
        e.encode(out);
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.b.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Job {
        Job {
            id: JobId::build(b"01234567", &[9; 18], 3600, 5),
            data: JobData {
                queue: QueueName::new(b"q\x00ueue"),
                body: b"body\r\n".to_vec().into(),
                state: State::Active,
                repl: 1,
                ctime: 1_700_000_000_000_000_003,
                etime: 1_700_000_360_000,
                delay: 3,
                retry: 5,
                qtime: 1_700_000_005_123,
                nacks: 2,
                deliveries: 7,
                flags: FLAG_DELIVERED | FLAG_QUEUED_ONCE,
            },
        }
    }

    #[test]
    fn record_round_trips() {
        let j = sample();
        let mut b = Vec::new();
        j.encode(&mut b);
        assert_eq!(Job::decode(&b), Ok(j));
    }

    #[test]
    fn bad_records_are_errors() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        for n in 0..b.len() {
            assert!(Job::decode(&b[..n]).is_err(), "prefix {n}");
        }
        let mut extra = b.clone();
        extra.push(0);
        assert_eq!(Job::decode(&extra), Err(DecodeError::TrailingBytes));
        let mut v = b.clone();
        v[0] = 9;
        assert_eq!(Job::decode(&v), Err(DecodeError::BadVersion));
        let mut s = b.clone();
        s[41] = 7;
        assert_eq!(Job::decode(&s), Err(DecodeError::BadState));
        let mut huge = b.clone();
        let at = 1 + 40 + 1 + 1 + 2 + 8 + 8 + 4 + 4 + 8 + 2 + 2;
        huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Job::decode(&huge), Err(DecodeError::Truncated));
        // A version 2 record needs a valid extension section.
        let mut v2 = b;
        v2[0] = 2;
        v2.push(42);
        assert_eq!(Job::decode_with(&v2), Err(DecodeError::BadExt));
    }

    /// A job without extensions keeps the version 1 record, byte for
    /// byte; one with extensions carries them through version 2.
    #[test]
    fn extensions_ride_in_version_2_only() {
        let j = sample();
        let (mut plain, mut with_none) = (Vec::new(), Vec::new());
        j.encode(&mut plain);
        j.encode_with(Some(&Ext::default()), &mut with_none);
        assert_eq!(plain, with_none);
        assert_eq!(plain[0], 1);
        let e = Ext { unique: Some(b"k".as_slice().into()), ..Ext::default() };
        let mut v2 = Vec::new();
        j.encode_with(Some(&e), &mut v2);
        assert_eq!(v2[0], 2);
        assert_eq!(Job::decode_with(&v2), Ok((j.clone(), Some(e))));
        assert_eq!(Job::decode(&v2), Err(DecodeError::BadVersion));
        assert_eq!(Job::decode_with(&plain), Ok((j, None)));
    }
}
