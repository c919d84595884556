//! `PartitionLog`: one partition's log, owned by one shard (single-threaded, no locks).
//!
//! Owns: the segment list (roll by size / age / full index), assigning offsets on append,
//! fetch reads (offset -> segment -> offset index -> short header scan), timestamp lookups,
//! recovery on open (recovery point + clean-shutdown marker), durability bookkeeping (what
//! must be fdatasynced, the durable offset, the recovery point), retention, close and delete.
//! Not here: deciding when to sync across partitions (`crate::flush`), validating produced
//! batches (the broker calls wire's `validate_batch` first), leader epochs / replication.
//!
//! Borrowing: `read` and `offset_for_timestamp` do their index lookups synchronously and
//! return a future that owns what it needs (cloned `Rc` fds, sizes), not `&self`. So with the
//! log in an `Rc<RefCell<_>>`, `let f = log.borrow().read(..); f.await` holds no borrow across
//! the await, and appends can proceed meanwhile (a read sees the log as of its call). The
//! same holds for `begin_sync` / `SyncJob::run` / `finish_sync`, which the group commit uses.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::mem;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};

use bytes::Bytes;
use wire::record_batch::{patched_prefix, stamped_header, BatchHeader, TimestampType};

use super::batch::{self, BATCH_HEADER_BYTES, PEEK_BYTES, PEEK_TS_BYTES};
use super::checkpoint::{self, Checkpoint, CheckpointFile};
use super::dir::{self, TopicId};
use super::leader_epoch::LeaderEpochCache;
use super::producer_state::{ProducerStateManager, NO_PRODUCER_ID};
use super::segment::{range_fd, read_exact_at, RangeFd, Segment, Walker};
use super::{join_all, parse_stem, segment_paths, snapshot_path, AppendInfo, LogError};
use crate::config::LogConfig;
use crate::fsyncs::{self, SyncReason};
use crate::storage::{Disk, Env, File, FileRange, Piece};

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

/// The fdatasyncs that make a log durable up to `target`: cloned fds, no borrow of the log.
pub struct SyncJob {
    files: Vec<Rc<File>>,
    /// The first `rolled` of `files` are those of segments rolled (or recovered) since the
    /// last sync; the rest is the active segment's.
    rolled: usize,
    /// Why the active segment's data is synced (`fsyncs`); rolled files and the directory
    /// count as `SegmentRoll` when this is `GroupCommit`.
    reason: SyncReason,
    disk: Disk,
    dir: Option<PathBuf>,
    target: i64,
    checkpoint: Checkpoint,
}

impl SyncJob {
    /// fdatasync of every file concurrently through io_uring, then of the directory if a
    /// segment was created. Never blocks the thread.
    pub async fn run(&self) -> io::Result<()> {
        let roll_reason = match self.reason {
            SyncReason::GroupCommit => SyncReason::SegmentRoll,
            other => other,
        };
        fsyncs::attribute(roll_reason, self.rolled as u64);
        fsyncs::attribute(self.reason, (self.files.len() - self.rolled) as u64);
        let results = join_all(self.files.iter().map(|f| f.fdatasync()).collect()).await;
        for r in results {
            r?;
        }
        if let Some(dir) = &self.dir {
            fsyncs::attribute(roll_reason, 1);
            self.disk.sync_dir(dir).await?;
        }
        Ok(())
    }

    /// The log end offset this job makes durable.
    pub fn target(&self) -> i64 {
        self.target
    }
}

/// What a read needs of one segment, cloned out of the log.
struct SegRef {
    file: Rc<File>,
    path: Rc<Path>,
    size: u64,
    start: u64,
}

/// What a range read needs of one segment (see [`PartitionLog::read_ranges`]): the segment,
/// and index positions found while the log was borrowed, from which the end of the range is
/// found by reading a few batch headers.
struct RangeSeg {
    seg: SegRef,
    range_fd: RangeFd,
    /// A batch boundary at or before where the read's budget can end in this segment.
    budget_floor: u64,
    /// When the segment holds batches reaching the limit offset: a batch boundary at or
    /// before the first of them.
    limit_floor: Option<u64>,
}

/// Bytes of one batch-header read of a range read: enough for a few small batches' headers,
/// never the bulk of the records (those stay in the file and go out by sendfile).
const HEADER_READ_BYTES: usize = 512;

fn corrupt(path: &Path, position: u64, reason: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: path.to_path_buf(),
        position,
        reason: reason.into(),
    }
}

impl PartitionLog {
    /// Opens or creates the partition directory and recovers it.
    ///
    /// - After a clean close (`.clean_shutdown`): indexes are trusted; the tail of the last
    ///   segment is walked (headers only) to find the log end; any inconsistency falls back to
    ///   full recovery of that segment.
    /// - Otherwise: segments before the recovery point's segment are trusted (sanity-checked);
    ///   that segment and every later one are fully re-validated (lengths, CRC-32C, counts,
    ///   increasing offsets) and their indexes rebuilt. At the first bad byte the `.log` is
    ///   truncated and every later segment deleted: nothing past the last valid batch is ever
    ///   served. Recovered data is then fdatasynced and the recovery point moved to the end.
    pub async fn open(dir: PathBuf, config: LogConfig) -> Result<PartitionLog, LogError> {
        Self::open_inner(Env::real(), dir, config, None).await
    }

    /// `open` on the given disk and clock (the simulation; production uses `open`).
    pub async fn open_in(
        env: Env,
        dir: PathBuf,
        config: LogConfig,
    ) -> Result<PartitionLog, LogError> {
        Self::open_inner(env, dir, config, None).await
    }

    /// `open` for a partition of the topic `topic_id`. A directory whose `partition.metadata`
    /// names another id belongs to an earlier topic of the same name whose deletion never
    /// finished (crash): it is deleted first, so the new topic starts empty instead of
    /// resurrecting the old records. A directory without the file (new, or written before
    /// the file existed) is adopted and gets one before its first segment.
    pub async fn open_for_topic(
        dir: PathBuf,
        config: LogConfig,
        topic_id: TopicId,
    ) -> Result<PartitionLog, LogError> {
        Self::open_for_topic_in(Env::real(), dir, config, topic_id).await
    }

    /// `open_for_topic` on the given disk and clock.
    pub async fn open_for_topic_in(
        env: Env,
        dir: PathBuf,
        config: LogConfig,
        topic_id: TopicId,
    ) -> Result<PartitionLog, LogError> {
        if env.disk.exists(&dir) {
            if let Some(old) = dir::read_topic_id(&env.disk, &dir)? {
                if old != topic_id {
                    tracing::warn!(
                        dir = %dir.display(),
                        old_topic_id = %dir::encode_topic_id(&old),
                        topic_id = %dir::encode_topic_id(&topic_id),
                        "partition directory belongs to an earlier topic of the same name; deleting it"
                    );
                    dir::delete_partition_dir_on(&env.disk, &dir).await?;
                }
            }
        }
        Self::open_inner(env, dir, config, Some(topic_id)).await
    }

