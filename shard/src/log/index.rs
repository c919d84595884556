//! Memory-mapped sparse indexes. `IndexFile` owns one index file and its mapping (shared by the
//! offset index here and the time index in `time_index`); `OffsetIndex` is Kafka's `.index`:
//! entries of (relative offset u32, file position u32), big-endian, 8 bytes each, appended
//! every `index.interval.bytes` of log, keyed (as Kafka does) by the LAST offset of the batch
//! that starts at that position, so keys and positions both strictly increase.
//!
//! Bounds: the file of the active segment is preallocated (sparse) to `segment.index.bytes`
//! and mapped whole; it is trimmed to its entries when the segment rolls or the log closes, so
//! an index of an inactive segment is exactly `entries * 8` bytes long. The index never does
//! I/O other than through the mapping (plus ftruncate when resizing); durability comes from
//! fdatasync on a fd of the file (any fd: it writes back the inode's dirty pages, the
//! mapping's included).
//!
//! File descriptors: none is kept. A mapping needs no open fd, so the file is opened only to
//! map, resize or sync it and closed again: with thousands of partitions, two index fds per
//! segment would exhaust the process's fd limit long before memory.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::{AsRawFd, FromRawFd, IntoRawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::BufferedFile;
use memmap2::{MmapMut, MmapOptions};

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// One index file: its path and its mapping (no fd; see the module comment).
pub(crate) struct IndexFile {
    path: PathBuf,
    /// Maps the whole file; `None` when the file is empty (a zero-length map is an error).
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
}

impl IndexFile {
    /// Opens (creating if missing) and maps the whole file. `entries` is derived from the file
    /// length (the caller sanity-checks or resets); `capacity_bytes`, if given, first resizes
    /// the file to that many bytes (rounded down to whole entries), never below the entries
    /// already present.
    pub(crate) fn open(
        path: &Path,
        entry_size: usize,
        capacity_bytes: Option<u64>,
    ) -> io::Result<IndexFile> {
        let file = open_rw(path)?;
        let len = file.metadata()?.len();
        let entries = (len / entry_size as u64) as usize;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            mmap: None,
            entry_size,
            entries,
        };
        match capacity_bytes {
            Some(cap) => index.resize_with(&file, cap)?,
            None => index.remap(&file, len)?,
        }
        Ok(index)
    }

    fn remap(&mut self, file: &File, len: u64) -> io::Result<()> {
        self.mmap = None;
        if len > 0 {
            // Safety: the file belongs to this partition directory, which only this shard
            // touches; nothing truncates it behind the mapping's back (resize drops the map
            // before ftruncate).
            let map = unsafe {
                MmapOptions::new()
                    .len(len as usize)
                    .map_mut(file.as_raw_fd())?
            };
            self.mmap = Some(map);
        }
        Ok(())
    }

    /// Resizes the file (and the mapping) to `cap` bytes rounded down to whole entries, but
    /// never below the current entries. Sparse: preallocation costs no disk blocks.
    pub(crate) fn resize(&mut self, cap: u64) -> io::Result<()> {
        let file = open_rw(&self.path)?;
        self.resize_with(&file, cap)
    }

    fn resize_with(&mut self, file: &File, cap: u64) -> io::Result<()> {
        let es = self.entry_size as u64;
        let len = (cap / es * es).max(self.entries as u64 * es);
        self.mmap = None;
        // Synchronous metadata call; only on roll, close and open, not per append.
        file.set_len(len)?;
        self.remap(file, len)
    }

    /// Shrinks the file to exactly its entries (segment rolled / clean close).
    pub(crate) fn trim(&mut self) -> io::Result<()> {
        self.resize(0)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
    /// A fresh fd of the file for one fdatasync (through io_uring); closed when the sync job
    /// drops it.
    pub(crate) fn sync_file(&self) -> io::Result<Rc<BufferedFile>> {
        let file = OpenOptions::new().read(true).open(&self.path)?;
        // Safety: the fd was just opened and is owned by nothing else.
        Ok(Rc::new(unsafe {
            BufferedFile::from_raw_fd(file.into_raw_fd())
        }))
    }
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }
    fn capacity(&self) -> usize {
        self.mmap.as_ref().map_or(0, |m| m.len() / self.entry_size)
    }
    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.capacity()
    }
    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.entries);
        let m = self.mmap.as_ref().expect("entry of an empty index");
        &m[i * self.entry_size..(i + 1) * self.entry_size]
    }
    /// Appends an entry; false (nothing written) when the preallocated space is full.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        debug_assert_eq!(bytes.len(), self.entry_size);
        if self.is_full() {
            return false;
        }
        let at = self.entries * self.entry_size;
        let m = self.mmap.as_mut().expect("capacity > 0 implies a mapping");
        m[at..at + self.entry_size].copy_from_slice(bytes);
        self.entries += 1;
        true
    }
    /// Forgets entries past `n` (recovery rebuilds from scratch with `truncate_entries(0)`).
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }
    /// Binary search: the last entry `i` with `key(i) <= target`, if any.
    pub(crate) fn floor_by<F: Fn(&[u8]) -> i64>(&self, target: i64, key: F) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries);
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
        path: &Path,
        base_offset: i64,
        capacity_bytes: Option<u64>,
    ) -> io::Result<OffsetIndex> {
        Ok(OffsetIndex {
            inner: IndexFile::open(path, OFFSET_ENTRY, capacity_bytes)?,
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
