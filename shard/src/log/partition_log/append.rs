//! The append path: assigning offsets, stamping and writing a batch, rolling segments
//! (by size, `segment.ms` or a full index).

use wire::record_batch::{patched_prefix, stamped_header, BatchHeader, TimestampType};

use super::{corrupt, BatchStamp, PartitionLog, PREALLOCATE_MAX_BYTES, PREALLOCATE_MIN_BYTES};
use crate::log::batch::BATCH_HEADER_BYTES;
use crate::log::producer_state::NO_PRODUCER_ID;
use crate::log::segment::Segment;
use crate::log::txn_index::{AbortedTxn, EndTxnMarker};
use crate::log::{AppendInfo, LogError};

impl PartitionLog {
    /// Appends one batch (validated by the caller, who passes its header) at the log end,
    /// using the wall clock for `segment.ms` and the reported append time.
    pub fn append(
        &mut self,
        batch: &[u8],
        header: &BatchHeader,
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        let now = self.env.clock.now_ms();
        self.append_at(batch, header, leader_epoch, now)
    }

    /// `append` with an explicit clock (tests of `segment.ms`).
    ///
    /// Writes `patched_prefix` (base offset = log end, leader epoch) + `batch[16..]` with one
    /// pwritev: the record bytes go from the network buffer to the page cache with no copy.
    /// Synchronous, so offsets follow call order with no lock.
    pub fn append_at(
        &mut self,
        batch: &[u8],
        header: &BatchHeader,
        leader_epoch: i32,
        now: i64,
    ) -> Result<AppendInfo, LogError> {
        self.append_stamped(batch, header, leader_epoch, BatchStamp::AsSent, now)
    }

