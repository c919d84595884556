//! DescribeClientQuotas (API 48) and AlterClientQuotas (API 49), KIP-546 as Kafka 4 serves
//! them. Describe is answered from this shard's image (Kafka's brokers answer it from their
//! metadata cache). Alter goes to the metadata core, which validates it as Kafka's
//! `ClientQuotaControlManager` does and commits its records to the metadata log (in a
//! cluster: through the active controller), so every shard throttles by the new quotas once
//! the answer is out.

use std::rc::Rc;
use std::time::Duration;

use wire::generated::{
    alter_client_quotas_response, describe_client_quotas_response, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward;
use crate::metadata::image::Image;
use crate::metadata::quotas::{Alteration, Component, Entity};
use crate::shard::Shard;

/// How long a cluster node waits for a change the active controller committed to reach this
/// shard's image before answering anyway.
const ADOPT_WAIT: Duration = Duration::from_secs(10);

pub async fn describe(
    shard: Rc<Shard>,
    request: DescribeClientQuotasRequest,
    ctx: RequestContext,
) -> Response {
    // Kafka: DESCRIBE_CONFIGS on the cluster, or the whole request is refused.
    if !shard.authorize_cluster(&ctx, acl::AclOperation::DescribeConfigs) {
        let code = ErrorCode::ClusterAuthorizationFailed;
        let response = DescribeClientQuotasResponse {
            error_code: code.code(),
            error_message: Some(code.message().to_string()),
            entries: None,
            ..Default::default()
        };
        return encode_response(&ctx, ctx.api_version, &response);
    }
    let components: Vec<Component> = request
        .components
        .into_iter()
        .map(|c| Component {
            entity_type: c.entity_type,
            match_type: c.match_type,
            matched: c.r#match,
        })
        .collect();
    let response = match shard.image().quotas.describe(&components, request.strict) {
        Ok(entries) => DescribeClientQuotasResponse {
            entries: Some(
                entries
                    .into_iter()
                    .map(
                        |(entity, values)| describe_client_quotas_response::EntryData {
                            entity: entity
                                .into_iter()
                                .map(|(entity_type, entity_name)| {
                                    describe_client_quotas_response::EntityData {
                                        entity_type,
                                        entity_name,
                                        ..Default::default()
                                    }
                                })
                                .collect(),
                            values: values
                                .into_iter()
                                .map(|(key, value)| describe_client_quotas_response::ValueData {
                                    key,
                                    value,
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        },
                    )
                    .collect(),
            ),
            ..Default::default()
        },
        Err(refusal) => DescribeClientQuotasResponse {
            error_code: refusal.code,
            error_message: Some(refusal.message),
            entries: None,
            ..Default::default()
        },
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn alter(
    shard: Rc<Shard>,
    request: AlterClientQuotasRequest,
    ctx: RequestContext,
) -> Response {
    // The response names each entity as the request did (Kafka echoes the entity).
    let named: Vec<Vec<(String, Option<String>)>> = request
        .entries
        .iter()
        .map(|e| {
            (e.entity.iter())
                .map(|d| (d.entity_type.clone(), d.entity_name.clone()))
                .collect()
        })
        .collect();
    let call = forward::AlterClientQuotas {
        alterations: request
            .entries
            .into_iter()
            .map(|e| {
                let mut entity: Entity = (e.entity.into_iter())
                    .map(|d| (d.entity_type, d.entity_name))
                    .collect();
                entity.sort();
                Alteration {
                    entity,
                    ops: (e.ops.into_iter())
                        .map(|op| (op.key, (!op.remove).then_some(op.value)))
                        .collect(),
                }
            })
            .collect(),
        validate_only: request.validate_only,
    };
    // Kafka: ALTER_CONFIGS on the cluster, or every entity is refused.
    let results = if !shard.authorize_cluster(&ctx, acl::AclOperation::AlterConfigs) {
        let code = ErrorCode::ClusterAuthorizationFailed;
        let refusal = crate::metadata::quotas::Refusal {
            code: code.code(),
            message: code.message().to_string(),
        };
        vec![Err(refusal); call.alterations.len()]
    } else if call.alterations.is_empty() {
        Vec::new()
    } else {
        let alterations = call.alterations.clone();
        let validate_only = call.validate_only;
        let results = shard.call(0, call).await;
        if shard.cluster.is_some() && !validate_only {
            // The active controller may be another node: its answer can come before this
            // node's image has the change.
            let done: Vec<&Alteration> = (alterations.iter().zip(&results))
                .filter(|(_, r)| r.is_ok())
                .map(|(a, _)| a)
                .collect();
            let applied = |image: &Image| {
                done.iter().all(|a| {
                    (a.ops.iter()).all(|(key, value)| image.quotas.get(&a.entity, key) == *value)
                })
            };
            if !shard.wait_for_image(applied, ADOPT_WAIT).await {
                tracing::warn!("committed client quotas are not in this shard's image yet");
            }
        }
        results
    };
    let response = AlterClientQuotasResponse {
        entries: (named.into_iter().zip(results))
            .map(|(entity, result)| {
                let (error_code, error_message) = match result {
                    Ok(()) => (0, None),
                    Err(refusal) => (refusal.code, Some(refusal.message)),
                };
                alter_client_quotas_response::EntryData {
                    error_code,
                    error_message,
                    entity: (entity.into_iter())
                        .map(|(entity_type, entity_name)| {
                            alter_client_quotas_response::EntityData {
                                entity_type,
                                entity_name,
                                ..Default::default()
                            }
                        })
                        .collect(),
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}
