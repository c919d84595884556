//! Deterministic simulation of the metadata log on the simulated disk (`storage::SimDisk`).
//!
//! Each run draws, from one seed, a sequence of appends (1 to 4 records), snapshots, clean
//! restarts, crashes (kill -9: page cache kept), power losses (unsynced data lost, torn or
//! kept at random; unsynced metadata operations lost or kept) and injected EIO / ENOSPC
//! faults on the next few disk calls of a kind (or, before a third of the snapshots, at a
//! drawn step of that snapshot), which stop an append, a snapshot or an open part-way: with
//! a power loss after it, that is power lost at that point of the call.
//!
//! The record at offset `i` is a function of `i` alone (`record`), and the image they build
//! depends on every one of them and on their order, so comparing the reopened log's image
//! with the model's checks, after every reopen:
//!
//! - every append that returned Ok is present, in order, with no gap, and the log resumes
//!   right after the last record it holds;
//! - at most the one append that failed (a failure poisons the log) is there besides, and
//!   only a prefix of its records;
//! - the log opens: a torn tail is truncated; it is never refused after a crash or a power
//!   loss (an open may fail only when an injected fault fires during it).
//!
//! Time-boxed like the partition log's simulation: seeds for `SIM_SECONDS` (default 3), a
//! fixed sequence of at most `SIM_RUNS` (default 2,000) so CI is reproducible, or from a
//! clock-derived seed with `SIM_EXPLORE=1`, or exactly one seed with `SIM_SEED=<n>`
//! (`SIM_TRACE=1` prints the operations). A failure prints its seed and the replay command.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

use std::path::Path;
use std::time::{Duration, Instant};

use metadata::image::Image;
use metadata::{MetadataLog, MetadataRecord, RESOURCE_BROKER};
use storage::sim::{FaultOp, SimRng};
use storage::{Disk, SimDisk};

const DIR: &str = "/data/__cluster_metadata-0";

fn trace_on() -> bool {
    std::env::var_os("SIM_TRACE").is_some()
}

macro_rules! trace {
    ($($t:tt)*) => { if trace_on() { eprintln!($($t)*) } };
}

/// The record at offset `i`: a key of its own (a lost record shows), one key every record
/// overwrites (the order of the tail shows), the producer-id high mark (the count shows),
/// and topics now and then (larger frames).
fn record(i: u64) -> MetadataRecord {
    match i % 4 {
        0 => MetadataRecord::Config {
            resource_type: RESOURCE_BROKER,
            resource_name: String::new(),
            name: format!("k{i}"),
            value: Some(format!("v{i}")),
        },
        1 => MetadataRecord::Config {
            resource_type: RESOURCE_BROKER,
            resource_name: String::new(),
            name: "last".into(),
            value: Some(i.to_string()),
        },
        2 => MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: 0,
            next_producer_id: i as i64 + 1,
        },
        _ => MetadataRecord::Topic {
            name: format!("topic-{i}-{}", "x".repeat((i % 97) as usize)),
            topic_id: {
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&(i + 1).to_be_bytes());
                id
            },
        },
    }
}

/// The image of records `0..n` as of offset `n - 1`.
fn image_of(n: u64) -> Image {
    let records: Vec<MetadataRecord> = (0..n).map(record).collect();
    let mut image = Image::from_records(&records);
    image.offset = n.checked_sub(1);
    image
}

#[derive(Debug, Default)]
struct Stats {
    appends: u64,
    failed_appends: u64,
    snapshots: u64,
    failed_snapshots: u64,
    crashes: u64,
    power_losses: u64,
    restarts: u64,
    faults: u64,
    refused_opens: u64,
    /// Records of a failed append found after a reopen.
    kept_unacked: u64,
}

fn add(total: &mut Stats, s: Stats) {
    total.appends += s.appends;
    total.failed_appends += s.failed_appends;
    total.snapshots += s.snapshots;
    total.failed_snapshots += s.failed_snapshots;
    total.crashes += s.crashes;
    total.power_losses += s.power_losses;
    total.restarts += s.restarts;
    total.faults += s.faults;
    total.refused_opens += s.refused_opens;
    total.kept_unacked += s.kept_unacked;
}

struct Run {
    rng: SimRng,
    sim: std::rc::Rc<SimDisk>,
    disk: Disk,
    /// Records acknowledged (or found at the last open): offsets `0..acked`.
    acked: u64,
    /// Records of the failed append that may or may not be on disk, after `acked`.
    maybe: u64,
    /// A fault is scheduled (not yet cleared by a crash or power loss)...
    armed: bool,
    /// ... and had not fired while `faults_injected` was still this.
    injected_at_arm: u64,
    stats: Stats,
}

