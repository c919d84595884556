//! Log compaction (`cleanup.policy=compact`), as Kafka's `LogCleaner` does it.
//!
//! Regions: the inactive segments before the first dirty offset are clean (each key at most
//! once); from the first dirty offset to the first uncleanable offset they are dirty; the
//! active segment (and anything not yet durable, or younger than `min.compaction.lag.ms`) is
//! never cleaned. The first dirty offset is this partition's cleaner checkpoint,
//! `cleaner-offset-checkpoint` in its directory (written tmp, fdatasync, rename, dir sync).
//!
//! A pass (`Cleaner::clean`), chosen when dirty / (clean + dirty) bytes reaches
//! `min.cleanable.dirty.ratio` or a dirty record is older than `max.compaction.lag.ms`:
//! 1. reads the dirty region into the key map (`offset_map`: key hash -> latest offset); a
//!    full map covers only a prefix, and the pass ends where the map ends;
//! 2. rewrites every inactive segment below that end, in groups whose merged size fits one
//!    segment (`segment.bytes`), keeping a record only if it is its key's latest (records
//!    past the map's coverage are kept), into `<base>.log.cleaned` (+ indexes). A batch
//!    that loses records keeps its base offset and last offset delta and each record its
//!    offset delta, so offsets are never reused; it keeps its codec (recompressed);
//! 3. swaps each group in: cleaned files fdatasynced, then `<base>.swap` (holding the
//!    replaced range; tmp + fdatasync + rename + dir sync) commits the swap; the old
//!    segments are unlinked and the cleaned files renamed into place; `recover_dir`, run
//!    when the log opens, finishes a committed swap or discards an uncommitted one;
//! 4. moves the checkpoint to the pass's end.
//!
//! Tombstones (null value, KIP-534): the first pass that keeps one records a delete horizon
//! (now + `delete.retention.ms`) in its batch (attribute bit 6, the horizon in the base
//! timestamp); a later pass past the horizon drops it. The checkpoint also holds the earliest
//! horizon of the tombstones kept, so that pass runs even if nothing new is written.
//! Producer state: a batch emptied by the pass is kept as a header-only batch when it is its
//! producer's last (Kafka's `RETAIN_EMPTY`), so sequence checks survive a restart.
//! Transactional data and control batches are kept whole: this broker serves no
//! transactions, and dropping markers needs the transaction index Kafka keeps.
//!
//! I/O: every file, directory and clock access goes through the log's `storage::Env` (as
//! `segment` does), so a pass runs on the simulated disk too. The pass holds no borrow of the log across an
//! await; between batches it yields to the shard's other tasks.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use wire::record_batch::{self as rb, BatchHeader, Record};

use super::batch::{self, PEEK_BYTES, PEEK_TS_BYTES};
use super::index::OffsetIndex;
use super::offset_map::OffsetMap;
use super::partition_log::PartitionLog;
use super::segment::{Segment, Walker};
use super::time_index::TimeIndex;
use super::txn_index::{self, txn_index_path, AbortedTxn};
use super::{file_stem, parse_stem, segment_paths, LogError};
use crate::flush::LogHandle;
use crate::storage::{Disk, File};

/// The partition's first dirty offset (Kafka keeps one such file per log directory).
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Kafka's `log.cleaner.dedupe.buffer.size` default (split across the shards by the broker).
pub const DEFAULT_DEDUPE_BUFFER_BYTES: usize = 128 << 20;
/// Read window of the cleaner's sequential segment reads.
const READ_CHUNK: usize = 1 << 20;

thread_local! {
    /// Directories of the logs a pass is running on, on this shard's thread.
    static CLEANING: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a cleaner pass on this thread is rewriting the log in `dir` (retention then waits
/// for the next check, as Kafka's retention skips logs the cleaner holds).
pub fn is_cleaning(dir: &Path) -> bool {
    CLEANING.with(|c| c.borrow().iter().any(|d| d == dir))
}

/// Marks a log as being cleaned until dropped.
struct CleaningGuard(PathBuf);

impl CleaningGuard {
    fn new(dir: &Path) -> CleaningGuard {
        CLEANING.with(|c| c.borrow_mut().push(dir.to_path_buf()));
        CleaningGuard(dir.to_path_buf())
    }
}

impl Drop for CleaningGuard {
    fn drop(&mut self) {
        CLEANING.with(|c| c.borrow_mut().retain(|d| *d != self.0));
    }
}

/// Where a log stands, and whether a pass is due.
#[derive(Clone, Debug)]
pub struct Cleanability {
    pub first_dirty: i64,
    /// Cleaning stops before this offset (a segment base).
    pub first_uncleanable: i64,
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// `max.compaction.lag.ms` has passed for a dirty record.
    pub overdue: bool,
    /// A tombstone the last pass kept has reached its delete horizon: a pass would drop it,
    /// even with nothing dirty.
    pub horizon_passed: bool,
    min_ratio: f64,
}

impl Cleanability {
    /// dirty / (clean + dirty), the active segment left out.
    pub fn ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// Kafka's rule: something dirty, and the ratio reached or the max lag passed; or a kept
    /// tombstone's delete horizon passed.
    pub fn due(&self) -> bool {
        (self.dirty_bytes > 0 && (self.overdue || self.ratio() >= self.min_ratio))
            || self.horizon_passed
    }
}

/// What one pass did (Kafka's cleaner log line).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CleanStats {
    pub first_dirty: i64,
    /// The next pass starts here (the new checkpoint).
    pub end_offset: i64,
    /// The key map filled before the dirty region's end.
    pub map_full: bool,
    pub keys: usize,
    /// Bytes of dirty segments read into the key map.
    pub map_bytes_read: u64,
    /// Bytes of segments rewritten.
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_kept: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    /// Groups whose swap was skipped because the log changed meanwhile.
    pub groups_skipped: usize,
    /// The earliest delete horizon of the tombstones kept (the next pass is due then).
    pub earliest_horizon: Option<i64>,
    pub elapsed_ms: u64,
}

/// One shard's cleaner: the key map, allocated on the first pass and reused.
pub struct Cleaner {
    map_bytes: usize,
    map: Option<OffsetMap>,
    /// Tests: stop the pass (as a crash would) before / after the first swap's commit.
    #[cfg(test)]
    crash: Option<CrashPoint>,
}

#[cfg(test)]
#[derive(Clone, Copy, PartialEq, Eq)]
enum CrashPoint {
    BeforeCommit,
    AfterCommit,
}

/// What the pass needs of one inactive segment, cloned out of the log.
#[derive(Clone, Debug)]
struct SegInfo {
    base: i64,
    next_offset: i64,
    size: u64,
    created_ms: i64,
    path: Rc<Path>,
    /// The segment's aborted transactions (its `.txnindex`): a cleaned group keeps them all,
    /// since control and transactional batches are kept whole.
    aborted: Vec<AbortedTxn>,
}

struct Plan {
    disk: Disk,
    dir: PathBuf,
    log_start: i64,
    segs: Vec<SegInfo>,
    /// Producer id -> last offset of its last batch (Kafka keeps that batch).
    producers_last: HashMap<i64, i64>,
    segment_bytes: u64,
    index_bytes: u64,
    index_interval: u32,
    delete_retention_ms: i64,
}

fn ioe<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> LogError + 'a {
    move |e| LogError::io(op, path, e)
}

