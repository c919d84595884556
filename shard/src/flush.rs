//! Group commit: one `GroupCommit` per shard turns many fdatasyncs into one round, and rounds
//! overlap so that a record waits about one fdatasync, not two.
//!
//! Owns: the set of logs that need a sync, the shard's flusher task and its rounds, the
//! periodic `flush.messages` / `flush.ms` check, waking acks=all producers once their bytes
//! are on disk, and the round figures (`CommitStats`). Does not own the logs (they are
//! `LogHandle`s shared with the broker) nor decide what is durable (each `PartitionLog` knows
//! its durable offset).
//!
//! How a round works: a producer that must answer acks=all calls `wait_durable(&log)` after
//! its append; that records the log end offset it needs and queues the log. The flusher,
//! woken, takes every queued log plus every registered `FlushPolicy::Ack` log written since the
//! last round (all partitions of this shard), calls `begin_sync` on each (cloning out the fds,
//! so no `RefCell` borrow is held across the await), runs all the fdatasyncs concurrently
//! through io_uring, records the results (`finish_sync`), and wakes every waiter.
//!
//! Pipelining: rounds of different logs overlap, rounds of one log do not. A write to a log
//! that no round is syncing starts a round at once, even while another round (of other logs)
//! is in flight (at most `MAX_ROUNDS_IN_FLIGHT`): a partition never waits for another
//! partition's fdatasync. A write to a log whose sync is in flight waits for that round and is
//! taken by the next one, which starts the moment it ends (so a record waits at most the rest
//! of one fdatasync of its file plus one whole one). Overlapping two fdatasyncs of the *same*
//! file was tried and measured worse (ext4, virtio disk and loop devices): the kernel
//! serializes them anyway (the second waits for the pages under write-back and for the journal
//! commit of the first, then commits again), so it only added fdatasyncs and shrank the
//! groups. Keeping a log in at most one round also keeps its durable offset and recovery point
//! moving forward without ordering rounds among themselves.
//!
//! Time and tasks go through the storage seam's `Clock` (reading time, the periodic check's
//! timer, spawning the flusher and its rounds) and syncs through the logs' `File`s, so the
//! same code runs on glommio in production and on a `SimClock` in the simulation
//! (`tests/sim_log.rs`), where fdatasyncs take virtual time and rounds overlap as here.
//!
//! Everything is single-threaded (one shard); `Rc` / `RefCell` / `Cell` only.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::poll_fn;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crate::config::FlushPolicy;
use crate::log::{join_all, DirtyLogs, LogError, PartitionLog};
use crate::storage::Clock;

/// How the broker shares a log between request handlers and the flusher. Never hold a borrow
/// across an `.await` (use `read(..)` / `begin_sync()` which return owned futures / jobs).
pub type LogHandle = Rc<RefCell<PartitionLog>>;

/// Default period of the `flush.ms` / `flush.messages` check.
const DEFAULT_TICK: Duration = Duration::from_millis(100);

/// Rounds whose fdatasyncs may be in flight at once. Two is what pipelining needs (the round
/// that covers the waiters of the one before); more would only add fdatasyncs of the same
/// files queued behind each other in the kernel.
pub const MAX_ROUNDS_IN_FLIGHT: u64 = 2;

/// Start times kept for the `queue_us` figure (a waiter resuming later than this many rounds
/// after its own is simply not counted there).
const ROUND_STARTS_KEPT: usize = 8;

/// `registered` is first swept of dropped logs at this length (then at twice the live count).
const REGISTERED_SWEEP_MIN: usize = 64;

pub struct GroupCommit {
    state: RefCell<State>,
    /// Time, timers and tasks: the system's, or the simulation's virtual clock.
    clock: Clock,
    tick: Duration,
    stats: CommitStats,
    /// Tests: rounds wait here before their fdatasyncs while this is set.
    #[cfg(test)]
    hold: Gate,
}

#[derive(Default)]
struct State {
    /// Every log of the shard (weak: a deleted log's entry is swept out later).
    registered: Vec<Weak<RefCell<PartitionLog>>>,
    /// `registered`'s length at which dropped logs are swept out next.
    sweep_at: usize,
    /// The registered logs that may have unsynced writes (see `DirtyLogs`): all that the
    /// periodic check and the rounds look at, so an idle shard's tick costs nothing per log.
    dirty: DirtyLogs,
    /// Logs someone needs synced in the next round.
    requested: Vec<LogHandle>,
    requested_set: HashSet<*const RefCell<PartitionLog>>,
    /// The last round that took a sync job of each log (busy while that round is in flight).
    log_round: HashMap<*const RefCell<PartitionLog>, u64>,
    rounds_started: u64,
    /// Every round up to this one has finished.
    completed_through: u64,
    /// Finished rounds above `completed_through` (rounds of different logs end in any order).
    done_ahead: BTreeSet<u64>,
    /// Rounds finished so far (in any order).
    rounds_completed: u64,
    /// When the last recorded round ended (figures: how long its waiters take to resume).
    last_round_end: Option<Instant>,
    /// When recent rounds started, by number modulo `ROUND_STARTS_KEPT` (figures only).
    round_starts: [(u64, Option<Instant>); ROUND_STARTS_KEPT],
    round_waiters: Vec<Waker>,
    flusher_waker: Option<Waker>,
    spawned: bool,
    /// The flusher has exited (after `shutdown`): waiters sync inline from then on.
    flusher_done: bool,
    shutdown: bool,
}

