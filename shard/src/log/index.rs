//! Sparse indexes, kept in memory. `IndexFile` owns one index's entries and its file (shared by
//! the offset index here and the time index in `time_index`); `OffsetIndex` is Kafka's `.index`:
//! entries of (relative offset u32, file position u32), big-endian, 8 bytes each, appended
//! every `index.interval.bytes` of log, keyed (as Kafka does) by the LAST offset of the batch
//! that starts at that position, so keys and positions both strictly increase.
//!
//! Where the entries live: the active segment's (and one being recovered) in memory once it
//! takes appends, written to the file (Kafka's format, exactly `entries * size` bytes)
//! through the storage seam when the segment becomes inactive (roll, clean close, recovery);
//! an inactive segment's, and an active one's until its first append after open, only in
//! the file, read with a few page-cache `pread`s per lookup (binary search), so old segments
//! and idle partitions cost no memory. Losing the active segment's index in a crash is harmless: recovery always
//! re-validates the active segment and rebuilds its indexes from the log.
//!
//! Why not mmap (as before): a mapping cannot live on the simulated disk, and page faults in
//! mappings of preallocated sparse index files were 30% of CPU with 1,000 partitions.
//!
//! Bounds: `capacity` (entries) is `segment.index.bytes / size` for the active segment (the log
//! rolls when it is reached, as Kafka does); memory is the entries present (from one page,
//! doubling); an inactive segment's entries are not in memory. No fd is kept:
//! the file is opened to load, write or search it.

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::storage::{Disk, File, Reader};

/// Bytes of entries reserved when an index starts taking appends (one page).
const INITIAL_RESERVE: usize = 4096;

/// Largest entry size (the time index's); entries are handed out in a buffer this long.
pub(crate) const MAX_ENTRY: usize = 12;

/// Where an index's entries are.
enum Entries {
    /// In memory: the active segment, or one being recovered (entries are added).
    Loaded(Vec<u8>),
    /// Only in the file (an inactive segment): `count` entries, read on demand with a few
    /// page-cache `pread`s per lookup, so old segments cost no memory.
    OnDisk { count: usize },
}

/// One index: its entries and the file they are saved to.
pub(crate) struct IndexFile {
    disk: Disk,
    path: PathBuf,
    entries: Entries,
    entry_size: usize,
    capacity: usize,
    /// The file as written by the last `trim`, until a sync job takes it.
    saved: Option<Rc<File>>,
}

