//! Opening a log: listing and recovering segments (recovery point, clean-shutdown marker,
//! CRC walk, truncation at the first bad byte), the durable log start, leader epochs and
//! producer state rebuilt from snapshots.

use std::path::{Path, PathBuf};

use super::retention::remove_segment_files;
use super::{corrupt, remove_file_if_exists, PartitionLog, RecoveryReport};
use crate::config::LogConfig;
use crate::fsyncs::{self, SyncReason};
use crate::log::batch::{self, BATCH_HEADER_BYTES, PEEK_TS_BYTES};
use crate::log::checkpoint::{self, Checkpoint, CheckpointFile, CleanMarker};
use crate::log::dir::{self, TopicId};
use crate::log::leader_epoch::LeaderEpochCache;
use crate::log::producer_state::ProducerStateManager;
use crate::log::segment::{Segment, Walker};
use crate::log::{parse_stem, snapshot_path, LogError};
use crate::storage::{DirEntry, Disk, Env};

/// What `open_for_topic` read of a partition directory before opening it.
#[derive(Clone, Copy)]
struct Found {
    dir_exists: bool,
    /// `partition.metadata`'s topic id, if the file exists.
    topic_id: Option<TopicId>,
}

impl PartitionLog {
    /// Opens or creates the partition directory and recovers it.
    ///
    /// - After a clean close (`.clean_shutdown` matching the directory, see `checkpoint`):
    ///   indexes are trusted; the log end and the active segment's timestamps come from the
    ///   marker, so no `.log` or index file is opened; the marker stays. A marker that does
    ///   not match (or is empty: an older version's, or its content lost with a power loss)
    ///   is removed and the log recovered as below.
    /// - Otherwise: segments before the recovery point's segment are trusted (sanity-checked);
    ///   that segment and every later one are fully re-validated (lengths, CRC-32C, counts,
    ///   increasing offsets) and their indexes rebuilt. At the first bad byte the `.log` is
    ///   truncated and every later segment deleted: nothing past the last valid batch is ever
    ///   served. Recovered data is then fdatasynced and the recovery point moved to the end.
    pub async fn open(dir: PathBuf, config: LogConfig) -> Result<PartitionLog, LogError> {
        Self::open_inner(Env::real(), dir, config, None, None).await
    }

    /// `open` on the given disk and clock (the simulation; production uses `open`).
    pub async fn open_in(
        env: Env,
        dir: PathBuf,
        config: LogConfig,
    ) -> Result<PartitionLog, LogError> {
        Self::open_inner(env, dir, config, None, None).await
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
        let mut found = Found {
            dir_exists: env.disk.exists(&dir),
            topic_id: None,
        };
        if found.dir_exists {
            found.topic_id = dir::read_topic_id(&env.disk, &dir)?;
            if let Some(old) = found.topic_id.filter(|&old| old != topic_id) {
                tracing::warn!(
                    dir = %dir.display(),
                    old_topic_id = %dir::encode_topic_id(&old),
                    topic_id = %dir::encode_topic_id(&topic_id),
                    "partition directory belongs to an earlier topic of the same name; deleting it"
                );
                dir::delete_partition_dir_on(&env.disk, &dir).await?;
                found = Found {
                    dir_exists: false,
                    topic_id: None,
                };
            }
        }
        Self::open_inner(env, dir, config, Some(topic_id), Some(found)).await
    }

