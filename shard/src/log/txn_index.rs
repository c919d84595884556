//! A segment's aborted transactions: Kafka's `TransactionIndex` (`<20-digit base>.txnindex`)
//! and the control records that end transactions (`EndTransactionMarker`).
//!
//! Owned by one `Segment` (so by one shard's `PartitionLog`, single-threaded). An ABORT marker
//! that closes an open transaction appends one entry to the index of the segment the marker
//! is written to; a COMMIT records nothing. Most segments never see an abort, so the file is
//! created lazily, at the first entry.
//!
//! File format (Kafka's): 34-byte entries, big-endian, `version:i16 = 0, producerId:i64,
//! firstOffset:i64, lastOffset:i64, lastStableOffset:i64`, in the order the markers were
//! written (so by last offset). A torn last entry (a crash while it was written) is dropped
//! when the file is loaded.
//!
//! Bounds: the entries are also kept in memory, 32 bytes each, for every segment (Kafka
//! reads the file on each fetch instead). Aborts are rare, so this stays small; the file
//! is opened through the shard's `FdCache` when an entry is written, so an idle log holds
//! no fd for it (the next sync of the segment reopens it if the cache let it go).
//!
//! Durability: the file of an inactive segment is synced with it (`Segment::files_to_sync`),
//! so recovery may trust it below the recovery point; the segments recovery re-scans get
//! their index rebuilt from the markers in them.

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::fd_cache::CachedFd;
use crate::storage::{Disk, File};

/// Bytes of one entry in the file.
pub(crate) const TXN_ENTRY_BYTES: usize = 34;
/// The only entry version Kafka writes.
const TXN_ENTRY_VERSION: i16 = 0;

/// One aborted transaction as Kafka's TransactionIndex stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self) -> [u8; TXN_ENTRY_BYTES] {
        let mut b = [0u8; TXN_ENTRY_BYTES];
        b[0..2].copy_from_slice(&TXN_ENTRY_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    /// None for an entry of another version (Kafka refuses those too).
    fn decode(b: &[u8]) -> Option<AbortedTxn> {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        (i16::from_be_bytes([b[0], b[1]]) == TXN_ENTRY_VERSION).then(|| AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// A control record's type (Kafka's ControlRecordType: ABORT = 0, COMMIT = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnMarker {
    Abort,
    Commit,
}

impl TxnMarker {
    /// The type field of the control record's key.
    pub fn code(self) -> i16 {
        match self {
            TxnMarker::Abort => 0,
            TxnMarker::Commit => 1,
        }
    }

    fn from_code(code: i16) -> Option<TxnMarker> {
        match code {
            0 => Some(TxnMarker::Abort),
            1 => Some(TxnMarker::Commit),
            _ => None,
        }
    }
}

/// What a control batch's record says: Kafka's `EndTransactionMarker`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub marker: TxnMarker,
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// The control record's key: version 0 (i16), type (i16).
    pub(crate) fn key(&self) -> [u8; 4] {
        let mut k = [0u8; 4];
        k[2..4].copy_from_slice(&self.marker.code().to_be_bytes());
        k
    }

    /// The control record's value: version 0 (i16), coordinator epoch (i32).
    pub(crate) fn value(&self) -> [u8; 6] {
        let mut v = [0u8; 6];
        v[2..6].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        v
    }

    /// Reads the marker from a whole stored control batch (uncompressed, one record).
    /// None when the batch holds no record (Kafka: a control batch emptied by the cleaner)
    /// or a record that is not a transaction marker (another control type, bad framing).
    pub(crate) fn parse(batch: &[u8]) -> Option<EndTxnMarker> {
        let records = wire::record_batch::records(batch).ok()?;
        let record = records.iter().next()?.ok()?;
        let key = record.key?;
        if key.len() < 4 {
            return None;
        }
        let marker = TxnMarker::from_code(i16::from_be_bytes([key[2], key[3]]))?;
        let coordinator_epoch = match record.value {
            Some(v) if v.len() >= 6 => i32::from_be_bytes(v[2..6].try_into().expect("4 bytes")),
            _ => -1,
        };
        Some(EndTxnMarker {
            marker,
            coordinator_epoch,
        })
    }
}

/// The file bytes of `entries` (the cleaner writes a merged segment's index whole).
pub(crate) fn encode_entries(entries: &[AbortedTxn]) -> Vec<u8> {
    entries.iter().flat_map(|e| e.encode()).collect()
}

/// `<dir>/<20-digit base>.txnindex`.
pub(crate) fn txn_index_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{}.txnindex", super::file_stem(base_offset)))
}

