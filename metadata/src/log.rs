//! The metadata log on disk: append-only record files plus snapshots.
//!
//! This is the control plane (a few records per CreateTopics/DeleteTopics, on the metadata
//! core), so it uses blocking calls and fdatasync per append on purpose: simplicity and
//! durability matter here, throughput does not. Every file and directory access goes through
//! the `storage` seam (`Disk`, `BlockingFile`, the `*_blocking` calls), so the same code runs
//! on the real disk and on `SimDisk`, where the simulation tests lose power at any point; the
//! blocking files need no executor, because the log is opened before any shard runs.
//!
//! Layout of the directory:
//!
//! * `log-<base offset, 20 digits>.bin`: frames (see `records.rs`) with contiguous offsets
//!   starting at the base. Only the newest file is appended to.
//! * `snapshot-<offset, 20 digits>.bin`: the image as of `offset` (inclusive), written
//!   atomically (temp file, fsync, rename, fsync dir). Header
//!   `magic:8 offset:u64 count:u32 crc32c(previous 20 bytes):u32`, then `count` frames.
//!
//! After a snapshot at S a new log file `log-<S+1>` is started and files wholly covered by
//! the snapshot are deleted, as are older snapshots. Open loads the newest valid snapshot and
//! replays entries after it; a torn tail of the newest log file (crash mid-append) is
//! truncated. Corruption elsewhere, or a gap in offsets, refuses to open: silently dropping
//! committed metadata would lose topics. Open then makes durable what it read (the directory
//! and its entries, the newest file's length), so a power loss later cannot change the log
//! under the records replayed; after an I/O error the log is poisoned until reopened.
//! `tests/sim_log.rs` checks all this on `SimDisk` (power loss at any step, injected faults).

use std::path::{Path, PathBuf};

use storage::{BlockingFile, Disk};

use super::image::Image;
use super::records::{decode_entry, encode_frame, MetadataRecord, MAX_FRAME};

const SNAPSHOT_MAGIC: &[u8; 8] = b"KMDSNAP1";
const SNAPSHOT_HEADER: usize = 8 + 8 + 4 + 4;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("metadata log I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("corrupt metadata file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("metadata log gap in {path}: expected offset {expected}, found {found}")]
    Gap {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    #[error("metadata record of {0} bytes is too large")]
    RecordTooLarge(usize),
    #[error("append of no records")]
    EmptyAppend,
    /// A previous write or fsync failed: the file's state is unknown, so no further appends
    /// are accepted (restart to recover from what is on disk).
    #[error("metadata log is unusable after an earlier I/O failure")]
    Poisoned,
    /// Every producer id up to i64::MAX has been handed out (Kafka: "Exhausted all
    /// producerIds").
    #[error("exhausted all producer ids")]
    ProducerIdsExhausted,
}

pub struct MetadataLog {
    disk: Disk,
    dir: PathBuf,
    file: BlockingFile,
    file_base: u64,
    file_len: u64,
    next_offset: u64,
    snapshot_offset: Option<u64>,
    since_snapshot: u64,
    poisoned: bool,
}

fn log_name(base: u64) -> String {
    format!("log-{base:020}.bin")
}

fn snapshot_name(offset: u64) -> String {
    format!("snapshot-{offset:020}.bin")
}

fn parse_name(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?
        .strip_suffix(".bin")?
        .parse()
        .ok()
}

impl MetadataLog {
    /// Opens (creating if needed) the log in `dir`. Returns the log and the records to replay:
    /// the newest valid snapshot's records followed by the log entries after it.
    pub fn open(disk: &Disk, dir: &Path) -> Result<(MetadataLog, Vec<MetadataRecord>), LogError> {
        create_dir_durably(disk, dir)?;
        let mut snaps = Vec::new();
        let mut logs = Vec::new();
        // (Names that are not UTF-8 are not ours: `read_dir` leaves them out.)
        for entry in disk.read_dir(dir)? {
            let name = entry.name.as_str();
            if name.ends_with(".tmp") {
                // An interrupted snapshot write: never renamed, so never valid.
                let _ = disk.remove_file(&dir.join(name));
            } else if let Some(o) = parse_name(name, "snapshot-") {
                snaps.push(o);
            } else if let Some(b) = parse_name(name, "log-") {
                logs.push(b);
            }
        }
        snaps.sort_unstable_by(|a, b| b.cmp(a));
        logs.sort_unstable();

        let mut records = Vec::new();
        let mut snapshot_offset = None;
        for s in &snaps {
            let path = dir.join(snapshot_name(*s));
            match read_snapshot(disk, &path) {
                Ok((off, recs)) if off == *s => {
                    snapshot_offset = Some(off);
                    records = recs;
                    break;
                }
                Ok((off, _)) => {
                    tracing::warn!(path = %path.display(), off, "snapshot offset does not match its name; skipped")
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "invalid snapshot skipped")
                }
            }
        }

