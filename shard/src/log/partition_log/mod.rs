//! `PartitionLog`: one partition's log, owned by one shard (single-threaded, no locks).
//!
//! Owns: the segment list (roll by size / age / full index), assigning offsets on append,
//! fetch reads (offset -> segment -> offset index -> short header scan), timestamp lookups,
//! recovery on open (recovery point + clean-shutdown marker), durability bookkeeping (what
//! must be fdatasynced, the durable offset, the recovery point), retention, close and delete.
//! Not here: deciding when to sync across partitions (`crate::flush`), validating produced
//! batches (the broker calls wire's `validate_batch` first), fetching from a leader.
//!
//! Borrowing: `read` and `offset_for_timestamp` do their index lookups synchronously and
//! return a future that owns what it needs (cloned `Rc` fds, sizes), not `&self`. So with the
//! log in an `Rc<RefCell<_>>`, `let f = log.borrow().read(..); f.await` holds no borrow across
//! the await, and appends can proceed meanwhile (a read sees the log as of its call). The
//! same holds for `begin_sync` / `SyncJob::run` / `finish_sync`, which the group commit uses.
//!
//! This file holds the type, its accessors, leader epochs, producer state and the cleaner's
//! hooks; the operations live in sibling modules, one `impl PartitionLog` each:
//! - `recovery`: `open` (listing, recovering and repairing segments, loading state).
//! - `append`: assigning offsets, writing batches, rolling segments.
//! - `read`: read plans (copied bytes or file ranges) and lookups by timestamp.
//! - `durability`: sync jobs, the durable offset, the dirty-log list, flush policy, close.
//! - `retention`: retention passes, DeleteRecords, deleting the log.
//! - `replica`: the follower's append (the leader's batches stored as they are).
//! - `truncate`: the follower's truncations (`truncate_to`, `truncate_fully_and_start_at`)
//!   and finishing one a crash interrupted at open.

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};

use crate::config::LogConfig;
use crate::log::checkpoint::{Checkpoint, CheckpointFile, CleanState};
use crate::log::leader_epoch::LeaderEpochCache;
use crate::log::producer_state::ProducerStateManager;
use crate::log::segment::Segment;
use crate::log::LogError;
use crate::storage::{Disk, Env, File};

mod append;
#[cfg(test)]
mod close_tests;
mod durability;
#[cfg(test)]
mod fd_cache_tests;
mod read;
mod recovery;
#[cfg(test)]
mod recovery_tests;
mod replica;
#[cfg(test)]
mod replica_tests;
mod retention;
#[cfg(test)]
mod tests;
mod truncate;
mod txn;
#[cfg(test)]
mod txn_tests;

pub use durability::SyncJob;
pub use replica::ReplicaAppend;

/// The logs of a shard that may have unsynced writes, each at most once: a log joins at its
/// first append after it was last found clean, and the group commit's periodic check drops
/// it once it is clean again. The check (`flush.ms`, `flush.messages`) and the rounds
/// (`FlushPolicy::Ack` logs) walk this instead of every log of the shard. Bounded by the
/// number of logs registered with the shard's `GroupCommit`.
pub type DirtyLogs = Rc<RefCell<Vec<Weak<RefCell<PartitionLog>>>>>;

/// A log's membership of its shard's `DirtyLogs`.
struct DirtyWatch {
    logs: DirtyLogs,
    /// This log (so that it can add itself).
    me: Weak<RefCell<PartitionLog>>,
    /// In `logs` now.
    listed: bool,
}

