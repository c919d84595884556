//! One partition's log on the simulated disk against an in-memory model: the seeded
//! workload of appends, reads, syncs, clock moves, retention, DeleteRecords, compaction,
//! clean restarts, crashes, power losses and injected faults (see `tests/sim_log.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use shard::storage::sim::{FaultOp, SimRng};
use shard::storage::{Clock, Disk, Env, SimClock, SimDisk};
use shard::{LogConfig, LogError, PartitionLog};
use wire::record_batch::{patched_prefix, validate_batch, BatchBuilder, Compression};

use super::compaction::Compaction;
use super::{draw_config, make_data_dir, LEADER_EPOCH};

/// Operations per run (a run restarts the log many times within them).
pub(crate) const OPS_PER_RUN: usize = 400;

pub(crate) struct Model {
    /// Every batch written, by base offset: (last offset, bytes as stored). Includes the
    /// batch of a failed append (it may survive; see `Sim::append`).
    pub(crate) batches: BTreeMap<i64, (i64, Bytes)>,
    /// Offsets below this were acknowledged durable (a completed sync covered them).
    pub(crate) acked: i64,
    /// Highest log start offset seen: retention may have deleted anything below it.
    pub(crate) retention_floor: i64,
    /// Highest offset a DeleteRecords was answered for: the log start never goes below it
    /// again, whatever crashes or power losses follow.
    pub(crate) deleted_below: i64,
    /// Base offsets of failed appends since the last open.
    pub(crate) failed_appends: Vec<i64>,
    /// Compacted runs: when each batch was appended (virtual wall ms), by base offset.
    pub(crate) written_ms: BTreeMap<i64, i64>,
    /// Compacted runs: offsets of unacknowledged records a power loss took from the middle
    /// of the log (recovery keeps later batches across such a hole once the log has a
    /// cleaner checkpoint); gone for good, so no later acknowledgement covers them.
    pub(crate) lost: std::collections::BTreeSet<i64>,
    /// Compacted runs: delete horizons seen on tombstones, by offset.
    pub(crate) horizons: BTreeMap<i64, i64>,
}

pub(crate) struct Sim {
    pub(crate) rng: SimRng,
    /// Set for a compacted run (`cleanup.policy` with `compact`).
    pub(crate) compaction: Option<Compaction>,
    /// A power loss happened since the last open (unacknowledged records may be missing).
    pub(crate) power_lost: bool,
    pub(crate) disk: Rc<SimDisk>,
    pub(crate) clock: Rc<SimClock>,
    pub(crate) config: LogConfig,
    pub(crate) dir: PathBuf,
    pub(crate) model: Model,
    pub(crate) fault_rate_ppm: u64,
    pub(crate) stats: Stats,
}

#[derive(Default, Debug)]
pub(crate) struct Stats {
    pub(crate) appends: u64,
    pub(crate) reads: u64,
    pub(crate) syncs: u64,
    pub(crate) crashes: u64,
    pub(crate) power_losses: u64,
    pub(crate) clean_restarts: u64,
    pub(crate) failures: u64,
    pub(crate) retention_deletes: u64,
    pub(crate) delete_records: u64,
    /// Batches of failed appends that the next open kept.
    pub(crate) failed_appends_kept: u64,
    pub(crate) cleaner_passes: u64,
    /// Records the cleaner's passes removed.
    pub(crate) records_cleaned: u64,
}

impl Sim {
    pub(crate) fn new(seed: u64) -> Sim {
        let mut rng = SimRng::new(seed);
        let config = draw_config(&mut rng);
        let fault_rate_ppm = if rng.chance(1, 3) {
            rng.below(20_000)
        } else {
            0
        };
        let disk = SimDisk::new(rng.next_u64());
        let clock = SimClock::new(1_700_000_000_000);
        make_data_dir(&disk, &clock);
        let dir = PathBuf::from("/data/topic-0");
        let mut sim = Sim::part(rng, disk, clock, dir, config, fault_rate_ppm);
        sim.maybe_compacted(seed);
        sim
    }

    /// One partition's model and checks, on a disk and clock it may share with others.
    pub(crate) fn part(
        rng: SimRng,
        disk: Rc<SimDisk>,
        clock: Rc<SimClock>,
        dir: PathBuf,
        config: LogConfig,
        fault_rate_ppm: u64,
    ) -> Sim {
        Sim {
            disk,
            rng,
            clock,
            config,
            dir,
            model: Model {
                batches: BTreeMap::new(),
                acked: 0,
                retention_floor: 0,
                deleted_below: 0,
                failed_appends: Vec::new(),
                written_ms: BTreeMap::new(),
                lost: Default::default(),
                horizons: BTreeMap::new(),
            },
            compaction: None,
            power_lost: false,
            fault_rate_ppm,
            stats: Stats::default(),
        }
    }