        if snapshot_offset.is_none() && !snaps.is_empty() {
            // Snapshots exist but none is readable: the log they replaced is gone.
            return Err(LogError::Corrupt {
                path: dir.join(snapshot_name(snaps[0])),
                reason: "no valid snapshot among the snapshot files".into(),
            });
        }
        let after_snapshot = snapshot_offset.map_or(0, |s| s + 1);
        let mut expected = after_snapshot;
        // (base, valid length, offset after its last entry) of the newest file.
        let mut last_file: Option<(u64, u64, u64)> = None;
        for (i, &base) in logs.iter().enumerate() {
            let is_last = i + 1 == logs.len();
            // Wholly covered by the snapshot: the next file starts at or before what we need.
            if !is_last && logs[i + 1] <= expected {
                continue;
            }
            let path = dir.join(log_name(base));
            if base > expected {
                return Err(LogError::Gap {
                    path,
                    expected,
                    found: base,
                });
            }
            let data = disk.read_file(&path)?;
            let mut pos = 0usize;
            let mut next_in_file = base;
            while pos < data.len() {
                match decode_entry(&data[pos..]) {
                    Ok((e, used)) => {
                        if e.offset != next_in_file {
                            return Err(LogError::Corrupt {
                                path,
                                reason: format!(
                                    "entry at byte {pos} has offset {}, expected {next_in_file}",
                                    e.offset
                                ),
                            });
                        }
                        if e.offset > expected {
                            return Err(LogError::Gap {
                                path,
                                expected,
                                found: e.offset,
                            });
                        }
                        if e.offset == expected {
                            records.push(e.record);
                            expected += 1;
                        }
                        next_in_file += 1;
                        pos += used;
                    }
                    Err(err) if is_last => {
                        // Torn tail from a crash mid-append (or a bad tail frame): everything
                        // before it was fsynced and is kept; the unacknowledged rest goes.
                        tracing::warn!(
                            path = %path.display(), at = pos, error = %err,
                            dropped = data.len() - pos, "truncating metadata log tail"
                        );
                        let (f, _) = disk.open_blocking(&path, false)?;
                        f.truncate(pos as u64)?;
                        f.sync_blocking()?;
                        break;
                    }
                    Err(err) => {
                        return Err(LogError::Corrupt {
                            path,
                            reason: format!("at byte {pos}: {err}"),
                        })
                    }
                }
            }
            if is_last {
                last_file = Some((base, pos as u64, next_in_file));
            }
        }
        if expected < after_snapshot {
            // Only possible if the snapshot covers offsets no log file reached: fine, the log
            // resumes after the snapshot.
            expected = after_snapshot;
        }