impl Run {
    /// Opens the log and checks it against the model; an open refused because an injected
    /// fault fired during it is retried after a crash (which clears faults), any other
    /// refusal is the failure.
    fn reopen(&mut self) -> MetadataLog {
        loop {
            let injected = self.sim.faults_injected();
            match MetadataLog::open(&self.disk, Path::new(DIR)) {
                Ok((log, records)) => {
                    self.check(&log, &records);
                    return log;
                }
                Err(e) if self.sim.faults_injected() > injected => {
                    trace!("open refused under an injected fault: {e}");
                    self.stats.refused_opens += 1;
                    self.sim.crash();
                    self.armed = false;
                }
                Err(e) => panic!(
                    "the log refused to open after a crash or power loss: {e}\n{}",
                    self.sim.dump()
                ),
            }
        }
    }

    fn check(&mut self, log: &MetadataLog, records: &[MetadataRecord]) {
        let n = log.next_offset();
        trace!(
            "opened: next offset {n} (acked {}, maybe {})",
            self.acked,
            self.maybe
        );
        assert!(
            n >= self.acked,
            "acknowledged records lost: the log resumes at {n}, {} were acknowledged\n{}",
            self.acked,
            self.sim.dump()
        );
        assert!(
            n <= self.acked + self.maybe,
            "the log holds {n} records, only {} + {} unacknowledged were ever written",
            self.acked,
            self.maybe
        );
        let mut replayed = Image::from_records(records);
        replayed.offset = log.last_offset();
        assert!(
            replayed == image_of(n),
            "records 0..{n} are not all there in order (acked {})\n{}",
            self.acked,
            self.sim.dump()
        );
        self.stats.kept_unacked += n - self.acked;
        self.acked = n;
        self.maybe = 0;
    }

    /// Schedules an EIO at one drawn step of the coming snapshot: its temporary file (open,
    /// truncate, write, fdatasync), the rename, the directory sync, then the new log file
    /// (open, truncate, fdatasync, directory sync). Drawn at random among every kind of call
    /// instead, a fault would rarely land inside the snapshot's window.
    fn arm_snapshot_fault(&mut self) {
        const STEPS: [(FaultOp, u64); 10] = [
            (FaultOp::Open, 0),
            (FaultOp::Truncate, 0),
            (FaultOp::Write, 0),
            (FaultOp::Sync, 0),
            (FaultOp::Rename, 0),
            (FaultOp::SyncDir, 0),
            (FaultOp::Open, 1),
            (FaultOp::Truncate, 1),
            (FaultOp::Sync, 1),
            (FaultOp::SyncDir, 1),
        ];
        let (op, n) = STEPS[self.rng.below(STEPS.len() as u64) as usize];
        trace!("fault: snapshot's {op:?} call {n} fails");
        self.sim.fail_nth(op, n, EIO);
        self.armed = true;
        self.injected_at_arm = self.sim.faults_injected();
        self.stats.faults += 1;
    }

    /// Schedules one EIO / ENOSPC on one of the next few calls of a drawn kind, unless one
    /// is still waiting to fire (faults piling up would all fire on the first calls).
    fn arm_fault(&mut self) {
        if self.armed && self.sim.faults_injected() == self.injected_at_arm {
            return;
        }
        const OPS: [FaultOp; 6] = [
            FaultOp::Open,
            FaultOp::Write,
            FaultOp::Sync,
            FaultOp::SyncDir,
            FaultOp::Truncate,
            FaultOp::Rename,
        ];
        let op = OPS[self.rng.below(OPS.len() as u64) as usize];
        let n = self.rng.below(4);
        let errno = if op == FaultOp::Write && self.rng.chance(1, 2) {
            ENOSPC
        } else {
            EIO
        };
        trace!("fault: {op:?} call {n} fails with errno {errno}");
        self.sim.fail_nth(op, n, errno);
        self.armed = true;
        self.injected_at_arm = self.sim.faults_injected();
        self.stats.faults += 1;
    }
}

/// Linux's errno values (no libc dependency for two numbers).
const EIO: i32 = 5;
const ENOSPC: i32 = 28;

