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

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::compression;
use crate::varint::{
    read_varint, read_varlong, varint_len, varlong_len, write_varint, write_varlong,
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

/// The most refused records [`validate_records`] names in one batch's error. Kafka names
/// every one; a batch can hold millions of tiny records (up to the decompression cap), and
/// naming each would cost ~24 bytes here and ~100 in the answer per record. 10,000 covers
/// librdkafka's largest default batch (`batch.num.messages`), so its clients see every
/// refused record named.
pub const MAX_NAMED_RECORD_ERRORS: usize = 10_000;

/// The records of one batch refused for themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordErrors {
    /// The first refused records in record order, at most [`MAX_NAMED_RECORD_ERRORS`].
    pub named: Vec<RecordError>,
    /// How many records were refused in all (at least one).
    pub count: usize,
    /// Whether any of them, named or not, was refused for its timestamp (the batch's error
    /// is then INVALID_TIMESTAMP, INVALID_RECORD otherwise).
    pub any_timestamp: bool,
}

/// One record Kafka's `LogValidator` refuses for itself (an `ApiRecordError`): its index in
/// the batch and why. The broker words it (Kafka's messages name the topic partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub fault: RecordFault,
}

/// Why one record was refused. Offsets are the record's as the client numbered it (base
/// offset + delta), which is what Kafka's messages show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFault {
    /// No key, on a compacted topic (INVALID_RECORD).
    MissingKey,
    /// A CreateTime stamp outside `[min, max]`, i.e.
    /// `[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]`
    /// with Java's wrapping arithmetic (INVALID_TIMESTAMP).
    TimestampOutOfRange {
        timestamp: i64,
        offset: i64,
        min: i64,
        max: i64,
    },
    /// The batch's LogAppendTime attribute, which only a broker may set, reported on each
    /// record with what Kafka's message shows of it (INVALID_TIMESTAMP).
    LogAppendTime {
        offset: i64,
        timestamp: i64,
        key_bytes: usize,
        value_bytes: usize,
    },
}

impl RecordFault {
    /// Whether Kafka answers it INVALID_TIMESTAMP (one such record makes the whole batch's
    /// error INVALID_TIMESTAMP); INVALID_RECORD otherwise.
    pub fn is_timestamp(&self) -> bool {
        !matches!(self, RecordFault::MissingKey)
    }
}

impl From<compression::CompressionError> for BatchError {
    fn from(error: compression::CompressionError) -> Self {
        BatchError::Compression(error.to_string())
    }
}

/// The compression codec of a batch (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    /// Every codec, in attribute-id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec for an attribute id, or `None` for the unassigned ids 5-7.
    pub fn from_id(id: u8) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The id stored in attribute bits 0-2.
    pub fn id(self) -> u8 {
        self as u8
    }
}

/// Which clock a batch's timestamps come from (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// The fixed 61-byte header of a v2 batch, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Reads the 61-byte header, checking magic == 2, a known compression codec and
    /// `batch_length` against `buf.len()` (buf may hold more bytes after the batch).
    /// Does NOT check the CRC.
    ///
    /// The magic byte is checked before the length, as soon as 17 bytes are there,
    /// because a v0/v1 message set has a different (smaller) length floor and "bad magic"
    /// is the more useful answer for it.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < LOG_OVERHEAD {
            return Err(BatchError::Truncated {
                need: BATCH_HEADER_BYTES,
                have: buf.len(),
            });
        }
        let batch_length = be_i32(buf, BATCH_LENGTH_AT);
        if buf.len() > MAGIC_AT {
            let magic = buf[MAGIC_AT] as i8;
            if magic != MAGIC_V2 {
                return Err(BatchError::BadMagic(magic));
            }
        }
        if batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::BadLength(batch_length));
        }
        // batch_length is a positive i32, so this cannot overflow even on 32-bit targets.
        let total = LOG_OVERHEAD + batch_length as usize;
        if buf.len() < total {
            return Err(BatchError::Truncated {
                need: total,
                have: buf.len(),
            });
        }
        let attributes = be_i16(buf, ATTRIBUTES_AT);
        let codec = (attributes & COMPRESSION_MASK) as u8;
        if Compression::from_id(codec).is_none() {
            return Err(BatchError::UnknownCompression(codec));
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, BASE_OFFSET_AT),
            batch_length,
            partition_leader_epoch: be_i32(buf, LEADER_EPOCH_AT),
            magic: buf[MAGIC_AT] as i8,
            crc: be_i32(buf, CRC_AT) as u32,
            attributes,
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_AT),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_AT),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_AT),
            producer_id: be_i64(buf, PRODUCER_ID_AT),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_AT),
            base_sequence: be_i32(buf, BASE_SEQUENCE_AT),
            records_count: be_i32(buf, RECORDS_COUNT_AT),
        })
    }

    /// The whole batch's size on the wire and in the log: `LOG_OVERHEAD + batch_length`.
    pub fn total_bytes(&self) -> usize {
        // A header that did not come from `parse` may carry a negative length; treat it
        // as empty rather than wrapping around.
        LOG_OVERHEAD + usize::try_from(self.batch_length).unwrap_or(0)
    }

    /// The offset of the batch's last record: `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }

    /// The offset after the batch: the log end offset once it is appended.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// The compression codec (attribute bits 0-2). `parse` refuses the unassigned ids
    /// 5-7; a header built by hand with one of them reads as `None`.
    pub fn compression(&self) -> Compression {
        Compression::from_id((self.attributes & COMPRESSION_MASK) as u8)
            .unwrap_or(Compression::None)
    }

    /// CreateTime or LogAppendTime (attribute bit 3).
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch belongs to a transaction (attribute bit 4).
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Whether the batch holds control records (commit/abort markers; attribute bit 5).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Whether the producer is idempotent or transactional (producer id >= 0).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// The delete horizon the log cleaner recorded (KIP-534: attribute bit 6, the value in
    /// `base_timestamp`), if any.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }
}