impl State {
    fn request(&mut self, log: &LogHandle) {
        if self.requested_set.insert(Rc::as_ptr(log)) {
            self.requested.push(log.clone());
        }
    }
    fn wake_flusher(&mut self) {
        if let Some(w) = self.flusher_waker.take() {
            w.wake();
        }
    }
    fn in_flight(&self) -> u64 {
        self.rounds_started - self.rounds_completed
    }
    fn round_is_done(&self, round: u64) -> bool {
        round <= self.completed_through || self.done_ahead.contains(&round)
    }
    /// The round in flight that holds `log`'s sync job, if any.
    fn busy_round(&self, log: *const RefCell<PartitionLog>) -> Option<u64> {
        self.log_round
            .get(&log)
            .copied()
            .filter(|&r| !self.round_is_done(r))
    }
    fn complete(&mut self, round: u64) {
        self.rounds_completed += 1;
        self.done_ahead.insert(round);
        while self.done_ahead.remove(&(self.completed_through + 1)) {
            self.completed_through += 1;
        }
    }
}

/// Figures of the group commit (printed per shard at shutdown; tests).
#[derive(Default)]
pub struct CommitStats {
    pub rounds: Cell<u64>,
    /// Sync jobs (logs) over all rounds.
    pub logs_synced: Cell<u64>,
    /// Rounds started while another was in flight.
    pub overlapped_rounds: Cell<u64>,
    /// Duration of a round's fdatasyncs (all of its logs, concurrently).
    pub sync_us: LatencyHist,
    /// `wait_durable` from call to return (the acks=all cost of one request).
    pub wait_us: LatencyHist,
    /// From a `wait_durable` call to the start of the round that covers it.
    pub queue_us: LatencyHist,
    /// From the end of the round that covers a waiter to the waiter running again.
    pub wake_us: LatencyHist,
    /// Waiters that found their log's sync in flight without their bytes (they wait for the
    /// rest of that round, then the next).
    pub waits_behind_round: Cell<u64>,
}

impl CommitStats {
    /// One line for the shard's shutdown log.
    pub fn summary(&self) -> String {
        let rounds = self.rounds.get();
        let per_round = if rounds == 0 {
            0.0
        } else {
            self.logs_synced.get() as f64 / rounds as f64
        };
        format!(
            "rounds={rounds} overlapped_rounds={} logs_per_round={per_round:.2} \
             sync_us(p50/p99/max)={} waits={} wait_us={} queue_us={} wake_us={} waits_behind_round={}",
            self.overlapped_rounds.get(),
            self.sync_us.summary(),
            self.wait_us.count(),
            self.wait_us.summary(),
            self.queue_us.summary(),
            self.wake_us.summary(),
            self.waits_behind_round.get(),
        )
    }
}

/// Sub-buckets per power of two (12 % resolution).
const HIST_SUB_BITS: u32 = 3;
const HIST_BUCKETS: usize = (64 << HIST_SUB_BITS) as usize;

/// A log-linear histogram of microseconds (fixed size, no allocation after creation).
pub struct LatencyHist {
    buckets: RefCell<Box<[u64; HIST_BUCKETS]>>,
    count: Cell<u64>,
    max: Cell<u64>,
    /// Sum of every value recorded (the metrics endpoint exports it as the histogram's sum).
    sum: Cell<u64>,
}

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist {
            buckets: RefCell::new(Box::new([0; HIST_BUCKETS])),
            count: Cell::new(0),
            max: Cell::new(0),
            sum: Cell::new(0),
        }
    }
}

