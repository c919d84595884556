//! The recovery point of one partition directory, its clean-shutdown marker, and its durable
//! log start offset.
//!
//! `recovery-point` holds two 32-byte slots, written alternately in place after every
//! fdatasync of the log: magic `KRP1`, the log end offset that was synced (i64), the base
//! offset of the segment holding it (i64), the byte position in that segment's `.log` (u64),
//! and an FNV-1a checksum of the 28 bytes before it. The valid slot with the larger offset
//! wins. Recovery re-validates from the start of that segment on; every earlier segment was
//! synced (with its indexes) before the point moved past it.
//!
//! Why no fsync / rename here (Kafka and the item 7 write checkpoints as tmp, fsync,
//! rename, directory fsync): the point is written only after the data it names is durable, so
//! a stale point (the write not yet on disk) only makes recovery scan more, and a torn slot
//! fails its checksum while the other slot still holds the previous point (so a power loss
//! during the write costs one sync round of extra scanning, not a scan of everything). One
//! 32-byte pwrite per sync round instead of two fsyncs and a rename per partition keeps the
//! group commit cheap. A 32-byte file written once at its creation takes both slots as a
//! first-generation file did.
//!
//! `log-start-offset` is the opposite case: a stale value is unsafe (a power loss can undo any
//! subset of a retention's unsynced file removals, and the gap left behind looks like lost
//! data to the next recovery), so it is written the durable way before the removals.
//!
//! `.clean_shutdown` is written by a clean close, after every index is trimmed and synced and
//! the log ends on a batch boundary. It holds what the close left (`CleanState`: the active
//! segment's base, size, next offset and timestamps, and a hash of the segment list), so the
//! next open reads the log's end from it instead of from the `.log`, and opens no file of an
//! idle partition. Open does not remove it (a durable removal is a directory fsync per
//! partition, most of a restart's time). Instead it is trusted only while the directory still
//! matches it: appends change the active segment's size (a write, or a preallocation, that
//! reaches the disk changes it; one that does not leaves the log as the close left it), a
//! roll or a retention deletion changes the segment list. The two changes that could restore
//! the same size and list with other bytes, a follower's truncations, remove it durably
//! first (`truncate`). A marker that does not match is removed and the log recovered from
//! its recovery point. The marker's content is not synced (its name is, with the directory):
//! a power loss may leave it empty or torn, which is not trusted, and so is an empty marker
//! of an older version (its log is recovered once, from the recovery point). An empty marker
//! cannot be trusted blindly any more: it may be one whose content was lost while the log
//! took unsynced appends after a clean open.

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};

use super::fd_cache::CachedFd;
use crate::storage::Disk;

pub(crate) const RECOVERY_POINT_FILE: &str = "recovery-point";
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = ".clean_shutdown";
pub(crate) const LOG_START_FILE: &str = "log-start-offset";

const MAGIC: &[u8; 4] = b"KRP1";
const LEN: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// Offsets below this are durable.
    pub next_offset: i64,
    pub segment_base: i64,
    pub position: u64,
}

fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

impl Checkpoint {
    fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4..12].copy_from_slice(&self.next_offset.to_be_bytes());
        b[12..20].copy_from_slice(&self.segment_base.to_be_bytes());
        b[20..28].copy_from_slice(&self.position.to_be_bytes());
        let sum = fnv1a(&b[0..28]);
        b[28..32].copy_from_slice(&sum.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Checkpoint> {
        if b.len() < LEN || &b[0..4] != MAGIC || fnv1a(&b[0..28]).to_be_bytes() != b[28..32] {
            return None;
        }
        let cp = Checkpoint {
            next_offset: i64::from_be_bytes(
                b[4..12].try_into().expect("a slice of the array's length"),
            ),
            segment_base: i64::from_be_bytes(
                b[12..20].try_into().expect("a slice of the array's length"),
            ),
            position: u64::from_be_bytes(
                b[20..28].try_into().expect("a slice of the array's length"),
            ),
        };
        (cp.next_offset >= cp.segment_base && cp.segment_base >= 0).then_some(cp)
    }
}