/// One segment's aborted transactions (see the module doc).
pub(crate) struct TxnIndex {
    path: PathBuf,
    entries: Vec<AbortedTxn>,
    /// The file's fd, while the shard's cache keeps it.
    fd: CachedFd,
    /// Entries were written (or the file cut) since the last `take_unsynced`.
    unsynced: bool,
}

impl TxnIndex {
    /// Loads the file if it exists (none: no entries). A torn last entry, or anything from
    /// the first entry of an unknown version on, is dropped from memory and cut from the file.
    pub(crate) fn open(disk: &Disk, path: PathBuf) -> io::Result<TxnIndex> {
        let mut index = TxnIndex {
            path,
            entries: Vec::new(),
            fd: CachedFd::new(),
            unsynced: false,
        };
        // Most segments have no index file: a lookup in the namespace, no open, no read.
        if !disk.exists(&index.path) {
            return Ok(index);
        }
        let bytes = match disk.read_file(&index.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(index),
            Err(e) => return Err(e),
        };
        for chunk in bytes.chunks_exact(TXN_ENTRY_BYTES) {
            match AbortedTxn::decode(chunk) {
                Some(e) => index.entries.push(e),
                None => break,
            }
        }
        let valid = (index.entries.len() * TXN_ENTRY_BYTES) as u64;
        if valid != bytes.len() as u64 {
            tracing::warn!(path = %index.path.display(), bytes = bytes.len(), kept = index.entries.len(), "dropping torn or unknown transaction index entries");
            // Not synced here: a later sync of the segment may never come (a trusted
            // inactive segment), and no fd is held for it. Lost, the cut is redone.
            let (file, _) = disk.open(&index.path, false)?;
            file.truncate(valid)?;
        }
        Ok(index)
    }

    pub(crate) fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file, through the shard's cache (created if missing).
    fn file(&self, disk: &Disk) -> io::Result<Rc<File>> {
        self.fd.get(|| disk.open(&self.path, true).map(|(f, _)| f))
    }

    /// Appends an entry to the file (page cache; synced with the segment) and to memory.
    pub(crate) fn append(&mut self, disk: &Disk, entry: AbortedTxn) -> io::Result<()> {
        self.file(disk)?.write_at(
            &entry.encode(),
            (self.entries.len() * TXN_ENTRY_BYTES) as u64,
        )?;
        self.unsynced = true;
        self.entries.push(entry);
        Ok(())
    }

