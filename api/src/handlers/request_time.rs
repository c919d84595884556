//! The request-time quota (`request_percentage`, KIP-124): a request's time on its shard is
//! measured while it runs (header and body decoding, then every poll of its handler; time
//! spent waiting, for a fetch's data or a replica's acknowledgement, is not the client's
//! cost), charged to its client's quota when its response is ready, and the throttle that
//! results is written into that response's `throttle_time_ms` (raising the byte-rate
//! throttle already there) and mutes the connection (KIP-219).
//!
//! Nothing here runs while no entity of the image has a `request_percentage` quota.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use wire::generated::api::{self, ApiKey};

use super::Response;
use crate::quota::{self, QuotaKind};
use crate::shard::Shard;

/// A request whose time is measured for its client's request quota.
pub(super) struct RequestTime {
    shard: Rc<Shard>,
    /// When the request's decoding began.
    started: Instant,
    /// Time spent running so far.
    spent: Duration,
    principal: Rc<str>,
    client_id: String,
    muted_until: Rc<Cell<Option<Instant>>>,
    /// What the handler may tell about its request (see `RequestContext::request_quota`).
    pub(super) shared: Rc<RequestQuota>,
}

/// What a request's handler tells its request-time measure.
pub struct RequestQuota {
    /// The request turned out to be exempt once decoded (a follower's Fetch).
    pub exempt: Cell<bool>,
    /// Offset of `throttle_time_ms` in the response frame, where the throttle is written:
    /// known from the API and version, or told by the handler (Produce, where it lies
    /// after the partitions).
    pub throttle_at: Cell<Option<usize>>,
}

impl RequestQuota {
    /// A Produce response of `frame_len` bytes (size prefix included) at `version`, with no
    /// tagged field, has `throttle_time_ms` in its last 4 bytes (v3-v8), or just before the
    /// empty tagged-field count (v9+).
    pub fn produce_encoded(&self, frame_len: usize, version: i16) {
        let tail = 4 + usize::from(version >= 9);
        self.throttle_at.set(frame_len.checked_sub(tail));
    }
}

impl RequestTime {
    /// When a request of `api_key` whose header is about to be decoded may be under a
    /// request quota: now (its clock starts). `None` otherwise, and no clock is read.
    pub(super) fn starts_at(shard: &Shard, api_key: i16) -> Option<Instant> {
        let key = ApiKey::from_i16(api_key)?;
        let timed =
            !exempt(key) && shard.with_image(|image| quota::any(&image.quotas, QuotaKind::Request));
        timed.then(Instant::now)
    }

    /// A clock for a request of `api_key`/`api_version` whose header was just decoded, started
    /// `started` (see [`RequestTime::starts_at`]; `None`: not timed).
    pub(super) fn start(
        shard: &Rc<Shard>,
        api_key: i16,
        api_version: i16,
        started: Option<Instant>,
        principal: &Rc<str>,
        client_id: &str,
        muted_until: &Rc<Cell<Option<Instant>>>,
    ) -> Option<RequestTime> {
        let started = started?;
        let key = ApiKey::from_i16(api_key)?;
        let header = 4 + 4 + usize::from(api::response_header_version(api_key, api_version) >= 1);
        Some(RequestTime {
            shard: shard.clone(),
            started,
            spent: Duration::ZERO,
            principal: principal.clone(),
            client_id: client_id.to_owned(),
            muted_until: muted_until.clone(),
            shared: Rc::new(RequestQuota {
                exempt: Cell::new(false),
                throttle_at: Cell::new(throttle_offset(key, api_version).map(|at| header + at)),
            }),
        })
    }

    /// The time from decoding until the handler's task is spawned (decoding the body).
    pub(super) fn decoded(&mut self) {
        self.spent += self.started.elapsed();
    }

    /// Runs `handler`, adding the time each of its polls takes.
    pub(super) async fn run(&mut self, handler: impl Future<Output = Response>) -> Response {
        Polled {
            handler: Box::pin(handler),
            spent: &mut self.spent,
        }
        .await
    }

    /// Charges the time and throttles `response` and the connection if the client is over
    /// its quota.
    pub(super) fn charge(self, response: &mut Response) {
        if self.shared.exempt.get() {
            return;
        }
        let now = Instant::now();
        let wait = self.shard.with_image(|image| {
            quota::charge(
                &image.quotas,
                &self.principal,
                &self.client_id,
                QuotaKind::Request,
                self.spent.as_secs_f64(),
                now,
            )
        });
        let Some(wait) = wait else {
            return;
        };
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        if let (Ok(Some(frame)), Some(offset)) = (response.as_mut(), self.shared.throttle_at.get())
        {
            frame.raise_i32(offset, ms);
        }
        let until = now + wait;
        let muted = self.muted_until.get().map_or(until, |t| t.max(until));
        self.muted_until.set(Some(muted));
    }
}

/// APIs the request quota does not apply to, as in Kafka: those a client needs to connect
/// and authenticate, and those brokers send each other.
fn exempt(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::ApiVersions
            | ApiKey::SaslHandshake
            | ApiKey::SaslAuthenticate
            | ApiKey::WriteTxnMarkers
            | ApiKey::DescribeQuorum
    )
}

