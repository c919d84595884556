//! The fixed 61-byte batch header: parsing, validating a whole batch (CRC-32C and record
//! count), splitting a buffer into batches, and patching the fields outside the CRC. Runs
//! on the shard's produce and recovery paths; every function is bounded by its slice.

use super::records::MIN_RECORD_BYTES;
use super::{
    BatchError, Compression, TimestampType, ATTRIBUTES_AT, BASE_OFFSET_AT, BASE_SEQUENCE_AT,
    BASE_TIMESTAMP_AT, BATCH_HEADER_BYTES, BATCH_LENGTH_AT, COMPRESSION_MASK, CONTROL_BIT, CRC_AT,
    CRC_START, DELETE_HORIZON_BIT, LAST_OFFSET_DELTA_AT, LEADER_EPOCH_AT, LOG_OVERHEAD, MAGIC_AT,
    MAGIC_V2, MAX_TIMESTAMP_AT, MIN_BATCH_LENGTH, PRODUCER_EPOCH_AT, PRODUCER_ID_AT,
    RECORDS_COUNT_AT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
};

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
/// batch"). Records inside are not decoded here: [`validate_records`](super::validate_records) walks them (produce
/// does), and [`records`](fn@super::records) checks each one when iterating.
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