/// Full check of one batch at the start of `buf`: the header as [`BatchHeader::parse`],
/// the CRC-32C over bytes `21..total` against the stored CRC, and the record count.
///
/// The count check follows Kafka's `LogValidator` for client batches: `records_count`
/// must be positive and equal `last_offset_delta + 1`. An empty batch is refused because
/// its offset range would be empty (Kafka answers "Invalid reported count for record
/// batch"). Records inside are not decoded here: [`validate_records`] walks them (produce
/// does), and [`records`] checks each one when iterating.
pub fn validate_batch(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let computed = crc32c::crc32c(&buf[CRC_START..header.total_bytes()]);
    if computed != header.crc {
        return Err(BatchError::BadCrc {
            stored: header.crc,
            computed,
        });
    }
    let count = header.records_count;
    if count <= 0 || i64::from(header.last_offset_delta) + 1 != i64::from(count) {
        return Err(BatchError::BadRecordCount {
            count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    // Each record takes at least 7 bytes (length, attributes, timestamp delta, offset
    // delta, key length, value length, header count), so for uncompressed batches a count
    // larger than the bytes allow is certainly corrupt; checking it here keeps a consumer
    // from sizing anything by a lying count.
    if header.compression() == Compression::None {
        let room = header.total_bytes() - BATCH_HEADER_BYTES;
        if count as usize > room / MIN_RECORD_BYTES {
            return Err(BatchError::BadRecordCount {
                count,
                last_offset_delta: header.last_offset_delta,
            });
        }
    }
    Ok(header)
}

/// [`validate_batch`] for a batch already in a compacted log: the log cleaner keeps a batch's
/// base offset and last offset delta while removing records (so offsets are never reused),
/// so `records_count` may be anything from 0 (an emptied batch kept for its producer's
/// state) to `last_offset_delta + 1`. CRC and framing are checked as for a client batch.
pub fn validate_stored_batch(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let computed = crc32c::crc32c(&buf[CRC_START..header.total_bytes()]);
    if computed != header.crc {
        return Err(BatchError::BadCrc {
            stored: header.crc,
            computed,
        });
    }
    let count = header.records_count;
    let bad = || BatchError::BadRecordCount {
        count,
        last_offset_delta: header.last_offset_delta,
    };
    if count < 0
        || header.last_offset_delta < 0
        || i64::from(count) > i64::from(header.last_offset_delta) + 1
    {
        return Err(bad());
    }
    if header.compression() == Compression::None {
        let room = header.total_bytes() - BATCH_HEADER_BYTES;
        if count as usize > room / MIN_RECORD_BYTES {
            return Err(bad());
        }
    }
    Ok(header)
}

/// Re-encodes the batch `original` keeping only `kept` (records read from it, in order), as
/// Kafka's log cleaner does (`MemoryRecords.filterTo`): base offset, last offset delta,
/// producer id / epoch / base sequence, leader epoch, flags and codec are kept, so offsets
/// and sequence ranges never move; each kept record keeps its offset delta. With
/// `delete_horizon_ms` the KIP-534 flag is set and the horizon becomes the base timestamp
/// (record timestamp deltas are rebased on it); otherwise the original base timestamp stays.
/// `max_timestamp` is kept (Kafka recomputes it only for legacy formats). `kept` may be
/// empty: a header-only batch that keeps a producer's last sequence in the log.
pub fn encode_retained(
    original: &BatchHeader,
    kept: &[Record<'_>],
    delete_horizon_ms: Option<i64>,
) -> Result<Vec<u8>, BatchError> {
    let base_timestamp = delete_horizon_ms.unwrap_or(original.base_timestamp);
    let mut body = Vec::new();
    let mut scratch = Vec::new();
    for record in kept {
        // The stored stamp (base + delta), not `record.timestamp`, which LogAppendTime
        // batches replace with the max timestamp.
        let stored = original.base_timestamp.wrapping_add(record.timestamp_delta);
        encode_record_raw(
            &mut body,
            &mut scratch,
            record,
            stored.wrapping_sub(base_timestamp),
        );
    }
    let body = match original.compression() {
        Compression::None => body,
        codec => compression::compress(codec, &body)?,
    };
    let mut attributes = original.attributes;
    if delete_horizon_ms.is_some() {
        attributes |= DELETE_HORIZON_BIT;
    }
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + body.len());
    out.put_i64(original.base_offset);
    out.put_i32((BATCH_HEADER_BYTES - LOG_OVERHEAD + body.len()) as i32);
    out.put_i32(original.partition_leader_epoch);
    out.put_i8(MAGIC_V2);
    out.put_u32(0); // CRC, filled in below.
    out.put_i16(attributes);
    out.put_i32(original.last_offset_delta);
    out.put_i64(base_timestamp);
    out.put_i64(original.max_timestamp);
    out.put_i64(original.producer_id);
    out.put_i16(original.producer_epoch);
    out.put_i32(original.base_sequence);
    out.put_i32(kept.len() as i32);
    out.put_slice(&body);
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// One record in the v2 format with its own attributes byte and its headers as read;
/// `scratch` is reused for the body so the length prefix can be written first.
fn encode_record_raw(
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    record: &Record<'_>,
    timestamp_delta: i64,
) {
    fn nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
        write_varint(out, bytes.map_or(-1, |b| b.len() as i32));
        out.put_slice(bytes.unwrap_or_default());
    }
    scratch.clear();
    scratch.put_i8(record.attributes);
    write_varlong(scratch, timestamp_delta);
    write_varint(scratch, record.offset_delta);
    nullable(scratch, record.key);
    nullable(scratch, record.value);
    write_varint(scratch, record.headers.len() as i32);
    for h in record.headers.iter() {
        write_varint(scratch, h.key.len() as i32);
        scratch.put_slice(h.key);
        nullable(scratch, h.value);
    }
    write_varint(out, scratch.len() as i32);
    out.put_slice(scratch);
}

/// Recomputes the CRC-32C of a whole batch (bytes 21..end) as it should be stored.
/// Returns `None` if the slice is too short to hold a header.
pub fn compute_crc(batch: &[u8]) -> Option<u32> {
    batch
        .get(CRC_START..)
        .filter(|_| batch.len() >= BATCH_HEADER_BYTES)
        .map(crc32c::crc32c)
}

/// Splits a buffer of zero or more whole batches, validating each with
/// [`validate_batch`]. It stops at the first bad batch with that error;
/// [`BatchIter::valid_bytes`] then tells how many leading bytes were good, which is where
/// log recovery truncates.
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
    /// Batches read back from a log: checked with [`validate_stored_batch`].
    stored: bool,
}

/// Iterates the batches in `buf` (see [`BatchIter`]).
pub fn batches(buf: &[u8]) -> BatchIter<'_> {
    BatchIter {
        buf,
        pos: 0,
        failed: false,
        stored: false,
    }
}

/// Iterates batches read back from a log, which compaction may have thinned (see
/// [`validate_stored_batch`]); otherwise as [`batches`].
pub fn stored_batches(buf: &[u8]) -> BatchIter<'_> {
    BatchIter {
        buf,
        pos: 0,
        failed: false,
        stored: true,
    }
}

impl<'a> BatchIter<'a> {
    /// Bytes of whole, valid batches yielded so far (the offset of the next batch, or of
    /// the bad one after an error).
    pub fn valid_bytes(&self) -> usize {
        self.pos
    }

    /// The bytes not yet consumed (after an error: starting at the bad batch).
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let validated = if self.stored {
            validate_stored_batch(rest)
        } else {
            validate_batch(rest)
        };
        match validated {
            Ok(header) => {
                let batch = &rest[..header.total_bytes()];
                self.pos += batch.len();
                Some(Ok((header, batch)))
            }
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }
}

impl std::iter::FusedIterator for BatchIter<'_> {}

/// Writes `base_offset` into bytes 0..8, which the CRC does not cover. Slices shorter
/// than 8 bytes are left untouched (callers pass validated batches).
pub fn patch_base_offset(batch: &mut [u8], base_offset: i64) {
    debug_assert!(
        batch.len() >= BATCH_HEADER_BYTES,
        "patching a slice that is not a batch"
    );
    if let Some(field) = batch.get_mut(BASE_OFFSET_AT..BASE_OFFSET_AT + 8) {
        field.copy_from_slice(&base_offset.to_be_bytes());
    }
}