impl LatencyHist {
    fn bucket(us: u64) -> usize {
        if us < (1 << HIST_SUB_BITS) {
            return us as usize;
        }
        let top = 63 - us.leading_zeros();
        let sub = (us >> (top - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1);
        (((top - HIST_SUB_BITS + 1) << HIST_SUB_BITS) as u64 + sub) as usize
    }
    /// The largest value of bucket `b`.
    fn upper(b: usize) -> u64 {
        let b = b as u64;
        if b < (1 << HIST_SUB_BITS) {
            return b;
        }
        let top = (b >> HIST_SUB_BITS) + HIST_SUB_BITS as u64 - 1;
        let sub = b & ((1 << HIST_SUB_BITS) - 1);
        ((1u64 << HIST_SUB_BITS) + sub + 1) * (1u64 << (top - HIST_SUB_BITS as u64)) - 1
    }
    pub fn record(&self, d: Duration) {
        let us = d.as_micros().min(u64::MAX as u128) as u64;
        self.buckets.borrow_mut()[Self::bucket(us).min(HIST_BUCKETS - 1)] += 1;
        self.count.set(self.count.get() + 1);
        self.max.set(self.max.get().max(us));
        self.sum.set(self.sum.get().saturating_add(us));
    }
    pub fn count(&self) -> u64 {
        self.count.get()
    }
    /// Sum of the values recorded, in microseconds.
    pub fn sum_us(&self) -> u64 {
        self.sum.get()
    }
    /// Values recorded in buckets whose upper bound is at most `us` (so the count of values
    /// at most `us`, to the bucket's 12 % resolution): what a Prometheus bucket `le=us` holds.
    pub fn count_at_most(&self, us: u64) -> u64 {
        self.buckets
            .borrow()
            .iter()
            .enumerate()
            .take_while(|(b, _)| Self::upper(*b) <= us)
            .map(|(_, &c)| c)
            .sum()
    }
    /// The value at quantile `q` (bucket upper bound, at most the max seen).
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count.get();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, &c) in self.buckets.borrow().iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper(b).min(self.max.get());
            }
        }
        self.max.get()
    }
    pub fn summary(&self) -> String {
        format!(
            "{}/{}/{}",
            self.quantile(0.5),
            self.quantile(0.99),
            self.max.get()
        )
    }
}

/// Tests: a switch rounds wait on.
#[cfg(test)]
#[derive(Default)]
struct Gate {
    closed: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

#[cfg(test)]
impl Gate {
    fn set(&self, closed: bool) {
        self.closed.set(closed);
        if !closed {
            for w in self.waiters.take() {
                w.wake();
            }
        }
    }
    async fn pass(&self) {
        poll_fn(|cx| {
            if self.closed.get() {
                self.waiters.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await
    }
}

impl GroupCommit {
    pub fn new() -> Rc<GroupCommit> {
        Self::with_tick(DEFAULT_TICK)
    }

    /// `tick`: period of the `flush.ms` / `flush.messages` check.
    pub fn with_tick(tick: Duration) -> Rc<GroupCommit> {
        Self::with_clock(Clock::Real, tick)
    }

    /// On `clock` (a `SimClock` in the simulation): its time, timers and executor.
    pub fn with_clock(clock: Clock, tick: Duration) -> Rc<GroupCommit> {
        Rc::new(GroupCommit {
            state: RefCell::new(State::default()),
            clock,
            tick,
            stats: CommitStats::default(),
            #[cfg(test)]
            hold: Gate::default(),
        })
    }

    /// Round figures so far.
    pub fn stats(&self) -> &CommitStats {
        &self.stats
    }

    /// Spawns the flusher and the periodic check on the clock's executor (glommio's current
    /// one on the real clock; detached; idempotent). Must be called before anyone awaits
    /// `wait_durable`.
    pub fn spawn(self: &Rc<Self>) {
        {
            let mut s = self.state.borrow_mut();
            if s.spawned {
                return;
            }
            s.spawned = true;
        }
        self.clock.spawn(self.clone().flusher());
        let weak = Rc::downgrade(self);
        let tick = self.tick;
        let clock = self.clock.clone();
        self.clock.spawn(async move {
            loop {
                clock.sleep(tick).await;
                let Some(gc) = weak.upgrade() else { break };
                if gc.state.borrow().shutdown {
                    break;
                }
                gc.periodic_check(clock.now_ms());
            }
        });
    }

    /// Makes a log part of this shard's rounds: written `Ack` logs are synced by every round,
    /// and `flush.ms` / `flush.messages` are checked for every registered log.
    pub fn register(&self, log: &LogHandle) {
        let mut s = self.state.borrow_mut();
        // A log dropped earlier may have had this address: its round is not this log's.
        s.log_round.remove(&Rc::as_ptr(log));
        s.registered.push(Rc::downgrade(log));
        log.borrow_mut()
            .watch_dirty(s.dirty.clone(), Rc::downgrade(log));
        // Dropped logs are forgotten when the list has doubled since the last sweep: amortized
        // O(1) per register (a sweep per register made a start with 10,000 partitions spend
        // a second here, quadratic in the partition count).
        if s.registered.len() >= s.sweep_at {
            s.registered.retain(|w| w.strong_count() > 0);
            let live: HashSet<_> = s.registered.iter().map(Weak::as_ptr).collect();
            s.log_round.retain(|p, _| live.contains(p));
            s.sweep_at = (2 * s.registered.len()).max(REGISTERED_SWEEP_MIN);
        }
    }

    /// Completes once everything appended to `log` before this call is on disk (or the log
    /// failed: `LogError::Failed` / `Io`).
    pub async fn wait_durable(&self, log: &LogHandle) -> Result<(), LogError> {
        let called = self.clock.instant();
        let target = log.borrow().log_end_offset();
        if self.state.borrow().flusher_done {
            // After shutdown (e.g. a straggler during close): no rounds any more, sync alone.
            let job = log.borrow_mut().begin_sync();
            if let Some(job) = job {
                let result = job.run().await;
                log.borrow_mut().finish_sync(job, result)?;
            }
            // (If begin_sync had nothing to take, a sync already in flight covers `target`.)
            return log.borrow().failure().map_or(Ok(()), Err);
        }
        let mut waited = false;
        let mut behind = false;
        loop {
            let (wait_for, covering) = {
                let l = log.borrow();
                if let Some(e) = l.failure() {
                    return Err(e);
                }
                if l.durable_offset() >= target {
                    break;
                }
                let mut s = self.state.borrow_mut();
                match s.busy_round(Rc::as_ptr(log)) {
                    // The round in flight took our bytes: it covers them.
                    Some(r) if l.sync_requested_offset() >= target => (r, true),
                    // In flight without our bytes: the next round takes them once it ends.
                    Some(r) => {
                        s.request(log);
                        behind = true;
                        (r, false)
                    }
                    // Not in flight: the next round to start takes them.
                    None => {
                        s.request(log);
                        s.wake_flusher();
                        (s.rounds_started + 1, false)
                    }
                }
            };
            self.round_done(wait_for).await;
            waited = true;
            if covering {
                let slot = self.state.borrow().round_starts[wait_for as usize % ROUND_STARTS_KEPT];
                if let (true, Some(start)) = (slot.0 == wait_for, slot.1) {
                    self.stats
                        .queue_us
                        .record(start.saturating_duration_since(called));
                }
            }
        }
        if behind {
            self.stats
                .waits_behind_round
                .set(self.stats.waits_behind_round.get() + 1);
        }
        let now = self.clock.instant();
        if waited {
            if let Some(end) = self.state.borrow().last_round_end {
                self.stats
                    .wake_us
                    .record(now.saturating_duration_since(end));
            }
        }
        self.stats
            .wait_us
            .record(now.saturating_duration_since(called));
        Ok(())
    }

    /// Rounds completed so far (tests, metrics).
    pub fn rounds_completed(&self) -> u64 {
        self.state.borrow().rounds_completed
    }

    /// Stops the flusher once no log is queued; `wait_durable` then syncs inline.
    pub fn shutdown(&self) {
        let mut s = self.state.borrow_mut();
        s.shutdown = true;
        s.wake_flusher();
    }

    /// Completes once round `round` has finished (a round not started yet: once it has
    /// started and finished).
    fn round_done(&self, round: u64) -> impl std::future::Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            let mut s = self.state.borrow_mut();
            if s.round_is_done(round) {
                Poll::Ready(())
            } else {
                s.round_waiters.push(cx.waker().clone());
                Poll::Pending
            }
        })
    }

