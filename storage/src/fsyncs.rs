//! How many fsync/fdatasync calls this thread (a shard) made on partition logs (and, on
//! shard 0, the metadata log), and why (`broker_fsyncs_total{reason}`).
//!
//! `storage` counts every call it makes (`syscall`); the callers that know why attribute
//! theirs (`attribute`); the rest (compaction, partition deletion, the metadata log's
//! appends, snapshots and open) is `other`, so the reasons always add up to every call. Per thread, because a shard's logs live on its thread and
//! the shard reads its figures there (no atomics: one `Cell` bump next to a disk flush).

use std::cell::Cell;

/// Why a log's data or directory was flushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncReason {
    /// The group commit's rounds: the active segments' data written since the last round
    /// (acks=all under `log.flush.policy=ack`, `flush.messages`, `flush.ms`).
    GroupCommit,
    /// The files of a rolled segment and the directory entry of the new one (synced by the
    /// round after the roll).
    SegmentRoll,
    /// A new partition's directory entry and its `partition.metadata`.
    PartitionCreate,
    /// The `log-start-offset` checkpoint (retention, DeleteRecords).
    LogStartOffset,
    /// Opening a log (recovery) and closing it cleanly (its final sync and marker).
    OpenClose,
}

/// Attributed reasons, plus one slot for `other`.
const SLOTS: usize = 6;

impl SyncReason {
    pub const ALL: [SyncReason; 5] = [
        SyncReason::GroupCommit,
        SyncReason::SegmentRoll,
        SyncReason::PartitionCreate,
        SyncReason::LogStartOffset,
        SyncReason::OpenClose,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            SyncReason::GroupCommit => "group_commit",
            SyncReason::SegmentRoll => "segment_roll",
            SyncReason::PartitionCreate => "partition_create",
            SyncReason::LogStartOffset => "log_start_offset",
            SyncReason::OpenClose => "open_close",
        }
    }
}

/// The label of calls no caller attributed.
pub const OTHER: &str = "other";

thread_local! {
    static CALLS: Cell<u64> = const { Cell::new(0) };
    static ATTRIBUTED: [Cell<u64>; SLOTS] = const {
        [Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0)]
    };
}

/// One fsync or fdatasync made (by `storage`).
pub fn syscall() {
    CALLS.with(|calls| calls.set(calls.get().wrapping_add(1)));
}

/// `n` of the calls made are for `reason`.
pub fn attribute(reason: SyncReason, n: u64) {
    ATTRIBUTED.with(|slots| {
        let slot = &slots[reason as usize];
        slot.set(slot.get().wrapping_add(n));
    });
}

/// Calls by reason on this thread, `other` last (calls no caller attributed).
pub fn counts() -> [(&'static str, u64); SLOTS] {
    let calls = CALLS.with(Cell::get);
    ATTRIBUTED.with(|slots| {
        let mut out = [(OTHER, 0); SLOTS];
        let mut attributed = 0u64;
        for (i, reason) in SyncReason::ALL.iter().enumerate() {
            let n = slots[*reason as usize].get();
            attributed = attributed.wrapping_add(n);
            out[i] = (reason.label(), n);
        }
        out[SLOTS - 1] = (OTHER, calls.saturating_sub(attributed));
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_add_up_to_the_calls() {
        // Own thread: the counts are per thread.
        std::thread::spawn(|| {
            for _ in 0..5 {
                syscall();
            }
            attribute(SyncReason::GroupCommit, 2);
            attribute(SyncReason::SegmentRoll, 1);
            let counts = counts();
            assert_eq!(counts[0], ("group_commit", 2));
            assert_eq!(counts[1], ("segment_roll", 1));
            assert_eq!(counts[5], ("other", 2));
            assert_eq!(counts.iter().map(|(_, n)| n).sum::<u64>(), 5);
        })
        .join()
        .unwrap();
    }
}
