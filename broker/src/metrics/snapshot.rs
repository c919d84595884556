//! Shard snapshots and the board they are published on.
//!
//! A scrape does not read a shard's state: shards own it without locks (`Cell`, `RefCell`).
//! Instead the scrape thread raises the board's wanted generation, and each shard's publisher
//! task (which looks every [`SNAPSHOT_POLL`], only while `metrics.listener` is set) copies
//! its figures into a [`ShardSnapshot`] — plain data that can cross threads — and posts it.
//! The scrape waits at most [`SNAPSHOT_WAIT`] for every shard, then renders what it has (a
//! shard that did not answer in time shows its previous snapshot, and is counted in
//! `broker_metrics_stale_shards`). Nothing happens on a shard between scrapes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::histogram::{HistogramSnapshot, BUCKETS, BUCKET_BOUNDS_US};
use super::recorder::ApiSnapshot;
use crate::shard::Shard;

/// How often a shard's publisher looks whether a scrape wants a snapshot. A scrape waits up
/// to this long for the shards; an idle shard wakes this often only when metrics are on.
pub const SNAPSHOT_POLL: Duration = Duration::from_millis(100);
/// Longest a scrape waits for the shards' snapshots (a shard busy in one long step, or
/// stopping, answers late): Prometheus' default scrape timeout is 10 s.
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(2);
/// Most partitions (and, separately, committed offsets) one shard exports per scrape: a
/// broker with more still answers, with the rest counted in
/// `broker_metrics_series_dropped` rather than a response of unbounded size.
pub const MAX_SERIES_PER_SHARD: usize = 100_000;

/// One partition's log, as its owner shard saw it.
#[derive(Clone, Debug)]
pub struct PartitionFigures {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: u64,
    pub log_start_offset: i64,
    /// The log end offset, which is the high watermark on one node.
    pub log_end_offset: i64,
}

