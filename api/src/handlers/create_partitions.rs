//! CreatePartitions (API 37, v0-3): grows topics through the metadata log (PartitionRecords
//! appended by the metadata core, the image published to every shard, which opens the new
//! partitions it owns) before answering, as CreateTopics does. A topic named twice gets
//! INVALID_REQUEST on each listing and is not changed (Kafka's "Duplicate topic in request.").

use std::collections::HashSet;
use std::rc::Rc;

use wire::generated::create_partitions_response::CreatePartitionsTopicResult;
use wire::generated::{CreatePartitionsRequest, CreatePartitionsResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward::{self, PartitionsSpec};
use crate::shard::Shard;

pub async fn handle(
    shard: Rc<Shard>,
    request: CreatePartitionsRequest,
    ctx: RequestContext,
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
    let specs: Vec<PartitionsSpec> = request
        .topics
        .iter()
        .filter(|topic| !duplicated.contains(topic.name.as_str()))
        .filter(|topic| allowed(&topic.name))
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
            } else {
                outcomes
                    .next()
                    .unwrap_or((ErrorCode::UnknownServerError.code(), None))
            };
            CreatePartitionsTopicResult {
                name: topic.name.clone(),
                error_code,
                error_message,
                ..Default::default()
            }
        })
        .collect();
    let response = CreatePartitionsResponse {
        throttle_time_ms: 0,
        results,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}
