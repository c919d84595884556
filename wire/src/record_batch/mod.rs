//! Kafka record batch v2 (magic 2): parsing, validation, patching, record iteration and
//! a builder.
//!
//! The broker stores a batch as the bytes that came: on produce it parses the 61-byte
//! header, checks the CRC-32C, walks every record once with [`validate_records`] (framing,
//! offset deltas, counts; compressed batches decompressed into a reused, bounded buffer),
//! patches the base offset and partition leader epoch (both outside the CRC'd region) and
//! writes the bytes to the log unchanged. Reading records for their contents (tools,
//! tests, ListOffsets, compaction) is a separate step, [`records`].
//!
//! Layout (big-endian), with byte offsets from the start of the batch:
//!
//! ```text
//!  0 baseOffset i64            | 8 batchLength i32 (bytes after this field)
//! 12 partitionLeaderEpoch i32  | 16 magic i8 | 17 crc u32 (CRC-32C of bytes 21..end)
//! 21 attributes i16            | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
//! 35 maxTimestamp i64          | 43 producerId i64 | 51 producerEpoch i16
//! 53 baseSequence i32          | 57 recordsCount i32 | 61 records...
//! ```
//!
//! Every function here is bounded by the slice it is given and never panics, whatever the
//! bytes; decompression is capped (see [`crate::compression`]) so a small batch cannot
//! expand into an unbounded allocation.
//!
//! This file holds the layout's constants; the rest lives in `attributes` (codec and
//! timestamp type), `header` (the 61-byte header: parse, validate, CRC, patch, split a
//! buffer into batches), `records` (record decoding and iteration), `validate` (the
//! per-record checks of a produce, with KIP-467's refused-records list), `builder`
//! (building and re-encoding batches) and `error`.

mod attributes;
mod builder;
mod error;
mod header;
mod records;
mod validate;

#[cfg(test)]
mod tests;

pub use attributes::{Compression, TimestampType};
pub use builder::{encode_retained, BatchBuilder};
pub use error::BatchError;
pub use header::{
    batches, compute_crc, patch_base_offset, patch_partition_leader_epoch, patched_prefix,
    stamped_header, stored_batches, validate_batch, validate_stored_batch, BatchHeader, BatchIter,
};
pub use records::{
    records, records_with_limit, Header, HeaderIter, OwnedRecord, Record, RecordHeaders,
    RecordIter, Records,
};
pub use validate::{
    validate_records, RecordError, RecordErrors, RecordFault, RecordLimits, RecordStats,
    TimestampRule, MAX_NAMED_RECORD_ERRORS,
};

/// Size of the fixed batch header, up to and including `recordsCount`
/// (Kafka's `RECORD_BATCH_OVERHEAD`).
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes in front of `batchLength`'s coverage: `baseOffset` and `batchLength` itself
/// (Kafka's `LOG_OVERHEAD`).
pub const LOG_OVERHEAD: usize = 12;
/// The only message format this crate understands.
pub const MAGIC_V2: i8 = 2;

/// Byte offsets of the header fields, named so the parsing and patching code reads as
/// the layout above.
const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
/// The CRC covers everything from `attributes` to the end of the batch.
const CRC_START: usize = 21;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;
/// The smallest legal `batchLength`: a header with no records.
const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_BYTES - LOG_OVERHEAD) as i32;

/// Attribute bits (Kafka's `DefaultRecordBatch` masks).
const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
/// Set by the log cleaner when it records a batch's delete horizon (KIP-534): the batch's
/// `base_timestamp` then holds the horizon, and record timestamp deltas are relative to it.
const DELETE_HORIZON_BIT: i16 = 0x40;
