//! Fetch: read each partition on its owning shard (with a fetch session, every partition of
//! the session: see `fetch_session`); when the
//! answer is smaller than `min_bytes`, park on the owners until one of the partitions grows
//! or `max_wait_ms` passes (long poll), then read again.
//!
//! Records stay in the segment files: each owner shard answers with file ranges (whole
//! batches, see `PartitionLog::read_ranges`), also across the mesh, and the response is a
//! frame of encoded bytes with those ranges between them, which the connection's writer
//! sends from the page cache (see `transport`). `fetch.path=copy` reads the records into
//! memory and copies them into the frame instead, as before, to measure the difference.

use std::collections::HashSet;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use wire::generated::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use wire::generated::{FetchRequest, FetchResponse};
use wire::primitives::{EncodeError, InlineRecords, RecordsWriter, Uuid};
use wire::ErrorCode;

use super::by_shard::ByShard;
use super::{encode_response, fetch_session, RequestContext, Response};
use crate::forward::{self, FetchPart, FetchResult, WaitPart, Waited};
use crate::metadata::records::TopicId;
use crate::shard::Shard;
use crate::transport::{Chunk, Frame, Records};

/// Longest a fetch is parked, whatever `max_wait_ms` asks (up to 24.8 days): answering
/// earlier with fewer than `min_bytes` is allowed, and clients fetch again. Bounds how long a
/// request holds its partitions even when nothing cancels it; a closed connection cancels it
/// at once (see `connection`).
const MAX_WAIT_CAP_MS: u64 = 30_000;

/// A partition of the request, resolved against the image.
struct Wanted {
    /// Owner shard and topic id, or the error to report.
    target: Result<(usize, TopicId), ErrorCode>,
    partition: i32,
    offset: i64,
    /// The request's `partition_max_bytes` for this partition.
    max_bytes: usize,
    /// A follower's fetch: its broker id and the epoch of its last batch.
    replica: Option<forward::ReplicaFetch>,
    /// The request's `isolation_level` is READ_COMMITTED (1).
    read_committed: bool,
}

fn failed(code: ErrorCode) -> FetchResult {
    FetchResult {
        error_code: code.code(),
        high_watermark: -1,
        log_start_offset: -1,
        last_stable_offset: -1,
        aborted: None,
        records: Default::default(),
        diverging: None,
    }
}

/// One read of a wave: partition `index` of `wanted`, at most `max_bytes`, or at least one
/// whole batch when `min_one`.
struct Read {
    index: usize,
    max_bytes: usize,
    min_one: bool,
}

/// Reads partitions on their owners, one call per owner shard carrying all of that shard's
/// reads; one result per read, in order.
async fn read_many(shard: &Rc<Shard>, wanted: &[Wanted], reads: &[Read]) -> Vec<FetchResult> {
    let mut results: Vec<Option<FetchResult>> = Vec::with_capacity(reads.len());
    let mut by_shard = ByShard::new(shard.shard_count());
    for (slot, read) in reads.iter().enumerate() {
        let want = &wanted[read.index];
        match want.target {
            Err(code) => results.push(Some(failed(code))),
            Ok((target, topic_id)) => {
                results.push(None);
                let part = FetchPart {
                    topic_id,
                    partition: want.partition,
                    offset: want.offset,
                    max_bytes: read.max_bytes,
                    min_one: read.min_one,
                    replica: want.replica,
                    read_committed: want.read_committed,
                };
                by_shard.add(target, slot, part);
            }
        }
    }
    by_shard
        .run(shard, &mut results, |parts| forward::Fetch { parts })
        .await;
    reads
        .iter()
        .zip(results)
        .map(|(read, result)| {
            let result = result.expect("every partition read is answered");
            if wanted[read.index]
                .target
                .is_ok_and(|(target, _)| target != shard.id)
            {
                let remote = &shard.stats.remote_range_bytes;
                remote.set(remote.get() + result.records.file_bytes() as u64);
            }
            result
        })
        .collect()
}

