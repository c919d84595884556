//! Sparse indexes, kept in memory. `IndexFile` owns one index's entries and its file (shared by
//! the offset index here and the time index in `time_index`); `OffsetIndex` is Kafka's `.index`:
//! entries of (relative offset u32, file position u32), big-endian, 8 bytes each, appended
//! every `index.interval.bytes` of log, keyed (as Kafka does) by the LAST offset of the batch
//! that starts at that position, so keys and positions both strictly increase.
//!
//! Why in memory and not mmap: the entries are written to the file (Kafka's format, exactly
//! `entries * size` bytes) only when the segment becomes inactive (roll, clean close), through
//! the storage seam, so the log runs unchanged on the simulated disk; and a mapping of a
//! preallocated sparse file costs a page fault per new page touched (30% of CPU with 1,000
//! partitions). Losing the active segment's index in a crash is harmless: recovery always
//! re-validates the active segment and rebuilds its indexes from the log.
//!
//! Bounds: `capacity` (entries) is `segment.index.bytes / size` for the active segment (the log
//! rolls when it is reached, as Kafka does), reserved up front (virtual memory; pages are
//! touched as entries are added), and exactly the entries for an inactive one. No fd is kept: the file is opened to load or write it.

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::storage::{Disk, File};

/// One index: its entries and the file they are saved to.
pub(crate) struct IndexFile {
    path: PathBuf,
    buf: Vec<u8>,
    entry_size: usize,
    capacity: usize,
    /// The file as written by the last `save`, until a sync job takes it.
    saved: Option<Rc<File>>,
}

impl IndexFile {
    /// Loads the entries in the file (a missing file is empty; a partial trailing entry is
    /// dropped; the caller sanity-checks or resets). `capacity_bytes`, if given, is the room
    /// for appends (rounded down to whole entries, never below the entries present); `None`
    /// means no appends (inactive).
    pub(crate) fn open(
        disk: &Disk,
        path: &Path,
        entry_size: usize,
        capacity_bytes: Option<u64>,
    ) -> io::Result<IndexFile> {
        let mut buf = match disk.read_file(path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        buf.truncate(buf.len() / entry_size * entry_size);
        let mut index = IndexFile {
            path: path.to_path_buf(),
            buf,
            entry_size,
            capacity: 0,
            saved: None,
        };
        index.resize(capacity_bytes.unwrap_or(0));
        Ok(index)
    }

    /// Room for `cap` bytes of entries (rounded down), never below the current entries.
    pub(crate) fn resize(&mut self, cap: u64) {
        self.capacity = ((cap / self.entry_size as u64) as usize).max(self.entries());
        // Reserved up front so an append never reallocates (the append path allocates
        // nothing); like the sparse file this replaced, untouched pages cost no memory (an
        // allocation this large is its own anonymous mapping). Released by `trim`.
        let bytes = self.capacity * self.entry_size;
        if bytes > self.buf.capacity() {
            self.buf.reserve_exact(bytes - self.buf.len());
        } else if self.capacity == self.entries() {
            self.buf.shrink_to_fit();
        }
    }

    /// Writes the file as exactly its entries (segment rolled / clean close / recovered) and
    /// stops taking appends. Page cache only: `take_saved` hands the file to a sync job.
    pub(crate) fn trim(&mut self, disk: &Disk) -> io::Result<()> {
        self.resize(0);
        let (file, len) = disk.open(&self.path, true)?;
        if len != self.buf.len() as u64 {
            file.truncate(self.buf.len() as u64)?;
        }
        if !self.buf.is_empty() {
            file.write_at(&self.buf, 0)?;
        }
        self.saved = Some(Rc::new(file));
        Ok(())
    }

    /// The file written by the last `trim`, for one fdatasync (None if none since).
    pub(crate) fn take_saved(&mut self) -> Option<Rc<File>> {
        self.saved.take()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
    pub(crate) fn entries(&self) -> usize {
        self.buf.len() / self.entry_size
    }
    pub(crate) fn is_full(&self) -> bool {
        self.entries() >= self.capacity
    }
    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.entries());
        &self.buf[i * self.entry_size..(i + 1) * self.entry_size]
    }
    /// Appends an entry; false (nothing written) when the capacity is reached.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        debug_assert_eq!(bytes.len(), self.entry_size);
        if self.is_full() {
            return false;
        }
        self.buf.extend_from_slice(bytes);
        true
    }
    /// Forgets entries past `n` (recovery rebuilds from scratch with `truncate_entries(0)`).
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        self.buf.truncate(n.min(self.entries()) * self.entry_size);
    }
    /// Binary search: the last entry `i` with `key(i) <= target`, if any.
    pub(crate) fn floor_by<F: Fn(&[u8]) -> i64>(&self, target: i64, key: F) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(self.entry(mid)) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

/// Kafka's offset index of one segment.
pub(crate) struct OffsetIndex {
    pub(crate) inner: IndexFile,
    base_offset: i64,
}

pub(crate) const OFFSET_ENTRY: usize = 8;

impl OffsetIndex {
    pub(crate) fn open(
        disk: &Disk,
        path: &Path,
        base_offset: i64,
        capacity_bytes: Option<u64>,
    ) -> io::Result<OffsetIndex> {
        Ok(OffsetIndex {
            inner: IndexFile::open(disk, path, OFFSET_ENTRY, capacity_bytes)?,
            base_offset,
        })
    }

    fn decode(base: i64, e: &[u8]) -> (i64, u32) {
        let rel = u32::from_be_bytes(e[0..4].try_into().unwrap());
        let pos = u32::from_be_bytes(e[4..8].try_into().unwrap());
        (base + rel as i64, pos)
    }

    /// Entry `i` as (absolute offset, position).
    pub(crate) fn get(&self, i: usize) -> (i64, u32) {
        Self::decode(self.base_offset, self.inner.entry(i))
    }

    pub(crate) fn last(&self) -> Option<(i64, u32)> {
        self.inner.entries().checked_sub(1).map(|i| self.get(i))
    }

    /// Appends (offset, position); the caller keeps both increasing and offset - base within
    /// u32 (the segment rolls before either could overflow). False when full.
    pub(crate) fn append(&mut self, offset: i64, position: u32) -> bool {
        debug_assert!(!self
            .last()
            .is_some_and(|(o, p)| offset <= o || position <= p));
        let mut e = [0u8; OFFSET_ENTRY];
        e[0..4].copy_from_slice(&((offset - self.base_offset) as u32).to_be_bytes());
        e[4..8].copy_from_slice(&position.to_be_bytes());
        self.inner.push(&e)
    }

    /// Position of the indexed batch with the largest key <= `offset`, or 0: the batch
    /// containing `offset` starts at or after it.
    pub(crate) fn lookup(&self, offset: i64) -> u32 {
        let base = self.base_offset;
        self.inner
            .floor_by(offset, |e| Self::decode(base, e).0)
            .map_or(0, |i| self.get(i).1)
    }

    /// Kafka's sanity check for an index loaded from disk: keys and positions strictly
    /// increasing and every position inside the log.
    pub(crate) fn sane(&self, log_size: u64) -> bool {
        let mut prev: Option<(i64, u32)> = None;
        for i in 0..self.inner.entries() {
            let (o, p) = self.get(i);
            if p as u64 >= log_size || o < self.base_offset {
                return false;
            }
            if let Some((po, pp)) = prev {
                if o <= po || p <= pp {
                    return false;
                }
            }
            prev = Some((o, p));
        }
        true
    }
}
