//! Transactions, the log side (KIP-98; Kafka's `UnifiedLog` with `ProducerStateManager` and
//! `TransactionIndex`): writing transaction markers for the coordinator, the first unstable
//! offset (what a read_committed fetch may not pass), and the aborted transactions a
//! read_committed fetch must filter.
//!
//! The state change of a marker happens in the shared write path (`write_batch` ->
//! `apply_control_batch`), so leader appends, follower appends and the replays of open and
//! truncation all end in the same state. The open transactions live in the producer state
//! (snapshotted with it); the aborted ones in each segment's `.txnindex` (`txn_index`).
//!
//! Retention and DeleteRecords: a transaction still open when the log start passes its first
//! offset stays open (its marker will come); the first unstable offset is then clamped to the
//! log start (Kafka's `firstUnstableOffset`), so it never goes below the log start, and the
//! aborted-transaction entries of deleted segments go with their files.

use wire::record_batch::{patched_prefix, BatchBuilder, BatchHeader, Compression};

use super::PartitionLog;
use crate::log::producer_state::NO_SEQUENCE;
use crate::log::txn_index::{AbortedTxn, EndTxnMarker, TxnMarker};
use crate::log::{AppendInfo, LogError};

impl PartitionLog {
    /// Appends a control batch ending `producer_id`'s transaction (what WriteTxnMarkers asks
    /// of a leader), as Kafka's `appendAsLeader` with origin COORDINATOR: one control record,
    /// key = version 0 (i16) + type (i16), value = Kafka's `EndTransactionMarker` (version 0
    /// i16, coordinator epoch i32), batch attributes transactional | control, producer id and
    /// epoch as given, base sequence -1, timestamps = now.
    ///
    /// Refused before writing: an epoch older than the producer's (INVALID_PRODUCER_EPOCH), a
    /// coordinator epoch older than the producer's last marker's
    /// (TRANSACTION_COORDINATOR_FENCED). A marker for a producer with no open transaction (or
    /// unknown here) is written all the same, as Kafka does: retried markers are harmless.
    pub fn append_txn_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        marker: TxnMarker,
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        self.producers
            .check_marker(producer_id, producer_epoch, coordinator_epoch)?;
        let now = self.env.clock.now_ms();
        let end = EndTxnMarker {
            marker,
            coordinator_epoch,
        };
        let batch = BatchBuilder::new(Compression::None)
            .transactional(true)
            .control(true)
            .producer(producer_id, producer_epoch, NO_SEQUENCE)
            .push(Some(&end.key()), Some(&end.value()), &[], now)
            .build();
        let header = BatchHeader::parse(&batch)
            .map_err(|e| LogError::InvalidBatch(format!("transaction marker: {e}")))?;
        let base_offset = self.log_end_offset();
        let prefix = patched_prefix(&batch, base_offset, leader_epoch);
        let header = BatchHeader {
            base_offset,
            partition_leader_epoch: leader_epoch,
            ..header
        };
        self.write_batch(&prefix, &batch[16..], &header, now)?;
        Ok(AppendInfo {
            base_offset,
            last_offset: base_offset,
            log_append_time_ms: now,
            log_start_offset: self.log_start_offset,
            duplicate: false,
        })
    }

    /// Kafka's `firstUnstableOffset`: the first offset of the earliest still-open
    /// transaction, never below the log start offset; None when none is open.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers
            .first_unstable_offset()
            .map(|first| first.max(self.log_start_offset))
    }

    /// Kafka's `collectAbortedTransactions(startOffset, upperBoundOffset)`: every aborted
    /// transaction with `last_offset >= start_offset && first_offset < upper_bound`, in offset
    /// order, from the transaction indexes of the segment holding `start_offset` and the
    /// later ones. As in Kafka, the walk goes on past `upper_bound` (a transaction begun below
    /// it may have its ABORT marker, and so its entry, in a later segment) and stops at the
    /// first entry whose last stable offset reaches `upper_bound`.
    pub fn aborted_transactions(&self, start_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let first = self
            .segments
            .partition_point(|s| s.base_offset <= start_offset)
            .saturating_sub(1);
        let mut out = Vec::new();
        for seg in &self.segments[first..] {
            if seg.txn_index.collect(start_offset, upper_bound, &mut out) {
                break;
            }
        }
        out
    }

    /// Open transactions: (producer id, first offset), by first offset.
    pub fn ongoing_transactions(&self) -> Vec<(i64, i64)> {
        self.producers.ongoing_transactions().collect()
    }
}