impl IndexFile {
    /// Leaves the entries in the file (its length is all that is read); `ensure_loaded`
    /// brings them into memory before the first append. `capacity_bytes` given (active or to
    /// be recovered): appends may add entries up to that many bytes. `None` (inactive,
    /// trusted): full. A missing file is empty; a partial trailing entry is ignored; the caller
    /// sanity-checks or resets.
    pub(crate) fn open(
        disk: &Disk,
        path: &Path,
        entry_size: usize,
        capacity_bytes: Option<u64>,
    ) -> io::Result<IndexFile> {
        let mut index = IndexFile {
            disk: disk.clone(),
            path: path.to_path_buf(),
            entries: Entries::OnDisk { count: 0 },
            entry_size,
            capacity: 0,
            saved: None,
        };
        index.entries = match disk.file_len(path) {
            Ok(len) => Entries::OnDisk {
                count: (len / entry_size as u64) as usize,
            },
            // Nothing to load: a new segment's appends start from an empty buffer.
            Err(e) if e.kind() == io::ErrorKind::NotFound && capacity_bytes.is_some() => {
                Entries::Loaded(Vec::new())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Entries::OnDisk { count: 0 },
            Err(e) => return Err(e),
        };
        if let Some(cap) = capacity_bytes {
            index.resize(cap);
        }
        Ok(index)
    }

    /// Reads the entries into memory (a no-op if they are).
    fn load(&mut self) -> io::Result<()> {
        if let Entries::OnDisk { .. } = self.entries {
            let mut buf = match self.disk.read_file(&self.path) {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(e),
            };
            buf.truncate(buf.len() / self.entry_size * self.entry_size);
            self.entries = Entries::Loaded(buf);
        }
        Ok(())
    }

    /// Brings the entries into memory (a no-op if they are), with room reserved as `resize`
    /// says: before the first append to an active segment after open.
    pub(crate) fn ensure_loaded(&mut self) -> io::Result<()> {
        if let Entries::OnDisk { .. } = self.entries {
            self.load()?;
            self.reserve();
        }
        Ok(())
    }

    /// Room for `cap` bytes of entries (rounded down), never below the current entries. The
    /// entries stay where they are (see `ensure_loaded`).
    pub(crate) fn resize(&mut self, cap: u64) {
        self.capacity = ((cap / self.entry_size as u64) as usize).max(self.entries());
        self.reserve();
    }

    fn reserve(&mut self) {
        if let Entries::Loaded(buf) = &mut self.entries {
            // A first page reserved up front; beyond it the buffer doubles, so an append
            // allocates only when it adds the entry past a power of two (amortized per index
            // entry, i.e. per `index.interval.bytes` of log, never per record), and an idle
            // partition costs a page per index, not `segment.index.bytes`.
            let bytes = (self.capacity * self.entry_size).min(INITIAL_RESERVE);
            if bytes > buf.capacity() {
                buf.reserve_exact(bytes - buf.len());
            }
        }
    }

    /// Writes the file as exactly its entries (segment rolled / clean close / recovered),
    /// stops taking appends and drops the in-memory copy. Page cache only: `take_saved` hands
    /// the file to a sync job.
    pub(crate) fn trim(&mut self, disk: &Disk) -> io::Result<()> {
        let Entries::Loaded(buf) = &self.entries else {
            self.capacity = self.entries();
            return Ok(()); // already only on disk, as written
        };
        let (file, len) = disk.open(&self.path, true)?;
        if len != buf.len() as u64 {
            file.truncate(buf.len() as u64)?;
        }
        if !buf.is_empty() {
            file.write_at(buf, 0)?;
        }
        self.saved = Some(Rc::new(file));
        self.entries = Entries::OnDisk {
            count: buf.len() / self.entry_size,
        };
        self.capacity = self.entries();
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
        match &self.entries {
            Entries::Loaded(buf) => buf.len() / self.entry_size,
            Entries::OnDisk { count } => *count,
        }
    }
    pub(crate) fn is_full(&self) -> bool {
        self.entries() >= self.capacity
    }

    /// A reader of the entries: the memory, or the file opened once for a lookup.
    fn reader(&self) -> Option<EntryReader<'_>> {
        match &self.entries {
            Entries::Loaded(buf) => Some(EntryReader::Mem(buf)),
            Entries::OnDisk { .. } => match self.disk.open_reader(&self.path) {
                Ok(r) => Some(EntryReader::Disk(r)),
                Err(error) => {
                    // Lookups degrade to scanning from the segment start; the log still
                    // answers correctly.
                    tracing::warn!(path = %self.path.display(), %error, "cannot read index");
                    None
                }
            },
        }
    }

    /// Entry `i` (its first `entry_size` bytes), None if it cannot be read.
    pub(crate) fn entry(&self, i: usize) -> Option<[u8; MAX_ENTRY]> {
        debug_assert!(i < self.entries());
        self.reader()?.entry(i, self.entry_size)
    }

