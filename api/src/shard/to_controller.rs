//! A cluster node's metadata core when another node's controller is the active one: the
//! change is sent there as the Kafka request it amounts to (KIP-590's forwarding, over the
//! active controller's CONTROLLER listener, where that node's metadata core executes it),
//! and its answer is mapped back. However it reached this node (a client's CreateTopics, a
//! Metadata request auto-creating a topic, FindCoordinator creating `__consumer_offsets`,
//! InitProducerId needing a block of ids), a change goes the same way.
//!
//! When the request cannot be delivered or answered within `FORWARD_TIMEOUT` (no active
//! controller, it died meanwhile), every topic gets NOT_CONTROLLER, which clients retry.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use wire::generated::api::ApiKey;
use wire::generated::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use wire::generated::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use wire::generated::delete_topics_request::DeleteTopicState;
use wire::generated::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse,
};
use wire::primitives::{Decodable, Encodable};
use wire::ErrorCode;

use crate::forward::{PartitionsSpec, TopicOutcome, TopicSpec};

/// Bound on one forwarded change, sending to answer.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);
const CLIENT_ID: &str = "broker-forwarding";

const CREATE_TOPICS_VERSION: i16 = 7;
const DELETE_TOPICS_VERSION: i16 = 5;
const CREATE_PARTITIONS_VERSION: i16 = 3;
const ALLOCATE_PRODUCER_IDS_VERSION: i16 = 0;

