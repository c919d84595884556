//! The Kafka APIs on a shard. `handlers` holds one file per API (decode, route to the owning
//! shard, answer); `shard` one shard's state; `forward` what shards ask each other;
//! `partition_ops` the per-partition operations the owning shard runs; `group` the group
//! coordinator around the `groups` state machines; `connection` the per-connection loop
//! (read frames, run handlers in order, write responses) over `net`'s transports and bounds.

pub mod connection;
pub mod forward;
pub mod group;
pub mod handlers;
pub mod log_config;
pub mod logging;
pub mod metrics;
pub mod partition_ops;
pub mod shard;

// The crates below, under the names these modules used when they were part of the broker.
pub use config;
pub use metadata;
pub use net::{busy_poll, handoff, limits, tls, transport};