/// Writes the partition leader epoch into bytes 12..16, which the CRC does not cover.
/// Slices shorter than 16 bytes are left untouched.
pub fn patch_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    debug_assert!(
        batch.len() >= BATCH_HEADER_BYTES,
        "patching a slice that is not a batch"
    );
    if let Some(field) = batch.get_mut(LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4) {
        field.copy_from_slice(&epoch.to_be_bytes());
    }
}

/// Bytes 0..16 of `batch` with the base offset and leader epoch replaced, so a writer
/// can send `[prefix, &batch[16..]]` as a vectored write without mutating (or copying) a
/// shared buffer. Missing bytes of a too-short slice read as zero.
pub fn patched_prefix(batch: &[u8], base_offset: i64, leader_epoch: i32) -> [u8; 16] {
    let mut prefix = [0u8; 16];
    let have = batch.len().min(16);
    prefix[..have].copy_from_slice(&batch[..have]);
    prefix[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
    prefix[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&leader_epoch.to_be_bytes());
    prefix
}

/// The 61-byte header of `batch` as a broker stores it after Kafka's
/// `DefaultRecordBatch.setMaxTimestamp(timestamp_type, max_timestamp)`: base offset and
/// leader epoch patched as [`patched_prefix`], the timestamp-type attribute bit and
/// `maxTimestamp` set, and the CRC recomputed over the patched header tail followed by
/// `batch[61..]` in place (no copy of the records). `baseTimestamp` and every other field
/// stay as sent, as in Kafka. A writer sends `[header, &batch[61..]]` as one vectored
/// write. `batch` must be a whole batch (at least [`BATCH_HEADER_BYTES`]; shorter slices
/// read as zero-padded).
pub fn stamped_header(
    batch: &[u8],
    base_offset: i64,
    leader_epoch: i32,
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> [u8; BATCH_HEADER_BYTES] {
    let mut header = [0u8; BATCH_HEADER_BYTES];
    let have = batch.len().min(BATCH_HEADER_BYTES);
    header[..have].copy_from_slice(&batch[..have]);
    header[..16].copy_from_slice(&patched_prefix(batch, base_offset, leader_epoch));
    let mut attributes = be_i16(&header, ATTRIBUTES_AT);
    match timestamp_type {
        TimestampType::LogAppendTime => attributes |= TIMESTAMP_TYPE_BIT,
        TimestampType::CreateTime => attributes &= !TIMESTAMP_TYPE_BIT,
    }
    header[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    header[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let rest = batch.get(BATCH_HEADER_BYTES..).unwrap_or(&[]);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[CRC_START..]), rest);
    header[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    header
}

// ---------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------

/// The smallest encoded record: one byte each for length, attributes, timestamp delta,
/// offset delta, key length, value length and header count.
const MIN_RECORD_BYTES: usize = 7;

/// One record, borrowed from the batch (or from the batch's decompressed records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's own attributes byte (unused by Kafka today, kept for fidelity).
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// `base_offset + offset_delta`.
    pub offset: i64,
    /// `base_timestamp + timestamp_delta` for CreateTime, the batch's `max_timestamp`
    /// for LogAppendTime (Kafka's rule).
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: RecordHeaders<'a>,
}

impl Record<'_> {
    /// An owned copy, for tests and for code that outlives the batch buffer.
    pub fn to_owned_record(&self) -> OwnedRecord {
        OwnedRecord {
            offset_delta: self.offset_delta,
            timestamp_delta: self.timestamp_delta,
            key: self.key.map(Bytes::copy_from_slice),
            value: self.value.map(Bytes::copy_from_slice),
            headers: self
                .headers
                .iter()
                .map(|h| {
                    (
                        String::from_utf8_lossy(h.key).into_owned(),
                        h.value.map(Bytes::copy_from_slice),
                    )
                })
                .collect(),
        }
    }
}

/// A record's headers, already checked for framing when the record was read, so
/// iterating them cannot fail and allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeaders<'a> {
    raw: &'a [u8],
    count: usize,
}

impl<'a> RecordHeaders<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The headers in order.
    pub fn iter(&self) -> HeaderIter<'a> {
        HeaderIter {
            raw: self.raw,
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for RecordHeaders<'a> {
    type Item = Header<'a>;
    type IntoIter = HeaderIter<'a>;
    fn into_iter(self) -> HeaderIter<'a> {
        self.iter()
    }
}

/// One record header. Kafka requires the key to be UTF-8 (the Java client decodes it
/// lossily); it is kept as bytes here so reading never fails on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    /// The key as a string, if it is valid UTF-8.
    pub fn key_str(&self) -> Result<&'a str, std::str::Utf8Error> {
        std::str::from_utf8(self.key)
    }
}

/// Iterator over pre-validated headers.
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    raw: &'a [u8],
    left: usize,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.left == 0 {
            return None;
        }
        // The bytes were walked by `read_header` when the record was read, so this cannot
        // fail; if it somehow did, ending the iteration is the panic-free answer.
        let mut cursor = Cursor {
            buf: self.raw,
            pos: 0,
        };
        let header = read_header(&mut cursor).ok()?;
        self.raw = &self.raw[cursor.pos..];
        self.left -= 1;
        Some(header)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// An owned record, as produced by [`Record::to_owned_record`] and consumed by
/// [`BatchBuilder::push_record`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnedRecord {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// The records of one batch: borrowed from the batch when it is uncompressed, or the
/// batch's records decompressed once into an owned buffer. Iterate with [`Records::iter`]
/// (or `for record in &records`); each [`Record`] borrows from this value.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    header: BatchHeader,
    data: RecordsData<'a>,
}

#[derive(Debug, Clone)]
enum RecordsData<'a> {
    Borrowed(&'a [u8]),
    Decompressed(Vec<u8>),
}

impl<'a> Records<'a> {
    /// The batch header the records belong to.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The encoded records (decompressed if the batch was compressed).
    pub fn raw(&self) -> &[u8] {
        match &self.data {
            RecordsData::Borrowed(bytes) => bytes,
            RecordsData::Decompressed(bytes) => bytes,
        }
    }

    /// Iterates the records, checking each one's framing; the iterator yields an error and
    /// stops at the first corrupt record, and also errs if the batch holds fewer or more
    /// records than `records_count`.
    pub fn iter(&self) -> RecordIter<'_> {
        record_iter(&self.header, self.raw())
    }
}

/// Iterates the encoded (decompressed) records `raw` of the batch `header` describes.
fn record_iter<'a>(header: &BatchHeader, raw: &'a [u8]) -> RecordIter<'a> {
    RecordIter {
        buf: raw,
        pos: 0,
        left: i64::from(header.records_count.max(0)),
        done: false,
        base_offset: header.base_offset,
        base_timestamp: header.base_timestamp,
        log_append_time: match header.timestamp_type() {
            TimestampType::LogAppendTime => Some(header.max_timestamp),
            TimestampType::CreateTime => None,
        },
    }
}

