//! The recovery point of one partition directory, and its clean-shutdown marker.
//!
//! `recovery-point` is 32 bytes overwritten in place after every fdatasync of the log:
//! magic `KRP1`, the log end offset that was synced (i64), the base offset of the segment
//! holding it (i64), the byte position in that segment's `.log` (u64), and an FNV-1a checksum
//! of the 28 bytes before it. Recovery re-validates from the start of that segment on; every
//! earlier segment was synced (with its indexes) before the point moved past it.
//!
//! Why no fsync / rename: the point is written only after the data it names is durable, so a
//! stale point (the write not yet on disk) only makes recovery scan more; a torn or garbled
//! one fails its checksum and recovery scans everything. One 32-byte pwrite per sync round
//! instead of a create+rename per partition keeps the group commit cheap.
//!
//! `.clean_shutdown` exists only between a clean close and the next open; it says every index
//! is trimmed and synced and the log ends on a batch boundary.

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
            next_offset: i64::from_be_bytes(b[4..12].try_into().unwrap()),
            segment_base: i64::from_be_bytes(b[12..20].try_into().unwrap()),
            position: u64::from_be_bytes(b[20..28].try_into().unwrap()),
        };
        (cp.next_offset >= cp.segment_base && cp.segment_base >= 0).then_some(cp)
    }
}

/// The open recovery-point file of one partition.
pub(crate) struct CheckpointFile {
    path: PathBuf,
    file: File,
}

impl CheckpointFile {
    /// Opens the file and returns the checkpoint it holds, if valid.
    pub(crate) fn open(
        disk: &Disk,
        dir: &Path,
    ) -> io::Result<(CheckpointFile, Option<Checkpoint>)> {
        let path = dir.join(RECOVERY_POINT_FILE);
        let cp = match disk.read_file(&path) {
            Ok(b) => Checkpoint::decode(&b),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let (file, _) = disk.open(&path, true)?;
        Ok((CheckpointFile { path, file }, cp))
    }

    /// One 32-byte page-cache write (see the module comment for why it is not synced).
    pub(crate) fn write(&self, cp: &Checkpoint) -> io::Result<()> {
        self.file.write_at(&cp.encode(), 0)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// The log start offset recorded durably in `log-start-offset` (`0\n<offset>\n`, Kafka's
/// checkpoint file layout for one entry), if any. Unreadable content counts as none: the file
/// is only ever replaced whole (tmp, fdatasync, rename, directory fsync).
pub(crate) fn read_log_start(disk: &Disk, dir: &Path) -> io::Result<Option<i64>> {
    let bytes = match disk.read_file(&dir.join(LOG_START_FILE)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    Ok(match (lines.next(), lines.next()) {
        (Some("0"), Some(n)) => n.trim().parse().ok().filter(|&o: &i64| o >= 0),
        _ => None,
    })
}

/// Records `offset` as the log start durably, before any segment below it is removed: a power
/// loss can then resurrect any subset of the removed files, and the next open deletes them
/// again instead of taking the gap they leave for lost data. Blocks the thread for one
/// fdatasync and one directory fsync: only when retention (or DeleteRecords) moves the start.
pub(crate) fn write_log_start(disk: &Disk, dir: &Path, offset: i64) -> io::Result<()> {
    disk.write_file_durable_blocking(
        &dir.join(LOG_START_FILE),
        format!("0\n{offset}\n").as_bytes(),
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
}
