//! Consumer groups as state machines: no I/O, no shard, time passed in. `classic` is the
//! JoinGroup/SyncGroup/Heartbeat protocol's group, `consumer` a KIP-848 consumer group with
//! its broker-side `assignor`s, and `records` the `__consumer_offsets` records both are
//! persisted as (the coordinator in the broker appends them and replays them at load).
//!
//! Calls take domain inputs and return domain replies (`classic::JoinReply`,
//! `consumer::HeartbeatReply`, ...), refusals as [`GroupError`]; no Kafka response is built
//! here (the broker's `api` crate encodes them).

pub mod assignor;
pub mod classic;
pub mod consumer;
mod error;
pub mod records;

pub use error::GroupError;