        // Append to the newest file if it ends exactly where we resume, else start a new one.
        let (file_base, file_len) = match last_file {
            Some((base, len, end)) if end == expected => (base, len),
            _ => {
                let path = dir.join(log_name(expected));
                // A stale file by that name (e.g. all-garbage, truncated to 0) is reset.
                let (f, _) = disk.open_blocking(&path, true)?;
                f.truncate(0)?;
                f.sync_blocking()?;
                disk.sync_dir_blocking(dir)?;
                (expected, 0)
            }
        };
        let (file, _) = disk.open_blocking(&dir.join(log_name(file_base)), false)?;
        // What this open read is what a power loss must keep (found by the simulation): a
        // failed append of the previous run may sit unsynced in the page cache with the
        // truncation that undid it, and a failed snapshot may have left an empty newer log
        // file whose directory entry was never synced. Unsynced, a later power loss could
        // bring back the unacknowledged records or drop the file appends now go to. One
        // fdatasync and one directory fsync per start.
        file.sync_blocking()?;
        disk.sync_dir_blocking(dir)?;
        let mut log = MetadataLog {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            file,
            file_base,
            file_len,
            next_offset: expected,
            snapshot_offset,
            since_snapshot: expected - after_snapshot,
            poisoned: false,
        };
        log.cleanup()?;
        Ok((log, records))
    }

    /// Offset the next appended record gets.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Offset of the last record (None if nothing was ever appended).
    pub fn last_offset(&self) -> Option<u64> {
        self.next_offset.checked_sub(1)
    }

    pub fn snapshot_offset(&self) -> Option<u64> {
        self.snapshot_offset
    }

    /// Records appended since the last snapshot (drives automatic snapshots).
    pub fn records_since_snapshot(&self) -> u64 {
        self.since_snapshot
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends `records` with consecutive offsets (epoch 0 until Raft) and fdatasyncs.
    /// Returns the offset of the last one. On failure nothing is considered written.
    pub fn append(&mut self, records: &[MetadataRecord]) -> Result<u64, LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        if records.is_empty() {
            return Err(LogError::EmptyAppend);
        }
        let mut buf = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let size = encode_frame(self.next_offset + i as u64, 0, r, &mut buf);
            if size > MAX_FRAME {
                return Err(LogError::RecordTooLarge(size));
            }
        }
        let res = self
            .file
            .write_at(&buf, self.file_len)
            .and_then(|_| self.file.sync_blocking());
        if let Err(e) = res {
            // After a failed fsync the page cache may not match the disk (the kernel may have
            // dropped the dirty pages): cut the partial write if we can and stop appending.
            let _ = self.file.truncate(self.file_len);
            self.poisoned = true;
            return Err(e.into());
        }
        self.file_len += buf.len() as u64;
        self.next_offset += records.len() as u64;
        self.since_snapshot += records.len() as u64;
        Ok(self.next_offset - 1)
    }

    /// Writes a snapshot of `image`, which must reflect every record appended so far, then
    /// starts a new log file and deletes files the snapshot covers. No-op on an empty log or
    /// if the last snapshot is already current.
    pub fn snapshot(&mut self, image: &Image) -> Result<(), LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        let Some(last) = self.last_offset() else {
            return Ok(());
        };
        if self.snapshot_offset == Some(last) {
            return Ok(());
        }
        debug_assert!(
            image.offset.is_none() || image.offset == Some(last),
            "image/log mismatch"
        );
        let records = image.to_records();
        let mut buf = Vec::with_capacity(SNAPSHOT_HEADER + records.len() * 64);
        buf.extend_from_slice(SNAPSHOT_MAGIC);
        buf.extend_from_slice(&last.to_be_bytes());
        buf.extend_from_slice(&(records.len() as u32).to_be_bytes());
        let crc = crc32c::crc32c(&buf);
        buf.extend_from_slice(&crc.to_be_bytes());
        for r in &records {
            // Frame offsets inside a snapshot are the snapshot offset, not log positions.
            encode_frame(last, 0, r, &mut buf);
        }

        // Temp file `<name>.tmp`, fdatasync, rename, directory fsync: a crash leaves either no
        // snapshot or the whole one (and open removes a leftover `.tmp`).
        self.disk
            .write_file_durable_blocking(&self.dir.join(snapshot_name(last)), &buf)?;

        // New log file for what follows the snapshot. Once its name may exist, a failure
        // poisons the log: appends continuing in the old file would sit behind an empty
        // `log-<base>` that open takes for the newest file, and open would skip the old one
        // as covered by the snapshot, losing acknowledged records (found by the simulation).
        let base = last + 1;
        let path = self.dir.join(log_name(base));
        let file = match self.create_empty(&path) {
            Ok(file) => file,
            Err(e) => {
                self.poisoned = true;
                return Err(e.into());
            }
        };
        self.file = file;
        self.file_base = base;
        self.file_len = 0;
        self.snapshot_offset = Some(last);
        self.since_snapshot = 0;
        self.cleanup()?;
        tracing::info!(
            offset = last,
            records = records.len(),
            "metadata snapshot written"
        );
        Ok(())
    }

    /// Creates (or empties) the file at `path`, durably, with its directory entry.
    fn create_empty(&self, path: &Path) -> std::io::Result<BlockingFile> {
        let (file, _) = self.disk.open_blocking(path, true)?;
        file.truncate(0)?;
        file.sync_blocking()?;
        self.disk.sync_dir_blocking(&self.dir)?;
        Ok(file)
    }

    /// Deletes log files wholly covered by the current snapshot and older snapshots.
    fn cleanup(&mut self) -> Result<(), LogError> {
        let Some(snap) = self.snapshot_offset else {
            return Ok(());
        };
        let mut removed = false;
        for entry in self.disk.read_dir(&self.dir)? {
            let name = entry.name.as_str();
            let stale = match (parse_name(name, "log-"), parse_name(name, "snapshot-")) {
                // Log files before the current one: all their entries are <= snap because the
                // current file starts at or before snap + 1.
                (Some(b), _) => b < self.file_base && self.file_base <= snap + 1,
                (_, Some(o)) => o < snap,
                _ => false,
            };
            if stale {
                self.disk.remove_file(&self.dir.join(name))?;
                removed = true;
            }
        }
        if removed {
            self.disk.sync_dir_blocking(&self.dir)?;
        }
        Ok(())
    }
}

