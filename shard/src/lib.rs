//! One shard of the broker: everything a single core owns, with no locks.
//!
//! Each shard runs its own glommio executor (thread-per-core). A partition's log is owned by
//! exactly one shard; other shards reach it through the `mesh` (cross-shard mailboxes).
//!
//! - `config`: per-log settings (segment sizes, index density, flush policy, retention).
//! - `log`: the partition log (Kafka's on-disk layout: segments + offset/time indexes,
//!   crash recovery).
//! - `flush`: group commit: one fdatasync round per shard covers every log written since the
//!   previous round.
//! - `fsyncs`: how many fsyncs the shard's thread made, and why (metrics).
//! - `mesh`: cross-shard messaging.
//! - `storage`: the seam to the disk and the clock (real, or simulated for tests).

pub mod config;
pub mod flush;
pub mod log;
pub mod mesh;
pub mod replication;

// The storage seam is its own crate (the metadata quorum's log uses it too); these keep the
// paths the partition log has always used.
pub use storage;
pub use storage::fsyncs;

pub use config::{FlushPolicy, LogConfig};
pub use flush::{GroupCommit, LogHandle};
pub use log::{AppendInfo, BatchStamp, LogError, PartitionLog, RecoveryReport};
