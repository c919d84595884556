//! DescribeProducers (KIP-664, v0): the idempotent producers of each partition, answered by
//! the shard that owns it (as ListOffsets is). An unknown topic or partition is
//! UNKNOWN_TOPIC_OR_PARTITION, as Kafka's `ReplicaManager.activeProducerState` answers.

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use wire::generated::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use wire::generated::{DescribeProducersRequest, DescribeProducersResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward::{ProducerInfo, Reply, Request};
use crate::shard::Shard;

type Lookup = LocalBoxFuture<'static, (i16, Vec<ProducerInfo>)>;

pub async fn handle(
    shard: Rc<Shard>,
    request: DescribeProducersRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    let mut lookups: Vec<Lookup> = Vec::new();
    for topic in &request.topics {
        let topic_image = image.topic(&topic.name);
        for &partition in &topic.partition_indexes {
            let owner =
                topic_image.and_then(|t| t.partition(partition).map(|p| (t.topic_id, shard.owner(p))));
            lookups.push(match owner {
                None => {
                    futures::future::ready((ErrorCode::UnknownTopicOrPartition.code(), Vec::new()))
                        .boxed_local()
                }
                Some((topic_id, owner)) => {
                    let shard = shard.clone();
                    let target = owner;
                    async move {
                        let request = Request::DescribeProducers {
                            topic_id,
                            partition,
                        };
                        match shard.call(target, request).await {
                            Reply::Producers(code, producers) => (code, producers),
                            _ => (ErrorCode::UnknownServerError.code(), Vec::new()),
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
                                coordinator_epoch: -1,
                                current_txn_start_offset: -1,
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
