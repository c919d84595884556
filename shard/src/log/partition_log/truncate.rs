//! Follower truncation (Kafka's `UnifiedLog.truncateTo` / `truncateFullyAndStartAt`): a
//! follower whose log diverged from the new leader's cuts it back to the epoch boundary the
//! leader names; one that fell behind the leader's log start restarts empty there.
//!
//! Never shrinking a file in place: a fetch in flight may hold a segment as a file range
//! (fd, position, length) sent later from the page cache, and the TLS path maps segments
//! (a mapping of a shrunk file faults with SIGBUS). So the segment holding the cut keeps its
//! batches below it in a NEW file, `<base>.log.swap` (copied, fdatasynced), renamed over
//! `<base>.log`: descriptors opened before keep the old inode and its bytes. Its indexes are
//! rebuilt in memory from the new file (it becomes the active segment); the stale index
//! files on disk are rewritten when it rolls or the log closes, and recovery rebuilds them
//! after a crash (the active segment is always re-validated).
//!
//! Crash safety: a truncation is made of several file operations (the swap, the removal of
//! every later segment and its snapshots, a lower log start) that a power loss may keep or
//! lose independently. So it commits first: once the new file is durable, `truncate-offset`
//! (`0\nto <end>\n`, or `0\nfull <offset>\n` for a full truncation) is written durably (tmp,
//! fdatasync, rename, directory fsync); only then are the old files touched; when all of it
//! is durable (directory fsync) the commit file is removed, durably, before the call
//! returns. Before the commit nothing of the old log has changed (a stray `.log.swap` is
//! deleted at open); after it, `open` finishes the truncation: it deletes stray swap files,
//! lowers the durable log start if needed, opens the log as usual and truncates it again to
//! the committed end (or restarts it at the committed offset). So a power loss at any point
//! reopens the old log or the truncated one, and once the call returned, never the old one.
//!
//! Cost: a truncation reads the cut segment's batch headers twice and copies its kept bytes
//! (bounded by `segment.bytes`) with synchronous page-cache reads and writes on the shard's
//! thread, and makes at least five fsyncs (two more each for a changed epoch file or a lowered
//! log start). It is rare (a leader change that found a divergence).

use std::path::{Path, PathBuf};

use super::recovery::{list_segments, list_snapshots};
use super::retention::remove_segment_files;
use super::{corrupt, remove_file_if_exists, PartitionLog};
use crate::log::batch::{self, PEEK_BYTES, PEEK_TS_BYTES};
use crate::log::checkpoint::{self, Checkpoint};
use crate::log::leader_epoch::LEADER_EPOCH_FILE;
use crate::log::segment::{Segment, SyncWalker};
use crate::log::{file_stem, parse_stem, snapshot_path, LogError};
use crate::storage::Disk;

/// The commit record of a truncation in progress (see the module doc).
pub(crate) const TRUNCATION_FILE: &str = "truncate-offset";
/// Suffix of the new file a cut segment's kept batches are copied to.
const SWAP_SUFFIX: &str = ".log.swap";
/// Bytes per read and write of the copy.
const COPY_CHUNK: usize = 1 << 20;

/// A committed truncation (`TRUNCATION_FILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Truncation {
    /// `truncate_to`: everything at or past this offset (a batch boundary) goes.
    To(i64),
    /// `truncate_fully_and_start_at`: every segment goes; the log restarts empty here.
    Full(i64),
}

/// Where a truncation cuts: the segment (index) holding the new end, the bytes of it kept,
/// the new log end, and whether the segment's file must be replaced.
struct Cut {
    index: usize,
    position: u64,
    new_end: i64,
    swap: bool,
}

fn swap_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{}{SWAP_SUFFIX}", file_stem(base)))
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LogError + 'a {
    move |e| LogError::io(op, path, e)
}