/// One committed offset, as its group's coordinator shard holds it.
#[derive(Clone, Debug)]
pub struct CommittedFigures {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// Everything a scrape shows of one shard, copied at one moment.
#[derive(Clone, Debug, Default)]
pub struct ShardSnapshot {
    pub generation: u64,
    pub shard: usize,
    pub apis: Vec<(i16, ApiSnapshot)>,
    pub connections_accepted: u64,
    pub connections_refused: u64,
    pub connections_closed: u64,
    pub connections_open: u64,
    /// Heap allocations made on the shard's thread so far; None unless counting is on
    /// (`alloc_count`).
    pub heap_allocations: Option<u64>,
    pub produce_batches: u64,
    pub fetches: u64,
    pub forwarded_in: u64,
    pub forwarded_out: u64,
    pub handoffs_in: u64,
    pub handoffs_out: u64,
    pub hot_ranges: u64,
    pub cold_ranges: u64,
    pub cold_bytes: u64,
    pub sendfile_bytes: u64,
    pub copied_bytes: u64,
    pub remote_range_bytes: u64,
    pub fetch_sessions: crate::handlers::fetch_session::SessionFigures,
    pub fsync_rounds: u64,
    /// fsync/fdatasync calls on partition logs by reason (`shard::fsyncs`).
    pub fsyncs: [(&'static str, u64); 6],
    pub fsync_round_latency: HistogramSnapshot,
    pub partitions: Vec<PartitionFigures>,
    pub committed: Vec<CommittedFigures>,
    pub series_dropped: u64,
}

impl ShardSnapshot {
    /// Copies `shard`'s figures (on the shard's thread).
    pub fn take(shard: &Shard, generation: u64) -> ShardSnapshot {
        // First, so that this snapshot's own allocations count toward the next one.
        let heap_allocations = crate::alloc_count::enabled().then(crate::alloc_count::this_thread);
        let recorder = &shard.metrics;
        let stats = &shard.stats;
        let commit = shard.group_commit.stats();
        let image = shard.image();
        let mut series_dropped = 0u64;
        let mut partitions = Vec::new();
        for ((topic_id, partition), handle) in shard.owned_partitions() {
            let Some(topic) = image.topic_by_id(&topic_id) else {
                continue; // deleted, not yet closed
            };
            if partitions.len() >= MAX_SERIES_PER_SHARD {
                series_dropped += 1;
                continue;
            }
            let log = handle.log.borrow();
            partitions.push(PartitionFigures {
                topic: topic.name.clone(),
                partition,
                size_bytes: log.size_bytes(),
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
            });
        }
        // Stable order between scrapes (the shard's map has none).
        partitions.sort_unstable_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let mut committed = Vec::new();
        shard
            .coordinator
            .each_committed_offset(|group, topic, partition, offset| {
                if committed.len() >= MAX_SERIES_PER_SHARD {
                    series_dropped += 1;
                    return;
                }
                committed.push(CommittedFigures {
                    group: group.to_string(),
                    topic: topic.to_string(),
                    partition,
                    offset,
                });
            });
        ShardSnapshot {
            generation,
            shard: shard.id,
            apis: recorder.api_snapshots(),
            connections_accepted: recorder.connections_accepted.get(),
            connections_refused: recorder.connections_refused.get(),
            connections_closed: recorder.connections_closed.get(),
            connections_open: recorder.connections_open.get(),
            heap_allocations,
            produce_batches: stats.produce_batches.get(),
            fetches: stats.fetches.get(),
            forwarded_in: stats.forwarded_in.get(),
            forwarded_out: stats.forwarded_out.get(),
            handoffs_in: stats.handoffs_in.get(),
            handoffs_out: stats.handoffs_out.get(),
            hot_ranges: stats.send.hot_ranges.get(),
            cold_ranges: stats.send.cold_ranges.get(),
            cold_bytes: stats.send.cold_bytes.get(),
            sendfile_bytes: stats.send.sendfile_bytes.get(),
            copied_bytes: stats.send.copied_bytes.get(),
            remote_range_bytes: stats.remote_range_bytes.get(),
            fetch_sessions: shard.fetch_sessions.figures(),
            fsync_rounds: commit.rounds.get(),
            fsyncs: ::shard::fsyncs::counts(),
            fsync_round_latency: prometheus_buckets(&commit.sync_us),
            partitions,
            committed,
            series_dropped,
        }
    }
}

/// The group commit's log-linear histogram re-bucketed at our bounds (each value lands at
/// the first bound at or above its bucket's upper end: within the 12 % resolution).
fn prometheus_buckets(hist: &shard::flush::LatencyHist) -> HistogramSnapshot {
    let mut buckets = [0u64; BUCKETS];
    let mut below = 0;
    for (i, &bound) in BUCKET_BOUNDS_US.iter().enumerate() {
        let at_most = hist.count_at_most(bound);
        buckets[i] = at_most - below;
        below = at_most;
    }
    buckets[BUCKETS - 1] = hist.count().saturating_sub(below);
    HistogramSnapshot {
        buckets,
        sum_us: hist.sum_us(),
    }
}

/// Where shards post their snapshots and scrapes ask for them.
pub struct Board {
    /// The newest generation a scrape asked for.
    wanted: AtomicU64,
    /// Each shard's latest snapshot.
    snapshots: Mutex<Vec<Option<ShardSnapshot>>>,
    posted: Condvar,
}

/// What a scrape got: every shard's latest snapshot, and how many were not fresh.
pub struct Collected {
    pub snapshots: Vec<ShardSnapshot>,
    pub stale_shards: usize,
    pub shards: usize,
}

impl Board {
    pub fn new(shards: usize) -> Arc<Board> {
        Arc::new(Board {
            wanted: AtomicU64::new(0),
            snapshots: Mutex::new(vec![None; shards]),
            posted: Condvar::new(),
        })
    }

    /// The generation shards should publish (0: nobody scraped yet).
    pub fn wanted(&self) -> u64 {
        self.wanted.load(Ordering::Acquire)
    }

    /// Posts a shard's snapshot (publisher side).
    pub fn post(&self, snapshot: ShardSnapshot) {
        let mut snapshots = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = snapshots.get_mut(snapshot.shard) {
            *slot = Some(snapshot);
        }
        drop(snapshots);
        self.posted.notify_all();
    }

    /// Asks every shard for a fresh snapshot and waits for them (at most `wait`).
    pub fn collect(&self, wait: Duration) -> Collected {
        let generation = self.wanted.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + wait;
        let fresh =
            |s: &Option<ShardSnapshot>| s.as_ref().is_some_and(|s| s.generation >= generation);
        let mut snapshots = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if snapshots.iter().all(fresh) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            snapshots = self
                .posted
                .wait_timeout(snapshots, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let shards = snapshots.len();
        let stale_shards = snapshots.iter().filter(|s| !fresh(s)).count();
        Collected {
            snapshots: snapshots.iter().flatten().cloned().collect(),
            stale_shards,
            shards,
        }
    }
}

/// A shard's publisher: posts a snapshot whenever a scrape wants a newer one. Ends with the
/// shard.
pub async fn publish(shard: std::rc::Weak<Shard>, board: Arc<Board>) {
    let mut published = 0;
    loop {
        glommio::timer::sleep(SNAPSHOT_POLL).await;
        let wanted = board.wanted();
        if wanted == published {
            continue;
        }
        let Some(shard) = shard.upgrade() else {
            return;
        };
        board.post(ShardSnapshot::take(&shard, wanted));
        published = wanted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_waits_for_fresh_snapshots_and_counts_stale_ones() {
        let board = Board::new(2);
        let poster = board.clone();
        let thread = std::thread::spawn(move || {
            while poster.wanted() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            poster.post(ShardSnapshot {
                generation: poster.wanted(),
                shard: 0,
                fetches: 5,
                ..Default::default()
            });
        });
        let collected = board.collect(Duration::from_millis(300));
        thread.join().unwrap();
        assert_eq!(collected.shards, 2);
        assert_eq!(collected.stale_shards, 1);
        assert_eq!(collected.snapshots.len(), 1);
        assert_eq!(collected.snapshots[0].fetches, 5);
        // The next scrape wants a newer generation: shard 0's snapshot is stale now too.
        let collected = board.collect(Duration::from_millis(10));
        assert_eq!(collected.stale_shards, 2);
        assert_eq!(collected.snapshots.len(), 1);
    }
}