    /// `flush.messages` / `flush.ms`: queues the logs due. Only logs with unsynced writes can
    /// be due, so only the dirty logs are looked at; those found clean leave the list.
    fn periodic_check(&self, now: i64) {
        let mut s = self.state.borrow_mut();
        let mut due = Vec::new();
        // In place: nothing below appends to a log (which would list it).
        s.dirty.borrow_mut().retain(|weak| {
            let Some(log) = weak.upgrade() else {
                return false; // deleted
            };
            let Ok(mut l) = log.try_borrow_mut() else {
                return true; // borrowed right now: looked at next tick
            };
            if l.flush_due(now) {
                due.push(log.clone());
            }
            l.keep_listed()
        });
        if !due.is_empty() {
            for l in &due {
                s.request(l);
            }
            s.wake_flusher();
        }
    }

    /// Starts a round whenever a requested log is not in a round already and a slot is free;
    /// each round runs as its own task so the next can start while it is in flight.
    async fn flusher(self: Rc<Self>) {
        loop {
            poll_fn(|cx| {
                let mut s = self.state.borrow_mut();
                let can_start = s.in_flight() < MAX_ROUNDS_IN_FLIGHT
                    && s.requested
                        .iter()
                        .any(|l| s.busy_round(Rc::as_ptr(l)).is_none());
                if can_start || (s.shutdown && s.in_flight() == 0) {
                    Poll::Ready(())
                } else {
                    s.flusher_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            })
            .await;
            let logs = self.take_round_logs();
            if logs.is_empty() {
                let s = self.state.borrow();
                if s.shutdown && s.in_flight() == 0 && s.requested.is_empty() {
                    drop(s);
                    self.state.borrow_mut().flusher_done = true;
                    break;
                }
                continue;
            }
            let round = self.start_round(logs);
            self.clock.spawn(self.clone().finish_round(round));
        }
    }

    /// The queued logs plus every registered `Ack` log with unsynced writes (all of them are
    /// in the dirty list), except those a round in flight is syncing (they stay queued for
    /// the round after it).
    fn take_round_logs(&self) -> Vec<LogHandle> {
        let mut s = self.state.borrow_mut();
        let requested = std::mem::take(&mut s.requested);
        s.requested_set.clear();
        let mut logs = Vec::with_capacity(requested.len());
        let mut seen = HashSet::new();
        for l in requested {
            if s.busy_round(Rc::as_ptr(&l)).is_some() {
                s.request(&l);
            } else if seen.insert(Rc::as_ptr(&l)) {
                logs.push(l);
            }
        }
        let dirty: Vec<LogHandle> = s.dirty.borrow().iter().filter_map(Weak::upgrade).collect();
        for l in dirty {
            let wanted = l
                .try_borrow()
                .is_ok_and(|l| l.config().flush_policy == FlushPolicy::Ack && l.is_dirty());
            if wanted && s.busy_round(Rc::as_ptr(&l)).is_none() && seen.insert(Rc::as_ptr(&l)) {
                logs.push(l);
            }
        }
        logs
    }

    /// Takes the sync jobs of a new round (synchronously, so a waiter that looks right after
    /// sees its bytes taken by this round).
    fn start_round(&self, logs: Vec<LogHandle>) -> Round {
        let mut s = self.state.borrow_mut();
        if s.in_flight() > 0 {
            self.stats
                .overlapped_rounds
                .set(self.stats.overlapped_rounds.get() + 1);
        }
        s.rounds_started += 1;
        let number = s.rounds_started;
        let started = self.clock.instant();
        s.round_starts[number as usize % ROUND_STARTS_KEPT] = (number, Some(started));
        let mut jobs = Vec::with_capacity(logs.len());
        for log in logs {
            // Borrowed only for this synchronous call. A log borrowed elsewhere right now
            // (should not happen: nobody holds a borrow across an await) waits for the next.
            // (Not re-queued here: that could spin the flusher without yielding; its waiters
            // queue it again when this round wakes them.)
            let job = match log.try_borrow_mut() {
                Ok(mut l) => l.begin_sync(),
                Err(_) => continue,
            };
            if let Some(job) = job {
                s.log_round.insert(Rc::as_ptr(&log), number);
                jobs.push((log, job));
            }
        }
        Round {
            number,
            jobs,
            started,
        }
    }

    /// Runs a round's fdatasyncs and records them (no ordering among rounds: they hold
    /// different logs).
    async fn finish_round(self: Rc<Self>, round: Round) {
        #[cfg(test)]
        self.hold.pass().await;
        let results = join_all(round.jobs.iter().map(|(_, job)| job.run()).collect()).await;
        self.stats.sync_us.record(
            self.clock
                .instant()
                .saturating_duration_since(round.started),
        );
        self.stats.rounds.set(self.stats.rounds.get() + 1);
        self.stats
            .logs_synced
            .set(self.stats.logs_synced.get() + round.jobs.len() as u64);
        for ((log, job), result) in round.jobs.into_iter().zip(results) {
            // Errors are sticky in the log; waiters see them through `failure()`.
            let _ = log.borrow_mut().finish_sync(job, result);
        }
        let waiters = {
            let mut s = self.state.borrow_mut();
            s.complete(round.number);
            s.last_round_end = Some(self.clock.instant());
            s.wake_flusher();
            std::mem::take(&mut s.round_waiters)
        };
        for w in waiters {
            w.wake();
        }
    }
}

/// One round's sync jobs, taken by `start_round`.
struct Round {
    number: u64,
    jobs: Vec<(LogHandle, crate::log::SyncJob)>,
    started: Instant,
}

#[cfg(test)]
mod tests {
    //! Every test runs on the simulated disk and clock: fdatasyncs take 0.2-2 ms of virtual
    //! time, timers fire on virtual time, so nothing here sleeps or depends on the host.
    use super::*;
    use crate::config::LogConfig;
    use crate::log::test_util::batch;
    use crate::storage::{Disk, Env, SimClock, SimDisk};
    use std::future::Future;
    use std::path::{Path, PathBuf};

