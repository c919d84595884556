//! DescribeProducers (KIP-664, v0): the idempotent producers of each partition, answered by
//! the shard that owns it (as ListOffsets is). An unknown topic or partition is
//! UNKNOWN_TOPIC_OR_PARTITION, as Kafka's `ReplicaManager.activeProducerState` answers; an
//! illegal topic name INVALID_TOPIC_EXCEPTION (see `topic_error`).

use std::collections::HashMap;
use std::rc::Rc;

use wire::generated::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use wire::generated::{DescribeProducersRequest, DescribeProducersResponse};
use wire::ErrorCode;

use super::by_shard::ByShard;
use super::{encode_response, RequestContext, Response};
use crate::forward::{self, ProducerInfo};
use crate::shard::Shard;

/// Kafka's topic-level checks, in its order (`KafkaApis.handleDescribeProducersRequest`): a
/// name that is not legal (`Topic.validate`: INVALID_TOPIC_EXCEPTION with the reason), then
/// READ on the topic, then its existence; these carry a message (Kafka's `ApiError`).
fn topic_error(
    name: &str,
    exists: bool,
    authorized: impl FnOnce() -> bool,
) -> Option<(ErrorCode, String)> {
    // `Topic.validate` does not reserve the metadata log's name (it is just unknown).
    if name != crate::metadata::METADATA_TOPIC {
        if let Err(crate::metadata::CreateTopicError::InvalidTopic(message)) =
            crate::metadata::validate_topic_name(name)
        {
            return Some((ErrorCode::InvalidTopicException, message));
        }
    }
    let code = if !authorized() {
        ErrorCode::TopicAuthorizationFailed
    } else if !exists {
        ErrorCode::UnknownTopicOrPartition
    } else {
        return None;
    };
    Some((code, code.message().to_string()))
}

pub async fn handle(
    shard: Rc<Shard>,
    request: DescribeProducersRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    // Kafka answers every listing of the request, repeats included; a partition listed more
    // than once is looked up once here and its answer given to each listing.
    let mut distinct: HashMap<(&str, i32), usize> = HashMap::new();
    let mut listing_answer: Vec<usize> = Vec::new();
    let mut answers: Vec<Option<(i16, Vec<ProducerInfo>)>> = Vec::new();
    // The error message of each slot (Kafka's, for a topic-level error).
    let mut messages: Vec<Option<String>> = Vec::new();
    let mut by_shard = ByShard::new(shard.shard_count());
    for topic in &request.topics {
        let topic_image = image.topic(&topic.name);
        let topic_error = topic_error(&topic.name, topic_image.is_some(), || {
            // Kafka: READ on the topic, before its existence is told.
            shard.authorize(
                &ctx,
                acl::AclOperation::Read,
                acl::ResourceType::Topic,
                &topic.name,
            )
        });
        for &partition in &topic.partition_indexes {
            let next = answers.len();
            let slot = *distinct
                .entry((topic.name.as_str(), partition))
                .or_insert(next);
            listing_answer.push(slot);
            if slot != next {
                continue;
            }
            if let Some((code, message)) = &topic_error {
                answers.push(Some((code.code(), Vec::new())));
                messages.push(Some(message.clone()));
                continue;
            }
            messages.push(None);
            match topic_image.and_then(|t| t.partition(partition).map(|p| (t, p))) {
                // A partition the topic does not have: Kafka's `activeProducerState`, no
                // message.
                None => {
                    answers.push(Some((
                        ErrorCode::UnknownTopicOrPartition.code(),
                        Vec::new(),
                    )));
                }
                Some((topic_image, owner)) => {
                    answers.push(None);
                    by_shard.add(shard.owner(owner), slot, (topic_image.topic_id, partition));
                }
            }
        }
    }
    by_shard
        .run(&shard, &mut answers, |parts| forward::DescribeProducers {
            parts,
        })
        .await;
    let mut results = listing_answer.into_iter().map(|slot| {
        let (code, producers) = answers[slot]
            .clone()
            .expect("every partition looked up is answered");
        (code, messages[slot].clone(), producers)
    });
    let topics = request
        .topics
        .iter()
        .map(|topic| TopicResponse {
            name: topic.name.clone(),
            partitions: topic
                .partition_indexes
                .iter()
                .map(|&partition_index| {
                    let (error_code, error_message, producers) =
                        results.next().expect("one per partition");
                    PartitionResponse {
                        partition_index,
                        error_code,
                        error_message,
                        active_producers: producers
                            .into_iter()
                            .map(|p| ProducerState {
                                producer_id: p.producer_id,
                                producer_epoch: i32::from(p.producer_epoch),
                                last_sequence: p.last_sequence,
                                last_timestamp: p.last_timestamp,
                                coordinator_epoch: p.coordinator_epoch,
                                current_txn_start_offset: p.current_txn_start_offset,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let response = DescribeProducersResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_illegal_topic_name_is_invalid_topic_before_authorization() {
        let refused = || panic!("the name is checked first");
        for name in ["", "bad name!", &"x".repeat(250), ".", ".."] {
            let (code, message) = topic_error(name, false, refused).expect("refused");
            assert_eq!(code, ErrorCode::InvalidTopicException, "{name:?}");
            assert!(!message.is_empty());
        }
        let code = |name, exists, authorized| topic_error(name, exists, || authorized).map(|e| e.0);
        assert_eq!(
            code("t", true, false),
            Some(ErrorCode::TopicAuthorizationFailed)
        );
        assert_eq!(
            code("t", false, true),
            Some(ErrorCode::UnknownTopicOrPartition)
        );
        assert_eq!(
            code("__cluster_metadata", false, true),
            Some(ErrorCode::UnknownTopicOrPartition)
        );
        assert_eq!(code("t", true, true), None);
    }
}