impl<'r> IntoIterator for &'r Records<'_> {
    type Item = Result<Record<'r>, BatchError>;
    type IntoIter = RecordIter<'r>;
    fn into_iter(self) -> RecordIter<'r> {
        self.iter()
    }
}

/// The records of one batch, decompressing at most
/// [`compression::DEFAULT_MAX_DECOMPRESSED_BYTES`]. The batch is parsed with
/// [`BatchHeader::parse`] only; call [`validate_batch`] first if the CRC matters.
pub fn records(batch: &[u8]) -> Result<Records<'_>, BatchError> {
    records_with_limit(batch, compression::DEFAULT_MAX_DECOMPRESSED_BYTES)
}

/// As [`records`], refusing to decompress more than `max_decompressed` bytes.
pub fn records_with_limit(
    batch: &[u8],
    max_decompressed: usize,
) -> Result<Records<'_>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let body = &batch[BATCH_HEADER_BYTES..header.total_bytes()];
    let data = match header.compression() {
        Compression::None => RecordsData::Borrowed(body),
        codec => RecordsData::Decompressed(compression::decompress(codec, body, max_decompressed)?),
    };
    Ok(Records { header, data })
}

/// What [`validate_records`] enforces beyond the record format itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimits {
    /// Ceiling on a compressed batch's decompressed records. Kafka has none; without one a
    /// 1 MiB batch of zeros would inflate to gigabytes on the broker.
    pub max_decompressed_bytes: usize,
    /// Every record must have a (possibly empty) key: the topic's cleanup.policy contains
    /// `compact`.
    pub require_keys: bool,
    /// The topic's timestamp rules (Kafka's `validateTimestamp`). `None`: no window is
    /// checked and the LogAppendTime attribute is refused on every batch.
    pub timestamps: Option<TimestampRule>,
}

/// What Kafka's `LogValidator.validateTimestamp` needs of the topic and the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampRule {
    /// The topic's `message.timestamp.type`.
    pub topic_type: TimestampType,
    /// The broker's clock (ms since the epoch) for this append.
    pub now: i64,
    /// `message.timestamp.before.max.ms`: how far behind `now` a CreateTime stamp may be.
    pub before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far ahead of `now` a CreateTime stamp may be.
    pub after_max_ms: i64,
}

impl TimestampRule {
    /// Kafka's `recordHasInvalidTimestamp` (wrapping arithmetic as Java's longs).
    fn out_of_range(&self, timestamp: i64) -> bool {
        let diff = self.now.wrapping_sub(timestamp);
        diff > self.before_max_ms || diff.wrapping_neg() > self.after_max_ms
    }
}

/// What [`validate_records`] learned from walking every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordStats {
    /// Records walked; equals the header's `records_count` (and `last_offset_delta + 1`).
    pub records: i32,
    /// The largest record timestamp (Kafka's rule for CreateTime; `-1` if the batch holds
    /// only `-1` timestamps).
    pub max_timestamp: i64,
    /// Bytes of encoded records walked (after decompression).
    pub records_bytes: usize,
}

/// The per-record half of Kafka's `LogValidator` for a batch from a client, run after
/// [`validate_batch`] (which checked the header, CRC and count against the offset range)
/// on the same bytes `batch`.
///
/// Refuses, as Kafka does: control batches and idempotent batches without a sequence
/// ([`BatchError::ControlBatchFromClient`], [`BatchError::BadSequence`]); any record
/// whose framing is wrong (lengths, varints, header counts, bytes left over) or whose
/// count disagrees with `records_count` ([`BatchError::CorruptRecord`]); a keyless record
/// when `limits.require_keys`; and the LogAppendTime attribute, which only a broker may
/// set. Stricter than Kafka, which rewrites a compressed batch whose inner offsets are not
/// `0, 1, 2...`: we store the bytes as they came, so every offset delta must equal its
/// record's index ([`BatchError::BadOffsetDelta`]).
///
/// A compressed batch is decompressed into `scratch` (cleared first, capacity kept), at
/// most `limits.max_decompressed_bytes`; an uncompressed one is walked in place. Nothing
/// is allocated per record.
pub fn validate_records(
    header: &BatchHeader,
    batch: &[u8],
    scratch: &mut Vec<u8>,
    limits: &RecordLimits,
) -> Result<RecordStats, BatchError> {
    if header.is_control() {
        return Err(BatchError::ControlBatchFromClient);
    }
    if header.has_producer_id() && header.base_sequence < 0 {
        return Err(BatchError::BadSequence {
            producer_id: header.producer_id,
            base_sequence: header.base_sequence,
        });
    }
    let body =
        batch
            .get(BATCH_HEADER_BYTES..header.total_bytes())
            .ok_or(BatchError::Truncated {
                need: header.total_bytes(),
                have: batch.len(),
            })?;
    let raw: &[u8] = match header.compression() {
        Compression::None => body,
        codec => {
            compression::decompress_into(codec, body, scratch, limits.max_decompressed_bytes)
                .map_err(|error| match error {
                    compression::CompressionError::TooLarge { max } => {
                        BatchError::DecompressedTooLarge { max }
                    }
                    other => other.into(),
                })?;
            scratch
        }
    };
    let mut index: i32 = 0;
    let mut all_keyless = true;
    let mut max_timestamp = -1i64;
    // Stays empty (no allocation) unless a record is refused.
    let mut refused = RecordErrors {
        named: Vec::new(),
        count: 0,
        any_timestamp: false,
    };
    for record in record_iter(header, raw) {
        let record = record?;
        if record.offset_delta != index {
            return Err(BatchError::BadOffsetDelta {
                index,
                offset_delta: record.offset_delta,
            });
        }
        all_keyless &= record.key.is_none();
        max_timestamp = max_timestamp.max(record.timestamp);
        // Kafka's `validateRecord`: the key first, and the timestamp only when the key
        // passed; every record, not only the first.
        let fault = if limits.require_keys && record.key.is_none() {
            Some(RecordFault::MissingKey)
        } else {
            limits
                .timestamps
                .as_ref()
                .and_then(|rule| timestamp_fault(rule, header, &record))
        };
        if let Some(fault) = fault {
            refused.count += 1;
            refused.any_timestamp |= fault.is_timestamp();
            if refused.named.len() < MAX_NAMED_RECORD_ERRORS {
                refused.named.push(RecordError {
                    batch_index: index,
                    fault,
                });
            }
        }
        // The iterator yields at most `records_count` records, an i32.
        index = index.saturating_add(1);
    }
    // Without a timestamp rule the attribute is refused for the batch (when any record's
    // key passed, as Kafka would have looked at its timestamp).
    let timestamp_checked = !limits.require_keys || !all_keyless;
    if limits.timestamps.is_none()
        && header.timestamp_type() == TimestampType::LogAppendTime
        && timestamp_checked
    {
        return Err(BatchError::LogAppendTimeFromClient);
    }
    if refused.count > 0 {
        return Err(BatchError::Records(refused));
    }
    Ok(RecordStats {
        records: index,
        max_timestamp,
        records_bytes: raw.len(),
    })
}