    pub(crate) fn env(&self) -> Env {
        Env {
            disk: Disk::Sim(self.disk.clone()),
            clock: Clock::Sim(self.clock.clone()),
        }
    }

    /// Opens the log (no faults injected while it recovers: a failed open is retried after a
    /// crash, as a restarted broker would), then checks it against the model.
    pub(crate) fn open(&mut self) -> PartitionLog {
        self.disk.set_fault_rate(0);
        let mut tries = 0;
        let log = loop {
            match self.clock.block_on(PartitionLog::open_in(
                self.env(),
                self.dir.clone(),
                self.config.clone(),
            )) {
                Ok(log) => break log,
                Err(e) => {
                    tries += 1;
                    assert!(tries < 3, "open fails without injected faults: {e}");
                    self.disk.crash();
                }
            }
        };
        self.check_after_open(&log);
        self.disk.set_fault_rate(self.fault_rate_ppm);
        log
    }

    pub(crate) fn check_after_open(&mut self, log: &PartitionLog) {
        let end = log.log_end_offset();
        trace!(
            "opened: {}..{end} recovery {:?}\n{}",
            log.log_start_offset(),
            log.recovery_report(),
            self.disk.dump()
        );
        assert!(
            end >= self.model.acked,
            "log end {end} after restart is below the acknowledged offset {}: acked records lost, offsets would be reused",
            self.model.acked
        );
        // Offsets at or past the log end will be assigned again: forget what was there. A
        // batch is kept or lost whole: one reaching the end is gone even where its base is
        // below it (a DeleteRecords inside it moved the log start, hence the end, past its
        // base).
        self.model.batches.retain(|_, &mut (last, _)| last < end);
        // Read the whole log; every batch must be one we wrote, at its offset.
        let mut present = Vec::new();
        let mut offset = log.log_start_offset();
        while offset < end {
            let bytes = self
                .clock
                .block_on(log.read(offset, 1 << 20, end))
                .unwrap_or_else(|e| panic!("read at {offset} after restart: {e}"));
            let batches = self.check_read(offset, &bytes, end);
            if batches.is_empty() && self.compaction.is_some() {
                break; // the cleaner removed every batch from here to the (empty) active segment
            }
            assert!(
                !batches.is_empty(),
                "empty read at {offset} below log end {end}"
            );
            offset = batches.last().unwrap().1 + 1;
            present.extend(batches);
        }
        for base in std::mem::take(&mut self.model.failed_appends) {
            if present.iter().any(|&(b, _)| b == base) {
                trace!("kept the batch of a failed append at {base}");
                self.stats.failed_appends_kept += 1;
            }
        }
        assert!(
            log.log_start_offset() >= self.model.deleted_below,
            "log start {} after restart is below an answered DeleteRecords ({})",
            log.log_start_offset(),
            self.model.deleted_below
        );
        assert!(
            end >= self.model.deleted_below,
            "log end {end} after restart is below an answered DeleteRecords ({}): offsets would be reused",
            self.model.deleted_below
        );
        self.check_below_start(log);
        self.model.retention_floor = self.model.retention_floor.max(log.log_start_offset());
        if self.compaction.is_some() {
            // Records may be gone, superseded: checked record by record (which covers the
            // acknowledged ones).
            let holes_allowed = std::mem::take(&mut self.power_lost);
            self.check_compaction(log, holes_allowed);
            return;
        }
        for (&base, &(last, _)) in self.model.batches.range(self.model.retention_floor..) {
            if last < self.model.acked {
                assert!(
                    present.iter().any(|&(b, _)| b == base),
                    "acknowledged batch {base}..={last} lost (acked below {}, log {}..{end})",
                    self.model.acked,
                    log.log_start_offset()
                );
            }
        }
    }

    /// Checks a read at `offset`: whole valid batches, each the one written at its offset,
    /// increasing, the first containing `offset`, none reaching `limit`. Returns their
    /// (base, last) offsets.
    pub(crate) fn check_read(&self, offset: i64, bytes: &[u8], limit: i64) -> Vec<(i64, i64)> {
        if self.compaction.is_some() {
            return self.check_compacted_read(offset, bytes, limit).0;
        }
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = validate_batch(&bytes[pos..])
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
            assert!(
                written[..] == bytes[pos..pos + total],
                "batch {} holds other bytes than were written",
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
            out.push((h.base_offset, h.last_offset()));
            pos += total;
        }
        out
    }

