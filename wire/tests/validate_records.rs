//! `validate_records`: every refusal Kafka's LogValidator makes on a client batch, each on
//! a batch whose header and CRC are valid (so only the record walk can catch it), and
//! property tests: valid batches always pass; mutated ones never panic and are either
//! refused or still consistent.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use bytes::BufMut;
use proptest::prelude::*;
use wire::compression;
use wire::record_batch::RecordFault::{self, MissingKey, TimestampOutOfRange};
use wire::record_batch::{
    validate_batch, validate_records, BatchBuilder, BatchError, BatchHeader, Compression,
    RecordError, RecordErrors, RecordLimits, TimestampType, BATCH_HEADER_BYTES,
    MAX_NAMED_RECORD_ERRORS,
};
use wire::varint::{write_varint, write_varlong};

const CODECS: [Compression; 5] = Compression::ALL;

const LIMITS: RecordLimits = RecordLimits {
    max_decompressed_bytes: 1 << 20,
    require_keys: false,
    timestamps: None,
};

const COMPACTED: RecordLimits = RecordLimits {
    max_decompressed_bytes: 1 << 20,
    require_keys: true,
    timestamps: None,
};

/// Header field offsets (see wire::record_batch's layout table).
const BATCH_LENGTH_AT: usize = 8;
const CRC_AT: usize = 17;
const LAST_OFFSET_DELTA_AT: usize = 23;
const RECORDS_COUNT_AT: usize = 57;

/// One encoded record with explicit deltas (the builder always writes 0, 1, 2...).
fn record(offset_delta: i32, timestamp_delta: i64, key: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.put_i8(0);
    write_varlong(&mut body, timestamp_delta);
    write_varint(&mut body, offset_delta);
    match key {
        Some(key) => {
            write_varint(&mut body, key.len() as i32);
            body.put_slice(key);
        }
        None => write_varint(&mut body, -1),
    }
    write_varint(&mut body, value.len() as i32);
    body.put_slice(value);
    write_varint(&mut body, 0);
    let mut out = Vec::new();
    write_varint(&mut out, body.len() as i32);
    out.extend_from_slice(&body);
    out
}

