//! Fetch (sessionless: session id 0): read each partition on its owning shard; when the
//! answer is smaller than `min_bytes`, park on the owners until one of the partitions grows
//! or `max_wait_ms` passes (long poll), then read again.
//!
//! Plain read path: records are read into memory and copied into the response frame. The
//! zero-copy (sendfile/splice) path is a later change.

use std::rc::Rc;

use bytes::BytesMut;
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use wire::generated::fetch_response::{FetchableTopicResponse, PartitionData};
use wire::generated::{FetchRequest, FetchResponse};
use wire::primitives::Uuid;
use wire::ErrorCode;

use super::{encode_response, RequestContext};
use crate::forward::{FetchResult, Reply, Request};
use crate::metadata::records::TopicId;
use crate::shard::Shard;

/// A partition of the request, resolved against the image.
struct Wanted {
    /// Owner shard and topic id, or the error to report.
    target: Result<(usize, TopicId), ErrorCode>,
    partition: i32,
    offset: i64,
    max_bytes: usize,
}

fn failed(code: ErrorCode) -> FetchResult {
    FetchResult { error_code: code.code(), high_watermark: -1, log_start_offset: -1, records: Default::default() }
}

async fn read_all(shard: &Rc<Shard>, wanted: &[Wanted]) -> Vec<FetchResult> {
    let reads: Vec<LocalBoxFuture<'static, FetchResult>> = wanted
        .iter()
        .map(|want| match want.target {
            Err(code) => futures::future::ready(failed(code)).boxed_local(),
            Ok((target, topic_id)) => {
                let shard = shard.clone();
                let request =
                    Request::Fetch { topic_id, partition: want.partition, offset: want.offset, max_bytes: want.max_bytes };
                async move {
                    match shard.call(target, request).await {
                        Reply::Fetch(result) => result,
                        _ => failed(ErrorCode::UnknownServerError),
                    }
                }
                .boxed_local()
            }
        })
        .collect();
    futures::future::join_all(reads).await
}

/// Fetch at a version we do not serve (v0-3, message formats 0 and 1): every partition gets
/// UNSUPPORTED_VERSION.
pub fn unsupported_version(request: FetchRequest, ctx: &RequestContext) -> Option<BytesMut> {
    let response = build_response(&request, ctx, std::iter::repeat_with(|| failed(ErrorCode::UnsupportedVersion)));
    encode_response(ctx, ctx.api_version, &response)
}

/// The response to `request`, taking one result per partition in request order.
fn build_response(request: &FetchRequest, ctx: &RequestContext, mut results: impl Iterator<Item = FetchResult>) -> FetchResponse {
    let by_id = ctx.api_version >= 13;
    let read_committed = request.isolation_level == 1;
    let responses = request
        .topics
        .iter()
        .map(|topic| FetchableTopicResponse {
            topic: topic.topic.clone(),
            topic_id: if by_id { topic.topic_id } else { Uuid::ZERO },
            partitions: topic
                .partitions
                .iter()
                .map(|partition| {
                    let result = results.next().expect("one result per partition");
                    PartitionData {
                        partition_index: partition.partition,
                        error_code: result.error_code,
                        high_watermark: result.high_watermark,
                        last_stable_offset: result.high_watermark,
                        log_start_offset: result.log_start_offset,
                        aborted_transactions: read_committed.then(Vec::new),
                        preferred_read_replica: -1,
                        records: Some(result.records),
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    FetchResponse { throttle_time_ms: 0, error_code: 0, session_id: 0, responses, ..Default::default() }
}

pub async fn handle(shard: Rc<Shard>, request: FetchRequest, ctx: RequestContext) -> Option<BytesMut> {
    let image = shard.image();
    let shard_count = shard.shard_count();
    let by_id = ctx.api_version >= 13;
    let unknown_topic = if by_id { ErrorCode::UnknownTopicId } else { ErrorCode::UnknownTopicOrPartition };
    let mut wanted = Vec::new();
    for topic in &request.topics {
        let topic_image = if by_id { image.topic_by_id(&topic.topic_id.0) } else { image.topic(&topic.topic) };
        for partition in &topic.partitions {
            let target = match topic_image {
                None => Err(unknown_topic),
                Some(topic_image) => match topic_image.partition(partition.partition) {
                    None => Err(ErrorCode::UnknownTopicOrPartition),
                    Some(owner) => Ok((usize::from(owner.shard) % shard_count, topic_image.topic_id)),
                },
            };
            wanted.push(Wanted {
                target,
                partition: partition.partition,
                offset: partition.fetch_offset,
                // The response limit bounds each partition's read too (one whole batch is
                // still returned when it alone is larger).
                max_bytes: partition.partition_max_bytes.min(request.max_bytes).max(0) as usize,
            });
        }
    }
    let mut results = read_all(&shard, &wanted).await;
    let bytes: usize = results.iter().map(|result| result.records.len()).sum();
    let any_error = results.iter().any(|result| result.error_code != 0);
    if bytes < request.min_bytes.max(1) as usize && request.max_wait_ms > 0 && !any_error && !wanted.is_empty() {
        let wait_ms = request.max_wait_ms as u64;
        let waits: Vec<LocalBoxFuture<'static, ()>> = wanted
            .iter()
            .filter_map(|want| want.target.ok().map(|target| (target, want)))
            .map(|((target, topic_id), want)| {
                let shard = shard.clone();
                let request = Request::WaitForData { topic_id, partition: want.partition, offset: want.offset, wait_ms };
                async move {
                    shard.call(target, request).await;
                }
                .boxed_local()
            })
            .collect();
        if !waits.is_empty() {
            futures::future::select_all(waits).await;
            results = read_all(&shard, &wanted).await;
        }
    }
    encode_response(&ctx, ctx.api_version, &build_response(&request, &ctx, results.into_iter()))
}