fn write_commit(disk: &Disk, dir: &Path, t: Truncation) -> Result<(), LogError> {
    let text = match t {
        Truncation::To(o) => format!("0\nto {o}\n"),
        Truncation::Full(o) => format!("0\nfull {o}\n"),
    };
    let path = dir.join(TRUNCATION_FILE);
    disk.write_file_durable_blocking(&path, text.as_bytes())
        .map_err(io("write", &path))
}

/// Removes the commit record durably (before anything is appended past the truncation: a
/// commit record that came back would truncate those records at the next open).
fn remove_commit(disk: &Disk, dir: &Path) -> Result<(), LogError> {
    let path = dir.join(TRUNCATION_FILE);
    if disk.exists(&path) {
        remove_file_if_exists(disk, &path)?;
        disk.sync_dir_blocking(dir).map_err(io("sync dir", dir))?;
    }
    Ok(())
}

fn read_commit(disk: &Disk, dir: &Path) -> Result<Option<Truncation>, LogError> {
    let path = dir.join(TRUNCATION_FILE);
    let bytes = match disk.read_file(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io("read", &path, e)),
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let parsed = match lines.as_slice() {
        ["0", entry] => match entry.split_once(' ') {
            Some(("to", o)) => o.parse().ok().map(Truncation::To),
            Some(("full", o)) => o.parse().ok().map(Truncation::Full),
            _ => None,
        },
        _ => None,
    };
    match parsed {
        Some(t) => Ok(Some(t)),
        // Written durably before anything else changed: a malformed one is not a commit
        // that happened (the temporary file is renamed into place only once synced).
        None => {
            tracing::warn!(path = %path.display(), "malformed truncation record ignored");
            remove_commit(disk, dir)?;
            Ok(None)
        }
    }
}

/// Deletes every segment, snapshot and the leader-epoch file, and makes `offset` the durable
/// log start (whose directory fsync makes the removals durable too): the directory of a log
/// truncated fully, which `open` restarts empty at `offset`.
fn reset_dir(disk: &Disk, dir: &Path, offset: i64) -> Result<(), LogError> {
    for base in list_segments(disk, dir)? {
        remove_segment_files(disk, dir, base)?;
    }
    remove_swaps(disk, dir)?;
    for o in list_snapshots(disk, dir)? {
        remove_file_if_exists(disk, &snapshot_path(dir, o))?;
    }
    checkpoint::write_log_start(disk, dir, offset)
        .map_err(io("write", &dir.join(checkpoint::LOG_START_FILE)))
}

/// Removes `<base>.log.swap` files: the copies of an uncommitted truncation, or of a
/// committed one that open is about to redo.
fn remove_swaps(disk: &Disk, dir: &Path) -> Result<(), LogError> {
    for entry in disk.read_dir(dir).map_err(io("read dir", dir))? {
        let is_swap = entry
            .name
            .strip_suffix(SWAP_SUFFIX)
            .and_then(parse_stem)
            .is_some();
        if is_swap {
            remove_file_if_exists(disk, &dir.join(&entry.name))?;
        }
    }
    Ok(())
}

/// At open, before the segments are listed: finishes the file-level part of a committed
/// truncation (a full one entirely; for `To(end)` the durable log start is lowered to `end`
/// if it was above) and removes swap files. Returns the `To` truncation that `open` must
/// redo on the loaded log (`finish_truncation`).
pub(super) fn recover_truncation(disk: &Disk, dir: &Path) -> Result<Option<Truncation>, LogError> {
    let pending = read_commit(disk, dir)?;
    remove_swaps(disk, dir)?;
    match pending {
        None => Ok(None),
        Some(Truncation::Full(offset)) => {
            tracing::warn!(dir = %dir.display(), offset, "finishing an interrupted full truncation");
            reset_dir(disk, dir, offset)?;
            // Kafka's `clearAndFlush`.
            let epochs = dir.join(LEADER_EPOCH_FILE);
            disk.write_file_durable_blocking(&epochs, b"0\n0\n")
                .map_err(io("write", &epochs))?;
            remove_commit(disk, dir)?;
            Ok(None)
        }
        Some(Truncation::To(end)) => {
            tracing::warn!(dir = %dir.display(), end, "finishing an interrupted truncation");
            let start = checkpoint::read_log_start(disk, dir)
                .map_err(io("read", &dir.join(checkpoint::LOG_START_FILE)))?;
            if start.is_some_and(|s| s > end) {
                checkpoint::write_log_start(disk, dir, end)
                    .map_err(io("write", &dir.join(checkpoint::LOG_START_FILE)))?;
            }
            Ok(Some(Truncation::To(end)))
        }
    }
}

