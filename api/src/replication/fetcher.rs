//! A follower's fetches (Kafka's `ReplicaFetcherThread`): one task per shard and leader,
//! over one connection to the leader's broker listener, fetching every partition this shard
//! follows from that leader with Fetch v15 (topics by id; the follower's id and broker epoch
//! in ReplicaState, KIP-903, which the leader checks before it lets the follower into an
//! ISR; its last epoch in `last_fetched_epoch`). The leader answers records up to its log end (written
//! as they are, `PartitionLog::append_replica`), its high watermark, or DivergingEpoch, on
//! which the follower truncates by epoch (KIP-279). Under the `ack` flush policy the
//! follower's next fetch, whose offset the leader counts for the high watermark, waits until
//! what it appended is on disk, so an acknowledged acks=all batch survives the loss of power
//! of every replica at once.
//!
//! The task ends when the shard follows nothing from that leader any more; it is started
//! again by the next role change that needs it (`roles`).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use shard::replication::{truncation_point, EpochEnd};
use wire::generated::api::ApiKey;
use wire::generated::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use wire::generated::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use wire::generated::{
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use wire::primitives::{Decodable, Encodable, Uuid};
use wire::ErrorCode;

use super::inter_broker::Login;
use crate::config::FlushPolicy;
use crate::metadata::image::Image;
use crate::metadata::records::TopicId;
use crate::shard::{Partition, Shard};

const FETCH_VERSION: i16 = 15;
const LIST_OFFSETS_VERSION: i16 = 1;
const CLIENT_ID: &str = "replica-fetcher";
/// Pause after a failed exchange or a refusal before fetching again (Kafka's
/// `replica.fetch.backoff.ms` is 1000; shorter here because a refusal usually means the image
/// is about to say who leads).
const FETCH_BACKOFF: Duration = Duration::from_millis(100);
/// Bound on one exchange beyond the long poll itself (`replica.fetch.wait.max.ms`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response frame accepted beyond `replica.fetch.response.max.bytes` (the leader may
/// return one batch whole past the limit, KIP-74, up to `message.max.bytes`).
const RESPONSE_SLACK_BYTES: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Client(#[from] kclient::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("response of {0} bytes is over the bound")]
    TooLarge(usize),
    #[error("SASL login as {user} with {mechanism} refused: {reason}")]
    Login {
        user: String,
        mechanism: sasl::Mechanism,
        reason: String,
    },
}

/// Starts the fetcher of `leader` on this shard unless it runs.
pub fn ensure(shard: &Rc<Shard>, leader: i32) {
    if shard.replication.fetching_from.borrow_mut().insert(leader) {
        glommio::spawn_local(run(shard.clone(), leader)).detach();
    }
}

/// A partition this shard follows from the fetcher's leader.
struct Followed {
    topic: String,
    topic_id: TopicId,
    partition_id: i32,
    leader_epoch: i32,
    local: Rc<Partition>,
}

fn followed(shard: &Shard, image: &Image, leader: i32) -> Vec<Followed> {
    shard
        .owned_partitions()
        .into_iter()
        .filter_map(|((topic_id, partition_id), local): ((TopicId, i32), _)| {
            let (l, leader_epoch) = local.replica.following()?;
            // A log whose write failed refuses appends until a restart (its directory is
            // offline, as Kafka's): fetching for it would only repeat the failure.
            if local.log.borrow().failure().is_some() {
                return None;
            }
            (l == leader).then_some(())?;
            let topic = image.topic_by_id(&topic_id)?.name.clone();
            Some(Followed {
                topic,
                topic_id,
                partition_id,
                leader_epoch,
                local,
            })
        })
        .collect()
}

/// The leader's endpoint for the inter-broker listener (`listener`; `None`: its first
/// PLAINTEXT one).
pub(crate) fn leader_addr(
    image: &Image,
    leader: i32,
    listener: Option<&str>,
) -> Option<SocketAddr> {
    let registration = image.brokers.get(&leader)?;
    let endpoint = registration.endpoints.iter().find(|e| match listener {
        Some(name) => e.name.eq_ignore_ascii_case(name),
        None => e.security_protocol == 0,
    })?;
    use std::net::ToSocketAddrs;
    (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .ok()?
        .next()
}

async fn run(shard: Rc<Shard>, leader: i32) {
    tracing::info!(shard = shard.id, leader, "replica fetcher started");
    let inter_broker = super::inter_broker::of(&shard);
    let mut conn: Option<Conn> = None;
    // A refused login is a misconfiguration an operator must see, but it repeats every
    // backoff: logged as a warning when it first comes or changes, else at debug.
    let mut refused_login: Option<String> = None;
    loop {
        let image = shard.image();
        let parts = followed(&shard, &image, leader);
        if parts.is_empty() || shard.replication.stopped.get() {
            shard.replication.fetching_from.borrow_mut().remove(&leader);
            tracing::info!(shard = shard.id, leader, "replica fetcher stopped");
            return;
        }
        let Some(addr) = leader_addr(&image, leader, inter_broker.listener.as_deref()) else {
            glommio::timer::sleep(FETCH_BACKOFF).await;
            continue;
        };
        let renew = |c: &Conn| c.addr != addr || c.session_ended();
        if conn.as_ref().is_none_or(renew) {
            let max_frame = shard.config.replication.fetch_response_max_bytes.max(0) as usize
                + RESPONSE_SLACK_BYTES;
            conn = match Conn::connect(addr, max_frame, inter_broker.login.as_ref()).await {
                Ok(c) => {
                    refused_login = None;
                    Some(c)
                }
                Err(error @ FetchError::Login { .. }) => {
                    let reason = error.to_string();
                    if refused_login.as_ref() != Some(&reason) {
                        tracing::warn!(leader, %reason, "replica fetcher cannot log in to the leader");
                        refused_login = Some(reason);
                    } else {
                        tracing::debug!(leader, %reason, "replica fetcher cannot log in to the leader");
                    }
                    glommio::timer::sleep(FETCH_BACKOFF).await;
                    continue;
                }
                Err(error) => {
                    tracing::debug!(leader, %error, "cannot reach the leader");
                    glommio::timer::sleep(FETCH_BACKOFF).await;
                    continue;
                }
            };
        }
        let c = conn.as_mut().expect("connected");
        match fetch_once(&shard, leader, c, &parts).await {
            Ok(true) => {}
            Ok(false) => glommio::timer::sleep(FETCH_BACKOFF).await,
            Err(error) => {
                tracing::debug!(leader, %error, "replica fetch failed");
                conn = None;
                glommio::timer::sleep(FETCH_BACKOFF).await;
            }
        }
    }
}

/// One fetch round: request, appends or truncations, then (under `ack`) durability. Ok(false)
/// when the leader refused something and the fetcher should pause.
async fn fetch_once(
    shard: &Rc<Shard>,
    leader: i32,
    conn: &mut Conn,
    parts: &[Followed],
) -> Result<bool, FetchError> {
    let me = shard.config.node_id;
    let settings = &shard.config.replication;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in parts {
        let log = p.local.log.borrow();
        let partition = FetchPartition {
            partition: p.partition_id,
            current_leader_epoch: p.leader_epoch,
            fetch_offset: log.log_end_offset(),
            last_fetched_epoch: log.leader_epoch_entries().last().map_or(-1, |e| e.0),
            log_start_offset: log.log_start_offset(),
            partition_max_bytes: settings.fetch_max_bytes,
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.topic_id.0 == p.topic_id) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(FetchTopic {
                topic_id: Uuid(p.topic_id),
                partitions: vec![partition],
                ..Default::default()
            }),
        }
    }
    // KIP-903: the follower names its broker epoch, so a leader does not take a restarted
    // broker's fetches for those of the incarnation its ISR knew.
    let broker_epoch = shard
        .image()
        .brokers
        .get(&me)
        .map_or(-1, |b| b.broker_epoch);
    let request = FetchRequest {
        // Before v15 the id went here; from v15 only in ReplicaState (the field must keep
        // its default).
        replica_id: -1,
        replica_state: ReplicaState {
            replica_id: me,
            replica_epoch: broker_epoch,
            ..Default::default()
        },
        max_wait_ms: settings.fetch_wait_max_ms,
        min_bytes: 1,
        max_bytes: settings.fetch_response_max_bytes,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        topics,
        ..Default::default()
    };
    let wait = Duration::from_millis(settings.fetch_wait_max_ms.max(0) as u64);
    let response: FetchResponse = conn
        .exchange(
            ApiKey::Fetch,
            FETCH_VERSION,
            &request,
            wait + REQUEST_TIMEOUT,
        )
        .await?;
    let mut healthy = response.error_code == 0;
    let mut appended = Vec::new();
    for topic in response.responses {
        for data in topic.partitions {
            let Some(p) = parts
                .iter()
                .find(|p| p.topic_id == topic.topic_id.0 && p.partition_id == data.partition_index)
            else {
                continue;
            };
            // The role may have changed while the fetch was out, or the shard closed.
            if p.local.replica.following() != Some((leader, p.leader_epoch))
                || shard.replication.stopped.get()
            {
                continue;
            }
            match ErrorCode::from_code(data.error_code) {
                Some(ErrorCode::None) => {}
                Some(ErrorCode::OffsetOutOfRange) => {
                    out_of_range(shard, conn, p).await?;
                    continue;
                }
                _ => {
                    tracing::debug!(
                        partition = p.partition_id,
                        error = data.error_code,
                        "replica fetch refused"
                    );
                    healthy = false;
                    continue;
                }
            }
            if data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0 {
                healthy &= truncate(
                    p,
                    data.diverging_epoch.epoch,
                    data.diverging_epoch.end_offset,
                );
                continue;
            }
            let records = data.records.unwrap_or_default();
            let end = {
                let mut log = p.local.log.borrow_mut();
                // The leader's log start moved (retention, DeleteRecords): so does the
                // follower's (Kafka's `maybeIncrementLogStartOffset`).
                if data.log_start_offset > log.log_start_offset()
                    && data.log_start_offset <= log.log_end_offset()
                    && log.config().cleanup_delete
                {
                    if let Err(error) = log.delete_records(data.log_start_offset) {
                        tracing::warn!(partition = p.partition_id, %error, "follower log start not moved");
                    }
                }
                if !records.is_empty() {
                    if let Err(error) = log.append_replica(&records) {
                        tracing::error!(partition = p.partition_id, %error, "follower append failed");
                        healthy = false;
                        continue;
                    }
                }
                log.log_end_offset()
            };
            if !records.is_empty() {
                appended.push(p.local.clone());
                p.local.appended.notify(usize::MAX);
            }
            p.local
                .replica
                .set_high_watermark(data.high_watermark.min(end).max(0));
        }
    }
    if !appended.is_empty() {
        let ack = appended
            .iter()
            .any(|p| p.config().flush_policy == FlushPolicy::Ack);
        if ack {
            // The next fetch reports these offsets to the leader: durable first.
            for p in &appended {
                if let Err(error) = shard.group_commit.wait_durable(&p.log).await {
                    tracing::error!(%error, "follower fdatasync failed");
                    healthy = false;
                }
            }
        }
    }
    Ok(healthy)
}

/// DivergingEpoch (`epoch`, `end_offset`): truncate to where the logs agree. False when the
/// log could not be truncated.
fn truncate(p: &Followed, epoch: i32, end_offset: i64) -> bool {
    let mut log = p.local.log.borrow_mut();
    let end = log.log_end_offset();
    let point = truncation_point(
        EpochEnd { epoch, end_offset },
        |e| {
            log.end_offset_for_epoch(e)
                .map(|(epoch, end_offset)| EpochEnd { epoch, end_offset })
        },
        end,
    );
    tracing::info!(
        partition = p.partition_id,
        epoch,
        end_offset,
        from = end,
        to = point.offset,
        "truncating a diverged follower log"
    );
    if let Err(error) = log.truncate_to(point.offset) {
        tracing::error!(partition = p.partition_id, %error, "follower truncation failed");
        return false;
    }
    let hw = p
        .local
        .replica
        .stored_high_watermark()
        .min(log.log_end_offset());
    p.local.replica.set_high_watermark(hw);
    true
}

/// The leader has no records at this follower's end: below its log start (retention or
/// DeleteRecords moved it), the follower starts over at the leader's log start.
async fn out_of_range(shard: &Shard, conn: &mut Conn, p: &Followed) -> Result<(), FetchError> {
    let request = ListOffsetsRequest {
        replica_id: shard.config.node_id,
        topics: vec![ListOffsetsTopic {
            name: p.topic.clone(),
            partitions: vec![ListOffsetsPartition {
                partition_index: p.partition_id,
                timestamp: -2,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: ListOffsetsResponse = conn
        .exchange(
            ApiKey::ListOffsets,
            LIST_OFFSETS_VERSION,
            &request,
            REQUEST_TIMEOUT,
        )
        .await?;
    let start = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .filter(|x| x.error_code == 0)
        .map(|x| x.offset);
    let mut log = p.local.log.borrow_mut();
    match start {
        Some(start) if start > log.log_end_offset() => {
            tracing::info!(
                partition = p.partition_id,
                start,
                "follower behind the leader's log start: starting over there"
            );
            if let Err(error) = log.truncate_fully_and_start_at(start) {
                tracing::error!(%error, "follower restart at the leader's log start failed");
            }
        }
        _ => tracing::warn!(partition = p.partition_id, "replica fetch out of range"),
    }
    Ok(())
}

/// One connection to a leader: requests answered in order.
pub(crate) struct Conn {
    addr: SocketAddr,
    stream: TcpStream,
    correlation_id: i32,
    /// Largest response frame accepted.
    max_frame: usize,
    /// When the other broker ends our SASL session (KIP-368's session lifetime, less a
    /// margin): past it the connection is replaced rather than used and closed under us.
    session_ends: Option<std::time::Instant>,
}

/// How long before its session's end a logged-in connection is replaced.
const SESSION_MARGIN: Duration = Duration::from_secs(1);

/// Longest a SASL login's exchange may take, and most SaslAuthenticate rounds it may need
/// (PLAIN takes one, SCRAM two).
const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_LOGIN_ROUNDS: usize = 4;

impl Conn {
    /// Connects, then logs in when the inter-broker listener is a SASL one.
    pub(crate) async fn connect(
        addr: SocketAddr,
        max_frame: usize,
        login: Option<&Login>,
    ) -> Result<Conn, FetchError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(std::io::Error::from)?;
        let _ = stream.set_nodelay(true);
        let mut conn = Conn {
            addr,
            stream,
            correlation_id: 0,
            max_frame,
            session_ends: None,
        };
        if let Some(login) = login {
            conn.log_in(login).await?;
        }
        Ok(conn)
    }

    /// Whether the other broker's SASL session for this connection is (about) over.
    pub(crate) fn session_ended(&self) -> bool {
        self.session_ends
            .is_some_and(|end| std::time::Instant::now() >= end)
    }

    /// SaslHandshake v1 and SaslAuthenticate v2 rounds until the mechanism completes (SCRAM
    /// checks the server's signature: the other broker holds our credential).
    async fn log_in(&mut self, login: &Login) -> Result<(), FetchError> {
        let refused = |reason: String| FetchError::Login {
            user: login.username.clone(),
            mechanism: login.mechanism,
            reason,
        };
        let handshake = SaslHandshakeRequest {
            mechanism: login.mechanism.name().to_string(),
            ..Default::default()
        };
        let answer: SaslHandshakeResponse = self
            .exchange(ApiKey::SaslHandshake, 1, &handshake, LOGIN_TIMEOUT)
            .await?;
        if answer.error_code != 0 {
            let code = ErrorCode::from_code_or_unknown(answer.error_code);
            return Err(refused(format!(
                "{} (the other broker enables {:?})",
                code.kafka_name(),
                answer.mechanisms
            )));
        }
        let mut session = login.session();
        let mut token = session.first();
        for _ in 0..MAX_LOGIN_ROUNDS {
            let request = SaslAuthenticateRequest {
                auth_bytes: Bytes::from(token),
                ..Default::default()
            };
            let answer: SaslAuthenticateResponse = self
                .exchange(ApiKey::SaslAuthenticate, 2, &request, LOGIN_TIMEOUT)
                .await?;
            if answer.error_code != 0 {
                let code = ErrorCode::from_code_or_unknown(answer.error_code);
                let message = answer.error_message.unwrap_or_default();
                return Err(refused(format!("{}: {message}", code.kafka_name())));
            }
            if answer.session_lifetime_ms > 0 {
                let lifetime = Duration::from_millis(answer.session_lifetime_ms as u64);
                let now = std::time::Instant::now();
                self.session_ends = Some(now + lifetime.saturating_sub(SESSION_MARGIN));
            }
            match session.step(&answer.auth_bytes) {
                Ok(Some(next)) => token = next,
                Ok(None) => return Ok(()),
                Err(error) => return Err(refused(error.to_string())),
            }
        }
        Err(refused(format!(
            "not complete after {MAX_LOGIN_ROUNDS} rounds"
        )))
    }

    pub(crate) async fn exchange<Q: Encodable, R: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Q,
        timeout: Duration,
    ) -> Result<R, FetchError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let mut frame = BytesMut::new();
        kclient::conn::encode_request(
            &mut frame,
            api,
            version,
            correlation_id,
            CLIENT_ID,
            request,
        )?;
        let (stream, max_frame) = (&mut self.stream, self.max_frame);
        let exchange = async {
            stream.write_all(&frame).await?;
            let mut size = [0u8; 4];
            stream.read_exact(&mut size).await?;
            let len = i32::from_be_bytes(size).max(0) as usize;
            if len > max_frame {
                return Err(FetchError::TooLarge(len));
            }
            let mut body = vec![0u8; len];
            stream.read_exact(&mut body).await?;
            Ok::<_, FetchError>(body)
        };
        let deadline = glommio::timer::sleep(timeout);
        futures::pin_mut!(exchange, deadline);
        let body = match futures::future::select(exchange, deadline).await {
            futures::future::Either::Left((body, _)) => body?,
            futures::future::Either::Right(_) => return Err(FetchError::Timeout(timeout)),
        };
        Ok(kclient::conn::decode_response(
            Bytes::from(body),
            api,
            version,
            correlation_id,
        )?)
    }
}
