//! What one shard records for the metrics endpoint as it serves: per API, requests, errors,
//! bytes in and out and a latency histogram; connections opened, closed and refused.
//!
//! Owned by the shard (a field of `Shard`), written only by its thread: plain `Cell`s, no
//! atomic or locked instruction, no allocation (every array exists from the shard's start).
//! Another thread sees these figures only through the shard's snapshot (`snapshot`), taken by
//! the shard itself when a scrape asks for one. With `metrics.listener` unset nothing is
//! recorded and the clock is not read (`enabled` is false).

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::histogram::{Histogram, HistogramSnapshot};

/// API keys below this get their own figures; every key this broker serves is below it
/// (ConsumerGroupDescribe, 69, is the largest) and `dispatch` refuses the others before they
/// are counted. A flat array indexed by key: no lookup per request.
pub const API_KEY_SLOTS: usize = 96;

/// Figures of one API on one shard.
#[derive(Default)]
pub struct ApiFigures {
    pub requests: Cell<u64>,
    /// Requests that ended the connection instead of being answered: undecodable, of a
    /// version or API we do not serve, or a response that could not be encoded.
    pub errors: Cell<u64>,
    /// Request frames, size prefix included.
    pub bytes_in: Cell<u64>,
    /// Response frames, size prefix and fetched record bytes included.
    pub bytes_out: Cell<u64>,
    /// From the request handed to its handler to its response encoded (the write to the
    /// socket, batched with the connection's other responses, is not included).
    pub latency: Histogram,
}

pub struct ShardRecorder {
    enabled: bool,
    apis: Box<[ApiFigures]>,
    pub connections_accepted: Cell<u64>,
    /// Refused at accept (`max.connections`, `max.connections.per.ip`): closed at once.
    pub connections_refused: Cell<u64>,
    /// Connections that ended here (not counting those handed to another shard).
    pub connections_closed: Cell<u64>,
    /// Served by this shard now (accepted or taken over, not yet closed or handed on).
    pub connections_open: Cell<u64>,
}

/// A request being timed; `None` inside when metrics are off.
pub struct RequestTimer(Option<(i16, Instant)>);

