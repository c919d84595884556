//! Request routing: decode the request header, check the API and version against what this
//! broker serves, and run the API's handler as a task whose output is the encoded response
//! frame (or nothing, for acks=0 produce).
//!
//! `SUPPORTED` is the single source of truth for ApiVersions: a handler is listed with exactly
//! the versions whose fields it honours.

mod acls;
mod admin;
mod alter_configs;
pub mod api_versions;
mod authorize;
mod by_shard;
mod client_quotas;
pub mod cluster_view;
mod consumer_groups;
mod create_partitions;
mod delete_records;
mod describe_cluster;
mod describe_configs;
mod describe_producers;
mod describe_quorum;
mod elect_leaders;
mod fetch;
pub mod fetch_session;
pub mod forwarded;
mod group_acls;
mod groups;
mod init_producer_id;
mod internal_topics;
mod keyed;
mod list_offsets;
mod metadata;
mod mutation_quota;
mod offset_for_leader_epoch;
mod produce;
mod request_time;
mod sasl_requests;
mod scram_credentials;
mod transactions;

use std::rc::Rc;

use bytes::{BufMut, Bytes, BytesMut};
use glommio::Task;
use wire::generated::api::{self, ApiKey};
use wire::generated::RequestHeader;
use wire::primitives::{Decodable, Encodable, ErrorCodes};
use wire::varint;

use crate::limits::{Held, Outcome};
use crate::metrics::recorder::{ErrorCounts, RequestTimer};
use crate::shard::Shard;
use crate::transport::Frame;

/// Every API this broker serves, with the versions it serves.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 0, 7),
    (ApiKey::DeleteTopics, 0, 6),
    (ApiKey::DescribeConfigs, 0, 4),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 0, 9),
    (ApiKey::OffsetFetch, 0, 9),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 0),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::ElectLeaders, 0, 2),
    // Transaction version 1 (KIP-98): EndTxn v5 and AddPartitionsToTxn v5 belong to
    // version 2 (KIP-890), which is not advertised.
    (ApiKey::AddPartitionsToTxn, 0, 4),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::WriteTxnMarkers, 0, 1),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::DescribeAcls, 0, 3),
    (ApiKey::CreateAcls, 0, 3),
    (ApiKey::DeleteAcls, 0, 3),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Versions advertised in ApiVersions below the served range, answered with
/// UNSUPPORTED_VERSION on every partition. Apache Kafka 4.0 keeps advertising Produce from v0
/// for this reason (KAFKA-18659): librdkafka decides which codecs a broker supports from the
/// advertised Produce range (its "MsgVer1"/LZ4 features need v2 in it) and silently sends
/// `compression.type=lz4` batches uncompressed to a broker whose range starts at v3.
pub const ADVERTISED_BELOW_SERVED: &[(ApiKey, i16)] = &[(ApiKey::Produce, 0)];

/// The range ApiVersions advertises for `key`, whose served range is `min..=max`.
pub fn advertised_range(key: ApiKey, min: i16, max: i16) -> (i16, i16) {
    let advertised_min = ADVERTISED_BELOW_SERVED
        .iter()
        .find(|(advertised, _)| *advertised == key)
        .map_or(min, |&(_, low)| low.min(min));
    (advertised_min, max)
}

fn served_range(api_key: i16) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(key, _, _)| *key as i16 == api_key)
        .map(|&(_, min, max)| (min, max))
}