    async fn open_inner(
        env: Env,
        dir: PathBuf,
        config: LogConfig,
        topic_id: Option<TopicId>,
    ) -> Result<PartitionLog, LogError> {
        let disk = env.disk.clone();
        let created = !disk.exists(&dir);
        disk.create_dir_all(&dir)
            .map_err(|e| LogError::io("create dir", &dir, e))?;
        if created {
            // A new partition: its directory entry must be durable before any acked data.
            if let Some(parent) = dir.parent() {
                fsyncs::attribute(SyncReason::PartitionCreate, 1);
                disk.sync_dir(parent)
                    .await
                    .map_err(|e| LogError::io("sync dir", parent, e))?;
            }
        }
        if let Some(id) = topic_id {
            if dir::read_topic_id(&disk, &dir)?.is_none() {
                dir::write_topic_id(&disk, &dir, &id).await?;
            }
        }
        // Finishes or discards a compaction swap a crash interrupted; true if ever compacted.
        let compacted = super::cleaner::recover_dir(&disk, &dir).await?;
        let capacity = config.segment_index_bytes as u64;
        let interval = config.index_interval_bytes;
        let mut bases = list_segments(&disk, &dir)?;
        // Segments wholly below the durable log start are leftovers of a retention deletion
        // that a crash interrupted (or a power loss undid in part): delete them again.
        let durable_start = checkpoint::read_log_start(&disk, &dir)
            .map_err(|e| LogError::io("read", &dir.join(checkpoint::LOG_START_FILE), e))?;
        let mut removed_leftovers = false;
        if let Some(start) = durable_start {
            let keep_from = bases.partition_point(|&b| b <= start).saturating_sub(1);
            for &base in &bases[..keep_from] {
                tracing::info!(dir = %dir.display(), base, start, "deleting segment below the log start offset");
                remove_segment_files(&disk, &dir, base)?;
                removed_leftovers = true;
            }
            bases.drain(..keep_from);
        }
        if bases.is_empty() {
            bases.push(durable_start.unwrap_or(0));
        }
        let marker = checkpoint::clean_marker(&dir);
        let clean = disk.exists(&marker);
        let (cp_file, cp) = CheckpointFile::open(&disk, &dir)
            .map_err(|e| LogError::io("open", &dir.join(checkpoint::RECOVERY_POINT_FILE), e))?;
        // Index of the first segment to re-validate (None: trust all).
        let mut recover_from: Option<usize> = if clean {
            None
        } else {
            let i = cp.map_or(0, |c| {
                bases
                    .partition_point(|&b| b <= c.segment_base)
                    .saturating_sub(1)
            });
            Some(i)
        };
        let now = env.clock.now_ms();
        let mut segments: Vec<Segment> = Vec::with_capacity(bases.len());
        let mut recovered_any = false;
        let mut report = RecoveryReport::default();
        let n = bases.len();
        for i in 0..n {
            let base = bases[i];
            let last = i == n - 1;
            let mut trusted = match recover_from {
                Some(r) => i < r,
                None => true,
            };
            let mut seg = Segment::open(
                &disk,
                &dir,
                base,
                if trusted && !last {
                    None
                } else {
                    Some(capacity)
                },
                now,
            )?;
            seg.gaps_allowed = compacted;
            if trusted {
                // The last segment's end is found by load_tail; no upper bound for the check.
                let next = if last { i64::MAX } else { bases[i + 1] };
                let mut ok = seg.load_trusted(next);
                if ok && last {
                    ok = seg.load_tail().await?;
                }
                if !ok {
                    tracing::warn!(dir = %dir.display(), base, "index failed sanity check; recovering segment");
                    seg.make_active(capacity)?; // room to rebuild the indexes
                    recover_from = Some(i);
                    trusted = false;
                }
            }
            if !trusted {
                recovered_any = true;
                if let Some(prev) = segments.last() {
                    // A compacted segment may end before the next one's base (gap).
                    if prev.next_offset > base || (!compacted && prev.next_offset != base) {
                        // Offsets are contiguous (no compaction): a segment that does not
                        // start where the previous one ends follows lost or torn data.
                        tracing::warn!(dir = %dir.display(), base, expected = prev.next_offset, "segment does not follow its predecessor; deleting it and every later one");
                        drop(seg);
                        for &later in &bases[i..] {
                            remove_segment_files(&disk, &dir, later)?;
                        }
                        break;
                    }
                }
                if seg.size > 0 {
                    report.segments_recovered += 1;
                    report.bytes_scanned += seg.size;
                }
                let truncated = seg.recover(interval).await?;
                if truncated.is_some() && !last {
                    for &later in &bases[i + 1..] {
                        tracing::warn!(dir = %dir.display(), base = later, "deleting segment after truncation point");
                        remove_segment_files(&disk, &dir, later)?;
                    }
                    segments.push(seg);
                    break;
                }
            }
            segments.push(seg);
        }
        // Inactive segments keep trimmed indexes; the active one gets room to grow.
        let count = segments.len();
        for (i, seg) in segments.iter_mut().enumerate() {
            if i + 1 < count {
                if recover_from.is_some_and(|r| i >= r) {
                    seg.make_inactive()?;
                }
            } else {
                seg.make_active(capacity)?;
            }
        }
        let mut log_end = segments.last().expect("at least one segment").next_offset;
        // Kafka's LogLoader: a log end below the log start (a DeleteRecords answered for
        // records a power loss then undid) restarts the log empty at the log start, so no
        // offset below an answered DeleteRecords is ever assigned again.
        let mut reset_from = None;
        if let Some(start) = durable_start.filter(|&s| s > log_end) {
            segments = reset_to_log_start(&disk, &dir, segments, start, capacity, now)?;
            reset_from = Some(log_end);
            log_end = start;
            recover_from = Some(0); // the new segment and the directory get synced below
            recovered_any = true;
        }
        // Retention or DeleteRecords may have moved the start past the first segment's base.
        let log_start = segments[0]
            .base_offset
            .max(durable_start.unwrap_or(0))
            .min(log_end);
        let mut log = PartitionLog {
            env,
            dir: dir.clone(),
            config,
            segments,
            log_start_offset: log_start,
            durable_offset: 0,
            sync_requested_offset: 0,
            unsynced: Vec::new(),
            active_dirty: false,
            dir_dirty: false,
            messages_since_sync: 0,
            first_unsynced_ms: None,
            checkpoint: cp_file,
            last_checkpoint: None,
            failed: None,
            syncs_completed: 0,
            recovery: report,
            producers: ProducerStateManager::new(),
            epochs: LeaderEpochCache::load(&disk, &dir),
            active_first_timestamp: None,
            watch: None,
        };
        if report.segments_recovered > 0 {
            tracing::info!(
                dir = %log.dir.display(),
                segments = report.segments_recovered,
                bytes = report.bytes_scanned,
                clean_shutdown = clean,
                "recovered log segments"
            );
        }
        if removed_leftovers {
            log.dir_dirty = true;
        }
        if let Some(old_end) = reset_from {
            // Epochs that began past the old end began in records that are gone.
            let path = log.dir.join(super::leader_epoch::LEADER_EPOCH_FILE);
            log.epochs
                .truncate_from_end(old_end + 1)
                .map_err(|e| LogError::io("write", &path, e))?;
        }
        if recovered_any {
            // What recovery kept may still be only in the page cache (kill -9): make it
            // durable before the recovery point says so.
            let r = recover_from.unwrap_or(0);
            let last = log.segments.len() - 1;
            for (i, seg) in log.segments.iter_mut().enumerate().skip(r) {
                log.unsynced.extend(seg.files_to_sync(i < last)?);
            }
            log.dir_dirty = true;
        } else {
            log.durable_offset = log_end;
            log.sync_requested_offset = log_end;
        }
        log.load_producer_state(now).await?;
        log.load_leader_epochs()?;
        log.load_active_first_timestamp().await?;
        log.sync_for(SyncReason::OpenClose).await?;
        log.write_checkpoint(Checkpoint {
            next_offset: log_end,
            segment_base: log.active().base_offset,
            position: log.active().size,
        })?;
        if clean {
            // Remove the marker durably before any append: a crash later must recover.
            disk.remove_file(&marker)
                .map_err(|e| LogError::io("remove", &marker, e))?;
            fsyncs::attribute(SyncReason::OpenClose, 1);
            disk.sync_dir(&dir)
                .await
                .map_err(|e| LogError::io("sync dir", &dir, e))?;
        }
        Ok(log)
    }

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
        if self.should_roll(batch.len() as u64, last_offset, now, max_timestamp) {
            self.roll(now)?;
        }
        if self.active().size == 0 {
            // Kafka's `rollingBasedTimestamp`: segment.ms counts from the first batch's stamp.
            self.active_first_timestamp = Some(max_timestamp);
        }
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
        let interval = self.config.index_interval_bytes;
        let limit = self.config.effective_segment_bytes();
        let active = self.active_mut();
        if active.size == 0 {
            // segment.ms counts from the first batch, so an idle empty segment is not rolled
            // the moment it gets its first append.
            active.created_ms = now;
        }
        // As much again as the segment holds (an idle partition reserves little, a busy one
        // changes its file size a few times per segment).
        let preallocate = active
            .size
            .clamp(PREALLOCATE_MIN_BYTES, PREALLOCATE_MAX_BYTES);
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
        if self.epochs.needs(leader_epoch, base_offset) {
            // The batch is written: a failed checkpoint write must not fail its append. The
            // cache in memory is updated; the file is rewritten at the next change.
            if let Err(error) = self.assign_epoch(leader_epoch, base_offset) {
                tracing::warn!(dir = %self.dir.display(), %error, "leader epoch checkpoint not written");
            }
        }
        let header = &BatchHeader {
            max_timestamp,
            ..*header
        };
        self.producers.update(header, base_offset);
        self.messages_since_sync += header.records_count.max(0) as u64;
        self.first_unsynced_ms.get_or_insert(now);
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_append_time_ms: now,
            log_start_offset: self.log_start_offset,
            duplicate: false,
        })
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
    fn roll(&mut self, now: i64) -> Result<(), LogError> {
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

    // ---------------------------------------------------------------------------------
    // Reads
    // ---------------------------------------------------------------------------------

    /// Reads whole batches starting with the one containing `offset`, up to `max_bytes` but
    /// at least one whole batch, never including a batch that reaches `limit_offset` (the
    /// high watermark, exclusive). Continues into later segments while bytes remain.
    /// `offset == log end` (or >= limit) gives empty bytes; outside [log start, log end] is
    /// `OffsetOutOfRange`. The returned future borrows nothing from `self` (see module doc).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
    ) -> impl Future<Output = Result<Bytes, LogError>> + 'static {
        self.read_bounded(offset, max_bytes, limit_offset, true)
    }

    /// As [`read`](Self::read); with `min_one` false a first batch larger than `max_bytes`
    /// is not returned (empty bytes), so the result never exceeds `max_bytes`. Kafka's fetch
    /// gives that exception (KIP-74) only to the first non-empty partition of a response.
    pub fn read_bounded(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
        min_one: bool,
    ) -> impl Future<Output = Result<Bytes, LogError>> + 'static {
        let plan = self.plan_read(offset, max_bytes, limit_offset);
        let chunk = (self.config.index_interval_bytes as usize * 2).clamp(4096, 1 << 20);
        async move {
            match plan? {
                None => Ok(Bytes::new()),
                Some(segs) => {
                    read_planned(segs, offset, max_bytes, limit_offset, chunk, min_one).await
                }
            }
        }
    }

    /// As [`read_bounded`](Self::read_bounded), but the records stay in the segment files:
    /// the result is the byte ranges of the same whole batches ([`Piece::File`], each holding
    /// its segment's file open: see ARCHITECTURE.md, "Zero-copy fetch"), one per segment
    /// touched. Batch boundaries come from the offset index and batch headers read around
    /// the range's two ends (at most about two index intervals of headers); the records in
    /// between are never read here. On the simulated disk (no descriptors) the pieces are
    /// bytes read from it.
    pub fn read_ranges(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
        min_one: bool,
    ) -> impl Future<Output = Result<Vec<Piece>, LogError>> + 'static {
        let plan = self.plan_ranges(offset, max_bytes, limit_offset);
        async move {
            match plan? {
                None => Ok(Vec::new()),
                Some(segs) => {
                    read_planned_ranges(segs, offset, max_bytes, limit_offset, min_one).await
                }
            }
        }
    }

    fn plan_ranges(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
    ) -> Result<Option<Vec<RangeSeg>>, LogError> {
        let Some(segs) = self.plan_read(offset, max_bytes, limit_offset)? else {
            return Ok(None);
        };
        let first = self
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        // Bytes before segment k that the read may take at most: the budget left in segment
        // k is at least `max_bytes` minus them.
        let mut before = 0u64;
        let mut out = Vec::with_capacity(segs.len());
        for (seg, s) in segs.into_iter().zip(&self.segments[first..]) {
            let budget_left = (max_bytes as u64).saturating_sub(before);
            let budget_floor = u64::from(s.index.floor_position(seg.start + budget_left));
            let limit_floor =
                (s.next_offset > limit_offset).then(|| u64::from(s.index.lookup(limit_offset)));
            before += seg.size - seg.start;
            out.push(RangeSeg {
                range_fd: s.range_fd.clone(),
                seg,
                budget_floor,
                limit_floor,
            });
        }
        Ok(Some(out))
    }

    fn plan_read(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
    ) -> Result<Option<Vec<SegRef>>, LogError> {
        let log_end = self.log_end_offset();
        if offset < self.log_start_offset || offset > log_end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        if offset == log_end || offset >= limit_offset {
            return Ok(None);
        }
        let idx = self
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        let first = &self.segments[idx];
        let mut segs = vec![SegRef {
            file: first.file()?,
            path: first.log_path.clone(),
            size: first.size,
            start: first.index.lookup(offset) as u64,
        }];
        // A later segment can only contribute if the ones between used less than max_bytes.
        let mut between = 0u64;
        for s in &self.segments[idx + 1..] {
            if between >= max_bytes as u64 || s.base_offset >= limit_offset {
                break;
            }
            segs.push(SegRef {
                file: s.file()?,
                path: s.log_path.clone(),
                size: s.size,
                start: 0,
            });
            between += s.size;
        }
        Ok(Some(segs))
    }

    /// ListOffsets by timestamp, batch-level: the first batch whose max timestamp is >= `ts`,
    /// as (its base offset, its max timestamp); None if no batch reaches `ts`. (Kafka answers
    /// with the exact record inside that batch; a consumer seeking to the base offset may see
    /// a few earlier records of the same batch.)
    pub fn offset_for_timestamp(
        &self,
        ts: i64,
    ) -> impl Future<Output = Result<Option<(i64, i64)>, LogError>> + 'static {
        let log_start = self.log_start_offset;
        let plan = self
            .segments
            .iter()
            .find(|s| s.max_timestamp >= ts)
            .map(|s| {
                // Batches before the floor entry's offset all have max timestamps below it (and so
                // below `ts`); start at the indexed position at or before that batch.
                let start = s
                    .time_index
                    .lookup(ts)
                    .map_or(0, |(_, o)| s.index.lookup(o)) as u64;
                s.file()
                    .map(|file| (file, s.log_path.clone(), s.size, start))
            });
        async move {
            let Some((file, path, size, mut pos)) = plan.transpose()? else {
                return Ok(None);
            };
            let mut walker = Walker::new(file, size, 64 << 10);
            while pos < size {
                let b = walker
                    .bytes(pos, PEEK_TS_BYTES)
                    .await
                    .map_err(|e| LogError::io("read", &path, e))?
                    .ok_or_else(|| corrupt(&path, pos, "partial batch header"))?;
                let p = batch::peek(b).map_err(|r| corrupt(&path, pos, r))?;
                let max_ts = batch::max_timestamp(b);
                if max_ts >= ts {
                    return Ok(Some((p.base_offset.max(log_start), max_ts)));
                }
                pos += p.total as u64;
            }
            Ok(None)
        }
    }

    /// The end (next offset) of the segment a lookup by `ts` searches: Kafka's
    /// `fetchOffsetByTimestamp` picks the first segment whose largest timestamp is >= `ts`
    /// and answers from that segment only. None when no segment reaches `ts`.
    pub fn timestamp_segment_end(&self, ts: i64) -> Option<i64> {
        self.segments
            .iter()
            .find(|s| s.max_timestamp >= ts)
            .map(|s| s.next_offset)
    }

    /// Every time-index entry of every segment, as (timestamp, offset) (tests, tools).
    pub fn time_index_entries(&self) -> Vec<(i64, i64)> {
        self.segments
            .iter()
            .flat_map(|s| {
                (0..s.time_index.inner.entries()).filter_map(move |i| s.time_index.get(i))
            })
            .collect()
    }

    /// ListOffsets MAX_TIMESTAMP: (offset, timestamp) of the largest batch max timestamp,
    /// earliest batch on ties. The offset is that batch's LAST offset (Kafka's "shallow"
    /// offset of max timestamp, as before KIP-734's exact-record answer). None when no batch
    /// carries a timestamp (empty log, or only -1 timestamps).
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let mut best: Option<(i64, i64)> = None;
        for s in &self.segments {
            let better = match best {
                Some((_, t)) => s.max_timestamp > t,
                None => true,
            };
            if s.offset_of_max_timestamp >= 0 && better {
                best = Some((s.offset_of_max_timestamp, s.max_timestamp));
            }
        }
        best
    }

    // ---------------------------------------------------------------------------------
    // Durability
    // ---------------------------------------------------------------------------------

    /// Bytes were appended (or a segment rolled) since the last sync was started.
    pub fn is_dirty(&self) -> bool {
        self.active_dirty || self.dir_dirty || !self.unsynced.is_empty()
    }

    /// From now on this log (`me`) adds itself to `logs` when it has unsynced writes (see
    /// `DirtyLogs`); at once if it has some already.
    pub fn watch_dirty(&mut self, logs: DirtyLogs, me: Weak<RefCell<PartitionLog>>) {
        self.watch = Some(DirtyWatch {
            logs,
            me,
            listed: false,
        });
        if self.is_dirty() {
            self.list_dirty();
        }
    }

    /// Joins the dirty logs if not there yet. Appends are the only writes after open (rolls
    /// happen inside them; open and close sync themselves), so every dirty log is listed.
    fn list_dirty(&mut self) {
        if let Some(watch) = &mut self.watch {
            if !watch.listed {
                watch.listed = true;
                watch.logs.borrow_mut().push(watch.me.clone());
            }
        }
    }

    /// Whether this log stays in the dirty logs: false (and it is no longer listed) once
    /// everything written has been handed to a sync.
    pub fn keep_listed(&mut self) -> bool {
        if self.is_dirty() {
            return true;
        }
        if let Some(watch) = &mut self.watch {
            watch.listed = false;
        }
        false
    }

    /// The highest log end offset that a completed or in-flight sync covers.
    pub fn sync_requested_offset(&self) -> i64 {
        self.sync_requested_offset
    }

    /// Whether `flush.messages` / `flush.ms` ask for a sync now.
    pub fn flush_due(&self, now: i64) -> bool {
        self.is_dirty()
            && (self.messages_since_sync >= self.config.flush_messages
                || self.first_unsynced_ms.is_some_and(|t| {
                    now.saturating_sub(t) >= self.config.flush_ms.min(i64::MAX as u64) as i64
                }))
    }

    /// Takes everything written since the last sync into a job (None if nothing is).
    /// Run it with `SyncJob::run` (no borrow of the log needed), then `finish_sync`.
    pub fn begin_sync(&mut self) -> Option<SyncJob> {
        if !self.is_dirty() || self.failed.is_some() {
            return None;
        }
        let mut files = mem::take(&mut self.unsynced);
        let rolled = files.len();
        if self.active_dirty {
            match self.active().file() {
                Ok(file) => files.push(file),
                Err(e) => {
                    // Not expected: the active segment holds its fd.
                    self.failed = Some(e.to_string());
                    return None;
                }
            }
        }
        let target = self.log_end_offset();
        let job = SyncJob {
            files,
            rolled,
            reason: SyncReason::GroupCommit,
            disk: self.env.disk.clone(),
            dir: self.dir_dirty.then(|| self.dir.clone()),
            target,
            checkpoint: Checkpoint {
                next_offset: target,
                segment_base: self.active().base_offset,
                position: self.active().size,
            },
        };
        self.active_dirty = false;
        self.dir_dirty = false;
        self.sync_requested_offset = self.sync_requested_offset.max(target);
        self.messages_since_sync = 0;
        self.first_unsynced_ms = None;
        Some(job)
    }

    /// Records the outcome of a job from `begin_sync`: moves the durable offset and the
    /// recovery point, or marks the log failed (after a failed fdatasync the kernel may have
    /// dropped the dirty pages, so nothing written before can be trusted to be on disk).
    pub fn finish_sync(&mut self, job: SyncJob, result: io::Result<()>) -> Result<(), LogError> {
        match result {
            Ok(()) => {
                self.syncs_completed += 1;
                if job.target > self.durable_offset {
                    self.durable_offset = job.target;
                }
                if self
                    .segments
                    .iter()
                    .any(|s| s.base_offset == job.checkpoint.segment_base)
                {
                    self.write_checkpoint(job.checkpoint)?;
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "fdatasync failed; log marked failed");
                self.failed = Some(format!("fdatasync: {e}"));
                Err(LogError::io("fdatasync", &self.dir, e))
            }
        }
    }

    fn write_checkpoint(&mut self, cp: Checkpoint) -> Result<(), LogError> {
        if self
            .last_checkpoint
            .is_some_and(|old| old.next_offset > cp.next_offset)
        {
            return Ok(()); // a later sync already moved it further
        }
        self.checkpoint
            .write(&cp)
            .map_err(|e| LogError::io("write", self.checkpoint.path(), e))?;
        self.last_checkpoint = Some(cp);
        Ok(())
    }

    /// fdatasync of everything written so far (every segment written since the last sync,
    /// rolled ones included, and their indexes), then the recovery point.
    pub async fn sync(&mut self) -> Result<(), LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        self.sync_for(SyncReason::GroupCommit).await
    }

    /// `sync`, its fsyncs counted for `reason`.
    async fn sync_for(&mut self, reason: SyncReason) -> Result<(), LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        match self.begin_sync() {
            None => Ok(()),
            Some(mut job) => {
                job.reason = reason;
                let r = job.run().await;
                self.finish_sync(job, r)
            }
        }
    }

    /// Clean shutdown: final time-index entry and trimmed indexes on the active segment,
    /// everything synced, recovery point at the end, then the clean-shutdown marker (durable).
    pub async fn close(mut self) -> Result<(), LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let active = self.active_mut();
        active.make_inactive()?;
        let saved = [
            active.index.inner.take_saved(),
            active.time_index.inner.take_saved(),
        ];
        self.unsynced.extend(saved.into_iter().flatten());
        self.active_dirty = true;
        self.sync_for(SyncReason::OpenClose).await?;
        let cp = Checkpoint {
            next_offset: self.log_end_offset(),
            segment_base: self.active().base_offset,
            position: self.active().size,
        };
        self.write_checkpoint(cp)?;
        // The state at the log end, so the next open walks no batch headers.
        self.write_producer_snapshot(self.log_end_offset());
        let marker = checkpoint::clean_marker(&self.dir);
        self.env
            .disk
            .write_file(&marker, b"")
            .map_err(|e| LogError::io("create", &marker, e))?;
        fsyncs::attribute(SyncReason::OpenClose, 1);
        self.env
            .disk
            .sync_dir(&self.dir)
            .await
            .map_err(|e| LogError::io("sync dir", &self.dir, e))?;
        Ok(())
    }

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
            if !super::cleaner::is_cleaning(&self.dir) {
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

    /// Kafka's `loadFirstBatchTimestamp` for the active segment at open: one header read.
    async fn load_active_first_timestamp(&mut self) -> Result<(), LogError> {
        let active = self.active();
        if active.size < PEEK_TS_BYTES as u64 {
            return Ok(());
        }
        let path = active.log_path.clone();
        let mut walker = Walker::new(active.file()?, active.size, PEEK_TS_BYTES);
        let b = walker
            .bytes(0, PEEK_TS_BYTES)
            .await
            .map_err(|e| LogError::io("read", &path, e))?
            .ok_or_else(|| corrupt(&path, 0, "partial batch header"))?;
        self.active_first_timestamp = Some(batch::max_timestamp(b));
        Ok(())
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
        (offset != super::leader_epoch::UNDEFINED_EPOCH_OFFSET).then_some((found_epoch, offset))
    }

    /// The cache's entries as (epoch, start offset) (tests, tools).
    pub fn leader_epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epochs.entries().to_vec()
    }

    fn assign_epoch(&mut self, epoch: i32, start: i64) -> Result<(), LogError> {
        let path = self.dir.join(super::leader_epoch::LEADER_EPOCH_FILE);
        self.epochs
            .assign(epoch, start)
            .map_err(|e| LogError::io("write", &path, e))?;
        Ok(())
    }

    /// The log start moved: Kafka's `truncateFromStart`.
    fn trim_leader_epochs(&mut self) -> Result<(), LogError> {
        let path = self.dir.join(super::leader_epoch::LEADER_EPOCH_FILE);
        let start = self.log_start_offset;
        self.epochs
            .truncate_from_start(start)
            .map_err(|e| LogError::io("write", &path, e))
    }

    /// At open: entries past the log end go (recovery may have cut the log), then those
    /// below the start. An entry starting exactly at the log end stays (an epoch that began
    /// with no records yet, e.g. every empty partition): dropping and re-adding it would cost
    /// two file writes per partition at every start.
    fn load_leader_epochs(&mut self) -> Result<(), LogError> {
        let path = self.dir.join(super::leader_epoch::LEADER_EPOCH_FILE);
        let end = self.log_end_offset();
        self.epochs
            .truncate_from_end(end + 1)
            .map_err(|e| LogError::io("write", &path, e))?;
        self.trim_leader_epochs()
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

    /// Writes `<offset>.snapshot` (the state after every batch below `offset`): tmp file, then
    /// rename. Not fdatasynced: a snapshot torn by a power loss fails its CRC and the next open
    /// falls back to an older snapshot or the log itself, so a failure here only costs time at
    /// the next start and is logged, not returned.
    fn write_producer_snapshot(&self, offset: i64) {
        let path = snapshot_path(&self.dir, offset);
        let tmp = path.with_extension("snapshot.tmp");
        let bytes = self.producers.to_snapshot();
        let disk = &self.env.disk;
        let written = disk
            .write_file(&tmp, &bytes)
            .and_then(|()| disk.rename(&tmp, &path));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "producer state snapshot not written");
        }
    }

    /// Rebuilds the producer state at open: the newest readable snapshot at or below the log
    /// end, then the headers of the batches after it (only headers: producer id, epoch,
    /// sequence, last offset delta, max timestamp). Snapshots past the log end (recovery cut
    /// the log below them) and unreadable ones are deleted, so state past a truncation point
    /// never comes back.
    async fn load_producer_state(&mut self, now: i64) -> Result<(), LogError> {
        let log_end = self.log_end_offset();
        let disk = self.env.disk.clone();
        let mut snapshots = list_snapshots(&disk, &self.dir)?;
        snapshots.sort_unstable_by(|a, b| b.cmp(a));
        let mut from = self.log_start_offset;
        for offset in snapshots {
            let path = snapshot_path(&self.dir, offset);
            if offset > log_end {
                tracing::info!(path = %path.display(), log_end, "deleting producer snapshot past the log end");
                remove_file_if_exists(&disk, &path)?;
                continue;
            }
            let read = disk
                .read_file(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| ProducerStateManager::from_snapshot(&b).map_err(|e| e.to_string()));
            match read {
                Ok(state) => {
                    self.producers = state;
                    from = offset.max(self.log_start_offset);
                    break;
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "ignoring unreadable producer snapshot");
                    remove_file_if_exists(&disk, &path)?;
                }
            }
        }
        let mut batches = 0u64;
        let first = self
            .segments
            .partition_point(|s| s.base_offset <= from)
            .saturating_sub(1);
        for seg in &self.segments[first..] {
            if seg.next_offset <= from || seg.size == 0 {
                continue;
            }
            let mut pos = if seg.base_offset < from {
                seg.index.lookup(from) as u64
            } else {
                0
            };
            let path = seg.log_path.clone();
            let mut walker = Walker::new(seg.file()?, seg.size, 64 << 10);
            while pos < seg.size {
                let b = walker
                    .bytes(pos, BATCH_HEADER_BYTES)
                    .await
                    .map_err(|e| LogError::io("read", &path, e))?
                    .ok_or_else(|| corrupt(&path, pos, "partial batch header"))?;
                let header = batch::header(b);
                let total = batch::peek(b).map_err(|r| corrupt(&path, pos, r))?.total;
                if header.last_offset() >= from {
                    self.producers.update(&header, header.base_offset);
                    batches += 1;
                }
                pos += total as u64;
            }
        }
        let expired = self.remove_expired_producers(now);
        if batches > 0 || !self.producers.is_empty() {
            tracing::debug!(dir = %self.dir.display(), from, batches, producers = self.producers.len(), expired, "producer state loaded");
        }
        Ok(())
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

