//! Latency histogram: hdrhistogram at microsecond resolution, 3 significant digits, plus the
//! exact count/sum/min/max (so the average and the max are not bucketed).
//!
//! Percentiles follow hdrhistogram's `value_at_quantile`: the smallest recorded value `v`
//! such that at least `ceil(q * count)` samples are `<= v`, reported as the highest value
//! equivalent to `v` at 3 significant digits (so at most ~0.1% above the exact sample).

use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Highest trackable latency: one hour, in microseconds (larger values saturate there).
pub const MAX_TRACKABLE_US: u64 = 3_600_000_000;
/// Significant digits kept by every histogram.
pub const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    count: u64,
    sum_us: u128,
    min_us: u64,
    max_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        LatencyHistogram {
            hist: Histogram::new_with_bounds(1, MAX_TRACKABLE_US, SIGNIFICANT_DIGITS)
                .expect("valid histogram bounds"),
            count: 0,
            sum_us: 0,
            min_us: u64::MAX,
            max_us: 0,
        }
    }

    /// Records one latency in microseconds.
    pub fn record_us(&mut self, us: u64) {
        self.hist.saturating_record(us);
        self.count += 1;
        self.sum_us += us as u128;
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }

    pub fn record(&mut self, latency: Duration) {
        self.record_us(latency.as_micros().min(u64::MAX as u128) as u64);
    }

    pub fn add(&mut self, other: &LatencyHistogram) {
        if other.count == 0 {
            return;
        }
        self.hist.add(&other.hist).expect("same bounds");
        self.count += other.count;
        self.sum_us += other.sum_us;
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean in microseconds (0 when empty).
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.count as f64
        }
    }

    /// Exact maximum in microseconds (0 when empty).
    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// Exact minimum in microseconds (0 when empty).
    pub fn min_us(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min_us
        }
    }

    /// The `percentile` (0..=100) in microseconds, at 3 significant digits (0 when empty).
    pub fn percentile_us(&self, percentile: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        // Never report above the exact max (the bucket's top can exceed it).
        self.hist
            .value_at_quantile(percentile / 100.0)
            .min(self.max_us)
    }

    /// The percentile in whole milliseconds, truncated, as Kafka's tools print them.
    pub fn percentile_ms_int(&self, percentile: f64) -> u64 {
        self.percentile_us(percentile) / 1000
    }

    /// The percentile in milliseconds with microsecond precision.
    pub fn percentile_ms(&self, percentile: f64) -> f64 {
        us_to_ms(self.percentile_us(percentile))
    }

    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count,
            avg: self.mean_us() / 1000.0,
            min: us_to_ms(self.min_us()),
            max: us_to_ms(self.max_us()),
            p50: self.percentile_ms(50.0),
            p95: self.percentile_ms(95.0),
            p99: self.percentile_ms(99.0),
            p99_9: self.percentile_ms(99.9),
            p99_99: self.percentile_ms(99.99),
        }
    }

    /// The underlying hdrhistogram (for plotting full distributions).
    pub fn inner(&self) -> &Histogram<u64> {
        &self.hist
    }
}

fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Latency figures in milliseconds (microsecond precision).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
}
