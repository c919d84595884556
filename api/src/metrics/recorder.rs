//! What one shard records for the metrics endpoint as it serves: per API, requests, errors
//! (requests that closed the connection, and the error codes of answered responses), bytes
//! in and out and a latency histogram; connections opened, closed and refused.
//!
//! Owned by the shard (a field of `Shard`), written only by its thread: plain `Cell`s, no
//! atomic or locked instruction, no allocation (every array exists from the shard's start).
//! Another thread sees these figures only through the shard's snapshot (`snapshot`), taken by
//! the shard itself when a scrape asks for one. With `metrics.listener` unset nothing is
//! recorded and the clock is not read (`enabled` is false).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::histogram::{Histogram, HistogramSnapshot};

/// API keys below this get their own figures; every key this broker serves is below it
/// (ConsumerGroupDescribe, 69, is the largest) and `dispatch` refuses the others before they
/// are counted. A flat array indexed by key: no lookup per request.
pub const API_KEY_SLOTS: usize = 96;

/// Error codes `-1..ERROR_CODE_SLOTS - 1` get their own count per API (Kafka 4.1 defines
/// -1 through 133; a unit test checks every code `wire` knows fits). A code outside (one a
/// newer Kafka defines) is counted as UNKNOWN_SERVER_ERROR, as a client that does not know
/// it reads it. A flat array indexed by code: no lookup per response.
pub const ERROR_CODE_SLOTS: usize = 136;

/// Counts of the error codes in the responses a shard answered, per API and code (NONE not
/// counted): Kafka's `ErrorsPerSec{request, error}`. Written only by the shard's thread, from
/// `encode_response` (which reaches it through the request's context).
pub struct ErrorCounts {
    /// `API_KEY_SLOTS` rows of `ERROR_CODE_SLOTS` counts, the row of a key at
    /// `key * ERROR_CODE_SLOTS`, the count of a code at `code + 1` within it.
    counts: Box<[Cell<u64>]>,
}

impl ErrorCounts {
    fn new() -> ErrorCounts {
        ErrorCounts {
            counts: (0..API_KEY_SLOTS * ERROR_CODE_SLOTS)
                .map(|_| Cell::new(0))
                .collect(),
        }
    }

    /// Counts `code` in a response to `api_key` (NONE, and keys outside the table, are not
    /// counted).
    #[inline]
    pub fn count(&self, api_key: i16, code: i16) {
        if code == 0 {
            return;
        }
        let Ok(api) = usize::try_from(api_key) else {
            return;
        };
        let slot = usize::try_from(i32::from(code) + 1)
            .ok()
            .filter(|&slot| slot < ERROR_CODE_SLOTS)
            .unwrap_or(0);
        if let Some(cell) = self.counts.get(api * ERROR_CODE_SLOTS + slot) {
            bump(cell, 1);
        }
    }

    /// The codes counted for `api_key`, by code.
    fn of(&self, api_key: usize) -> Vec<(i16, u64)> {
        let row = api_key * ERROR_CODE_SLOTS;
        self.counts
            .get(row..row + ERROR_CODE_SLOTS)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter(|(_, count)| count.get() > 0)
            .map(|(slot, count)| (slot as i16 - 1, count.get()))
            .collect()
    }
}

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
    /// Shared with the contexts of requests being served (None with metrics off: nothing
    /// allocated, nothing counted).
    error_counts: Option<Rc<ErrorCounts>>,
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
            error_counts: enabled.then(|| Rc::new(ErrorCounts::new())),
            connections_accepted: Cell::new(0),
            connections_refused: Cell::new(0),
            connections_closed: Cell::new(0),
            connections_open: Cell::new(0),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Where a request's response error codes are counted (None with metrics off).
    pub fn error_counts(&self) -> Option<Rc<ErrorCounts>> {
        self.error_counts.clone()
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

    /// A connection accepted but closed before it was served (its TLS handshake failed or
    /// timed out): closed, so that accepted - closed stays the open count.
    pub fn connection_closed_unserved(&self) {
        bump(&self.connections_closed, 1);
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
                        error_codes: self
                            .error_counts
                            .as_ref()
                            .map(|counts| counts.of(key))
                            .unwrap_or_default(),
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
    /// Requests that closed the connection instead of being answered.
    pub errors: u64,
    /// Error codes in answered responses, by code (NONE not counted).
    pub error_codes: Vec<(i16, u64)>,
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
    fn error_codes_are_counted_per_api_and_code_without_none() {
        let recorder = ShardRecorder::new(true);
        let counts = recorder.error_counts().expect("metrics on");
        let timer = recorder.start(0, 100);
        recorder.finish(timer, 40, false);
        for code in [0, 10, 10, 3, 0, -1] {
            counts.count(0, code);
        }
        // A code newer than this build counts as UNKNOWN_SERVER_ERROR; odd keys are ignored.
        counts.count(0, ERROR_CODE_SLOTS as i16 + 5);
        counts.count(-3, 10);
        counts.count(API_KEY_SLOTS as i16, 10);
        let apis = recorder.api_snapshots();
        assert_eq!(apis.len(), 1);
        assert_eq!(apis[0].1.error_codes, vec![(-1, 2), (3, 1), (10, 2)]);
        assert_eq!(apis[0].1.errors, 0);
        assert!(ShardRecorder::new(false).error_counts().is_none());
    }

    #[test]
    fn every_kafka_error_code_has_a_slot() {
        for code in wire::error_code::ErrorCode::ALL {
            let slot = i32::from(code.code()) + 1;
            assert!(
                (0..ERROR_CODE_SLOTS as i32).contains(&slot),
                "{code:?} outside the table"
            );
        }
    }

    /// The cost of counting a produce response's error codes (a generic walk of the
    /// response, 1 topic of 3 partitions, one with an error), on top of `record_cost`. A
    /// measurement: `cargo test --release -p broker --lib record_cost -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn record_cost_of_error_codes() {
        use wire::generated::produce_response::{PartitionProduceResponse, TopicProduceResponse};
        use wire::generated::ProduceResponse;
        use wire::primitives::ErrorCodes;
        const ROUNDS: u32 = 10_000_000;
        let response = ProduceResponse {
            responses: vec![TopicProduceResponse {
                name: "t".into(),
                partition_responses: (0..3)
                    .map(|index| PartitionProduceResponse {
                        index,
                        error_code: if index == 2 { 10 } else { 0 },
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let recorder = ShardRecorder::new(true);
        let counts = recorder.error_counts().expect("metrics on");
        for _ in 0..2 {
            let started = Instant::now();
            for _ in 0..ROUNDS {
                let response = std::hint::black_box(&response);
                response.for_each_error_code(&mut |code| counts.count(0, code));
            }
            let ns = started.elapsed().as_nanos() as f64 / f64::from(ROUNDS);
            println!("error codes of a 3-partition produce response: {ns:.1} ns counted");
        }
        let timer = recorder.start(0, 1);
        recorder.finish(timer, 1, false);
        assert_eq!(
            recorder.api_snapshots()[0].1.error_codes,
            vec![(10, u64::from(2 * ROUNDS))]
        );
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