/// The async half of `read`: locate the batch containing `offset` in the first segment (walk
/// headers from the index floor), then take whole batches while they fit.
async fn read_planned(
    segs: Vec<SegRef>,
    offset: i64,
    max_bytes: usize,
    limit_offset: i64,
    chunk: usize,
    min_one: bool,
) -> Result<Bytes, LogError> {
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut taken = 0usize;
    for seg in segs {
        let path = &seg.path;
        let ioe = |e| LogError::io("read", path, e);
        // Locate: first batch whose last offset is >= `offset` (later segments: their first).
        let mut pos = seg.start;
        let mut walker = Walker::new(seg.file.clone(), seg.size, chunk);
        while pos < seg.size {
            let b = walker
                .bytes(pos, PEEK_BYTES)
                .await
                .map_err(ioe)?
                .ok_or_else(|| corrupt(path, pos, "partial batch header"))?;
            let p = batch::peek(b).map_err(|r| corrupt(path, pos, r))?;
            if p.last_offset >= offset {
                break;
            }
            pos += p.total as u64;
        }
        if pos >= seg.size {
            continue; // `offset` is past this segment's last batch (only possible in the first)
        }
        drop(walker);
        // Collect: one read of the budget, cut at the last whole batch.
        let first = taken == 0;
        let budget = max_bytes.saturating_sub(taken);
        let left = seg.size - pos;
        let want = (if first && min_one {
            budget.max(PEEK_BYTES)
        } else {
            budget
        } as u64)
            .min(left) as usize;
        if want < PEEK_BYTES {
            break;
        }
        let budget_limited = (want as u64) < left;
        let mut buf = Vec::with_capacity(want);
        read_exact_at(&seg.file, pos, want, &mut buf)
            .await
            .map_err(ioe)?;
        let mut end = 0usize;
        let mut stop = budget_limited;
        while end + PEEK_BYTES <= buf.len() {
            let p = batch::peek(&buf[end..]).map_err(|r| corrupt(path, pos + end as u64, r))?;
            if p.last_offset >= limit_offset {
                stop = true;
                break;
            }
            if end + p.total <= buf.len() {
                end += p.total;
                continue;
            }
            if taken == 0 && end == 0 && min_one {
                // The first batch is larger than max_bytes: return it whole anyway.
                let more = p.total - buf.len();
                if (p.total as u64) > left {
                    return Err(corrupt(path, pos, "batch runs past the end of the segment"));
                }
                read_exact_at(&seg.file, pos + buf.len() as u64, more, &mut buf)
                    .await
                    .map_err(ioe)?;
                end = p.total;
            }
            stop = true;
            break;
        }
        if end < buf.len() {
            stop = true;
        }
        buf.truncate(end);
        if end > 0 {
            taken += end;
            pieces.push(buf);
        }
        if stop {
            break;
        }
    }
    Ok(match pieces.len() {
        0 => Bytes::new(),
        1 => Bytes::from(pieces.pop().unwrap()),
        _ => Bytes::from(pieces.concat()),
    })
}