    /// Appends an entry; false (nothing written) when the capacity is reached.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        debug_assert_eq!(bytes.len(), self.entry_size);
        if self.is_full() {
            return false;
        }
        match &mut self.entries {
            Entries::Loaded(buf) => {
                buf.extend_from_slice(bytes);
                true
            }
            Entries::OnDisk { .. } => false,
        }
    }
    /// Forgets entries past `n` (recovery rebuilds from scratch with `truncate_entries(0)`).
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        if n == 0 && matches!(self.entries, Entries::OnDisk { .. }) {
            self.entries = Entries::Loaded(Vec::new());
        }
        match &mut self.entries {
            Entries::Loaded(buf) => buf.truncate(n * self.entry_size),
            Entries::OnDisk { count } => *count = (*count).min(n),
        }
    }
    /// Binary search: the last entry with `key(entry) <= target`, if any (None too if the
    /// index cannot be read: the caller then scans from the segment start).
    pub(crate) fn floor_by<F: Fn(&[u8]) -> i64>(
        &self,
        target: i64,
        key: F,
    ) -> Option<[u8; MAX_ENTRY]> {
        let n = self.entries();
        if n == 0 {
            return None;
        }
        let reader = self.reader()?;
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(&reader.entry(mid, self.entry_size)?) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        reader.entry(lo.checked_sub(1)?, self.entry_size)
    }

    /// The bytes a sanity check looks at, None if they cannot be read: every entry when they
    /// are in memory; for an inactive segment, as Kafka's `AbstractIndex.sanityCheck`, only the
    /// first and last entries (two `pread`s, so opening a log with many segments reads no
    /// whole index).
    pub(crate) fn with_checked<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        match &self.entries {
            Entries::Loaded(buf) => Some(f(buf)),
            Entries::OnDisk { count: 0 } => Some(f(&[])),
            Entries::OnDisk { count } => {
                let reader = self.reader()?;
                let size = self.entry_size;
                let mut two = reader.entry(0, size)?[..size].to_vec();
                if *count > 1 {
                    two.extend_from_slice(&reader.entry(count - 1, size)?[..size]);
                }
                Some(f(&two))
            }
        }
    }
}

enum EntryReader<'a> {
    Mem(&'a [u8]),
    Disk(Reader),
}

impl EntryReader<'_> {
    fn entry(&self, i: usize, size: usize) -> Option<[u8; MAX_ENTRY]> {
        let mut e = [0u8; MAX_ENTRY];
        match self {
            EntryReader::Mem(buf) => e[..size].copy_from_slice(buf.get(i * size..(i + 1) * size)?),
            EntryReader::Disk(r) => r.read_exact_at(&mut e[..size], (i * size) as u64).ok()?,
        }
        Some(e)
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
        let rel = u32::from_be_bytes(e[0..4].try_into().expect("a slice of the array's length"));
        let pos = u32::from_be_bytes(e[4..8].try_into().expect("a slice of the array's length"));
        (base + rel as i64, pos)
    }

    /// Entry `i` as (absolute offset, position).
    pub(crate) fn get(&self, i: usize) -> Option<(i64, u32)> {
        Some(Self::decode(self.base_offset, &self.inner.entry(i)?))
    }

    pub(crate) fn last(&self) -> Option<(i64, u32)> {
        self.get(self.inner.entries().checked_sub(1)?)
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
            .map_or(0, |e| Self::decode(base, &e).1)
    }

    /// Position of the last indexed batch starting at or before `position`, or 0 (a batch
    /// boundary: every entry is a batch's start).
    pub(crate) fn floor_position(&self, position: u64) -> u32 {
        let base = self.base_offset;
        let target = position.min(i64::MAX as u64) as i64;
        self.inner
            .floor_by(target, |e| i64::from(Self::decode(base, e).1))
            .map_or(0, |e| Self::decode(base, &e).1)
    }

    /// Sanity check for an index loaded from disk: keys and positions strictly increasing and
    /// every position inside the log (for an inactive segment: its first and last entries).
    pub(crate) fn sane(&self, log_size: u64) -> bool {
        let base = self.base_offset;
        self.inner
            .with_checked(|all| {
                let mut prev: Option<(i64, u32)> = None;
                for e in all.chunks_exact(OFFSET_ENTRY) {
                    let (o, p) = Self::decode(base, e);
                    if p as u64 >= log_size || o < base {
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
            })
            .unwrap_or(false)
    }
}
