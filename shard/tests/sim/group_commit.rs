//! One shard's group commit on the virtual clock over several partitions (see `GcSim`).

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use shard::storage::sim::SimRng;
use shard::storage::{Clock, SimClock, SimDisk};
use shard::{FlushPolicy, GroupCommit, LogHandle};

use super::log_model::Sim;
use super::{draw_config, make_data_dir};

/// Partitions of a group-commit run (one shard's `GroupCommit` covers them all).
pub(crate) const GC_PARTITIONS: usize = 4;
/// Driver steps per group-commit run.
pub(crate) const GC_STEPS_PER_RUN: usize = 300;

/// One shard's group commit on the simulated disk and clock: several partitions, some
/// `flush.policy=ack` with acks=all producers waiting on `wait_durable`, some `replication`
/// with `flush.ms` / `flush.messages` served by the periodic check; fdatasyncs take drawn
/// virtual time, so rounds overlap (`MAX_ROUNDS_IN_FLIGHT`) and crashes and power losses land
/// while syncs are in flight. Checked, with each partition's `Sim` model:
///
/// - an acks=all waiter returns Ok only once its bytes are durable, and what it acknowledged
///   survives any crash or power loss (as does everything below a log's `durable_offset`);
/// - every waiter returns (Ok or the log's failure) within a bounded virtual time once
///   producers stop;
/// - `flush.ms` / `flush.messages`: an append that made a replication log due is durable
///   within the check's bound (due + one tick + four fdatasyncs: its log's round in flight,
///   up to two rounds before a slot frees, its own).
pub(crate) struct GcSim {
    pub(crate) rng: SimRng,
    pub(crate) disk: Rc<SimDisk>,
    pub(crate) clock: Rc<SimClock>,
    pub(crate) parts: Vec<Sim>,
    pub(crate) logs: Vec<LogHandle>,
    pub(crate) gc: Rc<GroupCommit>,
    pub(crate) tick: Duration,
    pub(crate) sync_max: Duration,
    /// Offsets acknowledged by waiters since the driver last looked: (partition, offset).
    pub(crate) acks: Rc<RefCell<Vec<(usize, i64)>>>,
    /// Waiters spawned and not yet returned.
    pub(crate) waiting: Rc<Cell<u64>>,
    /// Per partition: (virtual µs by which it must be durable, log end it must reach), for
    /// appends that made a replication log due.
    pub(crate) deadlines: Vec<Vec<(u64, i64)>>,
    pub(crate) stats: GcStats,
}

#[derive(Default, Debug)]
pub(crate) struct GcStats {
    pub(crate) appends: u64,
    pub(crate) waits: u64,
    pub(crate) acked_by_waiters: u64,
    pub(crate) rounds: u64,
    pub(crate) overlapped_rounds: u64,
    pub(crate) crashes: u64,
    pub(crate) power_losses: u64,
    pub(crate) clean_restarts: u64,
    pub(crate) failures: u64,
}

impl GcSim {
    pub(crate) fn new(seed: u64) -> GcSim {
        let mut rng = SimRng::new(seed);
        let disk = SimDisk::new(rng.next_u64());
        let clock = SimClock::new(1_700_000_000_000);
        make_data_dir(&disk, &clock);
        let sync_min = Duration::from_micros(50 + rng.below(500));
        let sync_max = sync_min + Duration::from_micros(rng.below(5_000));
        disk.set_sync_latency(&clock, sync_min, sync_max);
        let tick = Duration::from_millis(5 + rng.below(100));
        let fault_rate_ppm = if rng.chance(1, 3) {
            rng.below(5_000)
        } else {
            0
        };
        let mut parts = Vec::new();
        for p in 0..GC_PARTITIONS {
            let mut config = draw_config(&mut rng);
            if p > 0 && rng.chance(1, 2) {
                config.flush_policy = FlushPolicy::Replication;
                if rng.chance(2, 3) {
                    config.flush_ms = 1 + rng.below(200);
                }
                if rng.chance(1, 2) {
                    config.flush_messages = 1 + rng.below(30);
                }
            }
            let part_rng = SimRng::new(rng.next_u64());
            let dir = PathBuf::from(format!("/data/topic-{p}"));
            parts.push(Sim::part(
                part_rng,
                disk.clone(),
                clock.clone(),
                dir,
                config,
                fault_rate_ppm,
            ));
        }
        let gc = GroupCommit::with_clock(Clock::Sim(clock.clone()), tick);
        GcSim {
            rng,
            disk,
            clock,
            parts,
            logs: Vec::new(),
            gc,
            tick,
            sync_max,
            acks: Rc::new(RefCell::new(Vec::new())),
            waiting: Rc::new(Cell::new(0)),
            deadlines: vec![Vec::new(); GC_PARTITIONS],
            stats: GcStats::default(),
        }
    }

