//! The bench crate's tests, one binary: every module was once its own test file, and each
//! test binary links the whole crate (librdkafka, plotters, rustls) again, which cost the
//! test command minutes of linking for nothing.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is the failure report

mod common;

mod compare_smoke;
mod fetch_cost_smoke;
mod groups_smoke;
mod kafka_peer_smoke;
mod latency_sweep_smoke;
mod limits_smoke;
mod native_client;
mod native_tls;
mod percentiles;
mod perf_smoke;
