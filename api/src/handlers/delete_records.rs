//! DeleteRecords (API 21, v0-2): moves each partition's log start offset, answered by the
//! shard that owns the partition (routed as ListOffsets). A partition named twice is answered
//! once, with its last offset (Kafka builds a map of the request). Unknown topics and
//! partitions are UNKNOWN_TOPIC_OR_PARTITION; the rest is `partition_ops::delete_records`.
//! On one node every replica is the leader, so the answer needs no wait (`timeout_ms`).

use std::collections::HashMap;
use std::rc::Rc;

use wire::generated::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use wire::generated::{DeleteRecordsRequest, DeleteRecordsResponse};
use wire::ErrorCode;

use super::by_shard::ByShard;
use super::{encode_response, RequestContext, Response};
use crate::forward::{self, DeleteRecordsPart};
use crate::shard::Shard;

pub async fn handle(
    shard: Rc<Shard>,
    request: DeleteRecordsRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    // (topic, partition) -> offset, last listing wins; order of first appearance kept.
    let mut order: Vec<(&str, i32)> = Vec::new();
    let mut offsets: HashMap<(&str, i32), i64> = HashMap::new();
    for topic in &request.topics {
        for partition in &topic.partitions {
            let key = (topic.name.as_str(), partition.partition_index);
            if offsets.insert(key, partition.offset).is_none() {
                order.push(key);
            }
        }
    }
    // Kafka: DELETE on each topic, checked first (one decision per topic).
    let allowed = shard.authorized_names(
        &ctx,
        acl::AclOperation::Delete,
        acl::ResourceType::Topic,
        request.topics.iter().map(|t| t.name.as_str()),
    );
    let mut results: Vec<Option<(i16, i64)>> = Vec::with_capacity(order.len());
    let mut by_shard = ByShard::new(shard.shard_count());
    for (slot, &(name, partition)) in order.iter().enumerate() {
        match image
            .topic(name)
            .and_then(|t| t.partition(partition).map(|p| (t, p)))
        {
            _ if !allowed.contains(name) => {
                results.push(Some((ErrorCode::TopicAuthorizationFailed.code(), -1)))
            }
            None => results.push(Some((ErrorCode::UnknownTopicOrPartition.code(), -1))),
            Some((topic_image, owner)) => {
                results.push(None);
                let part = DeleteRecordsPart {
                    topic_id: topic_image.topic_id,
                    partition,
                    offset: offsets[&(name, partition)],
                };
                by_shard.add(shard.owner(owner), slot, part);
            }
        }
    }
    by_shard
        .run(&shard, &mut results, |parts| forward::DeleteRecords {
            parts,
        })
        .await;
    let results = results
        .into_iter()
        .map(|result| result.expect("every partition looked up is answered"));
    let mut topics: Vec<DeleteRecordsTopicResult> = Vec::new();
    // Topic name -> its index in `topics`: a linear search per partition would make a
    // request naming many topics quadratic.
    let mut topic_index: HashMap<&str, usize> = HashMap::new();
    for (&(name, partition_index), (error_code, low_watermark)) in order.iter().zip(results) {
        let result = DeleteRecordsPartitionResult {
            partition_index,
            low_watermark,
            error_code,
            ..Default::default()
        };
        let index = *topic_index.entry(name).or_insert_with(|| {
            topics.push(DeleteRecordsTopicResult {
                name: name.to_string(),
                ..Default::default()
            });
            topics.len() - 1
        });
        topics[index].partitions.push(result);
    }
    let response = DeleteRecordsResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}
