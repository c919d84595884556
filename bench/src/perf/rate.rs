//! Pacing (record `i` is intended at `start + i / rate`) and per-second throughput series.
//!
//! Latency is measured from a record's *intended* send time, so when the client falls behind
//! the schedule the delay counts (no coordinated omission). While waiting for the next slot
//! the producer keeps polling, so delivery callbacks are not held back by the pacing sleep.

use serde::Serialize;
use std::time::{Duration, Instant};

use crate::engine::Producer;

/// Fixed-rate schedule; `rate <= 0` (Kafka's `-1`) means unthrottled.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    start: Instant,
    rate: f64,
}

impl Pacer {
    pub fn new(start: Instant, rate: f64) -> Self {
        Pacer { start, rate }
    }

    pub fn throttled(&self) -> bool {
        self.rate > 0.0
    }

    /// When record `i` is intended to be sent: `start + i / rate`, or now when unthrottled.
    pub fn intended(&self, i: u64) -> Instant {
        if self.throttled() {
            self.start + Duration::from_secs_f64(i as f64 / self.rate)
        } else {
            Instant::now()
        }
    }

    /// Waits until `at`, running the producer's ready delivery callbacks meanwhile.
    pub fn wait_until(&self, at: Instant, producer: &mut dyn Producer) {
        loop {
            let now = Instant::now();
            if now >= at {
                return;
            }
            let left = at - now;
            if left >= Duration::from_millis(1) {
                // Returns early when a callback ran; the loop re-checks the clock.
                producer.poll(left - Duration::from_micros(200).min(left));
            } else {
                // Engines may round sub-millisecond poll timeouts down to zero: poll, then nap
                // at most 100 µs so ready callbacks are seen within ~0.1 ms.
                producer.poll(Duration::ZERO);
                let left = at.saturating_duration_since(Instant::now());
                if left > Duration::from_micros(100) {
                    std::thread::sleep(
                        (left - Duration::from_micros(60)).min(Duration::from_micros(100)),
                    );
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// Sleeps (no producer to poll) until `at`.
    pub fn sleep_until(at: Instant) {
        loop {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            if left > Duration::from_micros(100) {
                std::thread::sleep(left - Duration::from_micros(60));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Records and bytes counted in each whole second since `start`.
#[derive(Clone, Debug)]
pub struct ThroughputSeries {
    start: Instant,
    buckets: Vec<(u64, u64)>,
}

/// One second of a throughput series.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the start of the run (this point covers `[t_s, t_s + 1)`).
    pub t_s: u64,
    pub records: u64,
    pub bytes: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
}

impl ThroughputSeries {
    pub fn new(start: Instant) -> Self {
        ThroughputSeries {
            start,
            buckets: Vec::new(),
        }
    }

    pub fn record(&mut self, at: Instant, records: u64, bytes: u64) {
        let second = at.saturating_duration_since(self.start).as_secs() as usize;
        if self.buckets.len() <= second {
            self.buckets.resize(second + 1, (0, 0));
        }
        let b = &mut self.buckets[second];
        b.0 += records;
        b.1 += bytes;
    }

    /// The points; the last (partial) second's rates are scaled by the time it covered up to
    /// `end`.
    pub fn points(&self, end: Instant) -> Vec<SeriesPoint> {
        let total = end.saturating_duration_since(self.start).as_secs_f64();
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, &(records, bytes))| {
                let width = (total - i as f64).clamp(1e-3, 1.0);
                SeriesPoint {
                    t_s: i as u64,
                    records,
                    bytes,
                    records_per_sec: records as f64 / width,
                    mb_per_sec: super::output::mb(bytes) / width,
                }
            })
            .collect()
    }
}
