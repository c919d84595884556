//! One segment: the `.log` file (record batches exactly as stored) and its two indexes, plus
//! the in-memory facts the log needs about it (size, next offset, max timestamp).
//!
//! Owns: writing batches (one vectored pwritev per batch, synchronous page-cache write),
//! maintaining the indexes as Kafka's `LogSegment.append` does, becoming inactive (final
//! time-index entry + trimmed indexes), and recovery of one segment (full re-validation with
//! wire's `validate_batch`, truncating at the first bad byte, indexes rebuilt). Reading for
//! fetches lives in `partition_log`, which only needs the fd (`file()`) and the indexes.
//!
//! File descriptors: no segment holds its `.log` open. Each opens it on demand through the
//! shard's `FdCache` (bounded by `log.fd.cache.size`), which keeps the recently used ones:
//! an appended partition finds its active segment's fd there, an idle one holds none. A read
//! or sync job holds its own `Rc` of the fd, which stays valid if the cache evicts it. The
//! indexes hold no fd either (see `index`).
//!
//! Bounds: positions are u32 (the log caps segment size below 2 GiB); relative offsets fit in
//! i32 (the log rolls before they would not).

use std::cell::RefCell;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use wire::record_batch::{validate_batch, validate_stored_batch};

use super::batch::{self, BATCH_HEADER_BYTES, LOG_OVERHEAD, PEEK_BYTES};
use super::fd_cache::CachedFd;
use super::index::OffsetIndex;
use super::segment_paths;
use super::tail_batches::{TailBatches, TailRange};
use super::time_index::TimeIndex;
use super::txn_index::{txn_index_path, TxnIndex};
use super::LogError;
use crate::storage::{Disk, File, Reader};

/// Reads of the recovery scan: large, so a 1 GiB segment is a few hundred io_uring reads.
const RECOVERY_CHUNK: usize = 4 << 20;
/// A recovery scan logs its progress every this many bytes (a 1 GiB segment takes seconds).
const RECOVERY_PROGRESS_BYTES: u64 = 256 << 20;

pub(crate) struct Segment {
    disk: Disk,
    pub base_offset: i64,
    pub log_path: Rc<Path>,
    /// The `.log` fd, opened on demand and kept by the shard's `FdCache`.
    fd: CachedFd,
    /// Appends may go here: the active segment (or one being recovered).
    appendable: bool,
    /// The descriptor (a dup of the `.log` fd) that fetched file ranges of this segment hold,
    /// while any does: ranges read while it lives share it (see `PartitionLog::read_ranges`).
    pub(crate) range_fd: RangeFd,
    /// Bytes of valid batches in the `.log`; appends go here.
    pub size: u64,
    /// Length of the `.log` file as this segment left it: above `size` while the active
    /// segment holds preallocated space (zeros), trimmed back to `size` when it becomes
    /// inactive.
    allocated: u64,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    /// Aborted transactions whose marker is in this segment (`.txnindex`, see `txn_index`).
    pub(crate) txn_index: TxnIndex,
    /// One past the last offset in this segment (`base_offset` while empty).
    pub next_offset: i64,
    /// Log bytes appended since the last index entry (Kafka's `bytesSinceLastIndexEntry`).
    pub bytes_since_index: u64,
    /// Largest batch max timestamp so far (-1: none) and the last offset of the first batch
    /// that reached it (Kafka's shallow "offset of max timestamp").
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// Wall-clock ms the segment started counting for `segment.ms` (creation, or open).
    pub created_ms: i64,
    /// The log was compacted (see `cleaner`): recovery accepts gaps between batches and
    /// batches holding fewer records than their offset range.
    pub gaps_allowed: bool,
    /// The newest batches' boundaries, for reads at the tail (active segment only).
    tail: TailBatches,
}

/// Shared between a segment and the reads planned on it (which outlive the borrow of the log).
pub(crate) type RangeFd = Rc<RefCell<std::sync::Weak<OwnedFd>>>;