    /// Kafka's `TransactionIndex.truncateTo`: drops the entries whose last offset is at or
    /// past `offset` (entries are ordered by last offset, so a suffix) and cuts the file.
    pub(crate) fn truncate_to(&mut self, disk: &Disk, offset: i64) -> io::Result<()> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.file(disk)?.truncate((keep * TXN_ENTRY_BYTES) as u64)?;
        self.unsynced = true;
        Ok(())
    }

    /// Forgets every entry and empties the file (recovery rebuilds the index of a segment it
    /// re-scans from the markers in it).
    pub(crate) fn clear(&mut self, disk: &Disk) -> io::Result<()> {
        self.truncate_to(disk, i64::MIN)?;
        if self.entries.is_empty() && !self.unsynced && disk.exists(&self.path) {
            let file = self.file(disk)?;
            if file.len()? > 0 {
                file.truncate(0)?;
                self.unsynced = true;
            }
        }
        Ok(())
    }

    /// The fd to fdatasync for the entries written since the last call, if any (reopened if
    /// the shard's cache let it go: fdatasync covers the inode's writes through any fd).
    pub(crate) fn take_unsynced(&mut self, disk: &Disk) -> io::Result<Option<Rc<File>>> {
        if !self.unsynced {
            return Ok(None);
        }
        let file = self.file(disk)?;
        self.unsynced = false;
        Ok(Some(file))
    }

    /// Kafka's `collectAbortedTxns(fetchOffset, upperBoundOffset)`: adds the entries with
    /// `last_offset >= start_offset && first_offset < upper_bound` to `out`. True (Kafka's
    /// `isComplete`) once an entry's last stable offset reaches `upper_bound`: every
    /// transaction that began below it had ended by then, so later segments add nothing.
    pub(crate) fn collect(
        &self,
        start_offset: i64,
        upper_bound: i64,
        out: &mut Vec<AbortedTxn>,
    ) -> bool {
        for e in &self.entries {
            if e.last_offset >= start_offset && e.first_offset < upper_bound {
                out.push(*e);
            }
            if e.last_stable_offset >= upper_bound {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::{run, tmp};

    fn entry(i: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: i,
            first_offset: i * 10,
            last_offset: i * 10 + 5,
            last_stable_offset: i * 10 + 6,
        }
    }

    #[test]
    fn entries_round_trip_and_torn_tail_is_dropped() {
        run(async {
            let d = tmp();
            let disk = Disk::Real;
            let path = txn_index_path(d.path(), 0);
            let mut idx = TxnIndex::open(&disk, path.clone()).unwrap();
            assert!(idx.entries().is_empty() && !path.exists());
            for i in 0..4 {
                idx.append(&disk, entry(i)).unwrap();
            }
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.len(), 4 * TXN_ENTRY_BYTES);
            // Kafka's layout: version 0, then the four i64s big-endian.
            assert_eq!(&bytes[0..2], &[0, 0]);
            assert_eq!(
                &bytes[TXN_ENTRY_BYTES + 2..TXN_ENTRY_BYTES + 10],
                &1i64.to_be_bytes()
            );
            drop(idx);
            // A torn fifth entry.
            std::fs::write(&path, [&bytes[..], &entry(4).encode()[..20]].concat()).unwrap();
            let mut idx = TxnIndex::open(&disk, path.clone()).unwrap();
            assert_eq!(idx.entries(), &(0..4).map(entry).collect::<Vec<_>>()[..]);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 * 34);
            let mut got = Vec::new();
            assert!(!idx.collect(15, 40, &mut got));
            assert_eq!(got, vec![entry(1), entry(2), entry(3)]);
            got.clear();
            // Entry 1's last stable offset (16) reaches the bound: complete there.
            assert!(idx.collect(0, 16, &mut got));
            assert_eq!(got, vec![entry(0), entry(1)]);
            idx.truncate_to(&disk, 25).unwrap();
            assert_eq!(idx.entries(), &[entry(0), entry(1)]);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * 34);
            idx.clear(&disk).unwrap();
            assert!(idx.entries().is_empty());
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        });
    }

    #[test]
    fn end_txn_marker_round_trip() {
        for marker in [TxnMarker::Abort, TxnMarker::Commit] {
            let m = EndTxnMarker {
                marker,
                coordinator_epoch: 77,
            };
            let b = wire::record_batch::BatchBuilder::new(wire::record_batch::Compression::None)
                .control(true)
                .transactional(true)
                .push(Some(&m.key()), Some(&m.value()), &[], 5)
                .build();
            assert_eq!(EndTxnMarker::parse(&b), Some(m));
        }
    }
}
