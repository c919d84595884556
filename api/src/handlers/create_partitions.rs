//! CreatePartitions (API 37, v0-3): grows topics through the metadata log (PartitionRecords
//! appended by the metadata core, the image published to every shard, which opens the new
//! partitions it owns) before answering, as CreateTopics does. A topic named twice gets
//! INVALID_REQUEST on each listing and is not changed (Kafka's "Duplicate topic in request.").

use std::collections::HashSet;
use std::rc::Rc;

use wire::generated::create_partitions_response::CreatePartitionsTopicResult;
use wire::generated::{CreatePartitionsRequest, CreatePartitionsResponse};
use wire::ErrorCode;

use super::mutation_quota::{self, MutationQuota};
use super::{encode_response, RequestContext, Response};
use crate::forward::{self, PartitionsSpec};
use crate::shard::Shard;

pub async fn handle(
    shard: Rc<Shard>,
    request: CreatePartitionsRequest,
    mut ctx: RequestContext,
) -> Response {
    let mut seen = HashSet::new();
    let duplicated: HashSet<&str> = request
        .topics
        .iter()
        .filter(|topic| !seen.insert(topic.name.as_str()))
        .map(|topic| topic.name.as_str())
        .collect();
    // Kafka (ControllerApis): ALTER on each topic (after the duplicate check).
    let allowed = |name: &str| {
        shard.authorize(
            &ctx,
            acl::AclOperation::Alter,
            acl::ResourceType::Topic,
            name,
        )
    };
    // KIP-599: each topic costs the partitions it adds, in request order.
    let quota = MutationQuota::new(&shard, &ctx, 3, request.validate_only);
    let image = shard.image();
    let added = |name: &str, count: i32| {
        let now = image.topic(name).map_or(0, |topic| topic.partitions.len());
        count.saturating_sub(i32::try_from(now).unwrap_or(i32::MAX))
    };
    let throttled: HashSet<&str> = request
        .topics
        .iter()
        .filter(|topic| !duplicated.contains(topic.name.as_str()) && allowed(&topic.name))
        .filter(|topic| !quota.admit(&shard, &ctx, added(&topic.name, topic.count)))
        .map(|topic| topic.name.as_str())
        .collect();
    let specs: Vec<PartitionsSpec> = request
        .topics
        .iter()
        .filter(|topic| !duplicated.contains(topic.name.as_str()))
        .filter(|topic| allowed(&topic.name))
        .filter(|topic| !throttled.contains(topic.name.as_str()))
        .map(|topic| PartitionsSpec {
            name: topic.name.clone(),
            count: topic.count,
            assignments: topic
                .assignments
                .as_ref()
                .map(|a| a.iter().map(|r| r.broker_ids.clone()).collect()),
        })
        .collect();
    let outcomes = if specs.is_empty() {
        Vec::new()
    } else {
        let call = forward::CreatePartitions {
            topics: specs,
            validate_only: request.validate_only,
        };
        shard.call(0, call).await
    };
    let mut outcomes = outcomes.into_iter();
    let results = request
        .topics
        .iter()
        .map(|topic| {
            let (error_code, error_message) = if duplicated.contains(topic.name.as_str()) {
                (
                    ErrorCode::InvalidRequest.code(),
                    Some("Duplicate topic in request.".to_string()),
                )
            } else if !allowed(&topic.name) {
                (ErrorCode::TopicAuthorizationFailed.code(), None)
            } else if throttled.contains(topic.name.as_str()) {
                mutation_quota::refusal()
            } else {
                let outcome = outcomes
                    .next()
                    .unwrap_or((ErrorCode::UnknownServerError.code(), None));
                if outcome.0 != 0 {
                    quota.refund(&shard, &ctx, added(&topic.name, topic.count));
                }
                outcome
            };
            CreatePartitionsTopicResult {
                name: topic.name.clone(),
                error_code,
                error_message,
                ..Default::default()
            }
        })
        .collect::<Vec<_>>();
    let response = CreatePartitionsResponse {
        throttle_time_ms: quota.throttle_ms(&shard, &mut ctx),
        results,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}
