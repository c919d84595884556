//! The broker's side of its lifecycle (KIP-631): register with the active controller, then
//! heartbeat every `broker.heartbeat.interval.ms` with the metadata offset this node has
//! applied (a new registration stays fenced until it has caught up), re-register when the
//! controller no longer knows this incarnation's epoch, and on shutdown ask for a controlled
//! shutdown (the controller moves this broker's leaderships away first) until told it may go.
//!
//! It runs on the controller's executor: every request is one round trip over a connection of
//! its own to the active controller's listener, bounded by `request_timeout`.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use metadata::cluster::ClusterLink;
use metadata::records::BrokerEndpoint;
use wire::generated::api::ApiKey;
use wire::generated::broker_registration_request::Listener;
use wire::generated::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse,
};
use wire::primitives::{Decodable, Encodable, Uuid};
use wire::ErrorCode;

/// BrokerRegistration version sent (v3 carries the previous broker epoch, KIP-966).
const REGISTRATION_VERSION: i16 = 3;
const HEARTBEAT_VERSION: i16 = 1;
/// Pause before trying again when no controller is known or a request failed.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
const CLIENT_ID: &str = "broker-lifecycle";

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub broker_id: i32,
    pub cluster_id: String,
    /// The broker's listeners as clients reach them.
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub heartbeat_interval: Duration,
    pub request_timeout: Duration,
}

/// A controlled shutdown, between the process's shutdown and the agent.
#[derive(Default)]
pub struct Shutdown {
    /// Set by the process: ask the controller for a controlled shutdown.
    pub requested: AtomicBool,
    /// Set by the agent: the controller said this broker leads nothing any more.
    pub done: AtomicBool,
}

/// Registers and heartbeats until `stop`.
pub async fn run(
    config: AgentConfig,
    link: Arc<ClusterLink>,
    shutdown: Arc<Shutdown>,
    stop: Rc<Cell<bool>>,
) {
    let incarnation: [u8; 16] = rand::random();
    let mut epoch: Option<i64> = None;
    let mut correlation_id: i32 = 0;
    while !stop.get() {
        let Some(addr) = link.leader().and_then(|id| link.voters.get(&id).copied()) else {
            glommio::timer::sleep(RETRY_BACKOFF).await;
            continue;
        };
        correlation_id = correlation_id.wrapping_add(1);
        let wanted_shutdown = shutdown.requested.load(Ordering::Acquire);
        let pause = match epoch {
            None => {
                let request = registration(&config, incarnation);
                match call::<_, BrokerRegistrationResponse>(
                    addr,
                    ApiKey::BrokerRegistration,
                    REGISTRATION_VERSION,
                    correlation_id,
                    &request,
                    config.request_timeout,
                )
                .await
                {
                    Ok(response) if response.error_code == 0 => {
                        tracing::info!(
                            broker = config.broker_id,
                            controller = ?link.leader(),
                            broker_epoch = response.broker_epoch,
                            "registered with the active controller"
                        );
                        epoch = Some(response.broker_epoch);
                        Duration::ZERO
                    }
                    Ok(response) => {
                        tracing::info!(
                            error =
                                ErrorCode::from_code_or_unknown(response.error_code).kafka_name(),
                            "broker registration refused; retrying"
                        );
                        RETRY_BACKOFF
                    }
                    Err(error) => {
                        tracing::debug!(%error, "broker registration failed; retrying");
                        RETRY_BACKOFF
                    }
                }
            }
            Some(broker_epoch) => {
                let request = BrokerHeartbeatRequest {
                    broker_id: config.broker_id,
                    broker_epoch,
                    current_metadata_offset: i64::try_from(link.applied()).unwrap_or(i64::MAX),
                    want_fence: false,
                    want_shut_down: wanted_shutdown,
                    ..Default::default()
                };
                match call::<_, BrokerHeartbeatResponse>(
                    addr,
                    ApiKey::BrokerHeartbeat,
                    HEARTBEAT_VERSION,
                    correlation_id,
                    &request,
                    config.request_timeout,
                )
                .await
                {
                    Ok(response) if response.error_code == 0 => {
                        tracing::trace!(
                            fenced = response.is_fenced,
                            caught_up = response.is_caught_up,
                            "broker heartbeat answered"
                        );
                        if wanted_shutdown && response.should_shut_down {
                            shutdown.done.store(true, Ordering::Release);
                        }
                        // Fenced (just registered, or catching up): ask again soon, as Kafka's
                        // BrokerLifecycleManager does, so the broker serves within moments.
                        if wanted_shutdown || response.is_fenced {
                            RETRY_BACKOFF
                        } else {
                            config.heartbeat_interval
                        }
                    }
                    Ok(response)
                        if response.error_code == ErrorCode::StaleBrokerEpoch.code()
                            || response.error_code == ErrorCode::BrokerIdNotRegistered.code() =>
                    {
                        tracing::warn!(
                            error =
                                ErrorCode::from_code_or_unknown(response.error_code).kafka_name(),
                            broker_epoch,
                            "the controller no longer knows this registration; registering again"
                        );
                        epoch = None;
                        Duration::ZERO
                    }
                    Ok(response) => {
                        tracing::debug!(
                            error =
                                ErrorCode::from_code_or_unknown(response.error_code).kafka_name(),
                            "broker heartbeat refused; retrying"
                        );
                        RETRY_BACKOFF
                    }
                    Err(error) => {
                        tracing::debug!(%error, "broker heartbeat failed; retrying");
                        RETRY_BACKOFF
                    }
                }
            }
        };
        if !pause.is_zero() {
            glommio::timer::sleep(pause).await;
        }
    }
}

fn registration(config: &AgentConfig, incarnation: [u8; 16]) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id: config.broker_id,
        cluster_id: config.cluster_id.clone(),
        incarnation_id: Uuid(incarnation),
        listeners: config
            .endpoints
            .iter()
            .map(|e| Listener {
                name: e.name.clone(),
                host: e.host.clone(),
                port: e.port,
                security_protocol: e.security_protocol,
                ..Default::default()
            })
            .collect(),
        rack: config.rack.clone(),
        previous_broker_epoch: -1,
        ..Default::default()
    }
}

#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error(transparent)]
    Peer(#[from] net::peer::PeerError),
    #[error(transparent)]
    Client(#[from] kclient::Error),
}

/// One request to the controller at `addr` and its decoded response.
async fn call<Q: Encodable, R: Decodable>(
    addr: std::net::SocketAddr,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Q,
    timeout: Duration,
) -> Result<R, CallError> {
    let mut frame = BytesMut::new();
    kclient::conn::encode_request(&mut frame, api, version, correlation_id, CLIENT_ID, request)?;
    let response = net::peer::round_trip(addr, &frame, timeout).await?;
    Ok(kclient::conn::decode_response(
        Bytes::from(response),
        api,
        version,
        correlation_id,
    )?)
}
