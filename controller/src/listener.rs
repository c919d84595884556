//! Kafka requests on the CONTROLLER listener (beside the voters' Raft messages, see
//! `net::peer`): brokers' BrokerRegistration (62) and BrokerHeartbeat (63), answered by the
//! active controller's [`BrokerLifecycle`](metadata::broker_lifecycle::BrokerLifecycle) in
//! the runtime's loop; partition leaders' AlterPartition (56, see
//! `metadata::alter_partition`) and the ElectLeaders brokers forward (see
//! `metadata::elections`), validated and committed by that loop too; ApiVersions; and the admin requests brokers forward to the active
//! controller (KIP-590: CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
//! IncrementalAlterConfigs, AllocateProducerIds, AlterUserScramCredentials,
//! AlterClientQuotas, CreateAcls and DeleteAcls), which this node's metadata core
//! executes (see `metadata::cluster`); and broker-only nodes' FetchMetadata (a private key,
//! see `crate::observer`), answered from this voter's applied image.

use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;
use glommio::channels::local_channel::LocalSender;
use metadata::alter_partition::refuse_all;
use metadata::broker_lifecycle::{Heartbeat, HeartbeatReply, Registration};
use metadata::cluster::{ClusterLink, ForwardedRequest};
use metadata::records::BrokerEndpoint;
use net::peer::RequestHandler;
use wire::generated::api::{request_header_version, response_header_version, ApiKey};
use wire::generated::{
    AlterPartitionRequest, AlterPartitionResponse, ApiVersionsResponse, BrokerHeartbeatRequest,
    BrokerHeartbeatResponse, BrokerRegistrationRequest, BrokerRegistrationResponse,
    DescribeQuorumRequest, ElectLeadersRequest, ElectLeadersResponse, RequestHeader,
};
use wire::primitives::{Decodable, Encodable};
use wire::ErrorCode;

/// Admin requests a broker may forward here for the metadata core (KIP-590).
pub const FORWARDED: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::AllocateProducerIds,
    ApiKey::AlterUserScramCredentials,
    ApiKey::AlterClientQuotas,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
];

/// A broker's registration or heartbeat, for the runtime's loop.
pub enum LifecycleCall {
    Register {
        request: Registration,
        reply: oneshot::Sender<Result<i64, i16>>,
    },
    Heartbeat {
        request: Heartbeat,
        reply: oneshot::Sender<Result<HeartbeatReply, i16>>,
    },
    /// DescribeQuorum: the voter's view of the quorum.
    Describe {
        reply: oneshot::Sender<crate::Status>,
    },
    /// AlterPartition (KIP-497) of `version`: answered once its records are committed.
    AlterPartition {
        version: i16,
        request: AlterPartitionRequest,
        reply: oneshot::Sender<AlterPartitionResponse>,
    },
    /// ElectLeaders (KIP-460), forwarded by a broker: answered once its records are committed.
    ElectLeaders {
        request: ElectLeadersRequest,
        reply: oneshot::Sender<ElectLeadersResponse>,
    },
}

/// ElectLeaders refused as a whole with `code`.
pub fn refuse_elections(code: i16) -> ElectLeadersResponse {
    ElectLeadersResponse {
        error_code: code,
        ..Default::default()
    }
}

impl LifecycleCall {
    /// Answers with `code` (e.g. NOT_CONTROLLER on a voter that does not lead).
    pub fn refuse(self, code: i16) {
        match self {
            LifecycleCall::Register { reply, .. } => {
                let _ = reply.send(Err(code));
            }
            LifecycleCall::Heartbeat { reply, .. } => {
                let _ = reply.send(Err(code));
            }
            LifecycleCall::AlterPartition { reply, .. } => {
                let _ = reply.send(refuse_all(code));
            }
            LifecycleCall::ElectLeaders { reply, .. } => {
                let _ = reply.send(refuse_elections(code));
            }
            LifecycleCall::Describe { .. } => {}
        }
    }
}

/// The listener's handler of Kafka requests.
pub fn handler(
    lifecycle: Rc<LocalSender<LifecycleCall>>,
    link: Option<Arc<ClusterLink>>,
) -> RequestHandler {
    Rc::new(move |frame: Vec<u8>| {
        let lifecycle = lifecycle.clone();
        let link = link.clone();
        Box::pin(async move { answer(frame, &lifecycle, link.as_deref()).await })
    })
}