fn corrupt(path: &Path, position: u64, reason: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: path.to_path_buf(),
        position,
        reason: reason.into(),
    }
}

fn open_read(disk: &Disk, path: &Path) -> Result<Rc<File>, LogError> {
    let (f, _) = disk.open(path, false).map_err(ioe("open", path))?;
    Ok(Rc::new(f))
}

/// fdatasync of one path (through io_uring on the real disk).
async fn sync_path(disk: &Disk, path: &Path) -> Result<(), LogError> {
    let f = open_read(disk, path)?;
    f.fdatasync().await.map_err(ioe("fdatasync", path))
}

fn cleaned_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".cleaned");
    PathBuf::from(s)
}

fn swap_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{}.swap", file_stem(base)))
}

fn remove_if_exists(disk: &Disk, path: &Path) -> Result<bool, LogError> {
    match disk.remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(LogError::io("remove", path, e)),
    }
}

/// Writes `bytes` to `path` crash-safely: tmp file, fdatasync, rename, directory sync.
async fn write_atomically(disk: &Disk, path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    disk.write_file_durable(path, bytes)
        .await
        .map_err(ioe("write durably", path))
}

/// Field `i` of the checkpoint: 0 the first dirty offset, 1 the earliest delete horizon of
/// a tombstone the last pass kept (-1: none).
fn checkpoint_field(disk: &Disk, dir: &Path, i: usize) -> Option<i64> {
    let bytes = disk.read_file(&dir.join(CHECKPOINT_FILE)).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .split_whitespace()
        .nth(i)?
        .parse()
        .ok()
}

/// The first dirty offset recorded for the partition in `dir`, if any.
pub fn read_checkpoint(disk: &Disk, dir: &Path) -> Option<i64> {
    checkpoint_field(disk, dir, 0)
}

async fn write_checkpoint(
    disk: &Disk,
    dir: &Path,
    first_dirty: i64,
    earliest_horizon: Option<i64>,
) -> Result<(), LogError> {
    let path = dir.join(CHECKPOINT_FILE);
    let horizon = earliest_horizon.unwrap_or(-1);
    write_atomically(disk, &path, format!("{first_dirty} {horizon}\n").as_bytes()).await
}

/// Run when a log opens, before its segments are listed: completes a swap whose `.swap`
/// commit file exists (old segments of its range removed, `.cleaned` files renamed into
/// place: every step is idempotent), and removes `.cleaned` files no commit covers and
/// temporary files. Returns whether the log was ever compacted (its batches may then have
/// gaps between them, which recovery must accept).
pub async fn recover_dir(disk: &Disk, dir: &Path) -> Result<bool, LogError> {
    let mut compacted = disk.exists(&dir.join(CHECKPOINT_FILE));
    let mut swaps = Vec::new();
    let mut leftovers = Vec::new();
    for entry in disk.read_dir(dir).map_err(ioe("read dir", dir))? {
        let name = entry.name.as_str();
        if entry.is_dir {
            continue;
        }
        if name.ends_with(".tmp") && (name.contains(".swap") || name.starts_with(CHECKPOINT_FILE)) {
            leftovers.push(dir.join(name));
        } else if let Some(base) = name.strip_suffix(".swap").and_then(parse_stem) {
            swaps.push((base, dir.join(name)));
        } else if name.ends_with(".cleaned") {
            leftovers.push(dir.join(name));
        }
    }
    let changed = !swaps.is_empty() || !leftovers.is_empty();
    for (base, path) in swaps {
        let bytes = disk.read_file(&path).map_err(ioe("read", &path))?;
        let text = String::from_utf8_lossy(&bytes);
        let end = text
            .split_whitespace()
            .nth(1)
            .and_then(|e| e.parse::<i64>().ok());
        let Some(end) = end else {
            // Written through tmp + fdatasync + rename, so never torn; refuse to guess.
            return Err(corrupt(&path, 0, format!("unreadable swap file {text:?}")));
        };
        tracing::info!(dir = %dir.display(), base, end, "completing an interrupted compaction swap");
        for seg_base in log_bases(disk, dir)? {
            if seg_base > base && seg_base < end {
                remove_segment_files(disk, dir, seg_base)?;
            }
        }
        let (log, index, time) = segment_paths(dir, base);
        for p in [txn_index_path(dir, base), index, time, log] {
            let c = cleaned_path(&p);
            if disk.exists(&c) {
                disk.rename(&c, &p).map_err(ioe("rename", &c))?;
            }
        }
        remove_if_exists(disk, &path)?;
        compacted = true;
    }
    for p in leftovers {
        if disk.exists(&p) {
            tracing::info!(path = %p.display(), "removing an unfinished compaction file");
            remove_if_exists(disk, &p)?;
        }
    }
    if changed {
        disk.sync_dir(dir).await.map_err(ioe("sync dir", dir))?;
    }
    Ok(compacted)
}

/// Base offsets of the `.log` files in `dir`.
fn log_bases(disk: &Disk, dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut out = Vec::new();
    for entry in disk.read_dir(dir).map_err(ioe("read dir", dir))? {
        if let Some(base) = entry.name.strip_suffix(".log").and_then(parse_stem) {
            out.push(base);
        }
    }
    Ok(out)
}

fn remove_segment_files(disk: &Disk, dir: &Path, base: i64) -> Result<(), LogError> {
    let (log, index, time) = segment_paths(dir, base);
    for p in [log, index, time] {
        remove_if_exists(disk, &p)?;
    }
    let txn = txn_index_path(dir, base);
    if disk.exists(&txn) {
        remove_if_exists(disk, &txn)?;
    }
    Ok(())
}

impl Cleaner {
    /// A cleaner whose key map may use `dedupe_buffer_bytes` (allocated on first use).
    pub fn new(dedupe_buffer_bytes: usize) -> Cleaner {
        Cleaner {
            map_bytes: dedupe_buffer_bytes,
            map: None,
            #[cfg(test)]
            crash: None,
        }
    }