/// A batch with a valid header and CRC around `records` (encoded, uncompressed), which
/// are compressed with `codec`; the header claims `count` records.
fn batch_around(codec: Compression, records: &[u8], count: i32) -> Vec<u8> {
    let mut batch = BatchBuilder::new(codec)
        .base_timestamp(1_000)
        .push(Some(b"k"), Some(b"v"), &[], 1_000)
        .build()
        .to_vec();
    batch.truncate(BATCH_HEADER_BYTES);
    let body = compression::compress(codec, records).unwrap();
    batch.extend_from_slice(&body);
    let length = (batch.len() - 12) as i32;
    batch[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    set_count(&mut batch, count);
    batch
}

/// Sets `records_count` and a matching `last_offset_delta`, and fixes the CRC.
fn set_count(batch: &mut [u8], count: i32) {
    batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
    batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
        .copy_from_slice(&count.wrapping_sub(1).to_be_bytes());
    fix_crc(batch);
}

fn fix_crc(batch: &mut [u8]) {
    let crc = wire::record_batch::compute_crc(batch).expect("a whole batch");
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Header check then record walk, as the broker does on produce.
/// The error of a batch whose records `errors` (index, fault) were refused.
fn refused(errors: &[(i32, RecordFault)]) -> BatchError {
    BatchError::Records(RecordErrors {
        named: errors
            .iter()
            .map(|&(batch_index, fault)| RecordError { batch_index, fault })
            .collect(),
        count: errors.len(),
        any_timestamp: errors.iter().any(|(_, fault)| fault.is_timestamp()),
    })
}

fn check(batch: &[u8], limits: &RecordLimits) -> Result<i32, BatchError> {
    let header: BatchHeader = validate_batch(batch)?;
    let mut scratch = Vec::new();
    validate_records(&header, batch, &mut scratch, limits).map(|stats| stats.records)
}

fn three_records() -> Vec<u8> {
    let mut records = record(0, 0, Some(b"a"), b"1");
    records.extend(record(1, 5, Some(b""), b"2"));
    records.extend(record(2, -3, Some(b"c"), b"3"));
    records
}

#[test]
fn valid_batches_pass_with_their_stats() {
    for codec in CODECS {
        let batch = batch_around(codec, &three_records(), 3);
        let header = validate_batch(&batch).unwrap();
        let mut scratch = Vec::new();
        let stats = validate_records(&header, &batch, &mut scratch, &COMPACTED).unwrap();
        assert_eq!(stats.records, 3, "{codec:?}");
        assert_eq!(stats.max_timestamp, 1_005, "{codec:?}");
        assert_eq!(stats.records_bytes, three_records().len(), "{codec:?}");
    }
}

#[test]
fn a_compressed_batch_lying_about_its_count_is_refused() {
    // The shape of the attack: a small gzip batch whose header claims 2^31-1 records
    // (consistent with its last offset delta and CRC), holding one.
    for codec in CODECS {
        let batch = batch_around(codec, &record(0, 0, None, b"x"), i32::MAX);
        let result = check(&batch, &LIMITS);
        if codec == Compression::None {
            // The header check already knows the bytes cannot hold that many.
            assert!(
                matches!(result, Err(BatchError::BadRecordCount { .. })),
                "{result:?}"
            );
        } else {
            assert_eq!(
                result,
                Err(BatchError::CorruptRecord(
                    "fewer records than the batch's count"
                )),
                "{codec:?}"
            );
        }
    }
}

#[test]
fn more_records_than_the_count_is_refused() {
    for codec in CODECS {
        let batch = batch_around(codec, &three_records(), 2);
        assert_eq!(
            check(&batch, &LIMITS),
            Err(BatchError::CorruptRecord(
                "bytes left after the last record"
            )),
            "{codec:?}"
        );
    }
}

#[test]
fn garbage_inside_a_record_is_refused() {
    // Each at least 7 bytes, the smallest record, so the header check cannot refuse the count.
    let garbage: [(&[u8], &str); 6] = [
        // A record length varint longer than 5 bytes.
        (
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0],
            "bad record length",
        ),
        // A negative record length.
        (&[0x01, 0, 0, 0, 0, 0, 0], "negative record length"),
        // A record length past the end.
        (
            &[0x7e, 0, 0, 0, 0, 0, 0],
            "record length runs past the batch",
        ),
        // A key length of -2.
        (&[0x0c, 0, 0, 0, 0x03, 0x01, 0x00], "record key"),
        // A header count of -2.
        (&[0x0c, 0, 0, 0, 0x01, 0x01, 0x03], "negative header count"),
        // Bytes after the headers inside the record's length.
        (
            &[0x10, 0, 0, 0, 0x01, 0x01, 0x00, 0, 0],
            "record has bytes after its headers",
        ),
    ];
    for codec in CODECS {
        for (body, why) in garbage {
            let batch = batch_around(codec, body, 1);
            assert_eq!(
                check(&batch, &LIMITS),
                Err(BatchError::CorruptRecord(why)),
                "{codec:?} {body:?}"
            );
        }
    }
}

#[test]
fn offset_deltas_must_count_from_zero() {
    for codec in CODECS {
        let mut records = record(0, 0, Some(b"a"), b"1");
        records.extend(record(2, 0, Some(b"b"), b"2"));
        let batch = batch_around(codec, &records, 2);
        assert_eq!(
            check(&batch, &LIMITS),
            Err(BatchError::BadOffsetDelta {
                index: 1,
                offset_delta: 2
            }),
            "{codec:?}"
        );
    }
}

#[test]
fn compacted_topics_need_keys() {
    for codec in CODECS {
        let mut records = record(0, 0, Some(b"a"), b"1");
        records.extend(record(1, 0, None, b"2"));
        let batch = batch_around(codec, &records, 2);
        assert_eq!(check(&batch, &COMPACTED), Err(refused(&[(1, MissingKey)])));
        assert_eq!(check(&batch, &LIMITS), Ok(2));
    }
}

#[test]
fn batch_attributes_only_a_broker_may_set() {
    let control = BatchBuilder::new(Compression::None)
        .control(true)
        .push(Some(b"k"), None, &[], 1)
        .build();
    assert_eq!(
        check(&control, &LIMITS),
        Err(BatchError::ControlBatchFromClient)
    );

    let no_sequence = BatchBuilder::new(Compression::None)
        .producer(7, 0, -1)
        .push(Some(b"k"), None, &[], 1)
        .build();
    assert_eq!(
        check(&no_sequence, &LIMITS),
        Err(BatchError::BadSequence {
            producer_id: 7,
            base_sequence: -1
        })
    );
    let idempotent = BatchBuilder::new(Compression::None)
        .producer(7, 0, 0)
        .push(Some(b"k"), None, &[], 1)
        .build();
    assert_eq!(check(&idempotent, &LIMITS), Ok(1));

    let append_time = BatchBuilder::new(Compression::Lz4)
        .timestamp_type(TimestampType::LogAppendTime)
        .push(Some(b"k"), None, &[], 1)
        .build();
    assert_eq!(
        check(&append_time, &LIMITS),
        Err(BatchError::LogAppendTimeFromClient)
    );
    // Kafka reports a keyless record on a compacted topic before the timestamp type.
    let keyless_append_time = BatchBuilder::new(Compression::None)
        .timestamp_type(TimestampType::LogAppendTime)
        .push(None, None, &[], 1)
        .build();
    assert_eq!(
        check(&keyless_append_time, &COMPACTED),
        Err(refused(&[(0, MissingKey)]))
    );
}

#[test]
fn decompression_stops_at_the_limit() {
    let value = vec![0u8; 64 << 10];
    let mut records = Vec::new();
    for i in 0..32 {
        records.extend(record(i, 0, None, &value));
    }
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let batch = batch_around(codec, &records, 32);
        assert!(
            batch.len() < records.len() / 8,
            "{codec:?} did not compress"
        );
        assert_eq!(
            check(&batch, &LIMITS),
            Err(BatchError::DecompressedTooLarge { max: 1 << 20 }),
            "{codec:?}"
        );
        let roomy = RecordLimits {
            max_decompressed_bytes: 4 << 20,
            ..LIMITS
        };
        assert_eq!(check(&batch, &roomy), Ok(32), "{codec:?}");
    }
}

