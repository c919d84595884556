//! Record replication (issue 21), Kafka's ISR protocol on the shards: the pure rules are
//! `shard::replication`; here is what runs them.
//!
//! - `state`: a partition's role (leader, follower, unreplicated) and high watermark, and a
//!   shard's replication tasks (a data leaf, below `shard`).
//! - `roles`: roles follow the metadata image.
//! - `leader`: follower fetches, the high watermark, AlterPartition.
//! - `fetcher`: a follower's fetches from its leader and its appends.

pub mod fetcher;
pub mod inter_broker;
pub mod leader;
pub mod roles;
pub mod state;
