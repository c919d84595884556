//! One call per shard carrying all that shard's partitions: the plan groups a request's
//! partitions by owner in request order, each shard appends its parts in order, and the
//! answer lists every partition in request order with its own error.

use std::rc::Rc;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use wire::generated::produce_request::{PartitionProduceData, TopicProduceData};
use wire::generated::{ProduceRequest, ProduceResponse};
use wire::primitives::Decodable;
use wire::ErrorCode;

use super::{fill, handle, keep_last_listing, plan, records_shape_error};
use crate::forward::ProduceResult;
use crate::handlers::RequestContext;
use crate::metadata::image::Image;
use crate::metadata::records::{MetadataRecord, TopicId};
use crate::partition_ops::{produce_many, ProducePart};
use crate::shard::Shard;

const A: TopicId = [1; 16];
const B: TopicId = [2; 16];
const OFFSETS: TopicId = [3; 16];

/// Topic "a": partitions 0..4 on shards 0, 1, 0, 1; "b": partition 0 on shard 1;
/// `__consumer_offsets`: partition 0 on shard 0.
fn image() -> Image {
    let partition = |topic_id: TopicId, partition_id: i32, shard: u16| MetadataRecord::Partition {
        topic_id,
        partition_id,
        replicas: vec![1],
        leader: 1,
        leader_epoch: 0,
        isr: vec![1],
        partition_epoch: 0,
        shard,
    };
    let mut image = Image::default();
    image.apply_all(&[
        MetadataRecord::Topic {
            name: "a".into(),
            topic_id: A,
        },
        partition(A, 0, 0),
        partition(A, 1, 1),
        partition(A, 2, 0),
        partition(A, 3, 1),
        MetadataRecord::Topic {
            name: "b".into(),
            topic_id: B,
        },
        partition(B, 0, 1),
        MetadataRecord::Topic {
            name: crate::group::OFFSETS_TOPIC.into(),
            topic_id: OFFSETS,
        },
        partition(OFFSETS, 0, 0),
    ]);
    image
}

