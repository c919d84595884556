//! OffsetForLeaderEpoch (API 23, v2-4 as Kafka 4.0 serves; v0-1 were removed by KIP-896):
//! the end offset of a leader epoch, from the partition's leader-epoch cache
//! (`shard::log::leader_epoch`), answered by the shard that owns the partition. Consumers
//! send it to validate their position after a leader change (KIP-320); followers will use it
//! to find where to truncate.

use std::collections::HashMap;
use std::rc::Rc;

use wire::generated::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use wire::generated::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use wire::ErrorCode;

use super::by_shard::ByShard;
use super::{encode_response, RequestContext, Response};
use crate::forward::{self, EpochPart};
use crate::shard::Shard;

pub async fn handle(
    shard: Rc<Shard>,
    request: OffsetForLeaderEpochRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    // Kafka answers every listing of the request, repeats included, each for its own epochs;
    // listings alike in partition and both epochs are looked up once here and the answer
    // given to each of them.
    let mut distinct: HashMap<(&str, i32, i32, i32), usize> = HashMap::new();
    let mut listing_answer: Vec<usize> = Vec::new();
    let mut answers: Vec<Option<forward::EpochEndOffset>> = Vec::new();
    let mut by_shard = ByShard::new(shard.shard_count());
    // Kafka (KIP-320): CLUSTER_ACTION on the cluster (a follower), else DESCRIBE on each topic.
    let cluster_action = shard.authorize_cluster(&ctx, acl::AclOperation::ClusterAction);
    for topic in &request.topics {
        let topic_image = image.topic(&topic.topic);
        let authorized = cluster_action
            || shard.authorize(
                &ctx,
                acl::AclOperation::Describe,
                acl::ResourceType::Topic,
                &topic.topic,
            );
        for partition in &topic.partitions {
            let key = (
                topic.topic.as_str(),
                partition.partition,
                partition.current_leader_epoch,
                partition.leader_epoch,
            );
            let next = answers.len();
            let slot = *distinct.entry(key).or_insert(next);
            listing_answer.push(slot);
            if slot != next {
                continue;
            }
            match topic_image.and_then(|t| t.partition(partition.partition).map(|p| (t, p))) {
                _ if !authorized => answers.push(Some(forward::EpochEndOffset {
                    error_code: ErrorCode::TopicAuthorizationFailed.code(),
                    leader_epoch: -1,
                    end_offset: -1,
                })),
                None => answers.push(Some(forward::EpochEndOffset {
                    error_code: ErrorCode::UnknownTopicOrPartition.code(),
                    leader_epoch: -1,
                    end_offset: -1,
                })),
                Some((topic_image, owner)) => {
                    answers.push(None);
                    let part = EpochPart {
                        topic_id: topic_image.topic_id,
                        partition: partition.partition,
                        current_leader_epoch: partition.current_leader_epoch,
                        leader_epoch: partition.leader_epoch,
                    };
                    by_shard.add(shard.owner(owner), slot, part);
                }
            }
        }
    }
    by_shard
        .run(&shard, &mut answers, |parts| {
            forward::OffsetForLeaderEpoch { parts }
        })
        .await;
    let mut results = listing_answer
        .into_iter()
        .map(|slot| answers[slot].expect("every partition looked up is answered"));
    let topics = request
        .topics
        .iter()
        .map(|topic| OffsetForLeaderTopicResult {
            topic: topic.topic.clone(),
            partitions: topic
                .partitions
                .iter()
                .map(|partition| {
                    let answer = results.next().expect("one result per partition");
                    EpochEndOffset {
                        error_code: answer.error_code,
                        partition: partition.partition,
                        leader_epoch: answer.leader_epoch,
                        end_offset: answer.end_offset,
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let response = OffsetForLeaderEpochResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}