    /// The log's regions and whether a pass is due (None: not a compacted log).
    pub async fn cleanability(log: &LogHandle, now: i64) -> Result<Option<Cleanability>, LogError> {
        let (c, overdue_candidates, max_lag, disk) = {
            let l = log.borrow();
            let Some(c) = Self::regions(&l, now) else {
                return Ok(None);
            };
            let max_lag = l.config().max_compaction_lag_ms;
            let dirty: Vec<Rc<Path>> = if max_lag < i64::MAX {
                l.segments()
                    .iter()
                    .filter(|s| {
                        s.next_offset > c.first_dirty && s.base_offset < c.first_uncleanable
                    })
                    .map(|s| s.log_path.clone())
                    .collect()
            } else {
                Vec::new()
            };
            (c, dirty, max_lag, l.env().disk.clone())
        };
        let mut c = c;
        // Kafka: the earliest first-batch timestamp of the dirty segments against the lag.
        let until = now.saturating_sub(max_lag.max(0));
        for path in overdue_candidates {
            let file = open_read(&disk, &path)?;
            let mut w = Walker::new(file, u64::MAX, PEEK_TS_BYTES);
            let first = w
                .bytes(0, PEEK_TS_BYTES)
                .await
                .ok()
                .flatten()
                .map(batch::max_timestamp);
            if first.is_some_and(|ts| ts > 0 && ts < until) {
                c.overdue = true;
                break;
            }
        }
        Ok(Some(c))
    }

    /// The clean / dirty / uncleanable split (no I/O).
    fn regions(l: &PartitionLog, now: i64) -> Option<Cleanability> {
        let cfg = l.config();
        if !cfg.cleanup_compact || l.failure().is_some() {
            return None; // a failed log is left alone until it is reopened
        }
        let segs = l.segments();
        let active = segs.len() - 1;
        let log_start = l.log_start_offset();
        let disk = &l.env().disk;
        let first_dirty = read_checkpoint(disk, l.dir())
            .filter(|&o| o >= log_start && o <= l.log_end_offset())
            .unwrap_or(log_start);
        // No durability bound (Kafka's is the high watermark, the log end on one node): the
        // cleaned copy is fdatasynced before it replaces anything, so a pass never makes a
        // record less durable than it was.
        let min_lag = cfg.min_compaction_lag_ms.max(0);
        let mut first_uncleanable = segs[active].base_offset;
        for s in &segs[..active] {
            let too_young = min_lag > 0
                && s.next_offset > first_dirty
                && s.max_timestamp > now.saturating_sub(min_lag);
            if too_young {
                first_uncleanable = s.base_offset;
                break;
            }
        }
        let (mut clean, mut dirty) = (0u64, 0u64);
        for s in &segs[..active] {
            if s.base_offset >= first_uncleanable {
                break;
            }
            if s.next_offset <= first_dirty {
                clean += s.size;
            } else {
                dirty += s.size;
            }
        }
        Some(Cleanability {
            first_dirty,
            first_uncleanable,
            clean_bytes: clean,
            dirty_bytes: dirty,
            overdue: false,
            horizon_passed: checkpoint_field(disk, l.dir(), 1).is_some_and(|h| h >= 0 && now >= h),
            min_ratio: cfg.min_cleanable_dirty_ratio,
        })
    }

    /// Cleans the log if a pass is due (`Cleanability::due`); None if not.
    pub async fn clean_if_due(
        &mut self,
        log: &LogHandle,
        now: i64,
    ) -> Result<Option<CleanStats>, LogError> {
        match Self::cleanability(log, now).await? {
            Some(c) if c.due() => self.clean(log, now, &c).await.map(Some),
            _ => Ok(None),
        }
    }

    /// One pass over `c`'s dirty region (see the module doc), whatever the ratio.
    pub async fn clean(
        &mut self,
        log: &LogHandle,
        now: i64,
        c: &Cleanability,
    ) -> Result<CleanStats, LogError> {
        let (plan, clock) = {
            let l = log.borrow();
            let segs = l.segments();
            let cfg = l.config();
            let plan = Plan {
                disk: l.env().disk.clone(),
                dir: l.dir().to_path_buf(),
                log_start: l.log_start_offset(),
                segs: segs[..segs.len() - 1]
                    .iter()
                    .map(|s| SegInfo {
                        base: s.base_offset,
                        next_offset: s.next_offset,
                        size: s.size,
                        created_ms: s.created_ms,
                        path: s.log_path.clone(),
                        aborted: s.txn_index.entries().to_vec(),
                    })
                    .collect(),
                producers_last: l
                    .producers()
                    .iter()
                    .map(|(pid, e)| (pid, e.last_offset()))
                    .collect(),
                segment_bytes: cfg.effective_segment_bytes(),
                index_bytes: cfg.segment_index_bytes as u64,
                index_interval: cfg.index_interval_bytes,
                delete_retention_ms: cfg.delete_retention_ms,
            };
            (plan, l.env().clock.clone())
        };
        let started = clock.now_ms();
        let _guard = CleaningGuard::new(&plan.dir);
        let map_bytes = self.map_bytes;
        let map = self.map.get_or_insert_with(|| OffsetMap::new(map_bytes));
        map.clear();
        let mut stats = CleanStats {
            first_dirty: c.first_dirty,
            segments_before: plan.segs.len(),
            ..CleanStats::default()
        };

        // 1. The key map over the dirty region.
        let mut full = false;
        for s in plan
            .segs
            .iter()
            .filter(|s| s.next_offset > c.first_dirty && s.base < c.first_uncleanable)
        {
            full = build_map(&plan.disk, map, s, c.first_dirty, &mut stats).await?;
            if full {
                break;
            }
        }
        let end_offset = if full {
            map.latest_offset() + 1
        } else {
            c.first_uncleanable
        };
        stats.map_full = full;
        stats.keys = map.len();
        stats.end_offset = end_offset;

        // 2-3. Rewrite and swap in every group of segments below the end.
        if read_checkpoint(&plan.disk, &plan.dir).is_none() {
            // Before the first swap: from now on recovery must accept gaps.
            write_checkpoint(&plan.disk, &plan.dir, c.first_dirty, None).await?;
        }
        let candidates: Vec<&SegInfo> = plan
            .segs
            .iter()
            .filter(|s| s.base < end_offset && s.next_offset > plan.log_start)
            .collect();
        for group in group_segments(&candidates, plan.segment_bytes) {
            let group_end = plan
                .segs
                .iter()
                .find(|s| s.base > group[group.len() - 1].base)
                .map_or(group[group.len() - 1].next_offset, |s| s.base);
            let cleaned = clean_group(&plan, &group, map, now, end_offset, &mut stats).await?;
            let base = group[0].base;
            #[cfg(test)]
            if self.crash == Some(CrashPoint::BeforeCommit) {
                return Err(LogError::InvalidBatch("test crash before commit".into()));
            }
            write_atomically(
                &plan.disk,
                &swap_path(&plan.dir, base),
                format!("{base} {group_end}\n").as_bytes(),
            )
            .await?;
            #[cfg(test)]
            if self.crash == Some(CrashPoint::AfterCommit) {
                return Err(LogError::InvalidBatch("test crash after commit".into()));
            }
            let bases: Vec<i64> = group.iter().map(|s| s.base).collect();
            let created = group.iter().map(|s| s.created_ms).min().unwrap_or(now);
            let installed = install(&mut log.borrow_mut(), &bases, group_end, created, now)?;
            if !installed {
                // The log changed under the pass (retention, deletion): drop this group.
                stats.groups_skipped += 1;
                for p in [&cleaned.0, &cleaned.1, &cleaned.2] {
                    remove_if_exists(&plan.disk, p)?;
                }
                let txn = cleaned_path(&txn_index_path(&plan.dir, base));
                if plan.disk.exists(&txn) {
                    remove_if_exists(&plan.disk, &txn)?;
                }
            }
            remove_if_exists(&plan.disk, &swap_path(&plan.dir, base))?;
            plan.disk
                .sync_dir(&plan.dir)
                .await
                .map_err(ioe("sync dir", &plan.dir))?;
        }

        // 4. The next pass starts where this one's map ended.
        write_checkpoint(&plan.disk, &plan.dir, end_offset, stats.earliest_horizon).await?;
        stats.segments_after = log.borrow().segment_count() - 1;
        stats.elapsed_ms = clock.now_ms().saturating_sub(started).max(0) as u64;
        tracing::info!(
            dir = %plan.dir.display(),
            first_dirty = stats.first_dirty,
            end_offset,
            map_full = full,
            keys = stats.keys,
            bytes_read = stats.bytes_read,
            bytes_written = stats.bytes_written,
            records_read = stats.records_read,
            records_kept = stats.records_kept,
            segments_before = stats.segments_before,
            segments_after = stats.segments_after,
            elapsed_ms = stats.elapsed_ms,
            "log cleaner pass done"
        );
        Ok(stats)
    }
}