async fn answer(
    frame: Vec<u8>,
    lifecycle: &LocalSender<LifecycleCall>,
    link: Option<&ClusterLink>,
) -> Result<Vec<u8>, String> {
    if frame.len() < 8 {
        return Err("request shorter than a request header".into());
    }
    if crate::observer::is_fetch_request(&frame) {
        return fetch_metadata(&frame, lifecycle).await;
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::from_i16(key).ok_or_else(|| format!("unknown API key {key}"))?;
    if FORWARDED.contains(&api) {
        let link = link.ok_or("forwarded request on a controller without brokers")?;
        let (reply, answer) = oneshot::channel();
        if !link.forward(ForwardedRequest { frame, reply }) {
            return Err("the metadata core's queue of forwarded requests is full".into());
        }
        return answer
            .await
            .unwrap_or_else(|_| Err("the metadata core stopped".into()));
    }
    let mut body = Bytes::from(frame);
    let header = RequestHeader::decode(&mut body, request_header_version(key, version))
        .map_err(|error| format!("bad request header: {error}"))?;
    let correlation_id = header.correlation_id;
    let in_range = |api: ApiKey| {
        wire::generated::api::supported_range(api as i16)
            .is_some_and(|(low, high)| (low..=high).contains(&version))
    };
    if !in_range(api) {
        return Err(format!("unsupported version {version} of {}", api.name()));
    }
    match api {
        ApiKey::ApiVersions => encode(api, version, correlation_id, &api_versions()),
        ApiKey::DescribeQuorum => {
            let request = DescribeQuorumRequest::decode(&mut body, version)
                .map_err(|error| format!("undecodable DescribeQuorum: {error}"))?;
            let (reply, answer) = oneshot::channel();
            if lifecycle
                .try_send(LifecycleCall::Describe { reply })
                .is_err()
            {
                return Err("the controller is busy".into());
            }
            let status = answer
                .await
                .map_err(|_| "the controller stopped".to_string())?;
            let response = crate::describe::describe_quorum(&request, &status, link);
            encode(api, version, correlation_id, &response)
        }
        ApiKey::BrokerRegistration => {
            let request = BrokerRegistrationRequest::decode(&mut body, version)
                .map_err(|error| format!("undecodable BrokerRegistration: {error}"))?;
            let (reply, answer) = oneshot::channel();
            let call = LifecycleCall::Register {
                request: registration(request),
                reply,
            };
            let outcome = ask(lifecycle, call, answer).await;
            let (error_code, broker_epoch) = match outcome {
                Ok(epoch) => (0, epoch),
                Err(code) => (code, -1),
            };
            let response = BrokerRegistrationResponse {
                error_code,
                broker_epoch,
                ..Default::default()
            };
            encode(api, version, correlation_id, &response)
        }
        ApiKey::BrokerHeartbeat => {
            let request = BrokerHeartbeatRequest::decode(&mut body, version)
                .map_err(|error| format!("undecodable BrokerHeartbeat: {error}"))?;
            let (reply, answer) = oneshot::channel();
            let call = LifecycleCall::Heartbeat {
                request: Heartbeat {
                    broker_id: request.broker_id,
                    broker_epoch: request.broker_epoch,
                    metadata_offset: request.current_metadata_offset,
                    want_fence: request.want_fence,
                    want_shut_down: request.want_shut_down,
                },
                reply,
            };
            let outcome = ask(lifecycle, call, answer).await;
            let response = match outcome {
                Ok(reply) => BrokerHeartbeatResponse {
                    is_caught_up: reply.is_caught_up,
                    is_fenced: reply.is_fenced,
                    should_shut_down: reply.should_shut_down,
                    ..Default::default()
                },
                Err(code) => BrokerHeartbeatResponse {
                    error_code: code,
                    is_fenced: true,
                    ..Default::default()
                },
            };
            encode(api, version, correlation_id, &response)
        }
        ApiKey::AlterPartition => {
            let request = AlterPartitionRequest::decode(&mut body, version)
                .map_err(|error| format!("undecodable AlterPartition: {error}"))?;
            let (reply, answer) = oneshot::channel();
            let call = LifecycleCall::AlterPartition {
                version,
                request,
                reply,
            };
            let not_controller = || refuse_all(ErrorCode::NotController.code());
            let response = match lifecycle.try_send(call) {
                Ok(()) => answer.await.unwrap_or_else(|_| not_controller()),
                Err(_) => not_controller(),
            };
            encode(api, version, correlation_id, &response)
        }
        ApiKey::ElectLeaders => {
            let request = ElectLeadersRequest::decode(&mut body, version)
                .map_err(|error| format!("undecodable ElectLeaders: {error}"))?;
            let (reply, answer) = oneshot::channel();
            let not_controller = || refuse_elections(ErrorCode::NotController.code());
            let response = match lifecycle.try_send(LifecycleCall::ElectLeaders { request, reply })
            {
                Ok(()) => answer.await.unwrap_or_else(|_| not_controller()),
                Err(_) => not_controller(),
            };
            encode(api, version, correlation_id, &response)
        }
        other => Err(format!(
            "{} is not served on the controller listener",
            other.name()
        )),
    }
}

/// A broker-only node's FetchMetadata (see `crate::observer`): the voter's applied image.
async fn fetch_metadata(
    frame: &[u8],
    lifecycle: &LocalSender<LifecycleCall>,
) -> Result<Vec<u8>, String> {
    let (correlation_id, from_index) = crate::observer::decode_request(frame)?;
    let (reply, answer) = oneshot::channel();
    if lifecycle
        .try_send(LifecycleCall::Describe { reply })
        .is_err()
    {
        return Err("the controller is busy".into());
    }
    let status = answer
        .await
        .map_err(|_| "the controller stopped".to_string())?;
    Ok(crate::observer::encode_response(
        correlation_id,
        from_index,
        status.leader,
        status.applied,
        &status.image,
    ))
}

/// Hands `call` to the runtime's loop and waits for its answer: NOT_CONTROLLER when the
/// loop's queue is full or the loop is gone.
async fn ask<T>(
    lifecycle: &LocalSender<LifecycleCall>,
    call: LifecycleCall,
    answer: oneshot::Receiver<Result<T, i16>>,
) -> Result<T, i16> {
    match lifecycle.try_send(call) {
        Ok(()) => answer.await.unwrap_or(Err(ErrorCode::NotController.code())),
        Err(_) => Err(ErrorCode::NotController.code()),
    }
}

fn registration(request: BrokerRegistrationRequest) -> Registration {
    Registration {
        broker_id: request.broker_id,
        cluster_id: request.cluster_id,
        incarnation_id: request.incarnation_id.0,
        endpoints: request
            .listeners
            .into_iter()
            .map(|l| BrokerEndpoint {
                name: l.name,
                host: l.host,
                port: l.port,
                security_protocol: l.security_protocol,
            })
            .collect(),
        rack: request.rack,
        previous_broker_epoch: request.previous_broker_epoch,
    }
}

/// What the controller listener serves: the lifecycle APIs, AlterPartition and the forwarded
/// ones.
fn api_versions() -> ApiVersionsResponse {
    use wire::generated::api_versions_response::ApiVersion;
    let keys = [
        ApiKey::ApiVersions,
        ApiKey::BrokerRegistration,
        ApiKey::BrokerHeartbeat,
        ApiKey::DescribeQuorum,
        ApiKey::AlterPartition,
        ApiKey::ElectLeaders,
    ];
    ApiVersionsResponse {
        api_keys: keys
            .iter()
            .chain(FORWARDED)
            .filter_map(|&api| {
                let (min, max) = wire::generated::api::supported_range(api as i16)?;
                Some(ApiVersion {
                    api_key: api as i16,
                    min_version: min,
                    max_version: max,
                    ..Default::default()
                })
            })
            .collect(),
        ..Default::default()
    }
}

/// A whole response frame: size, response header, body.
pub fn encode<T: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Vec<u8>, String> {
    let mut out = BytesMut::new();
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&correlation_id.to_be_bytes());
    if response_header_version(api as i16, version) >= 1 {
        out.extend_from_slice(&[0]); // no tagged fields
    }
    body.encode(&mut out, version)
        .map_err(|error| format!("encoding {} v{version}: {error}", api.name()))?;
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out.to_vec())
}
