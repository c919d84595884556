//! Request-latency histograms with Prometheus's cumulative fixed buckets: one array of
//! counters per API, allocated once with the shard's recorder and only incremented after.
//! Written by one shard's thread only (`Cell`), read through the shard's snapshot.

use std::cell::Cell;
use std::time::Duration;

/// Upper bounds of the latency buckets, in microseconds (`le` labels; `+Inf` is implicit).
/// From 50 µs (a produce answered from memory on an idle shard) to 10 s (a long poll at
/// Kafka's largest usual `fetch.max.wait.ms` plus slack): 1-2.5-5 steps, as Prometheus'
/// client libraries use, so `histogram_quantile` interpolates within a factor of 2.5.
pub const BUCKET_BOUNDS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Buckets including the `+Inf` one.
pub const BUCKETS: usize = BUCKET_BOUNDS_US.len() + 1;

/// The bucket of a duration of `us` microseconds: the first whose bound it does not exceed.
pub fn bucket_index(us: u64) -> usize {
    // A linear scan: 17 well-predicted compares beat a binary search's mispredictions, and
    // most requests stop within the first few buckets.
    BUCKET_BOUNDS_US
        .iter()
        .position(|&bound| us <= bound)
        .unwrap_or(BUCKET_BOUNDS_US.len())
}

/// One histogram: per-bucket (not cumulative) counts and the sum, in microseconds.
pub struct Histogram {
    buckets: [Cell<u64>; BUCKETS],
    sum_us: Cell<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| Cell::new(0)),
            sum_us: Cell::new(0),
        }
    }
}

impl Histogram {
    pub fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = &self.buckets[bucket_index(us)];
        bucket.set(bucket.get() + 1);
        self.sum_us.set(self.sum_us.get().saturating_add(us));
    }

    /// A copy that can cross threads.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].get()),
            sum_us: self.sum_us.get(),
        }
    }
}

/// A histogram's counts at one moment (per bucket, not cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    pub buckets: [u64; BUCKETS],
    pub sum_us: u64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Adds another histogram's counts (same bounds).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }

    /// Cumulative counts per bound, in Prometheus' order (`+Inf` last, equal to the count).
    pub fn cumulative(&self) -> [u64; BUCKETS] {
        let mut running = 0;
        std::array::from_fn(|i| {
            running += self.buckets[i];
            running
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_are_inclusive_and_increasing() {
        assert!(BUCKET_BOUNDS_US.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(50), 0);
        assert_eq!(bucket_index(51), 1);
        assert_eq!(bucket_index(1_000), 4);
        assert_eq!(bucket_index(10_000_000), 16);
        assert_eq!(bucket_index(10_000_001), 17);
        assert_eq!(bucket_index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn record_counts_sums_and_accumulates() {
        let histogram = Histogram::default();
        histogram.record(Duration::from_micros(30));
        histogram.record(Duration::from_micros(700));
        histogram.record(Duration::from_millis(700));
        histogram.record(Duration::from_secs(60));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 4);
        assert_eq!(snapshot.sum_us, 30 + 700 + 700_000 + 60_000_000);
        let cumulative = snapshot.cumulative();
        assert_eq!(cumulative[0], 1); // le 50us
        assert_eq!(cumulative[3], 1); // le 500us
        assert_eq!(cumulative[4], 2); // le 1ms
        assert_eq!(cumulative[12], 2); // le 500ms
        assert_eq!(cumulative[13], 3); // le 1s
        assert_eq!(cumulative[16], 3); // le 10s
        assert_eq!(cumulative[BUCKETS - 1], 4); // +Inf
        let mut merged = snapshot;
        merged.merge(&snapshot);
        assert_eq!(merged.count(), 8);
        assert_eq!(merged.sum_us, 2 * snapshot.sum_us);
    }
}
