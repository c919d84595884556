//! The follower's append (Kafka's `UnifiedLog.appendAsFollower`): record batches fetched
//! from the leader are stored exactly as the leader stored them. Offsets, leader epoch,
//! timestamps and CRC are the leader's; nothing is patched or restamped, so a follower's
//! segment holds the same bytes as the leader's for the same offsets.

use wire::record_batch::{validate_stored_batch, BatchError, BatchHeader, LOG_OVERHEAD};

use super::PartitionLog;
use crate::log::LogError;

/// What [`PartitionLog::append_replica`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaAppend {
    /// Batches written.
    pub appended: usize,
    /// Batches skipped because the log already held them (wholly below its end).
    pub skipped: usize,
    /// The log end offset afterwards.
    pub log_end_offset: i64,
    /// `partition_leader_epoch` of the last batch written, or -1 when none was.
    pub last_epoch: i32,
    /// Bytes of `batches` consumed (whole batches); a partial batch at the end (a Fetch
    /// response may end in one) is left, not an error.
    pub valid_bytes: usize,
}

impl PartitionLog {
    /// Appends the record batches in `batches` (a Fetch response's records from the leader)
    /// as they are. Each batch is checked (framing, lengths, CRC-32C, offsets; record counts
    /// as in a stored batch, since a compacted leader may send thinned batches) and then:
    ///
    /// - wholly below the log end (last offset < log end): skipped, already held;
    /// - based exactly at the log end: written, rolling segments as a leader append does
    ///   (same write path, `write_batch`), the leader-epoch cache updated from its
    ///   `partition_leader_epoch` (durably when the epoch is new), the producer state updated
    ///   without sequence or duplicate checks (the leader decided);
    /// - otherwise (a gap after the log end, or a batch straddling it) the append stops with
    ///   `LogError::ReplicaOffsetMismatch`; the batches before it stay written.
    ///
    /// A partial batch at the end of `batches` is ignored. A corrupt batch is
    /// `LogError::InvalidBatch` (the batches before it stay written). Batches larger than
    /// `max.message.bytes` are `RecordTooLarge`, as in Kafka's follower append.
    pub fn append_replica(&mut self, batches: &[u8]) -> Result<ReplicaAppend, LogError> {
        let now = self.env.clock.now_ms();
        self.append_replica_at(batches, now)
    }

    /// `append_replica` with an explicit clock (tests of `segment.ms`).
    pub fn append_replica_at(
        &mut self,
        batches: &[u8],
        now: i64,
    ) -> Result<ReplicaAppend, LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let mut out = ReplicaAppend {
            appended: 0,
            skipped: 0,
            log_end_offset: self.log_end_offset(),
            last_epoch: -1,
            valid_bytes: 0,
        };
        let mut pos = 0usize;
        while pos < batches.len() {
            let rest = &batches[pos..];
            if rest.len() < LOG_OVERHEAD {
                break; // a partial batch at the end of a fetch response
            }
            let header = match BatchHeader::parse(rest) {
                Ok(h) => h,
                Err(BatchError::Truncated { .. }) => break,
                Err(e) => return Err(invalid(pos, e)),
            };
            let batch = &rest[..header.total_bytes()];
            validate_stored_batch(batch).map_err(|e| invalid(pos, e))?;
            let end = self.log_end_offset();
            if header.last_offset() < end {
                out.skipped += 1;
            } else if header.base_offset == end
                || (header.base_offset > end && self.config.cleanup_compact)
            {
                if header.base_offset > end {
                    // A compacted leader's cleaned segments have gaps between batches, which
                    // Kafka's follower append accepts. Recovery accepts them in a log the
                    // cleaner has touched (its checkpoint exists), so this log is marked so
                    // first.
                    self.allow_offset_gaps()?;
                }
                if batch.len() > self.config.max_message_bytes as usize {
                    return Err(LogError::RecordTooLarge {
                        size: batch.len(),
                        max: self.config.max_message_bytes,
                    });
                }
                self.write_batch(&[], batch, &header, now)?;
                out.appended += 1;
                out.last_epoch = header.partition_leader_epoch;
            } else {
                return Err(LogError::ReplicaOffsetMismatch {
                    log_end: end,
                    base_offset: header.base_offset,
                    last_offset: header.last_offset(),
                });
            }
            pos += batch.len();
            out.valid_bytes = pos;
        }
        out.log_end_offset = self.log_end_offset();
        Ok(out)
    }
}

fn invalid(pos: usize, e: BatchError) -> LogError {
    LogError::InvalidBatch(format!("replicated batch at byte {pos}: {e}"))
}

impl PartitionLog {
    /// Marks this log as one whose batches may have offset gaps (see `append_replica`): the
    /// cleaner's checkpoint, written durably when missing, is what recovery reads as "was
    /// compacted" (`cleaner::recover_dir`); "0 -1" makes the cleaner treat it all as dirty.
    fn allow_offset_gaps(&mut self) -> Result<(), LogError> {
        if self.active().gaps_allowed {
            return Ok(());
        }
        let path = self.dir.join(crate::log::cleaner::CHECKPOINT_FILE);
        if !self.env.disk.exists(&path) {
            self.env
                .disk
                .write_file_durable_blocking(&path, b"0 -1\n")
                .map_err(|e| LogError::io("write", &path, e))?;
        }
        for segment in &mut self.segments {
            segment.gaps_allowed = true;
        }
        Ok(())
    }
}
