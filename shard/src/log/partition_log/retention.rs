//! Deletion: retention by time / size / log start (Kafka's `deleteOldSegments`),
//! DeleteRecords, and deleting the whole log.

use std::path::Path;

use super::recovery::list_snapshots;
use super::{remove_file_if_exists, PartitionLog};
use crate::log::checkpoint;
use crate::log::dir;
use crate::log::segment::Segment;
use crate::log::{segment_paths, snapshot_path, LogError};
use crate::storage::Disk;

impl PartitionLog {
    /// Removes the partition directory (DeleteTopics) crash-safely (`dir::delete_partition_dir`:
    /// durable rename to `*-delete` first). Reads still in flight keep their fds and finish on
    /// the unlinked files.
    pub async fn delete(self) -> Result<(), LogError> {
        let path = self.dir.clone();
        let disk = self.env.disk.clone();
        drop(self);
        dir::delete_partition_dir_on(&disk, &path).await
    }

    // ---------------------------------------------------------------------------------
    // Retention
    // ---------------------------------------------------------------------------------

    /// Kafka's `UnifiedLog.deleteOldSegments`, three passes from the front, each stopping at
    /// the first segment it may not delete, and never deleting the active segment:
    /// 1. `retention.ms`: `now - largest timestamp > retention.ms`, the largest timestamp
    ///    being the segment's max record timestamp, or when no record has one the time it was
    ///    created or opened (Kafka's `LogSegment.largestTimestamp` uses the file's mtime). A segment stamped
    ///    in the future therefore holds back every segment after it.
    /// 2. `retention.bytes`: while the log minus the segment is still at least that large.
    /// 3. the log start offset: segments whose successor starts at or below it (DeleteRecords).
    ///
    /// Passes 1 and 2 run only when `cleanup.policy` contains `delete`. Returns the number of
    /// segments deleted.
    pub fn apply_retention(&mut self, now: i64) -> Result<usize, LogError> {
        let mut deleted = 0;
        if self.config.cleanup_delete {
            if self.config.retention_ms >= 0 {
                let count = self.segments[..self.segments.len() - 1]
                    .iter()
                    .take_while(|s| {
                        now.saturating_sub(segment_largest_timestamp(s)) > self.config.retention_ms
                    })
                    .count();
                self.remove_front_segments(count)?;
                deleted += count;
            }
            let size = self.size_bytes() as i64;
            if self.config.retention_bytes >= 0 && size >= self.config.retention_bytes {
                let mut diff = size - self.config.retention_bytes;
                let count = self.segments[..self.segments.len() - 1]
                    .iter()
                    .take_while(|s| {
                        let fits = diff - s.size as i64 >= 0;
                        if fits {
                            diff -= s.size as i64;
                        }
                        fits
                    })
                    .count();
                self.remove_front_segments(count)?;
                deleted += count;
            }
        }
        deleted += self.delete_segments_below_log_start()?;
        Ok(deleted)
    }

    /// DeleteRecords (Kafka's `deleteRecordsOnLeader` + `maybeIncrementLogStartOffset`):
    /// `offset` -1 means the high watermark (the log end here); below 0 or past the high
    /// watermark is `LogStartOutOfRange`; a `cleanup.policy` without `delete` is
    /// `DeletePolicy`. A larger offset becomes the log start, durably
    /// (`checkpoint::write_log_start`), then
    /// every segment wholly below it is deleted (never the active one). Returns the log
    /// start offset afterwards (the response's low watermark).
    pub fn delete_records(&mut self, offset: i64) -> Result<i64, LogError> {
        if !self.config.cleanup_delete {
            return Err(LogError::DeletePolicy);
        }
        let high_watermark = self.log_end_offset();
        let offset = if offset == -1 { high_watermark } else { offset };
        if offset < 0 || offset > high_watermark {
            return Err(LogError::LogStartOutOfRange {
                offset,
                high_watermark,
            });
        }
        if offset > self.log_start_offset {
            self.write_log_start(offset)?;
            self.log_start_offset = offset;
            tracing::info!(dir = %self.dir.display(), offset, "log start offset moved (DeleteRecords)");
            // A cleaner pass rewriting this log keeps its segments until it is done; the next
            // retention check deletes them (its log start pass).
            if !crate::log::cleaner::is_cleaning(&self.dir) {
                self.delete_segments_below_log_start()?;
            }
            self.trim_leader_epochs()?;
        }
        Ok(self.log_start_offset)
    }

    /// Kafka's `deleteLogStartOffsetBreachedSegments`: segments whose successor starts at or
    /// below the log start hold nothing readable. Returns how many were deleted.
    pub fn delete_segments_below_log_start(&mut self) -> Result<usize, LogError> {
        let count = self
            .segments
            .windows(2)
            .take_while(|pair| pair[1].base_offset <= self.log_start_offset)
            .count();
        self.remove_front_segments(count)?;
        Ok(count)
    }

    /// Deletes the first `count` segments (never the active one) with their producer
    /// snapshots, and moves the log start to the new first segment if it was below it.
    fn remove_front_segments(&mut self, count: usize) -> Result<(), LogError> {
        let count = count.min(self.segments.len() - 1);
        if count == 0 {
            return Ok(());
        }
        // The new start is durable before any file goes (see `checkpoint::write_log_start`).
        let start = self.segments[count].base_offset.max(self.log_start_offset);
        if start > self.log_start_offset {
            self.write_log_start(start)?;
        }
        for s in self.segments.drain(..count) {
            remove_segment_files(&self.env.disk, &self.dir, s.base_offset)?;
        }
        self.log_start_offset = start;
        // Snapshots go with their segments (the one at the new first segment's base stays).
        for offset in list_snapshots(&self.env.disk, &self.dir)? {
            if offset < self.segments[0].base_offset {
                remove_file_if_exists(&self.env.disk, &snapshot_path(&self.dir, offset))?;
            }
        }
        self.trim_leader_epochs()
    }

    fn write_log_start(&self, start: i64) -> Result<(), LogError> {
        checkpoint::write_log_start(&self.env.disk, &self.dir, start)
            .map_err(|e| LogError::io("write", &self.dir.join(checkpoint::LOG_START_FILE), e))
    }
}

/// Kafka's `LogSegment.largestTimestamp`: the max record timestamp, or, when no record has
/// one, when the segment was created or opened (Kafka: the `.log` file's modification time,
/// which the storage seam does not expose).
fn segment_largest_timestamp(segment: &Segment) -> i64 {
    if segment.max_timestamp >= 0 {
        segment.max_timestamp
    } else {
        segment.created_ms
    }
}

pub(super) fn remove_segment_files(disk: &Disk, dir: &Path, base: i64) -> Result<(), LogError> {
    let (log, index, time) = segment_paths(dir, base);
    for p in [log, index, time] {
        remove_file_if_exists(disk, &p)?;
    }
    // Most segments have none: looked up first, so no removal is attempted.
    let txn = crate::log::txn_index::txn_index_path(dir, base);
    if disk.exists(&txn) {
        remove_file_if_exists(disk, &txn)?;
    }
    Ok(())
}
