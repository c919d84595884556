//! The few record-batch header fields the log reads from bytes already on disk, without a full
//! parse: enough to walk the chain of batches (offset, length) when looking up an offset or a
//! timestamp. Full validation (CRC, counts) is wire's `validate_batch`, used by recovery.
//!
//! Layout (big-endian): baseOffset 0..8, batchLength 8..12, partitionLeaderEpoch 12..16,
//! magic 16, crc 17..21, attributes 21..23, lastOffsetDelta 23..27, baseTimestamp 27..35,
//! maxTimestamp 35..43, ... records count 57..61.

pub(crate) use wire::record_batch::{BATCH_HEADER_BYTES, LOG_OVERHEAD};

/// Bytes needed to read base offset, length and last offset delta.
pub(crate) const PEEK_BYTES: usize = 27;
/// Bytes needed to also read the max timestamp.
pub(crate) const PEEK_TS_BYTES: usize = 43;

/// The smallest legal `batchLength` (a header with no records).
const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_BYTES - LOG_OVERHEAD) as i32;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Peek {
    pub base_offset: i64,
    pub last_offset: i64,
    /// LOG_OVERHEAD + batchLength.
    pub total: usize,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(
        b[at..at + 8]
            .try_into()
            .expect("a slice of the array's length"),
    )
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(
        b[at..at + 4]
            .try_into()
            .expect("a slice of the array's length"),
    )
}

/// Reads the chain fields of the batch at the start of `b` (which must hold `PEEK_BYTES`).
/// `Err` with a reason when the length is impossible: bytes on disk behind the recovery point
/// were validated, so this means corruption, and a walker must stop rather than loop.
pub(crate) fn peek(b: &[u8]) -> Result<Peek, String> {
    debug_assert!(b.len() >= PEEK_BYTES);
    let len = be_i32(b, 8);
    if len < MIN_BATCH_LENGTH {
        return Err(format!(
            "batch length {len} below the minimum {MIN_BATCH_LENGTH}"
        ));
    }
    let base_offset = be_i64(b, 0);
    let delta = be_i32(b, 23);
    if delta < 0 {
        return Err(format!("negative last offset delta {delta}"));
    }
    Ok(Peek {
        base_offset,
        last_offset: base_offset + delta as i64,
        total: LOG_OVERHEAD + len as usize,
    })
}

/// The max timestamp field (needs `PEEK_TS_BYTES`).
pub(crate) fn max_timestamp(b: &[u8]) -> i64 {
    be_i64(b, 35)
}

/// The whole 61-byte header as wire's `BatchHeader` (needs `BATCH_HEADER_BYTES`), without the
/// checks of `BatchHeader::parse`, which wants the whole batch: used to rebuild producer state
/// from batches already validated when they were written or recovered.
pub(crate) fn header(b: &[u8]) -> wire::record_batch::BatchHeader {
    debug_assert!(b.len() >= BATCH_HEADER_BYTES);
    wire::record_batch::BatchHeader {
        base_offset: be_i64(b, 0),
        batch_length: be_i32(b, 8),
        partition_leader_epoch: be_i32(b, 12),
        magic: b[16] as i8,
        crc: be_i32(b, 17) as u32,
        attributes: i16::from_be_bytes([b[21], b[22]]),
        last_offset_delta: be_i32(b, 23),
        base_timestamp: be_i64(b, 27),
        max_timestamp: be_i64(b, 35),
        producer_id: be_i64(b, 43),
        producer_epoch: i16::from_be_bytes([b[51], b[52]]),
        base_sequence: be_i32(b, 53),
        records_count: be_i32(b, 57),
    }
}