/// Reads one partition on its owner: at most `max_bytes`, or at least one whole batch when
/// `min_one`.
async fn read_one(
    shard: &Rc<Shard>,
    wanted: &[Wanted],
    index: usize,
    max_bytes: usize,
    min_one: bool,
) -> FetchResult {
    let read = Read {
        index,
        max_bytes,
        min_one,
    };
    let mut results = read_many(shard, wanted, &[read]).await;
    results.pop().expect("one result per read")
}

/// Whether a read that came back empty left data behind because its first batch was larger
/// than what it was allowed (a partition past its high watermark has nothing to give).
fn held_back(want: &Wanted, result: &FetchResult) -> bool {
    let readable_end = if want.read_committed {
        result.last_stable_offset
    } else {
        result.high_watermark
    };
    result.error_code == 0 && result.records.is_empty() && want.offset < readable_end
}

/// Reads every partition in request order within the response budget, as Kafka does: the
/// records of all partitions together stay within `budget` bytes and each partition's within
/// its `partition_max_bytes`, except that the first batch of the first non-empty partition is
/// returned whole even when larger (KIP-74), so a consumer always makes progress.
///
/// Partitions are read concurrently in waves: a wave takes partitions in order while their
/// limits fit in what is left of the budget, so the bytes read at once never exceed the
/// budget plus one batch, however many partitions the request names.
async fn read_all(shard: &Rc<Shard>, wanted: &[Wanted], budget: usize) -> Vec<FetchResult> {
    let mut results: Vec<FetchResult> = Vec::with_capacity(wanted.len());
    let mut remaining = budget;
    let mut any_returned = false;
    while results.len() < wanted.len() {
        let start = results.len();
        let mut allotted = 0usize;
        let mut wave = Vec::new();
        for (index, want) in wanted.iter().enumerate().skip(start) {
            let limit = want.max_bytes.min(remaining - allotted);
            let min_one = index == start && !any_returned;
            wave.push(Read {
                index,
                max_bytes: limit,
                min_one,
            });
            allotted += limit;
            // Once the budget is spoken for, later partitions wait for the next wave, unless
            // nothing is left at all: then they are all read at once for their offsets only.
            if remaining > 0 && allotted >= remaining {
                break;
            }
        }
        let wave_results = read_many(shard, wanted, &wave).await;
        for (offset_in_wave, mut result) in wave_results.into_iter().enumerate() {
            let want = &wanted[start + offset_in_wave];
            if !any_returned && offset_in_wave > 0 && held_back(want, &result) {
                // Its batch was too large while it was not yet known to be the first
                // non-empty partition; it is, so it may return that batch whole.
                let limit = want.max_bytes.min(remaining);
                result = read_one(shard, wanted, start + offset_in_wave, limit, true).await;
            }
            if any_returned && result.records.len() > remaining {
                result = match result.records.chunks() {
                    [Chunk::Bytes(bytes)] => FetchResult {
                        records: trim_to_whole_batches(bytes, remaining).into(),
                        ..result
                    },
                    // File ranges end at batch boundaries the owner found; a shorter read
                    // finds the boundary within what is left (this partition cannot be the
                    // first to return records, so no batch is returned whole beyond it).
                    _ => {
                        let limit = want.max_bytes.min(remaining);
                        read_one(shard, wanted, start + offset_in_wave, limit, false).await
                    }
                };
            }
            if !result.records.is_empty() {
                any_returned = true;
                remaining = remaining.saturating_sub(result.records.len());
            }
            results.push(result);
        }
    }
    results
}

/// The longest prefix of `records` made of whole batches and at most `limit` bytes.
fn trim_to_whole_batches(records: &bytes::Bytes, limit: usize) -> bytes::Bytes {
    let mut end = 0usize;
    while let Some(length) = records.get(end + 8..end + 12) {
        let batch = wire::record_batch::LOG_OVERHEAD
            + i32::from_be_bytes(length.try_into().expect("4 bytes")).max(0) as usize;
        if end + batch > limit || end + batch > records.len() {
            break;
        }
        end += batch;
    }
    records.slice(..end)
}