/// Kafka's `validateTimestamp` for one record whose key passed.
fn timestamp_fault(
    rule: &TimestampRule,
    header: &BatchHeader,
    record: &Record<'_>,
) -> Option<RecordFault> {
    if rule.topic_type == TimestampType::CreateTime && record.timestamp != -1 {
        rule.out_of_range(record.timestamp)
            .then(|| RecordFault::TimestampOutOfRange {
                timestamp: record.timestamp,
                offset: record.offset,
                min: rule.now.wrapping_sub(rule.before_max_ms),
                max: rule.now.wrapping_add(rule.after_max_ms),
            })
    } else if header.timestamp_type() == TimestampType::LogAppendTime {
        Some(RecordFault::LogAppendTime {
            offset: record.offset,
            timestamp: record.timestamp,
            key_bytes: record.key.map_or(0, <[u8]>::len),
            value_bytes: record.value.map_or(0, <[u8]>::len),
        })
    } else {
        None
    }
}

/// Iterator over the records of a [`Records`].
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    left: i64,
    done: bool,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            self.done = true;
            return if self.pos == self.buf.len() {
                None
            } else {
                Some(Err(BatchError::CorruptRecord(
                    "bytes left after the last record",
                )))
            };
        }
        match self.read_record() {
            Ok(record) => {
                self.left -= 1;
                Some(Ok(record))
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            // One extra item may be an error about trailing bytes.
            let left = usize::try_from(self.left).unwrap_or(usize::MAX);
            (0, left.checked_add(1))
        }
    }
}

impl std::iter::FusedIterator for RecordIter<'_> {}

impl<'a> RecordIter<'a> {
    fn read_record(&mut self) -> Result<Record<'a>, BatchError> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return Err(BatchError::CorruptRecord(
                "fewer records than the batch's count",
            ));
        }
        let (length, used) =
            read_varint(rest).map_err(|_| BatchError::CorruptRecord("bad record length"))?;
        let length = usize::try_from(length)
            .map_err(|_| BatchError::CorruptRecord("negative record length"))?;
        let end = used
            .checked_add(length)
            .filter(|&end| end <= rest.len())
            .ok_or(BatchError::CorruptRecord(
                "record length runs past the batch",
            ))?;
        let mut cursor = Cursor {
            buf: &rest[used..end],
            pos: 0,
        };
        let attributes = cursor.u8("record attributes")? as i8;
        let timestamp_delta = cursor.varlong("timestamp delta")?;
        let offset_delta = cursor.varint("offset delta")?;
        let key = cursor.nullable_bytes("record key")?;
        let value = cursor.nullable_bytes("record value")?;
        let header_count = cursor.varint("header count")?;
        let count = usize::try_from(header_count)
            .map_err(|_| BatchError::CorruptRecord("negative header count"))?;
        let headers_start = cursor.pos;
        for _ in 0..count {
            // A lying count cannot spin long: every header consumes at least 2 bytes or
            // fails on the end of the record.
            read_header(&mut cursor)?;
        }
        if cursor.pos != cursor.buf.len() {
            return Err(BatchError::CorruptRecord(
                "record has bytes after its headers",
            ));
        }
        let headers = RecordHeaders {
            raw: &cursor.buf[headers_start..],
            count,
        };
        self.pos += end;
        Ok(Record {
            attributes,
            timestamp_delta,
            offset_delta,
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp: self
                .log_append_time
                .unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta)),
            key,
            value,
            headers,
        })
    }
}

/// A bounds-checked reader over one record's bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn u8(&mut self, what: &'static str) -> Result<u8, BatchError> {
        let byte = *self
            .buf
            .get(self.pos)
            .ok_or(BatchError::CorruptRecord(what))?;
        self.pos += 1;
        Ok(byte)
    }

    #[inline]
    fn varint(&mut self, what: &'static str) -> Result<i32, BatchError> {
        let (value, used) =
            read_varint(&self.buf[self.pos..]).map_err(|_| BatchError::CorruptRecord(what))?;
        self.pos += used;
        Ok(value)
    }

    #[inline]
    fn varlong(&mut self, what: &'static str) -> Result<i64, BatchError> {
        let (value, used) =
            read_varlong(&self.buf[self.pos..]).map_err(|_| BatchError::CorruptRecord(what))?;
        self.pos += used;
        Ok(value)
    }

    /// A varint length then that many bytes; -1 means null, other negatives are corrupt.
    #[inline]
    fn nullable_bytes(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, BatchError> {
        let length = self.varint(what)?;
        if length == -1 {
            return Ok(None);
        }
        self.bytes(length, what).map(Some)
    }

    #[inline]
    fn bytes(&mut self, length: i32, what: &'static str) -> Result<&'a [u8], BatchError> {
        let length = usize::try_from(length).map_err(|_| BatchError::CorruptRecord(what))?;
        let end = self
            .pos
            .checked_add(length)
            .filter(|&end| end <= self.buf.len())
            .ok_or(BatchError::CorruptRecord(what))?;
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }
}

fn read_header<'a>(cursor: &mut Cursor<'a>) -> Result<Header<'a>, BatchError> {
    let key_length = cursor.varint("header key length")?;
    if key_length < 0 {
        return Err(BatchError::CorruptRecord("negative header key length"));
    }
    let key = cursor.bytes(key_length, "header key")?;
    let value = cursor.nullable_bytes("header value")?;
    Ok(Header { key, value })
}

// ---------------------------------------------------------------------------------------
// Builder
// ---------------------------------------------------------------------------------------

/// Builds a valid v2 batch (any compression, correct CRC) from records, for tests and
/// tools. Offset deltas are assigned 0, 1, 2... in push order; timestamps are absolute
/// and stored as deltas from `base_timestamp` (by default the first record's timestamp).
///
/// ```
/// use wire::record_batch::{BatchBuilder, Compression, validate_batch};
/// let batch = BatchBuilder::new(Compression::None)
///     .push(Some(b"k"), Some(b"v"), &[("h", Some(b"x"))], 1_000)
///     .build();
/// assert!(validate_batch(&batch).is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    compression: Compression,
    base_offset: i64,
    partition_leader_epoch: i32,
    base_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
    timestamp_type: TimestampType,
    transactional: bool,
    control: bool,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records: Vec<(i64, OwnedRecord)>,
}

impl BatchBuilder {
    /// A builder for a non-idempotent (producer id -1) CreateTime batch at offset 0.
    pub fn new(compression: Compression) -> Self {
        BatchBuilder {
            compression,
            base_offset: 0,
            partition_leader_epoch: -1,
            base_timestamp: None,
            max_timestamp: None,
            timestamp_type: TimestampType::CreateTime,
            transactional: false,
            control: false,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records: Vec::new(),
        }
    }

    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// The timestamp deltas are relative to this (default: the first record's timestamp).
    pub fn base_timestamp(mut self, timestamp: i64) -> Self {
        self.base_timestamp = Some(timestamp);
        self
    }

