//! CreateTopics and DeleteTopics: checked and applied by the metadata core (shard 0), which
//! publishes the new image to every shard before this answers.

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use wire::generated::create_topics_request::CreatableTopic;
use wire::generated::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use wire::generated::delete_topics_response::DeletableTopicResult;
use wire::generated::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
};
use wire::primitives::Uuid;
use wire::ErrorCode;

use acl::AclOperation::{Create, Delete, Describe, DescribeConfigs};
use acl::ResourceType::Topic;

use super::mutation_quota::{self, MutationQuota};
use super::{encode_response, RequestContext, Response};
use crate::config;
use crate::forward::{self, TopicOutcome, TopicSpec};
use crate::shard::Shard;

pub async fn handle_create_topics(
    shard: Rc<Shard>,
    request: CreateTopicsRequest,
    mut ctx: RequestContext,
) -> Response {
    // Kafka refuses every copy of a topic named twice in one request.
    let mut seen = HashSet::new();
    let duplicated: HashSet<String> = request
        .topics
        .iter()
        .filter(|topic| !seen.insert(topic.name.clone()))
        .map(|topic| topic.name.clone())
        .collect();
    // Kafka (ControllerApis): CREATE on the cluster, else on each topic; DESCRIBE_CONFIGS on
    // a topic for its configs in the answer.
    let create_all = shard.authorize_cluster(&ctx, Create);
    let creatable = |name: &str| create_all || shard.authorize(&ctx, Create, Topic, name);
    // KIP-599: each topic costs its partitions, in request order.
    let quota = MutationQuota::new(&shard, &ctx, 6, request.validate_only);
    let default_partitions = shard.config.num_partitions;
    let throttled: HashSet<&str> = request
        .topics
        .iter()
        .filter(|topic| !duplicated.contains(&topic.name) && creatable(&topic.name))
        .filter(|topic| {
            let partitions = partition_count(topic, default_partitions);
            !quota.admit(&shard, &ctx, partitions)
        })
        .map(|topic| topic.name.as_str())
        .collect();
    let specs: Vec<TopicSpec> = request
        .topics
        .iter()
        .filter(|topic| !duplicated.contains(&topic.name))
        .filter(|topic| creatable(&topic.name))
        .filter(|topic| !throttled.contains(topic.name.as_str()))
        .map(|topic| {
            let configs: BTreeMap<String, String> = topic
                .configs
                .iter()
                .filter_map(|entry| entry.value.clone().map(|value| (entry.name.clone(), value)))
                .collect();
            TopicSpec {
                name: topic.name.clone(),
                num_partitions: topic.num_partitions,
                replication_factor: topic.replication_factor,
                configs,
                assignments: topic
                    .assignments
                    .iter()
                    .map(|a| (a.partition_index, a.broker_ids.clone()))
                    .collect(),
            }
        })
        .collect();
    let outcomes = if specs.is_empty() {
        Vec::new()
    } else {
        shard
            .call(
                0,
                forward::CreateTopics {
                    topics: specs.clone(),
                    validate_only: request.validate_only,
                },
            )
            .await
    };
    let mut outcomes = outcomes.into_iter();
    // A name given twice is answered once, as Kafka's controller (ControllerApis) does.
    let mut answered_duplicates = HashSet::new();
    let topics = request
        .topics
        .iter()
        .filter(|topic| {
            !duplicated.contains(&topic.name) || answered_duplicates.insert(topic.name.as_str())
        })
        .map(|topic| {
            if duplicated.contains(&topic.name) {
                return CreatableTopicResult {
                    name: topic.name.clone(),
                    error_code: ErrorCode::InvalidRequest.code(),
                    error_message: Some("Duplicate topic name.".into()),
                    ..Default::default()
                };
            }
            if !creatable(&topic.name) {
                return CreatableTopicResult {
                    name: topic.name.clone(),
                    error_code: ErrorCode::TopicAuthorizationFailed.code(),
                    error_message: Some("Authorization failed.".into()),
                    num_partitions: -1,
                    replication_factor: -1,
                    configs: Some(Vec::new()),
                    ..Default::default()
                };
            }
            if throttled.contains(topic.name.as_str()) {
                let (error_code, error_message) = mutation_quota::refusal();
                return CreatableTopicResult {
                    name: topic.name.clone(),
                    error_code,
                    error_message,
                    num_partitions: -1,
                    replication_factor: -1,
                    configs: Some(Vec::new()),
                    ..Default::default()
                };
            }
            let described = shard.authorize(&ctx, DescribeConfigs, Topic, &topic.name);
            let outcome = outcomes.next().unwrap_or_else(|| TopicOutcome {
                name: topic.name.clone(),
                topic_id: [0; 16],
                error_code: ErrorCode::UnknownServerError.code(),
                error_message: None,
                num_partitions: -1,
            });
            let created = outcome.error_code == 0;
            if !created {
                quota.refund(&shard, &ctx, partition_count(topic, default_partitions));
            }
            let spec_configs: BTreeMap<String, String> = topic
                .configs
                .iter()
                .filter_map(|entry| entry.value.clone().map(|value| (entry.name.clone(), value)))
                .collect();
            CreatableTopicResult {
                name: outcome.name,
                topic_id: Uuid(outcome.topic_id),
                error_code: outcome.error_code,
                error_message: outcome.error_message,
                num_partitions: if created { outcome.num_partitions } else { -1 },
                replication_factor: match (created, topic.replication_factor) {
                    (false, _) => -1,
                    (true, -1) => shard.config.default_replication_factor,
                    (true, asked) => asked,
                },
                topic_config_error_code: if created && !described {
                    ErrorCode::TopicAuthorizationFailed.code()
                } else {
                    0
                },
                // A topic not created lists no configs (an empty list, as Kafka, not null).
                configs: Some(if created && described {
                    config::describe_topic(&shard.topic_defaults(), &spec_configs)
                        .into_iter()
                        .map(|entry| CreatableTopicConfigs {
                            name: entry.name,
                            value: entry.value,
                            read_only: entry.read_only,
                            config_source: entry.source as i8,
                            is_sensitive: entry.sensitive,
                            ..Default::default()
                        })
                        .collect()
                } else {
                    Vec::new()
                }),
                ..Default::default()
            }
        })
        .collect::<Vec<_>>();
    let response = CreateTopicsResponse {
        throttle_time_ms: quota.throttle_ms(&shard, &mut ctx),
        topics,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn handle_delete_topics(
    shard: Rc<Shard>,
    request: DeleteTopicsRequest,
    mut ctx: RequestContext,
) -> Response {
    let image = shard.image();
    // v6 names topics by name or by id; older versions by name only.
    let wanted: Vec<(Option<String>, Uuid)> = if ctx.api_version >= 6 {
        request
            .topics
            .iter()
            .map(|topic| (topic.name.clone(), topic.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|name| (Some(name.clone()), Uuid::ZERO))
            .collect()
    };
    let names: Vec<Option<String>> = wanted
        .iter()
        .map(|(name, id)| match name {
            Some(name) => Some(name.clone()),
            None => image.topic_by_id(&id.0).map(|topic| topic.name.clone()),
        })
        .collect();
    // Kafka (ControllerApis): DELETE on the cluster allows every topic; else a topic named
    // needs DESCRIBE (before its existence is told) and DELETE, and one given by id needs
    // DELETE (its name is shown only with DESCRIBE). `Some(shown name)`: refused.
    let delete_all = shard.authorize_cluster(&ctx, Delete);
    let refusals: Vec<Option<Option<String>>> = wanted
        .iter()
        .zip(&names)
        .map(|((given, _), name)| {
            let name = name.as_deref().filter(|_| !delete_all)?;
            let describable = shard.authorize(&ctx, Describe, Topic, name);
            let refused = || Some(describable.then(|| name.to_owned()));
            if given.is_some() && !describable {
                return Some(Some(name.to_owned()));
            }
            if given.is_some() && image.topic(name).is_none() {
                return None;
            }
            if shard.authorize(&ctx, Delete, Topic, name) {
                None
            } else {
                refused()
            }
        })
        .collect();
    // KIP-599: each topic costs its partitions, in request order (one not there costs
    // nothing: it fails).
    let quota = MutationQuota::new(&shard, &ctx, 5, false);
    let partitions = |name: &str| {
        image.topic(name).map_or(0, |topic| {
            i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX)
        })
    };
    let throttled: Vec<bool> = names
        .iter()
        .zip(&refusals)
        .map(|(name, refused)| match (name, refused) {
            (Some(name), None) => !quota.admit(&shard, &ctx, partitions(name)),
            _ => false,
        })
        .collect();
    let known: Vec<String> = names
        .iter()
        .zip(&refusals)
        .zip(&throttled)
        .filter(|((_, refused), throttled)| refused.is_none() && !**throttled)
        .filter_map(|((name, _), _)| name.clone())
        .collect();
    let outcomes = if known.is_empty() {
        Vec::new()
    } else {
        shard.call(0, forward::DeleteTopics { names: known }).await
    };
    let mut outcomes = outcomes.into_iter();
    let responses = wanted
        .iter()
        .zip(names)
        .zip(refusals)
        .zip(throttled)
        .map(|((((_, id), name), refused), throttled)| match name {
            _ if refused.is_some() => DeletableTopicResult {
                name: refused.flatten(),
                topic_id: *id,
                error_code: ErrorCode::TopicAuthorizationFailed.code(),
                ..Default::default()
            },
            Some(name) if throttled => {
                let (error_code, error_message) = mutation_quota::refusal();
                DeletableTopicResult {
                    name: Some(name),
                    topic_id: *id,
                    error_code,
                    error_message,
                    ..Default::default()
                }
            }
            None => DeletableTopicResult {
                name: None,
                topic_id: *id,
                error_code: ErrorCode::UnknownTopicId.code(),
                ..Default::default()
            },
            Some(name) => {
                let outcome = outcomes.next();
                let (error_code, error_message, topic_id) = match outcome {
                    Some(outcome) => (
                        outcome.error_code,
                        outcome.error_message,
                        Uuid(outcome.topic_id),
                    ),
                    None => (ErrorCode::UnknownServerError.code(), None, Uuid::ZERO),
                };
                if error_code != 0 {
                    quota.refund(&shard, &ctx, partitions(&name));
                }
                DeletableTopicResult {
                    name: Some(name),
                    topic_id,
                    error_code,
                    error_message: if ctx.api_version >= 5 {
                        error_message
                    } else {
                        None
                    },
                    ..Default::default()
                }
            }
        })
        .collect();
    let response = DeleteTopicsResponse {
        throttle_time_ms: quota.throttle_ms(&shard, &mut ctx),
        responses,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

/// The partitions a CreateTopics entry asks for.
fn partition_count(topic: &CreatableTopic, default: i32) -> i32 {
    forward::partitions_asked(topic.assignments.len(), topic.num_partitions, default)
}