    /// Opens every partition (checking each against its model) under a new group commit.
    pub(crate) fn start(&mut self) {
        self.gc = GroupCommit::with_clock(Clock::Sim(self.clock.clone()), self.tick);
        self.gc.spawn();
        self.logs = self
            .parts
            .iter_mut()
            .map(|part| Rc::new(RefCell::new(part.open())))
            .collect();
        for log in &self.logs {
            self.gc.register(log);
        }
        for d in &mut self.deadlines {
            d.clear();
        }
    }

    /// Takes in what waiters and completed syncs acknowledged, and checks the periodic
    /// check's deadlines.
    pub(crate) fn observe(&mut self) {
        for (p, offset) in self.acks.borrow_mut().drain(..) {
            let model = &mut self.parts[p].model;
            model.acked = model.acked.max(offset);
            self.stats.acked_by_waiters += 1;
        }
        let now = self.clock.now_us();
        for (p, log) in self.logs.iter().enumerate() {
            let l = log.borrow();
            // A completed sync is a promise too (the periodic check's, or an acks=1 log
            // swept up by a round).
            let model = &mut self.parts[p].model;
            model.acked = model.acked.max(l.durable_offset());
            if l.failure().is_some() {
                continue;
            }
            for &(by, end) in &self.deadlines[p] {
                assert!(
                    now < by || l.durable_offset() >= end,
                    "partition {p}: flush.ms / flush.messages made offsets below {end} due, \
                     yet at {now} µs (deadline {by} µs) the log is durable only to {}",
                    l.durable_offset()
                );
            }
            let durable = l.durable_offset();
            self.deadlines[p].retain(|&(_, end)| durable < end);
        }
    }

    pub(crate) fn append(&mut self, p: usize) {
        let log = self.logs[p].clone();
        let r = self.parts[p].append(&mut log.borrow_mut());
        if r.is_err() {
            return; // the log failed: the next step restarts it
        }
        self.stats.appends += 1;
        let (end, due) = {
            let l = log.borrow();
            (l.log_end_offset(), l.flush_due(self.clock.now_ms()))
        };
        let config = &self.parts[p].config;
        match config.flush_policy {
            FlushPolicy::Ack => {
                if self.rng.chance(3, 4) {
                    self.spawn_waiter(p, end);
                }
            }
            FlushPolicy::Replication => {
                // Due now (flush.messages) or once flush.ms has passed since this append
                // at the latest; then within one tick and four fdatasyncs: its log's round
                // in flight, up to two rounds before a slot frees (MAX_ROUNDS_IN_FLIGHT),
                // its own (three was too few: seed 10800781045927845410), +2 ms for the
                // whole-ms clock at both ends (the append's time and the check's).
                let wait_ms = if due { 0 } else { config.flush_ms };
                if wait_ms < 1_000_000 {
                    let slack = self.tick + self.sync_max * 4 + Duration::from_millis(2);
                    let by = self.clock.now_us() + wait_ms * 1000 + slack.as_micros() as u64;
                    self.deadlines[p].push((by, end));
                }
            }
        }
    }

    /// An acks=all producer: answers once `wait_durable` returns.
    pub(crate) fn spawn_waiter(&mut self, p: usize, target: i64) {
        let (gc, log) = (self.gc.clone(), self.logs[p].clone());
        let (acks, waiting) = (self.acks.clone(), self.waiting.clone());
        waiting.set(waiting.get() + 1);
        self.stats.waits += 1;
        self.clock.spawn(async move {
            let r = gc.wait_durable(&log).await;
            waiting.set(waiting.get() - 1);
            if r.is_ok() {
                let durable = log.borrow().durable_offset();
                assert!(
                    durable >= target,
                    "wait_durable returned with the log durable to {durable}, below {target}"
                );
                acks.borrow_mut().push((p, target));
            }
        });
    }