    /// Runs `test` on a fresh simulated disk (with `/d` durable) and virtual clock.
    fn sim<F: Future<Output = ()> + 'static>(test: impl FnOnce(Env, Rc<SimClock>) -> F) {
        let clock = SimClock::new(1_700_000_000_000);
        let disk = SimDisk::new(7);
        disk.set_sync_latency(&clock, Duration::from_micros(200), Duration::from_millis(2));
        disk.create_dir_all(Path::new("/d")).unwrap();
        disk.sync_dir(Path::new("/")).unwrap();
        let env = Env {
            disk: Disk::Sim(disk),
            clock: Clock::Sim(clock.clone()),
        };
        clock.block_on(test(env, clock.clone()));
        clock.kill_tasks();
    }

    fn group_commit(env: &Env, tick: Duration) -> Rc<GroupCommit> {
        GroupCommit::with_clock(env.clock.clone(), tick)
    }

    async fn open(env: &Env, name: &str, cfg: LogConfig) -> LogHandle {
        let dir = PathBuf::from("/d").join(name);
        Rc::new(RefCell::new(
            PartitionLog::open_in(env.clone(), dir, cfg).await.unwrap(),
        ))
    }

    /// Spawns `task` on the simulated executor; the returned future completes with it.
    fn spawn(
        clock: &Rc<SimClock>,
        task: impl Future<Output = ()> + 'static,
    ) -> impl Future<Output = ()> {
        let (done, finished) = futures::channel::oneshot::channel();
        clock.spawn(async move {
            task.await;
            let _ = done.send(());
        });
        async move { finished.await.expect("task ran to completion") }
    }