/// Where a response body of `key`/`version` holds `throttle_time_ms`, when at a fixed offset
/// (Kafka's schemas: the first field, from the version given, for every API but these).
/// Produce has it after its variable-length partition list: its handler tells where.
fn throttle_offset(key: ApiKey, version: i16) -> Option<usize> {
    let since = match key {
        ApiKey::Produce | ApiKey::ApiVersions => return None,
        ApiKey::OffsetDelete => return Some(2),
        ApiKey::CreateTopics
        | ApiKey::JoinGroup
        | ApiKey::ListOffsets
        | ApiKey::OffsetForLeaderEpoch => 2,
        ApiKey::Metadata | ApiKey::OffsetCommit | ApiKey::OffsetFetch => 3,
        ApiKey::DeleteTopics
        | ApiKey::DescribeGroups
        | ApiKey::Fetch
        | ApiKey::FindCoordinator
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::ListGroups
        | ApiKey::SyncGroup => 1,
        _ if exempt(key) => return None,
        _ => 0,
    };
    (version >= since).then_some(0)
}

/// A handler future whose polls are timed.
struct Polled<'a, F> {
    handler: Pin<Box<F>>,
    spent: &'a mut Duration,
}

impl<F: Future<Output = Response>> Future for Polled<'_, F> {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let start = Instant::now();
        let poll = self.handler.as_mut().poll(cx);
        *self.spent += start.elapsed();
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::generated::*;
    use wire::primitives::Encodable;

    const MARK: i32 = 0x0A0B_0C0D;

    /// Encodes `response` with `throttle_time_ms` set to `MARK` at every served version and
    /// checks that `throttle_offset` finds it (or names no offset where the field is absent).
    fn check<T: Encodable>(key: ApiKey, response: &T) {
        let (min, max) = super::super::served_range(key as i16).expect("served");
        for version in min..=max {
            let mut out = bytes::BytesMut::new();
            response.encode(&mut out, version).expect("encodes");
            let marked = out
                .windows(4)
                .position(|w| w == MARK.to_be_bytes())
                .filter(|_| out.len() >= 4);
            match throttle_offset(key, version) {
                Some(offset) => assert_eq!(marked, Some(offset), "{key:?} v{version}"),
                None => assert!(
                    marked.is_none() || matches!(key, ApiKey::Produce | ApiKey::ApiVersions),
                    "{key:?} v{version}: the field is at {marked:?} but no offset is named"
                ),
            }
        }
    }

    /// Checks each API listed and returns the keys checked.
    macro_rules! check_all {
        ($($key:ident => $response:ident),* $(,)?) => {{
            $(check(
                ApiKey::$key,
                &$response { throttle_time_ms: MARK, ..Default::default() },
            );)*
            vec![$(ApiKey::$key),*]
        }};
    }

    #[test]
    fn a_produce_response_without_endpoints_ends_with_its_throttle() {
        let response = ProduceResponse {
            throttle_time_ms: MARK,
            responses: vec![Default::default()],
            ..Default::default()
        };
        let (min, max) = super::super::served_range(ApiKey::Produce as i16).expect("served");
        for version in min..=max {
            let mut out = bytes::BytesMut::new();
            response.encode(&mut out, version).expect("encodes");
            let quota = RequestQuota {
                exempt: Cell::new(false),
                throttle_at: Cell::new(None),
            };
            quota.produce_encoded(out.len(), version);
            let at = quota.throttle_at.get().expect("an offset");
            assert_eq!(out[at..at + 4], MARK.to_be_bytes(), "v{version}");
        }
    }

    #[test]
    fn throttle_offsets_match_the_generated_codecs() {
        let checked = check_all!(
            Fetch => FetchResponse,
            ListOffsets => ListOffsetsResponse,
            Metadata => MetadataResponse,
            CreateTopics => CreateTopicsResponse,
            DeleteTopics => DeleteTopicsResponse,
            DescribeConfigs => DescribeConfigsResponse,
            FindCoordinator => FindCoordinatorResponse,
            JoinGroup => JoinGroupResponse,
            SyncGroup => SyncGroupResponse,
            Heartbeat => HeartbeatResponse,
            LeaveGroup => LeaveGroupResponse,
            OffsetCommit => OffsetCommitResponse,
            OffsetFetch => OffsetFetchResponse,
            OffsetDelete => OffsetDeleteResponse,
            ListGroups => ListGroupsResponse,
            DescribeGroups => DescribeGroupsResponse,
            DeleteGroups => DeleteGroupsResponse,
            ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
            ConsumerGroupDescribe => ConsumerGroupDescribeResponse,
            InitProducerId => InitProducerIdResponse,
            DescribeProducers => DescribeProducersResponse,
            DeleteRecords => DeleteRecordsResponse,
            CreatePartitions => CreatePartitionsResponse,
            OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
            AlterConfigs => AlterConfigsResponse,
            IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
            DescribeCluster => DescribeClusterResponse,
            ElectLeaders => ElectLeadersResponse,
            AddPartitionsToTxn => AddPartitionsToTxnResponse,
            AddOffsetsToTxn => AddOffsetsToTxnResponse,
            EndTxn => EndTxnResponse,
            TxnOffsetCommit => TxnOffsetCommitResponse,
            DescribeTransactions => DescribeTransactionsResponse,
            ListTransactions => ListTransactionsResponse,
            DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
            AlterUserScramCredentials => AlterUserScramCredentialsResponse,
            DescribeClientQuotas => DescribeClientQuotasResponse,
            AlterClientQuotas => AlterClientQuotasResponse,
            DescribeAcls => DescribeAclsResponse,
            CreateAcls => CreateAclsResponse,
            DeleteAcls => DeleteAclsResponse,
            Produce => ProduceResponse,
            ApiVersions => ApiVersionsResponse,
        );
        // A newly served API must be added above (or to `exempt`).
        for &(key, _, _) in super::super::SUPPORTED {
            assert!(
                exempt(key) || checked.contains(&key),
                "{key:?} is not checked"
            );
        }
    }
}