    /// Overrides the computed max timestamp (e.g. the append time for LogAppendTime).
    pub fn max_timestamp(mut self, timestamp: i64) -> Self {
        self.max_timestamp = Some(timestamp);
        self
    }

    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = timestamp_type;
        self
    }

    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Producer id, epoch and first sequence of an idempotent producer.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Appends a record with an absolute timestamp.
    pub fn push(
        mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
        timestamp: i64,
    ) -> Self {
        let record = OwnedRecord {
            offset_delta: 0,
            timestamp_delta: 0,
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(Bytes::copy_from_slice)))
                .collect(),
        };
        self.records.push((timestamp, record));
        self
    }

    /// Appends an owned record; its deltas are ignored and reassigned like `push`'s,
    /// with `timestamp` absolute.
    pub fn push_record(mut self, record: OwnedRecord, timestamp: i64) -> Self {
        self.records.push((timestamp, record));
        self
    }

    /// The encoded batch. Building cannot fail for the codecs this crate knows; an empty
    /// builder yields a header-only batch with count 0 (which `validate_batch` refuses,
    /// as Kafka would).
    pub fn build(&self) -> Bytes {
        let base_timestamp = self
            .base_timestamp
            .or(self.records.first().map(|(ts, _)| *ts))
            .unwrap_or(-1);
        let max_timestamp = self
            .max_timestamp
            .or(self.records.iter().map(|(ts, _)| *ts).max())
            .unwrap_or(-1);

        let mut body = Vec::new();
        for (index, (timestamp, record)) in self.records.iter().enumerate() {
            encode_record(
                &mut body,
                index as i32,
                timestamp.wrapping_sub(base_timestamp),
                record,
            );
        }
        let body = match self.compression {
            Compression::None => body,
            // Compressing into a Vec only fails on I/O errors, which a Vec does not have.
            codec => compression::compress(codec, &body).unwrap_or_default(),
        };

        let mut attributes = self.compression.id() as i16;
        if self.timestamp_type == TimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_BIT;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if self.control {
            attributes |= CONTROL_BIT;
        }
        let count = self.records.len() as i32;

        let mut out = BytesMut::with_capacity(BATCH_HEADER_BYTES + body.len());
        out.put_i64(self.base_offset);
        out.put_i32((BATCH_HEADER_BYTES - LOG_OVERHEAD + body.len()) as i32);
        out.put_i32(self.partition_leader_epoch);
        out.put_i8(MAGIC_V2);
        out.put_u32(0); // CRC, filled in below.
        out.put_i16(attributes);
        out.put_i32(count - 1);
        out.put_i64(base_timestamp);
        out.put_i64(max_timestamp);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_i32(self.base_sequence);
        out.put_i32(count);
        out.put_slice(&body);
        let crc = crc32c::crc32c(&out[CRC_START..]);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        out.freeze()
    }
}

/// Appends one record in the v2 record format.
fn encode_record(out: &mut Vec<u8>, offset_delta: i32, timestamp_delta: i64, record: &OwnedRecord) {
    fn nullable_len(bytes: Option<&[u8]>) -> i32 {
        bytes.map_or(-1, |b| b.len() as i32)
    }
    fn nullable_size(bytes: Option<&[u8]>) -> usize {
        let len = nullable_len(bytes);
        varint_len(len) + bytes.map_or(0, <[u8]>::len)
    }
    let key = record.key.as_deref();
    let value = record.value.as_deref();
    let mut size = 1
        + varlong_len(timestamp_delta)
        + varint_len(offset_delta)
        + nullable_size(key)
        + nullable_size(value);
    size += varint_len(record.headers.len() as i32);
    for (hk, hv) in &record.headers {
        size += varint_len(hk.len() as i32) + hk.len() + nullable_size(hv.as_deref());
    }
    write_varint(out, size as i32);
    out.put_i8(0);
    write_varlong(out, timestamp_delta);
    write_varint(out, offset_delta);
    write_varint(out, nullable_len(key));
    out.put_slice(key.unwrap_or_default());
    write_varint(out, nullable_len(value));
    out.put_slice(value.unwrap_or_default());
    write_varint(out, record.headers.len() as i32);
    for (hk, hv) in &record.headers {
        write_varint(out, hk.len() as i32);
        out.put_slice(hk.as_bytes());
        write_varint(out, nullable_len(hv.as_deref()));
        out.put_slice(hv.as_deref().unwrap_or_default());
    }
}

fn be_i16(buf: &[u8], at: usize) -> i16 {
    let mut bytes = [0u8; 2];
    bytes.copy_from_slice(&buf[at..at + 2]);
    i16::from_be_bytes(bytes)
}

fn be_i32(buf: &[u8], at: usize) -> i32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&buf[at..at + 4]);
    i32::from_be_bytes(bytes)
}