fn run_seed(seed: u64) -> Stats {
    let mut rng = SimRng::new(seed);
    let sim = SimDisk::new(rng.next_u64());
    sim.set_trace(trace_on());
    let disk = Disk::Sim(sim.clone());
    // The data directory exists, durably, before the broker starts (as `log.dirs` does).
    disk.create_dir_all(Path::new("/data")).unwrap();
    disk.sync_dir_blocking(Path::new("/")).unwrap();
    let ops = 40 + rng.below(200);
    let mut run = Run {
        rng,
        sim,
        disk,
        acked: 0,
        maybe: 0,
        armed: false,
        injected_at_arm: 0,
        stats: Stats::default(),
    };
    let mut log = run.reopen();
    for _ in 0..ops {
        match run.rng.below(100) {
            0..=59 => {
                let count = 1 + run.rng.below(4);
                let start = log.next_offset();
                let batch: Vec<MetadataRecord> = (start..start + count).map(record).collect();
                match log.append(&batch) {
                    Ok(last) => {
                        assert_eq!(start, run.acked, "appended past a failed append");
                        assert_eq!(last, start + count - 1);
                        trace!("append {start}..={last}");
                        run.acked += count;
                        run.stats.appends += 1;
                    }
                    Err(e) => {
                        trace!("append {start}+{count} failed: {e}");
                        // Only the first failure can have written: it poisons the log.
                        if run.maybe == 0 {
                            run.maybe = count;
                        }
                        run.stats.failed_appends += 1;
                    }
                }
            }
            60..=69 => {
                // A snapshot is several files and directory syncs: often fail one of them.
                if run.rng.chance(1, 3) {
                    run.arm_snapshot_fault();
                }
                let image = image_of(run.acked);
                match log.snapshot(&image) {
                    Ok(()) => {
                        trace!("snapshot at {:?}", image.offset);
                        run.stats.snapshots += 1;
                    }
                    Err(e) => {
                        trace!("snapshot failed: {e}");
                        run.stats.failed_snapshots += 1;
                    }
                }
            }
            70..=77 => run.arm_fault(),
            78..=83 => {
                trace!("restart");
                drop(log);
                run.stats.restarts += 1;
                log = run.reopen();
            }
            84..=89 => {
                trace!("crash");
                drop(log);
                run.sim.crash();
                run.armed = false;
                run.stats.crashes += 1;
                log = run.reopen();
            }
            _ => {
                trace!("power loss");
                drop(log);
                run.sim.power_loss();
                run.armed = false;
                run.stats.power_losses += 1;
                log = run.reopen();
            }
        }
    }
    // Whatever state the run ended in, a power loss now must leave every acknowledged record.
    drop(log);
    run.sim.power_loss();
    run.armed = false;
    let log = run.reopen();
    drop(log);
    run.stats
}

/// `SIM_SEED=<n>` runs exactly one seed; otherwise a fixed sequence (a red run is red again)
/// or, with `SIM_EXPLORE=1`, one from a clock-derived seed, for `SIM_SECONDS` (default 3)
/// and at most `SIM_RUNS` runs (default 2,000 for the fixed sequence).
#[test]
fn metadata_log_survives_crashes_and_power_losses() {
    if let Ok(seed) = std::env::var("SIM_SEED") {
        let seed: u64 = seed.parse().expect("SIM_SEED is a number");
        let stats = run_seed(seed);
        eprintln!("seed {seed}: {stats:?}");
        return;
    }
    let env = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let seconds = env("SIM_SECONDS").unwrap_or(3);
    let first: u64 = if std::env::var_os("SIM_EXPLORE").is_some() {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    } else {
        1
    };
    let max_runs = env("SIM_RUNS").unwrap_or(if first == 1 { 2_000 } else { u64::MAX });
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut runs = 0u64;
    let mut total = Stats::default();
    // A panic in a run is caught to print its seed, then re-raised.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    while (Instant::now() < deadline || runs == 0) && runs < max_runs {
        let seed = first.wrapping_add(runs.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        match std::panic::catch_unwind(|| run_seed(seed)) {
            Ok(s) => add(&mut total, s),
            Err(panic) => {
                std::panic::set_hook(hook);
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!(
                    "simulation failed with seed {seed}: {msg}\nreplay: SIM_SEED={seed} \
                     SIM_TRACE=1 cargo test -p metadata --test sim_log"
                );
            }
        }
        runs += 1;
    }
    std::panic::set_hook(hook);
    eprintln!("{runs} runs: {total:?}");
    assert!(total.appends > 0 && total.power_losses > 0);
}
