//! Kafka's leader-epoch cache of one partition (`LeaderEpochFileCache`) and its file,
//! `leader-epoch-checkpoint`: for every leader epoch the first offset written under it.
//! OffsetForLeaderEpoch is answered from it (clients validate their position after a leader
//! change; followers find where to truncate), so it must say what Kafka's says.
//!
//! Kept up to date as Kafka does: a batch appended with a leader epoch newer than the latest
//! entry adds (epoch, its base offset) (`UnifiedLog.maybeAssignEpochStartOffset`), becoming
//! leader adds (epoch, log end), moving the log start drops entries below it
//! (`truncateFromStart`), and a log cut back by recovery drops entries at or past its end
//! (`truncateFromEnd`).
//!
//! File format (Kafka's `LeaderEpochCheckpointFile`): `0\n<count>\n<epoch> <offset>\n...`.
//! Written only when an entry changes (a new epoch, a truncation, a moved log start: rare;
//! and once per new partition) durably: temporary file, fdatasync, rename over the old one,
//! directory fsync (blocking the thread, as the durable log start does), so that a follower
//! that truncated at an epoch boundary or took a new epoch does not find an older cache after
//! a power loss (Kafka's `LeaderEpochFileCache` flushes the same way).
//!
//! One exception keeps creating thousands of partitions cheap (an fsync pair per new
//! partition doubled its cost): the write that gives an empty cache its first entry is not
//! synced. Losing it loses nothing that is not derived again: the file then reads as missing
//! (or torn: malformed), i.e. an empty cache; opening the partition as leader adds
//! (current epoch, log end) again, and a follower's next append under a newer epoch adds that
//! one. What a follower can lose is the start of the one epoch it held before the power loss
//! (OffsetForLeaderEpoch then answers from the epochs it has, as Kafka's does with a missing
//! file).

use std::io;
use std::path::{Path, PathBuf};

use crate::storage::Disk;

pub(crate) const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";

/// Kafka's `UNDEFINED_EPOCH` and `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// Most entries kept; more would mean more than this many leader changes within the log's
/// retained offsets. The oldest are dropped first (answers for them become "the first kept
/// epoch's start", as for epochs below the log start).
const MAX_ENTRIES: usize = 4096;

pub(crate) struct LeaderEpochCache {
    /// The log's disk (see `crate::storage`).
    disk: Disk,
    path: PathBuf,
    /// (epoch, start offset), both strictly increasing.
    entries: Vec<(i32, i64)>,
}

impl LeaderEpochCache {
    /// Loads `dir`'s file (missing or malformed: empty, with a warning for malformed).
    pub(crate) fn load(disk: &Disk, dir: &Path) -> LeaderEpochCache {
        let path = dir.join(LEADER_EPOCH_FILE);
        let entries = match disk.read_file(&path) {
            Ok(bytes) => parse(&String::from_utf8_lossy(&bytes)).unwrap_or_else(|| {
                tracing::warn!(path = %path.display(), "malformed leader epoch checkpoint ignored");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        LeaderEpochCache {
            disk: disk.clone(),
            path,
            entries,
        }
    }

    pub(crate) fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// Kafka's `isUpdateNeeded`: a cheap check for the append path.
    pub(crate) fn needs(&self, epoch: i32, start_offset: i64) -> bool {
        epoch >= 0
            && start_offset >= 0
            && self
                .entries
                .last()
                .is_none_or(|&(e, o)| e != epoch || start_offset < o)
    }

    /// Kafka's `assign`: entries that would break monotonicity (epoch or start offset at or
    /// past the new one) are removed, then (epoch, start_offset) added and the file written.
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<bool> {
        if !self.needs(epoch, start_offset) {
            return Ok(false);
        }
        let was_empty = self.entries.is_empty();
        while self
            .entries
            .last()
            .is_some_and(|&(e, o)| e >= epoch || o >= start_offset)
        {
            self.entries.pop();
        }
        self.entries.push((epoch, start_offset));
        if self.entries.len() > MAX_ENTRIES {
            self.entries.remove(0);
        }
        // The first entry of an empty cache is not synced (see the module doc).
        self.flush(!was_empty).map(|()| true)
    }

    /// Kafka's `truncateFromStart`: entries starting at or below `start_offset` go, the last
    /// of them kept with `start_offset` as its start.
    pub(crate) fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let below = self
            .entries
            .iter()
            .take_while(|&&(_, o)| o <= start_offset)
            .count();
        if below == 0 || (below == 1 && self.entries[0].1 == start_offset) {
            return Ok(());
        }
        let epoch = self.entries[below - 1].0;
        self.entries.drain(..below);
        self.entries.insert(0, (epoch, start_offset));
        self.flush(true)
    }

    /// Kafka's `truncateFromEnd`: entries starting at or past `end_offset` go.
    pub(crate) fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .iter()
            .take_while(|&&(_, o)| o < end_offset)
            .count();
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.flush(true)
    }

    /// Kafka's `clearAndFlush`: no entries (a log truncated fully and restarted elsewhere).
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        if self.entries.is_empty() && !self.disk.exists(&self.path) {
            return Ok(());
        }
        self.entries.clear();
        self.flush(true)
    }