/// The descriptor file ranges of `file` hold: the live one in `cache`, or a fresh dup of
/// `file`'s (None on the simulated disk).
pub(crate) fn range_fd(cache: &RangeFd, file: &File) -> io::Result<Option<Arc<OwnedFd>>> {
    if let Some(fd) = cache.borrow().upgrade() {
        return Ok(Some(fd));
    }
    let Some(fd) = file.dup_fd()? else {
        return Ok(None);
    };
    let fd = Arc::new(fd);
    *cache.borrow_mut() = Arc::downgrade(&fd);
    Ok(Some(fd))
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> LogError + 'a {
    move |e| LogError::io(op, path, e)
}

impl Segment {
    /// The segment at `base_offset`: its `.log` is created if missing (a new segment, whose
    /// fd goes into the cache for the appends to come), else only its length is read; the
    /// indexes' entries stay in their files (see `IndexFile::open`). `index_capacity`: the
    /// indexes may grow to this many bytes (active or being recovered: appends allowed);
    /// `None`: inactive, trusted. `size` and `next_offset` are provisional until `recover` /
    /// `load_tail` or the caller set them.
    pub(crate) fn open(
        disk: &Disk,
        dir: &Path,
        base_offset: i64,
        index_capacity: Option<u64>,
        now_ms: i64,
    ) -> Result<Segment, LogError> {
        let (log_path, index_path, time_path) = segment_paths(dir, base_offset);
        let fd = CachedFd::new();
        let size = match disk.file_len(&log_path) {
            Ok(size) => size,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (file, size) = disk
                    .open(&log_path, true)
                    .map_err(io_err("create", &log_path))?;
                fd.adopt(Rc::new(file));
                size
            }
            Err(e) => return Err(LogError::io("stat", &log_path, e)),
        };
        let index = OffsetIndex::open(disk, &index_path, base_offset, index_capacity)
            .map_err(io_err("open index", &index_path))?;
        let time_index = TimeIndex::open(disk, &time_path, base_offset, index_capacity)
            .map_err(io_err("open time index", &time_path))?;
        let txn_path = txn_index_path(dir, base_offset);
        let txn_index =
            TxnIndex::open(disk, txn_path.clone()).map_err(io_err("open txn index", &txn_path))?;
        Ok(Segment {
            disk: disk.clone(),
            base_offset,
            log_path: Rc::from(log_path.as_path()),
            fd,
            appendable: index_capacity.is_some(),
            range_fd: RangeFd::default(),
            size,
            allocated: size,
            index,
            time_index,
            txn_index,
            next_offset: base_offset,
            bytes_since_index: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            created_ms: now_ms,
            gaps_allowed: false,
            tail: TailBatches::new(base_offset),
        })
    }

    /// The `.log` fd: the cached one, one a read or sync job still holds, or a fresh open
    /// (which can fail, e.g. with EMFILE: the caller's append, read or sync fails, the log
    /// does not). On the real disk glommio's file, so pwritev (sync) and read_at / fdatasync
    /// through io_uring share the one fd. Never creates the file: a segment whose `.log`
    /// vanished fails its reads.
    pub(crate) fn file(&self) -> Result<Rc<File>, LogError> {
        self.fd
            .get(|| self.disk.open(&self.log_path, false).map(|(f, _)| f))
            .map_err(io_err("open", &self.log_path))
    }

    /// Whether the `.log` fd is open now (cached, or held by a read or sync job).
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.fd.is_open()
    }

    /// Where a read from `offset` starts and ends, when the newest batches' boundaries in
    /// memory answer it (see `tail_batches`); None: the read walks headers from the index.
    /// The caller has checked `offset` is below both the log end and `limit_offset`.
    pub(crate) fn tail_range(
        &self,
        offset: i64,
        limit_offset: i64,
        max_bytes: u64,
        min_one: bool,
    ) -> Option<TailRange> {
        self.tail.range(
            self.size,
            self.next_offset,
            offset,
            limit_offset,
            max_bytes,
            min_one,
        )
    }

    /// Whether appending a batch ending at `last_offset` needs a new segment first because an
    /// index could not take it (full, or relative offset past i32 as in Kafka).
    pub(crate) fn index_would_overflow(&self, last_offset: i64) -> bool {
        last_offset - self.base_offset > i32::MAX as i64
            || self.index.inner.is_full()
            || self.time_index.inner.is_full()
    }

    /// Writes `prefix` (the patched 16 bytes, or the whole restamped header) + `rest` at the end of the `.log` with pwritev and updates the indexes.
    /// On a write error the file is cut back to its previous size so no partial batch is left
    /// for a reader (or a later append) to trip on.
    ///
    /// `preallocate`: when the write would pass the end of the file, first extend the file by
    /// this many bytes from the write's position (`fallocate`, never past `limit` unless the
    /// batch itself does), so that most appends do not change the file's size and their
    /// fdatasync has no size to commit. 0: plain appends.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append(
        &mut self,
        prefix: &[u8],
        rest: &[u8],
        last_offset: i64,
        max_timestamp: i64,
        index_interval: u32,
        preallocate: u64,
        limit: u64,
    ) -> Result<(), LogError> {
        let position = self.size;
        let total = (prefix.len() + rest.len()) as u64;
        if !self.appendable {
            return Err(LogError::io(
                "write",
                &self.log_path,
                io::Error::other("append to an inactive segment"),
            ));
        }
        // The first append since open brings the indexes into memory (an idle partition keeps
        // them in their files only).
        self.index
            .inner
            .ensure_loaded()
            .map_err(io_err("read index", self.index.inner.path()))?;
        self.time_index
            .inner
            .ensure_loaded()
            .map_err(io_err("read time index", self.time_index.inner.path()))?;
        let file = self.file()?;
        let end = position + total;
        if end > self.allocated && preallocate > 0 {
            let want = (position + preallocate).min(limit).max(end);
            // Not supported or no space: plain appends (a real ENOSPC fails the write below).
            if file.allocate(self.allocated, want - self.allocated).is_ok() {
                self.allocated = want;
            }
        }
        if let Err(e) = file.write_vectored_at(&[prefix, rest], position) {
            // Best effort: if even this fails the log is marked failed by the caller.
            let _ = file.truncate(position);
            self.allocated = position;
            return Err(LogError::io("write", &self.log_path, e));
        }
        self.allocated = self.allocated.max(end);
        self.size += total;
        self.tail.push(position, end, last_offset, self.next_offset);
        self.next_offset = last_offset + 1;
        self.index_batch(position, last_offset, max_timestamp, total, index_interval);
        Ok(())
    }

    /// Kafka's `LogSegment.append` index maintenance for the batch just written at
    /// `position`. The first batch after an entry is not indexed (its position is found by
    /// scanning from the entry), which keeps the index sparse.
    fn index_batch(
        &mut self,
        position: u64,
        last_offset: i64,
        max_timestamp: i64,
        total: u64,
        interval: u32,
    ) {
        if max_timestamp > self.max_timestamp {
            self.max_timestamp = max_timestamp;
            self.offset_of_max_timestamp = last_offset;
        }
        if self.bytes_since_index > interval as u64 {
            // Cannot fail: the caller rolled first if either index was full (recovery may
            // find them full with a smaller configured size: the index is then only sparser).
            let _ = self.index.append(last_offset, position as u32);
            let _ = self
                .time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += total;
    }

    /// The segment stops being the active one: final time-index entry (so its last entry is
    /// the segment's max timestamp) and both indexes trimmed to their entries.
    pub(crate) fn make_inactive(&mut self) -> Result<(), LogError> {
        self.trim_preallocated()?;
        // A full time index drops the final entry; offset_for_timestamp then scans a little
        // further, and max_timestamp after a restart may miss the last batches (rare: the
        // index would need 870k entries).
        let _ = self
            .time_index
            .maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
        self.index
            .inner
            .trim(&self.disk)
            .map_err(io_err("write index", self.index.inner.path()))?;
        self.time_index
            .inner
            .trim(&self.disk)
            .map_err(io_err("write time index", self.time_index.inner.path()))?;
        self.appendable = false;
        self.tail = TailBatches::new(self.base_offset);
        Ok(())
    }

    /// Cuts the preallocated zeros after the last batch (Kafka does the same with
    /// `file.preallocate` when a segment rolls or closes): an inactive segment's file ends
    /// where its batches do, which is what a clean reopen, `dump-log` and copies expect.
    fn trim_preallocated(&mut self) -> Result<(), LogError> {
        if self.allocated > self.size {
            self.file()?
                .truncate(self.size)
                .map_err(io_err("truncate", &self.log_path))?;
            self.allocated = self.size;
        }
        Ok(())
    }

    /// Becomes the active segment again (after a restart): appends allowed, indexes may grow
    /// to `index_capacity` bytes (loaded into memory at the first append).
    pub(crate) fn make_active(&mut self, index_capacity: u64) -> Result<(), LogError> {
        self.appendable = true;
        self.index.inner.resize(index_capacity);
        self.time_index.inner.resize(index_capacity);
        Ok(())
    }

    /// Every file that must be fdatasynced for this segment to be durable: the `.log` always;
    /// with `with_indexes` (the segment is inactive: recovery trusts its indexes then) the
    /// index files written since the last call too. The sync job holds its fds until it is
    /// done, whatever the cache does meanwhile. The transaction index counts as an index
    /// (recovery rebuilds it for the segments it re-scans).
    pub(crate) fn files_to_sync(&mut self, with_indexes: bool) -> Result<Vec<Rc<File>>, LogError> {
        let mut v = vec![self.file()?];
        if with_indexes {
            v.extend(self.index.inner.take_saved());
            v.extend(self.time_index.inner.take_saved());
            let txn_path = self.txn_index.path().to_path_buf();
            v.extend(
                self.txn_index
                    .take_unsynced(&self.disk)
                    .map_err(io_err("open", &txn_path))?,
            );
            // Inactive now: its fd leaves the cache for the hot ones (the sync job holds it
            // until done; a read of old records opens it again).
            self.fd.release();
        }
        Ok(v)
    }

    /// Loads the facts of a segment whose indexes are trusted (before the recovery point, or
    /// a clean shutdown): max timestamp from the last time-index entry (exact for an inactive
    /// segment), and sanity-checks both indexes. False when they fail the check (the caller
    /// then recovers the segment fully).
    pub(crate) fn load_trusted(&mut self, next_offset: i64) -> bool {
        self.next_offset = next_offset;
        if let Some((t, o)) = self.time_index.last() {
            self.max_timestamp = t;
            self.offset_of_max_timestamp = o;
        }
        self.index.sane(self.size) && self.time_index.sane(next_offset.max(self.base_offset + 1))
    }

    /// For the last segment after a clean shutdown: walks the batch headers from the last
    /// index entry to the end of the file to find the next offset. False when the chain does
    /// not end exactly at the end of the file (then the marker lied: recover fully).
    pub(crate) async fn load_tail(&mut self) -> Result<bool, LogError> {
        let last_entry = self.index.last();
        let mut pos = last_entry.map_or(0, |(_, p)| p as u64);
        let mut next = self.base_offset;
        // An entry is keyed by its batch's LAST offset (see `index_batch`), so the batch at
        // its position ends at that offset; it may start anywhere up to it.
        let mut entry_last = last_entry.map(|(o, _)| o);
        let mut walker = Walker::new(self.file()?, self.size, 64 << 10);
        while pos < self.size {
            let Some(b) = walker
                .bytes(pos, PEEK_BYTES)
                .await
                .map_err(io_err("read", &self.log_path))?
            else {
                return Ok(false);
            };
            let Ok(p) = batch::peek(b) else {
                return Ok(false);
            };
            let chained = match entry_last.take() {
                Some(o) => p.last_offset == o && p.base_offset >= next,
                None => p.base_offset >= next,
            };
            if !chained || pos + p.total as u64 > self.size {
                return Ok(false);
            }
            next = p.last_offset + 1;
            pos += p.total as u64;
        }
        self.next_offset = next;
        Ok(true)
    }

    /// Full recovery of this segment: re-validates every batch (lengths, CRC-32C, counts,
    /// offsets contiguous from the segment's base offset), rebuilds both indexes, and
    /// truncates the `.log` at the first bad byte. Returns the truncation position if it
    /// truncated.
    ///
    /// Contiguity is required because this log never compacts: every batch starts where the
    /// previous one ended, so a batch that does not is garbage that happens to checksum (or
    /// a stale batch behind a torn region).
    pub(crate) async fn recover(&mut self, index_interval: u32) -> Result<Option<u64>, LogError> {
        let path = self.log_path.clone();
        self.index.inner.truncate_entries(0);
        self.time_index.inner.truncate_entries(0);
        self.bytes_since_index = 0;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        let file_len = self.size;
        let file = self.file()?;
        let mut walker = Walker::new(file.clone(), file_len, RECOVERY_CHUNK);
        let mut pos = 0u64;
        let mut next = self.base_offset;
        let mut bad: Option<String> = None;
        // Where the bytes stop, zeros follow (a zero batch length: preallocated space).
        let mut zero_tail = false;
        let mut next_progress = RECOVERY_PROGRESS_BYTES;
        while pos < file_len {
            if pos >= next_progress {
                tracing::info!(path = %path.display(), scanned_mib = pos >> 20, total_mib = file_len >> 20, "recovering log segment");
                next_progress += RECOVERY_PROGRESS_BYTES;
            }
            let remaining = file_len - pos;
            let peek = (remaining as usize).min(PEEK_BYTES);
            let head = walker
                .bytes(pos, peek)
                .await
                .map_err(io_err("read", &path))?
                .expect("within file");
            if head[..peek.min(12)].iter().all(|&b| b == 0) {
                zero_tail = true;
                break;
            }
            if remaining < BATCH_HEADER_BYTES as u64 {
                bad = Some(format!(
                    "{remaining} trailing bytes, less than a batch header"
                ));
                break;
            }
            let head = walker
                .bytes(pos, PEEK_BYTES)
                .await
                .map_err(io_err("read", &path))?
                .expect("within file");
            let len = i32::from_be_bytes(
                head[8..12]
                    .try_into()
                    .expect("a slice of the array's length"),
            );
            let total = LOG_OVERHEAD as u64 + len.max(0) as u64;
            if len < (BATCH_HEADER_BYTES - LOG_OVERHEAD) as i32 || total > remaining {
                bad = Some(format!("batch length {len} with {remaining} bytes left"));
                break;
            }
            let bytes = walker
                .bytes(pos, total as usize)
                .await
                .map_err(io_err("read", &path))?
                .expect("within file");
            let validated = if self.gaps_allowed {
                validate_stored_batch(bytes)
            } else {
                validate_batch(bytes)
            };
            let h = match validated {
                Ok(h) => h,
                Err(e) => {
                    bad = Some(e.to_string());
                    break;
                }
            };
            let out_of_order = if self.gaps_allowed {
                h.base_offset < next
            } else {
                h.base_offset != next
            };
            if out_of_order
                || h.last_offset() - self.base_offset > i32::MAX as i64
                || pos + total > i32::MAX as u64
            {
                bad = Some(format!(
                    "batch offsets {}..={} not contiguous (expected base {next})",
                    h.base_offset,
                    h.last_offset()
                ));
                break;
            }
            self.index_batch(pos, h.last_offset(), h.max_timestamp, total, index_interval);
            next = h.last_offset() + 1;
            pos += total;
        }
        self.next_offset = next;
        self.size = pos;
        self.allocated = pos;
        if zero_tail {
            // Space preallocated before a crash (or a size change that reached the disk
            // before its data): the end of the log, cut as Kafka cuts a preallocated tail.
            tracing::info!(path = %path.display(), position = pos, "cutting zero tail of log segment");
            file.truncate(pos).map_err(io_err("truncate", &path))?;
            return Ok(Some(pos));
        }
        if let Some(reason) = bad {
            tracing::warn!(path = %path.display(), position = pos, %reason, "truncating log segment at first invalid byte");
            file.truncate(pos).map_err(io_err("truncate", &path))?;
            return Ok(Some(pos));
        }
        Ok(None)
    }
}