/// The range read of [`PartitionLog::read_ranges`]: the same batches as `read_planned`.
async fn read_planned_ranges(
    segs: Vec<RangeSeg>,
    offset: i64,
    max_bytes: usize,
    limit_offset: i64,
    min_one: bool,
) -> Result<Vec<Piece>, LogError> {
    let mut pieces = Vec::new();
    let mut taken = 0u64;
    for (index, range_seg) in segs.into_iter().enumerate() {
        let RangeSeg {
            seg,
            range_fd: fd_cache,
            budget_floor,
            limit_floor,
        } = range_seg;
        let path = &seg.path;
        let ioe = |e| LogError::io("read", path, e);
        let mut walker = Walker::new(seg.file.clone(), seg.size, HEADER_READ_BYTES);
        // Locate: first batch whose last offset is >= `offset` (later segments: their first).
        let mut pos = seg.start;
        if index == 0 {
            while pos < seg.size {
                let p = peek_at(&mut walker, path, pos).await?;
                if p.last_offset >= offset {
                    break;
                }
                pos += p.total as u64;
            }
        }
        if pos >= seg.size {
            continue; // `offset` is past this segment's last batch (only possible in the first)
        }
        // End: the last batch boundary within the budget and before the limit. Every batch
        // before both floors fits both (the floors are boundaries at or below the bounds), so
        // the walk starts at the lower one.
        let budget_end = pos.saturating_add((max_bytes as u64).saturating_sub(taken));
        let mut end = pos;
        if limit_floor.is_none() && budget_end >= seg.size {
            end = seg.size;
        } else {
            let mut at = budget_floor.min(limit_floor.unwrap_or(u64::MAX)).max(pos);
            while at < seg.size {
                let p = peek_at(&mut walker, path, at).await?;
                if p.last_offset >= limit_offset || at + p.total as u64 > budget_end {
                    break;
                }
                at += p.total as u64;
            }
            end = end.max(at);
        }
        if end == pos && taken == 0 && min_one {
            // The first batch is larger than max_bytes: it is returned whole anyway (KIP-74).
            let p = peek_at(&mut walker, path, pos).await?;
            if p.last_offset < limit_offset {
                if pos + p.total as u64 > seg.size {
                    return Err(corrupt(path, pos, "batch runs past the end of the segment"));
                }
                end = pos + p.total as u64;
            }
        }
        drop(walker);
        if end > pos {
            pieces.push(match range_fd(&fd_cache, &seg.file).map_err(ioe)? {
                Some(fd) => Piece::File(FileRange::new(fd, pos, end - pos)),
                None => {
                    let mut buf = Vec::with_capacity((end - pos) as usize);
                    read_exact_at(&seg.file, pos, (end - pos) as usize, &mut buf)
                        .await
                        .map_err(ioe)?;
                    Piece::Bytes(Bytes::from(buf))
                }
            });
            taken += end - pos;
        }
        if end < seg.size {
            break; // something did not fit, or reached the limit
        }
    }
    Ok(pieces)
}

