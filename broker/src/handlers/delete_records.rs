//! DeleteRecords (API 21, v0-2): moves each partition's log start offset, answered by the
//! shard that owns the partition (routed as ListOffsets). A partition named twice is answered
//! once, with its last offset (Kafka builds a map of the request). Unknown topics and
//! partitions are UNKNOWN_TOPIC_OR_PARTITION; the rest is `partition_ops::delete_records`.
//! On one node every replica is the leader, so the answer needs no wait (`timeout_ms`).

use std::collections::HashMap;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use wire::generated::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use wire::generated::{DeleteRecordsRequest, DeleteRecordsResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward::{Reply, Request};
use crate::shard::Shard;

type Deletion = LocalBoxFuture<'static, (i16, i64)>;

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
    let deletions: Vec<Deletion> = order
        .iter()
        .map(|&(name, partition)| {
            let owner = image
                .topic(name)
                .and_then(|t| t.partition(partition).map(|p| (t.topic_id, shard.owner(p))));
            match owner {
                None => futures::future::ready((ErrorCode::UnknownTopicOrPartition.code(), -1))
                    .boxed_local(),
                Some((topic_id, owner)) => {
                    let shard = shard.clone();
                    let target = owner;
                    let request = Request::DeleteRecords {
                        topic_id,
                        partition,
                        offset: offsets[&(name, partition)],
                    };
                    async move {
                        match shard.call(target, request).await {
                            Reply::DeleteRecords(code, low_watermark) => (code, low_watermark),
                            _ => (ErrorCode::UnknownServerError.code(), -1),
                        }
                    }
                    .boxed_local()
                }
            }
        })
        .collect();
    let results = futures::future::join_all(deletions).await;
    let mut topics: Vec<DeleteRecordsTopicResult> = Vec::new();
    for (&(name, partition_index), (error_code, low_watermark)) in order.iter().zip(results) {
        let result = DeleteRecordsPartitionResult {
            partition_index,
            low_watermark,
            error_code,
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.name == name) {
            Some(topic) => topic.partitions.push(result),
            None => topics.push(DeleteRecordsTopicResult {
                name: name.to_string(),
                partitions: vec![result],
                ..Default::default()
            }),
        }
    }
    let response = DeleteRecordsResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}