/// The recovery-point file of one partition. Its fd is opened on demand through the shard's
/// `FdCache`: a log that is not synced holds none.
pub(crate) struct CheckpointFile {
    disk: Disk,
    path: PathBuf,
    fd: CachedFd,
    /// The slot the next write goes to (the other one holds the newest valid point); None
    /// until the file is read (a clean open does not read it).
    next_slot: Cell<Option<u64>>,
}

/// The newest valid point in `bytes` (the file) and the slot the next write goes to.
fn newest(bytes: &[u8]) -> (Option<Checkpoint>, u64) {
    let slot = |i: usize| {
        bytes
            .get(i * LEN..(i + 1) * LEN)
            .and_then(Checkpoint::decode)
    };
    match (slot(0), slot(1)) {
        (Some(a), Some(b)) if b.next_offset > a.next_offset => (Some(b), 0),
        (Some(a), _) => (Some(a), 1),
        (None, Some(b)) => (Some(b), 0),
        (None, None) => (None, 0),
    }
}

impl CheckpointFile {
    /// Reads the file and returns the newest valid checkpoint it holds, if any.
    pub(crate) fn open(
        disk: &Disk,
        dir: &Path,
    ) -> io::Result<(CheckpointFile, Option<Checkpoint>)> {
        let cf = CheckpointFile::unread(disk, dir);
        let (cp, next_slot) = newest(&cf.read()?);
        cf.next_slot.set(Some(next_slot));
        Ok((cf, cp))
    }

    /// The file, not read yet: the first write reads it to find the older slot.
    pub(crate) fn unread(disk: &Disk, dir: &Path) -> CheckpointFile {
        CheckpointFile {
            disk: disk.clone(),
            path: dir.join(RECOVERY_POINT_FILE),
            fd: CachedFd::new(),
            next_slot: Cell::new(None),
        }
    }