/// Fetch at a version we do not serve (v0-3, message formats 0 and 1): every partition gets
/// UNSUPPORTED_VERSION.
pub fn unsupported_version(request: FetchRequest, ctx: &RequestContext) -> Response {
    let response = build_response(
        &request,
        ctx,
        std::iter::repeat_with(|| failed(ErrorCode::UnsupportedVersion)),
    );
    encode_response(ctx, ctx.api_version, &response)
}

/// Why a partition of a fetch (of a known partition whose leader epoch is `leader_epoch`) is
/// refused before any read, in Kafka's order (`Partition.fetchRecords`): the leader epoch
/// fencing of KIP-320 (`current_leader_epoch`, v9+, -1 when unknown: FENCED_LEADER_EPOCH
/// below the partition's, UNKNOWN_LEADER_EPOCH above), then, for a fetch from a replica id
/// that is no replica of the partition (`followerReplicaOrThrow`), UNKNOWN_LEADER_EPOCH when
/// the request gave its leader epoch, NOT_LEADER_OR_FOLLOWER when not.
fn partition_refusal(
    current_leader_epoch: i32,
    leader_epoch: i32,
    unknown_replica: bool,
) -> Option<ErrorCode> {
    if current_leader_epoch >= 0 && current_leader_epoch < leader_epoch {
        Some(ErrorCode::FencedLeaderEpoch)
    } else if current_leader_epoch > leader_epoch || (unknown_replica && current_leader_epoch >= 0)
    {
        Some(ErrorCode::UnknownLeaderEpoch)
    } else if unknown_replica {
        Some(ErrorCode::NotLeaderOrFollower)
    } else {
        None
    }
}