/// The chain fields of the batch at `pos`.
async fn peek_at(walker: &mut Walker, path: &Path, pos: u64) -> Result<batch::Peek, LogError> {
    let b = walker
        .bytes(pos, PEEK_BYTES)
        .await
        .map_err(|e| LogError::io("read", path, e))?
        .ok_or_else(|| corrupt(path, pos, "partial batch header"))?;
    batch::peek(b).map_err(|r| corrupt(path, pos, r))
}

/// Base offsets of the `.log` files in `dir`, sorted. Index files whose `.log` is missing are
/// removed (left behind by a crash during a roll or a deletion).
fn list_segments(disk: &Disk, dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    let entries = disk
        .read_dir(dir)
        .map_err(|e| LogError::io("read dir", dir, e))?;
    for entry in entries {
        let Some((stem, ext)) = entry.name.split_once('.') else {
            continue;
        };
        let Some(base) = parse_stem(stem) else {
            continue;
        };
        match ext {
            "log" => logs.push(base),
            "index" | "timeindex" => indexes.push((base, dir.join(&entry.name))),
            _ => {}
        }
    }
    logs.sort_unstable();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            disk.remove_file(&path)
                .map_err(|e| LogError::io("remove", &path, e))?;
        }
    }
    Ok(logs)
}

/// Offsets of the `<offset>.snapshot` files in `dir` (unsorted); leftover `.snapshot.tmp`
/// files of an interrupted write are removed.
fn list_snapshots(disk: &Disk, dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut out = Vec::new();
    let entries = disk
        .read_dir(dir)
        .map_err(|e| LogError::io("read dir", dir, e))?;
    for entry in entries {
        let name = &entry.name;
        if name.ends_with(".snapshot.tmp") {
            remove_file_if_exists(disk, &dir.join(name))?;
        } else if let Some(offset) = name.strip_suffix(".snapshot").and_then(parse_stem) {
            out.push(offset);
        }
    }
    Ok(out)
}

fn remove_file_if_exists(disk: &Disk, path: &Path) -> Result<(), LogError> {
    match disk.remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io("remove", path, e)),
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

/// Replaces every segment of a log that ends below its durable `start` with one empty segment
/// at `start` (Kafka's LogLoader for `logEndOffset < logStartOffset`). The new segment's file
/// is created before any old one goes, and any order of these steps surviving a crash leaves
/// a directory the next open repairs the same way: segments below the durable start are
/// leftovers, and a log still ending below it is reset again. Producer snapshots past the old
/// end describe lost batches and go too.
fn reset_to_log_start(
    disk: &Disk,
    dir: &Path,
    segments: Vec<Segment>,
    start: i64,
    capacity: u64,
    now: i64,
) -> Result<Vec<Segment>, LogError> {
    let old_end = segments.last().map_or(0, |s| s.next_offset);
    tracing::warn!(dir = %dir.display(), log_end = old_end, start, "log ends below its log start offset; deleting all segments and starting an empty one at the log start");
    let mut fresh = Segment::open(disk, dir, start, Some(capacity), now)?;
    if fresh.size != 0 {
        return Err(corrupt(
            &fresh.log_path,
            0,
            "new segment file already has data",
        ));
    }
    fresh.next_offset = start;
    for seg in segments {
        let base = seg.base_offset;
        drop(seg);
        remove_segment_files(disk, dir, base)?;
    }
    for offset in list_snapshots(disk, dir)? {
        if offset > old_end {
            remove_file_if_exists(disk, &snapshot_path(dir, offset))?;
        }
    }
    Ok(vec![fresh])
}

