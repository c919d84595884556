//! Kafka's replication rules for one partition, pure (no I/O, no clock): the leader's state
//! (`leader`: follower progress, high watermark, ISR changes) and where logs diverge
//! (`divergence`: the leader's DivergingEpoch answer and the follower's truncation point).
//! The shard that owns a partition drives them; `tests/sim_replication.rs` runs them with
//! simulated replicas, controller and faults.

pub mod divergence;
pub mod leader;

pub use divergence::{diverging_epoch, truncation_point, EpochEnd, Truncation};
pub use leader::{CommittedState, FollowerProgress, LeaderState, UNKNOWN_OFFSET};
