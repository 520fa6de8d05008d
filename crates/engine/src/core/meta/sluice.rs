//! The metadata of the commands Sluice adds to Redis's (the job queue,
//! Disque's commands, `docs/jobs.md`), in the shape of the generated
//! [`super::redis70`], so that `COMMAND` and the ACL treat them as they
//! treat Redis's. Written by hand; keep it sorted by name.
//!
//! ACL categories follow Redis's implicit ones (`setImplicitACLCategories`:
//! `@write`, `@read`, `@fast` or `@slow`, `@blocking`, `@admin` and
//! `@dangerous` from the flags); the queue has no category of its own.

use super::{a, c, f, k, Arg, ArgKind, Begin, Find, KeySpecMeta, Meta, ARG, META};
use crate::core::spec::Group;

// Key specs. A queue's name is its key (in cluster mode the queue lives in
// its name's slot); a job id is a key too, since an id made in cluster
// mode carries a hash tag of its queue's slot (`queue::id`), so cluster
// clients route ACKJOB, SHOW, … by the id as they route GET by the key.
const fn spec(flags: u16, begin: Begin, lastkey: i32) -> KeySpecMeta {
    KeySpecMeta { notes: None, flags, begin, find: Find::Range { lastkey, keystep: 1, limit: 0 } }
}
const QUEUE_RO: &[KeySpecMeta] = &[spec(k::RO, Begin::Index(1), 0)];
const QUEUE_RW: &[KeySpecMeta] = &[spec(k::RW | k::UPDATE, Begin::Index(1), 0)];
const QUEUE_INSERT: &[KeySpecMeta] = &[spec(k::RW | k::INSERT, Begin::Index(1), 0)];
const FROM_QUEUES: &[KeySpecMeta] = &[spec(
    k::RW | k::ACCESS | k::DELETE,
    Begin::Keyword { keyword: "FROM", startfrom: 1 },
    -1,
)];
const ID_RO: &[KeySpecMeta] = &[spec(k::RO | k::ACCESS, Begin::Index(1), 0)];
const ID_RW: &[KeySpecMeta] = &[spec(k::RW | k::UPDATE, Begin::Index(1), 0)];
const IDS_RW: &[KeySpecMeta] = &[spec(k::RW | k::UPDATE, Begin::Index(1), -1)];
const IDS_RM: &[KeySpecMeta] = &[spec(k::RM | k::DELETE, Begin::Index(1), -1)];