#[test]
fn the_scratch_buffer_is_reused() {
    let batch = batch_around(Compression::Lz4, &three_records(), 3);
    let header = validate_batch(&batch).unwrap();
    let mut scratch = Vec::with_capacity(1 << 16);
    let before = scratch.as_ptr();
    for _ in 0..3 {
        validate_records(&header, &batch, &mut scratch, &LIMITS).unwrap();
    }
    assert_eq!(scratch.as_ptr(), before, "scratch was reallocated");
    assert_eq!(scratch.len(), three_records().len());
}

#[test]
fn uncompressed_batches_leave_the_scratch_alone() {
    let batch = batch_around(Compression::None, &three_records(), 3);
    let header = validate_batch(&batch).unwrap();
    let mut scratch = vec![9u8; 4];
    validate_records(&header, &batch, &mut scratch, &LIMITS).unwrap();
    assert_eq!(scratch, [9u8; 4]);
}

/// (key, value, headers, timestamp) of one record.
type Spec = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
    i64,
);

fn arb_records() -> impl Strategy<Value = Vec<Spec>> {
    proptest::collection::vec(
        (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)),
            proptest::collection::vec(
                (
                    "[a-z]{0,5}",
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..5)),
                ),
                0..3,
            ),
            any::<i64>(),
        ),
        1..12,
    )
}

fn build(codec: Compression, records: &[Spec]) -> bytes::Bytes {
    let mut builder = BatchBuilder::new(codec);
    for (key, value, headers, ts) in records {
        let headers: Vec<(&str, Option<&[u8]>)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        builder = builder.push(key.as_deref(), value.as_deref(), &headers, *ts);
    }
    builder.build()
}