    fn append(log: &LogHandle, records: usize) -> i64 {
        let (b, h) = batch(records, 10, 1);
        log.borrow_mut().append(&b, &h, 0).unwrap().last_offset
    }

    #[test]
    fn latency_hist_sum_and_count_at_most() {
        let hist = LatencyHist::default();
        for us in [3, 90, 1_000, 40_000] {
            hist.record(Duration::from_micros(us));
        }
        assert_eq!(hist.sum_us(), 3 + 90 + 1_000 + 40_000);
        assert_eq!(hist.count_at_most(2), 0);
        assert_eq!(hist.count_at_most(3), 1);
        // 90 lands in a bucket [88, 95]: counted at 100, not at 50.
        assert_eq!(hist.count_at_most(50), 1);
        assert_eq!(hist.count_at_most(100), 2);
        assert_eq!(hist.count_at_most(1_100), 3);
        assert_eq!(hist.count_at_most(10_000_000), 4);
    }

    #[test]
    fn one_round_syncs_every_written_log() {
        sim(|env, clock| async move {
            let gc = group_commit(&env, DEFAULT_TICK);
            gc.spawn();
            let mut logs = Vec::new();
            for p in 0..6 {
                let l = open(&env, &format!("t-{p}"), LogConfig::default()).await;
                gc.register(&l);
                logs.push(l);
            }
            let syncs_before: Vec<u64> =
                logs.iter().map(|l| l.borrow().syncs_completed()).collect();
            for l in &logs {
                for _ in 0..10 {
                    append(l, 2);
                }
            }
            // 5 logs have waiters; the 6th is only registered (an acks=1 write): the same
            // round covers it too.
            let waits: Vec<_> = logs[..5]
                .iter()
                .flat_map(|l| (0..10).map(|_| gc.wait_durable(l)))
                .collect();
            for r in join_all(waits).await {
                r.unwrap();
            }
            assert_eq!(gc.rounds_completed(), 1);
            for (l, before) in logs.iter().zip(syncs_before) {
                let l = l.borrow();
                assert_eq!(l.durable_offset(), 20);
                assert_eq!(
                    l.syncs_completed(),
                    before + 1,
                    "one fdatasync job per log per round"
                );
                assert!(!l.is_dirty());
            }
            // Nothing new: waiting again needs no round.
            gc.wait_durable(&logs[0]).await.unwrap();
            assert_eq!(gc.rounds_completed(), 1);
            gc.shutdown();
            clock.sleep(Duration::from_millis(10)).await; // let the flusher exit
                                                          // After shutdown a waiter syncs by itself.
            append(&logs[0], 1);
            gc.wait_durable(&logs[0]).await.unwrap();
            assert_eq!(logs[0].borrow().durable_offset(), 21);
            assert_eq!(gc.rounds_completed(), 1);
        });
    }

    /// Many producers on several logs: every waiter returns only once its own append is
    /// durable, and rounds are shared (far fewer rounds than waits).
    #[test]
    fn concurrent_producers_share_rounds() {
        sim(|env, clock| async move {
            let gc = group_commit(&env, DEFAULT_TICK);
            gc.spawn();
            let mut logs = Vec::new();
            // Small segments: rounds must also cover segments rolled since the last one.
            let cfg = LogConfig {
                segment_bytes: 2_000,
                ..LogConfig::default()
            };
            for p in 0..4 {
                logs.push(open(&env, &format!("t-{p}"), cfg.clone()).await);
            }
            let mut tasks = Vec::new();
            for t in 0..16usize {
                let (gc, log) = (gc.clone(), logs[t % logs.len()].clone());
                tasks.push(spawn(&clock, async move {
                    for _ in 0..20 {
                        let last = append(&log, 1);
                        gc.wait_durable(&log).await.unwrap();
                        assert!(log.borrow().durable_offset() > last);
                    }
                }));
            }
            for t in tasks {
                t.await;
            }
            let rounds = gc.rounds_completed();
            assert!(
                (1..16 * 20).contains(&rounds),
                "{rounds} rounds for 320 waits"
            );
            for l in &logs {
                let l = l.borrow();
                assert_eq!(l.durable_offset(), l.log_end_offset());
                assert!(l.segment_count() > 1);
                assert!(!l.is_dirty());
            }
            gc.shutdown();
        });
    }