    /// `append_at` with the batch's timestamps set as Kafka's LogValidator sets them
    /// (`stamp`). When the stored attribute or max timestamp differ from the sent ones, the
    /// whole 61-byte header is patched (`wire::record_batch::stamped_header`, CRC computed
    /// over the patched header then the records in place) and written with the records in
    /// one pwritev: still no copy of the batch.
    pub fn append_stamped(
        &mut self,
        batch: &[u8],
        header: &BatchHeader,
        leader_epoch: i32,
        stamp: BatchStamp,
        now: i64,
    ) -> Result<AppendInfo, LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if batch.len() < BATCH_HEADER_BYTES
            || batch.len() != header.total_bytes()
            || header.last_offset_delta < 0
        {
            return Err(LogError::InvalidBatch(format!(
                "{} bytes for a header of {} bytes, last offset delta {}",
                batch.len(),
                header.total_bytes(),
                header.last_offset_delta
            )));
        }
        if batch.len() > self.config.max_message_bytes as usize {
            return Err(LogError::RecordTooLarge {
                size: batch.len(),
                max: self.config.max_message_bytes,
            });
        }
        if header.is_control() {
            // Kafka's `LogValidator`: only the coordinator (`append_txn_marker`) and
            // replication write control batches.
            return Err(LogError::ControlBatchFromClient);
        }
        if header.producer_id != NO_PRODUCER_ID {
            // Before anything is written: a retry is answered with its original offsets.
            if let Some(dup) = self.producers.check(header)? {
                return Ok(AppendInfo {
                    base_offset: dup.first_offset,
                    last_offset: dup.last_offset,
                    log_append_time_ms: -1,
                    log_start_offset: self.log_start_offset,
                    duplicate: true,
                });
            }
        }
        let base_offset = self.log_end_offset();
        let last_offset = base_offset + header.last_offset_delta as i64;
        let (timestamp_type, max_timestamp) = match stamp {
            BatchStamp::AsSent => (header.timestamp_type(), header.max_timestamp),
            BatchStamp::CreateTime(max) => (TimestampType::CreateTime, max),
            BatchStamp::LogAppendTime => (TimestampType::LogAppendTime, now),
        };
        let restamp =
            timestamp_type != header.timestamp_type() || max_timestamp != header.max_timestamp;
        let prefix16;
        let stamped;
        let (prefix, rest): (&[u8], &[u8]) = if restamp {
            stamped = stamped_header(
                batch,
                base_offset,
                leader_epoch,
                timestamp_type,
                max_timestamp,
            );
            (&stamped, &batch[BATCH_HEADER_BYTES..])
        } else {
            prefix16 = patched_prefix(batch, base_offset, leader_epoch);
            (&prefix16, &batch[16..])
        };
        let header = BatchHeader {
            base_offset,
            partition_leader_epoch: leader_epoch,
            max_timestamp,
            ..*header
        };
        self.write_batch(prefix, rest, &header, now)?;
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_append_time_ms: now,
            log_start_offset: self.log_start_offset,
            duplicate: false,
        })
    }

    /// The write path shared by leader appends (`append_stamped`) and follower appends
    /// (`append_replica`): rolls the segment if due, writes `prefix` + `rest` (the batch as
    /// it is to be stored) at the log end with one pwritev, and updates the bookkeeping: the
    /// dirty-log list, the leader-epoch cache (Kafka's `maybeAssignEpochStartOffset` with the
    /// stored `partition_leader_epoch`), the producer state (no checks: the caller did them,
    /// or the leader did; a control batch ends its producer's transaction and an abort is
    /// recorded in the active segment's transaction index, see `apply_control_batch`) and the
    /// `flush.messages` / `flush.ms` counters.
    ///
    /// `header` describes the batch as stored: its `base_offset` is the log end and its
    /// `max_timestamp` the stored one. A write error marks the log failed.
    pub(super) fn write_batch(
        &mut self,
        prefix: &[u8],
        rest: &[u8],
        header: &BatchHeader,
        now: i64,
    ) -> Result<(), LogError> {
        let base_offset = header.base_offset;
        // Equal, but for a compacted leader's gaps copied by a follower (`allow_offset_gaps`).
        debug_assert!(base_offset >= self.log_end_offset());
        let last_offset = base_offset + header.last_offset_delta as i64;
        let len = (prefix.len() + rest.len()) as u64;
        let max_timestamp = header.max_timestamp;
        if self.should_roll(len, last_offset, now, max_timestamp) {
            self.roll(now)?;
        }
        if self.active().size == 0 {
            // Kafka's `rollingBasedTimestamp`: segment.ms counts from the first batch's stamp.
            self.active_first_timestamp = Some(max_timestamp);
        }
        let interval = self.config.index_interval_bytes;
        let limit = self.config.effective_segment_bytes();
        let reserve_ahead = self.config.preallocate;
        let active = self.active_mut();
        if active.size == 0 {
            // segment.ms counts from the first batch, so an idle empty segment is not rolled
            // the moment it gets its first append.
            active.created_ms = now;
        }
        // As much again as the segment holds (an idle partition reserves little, a busy one
        // changes its file size a few times per segment).
        let preallocate = if reserve_ahead {
            active
                .size
                .clamp(PREALLOCATE_MIN_BYTES, PREALLOCATE_MAX_BYTES)
        } else {
            0
        };
        if let Err(e) = active.append(
            prefix,
            rest,
            last_offset,
            max_timestamp,
            interval,
            preallocate,
            limit,
        ) {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        self.active_dirty = true;
        self.list_dirty();
        let leader_epoch = header.partition_leader_epoch;
        if self.epochs.needs(leader_epoch, base_offset) {
            // The batch is written: a failed checkpoint write must not fail its append. The
            // cache in memory is updated; the file is rewritten at the next change.
            if let Err(error) = self.assign_epoch(leader_epoch, base_offset) {
                tracing::warn!(dir = %self.dir.display(), %error, "leader epoch checkpoint not written");
            }
        }
        if header.is_control() {
            // Rare (one per transaction and partition): the copy of the small batch is fine.
            let whole = [prefix, rest].concat();
            let active = self.segments.len() - 1;
            if let Err(e) = self.apply_control_batch(header, &whole, Some(active)) {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        } else {
            self.producers.update(header, base_offset);
        }
        self.messages_since_sync += header.records_count.max(0) as u64;
        self.first_unsynced_ms.get_or_insert(now);
        Ok(())
    }

    /// The producer-state change of a stored control batch `batch` (whole, as stored, at
    /// `header.base_offset`), shared by appends, follower appends and the replays of open
    /// and truncation (Kafka's `appendEndTxnMarker`, unchecked: the caller checked, or the
    /// leader did). An ABORT that closes an open transaction is recorded, with Kafka's last
    /// stable offset (the first offset of the next open transaction, else the marker's
    /// offset + 1), in the transaction index of segment `record_into` (the one holding the
    /// marker; None when the index already holds it). A control batch without a marker
    /// record (emptied by a cleaner) changes nothing, as in Kafka.
    pub(super) fn apply_control_batch(
        &mut self,
        header: &BatchHeader,
        batch: &[u8],
        record_into: Option<usize>,
    ) -> Result<(), LogError> {
        let Some(end) = EndTxnMarker::parse(batch) else {
            return Ok(());
        };
        let Some(done) = self.producers.complete_txn(header, header.base_offset, end) else {
            return Ok(());
        };
        let Some(i) = record_into.filter(|_| done.aborted) else {
            return Ok(());
        };
        let entry = AbortedTxn {
            producer_id: done.producer_id,
            first_offset: done.first_offset,
            last_offset: done.last_offset,
            last_stable_offset: self
                .producers
                .first_unstable_offset()
                .unwrap_or(done.last_offset + 1),
        };
        let disk = self.env.disk.clone();
        let seg = &mut self.segments[i];
        let path = crate::log::txn_index::txn_index_path(&self.dir, seg.base_offset);
        seg.txn_index
            .append(&disk, entry)
            .map_err(|e| LogError::io("write", &path, e))
    }

    /// Kafka's `LogSegment.shouldRoll`. `segment.ms` uses `timeWaitedForRoll`: the incoming
    /// batch's max timestamp minus the active segment's first batch's max timestamp when that
    /// is set (>= 0), else the wall time since the segment's first append; it rolls when that
    /// is strictly greater than `segment.ms`. So a segment opened by a future-stamped record
    /// does not roll by time while later stamps trail it.
    fn should_roll(&self, len: u64, last_offset: i64, now: i64, max_timestamp: i64) -> bool {
        let a = self.active();
        let waited = match self.active_first_timestamp {
            Some(first) if first >= 0 => max_timestamp.saturating_sub(first),
            _ => now.saturating_sub(a.created_ms),
        };
        // Never roll an empty segment: the new one would have the same base offset.
        a.size > 0
            && (a.size + len > self.config.effective_segment_bytes()
                || waited > self.config.segment_ms.min(i64::MAX as u64) as i64
                || a.index_would_overflow(last_offset))
    }

    /// Starts a new segment at the log end. The old one's files join the next sync (the
    /// recovery point only moves past a segment once its log and indexes are durable).
    pub(super) fn roll(&mut self, now: i64) -> Result<(), LogError> {
        let base = self.log_end_offset();
        let capacity = self.config.segment_index_bytes as u64;
        let old = self.active_mut();
        old.make_inactive()?;
        let files = old.files_to_sync(true)?;
        self.unsynced.extend(files);
        self.active_dirty = false; // its .log is in `unsynced` now
        let mut seg = Segment::open(&self.env.disk, &self.dir, base, Some(capacity), now)?;
        if seg.size != 0 || seg.index.inner.entries() != 0 {
            // Leftover files with this name (should have been removed by recovery).
            return Err(corrupt(
                &seg.log_path,
                0,
                "new segment file already has data",
            ));
        }
        seg.next_offset = base;
        self.active_first_timestamp = None;
        tracing::debug!(dir = %self.dir.display(), base, "rolled segment");
        self.segments.push(seg);
        self.dir_dirty = true;
        self.write_producer_snapshot(base);
        Ok(())
    }
}