proptest! {
    #[test]
    fn random_valid_batches_pass(codec in 0u8..5, records in arb_records()) {
        let codec = Compression::from_id(codec).unwrap();
        let batch = build(codec, &records);
        let header = validate_batch(&batch).unwrap();
        let mut scratch = Vec::new();
        let stats = validate_records(&header, &batch, &mut scratch, &LIMITS).unwrap();
        prop_assert_eq!(stats.records as usize, records.len());
        prop_assert_eq!(stats.max_timestamp, records.iter().map(|r| r.3).max().unwrap().max(-1));
        let all_keyed = records.iter().all(|r| r.0.is_some());
        prop_assert_eq!(validate_records(&header, &batch, &mut scratch, &COMPACTED).is_ok(), all_keyed);
    }

    /// One byte of the (decompressed) records changed, the batch recompressed and its CRC
    /// fixed, so the mutation reaches the record walk. It must not panic, and if it is
    /// accepted the records must still be exactly `count` well-framed ones.
    #[test]
    fn mutated_records_never_panic(
        codec in 0u8..5,
        records in arb_records(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let codec = Compression::from_id(codec).unwrap();
        let batch = build(Compression::None, &records);
        let mut body = batch[BATCH_HEADER_BYTES..].to_vec();
        let at = at.index(body.len());
        body[at] = byte;
        let mutated = batch_around(codec, &body, records.len() as i32);
        if let Ok(count) = check(&mutated, &LIMITS) {
            prop_assert_eq!(count as usize, records.len());
            let parsed = wire::record_batch::records(&mutated).unwrap();
            let walked: Vec<_> = parsed.iter().collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(walked.len(), records.len());
            for (index, record) in walked.iter().enumerate() {
                prop_assert_eq!(record.offset_delta as usize, index);
            }
        }
    }

    /// The header's count (kept consistent with the last offset delta and the CRC) lies:
    /// refused unless it happens to be the truth.
    #[test]
    fn lying_counts_are_refused(codec in 0u8..5, records in arb_records(), count in any::<i32>()) {
        let codec = Compression::from_id(codec).unwrap();
        let batch = build(Compression::None, &records);
        let lying = batch_around(codec, &batch[BATCH_HEADER_BYTES..], count);
        let result = check(&lying, &LIMITS);
        if count as usize == records.len() {
            prop_assert_eq!(result, Ok(count));
        } else {
            prop_assert!(result.is_err(), "count {} for {} records accepted", count, records.len());
        }
    }

    /// Any byte of a compressed batch's body (the compressed stream) changed, CRC fixed.
    #[test]
    fn mutated_compressed_streams_never_panic(
        codec in 1u8..5,
        records in arb_records(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let codec = Compression::from_id(codec).unwrap();
        let mut batch = build(codec, &records).to_vec();
        let at = BATCH_HEADER_BYTES + at.index(batch.len() - BATCH_HEADER_BYTES);
        batch[at] = byte;
        fix_crc(&mut batch);
        if let Ok(count) = check(&batch, &LIMITS) {
            prop_assert_eq!(count as usize, records.len());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Timestamps (Kafka's LogValidator.validateTimestamp) and the broker's stamped header
// ---------------------------------------------------------------------------------------

const NOW: i64 = 1_700_000_000_000;
const HOUR: i64 = 3_600_000;

fn rule(topic_type: TimestampType, before: i64, after: i64) -> RecordLimits {
    RecordLimits {
        timestamps: Some(wire::record_batch::TimestampRule {
            topic_type,
            now: NOW,
            before_max_ms: before,
            after_max_ms: after,
        }),
        ..LIMITS
    }
}

fn stamped(codec: Compression, stamps: &[i64]) -> Vec<u8> {
    let mut b = BatchBuilder::new(codec);
    for &t in stamps {
        b = b.push(Some(b"k"), Some(b"v"), &[], t);
    }
    b.build().to_vec()
}

/// Every record is checked, not only the first (nor only the max): a batch whose last
/// record is 2 hours ahead is refused, one exactly at the bound passes.
#[test]
fn create_time_window_checks_every_record() {
    let limits = rule(TimestampType::CreateTime, i64::MAX, HOUR);
    for codec in CODECS {
        assert_eq!(check(&stamped(codec, &[NOW, NOW + HOUR]), &limits), Ok(2));
        let err = check(&stamped(codec, &[NOW, NOW + 2 * HOUR, NOW]), &limits);
        // Kafka's window bounds, with Java's wrapping arithmetic.
        let ahead = TimestampOutOfRange {
            timestamp: NOW + 2 * HOUR,
            offset: 1,
            min: NOW.wrapping_sub(i64::MAX),
            max: NOW + HOUR,
        };
        assert_eq!(err, Err(refused(&[(1, ahead)])), "{codec:?}");
        // Behind: only when before.max.ms is set.
        let old = stamped(codec, &[NOW - 10 * HOUR]);
        assert_eq!(check(&old, &limits), Ok(1));
        let strict = rule(TimestampType::CreateTime, HOUR, HOUR);
        assert!(matches!(
            check(&old, &strict),
            Err(BatchError::Records(RecordErrors { named: errors, .. })) if errors.len() == 1 && errors[0].batch_index == 0
                && matches!(errors[0].fault, TimestampOutOfRange { min, .. } if min == NOW - HOUR)
        ));
        // -1 (no timestamp) is never checked against the window.
        assert_eq!(check(&stamped(codec, &[-1]), &strict), Ok(1));
        // A LogAppendTime topic checks no window.
        let lat = rule(TimestampType::LogAppendTime, HOUR, HOUR);
        assert_eq!(check(&stamped(codec, &[NOW + 100 * HOUR]), &lat), Ok(1));
    }
}

/// The LogAppendTime attribute from a client: refused on a LogAppendTime topic (and for
/// records without a timestamp), accepted on a CreateTime topic when the stamp is in range,
/// as Kafka's `validateTimestamp` decides per record.
#[test]
fn log_append_time_attribute_from_client() {
    let batch = BatchBuilder::new(Compression::None)
        .timestamp_type(TimestampType::LogAppendTime)
        .max_timestamp(NOW)
        .push(Some(b"k"), Some(b"v"), &[], NOW)
        .build();
    let create = rule(TimestampType::CreateTime, i64::MAX, HOUR);
    let lat = rule(TimestampType::LogAppendTime, i64::MAX, HOUR);
    assert_eq!(check(&batch, &create), Ok(1));
    let fault = RecordFault::LogAppendTime {
        offset: 0,
        timestamp: NOW,
        key_bytes: 1,
        value_bytes: 1,
    };
    assert_eq!(check(&batch, &lat), Err(refused(&[(0, fault)])));
    assert_eq!(
        check(&batch, &LIMITS),
        Err(BatchError::LogAppendTimeFromClient)
    );
}

/// A compacted topic: a keyless record's key error wins over its timestamp, but any other
/// record's timestamp error makes the batch INVALID_TIMESTAMP.
#[test]
fn key_errors_and_timestamp_errors_order() {
    let mut limits = rule(TimestampType::CreateTime, i64::MAX, HOUR);
    limits.require_keys = true;
    let batch = BatchBuilder::new(Compression::None)
        .push(None, Some(b"v"), &[], NOW + 2 * HOUR)
        .push(Some(b"k"), Some(b"v"), &[], NOW)
        .build();
    assert_eq!(check(&batch, &limits), Err(refused(&[(0, MissingKey)])));
    let batch = BatchBuilder::new(Compression::None)
        .push(None, Some(b"v"), &[], NOW)
        .push(Some(b"k"), Some(b"v"), &[], NOW + 2 * HOUR)
        .build();
    let err = check(&batch, &limits);
    assert!(
        matches!(&err, Err(BatchError::Records(RecordErrors { named: errors, count: 2, any_timestamp: true })) if errors.len() == 2
            && errors[0] == RecordError { batch_index: 0, fault: MissingKey }
            && errors[1].batch_index == 1
            && matches!(errors[1].fault, TimestampOutOfRange { offset: 1, .. })
            && errors[1].fault.is_timestamp()),
        "{err:?}"
    );
}

/// Kafka collects every refused record of a batch, not only the first (KIP-467), in record
/// order, compressed or not.
#[test]
fn every_refused_record_is_named() {
    let mut limits = rule(TimestampType::CreateTime, i64::MAX, HOUR);
    limits.require_keys = true;
    for codec in CODECS {
        let batch = BatchBuilder::new(codec)
            .push(Some(b"k"), Some(b"v"), &[], NOW)
            .push(None, Some(b"v"), &[], NOW)
            .push(Some(b"k"), Some(b"v"), &[], NOW + 3 * HOUR)
            .push(None, Some(b"v"), &[], NOW)
            .push(Some(b"k"), Some(b"v"), &[], NOW)
            .push(Some(b"k"), Some(b"v"), &[], NOW + 4 * HOUR)
            .build();
        let err = check(&batch, &limits);
        let Err(BatchError::Records(RecordErrors {
            named: errors,
            count: 4,
            any_timestamp: true,
        })) = &err
        else {
            panic!("{codec:?} {err:?}");
        };
        let named: Vec<(i32, bool)> = errors
            .iter()
            .map(|e| (e.batch_index, e.fault.is_timestamp()))
            .collect();
        assert_eq!(
            named,
            vec![(1, false), (2, true), (3, false), (5, true)],
            "{codec:?}"
        );
        // Only keys: every keyless record, no timestamp fault.
        let keys_only = BatchBuilder::new(codec)
            .push(None, Some(b"v"), &[], NOW)
            .push(None, Some(b"v"), &[], NOW)
            .build();
        assert_eq!(
            check(&keys_only, &limits),
            Err(refused(&[(0, MissingKey), (1, MissingKey)])),
            "{codec:?}"
        );
    }
}

/// `stamped_header` + the untouched rest is a valid batch with the new attribute and max
/// timestamp, the same base timestamp and records, and the CRC a full recomputation gives.
#[test]
fn stamped_header_rewrites_only_type_max_timestamp_and_crc() {
    for codec in CODECS {
        let sent = stamped(codec, &[NOW - 5, NOW - 2, NOW - 9]);
        let header = wire::record_batch::stamped_header(
            &sent,
            120,
            7,
            TimestampType::LogAppendTime,
            NOW + 1,
        );
        let mut stored = header.to_vec();
        stored.extend_from_slice(&sent[BATCH_HEADER_BYTES..]);
        let h = validate_batch(&stored).expect("valid CRC");
        let before = validate_batch(&sent).unwrap();
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(h.max_timestamp, NOW + 1);
        assert_eq!(h.base_offset, 120);
        assert_eq!(h.partition_leader_epoch, 7);
        assert_eq!(h.base_timestamp, before.base_timestamp);
        assert_eq!(h.compression(), codec);
        assert_eq!(
            (
                h.producer_id,
                h.base_sequence,
                h.records_count,
                h.last_offset_delta
            ),
            (
                before.producer_id,
                before.base_sequence,
                before.records_count,
                before.last_offset_delta
            )
        );
        assert_eq!(&stored[BATCH_HEADER_BYTES..], &sent[BATCH_HEADER_BYTES..]);
        // Readers see the append time on every record.
        let records = wire::record_batch::records(&stored).unwrap();
        for r in records.iter() {
            assert_eq!(r.unwrap().timestamp, NOW + 1);
        }
        // And back to CreateTime with the computed max.
        let header =
            wire::record_batch::stamped_header(&stored, 0, -1, TimestampType::CreateTime, NOW - 2);
        let mut again = header.to_vec();
        again.extend_from_slice(&sent[BATCH_HEADER_BYTES..]);
        let h = validate_batch(&again).unwrap();
        assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
        assert_eq!(h.max_timestamp, NOW - 2);
    }
}

/// A batch of more refused records than are named: the first ones are named, the count and
/// the timestamp flag cover them all (a timestamp fault past the named ones still makes the
/// batch INVALID_TIMESTAMP).
#[test]
fn refused_records_past_the_named_bound_are_counted() {
    let mut limits = rule(TimestampType::CreateTime, i64::MAX, HOUR);
    limits.require_keys = true;
    let keyless = MAX_NAMED_RECORD_ERRORS + 5;
    let mut builder = BatchBuilder::new(Compression::Lz4);
    for _ in 0..keyless {
        builder = builder.push(None, None, &[], NOW);
    }
    let batch = builder.push(Some(b"k"), None, &[], NOW + 2 * HOUR).build();
    let err = check(&batch, &limits);
    let Err(BatchError::Records(errors)) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(errors.named.len(), MAX_NAMED_RECORD_ERRORS);
    assert_eq!(errors.count, keyless + 1);
    assert!(errors.any_timestamp);
    assert!(errors
        .named
        .iter()
        .enumerate()
        .all(|(i, e)| e.batch_index == i as i32 && e.fault == MissingKey));
}
