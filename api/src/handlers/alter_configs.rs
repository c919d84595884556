//! AlterConfigs (API 33) and IncrementalAlterConfigs (API 44). Topic resources go to the
//! metadata core, which validates the new override set against the key table (INVALID_CONFIG
//! with a message), writes ConfigRecords to the metadata log and publishes the image; every
//! shard applies the new typed config to its partitions of the topic before this answers.
//! Broker resources ("" for the cluster-wide default, or this node's id) take the dynamic
//! broker keys (those supplying topic defaults); a static key is refused as Kafka refuses it
//! (INVALID_REQUEST, "Cannot update these configs dynamically").
//! BROKER_LOGGER resources (IncrementalAlterConfigs only) change this process's log levels
//! here, on the shard that took the request (`logging::broker_logger`).

use std::collections::HashSet;
use std::rc::Rc;

use wire::generated::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::config::AlterOp;
use crate::forward;
use crate::logging::broker_logger::{self, RESOURCE_BROKER_LOGGER};
use crate::metadata::ConfigChange;
use crate::shard::Shard;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_CLIENT_METRICS: i8 = 16;
const RESOURCE_GROUP: i8 = 32;

/// One resource of either request, in a common form.
struct Resource {
    resource_type: i8,
    name: String,
    /// `Err` when the request itself is malformed (an unknown operation).
    change: Result<ConfigChange, (ErrorCode, String)>,
}

/// (error code, message) per resource, in request order.
type Outcome = (i16, Option<String>);

