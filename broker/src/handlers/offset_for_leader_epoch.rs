//! OffsetForLeaderEpoch (API 23, v2-4 as Kafka 4.0 serves; v0-1 were removed by KIP-896):
//! the end offset of a leader epoch, from the partition's leader-epoch cache
//! (`shard::log::leader_epoch`), answered by the shard that owns the partition. Consumers
//! send it to validate their position after a leader change (KIP-320); followers will use it
//! to find where to truncate.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use wire::generated::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use wire::generated::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward::{Reply, Request};
use crate::shard::Shard;

type Lookup = LocalBoxFuture<'static, (i16, i32, i64)>;

pub async fn handle(
    shard: Rc<Shard>,
    request: OffsetForLeaderEpochRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    let mut lookups: Vec<Lookup> = Vec::new();
    for topic in &request.topics {
        let topic_image = image.topic(&topic.topic);
        for partition in &topic.partitions {
            let owner = topic_image.and_then(|t| {
                t.partition(partition.partition)
                    .map(|p| (t.topic_id, shard.owner(p)))
            });
            lookups.push(match owner {
                None => futures::future::ready((ErrorCode::UnknownTopicOrPartition.code(), -1, -1))
                    .boxed_local(),
                Some((topic_id, owner)) => {
                    let shard = shard.clone();
                    let target = owner;
                    let request = Request::OffsetForLeaderEpoch {
                        topic_id,
                        partition: partition.partition,
                        current_leader_epoch: partition.current_leader_epoch,
                        leader_epoch: partition.leader_epoch,
                    };
                    async move {
                        match shard.call(target, request).await {
                            Reply::EpochEndOffset(code, epoch, end) => (code, epoch, end),
                            _ => (ErrorCode::UnknownServerError.code(), -1, -1),
                        }
                    }
                    .boxed_local()
                }
            });
        }
    }
    let mut results = futures::future::join_all(lookups).await.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|topic| OffsetForLeaderTopicResult {
            topic: topic.topic.clone(),
            partitions: topic
                .partitions
                .iter()
                .map(|partition| {
                    let (error_code, leader_epoch, end_offset) =
                        results.next().expect("one result per partition");
                    EpochEndOffset {
                        error_code,
                        partition: partition.partition,
                        leader_epoch,
                        end_offset,
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
