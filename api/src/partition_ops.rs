//! The produce, fetch and list-offsets operations on one partition, run by the shard that owns
//! it (called directly for a local partition, or by a forwarded request).
//!
//! Produce validates the one batch Kafka allows per partition (magic 2, lengths, CRC-32C,
//! counts, base offset 0, `max.message.bytes`, then every record as Kafka's LogValidator does:
//! wire's `validate_records`), appends it without copying its bytes, and for acks=all under
//! the `ack` flush policy waits for the shard's group commit.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::Either;
use futures::FutureExt;
use shard::{BatchStamp, LogError};

use crate::config::FlushPolicy;
use wire::record_batch::{
    self, BatchError, RecordErrors, RecordFault, RecordLimits, TimestampType,
};
use wire::ErrorCode;

// What travels between shards is declared in `forward` (below `shard`); these two are
// re-exported here, beside the code that makes them, under their old paths.
pub use crate::forward::{ProducePart, RefusedRecords};

use crate::forward::{FetchPart, FetchResult, OffsetResult, ProduceResult, ProducerInfo, WaitPart};
use crate::metadata::records::TopicId;
use crate::shard::{Shard, Stats};
use crate::transport::Records;

/// ListOffsets special timestamps (KIP-79, KIP-734, KIP-1005).
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;

/// Ceiling on one produced batch's decompressed records (or `max.message.bytes` if that is
/// larger). Kafka has none; we need one, since a 1 MiB gzip batch of zeros inflates to 1 GiB.
/// 64 MiB leaves a 64x compression ratio at the default `max.message.bytes` (1 MiB); a batch
/// over it gets MESSAGE_TOO_LARGE, on which the Java producer splits the batch and retries.
const MAX_DECOMPRESSED_BATCH_BYTES: usize = 64 << 20;

/// The decompression buffer a shard keeps between produce requests; one that grew past this
/// for a large batch is freed afterwards instead, so an idle shard holds at most this much.
const SCRATCH_RETAIN_BYTES: usize = 8 << 20;

thread_local! {
    /// Where this shard decompresses produced batches to validate them (one executor per
    /// thread, and validation never awaits, so one buffer per shard suffices).
    static DECOMPRESS_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Walks every record of a produced batch (see `wire::record_batch::validate_records`).
fn validate_records(
    header: &record_batch::BatchHeader,
    batch: &[u8],
    config: &crate::config::TopicConfig,
    now: i64,
) -> Result<record_batch::RecordStats, BatchError> {
    let limits = RecordLimits {
        max_decompressed_bytes: MAX_DECOMPRESSED_BATCH_BYTES.max(config.max_message_bytes as usize),
        require_keys: config.cleanup_policy.compact,
        timestamps: Some(record_batch::TimestampRule {
            topic_type: topic_timestamp_type(config),
            now,
            before_max_ms: config.message_timestamp_before_max_ms,
            after_max_ms: config.message_timestamp_after_max_ms,
        }),
    };
    DECOMPRESS_SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let result = record_batch::validate_records(header, batch, &mut scratch, &limits);
        if scratch.capacity() > SCRATCH_RETAIN_BYTES {
            *scratch = Vec::new();
        }
        result
    })
}