/// What a handler needs of the request header.
pub struct RequestContext {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    /// The header's client id (moved out of the decoded header, not copied).
    pub client_id: String,
    /// The listener the request came through (Metadata and FindCoordinator answer with the
    /// address advertised for it).
    pub listener: Rc<str>,
    /// Kafka's principal of the connection (`User:ANONYMOUS`, `User:` and the SASL name, or
    /// `User:` and the client certificate's mapped subject DN), for authorization.
    pub principal: Rc<str>,
    /// The client's address as Java prints it (`acl::java_host_address`), which ACL hosts
    /// are compared with; computed once per connection.
    pub host: Rc<str>,
    /// A request another broker forwarded to this node's controller (`forwarded`): that
    /// broker authorized it for its client, so it is not checked again here.
    pub trusted: bool,
    /// The connection's tally of partition owners: Produce and Fetch note each partition's
    /// owner shard in it (see `handoff`).
    pub tally: Rc<crate::handoff::Tally>,
    /// Where `encode_response` counts the response's error codes (None with metrics off).
    pub error_counts: Option<Rc<ErrorCounts>>,
    /// How long the client must wait for being over its quota (see `quota`), for the
    /// response's `throttle_time_ms`.
    pub throttle_ms: i32,
    /// The connection's mute (see `Origin::muted_until`).
    pub muted_until: Rc<std::cell::Cell<Option<std::time::Instant>>>,
    /// Set while the request's time is measured for a request quota (see `request_time`):
    /// what the handler tells that measure.
    pub request_quota: Option<Rc<request_time::RequestQuota>>,
}

impl RequestContext {
    /// Charges `bytes` to this client's byte-rate quota of `kind`; over it, the response
    /// carries the throttle time and the connection reads nothing more until it has passed
    /// (KIP-219).
    pub fn charge_quota(
        &mut self,
        shard: &Shard,
        kind: crate::quota::QuotaKind,
        amount: f64,
    ) -> Option<std::time::Duration> {
        let now = std::time::Instant::now();
        let wait = shard.with_image(|image| {
            let (principal, client_id) = (&self.principal, &self.client_id);
            crate::quota::charge(&image.quotas, principal, client_id, kind, amount, now)
        });
        if let Some(wait) = wait {
            self.throttle_ms = self
                .throttle_ms
                .max(i32::try_from(wait.as_millis()).unwrap_or(i32::MAX));
            let until = now + wait;
            let muted = self.muted_until.get().map_or(until, |t| t.max(until));
            self.muted_until.set(Some(muted));
        }
        wait
    }

    /// Gives back `amount` charged to a quota for something not done (see `quota::refund`).
    pub fn refund_quota(&self, shard: &Shard, kind: crate::quota::QuotaKind, amount: f64) {
        let now = std::time::Instant::now();
        shard.with_image(|image| {
            let (principal, client_id) = (&self.principal, &self.client_id);
            crate::quota::refund(&image.quotas, principal, client_id, kind, amount, now);
        });
    }
}

/// Where a connection's requests come from: its listener and principal (see
/// `transport::Transport`).
pub struct Origin {
    pub listener: Rc<str>,
    pub principal: Rc<str>,
    /// The client's address as ACL hosts name it (see `RequestContext::host`).
    pub host: Rc<str>,
    /// Owners of the partitions its requests touch (see `handoff`).
    pub tally: Rc<crate::handoff::Tally>,
    /// Until when the connection reads nothing (a quota throttle, KIP-219).
    pub muted_until: Rc<std::cell::Cell<Option<std::time::Instant>>>,
    /// Its SASL session (SASL listeners): its SaslHandshake and SaslAuthenticate go there.
    pub sasl: Option<Rc<crate::authentication::Session>>,
}

