//! Produce: route each partition's batch to the shard that owns the partition (locally or
//! over the mesh), run them all at once, and answer in request order. acks=0 gets no
//! response at all (answering would desynchronise the client's correlation ids).

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use wire::generated::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use wire::generated::{ProduceRequest, ProduceResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward::{ProduceResult, Reply, Request};
use crate::shard::Shard;

fn failed(code: ErrorCode) -> ProduceResult {
    ProduceResult {
        error_code: code.code(),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
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
                    PartitionProduceResponse {
                        index: partition.index,
                        error_code: result.error_code,
                        base_offset: result.base_offset,
                        log_append_time_ms: result.log_append_time_ms,
                        log_start_offset: result.log_start_offset,
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

pub async fn handle(shard: Rc<Shard>, request: ProduceRequest, ctx: RequestContext) -> Response {
    let acks = request.acks;
    let valid_acks = matches!(acks, -1..=1);
    let image = shard.image();
    let shard_count = shard.shard_count();
    // Built in request order and all polled at once, so each partition's append (local or
    // forwarded) starts in the order of the request.
    let mut results: Vec<LocalBoxFuture<'static, ProduceResult>> = Vec::new();
    for topic in &request.topic_data {
        let topic_image = image.topic(&topic.name).cloned();
        for partition in &topic.partition_data {
            let result = match (&topic_image, valid_acks) {
                (_, false) => {
                    futures::future::ready(failed(ErrorCode::InvalidRequiredAcks)).boxed_local()
                }
                (None, true) => {
                    futures::future::ready(failed(ErrorCode::UnknownTopicOrPartition)).boxed_local()
                }
                // Kafka: "Cannot append to internal topic" for clients.
                (Some(_), true) if topic.name == crate::group::OFFSETS_TOPIC => {
                    futures::future::ready(failed(ErrorCode::InvalidTopicException)).boxed_local()
                }
                (Some(topic_image), true) => match topic_image.partition(partition.index) {
                    None => futures::future::ready(failed(ErrorCode::UnknownTopicOrPartition))
                        .boxed_local(),
                    Some(owner) => {
                        let shard = shard.clone();
                        let target = usize::from(owner.shard) % shard_count;
                        ctx.tally.note(target);
                        let forwarded = Request::Produce {
                            topic_id: topic_image.topic_id,
                            partition: partition.index,
                            acks,
                            records: partition.records.clone().unwrap_or_default(),
                        };
                        async move {
                            match shard.call(target, forwarded).await {
                                Reply::Produce(result) => result,
                                _ => failed(ErrorCode::UnknownServerError),
                            }
                        }
                        .boxed_local()
                    }
                },
            };
            results.push(result);
        }
    }
    let results = futures::future::join_all(results).await;
    if acks == 0 {
        return Ok(None);
    }
    encode_response(
        &ctx,
        ctx.api_version,
        &build_response(&request, results.into_iter()),
    )
}
