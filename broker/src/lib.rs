//! The broker: configuration, start-up, connections, request handlers and the metadata log.
//! `main.rs` is only the command line; everything else is here so that tests can use it.

pub use admin;
pub use config;
pub mod connection;
pub mod forward;
pub mod group;
pub mod handlers;
pub mod host_checks;
pub mod log_config;
pub mod logging;
pub use metadata;
pub mod metrics;
pub mod partition_ops;
pub mod server;
pub mod shard;
pub mod startup_log;
pub use net::{busy_poll, handoff, limits, tls, transport};