pub async fn handle_alter_configs(
    shard: Rc<Shard>,
    request: AlterConfigsRequest,
    ctx: RequestContext,
) -> Response {
    let resources = request
        .resources
        .iter()
        .map(|resource| Resource {
            resource_type: resource.resource_type,
            name: resource.resource_name.clone(),
            change: Ok(ConfigChange::Replace(
                resource
                    .configs
                    .iter()
                    .map(|c| (c.name.clone(), c.value.clone()))
                    .collect(),
            )),
        })
        .collect::<Vec<_>>();
    let outcomes = alter(&shard, &ctx, &resources, request.validate_only).await;
    let response = AlterConfigsResponse {
        throttle_time_ms: 0,
        responses: resources
            .iter()
            .zip(outcomes)
            .map(|(resource, (error_code, error_message))| {
                alter_configs_response::AlterConfigsResourceResponse {
                    error_code,
                    error_message,
                    resource_type: resource.resource_type,
                    resource_name: resource.name.clone(),
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn handle_incremental_alter_configs(
    shard: Rc<Shard>,
    request: IncrementalAlterConfigsRequest,
    ctx: RequestContext,
) -> Response {
    let resources = request
        .resources
        .iter()
        .map(|resource| {
            let ops: Result<Vec<_>, _> = resource
                .configs
                .iter()
                .map(|c| match AlterOp::from_i8(c.config_operation) {
                    Some(op) => Ok((c.name.clone(), op, c.value.clone())),
                    None => Err((
                        ErrorCode::InvalidRequest,
                        format!(
                            "Unknown alter configuration operation {}",
                            c.config_operation
                        ),
                    )),
                })
                .collect();
            Resource {
                resource_type: resource.resource_type,
                name: resource.resource_name.clone(),
                change: ops.map(ConfigChange::Incremental),
            }
        })
        .collect::<Vec<_>>();
    let outcomes = alter(&shard, &ctx, &resources, request.validate_only).await;
    let response = IncrementalAlterConfigsResponse {
        throttle_time_ms: 0,
        responses: resources
            .iter()
            .zip(outcomes)
            .map(|(resource, (error_code, error_message))| {
                incremental_alter_configs_response::AlterConfigsResourceResponse {
                    error_code,
                    error_message,
                    resource_type: resource.resource_type,
                    resource_name: resource.name.clone(),
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

/// Answers every resource: malformed ones here, the others on the metadata core (one call
/// for all of them).
async fn alter(
    shard: &Rc<Shard>,
    ctx: &RequestContext,
    resources: &[Resource],
    validate_only: bool,
) -> Vec<Outcome> {
    let mut seen = HashSet::new();
    let duplicated: HashSet<(i8, &str)> = resources
        .iter()
        .filter(|r| !seen.insert((r.resource_type, r.name.as_str())))
        .map(|r| (r.resource_type, r.name.as_str()))
        .collect();
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(resources.len());
    let mut core_changes = Vec::new();
    for resource in resources {
        let refuse = |code: ErrorCode, message: String| Some((code.code(), Some(message)));
        let outcome = if duplicated.contains(&(resource.resource_type, resource.name.as_str())) {
            refuse(
                ErrorCode::InvalidRequest,
                format!("Duplicate resource {}", resource.name),
            )
        } else if let Some(code) = refusal(shard, ctx, resource) {
            refuse(code, code.message().to_string())
        } else {
            match (&resource.change, resource.resource_type) {
                (Err((code, message)), _) => refuse(*code, message.clone()),
                (Ok(change), RESOURCE_TOPIC) => {
                    core_changes.push((RESOURCE_TOPIC, resource.name.clone(), change.clone()));
                    None
                }
                (Ok(change), RESOURCE_BROKER) => match check_broker_name(shard, resource) {
                    Some(refused) => Some(refused),
                    None => {
                        core_changes.push((RESOURCE_BROKER, resource.name.clone(), change.clone()));
                        None
                    }
                },
                (Ok(ConfigChange::Incremental(ops)), RESOURCE_BROKER_LOGGER) => {
                    Some(alter_loggers(shard, &resource.name, ops, validate_only))
                }
                // Kafka's legacy AlterConfigs does not take loggers.
                (Ok(ConfigChange::Replace(_)), RESOURCE_BROKER_LOGGER) => refuse(
                    ErrorCode::InvalidRequest,
                    format!("Unknown resource type {RESOURCE_BROKER_LOGGER}"),
                ),
                (Ok(_), other) => refuse(
                    ErrorCode::InvalidRequest,
                    format!("Unsupported resource type {other}"),
                ),
            }
        };
        outcomes.push(outcome);
    }
    let mut core_outcomes = if core_changes.is_empty() {
        Vec::new()
    } else {
        shard
            .call(
                0,
                forward::AlterTopicConfigs {
                    changes: core_changes,
                    validate_only,
                },
            )
            .await
    }
    .into_iter();
    outcomes
        .into_iter()
        .map(|outcome| {
            outcome.unwrap_or_else(|| {
                core_outcomes
                    .next()
                    .map_or((ErrorCode::UnknownServerError.code(), None), |outcome| {
                        (outcome.error_code, outcome.error_message)
                    })
            })
        })
        .collect()
}

/// Kafka (ControllerApis, and the broker for its loggers): ALTER_CONFIGS on the cluster for
/// the broker, its loggers and client metrics, on the topic or group otherwise.
fn refusal(shard: &Shard, ctx: &RequestContext, resource: &Resource) -> Option<ErrorCode> {
    use acl::AclOperation::AlterConfigs;
    use acl::ResourceType::{Group, Topic};
    let (allowed, code) = match resource.resource_type {
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS => (
            shard.authorize_cluster(ctx, AlterConfigs),
            ErrorCode::ClusterAuthorizationFailed,
        ),
        RESOURCE_TOPIC => (
            shard.authorize(ctx, AlterConfigs, Topic, &resource.name),
            ErrorCode::TopicAuthorizationFailed,
        ),
        RESOURCE_GROUP => (
            shard.authorize(ctx, AlterConfigs, Group, &resource.name),
            ErrorCode::GroupAuthorizationFailed,
        ),
        _ => (true, ErrorCode::None),
    };
    (!allowed).then_some(code)
}

/// IncrementalAlterConfigs on BROKER_LOGGER: checked as Kafka checks it, then (unless
/// validate_only) the process's levels change at once, for every shard.
fn alter_loggers(
    shard: &Shard,
    name: &str,
    ops: &[(String, AlterOp, Option<String>)],
    validate_only: bool,
) -> Outcome {
    let control = crate::logging::control();
    let checked = broker_logger::check_alter_name(name, shard.config.node_id)
        .and_then(|()| broker_logger::alter(&control.levels(), ops));
    match checked {
        Ok(levels) => {
            if !validate_only {
                control.replace(levels, "IncrementalAlterConfigs");
            }
            (ErrorCode::None.code(), None)
        }
        Err(error) => (error.error_code(), Some(error.to_string())),
    }
}

/// A broker resource must name this node ("" or its id); `Some` refusal otherwise.
fn check_broker_name(shard: &Shard, resource: &Resource) -> Option<Outcome> {
    let node_id = shard.config.node_id;
    if resource.name.is_empty() || resource.name == node_id.to_string() {
        return None;
    }
    Some((
        ErrorCode::InvalidRequest.code(),
        Some(format!(
            "Unexpected broker id, expected {node_id} or empty string, but received {}",
            resource.name
        )),
    ))
}