    fn read(&self) -> io::Result<Vec<u8>> {
        match self.disk.read_file(&self.path) {
            Ok(b) => Ok(b),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// One 32-byte page-cache write into the older slot (see the module comment for why it is
    /// not synced).
    pub(crate) fn write(&self, cp: &Checkpoint) -> io::Result<()> {
        let slot = match self.next_slot.get() {
            Some(slot) => slot,
            None => newest(&self.read()?).1,
        };
        let disk = &self.disk;
        let file = self
            .fd
            .get(|| disk.open(&self.path, true).map(|(f, _)| f))?;
        file.write_at(&cp.encode(), slot * LEN as u64)?;
        self.next_slot.set(Some(1 - slot));
        Ok(())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// The log start offset recorded durably in `log-start-offset` (see `write_log_start`), if any.
/// Unreadable content counts as none: the file is only ever replaced whole (tmp, fdatasync,
/// rename, directory fsync).
pub(crate) fn read_log_start(disk: &Disk, dir: &Path) -> io::Result<Option<i64>> {
    let bytes = match disk.read_file(&dir.join(LOG_START_FILE)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let offset = match lines.as_slice() {
        // Kafka's checkpoint text: version 0, one entry.
        ["0", "1", offset] => offset.parse().ok(),
        // The first version of this file (version, offset), before DeleteRecords shared it.
        ["0", offset] => offset.parse().ok(),
        _ => None,
    };
    if offset.is_none() {
        tracing::warn!(dir = %dir.display(), "malformed log start offset file ignored");
    }
    Ok(offset.filter(|&o: &i64| o >= 0))
}

/// Records `offset` as the log start durably, before any segment below it is removed: a power
/// loss can then resurrect any subset of the removed files, and the next open deletes them
/// again instead of taking the gap they leave for lost data. Retention and DeleteRecords both
/// write it (DeleteRecords before answering, so an acknowledged deletion survives a power
/// loss). Format: Kafka's checkpoint text `0\n1\n<offset>\n` (version, entry count, entry;
/// Kafka keeps one `log-start-offset-checkpoint` per log directory, we keep one file per
/// partition, like the recovery point). Blocks the thread for one fdatasync and one directory
/// fsync: only when the start moves.
pub(crate) fn write_log_start(disk: &Disk, dir: &Path, offset: i64) -> io::Result<()> {
    crate::fsyncs::attribute(crate::fsyncs::SyncReason::LogStartOffset, 2);
    disk.write_file_durable_blocking(
        &dir.join(LOG_START_FILE),
        format!("0\n1\n{offset}\n").as_bytes(),
    )
}

pub(crate) fn clean_marker(dir: &Path) -> PathBuf {
    dir.join(CLEAN_SHUTDOWN_FILE)
}

const CLEAN_MAGIC: &[u8; 4] = b"KCS1";
/// Bytes of a `CleanState` marker: magic, eight u64/i64 fields, FNV-1a checksum.
const CLEAN_LEN: usize = 4 + 8 * 8 + 4;

/// What a clean close left (see the module comment): enough to open the log without reading
/// its `.log` or its active segment's indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CleanState {
    pub active_base: i64,
    /// Bytes of the active `.log` (its length: a closed segment holds no preallocated space).
    pub active_size: u64,
    pub next_offset: i64,
    /// Max timestamp of the active segment's first batch (`segment.ms`), if it has one.
    pub first_timestamp: Option<i64>,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub segment_count: u64,
    /// FNV-1a (64-bit) of every segment's base offset, oldest first.
    pub bases_hash: u64,
}

/// What `.clean_shutdown` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CleanMarker {
    /// Written before the marker held a state, or its content lost: not trusted.
    Empty,
    State(CleanState),
    /// Unreadable (torn, or written by a later format): not trusted.
    Invalid,
}

/// FNV-1a, 64-bit, of the base offsets (big-endian).
pub(crate) fn bases_hash(bases: impl Iterator<Item = i64>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for base in bases {
        for b in base.to_be_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

impl CleanState {
    pub(crate) fn encode(&self) -> [u8; CLEAN_LEN] {
        let mut b = [0u8; CLEAN_LEN];
        b[0..4].copy_from_slice(CLEAN_MAGIC);
        let fields = [
            self.active_base,
            self.active_size as i64,
            self.next_offset,
            self.first_timestamp.unwrap_or(i64::MIN),
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.segment_count as i64,
            self.bases_hash as i64,
        ];
        for (i, f) in fields.iter().enumerate() {
            b[4 + i * 8..12 + i * 8].copy_from_slice(&f.to_be_bytes());
        }
        let sum = fnv1a(&b[..CLEAN_LEN - 4]);
        b[CLEAN_LEN - 4..].copy_from_slice(&sum.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<CleanState> {
        if b.len() != CLEAN_LEN
            || &b[0..4] != CLEAN_MAGIC
            || fnv1a(&b[..CLEAN_LEN - 4]).to_be_bytes() != b[CLEAN_LEN - 4..]
        {
            return None;
        }
        let f = |i: usize| {
            i64::from_be_bytes(
                b[4 + i * 8..12 + i * 8]
                    .try_into()
                    .expect("a slice of the array's length"),
            )
        };
        let state = CleanState {
            active_base: f(0),
            active_size: f(1) as u64,
            next_offset: f(2),
            first_timestamp: Some(f(3)).filter(|&t| t != i64::MIN),
            max_timestamp: f(4),
            offset_of_max_timestamp: f(5),
            segment_count: f(6) as u64,
            bases_hash: f(7) as u64,
        };
        let sane = state.active_base >= 0
            && state.next_offset >= state.active_base
            && state.active_size <= i32::MAX as u64
            && state.segment_count > 0;
        sane.then_some(state)
    }

    /// Whether the directory still holds the log this state describes: the same segments,
    /// the active one as long as the close left it.
    pub(crate) fn matches(&self, bases: &[i64], active_size: u64) -> bool {
        bases.last() == Some(&self.active_base)
            && bases.len() as u64 == self.segment_count
            && active_size == self.active_size
            && bases_hash(bases.iter().copied()) == self.bases_hash
    }
}

/// The marker in `dir`, if any (one read: no marker is the common unclean case).
pub(crate) fn read_clean_marker(disk: &Disk, dir: &Path) -> io::Result<Option<CleanMarker>> {
    let bytes = match disk.read_file(&clean_marker(dir)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(if bytes.is_empty() {
        CleanMarker::Empty
    } else {
        CleanState::decode(&bytes).map_or(CleanMarker::Invalid, CleanMarker::State)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let cp = Checkpoint {
            next_offset: 42,
            segment_base: 40,
            position: 4096,
        };
        assert_eq!(Checkpoint::decode(&cp.encode()), Some(cp));
        let mut b = cp.encode();
        b[7] ^= 1;
        assert_eq!(Checkpoint::decode(&b), None);
        assert_eq!(Checkpoint::decode(&[0u8; 32]), None);
        assert_eq!(Checkpoint::decode(&b[..10]), None);
    }

    #[test]
    fn clean_state_round_trip_and_match() {
        let bases = [0i64, 100, 250];
        let state = CleanState {
            active_base: 250,
            active_size: 4096,
            next_offset: 300,
            first_timestamp: None,
            max_timestamp: 77,
            offset_of_max_timestamp: 299,
            segment_count: 3,
            bases_hash: bases_hash(bases.iter().copied()),
        };
        assert_eq!(CleanState::decode(&state.encode()), Some(state));
        let with_ts = CleanState {
            first_timestamp: Some(5),
            ..state
        };
        assert_eq!(CleanState::decode(&with_ts.encode()), Some(with_ts));
        let mut torn = state.encode();
        torn[20] ^= 1;
        assert_eq!(CleanState::decode(&torn), None);
        assert!(state.matches(&bases, 4096));
        assert!(!state.matches(&bases, 4097), "appended after the close");
        assert!(
            !state.matches(&[100, 250], 4096),
            "retention deleted a segment"
        );
        assert!(!state.matches(&[0, 101, 250], 4096), "another segment list");
        assert!(!state.matches(&[0, 100, 250, 300], 4096), "rolled");
    }

    #[test]
    fn an_unread_file_writes_the_older_slot() {
        use crate::storage::SimDisk;
        let disk = Disk::Sim(SimDisk::new(9));
        let dir = Path::new("/q");
        disk.create_dir_all(dir).unwrap();
        let cp = |n| Checkpoint {
            next_offset: n,
            segment_base: 0,
            position: n as u64,
        };
        let (f, _) = CheckpointFile::open(&disk, dir).unwrap();
        f.write(&cp(1)).unwrap();
        f.write(&cp(2)).unwrap();
        // Slot 1 holds 2 (the newest): an unread file must overwrite slot 0, keeping 2.
        let lazy = CheckpointFile::unread(&disk, dir);
        let path = dir.join(RECOVERY_POINT_FILE);
        let mut bytes = disk.read_file(&path).unwrap();
        lazy.write(&cp(3)).unwrap();
        assert_eq!(CheckpointFile::open(&disk, dir).unwrap().1, Some(cp(3)));
        // The write went to slot 0: slot 1 still holds 2.
        let after = disk.read_file(&path).unwrap();
        assert_eq!(after[LEN..], bytes.split_off(LEN)[..]);
    }

    #[test]
    fn two_slots_survive_a_torn_write() {
        use crate::storage::SimDisk;
        let disk = Disk::Sim(SimDisk::new(7));
        let dir = Path::new("/p");
        disk.create_dir_all(dir).unwrap();
        let cp = |n| Checkpoint {
            next_offset: n,
            segment_base: 0,
            position: n as u64 * 10,
        };
        let (f, none) = CheckpointFile::open(&disk, dir).unwrap();
        assert_eq!(none, None);
        for n in 1..=5 {
            f.write(&cp(n)).unwrap();
            assert_eq!(CheckpointFile::open(&disk, dir).unwrap().1, Some(cp(n)));
        }
        // A torn write of the next slot (slot 1, holding 4) leaves 5 in slot 0.
        let path = dir.join(RECOVERY_POINT_FILE);
        let mut bytes = disk.read_file(&path).unwrap();
        bytes[LEN + 9] ^= 0xff;
        disk.write_file(&path, &bytes).unwrap();
        let (f, got) = CheckpointFile::open(&disk, dir).unwrap();
        assert_eq!(got, Some(cp(5)));
        // Torn slot 0 after writing 6 into slot 1: 6 survives.
        f.write(&cp(6)).unwrap();
        let mut bytes = disk.read_file(&path).unwrap();
        bytes[3] ^= 0xff;
        disk.write_file(&path, &bytes).unwrap();
        assert_eq!(CheckpointFile::open(&disk, dir).unwrap().1, Some(cp(6)));
    }
}
