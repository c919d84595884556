//! The partition log: Kafka's on-disk layout, owned by one shard, single-threaded, no locks.
//!
//! A partition is a directory `<log.dir>/<topic>-<partition>/` of segments named by their base
//! offset (20 digits, zero-padded): `.log` holds the record batches exactly as stored, `.index`
//! maps relative offset -> file position, `.timeindex` maps timestamp -> relative offset.
//! Besides the segments the directory holds `recovery-point` (offset known synced),
//! `log-start-offset` once retention deleted segments, after a clean close `.clean_shutdown`,
//! and `partition.metadata` (the topic id, see `dir`).
//!
//! Modules:
//! - `batch`: the few record-batch header fields the log reads itself (from raw bytes).
//! - `index` / `time_index`: the sparse indexes (in memory, written at roll / close).
//! - `segment`: one `.log` file with its two indexes.
//! - `tail_batches`: the active segment's newest batch boundaries (tail reads walk no headers).
//! - `checkpoint`: the recovery point file, the durable log start and the clean-shutdown marker.
//! - `dir`: the directory's topic id (`partition.metadata`) and crash-safe deletion.
//! - `partition_log`: `PartitionLog`, the public API (append / read / recovery / sync).
//!
//! Every file, directory and clock access goes through `crate::storage` (`Env`).
//! - `producer_state`: idempotent-producer state (sequence checks, duplicates, snapshots).
//! - `cleaner` / `offset_map`: log compaction (Kafka's LogCleaner) and its key map.
//! - `txn_index`: a segment's aborted transactions (`.txnindex`) and transaction markers.

pub(crate) mod batch;
pub(crate) mod checkpoint;
pub mod cleaner;
pub mod dir;
pub mod fd_cache;
pub(crate) mod index;
pub(crate) mod leader_epoch;
pub(crate) mod offset_map;
pub(crate) mod partition_log;
pub mod producer_state;
pub(crate) mod segment;
pub(crate) mod tail_batches;
#[cfg(test)]
pub(crate) mod test_util;
pub(crate) mod time_index;
#[cfg(test)]
mod timeadmin_tests;
pub(crate) mod txn_index;

use std::path::{Path, PathBuf};

pub use partition_log::{
    BatchStamp, DirtyLogs, PartitionLog, RecoveryReport, ReplicaAppend, SyncJob,
    PREALLOCATE_MAX_BYTES, PREALLOCATE_MIN_BYTES,
};
pub use txn_index::{AbortedTxn, TxnMarker};

/// What `PartitionLog::append` assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset given to the first record of the batch (= log end offset before the append).
    pub base_offset: i64,
    /// Offset of the last record of the batch (base_offset + last_offset_delta).
    pub last_offset: i64,
    /// Wall-clock time of the append (ms since the epoch). The broker reports it only for
    /// topics with `message.timestamp.type=LogAppendTime` (-1 otherwise, as Kafka does).
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// The batch was a retry of one already in the log (same producer, epoch and sequence
    /// range): nothing was written and the offsets are the original batch's.
    pub duplicate: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("offset {offset} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("corrupt log {} at position {position}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    /// The batch is larger than `max.message.bytes` (Kafka: RECORD_LIST_TOO_LARGE /
    /// MESSAGE_TOO_LARGE).
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge { size: usize, max: u32 },
    /// The bytes handed to `append` do not agree with their header (caller bug or bad frame).
    #[error("invalid record batch: {0}")]
    InvalidBatch(String),
    /// DeleteRecords below zero or past the high watermark (Kafka: OFFSET_OUT_OF_RANGE).
    #[error("cannot move the log start offset to {offset}: outside [0, {high_watermark}]")]
    LogStartOutOfRange { offset: i64, high_watermark: i64 },
    /// DeleteRecords on a log whose `cleanup.policy` lacks `delete` (POLICY_VIOLATION).
    #[error("records cannot be deleted: cleanup.policy has no delete")]
    DeletePolicy,
    /// An earlier write or fdatasync of this log failed. After a failed fsync the state of the
    /// page cache is unknown, so (like Kafka marking the log dir offline) the log refuses
    /// further appends and durable acks until it is reopened (which recovers from disk).
    #[error("log {} failed earlier: {reason}", path.display())]
    Failed { path: PathBuf, reason: String },
    /// The idempotent producer's sequence or epoch does not fit the partition's state
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH).
    #[error(transparent)]
    Producer(#[from] producer_state::ProducerError),
    /// A follower append (`PartitionLog::append_replica`) got a batch that does not start at
    /// the log end: a gap after it, or a batch straddling it.
    #[error(
        "replicated batch {base_offset}..={last_offset} does not start at the log end {log_end}"
    )]
    ReplicaOffsetMismatch {
        log_end: i64,
        base_offset: i64,
        last_offset: i64,
    },
    /// A truncation while a cleaner pass rewrites the log (Kafka aborts the pass first;
    /// here the caller retries once the pass is done).
    #[error("log {} is being cleaned; truncation refused", path.display())]
    CleaningInProgress { path: PathBuf },
    /// A client Produce carried a control batch (Kafka: INVALID_RECORD, 87, "clients may
    /// not write control records"); only transaction markers (`append_txn_marker`) and
    /// follower appends write them.
    #[error("clients may not write control records")]
    ControlBatchFromClient,
}

impl LogError {
    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> LogError {
        LogError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// `00000000000000000042` for base offset 42: Kafka's file naming, so names sort by offset.
pub(crate) fn file_stem(base_offset: i64) -> String {
    format!("{:020}", base_offset)
}

pub(crate) fn segment_paths(dir: &Path, base_offset: i64) -> (PathBuf, PathBuf, PathBuf) {
    let stem = file_stem(base_offset);
    (
        dir.join(format!("{stem}.log")),
        dir.join(format!("{stem}.index")),
        dir.join(format!("{stem}.timeindex")),
    )
}

/// `<dir>/<20-digit offset>.snapshot`: producer state as of `offset` (Kafka's naming).
pub(crate) fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{}.snapshot", file_stem(offset)))
}

/// Parses a 20-digit segment file stem back to its base offset.
pub(crate) fn parse_stem(stem: &str) -> Option<i64> {
    if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
        stem.parse().ok()
    } else {
        None
    }
}

/// Wall-clock ms for tests on the real disk (the log itself reads its `Env`'s clock).
#[cfg(test)]
pub(crate) fn now_ms() -> i64 {
    crate::storage::Clock::Real.now_ms()
}

/// Polls every future until all are done (they run concurrently on this thread; for
/// io_uring operations that means all are submitted in the same reactor turn).
pub(crate) async fn join_all<F: std::future::Future>(futs: Vec<F>) -> Vec<F::Output> {
    use std::task::Poll;
    let mut futs: Vec<std::pin::Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in futs.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("all ready")).collect()
}