impl ShardRecorder {
    pub fn new(enabled: bool) -> ShardRecorder {
        ShardRecorder {
            enabled,
            apis: (0..API_KEY_SLOTS).map(|_| ApiFigures::default()).collect(),
            connections_accepted: Cell::new(0),
            connections_refused: Cell::new(0),
            connections_closed: Cell::new(0),
            connections_open: Cell::new(0),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn api(&self, api_key: i16) -> Option<&ApiFigures> {
        usize::try_from(api_key)
            .ok()
            .and_then(|index| self.apis.get(index))
    }

    /// Counts a request of `frame_bytes` (size prefix included) and starts its clock.
    pub fn start(&self, api_key: i16, frame_bytes: usize) -> RequestTimer {
        if !self.enabled {
            return RequestTimer(None);
        }
        if let Some(api) = self.api(api_key) {
            bump(&api.requests, 1);
            bump(&api.bytes_in, frame_bytes as u64);
        }
        RequestTimer(Some((api_key, Instant::now())))
    }

    /// Records the end of a timed request: `response_bytes` written (0 for none), or
    /// `failed` (the connection closes instead).
    pub fn finish(&self, timer: RequestTimer, response_bytes: usize, failed: bool) {
        let Some((api_key, started)) = timer.0 else {
            return;
        };
        self.record(api_key, started.elapsed(), response_bytes, failed);
    }

    fn record(&self, api_key: i16, elapsed: Duration, response_bytes: usize, failed: bool) {
        let Some(api) = self.api(api_key) else {
            return;
        };
        api.latency.record(elapsed);
        bump(&api.bytes_out, response_bytes as u64);
        if failed {
            bump(&api.errors, 1);
        }
    }

    /// A request refused before its handler ran (it closes the connection; `start` counted
    /// it if it got that far): counted as an error of its API.
    pub fn refused(&self, api_key: Option<i16>) {
        if !self.enabled {
            return;
        }
        if let Some(api) = api_key.and_then(|key| self.api(key)) {
            bump(&api.errors, 1);
        }
    }

    pub fn connection_accepted(&self) {
        bump(&self.connections_accepted, 1);
    }

    pub fn connection_refused(&self) {
        bump(&self.connections_refused, 1);
    }

    pub fn connection_opened(&self) {
        bump(&self.connections_open, 1);
    }

    /// A connection stops being served here: `moved` to another shard, or closed.
    pub fn connection_ended(&self, moved: bool) {
        self.connections_open
            .set(self.connections_open.get().saturating_sub(1));
        if !moved {
            bump(&self.connections_closed, 1);
        }
    }

    /// Figures of the APIs that saw a request, by key.
    pub fn api_snapshots(&self) -> Vec<(i16, ApiSnapshot)> {
        self.apis
            .iter()
            .enumerate()
            .filter(|(_, api)| api.requests.get() > 0)
            .map(|(key, api)| {
                (
                    key as i16,
                    ApiSnapshot {
                        requests: api.requests.get(),
                        errors: api.errors.get(),
                        bytes_in: api.bytes_in.get(),
                        bytes_out: api.bytes_out.get(),
                        latency: api.latency.snapshot(),
                    },
                )
            })
            .collect()
    }
}

/// Single writer: a load and a store, never a locked read-modify-write.
fn bump(cell: &Cell<u64>, n: u64) {
    cell.set(cell.get().wrapping_add(n));
}

/// One API's figures at one moment.
#[derive(Clone, Debug, Default)]
pub struct ApiSnapshot {
    pub requests: u64,
    pub errors: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub latency: HistogramSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_records_nothing() {
        let recorder = ShardRecorder::new(false);
        let timer = recorder.start(0, 100);
        recorder.finish(timer, 50, false);
        recorder.refused(Some(0));
        assert!(recorder.api_snapshots().is_empty());
    }

    #[test]
    fn enabled_records_requests_bytes_errors_and_latency() {
        let recorder = ShardRecorder::new(true);
        let timer = recorder.start(0, 100);
        recorder.finish(timer, 40, false);
        let timer = recorder.start(0, 60);
        recorder.finish(timer, 0, true);
        let timer = recorder.start(1, 30);
        recorder.refused(Some(1));
        let _ = timer; // never finished: the connection closed instead
        recorder.refused(None);
        // Keys outside the table are ignored rather than indexed.
        recorder.refused(Some(-1));
        recorder.refused(Some(API_KEY_SLOTS as i16));
        let apis = recorder.api_snapshots();
        assert_eq!(apis.len(), 2);
        let (key, produce) = &apis[0];
        assert_eq!(*key, 0);
        assert_eq!(
            (
                produce.requests,
                produce.errors,
                produce.bytes_in,
                produce.bytes_out
            ),
            (2, 1, 160, 40)
        );
        assert_eq!(produce.latency.count(), 2);
        let (key, fetch) = &apis[1];
        assert_eq!(*key, 1);
        assert_eq!((fetch.requests, fetch.errors, fetch.bytes_in), (1, 1, 30));
        assert_eq!(fetch.latency.count(), 0);
    }

    /// The hot-path cost of recording one request (counters, clock reads, histogram), metrics
    /// off and on. A measurement, not a check: `cargo test --release -p broker --lib
    /// record_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn record_cost() {
        const ROUNDS: u32 = 10_000_000;
        for enabled in [false, true, false, true] {
            let recorder = ShardRecorder::new(enabled);
            let started = Instant::now();
            for i in 0..ROUNDS {
                let key = std::hint::black_box((i % 3) as i16);
                let timer = recorder.start(key, std::hint::black_box(1_100));
                recorder.finish(timer, std::hint::black_box(60), false);
            }
            let ns = started.elapsed().as_nanos() as f64 / f64::from(ROUNDS);
            println!(
                "metrics {}: {ns:.1} ns per request recorded",
                if enabled { "on" } else { "off" }
            );
            if enabled {
                assert_eq!(
                    recorder
                        .api_snapshots()
                        .iter()
                        .map(|(_, a)| a.requests)
                        .sum::<u64>(),
                    u64::from(ROUNDS)
                );
            }
        }
    }

    #[test]
    fn connections_open_follows_opens_and_ends() {
        let recorder = ShardRecorder::new(true);
        recorder.connection_opened();
        recorder.connection_opened();
        recorder.connection_ended(true);
        assert_eq!(recorder.connections_open.get(), 1);
        assert_eq!(recorder.connections_closed.get(), 0);
        recorder.connection_ended(false);
        assert_eq!(recorder.connections_open.get(), 0);
        assert_eq!(recorder.connections_closed.get(), 1);
    }
}
