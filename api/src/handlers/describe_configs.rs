//! DescribeConfigs for topics (resource type 2) and the broker (resource type 4): every
//! config of the resource, defaults included, with its value, source, read-only and sensitive
//! flags, its synonyms (include_synonyms, v1+) and type and documentation (v3+), as Kafka
//! answers it. The entries come from the key table (`config::describe`). BROKER_LOGGER
//! (resource type 8) lists this process's loggers and their levels (`logging`).

use std::rc::Rc;

use wire::generated::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use wire::generated::{DescribeConfigsRequest, DescribeConfigsResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::config::{self, ConfigEntry, ConfigSource};
use crate::logging::broker_logger::{self, RESOURCE_BROKER_LOGGER, SOURCE_DYNAMIC_BROKER_LOGGER};
use crate::shard::Shard;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_CLIENT_METRICS: i8 = 16;
const RESOURCE_GROUP: i8 = 32;

pub async fn handle(
    shard: Rc<Shard>,
    request: DescribeConfigsRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    // A resource listed more than once is described once (its first listing): each copy
    // would otherwise add every config of the resource to the response.
    let mut seen = std::collections::HashSet::new();
    let results = request
        .resources
        .iter()
        .filter(|resource| seen.insert((resource.resource_type, resource.resource_name.as_str())))
        .map(|resource| {
            if let Some(code) = refusal(
                &shard,
                &ctx,
                resource.resource_type,
                &resource.resource_name,
            ) {
                return DescribeConfigsResult {
                    error_code: code.code(),
                    error_message: Some(code.message().to_string()),
                    resource_type: resource.resource_type,
                    resource_name: resource.resource_name.clone(),
                    configs: Vec::new(),
                    ..Default::default()
                };
            }
            if resource.resource_type == RESOURCE_BROKER_LOGGER {
                return describe_loggers(&shard, resource);
            }
            let entries: Result<Vec<ConfigEntry>, (ErrorCode, String)> =
                match resource.resource_type {
                    RESOURCE_TOPIC => match image.topic(&resource.resource_name) {
                        Some(topic) => Ok(config::describe_topic(
                            &shard.topic_defaults(),
                            &topic.configs,
                        )),
                        None => Err((
                            ErrorCode::UnknownTopicOrPartition,
                            format!("Topic '{}' does not exist.", resource.resource_name),
                        )),
                    },
                    RESOURCE_BROKER => {
                        if resource.resource_name.is_empty()
                            || resource.resource_name == shard.config.node_id.to_string()
                        {
                            Ok(config::describe_broker(&shard.topic_defaults()))
                        } else {
                            Err((
                                ErrorCode::InvalidRequest,
                                format!("Unexpected broker id, expected {}", shard.config.node_id),
                            ))
                        }
                    }
                    other => Err((
                        ErrorCode::InvalidRequest,
                        format!("Unsupported resource type {other}"),
                    )),
                };
            match entries {
                Err((code, message)) => DescribeConfigsResult {
                    error_code: code.code(),
                    error_message: Some(message),
                    resource_type: resource.resource_type,
                    resource_name: resource.resource_name.clone(),
                    configs: Vec::new(),
                    ..Default::default()
                },
                Ok(entries) => DescribeConfigsResult {
                    error_code: 0,
                    error_message: None,
                    resource_type: resource.resource_type,
                    resource_name: resource.resource_name.clone(),
                    configs: entries
                        .into_iter()
                        .filter(|entry| {
                            resource
                                .configuration_keys
                                .as_ref()
                                .is_none_or(|keys| keys.contains(&entry.name))
                        })
                        .map(|entry| {
                            describe(
                                entry,
                                ctx.api_version,
                                request.include_synonyms,
                                request.include_documentation,
                            )
                        })
                        .collect(),
                    ..Default::default()
                },
            }
        })
        .collect();
    let response = DescribeConfigsResponse {
        throttle_time_ms: 0,
        results,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

/// Kafka's `ConfigHelper`: DESCRIBE_CONFIGS on the cluster for the broker, its loggers and
/// client metrics, on the topic or group otherwise; the error names the resource's kind.
fn refusal(
    shard: &Shard,
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
) -> Option<ErrorCode> {
    use acl::AclOperation::DescribeConfigs;
    use acl::ResourceType::{Group, Topic};
    let (allowed, code) = match resource_type {
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS => (
            shard.authorize_cluster(ctx, DescribeConfigs),
            ErrorCode::ClusterAuthorizationFailed,
        ),
        RESOURCE_TOPIC => (
            shard.authorize(ctx, DescribeConfigs, Topic, name),
            ErrorCode::TopicAuthorizationFailed,
        ),
        RESOURCE_GROUP => (
            shard.authorize(ctx, DescribeConfigs, Group, name),
            ErrorCode::GroupAuthorizationFailed,
        ),
        _ => (true, ErrorCode::None),
    };
    (!allowed).then_some(code)
}

/// BROKER_LOGGER: every logger with the level in force, as Kafka's `ConfigHelper` answers
/// (source DYNAMIC_BROKER_LOGGER_CONFIG, not read-only, no synonyms).
fn describe_loggers(
    shard: &Shard,
    resource: &wire::generated::describe_configs_request::DescribeConfigsResource,
) -> DescribeConfigsResult {
    if let Err(message) =
        broker_logger::check_describe_name(&resource.resource_name, shard.config.node_id)
    {
        return DescribeConfigsResult {
            error_code: ErrorCode::InvalidRequest.code(),
            error_message: Some(message),
            resource_type: resource.resource_type,
            resource_name: resource.resource_name.clone(),
            ..Default::default()
        };
    }
    let configs = broker_logger::describe(&crate::logging::control().levels())
        .into_iter()
        .filter(|(name, _)| {
            resource
                .configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.contains(name))
        })
        .map(|(name, level)| DescribeConfigsResourceResult {
            name,
            value: Some(level.to_string()),
            read_only: false,
            config_source: SOURCE_DYNAMIC_BROKER_LOGGER,
            is_sensitive: false,
            ..Default::default()
        })
        .collect();
    DescribeConfigsResult {
        error_code: 0,
        error_message: None,
        resource_type: resource.resource_type,
        resource_name: resource.resource_name.clone(),
        configs,
        ..Default::default()
    }
}

fn describe(
    entry: ConfigEntry,
    version: i16,
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult {
    let sensitive = entry.sensitive;
    let synonyms = if include_synonyms {
        entry
            .synonyms
            .into_iter()
            .map(|synonym| DescribeConfigsSynonym {
                name: synonym.name,
                value: if sensitive { None } else { synonym.value },
                source: synonym.source as i8,
                ..Default::default()
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult {
        // v0 only: later versions carry the source instead.
        is_default: version == 0 && entry.source == ConfigSource::Default,
        config_source: entry.source as i8,
        name: entry.name,
        value: if entry.sensitive { None } else { entry.value },
        read_only: entry.read_only,
        is_sensitive: entry.sensitive,
        synonyms,
        config_type: entry.config_type as i8,
        documentation: if include_documentation {
            entry.documentation
        } else {
            None
        },
        ..Default::default()
    }
}