    /// `found`: what the caller already read of the directory (a restart opens thousands of
    /// partitions, so each file is looked at once).
    async fn open_inner(
        env: Env,
        dir: PathBuf,
        config: LogConfig,
        topic_id: Option<TopicId>,
        found: Option<Found>,
    ) -> Result<PartitionLog, LogError> {
        let disk = env.disk.clone();
        let created = !found.map_or_else(|| disk.exists(&dir), |f| f.dir_exists);
        if created {
            disk.create_dir_all(&dir)
                .map_err(|e| LogError::io("create dir", &dir, e))?;
            // A new partition: its directory entry must be durable before any acked data.
            if let Some(parent) = dir.parent() {
                fsyncs::attribute(SyncReason::PartitionCreate, 1);
                disk.sync_dir(parent)
                    .await
                    .map_err(|e| LogError::io("sync dir", parent, e))?;
            }
        }
        if let Some(id) = topic_id {
            let on_disk = match found {
                Some(f) => f.topic_id,
                None => dir::read_topic_id(&disk, &dir)?,
            };
            if on_disk.is_none() {
                dir::write_topic_id(&disk, &dir, &id).await?;
            }
        }
        // One listing serves the common open; a directory holding files a crash left gets
        // the passes below, which list it again as they change it.
        let entries = disk
            .read_dir(&dir)
            .map_err(|e| LogError::io("read dir", &dir, e))?;
        let (compacted, pending_truncation, mut bases) =
            if entries.iter().any(|e| left_by_a_crash(&e.name)) {
                // Finishes or discards a compaction swap a crash interrupted; true if ever
                // compacted.
                let compacted = crate::log::cleaner::recover_dir(&disk, &dir).await?;
                // Finishes the file-level part of a committed truncation a crash interrupted.
                let pending = super::truncate::recover_truncation(&disk, &dir)?;
                (compacted, pending, list_segments(&disk, &dir)?)
            } else {
                let compacted = entries
                    .iter()
                    .any(|e| e.name == crate::log::cleaner::CHECKPOINT_FILE);
                (compacted, None, segments_in(&disk, &dir, &entries)?)
            };
        let capacity = config.segment_index_bytes as u64;
        let interval = config.index_interval_bytes;
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
        let found = checkpoint::read_clean_marker(&disk, &dir)
            .map_err(|e| LogError::io("read", &marker, e))?;
        // The state the marker vouches for, if the directory still matches it.
        let clean_state = match found {
            Some(CleanMarker::State(state)) => {
                let last = *bases.last().expect("at least one base");
                let (log_path, _, _) = crate::log::segment_paths(&dir, last);
                let size = disk.file_len(&log_path).ok();
                size.is_some_and(|size| state.matches(&bases, size))
                    .then_some(state)
            }
            _ => None,
        };
        let clean = clean_state.is_some();
        if found.is_some() && !clean {
            // Stale (the log changed after the close) or unreadable: recovery below runs
            // and syncs the directory before anything is appended, removal included.
            tracing::info!(dir = %dir.display(), "clean shutdown marker does not match the log; recovering");
            remove_file_if_exists(&disk, &marker)?;
        }
        let (cp_file, cp) = if clean_state.is_some() {
            (CheckpointFile::unread(&disk, &dir), None)
        } else {
            CheckpointFile::open(&disk, &dir)
                .map_err(|e| LogError::io("read", &dir.join(checkpoint::RECOVERY_POINT_FILE), e))?
        };
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
            if let Some(state) = clean_state.filter(|_| last) {
                // Nothing to read: the close wrote down what the `.log` and indexes say.
                seg.next_offset = state.next_offset;
                seg.max_timestamp = state.max_timestamp;
                seg.offset_of_max_timestamp = state.offset_of_max_timestamp;
            } else if trusted {
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
            // After a clean close: the point the close wrote (a truncation below it must
            // move it back, see `truncate`).
            last_checkpoint: clean_state.map(|s| Checkpoint {
                next_offset: s.next_offset,
                segment_base: s.active_base,
                position: s.active_size,
            }),
            failed: None,
            syncs_completed: 0,
            recovery: report,
            producers: ProducerStateManager::new(),
            epochs: LeaderEpochCache::load(&disk, &dir),
            active_first_timestamp: clean_state.and_then(|s| s.first_timestamp),
            watch: None,
            truncations: 0,
            clean_on_disk: clean_state,
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
            let path = log.dir.join(crate::log::leader_epoch::LEADER_EPOCH_FILE);
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
        // The segments recovery re-scanned get their transaction index rebuilt by the replay.
        let rescanned = recover_from.map(|r| r.min(log.segments.len() - 1));
        log.load_producer_state(now, rescanned).await?;
        log.load_leader_epochs()?;
        if clean_state.is_none() {
            log.load_active_first_timestamp().await?;
        }
        log.sync_for(SyncReason::OpenClose).await?;
        if clean_state.is_none() {
            // After a clean close the file already holds this point (or an older one, if a
            // power loss took the close's unsynced write: recovery would only scan more).
            log.write_checkpoint(Checkpoint {
                next_offset: log_end,
                segment_base: log.active().base_offset,
                position: log.active().size,
            })?;
        }
        if let Some(t) = pending_truncation {
            log.finish_truncation(t)?;
        }
        Ok(log)
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

    /// At open: entries past the log end go (recovery may have cut the log), then those
    /// below the start. An entry starting exactly at the log end stays (an epoch that began
    /// with no records yet, e.g. every empty partition): dropping and re-adding it would cost
    /// two file writes per partition at every start.
    fn load_leader_epochs(&mut self) -> Result<(), LogError> {
        let path = self.dir.join(crate::log::leader_epoch::LEADER_EPOCH_FILE);
        let end = self.log_end_offset();
        self.epochs
            .truncate_from_end(end + 1)
            .map_err(|e| LogError::io("write", &path, e))?;
        self.trim_leader_epochs()
    }

    /// Rebuilds the producer state at open: the newest readable snapshot at or below the log
    /// end, then the headers of the batches after it (only headers: producer id, epoch,
    /// sequence, last offset delta, max timestamp; a control batch is read whole, for its
    /// marker). Snapshots past the log end (recovery cut the log below them) and unreadable
    /// ones are deleted, so state past a truncation point never comes back.
    ///
    /// `rescanned`: the first segment recovery re-validated. Those segments' transaction
    /// indexes may lack entries (or hold ones past a cut), so they are emptied and rebuilt
    /// from the markers in them, which needs the open transactions as of the first one's
    /// base: the replay then starts at a snapshot at or below that base (Kafka's
    /// `LogLoader.recoverSegment` rebuilds the producer state to the segment's base first).
    async fn load_producer_state(
        &mut self,
        now: i64,
        rescanned: Option<usize>,
    ) -> Result<(), LogError> {
        let log_end = self.log_end_offset();
        let at_most = rescanned.map_or(log_end, |r| self.segments[r].base_offset);
        let from = self.load_producer_snapshot(log_end, at_most)?;
        if let Some(r) = rescanned {
            let disk = self.env.disk.clone();
            for seg in &mut self.segments[r..] {
                let path = crate::log::txn_index::txn_index_path(&self.dir, seg.base_offset);
                seg.txn_index
                    .clear(&disk)
                    .map_err(|e| LogError::io("truncate", &path, e))?;
            }
        }
        let mut batches = 0u64;
        let first = self
            .segments
            .partition_point(|s| s.base_offset <= from)
            .saturating_sub(1);
        for i in first..self.segments.len() {
            let seg = &self.segments[i];
            let (size, path) = (seg.size, seg.log_path.clone());
            if seg.next_offset <= from || size == 0 {
                continue;
            }
            let mut pos = if seg.base_offset < from {
                seg.index.lookup(from) as u64
            } else {
                0
            };
            let record_into = rescanned.is_some_and(|r| i >= r).then_some(i);
            let mut walker = Walker::new(seg.file()?, size, 64 << 10);
            while pos < size {
                let b = walker
                    .bytes(pos, BATCH_HEADER_BYTES)
                    .await
                    .map_err(|e| LogError::io("read", &path, e))?
                    .ok_or_else(|| corrupt(&path, pos, "partial batch header"))?;
                let header = batch::header(b);
                let total = batch::peek(b).map_err(|r| corrupt(&path, pos, r))?.total;
                if header.last_offset() >= from {
                    if header.is_control() {
                        let whole = walker
                            .bytes(pos, total)
                            .await
                            .map_err(|e| LogError::io("read", &path, e))?
                            .ok_or_else(|| corrupt(&path, pos, "partial control batch"))?;
                        self.apply_control_batch(&header, whole, record_into)?;
                    } else {
                        self.producers.update(&header, header.base_offset);
                    }
                    batches += 1;
                }
                pos += total as u64;
            }
        }
        if let Some(r) = rescanned {
            // Rebuilt indexes of inactive segments are synced with the recovered data (the
            // active segment's goes with its roll or close).
            let last = self.segments.len() - 1;
            let disk = self.env.disk.clone();
            for seg in &mut self.segments[r..last] {
                let file = seg
                    .txn_index
                    .take_unsynced(&disk)
                    .map_err(|e| LogError::io("open", seg.txn_index.path(), e))?;
                self.unsynced.extend(file);
            }
        }
        let expired = self.remove_expired_producers(now);
        if batches > 0 || !self.producers.is_empty() {
            tracing::debug!(dir = %self.dir.display(), from, batches, producers = self.producers.len(), expired, "producer state loaded");
        }
        Ok(())
    }
}

impl PartitionLog {
    /// The first half of rebuilding the producer state (at open, and after a truncation):
    /// replaces it with the newest readable snapshot at or below `at_most` (<= `log_end`;
    /// empty when there is none) and returns the offset the batch headers must be replayed
    /// from. Snapshots past `log_end` and unreadable ones are deleted, so state past a
    /// truncation point never comes back.
    pub(super) fn load_producer_snapshot(
        &mut self,
        log_end: i64,
        at_most: i64,
    ) -> Result<i64, LogError> {
        let disk = self.env.disk.clone();
        let mut snapshots = list_snapshots(&disk, &self.dir)?;
        snapshots.sort_unstable_by(|a, b| b.cmp(a));
        self.producers = ProducerStateManager::new();
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
                // Readable but newer than wanted: kept for later, not used now.
                Ok(_) if offset > at_most => {}
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
        Ok(from)
    }
}

/// Base offsets of the `.log` files in `dir`, sorted. Index files whose `.log` is missing are
/// removed (left behind by a crash during a roll or a deletion).
pub(super) fn list_segments(disk: &Disk, dir: &Path) -> Result<Vec<i64>, LogError> {
    let entries = disk
        .read_dir(dir)
        .map_err(|e| LogError::io("read dir", dir, e))?;
    segments_in(disk, dir, &entries)
}

/// Whether a directory entry is one that a crash can leave for `cleaner::recover_dir` or
/// `truncate::recover_truncation` to finish (a compaction's swap, cleaned or tmp files, a
/// truncation's commit or swap file).
fn left_by_a_crash(name: &str) -> bool {
    name.ends_with(".swap")
        || name.ends_with(".cleaned")
        || name.ends_with(".tmp")
        || name == super::truncate::TRUNCATION_FILE
}

/// `list_segments` on a listing already read.
fn segments_in(disk: &Disk, dir: &Path, entries: &[DirEntry]) -> Result<Vec<i64>, LogError> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for entry in entries {
        let Some((stem, ext)) = entry.name.split_once('.') else {
            continue;
        };
        let Some(base) = parse_stem(stem) else {
            continue;
        };
        match ext {
            "log" => logs.push(base),
            "index" | "timeindex" | "txnindex" => indexes.push((base, dir.join(&entry.name))),
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
pub(super) fn list_snapshots(disk: &Disk, dir: &Path) -> Result<Vec<i64>, LogError> {
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