    pub(crate) fn append(&mut self, log: &mut PartitionLog) -> Result<(), LogError> {
        let records = 1 + self.rng.below(5) as usize;
        let value_len = self.rng.below(300) as usize;
        let ts = self.clock.now_ms() - self.rng.below(1000) as i64;
        let mut b = BatchBuilder::new(Compression::None);
        let compacted = self.compaction.is_some();
        for i in 0..records {
            let value = vec![self.rng.below(256) as u8; value_len];
            if compacted {
                // Few keys, so passes find superseded records; some tombstones.
                let key = format!("k{}", self.rng.below(12));
                let value = (!self.rng.chance(1, 8)).then_some(&value[..]);
                b = b.push(Some(key.as_bytes()), value, &[], ts);
            } else {
                b = b.push(Some(format!("k{i}").as_bytes()), Some(&value), &[], ts);
            }
        }
        let bytes = b.build();
        let h = validate_batch(&bytes).expect("builder makes valid batches");
        let base = log.log_end_offset();
        let info = match log.append(&bytes, &h, LEADER_EPOCH) {
            Ok(info) => info,
            Err(e) => {
                // A failed append was never acknowledged, but its bytes may still be in the
                // file (a write fault after the whole batch reached the page cache, then a
                // failed truncate back): the next open may keep it at the offset it would
                // have had, as Kafka's recovery keeps any valid batch. If it does not, the
                // open forgets it (at or past the log end).
                let mut stored = bytes.to_vec();
                stored[..16].copy_from_slice(&patched_prefix(&bytes, base, LEADER_EPOCH));
                let last = base + h.last_offset_delta as i64;
                self.model.batches.insert(base, (last, Bytes::from(stored)));
                self.model.written_ms.insert(base, self.clock.now_ms());
                self.model.failed_appends.push(base);
                return Err(e);
            }
        };
        assert!(!info.duplicate);
        assert!(
            info.base_offset >= self.model.acked,
            "offset {} reused below the acknowledged {}",
            info.base_offset,
            self.model.acked
        );
        assert!(
            info.base_offset >= self.model.deleted_below,
            "offset {} reused below an answered DeleteRecords ({})",
            info.base_offset,
            self.model.deleted_below
        );
        let mut stored = bytes.to_vec();
        stored[..16].copy_from_slice(&patched_prefix(&bytes, info.base_offset, LEADER_EPOCH));
        self.model
            .batches
            .insert(info.base_offset, (info.last_offset, Bytes::from(stored)));
        self.model
            .written_ms
            .insert(info.base_offset, self.clock.now_ms());
        self.stats.appends += 1;
        Ok(())
    }

    pub(crate) fn read(&mut self, log: &PartitionLog) {
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        let offset = start + self.rng.below((end - start + 1) as u64) as i64;
        let max_bytes = 1 + self.rng.below(4096) as usize;
        match self.clock.block_on(log.read(offset, max_bytes, end)) {
            Ok(bytes) => {
                let batches = self.check_read(offset, &bytes, end);
                // A compacted log may have nothing left between `offset` and its end.
                if self.compaction.is_none() || offset == end {
                    assert_eq!(
                        batches.is_empty(),
                        offset == end,
                        "read at {offset} of {start}..{end}"
                    );
                }
                self.stats.reads += 1;
            }
            Err(LogError::Io { .. }) => {} // an injected read fault
            Err(e) => panic!("read at {offset} of {start}..{end}: {e}"),
        }
    }

    /// DeleteRecords up to any offset up to the log end, including records not yet synced (a
    /// power loss may then cut the log end below it); on success the log start and the log
    /// end stay at least that, for good, so no offset below it is ever assigned again.
    pub(crate) fn delete_records(&mut self, log: &mut PartitionLog) -> Result<(), LogError> {
        let start = log.log_start_offset();
        let top = log.log_end_offset();
        if top <= start {
            return Ok(());
        }
        let offset = start + 1 + self.rng.below((top - start) as u64) as i64;
        let low_watermark = log.delete_records(offset)?;
        assert!(
            low_watermark >= offset,
            "DeleteRecords({offset}) answered {low_watermark}"
        );
        self.model.deleted_below = self.model.deleted_below.max(offset);
        self.model.retention_floor = self.model.retention_floor.max(low_watermark);
        self.stats.delete_records += 1;
        self.check_below_start(log);
        Ok(())
    }