    /// Kafka's `endOffsetFor(requestedEpoch, logEndOffset)`: (epoch, end offset) of the
    /// largest epoch <= `requested`, its end being the next epoch's start (the log end for
    /// the latest epoch); below every known epoch, (requested, the first known start);
    /// (-1, -1) when undefined.
    pub(crate) fn end_offset_for(&self, requested: i32, log_end: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end);
        }
        let higher = self.entries.iter().position(|&(e, _)| e > requested);
        let Some(higher) = higher else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        let higher_start = self.entries[higher].1;
        match higher.checked_sub(1) {
            None => (requested, higher_start),
            Some(floor) => (self.entries[floor].0, higher_start),
        }
    }

    /// Rewrites the file: durably (tmp, fdatasync, rename, directory fsync) when `durable`,
    /// else tmp and rename only (page cache).
    fn flush(&self, durable: bool) -> io::Result<()> {
        let mut text = format!("0\n{}\n", self.entries.len());
        for (epoch, offset) in &self.entries {
            text.push_str(&format!("{epoch} {offset}\n"));
        }
        if durable {
            return self
                .disk
                .write_file_durable_blocking(&self.path, text.as_bytes());
        }
        let tmp = self.path.with_extension("tmp");
        self.disk.write_file(&tmp, text.as_bytes())?;
        self.disk.rename(&tmp, &self.path)
    }
}

fn parse(text: &str) -> Option<Vec<(i32, i64)>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut entries = Vec::with_capacity(count.min(MAX_ENTRIES));
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        let epoch: i32 = parts.next()?.parse().ok()?;
        let offset: i64 = parts.next()?.parse().ok()?;
        if entries
            .last()
            .is_some_and(|&(e, o): &(i32, i64)| e >= epoch || o > offset)
        {
            return None;
        }
        entries.push((epoch, offset));
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> (tempfile::TempDir, LeaderEpochCache) {
        let d = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(&Disk::Real, d.path());
        for &(e, o) in entries {
            c.assign(e, o).unwrap();
        }
        (d, c)
    }

    /// Kafka's LeaderEpochFileCacheTest cases for endOffsetFor.
    #[test]
    fn end_offset_for_follows_kafka() {
        let (_d, c) = cache(&[(2, 6), (3, 8), (5, 11)]);
        assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, 20), (-1, -1));
        assert_eq!(c.end_offset_for(5, 20), (5, 20)); // latest: the log end
        assert_eq!(c.end_offset_for(3, 20), (3, 11));
        assert_eq!(c.end_offset_for(4, 20), (3, 11)); // unknown epoch between: floor's
        assert_eq!(c.end_offset_for(1, 20), (1, 6)); // below all: first start
        assert_eq!(c.end_offset_for(6, 20), (-1, -1)); // above all
        let (_d, empty) = cache(&[]);
        assert_eq!(empty.end_offset_for(0, 20), (-1, -1));
    }

    #[test]
    fn assign_keeps_monotonic_and_persists() {
        let (d, mut c) = cache(&[(0, 0), (0, 5), (1, 10)]);
        assert_eq!(c.entries(), &[(0, 0), (1, 10)]);
        assert!(!c.needs(1, 12));
        // A smaller start for the latest epoch replaces it; an older epoch truncates later ones.
        c.assign(1, 8).unwrap();
        assert_eq!(c.entries(), &[(0, 0), (1, 8)]);
        c.assign(3, 4).unwrap();
        assert_eq!(c.entries(), &[(0, 0), (3, 4)]);
        let again = LeaderEpochCache::load(&Disk::Real, d.path());
        assert_eq!(again.entries(), c.entries());
        let text = std::fs::read_to_string(d.path().join(LEADER_EPOCH_FILE)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n3 4\n");
    }

    #[test]
    fn truncation_from_start_and_end() {
        let (_d, mut c) = cache(&[(1, 0), (2, 10), (4, 20)]);
        c.truncate_from_start(15).unwrap();
        assert_eq!(c.entries(), &[(2, 15), (4, 20)]);
        c.truncate_from_end(20).unwrap();
        assert_eq!(c.entries(), &[(2, 15)]);
        c.truncate_from_start(3).unwrap();
        assert_eq!(c.entries(), &[(2, 15)]);
    }

    #[test]
    fn malformed_file_is_empty() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(LEADER_EPOCH_FILE), "0\n2\n3 4\n1 9\n").unwrap();
        assert!(LeaderEpochCache::load(&Disk::Real, d.path())
            .entries()
            .is_empty());
    }
}