/// Walks the batches of one segment, calling `f(position, batch bytes)`; yields to the
/// shard's other tasks between batches.
async fn for_each_batch<F>(disk: &Disk, s: &SegInfo, mut f: F) -> Result<(), LogError>
where
    F: FnMut(u64, &[u8]) -> Result<bool, LogError>,
{
    let file = open_read(disk, &s.path)?;
    let mut walker = Walker::new(file, s.size, READ_CHUNK);
    let mut pos = 0u64;
    while pos < s.size {
        let head = walker
            .bytes(pos, PEEK_BYTES)
            .await
            .map_err(ioe("read", &s.path))?
            .ok_or_else(|| corrupt(&s.path, pos, "partial batch header"))?;
        let p = batch::peek(head).map_err(|r| corrupt(&s.path, pos, r))?;
        let b = walker
            .bytes(pos, p.total)
            .await
            .map_err(ioe("read", &s.path))?
            .ok_or_else(|| corrupt(&s.path, pos, "batch runs past the segment"))?;
        if !f(pos, b)? {
            break;
        }
        pos += p.total as u64;
        glommio::yield_if_needed().await;
    }
    Ok(())
}

/// Puts the keys of `s` at or past `first_dirty` into the map. True when the map filled.
async fn build_map(
    disk: &Disk,
    map: &mut OffsetMap,
    s: &SegInfo,
    first_dirty: i64,
    stats: &mut CleanStats,
) -> Result<bool, LogError> {
    let mut full = false;
    let path = s.path.clone();
    stats.map_bytes_read += s.size;
    for_each_batch(disk, s, |pos, b| {
        let h = batch::header(b);
        if h.last_offset() < first_dirty || h.is_control() {
            return Ok(true);
        }
        let records = rb::records(b).map_err(|e| corrupt(&path, pos, e.to_string()))?;
        for r in records.iter() {
            let r = r.map_err(|e| corrupt(&path, pos, e.to_string()))?;
            if r.offset < first_dirty {
                continue;
            }
            if let Some(key) = r.key {
                if !map.put(key, r.offset) {
                    full = true;
                    return Ok(false);
                }
            }
        }
        Ok(true)
    })
    .await?;
    Ok(full)
}

/// Consecutive segments merged while their sizes fit one segment and their offsets fit the
/// index's relative offsets (Kafka's `groupSegmentsBySize`).
fn group_segments<'a>(segs: &[&'a SegInfo], max_bytes: u64) -> Vec<Vec<&'a SegInfo>> {
    let mut groups: Vec<Vec<&SegInfo>> = Vec::new();
    for &s in segs {
        if let Some(g) = groups.last_mut() {
            let size: u64 = g.iter().map(|x| x.size).sum();
            if size + s.size <= max_bytes && s.next_offset - g[0].base <= i32::MAX as i64 {
                g.push(s);
                continue;
            }
        }
        groups.push(vec![s]);
    }
    groups
}

/// What the pass does with one batch.
enum Verdict {
    Drop,
    Keep,
    Rewrite(Vec<u8>),
}