fn be_i64(buf: &[u8], at: usize) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn sample(codec: Compression) -> Bytes {
        BatchBuilder::new(codec)
            .base_offset(42)
            .partition_leader_epoch(3)
            .push(
                Some(b"k0"),
                Some(b"v0"),
                &[("h", Some(b"x")), ("n", None)],
                1_000,
            )
            .push(None, Some(b"v1"), &[], 999)
            .push(Some(b""), None, &[], 1_010)
            .build()
    }

    #[test]
    fn crc32c_test_vectors() {
        // The standard check value of CRC-32C (Castagnoli), and RFC 3720's vectors.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c::crc32c(&[0xffu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c::crc32c(&ascending), 0x46DD_794E);
    }

    #[test]
    fn builder_round_trips_every_codec() {
        for codec in CODECS {
            let batch = sample(codec);
            let header = validate_batch(&batch).unwrap();
            assert_eq!(header.compression(), codec);
            assert_eq!(header.total_bytes(), batch.len());
            assert_eq!(
                (
                    header.base_offset,
                    header.last_offset(),
                    header.records_count
                ),
                (42, 44, 3)
            );
            assert_eq!(
                (header.base_timestamp, header.max_timestamp),
                (1_000, 1_010)
            );
            assert_eq!(header.partition_leader_epoch, 3);
            assert_eq!(compute_crc(&batch), Some(header.crc));

            let records = records(&batch).unwrap();
            let got: Vec<Record<'_>> = records.iter().collect::<Result<_, _>>().unwrap();
            assert_eq!(got.len(), 3);
            assert_eq!(
                (got[0].key, got[0].value, got[0].offset, got[0].timestamp),
                (Some(&b"k0"[..]), Some(&b"v0"[..]), 42, 1_000)
            );
            let headers: Vec<_> = got[0].headers.iter().collect();
            assert_eq!(
                headers,
                vec![
                    Header {
                        key: b"h",
                        value: Some(b"x")
                    },
                    Header {
                        key: b"n",
                        value: None
                    }
                ]
            );
            assert_eq!(
                (got[1].key, got[1].timestamp_delta, got[1].offset_delta),
                (None, -1, 1)
            );
            assert_eq!(
                (got[2].key, got[2].value, got[2].offset),
                (Some(&b""[..]), None, 44)
            );
            assert!(got[2].headers.is_empty());
            let owned = got[0].to_owned_record();
            assert_eq!(
                owned.headers,
                vec![
                    ("h".to_owned(), Some(Bytes::from_static(b"x"))),
                    ("n".to_owned(), None)
                ]
            );
        }
    }

    #[test]
    fn uncompressed_records_borrow_from_the_batch() {
        let batch = sample(Compression::None);
        let records = records(&batch).unwrap();
        let key = records.iter().next().unwrap().unwrap().key.unwrap();
        let range = batch.as_ptr_range();
        assert!(
            range.contains(&key.as_ptr()),
            "key was copied instead of borrowed"
        );
    }

    #[test]
    fn attributes_and_flags() {
        let batch = BatchBuilder::new(Compression::Lz4)
            .timestamp_type(TimestampType::LogAppendTime)
            .max_timestamp(5_000)
            .transactional(true)
            .control(true)
            .producer(7, 1, 100)
            .push(None, Some(b"x"), &[], 1)
            .build();
        let header = validate_batch(&batch).unwrap();
        assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
        assert!(header.is_transactional() && header.is_control() && header.has_producer_id());
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (7, 1, 100)
        );
        // With LogAppendTime every record carries the batch's max timestamp.
        assert_eq!(
            records(&batch)
                .unwrap()
                .iter()
                .next()
                .unwrap()
                .unwrap()
                .timestamp,
            5_000
        );
    }

    #[test]
    fn parse_errors() {
        let batch = sample(Compression::None).to_vec();
        assert_eq!(
            BatchHeader::parse(&batch[..11]),
            Err(BatchError::Truncated { need: 61, have: 11 })
        );
        assert_eq!(
            BatchHeader::parse(&batch[..batch.len() - 1]),
            Err(BatchError::Truncated {
                need: batch.len(),
                have: batch.len() - 1
            })
        );
        // The length alone (12..17 bytes) is checked before the magic is there.
        let mut short = batch.clone();
        short[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(
            BatchHeader::parse(&short[..14]),
            Err(BatchError::BadLength(10))
        );
        assert_eq!(BatchHeader::parse(&short), Err(BatchError::BadLength(10)));
        let mut negative = batch.clone();
        negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(
            BatchHeader::parse(&negative),
            Err(BatchError::BadLength(-5))
        );
        let mut v1 = batch.clone();
        v1[16] = 1;
        assert_eq!(BatchHeader::parse(&v1[..17]), Err(BatchError::BadMagic(1)));
        let mut codec = batch.clone();
        codec[22] |= 7;
        assert_eq!(
            BatchHeader::parse(&codec),
            Err(BatchError::UnknownCompression(7))
        );
        // Extra bytes after the batch are allowed.
        let mut longer = batch.clone();
        longer.extend_from_slice(&[1, 2, 3]);
        assert_eq!(validate_batch(&longer).unwrap().total_bytes(), batch.len());
    }

    #[test]
    fn every_flipped_byte_after_the_prefix_fails_validation() {
        for codec in CODECS {
            let batch = sample(codec).to_vec();
            for at in CRC_AT..batch.len() {
                let mut corrupt = batch.clone();
                corrupt[at] ^= 0x40;
                let result = validate_batch(&corrupt);
                assert!(result.is_err(), "{codec:?}: flip at {at} accepted");
                if at >= CRC_START {
                    assert!(
                        matches!(
                            result,
                            Err(BatchError::BadCrc { .. }) | Err(BatchError::UnknownCompression(_))
                        ),
                        "{result:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn record_count_must_match_the_offset_range() {
        let fix_crc = |b: &mut Vec<u8>| {
            let crc = crc32c::crc32c(&b[CRC_START..]);
            b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        };
        let batch = sample(Compression::None).to_vec();
        let mut wrong = batch.clone();
        wrong[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&2i32.to_be_bytes());
        fix_crc(&mut wrong);
        assert_eq!(
            validate_batch(&wrong),
            Err(BatchError::BadRecordCount {
                count: 2,
                last_offset_delta: 2
            })
        );
        // Consistent but empty: refused, as Kafka's LogValidator does.
        let empty = BatchBuilder::new(Compression::None).build();
        assert_eq!(
            validate_batch(&empty),
            Err(BatchError::BadRecordCount {
                count: 0,
                last_offset_delta: -1
            })
        );
        // Consistent but more records than the bytes could hold.
        let mut lying = batch.clone();
        lying[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
            .copy_from_slice(&999i32.to_be_bytes());
        lying[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&1000i32.to_be_bytes());
        fix_crc(&mut lying);
        assert!(matches!(
            validate_batch(&lying),
            Err(BatchError::BadRecordCount { .. })
        ));
        // The record iterator catches a count that disagrees with the records.
        assert_eq!(
            records(&wrong).unwrap().iter().last(),
            Some(Err(BatchError::CorruptRecord(
                "bytes left after the last record"
            )))
        );
    }

    #[test]
    fn batch_iter_reports_valid_prefix() {
        let a = sample(Compression::None);
        let b = sample(Compression::Zstd);
        let mut buf = a.to_vec();
        buf.extend_from_slice(&b);
        let whole = buf.len();
        // A torn write: half of a third batch.
        buf.extend_from_slice(&a[..30]);
        let mut iter = batches(&buf);
        assert_eq!(iter.next().unwrap().unwrap().1, &a[..]);
        assert_eq!(iter.next().unwrap().unwrap().1, &b[..]);
        assert_eq!(iter.valid_bytes(), whole);
        assert_eq!(
            iter.next(),
            Some(Err(BatchError::Truncated {
                need: a.len(),
                have: 30
            }))
        );
        assert_eq!(iter.next(), None);
        assert_eq!(iter.valid_bytes(), whole);
        assert_eq!(iter.remaining().len(), 30);

        let mut empty = batches(&[]);
        assert_eq!(empty.next(), None);
        assert_eq!(empty.valid_bytes(), 0);
    }

    #[test]
    fn patching_keeps_the_crc_valid() {
        for codec in CODECS {
            let batch = sample(codec);
            let mut patched = batch.to_vec();
            patch_base_offset(&mut patched, 1 << 40);
            patch_partition_leader_epoch(&mut patched, 9);
            let header = validate_batch(&patched).unwrap();
            assert_eq!(
                (header.base_offset, header.partition_leader_epoch),
                (1 << 40, 9)
            );
            assert_eq!(
                records(&patched)
                    .unwrap()
                    .iter()
                    .next()
                    .unwrap()
                    .unwrap()
                    .offset,
                1 << 40
            );

            let prefix = patched_prefix(&batch, 1 << 40, 9);
            assert_eq!(&prefix[..], &patched[..16]);
            let mut joined = prefix.to_vec();
            joined.extend_from_slice(&batch[16..]);
            assert_eq!(joined, patched);
        }
        // Short slices are left alone rather than panicking (release builds only; the
        // debug assertion flags the caller bug).
        assert_eq!(patched_prefix(&[1, 2], 0, 0)[..2], [0, 0]);
    }

    #[test]
    fn decompression_is_bounded() {
        let big = vec![b'a'; 1 << 20];
        let batch = BatchBuilder::new(Compression::Zstd)
            .push(None, Some(&big), &[], 0)
            .build();
        assert!(batch.len() < 1 << 12);
        assert!(matches!(
            records_with_limit(&batch, 1 << 16),
            Err(BatchError::Compression(_))
        ));
        assert!(records_with_limit(&batch, 2 << 20).is_ok());
    }

    #[test]
    fn corrupt_records_are_errors() {
        // Hand-made record bodies inside an otherwise valid batch; each must yield an
        // error, not a panic or a bogus record.
        let bodies: [&[u8]; 7] = [
            // No record at all, for a count of 1.
            &[],
            // A negative record length.
            &[0x01],
            // A record length past the end of the batch.
            &[0x7f],
            // A record that ends before its header count.
            &[0x0a, 0, 0, 0, 0x01, 0x01],
            // A key length of -2.
            &[0x0c, 0, 0, 0, 0x03, 0x01, 0x00],
            // A header count of -2.
            &[0x0c, 0, 0, 0, 0x01, 0x01, 0x03],
            // A header whose key length is -1.
            &[0x14, 0, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x00, 0x99, 0x99],
        ];
        for body in bodies {
            let mut batch = BatchBuilder::new(Compression::None)
                .push(None, None, &[], 0)
                .build()
                .to_vec();
            batch.truncate(BATCH_HEADER_BYTES);
            batch.extend_from_slice(body);
            let length = (batch.len() - LOG_OVERHEAD) as i32;
            batch[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
            let records = records(&batch).unwrap();
            let mut iter = records.iter();
            assert!(
                matches!(iter.next(), Some(Err(BatchError::CorruptRecord(_)))),
                "{body:?}"
            );
            assert_eq!(iter.next(), None);
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = BatchHeader::parse(&buf);
            let _ = validate_batch(&buf);
            let mut iter = batches(&buf);
            for _ in iter.by_ref() {}
            prop_assert!(iter.valid_bytes() <= buf.len());
            if let Ok(records) = records_with_limit(&buf, 1 << 16) {
                for record in records.iter().flatten() {
                    for _ in record.headers.iter() {}
                }
            }
        }

        #[test]
        fn random_record_bodies_never_panic(
            codec in 0u8..5,
            body in proptest::collection::vec(any::<u8>(), 0..300),
            count in -2i32..20,
        ) {
            // Random bytes behind a valid header reach the record decoder (and, for the
            // compressed codecs, the decompressors) instead of failing the header check.
            let codec = Compression::from_id(codec).unwrap();
            let mut batch = BatchBuilder::new(codec).push(None, None, &[], 0).build().to_vec();
            batch.truncate(BATCH_HEADER_BYTES);
            batch.extend_from_slice(&body);
            let length = (batch.len() - LOG_OVERHEAD) as i32;
            batch[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
            batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
            if let Ok(records) = records_with_limit(&batch, 1 << 16) {
                let mut yielded = 0;
                for record in records.iter() {
                    yielded += 1;
                    if let Ok(record) = record {
                        prop_assert!(record.headers.iter().count() == record.headers.len());
                    }
                }
                prop_assert!(yielded <= count.max(0) as usize + 1);
            }
        }

        #[test]
        fn built_batches_round_trip(
            codec in 0u8..5,
            records_in in proptest::collection::vec(
                (
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)),
                    proptest::collection::vec(("[a-z]{0,5}", proptest::option::of(proptest::collection::vec(any::<u8>(), 0..5))), 0..3),
                    any::<i64>(),
                ),
                1..8,
            ),
        ) {
            let codec = Compression::from_id(codec).unwrap();
            let mut builder = BatchBuilder::new(codec);
            for (key, value, headers, ts) in &records_in {
                let headers: Vec<(&str, Option<&[u8]>)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
                builder = builder.push(key.as_deref(), value.as_deref(), &headers, *ts);
            }
            let batch = builder.build();
            let header = validate_batch(&batch).unwrap();
            prop_assert_eq!(header.records_count as usize, records_in.len());
            let records = records(&batch).unwrap();
            let got: Vec<_> = records.iter().collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(got.len(), records_in.len());
            for (record, (key, value, headers, ts)) in got.iter().zip(&records_in) {
                prop_assert_eq!(record.key, key.as_deref());
                prop_assert_eq!(record.value, value.as_deref());
                prop_assert_eq!(record.timestamp, *ts);
                let got_headers: Vec<_> = record.headers.iter().map(|h| (h.key_str().unwrap().to_owned(), h.value.map(<[u8]>::to_vec))).collect();
                prop_assert_eq!(&got_headers, headers);
            }
        }
    }

    #[test]
    fn retained_records_keep_offsets_stamps_and_codec() {
        for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let original = BatchBuilder::new(codec)
                .base_offset(100)
                .producer(9, 1, 40)
                .push(Some(b"a"), Some(b"1"), &[("h", Some(b"x"))], 1_000)
                .push(Some(b"b"), None, &[], 1_005)
                .push(Some(b"a"), Some(b"2"), &[], 1_009)
                .build();
            let h = validate_batch(&original).unwrap();
            let recs = records(&original).unwrap();
            let all: Vec<Record<'_>> = recs.iter().map(Result::unwrap).collect();
            let kept = [all[0], all[1]];
            let out = encode_retained(&h, &kept, Some(50_000)).unwrap();
            assert!(validate_batch(&out).is_err(), "2 records for 3 offsets");
            let oh = validate_stored_batch(&out).unwrap();
            assert_eq!(
                (
                    oh.base_offset,
                    oh.last_offset(),
                    oh.records_count,
                    oh.compression()
                ),
                (100, 102, 2, codec)
            );
            assert_eq!((oh.producer_id, oh.base_sequence), (9, 40));
            assert_eq!(
                (oh.delete_horizon_ms(), oh.max_timestamp),
                (Some(50_000), 1_009)
            );
            let back = records(&out).unwrap();
            let got: Vec<Record<'_>> = back.iter().map(Result::unwrap).collect();
            assert_eq!(got.len(), 2);
            for (g, w) in got.iter().zip(&kept) {
                assert_eq!(
                    (g.offset, g.timestamp, g.key, g.value),
                    (w.offset, w.timestamp, w.key, w.value)
                );
                assert_eq!(
                    g.headers.iter().collect::<Vec<_>>(),
                    w.headers.iter().collect::<Vec<_>>()
                );
            }
            let empty = encode_retained(&h, &[], None).unwrap();
            let eh = validate_stored_batch(&empty).unwrap();
            assert_eq!(
                (eh.records_count, eh.last_offset(), eh.delete_horizon_ms()),
                (0, 102, None)
            );
        }
    }
}