impl Segment {
    /// Rebuilds both indexes (in memory: the segment must be active) and the in-memory facts
    /// (next offset, max timestamp) by walking the batch headers of the `.log` synchronously
    /// (page-cache `pread`s), as `recover` does but without re-validating CRCs: used after a
    /// truncation wrote the kept prefix of this segment (already valid batches) to a new
    /// file. `size` must be the bytes of whole batches in the file.
    pub(crate) fn rebuild_sync(&mut self, index_interval: u32) -> Result<(), LogError> {
        self.index.inner.truncate_entries(0);
        self.time_index.inner.truncate_entries(0);
        self.bytes_since_index = 0;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        let path = self.log_path.clone();
        let mut walker = SyncWalker::open(&self.disk, &path, self.size)?;
        let mut pos = 0u64;
        let mut next = self.base_offset;
        while pos < self.size {
            let b = walker
                .bytes(pos, batch::PEEK_TS_BYTES)
                .map_err(io_err("read", &path))?
                .ok_or_else(|| corrupt_at(&path, pos, "partial batch header"))?;
            let p = batch::peek(b).map_err(|r| corrupt_at(&path, pos, r))?;
            let max_ts = batch::max_timestamp(b);
            self.index_batch(pos, p.last_offset, max_ts, p.total as u64, index_interval);
            next = p.last_offset + 1;
            pos += p.total as u64;
        }
        self.next_offset = next;
        Ok(())
    }
}

