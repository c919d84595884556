//! [`validate_records`], the per-record half of Kafka's `LogValidator` run on produce, and
//! the refused-records list it answers with (KIP-467's `record_errors`).

use crate::compression;

use super::records::record_iter;
use super::{BatchError, BatchHeader, Compression, Record, TimestampType, BATCH_HEADER_BYTES};

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
/// [`validate_batch`](super::validate_batch) (which checked the header, CRC and count against the offset range)
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
