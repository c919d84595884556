//! DescribeProducers (KIP-664, v0): the idempotent producers of each partition, answered by
//! the shard that owns it (as ListOffsets is). An unknown topic or partition is
//! UNKNOWN_TOPIC_OR_PARTITION, as Kafka's `ReplicaManager.activeProducerState` answers.

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
    let mut by_shard = ByShard::new(shard.shard_count());
    for topic in &request.topics {
        let topic_image = image.topic(&topic.name);
        // Kafka: READ on the topic, before its existence is told.
        let authorized = shard.authorize(
            &ctx,
            acl::AclOperation::Read,
            acl::ResourceType::Topic,
            &topic.name,
        );
        for &partition in &topic.partition_indexes {
            let next = answers.len();
            let slot = *distinct
                .entry((topic.name.as_str(), partition))
                .or_insert(next);
            listing_answer.push(slot);
            if slot != next {
                continue;
            }
            match topic_image.and_then(|t| t.partition(partition).map(|p| (t, p))) {
                _ if !authorized => {
                    answers.push(Some((
                        ErrorCode::TopicAuthorizationFailed.code(),
                        Vec::new(),
                    )));
                }
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
        answers[slot]
            .clone()
            .expect("every partition looked up is answered")
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
                    let (error_code, producers) = results.next().expect("one per partition");
                    PartitionResponse {
                        partition_index,
                        error_code,
                        error_message: None,
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
