//! Produce: group the request's partitions by the shard that owns them, hand each shard its
//! batches in one call (locally or one mesh message), run the shards at once, and answer in
//! request order. acks=0 gets no response at all (answering would desynchronise the client's
//! correlation ids).

use std::collections::HashMap;
use std::rc::Rc;

use smallvec::{smallvec, SmallVec};

use wire::generated::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use wire::generated::{ProduceRequest, ProduceResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward::{self, ProduceResult};
use crate::metadata::image::Image;
use crate::partition_ops::{ProducePart, RefusedRecords};
use crate::shard::Shard;

fn failed(code: ErrorCode) -> ProduceResult {
    ProduceResult {
        error_code: code.code(),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        refused: None,
    }
}

/// Produce at a version we do not serve (v0-2, message formats 0 and 1): every partition
/// gets UNSUPPORTED_VERSION (nothing for acks=0).
pub fn unsupported_version(request: ProduceRequest, ctx: &RequestContext) -> Response {
    if request.acks == 0 {
        return Ok(None);
    }
    let response = build_response(
        &request,
        std::iter::repeat(failed(ErrorCode::UnsupportedVersion)),
    );
    encode_response(ctx, ctx.api_version, &response)
}

/// The response to `request`, taking one result per partition in request order.
fn build_response(
    request: &ProduceRequest,
    mut results: impl Iterator<Item = ProduceResult>,
) -> ProduceResponse {
    let responses = request
        .topic_data
        .iter()
        .map(|topic| TopicProduceResponse {
            name: topic.name.clone(),
            partition_responses: topic
                .partition_data
                .iter()
                .map(|partition| {
                    let result = results.next().expect("one result per partition");
                    // KIP-467 (v8+; the encoder leaves both out below v8).
                    let (record_errors, error_message) = match result.refused {
                        Some(refused) => {
                            let RefusedRecords {
                                record_errors,
                                error_message,
                            } = *refused;
                            let record_errors = record_errors
                                .into_iter()
                                .map(|(batch_index, message)| BatchIndexAndErrorMessage {
                                    batch_index,
                                    batch_index_error_message: Some(message),
                                    ..Default::default()
                                })
                                .collect();
                            (record_errors, Some(error_message))
                        }
                        None => (Vec::new(), None),
                    };
                    PartitionProduceResponse {
                        index: partition.index,
                        error_code: result.error_code,
                        base_offset: result.base_offset,
                        log_append_time_ms: result.log_append_time_ms,
                        log_start_offset: result.log_start_offset,
                        record_errors,
                        error_message,
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    ProduceResponse {
        responses,
        throttle_time_ms: 0,
        ..Default::default()
    }
}

/// Where the partitions of one Produce request go: the parts each shard appends (one mesh
/// message or local call per shard, not per partition) and the request positions their
/// results fill. Partitions answered without a shard (bad acks, unknown topic or partition,
/// the internal offsets topic) have their result already.
///
/// Inline capacities: a request of a few partitions (librdkafka's one-partition requests at
/// low rates above all) plans without an allocation of its own besides each shard's parts.
struct Plan {
    /// One per partition, in request order; `None` until its shard answers.
    results: SmallVec<[Option<ProduceResult>; 4]>,
    /// In order of each shard's first partition in the request.
    shards: SmallVec<[ShardParts; 2]>,
}

struct ShardParts {
    target: usize,
    /// Request positions of `parts`, in the same order.
    slots: SmallVec<[usize; 4]>,
    parts: Vec<ProducePart>,
}

/// `allowed`: whether the request may WRITE to a topic, asked once per topic of the request
/// (not per partition); a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED before
/// any other check, as Kafka's.
fn plan(
    request: &ProduceRequest,
    version: i16,
    image: &Image,
    shard_count: usize,
    mut allowed: impl FnMut(&str) -> bool,
) -> Plan {
    let valid_acks = matches!(request.acks, -1..=1);
    let mut results = SmallVec::new();
    let mut shards: SmallVec<[ShardParts; 2]> = SmallVec::new();
    for topic in &request.topic_data {
        let topic_image = image.topic(&topic.name);
        let authorized = allowed(&topic.name);
        for partition in &topic.partition_data {
            // Kafka's order: WRITE on the topic, the partition's existence and the shape of
            // its records (KafkaApis), then the acks and the internal topics (ReplicaManager).
            let found = topic_image.and_then(|t| t.partition(partition.index).map(|p| (t, p)));
            let owner = match found {
                _ if !authorized => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(_) if records_shape_error(version, partition.records.as_deref()).is_some() => {
                    Err(records_shape_error(version, partition.records.as_deref())
                        .unwrap_or(ErrorCode::InvalidRecord))
                }
                _ if !valid_acks => Err(ErrorCode::InvalidRequiredAcks),
                // Kafka: "Cannot append to internal topic" for clients.
                Some(_)
                    if topic.name == crate::group::OFFSETS_TOPIC
                        || topic.name == crate::txn::TXN_TOPIC =>
                {
                    Err(ErrorCode::InvalidTopicException)
                }
                Some((topic_image, owner)) => Ok((
                    topic_image.topic_id,
                    crate::shard::owner(owner.shard, shard_count),
                )),
            };
            let (topic_id, target) = match owner {
                Ok(owner) => owner,
                Err(code) => {
                    results.push(Some(failed(code)));
                    continue;
                }
            };
            let slot = results.len();
            results.push(None);
            let part = ProducePart {
                topic_id,
                partition: partition.index,
                records: partition.records.clone().unwrap_or_default(),
            };
            match shards.iter_mut().find(|s| s.target == target) {
                Some(shard) => {
                    shard.slots.push(slot);
                    shard.parts.push(part);
                }
                None => shards.push(ShardParts {
                    target,
                    slots: smallvec![slot],
                    parts: vec![part],
                }),
            }
        }
    }
    Plan { results, shards }
}

/// Kafka's `ProduceRequest.validateRecords` (v3+), run before the acks are checked: the
/// records must hold exactly one whole batch of magic 2 (INVALID_RECORD), read as
/// `MemoryRecords.batches()` reads them: fewer than 12 bytes, or a batch longer than what is
/// there, is no batch; a size field below 14 (the v0 record overhead) is CORRUPT_MESSAGE, also
/// for a second batch; a second batch cut short is not one (the append trims it). Null
/// records are not checked (as Kafka). Versions 0-2 are not checked (Kafka neither).
fn records_shape_error(version: i16, records: Option<&[u8]>) -> Option<ErrorCode> {
    const LOG_OVERHEAD: usize = 12;
    const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
    const RECORD_OVERHEAD_V0: i32 = 14;
    const MAGIC_OFFSET: usize = 16;
    let records = records?;
    if version < 3 {
        return None;
    }
    // The size of the batch at `at` (with its 12-byte log overhead), None when no batch.
    let batch_at = |at: usize| -> Result<Option<usize>, ErrorCode> {
        let remaining = records.len().saturating_sub(at);
        if remaining < LOG_OVERHEAD {
            return Ok(None);
        }
        let size = i32::from_be_bytes(records[at + 8..at + 12].try_into().expect("4 bytes"));
        if size < RECORD_OVERHEAD_V0 {
            return Err(ErrorCode::CorruptMessage);
        }
        let whole = size as usize + LOG_OVERHEAD;
        if remaining < HEADER_SIZE_UP_TO_MAGIC || remaining < whole {
            return Ok(None);
        }
        Ok(Some(whole))
    };
    let first = match batch_at(0) {
        Err(code) => return Some(code),
        Ok(None) => return Some(ErrorCode::InvalidRecord),
        Ok(Some(size)) => size,
    };
    if records[MAGIC_OFFSET] != 2 {
        return Some(ErrorCode::InvalidRecord);
    }
    match batch_at(first) {
        Err(code) => Some(code),
        Ok(None) => None,
        Ok(Some(_)) => Some(ErrorCode::InvalidRecord),
    }
}

/// Fills `results` from one shard's reply to the parts at `slots`.
fn fill(results: &mut [Option<ProduceResult>], slots: &[usize], answers: Vec<ProduceResult>) {
    match answers {
        answers if answers.len() == slots.len() => {
            for (&slot, answer) in slots.iter().zip(answers) {
                results[slot] = Some(answer);
            }
        }
        _ => {
            for &slot in slots {
                results[slot] = Some(failed(ErrorCode::UnknownServerError));
            }
        }
    }
}

/// Kafka's `RequestUtils.hasTransactionalRecords`: some partition's first batch is
/// transactional.
fn has_transactional_records(request: &ProduceRequest) -> bool {
    request.topic_data.iter().any(|topic| {
        topic.partition_data.iter().any(|partition| {
            partition.records.as_ref().is_some_and(|records| {
                wire::record_batch::BatchHeader::parse(records)
                    .is_ok_and(|header| header.is_transactional())
            })
        })
    })
}

/// Kafka keys a Produce request by partition: a topic named twice is answered in one entry,
/// and a partition listed twice is appended and answered once, with its last listing's
/// records. Drops the earlier listings (and a topic left with none); allocates nothing for a
/// request that names each topic and partition once.
fn keep_last_listing(request: &mut ProduceRequest) {
    super::keyed::merge_topics(
        &mut request.topic_data,
        |topic| topic.name.as_str(),
        |topic| &mut topic.partition_data,
    );
    let listings: usize = request
        .topic_data
        .iter()
        .map(|t| t.partition_data.len())
        .sum();
    if listings < 2 {
        return;
    }
    let mut last: HashMap<(&str, i32), usize> = HashMap::with_capacity(listings);
    let mut position = 0;
    for topic in &request.topic_data {
        for partition in &topic.partition_data {
            last.insert((topic.name.as_str(), partition.index), position);
            position += 1;
        }
    }
    if last.len() == listings {
        return;
    }
    let keep: Vec<bool> = request
        .topic_data
        .iter()
        .flat_map(|topic| topic.partition_data.iter().map(move |p| (topic, p)))
        .enumerate()
        .map(|(at, (topic, partition))| last[&(topic.name.as_str(), partition.index)] == at)
        .collect();
    let mut keep = keep.into_iter();
    request.topic_data.retain_mut(|topic| {
        let listed = topic.partition_data.len();
        topic
            .partition_data
            .retain(|_| keep.next().expect("one flag per listing"));
        listed == 0 || !topic.partition_data.is_empty()
    });
}

pub async fn handle(
    shard: Rc<Shard>,
    mut request: ProduceRequest,
    ctx: RequestContext,
) -> Response {
    keep_last_listing(&mut request);
    let acks = request.acks;
    let timeout_ms = request.timeout_ms.max(0) as u64;
    // Kafka: transactional records need WRITE on the transactional id, or the whole request
    // is refused.
    if shard.authorizes(&ctx) && has_transactional_records(&request) {
        let allowed = request.transactional_id.as_deref().is_some_and(|id| {
            shard.authorize(
                &ctx,
                acl::AclOperation::Write,
                acl::ResourceType::TransactionalId,
                id,
            )
        });
        if !allowed {
            if acks == 0 {
                return Err(
                    "acks=0 produce refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: \
                            closing the connection as Kafka does"
                        .into(),
                );
            }
            let refused = build_response(
                &request,
                std::iter::repeat_with(|| failed(ErrorCode::TransactionalIdAuthorizationFailed)),
            );
            return encode_response(&ctx, ctx.api_version, &refused);
        }
    }
    let Plan {
        mut results,
        mut shards,
    } = plan(
        &request,
        ctx.api_version,
        &shard.image(),
        shard.shard_count(),
        |topic| {
            shard.authorize(
                &ctx,
                acl::AclOperation::Write,
                acl::ResourceType::Topic,
                topic,
            )
        },
    );
    // Which shard owns what this connection touches (connection handoff).
    for parts in &shards {
        for _ in &parts.parts {
            ctx.tally.note(parts.target);
        }
    }
    // Remote shards first, so their messages are on the ring before this shard spends time on
    // its own appends. Order across partitions does not matter; what does is that every call
    // starts (remote: pushed on the ring; local: appended) at the first poll, with no
    // `.await` before it, so two requests of one connection reach each log in order.
    shards.sort_by_key(|s| s.target == shard.id);
    if shards.len() == 1 {
        // One shard (every partition of most requests): its call alone, no join.
        let s = shards.pop().expect("one");
        let request = forward::Produce {
            acks,
            timeout_ms,
            parts: s.parts,
        };
        let reply = shard.call(s.target, request).await;
        fill(&mut results, &s.slots, reply);
    } else {
        let calls = shards.into_iter().map(|s| {
            let shard = shard.clone();
            async move {
                let request = forward::Produce {
                    acks,
                    timeout_ms,
                    parts: s.parts,
                };
                (s.slots, shard.call(s.target, request).await)
            }
        });
        for (slots, reply) in futures::future::join_all(calls).await {
            fill(&mut results, &slots, reply);
        }
    }
    if acks == 0 {
        // An acks=0 client reads no answer: as Kafka, a failed partition closes the
        // connection, the only signal it gets (it then refreshes its metadata).
        let failed = results
            .iter()
            .flatten()
            .find(|result| result.error_code != 0)
            .map(|result| result.error_code);
        return match failed {
            None => Ok(None),
            Some(code) => Err(format!(
                "acks=0 produce failed with {}: closing the connection as Kafka does",
                ErrorCode::from_code_or_unknown(code).kafka_name()
            )),
        };
    }
    let results = results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| failed(ErrorCode::UnknownServerError)));
    let mut response = build_response(&request, results);
    response.throttle_time_ms = ctx.throttle_ms;
    if shard.cluster.is_some() && ctx.api_version >= KIP_951_PRODUCE_VERSION {
        point_to_leaders(&shard, &ctx.listener, &mut response);
    }
    let encoded = encode_response(&ctx, ctx.api_version, &response);
    if let (Some(quota), Ok(Some(frame))) = (&ctx.request_quota, &encoded) {
        // The request-time throttle is written after the partitions, before the tagged
        // fields (v9+): one empty byte, unless the response names leaders' endpoints
        // (KIP-951, after a leader moved), where the throttle only mutes the connection.
        if response.node_endpoints.is_empty() {
            quota.produce_encoded(frame.len(), ctx.api_version);
        }
    }
    encoded
}

/// The first Produce version whose response names the current leader (KIP-951).
const KIP_951_PRODUCE_VERSION: i16 = 10;

/// KIP-951: a partition refused with NOT_LEADER_OR_FOLLOWER names its current leader and
/// epoch, and the response carries that leader's endpoint, so the client moves at once
/// instead of refreshing its metadata first (v10+; older versions have neither field).
fn point_to_leaders(shard: &Rc<Shard>, listener: &str, response: &mut ProduceResponse) {
    use super::cluster_view::{current_leader, endpoints_of};
    let image = shard.image();
    let not_leader = ErrorCode::NotLeaderOrFollower.code();
    let mut leaders = Vec::new();
    for topic in &mut response.responses {
        let known = image.topic(&topic.name).map(|t| &**t);
        for partition in &mut topic.partition_responses {
            if partition.error_code != not_leader {
                continue;
            }
            if let Some((leader, epoch)) = current_leader(known, partition.index) {
                partition.current_leader.leader_id = leader;
                partition.current_leader.leader_epoch = epoch;
                leaders.push(leader);
            }
        }
    }
    response.node_endpoints = endpoints_of(shard, listener, &leaders)
        .into_iter()
        .map(|b| wire::generated::produce_response::NodeEndpoint {
            node_id: b.node_id,
            host: b.host,
            port: b.port,
            rack: b.rack,
            ..Default::default()
        })
        .collect();
}

#[cfg(test)]
#[path = "produce_tests.rs"]
mod tests;
