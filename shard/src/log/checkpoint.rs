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
//! `.clean_shutdown` exists only between a clean close and the next open; it says every index
//! is trimmed and synced and the log ends on a batch boundary.

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{Disk, File};

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

/// The open recovery-point file of one partition.
pub(crate) struct CheckpointFile {
    path: PathBuf,
    file: File,
    /// The slot the next write goes to (the other one holds the newest valid point).
    next_slot: Cell<u64>,
}

impl CheckpointFile {
    /// Opens the file and returns the newest valid checkpoint it holds, if any.
    pub(crate) fn open(
        disk: &Disk,
        dir: &Path,
    ) -> io::Result<(CheckpointFile, Option<Checkpoint>)> {
        let path = dir.join(RECOVERY_POINT_FILE);
        let bytes = match disk.read_file(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let slot = |i: usize| {
            bytes
                .get(i * LEN..(i + 1) * LEN)
                .and_then(Checkpoint::decode)
        };
        let (cp, next_slot) = match (slot(0), slot(1)) {
            (Some(a), Some(b)) if b.next_offset > a.next_offset => (Some(b), 0),
            (Some(a), _) => (Some(a), 1),
            (None, Some(b)) => (Some(b), 0),
            (None, None) => (None, 0),
        };
        let (file, _) = disk.open(&path, true)?;
        let cf = CheckpointFile {
            path,
            file,
            next_slot: Cell::new(next_slot),
        };
        Ok((cf, cp))
    }

    /// One 32-byte page-cache write into the older slot (see the module comment for why it is
    /// not synced).
    pub(crate) fn write(&self, cp: &Checkpoint) -> io::Result<()> {
        let slot = self.next_slot.get();
        self.file.write_at(&cp.encode(), slot * LEN as u64)?;
        self.next_slot.set(1 - slot);
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