    #[test]
    fn replication_policy_flushes_by_time_and_count_only() {
        sim(|env, clock| async move {
            let gc = group_commit(&env, Duration::from_millis(5));
            gc.spawn();
            let repl = LogConfig {
                flush_policy: FlushPolicy::Replication,
                ..LogConfig::default()
            };
            let never = open(&env, "never-0", repl.clone()).await;
            let by_time = open(
                &env,
                "time-0",
                LogConfig {
                    flush_ms: 20,
                    ..repl.clone()
                },
            )
            .await;
            let by_count = open(
                &env,
                "count-0",
                LogConfig {
                    flush_messages: 5,
                    ..repl.clone()
                },
            )
            .await;
            let ack = open(&env, "ack-0", LogConfig::default()).await;
            for l in [&never, &by_time, &by_count, &ack] {
                gc.register(l);
            }
            append(&never, 1);
            append(&by_time, 1);
            append(&by_count, 4);
            append(&ack, 1);
            gc.wait_durable(&ack).await.unwrap();
            // An Ack round does not sync Replication logs.
            assert!(never.borrow().is_dirty() && by_count.borrow().is_dirty());
            clock.sleep(Duration::from_millis(100)).await;
            assert_eq!(by_time.borrow().durable_offset(), 1);
            assert!(by_count.borrow().is_dirty(), "4 < flush.messages");
            append(&by_count, 1);
            clock.sleep(Duration::from_millis(50)).await;
            assert_eq!(by_count.borrow().durable_offset(), 5);
            assert!(never.borrow().is_dirty());
            assert_eq!(never.borrow().durable_offset(), 0);
            gc.shutdown();
        });
    }

    /// Yields to the executor until `cond` holds (bounded: a test that never gets there fails).
    async fn until(clock: &Rc<SimClock>, what: &str, mut cond: impl FnMut() -> bool) {
        for _ in 0..10_000 {
            if cond() {
                return;
            }
            clock.sleep(Duration::from_micros(50)).await;
        }
        panic!("never: {what}");
    }

    fn spawn_wait(
        clock: &Rc<SimClock>,
        gc: &Rc<GroupCommit>,
        log: &LogHandle,
    ) -> impl Future<Output = ()> {
        let (gc, log) = (gc.clone(), log.clone());
        let target = log.borrow().log_end_offset();
        spawn(clock, async move {
            gc.wait_durable(&log).await.unwrap();
            assert!(log.borrow().durable_offset() >= target);
        })
    }

    /// A write to another log while a round is in flight starts a round at once (overlap on
    /// another file); a write to the log being synced is taken by the round that starts the
    /// moment its round ends; nobody waits more than that.
    #[test]
    fn a_write_during_a_round_starts_the_next_round_at_once() {
        sim(|env, clock| async move {
            let gc = group_commit(&env, DEFAULT_TICK);
            gc.spawn();
            let a = open(&env, "a-0", LogConfig::default()).await;
            let b = open(&env, "b-0", LogConfig::default()).await;
            gc.register(&a);
            gc.register(&b);
            gc.hold.set(true);
            append(&a, 1);
            let w1 = spawn_wait(&clock, &gc, &a);
            until(&clock, "round 1 started", || {
                gc.state.borrow().rounds_started == 1
            })
            .await;
            // Appended to `a` after round 1 took it: queued behind round 1, no round yet.
            append(&a, 1);
            let w2 = spawn_wait(&clock, &gc, &a);
            clock.sleep(Duration::from_millis(5)).await;
            assert_eq!(gc.state.borrow().rounds_started, 1);
            // Another log: its round starts while round 1 is held.
            append(&b, 1);
            let wb = spawn_wait(&clock, &gc, &b);
            until(&clock, "round 2 started", || {
                gc.state.borrow().rounds_started == 2
            })
            .await;
            assert_eq!(gc.rounds_completed(), 0, "round 1 is still in flight");
            assert!(!b.borrow().is_dirty(), "round 2 took b");
            assert!(
                a.borrow().is_dirty(),
                "round 2 left a to the round after round 1"
            );
            let syncs = |l: &LogHandle| l.borrow().syncs_completed();
            let (a0, b0) = (syncs(&a), syncs(&b));
            gc.hold.set(false);
            w1.await;
            wb.await;
            w2.await;
            assert_eq!(gc.state.borrow().rounds_started, 3);
            assert_eq!(syncs(&a), a0 + 2, "rounds 1 and 3 synced a");
            assert_eq!(syncs(&b), b0 + 1, "round 2 synced b");
            assert_eq!(a.borrow().durable_offset(), 2);
            assert_eq!(b.borrow().durable_offset(), 1);
            let st = gc.stats();
            assert_eq!(st.rounds.get(), 3);
            assert!(st.overlapped_rounds.get() >= 1);
            assert_eq!(st.waits_behind_round.get(), 1);
            assert_eq!(st.wait_us.count(), 3);
            gc.shutdown();
        });
    }

