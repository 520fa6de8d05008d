//! The integration tests of `sluice-server`, one module per area, in one
//! binary (one link instead of forty): `cargo test -p server --test it
//! aof::` runs one module, `--test it aof::torn` the tests whose names start so. Each module
//! starts `sluice-server` (and usually the oracle redis-server) on free
//! ports; `common` holds the helpers several modules share.

mod common;

mod abuse;
mod acl;
mod aof;
mod aof_crash;
mod blocking;
mod busy_script;
mod client_limits;
mod cluster;
mod cluster_clients;
mod cluster_failover;
mod cluster_jobs;
mod cluster_reshard;
mod command_meta;
mod config_effect;
mod deep_pipeline;
mod differential_geo;
mod differential_hll;
mod differential_prop;
mod differential_streams;
mod differential_types;
mod diskless_load;
mod dropin_config;
mod dropin_process;
mod durable;
mod effects;
mod eviction;
mod exporter;
mod full_sync;
mod functions_persist;
mod idle_timeout;
mod jobs;
mod jobs_ext;
mod jobs_repl;
mod lazy_expire_stream;
mod lean_path;
mod lua_debugger;
mod member_prefetch;
mod migrate;
mod monitor;
mod ops_introspection;
mod ops_lifecycle;
mod ops_tools;
mod output_limits;
mod persist_safety;
mod protected_mode;
mod protocol;
mod psync2;
mod pubsub;
mod rdb;
mod repl_sync;
mod replica;
mod replication;
mod restore_payloads;
mod save_progress;
mod scan_guarantee;
mod scenarios;
mod scripting;
mod shutdown_replicas;
mod tls;
mod tracking;
mod two_servers;