/// The response to `request`, taking one result per partition in request order.
fn build_response(
    request: &FetchRequest,
    ctx: &RequestContext,
    mut results: impl Iterator<Item = FetchResult>,
) -> FetchResponse {
    let by_id = ctx.api_version >= 13;
    let read_committed = request.isolation_level == 1;
    let responses = request
        .topics
        .iter()
        .map(|topic| FetchableTopicResponse {
            topic: topic.topic.clone(),
            topic_id: if by_id { topic.topic_id } else { Uuid::ZERO },
            partitions: topic
                .partitions
                .iter()
                .map(|partition| {
                    let result = results.next().expect("one result per partition");
                    PartitionData {
                        partition_index: partition.partition,
                        error_code: result.error_code,
                        high_watermark: result.high_watermark,
                        last_stable_offset: result.last_stable_offset,
                        log_start_offset: result.log_start_offset,
                        // A partition refused before any read (unknown topic or partition,
                        // not authorized) has an empty list (Kafka's generated default, from
                        // `FetchResponse.partitionResponse`); one refused by the read (its
                        // `LogReadResult` has none) null; one read null unless
                        // read_committed.
                        aborted_transactions: if refused_before_read(result.error_code) {
                            Some(Vec::new())
                        } else if read_committed && result.error_code == 0 {
                            Some(
                                (result.aborted.iter().flatten())
                                    .map(|&(producer_id, first_offset)| AbortedTransaction {
                                        producer_id,
                                        first_offset,
                                        ..Default::default()
                                    })
                                    .collect(),
                            )
                        } else {
                            None
                        },
                        preferred_read_replica: -1,
                        diverging_epoch: match result.diverging {
                            Some((epoch, end_offset)) => EpochEndOffset {
                                epoch,
                                end_offset,
                                ..Default::default()
                            },
                            None => EpochEndOffset::default(),
                        },
                        // Only bytes here: file ranges were taken out (`detach_files`).
                        records: Some(result.records.to_bytes().unwrap_or_default()),
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    FetchResponse {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        responses,
        ..Default::default()
    }
}

/// Whether a partition with this error code was refused by KafkaApis before the replica
/// manager read (`FetchResponse.partitionResponse`: its `aborted_transactions` is `[]`).
fn refused_before_read(error_code: i16) -> bool {
    error_code == ErrorCode::UnknownTopicOrPartition.code()
        || error_code == ErrorCode::UnknownTopicId.code()
        || error_code == ErrorCode::TopicAuthorizationFailed.code()
}

/// `request` with every partition listed once, as Kafka's `FetchRequest.fetchData` map: at
/// the place of its first listing, with the fields of its last (a later `put` replaces the
/// value, not the place). Topics left with no partition are dropped, and neighbouring topic
/// entries of one topic merged (Kafka's response groups runs of one topic's partitions).
fn dedupe(
    mut request: FetchRequest,
    by_id: bool,
    seen: &mut HashSet<(String, Uuid, i32)>,
) -> FetchRequest {
    let key = |topic: &wire::generated::fetch_request::FetchTopic| {
        if by_id {
            (String::new(), topic.topic_id)
        } else {
            (topic.topic.clone(), Uuid::ZERO)
        }
    };
    // The common request names each partition once, in one entry per topic: nothing to do,
    // and nothing allocated beyond `seen` (a sorted walk would cost more than the set).
    let listed: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    if request.topics.len() <= 1 && listed <= 1 {
        return request; // one partition of one topic cannot repeat: no set
    }
    let adjacent_repeat = (request.topics.windows(2)).any(|pair| key(&pair[0]) == key(&pair[1]));
    if !adjacent_repeat {
        let mut repeats = false;
        seen.reserve(listed);
        for topic in &request.topics {
            let (name, id) = key(topic);
            for partition in &topic.partitions {
                repeats |= !seen.insert((name.clone(), id, partition.partition));
            }
        }
        if !repeats {
            return request;
        }
        seen.clear();
    }
    // The place of each partition's first listing, and its last listing's fields.
    let mut place: std::collections::HashMap<(String, Uuid, i32), (usize, usize)> =
        std::collections::HashMap::new();
    let mut last = std::collections::HashMap::new();
    for (t, topic) in request.topics.iter().enumerate() {
        let (name, id) = key(topic);
        for (p, partition) in topic.partitions.iter().enumerate() {
            let k = (name.clone(), id, partition.partition);
            place.entry(k.clone()).or_insert((t, p));
            last.insert(k, partition.clone());
        }
    }
    for (t, topic) in request.topics.iter_mut().enumerate() {
        let (name, id) = key(topic);
        let mut p = 0;
        topic.partitions.retain_mut(|partition| {
            let k = (name.clone(), id, partition.partition);
            let first = place.get(&k) == Some(&(t, p));
            p += 1;
            if first && seen.insert(k.clone()) {
                if let Some(latest) = last.remove(&k) {
                    *partition = latest;
                }
                true
            } else {
                false
            }
        });
    }
    request.topics.retain(|topic| !topic.partitions.is_empty());
    let mut merged: Vec<wire::generated::fetch_request::FetchTopic> = Vec::new();
    for topic in request.topics.drain(..) {
        match merged.last_mut() {
            Some(previous) if key(previous) == key(&topic) => {
                previous.partitions.extend(topic.partitions)
            }
            _ => merged.push(topic),
        }
    }
    request.topics = merged;
    request
}

pub async fn handle(shard: Rc<Shard>, request: FetchRequest, mut ctx: RequestContext) -> Response {
    let image = shard.image();
    let by_id = ctx.api_version >= 13;
    let unknown_topic = if by_id {
        ErrorCode::UnknownTopicId
    } else {
        ErrorCode::UnknownTopicOrPartition
    };
    // A follower names itself (the replica id, in ReplicaState from v15, KIP-903); only a
    // cluster has followers, so a single node serves such a fetch as a consumer's.
    let (replica_id, replica_epoch) = if ctx.api_version >= 15 {
        (
            request.replica_state.replica_id,
            request.replica_state.replica_epoch,
        )
    } else {
        (request.replica_id, -1)
    };
    let follower = (replica_id >= 0 && shard.cluster.is_some()).then_some(replica_id);
    // A single node has no follower: a fetch naming a broker (replica id >= 0) comes from no
    // replica of any partition, which Kafka refuses per partition (`partition_refusal`).
    let unknown_replica = replica_id >= 0 && shard.cluster.is_none();
    // A consumer's fetch waits for the debt its earlier responses left under its
    // consumer_byte_rate (this response's bytes are charged once it is built).
    let quota = crate::quota::QuotaKind::Fetch;
    if follower.is_none() {
        ctx.charge_quota(&shard, quota, 0.0);
    } else if let Some(quota) = &ctx.request_quota {
        // A follower's fetch is the cluster's work, not a client's (Kafka: CLUSTER_ACTION).
        quota.exempt.set(true);
    }
    let budget = request
        .max_bytes
        .clamp(0, shard.config.fetch_max_bytes as i32) as usize;
    let mut wanted = Vec::new();
    // A partition listed more than once is read and answered once (the first listing), as
    // Kafka's fetch map keeps one entry per partition: otherwise every copy would get its
    // own read and one small request could ask for the log many times over.
    let mut seen = HashSet::new();
    let mut request = dedupe(request, by_id, &mut seen);
    // An incremental fetch names only what changed: from here on `request` names every
    // partition of its session.
    let session = fetch_session::open(&shard, &mut request, ctx.api_version).await;
    if let fetch_session::Context::Error(code) = session {
        let response = FetchResponse {
            error_code: code.code(),
            ..Default::default()
        };
        return encode_response(&ctx, ctx.api_version, &response);
    }
    // Kafka: a follower's fetch (replica id >= 0) needs CLUSTER_ACTION, or every partition is
    // refused; a consumer's needs READ on each topic (decided once per topic).
    let follower_allowed =
        replica_id < 0 || shard.authorize_cluster(&ctx, acl::AclOperation::ClusterAction);
    for topic in &request.topics {
        let topic_image = if by_id {
            image.topic_by_id(&topic.topic_id.0)
        } else {
            image.topic(&topic.topic)
        };
        let authorized = if replica_id >= 0 {
            follower_allowed
        } else {
            let name = topic_image.map_or(topic.topic.as_str(), |t| t.name.as_str());
            // An unknown topic id answers UNKNOWN_TOPIC_ID whatever the ACLs say.
            (by_id && topic_image.is_none())
                || shard.authorize(
                    &ctx,
                    acl::AclOperation::Read,
                    acl::ResourceType::Topic,
                    name,
                )
        };
        for partition in &topic.partitions {
            let target = match topic_image {
                _ if !authorized => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(unknown_topic),
                Some(topic_image) => match topic_image.partition(partition.partition) {
                    None => Err(ErrorCode::UnknownTopicOrPartition),
                    Some(owner) => match partition_refusal(
                        partition.current_leader_epoch,
                        owner.leader_epoch,
                        unknown_replica,
                    ) {
                        Some(code) => Err(code),
                        None => Ok((shard.owner(owner), topic_image.topic_id)),
                    },
                },
            };
            wanted.push(Wanted {
                target,
                partition: partition.partition,
                offset: partition.fetch_offset,
                max_bytes: partition.partition_max_bytes.max(0) as usize,
                replica: follower.map(|broker| forward::ReplicaFetch {
                    broker,
                    broker_epoch: replica_epoch,
                    last_fetched_epoch: partition.last_fetched_epoch,
                }),
                read_committed: follower.is_none() && request.isolation_level == 1,
            });
        }
    }
    (wanted.iter().filter_map(|want| want.target.ok()))
        .for_each(|(owner, _)| ctx.tally.note(owner));
    let mut results = read_all(&shard, &wanted, budget).await;
    // Kafka's DelayedFetch: answer once the partitions together hold `min_bytes` (a wake-up
    // that brings less parks again for what is left of the wait), on an error, or at
    // `max_wait_ms`.
    let wait_ms = (request.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP_MS);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
    loop {
        let bytes: usize = results.iter().map(|result| result.records.len()).sum();
        // A follower told to truncate is answered at once, as an error is.
        let any_error = results
            .iter()
            .any(|result| result.error_code != 0 || result.diverging.is_some());
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if bytes >= request.min_bytes.max(1) as usize
            || left.is_zero()
            || any_error
            || wanted.is_empty()
        {
            break;
        }
        let left_ms = (left.as_millis() as u64).max(1);
        // One long poll per owner shard, on all of its partitions of the request.
        let mut parts_by_target: Vec<Vec<WaitPart>> = vec![Vec::new(); shard.shard_count()];
        for (want, result) in wanted.iter().zip(&results) {
            if let Ok((target, topic_id)) = want.target {
                // A partition that already gave what it has waits for more than that.
                parts_by_target[target].push(WaitPart {
                    topic_id,
                    partition: want.partition,
                    offset: if want.replica.is_some() {
                        want.offset
                    } else if want.read_committed {
                        want.offset.max(result.last_stable_offset)
                    } else {
                        want.offset.max(result.high_watermark)
                    },
                    replica: want.replica.is_some(),
                    read_committed: want.read_committed,
                });
            }
        }
        let waits: Vec<LocalBoxFuture<'_, Waited>> = parts_by_target
            .into_iter()
            .enumerate()
            .filter(|(_, parts)| !parts.is_empty())
            .map(|(target, parts)| {
                let wait = forward::WaitForData {
                    parts,
                    wait_ms: left_ms,
                };
                shard.call(target, wait).boxed_local()
            })
            .collect();
        if waits.is_empty() {
            break;
        }
        let (waited, _, _) = futures::future::select_all(waits).await;
        if waited == Waited::Refused {
            // The owner holds all the long polls it may: answer with what there is.
            break;
        }
        results = read_all(&shard, &wanted, budget).await;
    }
    let outcomes: Vec<fetch_session::Outcome> = results
        .iter()
        .map(|result| fetch_session::Outcome {
            error_code: result.error_code,
            high_watermark: result.high_watermark,
            log_start_offset: result.log_start_offset,
            has_records: !result.records.is_empty(),
        })
        .collect();
    let answer = fetch_session::complete(&shard, &session, &request, ctx.api_version, &outcomes);
    let mut request = request;
    let results = fetch_session::retain(&mut request, results, &answer.send);
    // The bytes sent count against the client's consumer_byte_rate (its next fetch waits
    // for the debt, see `quota`).
    let sent: usize = results.iter().map(|r| r.records.len()).sum();
    if sent > 0 && follower.is_none() {
        // Charged to the clock only: this response's throttle was decided at its start.
        let now = std::time::Instant::now();
        shard.with_image(|image| {
            let (principal, client_id) = (&ctx.principal, &ctx.client_id);
            crate::quota::charge(&image.quotas, principal, client_id, quota, sent as f64, now)
        });
    }
    let (results, files) = detach_files(results);
    let mut response = build_response(&request, &ctx, results.into_iter());
    response.throttle_time_ms = ctx.throttle_ms;
    response.session_id = answer.session_id;
    response.error_code = answer.error_code;
    if (shard.cluster.is_some() && ctx.api_version >= KIP_951_FETCH_VERSION)
        || ctx.api_version >= FETCH_NODE_ENDPOINTS_VERSION
    {
        point_to_leaders(&shard, &ctx, &mut response);
    }
    encode_with_files(&ctx, &response, files)
}

/// The first Fetch version whose partitions name the current leader (KIP-951); its node
/// endpoints come with v16.
const KIP_951_FETCH_VERSION: i16 = 12;
const FETCH_NODE_ENDPOINTS_VERSION: i16 = 16;

/// KIP-951: a partition refused with NOT_LEADER_OR_FOLLOWER (from v16 also
/// FENCED_LEADER_EPOCH, as Kafka 4) names its current leader and epoch (and, from v16, the
/// response carries the leader's endpoint), so a consumer moves at once instead of
/// refreshing its metadata first. A single node is the leader of all (its own answers at v16).
fn point_to_leaders(shard: &Rc<Shard>, ctx: &RequestContext, response: &mut FetchResponse) {
    use super::cluster_view::endpoints_of;
    let current_leader = |topic: Option<&crate::metadata::image::TopicImage>, partition: i32| {
        if shard.cluster.is_none() {
            let epoch = topic?.partition(partition)?.leader_epoch;
            return Some((shard.config.node_id, epoch));
        }
        super::cluster_view::current_leader(topic, partition)
    };
    let image = shard.image();
    let not_leader = ErrorCode::NotLeaderOrFollower.code();
    let fenced = (ctx.api_version >= FETCH_NODE_ENDPOINTS_VERSION)
        .then_some(ErrorCode::FencedLeaderEpoch.code());
    let mut leaders = Vec::new();
    for topic in &mut response.responses {
        let known = if ctx.api_version >= 13 {
            image.topic_by_id(&topic.topic_id.0)
        } else {
            image.topic(&topic.topic)
        };
        let known = known.map(|t| &**t);
        for partition in &mut topic.partitions {
            if partition.error_code != not_leader && Some(partition.error_code) != fenced {
                continue;
            }
            if let Some((leader, epoch)) = current_leader(known, partition.partition_index) {
                partition.current_leader.leader_id = leader;
                partition.current_leader.leader_epoch = epoch;
                leaders.push(leader);
            }
        }
    }
    // A single node is the leader it would name: Kafka 4.4 sends no endpoint then.
    if ctx.api_version < FETCH_NODE_ENDPOINTS_VERSION || shard.cluster.is_none() {
        return;
    }
    response.node_endpoints = endpoints_of(shard, &ctx.listener, &leaders)
        .into_iter()
        .map(|b| wire::generated::fetch_response::NodeEndpoint {
            node_id: b.node_id,
            host: b.host,
            port: b.port,
            rack: b.rack,
            ..Default::default()
        })
        .collect();
}

/// The results with every file-backed `records` taken out (an empty stand-in left), and
/// those records with their partition's place in the response (`encode_with_files`).
fn detach_files(results: Vec<FetchResult>) -> (Vec<FetchResult>, FileRecords) {
    let mut files = Vec::new();
    let results = results
        .into_iter()
        .enumerate()
        .map(|(place, mut result)| {
            if result.records.has_file() {
                files.push((place, std::mem::take(&mut result.records)));
            }
            result
        })
        .collect();
    let files = FileRecords {
        files,
        next: 0,
        place: 0,
        chunks: Vec::new(),
    };
    (results, files)
}

/// File-backed records taken out of a response, and the frame's chunks as they are laid out
/// while it encodes: the `RecordsWriter` of a Fetch response.
struct FileRecords {
    /// (place among the response's partitions, records), in response order.
    files: Vec<(usize, Records)>,
    /// The first of `files` not written yet.
    next: usize,
    /// Records fields seen so far: one per partition, in encoding (= response) order.
    place: usize,
    chunks: Vec<Chunk>,
}

impl FileRecords {
    /// Bytes the records add to the frame beyond their empty stand-ins.
    fn extra_len(&self, flexible: bool) -> usize {
        use wire::primitives::bytes_len_len;
        (self.files.iter())
            .map(|(_, records)| {
                bytes_len_len(records.len(), flexible) - bytes_len_len(0, flexible) + records.len()
            })
            .sum()
    }
}

impl RecordsWriter for FileRecords {
    /// A partition with file-backed records gets its length here, then the buffer written so
    /// far becomes a chunk and the file ranges follow it; any other partition's records are
    /// written in place.
    fn write(
        &mut self,
        buf: &mut bytes::BytesMut,
        records: Option<&bytes::Bytes>,
        compact: bool,
    ) -> Result<(), EncodeError> {
        let place = self.place;
        self.place += 1;
        match self.files.get_mut(self.next) {
            Some((at, file_records)) if *at == place => {
                let file_records = std::mem::take(file_records);
                self.next += 1;
                wire::primitives::write_bytes_len(buf, file_records.len(), compact)?;
                self.chunks.push(Chunk::Bytes(buf.split().freeze()));
                self.chunks.extend(file_records.into_chunks());
                Ok(())
            }
            _ => InlineRecords.write(buf, records, compact),
        }
    }
}

/// Encodes `response` (whose file-backed records were taken out by `detach_files`) in one
/// pass: the header bytes up to each such partition's records, its file ranges, and so on;
/// the frame's size counts the ranges. The copying path's frame, byte for byte.
fn encode_with_files(
    ctx: &RequestContext,
    response: &FetchResponse,
    mut files: FileRecords,
) -> Response {
    if files.files.is_empty() {
        return encode_response(ctx, ctx.api_version, response);
    }
    let version = ctx.api_version;
    let extra = files.extra_len(version >= 12);
    let tail = super::encode_frame(ctx, version, response, extra, |buf| {
        response.encode_with(buf, version, &mut files)
    })?;
    if files.next != files.files.len() {
        return Err("fetch response: file-backed records left unwritten".into());
    }
    let mut chunks = files.chunks;
    // Before v12 the last partition's records end the frame.
    if !tail.is_empty() {
        chunks.push(Chunk::Bytes(tail.freeze()));
    }
    Ok(Some(Frame::new(chunks)))
}

#[cfg(test)]
#[path = "fetch_frame_tests.rs"]
mod frame_tests;

#[cfg(test)]
mod validation_tests {
    use super::*;
    use wire::generated::fetch_request::{FetchPartition, FetchTopic};

    #[test]
    fn a_fetch_from_no_replica_is_refused_after_the_epoch_checks() {
        // A consumer (no replica id): only the leader epoch fencing.
        assert_eq!(partition_refusal(-1, 3, false), None);
        assert_eq!(partition_refusal(3, 3, false), None);
        assert_eq!(
            partition_refusal(2, 3, false),
            Some(ErrorCode::FencedLeaderEpoch)
        );
        assert_eq!(
            partition_refusal(4, 3, false),
            Some(ErrorCode::UnknownLeaderEpoch)
        );
        // A replica id that is no replica of the partition: Kafka's followerReplicaOrThrow.
        assert_eq!(
            partition_refusal(3, 3, true),
            Some(ErrorCode::UnknownLeaderEpoch)
        );
        assert_eq!(
            partition_refusal(-1, 3, true),
            Some(ErrorCode::NotLeaderOrFollower)
        );
        assert_eq!(
            partition_refusal(2, 3, true),
            Some(ErrorCode::FencedLeaderEpoch)
        );
    }

    #[test]
    fn aborted_transactions_are_empty_only_for_partitions_refused_before_the_read() {
        assert!(refused_before_read(
            ErrorCode::UnknownTopicOrPartition.code()
        ));
        assert!(refused_before_read(ErrorCode::UnknownTopicId.code()));
        assert!(refused_before_read(
            ErrorCode::TopicAuthorizationFailed.code()
        ));
        assert!(!refused_before_read(ErrorCode::UnknownLeaderEpoch.code()));
        assert!(!refused_before_read(0));
    }

    #[test]
    fn a_partition_listed_twice_keeps_its_first_place_and_its_last_fields() {
        let part = |partition, fetch_offset| FetchPartition {
            partition,
            fetch_offset,
            ..Default::default()
        };
        let topic = |name: &str, partitions| FetchTopic {
            topic: name.into(),
            partitions,
            ..Default::default()
        };
        let request = FetchRequest {
            topics: vec![
                topic("a", vec![part(2, 1), part(2, 5)]),
                topic("a", vec![part(1, 6), part(0, 7)]),
                topic("b", vec![part(0, 1)]),
                topic("a", vec![part(2, 9)]),
            ],
            ..Default::default()
        };
        let deduped = dedupe(request, false, &mut HashSet::new());
        let got: Vec<(String, Vec<(i32, i64)>)> = deduped
            .topics
            .iter()
            .map(|t| {
                let parts = t.partitions.iter();
                (
                    t.topic.clone(),
                    parts.map(|p| (p.partition, p.fetch_offset)).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".to_string(), vec![(2, 9), (1, 6), (0, 7)]),
                ("b".to_string(), vec![(0, 1)]),
            ]
        );
    }
}
