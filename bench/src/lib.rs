//! `bench`: Kafka-protocol benchmark tools (library half of the `bench` binary).
//!
//! The perf tools (`producer-perf`, `consumer-perf`, `e2e-latency`) live in [`perf`] and run
//! against any Kafka-protocol broker through a pluggable client [`engine`] (librdkafka or the
//! native Rust client in [`native`]). `compare`, `limits` and the null broker reuse them.

mod broker_process;
pub mod compare;
pub mod compare_table;
pub mod cpu;
pub mod engine;
pub mod fetch_cost;
pub mod groups;
pub mod latency_sweep;
pub mod limits;
pub mod native;
pub mod null_broker;
pub mod peer;
pub mod perf;
pub mod plot;
