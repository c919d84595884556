//! The perf tools: `producer-perf`, `consumer-perf` and `e2e-latency`, with Kafka's output
//! formats and a JSON report of every figure.
//!
//! Library entry points (used by `compare`): [`run_producer`], [`run_consumer`], [`run_e2e`].
//! Each returns a `Serialize` report with records/s, MB/s, latency avg/max/p50/p95/p99/p99.9/
//! p99.99 in ms, and a per-second throughput series.

pub mod consumer;
pub mod e2e;
pub mod histogram;
pub mod output;
pub mod producer;
pub mod rate;

pub use consumer::{run_consumer, ConsumerArgs, ConsumerOpts, ConsumerReport};
pub use e2e::{run_e2e, E2eArgs, E2eOpts, E2eReport};
pub use histogram::{LatencyHistogram, LatencySummary};
pub use producer::{run_producer, ProducerArgs, ProducerOpts, ProducerReport};
pub use rate::SeriesPoint;
