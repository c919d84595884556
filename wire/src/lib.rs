//! The Kafka wire protocol, with no I/O, no async and no runtime.
//!
//! Framing, request/response headers, the message codecs generated from Kafka's JSON
//! schemas (`generated`, written by the `codegen` crate), record batch v2, varints, CRC-32C
//! and Kafka's error codes. Every decoder is bounded by the bytes it was given and never
//! panics on input, whatever the bytes.

pub mod compression;
pub mod consumer_protocol;
pub mod error_code;
pub mod frame;
pub mod generated;
pub mod group_records;
pub mod ids;
pub mod primitives;
pub mod record_batch;
pub mod txn_records;
pub mod varint;

pub use error_code::ErrorCode;
pub use ids::{FlushPolicy, TopicId};
