//! Writing batches: [`BatchBuilder`] for tests and tools, and [`encode_retained`], the
//! log cleaner's re-encoding of a batch with some of its records kept.

use bytes::{BufMut, Bytes, BytesMut};

use crate::compression;
use crate::varint::{varint_len, varlong_len, write_varint, write_varlong};

use super::{
    BatchError, BatchHeader, Compression, OwnedRecord, Record, TimestampType, BATCH_HEADER_BYTES,
    CONTROL_BIT, CRC_AT, CRC_START, DELETE_HORIZON_BIT, LOG_OVERHEAD, MAGIC_V2, TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
};

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
