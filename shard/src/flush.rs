//! Group commit: one `GroupCommit` per shard turns many fdatasyncs into one round.
//!
//! Owns: the set of logs that need a sync, the single flusher task of the shard, the periodic
//! `flush.messages` / `flush.ms` check, and waking acks=all producers once their bytes are on
//! disk. Does not own the logs (they are `LogHandle`s shared with the broker) nor decide what
//! is durable (each `PartitionLog` knows its durable offset).
//!
//! How a round works: a producer that must answer acks=all calls `wait_durable(&log)` after
//! its append; that records the log end offset it needs and queues the log. The flusher,
//! woken, takes every queued log plus every registered `FlushPolicy::Ack` log written since the
//! last round (all partitions of this shard), calls `begin_sync` on each (cloning out the fds,
//! so no `RefCell` borrow is held across the await), runs all the fdatasyncs concurrently
//! through io_uring, records the results (`finish_sync`), and wakes every waiter. A waiter
//! whose bytes the round covered returns; one whose append came after `begin_sync` is queued
//! for the next round, which starts as soon as this one ends. So while one round is in flight
//! the next one accumulates: the fsync rate adapts to the device, not to the request rate.
//!
//! Everything is single-threaded (one shard); `Rc` / `RefCell` / `Cell` only.

use std::cell::RefCell;
use std::collections::HashSet;
use std::future::poll_fn;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};
use std::time::Duration;

use crate::config::FlushPolicy;
use crate::log::{join_all, now_ms, LogError, PartitionLog};

/// How the broker shares a log between request handlers and the flusher. Never hold a borrow
/// across an `.await` (use `read(..)` / `begin_sync()` which return owned futures / jobs).
pub type LogHandle = Rc<RefCell<PartitionLog>>;

/// Default period of the `flush.ms` / `flush.messages` check.
const DEFAULT_TICK: Duration = Duration::from_millis(100);

pub struct GroupCommit {
    state: RefCell<State>,
    tick: Duration,
}

#[derive(Default)]
struct State {
    /// Every log of the shard (weak: a deleted log just disappears from here).
    registered: Vec<Weak<RefCell<PartitionLog>>>,
    /// Logs someone needs synced in the next round.
    requested: Vec<LogHandle>,
    requested_set: HashSet<*const RefCell<PartitionLog>>,
    rounds_started: u64,
    rounds_completed: u64,
    round_in_flight: bool,
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
}

impl GroupCommit {
    pub fn new() -> Rc<GroupCommit> {
        Self::with_tick(DEFAULT_TICK)
    }

    /// `tick`: period of the `flush.ms` / `flush.messages` check.
    pub fn with_tick(tick: Duration) -> Rc<GroupCommit> {
        Rc::new(GroupCommit {
            state: RefCell::new(State::default()),
            tick,
        })
    }