fn request(acks: i16, topics: &[(&str, &[(i32, Bytes)])]) -> ProduceRequest {
    ProduceRequest {
        acks,
        timeout_ms: 30_000,
        topic_data: topics
            .iter()
            .map(|(name, partitions)| TopicProduceData {
                name: name.to_string(),
                partition_data: partitions
                    .iter()
                    .map(|(index, records)| PartitionProduceData {
                        index: *index,
                        records: Some(records.clone()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// One uncompressed v2 batch of `count` records with 1-byte values, stamped now.
fn batch(count: i32) -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut body = Vec::new();
    for i in 0..count {
        // attributes, timestamp delta 0, offset delta i, key null (-1), value length 1, 'v',
        // no headers; all varints (zigzag).
        let record = [0u8, 0, (i as u8) << 1, 1, 2, b'v', 0];
        body.push((record.len() as u8) << 1);
        body.extend_from_slice(&record);
    }
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32((49 + body.len()) as i32);
    out.put_i32(0);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(0);
    out.put_i32(count - 1);
    out.put_i64(now);
    out.put_i64(now);
    out.put_i64(-1);
    out.put_i16(-1);
    out.put_i32(-1);
    out.put_i32(count);
    out.put_slice(&body);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// One uncompressed v2 batch with a record per entry of `keys` (a 1-byte key `k` where
/// true, none where false), each with a 1-byte value and timestamp `now + ahead_ms[i]`.
fn keyed_batch(keys: &[bool], ahead_ms: &[i64]) -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut body = Vec::new();
    for (i, &keyed) in keys.iter().enumerate() {
        let mut record = vec![0u8];
        put_varint(&mut record, ahead_ms[i]);
        put_varint(&mut record, i as i64);
        if keyed {
            record.extend_from_slice(&[2, b'k']);
        } else {
            record.push(1);
        }
        record.extend_from_slice(&[2, b'v', 0]);
        put_varint(&mut body, record.len() as i64);
        body.extend_from_slice(&record);
    }
    let max_timestamp = now + ahead_ms.iter().copied().max().unwrap_or(0);
    let count = keys.len() as i32;
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32((49 + body.len()) as i32);
    out.put_i32(0);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(0);
    out.put_i32(count - 1);
    out.put_i64(now);
    out.put_i64(max_timestamp);
    out.put_i64(-1);
    out.put_i16(-1);
    out.put_i32(-1);
    out.put_i32(count);
    out.put_slice(&body);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// A zigzag varint, as record fields are encoded.
fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// `batch` with its CRC broken.
fn corrupt() -> Bytes {
    let mut bad = batch(1).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    Bytes::from(bad)
}

fn codes(results: &[Option<ProduceResult>]) -> Vec<Option<i16>> {
    results
        .iter()
        .map(|r| r.as_ref().map(|r| r.error_code))
        .collect()
}

#[test]
fn plan_groups_partitions_by_shard_in_request_order() {
    let one = batch(1);
    let request = request(
        1,
        &[
            (
                "a",
                &[
                    (0, one.clone()),
                    (1, one.clone()),
                    (2, one.clone()),
                    (9, one.clone()),
                ],
            ),
            ("nope", &[(0, one.clone())]),
            ("b", &[(0, one.clone())]),
            ("a", &[(3, one.clone())]),
        ],
    );
    let plan = plan(&request, 9, &image(), 2, |_| true);
    let unknown = Some(ErrorCode::UnknownTopicOrPartition.code());
    assert_eq!(
        codes(&plan.results),
        vec![None, None, None, unknown, unknown, None, None]
    );
    type Routed = (usize, Vec<usize>, Vec<(TopicId, i32)>);
    let shards: Vec<Routed> = plan
        .shards
        .iter()
        .map(|s| {
            let parts = s.parts.iter().map(|p| (p.topic_id, p.partition)).collect();
            (s.target, s.slots.to_vec(), parts)
        })
        .collect();
    assert_eq!(
        shards,
        vec![
            (0, vec![0, 2], vec![(A, 0), (A, 2)]),
            (1, vec![1, 5, 6], vec![(A, 1), (B, 0), (A, 3)]),
        ]
    );
    // One shard: everything goes to it, still in request order.
    let plan = super::plan(&request, 9, &image(), 1, |_| true);
    assert_eq!(plan.shards.len(), 1);
    assert_eq!(plan.shards[0].slots.to_vec(), vec![0, 1, 2, 5, 6]);
}

#[test]
fn plan_answers_bad_acks_and_internal_topic_without_a_shard() {
    let one = batch(1);
    let bad_acks = plan(
        &request(2, &[("a", &[(0, one.clone())])]),
        9,
        &image(),
        2,
        |_| true,
    );
    assert!(bad_acks.shards.is_empty());
    assert_eq!(
        codes(&bad_acks.results),
        vec![Some(ErrorCode::InvalidRequiredAcks.code())]
    );
    let internal = plan(
        &request(
            -1,
            &[
                (crate::group::OFFSETS_TOPIC, &[(0, one.clone())]),
                ("a", &[(0, one)]),
            ],
        ),
        9,
        &image(),
        2,
        |_| true,
    );
    assert_eq!(
        codes(&internal.results),
        vec![Some(ErrorCode::InvalidTopicException.code()), None]
    );
    assert_eq!(internal.shards.len(), 1);
}

#[test]
fn plan_refuses_unauthorized_topics_first_and_asks_once_per_topic() {
    let one = batch(1);
    let mut asked = Vec::new();
    let refused = plan(
        &request(
            7,
            &[
                ("a", &[(0, one.clone()), (1, one.clone())]),
                ("missing", &[(0, one)]),
            ],
        ),
        9,
        &image(),
        2,
        |topic| {
            asked.push(topic.to_string());
            false
        },
    );
    assert_eq!(asked, vec!["a".to_string(), "missing".to_string()]);
    assert!(refused.shards.is_empty());
    // Before the bad acks and the unknown topic, as Kafka's checks run.
    let denied = Some(ErrorCode::TopicAuthorizationFailed.code());
    assert_eq!(codes(&refused.results), vec![denied, denied, denied]);
}

#[test]
fn a_partition_listed_twice_keeps_only_its_last_listing() {
    let (one, two, three) = (batch(1), batch(2), batch(3));
    let mut req = request(
        1,
        &[
            ("a", &[(0, one.clone()), (1, two.clone())]),
            ("b", &[(0, one.clone())]),
            ("a", &[(0, three.clone())]),
        ],
    );
    keep_last_listing(&mut req);
    let listed: Vec<(&str, i32, usize)> = req
        .topic_data
        .iter()
        .flat_map(|t| {
            t.partition_data
                .iter()
                .map(move |p| (t.name.as_str(), p.index, p.records.as_ref().unwrap().len()))
        })
        .collect();
    assert_eq!(
        listed,
        // `a`'s two entries are one, in its first place.
        vec![
            ("a", 1, two.len()),
            ("a", 0, three.len()),
            ("b", 0, one.len())
        ]
    );
    // Nothing dropped when every partition is listed once, including a topic with none.
    let mut req = request(1, &[("a", &[(0, one.clone())]), ("b", &[])]);
    keep_last_listing(&mut req);
    assert_eq!(req.topic_data.len(), 2);
    // A topic named twice with one partition is one entry with one listing, the last.
    let mut req = request(1, &[("a", &[(0, one.clone())]), ("a", &[(0, two.clone())])]);
    keep_last_listing(&mut req);
    assert_eq!(req.topic_data.len(), 1);
    assert_eq!(req.topic_data[0].partition_data.len(), 1);
    assert_eq!(req.topic_data[0].partition_data[0].records, Some(two));
}

#[test]
fn fill_puts_each_answer_at_its_request_position() {
    let ok = |base_offset| ProduceResult {
        error_code: 0,
        base_offset,
        log_append_time_ms: -1,
        log_start_offset: 0,
        refused: None,
    };
    let mut results = vec![None; 4];
    fill(&mut results, &[3, 1], vec![ok(30), ok(10)]);
    assert_eq!(results[3].as_ref().unwrap().base_offset, 30);
    assert_eq!(results[1].as_ref().unwrap().base_offset, 10);
    assert!(results[0].is_none() && results[2].is_none());
    // A reply that does not match the parts sent fails each of them, not the request.
    fill(&mut results, &[0, 2], vec![ok(1)]);
    assert_eq!(
        codes(&results[..1]),
        vec![Some(ErrorCode::UnknownServerError.code())]
    );
    assert_eq!(
        results[2].as_ref().unwrap().error_code,
        ErrorCode::UnknownServerError.code()
    );
}

/// A one-shard broker holding topics "a" and "b" of `image()` under a temporary directory.
fn with_shard<F, Fut>(test: F)
where
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    with_shard_configured(&[], test)
}

/// `with_shard` with broker settings `extra` (`key=value`).
fn with_shard_configured<F, Fut>(extra: &[&str], test: F)
where
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let mut overrides = vec![format!("log.dirs={}", dir.path().display())];
    overrides.extend(extra.iter().map(|setting| setting.to_string()));
    let config = Arc::new(crate::config::load(None, &overrides).unwrap());
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let shard = Shard::new(0, config, Arc::new(Image::default()), None, None);
            shard.group_commit.spawn();
            let failures = shard.apply_image(Arc::new(image())).await;
            assert!(failures.is_empty(), "{failures:?}");
            test(shard.clone()).await;
            shard.close().await;
        })
        .unwrap()
        .join()
        .unwrap();
    drop(dir);
}

fn part(topic_id: TopicId, partition: i32, records: Bytes) -> ProducePart {
    ProducePart {
        topic_id,
        partition,
        records,
    }
}

#[test]
fn produce_many_appends_in_order_and_answers_each_partition() {
    with_shard(|shard| async move {
        let parts = vec![
            part(A, 0, batch(2)),
            part(A, 1, corrupt()),
            part(A, 0, batch(3)),
            part(A, 7, batch(1)),
            part(B, 0, batch(1)),
        ];
        let results = produce_many(&shard, 1, 30_000, parts).await;
        let summary: Vec<(i16, i64)> = results
            .iter()
            .map(|r| (r.error_code, r.base_offset))
            .collect();
        assert_eq!(
            summary,
            vec![
                (0, 0),
                (ErrorCode::CorruptMessage.code(), -1),
                (0, 2),
                (ErrorCode::NotLeaderOrFollower.code(), -1),
                (0, 0),
            ]
        );
        let a0 = shard.partition(&A, 0).unwrap();
        assert_eq!(a0.log.borrow().log_end_offset(), 5);
        assert_eq!(
            shard
                .partition(&A, 1)
                .unwrap()
                .log
                .borrow()
                .log_end_offset(),
            0
        );
    });
}

#[test]
fn produce_many_acks_all_answers_once_every_part_is_durable() {
    with_shard(|shard| async move {
        let parts = vec![
            part(A, 0, batch(1)),
            part(B, 0, batch(2)),
            part(A, 1, corrupt()),
        ];
        let results = produce_many(&shard, -1, 30_000, parts).await;
        assert_eq!(results[0].error_code, 0);
        assert_eq!(results[1].error_code, 0);
        assert_eq!(results[2].error_code, ErrorCode::CorruptMessage.code());
        for (topic_id, end) in [(A, 1), (B, 2)] {
            let log = shard.partition(&topic_id, 0).unwrap().log.clone();
            assert_eq!(log.borrow().log_end_offset(), end);
            assert!(log.borrow().durable_offset() >= end, "acked before durable");
        }
    });
}

fn context() -> RequestContext {
    RequestContext {
        api_key: 0,
        api_version: 8,
        correlation_id: 7,
        client_id: String::new(),
        listener: Rc::from("PLAINTEXT"),
        principal: Rc::from("User:ANONYMOUS"),
        host: Rc::from("127.0.0.1"),
        trusted: false,
        tally: crate::handoff::Tally::off(),
        error_counts: None,
        throttle_ms: 0,
        muted_until: Default::default(),
        request_quota: None,
    }
}

/// The ProduceResponse (v8, header v0) in `frame`.
fn decode(frame: crate::transport::Frame) -> ProduceResponse {
    let bytes = frame.to_vec().unwrap();
    assert_eq!(&bytes[4..8], &7i32.to_be_bytes(), "correlation id");
    ProduceResponse::decode(&mut Bytes::from(bytes[8..].to_vec()), 8).unwrap()
}

#[test]
fn handle_answers_in_request_order_and_acks_0_answers_nothing() {
    with_shard(|shard| async move {
        let one = batch(1);
        let mixed = request(
            1,
            &[
                ("a", &[(2, one.clone()), (1, corrupt()), (2, one.clone())]),
                ("nope", &[(4, one.clone())]),
                ("b", &[(0, batch(4))]),
            ],
        );
        let frame = handle(shard.clone(), mixed, context())
            .await
            .unwrap()
            .unwrap();
        let response = decode(frame);
        let answers: Vec<(String, i32, i16, i64)> = response
            .responses
            .iter()
            .flat_map(|t| {
                t.partition_responses
                    .iter()
                    .map(|p| (t.name.clone(), p.index, p.error_code, p.base_offset))
            })
            .collect();
        let corrupt_code = ErrorCode::CorruptMessage.code();
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(
            answers,
            // `a` 2, listed twice, is appended and answered once, in its last listing's place.
            vec![
                ("a".into(), 1, corrupt_code, -1),
                ("a".into(), 2, 0, 0),
                ("nope".into(), 4, unknown, -1),
                ("b".into(), 0, 0, 0),
            ]
        );
        // acks=0: appended, and no response at all.
        let silent = request(0, &[("a", &[(3, batch(2))]), ("b", &[(0, one)])]);
        assert!(handle(shard.clone(), silent, context())
            .await
            .unwrap()
            .is_none());
        assert_eq!(
            shard
                .partition(&A, 3)
                .unwrap()
                .log
                .borrow()
                .log_end_offset(),
            2
        );
        assert_eq!(
            shard
                .partition(&B, 0)
                .unwrap()
                .log
                .borrow()
                .log_end_offset(),
            5
        );
        // acks=all: answered once durable.
        let durable = request(-1, &[("a", &[(0, batch(1))])]);
        let response = decode(
            handle(shard.clone(), durable, context())
                .await
                .unwrap()
                .unwrap(),
        );
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
        let log = shard.partition(&A, 0).unwrap().log.clone();
        assert!(log.borrow().durable_offset() >= 1);
    });
}

/// KIP-467: a batch refused for some of its records names every one of them (index and
/// Kafka's message) and carries Kafka's summary; the batch is not stored.
#[test]
fn handle_names_every_refused_record_of_a_batch() {
    with_shard_configured(&["log.cleanup.policy=compact"], |shard| async move {
        let keys = [true, false, true, false, false, false];
        let refused = request(1, &[("a", &[(0, keyed_batch(&keys, &[0; 6]))])]);
        let response = decode(
            handle(shard.clone(), refused, context())
                .await
                .unwrap()
                .unwrap(),
        );
        let answer = &response.responses[0].partition_responses[0];
        assert_eq!(answer.error_code, ErrorCode::InvalidRecord.code());
        assert_eq!(answer.base_offset, -1);
        let keyless = "Compacted topic cannot accept message without key in topic partition a-0";
        let named: Vec<(i32, Option<&str>)> = answer
            .record_errors
            .iter()
            .map(|e| (e.batch_index, e.batch_index_error_message.as_deref()))
            .collect();
        assert_eq!(
            named,
            vec![
                (1, Some(keyless)),
                (3, Some(keyless)),
                (4, Some(keyless)),
                (5, Some(keyless))
            ]
        );
        let shown = |index| format!("RecordError(batchIndex={index}, message='{keyless}')");
        assert_eq!(
            answer.error_message.as_deref(),
            Some(
                format!(
                    "One or more records have been rejected due to 4 record errors in total, \
                     and only showing the first three errors at most: [{}, {}, {}]",
                    shown(1),
                    shown(3),
                    shown(4)
                )
                .as_str()
            )
        );
        assert_eq!(
            shard
                .partition(&A, 0)
                .unwrap()
                .log
                .borrow()
                .log_end_offset(),
            0
        );

        // A timestamp out of the window makes the batch INVALID_TIMESTAMP; a keyless
        // record's timestamp is not looked at, and its key error is still named.
        let hours_ahead = 10 * 3_600_000;
        let ahead = keyed_batch(&[true, false, true], &[hours_ahead, hours_ahead, 0]);
        let response = decode(
            handle(
                shard.clone(),
                request(1, &[("a", &[(0, ahead)])]),
                context(),
            )
            .await
            .unwrap()
            .unwrap(),
        );
        let answer = &response.responses[0].partition_responses[0];
        assert_eq!(answer.error_code, ErrorCode::InvalidTimestamp.code());
        assert_eq!(
            answer.error_message.as_deref(),
            Some("One or more records have been rejected due to invalid timestamp")
        );
        let indices: Vec<i32> = answer.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(indices, vec![0, 1]);
        let first = answer.record_errors[0].batch_index_error_message.as_deref();
        assert!(
            first.is_some_and(|m| m.starts_with("Timestamp ")
                && m.contains(
                    " of message with offset 0 is out of range. The timestamp should be within ["
                )),
            "{first:?}"
        );
        assert_eq!(
            answer.record_errors[1].batch_index_error_message.as_deref(),
            Some(keyless)
        );

        // A valid batch: no record errors, no message.
        let valid = request(1, &[("a", &[(0, keyed_batch(&[true, true], &[0, 0]))])]);
        let response = decode(
            handle(shard.clone(), valid, context())
                .await
                .unwrap()
                .unwrap(),
        );
        let answer = &response.responses[0].partition_responses[0];
        assert_eq!((answer.error_code, answer.base_offset), (0, 0));
        assert!(answer.record_errors.is_empty() && answer.error_message.is_none());
    });
}

#[test]
fn plan_checks_the_partition_then_the_records_then_the_acks() {
    let one = batch(1);
    let truncated = one.slice(..one.len() - 1);
    let req = request(
        5,
        &[
            (
                "a",
                &[
                    (9, one.clone()),
                    (0, truncated),
                    (1, Bytes::from_static(&[0; 7])),
                ],
            ),
            ("a", &[(2, one)]),
        ],
    );
    let planned = plan(&req, 9, &image(), 2, |_| true);
    let code = |c: ErrorCode| Some(c.code());
    assert_eq!(
        codes(&planned.results),
        vec![
            code(ErrorCode::UnknownTopicOrPartition),
            code(ErrorCode::InvalidRecord),
            code(ErrorCode::InvalidRecord),
            code(ErrorCode::InvalidRequiredAcks),
        ]
    );
}

#[test]
fn records_shape_is_kafkas_validate_records() {
    let one = batch(1).to_vec();
    let with = |extra: &[u8]| [one.as_slice(), extra].concat();
    assert_eq!(records_shape_error(9, Some(&one)), None);
    // The CRC is checked by the append, not here.
    assert_eq!(records_shape_error(9, Some(&corrupt())), None);
    assert_eq!(records_shape_error(9, None), None);
    assert_eq!(records_shape_error(2, Some(&[0; 7])), None);
    assert_eq!(
        records_shape_error(9, Some(&[])),
        Some(ErrorCode::InvalidRecord)
    );
    assert_eq!(
        records_shape_error(9, Some(&one[..one.len() - 1])),
        Some(ErrorCode::InvalidRecord)
    );
    let mut magic1 = one.clone();
    magic1[16] = 1;
    assert_eq!(
        records_shape_error(9, Some(&magic1)),
        Some(ErrorCode::InvalidRecord)
    );
    // A size below the v0 record overhead is corrupt.
    let mut tiny = one.clone();
    tiny[8..12].copy_from_slice(&13i32.to_be_bytes());
    assert_eq!(
        records_shape_error(9, Some(&tiny)),
        Some(ErrorCode::CorruptMessage)
    );
    // Two whole batches: not one; a second cut short, or a few trailing bytes: not a batch.
    assert_eq!(
        records_shape_error(9, Some(&with(&one))),
        Some(ErrorCode::InvalidRecord)
    );
    assert_eq!(records_shape_error(9, Some(&with(&one[..20]))), None);
    assert_eq!(records_shape_error(9, Some(&with(&[0; 5]))), None);
    assert_eq!(
        records_shape_error(9, Some(&with(&[0; 12]))),
        Some(ErrorCode::CorruptMessage)
    );
}