/// `create_dir_all`, then an fsync of the parent of each directory it created and of `dir`'s
/// own parent: without it a power loss may forget the directory, and with it every record
/// appended (and fsynced) inside (found by the simulation). `dir`'s parent is synced even when
/// `dir` exists, since an earlier open may have created it and died before its sync (one
/// fsync per start).
fn create_dir_durably(disk: &Disk, dir: &Path) -> std::io::Result<()> {
    let mut missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !disk.exists(d))
        .collect();
    if missing.first() != Some(&dir) {
        missing.insert(0, dir);
    }
    disk.create_dir_all(dir)?;
    // Outermost first, so each parent's own entry is durable before its child's.
    for created in missing.iter().rev() {
        if let Some(parent) = created.parent().filter(|p| !p.as_os_str().is_empty()) {
            disk.sync_dir_blocking(parent)?;
        }
    }
    Ok(())
}

/// Reads and fully validates a snapshot file: (offset, records).
fn read_snapshot(disk: &Disk, path: &Path) -> Result<(u64, Vec<MetadataRecord>), LogError> {
    let corrupt = |reason: String| LogError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let data = disk.read_file(path)?;
    if data.len() < SNAPSHOT_HEADER || &data[..8] != SNAPSHOT_MAGIC {
        return Err(corrupt("bad header".into()));
    }
    let crc = u32::from_be_bytes(
        data[20..24]
            .try_into()
            .expect("a slice of the array's length"),
    );
    if crc32c::crc32c(&data[..20]) != crc {
        return Err(corrupt("header crc mismatch".into()));
    }
    let offset = u64::from_be_bytes(
        data[8..16]
            .try_into()
            .expect("a slice of the array's length"),
    );
    let count = u32::from_be_bytes(
        data[16..20]
            .try_into()
            .expect("a slice of the array's length"),
    ) as usize;
    let mut pos = SNAPSHOT_HEADER;
    // Capacity bounded by the file size (a frame is at least 22 bytes), not the header count.
    let mut records = Vec::with_capacity(count.min(data.len() / 22));
    for i in 0..count {
        let (e, used) = decode_entry(&data[pos..])
            .map_err(|err| corrupt(format!("record {i} at byte {pos}: {err}")))?;
        if e.offset != offset {
            return Err(corrupt(format!("record {i} has offset {}", e.offset)));
        }
        records.push(e.record);
        pos += used;
    }
    if pos != data.len() {
        return Err(corrupt("trailing bytes".into()));
    }
    Ok((offset, records))
}

#[cfg(test)]
mod tests {
    use std::fs::{self, OpenOptions};
    use std::os::unix::fs::FileExt;