#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("no active controller is known")]
    NoController,
    #[error(transparent)]
    Peer(#[from] net::peer::PeerError),
    #[error(transparent)]
    Client(#[from] kclient::Error),
}

/// One request to the controller listener at `to` and its decoded response.
pub(crate) async fn call<Q: Encodable, R: Decodable>(
    to: Option<SocketAddr>,
    api: ApiKey,
    version: i16,
    request: &Q,
) -> Result<R, ForwardError> {
    let to = to.ok_or(ForwardError::NoController)?;
    let mut frame = BytesMut::new();
    kclient::conn::encode_request(&mut frame, api, version, 1, CLIENT_ID, request)?;
    let response = net::peer::round_trip(to, &frame, FORWARD_TIMEOUT).await?;
    Ok(kclient::conn::decode_response(
        Bytes::from(response),
        api,
        version,
        1,
    )?)
}

fn not_controller(name: String, error: &ForwardError) -> TopicOutcome {
    tracing::info!(topic = %name, %error, "a change forwarded to the active controller failed");
    TopicOutcome {
        name,
        topic_id: [0; 16],
        error_code: ErrorCode::NotController.code(),
        error_message: Some(format!(
            "The active controller could not be reached: {error}"
        )),
        num_partitions: -1,
    }
}

pub async fn create_topics(
    to: Option<SocketAddr>,
    topics: Vec<TopicSpec>,
    validate_only: bool,
) -> Vec<TopicOutcome> {
    let request = CreateTopicsRequest {
        topics: topics
            .iter()
            .map(|spec| CreatableTopic {
                name: spec.name.clone(),
                num_partitions: spec.num_partitions,
                replication_factor: spec.replication_factor,
                configs: spec
                    .configs
                    .iter()
                    .map(|(name, value)| CreatableTopicConfig {
                        name: name.clone(),
                        value: Some(value.clone()),
                        ..Default::default()
                    })
                    .collect(),
                assignments: spec
                    .assignments
                    .iter()
                    .map(|(partition_index, broker_ids)| CreatableReplicaAssignment {
                        partition_index: *partition_index,
                        broker_ids: broker_ids.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        timeout_ms: FORWARD_TIMEOUT.as_millis() as i32,
        validate_only,
        ..Default::default()
    };
    match call::<_, CreateTopicsResponse>(to, ApiKey::CreateTopics, CREATE_TOPICS_VERSION, &request)
        .await
    {
        Ok(response) => response
            .topics
            .into_iter()
            .map(|t| TopicOutcome {
                name: t.name,
                topic_id: t.topic_id.0,
                error_code: t.error_code,
                error_message: t.error_message,
                num_partitions: t.num_partitions,
            })
            .collect(),
        Err(error) => topics
            .into_iter()
            .map(|spec| not_controller(spec.name, &error))
            .collect(),
    }
}

pub async fn delete_topics(to: Option<SocketAddr>, names: Vec<String>) -> Vec<TopicOutcome> {
    let request = DeleteTopicsRequest {
        topic_names: names.clone(),
        topics: names
            .iter()
            .map(|name| DeleteTopicState {
                name: Some(name.clone()),
                ..Default::default()
            })
            .collect(),
        timeout_ms: FORWARD_TIMEOUT.as_millis() as i32,
        ..Default::default()
    };
    match call::<_, DeleteTopicsResponse>(to, ApiKey::DeleteTopics, DELETE_TOPICS_VERSION, &request)
        .await
    {
        Ok(response) => response
            .responses
            .into_iter()
            .map(|t| TopicOutcome {
                name: t.name.unwrap_or_default(),
                topic_id: t.topic_id.0,
                error_code: t.error_code,
                error_message: t.error_message,
                num_partitions: 0,
            })
            .collect(),
        Err(error) => names
            .into_iter()
            .map(|name| not_controller(name, &error))
            .collect(),
    }
}

pub async fn create_partitions(
    to: Option<SocketAddr>,
    topics: &[PartitionsSpec],
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let request = CreatePartitionsRequest {
        topics: topics
            .iter()
            .map(|spec| CreatePartitionsTopic {
                name: spec.name.clone(),
                count: spec.count,
                assignments: spec.assignments.as_ref().map(|lists| {
                    lists
                        .iter()
                        .map(|ids| CreatePartitionsAssignment {
                            broker_ids: ids.clone(),
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            })
            .collect(),
        timeout_ms: FORWARD_TIMEOUT.as_millis() as i32,
        validate_only,
        ..Default::default()
    };
    match call::<_, CreatePartitionsResponse>(
        to,
        ApiKey::CreatePartitions,
        CREATE_PARTITIONS_VERSION,
        &request,
    )
    .await
    {
        // Kafka answers in request order, one result per topic.
        Ok(response) if response.results.len() == topics.len() => response
            .results
            .into_iter()
            .map(|r| (r.error_code, r.error_message))
            .collect(),
        Ok(_) => topics
            .iter()
            .map(|_| {
                (
                    ErrorCode::UnknownServerError.code(),
                    Some("the controller's answer lists other topics".into()),
                )
            })
            .collect(),
        Err(error) => topics
            .iter()
            .map(|spec| {
                let outcome = not_controller(spec.name.clone(), &error);
                (outcome.error_code, outcome.error_message)
            })
            .collect(),
    }
}

/// A block of producer ids from the active controller: its first id, or the error code.
pub async fn allocate_producer_ids(to: Option<SocketAddr>, broker_id: i32) -> Result<i64, i16> {
    let request = AllocateProducerIdsRequest {
        broker_id,
        broker_epoch: -1,
        ..Default::default()
    };
    match call::<_, AllocateProducerIdsResponse>(
        to,
        ApiKey::AllocateProducerIds,
        ALLOCATE_PRODUCER_IDS_VERSION,
        &request,
    )
    .await
    {
        Ok(response) if response.error_code == 0 => Ok(response.producer_id_start),
        Ok(response) => Err(response.error_code),
        Err(error) => {
            tracing::info!(%error, "no producer id block from the active controller");
            Err(ErrorCode::CoordinatorLoadInProgress.code())
        }
    }
}

const ALTER_CONFIGS_VERSION: i16 = 2;
const INCREMENTAL_ALTER_CONFIGS_VERSION: i16 = 1;

/// AlterConfigs (every change a `Replace`) or IncrementalAlterConfigs (every change
/// `Incremental`), as the metadata core got them from one request: one outcome per change,
/// in order.
pub async fn alter_configs(
    to: Option<SocketAddr>,
    changes: Vec<(i8, String, crate::metadata::ConfigChange)>,
    validate_only: bool,
) -> Vec<TopicOutcome> {
    use crate::metadata::ConfigChange;
    use wire::generated::{
        alter_configs_request as legacy, incremental_alter_configs_request as inc,
    };
    let incremental = changes
        .iter()
        .any(|(_, _, change)| matches!(change, ConfigChange::Incremental(_)));
    let answered: Result<Vec<(i16, Option<String>)>, ForwardError> = if incremental {
        let request = wire::generated::IncrementalAlterConfigsRequest {
            resources: changes
                .iter()
                .map(|(resource_type, name, change)| inc::AlterConfigsResource {
                    resource_type: *resource_type,
                    resource_name: name.clone(),
                    configs: match change {
                        ConfigChange::Incremental(ops) => ops
                            .iter()
                            .map(|(key, op, value)| inc::AlterableConfig {
                                name: key.clone(),
                                config_operation: *op as i8,
                                value: value.clone(),
                                ..Default::default()
                            })
                            .collect(),
                        ConfigChange::Replace(_) => Vec::new(),
                    },
                    ..Default::default()
                })
                .collect(),
            validate_only,
            ..Default::default()
        };
        call::<_, wire::generated::IncrementalAlterConfigsResponse>(
            to,
            ApiKey::IncrementalAlterConfigs,
            INCREMENTAL_ALTER_CONFIGS_VERSION,
            &request,
        )
        .await
        .map(|r| {
            r.responses
                .into_iter()
                .map(|r| (r.error_code, r.error_message))
                .collect()
        })
    } else {
        let request = wire::generated::AlterConfigsRequest {
            resources: changes
                .iter()
                .map(
                    |(resource_type, name, change)| legacy::AlterConfigsResource {
                        resource_type: *resource_type,
                        resource_name: name.clone(),
                        configs: match change {
                            ConfigChange::Replace(configs) => configs
                                .iter()
                                .map(|(key, value)| legacy::AlterableConfig {
                                    name: key.clone(),
                                    value: value.clone(),
                                    ..Default::default()
                                })
                                .collect(),
                            ConfigChange::Incremental(_) => Vec::new(),
                        },
                        ..Default::default()
                    },
                )
                .collect(),
            validate_only,
            ..Default::default()
        };
        call::<_, wire::generated::AlterConfigsResponse>(
            to,
            ApiKey::AlterConfigs,
            ALTER_CONFIGS_VERSION,
            &request,
        )
        .await
        .map(|r| {
            r.responses
                .into_iter()
                .map(|r| (r.error_code, r.error_message))
                .collect()
        })
    };
    match answered {
        Ok(codes) if codes.len() == changes.len() => changes
            .into_iter()
            .zip(codes)
            .map(|((_, name, _), (error_code, error_message))| TopicOutcome {
                name,
                topic_id: [0; 16],
                error_code,
                error_message,
                num_partitions: 0,
            })
            .collect(),
        Ok(_) => changes
            .into_iter()
            .map(|(_, name, _)| TopicOutcome {
                name,
                topic_id: [0; 16],
                error_code: ErrorCode::UnknownServerError.code(),
                error_message: Some("the controller's answer lists other resources".into()),
                num_partitions: 0,
            })
            .collect(),
        Err(error) => changes
            .into_iter()
            .map(|(_, name, _)| {
                let mut outcome = not_controller(name, &error);
                outcome.num_partitions = 0;
                outcome
            })
            .collect(),
    }
}

const ALTER_USER_SCRAM_CREDENTIALS_VERSION: i16 = 0;

/// AlterUserScramCredentials, as the metadata core got it: one result per distinct user, as
/// the active controller answered; every user NOT_CONTROLLER when it could not be asked.
pub async fn alter_scram_credentials(
    to: Option<SocketAddr>,
    change: &crate::forward::AlterScramCredentials,
) -> Vec<crate::metadata::scram::AlterResult> {
    use crate::metadata::scram::AlterResult;
    use wire::generated::alter_user_scram_credentials_request as request;
    let wanted = wire::generated::AlterUserScramCredentialsRequest {
        deletions: change
            .deletions
            .iter()
            .map(|(name, mechanism)| request::ScramCredentialDeletion {
                name: name.clone(),
                mechanism: *mechanism,
                ..Default::default()
            })
            .collect(),
        upsertions: change
            .upsertions
            .iter()
            .map(|u| request::ScramCredentialUpsertion {
                name: u.name.clone(),
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: Bytes::copy_from_slice(&u.salt),
                salted_password: Bytes::copy_from_slice(&u.salted_password),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    match call::<_, wire::generated::AlterUserScramCredentialsResponse>(
        to,
        ApiKey::AlterUserScramCredentials,
        ALTER_USER_SCRAM_CREDENTIALS_VERSION,
        &wanted,
    )
    .await
    {
        Ok(response) => response
            .results
            .into_iter()
            .map(|r| AlterResult {
                user: r.user,
                error_code: r.error_code,
                error_message: r.error_message,
            })
            .collect(),
        Err(error) => {
            tracing::info!(%error, "AlterUserScramCredentials forwarded to the active controller failed");
            change.refuse_all(
                ErrorCode::NotController.code(),
                &format!("The active controller could not be reached: {error}"),
            )
        }
    }
}

const ALTER_CLIENT_QUOTAS_VERSION: i16 = 1;

/// AlterClientQuotas, as the metadata core got it: one result per entity, as the active
/// controller answered; every entity NOT_CONTROLLER when it could not be asked.
pub async fn alter_client_quotas(
    to: Option<SocketAddr>,
    change: &crate::forward::AlterClientQuotas,
) -> Vec<Result<(), crate::metadata::quotas::Refusal>> {
    use crate::metadata::quotas::Refusal;
    use wire::generated::alter_client_quotas_request as request;
    let wanted = wire::generated::AlterClientQuotasRequest {
        entries: change
            .alterations
            .iter()
            .map(|a| request::EntryData {
                entity: (a.entity.iter())
                    .map(|(entity_type, entity_name)| request::EntityData {
                        entity_type: entity_type.clone(),
                        entity_name: entity_name.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ops: (a.ops.iter())
                    .map(|(key, value)| request::OpData {
                        key: key.clone(),
                        value: value.unwrap_or(0.0),
                        remove: value.is_none(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        validate_only: change.validate_only,
        ..Default::default()
    };
    let answered = call::<_, wire::generated::AlterClientQuotasResponse>(
        to,
        ApiKey::AlterClientQuotas,
        ALTER_CLIENT_QUOTAS_VERSION,
        &wanted,
    )
    .await;
    match answered {
        Ok(response) if response.entries.len() == change.alterations.len() => response
            .entries
            .into_iter()
            .map(|e| match e.error_code {
                0 => Ok(()),
                code => Err(Refusal {
                    code,
                    message: e.error_message.unwrap_or_default(),
                }),
            })
            .collect(),
        answered => {
            let error = match answered {
                Ok(_) => "its answer names other entities".to_string(),
                Err(error) => error.to_string(),
            };
            tracing::info!(%error, "AlterClientQuotas forwarded to the active controller failed");
            let refusal = Refusal {
                code: ErrorCode::NotController.code(),
                message: format!("The active controller could not be reached: {error}"),
            };
            vec![Err(refusal); change.alterations.len()]
        }
    }
}
