//! [`BatchError`]: why a batch, or a record inside one, was refused. Shared by every part
//! of `record_batch`; the broker maps it to a Kafka error code at its boundary.

use thiserror::Error;

use crate::compression;

use super::RecordErrors;

/// Why a batch (or a record inside one) was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("record batch truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("unsupported record batch magic {0} (only v2 is supported)")]
    BadMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("invalid record batch length {0}")]
    BadLength(i32),
    #[error("invalid record count {count} for last offset delta {last_offset_delta}")]
    BadRecordCount { count: i32, last_offset_delta: i32 },
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    #[error("corrupt record: {0}")]
    CorruptRecord(&'static str),
    #[error("compression error: {0}")]
    Compression(String),
    #[error("decompressed records exceed the limit of {max} bytes")]
    DecompressedTooLarge { max: usize },
    #[error("record {index} has offset delta {offset_delta}; it must equal its index")]
    BadOffsetDelta { index: i32, offset_delta: i32 },
    /// Kafka's `RecordValidationException`: records refused for themselves.
    #[error("{} record(s) refused, the first: {:?}", .0.count, .0.named.first())]
    Records(RecordErrors),
    #[error("clients may not write control batches")]
    ControlBatchFromClient,
    #[error("invalid sequence number {base_sequence} for producer id {producer_id}")]
    BadSequence {
        producer_id: i64,
        base_sequence: i32,
    },
    #[error("clients may not set the LogAppendTime timestamp type")]
    LogAppendTimeFromClient,
}

impl From<compression::CompressionError> for BatchError {
    fn from(error: compression::CompressionError) -> Self {
        BatchError::Compression(error.to_string())
    }
}
