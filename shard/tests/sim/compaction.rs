//! A compacted run's cleaner passes and the checks of what Kafka's cleaner promises.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use shard::log::cleaner::Cleaner;
use shard::storage::sim::SimRng;
use shard::{LogError, LogHandle, PartitionLog};
use wire::record_batch::{records, validate_stored_batch};

use super::log_model::Sim;
use super::KEY_MAP_SLOT_BYTES;

/// A compacted run's cleaner (see `Sim::compact` and `Sim::check_compaction`).
pub(crate) struct Compaction {
    pub(crate) cleaner: Cleaner,
}

/// What `Sim::check_compacted_read` found: batches' (base, last), record offsets,
/// (tombstone offset, delete horizon).
pub(crate) type CompactedRead = (Vec<(i64, i64)>, Vec<i64>, Vec<(i64, i64)>);

/// The base offset of the written batch holding `offset`.
pub(crate) fn base_of(batches: &BTreeMap<i64, (i64, Bytes)>, offset: i64) -> i64 {
    *batches
        .range(..=offset)
        .next_back()
        .expect("a batch holds every written offset")
        .0
}

/// (key, value) of every record of a batch as written, by offset.
pub(crate) fn decode(batch: &[u8]) -> BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)> {
    records(batch)
        .expect("written batches are valid")
        .iter()
        .map(|r| {
            let r = r.expect("valid record");
            let key = r.key.expect("the simulation writes keys").to_vec();
            (r.offset, (key, r.value.map(<[u8]>::to_vec)))
        })
        .collect()
}

impl Sim {
    /// A third of the seeds run a compacted log. Drawn from a generator of its own, so the
    /// other seeds replay exactly as before compaction joined the workload.
    pub(crate) fn maybe_compacted(&mut self, seed: u64) {
        let mut rng = SimRng::new(seed ^ 0x5eed_c0a1_e5ce_0001);
        if !rng.chance(1, 3) {
            return;
        }
        let c = &mut self.config;
        c.cleanup_compact = true;
        c.cleanup_delete = rng.chance(1, 3);
        c.min_cleanable_dirty_ratio = rng.below(50) as f64 / 100.0;
        c.delete_retention_ms = rng.below(120_000) as i64;
        c.min_compaction_lag_ms = if rng.chance(1, 4) {
            rng.below(60_000) as i64
        } else {
            0
        };
        // Small key maps too, so that passes end where a full map does.
        let map_slots = if rng.chance(1, 3) {
            4 + rng.below(60)
        } else {
            1 << 12
        };
        self.compaction = Some(Compaction {
            cleaner: Cleaner::new(map_slots as usize * KEY_MAP_SLOT_BYTES),
        });
    }

    /// A compacted run's read check: whole valid stored batches (a cleaned batch may have
    /// gaps, fewer records, a delete horizon), each at the base and last offset of a batch
    /// written there, increasing, none reaching `limit`; every record in it is the record
    /// written at its offset (compaction removes records, never changes or moves one).
    /// Returns the batches' (base, last) offsets, the records' offsets, and the delete
    /// horizon of each tombstone whose batch carries one.
    pub(crate) fn check_compacted_read(
        &self,
        offset: i64,
        bytes: &[u8],
        limit: i64,
    ) -> CompactedRead {
        let (mut out, mut offsets, mut horizons) = (Vec::new(), Vec::new(), Vec::new());
        let mut pos = 0;
        while pos < bytes.len() {
            let h = validate_stored_batch(&bytes[pos..])
                .unwrap_or_else(|e| panic!("read at {offset}: invalid batch at byte {pos}: {e}"));
            let total = h.total_bytes();
            let (last, written) = self.model.batches.get(&h.base_offset).unwrap_or_else(|| {
                panic!("read at {offset}: batch at {} never written", h.base_offset)
            });
            assert_eq!(
                *last,
                h.last_offset(),
                "batch {} has other offsets",
                h.base_offset
            );
            assert!(h.last_offset() < limit, "read passed its limit {limit}");
            if let Some(&(_, prev_last)) = out.last() {
                assert!(h.base_offset > prev_last, "batches out of order");
            } else {
                assert!(
                    h.last_offset() >= offset,
                    "first batch ends before {offset}"
                );
            }
            let wrote: BTreeMap<i64, (Vec<u8>, Option<Vec<u8>>)> = decode(written);
            for r in records(&bytes[pos..pos + total])
                .expect("valid batch")
                .iter()
            {
                let r = r.expect("valid record");
                let (key, value) = wrote.get(&r.offset).unwrap_or_else(|| {
                    panic!("record at {} is not in the batch written there", r.offset)
                });
                assert!(
                    r.key == Some(&key[..]) && r.value == value.as_deref(),
                    "record at {} holds other bytes than were written",
                    r.offset
                );
                assert!(
                    offsets.last().is_none_or(|&o| o < r.offset),
                    "record offsets go backwards at {}",
                    r.offset
                );
                offsets.push(r.offset);
                if let (None, Some(horizon)) = (r.value, h.delete_horizon_ms()) {
                    horizons.push((r.offset, horizon));
                }
            }
            out.push((h.base_offset, h.last_offset()));
            pos += total;
        }
        (out, offsets, horizons)
    }

