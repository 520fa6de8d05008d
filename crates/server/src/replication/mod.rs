//! Replication and its neighbours on the wire: the master side (`repl`:
//! the backlog, replicas' full and partial syncs, WAIT), the replica side
//! (`follow`: REPLICAOF, applying a master's stream) and MIGRATE's cached
//! connections (`migrate`). Each is a part of the engine's host. Cluster
//! mode's start-up and thread (`cluster`) sit beside them.

pub mod bus;
pub mod cluster;
pub mod follow;
pub mod migrate;
pub mod repl;