    /// The process dies: tasks (rounds in flight, waiters) and logs are dropped.
    pub(crate) fn kill(&mut self) {
        self.observe();
        self.stats.rounds += self.gc.stats().rounds.get();
        self.stats.overlapped_rounds += self.gc.stats().overlapped_rounds.get();
        self.clock.kill_tasks();
        // The old group commit may hold logs it was asked to sync.
        self.gc = GroupCommit::with_clock(Clock::Sim(self.clock.clone()), self.tick);
        self.logs.clear();
        self.waiting.set(0);
    }

    pub(crate) fn run_for_us(&mut self, us: u64) {
        // In steps, so the deadlines are checked as time passes.
        let mut left = us;
        while left > 0 {
            let step = left.min(500);
            self.clock.run_for(Duration::from_micros(step));
            left -= step;
            self.observe();
        }
    }

    pub(crate) fn run(&mut self) {
        self.start();
        for _ in 0..GC_STEPS_PER_RUN {
            let op = self.rng.below(100);
            trace!("gc op {op} at {} µs", self.clock.now_us());
            match op {
                0..=49 => {
                    let p = self.rng.below(GC_PARTITIONS as u64) as usize;
                    for _ in 0..1 + self.rng.below(3) {
                        self.append(p);
                    }
                    self.clock.run_until_stalled();
                }
                50..=74 => {
                    let us = self.rng.below(3_000);
                    self.run_for_us(us);
                }
                75..=81 => {
                    let us = self.tick.as_micros() as u64 + self.rng.below(50_000);
                    self.run_for_us(us);
                }
                82..=85 => {
                    // Producers stop: every waiter returns within a round in flight plus
                    // the next, each of one fdatasync per log (and slots to start them).
                    let bound = self.sync_max * 4 + Duration::from_millis(1);
                    self.run_for_us(bound.as_micros() as u64);
                    assert_eq!(
                        self.waiting.get(),
                        0,
                        "acks=all waiters still waiting {bound:?} after the last append"
                    );
                }
                86..=87 => {
                    let p = self.rng.below(GC_PARTITIONS as u64) as usize;
                    self.parts[p].inject_fault();
                }
                88..=92 => {
                    self.kill();
                    self.disk.crash();
                    self.stats.crashes += 1;
                    self.start();
                }
                93..=96 => {
                    self.kill();
                    self.disk.power_loss();
                    self.stats.power_losses += 1;
                    self.start();
                }
                _ => self.clean_restart(),
            }
            self.observe();
            if self.logs.iter().any(|l| l.borrow().failure().is_some()) {
                // A failed log: the broker restarts (its waiters got the failure).
                self.clock.run_until_stalled();
                self.stats.failures += 1;
                self.kill();
                self.disk.crash();
                self.start();
            }
        }
        self.kill();
        self.disk.power_loss();
        self.start();
        self.kill();
    }

    /// Shutdown: waiters finish, the flusher exits, every log closes (synced).
    pub(crate) fn clean_restart(&mut self) {
        self.gc.shutdown();
        self.run_for_us((self.sync_max * 4).as_micros() as u64 + 1_000);
        let logs = std::mem::take(&mut self.logs);
        let ends: Vec<i64> = logs.iter().map(|l| l.borrow().log_end_offset()).collect();
        self.kill();
        for (p, log) in logs.into_iter().enumerate() {
            let log = Rc::try_unwrap(log)
                .ok()
                .expect("nothing holds a log once its tasks are gone")
                .into_inner();
            match self.clock.block_on(log.close()) {
                Ok(()) => {
                    // Closing synced everything: all of it is acknowledged now.
                    let model = &mut self.parts[p].model;
                    model.acked = model.acked.max(ends[p]);
                }
                Err(_) => self.stats.failures += 1,
            }
        }
        self.disk.crash(); // the process exits
        self.stats.clean_restarts += 1;
        self.start();
    }
}

pub(crate) fn run_gc_seed(seed: u64) -> GcStats {
    let mut sim = GcSim::new(seed);
    sim.run();
    sim.stats
}