fn topic_timestamp_type(config: &crate::config::TopicConfig) -> TimestampType {
    match config.message_timestamp_type {
        crate::config::TimestampType::LogAppendTime => TimestampType::LogAppendTime,
        crate::config::TimestampType::CreateTime => TimestampType::CreateTime,
    }
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn produce_error(code: ErrorCode) -> ProduceResult {
    ProduceResult {
        error_code: code.code(),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        refused: None,
    }
}

impl RefusedRecords {
    /// Kafka's messages for `errors` of partition `partition` of `topic` (LogValidator's
    /// `validateKey` / `validateTimestamp`, and `processRecordErrors` for the summary).
    /// Kafka names every refused record; at most `MAX_NAMED_RECORD_ERRORS` are here (wire's
    /// bound), the summary counts them all.
    pub fn new(topic: &str, partition: i32, errors: &RecordErrors) -> RefusedRecords {
        let record_errors: Vec<(i32, String)> = errors
            .named
            .iter()
            .map(|error| {
                (
                    error.batch_index,
                    record_message(topic, partition, &error.fault),
                )
            })
            .collect();
        let error_message = if errors.any_timestamp {
            "One or more records have been rejected due to invalid timestamp".to_string()
        } else {
            // Java's List.toString of ProduceResponse.RecordError, at most three.
            let shown: Vec<String> = record_errors
                .iter()
                .take(3)
                .map(|(index, message)| {
                    format!("RecordError(batchIndex={index}, message='{message}')")
                })
                .collect();
            format!(
                "One or more records have been rejected due to {} record errors in total, and \
                 only showing the first three errors at most: [{}]",
                errors.count,
                shown.join(", ")
            )
        };
        RefusedRecords {
            record_errors,
            error_message,
        }
    }
}

fn record_message(topic: &str, partition: i32, fault: &RecordFault) -> String {
    match *fault {
        RecordFault::MissingKey => format!(
            "Compacted topic cannot accept message without key in topic partition \
             {topic}-{partition}"
        ),
        RecordFault::TimestampOutOfRange {
            timestamp,
            offset,
            min,
            max,
        } => format!(
            "Timestamp {timestamp} of message with offset {offset} is out of range. The \
             timestamp should be within [{min}, {max}]"
        ),
        RecordFault::LogAppendTime {
            offset,
            timestamp,
            key_bytes,
            value_bytes,
        } => format!(
            "Invalid timestamp type in message DefaultRecord(offset={offset}, \
             timestamp={timestamp}, key={key_bytes} bytes, value={value_bytes} bytes). \
             Producer should not set timestamp type to LogAppendTime."
        ),
    }
}

/// Kafka's error code for a batch that failed validation: CorruptRecordException
/// (CORRUPT_MESSAGE) for the batch's own framing and CRC, InvalidRecordException
/// (INVALID_RECORD) for what is inside (record framing, counts, offsets, keys), and
/// InvalidTimestampException for a client's LogAppendTime.
fn batch_error_code(error: &BatchError) -> ErrorCode {
    match error {
        BatchError::BadCrc { .. } | BatchError::Truncated { .. } | BatchError::BadLength(_) => {
            ErrorCode::CorruptMessage
        }
        BatchError::DecompressedTooLarge { .. } => ErrorCode::MessageTooLarge,
        BatchError::LogAppendTimeFromClient => ErrorCode::InvalidTimestamp,
        // Kafka: INVALID_TIMESTAMP when any record's timestamp was refused.
        BatchError::Records(errors) if errors.any_timestamp => ErrorCode::InvalidTimestamp,
        _ => ErrorCode::InvalidRecord,
    }
}

/// What a successful append leaves for the answer: the log to wait on under acks=all, and
/// the result to give once it is durable.
struct Appended {
    target: Rc<crate::shard::Partition>,
    wait_durable: bool,
    /// acks=all on a replicated partition: the batch's last offset, which the high
    /// watermark must pass before the answer (Kafka's DelayedProduce).
    replicated_past: Option<i64>,
    /// How long that may take (the request's `timeout_ms`).
    timeout_ms: u64,
    result: ProduceResult,
}

impl Appended {
    fn waits(&self) -> bool {
        self.wait_durable || self.replicated_past.is_some()
    }
}

/// Appends `records` (one record batch) to a partition of this shard.
///
/// Everything up to and including the append runs without an `.await`, so appends happen in
/// the order the calls were made.
pub async fn produce(
    shard: &Rc<Shard>,
    topic_id: &TopicId,
    partition: i32,
    acks: i16,
    records: Bytes,
) -> ProduceResult {
    let part = ProducePart {
        topic_id: *topic_id,
        partition,
        records,
    };
    match append(shard, &part, acks, DEFAULT_TIMEOUT_MS, wall_clock_ms()) {
        Ok(appended) if appended.waits() => durable(shard, appended).await,
        Ok(appended) => appended.result,
        Err(result) => result,
    }
}

/// Appends each part's batch to its partition of this shard, in order, then (acks=all under
/// the `ack` flush policy) waits for one group commit covering them all; one result per part,
/// in order. Every append runs before the first `.await`, so two calls made in order append
/// in order, partition by partition; a part that fails does not stop the others (Kafka
/// answers each partition on its own).
pub async fn produce_many(
    shard: &Rc<Shard>,
    acks: i16,
    timeout_ms: u64,
    parts: Vec<ProducePart>,
) -> Vec<ProduceResult> {
    // One clock reading for the whole request, as Kafka's validator takes one per batch.
    let now = wall_clock_ms();
    let mut results = Vec::with_capacity(parts.len());
    let mut waits = Vec::new();
    for (slot, part) in parts.iter().enumerate() {
        match append(shard, part, acks, timeout_ms, now) {
            Ok(appended) if appended.waits() => {
                // A placeholder until durable (`refused` is `None`: no allocation).
                results.push(appended.result.clone());
                waits.push((slot, appended));
            }
            Ok(appended) => results.push(appended.result),
            Err(result) => results.push(result),
        }
    }
    if waits.is_empty() {
        return results;
    }
    // Polled together, so every log asks for the same group commit round.
    let durable = futures::future::join_all(
        waits
            .into_iter()
            .map(|(slot, appended)| durable(shard, appended).map(move |result| (slot, result))),
    )
    .await;
    for (slot, result) in durable {
        results[slot] = result;
    }
    results
}

/// Appends the COMMIT or ABORT marker `part` asks for to a partition of this shard (what a
/// partition leader does for WriteTxnMarkers) and waits for it as acks=all does. Kafka's
/// codes: NOT_LEADER_OR_FOLLOWER off the leader, INVALID_PRODUCER_EPOCH /
/// TRANSACTION_COORDINATOR_FENCED for a stale marker, KAFKA_STORAGE_ERROR.
pub async fn write_txn_marker(
    shard: &Rc<Shard>,
    part: &crate::txn::calls::MarkerPart,
) -> ErrorCode {
    let Some(target) = shard.partition(&part.topic_id, part.partition) else {
        return ErrorCode::NotLeaderOrFollower;
    };
    if !target.replica.serves_clients() {
        return ErrorCode::NotLeaderOrFollower;
    }
    let config = target.config();
    let isr = target.replica.isr_len();
    let leader_epoch = target.replica.leader_epoch().unwrap_or(0);
    let marker = if part.commit {
        shard::log::TxnMarker::Commit
    } else {
        shard::log::TxnMarker::Abort
    };
    let append = target.log.borrow_mut().append_txn_marker(
        part.producer_id,
        part.producer_epoch,
        part.coordinator_epoch,
        marker,
        leader_epoch,
    );
    let info = match append {
        Ok(info) => info,
        Err(LogError::Producer(error)) => {
            tracing::debug!(%error, "transaction marker refused");
            return ErrorCode::from_code_or_unknown(error.code());
        }
        Err(error) => {
            tracing::error!(%error, "transaction marker append failed");
            return ErrorCode::KafkaStorageError;
        }
    };
    target.appended.notify(usize::MAX);
    if isr.is_some() {
        crate::replication::leader::advance_high_watermark(shard, &target);
    }
    let appended = Appended {
        wait_durable: config.flush_policy == FlushPolicy::Ack,
        replicated_past: isr.is_some().then_some(info.last_offset),
        timeout_ms: DEFAULT_TIMEOUT_MS,
        target,
        result: ProduceResult {
            error_code: 0,
            base_offset: info.base_offset,
            log_append_time_ms: -1,
            log_start_offset: info.log_start_offset,
            refused: None,
        },
    };
    ErrorCode::from_code_or_unknown(durable(shard, appended).await.error_code)
}

/// The produce timeout of appends made for this broker itself (the group coordinator's).
const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// Waits until `appended` is on disk (`ack` flush policy) and, for acks=all on a replicated
/// partition, replicated: its result then, or KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER
/// (leadership lost meanwhile), NOT_ENOUGH_REPLICAS_AFTER_APPEND or REQUEST_TIMED_OUT.
async fn durable(shard: &Rc<Shard>, appended: Appended) -> ProduceResult {
    // A retry still waits for durability: its original may not be on disk yet.
    if appended.wait_durable {
        if let Err(error) = shard.group_commit.wait_durable(&appended.target.log).await {
            tracing::error!(%error, "fdatasync failed; acks=all produce not acknowledged");
            return produce_error(ErrorCode::KafkaStorageError);
        }
    }
    let Some(last_offset) = appended.replicated_past else {
        return appended.result;
    };
    let target = &appended.target;
    let deadline = std::time::Instant::now() + Duration::from_millis(appended.timeout_ms);
    loop {
        let listener = target.appended.listen();
        let Some(isr) = target.replica.isr_len() else {
            return produce_error(ErrorCode::NotLeaderOrFollower);
        };
        let end = target.log.borrow().log_end_offset();
        if target.replica.high_watermark(end) > last_offset {
            // Kafka's `checkEnoughReplicasReachOffset`.
            let min_insync = target.config().min_insync_replicas.max(1) as usize;
            if isr < min_insync {
                return produce_error(ErrorCode::NotEnoughReplicasAfterAppend);
            }
            return appended.result;
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return produce_error(ErrorCode::RequestTimedOut);
        }
        let timer = glommio::timer::Timer::new(deadline - now);
        futures::future::select(listener, timer).await;
    }
}

/// Validates and appends one part (no `.await`): what is left to do, or the error result.
fn append(
    shard: &Rc<Shard>,
    part: &ProducePart,
    acks: i16,
    timeout_ms: u64,
    now: i64,
) -> Result<Appended, ProduceResult> {
    Stats::bump(&shard.stats.produce_batches);
    let records = &part.records;
    let Some(target) = shard.partition(&part.topic_id, part.partition) else {
        return Err(produce_error(ErrorCode::NotLeaderOrFollower));
    };
    // One version of the topic config for the whole request, even if AlterConfigs replaces it
    // while this waits for the disk.
    let config = target.config();
    if records.len() > config.max_message_bytes as usize {
        return Err(produce_error(ErrorCode::MessageTooLarge));
    }
    // Kafka's `appendRecordsToLeader`: acks=all is refused before appending while the ISR is
    // smaller than `min.insync.replicas`.
    let isr = target.replica.isr_len();
    if acks == -1 && isr.is_some_and(|isr| isr < config.min_insync_replicas.max(1) as usize) {
        return Err(produce_error(ErrorCode::NotEnoughReplicas));
    }
    let leader_epoch = target.replica.leader_epoch().unwrap_or(0);
    let mut batches = record_batch::batches(records);
    let header = match batches.next() {
        Some(Ok((header, _))) => header,
        Some(Err(error)) => {
            tracing::debug!(%error, "produce batch refused");
            return Err(produce_error(batch_error_code(&error)));
        }
        None => return Err(produce_error(ErrorCode::InvalidRecord)),
    };
    // Kafka allows exactly one batch per partition from v3 on, and clients send base offset 0.
    if batches.next().is_some() || header.base_offset != 0 {
        return Err(produce_error(ErrorCode::InvalidRecord));
    }
    // After this, `records_count` and `last_offset_delta` are facts about the records, so the
    // log's offset arithmetic can use them.
    // One clock reading for the timestamp window and the append time, as Kafka's validator.
    let stats = match validate_records(&header, records, &config, now) {
        Ok(stats) => stats,
        Err(error) => {
            tracing::debug!(%error, "produce batch refused");
            let mut result = produce_error(batch_error_code(&error));
            if let BatchError::Records(errors) = &error {
                let image = shard.image();
                let topic = image
                    .topic_by_id(&part.topic_id)
                    .map_or("", |topic| topic.name.as_str());
                let refused = RefusedRecords::new(topic, part.partition, errors);
                result.refused = Some(Box::new(refused));
            }
            return Err(result);
        }
    };
    let timestamp_type = topic_timestamp_type(&config);
    let stamp = match timestamp_type {
        TimestampType::LogAppendTime => BatchStamp::LogAppendTime,
        TimestampType::CreateTime => BatchStamp::CreateTime(stats.max_timestamp),
    };
    let append = target
        .log
        .borrow_mut()
        .append_stamped(records, &header, leader_epoch, stamp, now);
    let info = match append {
        Ok(info) => info,
        Err(LogError::RecordTooLarge { .. }) => {
            return Err(produce_error(ErrorCode::MessageTooLarge))
        }
        Err(LogError::ControlBatchFromClient) => {
            return Err(produce_error(ErrorCode::InvalidRecord))
        }
        Err(LogError::Producer(error)) => {
            tracing::debug!(%error, "idempotent batch refused");
            return Err(ProduceResult {
                error_code: error.code(),
                ..produce_error(ErrorCode::None)
            });
        }
        Err(error) => {
            tracing::error!(%error, "append failed");
            return Err(produce_error(ErrorCode::KafkaStorageError));
        }
    };
    if !info.duplicate {
        target.appended.notify(usize::MAX);
        if isr.is_some() {
            crate::replication::leader::advance_high_watermark(shard, &target);
        }
    }
    let log_append_time_ms = if timestamp_type == TimestampType::LogAppendTime {
        info.log_append_time_ms
    } else {
        -1
    };
    Ok(Appended {
        wait_durable: acks == -1 && config.flush_policy == FlushPolicy::Ack,
        replicated_past: (acks == -1 && isr.is_some()).then_some(info.last_offset),
        timeout_ms,
        target,
        result: ProduceResult {
            error_code: 0,
            base_offset: info.base_offset,
            log_append_time_ms,
            log_start_offset: info.log_start_offset,
            refused: None,
        },
    })
}

/// DescribeProducers for a partition of this shard: (error code, its producers).
pub fn describe_producers(
    shard: &Rc<Shard>,
    topic_id: &TopicId,
    partition: i32,
) -> (i16, Vec<ProducerInfo>) {
    let Some(target) = shard.partition(topic_id, partition) else {
        return (ErrorCode::NotLeaderOrFollower.code(), Vec::new());
    };
    let log = target.log.borrow();
    let producers = log
        .producers()
        .iter()
        .map(|(producer_id, entry)| ProducerInfo {
            producer_id,
            producer_epoch: entry.epoch,
            last_sequence: entry.last_seq(),
            last_timestamp: entry.last_timestamp,
            coordinator_epoch: entry.coordinator_epoch,
            current_txn_start_offset: entry.current_txn_first_offset.unwrap_or(-1),
        })
        .collect();
    (0, producers)
}

/// Reads whole batches from `part.offset` of a partition of this shard: at most
/// `max_bytes`, or at least one whole batch when `min_one`. A consumer reads below the high
/// watermark; a follower (`part.replica`) up to the log end, its fetch offset counting as its
/// progress, or gets DivergingEpoch instead of records (`replication::leader`).
pub async fn fetch(shard: &Rc<Shard>, part: &FetchPart) -> FetchResult {
    Stats::bump(&shard.stats.fetches);
    let refused = |code: ErrorCode| FetchResult {
        error_code: code.code(),
        high_watermark: -1,
        log_start_offset: -1,
        last_stable_offset: -1,
        aborted: None,
        records: Records::default(),
        diverging: None,
    };
    let Some(target) = shard.partition(&part.topic_id, part.partition) else {
        return refused(ErrorCode::NotLeaderOrFollower);
    };
    let mut diverging = None;
    if let Some(replica) = part.replica {
        match crate::replication::leader::on_replica_fetch(
            shard,
            (part.topic_id, part.partition),
            &target,
            replica.broker,
            replica.broker_epoch,
            part.offset,
            replica.last_fetched_epoch,
        ) {
            Ok(answer) => diverging = answer.map(|d| (d.epoch, d.end_offset)),
            Err(code) => return refused(code),
        }
    }
    let (offset, max_bytes, min_one) = (part.offset, part.max_bytes, part.min_one);
    let (read, high_watermark, last_stable_offset, aborted, log_start_offset) = {
        let log = target.log.borrow();
        let log_end = log.log_end_offset();
        let high_watermark = target.replica.high_watermark(log_end);
        let last_stable_offset = last_stable_offset(&log, high_watermark);
        if diverging.is_some() {
            return FetchResult {
                error_code: 0,
                high_watermark,
                log_start_offset: log.log_start_offset(),
                last_stable_offset,
                aborted: None,
                records: Records::default(),
                diverging,
            };
        }
        let upto = if part.replica.is_some() {
            log_end
        } else if part.read_committed {
            last_stable_offset
        } else {
            high_watermark
        };
        // Kafka's `collectAbortedTransactions` from the fetch offset to the bound: the
        // consumer drops the aborted producers' batches among what it reads.
        let aborted = part.read_committed.then(|| {
            (log.aborted_transactions(part.offset, upto).into_iter())
                .map(|txn| (txn.producer_id, txn.first_offset))
                .collect()
        });
        // `fetch.path=copy` reads the records into memory; otherwise they stay in the
        // segment files as ranges, sent from the page cache by the connection's writer.
        let read = if shard.config.fetch_copy {
            Either::Left(
                log.read_bounded(offset, max_bytes, upto, min_one)
                    .map(|read| read.map(Records::from)),
            )
        } else {
            Either::Right(
                log.read_ranges(offset, max_bytes, upto, min_one)
                    .map(|read| read.map(Records::from_pieces)),
            )
        };
        (
            read,
            high_watermark,
            last_stable_offset,
            aborted,
            log.log_start_offset(),
        )
    };
    match read.await {
        Ok(records) => FetchResult {
            error_code: 0,
            high_watermark,
            log_start_offset,
            last_stable_offset,
            aborted,
            records,
            diverging: None,
        },
        // Kafka's `LogReadResult` for an out-of-range read carries unknown offsets (-1): the
        // consumer resets through ListOffsets, not from these.
        Err(LogError::OffsetOutOfRange { .. }) => refused(ErrorCode::OffsetOutOfRange),
        Err(error) => {
            tracing::error!(%error, "fetch read failed");
            FetchResult {
                high_watermark,
                log_start_offset,
                last_stable_offset,
                ..refused(ErrorCode::KafkaStorageError)
            }
        }
    }
}

/// Kafka's last stable offset: the high watermark, or the first offset of the earliest open
/// transaction when that is lower (a read_committed consumer reads below it).
pub fn last_stable_offset(log: &shard::PartitionLog, high_watermark: i64) -> i64 {
    log.first_unstable_offset()
        .map_or(high_watermark, |first| first.min(high_watermark))
}

/// Parks until the partition has data past `part.offset` (its log end for a follower, its
/// high watermark for a consumer), its role changes, or `wait_ms` elapses.
pub async fn wait_for_data(shard: &Rc<Shard>, part: &WaitPart, wait_ms: u64) {
    let Some(target) = shard.partition(&part.topic_id, part.partition) else {
        return;
    };
    let deadline = std::time::Instant::now() + Duration::from_millis(wait_ms);
    loop {
        let listener = target.appended.listen();
        let end = target.log.borrow().log_end_offset();
        let available = if part.replica {
            end
        } else if part.read_committed {
            last_stable_offset(&target.log.borrow(), target.replica.high_watermark(end))
        } else {
            target.replica.high_watermark(end)
        };
        if available > part.offset || !target.replica.serves_clients() {
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

/// Most bytes one ListOffsets-by-timestamp lookup decompresses to scan a batch's records.
/// Produce validation bounds what a stored batch inflates to; a batch written before that
/// (or by a larger `max.message.bytes`) that inflates past this is answered at batch
/// granularity (its first offset) instead of costing the shard an unbounded decompression.
const TIMESTAMP_SCAN_MAX_DECOMPRESSED_BYTES: usize = 16 << 20;

/// ListOffsets for a partition of this shard.
///
/// The log answers at batch granularity (its indexes hold batches); Kafka answers with the
/// record: the first record at or after the timestamp, and the record holding the largest
/// timestamp (KIP-734). So the batch the log names is read and its records scanned.
pub async fn list_offsets(
    shard: &Rc<Shard>,
    topic_id: &TopicId,
    partition: i32,
    timestamp: i64,
    read_committed: bool,
) -> OffsetResult {
    let Some(target) = shard.partition(topic_id, partition) else {
        return OffsetResult {
            error_code: ErrorCode::NotLeaderOrFollower.code(),
            timestamp: -1,
            offset: -1,
        };
    };
    let found = |offset: i64| OffsetResult {
        error_code: 0,
        timestamp: -1,
        offset,
    };
    let not_found = OffsetResult {
        error_code: 0,
        timestamp: -1,
        offset: -1,
    };
    let batch = {
        let log = target.log.borrow();
        match timestamp {
            // A consumer's latest offset is the high watermark (read_uncommitted) or the last
            // stable offset (read_committed).
            LATEST_TIMESTAMP => {
                let high_watermark = target.replica.high_watermark(log.log_end_offset());
                return found(if read_committed {
                    last_stable_offset(&log, high_watermark)
                } else {
                    high_watermark
                });
            }
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => return found(log.log_start_offset()),
            MAX_TIMESTAMP => match log.max_timestamp() {
                Some((offset, max_timestamp)) => Ok(Some((offset, max_timestamp))),
                None => return not_found,
            },
            timestamp if timestamp < 0 => {
                return OffsetResult {
                    error_code: ErrorCode::InvalidRequest.code(),
                    timestamp: -1,
                    offset: -1,
                }
            }
            timestamp => Err((
                log.offset_for_timestamp(timestamp),
                log.timestamp_segment_end(timestamp).unwrap_or(i64::MIN),
                log.log_start_offset(),
            )),
        }
    };
    // Kafka's `searchForTimestamp`: from the batch found, the first record (at or past the
    // log start) stamped at or after the target, in the batches of the segment chosen;
    // MAX_TIMESTAMP: the first record of the batch that carries the maximum.
    let (batch_offset, end, min_offset, wanted): (i64, i64, i64, Box<dyn Fn(i64) -> bool>) =
        match batch {
            Ok(Some((offset, max_timestamp))) => (
                offset,
                offset + 1,
                i64::MIN,
                Box::new(move |ts| ts == max_timestamp),
            ),
            Ok(None) => return not_found,
            Err((lookup, end, log_start)) => match lookup.await {
                Ok(Some((offset, _))) => {
                    (offset, end, log_start, Box::new(move |ts| ts >= timestamp))
                }
                Ok(None) => return not_found,
                Err(error) => {
                    tracing::error!(%error, "offset lookup by timestamp failed");
                    return OffsetResult {
                        error_code: ErrorCode::KafkaStorageError.code(),
                        timestamp: -1,
                        offset: -1,
                    };
                }
            },
        };
    let found = find_record(&target, batch_offset, end, min_offset, &*wanted).await;
    // Each lookup decompresses at most one bounded batch; yielding between them keeps a
    // request naming many partitions from holding the shard.
    glommio::yield_if_needed().await;
    match found {
        Ok(Some((offset, timestamp))) => OffsetResult {
            error_code: 0,
            timestamp,
            offset,
        },
        Ok(None) => not_found,
        Err(reason) => {
            tracing::error!(%reason, "scanning a batch for a timestamp failed");
            OffsetResult {
                error_code: ErrorCode::KafkaStorageError.code(),
                timestamp: -1,
                offset: -1,
            }
        }
    }
}

/// The first record at or after `offset` and `min_offset`, before `end`, whose timestamp
/// satisfies `wanted`, reading one batch at a time from the batch holding `offset`. A batch
/// whose max timestamp is below every wanted stamp is skipped without decompressing it
/// (`wanted(max)` false means no record of it can be wanted: the max is the largest).
async fn find_record(
    target: &crate::shard::Partition,
    mut offset: i64,
    end: i64,
    min_offset: i64,
    wanted: &dyn Fn(i64) -> bool,
) -> Result<Option<(i64, i64)>, String> {
    while offset < end {
        let read = {
            let log = target.log.borrow();
            if offset < log.log_start_offset() {
                offset = log.log_start_offset();
            }
            // max_bytes 1: the read still returns the whole batch holding `offset`, and only it.
            log.read(offset, 1, log.log_end_offset())
        };
        let bytes = read.await.map_err(|error| error.to_string())?;
        if bytes.is_empty() {
            return Ok(None);
        }
        for batch in record_batch::stored_batches(&bytes) {
            let (header, raw) = batch.map_err(|error| error.to_string())?;
            offset = header.next_offset();
            if !wanted(header.max_timestamp) {
                continue;
            }
            let records = match record_batch::records_with_limit(
                raw,
                TIMESTAMP_SCAN_MAX_DECOMPRESSED_BYTES,
            ) {
                Ok(records) => records,
                Err(BatchError::Compression(error)) => {
                    tracing::warn!(%error, "batch too large to scan for a timestamp; answering with its first offset");
                    return Ok(Some((
                        header.base_offset.max(min_offset),
                        header.max_timestamp,
                    )));
                }
                Err(error) => return Err(error.to_string()),
            };
            for record in records.iter() {
                let record = record.map_err(|error| error.to_string())?;
                if record.offset >= min_offset && wanted(record.timestamp) {
                    return Ok(Some((record.offset, record.timestamp)));
                }
            }
        }
        glommio::yield_if_needed().await;
    }
    Ok(None)
}

/// DeleteRecords for a partition of this shard: (error code, low watermark), as Kafka's
/// `ReplicaManager.deleteRecordsOnLocalLog`: internal topics INVALID_TOPIC_EXCEPTION, a
/// topic without `delete` in `cleanup.policy` POLICY_VIOLATION, an offset below 0 (other than
/// -1, the high watermark) or past the high watermark OFFSET_OUT_OF_RANGE.
pub fn delete_records(
    shard: &Rc<Shard>,
    topic_id: &TopicId,
    partition: i32,
    offset: i64,
) -> (i16, i64) {
    let Some(target) = shard.partition(topic_id, partition) else {
        return (ErrorCode::NotLeaderOrFollower.code(), -1);
    };
    let internal = shard
        .image()
        .topic_by_id(topic_id)
        .is_some_and(|t| t.name == crate::group::state::OFFSETS_TOPIC);
    if internal {
        return (ErrorCode::InvalidTopicException.code(), -1);
    }
    // Kafka's bound is the high watermark (records not yet replicated cannot be deleted);
    // -1 means the high watermark itself.
    let result = {
        let mut log = target.log.borrow_mut();
        let high_watermark = target.replica.high_watermark(log.log_end_offset());
        match offset {
            -1 => log.delete_records(high_watermark),
            offset if offset > high_watermark => Err(LogError::LogStartOutOfRange {
                offset,
                high_watermark,
            }),
            offset => log.delete_records(offset),
        }
    };
    match result {
        Ok(low_watermark) => (0, low_watermark),
        Err(LogError::DeletePolicy) => (ErrorCode::PolicyViolation.code(), -1),
        Err(LogError::LogStartOutOfRange { .. }) => (ErrorCode::OffsetOutOfRange.code(), -1),
        Err(error) => {
            tracing::error!(%error, "DeleteRecords failed");
            (ErrorCode::KafkaStorageError.code(), -1)
        }
    }
}

/// OffsetForLeaderEpoch for a partition of this shard: (error code, leader epoch, end
/// offset), as Kafka's `Partition.lastOffsetForLeaderEpoch` on the leader. A current leader
/// epoch (-1: not given) older than the partition's is FENCED_LEADER_EPOCH, a newer one
/// UNKNOWN_LEADER_EPOCH.
pub fn offset_for_leader_epoch(
    shard: &Rc<Shard>,
    topic_id: &TopicId,
    partition: i32,
    current_leader_epoch: i32,
    leader_epoch: i32,
) -> (i16, i32, i64) {
    let Some(target) = shard.partition(topic_id, partition) else {
        return (ErrorCode::NotLeaderOrFollower.code(), -1, -1);
    };
    let partition_epoch = shard
        .image()
        .topic_by_id(topic_id)
        .and_then(|t| t.partition(partition).map(|p| p.leader_epoch))
        .unwrap_or(0);
    if current_leader_epoch >= 0 {
        if current_leader_epoch < partition_epoch {
            return (ErrorCode::FencedLeaderEpoch.code(), -1, -1);
        }
        if current_leader_epoch > partition_epoch {
            return (ErrorCode::UnknownLeaderEpoch.code(), -1, -1);
        }
    }
    let found = target.log.borrow().end_offset_for_epoch(leader_epoch);
    match found {
        Some((epoch, end_offset)) => (0, epoch, end_offset),
        None => (0, -1, -1),
    }
}
