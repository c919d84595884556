//! The broker binary's library: start-up and shutdown (`server`), the logs' subscriber
//! (`logging`), the metrics endpoint (`metrics`), start-up reports (`startup_log`,
//! `host_checks`). `main.rs` is only the command line. Everything a request touches is in the
//! crates below (`api`, `net`, `shard`, `groups`, `metadata`, `config`, `wire`); they are
//! re-exported here under their module names so tests and tools reach them through one path.

pub mod accept;
pub mod alloc_count;
pub mod cluster_node;
pub mod host_checks;
pub mod logging;
pub mod metrics;
pub mod server;
pub mod startup_log;

pub use admin;
pub use api::{connection, forward, group, handlers, log_config, partition_ops, shard};
pub use config;
pub use metadata;
pub use net::{busy_poll, handoff, limits, tls, transport};