/// Kafka's `shouldRetainRecord` over one batch, and its batch-level retention.
fn filter_batch(
    b: &[u8],
    h: &BatchHeader,
    map: &OffsetMap,
    now: i64,
    end_offset: i64,
    plan: &Plan,
    stats: &mut CleanStats,
) -> Result<Verdict, rb::BatchError> {
    if h.is_control() || h.is_transactional() {
        return Ok(Verdict::Keep);
    }
    let records = rb::records(b)?;
    let horizon = h.delete_horizon_ms();
    let mut kept: Vec<Record<'_>> = Vec::new();
    let mut removed = false;
    let mut tombstone = false;
    for r in records.iter() {
        let r = r?;
        stats.records_read += 1;
        let retain = if r.offset >= end_offset {
            true // past what the map covers (Kafka's `pastLatestOffset`): not this pass
        } else {
            match r.key {
                None => false, // Kafka drops keyless records from compacted logs
                Some(key) => {
                    let latest = map.get(key).is_none_or(|o| r.offset >= o);
                    let live = r.value.is_some() || horizon.is_none_or(|h| now < h);
                    latest && live
                }
            }
        };
        if retain {
            tombstone |= r.value.is_none();
            kept.push(r);
        } else {
            removed = true;
        }
    }
    stats.records_kept += kept.len() as u64;
    let new_horizon = match horizon {
        None if tombstone => Some(now.saturating_add(plan.delete_retention_ms.max(0))),
        h => h,
    };
    if let Some(h) = new_horizon.filter(|&h| tombstone && h > now) {
        stats.earliest_horizon = Some(stats.earliest_horizon.map_or(h, |e| e.min(h)));
    }
    if kept.is_empty() {
        let last_of_producer = h.has_producer_id()
            && plan.producers_last.get(&h.producer_id) == Some(&h.last_offset());
        return Ok(if last_of_producer {
            Verdict::Rewrite(rb::encode_retained(h, &[], horizon)?)
        } else {
            Verdict::Drop
        });
    }
    if !removed && new_horizon == horizon {
        return Ok(Verdict::Keep);
    }
    Ok(Verdict::Rewrite(rb::encode_retained(
        h,
        &kept,
        new_horizon,
    )?))
}