impl PartitionLog {
    /// Kafka's `UnifiedLog.truncateTo`: removes every record at or past `offset`. Returns
    /// whether anything was removed (nothing when `offset` >= the log end).
    ///
    /// Batches are kept whole or removed whole: those whose last offset is below `offset`
    /// stay, a batch straddling `offset` goes with everything after it (a follower truncates
    /// at epoch boundaries, which are batch boundaries), so the log end afterwards is the
    /// end of the last batch kept, at or below `offset`. Segments based at or past the new
    /// end are deleted; the one holding it is cut by a swap (see the module doc) and becomes
    /// the active segment. When no segment starts at or below `offset`, this is
    /// `truncate_fully_and_start_at(offset)`. Then, as Kafka does: the leader-epoch cache
    /// loses the entries starting at or past the new end, the log start moves down to the new
    /// end if it was above, the producer state is rebuilt as of the new end (newest snapshot
    /// at or below it, then the batch headers after it), and the durable offset, the recovery
    /// point and the sync bookkeeping are clamped to the new end.
    ///
    /// Durable when it returns (see the module doc); blocks the thread for the copy and five
    /// fsyncs. A failure part-way marks the log failed (reopen it: open finishes a committed
    /// truncation). Refused (`CleaningInProgress`) while a cleaner pass rewrites the log.
    pub fn truncate_to(&mut self, offset: i64) -> Result<bool, LogError> {
        self.check_truncatable(offset)?;
        let result = self.truncate_inner(offset);
        if let Err(e) = &result {
            tracing::error!(dir = %self.dir.display(), offset, error = %e, "truncation failed; log marked failed");
            self.failed = Some(format!("truncation to {offset}: {e}"));
        }
        result
    }