    use super::*;

    fn topic(i: u8) -> MetadataRecord {
        MetadataRecord::Topic {
            name: format!("t{i}"),
            topic_id: [i; 16],
        }
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn append_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        assert!(recs.is_empty());
        assert_eq!(log.last_offset(), None);
        assert_eq!(log.append(&[topic(1), topic(2)]).unwrap(), 1);
        assert_eq!(log.append(&[topic(3)]).unwrap(), 2);
        assert!(matches!(log.append(&[]), Err(LogError::EmptyAppend)));
        drop(log);
        let (mut log, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        assert_eq!(recs, vec![topic(1), topic(2), topic(3)]);
        assert_eq!(log.next_offset(), 3);
        assert_eq!(log.append(&[topic(4)]).unwrap(), 3);
        drop(log);
        let (_, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        assert_eq!(recs.len(), 4);
    }

    #[test]
    fn torn_tail_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        log.append(&[topic(1), topic(2)]).unwrap();
        drop(log);
        let path = dir.path().join(log_name(0));
        let good = fs::metadata(&path).unwrap().len();
        // Every possible torn write of a third record: partial frame at the tail.
        let mut frame = Vec::new();
        encode_frame(2, 0, &topic(3), &mut frame);
        for cut in 1..frame.len() {
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(good).unwrap();
            f.write_all_at(&frame[..cut], good).unwrap();
            drop(f);
            let (mut log, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
            assert_eq!(recs, vec![topic(1), topic(2)], "cut {cut}");
            assert_eq!(fs::metadata(&path).unwrap().len(), good);
            // Appends continue cleanly after the truncation.
            assert_eq!(log.append(&[topic(9)]).unwrap(), 2);
            drop(log);
            let (_, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
            assert_eq!(recs.last(), Some(&topic(9)));
            OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(good)
                .unwrap();
        }
        // Garbage (bad crc) at the tail is also cut.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0xAB; 40], good).unwrap();
        drop(f);
        let (_, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        assert_eq!(recs.len(), 2);
    }

    #[test]
    fn snapshot_and_replay() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        let mut img = Image::default();
        let batch1 = [
            topic(1),
            topic(2),
            MetadataRecord::RemoveTopic { topic_id: [1; 16] },
        ];
        log.append(&batch1).unwrap();
        batch1.iter().for_each(|r| img.apply(r));
        img.offset = log.last_offset();
        log.snapshot(&img).unwrap();
        assert_eq!(log.snapshot_offset(), Some(2));
        assert_eq!(files(dir.path()), vec![log_name(3), snapshot_name(2)]);
        log.append(&[topic(3)]).unwrap();
        img.apply(&topic(3));
        drop(log);

        let (mut log, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        let mut replayed = Image::from_records(&recs);
        replayed.offset = log.last_offset();
        img.offset = Some(3);
        assert_eq!(replayed, img);
        assert_eq!(log.records_since_snapshot(), 1);

        // A second snapshot removes the first and the covered log.
        log.snapshot(&replayed).unwrap();
        assert_eq!(files(dir.path()), vec![log_name(4), snapshot_name(3)]);
        drop(log);
        let (log, recs) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        assert_eq!(
            Image::from_records(&recs).topics_by_name,
            img.topics_by_name
        );
        assert_eq!(log.next_offset(), 4);
    }

    #[test]
    fn corrupt_snapshot_falls_back_or_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = MetadataLog::open(&Disk::Real, dir.path()).unwrap();
        log.append(&[topic(1)]).unwrap();
        log.snapshot(&Image::from_records(&[topic(1)])).unwrap();
        drop(log);
        // Damage the only snapshot: the log entries it covered are gone, so open must refuse
        // rather than start with topics missing.
        let p = dir.path().join(snapshot_name(0));
        let mut data = fs::read(&p).unwrap();
        let n = data.len();
        data[n - 1] ^= 1;
        fs::write(&p, &data).unwrap();
        assert!(matches!(
            MetadataLog::open(&Disk::Real, dir.path()),
            Err(LogError::Corrupt { .. })
        ));
        // Without any snapshot, a log starting after 0 is a gap.
        fs::remove_file(&p).unwrap();
        assert!(matches!(
            MetadataLog::open(&Disk::Real, dir.path()),
            Err(LogError::Gap { .. })
        ));
        // A leftover temp snapshot is ignored and removed.
        let tmp = dir.path().join("snapshot-00000000000000000005.bin.tmp");
        fs::write(&tmp, b"junk").unwrap();
        fs::write(&p, &data[..n - 1]).unwrap();
        assert!(MetadataLog::open(&Disk::Real, dir.path()).is_err());
        assert!(!tmp.exists());
    }

    /// A snapshot that fails after creating its new log file: appending on in the old file
    /// would hide those records behind the empty newer file at the next open.
    #[test]
    fn snapshot_failing_after_its_new_file_poisons() {
        use storage::sim::FaultOp;
        let sim = storage::SimDisk::new(1);
        let disk = Disk::Sim(sim.clone());
        let dir = Path::new("/data/meta");
        let (mut log, _) = MetadataLog::open(&disk, dir).unwrap();
        log.append(&[topic(1), topic(2)]).unwrap();
        // Truncations: the snapshot's temp file, then the new log file's.
        sim.fail_nth(FaultOp::Truncate, 1, 5);
        assert!(log
            .snapshot(&Image::from_records(&[topic(1), topic(2)]))
            .is_err());
        assert!(disk.exists(&dir.join(log_name(2))));
        assert!(matches!(log.append(&[topic(3)]), Err(LogError::Poisoned)));
        drop(log);
        sim.power_loss();
        let (log, recs) = MetadataLog::open(&disk, dir).unwrap();
        assert_eq!(
            Image::from_records(&recs).topics_by_name,
            Image::from_records(&[topic(1), topic(2)]).topics_by_name
        );
        assert_eq!(log.next_offset(), 2);
    }

    /// An append whose fdatasync failed is undone in the page cache only; the next open must
    /// make that durable, or a power loss may bring the unacknowledged records back after
    /// the log was opened (and used) without them.
    #[test]
    fn failed_append_stays_gone_after_reopen_and_power_loss() {
        use storage::sim::FaultOp;
        for seed in 0..32 {
            let sim = storage::SimDisk::new(seed);
            let disk = Disk::Sim(sim.clone());
            let dir = Path::new("/data/meta");
            let (mut log, _) = MetadataLog::open(&disk, dir).unwrap();
            sim.fail_nth(FaultOp::Sync, 0, 5);
            assert!(log.append(&[topic(1), topic(2)]).is_err());
            drop(log);
            sim.crash();
            let (log, recs) = MetadataLog::open(&disk, dir).unwrap();
            assert!(recs.is_empty());
            drop(log);
            sim.power_loss();
            let (log, recs) = MetadataLog::open(&disk, dir).unwrap();
            assert!(recs.is_empty(), "seed {seed}: {recs:?}");
            assert_eq!(log.next_offset(), 0);
        }
    }

    /// The log's directory, created by the first open, survives a power loss with the
    /// records inside it.
    #[test]
    fn new_directory_is_durable() {
        let sim = storage::SimDisk::new(3);
        let disk = Disk::Sim(sim.clone());
        let dir = Path::new("/data/a/meta");
        let (mut log, _) = MetadataLog::open(&disk, dir).unwrap();
        log.append(&[topic(1)]).unwrap();
        drop(log);
        sim.power_loss();
        let (_, recs) = MetadataLog::open(&disk, dir).unwrap();
        assert_eq!(recs, vec![topic(1)]);
    }

    #[test]
    fn corruption_in_older_file_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Vec::new();
        encode_frame(0, 0, &topic(1), &mut b);
        b.extend_from_slice(&[1, 2, 3]);
        fs::write(dir.path().join(log_name(0)), &b).unwrap();
        let mut c = Vec::new();
        encode_frame(1, 0, &topic(2), &mut c);
        fs::write(dir.path().join(log_name(1)), &c).unwrap();
        assert!(matches!(
            MetadataLog::open(&Disk::Real, dir.path()),
            Err(LogError::Corrupt { .. })
        ));
    }
}