fn corrupt_at(path: &Path, position: u64, reason: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: path.to_path_buf(),
        position,
        reason: reason.into(),
    }
}

/// `Walker` with synchronous reads (page-cache `pread`s through `Disk::open_reader`), for the
/// rare synchronous walks of a truncation.
pub(crate) struct SyncWalker {
    reader: Reader,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

/// Window of a `SyncWalker`.
const SYNC_WALK_CHUNK: usize = 64 << 10;

impl SyncWalker {
    pub(crate) fn open(disk: &Disk, path: &Path, end: u64) -> Result<SyncWalker, LogError> {
        let reader = disk.open_reader(path).map_err(io_err("open", path))?;
        Ok(SyncWalker {
            reader,
            end,
            buf: Vec::new(),
            buf_start: 0,
        })
    }

    /// Bytes `[pos, pos + len)`, or `None` if that passes `end`.
    pub(crate) fn bytes(&mut self, pos: u64, len: usize) -> io::Result<Option<&[u8]>> {
        if pos + len as u64 > self.end {
            return Ok(None);
        }
        let have =
            pos >= self.buf_start && pos + len as u64 <= self.buf_start + self.buf.len() as u64;
        if !have {
            let want = (len.max(SYNC_WALK_CHUNK) as u64).min(self.end - pos) as usize;
            self.buf.resize(want, 0);
            self.buf_start = pos;
            if let Err(e) = self.reader.read_exact_at(&mut self.buf, pos) {
                self.buf.clear();
                return Err(e);
            }
        }
        let at = (pos - self.buf_start) as usize;
        Ok(Some(&self.buf[at..at + len]))
    }
}

/// Reads `[pos, pos + len)` (io_uring reads on the real disk, looping over short reads);
/// fewer bytes only at end of file.
pub(crate) async fn read_exact_at(
    file: &File,
    pos: u64,
    len: usize,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let start = out.len();
    while out.len() - start < len {
        let got = out.len() - start;
        if file.read_into(pos + got as u64, len - got, out).await? == 0 {
            break;
        }
    }
    Ok(())
}

/// Sequential reader of byte ranges of one file through a window of `chunk` bytes, for walking
/// batch headers without one read per header.
pub(crate) struct Walker {
    file: Rc<File>,
    end: u64,
    chunk: usize,
    buf: Vec<u8>,
    buf_start: u64,
}

impl Walker {
    pub(crate) fn new(file: Rc<File>, end: u64, chunk: usize) -> Walker {
        Walker {
            file,
            end,
            chunk,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    /// Bytes `[pos, pos + len)`, or `None` if that passes `end`.
    pub(crate) async fn bytes(&mut self, pos: u64, len: usize) -> io::Result<Option<&[u8]>> {
        if pos + len as u64 > self.end {
            return Ok(None);
        }
        let have =
            pos >= self.buf_start && pos + len as u64 <= self.buf_start + self.buf.len() as u64;
        if !have {
            let want = (len.max(self.chunk) as u64).min(self.end - pos) as usize;
            self.buf.clear();
            self.buf_start = pos;
            read_exact_at(&self.file, pos, want, &mut self.buf).await?;
            if self.buf.len() < len {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "log shorter than its recorded size",
                ));
            }
        }
        let at = (pos - self.buf_start) as usize;
        Ok(Some(&self.buf[at..at + len]))
    }
}