    /// What both truncations refuse: a failed log, a negative offset, a cleaner pass.
    fn check_truncatable(&self, offset: i64) -> Result<(), LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset(),
            });
        }
        if crate::log::cleaner::is_cleaning(&self.dir) {
            return Err(LogError::CleaningInProgress {
                path: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Removes `.clean_shutdown` before a truncation changes the log: appends after it could
    /// bring back the size and segment list the marker describes with other bytes. The
    /// commit record's directory fsync, which follows at once, makes the removal durable.
    fn forget_clean_marker(&mut self) -> Result<(), LogError> {
        if self.clean_on_disk.take().is_some() {
            remove_file_if_exists(&self.env.disk, &checkpoint::clean_marker(&self.dir))?;
        }
        Ok(())
    }

    fn truncate_inner(&mut self, offset: i64) -> Result<bool, LogError> {
        if offset >= self.log_end_offset() {
            // Kafka's `truncateTo` cuts the epoch cache even so: a leader that assigned an
            // epoch and appended nothing before losing leadership holds an entry at its log
            // end that its new leader never had. Kept, it is sent as the last fetched epoch
            // and answered with the same divergence on every fetch.
            self.truncate_epochs_from_end(self.log_end_offset())?;
            return Ok(false);
        }
        if self.segments[0].base_offset > offset {
            self.truncate_fully_inner(offset)?;
            return Ok(true);
        }
        let cut = self.plan_cut(offset)?;
        let k = cut.index;
        if !cut.swap && k + 1 == self.segments.len() && cut.new_end == self.log_end_offset() {
            self.truncate_epochs_from_end(cut.new_end)?;
            return Ok(false);
        }
        let disk = self.env.disk.clone();
        let dir = self.dir.clone();
        let base = self.segments[k].base_offset;
        if cut.swap {
            self.write_swap(k, cut.position)?;
        }
        self.forget_clean_marker()?;
        write_commit(&disk, &dir, Truncation::To(cut.new_end))?;
        tracing::info!(dir = %dir.display(), offset, new_end = cut.new_end, old_end = self.log_end_offset(), "truncating log");
        // Committed: from here a crash is finished by the next open. The segments stay in
        // memory until the new one is ready (a failure leaves the log failed, not empty).
        let now = self.env.clock.now_ms();
        let capacity = self.config.segment_index_bytes as u64;
        for s in &self.segments[k + 1..] {
            remove_segment_files(&disk, &dir, s.base_offset)?;
        }
        let (log_path, _, _) = crate::log::segment_paths(&dir, base);
        if cut.swap {
            disk.rename(&swap_path(&dir, base), &log_path)
                .map_err(io("rename", &log_path))?;
        }
        let mut seg = Segment::open(&disk, &dir, base, Some(capacity), now)?;
        seg.gaps_allowed = self.segments[k].gaps_allowed;
        if seg.size != cut.position {
            return Err(corrupt(
                &log_path,
                seg.size,
                format!(
                    "truncated segment holds {} bytes, not {}",
                    seg.size, cut.position
                ),
            ));
        }
        seg.rebuild_sync(self.config.index_interval_bytes)?;
        if seg.next_offset != cut.new_end {
            return Err(corrupt(&log_path, 0, "truncated segment ends elsewhere"));
        }
        // Kafka's `TransactionIndex.truncateTo`: aborts whose marker is gone go. Not synced
        // here: this segment is now the active one, which recovery always re-scans (and so
        // re-indexes) after a crash; its roll or the close syncs it.
        let txn_path = crate::log::txn_index::txn_index_path(&dir, base);
        seg.txn_index
            .truncate_to(&disk, cut.new_end)
            .map_err(io("truncate", &txn_path))?;
        // Reads in flight keep the old segments' fds (the old inodes).
        self.segments.truncate(k);
        self.segments.push(seg);
        for o in list_snapshots(&disk, &dir)? {
            if o > cut.new_end {
                remove_file_if_exists(&disk, &snapshot_path(&dir, o))?;
            }
        }
        if cut.new_end < self.log_start_offset {
            // Kafka: `logStartOffset = min(targetOffset, logStartOffset)`.
            checkpoint::write_log_start(&disk, &dir, cut.new_end)
                .map_err(io("write", &dir.join(checkpoint::LOG_START_FILE)))?;
            self.log_start_offset = cut.new_end;
        }
        disk.sync_dir_blocking(&dir).map_err(io("sync dir", &dir))?;
        // The kept bytes of the active segment are durable (the swap was synced; without a
        // swap the segment was inactive and its files are in `unsynced` as before).
        if cut.swap {
            self.active_dirty = false;
        }
        self.truncations += 1;
        self.durable_offset = self.durable_offset.min(cut.new_end);
        self.sync_requested_offset = self.sync_requested_offset.min(cut.new_end);
        if let Some(cp) = self.last_checkpoint {
            if cp.segment_base > base || cp.next_offset > cut.new_end {
                let moved = Checkpoint {
                    next_offset: cp.next_offset.min(cut.new_end),
                    segment_base: cp.segment_base.min(base),
                    position: if cp.segment_base >= base {
                        cp.position.min(cut.position)
                    } else {
                        cp.position
                    },
                };
                self.checkpoint
                    .write(&moved)
                    .map_err(io("write", self.checkpoint.path()))?;
                self.last_checkpoint = Some(moved);
            }
        }
        self.truncate_epochs_from_end(cut.new_end)?;
        self.rebuild_producer_state(now)?;
        self.active_first_timestamp = self.read_active_first_timestamp()?;
        remove_commit(&disk, &dir)?;
        Ok(true)
    }

    /// Drops the leader-epoch entries starting at or past `end` (durably).
    fn truncate_epochs_from_end(&mut self, end: i64) -> Result<(), LogError> {
        let path = self.dir.join(LEADER_EPOCH_FILE);
        self.epochs
            .truncate_from_end(end)
            .map_err(io("write", &path))
    }

    /// Kafka's `UnifiedLog.truncateFullyAndStartAt`: deletes every segment and restarts the
    /// log empty at `offset` (log start = log end = `offset`), with an empty leader-epoch
    /// cache and no producer state. Used when the leader's log start is past this log's end.
    /// Durable when it returns (committed like `truncate_to`); a failure marks the log failed.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.check_truncatable(offset)?;
        let result = self.truncate_fully_inner(offset);
        if let Err(e) = &result {
            tracing::error!(dir = %self.dir.display(), offset, error = %e, "full truncation failed; log marked failed");
            self.failed = Some(format!("full truncation to {offset}: {e}"));
        }
        result
    }

    fn truncate_fully_inner(&mut self, offset: i64) -> Result<(), LogError> {
        let disk = self.env.disk.clone();
        let dir = self.dir.clone();
        self.forget_clean_marker()?;
        write_commit(&disk, &dir, Truncation::Full(offset))?;
        tracing::info!(dir = %dir.display(), offset, old_end = self.log_end_offset(), "truncating log fully");
        let now = self.env.clock.now_ms();
        let capacity = self.config.segment_index_bytes as u64;
        reset_dir(&disk, &dir, offset)?;
        let mut seg = Segment::open(&disk, &dir, offset, Some(capacity), now)?;
        if seg.size != 0 {
            return Err(corrupt(
                &seg.log_path,
                0,
                "new segment file already has data",
            ));
        }
        seg.next_offset = offset;
        // Old fds stay with reads in flight.
        self.segments = vec![seg];
        self.unsynced.clear();
        self.log_start_offset = offset;
        self.truncations += 1;
        self.durable_offset = offset;
        self.sync_requested_offset = offset;
        self.active_dirty = false;
        self.dir_dirty = true; // the new segment's entry: the next sync makes it durable
        self.messages_since_sync = 0;
        self.first_unsynced_ms = None;
        let cp = Checkpoint {
            next_offset: offset,
            segment_base: offset,
            position: 0,
        };
        self.checkpoint
            .write(&cp)
            .map_err(io("write", self.checkpoint.path()))?;
        self.last_checkpoint = Some(cp);
        let path = dir.join(LEADER_EPOCH_FILE);
        self.epochs.clear().map_err(io("write", &path))?;
        self.producers = Default::default();
        self.active_first_timestamp = None;
        remove_commit(&disk, &dir)?;
        self.list_dirty();
        Ok(())
    }

    /// At the end of `open`: redoes a committed truncation that a crash interrupted (the
    /// loaded log may still hold records past its end), then drops the commit record.
    pub(super) fn finish_truncation(&mut self, t: Truncation) -> Result<(), LogError> {
        if let Truncation::To(end) = t {
            // The loaded log may believe a trusted segment ends where its successor (about
            // to be deleted) starts: truncate_to walks the segment's batches itself.
            self.truncate_to(end)?;
        }
        remove_commit(&self.env.disk, &self.dir)
    }

    /// Finds where `truncate_to(offset)` cuts: the last segment based at or below `offset`,
    /// and in it the first batch whose last offset reaches `offset` (walking the batch
    /// headers from the start of the segment).
    fn plan_cut(&self, offset: i64) -> Result<Cut, LogError> {
        let index = self
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .checked_sub(1)
            .expect("a segment starts at or below offset");
        let seg = &self.segments[index];
        let path = seg.log_path.clone();
        let file_len = self.env.disk.file_len(&path).map_err(io("stat", &path))?;
        let mut walker = SyncWalker::open(&self.env.disk, &path, seg.size)?;
        let mut pos = 0u64;
        let mut new_end = seg.base_offset;
        while pos < seg.size {
            let b = walker
                .bytes(pos, PEEK_BYTES)
                .map_err(io("read", &path))?
                .ok_or_else(|| corrupt(&path, pos, "partial batch header"))?;
            let p = batch::peek(b).map_err(|r| corrupt(&path, pos, r))?;
            if p.last_offset >= offset {
                break;
            }
            new_end = p.last_offset + 1;
            pos += p.total as u64;
        }
        Ok(Cut {
            index,
            position: pos,
            new_end,
            swap: pos < file_len,
        })
    }

    /// Copies the first `len` bytes of segment `k`'s `.log` to `<base>.log.swap` and
    /// fdatasyncs it.
    fn write_swap(&self, k: usize, len: u64) -> Result<(), LogError> {
        let disk = &self.env.disk;
        let seg = &self.segments[k];
        let swap = swap_path(&self.dir, seg.base_offset);
        let (out, _) = disk.open(&swap, true).map_err(io("create", &swap))?;
        out.truncate(0).map_err(io("truncate", &swap))?;
        let reader = disk
            .open_reader(&seg.log_path)
            .map_err(io("open", &seg.log_path))?;
        let mut buf = vec![0u8; COPY_CHUNK.min(len as usize)];
        let mut pos = 0u64;
        while pos < len {
            let n = ((len - pos) as usize).min(COPY_CHUNK);
            reader
                .read_exact_at(&mut buf[..n], pos)
                .map_err(io("read", &seg.log_path))?;
            out.write_at(&buf[..n], pos).map_err(io("write", &swap))?;
            pos += n as u64;
        }
        out.sync_blocking().map_err(io("fdatasync", &swap))
    }

    /// Producer state as of the log end: newest snapshot at or below it, then the headers
    /// of the batches after it (as `open` rebuilds it), then expiry.
    /// The transaction indexes are not touched (`truncate_inner` cut them already): control
    /// batches only change the producer state here.
    fn rebuild_producer_state(&mut self, now: i64) -> Result<(), LogError> {
        let end = self.log_end_offset();
        let from = self.load_producer_snapshot(end, end)?;
        let first = self
            .segments
            .partition_point(|s| s.base_offset <= from)
            .saturating_sub(1);
        let disk = self.env.disk.clone();
        for i in first..self.segments.len() {
            let seg = &self.segments[i];
            let (size, path) = (seg.size, seg.log_path.clone());
            if seg.next_offset <= from || size == 0 {
                continue;
            }
            let mut pos = if seg.base_offset < from {
                u64::from(seg.index.lookup(from))
            } else {
                0
            };
            let mut walker = SyncWalker::open(&disk, &path, size)?;
            while pos < size {
                let b = walker
                    .bytes(pos, batch::BATCH_HEADER_BYTES)
                    .map_err(io("read", &path))?
                    .ok_or_else(|| corrupt(&path, pos, "partial batch header"))?;
                let header = batch::header(b);
                let total = batch::peek(b).map_err(|r| corrupt(&path, pos, r))?.total;
                if header.last_offset() >= from {
                    if header.is_control() {
                        let whole = walker
                            .bytes(pos, total)
                            .map_err(io("read", &path))?
                            .ok_or_else(|| corrupt(&path, pos, "partial control batch"))?;
                        self.apply_control_batch(&header, whole, None)?;
                    } else {
                        self.producers.update(&header, header.base_offset);
                    }
                }
                pos += total as u64;
            }
        }
        self.remove_expired_producers(now);
        Ok(())
    }

    /// The active segment's first batch's max timestamp (Kafka's `rollingBasedTimestamp`).
    fn read_active_first_timestamp(&self) -> Result<Option<i64>, LogError> {
        let active = self.active();
        if active.size < PEEK_TS_BYTES as u64 {
            return Ok(None);
        }
        let path = active.log_path.clone();
        let mut walker = SyncWalker::open(&self.env.disk, &path, active.size)?;
        let b = walker
            .bytes(0, PEEK_TS_BYTES)
            .map_err(io("read", &path))?
            .ok_or_else(|| corrupt(&path, 0, "partial batch header"))?;
        Ok(Some(batch::max_timestamp(b)))
    }
}