pub struct PartitionLog {
    /// The disk and clock this log reaches the world through (see `crate::storage`).
    env: Env,
    dir: PathBuf,
    config: LogConfig,
    /// Sorted by base offset; never empty; the last one is the active segment.
    segments: Vec<Segment>,
    log_start_offset: i64,
    /// Offsets below this are on disk (fdatasync completed).
    durable_offset: i64,
    /// Highest log end offset handed to a `SyncJob` (completed or in flight).
    sync_requested_offset: i64,
    /// Files of rolled segments (log + trimmed indexes) not yet handed to a sync job.
    unsynced: Vec<Rc<File>>,
    /// The active `.log` was written since the last `begin_sync`.
    active_dirty: bool,
    /// A segment file was created since the last `begin_sync` (its directory entry must be
    /// made durable too, or the synced data could vanish with it).
    dir_dirty: bool,
    messages_since_sync: u64,
    first_unsynced_ms: Option<i64>,
    checkpoint: CheckpointFile,
    last_checkpoint: Option<Checkpoint>,
    /// Sticky failure (see `LogError::Failed`).
    failed: Option<String>,
    /// Count of fdatasync jobs completed (tests and metrics).
    syncs_completed: u64,
    recovery: RecoveryReport,
    /// Idempotent producers' sequences and epochs (see `producer_state`).
    producers: ProducerStateManager,
    /// Leader epoch -> first offset (see `leader_epoch`).
    epochs: LeaderEpochCache,
    /// Max timestamp of the active segment's first batch (Kafka's `rollingBasedTimestamp`,
    /// what `segment.ms` counts from); None until known.
    active_first_timestamp: Option<i64>,
    /// Where this log announces that it has unsynced writes (`GroupCommit::register`).
    watch: Option<DirtyWatch>,
    /// Truncations so far (`truncate_to`, `truncate_fully_and_start_at`): a sync job taken
    /// before one must not move the durable offset or the recovery point when it finishes.
    truncations: u64,
    /// What `.clean_shutdown` says, while it is on disk and trusted (opened clean and not
    /// truncated since): a close that finds the log still so writes nothing.
    clean_on_disk: Option<CleanState>,
}

/// How `append_stamped` sets a batch's timestamp type and max timestamp (Kafka's
/// `LogValidator` ends every append with `setMaxTimestamp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchStamp {
    /// Store the header's attribute and max timestamp as sent (replayed or internal batches).
    AsSent,
    /// A CreateTime topic: attribute CreateTime, max timestamp = the records' largest stamp
    /// (as the validator computed it; Kafka overwrites whatever the client put there).
    CreateTime(i64),
    /// A LogAppendTime topic: attribute LogAppendTime, max timestamp = the append time.
    LogAppendTime,
}

/// What `open` had to re-validate. All zero after a clean shutdown: then only the headers
/// after the active segment's last index entry are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Non-empty segments fully re-validated (CRC of every batch), indexes rebuilt.
    pub segments_recovered: usize,
    /// Bytes of `.log` those segments held when recovery started.
    pub bytes_scanned: u64,
}

/// Bounds of the space the active segment reserves ahead of its appends (see
/// `Segment::append`): an fdatasync after an append that extended the file also commits the
/// new size (a journal commit on ext4 and xfs); inside reserved space it does not.
pub const PREALLOCATE_MIN_BYTES: u64 = 64 << 10;
pub const PREALLOCATE_MAX_BYTES: u64 = 4 << 20;

fn corrupt(path: &Path, position: u64, reason: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: path.to_path_buf(),
        position,
        reason: reason.into(),
    }
}

impl PartitionLog {
    fn active(&self) -> &Segment {
        self.segments.last().expect("never empty")
    }
    fn active_mut(&mut self) -> &mut Segment {
        self.segments.last_mut().expect("never empty")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }
    /// Offsets below this are on disk.
    pub fn durable_offset(&self) -> i64 {
        self.durable_offset
    }
    /// Number of segments (tests, metrics).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    /// Total bytes of all `.log` files.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }
    /// What `open` had to recover (tests, metrics).
    pub fn recovery_report(&self) -> RecoveryReport {
        self.recovery
    }
    /// Completed sync jobs (tests, metrics).
    pub fn syncs_completed(&self) -> u64 {
        self.syncs_completed
    }
    /// Set when a write or fdatasync failed; the log then refuses appends.
    pub fn failure(&self) -> Option<LogError> {
        self.failed.as_ref().map(|reason| LogError::Failed {
            path: self.dir.clone(),
            reason: reason.clone(),
        })
    }

