//! The Kafka APIs on a shard. `handlers` holds one file per API (decode, route to the owning
//! shard, answer); `shard` one shard's state; `forward` what shards ask each other;
//! `partition_ops` the per-partition operations the owning shard runs; `group` the group
//! coordinator around the `groups` state machines; `connection` the per-connection loop
//! (read frames, run handlers in order, write responses) over `net`'s transports and bounds.
//!
//! The modules import one way, top to bottom: `connection` -> `handlers` -> the code that
//! runs calls (`shard/calls.rs`, `shard/control_plane.rs`, `group/serve.rs` and the
//! coordinator's methods) -> `partition_ops` -> `shard/mod.rs` (the `Shard` struct) ->
//! `forward` (what travels on the ring: `Call`, `Serve<S>`, the `calls!` list, every request
//! and reply type) -> data leaves (`group/calls.rs`, `group/state.rs`,
//! `handlers/fetch_session/cache.rs`, `metrics`, `log_config`). A leaf never names the shard;
//! a parent module re-exports only from below it. The one call up is `shard/calls.rs`
//! starting `connection::adopt` for a connection another shard handed over.

pub mod authentication;
pub mod connection;
pub mod forward;
pub mod group;
pub mod handlers;
pub mod log_config;
pub mod logging;
pub mod metrics;
pub mod partition_ops;
pub mod quota;
pub mod replication;
pub mod shard;
pub mod txn;

// The crates below, under the names these modules used when they were part of the broker.
pub use config;
pub use metadata;
pub use net::{busy_poll, handoff, limits, tls, transport};