/// Every command Sluice adds, by name.
pub static COMMANDS: &[Meta] = &[
    Meta {
        name: "ackjob",
        arity: -1,
        flags: f::WRITE | f::FAST,
        first: 1, last: -1, step: 1,
        key_specs: IDS_RM,
        acl: c::WRITE | c::FAST,
        summary: "Acknowledges jobs: they are done and forgotten (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "addjob",
        arity: -4,
        flags: f::WRITE | f::DENYOOM,
        first: 1, last: 1, step: 1,
        key_specs: QUEUE_INSERT,
        acl: c::WRITE | c::SLOW,
        summary: "Adds a job to a queue (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        complexity: Some("O(log N)"),
        ..META
    },
    Meta {
        name: "deljob",
        arity: -1,
        flags: f::WRITE | f::FAST,
        first: 1, last: -1, step: 1,
        key_specs: IDS_RM,
        acl: c::WRITE | c::FAST,
        summary: "Deletes jobs, whatever their state (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "dequeue",
        arity: -1,
        flags: f::WRITE | f::FAST,
        first: 1, last: -1, step: 1,
        key_specs: IDS_RW,
        acl: c::WRITE | c::FAST,
        summary: "Takes queued jobs out of their queues, leaving them active (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "durable",
        arity: -2,
        flags: f::NOSCRIPT | f::LOADING | f::STALE,
        first: 0, last: 0, step: 0,
        acl: c::SLOW | c::CONNECTION,
        summary: "Holds the connection's replies to writes until they are on N replicas (and fsynced), or turns that off (Sluice's extension).",
        since: "sluice-0.1",
        group: Group::Connection,
        complexity: Some("O(1)"),
        args: &[
            Arg { name: "numreplicas", kind: ArgKind::Integer, ..ARG },
            Arg { name: "timeout", kind: ArgKind::Integer, ..ARG },
            Arg { name: "fsync", kind: ArgKind::PureToken, token: Some("FSYNC"), flags: a::OPTIONAL, ..ARG },
        ],
        ..META
    },
    Meta {
        name: "enqueue",
        arity: -1,
        flags: f::WRITE | f::DENYOOM | f::FAST,
        first: 1, last: -1, step: 1,
        key_specs: IDS_RW,
        acl: c::WRITE | c::FAST,
        summary: "Puts active jobs in their queues now (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "fastack",
        arity: -1,
        flags: f::WRITE | f::FAST,
        first: 1, last: -1, step: 1,
        key_specs: IDS_RM,
        acl: c::WRITE | c::FAST,
        summary: "Acknowledges jobs by deleting them at once (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "getjob",
        arity: -2,
        flags: f::WRITE | f::BLOCKING | f::MOVABLEKEYS,
        first: 0, last: 0, step: 0,
        key_specs: FROM_QUEUES,
        acl: c::WRITE | c::SLOW | c::BLOCKING,
        summary: "Fetches jobs from queues, waiting for one if there are none (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        complexity: Some("O(log N) per job"),
        ..META
    },
    Meta {
        name: "jscan",
        arity: -1,
        flags: f::READONLY,
        first: 0, last: 0, step: 0,
        acl: c::READ | c::SLOW,
        summary: "Iterates over jobs with a cursor, filtered by queue and state (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "loadjob",
        arity: -2,
        flags: f::WRITE | f::LOADING,
        first: 0, last: 0, step: 0,
        acl: c::WRITE | c::SLOW,
        summary: "Restores jobs as recorded in the AOF or a replication stream (internal).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "nack",
        arity: -1,
        flags: f::WRITE | f::DENYOOM | f::FAST,
        first: 1, last: -1, step: 1,
        key_specs: IDS_RW,
        acl: c::WRITE | c::FAST,
        summary: "Puts fetched jobs back in their queues now, counting a NACK (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "pause",
        arity: -3,
        flags: f::WRITE | f::FAST,
        first: 1, last: 1, step: 1,
        key_specs: QUEUE_RW,
        acl: c::WRITE | c::FAST,
        summary: "Pauses a queue's input, output or both, or reports its pause state (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "qlen",
        arity: 2,
        flags: f::READONLY | f::FAST,
        first: 1, last: 1, step: 1,
        key_specs: QUEUE_RO,
        acl: c::READ | c::FAST,
        summary: "Number of jobs queued in a queue (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "qpeek",
        arity: 3,
        flags: f::READONLY,
        first: 1, last: 1, step: 1,
        key_specs: QUEUE_RO,
        acl: c::READ | c::SLOW,
        summary: "Queued jobs without taking them: oldest first, or newest with a negative count (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "qscan",
        arity: -1,
        flags: f::READONLY,
        first: 0, last: 0, step: 0,
        acl: c::READ | c::SLOW,
        summary: "Iterates over queues with a cursor, filtered by length (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "qset",
        arity: -4,
        flags: f::WRITE | f::FAST,
        first: 1, last: 1, step: 1,
        key_specs: QUEUE_RW,
        acl: c::WRITE | c::FAST,
        summary: "Sets a queue's delivery rate limit (Sluice's extension).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "qstat",
        arity: 2,
        flags: f::READONLY | f::FAST,
        first: 1, last: 1, step: 1,
        key_specs: QUEUE_RO,
        acl: c::READ | c::FAST,
        summary: "A queue's length, age, idle time, waiting clients, counters and pause state (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "show",
        arity: 2,
        flags: f::READONLY | f::FAST,
        first: 1, last: 1, step: 1,
        key_specs: ID_RO,
        acl: c::READ | c::FAST,
        summary: "Shows a job: its state, counters, schedule and body (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "waitaof",
        arity: 4,
        flags: f::NOSCRIPT,
        first: 0, last: 0, step: 0,
        acl: c::SLOW | c::CONNECTION,
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        summary: "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas (Redis 7.2's).",
        since: "7.2.0",
        group: Group::Generic,
        complexity: Some("O(1)"),
        args: &[
            Arg { name: "numlocal", kind: ArgKind::Integer, ..ARG },
            Arg { name: "numreplicas", kind: ArgKind::Integer, ..ARG },
            Arg { name: "timeout", kind: ArgKind::Integer, ..ARG },
        ],
        ..META
    },
    Meta {
        name: "waitjob",
        arity: -2,
        flags: f::READONLY | f::BLOCKING,
        first: 1, last: 1, step: 1,
        key_specs: ID_RO,
        acl: c::READ | c::SLOW | c::BLOCKING,
        summary: "Waits until a job is acknowledged or deleted (Sluice's extension).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
    Meta {
        name: "working",
        arity: 2,
        flags: f::WRITE | f::FAST,
        first: 1, last: 1, step: 1,
        key_specs: ID_RW,
        acl: c::WRITE | c::FAST,
        summary: "Postpones a job's next delivery by its retry period (Disque).",
        since: "sluice-0.1",
        group: Group::Queue,
        ..META
    },
];