    // ---------------------------------------------------------------------------------
    // Leader epochs
    // ---------------------------------------------------------------------------------

    /// Becoming leader at `epoch` (Kafka's `makeLeader` -> `maybeAssignEpochStartOffset(epoch,
    /// logEndOffset)`): the epoch starts at the log end unless it is already the latest.
    pub fn assign_leader_epoch(&mut self, epoch: i32) -> Result<(), LogError> {
        let end = self.log_end_offset();
        if epoch >= 0 && self.epochs.latest_epoch() != Some(epoch) {
            self.assign_epoch(epoch, end)?;
        }
        Ok(())
    }

    /// OffsetForLeaderEpoch: Kafka's `endOffsetForEpoch`, (epoch, end offset), or None when
    /// the cache has no answer (the response then carries -1, -1).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let (found_epoch, offset) = self.epochs.end_offset_for(epoch, self.log_end_offset());
        (offset != crate::log::leader_epoch::UNDEFINED_EPOCH_OFFSET)
            .then_some((found_epoch, offset))
    }

    /// The cache's entries as (epoch, start offset) (tests, tools).
    pub fn leader_epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epochs.entries().to_vec()
    }

    fn assign_epoch(&mut self, epoch: i32, start: i64) -> Result<(), LogError> {
        let path = self.dir.join(crate::log::leader_epoch::LEADER_EPOCH_FILE);
        self.epochs
            .assign(epoch, start)
            .map_err(|e| LogError::io("write", &path, e))?;
        Ok(())
    }

    /// The log start moved: Kafka's `truncateFromStart`.
    fn trim_leader_epochs(&mut self) -> Result<(), LogError> {
        let path = self.dir.join(crate::log::leader_epoch::LEADER_EPOCH_FILE);
        let start = self.log_start_offset;
        self.epochs
            .truncate_from_start(start)
            .map_err(|e| LogError::io("write", &path, e))
    }

    // ---------------------------------------------------------------------------------
    // Idempotent producers
    // ---------------------------------------------------------------------------------

    /// The partition's producer state (DescribeProducers, tests).
    pub fn producers(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// Drops producers idle for `producer.id.expiration.ms` (by their last batch's max
    /// timestamp, as Kafka does). Returns how many were dropped.
    pub fn remove_expired_producers(&mut self, now: i64) -> usize {
        self.producers
            .remove_expired(now, self.config.producer_id_expiration_ms)
    }

    /// Replaces the config (a topic's configs changed at run time). Kafka's semantics: size
    /// and time limits apply from the next append or retention pass; the active segment's
    /// index files keep the size they were created with (`segment.index.bytes` applies to
    /// segments rolled from now on).
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    // ---------------------------------------------------------------------------------
    // Compaction hooks (the log cleaner itself is `cleaner`)
    // ---------------------------------------------------------------------------------

    /// The disk and clock this log reaches the world through.
    pub(crate) fn env(&self) -> &Env {
        &self.env
    }

    /// The segments, oldest first; the last one is the active segment.
    pub(crate) fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Puts `cleaned` in place of the `count` inactive segments from index `first` (the
    /// cleaner has already swapped the files on disk). Reads in flight keep the old fds.
    pub(crate) fn replace_segments(&mut self, first: usize, count: usize, mut cleaned: Segment) {
        assert!(
            count > 0 && first + count < self.segments.len(),
            "the active segment is never replaced"
        );
        cleaned.gaps_allowed = true;
        self.segments.splice(first..first + count, [cleaned]);
    }
}

fn remove_file_if_exists(disk: &Disk, path: &Path) -> Result<(), LogError> {
    match disk.remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io("remove", path, e)),
    }
}