fn remove_segment_files(disk: &Disk, dir: &Path, base: i64) -> Result<(), LogError> {
    let (log, index, time) = segment_paths(dir, base);
    for p in [log, index, time] {
        remove_file_if_exists(disk, &p)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::{batch, run, tmp};
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use wire::record_batch::validate_batch;

    fn small_config() -> LogConfig {
        LogConfig {
            segment_index_bytes: 4096,
            index_interval_bytes: 256,
            ..LogConfig::default()
        }
    }

    /// What the test wrote: (base offset, last offset, bytes as the log stores them).
    #[derive(Clone)]
    struct Written {
        base: i64,
        last: i64,
        bytes: Bytes,
    }

    fn append(log: &mut PartitionLog, records: usize, value_len: usize, ts: i64) -> Written {
        let (b, h) = batch(records, value_len, ts);
        let info = log.append(&b, &h, 7).unwrap();
        let mut stored = b.to_vec();
        stored[..16].copy_from_slice(&patched_prefix(&b, info.base_offset, 7));
        Written {
            base: info.base_offset,
            last: info.last_offset,
            bytes: Bytes::from(stored),
        }
    }

    /// What `read(offset, max_bytes, limit)` must return, from the model.
    fn expected(model: &[Written], offset: i64, max_bytes: usize, limit: i64) -> Vec<u8> {
        let mut out = Vec::new();
        for w in model.iter().filter(|w| w.last >= offset) {
            if w.last >= limit || (!out.is_empty() && out.len() + w.bytes.len() > max_bytes) {
                break;
            }
            if out.is_empty() || out.len() + w.bytes.len() <= max_bytes {
                out.extend_from_slice(&w.bytes);
            }
            if out.len() >= max_bytes {
                break;
            }
        }
        out
    }

    fn concat(model: &[Written]) -> Vec<u8> {
        model.iter().flat_map(|w| w.bytes.iter().copied()).collect()
    }

    fn log_files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".log"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn append_read_round_trip() {
        run(async {
            let d = tmp();
            let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
                .await
                .unwrap();
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
            let w1 = append(&mut log, 3, 10, 1000);
            let w2 = append(&mut log, 2, 10, 2000);
            assert_eq!((w1.base, w1.last, w2.base, w2.last), (0, 2, 3, 4));
            assert_eq!(log.log_end_offset(), 5);
            let got = log.read(0, 1 << 20, i64::MAX).await.unwrap();
            assert_eq!(&got[..], &concat(&[w1.clone(), w2.clone()])[..]);
            // The stored batch is still valid (patches are outside the CRC) and carries the
            // assigned offset and epoch.
            let h = validate_batch(&got).unwrap();
            assert_eq!((h.base_offset, h.partition_leader_epoch), (0, 7));
            assert_eq!(
                validate_batch(&got[w1.bytes.len()..]).unwrap().base_offset,
                3
            );
            log.close().await.unwrap();
        });
    }

    #[test]
    fn read_inside_batch_and_small_max_bytes() {
        run(async {
            let d = tmp();
            let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
                .await
                .unwrap();
            let model: Vec<Written> = (0..5).map(|_| append(&mut log, 5, 20, 1)).collect();
            // Offset 7 is inside the second batch [5, 9]: that whole batch comes back.
            let got = log.read(7, model[1].bytes.len(), i64::MAX).await.unwrap();
            assert_eq!(&got[..], &model[1].bytes[..]);
            // max_bytes smaller than a batch: still the whole first batch, only it.
            let got = log.read(0, 10, i64::MAX).await.unwrap();
            assert_eq!(&got[..], &model[0].bytes[..]);
            let got = log.read(0, 0, i64::MAX).await.unwrap();
            assert_eq!(&got[..], &model[0].bytes[..]);
            // Just under two batches: one.
            let got = log
                .read(0, model[0].bytes.len() * 2 - 1, i64::MAX)
                .await
                .unwrap();
            assert_eq!(got.len(), model[0].bytes.len());
            // Limit (high watermark) 10: batches up to offset 9 only.
            let got = log.read(0, 1 << 20, 10).await.unwrap();
            assert_eq!(&got[..], &concat(&model[..2])[..]);
            assert!(log.read(12, 1 << 20, 10).await.unwrap().is_empty());
        });
    }

    #[test]
    fn out_of_range() {
        run(async {
            let d = tmp();
            let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
                .await
                .unwrap();
            assert!(log.read(0, 100, i64::MAX).await.unwrap().is_empty());
            append(&mut log, 3, 1, 1);
            assert!(log.read(3, 100, i64::MAX).await.unwrap().is_empty());
            for bad in [4, 100, -1] {
                match log.read(bad, 100, i64::MAX).await {
                    Err(LogError::OffsetOutOfRange {
                        offset,
                        log_start: 0,
                        log_end: 3,
                    }) => assert_eq!(offset, bad),
                    other => panic!("{bad}: {other:?}"),
                }
            }
        });
    }

    #[test]
    fn rejects_bad_input() {
        run(async {
            let d = tmp();
            let cfg = LogConfig {
                max_message_bytes: 200,
                ..small_config()
            };
            let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
            let (b, h) = batch(1, 500, 1);
            assert!(matches!(
                log.append(&b, &h, 0),
                Err(LogError::RecordTooLarge { .. })
            ));
            let (b, h) = batch(1, 5, 1);
            assert!(matches!(
                log.append(&b[..b.len() - 1], &h, 0),
                Err(LogError::InvalidBatch(_))
            ));
            assert_eq!(log.log_end_offset(), 0);
        });
    }

    #[test]
    fn roll_by_size_and_read_across_segments() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-3");
            let cfg = LogConfig {
                segment_bytes: 1000,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            let model: Vec<Written> = (0..40)
                .map(|i| append(&mut log, 1 + i % 3, 60, 1000 + i as i64))
                .collect();
            assert!(log.segment_count() > 5, "{}", log.segment_count());
            let files = log_files(&dir);
            assert_eq!(files.len(), log.segment_count());
            assert_eq!(files[0], "00000000000000000000.log");
            for f in &files {
                assert_eq!(f.len(), 24, "{f}");
                let size = std::fs::metadata(dir.join(f)).unwrap().len();
                assert!(size <= 1000, "{f}: {size}");
                let base: i64 = f[..20].parse().unwrap();
                assert!(
                    model.iter().any(|w| w.base == base),
                    "{f} not at a batch boundary"
                );
            }
            // Inactive segments' indexes are trimmed to their entries.
            let idx = std::fs::metadata(dir.join(files[0].replace(".log", ".index")))
                .unwrap()
                .len();
            assert!(idx < 4096, "{idx}");
            assert_eq!(idx % 8, 0);
            let tidx = std::fs::metadata(dir.join(files[0].replace(".log", ".timeindex")))
                .unwrap()
                .len();
            assert!(tidx < 4096 && tidx > 0, "{tidx}");
            assert_eq!(tidx % 12, 0);
            // Everything, across every segment, in one read.
            let all = log.read(0, 1 << 20, i64::MAX).await.unwrap();
            assert_eq!(&all[..], &concat(&model)[..]);
            for o in 0..log.log_end_offset() {
                let got = log.read(o, 1, i64::MAX).await.unwrap();
                let w = model.iter().find(|w| w.base <= o && o <= w.last).unwrap();
                assert_eq!(&got[..], &w.bytes[..], "offset {o}");
            }
        });
    }

    #[test]
    fn roll_by_time() {
        run(async {
            let d = tmp();
            let cfg = LogConfig {
                segment_ms: 1000,
                ..small_config()
            };
            let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
            // Batches without a timestamp: segment.ms counts wall time since the first append
            // and rolls once strictly more than segment.ms passed (Kafka's shouldRoll).
            let (b, h) = batch(1, 1, -1);
            log.append_at(&b, &h, 0, 10_000).unwrap();
            log.append_at(&b, &h, 0, 11_000).unwrap();
            assert_eq!(log.segment_count(), 1);
            log.append_at(&b, &h, 0, 11_001).unwrap();
            assert_eq!(log.segment_count(), 2);
            assert_eq!(log.segments[1].base_offset, 2);
        });
    }

    /// Property: for random batch sizes, segment sizes and index densities, every read agrees
    /// with a linear scan of the model (which batch contains the offset, how many fit).
    #[test]
    fn index_lookup_matches_linear_scan() {
        for seed in 0..12u64 {
            run(async move {
                let mut rng = StdRng::seed_from_u64(seed);
                let d = tmp();
                let cfg = LogConfig {
                    segment_bytes: rng.gen_range(2_000..20_000),
                    index_interval_bytes: rng.gen_range(1..600),
                    segment_index_bytes: rng.gen_range(64..2048),
                    ..LogConfig::default()
                };
                let mut log = PartitionLog::open(d.path().join("p-0"), cfg).await.unwrap();
                let mut model = Vec::new();
                for _ in 0..rng.gen_range(50..250) {
                    let (n, len) = (rng.gen_range(1..8), rng.gen_range(0..400));
                    model.push(append(&mut log, n, len, rng.gen_range(0..1000)));
                }
                let end = log.log_end_offset();
                assert_eq!(end, model.last().unwrap().last + 1);
                for _ in 0..300 {
                    let offset = rng.gen_range(0..end);
                    let max_bytes = rng.gen_range(0..5_000);
                    let limit = if rng.gen_bool(0.3) {
                        rng.gen_range(0..=end)
                    } else {
                        i64::MAX
                    };
                    let got = log.read(offset, max_bytes, limit).await.unwrap();
                    let want = if offset >= limit {
                        Vec::new()
                    } else {
                        expected(&model, offset, max_bytes, limit)
                    };
                    assert_eq!(
                        got.len(),
                        want.len(),
                        "seed {seed} offset {offset} max {max_bytes} limit {limit}"
                    );
                    assert!(got[..] == want[..], "seed {seed} offset {offset}");
                }
            });
        }
    }

    /// The bytes of a range read's pieces, read through the descriptors the ranges hold.
    fn piece_bytes(pieces: &[Piece]) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::new();
        for piece in pieces {
            let Piece::File(range) = piece else {
                panic!("the real disk gives file ranges, got {piece:?}");
            };
            let file = std::fs::File::from(range.shared_fd().try_clone().unwrap());
            let mut buf = vec![0u8; range.len() as usize];
            file.read_exact_at(&mut buf, range.pos()).unwrap();
            out.extend_from_slice(&buf);
        }
        out
    }

    /// Property: a range read returns exactly the batches a copying read returns (same
    /// boundaries, max_bytes, KIP-74 first batch, limit, across segments), as file ranges.
    #[test]
    fn read_ranges_match_copying_reads() {
        for seed in 0..12u64 {
            run(async move {
                let mut rng = StdRng::seed_from_u64(seed);
                let d = tmp();
                let cfg = LogConfig {
                    segment_bytes: rng.gen_range(1_500..20_000),
                    index_interval_bytes: rng.gen_range(1..2000),
                    segment_index_bytes: rng.gen_range(64..2048),
                    ..LogConfig::default()
                };
                let mut log = PartitionLog::open(d.path().join("p-0"), cfg).await.unwrap();
                for _ in 0..rng.gen_range(50..250) {
                    let (n, len) = (rng.gen_range(1..8), rng.gen_range(0..900));
                    append(&mut log, n, len, rng.gen_range(0..1000));
                }
                let end = log.log_end_offset();
                for _ in 0..400 {
                    let offset = rng.gen_range(0..=end);
                    let max_bytes = rng.gen_range(0..12_000);
                    let limit = if rng.gen_bool(0.3) {
                        rng.gen_range(0..=end + 1)
                    } else {
                        end
                    };
                    let min_one = rng.gen_bool(0.7);
                    let want = log
                        .read_bounded(offset, max_bytes, limit, min_one)
                        .await
                        .unwrap();
                    let pieces = log
                        .read_ranges(offset, max_bytes, limit, min_one)
                        .await
                        .unwrap();
                    let got = piece_bytes(&pieces);
                    let case = format!(
                        "seed {seed} offset {offset} max {max_bytes} limit {limit} min_one {min_one}"
                    );
                    assert_eq!(got.len(), want.len(), "{case}");
                    assert!(got[..] == want[..], "{case}");
                    assert!(pieces.iter().all(|piece| !piece.is_empty()), "{case}");
                }
                log.close().await.unwrap();
            });
        }
    }

    #[test]
    fn read_ranges_first_batch_whole_only_with_min_one() {
        run(async {
            let d = tmp();
            let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
                .await
                .unwrap();
            let big = append(&mut log, 4, 500, 1);
            append(&mut log, 1, 10, 1);
            let whole = log.read_ranges(0, 100, i64::MAX, true).await.unwrap();
            assert_eq!(piece_bytes(&whole), big.bytes.to_vec());
            let none = log.read_ranges(0, 100, i64::MAX, false).await.unwrap();
            assert!(none.is_empty());
            // Nothing at or past the limit, even the first batch.
            let limited = log.read_ranges(0, 100, 0, true).await.unwrap();
            assert!(limited.is_empty());
            log.close().await.unwrap();
        });
    }

    /// A range holds its segment's file: deleting the segment (DeleteRecords, then the
    /// deletion of the segments below the log start, as retention does) leaves the bytes of a
    /// range read before readable and unchanged.
    #[test]
    fn held_range_survives_segment_deletion() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                segment_bytes: 1500,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg).await.unwrap();
            let model: Vec<Written> = (0..20).map(|_| append(&mut log, 3, 100, 1)).collect();
            assert!(log.segments.len() > 3);
            let pieces = log.read_ranges(0, 1 << 20, i64::MAX, true).await.unwrap();
            assert_eq!(pieces.len(), log.segments.len(), "one range per segment");
            let before = log_files(&dir);
            let last_base = log.segments.last().unwrap().base_offset;
            // DeleteRecords deletes the segments below the new log start at once.
            log.delete_records(last_base).unwrap();
            assert!(
                log_files(&dir).len() < before.len(),
                "segment files unlinked"
            );
            assert_eq!(piece_bytes(&pieces), concat(&model));
            log.close().await.unwrap();
        });
    }

    #[test]
    fn restart_after_clean_close_keeps_everything() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                segment_bytes: 3000,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            let mut model: Vec<Written> = (0..30)
                .map(|i| append(&mut log, 2, 90, 100 * i as i64))
                .collect();
            let (end, segs, max_ts) = (
                log.log_end_offset(),
                log.segment_count(),
                log.max_timestamp(),
            );
            log.close().await.unwrap();
            assert!(dir.join(".clean_shutdown").exists());

            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            assert!(!dir.join(".clean_shutdown").exists());
            assert_eq!(
                (
                    log.log_end_offset(),
                    log.segment_count(),
                    log.max_timestamp()
                ),
                (end, segs, max_ts)
            );
            assert_eq!(log.durable_offset(), end);
            assert_eq!(
                &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                &concat(&model)[..]
            );
            for o in [0, 1, 17, 33, end - 1] {
                let w = model.iter().find(|w| w.base <= o && o <= w.last).unwrap();
                assert_eq!(&log.read(o, 1, i64::MAX).await.unwrap()[..], &w.bytes[..]);
            }
            model.push(append(&mut log, 1, 5, 99_999));
            assert_eq!(model.last().unwrap().base, end);
            log.close().await.unwrap();
            let log = PartitionLog::open(dir, cfg).await.unwrap();
            assert_eq!(
                &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                &concat(&model)[..]
            );
            assert_eq!(log.max_timestamp(), Some((end, 99_999)));
        });
    }

    /// Crash (no close), then the active segments are cut at a random byte and/or get random
    /// garbage appended; recovery keeps exactly the batches wholly before the cut.
    #[test]
    fn recovery_after_random_cut() {
        for seed in 0..120u64 {
            run(async move { recovery_case(seed).await });
        }
    }

    async fn recovery_case(seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: rng.gen_range(1_500..6_000),
            index_interval_bytes: rng.gen_range(1..500),
            segment_index_bytes: 1024,
            ..LogConfig::default()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        let mut model = Vec::new();
        let n = rng.gen_range(1..60);
        let sync_at = rng.gen_range(0..=n);
        // Segment base and position of each batch, to know where a cut falls.
        let mut placed: Vec<(i64, u64)> = Vec::new();
        for i in 0..n {
            if i == sync_at {
                log.sync().await.unwrap();
            }
            let w = append(
                &mut log,
                rng.gen_range(1..5),
                rng.gen_range(0..300),
                rng.gen_range(0..1_000),
            );
            let a = log.active();
            placed.push((a.base_offset, a.size - w.bytes.len() as u64));
            model.push(w);
        }
        let cp_segment = log.last_checkpoint.map_or(0, |c| c.segment_base);
        drop(log); // kill -9: no close, no marker

        // Cut a segment at or after the recovery point's (earlier ones are trusted by design).
        let files = log_files(&dir);
        let cuttable: Vec<&String> = files
            .iter()
            .filter(|f| f[..20].parse::<i64>().unwrap() >= cp_segment)
            .collect();
        let victim = cuttable[rng.gen_range(0..cuttable.len())].clone();
        let victim_base: i64 = victim[..20].parse().unwrap();
        let path = dir.join(&victim);
        let len = std::fs::metadata(&path).unwrap().len();
        let cut = if rng.gen_bool(0.2) {
            len
        } else {
            rng.gen_range(0..=len)
        };
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(cut).unwrap();
        let garbage = rng.gen_bool(0.5);
        if garbage {
            let garbage: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.gen()).collect();
            std::os::unix::fs::FileExt::write_all_at(&f, &garbage, cut).unwrap();
        }
        drop(f);

        let keep: Vec<Written> = model
            .iter()
            .zip(&placed)
            .filter(|(w, (seg, pos))| {
                let untouched = cut == len && !garbage; // then later segments survive too
                untouched
                    || *seg < victim_base
                    || (*seg == victim_base && pos + w.bytes.len() as u64 <= cut)
            })
            .map(|(w, _)| w.clone())
            .collect();
        let want_end = keep.last().map_or(0, |w| w.last + 1);

        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        assert_eq!(
            log.log_end_offset(),
            want_end,
            "seed {seed}: cut {victim} at {cut}/{len}"
        );
        assert_eq!(log.durable_offset(), want_end);
        let all = log.read(0, 1 << 24, i64::MAX).await.unwrap();
        assert!(all[..] == concat(&keep)[..], "seed {seed}: content");
        assert!(log_files(&dir)
            .iter()
            .all(|f| f[..20].parse::<i64>().unwrap() <= victim_base.max(want_end)));
        // Appends continue at the right offset, and survive another crash + recovery.
        let w = append(&mut log, 2, 10, 5);
        assert_eq!(w.base, want_end);
        log.sync().await.unwrap();
        drop(log);
        let log = PartitionLog::open(dir, cfg).await.unwrap();
        assert_eq!(log.log_end_offset(), want_end + 2);
        let got = log.read(want_end, 1, i64::MAX).await.unwrap();
        assert_eq!(&got[..], &w.bytes[..]);
    }

    #[test]
    fn flipped_byte_in_last_batch_truncates_there() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let mut log = PartitionLog::open(dir.clone(), small_config())
                .await
                .unwrap();
            let model: Vec<Written> = (0..10).map(|_| append(&mut log, 3, 50, 1)).collect();
            log.sync().await.unwrap(); // even synced bytes are re-validated in the recovery point's segment
            let last_pos: u64 = model[..9].iter().map(|w| w.bytes.len() as u64).sum();
            drop(log);
            let path = dir.join("00000000000000000000.log");
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[last_pos as usize + 70] ^= 0x40;
            std::fs::write(&path, &bytes).unwrap();
            let log = PartitionLog::open(dir.clone(), small_config())
                .await
                .unwrap();
            assert_eq!(log.log_end_offset(), model[9].base);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), last_pos);
            assert_eq!(
                &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                &concat(&model[..9])[..]
            );
        });
    }

    #[test]
    fn offset_for_timestamp_and_max_timestamp() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                segment_bytes: 600,
                index_interval_bytes: 1,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            assert_eq!(log.max_timestamp(), None);
            assert_eq!(log.offset_for_timestamp(0).await.unwrap(), None);
            let ts = [100, 200, 200, 300, 150, 400, 50, 400, 500];
            let model: Vec<Written> = ts.iter().map(|&t| append(&mut log, 2, 100, t)).collect();
            assert!(log.segment_count() > 2);
            let check = |log: &PartitionLog| {
                let cases = [
                    (0, Some(0)),
                    (100, Some(0)),
                    (101, Some(1)),
                    (200, Some(1)),
                    (250, Some(3)),
                    (301, Some(5)),
                    (450, Some(8)),
                    (501, None),
                ];
                let futs: Vec<_> = cases
                    .iter()
                    .map(|&(t, _)| log.offset_for_timestamp(t))
                    .collect();
                (cases, futs)
            };
            for round in 0..2 {
                let (cases, futs) = check(&log);
                for ((t, want), f) in cases.into_iter().zip(futs) {
                    let got = f.await.unwrap();
                    let want = want.map(|i: usize| (model[i].base, ts[i]));
                    assert_eq!(got, want, "round {round} ts {t}");
                }
                // Largest timestamp 500 is the last batch; ties (400) resolve to the first.
                assert_eq!(log.max_timestamp(), Some((model[8].last, 500)));
                if round == 0 {
                    log.close().await.unwrap();
                    log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
                }
            }
        });
    }

    /// A stored log start past the log end (a DeleteRecords answered for records a power loss
    /// undid): open restarts the log empty at that start, and appends continue from it.
    #[test]
    fn open_with_log_end_below_stored_start_restarts_at_it() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                segment_bytes: 500,
                ..small_config()
            };
            for clean in [false, true] {
                let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
                for _ in 0..10 {
                    append(&mut log, 2, 100, 1);
                }
                log.sync().await.unwrap();
                assert!(log.segment_count() > 1);
                let start = log.log_end_offset() + 7;
                checkpoint::write_log_start(&log.env().disk, &dir, start).unwrap();
                if clean {
                    log.close().await.unwrap();
                } else {
                    drop(log); // a crash
                }
                let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
                assert_eq!(
                    (log.log_start_offset(), log.log_end_offset()),
                    (start, start)
                );
                assert_eq!(log_files(&dir), vec![format!("{start:020}.log")]);
                assert!(matches!(
                    log.read(start - 1, 1 << 20, start).await,
                    Err(LogError::OffsetOutOfRange { .. })
                ));
                let w = append(&mut log, 1, 10, 1);
                assert_eq!(w.base, start);
                log.close().await.unwrap();
                let log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
                assert_eq!(
                    (log.log_start_offset(), log.log_end_offset()),
                    (start, start + 1)
                );
                log.close().await.unwrap();
            }
        });
    }

    #[test]
    fn retention_and_delete() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                segment_bytes: 500,
                retention_bytes: 1000,
                retention_ms: -1,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg).await.unwrap();
            let model: Vec<Written> = (0..20).map(|_| append(&mut log, 1, 100, 1)).collect();
            let before = log.segment_count();
            let deleted = log.apply_retention(crate::log::now_ms()).unwrap();
            assert!(deleted > 0 && log.segment_count() == before - deleted);
            assert!(
                log.size_bytes() >= 1000 && log.size_bytes() < 1500,
                "{}",
                log.size_bytes()
            );
            let start = log.log_start_offset();
            assert_eq!(start, log.segments[0].base_offset);
            assert_eq!(log_files(&dir).len(), log.segment_count());
            assert!(matches!(
                log.read(start - 1, 1, i64::MAX).await,
                Err(LogError::OffsetOutOfRange { .. })
            ));
            let w = model.iter().find(|w| w.base == start).unwrap();
            assert_eq!(
                &log.read(start, 1, i64::MAX).await.unwrap()[..],
                &w.bytes[..]
            );
            log.delete().await.unwrap();
            assert!(!dir.exists());
            // Renamed to `*-delete`, then removed: nothing is left behind.
            assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        });
    }

    /// `cleanup.policy=compact` (no `delete`): retention never deletes, however old or large
    /// the log; `compact,delete` (cleanup_delete) deletes as usual.
    #[test]
    fn retention_keeps_compact_only_logs() {
        run(async {
            for cleanup_delete in [false, true] {
                let d = tmp();
                let cfg = LogConfig {
                    segment_bytes: 500,
                    retention_bytes: 100,
                    retention_ms: 1,
                    cleanup_delete,
                    ..small_config()
                };
                let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
                let model: Vec<Written> = (0..20).map(|_| append(&mut log, 1, 100, 1)).collect();
                let before = log.segment_count();
                assert!(before > 3);
                let deleted = log.apply_retention(crate::log::now_ms() + 10_000).unwrap();
                if cleanup_delete {
                    assert_eq!(deleted, before - 1);
                    assert_eq!(log.segment_count(), 1);
                    assert!(log.log_start_offset() > 0);
                } else {
                    assert_eq!(deleted, 0);
                    assert_eq!(log.segment_count(), before);
                    assert_eq!(log.log_start_offset(), 0);
                    assert_eq!(
                        &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                        &concat(&model)[..]
                    );
                }
            }
        });
    }

    /// A directory left by an earlier topic of the same name (its deletion never finished) is
    /// not adopted by the new topic: it is deleted and the new log starts empty. The same id
    /// keeps its data, and a directory without `partition.metadata` is adopted.
    #[test]
    fn reopen_with_other_topic_id_starts_empty() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let (old_id, new_id): (TopicId, TopicId) = ([1; 16], [2; 16]);
            // Written before partition.metadata existed: adopted, and the file is added.
            let mut log = PartitionLog::open(dir.clone(), small_config())
                .await
                .unwrap();
            append(&mut log, 3, 10, 1);
            log.close().await.unwrap();
            assert!(!dir.join(dir::PARTITION_METADATA_FILE).exists());
            let mut log = PartitionLog::open_for_topic(dir.clone(), small_config(), old_id)
                .await
                .unwrap();
            assert_eq!(log.log_end_offset(), 3);
            assert_eq!(dir::read_topic_id(&Disk::Real, &dir).unwrap(), Some(old_id));
            append(&mut log, 2, 10, 1);
            drop(log); // crash: no clean close either

            let log = PartitionLog::open_for_topic(dir.clone(), small_config(), old_id)
                .await
                .unwrap();
            assert_eq!(log.log_end_offset(), 5);
            log.close().await.unwrap();

            let mut log = PartitionLog::open_for_topic(dir.clone(), small_config(), new_id)
                .await
                .unwrap();
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
            assert_eq!(log.read(0, 1 << 20, i64::MAX).await.unwrap().len(), 0);
            assert_eq!(dir::read_topic_id(&Disk::Real, &dir).unwrap(), Some(new_id));
            assert_eq!(
                log_files(&dir),
                vec!["00000000000000000000.log".to_string()]
            );
            assert_eq!(
                std::fs::metadata(dir.join("00000000000000000000.log"))
                    .unwrap()
                    .len(),
                0
            );
            // Only the new directory remains: the old one went through `*-delete`.
            assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
            let w = append(&mut log, 1, 10, 1);
            assert_eq!(w.base, 0);
        });
    }

    /// After a clean close nothing is re-validated. The tail walk starts AT the batch of the
    /// active segment's last index entry, which ends at the entry's offset; it used to expect
    /// that batch to start after the entry's offset, which none does, so every clean restart
    /// re-checked each active segment that had an index entry. After a crash, recovery runs.
    #[test]
    fn clean_reopen_skips_recovery() {
        run(async {
            for (records, interval) in [(1, 1), (3, 1), (5, 256), (4, 100_000)] {
                let d = tmp();
                let dir = d.path().join("t-0");
                let cfg = LogConfig {
                    segment_bytes: 4_000,
                    index_interval_bytes: interval,
                    ..small_config()
                };
                let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
                assert_eq!(log.recovery_report(), RecoveryReport::default());
                let mut model: Vec<Written> =
                    (0..40).map(|i| append(&mut log, records, 50, i)).collect();
                assert!(log.segment_count() > 1);
                let end = log.log_end_offset();
                log.close().await.unwrap();

                let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
                assert_eq!(
                    log.recovery_report(),
                    RecoveryReport::default(),
                    "records {records} interval {interval}"
                );
                assert_eq!(log.log_end_offset(), end);
                assert_eq!(
                    &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                    &concat(&model)[..]
                );
                model.push(append(&mut log, records, 50, 1000));
                log.sync().await.unwrap();
                let active_size = log.active().size;
                let active_path = log.active().log_path.to_path_buf();
                drop(log); // crash

                // The crash left the active segment's preallocated zeros after its batches.
                assert!(std::fs::metadata(&active_path).unwrap().len() > active_size);
                let log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
                let report = log.recovery_report();
                assert_eq!(report.segments_recovered, 1);
                assert!(report.bytes_scanned >= active_size);
                assert_eq!(
                    std::fs::metadata(&active_path).unwrap().len(),
                    active_size,
                    "recovery cuts the zero tail"
                );
                assert_eq!(log.log_end_offset(), end + records as i64);
                assert_eq!(
                    &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                    &concat(&model)[..]
                );
            }
        });
    }

    /// Indexes that fail the sanity check, and a clean-shutdown marker whose log tail is torn
    /// anyway: both fall back to full recovery of the segment.
    #[test]
    fn bad_index_and_lying_marker_recover() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                segment_bytes: 2_000,
                index_interval_bytes: 1,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            let model: Vec<Written> = (0..30).map(|_| append(&mut log, 2, 60, 5)).collect();
            log.close().await.unwrap();
            let files = log_files(&dir);
            let index = dir.join(files[0].replace(".log", ".index"));
            let len = std::fs::metadata(&index).unwrap().len() as usize;
            std::fs::write(&index, vec![0u8; len]).unwrap();
            let last = dir.join(files.last().unwrap());
            let last_len = std::fs::metadata(&last).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
            f.set_len(last_len - 3).unwrap();
            drop(f);
            assert!(dir.join(".clean_shutdown").exists());

            let log = PartitionLog::open(dir.clone(), cfg).await.unwrap();
            let keep = &model[..model.len() - 1];
            assert_eq!(log.log_end_offset(), keep.last().unwrap().last + 1);
            assert_eq!(
                &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                &concat(keep)[..]
            );
            for w in keep {
                assert_eq!(
                    &log.read(w.last, 1, i64::MAX).await.unwrap()[..],
                    &w.bytes[..]
                );
            }
        });
    }

    fn producer_batch(pid: i64, epoch: i16, seq: i32, records: usize) -> (Bytes, BatchHeader) {
        let mut b = wire::record_batch::BatchBuilder::new(wire::record_batch::Compression::None)
            .producer(pid, epoch, seq);
        for i in 0..records {
            b = b.push(
                None,
                Some(format!("v{i}").as_bytes()),
                &[],
                1_000 + i as i64,
            );
        }
        let bytes = b.build();
        let h = validate_batch(&bytes).unwrap();
        (bytes, h)
    }

    fn snapshots(dir: &Path) -> Vec<i64> {
        let mut v = list_snapshots(&Disk::Real, dir).unwrap();
        v.sort_unstable();
        v
    }

    /// Producer state: snapshot at every roll and at close, rebuilt at open from the newest
    /// readable snapshot plus the batch headers after it; snapshots past a truncation point
    /// and corrupt ones are dropped; retention removes them with their segments.
    #[test]
    fn producer_state_survives_restarts_and_truncation() {
        let dir = tmp();
        let path = dir.path().join("p-0");
        run(async move {
            let config = LogConfig {
                segment_bytes: 250,
                producer_id_expiration_ms: i64::MAX,
                ..small_config()
            };
            let mut log = PartitionLog::open(path.clone(), config.clone())
                .await
                .unwrap();
            let mut seq = 0;
            let mut appended = Vec::new();
            for _ in 0..12 {
                let (b, h) = producer_batch(42, 0, seq, 3);
                let info = log.append(&b, &h, 0).unwrap();
                appended.push((b, h, info.base_offset));
                seq += 3;
            }
            assert!(log.segment_count() > 2, "test needs rolls");
            let rolled = snapshots(&path);
            assert!(!rolled.is_empty());
            let state = log.producers().clone();
            // Clean close: a snapshot at the log end; reopen restores the same state.
            let end = log.log_end_offset();
            log.close().await.unwrap();
            assert!(snapshots(&path).contains(&end));
            let mut log = PartitionLog::open(path.clone(), config.clone())
                .await
                .unwrap();
            assert_eq!(*log.producers(), state);
            // Retries of the last five batches are answered with their offsets.
            for (b, h, base) in &appended[7..] {
                let info = log.append(b, h, 0).unwrap();
                assert!(info.duplicate);
                assert_eq!(info.base_offset, *base);
            }
            assert_eq!(log.log_end_offset(), end);
            // Crash (no close), with the newest snapshot corrupt: an older one plus the
            // headers after it give the same state.
            log.sync().await.unwrap();
            drop(log);
            std::fs::remove_file(checkpoint::clean_marker(&path)).ok();
            let newest = *snapshots(&path).last().unwrap();
            std::fs::write(snapshot_path(&path, newest), b"garbage").unwrap();
            let log = PartitionLog::open(path.clone(), config.clone())
                .await
                .unwrap();
            assert_eq!(*log.producers(), state);
            assert!(
                !snapshots(&path).contains(&newest),
                "corrupt snapshot deleted"
            );
            drop(log);
            // Truncation (recovery cuts the log below the last batches): state past the cut is
            // gone, as are snapshots past it.
            let last_seg = *list_segments(&Disk::Real, &path).unwrap().last().unwrap();
            let (log_file, _, _) = segment_paths(&path, last_seg);
            let len = std::fs::metadata(&log_file).unwrap().len();
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&log_file)
                .unwrap();
            f.set_len(len - 5).unwrap(); // tear the last batch
            drop(f);
            std::fs::write(snapshot_path(&path, end + 100), state.to_snapshot()).unwrap();
            let mut log = PartitionLog::open(path.clone(), config.clone())
                .await
                .unwrap();
            assert!(log.log_end_offset() < end);
            let entry = log.producers().get(42).unwrap();
            assert_eq!(entry.last_offset(), log.log_end_offset() - 1);
            assert_eq!(entry.last_seq(), 32);
            assert!(snapshots(&path).iter().all(|&o| o <= log.log_end_offset()));
            // The torn batch can be sent again and is appended (not a duplicate).
            let (b, h, _) = &appended[11];
            let info = log.append(b, h, 0).unwrap();
            assert!(!info.duplicate);
            // Retention takes snapshots below the new log start with their segments.
            log.config.retention_bytes = 1;
            log.apply_retention(crate::log::now_ms()).unwrap();
            let start = log.log_start_offset();
            assert!(start > 0);
            assert!(snapshots(&path).iter().all(|&o| o >= start));
            // Expiry by the last batch's timestamp (1,000 + records - 1 ms).
            log.config.producer_id_expiration_ms = 10;
            assert_eq!(log.remove_expired_producers(1_011), 0);
            assert_eq!(log.remove_expired_producers(1_012), 1);
            assert!(log.producers().is_empty());
        });
    }
}