    /// A log with a round in flight (here: its old segment, rolled since) is never in a
    /// second round at the same time; the next round covers the new segment.
    #[test]
    fn a_log_is_in_one_round_at_a_time() {
        sim(|env, clock| async move {
            let gc = group_commit(&env, DEFAULT_TICK);
            gc.spawn();
            let cfg = LogConfig {
                segment_bytes: 300,
                ..LogConfig::default()
            };
            let log = open(&env, "t-0", cfg).await;
            gc.register(&log);
            gc.hold.set(true);
            append(&log, 3);
            let w1 = spawn_wait(&clock, &gc, &log);
            until(&clock, "round 1 started", || {
                gc.state.borrow().rounds_started == 1
            })
            .await;
            for _ in 0..4 {
                append(&log, 3);
            }
            assert!(log.borrow().segment_count() > 1);
            let w2 = spawn_wait(&clock, &gc, &log);
            clock.sleep(Duration::from_millis(5)).await;
            assert_eq!(gc.state.borrow().rounds_started, 1);
            assert!(log.borrow().durable_offset() < 3);
            gc.hold.set(false);
            w1.await;
            w2.await;
            assert_eq!(gc.state.borrow().rounds_started, 2);
            assert_eq!(log.borrow().durable_offset(), log.borrow().log_end_offset());
            gc.shutdown();
        });
    }

    /// Many waiters on several logs on a real disk: every one returns with its bytes durable,
    /// within the rest of one round of its log plus one round.
    #[test]
    fn waiters_need_at_most_the_round_after_their_append() {
        sim(|env, clock| async move {
            let gc = group_commit(&env, DEFAULT_TICK);
            gc.spawn();
            let mut logs = Vec::new();
            for p in 0..3 {
                let l = open(&env, &format!("t-{p}"), LogConfig::default()).await;
                gc.register(&l);
                logs.push(l);
            }
            let mut tasks = Vec::new();
            for t in 0..9u64 {
                let (gc, log) = (gc.clone(), logs[t as usize % 3].clone());
                let task_clock = clock.clone();
                tasks.push(spawn(&clock, async move {
                    let clock = task_clock;
                    for i in 0..30u64 {
                        append(&log, 1);
                        let target = log.borrow().log_end_offset();
                        let busy = gc.state.borrow().busy_round(Rc::as_ptr(&log));
                        let started = gc.state.borrow().rounds_started;
                        gc.wait_durable(&log).await.unwrap();
                        assert!(log.borrow().durable_offset() >= target);
                        // Covered by the round in flight, or by a round started after the
                        // call: never by one older than both.
                        let covering = gc.state.borrow().log_round[&Rc::as_ptr(&log)];
                        assert!(covering > started || busy.is_some());
                        clock
                            .sleep(Duration::from_micros(100 * ((t + i) % 5)))
                            .await;
                    }
                }));
            }
            for t in tasks {
                t.await;
            }
            let st = gc.stats();
            assert_eq!(st.wait_us.count(), 270);
            assert!(st.rounds.get() < 270, "rounds are shared");
            for l in &logs {
                assert_eq!(l.borrow().durable_offset(), 90);
            }
            gc.shutdown();
        });
    }

    /// The periodic check looks only at logs with unsynced writes: each joins the list once
    /// at its first append, and leaves it once synced (flush.ms here).
    #[test]
    fn the_periodic_check_walks_only_logs_with_unsynced_writes() {
        sim(|env, clock| async move {
            let gc = group_commit(&env, Duration::from_millis(5));
            gc.spawn();
            let cfg = LogConfig {
                flush_policy: FlushPolicy::Replication,
                flush_ms: 20,
                ..LogConfig::default()
            };
            let mut logs = Vec::new();
            for p in 0..20 {
                let l = open(&env, &format!("t-{p}"), cfg.clone()).await;
                gc.register(&l);
                logs.push(l);
            }
            let listed = || gc.state.borrow().dirty.borrow().len();
            assert_eq!(listed(), 0);
            append(&logs[3], 1);
            append(&logs[3], 1);
            append(&logs[7], 1);
            assert_eq!(listed(), 2, "each dirty log listed once");
            clock.sleep(Duration::from_millis(100)).await;
            assert_eq!(logs[3].borrow().durable_offset(), 2);
            assert_eq!(logs[7].borrow().durable_offset(), 1);
            assert_eq!(listed(), 0, "synced logs leave the list");
            append(&logs[3], 1);
            assert_eq!(listed(), 1);
            clock.sleep(Duration::from_millis(100)).await;
            assert_eq!(logs[3].borrow().durable_offset(), 3);
            assert!(logs.iter().all(|l| !l.borrow().is_dirty()));
            gc.shutdown();
        });
    }

    #[test]
    fn histogram_quantiles() {
        let h = LatencyHist::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.count(), 1000);
        let p50 = h.quantile(0.5);
        assert!((450..=570).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((940..=1000).contains(&p99), "{p99}");
        assert_eq!(h.quantile(1.0), 1000);
        for us in [0u64, 1, 7, 8, 9, 15, 16, 100, 1 << 20, u64::MAX >> 4] {
            let b = LatencyHist::bucket(us);
            assert!(LatencyHist::upper(b) >= us, "{us}");
            assert!(b == 0 || LatencyHist::upper(b - 1) < us, "{us}");
        }
    }
}