/// Routes one request frame (without its size prefix). `Err` carries the reason the
/// connection must be closed (Kafka closes connections on requests it cannot parse). `held`
/// (the request's place and bytes) is traded for the response's bytes when the handler ends.
///
/// `peer` is the client's address, as the group coordinator reports it (`client_host`).
pub fn dispatch(
    shard: &Rc<Shard>,
    mut frame: Bytes,
    held: Held,
    peer: &str,
    origin: &Origin,
) -> Result<Task<Outcome>, String> {
    if frame.len() < 8 {
        return Err(format!(
            "request of {} bytes is shorter than a request header",
            frame.len()
        ));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    // From here on the request is counted and, with metrics on, timed until its response.
    let mut held = Timed::new(
        shard,
        held,
        api_key,
        frame.len() + wire::frame::FRAME_HEADER_BYTES,
    );
    let mut ctx = RequestContext {
        api_key,
        api_version,
        correlation_id,
        client_id: String::new(),
        listener: origin.listener.clone(),
        principal: origin.principal.clone(),
        host: origin.host.clone(),
        trusted: false,
        tally: origin.tally.clone(),
        error_counts: shard.metrics.error_counts(),
        throttle_ms: 0,
        muted_until: origin.muted_until.clone(),
        request_quota: None,
    };
    let Some((min, max)) = served_range(api_key) else {
        return Err(format!("unsupported API key {api_key}"));
    };
    if api_version < min || api_version > max {
        if api_key == ApiKey::ApiVersions as i16 {
            // KIP-511: answer in a v0 body so that the client can retry with a version we serve.
            let response = api_versions::unsupported_version_response();
            return Ok(ready(encode_response(&ctx, 0, &response), held));
        }
        // A version Kafka defines but we do not serve (old message formats): every partition
        // gets UNSUPPORTED_VERSION. Versions nobody defines cannot be parsed: close.
        let known = api::supported_range(api_key)
            .is_some_and(|(low, high)| (low..=high).contains(&api_version));
        if !known {
            return Err(format!(
                "unknown version {api_version} of API key {api_key}"
            ));
        }
        let header_version = api::request_header_version(api_key, api_version);
        RequestHeader::decode(&mut frame, header_version)
            .map_err(|error| format!("bad request header: {error}"))?;
        let response = match ApiKey::from_i16(api_key) {
            Some(ApiKey::Produce) => produce::unsupported_version(decode(&ctx, frame)?, &ctx),
            Some(ApiKey::Fetch) => fetch::unsupported_version(decode(&ctx, frame)?, &ctx),
            Some(ApiKey::ListOffsets) => {
                list_offsets::unsupported_version(decode(&ctx, frame)?, &ctx)
            }
            _ => {
                return Err(format!(
                    "unsupported version {api_version} of API key {api_key}"
                ))
            }
        };
        return Ok(ready(response, held));
    }
    let header_version = api::request_header_version(api_key, api_version);
    let decode_started = request_time::RequestTime::starts_at(shard, api_key);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|error| format!("bad request header: {error}"))?;
    ctx.client_id = header.client_id.unwrap_or_default();
    held.request_time = request_time::RequestTime::start(
        shard,
        api_key,
        api_version,
        decode_started,
        &ctx.principal,
        &ctx.client_id,
        &ctx.muted_until,
    );
    if let Some(time) = &held.request_time {
        ctx.request_quota = Some(time.shared.clone());
    }
    // Produce is charged its request's bytes before it is appended (Fetch, by the handler:
    // replica fetches are not a client's).
    if api_key == ApiKey::Produce as i16 {
        ctx.charge_quota(shard, crate::quota::QuotaKind::Produce, frame.len() as f64);
    }
    let shard = shard.clone();
    let body = frame;
    let key = ApiKey::from_i16(api_key).expect("served keys are known");
    let task = match key {
        ApiKey::ApiVersions => ready(api_versions::handle(&ctx, decode(&ctx, body)?), held),
        ApiKey::FindCoordinator => spawn(
            groups::find_coordinator(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::JoinGroup => {
            // Kafka reports a member's host as "/<ip>".
            let ip = peer.rsplit_once(':').map_or(peer, |(ip, _)| ip);
            let host = format!("/{}", ip.trim_matches(|c| c == '[' || c == ']'));
            spawn(
                groups::join_group(shard, decode(&ctx, body)?, ctx, host),
                held,
            )
        }
        ApiKey::SyncGroup => spawn(groups::sync_group(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::Heartbeat => spawn(groups::heartbeat(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::LeaveGroup => spawn(groups::leave_group(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::OffsetCommit => spawn(groups::offset_commit(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::OffsetFetch => spawn(groups::offset_fetch(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::OffsetDelete => spawn(groups::offset_delete(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::ListGroups => spawn(groups::list_groups(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::DescribeGroups => spawn(
            groups::describe_groups(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DeleteGroups => spawn(groups::delete_groups(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::ConsumerGroupHeartbeat => {
            let ip = peer.rsplit_once(':').map_or(peer, |(ip, _)| ip);
            let host = format!("/{}", ip.trim_matches(|c| c == '[' || c == ']'));
            spawn(
                consumer_groups::consumer_group_heartbeat(shard, decode(&ctx, body)?, ctx, host),
                held,
            )
        }
        ApiKey::ConsumerGroupDescribe => spawn(
            consumer_groups::consumer_group_describe(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::Metadata => spawn(metadata::handle(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::Produce => spawn(produce::handle(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::Fetch => spawn(fetch::handle(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::ListOffsets => spawn(list_offsets::handle(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::CreateTopics => spawn(
            admin::handle_create_topics(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DeleteTopics => spawn(
            admin::handle_delete_topics(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DescribeConfigs => spawn(
            describe_configs::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::InitProducerId => spawn(
            init_producer_id::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DescribeProducers => spawn(
            describe_producers::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::ElectLeaders => spawn(elect_leaders::handle(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::AddPartitionsToTxn => spawn(
            transactions::add_partitions_to_txn(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::AddOffsetsToTxn => spawn(
            transactions::add_offsets_to_txn(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::EndTxn => spawn(transactions::end_txn(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::WriteTxnMarkers => spawn(
            transactions::write_txn_markers(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::TxnOffsetCommit => spawn(
            transactions::txn_offset_commit(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DescribeTransactions => spawn(
            transactions::describe_transactions(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::SaslHandshake => {
            let session = origin.sasl.as_deref();
            ready(
                sasl_requests::handshake(&ctx, decode(&ctx, body)?, session),
                held,
            )
        }
        ApiKey::SaslAuthenticate => {
            let request = decode(&ctx, body)?;
            let session = origin.sasl.as_deref();
            ready(
                sasl_requests::authenticate(&ctx, request, &shard, session),
                held,
            )
        }
        ApiKey::ListTransactions => spawn(
            transactions::list_transactions(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DeleteRecords => spawn(
            delete_records::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::CreatePartitions => spawn(
            create_partitions::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::OffsetForLeaderEpoch => spawn(
            offset_for_leader_epoch::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::AlterConfigs => spawn(
            alter_configs::handle_alter_configs(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::IncrementalAlterConfigs => spawn(
            alter_configs::handle_incremental_alter_configs(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DescribeCluster => spawn(
            describe_cluster::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DescribeQuorum => spawn(
            describe_quorum::handle(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DescribeUserScramCredentials => spawn(
            scram_credentials::describe(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::AlterUserScramCredentials => spawn(
            scram_credentials::alter(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::DescribeClientQuotas => spawn(
            client_quotas::describe(shard, decode(&ctx, body)?, ctx),
            held,
        ),
        ApiKey::AlterClientQuotas => {
            spawn(client_quotas::alter(shard, decode(&ctx, body)?, ctx), held)
        }
        ApiKey::DescribeAcls => spawn(acls::describe(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::CreateAcls => spawn(acls::create(shard, decode(&ctx, body)?, ctx), held),
        ApiKey::DeleteAcls => spawn(acls::delete(shard, decode(&ctx, body)?, ctx), held),
        _ => unreachable!("SUPPORTED lists only handled keys"),
    };
    Ok(task)
}

fn spawn(
    handler: impl std::future::Future<Output = Response> + 'static,
    mut held: Timed,
) -> Task<Outcome> {
    match held.request_time.take() {
        None => glommio::spawn_local(async move { held.finish(handler.await) }),
        Some(mut time) => {
            time.decoded();
            glommio::spawn_local(async move {
                let mut response = time.run(handler).await;
                time.charge(&mut response);
                held.finish(response)
            })
        }
    }
}

fn ready(mut response: Response, mut held: Timed) -> Task<Outcome> {
    if let Some(mut time) = held.request_time.take() {
        time.decoded();
        time.charge(&mut response);
    }
    glommio::spawn_local(async move { held.finish(response) })
}

/// A request's place and bytes (`Held`) and, with metrics on, its clock and its shard's
/// recorder (see `metrics::recorder`): the response's size and the time taken are recorded
/// when the handler's response is handed over. Metrics off: no clock read, no `Rc` clone.
struct Timed {
    held: Held,
    timer: Option<(Rc<Shard>, RequestTimer)>,
    /// The request's time, measured for its client's request quota (see `request_time`).
    request_time: Option<request_time::RequestTime>,
}

impl Timed {
    fn new(shard: &Rc<Shard>, held: Held, api_key: i16, frame_bytes: usize) -> Timed {
        let timer = shard
            .metrics
            .enabled()
            .then(|| (shard.clone(), shard.metrics.start(api_key, frame_bytes)));
        Timed {
            held,
            timer,
            request_time: None,
        }
    }

    fn finish(self, response: Response) -> Outcome {
        let outcome = self.held.finish(response);
        if let Some((shard, timer)) = self.timer {
            let (bytes, failed) = match &outcome {
                Ok(Some(response)) => (response.frame.len(), false),
                Ok(None) => (0, false),
                Err(_) => (0, true),
            };
            shard.metrics.finish(timer, bytes, failed);
        }
        outcome
    }
}

/// Decodes a request body; a body that does not parse closes the connection, as in Kafka.
fn decode<T: Decodable>(ctx: &RequestContext, mut body: Bytes) -> Result<T, String> {
    T::decode(&mut body, ctx.api_version).map_err(|error| {
        format!(
            "undecodable body of API key {} version {}: {error}",
            ctx.api_key, ctx.api_version
        )
    })
}

pub use net::Response;

/// Largest response frame ever built. A frame's size is an i32 on the wire; every API's own
/// bounds (Fetch `max_bytes` capped by `fetch.max.bytes`, de-duplicated Metadata/ListOffsets/
/// DescribeConfigs entries) keep real responses far below this, so reaching it means a bug
/// or an abuse, and the connection is closed rather than the memory taken.
pub const MAX_RESPONSE_BYTES: usize = 1 << 30;

/// Encodes a whole response frame: size, response header, body. With metrics on, the
/// response's error codes are counted (`broker_request_errors_total{error}`).
pub fn encode_response<T: Encodable + ErrorCodes>(
    ctx: &RequestContext,
    api_version: i16,
    response: &T,
) -> Response {
    let out = encode_frame(ctx, api_version, response, 0, |buf| {
        response.encode(buf, api_version)
    })?;
    Ok(Some(Frame::from(out)))
}

/// As `encode_response`, for a frame `extra` bytes longer than `response` encodes to (bytes
/// that `encode` lays elsewhere: a Fetch's file ranges): the size prefix and response header,
/// then what `encode` writes, which may have cut pieces out of the buffer.
pub(crate) fn encode_frame<T: Encodable + ErrorCodes>(
    ctx: &RequestContext,
    api_version: i16,
    response: &T,
    extra: usize,
    encode: impl FnOnce(&mut BytesMut) -> Result<(), wire::primitives::EncodeError>,
) -> Result<BytesMut, String> {
    let header_version = api::response_header_version(ctx.api_key, api_version);
    let header_len = 4 + usize::from(header_version >= 1);
    let body_len = response.encoded_len(api_version);
    let frame_len = header_len + body_len + extra;
    if frame_len > MAX_RESPONSE_BYTES {
        return Err(format!(
            "response of {frame_len} bytes to API key {} exceeds the bound of {MAX_RESPONSE_BYTES} bytes",
            ctx.api_key
        ));
    }
    let mut out = BytesMut::with_capacity(4 + header_len + body_len);
    out.put_i32(frame_len as i32);
    out.put_i32(ctx.correlation_id);
    if header_version >= 1 {
        varint::write_unsigned_varint(&mut out, 0);
    }
    if let Err(error) = encode(&mut out) {
        return Err(format!(
            "response to API key {} v{api_version} could not be encoded: {error}",
            ctx.api_key
        ));
    }
    debug_assert!(
        extra > 0 || out.len() == 4 + header_len + body_len,
        "encoded_len agrees with encode"
    );
    if let Some(counts) = &ctx.error_counts {
        response.for_each_error_code(&mut |code| counts.count(ctx.api_key, code));
    }
    Ok(out)
}