    /// Spawns the flusher and the periodic check on the current glommio executor (detached;
    /// idempotent). Must be called before anyone awaits `wait_durable`.
    pub fn spawn(self: &Rc<Self>) {
        {
            let mut s = self.state.borrow_mut();
            if s.spawned {
                return;
            }
            s.spawned = true;
        }
        glommio::spawn_local(self.clone().flusher()).detach();
        let weak = Rc::downgrade(self);
        let tick = self.tick;
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(tick).await;
                let Some(gc) = weak.upgrade() else { break };
                if gc.state.borrow().shutdown {
                    break;
                }
                gc.periodic_check(now_ms());
            }
        })
        .detach();
    }

    /// Makes a log part of this shard's rounds: written `Ack` logs are synced by every round,
    /// and `flush.ms` / `flush.messages` are checked for every registered log.
    pub fn register(&self, log: &LogHandle) {
        let mut s = self.state.borrow_mut();
        s.registered.retain(|w| w.strong_count() > 0);
        s.registered.push(Rc::downgrade(log));
    }

    /// Completes once everything appended to `log` before this call is on disk (or the log
    /// failed: `LogError::Failed` / `Io`).
    pub async fn wait_durable(&self, log: &LogHandle) -> Result<(), LogError> {
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
        loop {
            let round = {
                let l = log.borrow();
                if let Some(e) = l.failure() {
                    return Err(e);
                }
                if l.durable_offset() >= target {
                    return Ok(());
                }
                let mut s = self.state.borrow_mut();
                if l.sync_requested_offset() >= target && s.round_in_flight {
                    s.rounds_started // the round in flight covers our bytes
                } else {
                    s.request(log);
                    s.wake_flusher();
                    s.rounds_started + 1
                }
            };
            self.round_done(round).await;
        }
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

    fn round_done(&self, round: u64) -> impl std::future::Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            let mut s = self.state.borrow_mut();
            if s.rounds_completed >= round {
                Poll::Ready(())
            } else {
                s.round_waiters.push(cx.waker().clone());
                Poll::Pending
            }
        })
    }

    fn periodic_check(&self, now: i64) {
        let mut s = self.state.borrow_mut();
        s.registered.retain(|w| w.strong_count() > 0);
        let due: Vec<LogHandle> = s
            .registered
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|l| l.try_borrow().is_ok_and(|l| l.flush_due(now)))
            .collect();
        if !due.is_empty() {
            for l in &due {
                s.request(l);
            }
            s.wake_flusher();
        }
    }

    async fn flusher(self: Rc<Self>) {
        loop {
            poll_fn(|cx| {
                let mut s = self.state.borrow_mut();
                if s.shutdown || !s.requested.is_empty() {
                    Poll::Ready(())
                } else {
                    s.flusher_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            })
            .await;
            let logs = self.take_round_logs();
            if logs.is_empty() && self.state.borrow().shutdown {
                self.state.borrow_mut().flusher_done = true;
                break;
            }
            self.run_round(logs).await;
        }
    }

    /// The queued logs plus every registered `Ack` log with unsynced writes.
    fn take_round_logs(&self) -> Vec<LogHandle> {
        let mut s = self.state.borrow_mut();
        let mut logs = std::mem::take(&mut s.requested);
        let mut seen = std::mem::take(&mut s.requested_set);
        for l in s.registered.iter().filter_map(Weak::upgrade) {
            let wanted = l
                .try_borrow()
                .is_ok_and(|l| l.config().flush_policy == FlushPolicy::Ack && l.is_dirty());
            if wanted && seen.insert(Rc::as_ptr(&l)) {
                logs.push(l);
            }
        }
        logs
    }

    async fn run_round(&self, logs: Vec<LogHandle>) {
        {
            let mut s = self.state.borrow_mut();
            s.rounds_started += 1;
            s.round_in_flight = true;
        }
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
                jobs.push((log, job));
            }
        }
        let results = join_all(jobs.iter().map(|(_, job)| job.run()).collect()).await;
        for ((log, job), result) in jobs.into_iter().zip(results) {
            // Errors are sticky in the log; waiters see them through `failure()`.
            let _ = log.borrow_mut().finish_sync(job, result);
        }
        let waiters = {
            let mut s = self.state.borrow_mut();
            s.rounds_completed += 1;
            s.round_in_flight = false;
            std::mem::take(&mut s.round_waiters)
        };
        for w in waiters {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::log::test_util::{batch, run, tmp};

    async fn open(dir: &std::path::Path, name: &str, cfg: LogConfig) -> LogHandle {
        Rc::new(RefCell::new(
            PartitionLog::open(dir.join(name), cfg).await.unwrap(),
        ))
    }

    fn append(log: &LogHandle, records: usize) -> i64 {
        let (b, h) = batch(records, 10, 1);
        log.borrow_mut().append(&b, &h, 0).unwrap().last_offset
    }

    #[test]
    fn one_round_syncs_every_written_log() {
        run(async {
            let d = tmp();
            let gc = GroupCommit::new();
            gc.spawn();
            let mut logs = Vec::new();
            for p in 0..6 {
                let l = open(d.path(), &format!("t-{p}"), LogConfig::default()).await;
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
            glommio::timer::sleep(Duration::from_millis(10)).await; // let the flusher exit
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
        run(async {
            let d = tmp();
            let gc = GroupCommit::new();
            gc.spawn();
            let mut logs = Vec::new();
            // Small segments: rounds must also cover segments rolled since the last one.
            let cfg = LogConfig {
                segment_bytes: 2_000,
                ..LogConfig::default()
            };
            for p in 0..4 {
                logs.push(open(d.path(), &format!("t-{p}"), cfg.clone()).await);
            }
            let mut tasks = Vec::new();
            for t in 0..16usize {
                let (gc, log) = (gc.clone(), logs[t % logs.len()].clone());
                tasks.push(glommio::spawn_local(async move {
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
        run(async {
            let d = tmp();
            let gc = GroupCommit::with_tick(Duration::from_millis(5));
            gc.spawn();
            let repl = LogConfig {
                flush_policy: FlushPolicy::Replication,
                ..LogConfig::default()
            };
            let never = open(d.path(), "never-0", repl.clone()).await;
            let by_time = open(
                d.path(),
                "time-0",
                LogConfig {
                    flush_ms: 20,
                    ..repl.clone()
                },
            )
            .await;
            let by_count = open(
                d.path(),
                "count-0",
                LogConfig {
                    flush_messages: 5,
                    ..repl.clone()
                },
            )
            .await;
            let ack = open(d.path(), "ack-0", LogConfig::default()).await;
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
            glommio::timer::sleep(Duration::from_millis(100)).await;
            assert_eq!(by_time.borrow().durable_offset(), 1);
            assert!(by_count.borrow().is_dirty(), "4 < flush.messages");
            append(&by_count, 1);
            glommio::timer::sleep(Duration::from_millis(50)).await;
            assert_eq!(by_count.borrow().durable_offset(), 5);
            assert!(never.borrow().is_dirty());
            assert_eq!(never.borrow().durable_offset(), 0);
            gc.shutdown();
        });
    }
}