    /// What Kafka's cleaner promises, over the whole log: every acknowledged record from the
    /// log start to the log end (every record, unless a power loss just happened) is still
    /// there unless a later record of its key is there (or went legitimately itself), and a
    /// tombstone stays until `delete.retention.ms` has
    /// passed since it was written (its horizon is set at the first pass that keeps it,
    /// later still). So the latest value of every key survives, and an acknowledged record
    /// is only ever replaced by a durable one (a pass never cleans past what is synced).
    pub(crate) fn check_compaction(&mut self, log: &PartitionLog, holes_allowed: bool) {
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        let mut present = std::collections::BTreeSet::new();
        let mut offset = start;
        while offset < end {
            // A checking read, not part of the workload: no random faults, and a scheduled
            // one (it fires once) is read past.
            self.disk.set_fault_rate(0);
            let read = || self.clock.block_on(log.read(offset, 1 << 20, end));
            let bytes = match read() {
                Err(LogError::Io { .. }) => read(),
                r => r,
            }
            .unwrap_or_else(|e| panic!("read at {offset}: {e}"));
            self.disk.set_fault_rate(self.fault_rate_ppm);
            let (batches, offsets, horizons) = self.check_compacted_read(offset, &bytes, end);
            for (o, horizon) in horizons {
                let written = self.model.written_ms[&base_of(&self.model.batches, o)];
                assert!(
                    horizon >= written.saturating_add(self.config.delete_retention_ms),
                    "tombstone {o} written at {written} got the delete horizon {horizon}, \
                     before delete.retention.ms ({}) had passed",
                    self.config.delete_retention_ms
                );
                // Set once (KIP-534); the tombstone must stay until then.
                let seen = self.model.horizons.entry(o).or_insert(horizon);
                assert_eq!(*seen, horizon, "tombstone {o}'s delete horizon changed");
            }
            let Some(&(_, last)) = batches.last() else {
                break; // cleaned away up to the (empty) active segment, as Kafka's can be
            };
            present.extend(offsets);
            offset = last + 1;
        }
        let floor = self.model.retention_floor.max(start);
        let now = self.clock.now_ms();
        let retention = self.config.delete_retention_ms;
        // Per key, its records newest first: (offset, tombstone, written ms).
        let mut by_key: BTreeMap<Vec<u8>, Vec<(i64, bool, i64)>> = BTreeMap::new();
        for (&base, (_, bytes)) in self.model.batches.range(..end) {
            let written_ms = self
                .model
                .written_ms
                .get(&base)
                .copied()
                .unwrap_or(i64::MIN);
            for (o, (key, value)) in decode(bytes) {
                if o >= floor && o < end && !self.model.lost.contains(&o) {
                    by_key
                        .entry(key)
                        .or_default()
                        .push((o, value.is_none(), written_ms));
                }
            }
        }
        for (key, mut recs) in by_key {
            recs.sort_unstable_by_key(|r| std::cmp::Reverse(r.0));
            // A later record of this key is in the log, or went as an expired tombstone.
            let mut covered = false;
            for (o, tombstone, written_ms) in recs {
                if present.contains(&o) || covered {
                    covered = true;
                    continue;
                }
                let horizon = self.model.horizons.get(&o).copied().unwrap_or(i64::MIN);
                if tombstone && now >= written_ms.saturating_add(retention).max(horizon) {
                    covered = true; // its delete horizon may have passed
                    continue;
                }
                if holes_allowed && o >= self.model.acked {
                    // Never acknowledged: a power loss may have taken it (with a cleaner
                    // checkpoint, recovery keeps later batches across the hole). It
                    // replaces nothing then: older records of its key must still be there.
                    self.model.lost.insert(o);
                    continue;
                }
                panic!(
                    "record {o} (key {}, {}) is gone, yet nothing replaced it (log {start}..{end}, acked {}, now {now}, delete.retention.ms {retention})",
                    String::from_utf8_lossy(&key),
                    if tombstone { "tombstone" } else { "value" },
                    self.model.acked
                );
            }
        }
    }

    /// A cleaner pass when one is due, then the compaction invariants. The log start and
    /// end never move in a pass.
    pub(crate) fn compact(&mut self, log: &mut Option<PartitionLog>) -> Result<(), LogError> {
        let handle: LogHandle = Rc::new(RefCell::new(log.take().expect("open")));
        let (start, end) = {
            let l = handle.borrow();
            (l.log_start_offset(), l.log_end_offset())
        };
        let now = self.clock.now_ms();
        let cleaner = &mut self.compaction.as_mut().expect("compacted run").cleaner;
        let r = self.clock.block_on(cleaner.clean_if_due(&handle, now));
        *log = Some(
            Rc::try_unwrap(handle)
                .ok()
                .expect("the pass holds no reference once done")
                .into_inner(),
        );
        let l = log.as_ref().expect("put back");
        if let Ok(Some(stats)) = &r {
            trace!("cleaner pass: {stats:?}");
            self.stats.cleaner_passes += 1;
            self.stats.records_cleaned += stats.records_read - stats.records_kept;
            assert_eq!(
                (l.log_start_offset(), l.log_end_offset()),
                (start, end),
                "a cleaner pass moved the log's bounds"
            );
            self.check_compaction(l, false);
        }
        r.map(|_| ())
    }
}
