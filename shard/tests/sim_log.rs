//! Deterministic simulation of the partition log on the simulated disk (`shard::storage::sim`).
//!
//! Each run draws, from one seed, a log configuration and a sequence of operations: appends,
//! reads, syncs (a completed sync is an acknowledgement under `flush.policy=ack`), clock moves,
//! retention, clean restarts, crashes (kill -9: page cache kept), power losses (unsynced data
//! lost, torn or kept at random, unsynced metadata operations lost or kept) and injected
//! EIO / ENOSPC faults. Everything is checked against a simple in-memory model:
//!
//! - no batch acknowledged as durable (below the `durable_offset` of a completed sync) is lost,
//!   unless retention deleted it;
//! - offsets are never reused: after any restart the log end is at or past every acknowledged
//!   offset, and every batch the log holds is byte for byte the one written at that offset;
//! - a read returns whole valid batches only (never bytes past the last valid batch), the
//!   first one containing the requested offset.
//!
//! Time-boxed: seeds run for `SIM_SECONDS` (default 20), a fixed sequence of at most
//! `SIM_RUNS` (default 3,000) so CI is reproducible, or from a seed derived from the clock with
//! `SIM_EXPLORE=1` (no run cap), or exactly one seed with `SIM_SEED=<n>`. A failure prints its seed and the command that
//! replays it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use shard::storage::sim::{FaultOp, SimRng};
use shard::storage::{Clock, Disk, Env, SimClock, SimDisk};
use shard::{LogConfig, LogError, PartitionLog};
use wire::record_batch::{patched_prefix, validate_batch, BatchBuilder, Compression};

const LEADER_EPOCH: i32 = 3;

/// `SIM_TRACE=1` prints every operation of a run (use with `SIM_SEED`).
fn trace_on() -> bool {
    std::env::var_os("SIM_TRACE").is_some()
}
macro_rules! trace {
    ($($t:tt)*) => { if trace_on() { eprintln!($($t)*) } };
}
/// Operations per run (a run restarts the log many times within them).
const OPS_PER_RUN: usize = 400;

struct Model {
    /// Every batch written, by base offset: (last offset, bytes as stored). Includes the
    /// batch of a failed append (it may survive; see `Sim::append`).
    batches: BTreeMap<i64, (i64, Bytes)>,
    /// Offsets below this were acknowledged durable (a completed sync covered them).
    acked: i64,
    /// Highest log start offset seen: retention may have deleted anything below it.
    retention_floor: i64,
    /// Highest offset a DeleteRecords was answered for: the log start never goes below it
    /// again, whatever crashes or power losses follow.
    deleted_below: i64,
    /// Base offsets of failed appends since the last open.
    failed_appends: Vec<i64>,
}

struct Sim {
    rng: SimRng,
    disk: Rc<SimDisk>,
    clock: Rc<SimClock>,
    config: LogConfig,
    dir: PathBuf,
    model: Model,
    fault_rate_ppm: u64,
    stats: Stats,
}