/// Writes the cleaned copy of `group` to `<base>.{log,index,timeindex}.cleaned`, fdatasynced.
async fn clean_group(
    plan: &Plan,
    group: &[&SegInfo],
    map: &OffsetMap,
    now: i64,
    end_offset: i64,
    stats: &mut CleanStats,
) -> Result<(PathBuf, PathBuf, PathBuf), LogError> {
    let base = group[0].base;
    let (log, index, time) = segment_paths(&plan.dir, base);
    let (log_c, index_c, time_c) = (
        cleaned_path(&log),
        cleaned_path(&index),
        cleaned_path(&time),
    );
    let disk = &plan.disk;
    let txn_c = cleaned_path(&txn_index_path(&plan.dir, base));
    for p in [&log_c, &index_c, &time_c] {
        remove_if_exists(disk, p)?;
    }
    if disk.exists(&txn_c) {
        remove_if_exists(disk, &txn_c)?;
    }
    let (out, _) = disk.open(&log_c, true).map_err(ioe("create", &log_c))?;
    let mut oi = OffsetIndex::open(disk, &index_c, base, Some(plan.index_bytes))
        .map_err(ioe("create", &index_c))?;
    let mut ti = TimeIndex::open(disk, &time_c, base, Some(plan.index_bytes))
        .map_err(ioe("create", &time_c))?;
    let mut position = 0u64;
    let mut since_index = 0u64;
    let (mut max_ts, mut offset_of_max) = (-1i64, -1i64);
    for s in group {
        stats.bytes_read += s.size;
        let path = s.path.clone();
        let mut failed: Option<LogError> = None;
        for_each_batch(disk, s, |pos, b| {
            let h = batch::header(b);
            let verdict = filter_batch(b, &h, map, now, end_offset, plan, stats)
                .map_err(|e| corrupt(&path, pos, e.to_string()))?;
            let bytes: &[u8] = match &verdict {
                Verdict::Drop => return Ok(true),
                Verdict::Keep => b,
                Verdict::Rewrite(v) => v,
            };
            if let Err(e) = out.write_at(bytes, position) {
                failed = Some(LogError::io("write", &log_c, e));
                return Ok(false);
            }
            // Kafka's `LogSegment.append` index maintenance (as `Segment::index_batch`).
            let last = h.last_offset();
            if h.max_timestamp > max_ts {
                max_ts = h.max_timestamp;
                offset_of_max = last;
            }
            if since_index > plan.index_interval as u64 {
                let _ = oi.append(last, position as u32);
                let _ = ti.maybe_append(max_ts, offset_of_max);
                since_index = 0;
            }
            since_index += bytes.len() as u64;
            position += bytes.len() as u64;
            Ok(true)
        })
        .await?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    stats.bytes_written += position;
    let _ = ti.maybe_append(max_ts, offset_of_max);
    oi.inner.trim(disk).map_err(ioe("trim index", &index_c))?;
    ti.inner
        .trim(disk)
        .map_err(ioe("trim time index", &time_c))?;
    let index_files = [oi.inner.take_saved(), ti.inner.take_saved()];
    out.fdatasync().await.map_err(ioe("fdatasync", &log_c))?;
    for (f, p) in index_files.iter().zip([&index_c, &time_c]) {
        match f {
            Some(f) => f.fdatasync().await.map_err(ioe("fdatasync", p))?,
            None => sync_path(disk, p).await?,
        }
    }
    // The group's aborted transactions, merged (written only when there are any).
    let aborted: Vec<AbortedTxn> = group.iter().flat_map(|s| s.aborted.clone()).collect();
    if !aborted.is_empty() {
        disk.write_file(&txn_c, &txn_index::encode_entries(&aborted))
            .map_err(ioe("write", &txn_c))?;
        sync_path(disk, &txn_c).await?;
    }
    Ok((log_c, index_c, time_c))
}

/// Swaps the cleaned files of the group `bases` in on disk and in the log (synchronous: no
/// other task sees a half-swapped log). False, with nothing touched, if the group is no
/// longer what the pass read (the caller then discards the cleaned files).
fn install(
    l: &mut PartitionLog,
    bases: &[i64],
    group_end: i64,
    created_ms: i64,
    now: i64,
) -> Result<bool, LogError> {
    let segs = l.segments();
    let Some(first) = segs.iter().position(|s| s.base_offset == bases[0]) else {
        return Ok(false);
    };
    let n = bases.len();
    let same = first + n < segs.len()
        && segs[first..first + n]
            .iter()
            .zip(bases)
            .all(|(s, &b)| s.base_offset == b);
    if !same {
        return Ok(false);
    }
    let dir = l.dir().to_path_buf();
    let disk = l.env().disk.clone();
    for &b in &bases[1..] {
        remove_segment_files(&disk, &dir, b)?;
    }
    let (log, index, time) = segment_paths(&dir, bases[0]);
    let txn = txn_index_path(&dir, bases[0]);
    let txn_c = cleaned_path(&txn);
    if disk.exists(&txn_c) {
        disk.rename(&txn_c, &txn).map_err(ioe("rename", &txn_c))?;
    } else if disk.exists(&txn) {
        // No aborted transaction in the group: no index (an old empty one goes).
        remove_if_exists(&disk, &txn)?;
    }
    for p in [index, time, log] {
        let c = cleaned_path(&p);
        disk.rename(&c, &p).map_err(ioe("rename", &c))?;
    }
    let mut seg = Segment::open(&disk, &dir, bases[0], None, now)?;
    seg.load_trusted(group_end);
    seg.created_ms = created_ms;
    l.replace_segments(first, n, seg);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::log::offset_map::SLOT_BYTES;
    use crate::log::test_util::{run, tmp};
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use wire::record_batch::{validate_batch, BatchBuilder, Compression};

    /// One wall-clock instant for the whole test (producer expiry compares with the clock).
    fn now() -> i64 {
        static T: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
        *T.get_or_init(crate::log::now_ms)
    }

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 700,
            segment_index_bytes: 4096,
            index_interval_bytes: 128,
            cleanup_compact: true,
            cleanup_delete: false,
            min_cleanable_dirty_ratio: 0.01,
            ..LogConfig::default()
        }
    }

    /// Appends one batch of (key, value) records.
    fn append(log: &LogHandle, codec: Compression, recs: &[(&str, Option<&str>)]) -> i64 {
        let mut b = BatchBuilder::new(codec);
        for (k, v) in recs {
            b = b.push(Some(k.as_bytes()), v.map(str::as_bytes), &[], now());
        }
        let bytes = b.build();
        let h = validate_batch(&bytes).unwrap();
        log.borrow_mut().append(&bytes, &h, 0).unwrap().base_offset
    }

    type Seen = Vec<(i64, String, Option<String>)>;

    /// Every record from the log start, with its batch's codec and horizon.
    async fn read_all(log: &LogHandle) -> (Seen, Vec<(Compression, Option<i64>)>) {
        let start = log.borrow().log_start_offset();
        let f = log.borrow().read(start, 1 << 24, i64::MAX);
        let bytes = f.await.unwrap();
        let (mut out, mut batches) = (Vec::new(), Vec::new());
        let mut pos = 0;
        while pos < bytes.len() {
            let h = rb::validate_stored_batch(&bytes[pos..]).unwrap();
            batches.push((h.compression(), h.delete_horizon_ms()));
            let recs = rb::records(&bytes[pos..pos + h.total_bytes()]).unwrap();
            for r in recs.iter() {
                let r = r.unwrap();
                let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                out.push((r.offset, s(r.key.unwrap()), r.value.map(s)));
            }
            pos += h.total_bytes();
        }
        (out, batches)
    }

    /// The latest (offset, value) per key among `seen` records below `end`.
    fn latest(seen: &Seen, end: i64) -> BTreeMap<String, (i64, Option<String>)> {
        let mut m = BTreeMap::new();
        for (o, k, v) in seen.iter().filter(|r| r.0 < end) {
            m.insert(k.clone(), (*o, v.clone()));
        }
        m
    }

    /// Everything written so far made durable (so the cleaner may work on it).
    async fn sync(log: &LogHandle) {
        let job = log.borrow_mut().begin_sync();
        if let Some(job) = job {
            let result = job.run().await;
            log.borrow_mut().finish_sync(job, result).unwrap();
        }
    }

    async fn open(dir: &Path, cfg: LogConfig) -> LogHandle {
        let log = PartitionLog::open(dir.to_path_buf(), cfg).await.unwrap();
        Rc::new(RefCell::new(log))
    }

    /// 3 keys x `versions`, one record per batch, then one "end" batch so the last version
    /// of every key is in an inactive segment; synced so all of it is cleanable.
    async fn fill(log: &LogHandle, versions: usize, codec: Compression) {
        for v in 0..versions {
            for k in ["a", "b", "c"] {
                append(log, codec, &[(k, Some(&format!("{k}{v}")))]);
            }
        }
        sync(log).await;
    }

    async fn roll_with_end_marker(log: &LogHandle, cfg: &LogConfig) {
        // A batch as large as a segment forces a roll before it.
        let big = "x".repeat(cfg.segment_bytes as usize);
        append(log, Compression::None, &[("end", Some(&big))]);
        sync(log).await;
    }

    #[test]
    fn keeps_latest_per_key_at_original_offsets() {
        run(async {
            for codec in [Compression::None, Compression::Gzip, Compression::Lz4] {
                let d = tmp();
                let dir = d.path().join("t-0");
                let cfg = config();
                let log = open(&dir, cfg.clone()).await;
                fill(&log, 61, codec).await;
                roll_with_end_marker(&log, &cfg).await;
                let (before, _) = read_all(&log).await;
                let (segs_before, bytes_before) =
                    (log.borrow().segment_count(), log.borrow().size_bytes());
                let mut cleaner = Cleaner::new(1 << 20);
                let stats = cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
                assert!(!stats.map_full);
                assert_eq!(stats.end_offset, 183);
                let (after, batches) = read_all(&log).await;
                let want: Seen = latest(&before, 183)
                    .into_iter()
                    .map(|(k, (o, v))| (o, k, v))
                    .chain(before.iter().filter(|r| r.0 >= 183).cloned())
                    .collect();
                let mut sorted = want.clone();
                sorted.sort();
                assert_eq!(after, sorted, "{codec:?}");
                assert_eq!(
                    after[..3].iter().map(|r| r.0).collect::<Vec<_>>(),
                    [180, 181, 182]
                );
                assert!(batches
                    .iter()
                    .all(|(c, _)| *c == codec || *c == Compression::None));
                assert!(log.borrow().size_bytes() < bytes_before / 10);
                assert_eq!(
                    log.borrow().segment_count(),
                    segs_before,
                    "groups by input size"
                );
                assert_eq!(read_checkpoint(&Disk::Real, &dir), Some(183));
                // Nothing new is dirty: no second pass.
                assert!(cleaner.clean_if_due(&log, now()).await.unwrap().is_none());
                // Appends continue at the log end; offsets are never reused.
                assert_eq!(append(&log, codec, &[("a", Some("new"))]), 184);
                // The next pass merges the now small segments into one.
                roll_with_end_marker(&log, &cfg).await;
                cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
                assert!(
                    log.borrow().segment_count() <= 4,
                    "{}",
                    log.borrow().segment_count()
                );

                // Both restarts see the same compacted log: clean close, and a crash (no
                // close, so every segment is re-validated: gaps must be accepted).
                let end = log.borrow().log_end_offset();
                let (expect, _) = read_all(&log).await;
                let log = Rc::try_unwrap(log).ok().unwrap().into_inner();
                log.close().await.unwrap();
                let log = open(&dir, cfg.clone()).await;
                assert_eq!(read_all(&log).await.0, expect);
                drop(log);
                // The marker outlives an open that changed nothing (it still describes the
                // log); a crash after changes invalidates it. Both files go, so that every
                // segment is re-validated.
                std::fs::remove_file(dir.join(".clean_shutdown")).unwrap();
                std::fs::remove_file(dir.join("recovery-point")).unwrap();
                let log = open(&dir, cfg.clone()).await;
                assert!(log.borrow().recovery_report().segments_recovered > 0);
                assert_eq!(log.borrow().log_end_offset(), end);
                assert_eq!(read_all(&log).await.0, expect);
            }
        });
    }

    #[test]
    fn tombstones_dropped_after_delete_retention() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                delete_retention_ms: 60_000,
                ..config()
            };
            let log = open(&dir, cfg.clone()).await;
            fill(&log, 5, Compression::None).await;
            append(&log, Compression::None, &[("b", None)]); // tombstone at 15
            roll_with_end_marker(&log, &cfg).await;
            let mut cleaner = Cleaner::new(1 << 20);
            cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
            let (seen, batches) = read_all(&log).await;
            assert!(
                seen.contains(&(15, "b".into(), None)),
                "kept by the first pass"
            );
            assert!(!seen.iter().any(|r| r.1 == "b" && r.0 != 15));
            assert!(batches.contains(&(Compression::None, Some(now() + 60_000))));

            // More dirty data so a pass runs again; before the horizon the tombstone stays.
            fill(&log, 2, Compression::None).await;
            roll_with_end_marker(&log, &cfg).await;
            cleaner
                .clean_if_due(&log, now() + 59_999)
                .await
                .unwrap()
                .unwrap();
            let (seen, _) = read_all(&log).await;
            // A later "b" value supersedes the tombstone; the horizon test goes on with "c".
            assert!(!seen.iter().any(|r| r.1 == "b" && r.2.is_none()));
            append(&log, Compression::None, &[("c", None)]);
            roll_with_end_marker(&log, &cfg).await;
            cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
            let tomb = |seen: &Seen| seen.iter().any(|r| r.1 == "c" && r.2.is_none());
            assert!(tomb(&read_all(&log).await.0));
            fill(&log, 1, Compression::None).await; // dirty again, keys a/b/c...
            append(&log, Compression::None, &[("c", None)]);
            roll_with_end_marker(&log, &cfg).await;
            cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
            assert!(tomb(&read_all(&log).await.0), "horizon not reached");
            append(&log, Compression::None, &[("z", Some("dirty"))]);
            roll_with_end_marker(&log, &cfg).await;
            cleaner
                .clean_if_due(&log, now() + 60_001)
                .await
                .unwrap()
                .unwrap();
            assert!(!tomb(&read_all(&log).await.0), "dropped past the horizon");
        });
    }

    #[test]
    fn compaction_lags_bound_when_a_pass_runs() {
        run(async {
            let d = tmp();
            let cfg = LogConfig {
                min_cleanable_dirty_ratio: 0.9,
                ..config()
            };
            // min.compaction.lag.ms: records stamped now are not dirty yet.
            let young = open(
                &d.path().join("young-0"),
                LogConfig {
                    min_compaction_lag_ms: 60_000,
                    ..cfg.clone()
                },
            )
            .await;
            fill(&young, 20, Compression::None).await;
            roll_with_end_marker(&young, &cfg).await;
            let c = Cleaner::cleanability(&young, now()).await.unwrap().unwrap();
            assert_eq!((c.dirty_bytes, c.due()), (0, false));
            let c = Cleaner::cleanability(&young, now() + 60_001)
                .await
                .unwrap()
                .unwrap();
            assert!(c.due(), "old enough a minute later");

            // max.compaction.lag.ms: a small dirty ratio is cleaned once a record is overdue.
            let dir = d.path().join("old-0");
            let log = open(
                &dir,
                LogConfig {
                    max_compaction_lag_ms: 60_000,
                    ..cfg.clone()
                },
            )
            .await;
            fill(&log, 40, Compression::None).await;
            roll_with_end_marker(&log, &cfg).await;
            let mut cleaner = Cleaner::new(1 << 20);
            cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
            append(&log, Compression::None, &[("a", Some("late"))]);
            roll_with_end_marker(&log, &cfg).await;
            let c = Cleaner::cleanability(&log, now()).await.unwrap().unwrap();
            assert!(c.ratio() < 0.9 && c.dirty_bytes > 0 && !c.overdue && !c.due());
            let c = Cleaner::cleanability(&log, now() + 60_001)
                .await
                .unwrap()
                .unwrap();
            assert!(c.overdue && c.due());
        });
    }

    #[test]
    fn expired_tombstone_alone_makes_a_pass_due() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                delete_retention_ms: 1_000,
                ..config()
            };
            let log = open(&dir, cfg.clone()).await;
            fill(&log, 3, Compression::None).await;
            append(&log, Compression::None, &[("a", None)]);
            roll_with_end_marker(&log, &cfg).await;
            let mut cleaner = Cleaner::new(1 << 20);
            let s = cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
            assert_eq!(s.earliest_horizon, Some(now() + 1_000));
            let tomb = |seen: &Seen| seen.iter().any(|r| r.1 == "a" && r.2.is_none());
            assert!(tomb(&read_all(&log).await.0));
            // Nothing new is written: no pass before the horizon, one after it.
            assert!(cleaner
                .clean_if_due(&log, now() + 999)
                .await
                .unwrap()
                .is_none());
            let s = cleaner
                .clean_if_due(&log, now() + 1_000)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(s.earliest_horizon, None);
            assert!(!tomb(&read_all(&log).await.0));
            assert!(cleaner
                .clean_if_due(&log, now() + 2_000)
                .await
                .unwrap()
                .is_none());
        });
    }

    #[test]
    fn full_map_covers_a_prefix() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = config();
            let log = open(&dir, cfg.clone()).await;
            let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
            for v in 0..3 {
                for k in &keys {
                    append(&log, Compression::None, &[(k, Some(&format!("{k}-{v}")))]);
                }
            }
            roll_with_end_marker(&log, &cfg).await;
            let (before, _) = read_all(&log).await;
            // Room for 3 keys: the first pass covers offsets 0..=2 only.
            let mut cleaner = Cleaner::new(SLOT_BYTES * 4);
            let stats = cleaner.clean_if_due(&log, now()).await.unwrap().unwrap();
            assert!(stats.map_full);
            assert_eq!((stats.keys, stats.end_offset), (3, 3));
            assert_eq!(read_checkpoint(&Disk::Real, &dir), Some(3));
            let (after, _) = read_all(&log).await;
            assert_eq!(
                after, before,
                "offsets 0..3 hold the latest of nothing older"
            );
            // Later passes go on from the checkpoint until the whole log is clean.
            let mut passes = 1;
            while let Some(s) = cleaner.clean_if_due(&log, now()).await.unwrap() {
                passes += 1;
                assert!(s.end_offset > s.first_dirty);
                assert!(passes < 50);
            }
            let (after, _) = read_all(&log).await;
            let want = latest(&before, 30);
            let got = latest(&after, 30);
            assert_eq!(got, want);
            assert_eq!(after.iter().filter(|r| r.0 < 30).count(), 10);
        });
    }

    /// The cleaner on the simulated disk: a crash before or after the swap commits, then a
    /// power loss (unsynced data and metadata kept, lost or torn at random), then a reopen:
    /// every key's latest record is still there at its original offset, and a later pass
    /// completes. Also a power loss right after a whole pass. Several seeds.
    #[test]
    fn power_loss_around_the_swap_on_the_simulated_disk() {
        use crate::storage::{Clock, Env, SimDisk};
        run(async {
            for seed in 0..16u64 {
                let crash = match seed % 3 {
                    0 => Some(CrashPoint::BeforeCommit),
                    1 => Some(CrashPoint::AfterCommit),
                    _ => None,
                };
                let disk = SimDisk::new(seed);
                let env = Env {
                    disk: Disk::Sim(disk.clone()),
                    clock: Clock::Sim(crate::storage::SimClock::new(now())),
                };
                // The data directory exists durably (as in sim_log); the log makes its own
                // partition directory durable.
                disk.create_dir_all(Path::new("/sim")).unwrap();
                disk.sync_dir(Path::new("/")).unwrap();
                let dir = PathBuf::from("/sim/t-0");
                let cfg = config();
                let open_sim = || async {
                    let log = PartitionLog::open_in(env.clone(), dir.clone(), cfg.clone())
                        .await
                        .unwrap();
                    Rc::new(RefCell::new(log))
                };
                let log = open_sim().await;
                fill(&log, 20, Compression::None).await;
                roll_with_end_marker(&log, &cfg).await;
                let (before, _) = read_all(&log).await;
                let mut cleaner = Cleaner::new(1 << 20);
                cleaner.crash = crash;
                let result = cleaner.clean_if_due(&log, now()).await;
                assert_eq!(result.is_err(), crash.is_some(), "seed {seed}");
                drop(log);
                disk.power_loss();
                let log = open_sim().await;
                let (after, _) = read_all(&log).await;
                assert_eq!(
                    latest(&after, i64::MAX),
                    latest(&before, i64::MAX),
                    "seed {seed}"
                );
                let offsets: Vec<i64> = after.iter().map(|r| r.0).collect();
                assert!(offsets.windows(2).all(|w| w[0] < w[1]), "seed {seed}");
                let names = disk.read_dir(&dir).unwrap();
                assert!(
                    !names
                        .iter()
                        .any(|e| e.name.ends_with(".cleaned") || e.name.contains(".swap")),
                    "seed {seed}: {names:?}"
                );
                let mut cleaner = Cleaner::new(1 << 20);
                cleaner.clean_if_due(&log, now()).await.unwrap();
                let (after, _) = read_all(&log).await;
                assert_eq!(
                    latest(&after, i64::MAX),
                    latest(&before, i64::MAX),
                    "seed {seed}"
                );
            }
        });
    }

    #[test]
    fn crash_between_write_and_swap_recovers() {
        run(async {
            for crash in [CrashPoint::BeforeCommit, CrashPoint::AfterCommit] {
                let d = tmp();
                let dir = d.path().join("t-0");
                let cfg = config();
                let log = open(&dir, cfg.clone()).await;
                fill(&log, 20, Compression::None).await;
                roll_with_end_marker(&log, &cfg).await;
                let (before, _) = read_all(&log).await;
                let mut cleaner = Cleaner::new(1 << 20);
                cleaner.crash = Some(crash);
                assert!(cleaner.clean_if_due(&log, now()).await.is_err());
                drop(log); // no close: as after kill -9
                let log = open(&dir, cfg.clone()).await;
                let leftovers: Vec<_> = std::fs::read_dir(&dir)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().into_string().unwrap())
                    .filter(|n| n.ends_with(".cleaned") || n.contains(".swap"))
                    .collect();
                assert!(leftovers.is_empty(), "{leftovers:?}");
                let (after, _) = read_all(&log).await;
                if crash == CrashPoint::BeforeCommit {
                    assert_eq!(after, before, "an uncommitted pass changes nothing");
                } else {
                    // The committed group is in place; every key's latest is still there
                    // at its original offset and nothing is duplicated past it.
                    assert_eq!(latest(&after, i64::MAX), latest(&before, i64::MAX));
                    assert!(after.len() < before.len());
                    let offsets: Vec<i64> = after.iter().map(|r| r.0).collect();
                    assert!(offsets.windows(2).all(|w| w[0] < w[1]));
                }
                // A full pass afterwards still works.
                let mut cleaner = Cleaner::new(1 << 20);
                cleaner.clean_if_due(&log, now()).await.unwrap();
                let (after, _) = read_all(&log).await;
                assert_eq!(latest(&after, i64::MAX), latest(&before, i64::MAX));
            }
        });
    }

    #[test]
    fn producers_last_batch_survives_as_an_empty_batch() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = config();
            let log = open(&dir, cfg.clone()).await;
            let bytes = BatchBuilder::new(Compression::None)
                .producer(7, 0, 0)
                .push(Some(b"a"), Some(b"old"), &[], now())
                .build();
            let h = validate_batch(&bytes).unwrap();
            log.borrow_mut().append(&bytes, &h, 0).unwrap();
            append(&log, Compression::None, &[("a", Some("new"))]);
            roll_with_end_marker(&log, &cfg).await;
            Cleaner::new(1 << 20)
                .clean_if_due(&log, now())
                .await
                .unwrap()
                .unwrap();
            let start = log.borrow().log_start_offset();
            let f = log.borrow().read(start, 1 << 20, i64::MAX);
            let bytes = f.await.unwrap();
            let h = rb::validate_stored_batch(&bytes).unwrap();
            assert_eq!((h.producer_id, h.records_count, h.last_offset()), (7, 0, 0));
            let (seen, _) = read_all(&log).await;
            assert_eq!(seen[0], (1, "a".into(), Some("new".into())));
            // A restart rebuilds the producer's state from the kept header.
            let log = Rc::try_unwrap(log).ok().unwrap().into_inner();
            drop(log);
            let log = open(&dir, cfg).await;
            assert!(log.borrow().producers().get(7).is_some());
        });
    }
}