    /// A fetch below the log start never returns records.
    pub(crate) fn check_below_start(&mut self, log: &PartitionLog) {
        let start = log.log_start_offset();
        if start == 0 {
            return;
        }
        let offset = self.rng.below(start as u64) as i64;
        match self
            .clock
            .block_on(log.read(offset, 1 << 20, log.log_end_offset()))
        {
            Err(LogError::OffsetOutOfRange { .. }) | Err(LogError::Io { .. }) => {}
            Ok(bytes) => panic!(
                "read at {offset} below the log start {start} returned {} bytes",
                bytes.len()
            ),
            Err(e) => panic!("read at {offset} below the log start {start}: {e}"),
        }
    }

    /// A sync as the group commit runs it; on success everything below its target is acked.
    pub(crate) fn sync(&mut self, log: &mut PartitionLog) -> Result<(), LogError> {
        if let Some(job) = log.begin_sync() {
            let r = self.clock.block_on(job.run());
            let target = job.target();
            log.finish_sync(job, r)?;
            self.model.acked = self.model.acked.max(target);
            assert_eq!(log.durable_offset(), log.durable_offset().max(target));
            self.stats.syncs += 1;
        }
        Ok(())
    }

    pub(crate) fn inject_fault(&mut self) {
        const OPS: [FaultOp; 7] = [
            FaultOp::Write,
            FaultOp::Sync,
            FaultOp::SyncDir,
            FaultOp::Truncate,
            FaultOp::Rename,
            FaultOp::Remove,
            FaultOp::Read,
        ];
        let op = OPS[self.rng.below(OPS.len() as u64) as usize];
        let errno = if op == FaultOp::Write && self.rng.chance(1, 2) {
            libc::ENOSPC
        } else {
            libc::EIO
        };
        self.disk.fail_nth(op, self.rng.below(8), errno);
    }

    pub(crate) fn run(&mut self) {
        let mut log = Some(self.open());
        for _ in 0..OPS_PER_RUN {
            let l = log.as_mut().expect("open");
            let op = self.rng.below(100);
            trace!(
                "op {op} end {} acked {}",
                l.log_end_offset(),
                self.model.acked
            );
            let r = match op {
                0..=49 => self.append(l),
                58..=64 if self.compaction.is_some() => self.compact(&mut log),
                50..=64 => {
                    self.read(l);
                    Ok(())
                }
                65..=76 => self.sync(l),
                77..=84 => {
                    self.clock.advance_ms(self.rng.below(30_000));
                    Ok(())
                }
                // DeleteRecords needs `delete` in cleanup.policy (POLICY_VIOLATION otherwise).
                85..=86 if !self.config.cleanup_delete => Ok(()),
                85..=86 => self.delete_records(l),
                87..=88 => {
                    let now = self.clock.now_ms();
                    l.apply_retention(now).map(|n| {
                        self.stats.retention_deletes += n as u64;
                        self.model.retention_floor =
                            self.model.retention_floor.max(l.log_start_offset());
                    })
                }
                89..=90 => {
                    self.inject_fault();
                    Ok(())
                }
                91..=93 => {
                    drop(log.take());
                    self.disk.crash();
                    self.stats.crashes += 1;
                    log = Some(self.open());
                    Ok(())
                }
                94..=96 => {
                    drop(log.take());
                    trace!("power loss; before:\n{}", self.disk.dump());
                    self.disk.power_loss();
                    self.power_lost = true;
                    self.stats.power_losses += 1;
                    log = Some(self.open());
                    Ok(())
                }
                _ => {
                    let l = log.take().unwrap();
                    let end = l.log_end_offset();
                    match self.clock.block_on(l.close()) {
                        Ok(()) => {
                            // Closing synced everything: all of it is acknowledged now.
                            self.model.acked = self.model.acked.max(end);
                            self.stats.clean_restarts += 1;
                        }
                        Err(_) => self.stats.failures += 1,
                    }
                    self.disk.crash(); // the process exits
                    log = Some(self.open());
                    Ok(())
                }
            };
            if let Err(e) = &r {
                trace!("failed: {e}");
            }
            if r.is_err() {
                // An injected fault failed the log: the broker would restart it.
                self.stats.failures += 1;
                drop(log.take());
                self.disk.crash();
                log = Some(self.open());
            }
        }
        // End with the worst case: power loss, then everything acked must be there.
        drop(log.take());
        self.disk.power_loss();
        self.power_lost = true;
        drop(self.open());
    }
}

pub(crate) fn run_seed(seed: u64) -> Stats {
    let mut sim = Sim::new(seed);
    sim.run();
    sim.stats
}
