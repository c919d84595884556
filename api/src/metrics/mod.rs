//! What a shard records per request for the metrics endpoint: its own `Cell`s, never a lock
//! ([`recorder`], [`histogram`]). The endpoint itself (snapshots, rendering, HTTP) is the
//! broker binary's.

pub mod histogram;
pub mod recorder;

pub use recorder::ShardRecorder;
