//! The produce, fetch and list-offsets operations on one partition, run by the shard that owns
//! it (called directly for a local partition, or by a forwarded request).
//!
//! Produce validates the one batch Kafka allows per partition (magic 2, lengths, CRC-32C,
//! counts, base offset 0, `max.message.bytes`), appends it without copying its bytes, and for
//! acks=all under the `ack` flush policy waits for the shard's group commit.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use shard::LogError;

use crate::config::FlushPolicy;
use wire::record_batch::{self, BatchError};
use wire::ErrorCode;

use crate::forward::{FetchResult, OffsetResult, ProduceResult};
use crate::metadata::records::TopicId;
use crate::shard::{Shard, Stats};

/// ListOffsets special timestamps (KIP-79, KIP-734, KIP-1005).
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;

fn produce_error(code: ErrorCode) -> ProduceResult {
    ProduceResult { error_code: code.code(), base_offset: -1, log_append_time_ms: -1, log_start_offset: -1 }
}

/// Kafka's error code for a batch that failed validation.
fn batch_error_code(error: &BatchError) -> ErrorCode {
    match error {
        BatchError::BadCrc { .. } | BatchError::Truncated { .. } | BatchError::BadLength(_) => {
            ErrorCode::CorruptMessage
        }
        _ => ErrorCode::InvalidRecord,
    }
}

/// Appends `records` (one record batch) to a partition of this shard.
///
/// Everything up to and including the append runs without an `.await`, so appends happen in
/// the order the calls were made.
pub async fn produce(shard: &Rc<Shard>, topic_id: &TopicId, partition: i32, acks: i16, records: Bytes) -> ProduceResult {
    Stats::bump(&shard.stats.produce_batches);
    let Some(target) = shard.partition(topic_id, partition) else {
        return produce_error(ErrorCode::NotLeaderOrFollower);
    };
    if records.len() > target.config.max_message_bytes as usize {
        return produce_error(ErrorCode::MessageTooLarge);
    }
    let mut batches = record_batch::batches(&records);
    let header = match batches.next() {
        Some(Ok((header, _))) => header,
        Some(Err(error)) => {
            tracing::debug!(%error, "produce batch refused");
            return produce_error(batch_error_code(&error));
        }
        None => return produce_error(ErrorCode::InvalidRecord),
    };
    // Kafka allows exactly one batch per partition from v3 on, and clients send base offset 0.
    if batches.next().is_some() || header.base_offset != 0 {
        return produce_error(ErrorCode::InvalidRecord);
    }
    let append = target.log.borrow_mut().append(&records, &header, 0);
    let info = match append {
        Ok(info) => info,
        Err(LogError::RecordTooLarge { .. }) => return produce_error(ErrorCode::MessageTooLarge),
        Err(error) => {
            tracing::error!(%error, "append failed");
            return produce_error(ErrorCode::KafkaStorageError);
        }
    };
    target.appended.notify(usize::MAX);
    if acks == -1 && target.config.flush_policy == FlushPolicy::Ack {
        if let Err(error) = shard.group_commit.wait_durable(&target.log).await {
            tracing::error!(%error, "fdatasync failed; acks=all produce not acknowledged");
            return produce_error(ErrorCode::KafkaStorageError);
        }
    }
    let log_append_time_ms = if target.config.message_timestamp_type == "LogAppendTime" { info.log_append_time_ms } else { -1 };
    ProduceResult {
        error_code: 0,
        base_offset: info.base_offset,
        log_append_time_ms,
        log_start_offset: info.log_start_offset,
    }
}

/// Reads whole batches from `offset` of a partition of this shard.
pub async fn fetch(shard: &Rc<Shard>, topic_id: &TopicId, partition: i32, offset: i64, max_bytes: usize) -> FetchResult {
    Stats::bump(&shard.stats.fetches);
    let Some(target) = shard.partition(topic_id, partition) else {
        return FetchResult {
            error_code: ErrorCode::NotLeaderOrFollower.code(),
            high_watermark: -1,
            log_start_offset: -1,
            records: Bytes::new(),
        };
    };
    // One node: the high watermark is the log end offset.
    let (read, high_watermark, log_start_offset) = {
        let log = target.log.borrow();
        let high_watermark = log.log_end_offset();
        (log.read(offset, max_bytes, high_watermark), high_watermark, log.log_start_offset())
    };
    match read.await {
        Ok(records) => FetchResult { error_code: 0, high_watermark, log_start_offset, records },
        Err(LogError::OffsetOutOfRange { .. }) => FetchResult {
            error_code: ErrorCode::OffsetOutOfRange.code(),
            high_watermark,
            log_start_offset,
            records: Bytes::new(),
        },
        Err(error) => {
            tracing::error!(%error, "fetch read failed");
            FetchResult {
                error_code: ErrorCode::KafkaStorageError.code(),
                high_watermark,
                log_start_offset,
                records: Bytes::new(),
            }
        }
    }
}

/// Parks until the partition's log end passes `offset` or `wait_ms` elapses.
pub async fn wait_for_data(shard: &Rc<Shard>, topic_id: &TopicId, partition: i32, offset: i64, wait_ms: u64) {
    let Some(target) = shard.partition(topic_id, partition) else { return };
    let deadline = std::time::Instant::now() + Duration::from_millis(wait_ms);
    loop {
        let listener = target.appended.listen();
        if target.log.borrow().log_end_offset() > offset {
            return;
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return;
        }
        let timer = glommio::timer::Timer::new(deadline - now);
        futures::future::select(listener, timer).await;
    }
}

/// ListOffsets for a partition of this shard.
pub async fn list_offsets(shard: &Rc<Shard>, topic_id: &TopicId, partition: i32, timestamp: i64) -> OffsetResult {
    let Some(target) = shard.partition(topic_id, partition) else {
        return OffsetResult { error_code: ErrorCode::NotLeaderOrFollower.code(), timestamp: -1, offset: -1 };
    };
    let found = |offset: i64| OffsetResult { error_code: 0, timestamp: -1, offset };
    let lookup = {
        let log = target.log.borrow();
        match timestamp {
            LATEST_TIMESTAMP => return found(log.log_end_offset()),
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => return found(log.log_start_offset()),
            MAX_TIMESTAMP => {
                return match log.max_timestamp() {
                    Some((offset, timestamp)) => OffsetResult { error_code: 0, timestamp, offset },
                    None => OffsetResult { error_code: 0, timestamp: -1, offset: -1 },
                }
            }
            timestamp if timestamp < 0 => {
                return OffsetResult { error_code: ErrorCode::InvalidRequest.code(), timestamp: -1, offset: -1 }
            }
            timestamp => log.offset_for_timestamp(timestamp),
        }
    };
    match lookup.await {
        Ok(Some((offset, timestamp))) => OffsetResult { error_code: 0, timestamp, offset },
        Ok(None) => OffsetResult { error_code: 0, timestamp: -1, offset: -1 },
        Err(error) => {
            tracing::error!(%error, "offset lookup by timestamp failed");
            OffsetResult { error_code: ErrorCode::KafkaStorageError.code(), timestamp: -1, offset: -1 }
        }
    }
}
