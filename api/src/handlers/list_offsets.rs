//! ListOffsets: earliest (-2), latest (-1, the log end offset), max timestamp (-3), earliest
//! local (-4, the log start offset here: nothing is tiered) and by timestamp, each answered by
//! the shard that owns the partition.

use std::collections::HashSet;
use std::rc::Rc;

use wire::generated::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use wire::generated::{ListOffsetsRequest, ListOffsetsResponse};
use wire::ErrorCode;

use super::by_shard::ByShard;
use super::{encode_response, RequestContext, Response};
use crate::forward::{self, ListOffsetsPart, OffsetResult};
use crate::shard::Shard;

fn failed(code: ErrorCode) -> OffsetResult {
    OffsetResult {
        error_code: code.code(),
        timestamp: -1,
        offset: -1,
    }
}

/// Merges the entries of a topic named twice (Kafka answers it in one), drops every listing
/// of a partition but its first, and returns the partitions that were listed more than once. Allocates nothing for a request of one partition.
fn answer_once(request: &mut ListOffsetsRequest) -> HashSet<(String, i32)> {
    super::keyed::merge_topics(
        &mut request.topics,
        |topic| topic.name.as_str(),
        |topic| &mut topic.partitions,
    );
    let listings: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    let mut duplicated = HashSet::new();
    if listings < 2 {
        return duplicated;
    }
    let mut seen = HashSet::with_capacity(listings);
    request.topics.retain_mut(|topic| {
        let listed = topic.partitions.len();
        topic.partitions.retain(|partition| {
            let key = (topic.name.clone(), partition.partition_index);
            if seen.contains(&key) {
                duplicated.insert(key);
                false
            } else {
                seen.insert(key);
                true
            }
        });
        // A topic whose every partition was listed before is not answered again.
        listed == 0 || !topic.partitions.is_empty()
    });
    duplicated
}

/// ListOffsets v0 (the pre-KIP-79 offsets list), which we do not serve: every partition gets
/// UNSUPPORTED_VERSION.
pub fn unsupported_version(request: ListOffsetsRequest, ctx: &RequestContext) -> Response {
    let response = build_response(
        &request,
        ctx,
        std::iter::repeat(failed(ErrorCode::UnsupportedVersion)),
    );
    encode_response(ctx, ctx.api_version, &response)
}

/// The response to `request`, taking one result per partition in request order.
fn build_response(
    request: &ListOffsetsRequest,
    ctx: &RequestContext,
    mut results: impl Iterator<Item = OffsetResult>,
) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| ListOffsetsTopicResponse {
            name: topic.name.clone(),
            partitions: topic
                .partitions
                .iter()
                .map(|partition| {
                    let result = results.next().expect("one result per partition");
                    ListOffsetsPartitionResponse {
                        partition_index: partition.partition_index,
                        error_code: result.error_code,
                        timestamp: result.timestamp,
                        offset: result.offset,
                        // v4+ only (not ignorable in older versions); -1 with no offset found
                        // (a timestamp past every record), as Kafka.
                        leader_epoch: if result.error_code == 0
                            && result.offset >= 0
                            && ctx.api_version >= 4
                        {
                            0
                        } else {
                            -1
                        },
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    ListOffsetsResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    }
}

pub async fn handle(
    shard: Rc<Shard>,
    mut request: ListOffsetsRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    // As Kafka (ListOffsetsRequest.duplicatePartitions): a partition listed more than once is
    // not looked up at all, and is answered once, with INVALID_REQUEST (Kafka keys its answer
    // by partition).
    let duplicated = answer_once(&mut request);
    let mut results: Vec<Option<OffsetResult>> = Vec::new();
    let mut by_shard = ByShard::new(shard.shard_count());
    for topic in &request.topics {
        let topic_image = image.topic(&topic.name);
        // Kafka: DESCRIBE on the topic, checked before anything else.
        let authorized = shard.authorize(
            &ctx,
            acl::AclOperation::Describe,
            acl::ResourceType::Topic,
            &topic.name,
        );
        for partition in &topic.partitions {
            let owner = topic_image.and_then(|t| {
                t.partition(partition.partition_index)
                    .map(|p| (t.topic_id, p))
            });
            let duplicated = duplicated.contains(&(topic.name.clone(), partition.partition_index));
            // KIP-320 fencing, as Fetch and OffsetForLeaderEpoch: a current leader epoch (v4+,
            // -1 when unknown) other than the partition's.
            let current = partition.current_leader_epoch;
            let answered = match owner {
                _ if !authorized => Some(failed(ErrorCode::TopicAuthorizationFailed)),
                _ if duplicated => Some(failed(ErrorCode::InvalidRequest)),
                Some((_, p)) if current >= 0 && current < p.leader_epoch => {
                    Some(failed(ErrorCode::FencedLeaderEpoch))
                }
                Some((_, p)) if current > p.leader_epoch => {
                    Some(failed(ErrorCode::UnknownLeaderEpoch))
                }
                None => Some(failed(ErrorCode::UnknownTopicOrPartition)),
                Some((topic_id, p)) => {
                    let part = ListOffsetsPart {
                        topic_id,
                        partition: partition.partition_index,
                        timestamp: partition.timestamp,
                        read_committed: request.isolation_level == 1,
                    };
                    by_shard.add(shard.owner(p), results.len(), part);
                    None
                }
            };
            results.push(answered);
        }
    }
    by_shard
        .run(&shard, &mut results, |parts| forward::ListOffsets { parts })
        .await;
    let results = results
        .into_iter()
        .map(|result| result.expect("every partition looked up is answered"));
    encode_response(
        &ctx,
        ctx.api_version,
        &build_response(&request, &ctx, results),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::generated::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};

    fn request(topics: &[(&str, &[i32])]) -> ListOffsetsRequest {
        ListOffsetsRequest {
            topics: topics
                .iter()
                .map(|(name, partitions)| ListOffsetsTopic {
                    name: name.to_string(),
                    partitions: partitions
                        .iter()
                        .map(|&partition_index| ListOffsetsPartition {
                            partition_index,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn listed(request: &ListOffsetsRequest) -> Vec<(String, i32)> {
        request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.clone(), p.partition_index))
            })
            .collect()
    }

    #[test]
    fn a_partition_listed_twice_is_answered_once_and_marked() {
        let mut req = request(&[("a", &[0, 1, 0]), ("b", &[0]), ("a", &[1])]);
        let duplicated = answer_once(&mut req);
        assert_eq!(
            listed(&req),
            vec![("a".into(), 0), ("a".into(), 1), ("b".into(), 0)]
        );
        assert_eq!(
            req.topics.len(),
            2,
            "the emptied second `a` is not answered"
        );
        let mut duplicated: Vec<_> = duplicated.into_iter().collect();
        duplicated.sort();
        assert_eq!(duplicated, vec![("a".into(), 0), ("a".into(), 1)]);
    }

    #[test]
    fn distinct_partitions_are_left_alone() {
        let mut req = request(&[("a", &[0, 1]), ("b", &[])]);
        assert!(answer_once(&mut req).is_empty());
        assert_eq!(req.topics.len(), 2);
        assert_eq!(listed(&req).len(), 2);
    }
}
