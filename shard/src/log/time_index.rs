//! Kafka's `.timeindex` of one segment: entries of (timestamp i64, relative offset u32),
//! big-endian, 12 bytes each. An entry (T, O) says "every batch before offset O has a max
//! timestamp < T, and the batch ending at O is the first with max timestamp T": entries are
//! only added when the segment's max timestamp so far grows, so timestamps strictly increase.
//! Written at the same moments as the offset index, plus a final entry when the segment
//! becomes inactive (roll / close), so the last entry of an inactive segment is its max.
//!
//! Bounds: same in-memory handling as the offset index (`IndexFile`).

use std::io;
use std::path::Path;

use super::index::IndexFile;
use crate::storage::Disk;

pub(crate) const TIME_ENTRY: usize = 12;

pub(crate) struct TimeIndex {
    pub(crate) inner: IndexFile,
    base_offset: i64,
}

impl TimeIndex {
    pub(crate) fn open(
        disk: &Disk,
        path: &Path,
        base_offset: i64,
        capacity_bytes: Option<u64>,
    ) -> io::Result<TimeIndex> {
        Ok(TimeIndex {
            inner: IndexFile::open(disk, path, TIME_ENTRY, capacity_bytes)?,
            base_offset,
        })
    }

    fn decode(base: i64, e: &[u8]) -> (i64, i64) {
        let ts = i64::from_be_bytes(e[0..8].try_into().expect("a slice of the array's length"));
        let rel = u32::from_be_bytes(e[8..12].try_into().expect("a slice of the array's length"));
        (ts, base + rel as i64)
    }

    /// Entry `i` as (timestamp, absolute offset).
    pub(crate) fn get(&self, i: usize) -> Option<(i64, i64)> {
        Some(Self::decode(self.base_offset, &self.inner.entry(i)?))
    }

    pub(crate) fn last(&self) -> Option<(i64, i64)> {
        self.get(self.inner.entries().checked_sub(1)?)
    }

    /// Appends (timestamp, offset) if the timestamp is larger than the last entry's (Kafka's
    /// `maybeAppend`). `Ok(false)` when it was not needed; `Err(())` when the index is full.
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: i64) -> Result<bool, ()> {
        if timestamp < 0 {
            return Ok(false); // NO_TIMESTAMP (-1): nothing to index
        }
        if let Some((t, o)) = self.last() {
            if timestamp <= t || offset < o {
                return Ok(false);
            }
        }
        let mut e = [0u8; TIME_ENTRY];
        e[0..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..12].copy_from_slice(&((offset - self.base_offset) as u32).to_be_bytes());
        if self.inner.push(&e) {
            Ok(true)
        } else {
            Err(())
        }
    }

    /// The entry with the largest timestamp <= `timestamp`, as (timestamp, offset).
    pub(crate) fn lookup(&self, timestamp: i64) -> Option<(i64, i64)> {
        let base = self.base_offset;
        self.inner
            .floor_by(timestamp, |e| Self::decode(base, e).0)
            .map(|e| Self::decode(base, &e))
    }

    /// Sanity check for an index loaded from disk: timestamps strictly increasing, offsets
    /// non-decreasing and below `next_offset` (for an inactive segment: its first and last
    /// entries).
    pub(crate) fn sane(&self, next_offset: i64) -> bool {
        let base = self.base_offset;
        self.inner
            .with_checked(|all| {
                let mut prev: Option<(i64, i64)> = None;
                for e in all.chunks_exact(TIME_ENTRY) {
                    let (t, o) = Self::decode(base, e);
                    if o < base || o >= next_offset || t < 0 {
                        return false;
                    }
                    if let Some((pt, po)) = prev {
                        if t <= pt || o < po {
                            return false;
                        }
                    }
                    prev = Some((t, o));
                }
                true
            })
            .unwrap_or(false)
    }
}