#[derive(Default, Debug)]
struct Stats {
    appends: u64,
    reads: u64,
    syncs: u64,
    crashes: u64,
    power_losses: u64,
    clean_restarts: u64,
    failures: u64,
    retention_deletes: u64,
    delete_records: u64,
    /// Batches of failed appends that the next open kept.
    failed_appends_kept: u64,
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    // The simulated disk completes every operation immediately: no reactor is needed, and
    // none must be (a real reactor would make the run depend on the host).
    futures::executor::block_on(f)
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = SimRng::new(seed);
        let config = LogConfig {
            segment_bytes: 2048 + rng.below(16 << 10),
            segment_ms: 10_000 + rng.below(120_000),
            index_interval_bytes: 64 + rng.below(1024) as u32,
            segment_index_bytes: 96 + rng.below(1024) as u32,
            retention_ms: if rng.chance(1, 2) {
                60_000 + rng.below(600_000) as i64
            } else {
                -1
            },
            retention_bytes: if rng.chance(1, 2) {
                16_384 + rng.below(65_536) as i64
            } else {
                -1
            },
            ..LogConfig::default()
        };
        let fault_rate_ppm = if rng.chance(1, 3) {
            rng.below(20_000)
        } else {
            0
        };
        // The broker's log.dirs exist (durably) before any partition is created in them.
        let disk = SimDisk::new(rng.next_u64());
        disk.set_trace(trace_on());
        let env_disk = Disk::Sim(disk.clone());
        env_disk.create_dir_all("/data".as_ref()).unwrap();
        block_on(env_disk.sync_dir("/".as_ref())).unwrap();
        Sim {
            disk,
            rng,
            clock: SimClock::new(1_700_000_000_000),
            config,
            dir: PathBuf::from("/data/topic-0"),
            model: Model {
                batches: BTreeMap::new(),
                acked: 0,
                retention_floor: 0,
                deleted_below: 0,
                failed_appends: Vec::new(),
            },
            fault_rate_ppm,
            stats: Stats::default(),
        }
    }

    fn env(&self) -> Env {
        Env {
            disk: Disk::Sim(self.disk.clone()),
            clock: Clock::Sim(self.clock.clone()),
        }
    }

    /// Opens the log (no faults injected while it recovers: a failed open is retried after a
    /// crash, as a restarted broker would), then checks it against the model.
    fn open(&mut self) -> PartitionLog {
        self.disk.set_fault_rate(0);
        let mut tries = 0;
        let log = loop {
            match block_on(PartitionLog::open_in(
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

    fn check_after_open(&mut self, log: &PartitionLog) {
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
        // Offsets at or past the log end will be assigned again: forget what was there.
        self.model.batches.retain(|&base, _| base < end);
        // Read the whole log; every batch must be one we wrote, at its offset.
        let mut present = Vec::new();
        let mut offset = log.log_start_offset();
        while offset < end {
            let bytes = block_on(log.read(offset, 1 << 20, end))
                .unwrap_or_else(|e| panic!("read at {offset} after restart: {e}"));
            let batches = self.check_read(offset, &bytes, end);
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
    fn check_read(&self, offset: i64, bytes: &[u8], limit: i64) -> Vec<(i64, i64)> {
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

    fn append(&mut self, log: &mut PartitionLog) -> Result<(), LogError> {
        let records = 1 + self.rng.below(5) as usize;
        let value_len = self.rng.below(300) as usize;
        let ts = self.clock.now_ms() - self.rng.below(1000) as i64;
        let mut b = BatchBuilder::new(Compression::None);
        for i in 0..records {
            let value = vec![self.rng.below(256) as u8; value_len];
            b = b.push(Some(format!("k{i}").as_bytes()), Some(&value), &[], ts);
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
        self.stats.appends += 1;
        Ok(())
    }

    fn read(&mut self, log: &PartitionLog) {
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        let offset = start + self.rng.below((end - start + 1) as u64) as i64;
        let max_bytes = 1 + self.rng.below(4096) as usize;
        match block_on(log.read(offset, max_bytes, end)) {
            Ok(bytes) => {
                let batches = self.check_read(offset, &bytes, end);
                assert_eq!(
                    batches.is_empty(),
                    offset == end,
                    "read at {offset} of {start}..{end}"
                );
                self.stats.reads += 1;
            }
            Err(LogError::Io { .. }) => {} // an injected read fault
            Err(e) => panic!("read at {offset} of {start}..{end}: {e}"),
        }
    }

    /// DeleteRecords up to any offset up to the log end, including records not yet synced (a
    /// power loss may then cut the log end below it); on success the log start and the log
    /// end stay at least that, for good, so no offset below it is ever assigned again.
    fn delete_records(&mut self, log: &mut PartitionLog) -> Result<(), LogError> {
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
    fn check_below_start(&mut self, log: &PartitionLog) {
        let start = log.log_start_offset();
        if start == 0 {
            return;
        }
        let offset = self.rng.below(start as u64) as i64;
        match block_on(log.read(offset, 1 << 20, log.log_end_offset())) {
            Err(LogError::OffsetOutOfRange { .. }) | Err(LogError::Io { .. }) => {}
            Ok(bytes) => panic!(
                "read at {offset} below the log start {start} returned {} bytes",
                bytes.len()
            ),
            Err(e) => panic!("read at {offset} below the log start {start}: {e}"),
        }
    }

    /// A sync as the group commit runs it; on success everything below its target is acked.
    fn sync(&mut self, log: &mut PartitionLog) -> Result<(), LogError> {
        if let Some(job) = log.begin_sync() {
            let r = block_on(job.run());
            let target = job.target();
            log.finish_sync(job, r)?;
            self.model.acked = self.model.acked.max(target);
            assert_eq!(log.durable_offset(), log.durable_offset().max(target));
            self.stats.syncs += 1;
        }
        Ok(())
    }

    fn inject_fault(&mut self) {
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

    fn run(&mut self) {
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
                50..=64 => {
                    self.read(l);
                    Ok(())
                }
                65..=76 => self.sync(l),
                77..=84 => {
                    self.clock.advance_ms(self.rng.below(30_000));
                    Ok(())
                }
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
                    self.stats.power_losses += 1;
                    log = Some(self.open());
                    Ok(())
                }
                _ => {
                    let l = log.take().unwrap();
                    let end = l.log_end_offset();
                    match block_on(l.close()) {
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
        drop(self.open());
    }
}

fn run_seed(seed: u64) -> Stats {
    let mut sim = Sim::new(seed);
    sim.run();
    sim.stats
}

#[test]
fn simulated_log_survives_crashes_and_power_loss() {
    if trace_on() {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(tracing::Level::DEBUG)
            .try_init();
    }
    if let Ok(seed) = std::env::var("SIM_SEED") {
        let seed: u64 = seed.parse().expect("SIM_SEED is a number");
        let stats = run_seed(seed);
        eprintln!("seed {seed}: {stats:?}");
        return;
    }
    let seconds: u64 = std::env::var("SIM_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    // CI runs a fixed sequence of seeds (reproducible: a red run is red again); `SIM_EXPLORE=1`
    // starts from a clock-derived seed to search new ground. `SIM_RUNS` caps the count.
    let first: u64 = if std::env::var_os("SIM_EXPLORE").is_some() {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    } else {
        1
    };
    let max_runs: u64 = std::env::var("SIM_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if first == 1 { 3_000 } else { u64::MAX });
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut runs = 0u64;
    let mut total = Stats::default();
    // A panic in a run is caught to print its seed, then re-raised.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    while (Instant::now() < deadline || runs == 0) && runs < max_runs {
        let seed = first.wrapping_add(runs.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        match std::panic::catch_unwind(|| run_seed(seed)) {
            Ok(s) => {
                total.appends += s.appends;
                total.reads += s.reads;
                total.syncs += s.syncs;
                total.crashes += s.crashes;
                total.power_losses += s.power_losses;
                total.clean_restarts += s.clean_restarts;
                total.failures += s.failures;
                total.retention_deletes += s.retention_deletes;
                total.delete_records += s.delete_records;
                total.failed_appends_kept += s.failed_appends_kept;
            }
            Err(panic) => {
                std::panic::set_hook(hook);
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!(
                    "simulation failed with seed {seed}: {msg}\nreplay: SIM_SEED={seed} cargo test --release -p shard --test sim_log"
                );
            }
        }
        runs += 1;
    }
    std::panic::set_hook(hook);
    eprintln!("{runs} seeded runs in {seconds} s: {total:?}");
}

/// Seed 9717031627346183530: an append hit ENOSPC after its whole batch (offset 241) reached
/// the page cache, and the truncate back failed too; after the restart, recovery kept the
/// valid batch (as Kafka's would: it was never acknowledged, so either outcome is allowed).
/// The model used to forget failed appends and called the batch "never written".
/// Segment preallocation (more size changes drawn at power loss) moved that seed's random
/// stream; seed 15674577907151808965 exercises the same case since.
#[test]
fn failed_append_kept_by_recovery() {
    let stats = run_seed(15_674_577_907_151_808_965);
    assert!(
        stats.failed_appends_kept > 0,
        "the seed no longer exercises a kept failed append: {stats:?}"
    );
}
